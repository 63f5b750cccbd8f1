/* A loop of one small collective, timed by its slowest rank: ITERS calls of one double
 * (8 B), each rank's loop time, the largest of them per call on rank 0. Where coll.c times
 * the root (which, on messages, may run ahead of its members by what their buffers hold),
 * this is the collective's throughput on the machine.
 * Usage: loopmax OP ITERS   (OP: ibcast iscatter iscatterv igatherv iallreduce ibarrier
 * scatter scatterv gather gatherv, else bcast; root rank 0)
 * Prints "OP P us" on rank 0 (built with any MPI's compiler wrapper). */
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
int main(int argc, char **argv) {
  MPI_Init(&argc, &argv);
  int me, P; MPI_Comm_rank(MPI_COMM_WORLD, &me); MPI_Comm_size(MPI_COMM_WORLD, &P);
  if (argc < 3 || P > 64) {
    if (me == 0) fprintf(stderr, "usage: loopmax OP ITERS (at most 64 ranks)\n");
    MPI_Abort(MPI_COMM_WORLD, 2);
  }
  const char *op = argv[1]; long it = atol(argv[2]);
  double a[64], b[64]; int cs[64], ds[64];
  for (int i = 0; i < 64; i++) { a[i] = i; cs[i] = 1; ds[i] = i; }
  MPI_Barrier(MPI_COMM_WORLD);
  double t0 = MPI_Wtime();
  for (long i = 0; i < it; i++) {
    MPI_Request q;
    if (!strcmp(op, "ibcast")) MPI_Ibcast(a, 1, MPI_DOUBLE, 0, MPI_COMM_WORLD, &q);
    else if (!strcmp(op, "iscatter")) MPI_Iscatter(a, 1, MPI_DOUBLE, b, 1, MPI_DOUBLE, 0, MPI_COMM_WORLD, &q);
    else if (!strcmp(op, "iscatterv")) MPI_Iscatterv(a, cs, ds, MPI_DOUBLE, b, 1, MPI_DOUBLE, 0, MPI_COMM_WORLD, &q);
    else if (!strcmp(op, "igatherv")) MPI_Igatherv(a, 1, MPI_DOUBLE, b, cs, ds, MPI_DOUBLE, 0, MPI_COMM_WORLD, &q);
    else if (!strcmp(op, "iallreduce")) MPI_Iallreduce(a, b, 1, MPI_DOUBLE, MPI_SUM, MPI_COMM_WORLD, &q);
    else if (!strcmp(op, "ibarrier")) MPI_Ibarrier(MPI_COMM_WORLD, &q);
    else if (!strcmp(op, "scatterv")) { MPI_Scatterv(a, cs, ds, MPI_DOUBLE, b, 1, MPI_DOUBLE, 0, MPI_COMM_WORLD); continue; }
    else if (!strcmp(op, "scatter")) { MPI_Scatter(a, 1, MPI_DOUBLE, b, 1, MPI_DOUBLE, 0, MPI_COMM_WORLD); continue; }
    else if (!strcmp(op, "gatherv")) { MPI_Gatherv(a, 1, MPI_DOUBLE, b, cs, ds, MPI_DOUBLE, 0, MPI_COMM_WORLD); continue; }
    else if (!strcmp(op, "gather")) { MPI_Gather(a, 1, MPI_DOUBLE, b, 1, MPI_DOUBLE, 0, MPI_COMM_WORLD); continue; }
    else { MPI_Bcast(a, 1, MPI_DOUBLE, 0, MPI_COMM_WORLD); continue; }
    MPI_Wait(&q, MPI_STATUS_IGNORE);
  }
  double t = MPI_Wtime() - t0, tmax; MPI_Reduce(&t, &tmax, 1, MPI_DOUBLE, MPI_MAX, 0, MPI_COMM_WORLD); t = tmax;
  if (me == 0) printf("%s %d %.3f\n", op, P, t / it * 1e6);
  MPI_Finalize();
}
