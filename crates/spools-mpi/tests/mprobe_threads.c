/* MPI_Mprobe and MPI_Improbe under MPI_THREAD_MULTIPLE: rank 0 sends MSGS messages of
 * different lengths on one tag, then one stop message per thread; rank 1's THREADS
 * threads (a third with MPI_Mprobe, a third with MPI_Improbe, a third with plain
 * MPI_Recv) each take messages until a stop. Every message must be matched by exactly
 * one thread, with its own length (the library once probed, then received by source and
 * tag, so two threads could match one message and receive another into a buffer of the
 * wrong size; and later took the probed message by its length, so a plain receive that
 * took it first left the matched probe a longer one it could not hold). 2 ranks (more
 * are idle). */
#include <pthread.h>
#include <stdatomic.h>
#include "check.h"

enum { THREADS = 6, MSGS = 3000, TAG = 9 };
static atomic_long sum, count;

static int len_of(int v) { return v % 7 + 1; }

static void *take(void *arg) {
  int how = (int)(long)arg % 3;
  int buf[8];
  for (;;) {
    MPI_Message m;
    MPI_Status st;
    int n = -1;
    if (how == 2) {
      OK(MPI_Recv(buf, 8, MPI_INT, 0, TAG, MPI_COMM_WORLD, &st));
      OK(MPI_Get_count(&st, MPI_INT, &n));
      CHECK(n >= 1 && n <= 8, "count %d", n);
    } else {
      if (how == 1) {
        int flag = 0;
        while (!flag) OK(MPI_Improbe(0, TAG, MPI_COMM_WORLD, &flag, &m, &st));
      } else {
        OK(MPI_Mprobe(0, TAG, MPI_COMM_WORLD, &m, &st));
      }
      OK(MPI_Get_count(&st, MPI_INT, &n));
      CHECK(n >= 1 && n <= 8, "count %d", n);
      OK(MPI_Mrecv(buf, n, MPI_INT, &m, &st));
    }
    if (buf[0] < 0) return NULL;
    CHECK(n == len_of(buf[0]), "message %d: %d ints, want %d", buf[0], n, len_of(buf[0]));
    for (int i = 1; i < n; i++) CHECK(buf[i] == buf[0], "message %d: [%d] = %d", buf[0], i, buf[i]);
    atomic_fetch_add(&sum, buf[0]);
    atomic_fetch_add(&count, 1);
  }
}

int main(int argc, char **argv) {
  int provided, rank, size;
  OK(MPI_Init_thread(&argc, &argv, MPI_THREAD_MULTIPLE, &provided));
  CHECK(provided == MPI_THREAD_MULTIPLE, "provided %d", provided);
  OK(MPI_Comm_rank(MPI_COMM_WORLD, &rank));
  OK(MPI_Comm_size(MPI_COMM_WORLD, &size));
  CHECK(size >= 2, "needs 2 ranks");
  if (rank == 0) {
    int buf[8];
    for (int v = 0; v < MSGS; v++) {
      for (int i = 0; i < 8; i++) buf[i] = v;
      OK(MPI_Send(buf, len_of(v), MPI_INT, 1, TAG, MPI_COMM_WORLD));
    }
    buf[0] = -1;
    for (int t = 0; t < THREADS; t++) OK(MPI_Send(buf, 1, MPI_INT, 1, TAG, MPI_COMM_WORLD));
  } else if (rank == 1) {
    pthread_t th[THREADS];
    for (long t = 0; t < THREADS; t++) CHECK(pthread_create(&th[t], NULL, take, (void *)t) == 0, "thread");
    for (int t = 0; t < THREADS; t++) pthread_join(th[t], NULL);
    CHECK(atomic_load(&count) == MSGS, "%ld messages taken, want %d", atomic_load(&count), MSGS);
    CHECK(atomic_load(&sum) == (long)MSGS * (MSGS - 1) / 2, "sum %ld", atomic_load(&sum));
  }
  OK(MPI_Barrier(MPI_COMM_WORLD));
  if (rank == 0) printf("ok mprobe_threads %d ranks x %d threads\n", size, THREADS);
  OK(MPI_Finalize());
  return 0;
}
