/* MPI-IO with Spools' checksum hint: a file written collectively with the info
 * `spools_checksums=crc32c` gets a checksum sidecar at close (FILE.spools-sums, one
 * CRC32C per MiB) that `spools fsck FILE` verifies; without the hint, writing removes a
 * stale sidecar. argv[1]: the file; argv[2]: "sums" or "plain". Each rank writes
 * 3 MiB + 1000 bytes of a cyclic(1) view of ints (two-phase), holding their global
 * index. */
#include <string.h>
#include "check.h"

int main(int argc, char **argv) {
  int rank, size;
  OK(MPI_Init(&argc, &argv));
  OK(MPI_Comm_rank(MPI_COMM_WORLD, &rank));
  OK(MPI_Comm_size(MPI_COMM_WORLD, &size));
  CHECK(argc == 3, "usage: io_sums FILE sums|plain");
  MPI_Info info;
  OK(MPI_Info_create(&info));
  if (strcmp(argv[2], "sums") == 0) OK(MPI_Info_set(info, "spools_checksums", "crc32c"));
  MPI_File fh;
  OK(MPI_File_open(MPI_COMM_WORLD, argv[1], MPI_MODE_CREATE | MPI_MODE_WRONLY, info, &fh));
  OK(MPI_File_set_size(fh, 0));
  MPI_Datatype cyc, ft;
  OK(MPI_Type_vector(1, 1, size, MPI_INT, &cyc));
  OK(MPI_Type_create_resized(cyc, 0, (MPI_Aint)sizeof(int) * size, &ft));
  OK(MPI_Type_commit(&ft));
  OK(MPI_File_set_view(fh, (MPI_Offset)sizeof(int) * rank, MPI_INT, ft, "native", MPI_INFO_NULL));
  int n = (3 * 1048576 + 1000) / 4;
  int *buf = malloc(sizeof(int) * n);
  for (int i = 0; i < n; i++) buf[i] = i * size + rank;
  MPI_Status st;
  OK(MPI_File_write_all(fh, buf, n, MPI_INT, &st));
  OK(MPI_File_close(&fh));
  OK(MPI_Type_free(&ft));
  OK(MPI_Type_free(&cyc));
  OK(MPI_Info_free(&info));
  free(buf);
  if (rank == 0) printf("ok io_sums %s %d ranks\n", argv[2], size);
  OK(MPI_Finalize());
  return 0;
}
