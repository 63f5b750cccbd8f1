/* A rank killed (SIGKILL) inside a passive-target epoch: rank 1 takes MPI_Win_lock_all,
 * puts into every rank and flushes (so it holds its locks), then kills itself; the
 * others, taking exclusive locks on rank 1 and on each other to accumulate, must not
 * hang: the job ends with an error. A rank still locking after 30 s prints FAIL. 3 ranks
 * (any number from 2 works). */
#include <signal.h>
#include <unistd.h>
#include "check.h"

int main(int argc, char **argv) {
  int rank, size, *mem;
  MPI_Win win;
  OK(MPI_Init(&argc, &argv));
  OK(MPI_Comm_rank(MPI_COMM_WORLD, &rank));
  OK(MPI_Comm_size(MPI_COMM_WORLD, &size));
  CHECK(size >= 2, "needs at least 2 ranks, has %d", size);
  OK(MPI_Win_allocate(2 * sizeof(int), sizeof(int), MPI_INFO_NULL, MPI_COMM_WORLD, &mem, &win));
  OK(MPI_Win_lock(MPI_LOCK_EXCLUSIVE, rank, 0, win));
  mem[0] = mem[1] = 0;
  OK(MPI_Win_unlock(rank, win));
  OK(MPI_Barrier(MPI_COMM_WORLD));

  if (rank == 1) {
    const int v = 1000 + rank;
    OK(MPI_Win_lock_all(0, win));
    for (int k = 0; k < 3; k++)
      for (int t = 0; t < size; t++) OK(MPI_Put(&v, 1, MPI_INT, t, 1, 1, MPI_INT, win));
    OK(MPI_Win_flush_all(win));
    OK(MPI_Barrier(MPI_COMM_WORLD));
    usleep(200 * 1000); /* the others are in their loop */
    raise(SIGKILL);
  }
  OK(MPI_Barrier(MPI_COMM_WORLD));
  const int one = 1;
  double start = MPI_Wtime();
  for (long i = 0;; i++) {
    for (int t = 0; t < size; t++) {
      if (t == rank) continue;
      MPI_Win_lock(MPI_LOCK_EXCLUSIVE, t, 0, win);
      MPI_Accumulate(&one, 1, MPI_INT, t, 0, 1, MPI_INT, MPI_SUM, win);
      MPI_Win_unlock(t, win);
    }
    if (MPI_Wtime() - start > 30) {
      printf("FAIL rank %d still locking after 30 s (%ld rounds)\n", rank, i + 1);
      fflush(stdout);
      MPI_Abort(MPI_COMM_WORLD, 3);
    }
  }
}
