/* MPI_Abort on one rank (the last) while the others wait in a receive and a barrier:
 * the job ends with the abort's code. Prints the time from the abort to the end of the
 * job is the launcher's; the test measures it. */
#include <unistd.h>
#include "check.h"

int main(int argc, char **argv) {
  int rank, size;
  OK(MPI_Init(&argc, &argv));
  OK(MPI_Comm_rank(MPI_COMM_WORLD, &rank));
  OK(MPI_Comm_size(MPI_COMM_WORLD, &size));
  OK(MPI_Barrier(MPI_COMM_WORLD));
  if (rank == size - 1) {
    printf("aborting\n");
    fflush(stdout);
    MPI_Abort(MPI_COMM_WORLD, 42);
  }
  int x;
  if (rank == 0) MPI_Recv(&x, 1, MPI_INT, size - 1, 0, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
  else MPI_Barrier(MPI_COMM_WORLD);
  printf("FAIL rank %d went on after the abort\n", rank);
  MPI_Finalize();
  return 0;
}
