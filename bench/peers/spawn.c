/* The cost of MPI_Comm_spawn (issue 61): REPS rounds, each timed on every parent from a
 * barrier: spawn N children of this program from all parents, a barrier over the
 * intercommunicator (every child has joined and answered), MPI_Comm_disconnect. Prints
 * the median and the minimum on parent 0, in milliseconds.
 *   usage: spawn N [REPS]   (default 8 children, 5 rounds)
 * Built with any MPI's wrapper (mpicc_abi for Spools' and MPICH's libmpi_abi.so.1,
 * mpicc.openmpi for Open MPI). */
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>
static int cmp(const void *a, const void *b) { double x = *(double *)a, y = *(double *)b; return (x > y) - (x < y); }
int main(int argc, char **argv) {
  MPI_Init(&argc, &argv);
  MPI_Comm parent;
  MPI_Comm_get_parent(&parent);
  if (parent != MPI_COMM_NULL) {
    MPI_Barrier(parent);
    MPI_Comm_disconnect(&parent);
    MPI_Finalize();
    return 0;
  }
  int me; MPI_Comm_rank(MPI_COMM_WORLD, &me);
  int n = argc > 1 ? atoi(argv[1]) : 8, reps = argc > 2 ? atoi(argv[2]) : 5;
  double *t = malloc(sizeof(double) * reps);
  for (int i = 0; i < reps; i++) {
    MPI_Comm kids;
    MPI_Barrier(MPI_COMM_WORLD);
    double t0 = MPI_Wtime();
    MPI_Comm_spawn(argv[0], MPI_ARGV_NULL, n, MPI_INFO_NULL, 0, MPI_COMM_WORLD, &kids,
                   MPI_ERRCODES_IGNORE);
    MPI_Barrier(kids);
    MPI_Comm_disconnect(&kids);
    t[i] = (MPI_Wtime() - t0) * 1e3;
  }
  qsort(t, reps, sizeof(double), cmp);
  if (me == 0) printf("spawn %d children: median %.1f ms, min %.1f ms (%d rounds)\n", n, t[reps / 2], t[0], reps);
  free(t);
  MPI_Finalize();
  return 0;
}
