/* MPI_Cancel of sends: a wait for a cancelled send must end at once (MPI). A send that
 * already went (a small one, received) completes as sent; a synchronous send nobody
 * receives yet is refused at the wait with MPI_ERR_UNSUPPORTED_OPERATION (Spools does
 * not take sends back; MPI 4.1 deprecates cancelling them) instead of waiting for good;
 * a cancelled send never waited for (freed) is no error. 2 ranks. */
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
    /* Rank 1 takes both now, then says so. */
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
    OK(MPI_Send(&x, 1, MPI_INT, 0, 6, MPI_COMM_WORLD));
  }
  OK(MPI_Finalize());
  return 0;
}
