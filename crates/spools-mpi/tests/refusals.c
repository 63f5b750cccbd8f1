/* Refused calls fail on every rank that makes them, at once, and leave no peer waiting:
 * a port opens (a local call), its name goes to the other ranks, and the collective
 * MPI_Comm_accept / MPI_Comm_connect (then MPI_Comm_join and MPI_Comm_spawn) return
 * MPI_ERR_UNSUPPORTED_OPERATION on each rank that calls them, each side alone (no rank
 * of the other side ever calls with it). A refused MPI_Open_port left rank 1 waiting
 * for the name (mpi4py's test_dynproc hung so). Any number of ranks >= 2. */
#include <string.h>
#include "check.h"

static int class_of(int rc) {
  int c = -1;
  MPI_Error_class(rc, &c);
  return c;
}

#define REFUSED(rc, what)                                                             \
  CHECK(class_of(rc) == MPI_ERR_UNSUPPORTED_OPERATION, "%s: rc %d class %d", what,   \
        (rc), class_of(rc))

int main(int argc, char **argv) {
  int rank, size;
  OK(MPI_Init(&argc, &argv));
  OK(MPI_Comm_rank(MPI_COMM_WORLD, &rank));
  OK(MPI_Comm_size(MPI_COMM_WORLD, &size));
  CHECK(size >= 2, "needs 2 ranks, has %d", size);
  OK(MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_RETURN));
  OK(MPI_Comm_set_errhandler(MPI_COMM_SELF, MPI_ERRORS_RETURN));
  /* The ranks other than 0 (MPI_COMM_NULL on rank 0). */
  MPI_Comm rest;
  OK(MPI_Comm_split(MPI_COMM_WORLD, rank == 0 ? MPI_UNDEFINED : 0, rank, &rest));
  if (rest != MPI_COMM_NULL) OK(MPI_Comm_set_errhandler(rest, MPI_ERRORS_RETURN));

  /* Two rounds as mpi4py's test_dynproc: rank 0 accepts on MPI_COMM_SELF while the
   * others connect, then the others accept while rank 0 connects. */
  for (int round = 0; round < 2; round++) {
    int opener = round == 0 ? 0 : 1;
    char port[MPI_MAX_PORT_NAME] = "";
    if (rank == opener) {
      OK(MPI_Open_port(MPI_INFO_NULL, port));
      CHECK(strncmp(port, "spools-port:", 12) == 0, "port name %s", port);
      OK(MPI_Send(port, MPI_MAX_PORT_NAME, MPI_CHAR, 1 - opener, 7, MPI_COMM_WORLD));
    } else if (rank == 1 - opener) {
      OK(MPI_Recv(port, MPI_MAX_PORT_NAME, MPI_CHAR, opener, 7, MPI_COMM_WORLD,
                  MPI_STATUS_IGNORE));
      CHECK(strncmp(port, "spools-port:", 12) == 0, "received port name %s", port);
    }
    MPI_Comm inter = MPI_COMM_NULL;
    int accepting = (round == 0) == (rank == 0);
    if (rank == 0) {
      int rc = accepting ? MPI_Comm_accept(port, MPI_INFO_NULL, 0, MPI_COMM_SELF, &inter)
                         : MPI_Comm_connect(port, MPI_INFO_NULL, 0, MPI_COMM_SELF, &inter);
      REFUSED(rc, accepting ? "accept on self" : "connect on self");
    } else {
      int rc = accepting ? MPI_Comm_accept(port, MPI_INFO_NULL, 0, rest, &inter)
                         : MPI_Comm_connect(port, MPI_INFO_NULL, 0, rest, &inter);
      REFUSED(rc, accepting ? "accept on the rest" : "connect on the rest");
    }
    if (rank == opener) {
      OK(MPI_Close_port(port));
      /* Closed: not a port of this process any more. */
      int rc = MPI_Close_port(port);
      CHECK(class_of(rc) == MPI_ERR_PORT, "second close rc %d class %d", rc, class_of(rc));
    }
  }

  /* MPI_Comm_join on two ranks only, MPI_Comm_spawn on all: each refused at once. */
  if (rank < 2) REFUSED(MPI_Comm_join(-1, &(MPI_Comm){MPI_COMM_NULL}), "join");
  {
    char cmd[] = "true";
    MPI_Comm children;
    int errs[1];
    REFUSED(MPI_Comm_spawn(cmd, MPI_ARGV_NULL, 1, MPI_INFO_NULL, 0, MPI_COMM_WORLD,
                           &children, errs),
            "spawn");
  }
  /* Every rank still meets every other: nobody is left inside a refused call. */
  int one = 1, all = 0;
  OK(MPI_Allreduce(&one, &all, 1, MPI_INT, MPI_SUM, MPI_COMM_WORLD));
  CHECK(all == size, "allreduce %d", all);
  if (rest != MPI_COMM_NULL) OK(MPI_Comm_free(&rest));
  if (rank == 0) printf("ok refusals %d ranks\n", size);
  OK(MPI_Finalize());
  return 0;
}
