/* MPI_File_set_view's cost for a large filetype (issue 62): a vector of N doubles at stride P
 * (one block per element, resized to N*P doubles), set 200 times on one open file after 5
 * warm-up calls; prints rank 0's time per call in microseconds.
 *   usage: io_set_view PATH [N]   (default 100000)
 * Built with any MPI's wrapper (mpicc_abi for Spools' libmpi_abi.so.1, mpicc.openmpi for
 * Open MPI's OMPIO and, with --mca io romio321, ROMIO). */
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>
int main(int argc, char **argv) {
  MPI_Init(&argc, &argv);
  int me, P; MPI_Comm_rank(MPI_COMM_WORLD, &me); MPI_Comm_size(MPI_COMM_WORLD, &P);
  int n = argc > 2 ? atoi(argv[2]) : 100000, reps = 200;
  MPI_File f;
  MPI_File_open(MPI_COMM_WORLD, argv[1], MPI_MODE_CREATE | MPI_MODE_RDWR, MPI_INFO_NULL, &f);
  MPI_Datatype v, ft; MPI_Type_vector(n, 1, P, MPI_DOUBLE, &v);
  MPI_Type_create_resized(v, 0, (MPI_Aint)n * P * 8, &ft); MPI_Type_commit(&ft);
  for (int i = 0; i < 5; i++) MPI_File_set_view(f, me * 8, MPI_DOUBLE, ft, "native", MPI_INFO_NULL);
  MPI_Barrier(MPI_COMM_WORLD);
  double a = MPI_Wtime();
  for (int i = 0; i < reps; i++) MPI_File_set_view(f, me * 8, MPI_DOUBLE, ft, "native", MPI_INFO_NULL);
  double b = MPI_Wtime();
  if (me == 0) printf("set_view of a %d-block filetype %.2f us\n", n, (b - a) / reps * 1e6);
  MPI_File_close(&f);
  MPI_Finalize();
}
