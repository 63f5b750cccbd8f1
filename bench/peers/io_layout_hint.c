/* The `spools_layout` MPI-IO hint's costs: a file kept as a striped set, created, updated
 * in one place and read back, each step timed (the slowest rank's, MPI_Wtime) with the
 * growth of each rank's peak memory during the step (VmHWM, reset before it; the largest
 * rank's).
 *
 *   io_layout_hint FILE MIB [LAYOUT]
 *
 *   create  open CREATE|WRONLY, every rank writes its MIB MiB block (write_at_all), close
 *   update  open RDWR, rank 0 writes 4 KiB at offset 0, close
 *   read    open RDONLY, every rank reads its block back (read_at_all), checked, close
 *
 * Spools only (another MPI ignores the hint and writes a plain file). */
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* Resets the peak to the present size (Linux 4.0 and later), then gives it. */
static long reset_hwm_kib(void);

static long hwm_kib(void) {
  FILE *f = fopen("/proc/self/status", "r");
  char line[256];
  long v = -1;
  while (f && fgets(line, sizeof line, f))
    if (sscanf(line, "VmHWM: %ld", &v) == 1) break;
  if (f) fclose(f);
  return v;
}

static long reset_hwm_kib(void) {
  FILE *f = fopen("/proc/self/clear_refs", "w");
  if (f) {
    fputs("5", f);
    fclose(f);
  }
  return hwm_kib();
}

static int rank, size;

static void report(const char *step, double t0, long base) {
  double dt = MPI_Wtime() - t0, worst;
  long grew = hwm_kib() - base, most;
  MPI_Reduce(&dt, &worst, 1, MPI_DOUBLE, MPI_MAX, 0, MPI_COMM_WORLD);
  MPI_Reduce(&grew, &most, 1, MPI_LONG, MPI_MAX, 0, MPI_COMM_WORLD);
  if (rank == 0) printf("%-7s %9.1f ms  peak memory +%ld KiB\n", step, worst * 1e3, most);
}

static MPI_File open_set(const char *path, int amode, const char *layout) {
  MPI_Info info;
  MPI_File fh;
  MPI_Info_create(&info);
  MPI_Info_set(info, "spools_layout", layout);
  if (MPI_File_open(MPI_COMM_WORLD, path, amode, info, &fh) != MPI_SUCCESS) MPI_Abort(MPI_COMM_WORLD, 2);
  MPI_Info_free(&info);
  return fh;
}

int main(int argc, char **argv) {
  MPI_Init(&argc, &argv);
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  MPI_Comm_size(MPI_COMM_WORLD, &size);
  if (argc < 3) {
    if (rank == 0) fprintf(stderr, "usage: io_layout_hint FILE MIB [LAYOUT]\n");
    MPI_Abort(MPI_COMM_WORLD, 2);
  }
  const char *path = argv[1], *layout = argc > 3 ? argv[3] : "raid5(unit=1MiB,count=4)";
  size_t n = (size_t)atol(argv[2]) << 20;
  MPI_Offset at = (MPI_Offset)n * rank;
  char *buf = malloc(n);
  for (size_t i = 0; i < n; i++) buf[i] = (char)((at + i) * 7 + 3);
  MPI_Status st;
  if (rank == 0) MPI_File_delete(path, MPI_INFO_NULL);
  MPI_Barrier(MPI_COMM_WORLD);
  long base = reset_hwm_kib();

  double t0 = MPI_Wtime();
  MPI_File fh = open_set(path, MPI_MODE_CREATE | MPI_MODE_WRONLY, layout);
  MPI_File_write_at_all(fh, at, buf, (int)n, MPI_BYTE, &st);
  MPI_File_close(&fh);
  report("create", t0, base);

  base = reset_hwm_kib();
  t0 = MPI_Wtime();
  fh = open_set(path, MPI_MODE_RDWR, layout);
  if (rank == 0) MPI_File_write_at(fh, 0, buf, 4096, MPI_BYTE, &st);
  MPI_File_close(&fh);
  report("update", t0, base);

  memset(buf, 0, n);
  base = reset_hwm_kib();
  t0 = MPI_Wtime();
  fh = open_set(path, MPI_MODE_RDONLY, layout);
  MPI_File_read_at_all(fh, at, buf, (int)n, MPI_BYTE, &st);
  MPI_File_close(&fh);
  report("read", t0, base);
  for (size_t i = 0; i < n; i++)
    if (buf[i] != (char)((at + i) * 7 + 3)) {
      fprintf(stderr, "rank %d: byte %zu read back wrong\n", rank, i);
      MPI_Abort(MPI_COMM_WORLD, 3);
    }
  if (rank == 0) MPI_File_delete(path, MPI_INFO_NULL);
  free(buf);
  MPI_Finalize();
  return 0;
}
