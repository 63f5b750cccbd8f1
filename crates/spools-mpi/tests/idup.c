/* MPI_Comm_idup without blocking: (1) every rank but 0 starts a dup of the world and
 * then sends synchronously to rank 0, which receives from all before it starts its own
 * dup (a dup made at the call never ends); (2) each rank dups, together, the pair
 * communicators {r, r+1} and {r-1, r}, which overlap around the ring (made one at a
 * time they would wait for each other); (3) the same on an intercommunicator of evens
 * and odds, whose non-leaders start the dup before they send to the remote leader.
 * Every new communicator then carries an allreduce. 4 ranks (any even number >= 4). */
#include "check.h"

static int rank, size;

static void sum_check(MPI_Comm c, int expect, const char *what) {
  int one = 1, got = -1;
  OK(MPI_Allreduce(&one, &got, 1, MPI_INT, MPI_SUM, c));
  CHECK(got == expect, "%s: allreduce gave %d, expected %d", what, got, expect);
}

int main(int argc, char **argv) {
  OK(MPI_Init(&argc, &argv));
  OK(MPI_Comm_rank(MPI_COMM_WORLD, &rank));
  OK(MPI_Comm_size(MPI_COMM_WORLD, &size));
  CHECK(size >= 4 && size % 2 == 0, "wants an even number of ranks >= 4, got %d", size);

  /* (1) Rank 0 dups last. */
  MPI_Comm dup = MPI_COMM_NULL;
  MPI_Request req;
  int buf = rank;
  if (rank == 0) {
    for (int r = 1; r < size; r++)
      OK(MPI_Recv(&buf, 1, MPI_INT, r, 0, MPI_COMM_WORLD, MPI_STATUS_IGNORE));
    OK(MPI_Comm_idup(MPI_COMM_WORLD, &dup, &req));
  } else {
    OK(MPI_Comm_idup(MPI_COMM_WORLD, &dup, &req));
    OK(MPI_Ssend(&buf, 1, MPI_INT, 0, 0, MPI_COMM_WORLD));
  }
  OK(MPI_Wait(&req, MPI_STATUS_IGNORE));
  CHECK(dup != MPI_COMM_NULL, "no communicator after the wait");
  sum_check(dup, size, "dup of the world");

  /* (2) Overlapping pairs: pair[r] = {r, r+1 mod size}, made by splits in turn. */
  MPI_Comm mine = MPI_COMM_NULL, left = MPI_COMM_NULL;
  for (int i = 0; i < size; i++) {
    MPI_Comm c;
    int in = rank == i || rank == (i + 1) % size;
    OK(MPI_Comm_split(MPI_COMM_WORLD, in ? 0 : MPI_UNDEFINED, rank == i ? 0 : 1, &c));
    if (rank == i) mine = c;
    else if (in) left = c;
  }
  MPI_Comm dups[2];
  MPI_Request reqs[2];
  OK(MPI_Comm_idup(mine, &dups[0], &reqs[0]));
  OK(MPI_Comm_idup(left, &dups[1], &reqs[1]));
  OK(MPI_Waitall(2, reqs, MPI_STATUSES_IGNORE));
  /* Blocking allreduces in the order of the pairs' numbers (pair size-1 is rank 0's
   * left one), so that they make no cycle. */
  if (rank == 0) {
    sum_check(dups[0], 2, "dup of this rank's pair");
    sum_check(dups[1], 2, "dup of the left pair");
  } else {
    sum_check(dups[1], 2, "dup of the left pair");
    sum_check(dups[0], 2, "dup of this rank's pair");
  }

  /* (3) Intercommunicator of evens and odds; its non-leaders dup first. */
  MPI_Comm local, ic, icdup;
  OK(MPI_Comm_split(MPI_COMM_WORLD, rank % 2, rank, &local));
  OK(MPI_Intercomm_create(local, 0, MPI_COMM_WORLD, rank % 2 == 0 ? 1 : 0, 7, &ic));
  int lrank, rsize;
  OK(MPI_Comm_rank(ic, &lrank));
  OK(MPI_Comm_remote_size(ic, &rsize));
  if (lrank == 0) {
    for (int r = 1; r < rsize; r++)
      OK(MPI_Recv(&buf, 1, MPI_INT, r, 0, ic, MPI_STATUS_IGNORE));
    OK(MPI_Comm_idup(ic, &icdup, &req));
  } else {
    OK(MPI_Comm_idup(ic, &icdup, &req));
    OK(MPI_Ssend(&buf, 1, MPI_INT, 0, 0, ic));
  }
  OK(MPI_Wait(&req, MPI_STATUS_IGNORE));
  int inter = 0;
  OK(MPI_Comm_test_inter(icdup, &inter));
  CHECK(inter, "the dup of an intercommunicator is not one");
  /* An allreduce on an intercommunicator gives the sum over the remote group. */
  sum_check(icdup, rsize, "dup of the intercommunicator");

  MPI_Comm all[] = {dup, mine, left, dups[0], dups[1], local, ic, icdup};
  for (unsigned i = 0; i < sizeof all / sizeof all[0]; i++) OK(MPI_Comm_free(&all[i]));
  if (rank == 0) printf("ok idup %d ranks\n", size);
  OK(MPI_Finalize());
  return 0;
}
