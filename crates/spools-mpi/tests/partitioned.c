/* Partitioned communication (MPI_Psend_init, MPI_Precv_init, MPI_Pready, _range, _list,
 * MPI_Parrived): each rank sends to its right neighbour in 8 partitions, marked ready
 * out of order by threads, and receives from its left in 4 (the counts differ, the
 * sizes agree), three starts in a row; a point-to-point receive of any tag on the same
 * communicator never takes a partitioned message; a strided datatype; requests on one
 * peer and tag started out of the order they were made match by that order;
 * MPI_PROC_NULL; bad partitions refused. Any number of ranks. */
#include <pthread.h>
#include <string.h>

#include "check.h"

#define N 64
#define SENDPARTS 8
#define RECVPARTS 4

struct mark {
  MPI_Request req;
  int first;
};

/* Marks partitions first, first + 2, ... ready (two threads take the odd and even). */
static void *marker(void *arg) {
  struct mark *m = arg;
  for (int p = SENDPARTS - 2 + m->first; p >= 0; p -= 2) MPI_Pready(p, m->req);
  return NULL;
}

int main(int argc, char **argv) {
  int provided, rank, size, cls = -1;
  OK(MPI_Init_thread(&argc, &argv, MPI_THREAD_MULTIPLE, &provided));
  CHECK(provided == MPI_THREAD_MULTIPLE, "provided %d", provided);
  OK(MPI_Comm_rank(MPI_COMM_WORLD, &rank));
  OK(MPI_Comm_size(MPI_COMM_WORLD, &size));
  OK(MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_RETURN));
  OK(MPI_Comm_set_errhandler(MPI_COMM_SELF, MPI_ERRORS_RETURN));
  int right = (rank + 1) % size, left = (rank + size - 1) % size;
  int out[N], in[N];
  MPI_Request sreq, rreq;
  OK(MPI_Psend_init(out, SENDPARTS, N / SENDPARTS, MPI_INT, right, 7, MPI_COMM_WORLD,
                    MPI_INFO_NULL, &sreq));
  OK(MPI_Precv_init(in, RECVPARTS, N / RECVPARTS, MPI_INT, left, 7, MPI_COMM_WORLD,
                    MPI_INFO_NULL, &rreq));
  for (int round = 0; round < 3; round++) {
    for (int i = 0; i < N; i++) out[i] = 1000 * round + 100 * rank + i, in[i] = -1;
    /* A receive of any tag posted first: the partitioned message is not for it. */
    int plain = -1;
    MPI_Request preq;
    OK(MPI_Irecv(&plain, 1, MPI_INT, MPI_ANY_SOURCE, MPI_ANY_TAG, MPI_COMM_WORLD, &preq));
    OK(MPI_Start(&rreq));
    OK(MPI_Start(&sreq));
    struct mark m0 = {sreq, 0}, m1 = {sreq, 1};
    pthread_t t0, t1;
    CHECK(pthread_create(&t0, NULL, marker, &m0) == 0, "pthread_create");
    CHECK(pthread_create(&t1, NULL, marker, &m1) == 0, "pthread_create");
    int got = 0, flag = 0;
    while (!got) {
      OK(MPI_Parrived(rreq, RECVPARTS - 1, &flag));
      if (flag) {
        for (int i = 3 * N / 4; i < N; i++)
          CHECK(in[i] == 1000 * round + 100 * left + i, "round %d: in[%d] = %d", round, i, in[i]);
        got = 1;
      }
    }
    pthread_join(t0, NULL);
    pthread_join(t1, NULL);
    OK(MPI_Wait(&sreq, MPI_STATUS_IGNORE));
    OK(MPI_Wait(&rreq, MPI_STATUS_IGNORE));
    for (int i = 0; i < N; i++)
      CHECK(in[i] == 1000 * round + 100 * left + i, "round %d: in[%d] = %d", round, i, in[i]);
    /* No rank sends its plain message before every rank tested its receive. */
    int done = -1;
    OK(MPI_Test(&preq, &done, MPI_STATUS_IGNORE));
    CHECK(!done, "a receive of any tag took a partitioned message (round %d)", round);
    OK(MPI_Barrier(MPI_COMM_WORLD));
    OK(MPI_Send(&rank, 1, MPI_INT, right, 1, MPI_COMM_WORLD));
    OK(MPI_Wait(&preq, MPI_STATUS_IGNORE));
    CHECK(plain == left, "plain message %d", plain);
  }

  /* Pready_range and Pready_list, on a strided type (every other int). */
  MPI_Datatype vec, every_other;
  OK(MPI_Type_vector(4, 1, 2, MPI_INT, &vec));
  OK(MPI_Type_create_resized(vec, 0, 8 * sizeof(int), &every_other));
  OK(MPI_Type_commit(&every_other));
  OK(MPI_Type_free(&vec));
  int sbuf[32], rbuf[32];
  for (int i = 0; i < 32; i++) sbuf[i] = rank * 100 + i, rbuf[i] = -1;
  MPI_Request s2, r2;
  /* 4 partitions of one vector (8 ints of extent, 4 of data) each. */
  OK(MPI_Psend_init(sbuf, 4, 1, every_other, right, 8, MPI_COMM_WORLD, MPI_INFO_NULL, &s2));
  OK(MPI_Precv_init(rbuf, 2, 2, every_other, left, 8, MPI_COMM_WORLD, MPI_INFO_NULL, &r2));
  MPI_Request both[2] = {r2, s2};
  OK(MPI_Startall(2, both));
  int list[2] = {3, 0};
  OK(MPI_Pready_list(2, list, s2));
  int rc = MPI_Pready(0, s2);
  OK(MPI_Error_class(rc, &cls));
  CHECK(cls == MPI_ERR_ARG, "a partition marked twice: class %d", cls);
  rc = MPI_Pready(4, s2);
  OK(MPI_Error_class(rc, &cls));
  CHECK(cls == MPI_ERR_ARG, "partition 4 of 4: class %d", cls);
  OK(MPI_Pready_range(1, 2, s2));
  OK(MPI_Waitall(2, both, MPI_STATUSES_IGNORE));
  for (int i = 0; i < 32; i++) {
    int want = i % 2 == 0 ? left * 100 + i : -1;
    CHECK(rbuf[i] == want, "strided: rbuf[%d] = %d, want %d", i, rbuf[i], want);
  }
  OK(MPI_Request_free(&s2));
  OK(MPI_Request_free(&r2));
  OK(MPI_Type_free(&every_other));

  /* Three requests on one peer and tag, matched by the order they were made whatever
   * the order they are started in: sends started C, A, B, receives B, C, A; and a
   * fourth on another tag, made first and started last. Each receive gets its own
   * send's data and the program's tag in its status. */
  int xa[4] = {1, 1, 1, 1}, xb[4] = {2, 2, 2, 2}, xc[4] = {3, 3, 3, 3}, xd[4] = {4, 4, 4, 4};
  int ya[4], yb[4], yc[4], yd[4];
  MPI_Request sa, sb, sc, sd, ra, rb, rc_, rd;
  OK(MPI_Psend_init(xd, 1, 4, MPI_INT, right, 12, MPI_COMM_WORLD, MPI_INFO_NULL, &sd));
  OK(MPI_Psend_init(xa, 1, 4, MPI_INT, right, 11, MPI_COMM_WORLD, MPI_INFO_NULL, &sa));
  OK(MPI_Psend_init(xb, 1, 4, MPI_INT, right, 11, MPI_COMM_WORLD, MPI_INFO_NULL, &sb));
  OK(MPI_Psend_init(xc, 1, 4, MPI_INT, right, 11, MPI_COMM_WORLD, MPI_INFO_NULL, &sc));
  OK(MPI_Precv_init(ya, 1, 4, MPI_INT, left, 11, MPI_COMM_WORLD, MPI_INFO_NULL, &ra));
  OK(MPI_Precv_init(yb, 1, 4, MPI_INT, left, 11, MPI_COMM_WORLD, MPI_INFO_NULL, &rb));
  OK(MPI_Precv_init(yc, 1, 4, MPI_INT, left, 11, MPI_COMM_WORLD, MPI_INFO_NULL, &rc_));
  OK(MPI_Precv_init(yd, 1, 4, MPI_INT, left, 12, MPI_COMM_WORLD, MPI_INFO_NULL, &rd));
  OK(MPI_Start(&rb));
  OK(MPI_Start(&sc));
  OK(MPI_Pready(0, sc));
  OK(MPI_Start(&rc_));
  OK(MPI_Start(&sa));
  OK(MPI_Pready(0, sa));
  OK(MPI_Start(&ra));
  OK(MPI_Start(&sb));
  OK(MPI_Pready(0, sb));
  OK(MPI_Start(&rd));
  OK(MPI_Start(&sd));
  OK(MPI_Pready(0, sd));
  MPI_Request all[8] = {sa, sb, sc, sd, ra, rb, rc_, rd};
  MPI_Status sts[8];
  OK(MPI_Waitall(8, all, sts));
  int *ys[4] = {ya, yb, yc, yd};
  for (int k = 0; k < 4; k++) {
    for (int i = 0; i < 4; i++) CHECK(ys[k][i] == k + 1, "request %c got %d, want %d", 'A' + k, ys[k][i], k + 1);
    CHECK(sts[4 + k].MPI_SOURCE == left && sts[4 + k].MPI_TAG == (k == 3 ? 12 : 11),
          "request %c: status source %d tag %d", 'A' + k, sts[4 + k].MPI_SOURCE, sts[4 + k].MPI_TAG);
  }
  OK(MPI_Request_free(&sa));
  OK(MPI_Request_free(&sb));
  OK(MPI_Request_free(&sc));
  OK(MPI_Request_free(&sd));
  OK(MPI_Request_free(&ra));
  OK(MPI_Request_free(&rb));
  OK(MPI_Request_free(&rc_));
  OK(MPI_Request_free(&rd));

  /* MPI_PROC_NULL: both complete at once. */
  MPI_Request n2[2];
  OK(MPI_Psend_init(out, 2, 1, MPI_INT, MPI_PROC_NULL, 0, MPI_COMM_WORLD, MPI_INFO_NULL, &n2[0]));
  OK(MPI_Precv_init(in, 2, 1, MPI_INT, MPI_PROC_NULL, 0, MPI_COMM_WORLD, MPI_INFO_NULL, &n2[1]));
  OK(MPI_Startall(2, n2));
  OK(MPI_Pready_range(0, 1, n2[0]));
  OK(MPI_Waitall(2, n2, MPI_STATUSES_IGNORE));
  OK(MPI_Request_free(&n2[0]));
  OK(MPI_Request_free(&n2[1]));

  /* Wildcards and an ordinary request are refused. */
  MPI_Request bad;
  rc = MPI_Precv_init(in, 1, 1, MPI_INT, MPI_ANY_SOURCE, 0, MPI_COMM_WORLD, MPI_INFO_NULL, &bad);
  OK(MPI_Error_class(rc, &cls));
  CHECK(cls == MPI_ERR_RANK, "MPI_ANY_SOURCE: class %d", cls);
  OK(MPI_Irecv(in, 1, MPI_INT, rank, 3, MPI_COMM_WORLD, &bad));
  rc = MPI_Pready(0, bad);
  OK(MPI_Error_class(rc, &cls));
  CHECK(cls == MPI_ERR_REQUEST, "MPI_Pready of a receive: class %d", cls);
  OK(MPI_Send(out, 1, MPI_INT, rank, 3, MPI_COMM_WORLD));
  OK(MPI_Wait(&bad, MPI_STATUS_IGNORE));

  OK(MPI_Request_free(&sreq));
  OK(MPI_Request_free(&rreq));
  OK(MPI_Barrier(MPI_COMM_WORLD));
  if (rank == 0) printf("ok partitioned %d ranks\n", size);
  OK(MPI_Finalize());
  return 0;
}
