/* MPI-IO's fixed cost per call (issue 62): REPS rounds, each timed call by call on every
 * rank after a barrier: MPI_File_open of an existing file, MPI_File_set_view (a 64-byte
 * contiguous filetype at this rank's displacement), a 64-byte MPI_File_read_at_all through
 * the view, MPI_File_close. Prints the median of each on rank 0, in microseconds.
 *   usage: io_fixed PATH [REPS]   (PATH is created and written first, 64 bytes per rank)
 * Built with any MPI's wrapper (mpicc_abi for Spools' and MPICH's libmpi_abi.so.1,
 * mpicc.openmpi for Open MPI's OMPIO and, with --mca io romio321, ROMIO). */
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
static int cmp(const void *a, const void *b) { double x = *(double *)a, y = *(double *)b; return (x > y) - (x < y); }
int main(int argc, char **argv) {
  MPI_Init(&argc, &argv);
  int me, P; MPI_Comm_rank(MPI_COMM_WORLD, &me); MPI_Comm_size(MPI_COMM_WORLD, &P);
  const char *path = argv[1]; int reps = argc > 2 ? atoi(argv[2]) : 200;
  MPI_File f; char buf[64]; memset(buf, me, 64);
  MPI_File_open(MPI_COMM_WORLD, path, MPI_MODE_CREATE | MPI_MODE_RDWR, MPI_INFO_NULL, &f);
  MPI_File_write_at_all(f, me * 64, buf, 64, MPI_BYTE, MPI_STATUS_IGNORE);
  MPI_File_close(&f);
  double *t[4]; for (int k = 0; k < 4; k++) t[k] = malloc(reps * sizeof(double));
  MPI_Datatype ft; MPI_Type_contiguous(64, MPI_BYTE, &ft); MPI_Type_commit(&ft);
  for (int i = 0; i < reps; i++) {
    MPI_Barrier(MPI_COMM_WORLD); double a = MPI_Wtime();
    MPI_File_open(MPI_COMM_WORLD, path, MPI_MODE_RDWR, MPI_INFO_NULL, &f);
    double b = MPI_Wtime();
    MPI_File_set_view(f, me * 64, MPI_BYTE, ft, "native", MPI_INFO_NULL);
    double c = MPI_Wtime();
    MPI_File_read_at_all(f, 0, buf, 64, MPI_BYTE, MPI_STATUS_IGNORE);
    double d = MPI_Wtime();
    MPI_File_close(&f);
    double e = MPI_Wtime();
    t[0][i] = b - a; t[1][i] = c - b; t[2][i] = d - c; t[3][i] = e - d;
  }
  if (me == 0) {
    const char *n[4] = {"open", "set_view", "read_at_all64", "close"};
    for (int k = 0; k < 4; k++) { qsort(t[k], reps, sizeof(double), cmp); printf("%s %.2f us\n", n[k], t[k][reps / 2] * 1e6); }
  }
  MPI_Finalize();
}
