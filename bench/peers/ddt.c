/* Ping-pong of non-contiguous messages between 2 ranks: N doubles sent as one
 * MPI_Type_vector(N, 1, 2, MPI_DOUBLE) (every other double of a 2N-double buffer) and
 * received into the same type, then, for comparison in the same run, the same N doubles
 * as one contiguous message; then an exchange of the vector both ways at once with
 * MPI_Sendrecv (a halo exchange's step). Prints rank 0's one-way time (half the round
 * trip) and its time per exchange in microseconds per size, and checks every received
 * element of the last round of the ping-pong and of the exchange.
 *   usage: ddt [ITERS [SIZES...]]   (payload bytes; defaults 200 and 64 1K 64K 1M 16M)
 * Built with any MPI's wrapper: mpicc_abi (Spools' and MPICH's libmpi_abi.so.1), mpicc. */
#define PEERS_PROGRAM "ddt"
#include "peers.h"
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

int main(int argc, char **argv) {
  MPI_Init(&argc, &argv);
  int me, n;
  MPI_Comm_rank(MPI_COMM_WORLD, &me);
  MPI_Comm_size(MPI_COMM_WORLD, &n);
  if (n != 2) {
    if (me == 0) fprintf(stderr, "ddt: run on 2 ranks\n");
    MPI_Abort(MPI_COMM_WORLD, 2);
  }
  long iters = argc > 1 ? atol(argv[1]) : 200;
  const char *defaults[] = {"64", "1K", "64K", "1M", "16M"};
  int nsizes = argc > 2 ? argc - 2 : 5;
  int bad = 0;
  for (int k = 0; k < nsizes; k++) {
    long bytes = size_arg(argc > 2 ? argv[k + 2] : defaults[k]);
    long count = bytes / 8 > 0 ? bytes / 8 : 1;
    double *s = malloc(2 * count * sizeof(double)), *r = malloc(2 * count * sizeof(double));
    for (long i = 0; i < 2 * count; i++) {
      s[i] = (double)(i + me);
      r[i] = -1.0;
    }
    MPI_Datatype vec;
    MPI_Type_vector((int)count, 1, 2, MPI_DOUBLE, &vec);
    MPI_Type_commit(&vec);
    long reps = bytes >= (1L << 20) ? (iters / 10 > 5 ? iters / 10 : 5) : iters;
    double t[3];
    for (int mode = 0; mode < 2; mode++) {
      MPI_Datatype ty = mode == 0 ? vec : MPI_DOUBLE;
      int cnt = mode == 0 ? 1 : (int)count;
      MPI_Barrier(MPI_COMM_WORLD);
      double a = MPI_Wtime();
      for (long i = 0; i < reps; i++) {
        if (me == 0) {
          MPI_Send(s, cnt, ty, 1, 0, MPI_COMM_WORLD);
          MPI_Recv(r, cnt, ty, 1, 0, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
        } else {
          MPI_Recv(r, cnt, ty, 0, 0, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
          MPI_Send(s, cnt, ty, 0, 0, MPI_COMM_WORLD);
        }
      }
      t[mode] = (MPI_Wtime() - a) / reps / 2 * 1e6;
      if (mode == 0) {
        for (long i = 0; i < count; i++)
          if (r[2 * i] != (double)(2 * i + 1 - me) || r[2 * i + 1] != -1.0) bad++;
      }
    }
    for (long i = 0; i < 2 * count; i++) r[i] = -1.0;
    MPI_Barrier(MPI_COMM_WORLD);
    double a = MPI_Wtime();
    for (long i = 0; i < reps; i++)
      MPI_Sendrecv(s, 1, vec, 1 - me, 1, r, 1, vec, 1 - me, 1, MPI_COMM_WORLD,
                   MPI_STATUS_IGNORE);
    t[2] = (MPI_Wtime() - a) / reps * 1e6;
    for (long i = 0; i < count; i++)
      if (r[2 * i] != (double)(2 * i + 1 - me) || r[2 * i + 1] != -1.0) bad++;
    if (me == 0)
      printf("ddt %ld B vector %.3f us contiguous %.3f us sendrecv %.3f us\n", bytes, t[0],
             t[1], t[2]);
    MPI_Type_free(&vec);
    free(s);
    free(r);
  }
  int any = 0;
  MPI_Allreduce(&bad, &any, 1, MPI_INT, MPI_SUM, MPI_COMM_WORLD);
  if (any) {
    if (me == 0) fprintf(stderr, "ddt: %d elements received wrong\n", any);
    MPI_Abort(MPI_COMM_WORLD, 1);
  }
  MPI_Finalize();
  return 0;
}
