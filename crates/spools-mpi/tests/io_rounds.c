/* Collective accesses in two phases move in rounds of at most cb_buffer_size bytes of
 * each aggregator's domain (issue 62): every rank writes and reads its part of a file
 * through an hindexed view of uneven blocks (50 to 139 bytes; the ranks' blocks take
 * turns through the file, so every access goes in two phases), with cb_buffer_size =
 * 64 KiB (about 150 rounds) and then without the hint (rounds of 1 MiB).
 *   - The file holds every byte as written (checked by rank 0 with pread) and a
 *     collective read gives every rank its bytes back.
 *   - The file cut short (MPI_File_set_size) gives each rank the count of its bytes
 *     before the end, and those bytes.
 *   - With the hint, no rank's peak resident memory grows by more than 8 MiB during the
 *     write and the read (each rank moves about 9.5 MiB; an aggregator that held its
 *     whole domain, and the pieces of it, would grow by 19 MiB or more).
 * Argument: DIR, where the file goes. 2 or more ranks. */
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>
#include <fcntl.h>
#include "check.h"

#define PATHLEN 4096
#define BLOCKS 100000 /* per rank */
#define HWM_SLACK (8L << 20)

static int rank, size;

/* The byte the file holds at offset o. */
static unsigned char val(int64_t o) { return (unsigned char)((o * 131) ^ (o >> 11) ^ 0x5a); }

/* Length of block i of rank r. */
static int len_of(int64_t i, int r) { return 50 + (int)((i * 7 + r * 13 + (i >> 3)) % 90); }

/* Peak resident memory of this process, bytes (VmHWM). */
static long peak_rss(void) {
  FILE *s = fopen("/proc/self/status", "r");
  CHECK(s != NULL, "/proc/self/status");
  char line[256];
  long kb = -1;
  while (fgets(line, sizeof line, s))
    if (sscanf(line, "VmHWM: %ld kB", &kb) == 1) break;
  fclose(s);
  CHECK(kb > 0, "VmHWM not found");
  return kb * 1024;
}

int main(int argc, char **argv) {
  OK(MPI_Init(&argc, &argv));
  OK(MPI_Comm_rank(MPI_COMM_WORLD, &rank));
  OK(MPI_Comm_size(MPI_COMM_WORLD, &size));
  CHECK(argc == 2 && size >= 2, "usage: io_rounds DIR (2 or more ranks)");
  char path[PATHLEN];
  snprintf(path, PATHLEN, "%s/io_rounds", argv[1]);

  /* This rank's blocks: where each lies in the file, in order. */
  int *lens = malloc(BLOCKS * sizeof(int));
  MPI_Aint *disps = malloc(BLOCKS * sizeof(MPI_Aint));
  CHECK(lens && disps, "malloc");
  int64_t at = 0, mine = 0;
  for (int64_t i = 0; i < BLOCKS; i++)
    for (int r = 0; r < size; r++) {
      int l = len_of(i, r);
      if (r == rank) {
        lens[i] = l;
        disps[i] = (MPI_Aint)at;
        mine += l;
      }
      at += l;
    }
  const int64_t total = at;
  MPI_Datatype ft;
  OK(MPI_Type_create_hindexed(BLOCKS, lens, disps, MPI_BYTE, &ft));
  OK(MPI_Type_commit(&ft));
  unsigned char *data = malloc(mine), *back = malloc(mine);
  CHECK(data && back, "malloc");
  for (int64_t i = 0, k = 0; i < BLOCKS; i++)
    for (int j = 0; j < lens[i]; j++) data[k++] = val(disps[i] + j);
  memset(back, 0, mine);

  for (int pass = 0; pass < 2; pass++) {
    MPI_Info info = MPI_INFO_NULL;
    if (pass == 0) {
      OK(MPI_Info_create(&info));
      OK(MPI_Info_set(info, "cb_buffer_size", "65536"));
    }
    if (rank == 0) unlink(path);
    OK(MPI_Barrier(MPI_COMM_WORLD));
    MPI_File fh;
    OK(MPI_File_open(MPI_COMM_WORLD, path, MPI_MODE_CREATE | MPI_MODE_RDWR, info, &fh));
    OK(MPI_File_set_view(fh, 0, MPI_BYTE, ft, "native", info));
    long before = peak_rss();
    MPI_Status st;
    int n = -1;
    OK(MPI_File_write_all(fh, data, (int)mine, MPI_BYTE, &st));
    OK(MPI_Get_count(&st, MPI_BYTE, &n));
    CHECK(n == mine, "pass %d: wrote %d of %lld", pass, n, (long long)mine);
    OK(MPI_File_sync(fh));
    OK(MPI_Barrier(MPI_COMM_WORLD));
    if (rank == 0) {
      /* Every byte of the file as written, and nothing past it. */
      int fd = open(path, O_RDONLY);
      CHECK(fd >= 0, "open %s", path);
      CHECK(lseek(fd, 0, SEEK_END) == total, "pass %d: file of %lld bytes, want %lld", pass,
            (long long)lseek(fd, 0, SEEK_END), (long long)total);
      unsigned char buf[65536];
      for (int64_t o = 0; o < total;) {
        ssize_t got = pread(fd, buf, sizeof buf, o);
        CHECK(got > 0, "pread at %lld", (long long)o);
        for (ssize_t k = 0; k < got; k++)
          CHECK(buf[k] == val(o + k), "pass %d: byte %lld is %d, want %d", pass,
                (long long)(o + k), buf[k], val(o + k));
        o += got;
      }
      close(fd);
    }
    OK(MPI_File_seek(fh, 0, MPI_SEEK_SET));
    OK(MPI_File_read_all(fh, back, (int)mine, MPI_BYTE, &st));
    OK(MPI_Get_count(&st, MPI_BYTE, &n));
    CHECK(n == mine, "pass %d: read %d of %lld", pass, n, (long long)mine);
    CHECK(memcmp(back, data, mine) == 0, "pass %d: the bytes read differ", pass);
    long grew = peak_rss() - before;
    if (pass == 0)
      CHECK(grew <= HWM_SLACK, "peak memory grew by %ld bytes with 64 KiB rounds", grew);
    if (getenv("IO_ROUNDS_VERBOSE"))
      fprintf(stderr, "rank %d pass %d: peak memory grew by %ld KiB\n", rank, pass, grew >> 10);

    /* Cut short inside the last third: each rank's count stops at the end. */
    const int64_t cut = total - total / 3 - 17;
    OK(MPI_File_set_size(fh, cut));
    int64_t want = 0;
    for (int64_t i = 0; i < BLOCKS && disps[i] < cut; i++)
      want += disps[i] + lens[i] <= cut ? lens[i] : cut - disps[i];
    memset(back, 0, mine);
    OK(MPI_File_read_at_all(fh, 0, back, (int)mine, MPI_BYTE, &st));
    OK(MPI_Get_count(&st, MPI_BYTE, &n));
    CHECK(n == want, "pass %d: read %d before the end, want %lld", pass, n, (long long)want);
    CHECK(memcmp(back, data, want) == 0, "pass %d: the bytes before the end differ", pass);
    OK(MPI_File_close(&fh));
    if (info != MPI_INFO_NULL) OK(MPI_Info_free(&info));
  }
  OK(MPI_Type_free(&ft));
  free(lens), free(disps), free(data), free(back);
  OK(MPI_Barrier(MPI_COMM_WORLD));
  if (rank == 0) {
    unlink(path);
    printf("ok io_rounds %d ranks\n", size);
  }
  OK(MPI_Finalize());
  return 0;
}
