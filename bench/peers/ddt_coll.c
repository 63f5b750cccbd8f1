/* Collectives on non-contiguous data at any rank count: N doubles as one
 * MPI_Type_vector(N, 1, 2, MPI_DOUBLE) (every other double of a 2N-double buffer), then,
 * for comparison in the same run, the same N doubles contiguous. `bcast`: MPI_Bcast, the
 * root moving round the ranks; `allreduce`: MPI_Allreduce with MPI_SUM into a second
 * buffer. Prints rank 0's mean time per call in microseconds per size, and checks every
 * element of a last vector call (gaps untouched).
 *   usage: ddt_coll bcast|allreduce [ITERS [SIZES...]]
 *          (payload bytes; defaults 200 and 1K 64K 1M 16M)
 * Built with any MPI's wrapper: mpicc_abi (Spools' and MPICH's libmpi_abi.so.1), mpicc. */
#define PEERS_PROGRAM "ddt_coll"
#include "peers.h"
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

int main(int argc, char **argv) {
  MPI_Init(&argc, &argv);
  int me, n;
  MPI_Comm_rank(MPI_COMM_WORLD, &me);
  MPI_Comm_size(MPI_COMM_WORLD, &n);
  int reduce = argc > 1 && strcmp(argv[1], "allreduce") == 0;
  if (argc < 2 || (!reduce && strcmp(argv[1], "bcast") != 0)) {
    if (me == 0) fprintf(stderr, "usage: ddt_coll bcast|allreduce [ITERS [SIZES...]]\n");
    MPI_Abort(MPI_COMM_WORLD, 2);
  }
  argc--;
  argv++;
  long iters = argc > 1 ? atol(argv[1]) : 200;
  const char *defaults[] = {"1K", "64K", "1M", "16M"};
  int nsizes = argc > 2 ? argc - 2 : 4;
  int bad = 0;
  for (int k = 0; k < nsizes; k++) {
    long bytes = size_arg(argc > 2 ? argv[k + 2] : defaults[k]);
    long count = bytes / 8 > 0 ? bytes / 8 : 1;
    double *b = malloc(2 * count * sizeof(double)), *r = malloc(2 * count * sizeof(double));
    for (long i = 0; i < 2 * count; i++) b[i] = r[i] = (double)i;
    MPI_Datatype vec;
    MPI_Type_vector((int)count, 1, 2, MPI_DOUBLE, &vec);
    MPI_Type_commit(&vec);
    long reps = bytes >= (1L << 20) ? (iters / 10 > 5 ? iters / 10 : 5) : iters;
    double t[2];
    for (int mode = 0; mode < 2; mode++) {
      MPI_Datatype ty = mode == 0 ? vec : MPI_DOUBLE;
      int cnt = mode == 0 ? 1 : (int)count;
      MPI_Barrier(MPI_COMM_WORLD);
      double a = MPI_Wtime();
      for (long i = 0; i < reps; i++) {
        if (reduce)
          MPI_Allreduce(b, r, cnt, ty, MPI_SUM, MPI_COMM_WORLD);
        else
          MPI_Bcast(b, cnt, ty, (int)(i % n), MPI_COMM_WORLD);
      }
      t[mode] = (MPI_Wtime() - a) / reps * 1e6;
    }
    if (reduce) {
      /* A checked round: element i of rank r is i + r, summed; the gaps left as they were. */
      for (long i = 0; i < 2 * count; i++) {
        b[i] = i + me;
        r[i] = -2.0;
      }
      MPI_Allreduce(b, r, 1, vec, MPI_SUM, MPI_COMM_WORLD);
      for (long i = 0; i < 2 * count; i++)
        if (r[i] != (i % 2 ? -2.0 : (double)n * i + (double)n * (n - 1) / 2)) bad++;
    } else {
      /* A checked round: the last root's elements, the gaps left as they were. */
      int root = n - 1;
      for (long i = 0; i < 2 * count; i++) b[i] = me == root ? i * 0.5 : (i % 2 ? -2.0 : -1.0);
      MPI_Bcast(b, 1, vec, root, MPI_COMM_WORLD);
      for (long i = 0; i < 2 * count; i++)
        if (b[i] != (i % 2 ? (me == root ? i * 0.5 : -2.0) : i * 0.5)) bad++;
    }
    if (me == 0)
      printf("ddt_coll %s %d ranks %ld B vector %.3f us contiguous %.3f us\n", reduce ? "allreduce" : "bcast", n, bytes, t[0], t[1]);
    MPI_Type_free(&vec);
    free(b);
    free(r);
  }
  int any = 0;
  MPI_Allreduce(&bad, &any, 1, MPI_INT, MPI_SUM, MPI_COMM_WORLD);
  if (any) {
    if (me == 0) fprintf(stderr, "ddt_coll: %d elements received wrong\n", any);
    MPI_Abort(MPI_COMM_WORLD, 1);
  }
  MPI_Finalize();
  return 0;
}
