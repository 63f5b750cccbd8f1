/* An unmodified MPI program: built once by any mpicc_abi (the MPI 5.0 standard ABI), it
 * runs on Spools with `spools run -n 4 -- ./hello` (or on MPICH's own library).
 * Each rank passes a token around a ring, then all sum their ranks. */
#include <mpi.h>
#include <stdio.h>

int main(int argc, char **argv) {
  MPI_Init(&argc, &argv);
  int rank, size, len;
  char lib[MPI_MAX_LIBRARY_VERSION_STRING];
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  MPI_Comm_size(MPI_COMM_WORLD, &size);
  MPI_Get_library_version(lib, &len);
  int token = 0;
  if (rank == 0) {
    MPI_Send(&token, 1, MPI_INT, 1 % size, 0, MPI_COMM_WORLD);
    MPI_Recv(&token, 1, MPI_INT, size - 1, 0, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
  } else {
    MPI_Recv(&token, 1, MPI_INT, rank - 1, 0, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
    token += rank;
    MPI_Send(&token, 1, MPI_INT, (rank + 1) % size, 0, MPI_COMM_WORLD);
  }
  double mine = rank, sum = 0;
  MPI_Allreduce(&mine, &sum, 1, MPI_DOUBLE, MPI_SUM, MPI_COMM_WORLD);
  if (rank == 0) printf("%s\n", lib);
  printf("rank %d of %d: token %d, sum of ranks %g\n", rank, size, token, sum);
  MPI_Finalize();
  return 0;
}
