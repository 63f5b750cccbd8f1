/* An unmodified MPI-IO program: a 2-D array of ints, distributed block x block over the
 * ranks with an MPI_Type_create_darray file view, written collectively into one plain
 * file (row-major, as a serial program would write it); then read back by any number of
 * ranks with another view (block-cyclic rows), every element checked against its global
 * index.
 *
 *   darray_io write FILE      (any number of ranks)
 *   darray_io read FILE       (any number of ranks)
 */
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define ROWS 1000
#define COLS 600

/* This rank's part of the array under a darray of `distribs`/`dargs` on a `grid`. */
static MPI_Datatype view(int rank, int size, const int *distribs, const int *dargs, const int *grid,
                         int *count) {
  int gsizes[2] = {ROWS, COLS};
  MPI_Datatype t;
  MPI_Type_create_darray(size, rank, 2, gsizes, distribs, dargs, grid, MPI_ORDER_C, MPI_INT, &t);
  MPI_Type_commit(&t);
  MPI_Type_size(t, count);
  *count /= (int)sizeof(int);
  return t;
}

int main(int argc, char **argv) {
  MPI_Init(&argc, &argv);
  int rank, size, count;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  MPI_Comm_size(MPI_COMM_WORLD, &size);
  if (argc != 3 || (strcmp(argv[1], "write") && strcmp(argv[1], "read"))) {
    if (rank == 0) fprintf(stderr, "usage: darray_io write|read FILE\n");
    MPI_Abort(MPI_COMM_WORLD, 2);
  }
  int writing = strcmp(argv[1], "write") == 0;
  int grid[2] = {0, 0};
  MPI_Datatype ft, mem;
  if (writing) {
    int distribs[2] = {MPI_DISTRIBUTE_BLOCK, MPI_DISTRIBUTE_BLOCK};
    int dargs[2] = {MPI_DISTRIBUTE_DFLT_DARG, MPI_DISTRIBUTE_DFLT_DARG};
    MPI_Dims_create(size, 2, grid);
    ft = view(rank, size, distribs, dargs, grid, &count);
  } else {
    int distribs[2] = {MPI_DISTRIBUTE_CYCLIC, MPI_DISTRIBUTE_NONE};
    int dargs[2] = {8, MPI_DISTRIBUTE_DFLT_DARG};
    grid[0] = size;
    grid[1] = 1;
    ft = view(rank, size, distribs, dargs, grid, &count);
  }
  /* The global index of each of this rank's elements, in file order: the view applied
   * to an array that holds every index. */
  int *all = malloc(sizeof(int) * ROWS * COLS), *mine = malloc(sizeof(int) * (count + 1));
  for (int i = 0; i < ROWS * COLS; i++) all[i] = i;
  int pos = 0;
  MPI_Pack(all, 1, ft, mine, (int)sizeof(int) * (count + 1), &pos, MPI_COMM_SELF);
  mem = MPI_INT;

  MPI_File fh;
  int amode = writing ? MPI_MODE_CREATE | MPI_MODE_WRONLY : MPI_MODE_RDONLY;
  if (MPI_File_open(MPI_COMM_WORLD, argv[2], amode, MPI_INFO_NULL, &fh) != MPI_SUCCESS) {
    fprintf(stderr, "rank %d: cannot open %s\n", rank, argv[2]);
    MPI_Abort(MPI_COMM_WORLD, 1);
  }
  MPI_File_set_view(fh, 0, MPI_INT, ft, "native", MPI_INFO_NULL);
  MPI_Status st;
  int got = 0, bad = 0;
  double t0 = MPI_Wtime();
  if (writing) {
    MPI_File_write_all(fh, mine, count, mem, &st);
  } else {
    int *buf = malloc(sizeof(int) * (count + 1));
    MPI_File_read_all(fh, buf, count, mem, &st);
    for (int i = 0; i < count; i++) bad += buf[i] != mine[i];
    free(buf);
  }
  double t = MPI_Wtime() - t0;
  MPI_Get_count(&st, MPI_INT, &got);
  MPI_File_close(&fh);
  int bads = 0;
  MPI_Reduce(&bad, &bads, 1, MPI_INT, MPI_SUM, 0, MPI_COMM_WORLD);
  printf("rank %d of %d: %s %d ints (grid %dx%d)%s\n", rank, size, writing ? "wrote" : "read", got,
         grid[0], grid[1], writing ? "" : (bad ? ", WRONG values" : ", all as written"));
  fflush(stdout);
  MPI_Barrier(MPI_COMM_WORLD);
  if (rank == 0)
    printf("%s %dx%d ints in %.1f ms; %d wrong values\n", writing ? "wrote" : "read", ROWS, COLS,
           t * 1e3, bads);
  MPI_Type_free(&ft);
  free(all);
  free(mine);
  MPI_Finalize();
  return bads != 0;
}
