/* Passive target: rank 1 exposes a window and then computes, calling no MPI function,
 * until a flag that rank 0 puts into its window appears (at most 60 s, then FAIL); rank 0
 * gets a value rank 1 stored before, puts a value, then the flag, each in an exclusive
 * epoch. Within a host the accesses are copies into shared memory; between hosts (or
 * with SPOOLS_MPI_WIN_MESSAGES=1) memory messages that rank 1's progress thread serves
 * (SPOOLS_PROGRESS_THREAD=1). 2 ranks. */
#include <time.h>
#include "check.h"

static double now(void) {
  struct timespec t;
  clock_gettime(CLOCK_MONOTONIC, &t);
  return t.tv_sec + t.tv_nsec * 1e-9;
}

int main(int argc, char **argv) {
  int rank, size, *mem;
  OK(MPI_Init(&argc, &argv));
  OK(MPI_Comm_rank(MPI_COMM_WORLD, &rank));
  OK(MPI_Comm_size(MPI_COMM_WORLD, &size));
  CHECK(size == 2, "2 ranks, not %d", size);
  MPI_Win win;
  OK(MPI_Win_allocate(3 * sizeof(int), sizeof(int), MPI_INFO_NULL, MPI_COMM_WORLD, &mem, &win));
  mem[0] = 0, mem[1] = 0, mem[2] = 99 + rank;
  OK(MPI_Barrier(MPI_COMM_WORLD));
  if (rank == 1) {
    /* No MPI call until the flag is there. */
    double start = now();
    long spins = 0;
    while (__atomic_load_n(&mem[0], __ATOMIC_ACQUIRE) != 42) {
      spins++;
      CHECK(now() - start < 60, "the flag never came (%ld spins): the target made no progress", spins);
    }
    CHECK(mem[1] == 7, "the value put before the flag is %d, want 7", mem[1]);
  } else {
    int got = -1, seven = 7, flag = 42;
    OK(MPI_Win_lock(MPI_LOCK_SHARED, 1, 0, win));
    OK(MPI_Get(&got, 1, MPI_INT, 1, 2, 1, MPI_INT, win));
    OK(MPI_Win_unlock(1, win));
    CHECK(got == 100, "get of the target's value gave %d, want 100", got);
    OK(MPI_Win_lock(MPI_LOCK_EXCLUSIVE, 1, 0, win));
    OK(MPI_Put(&seven, 1, MPI_INT, 1, 1, 1, MPI_INT, win));
    OK(MPI_Win_unlock(1, win));
    OK(MPI_Win_lock(MPI_LOCK_EXCLUSIVE, 1, 0, win));
    OK(MPI_Put(&flag, 1, MPI_INT, 1, 0, 1, MPI_INT, win));
    OK(MPI_Win_unlock(1, win));
  }
  OK(MPI_Barrier(MPI_COMM_WORLD));
  OK(MPI_Win_free(&win));
  if (rank == 0) printf("ok rma_passive %d ranks\n", size);
  OK(MPI_Finalize());
  return 0;
}
