/* A collective write and read through an hindexed view of uneven blocks (50 to 139
 * bytes, the ranks' blocks taking turns through the file: accesses in two phases),
 * BLOCKS blocks per rank, REPS times; prints the median time of each on rank 0, in ms.
 *   usage: io_hindexed DIR BLOCKS [REPS [CB_BUFFER_SIZE]]
 * Built with any MPI's wrapper (mpicc_abi for Spools and MPICH, Open MPI's mpicc for
 * OMPIO and, with --mca io romio321, ROMIO). Checks nothing but the counts: the test
 * crates/spools-mpi/tests/io_rounds.c checks the bytes. */
#include <mpi.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static int cmp(const void *a, const void *b) {
  double x = *(const double *)a, y = *(const double *)b;
  return (x > y) - (x < y);
}

static int len_of(int64_t i, int r) { return 50 + (int)((i * 7 + r * 13 + (i >> 3)) % 90); }

int main(int argc, char **argv) {
  MPI_Init(&argc, &argv);
  int rank, size;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  MPI_Comm_size(MPI_COMM_WORLD, &size);
  if (argc < 3) {
    if (rank == 0) fprintf(stderr, "usage: io_hindexed DIR BLOCKS [REPS [CB_BUFFER_SIZE]]\n");
    MPI_Abort(MPI_COMM_WORLD, 2);
  }
  char path[4096];
  snprintf(path, sizeof path, "%s/io_hindexed.dat", argv[1]);
  int blocks = atoi(argv[2]), reps = argc > 3 ? atoi(argv[3]) : 5;
  int *lens = malloc(blocks * sizeof(int));
  MPI_Aint *disps = malloc(blocks * sizeof(MPI_Aint));
  int64_t at = 0, mine = 0;
  for (int64_t i = 0; i < blocks; i++)
    for (int r = 0; r < size; r++) {
      int l = len_of(i, r);
      if (r == rank) lens[i] = l, disps[i] = (MPI_Aint)at, mine += l;
      at += l;
    }
  MPI_Datatype ft;
  MPI_Type_create_hindexed(blocks, lens, disps, MPI_BYTE, &ft);
  MPI_Type_commit(&ft);
  unsigned char *data = malloc(mine);
  memset(data, rank + 1, mine);
  MPI_Info info = MPI_INFO_NULL;
  if (argc > 4) {
    MPI_Info_create(&info);
    MPI_Info_set(info, "cb_buffer_size", argv[4]);
  }
  double *tw = malloc(reps * sizeof(double)), *tr = malloc(reps * sizeof(double));
  MPI_File fh;
  MPI_File_open(MPI_COMM_WORLD, path, MPI_MODE_CREATE | MPI_MODE_RDWR, info, &fh);
  MPI_File_set_view(fh, 0, MPI_BYTE, ft, "native", info);
  for (int k = 0; k < reps; k++) {
    MPI_Status st;
    int n = -1;
    MPI_Barrier(MPI_COMM_WORLD);
    double t0 = MPI_Wtime();
    MPI_File_write_at_all(fh, 0, data, (int)mine, MPI_BYTE, &st);
    double t1 = MPI_Wtime();
    MPI_Get_count(&st, MPI_BYTE, &n);
    if (n != mine) MPI_Abort(MPI_COMM_WORLD, 3);
    MPI_Barrier(MPI_COMM_WORLD);
    double t2 = MPI_Wtime();
    MPI_File_read_at_all(fh, 0, data, (int)mine, MPI_BYTE, &st);
    double t3 = MPI_Wtime();
    MPI_Get_count(&st, MPI_BYTE, &n);
    if (n != mine) MPI_Abort(MPI_COMM_WORLD, 4);
    tw[k] = t1 - t0, tr[k] = t3 - t2;
  }
  MPI_File_close(&fh);
  qsort(tw, reps, sizeof(double), cmp);
  qsort(tr, reps, sizeof(double), cmp);
  if (rank == 0) {
    printf("ranks %d bytes/rank %lld write %.1f ms read %.1f ms\n", size, (long long)mine,
           tw[reps / 2] * 1e3, tr[reps / 2] * 1e3);
    MPI_File_delete(path, MPI_INFO_NULL);
  }
  if (info != MPI_INFO_NULL) MPI_Info_free(&info);
  MPI_Type_free(&ft);
  free(lens), free(disps), free(data), free(tw), free(tr);
  MPI_Finalize();
  return 0;
}
