/* Shared file pointers of many files: three files open at once, each rank writing
 * records through MPI_File_write_shared to each, keep three pointers apart (each ends at
 * the group's count of records, each file holds every rank's records once); 600 files
 * opened and closed one after the other (their words reused) each start with the pointer
 * at 0 (at the file's end with MPI_MODE_APPEND), whatever the word held for the file
 * before; 530 files held open at once keep 530 pointers apart (a page holds 512). Every
 * file's collective calls, 32 and more on one file, give the same bytes on every rank (a
 * file's communicator sets its shared-memory segment up only after 32 collectives).
 * Argument: DIR, where the files go. 1 or more ranks. */
#include <stdio.h>
#include <string.h>
#include "check.h"

#define PATHLEN 4096
#define FILES 3
#define ROUNDS 600
#define HELD 530

static int rank, size;

/* The shared pointer of `fh` must be at `want` etypes. */
static void want_shared(MPI_File fh, MPI_Offset want, const char *what) {
  MPI_Offset at = -1;
  OK(MPI_File_get_position_shared(fh, &at));
  CHECK(at == want, "%s: shared pointer at %lld, want %lld", what, (long long)at,
        (long long)want);
}

int main(int argc, char **argv) {
  OK(MPI_Init(&argc, &argv));
  OK(MPI_Comm_rank(MPI_COMM_WORLD, &rank));
  OK(MPI_Comm_size(MPI_COMM_WORLD, &size));
  CHECK(argc == 2, "usage: io_pointers DIR");
  char path[FILES][PATHLEN];
  MPI_File fh[FILES];
  for (int f = 0; f < FILES; f++) {
    snprintf(path[f], PATHLEN, "%s/io_pointers_%d", argv[1], f);
    OK(MPI_File_open(MPI_COMM_WORLD, path[f], MPI_MODE_CREATE | MPI_MODE_RDWR,
                     MPI_INFO_NULL, &fh[f]));
  }
  /* Rank r writes r + 1 records of its rank (f + 1 times over) into file f. */
  for (int f = 0; f < FILES; f++)
    for (int k = 0; k < (rank + 1) * (f + 1); k++) {
      int rec = rank;
      OK(MPI_File_write_shared(fh[f], &rec, 1, MPI_INT, MPI_STATUS_IGNORE));
    }
  int tot = size * (size + 1) / 2;
  for (int f = 0; f < FILES; f++) {
    OK(MPI_File_sync(fh[f]));
    OK(MPI_Barrier(MPI_COMM_WORLD));
    OK(MPI_File_sync(fh[f]));
    /* In etypes of the default view: bytes. */
    want_shared(fh[f], (MPI_Offset)tot * (f + 1) * (MPI_Offset)sizeof(int), "after every rank's records");
    /* Every rank's records, each as many times as it wrote them. */
    int n = tot * (f + 1), got[4096] = {0}, seen[64] = {0};
    CHECK(n <= 4096 && size <= 64, "too many ranks");
    OK(MPI_File_read_at_all(fh[f], 0, got, n, MPI_INT, MPI_STATUS_IGNORE));
    for (int i = 0; i < n; i++) {
      CHECK(got[i] >= 0 && got[i] < size, "file %d record %d is %d", f, i, got[i]);
      seen[got[i]]++;
    }
    for (int r = 0; r < size; r++)
      CHECK(seen[r] == (r + 1) * (f + 1), "file %d holds %d records of rank %d, want %d", f,
            seen[r], r, (r + 1) * (f + 1));
  }
  for (int f = 0; f < FILES; f++) OK(MPI_File_close(&fh[f]));
  /* One file after the other: each starts at 0 (APPEND: at the end), moves, closes. */
  char one[PATHLEN];
  snprintf(one, sizeof one, "%s/io_pointers_seq", argv[1]);
  for (int i = 0; i < ROUNDS; i++) {
    int append = i % 7 == 3;
    MPI_File f;
    OK(MPI_File_open(MPI_COMM_WORLD, one,
                     MPI_MODE_CREATE | MPI_MODE_RDWR | (append ? MPI_MODE_APPEND : 0),
                     MPI_INFO_NULL, &f));
    MPI_Offset size_now = 0;
    OK(MPI_File_get_size(f, &size_now));
    char what[64];
    snprintf(what, sizeof what, "file %d at its open", i);
    want_shared(f, append ? size_now : 0, what);
    OK(MPI_File_seek_shared(f, 5 + i, MPI_SEEK_SET));
    OK(MPI_File_close(&f));
  }
  /* HELD files open at once (past one page of 512 pointer words: a second page, words
   * at offsets past the first), each pointer set to its own place and read back. */
  static MPI_File held[HELD];
  for (int i = 0; i < HELD; i++) {
    OK(MPI_File_open(MPI_COMM_WORLD, one, MPI_MODE_RDWR, MPI_INFO_NULL, &held[i]));
    OK(MPI_File_seek_shared(held[i], 3 * i + 1, MPI_SEEK_SET));
  }
  for (int i = 0; i < HELD; i++) {
    char what[64];
    snprintf(what, sizeof what, "held file %d", i);
    want_shared(held[i], 3 * i + 1, what);
  }
  for (int i = 0; i < HELD; i++) OK(MPI_File_close(&held[i]));
  /* Many collectives on one file (past the 32 after which its segment is set up). */
  MPI_File f;
  OK(MPI_File_open(MPI_COMM_WORLD, one, MPI_MODE_RDWR, MPI_INFO_NULL, &f));
  for (int i = 0; i < 50; i++) {
    int mine = i * 100 + rank, back = -1;
    OK(MPI_File_write_at_all(f, (MPI_Offset)rank * 4, &mine, 1, MPI_INT, MPI_STATUS_IGNORE));
    OK(MPI_File_read_at_all(f, (MPI_Offset)rank * 4, &back, 1, MPI_INT, MPI_STATUS_IGNORE));
    CHECK(back == mine, "round %d: read %d back, wrote %d", i, back, mine);
  }
  OK(MPI_File_close(&f));
  OK(MPI_Barrier(MPI_COMM_WORLD));
  if (rank == 0) printf("ok io_pointers %d ranks\n", size);
  OK(MPI_Finalize());
  return 0;
}
