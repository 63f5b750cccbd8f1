/* Exchanges of SIZE bytes between 2 ranks (each the other's peer), ITERS per pattern:
 * MPI_Sendrecv; MPI_Irecv + MPI_Send + MPI_Wait (the same exchange through a request);
 * and a ping-pong's round trip (MPI_Send then MPI_Recv on rank 0, the reverse on rank 1).
 * Prints rank 0's time per iteration of each, in microseconds. In an exchange both
 * messages are in flight at once, so a runtime that overlaps them takes less than a round
 * trip.
 *   usage: exchange [SIZE [ITERS]]   (defaults 8 and 1000000)
 * Built with any MPI's wrapper: mpicc_abi (Spools' and MPICH's libmpi_abi.so.1), mpicc. */
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>
int main(int argc, char **argv) {
  MPI_Init(&argc, &argv);
  int me, n;
  MPI_Comm_rank(MPI_COMM_WORLD, &me);
  MPI_Comm_size(MPI_COMM_WORLD, &n);
  if (n != 2) {
    if (me == 0) fprintf(stderr, "exchange: run on 2 ranks\n");
    MPI_Abort(MPI_COMM_WORLD, 2);
  }
  int size = argc > 1 ? atoi(argv[1]) : 8;
  long iters = argc > 2 ? atol(argv[2]) : 1000000;
  char *s = calloc(size ? size : 1, 1), *r = calloc(size ? size : 1, 1);
  const char *names[3] = {"sendrecv", "irecv_send_wait", "pingpong_round_trip"};
  for (int mode = 0; mode < 3; mode++) {
    MPI_Barrier(MPI_COMM_WORLD);
    double a = MPI_Wtime();
    for (long i = 0; i < iters; i++) {
      if (mode == 0) {
        MPI_Sendrecv(s, size, MPI_BYTE, 1 - me, 0, r, size, MPI_BYTE, 1 - me, 0, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
      } else if (mode == 1) {
        MPI_Request q;
        MPI_Irecv(r, size, MPI_BYTE, 1 - me, 0, MPI_COMM_WORLD, &q);
        MPI_Send(s, size, MPI_BYTE, 1 - me, 0, MPI_COMM_WORLD);
        MPI_Wait(&q, MPI_STATUS_IGNORE);
      } else if (me == 0) {
        MPI_Send(s, size, MPI_BYTE, 1, 0, MPI_COMM_WORLD);
        MPI_Recv(r, size, MPI_BYTE, 1, 0, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
      } else {
        MPI_Recv(r, size, MPI_BYTE, 0, 0, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
        MPI_Send(s, size, MPI_BYTE, 0, 0, MPI_COMM_WORLD);
      }
    }
    double t = (MPI_Wtime() - a) / iters * 1e6;
    if (me == 0) printf("%s %d B %.3f us\n", names[mode], size, t);
  }
  free(s);
  free(r);
  MPI_Finalize();
  return 0;
}
