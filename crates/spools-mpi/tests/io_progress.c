/* Non-blocking collective file accesses progress like any other non-blocking collective:
 * rank 0 makes each access (iwrite_all, iwrite_at_all, iread_all, iread_at_all, and
 * their _c forms), tests its request in a loop until it completes, and only then sends
 * every other rank a message; the other ranks make the same access, then wait for that
 * message in MPI_Recv, and only then wait for their request. Their part of the access
 * must progress while they sit in MPI_Recv: where it moves only inside the file's own
 * calls, rank 0's tests never complete and the job hangs (the test's timeout). Every
 * block is checked, and the individual pointer after iwrite_all / iread_all. Then the
 * same pattern with accesses that fail: the file opened read-only or write-only (on
 * every rank: an amode must be the same everywhere), every request fails in
 * MPI_ERR_READ_ONLY or MPI_ERR_ACCESS; the last rank alone writing to /dev/full, every
 * rank's request fails in its class (MPI_ERR_NO_SPACE).
 * Argument: DIR, where the file goes. 1 or more ranks. */
#include <string.h>
#include "check.h"

#define PATHLEN 4096
#define B 1024 /* ints of a rank's block */

static int rank, size, last;

static int val(int r, int k, int i) { return (r * 10 + k) * 100000 + i + 1; }

/* Completes `rq` in the pattern above (tag `tag`); its return code. */
static int finish(MPI_Request *rq, MPI_Status *st, int tag) {
  int rc;
  if (rank == 0) {
    int done = 0;
    do rc = MPI_Test(rq, &done, st);
    while (rc == MPI_SUCCESS && !done);
    for (int r = 1; r < size; r++) OK(MPI_Send(&tag, 1, MPI_INT, r, tag, MPI_COMM_WORLD));
  } else {
    int token = -1;
    OK(MPI_Recv(&token, 1, MPI_INT, 0, tag, MPI_COMM_WORLD, MPI_STATUS_IGNORE));
    CHECK(token == tag, "token %d, want %d", token, tag);
    rc = MPI_Wait(rq, st);
  }
  CHECK(*rq == MPI_REQUEST_NULL, "tag %d: the request is not freed", tag);
  return rc;
}

static void want_count(MPI_Status *st, int want, const char *what) {
  int n = -2;
  OK(MPI_Get_count(st, MPI_INT, &n));
  CHECK(n == want, "%s: MPI_Get_count %d, want %d", what, n, want);
}

static void want_position(MPI_File fh, MPI_Offset want, const char *what) {
  MPI_Offset at = -1;
  OK(MPI_File_get_position(fh, &at));
  CHECK(at == want, "%s: position %lld, want %lld", what, (long long)at, (long long)want);
}

static void want_block(const int *got, int r, int k, const char *what) {
  for (int i = 0; i < B; i++)
    CHECK(got[i] == val(r, k, i), "%s: int %d is %d, want %d", what, i, got[i], val(r, k, i));
}

/* rc must be an error of class `want`. */
static void want_class(int rc, int want, const char *what) {
  int c = -1;
  CHECK(rc != MPI_SUCCESS, "%s: succeeded, want class %d", what, want);
  OK(MPI_Error_class(rc, &c));
  CHECK(c == want, "%s: class %d, want %d", what, c, want);
}

