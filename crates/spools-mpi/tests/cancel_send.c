/* MPI_Cancel of sends: a wait for a cancelled send must end at once (MPI). A send that
 * already went (a small one, received) completes as sent; a synchronous send nobody
 * receives yet is refused at the wait with MPI_ERR_UNSUPPORTED_OPERATION (Spools does
 * not take sends back; MPI 4.1 deprecates cancelling them) instead of waiting for good;
 * a cancelled send never waited for (freed) is no error; MPI_Waitany and MPI_Waitsome
 * refuse it too, and so does a loop of MPI_Test (after a bounded number of tests).
 * 2 ranks. */
#include "check.h"

int main(int argc, char **argv) {
  int rank, size, x = 7, y = 0, cancelled = -1, cls = -1;
  OK(MPI_Init(&argc, &argv));
  OK(MPI_Comm_rank(MPI_COMM_WORLD, &rank));
  OK(MPI_Comm_size(MPI_COMM_WORLD, &size));
  CHECK(size == 2, "wants 2 ranks, got %d", size);
  OK(MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_RETURN));
  MPI_Request req;
  MPI_Status st;
  if (rank == 0) {
    /* Received before the cancel: it completes as sent. */
    OK(MPI_Send(&x, 1, MPI_INT, 1, 1, MPI_COMM_WORLD));
    OK(MPI_Recv(&y, 1, MPI_INT, 1, 2, MPI_COMM_WORLD, MPI_STATUS_IGNORE));
    /* Unmatched synchronous send, cancelled: the wait ends with the refusal. */
    OK(MPI_Issend(&x, 1, MPI_INT, 1, 3, MPI_COMM_WORLD, &req));
    OK(MPI_Cancel(&req));
    int rc = MPI_Wait(&req, &st);
    CHECK(rc != MPI_SUCCESS, "the wait for a cancelled unmatched send succeeded");
    OK(MPI_Error_class(rc, &cls));
    CHECK(cls == MPI_ERR_UNSUPPORTED_OPERATION, "error class %d", cls);
    /* Another, cancelled and freed: no error. */
    OK(MPI_Issend(&x, 1, MPI_INT, 1, 4, MPI_COMM_WORLD, &req));
    OK(MPI_Cancel(&req));
    OK(MPI_Request_free(&req));
    /* The waits for any and for some refuse it too, rather than wait for good. */
    MPI_Request two[2] = {MPI_REQUEST_NULL, MPI_REQUEST_NULL};
    int idx = -1, outcount = -1, idxs[2];
    MPI_Status sts[2];
    OK(MPI_Issend(&x, 1, MPI_INT, 1, 7, MPI_COMM_WORLD, &two[1]));
    OK(MPI_Cancel(&two[1]));
    rc = MPI_Waitany(2, two, &idx, &st);
    CHECK(rc != MPI_SUCCESS && idx == 1, "MPI_Waitany on a cancelled send: rc %d index %d", rc, idx);
    OK(MPI_Error_class(rc, &cls));
    CHECK(cls == MPI_ERR_UNSUPPORTED_OPERATION, "MPI_Waitany: error class %d", cls);
    CHECK(two[1] == MPI_REQUEST_NULL, "MPI_Waitany left the refused request");
    OK(MPI_Issend(&x, 1, MPI_INT, 1, 8, MPI_COMM_WORLD, &two[0]));
    OK(MPI_Cancel(&two[0]));
    rc = MPI_Waitsome(2, two, &outcount, idxs, sts);
    CHECK(rc == MPI_ERR_IN_STATUS && outcount == 1 && idxs[0] == 0,
          "MPI_Waitsome on a cancelled send: rc %d outcount %d", rc, outcount);
    OK(MPI_Error_class(sts[0].MPI_ERROR, &cls));
    CHECK(cls == MPI_ERR_UNSUPPORTED_OPERATION, "MPI_Waitsome: error class %d", cls);
    /* A loop of tests ends too: a test reports it complete, with the refusal. */
    OK(MPI_Issend(&x, 1, MPI_INT, 1, 9, MPI_COMM_WORLD, &req));
    OK(MPI_Cancel(&req));
    int flag = 0, tests = 0;
    do {
      rc = MPI_Test(&req, &flag, &st);
      tests++;
    } while (!flag && rc == MPI_SUCCESS && tests < 1000000);
    CHECK(flag && rc != MPI_SUCCESS, "MPI_Test loop on a cancelled send: flag %d rc %d after %d",
          flag, rc, tests);
    OK(MPI_Error_class(rc, &cls));
    CHECK(cls == MPI_ERR_UNSUPPORTED_OPERATION, "MPI_Test: error class %d", cls);
    /* Rank 1 takes them all now, then says so. */
    OK(MPI_Send(&x, 1, MPI_INT, 1, 5, MPI_COMM_WORLD));
    OK(MPI_Recv(&y, 1, MPI_INT, 1, 6, MPI_COMM_WORLD, MPI_STATUS_IGNORE));
    printf("ok cancel_send\n");
  } else {
    OK(MPI_Isend(&x, 1, MPI_INT, 0, 2, MPI_COMM_WORLD, &req));
    OK(MPI_Recv(&y, 1, MPI_INT, 0, 1, MPI_COMM_WORLD, MPI_STATUS_IGNORE));
    OK(MPI_Cancel(&req));
    OK(MPI_Wait(&req, &st));
    OK(MPI_Test_cancelled(&st, &cancelled));
    CHECK(cancelled == 0, "a sent message reported cancelled");
    OK(MPI_Recv(&y, 1, MPI_INT, 0, 5, MPI_COMM_WORLD, MPI_STATUS_IGNORE));
    OK(MPI_Recv(&y, 1, MPI_INT, 0, 3, MPI_COMM_WORLD, MPI_STATUS_IGNORE));
    OK(MPI_Recv(&y, 1, MPI_INT, 0, 4, MPI_COMM_WORLD, MPI_STATUS_IGNORE));
    OK(MPI_Recv(&y, 1, MPI_INT, 0, 7, MPI_COMM_WORLD, MPI_STATUS_IGNORE));
    OK(MPI_Recv(&y, 1, MPI_INT, 0, 8, MPI_COMM_WORLD, MPI_STATUS_IGNORE));
    OK(MPI_Recv(&y, 1, MPI_INT, 0, 9, MPI_COMM_WORLD, MPI_STATUS_IGNORE));
    OK(MPI_Send(&x, 1, MPI_INT, 0, 6, MPI_COMM_WORLD));
  }
  OK(MPI_Finalize());
  return 0;
}
