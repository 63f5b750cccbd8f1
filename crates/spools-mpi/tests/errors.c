/* Error paths under MPI_ERRORS_RETURN: truncation (status and class), invalid ranks,
 * tags, communicators, datatypes and roots, an uncommitted datatype, freeing a
 * predefined operator or datatype, a function Spools does not implement (its class and
 * a message naming it), a user error handler, and the error strings. 2 ranks. */
#include <string.h>
#include "check.h"

static int calls;
static void handler(MPI_Comm *comm, int *code, ...) {
  (void)comm;
  int class;
  MPI_Error_class(*code, &class);
  if (class == MPI_ERR_RANK) calls++;
}

static int class_of(int rc) {
  int c = -1;
  MPI_Error_class(rc, &c);
  return c;
}

int main(int argc, char **argv) {
  int rank, size;
  OK(MPI_Init(&argc, &argv));
  OK(MPI_Comm_rank(MPI_COMM_WORLD, &rank));
  OK(MPI_Comm_size(MPI_COMM_WORLD, &size));
  MPI_Errhandler eh;
  OK(MPI_Comm_get_errhandler(MPI_COMM_WORLD, &eh));
  CHECK(eh == MPI_ERRORS_ARE_FATAL, "default handler %p", (void *)eh);
  OK(MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_RETURN));
  OK(MPI_Comm_set_errhandler(MPI_COMM_SELF, MPI_ERRORS_RETURN));

  /* Truncation: 8 ints into room for 4. */
  if (rank == 0) {
    int eight[8] = {1, 2, 3, 4, 5, 6, 7, 8};
    OK(MPI_Send(eight, 8, MPI_INT, 1, 1, MPI_COMM_WORLD));
  } else if (rank == 1) {
    int four[6] = {0, 0, 0, 0, -7, -7};
    MPI_Status st;
    int rc = MPI_Recv(four, 4, MPI_INT, 0, 1, MPI_COMM_WORLD, &st);
    CHECK(class_of(rc) == MPI_ERR_TRUNCATE, "truncation rc %d class %d", rc, class_of(rc));
    CHECK(four[4] == -7 && four[5] == -7, "wrote past the buffer");
    CHECK(st.MPI_SOURCE == 0 && st.MPI_TAG == 1, "truncated status %d %d", st.MPI_SOURCE, st.MPI_TAG);
    char msg[MPI_MAX_ERROR_STRING];
    int len;
    OK(MPI_Error_string(rc, msg, &len));
    CHECK(len > 0 && strstr(msg, "truncated") != NULL, "message %s", msg);
  }

  int x = 0;
  int rc = MPI_Send(&x, 1, MPI_INT, size, 0, MPI_COMM_WORLD);
  CHECK(class_of(rc) == MPI_ERR_RANK, "bad rank class %d", class_of(rc));
  rc = MPI_Send(&x, 1, MPI_INT, -7, 0, MPI_COMM_WORLD);
  CHECK(class_of(rc) == MPI_ERR_RANK, "negative rank class %d", class_of(rc));
  rc = MPI_Send(&x, 1, MPI_INT, 0, -5, MPI_COMM_WORLD);
  CHECK(class_of(rc) == MPI_ERR_TAG, "bad tag class %d", class_of(rc));
  rc = MPI_Send(&x, -1, MPI_INT, 0, 0, MPI_COMM_WORLD);
  CHECK(class_of(rc) == MPI_ERR_COUNT, "bad count class %d", class_of(rc));
  rc = MPI_Send(&x, 1, (MPI_Datatype)0x7777, 0, 0, MPI_COMM_WORLD);
  CHECK(class_of(rc) == MPI_ERR_TYPE, "bad type class %d", class_of(rc));
  rc = MPI_Bcast(&x, 1, MPI_INT, size + 3, MPI_COMM_WORLD);
  CHECK(class_of(rc) == MPI_ERR_ROOT, "bad root class %d", class_of(rc));
  rc = MPI_Allreduce(MPI_IN_PLACE, &x, 1, MPI_DOUBLE_INT, MPI_SUM, MPI_COMM_WORLD);
  CHECK(class_of(rc) == MPI_ERR_OP, "sum on a pair type class %d", class_of(rc));
  int n;
  rc = MPI_Comm_size((MPI_Comm)0x12345, &n); /* errors on an invalid communicator go to WORLD's handler */
  CHECK(class_of(rc) == MPI_ERR_COMM, "bad comm class %d", class_of(rc));
  MPI_Datatype loose;
  OK(MPI_Type_contiguous(2, MPI_INT, &loose));
  rc = MPI_Send(&x, 1, loose, 0, 0, MPI_COMM_WORLD);
  CHECK(class_of(rc) == MPI_ERR_TYPE, "uncommitted type class %d", class_of(rc));
  OK(MPI_Type_free(&loose));

  /* Predefined handles cannot be freed: each in its class, saying so. */
  MPI_Op sum = MPI_SUM;
  rc = MPI_Op_free(&sum);
  CHECK(class_of(rc) == MPI_ERR_OP && sum == MPI_SUM, "Op_free(MPI_SUM) class %d", class_of(rc));
  char why[MPI_MAX_ERROR_STRING];
  int why_len;
  OK(MPI_Error_string(rc, why, &why_len));
  CHECK(strstr(why, "predefined") && strstr(why, "cannot be freed"), "Op_free(MPI_SUM): %s", why);
  MPI_Datatype dint = MPI_INT;
  rc = MPI_Type_free(&dint);
  CHECK(class_of(rc) == MPI_ERR_TYPE, "Type_free(MPI_INT) class %d", class_of(rc));
  OK(MPI_Error_string(rc, why, &why_len));
  CHECK(strstr(why, "predefined") && strstr(why, "cannot be freed"), "Type_free(MPI_INT): %s", why);

  /* A function Spools does not implement: its class, and a message naming it. */
  rc = MPI_Abi_set_fortran_info(MPI_INFO_NULL);
  CHECK(class_of(rc) == MPI_ERR_UNSUPPORTED_OPERATION, "unsupported class %d", class_of(rc));
  char msg[MPI_MAX_ERROR_STRING];
  int len;
  OK(MPI_Error_string(rc, msg, &len));
  CHECK(strstr(msg, "MPI_Abi_set_fortran_info") && strstr(msg, "not supported"),
        "unsupported message: %s", msg);
  rc = PMPI_Abi_set_fortran_info(MPI_INFO_NULL);
  CHECK(class_of(rc) == MPI_ERR_UNSUPPORTED_OPERATION, "PMPI unsupported class %d", class_of(rc));

  /* A user error handler sees the error, then the call returns the code. */
  MPI_Errhandler mine;
  OK(MPI_Comm_create_errhandler(handler, &mine));
  OK(MPI_Comm_set_errhandler(MPI_COMM_WORLD, mine));
  rc = MPI_Send(&x, 1, MPI_INT, size + 1, 0, MPI_COMM_WORLD);
  CHECK(class_of(rc) == MPI_ERR_RANK && calls == 1, "user handler calls %d", calls);
  OK(MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_RETURN));
  OK(MPI_Errhandler_free(&mine));

  OK(MPI_Error_string(MPI_ERR_TRUNCATE, msg, &len));
  CHECK(strcmp(msg, "message truncated") == 0, "class string %s", msg);
  rc = MPI_Error_class(-12, &n);
  CHECK(rc != MPI_SUCCESS, "Error_class of a bad code succeeded");

  OK(MPI_Barrier(MPI_COMM_WORLD));
  if (rank == 0) printf("ok errors %d ranks\n", size);
  OK(MPI_Finalize());
  return 0;
}