int main(int argc, char **argv) {
  OK(MPI_Init(&argc, &argv));
  OK(MPI_Comm_rank(MPI_COMM_WORLD, &rank));
  OK(MPI_Comm_size(MPI_COMM_WORLD, &size));
  CHECK(argc == 2, "usage: io_progress DIR");
  last = size - 1;
  const int next = (rank + 1) % size;
  char path[PATHLEN];
  snprintf(path, sizeof path, "%s/io_progress", argv[1]);
  const MPI_Offset blk = B * (MPI_Offset)sizeof(int);
  /* Region k holds every rank's block k at (k * size + r) * blk. */
#define AT(k, r) (((MPI_Offset)(k) * size + (r)) * blk)
  int a[4][B], got[B];
  for (int k = 0; k < 4; k++)
    for (int i = 0; i < B; i++) a[k][i] = val(rank, k, i);
  MPI_File fh;
  MPI_Request rq;
  MPI_Status st;
  OK(MPI_File_open(MPI_COMM_WORLD, path, MPI_MODE_CREATE | MPI_MODE_RDWR, MPI_INFO_NULL, &fh));
  OK(MPI_File_set_size(fh, 0));

  OK(MPI_File_seek(fh, AT(0, rank), MPI_SEEK_SET));
  OK(MPI_File_iwrite_all(fh, a[0], B, MPI_INT, &rq));
  OK(finish(&rq, &st, 1));
  want_count(&st, B, "iwrite_all");
  want_position(fh, AT(0, rank) + blk, "after iwrite_all");
  OK(MPI_File_iwrite_at_all(fh, AT(1, rank), a[1], B, MPI_INT, &rq));
  OK(finish(&rq, &st, 2));
  want_count(&st, B, "iwrite_at_all");
  OK(MPI_File_seek(fh, AT(2, rank), MPI_SEEK_SET));
  OK(MPI_File_iwrite_all_c(fh, a[2], B, MPI_INT, &rq));
  OK(finish(&rq, &st, 3));
  want_count(&st, B, "iwrite_all_c");
  OK(MPI_File_iwrite_at_all_c(fh, AT(3, rank), a[3], B, MPI_INT, &rq));
  OK(finish(&rq, &st, 4));
  want_count(&st, B, "iwrite_at_all_c");
  /* The writes of every rank visible to every rank (sync-barrier-sync). */
  OK(MPI_File_sync(fh));
  OK(MPI_Barrier(MPI_COMM_WORLD));
  OK(MPI_File_sync(fh));

  OK(MPI_File_seek(fh, AT(0, next), MPI_SEEK_SET));
  OK(MPI_File_iread_all(fh, got, B, MPI_INT, &rq));
  OK(finish(&rq, &st, 5));
  want_count(&st, B, "iread_all");
  want_position(fh, AT(0, next) + blk, "after iread_all");
  want_block(got, next, 0, "iread_all of the next rank's block");
  OK(MPI_File_iread_at_all(fh, AT(1, next), got, B, MPI_INT, &rq));
  OK(finish(&rq, &st, 6));
  want_count(&st, B, "iread_at_all");
  want_block(got, next, 1, "iread_at_all of the next rank's block");
  OK(MPI_File_seek(fh, AT(2, next), MPI_SEEK_SET));
  OK(MPI_File_iread_all_c(fh, got, B, MPI_INT, &rq));
  OK(finish(&rq, &st, 7));
  want_block(got, next, 2, "iread_all_c of the next rank's block");
  OK(MPI_File_iread_at_all_c(fh, AT(3, next), got, B, MPI_INT, &rq));
  OK(finish(&rq, &st, 8));
  want_block(got, next, 3, "iread_at_all_c of the next rank's block");
  OK(MPI_File_close(&fh));

  /* Accesses the amode refuses: every request fails in its class. */
  OK(MPI_File_open(MPI_COMM_WORLD, path, MPI_MODE_RDONLY, MPI_INFO_NULL, &fh));
  OK(MPI_File_iwrite_at_all(fh, AT(0, rank), a[0], B, MPI_INT, &rq));
  want_class(finish(&rq, &st, 9), MPI_ERR_READ_ONLY, "iwrite_at_all, read-only");
  OK(MPI_File_seek(fh, AT(1, rank), MPI_SEEK_SET));
  OK(MPI_File_iwrite_all(fh, a[1], B, MPI_INT, &rq));
  want_class(finish(&rq, &st, 10), MPI_ERR_READ_ONLY, "iwrite_all, read-only");
  OK(MPI_File_close(&fh));
  OK(MPI_File_open(MPI_COMM_WORLD, path, MPI_MODE_WRONLY, MPI_INFO_NULL, &fh));
  OK(MPI_File_iread_at_all(fh, AT(0, next), got, B, MPI_INT, &rq));
  want_class(finish(&rq, &st, 11), MPI_ERR_ACCESS, "iread_at_all, write-only");
  OK(MPI_File_close(&fh));
  /* The last rank alone fails: every rank's request fails in its class. */
  /* The last rank writes to /dev/full (where it can open it). */
  const char *mine = rank == last ? "/dev/full" : path;
  int rc = MPI_File_open(MPI_COMM_WORLD, mine, MPI_MODE_WRONLY, MPI_INFO_NULL, &fh);
  if (rc == MPI_SUCCESS) {
    OK(MPI_File_iwrite_at_all(fh, AT(0, rank), a[0], B, MPI_INT, &rq));
    want_class(finish(&rq, &st, 12), MPI_ERR_NO_SPACE, "iwrite_at_all, the last rank on /dev/full");
    OK(MPI_File_close(&fh));
  }
  OK(MPI_Barrier(MPI_COMM_WORLD));
  if (rank == 0) {
    OK(MPI_File_delete(path, MPI_INFO_NULL));
    printf("ok io_progress %d ranks\n", size);
  }
  OK(MPI_Finalize());
  return 0;
}
