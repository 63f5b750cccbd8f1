/* A rank killed (SIGKILL) in the middle of a collective: the others, waiting in an
 * allreduce, must not hang; the job ends with an error. */
#include <signal.h>
#include <unistd.h>
#include "check.h"

int main(int argc, char **argv) {
  int rank, size;
  OK(MPI_Init(&argc, &argv));
  OK(MPI_Comm_rank(MPI_COMM_WORLD, &rank));
  OK(MPI_Comm_size(MPI_COMM_WORLD, &size));
  double x = rank, y;
  OK(MPI_Allreduce(&x, &y, 1, MPI_DOUBLE, MPI_SUM, MPI_COMM_WORLD));
  if (rank == 1) raise(SIGKILL);
  for (int i = 0; i < 1000; i++) MPI_Allreduce(&x, &y, 1, MPI_DOUBLE, MPI_SUM, MPI_COMM_WORLD);
  printf("FAIL rank %d finished the collectives\n", rank);
  MPI_Finalize();
  return 0;
}
