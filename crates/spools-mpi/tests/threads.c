/* MPI_THREAD_MULTIPLE: 4 threads per rank send to and receive from the ring neighbours
 * at once, each on its own tag and (for two of them) its own communicator, checking
 * every message. Any number of ranks >= 2. */
#include <pthread.h>
#include "check.h"

enum { THREADS = 4, ROUNDS = 500 };
static int rank, size;
static MPI_Comm comms[THREADS];

static void *work(void *arg) {
  int t = (int)(long)arg;
  MPI_Comm c = comms[t];
  int right = (rank + 1) % size, left = (rank + size - 1) % size;
  for (int i = 0; i < ROUNDS; i++) {
    long out[2] = {rank, (long)t * 100000 + i}, in[2];
    MPI_Request r;
    OK(MPI_Irecv(in, 2, MPI_LONG, left, t, c, &r));
    OK(MPI_Send(out, 2, MPI_LONG, right, t, c));
    OK(MPI_Wait(&r, MPI_STATUS_IGNORE));
    CHECK(in[0] == left && in[1] == (long)t * 100000 + i, "thread %d round %d got %ld %ld", t, i, in[0], in[1]);
  }
  return NULL;
}

int main(int argc, char **argv) {
  int provided;
  OK(MPI_Init_thread(&argc, &argv, MPI_THREAD_MULTIPLE, &provided));
  CHECK(provided == MPI_THREAD_MULTIPLE, "provided %d", provided);
  OK(MPI_Comm_rank(MPI_COMM_WORLD, &rank));
  OK(MPI_Comm_size(MPI_COMM_WORLD, &size));
  comms[0] = comms[1] = MPI_COMM_WORLD;
  OK(MPI_Comm_dup(MPI_COMM_WORLD, &comms[2]));
  OK(MPI_Comm_dup(MPI_COMM_WORLD, &comms[3]));
  pthread_t th[THREADS];
  for (long t = 0; t < THREADS; t++) CHECK(pthread_create(&th[t], NULL, work, (void *)t) == 0, "pthread_create");
  for (int t = 0; t < THREADS; t++) pthread_join(th[t], NULL);
  int main_thread = 0;
  OK(MPI_Is_thread_main(&main_thread));
  CHECK(main_thread == 1, "is_thread_main %d", main_thread);
  OK(MPI_Comm_free(&comms[2]));
  OK(MPI_Comm_free(&comms[3]));
  OK(MPI_Barrier(MPI_COMM_WORLD));
  if (rank == 0) printf("ok threads %d ranks x %d threads\n", size, THREADS);
  OK(MPI_Finalize());
  return 0;
}
