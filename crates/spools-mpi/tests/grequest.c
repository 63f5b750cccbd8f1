/* Generalized requests (MPI_Grequest_start, MPI_Grequest_complete): a wait ends when
 * another thread completes the request, with the status query_fn gives; query_fn runs
 * at each test and status query that finds it complete, free_fn once, after
 * completion and free, also for a request freed before it completed; cancel_fn is told
 * whether it completed; a callback's error code is what the call returns; the waits
 * for all and any mix them with point-to-point requests. Any number of ranks. */
#include <pthread.h>
#include <string.h>

#include "check.h"

struct state {
  int queries, frees, cancels, cancel_complete, query_rc;
};

static int query_fn(void *extra, MPI_Status *st) {
  struct state *s = extra;
  s->queries++;
  MPI_Status_set_elements(st, MPI_INT, 3);
  MPI_Status_set_cancelled(st, 0);
  st->MPI_SOURCE = 5;
  st->MPI_TAG = 6;
  return s->query_rc;
}

static int free_fn(void *extra) {
  struct state *s = extra;
  s->frees++;
  return MPI_SUCCESS;
}

static int cancel_fn(void *extra, int complete) {
  struct state *s = extra;
  s->cancels++;
  s->cancel_complete = complete;
  return MPI_SUCCESS;
}

static void *completer(void *arg) {
  MPI_Grequest_complete(*(MPI_Request *)arg);
  return NULL;
}

int main(int argc, char **argv) {
  int provided, rank, size, flag = -1, count = -1, cls = -1;
  OK(MPI_Init_thread(&argc, &argv, MPI_THREAD_MULTIPLE, &provided));
  CHECK(provided == MPI_THREAD_MULTIPLE, "provided %d", provided);
  OK(MPI_Comm_rank(MPI_COMM_WORLD, &rank));
  OK(MPI_Comm_size(MPI_COMM_WORLD, &size));
  OK(MPI_Comm_set_errhandler(MPI_COMM_SELF, MPI_ERRORS_RETURN));
  MPI_Status st;

  /* Completed by another thread while this one waits. */
  struct state a = {0};
  MPI_Request r, copy;
  OK(MPI_Grequest_start(query_fn, free_fn, cancel_fn, &a, &r));
  OK(MPI_Test(&r, &flag, &st));
  CHECK(flag == 0 && a.queries == 0, "incomplete request tested complete");
  copy = r;
  pthread_t t;
  CHECK(pthread_create(&t, NULL, completer, &copy) == 0, "pthread_create");
  OK(MPI_Wait(&r, &st));
  pthread_join(t, NULL);
  CHECK(r == MPI_REQUEST_NULL, "the wait left the request");
  OK(MPI_Get_count(&st, MPI_INT, &count));
  CHECK(count == 3 && st.MPI_SOURCE == 5 && st.MPI_TAG == 6,
        "status from query_fn: count %d source %d tag %d", count, st.MPI_SOURCE, st.MPI_TAG);
  CHECK(a.queries == 1 && a.frees == 1, "queries %d frees %d", a.queries, a.frees);

  /* A status query calls query_fn and leaves the request to the wait that frees it;
   * a cancel after completion says so. */
  struct state b = {0};
  OK(MPI_Grequest_start(query_fn, free_fn, cancel_fn, &b, &r));
  OK(MPI_Request_get_status(r, &flag, &st));
  CHECK(flag == 0, "incomplete request reported complete");
  OK(MPI_Grequest_complete(r));
  OK(MPI_Request_get_status(r, &flag, &st));
  CHECK(flag == 1 && b.queries == 1 && b.frees == 0, "get_status: flag %d queries %d frees %d",
        flag, b.queries, b.frees);
  OK(MPI_Cancel(&r));
  CHECK(b.cancels == 1 && b.cancel_complete == 1, "cancel_fn: %d calls, complete %d", b.cancels,
        b.cancel_complete);
  OK(MPI_Wait(&r, MPI_STATUS_IGNORE));
  CHECK(b.queries == 2 && b.frees == 1, "queries %d frees %d", b.queries, b.frees);

  /* Freed before it completes: free_fn runs at MPI_Grequest_complete, query_fn never. */
  struct state c = {0};
  OK(MPI_Grequest_start(query_fn, free_fn, cancel_fn, &c, &r));
  copy = r;
  OK(MPI_Cancel(&r));
  CHECK(c.cancels == 1 && c.cancel_complete == 0, "cancel before completion: complete %d",
        c.cancel_complete);
  OK(MPI_Request_free(&r));
  CHECK(r == MPI_REQUEST_NULL && c.frees == 0, "freed early: frees %d", c.frees);
  OK(MPI_Grequest_complete(copy));
  CHECK(c.frees == 1 && c.queries == 0, "after completion: frees %d queries %d", c.frees,
        c.queries);

  /* query_fn's error code is the wait's, and MPI_ERROR of the waitall's status. */
  struct state d = {0};
  int mine;
  OK(MPI_Add_error_class(&mine));
  d.query_rc = mine;
  OK(MPI_Grequest_start(query_fn, free_fn, cancel_fn, &d, &r));
  OK(MPI_Grequest_complete(r));
  int rc = MPI_Wait(&r, &st);
  CHECK(rc == mine, "the wait returned %d, query_fn %d", rc, mine);
  CHECK(d.frees == 1, "free_fn after a failed query: %d", d.frees);

  /* Mixed with point-to-point requests in MPI_Waitall and MPI_Waitany. */
  struct state e = {0};
  int x = rank, y = -1;
  MPI_Request rs[3];
  MPI_Status sts[3];
  int right = (rank + 1) % size, left = (rank + size - 1) % size, idx = -1;
  OK(MPI_Irecv(&y, 1, MPI_INT, left, 9, MPI_COMM_WORLD, &rs[0]));
  OK(MPI_Grequest_start(query_fn, free_fn, NULL, &e, &rs[1]));
  OK(MPI_Isend(&x, 1, MPI_INT, right, 9, MPI_COMM_WORLD, &rs[2]));
  OK(MPI_Waitany(3, rs, &idx, &st));
  CHECK(idx == 0 || idx == 2, "MPI_Waitany took the incomplete generalized request (%d)", idx);
  copy = rs[1];
  CHECK(pthread_create(&t, NULL, completer, &copy) == 0, "pthread_create");
  OK(MPI_Waitall(3, rs, sts));
  pthread_join(t, NULL);
  CHECK(y == left, "received %d from %d", y, left);
  CHECK(sts[1].MPI_TAG == 6 && e.queries == 1 && e.frees == 1, "waitall: tag %d queries %d frees %d",
        sts[1].MPI_TAG, e.queries, e.frees);

  /* A request that is not generalized is refused by MPI_Grequest_complete. */
  rc = MPI_Grequest_complete(MPI_REQUEST_NULL);
  OK(MPI_Error_class(rc, &cls));
  CHECK(cls == MPI_ERR_REQUEST, "MPI_Grequest_complete(MPI_REQUEST_NULL): class %d", cls);

  OK(MPI_Barrier(MPI_COMM_WORLD));
  if (rank == 0) printf("ok grequest %d ranks\n", size);
  OK(MPI_Finalize());
  return 0;
}
