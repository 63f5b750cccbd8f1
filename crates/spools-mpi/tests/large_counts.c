/* The large-count (_c) collectives with counts a rank does not use: a gather's
 * recvcount off the root, a scatter's sendcount off the root, an allgather's sendcount
 * with MPI_IN_PLACE, each given as 2^40 (too large for an int) on those ranks only.
 * Every rank must still meet the others in the same algorithm (the library once chose
 * its protocol from the rank's own counts, sending ranks down different paths, which
 * hung or mixed up the data). Any number of ranks >= 1. */
#include "check.h"

enum { N = 3 };
static const MPI_Count HUGE_COUNT = (MPI_Count)1 << 40;

int main(int argc, char **argv) {
  int rank, size;
  OK(MPI_Init(&argc, &argv));
  OK(MPI_Comm_rank(MPI_COMM_WORLD, &rank));
  OK(MPI_Comm_size(MPI_COMM_WORLD, &size));
  int mine[N], all[64 * N];
  CHECK(size <= 64, "at most 64 ranks");
  for (int root = 0; root < size; root++) {
    /* Gather_c: recvcount matters at the root only. */
    for (int i = 0; i < N; i++) mine[i] = rank * 100 + i;
    for (int i = 0; i < size * N; i++) all[i] = -1;
    OK(MPI_Gather_c(mine, N, MPI_INT, all, rank == root ? N : HUGE_COUNT, MPI_INT, root,
                    MPI_COMM_WORLD));
    if (rank == root)
      for (int r = 0; r < size; r++)
        for (int i = 0; i < N; i++)
          CHECK(all[r * N + i] == r * 100 + i, "gather root %d: [%d][%d] = %d", root, r, i,
                all[r * N + i]);
    /* Scatter_c: sendcount matters at the root only. */
    for (int i = 0; i < size * N; i++) all[i] = i;
    for (int i = 0; i < N; i++) mine[i] = -1;
    OK(MPI_Scatter_c(all, rank == root ? N : HUGE_COUNT, MPI_INT, mine, N, MPI_INT, root,
                     MPI_COMM_WORLD));
    for (int i = 0; i < N; i++)
      CHECK(mine[i] == rank * N + i, "scatter root %d: [%d] = %d", root, i, mine[i]);
    /* Allgather_c: the rank `root` gives its block in place (its sendcount unused). */
    for (int i = 0; i < size * N; i++) all[i] = i / N == rank ? rank * 10 + i % N : -1;
    for (int i = 0; i < N; i++) mine[i] = rank * 10 + i;
    if (rank == root)
      OK(MPI_Allgather_c(MPI_IN_PLACE, HUGE_COUNT, MPI_DATATYPE_NULL, all, N, MPI_INT,
                         MPI_COMM_WORLD));
    else
      OK(MPI_Allgather_c(mine, N, MPI_INT, all, N, MPI_INT, MPI_COMM_WORLD));
    for (int r = 0; r < size; r++)
      for (int i = 0; i < N; i++)
        CHECK(all[r * N + i] == r * 10 + i, "allgather in place at %d: [%d][%d] = %d", root,
              r, i, all[r * N + i]);
  }
  /* The int and the _c forms of one collective meet too. */
  int v = rank == 0 ? 42 : 0;
  if (rank % 2) OK(MPI_Bcast_c(&v, 1, MPI_INT, 0, MPI_COMM_WORLD));
  else OK(MPI_Bcast(&v, 1, MPI_INT, 0, MPI_COMM_WORLD));
  CHECK(v == 42, "bcast %d", v);
  if (rank == 0) printf("ok large_counts %d ranks\n", size);
  OK(MPI_Finalize());
  return 0;
}
