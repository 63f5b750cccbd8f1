/* MPI_Comm_create and MPI_Comm_compare on intercommunicators. Evens and odds of the
 * world form one intercommunicator; MPI_Comm_create with each side's group reversed
 * gives an intercommunicator in those orders (once a split of the view whose order
 * differs between the sides: two intracommunicators), with one rank a side, and
 * MPI_COMM_NULL for all when one side passes an empty group. MPI_Comm_compare compares
 * the local and the remote groups apart (once as one list: evens|odds and low|high
 * halves were "similar"). 4 ranks (any even number >= 4). */
#include "check.h"

static int rank, size;

/* The world ranks of parity `p`, in order or reversed. */
static int side(int p, int rev, int *out) {
  int n = 0;
  for (int r = p; r < size; r += 2) out[n++] = r;
  if (rev)
    for (int i = 0; i < n / 2; i++) {
      int x = out[i];
      out[i] = out[n - 1 - i];
      out[n - 1 - i] = x;
    }
  return n;
}

/* The world ranks of the remote group of `ic`, by an allgather over it. */
static int remote_members(MPI_Comm ic, int *out) {
  int n;
  OK(MPI_Comm_remote_size(ic, &n));
  OK(MPI_Allgather(&rank, 1, MPI_INT, out, 1, MPI_INT, ic));
  return n;
}

static int compare(MPI_Comm x, MPI_Comm y) {
  int v = -1;
  OK(MPI_Comm_compare(x, y, &v));
  return v;
}

int main(int argc, char **argv) {
  OK(MPI_Init(&argc, &argv));
  OK(MPI_Comm_rank(MPI_COMM_WORLD, &rank));
  OK(MPI_Comm_size(MPI_COMM_WORLD, &size));
  CHECK(size >= 4 && size % 2 == 0, "needs an even number >= 4 of ranks, has %d", size);
  int p = rank % 2, lrank = rank / 2, half = size / 2;
  MPI_Comm local, inter;
  OK(MPI_Comm_split(MPI_COMM_WORLD, p, rank, &local));
  OK(MPI_Intercomm_create(local, 0, MPI_COMM_WORLD, 1 - p, 5, &inter));

  /* Each side's group reversed. */
  MPI_Group lg, rev;
  OK(MPI_Comm_group(inter, &lg));
  int ranks[64], want[64], got[64];
  CHECK(half <= 64, "at most 128 ranks");
  for (int i = 0; i < half; i++) ranks[i] = half - 1 - i;
  OK(MPI_Group_incl(lg, half, ranks, &rev));
  MPI_Comm created;
  OK(MPI_Comm_create(inter, rev, &created));
  CHECK(created != MPI_COMM_NULL, "no communicator");
  int flag = 0, n = -1, r = -1;
  OK(MPI_Comm_test_inter(created, &flag));
  CHECK(flag, "MPI_Comm_create of an intercommunicator gave an intracommunicator");
  OK(MPI_Comm_size(created, &n));
  OK(MPI_Comm_rank(created, &r));
  CHECK(n == half && r == half - 1 - lrank, "size %d rank %d (want %d %d)", n, r, half,
        half - 1 - lrank);
  n = remote_members(created, got);
  side(1 - p, 1, want);
  CHECK(n == half, "remote size %d", n);
  for (int i = 0; i < half; i++)
    CHECK(got[i] == want[i], "remote rank %d is world rank %d, want %d", i, got[i], want[i]);
  /* The same members in other orders: similar; a dup: congruent. */
  CHECK(compare(inter, created) == MPI_SIMILAR, "reversed: %d", compare(inter, created));
  MPI_Comm dup;
  OK(MPI_Comm_dup(inter, &dup));
  CHECK(compare(inter, dup) == MPI_CONGRUENT, "dup: %d", compare(inter, dup));
  CHECK(compare(inter, inter) == MPI_IDENT, "itself: %d", compare(inter, inter));
  CHECK(compare(inter, MPI_COMM_WORLD) == MPI_UNEQUAL, "world: %d",
        compare(inter, MPI_COMM_WORLD));

  /* Low and high halves: the same ranks in all, other groups: unequal. */
  MPI_Comm low, halves;
  int hi = rank >= half;
  OK(MPI_Comm_split(MPI_COMM_WORLD, hi, rank, &low));
  OK(MPI_Intercomm_create(low, 0, MPI_COMM_WORLD, hi ? 0 : half, 6, &halves));
  CHECK(compare(inter, halves) == MPI_UNEQUAL, "evens|odds against low|high: %d",
        compare(inter, halves));
  CHECK(compare(halves, inter) == MPI_UNEQUAL, "low|high against evens|odds: %d",
        compare(halves, inter));

  /* One rank a side: the local rank 0 of each. */
  MPI_Group first;
  int zero = 0;
  OK(MPI_Group_incl(lg, 1, &zero, &first));
  MPI_Comm ones;
  OK(MPI_Comm_create(inter, first, &ones));
  if (lrank == 0) {
    CHECK(ones != MPI_COMM_NULL, "rank 0 of a side got no communicator");
    n = remote_members(ones, got);
    CHECK(n == 1 && got[0] == 1 - p, "one a side: remote %d of %d", got[0], n);
    OK(MPI_Comm_free(&ones));
  } else {
    CHECK(ones == MPI_COMM_NULL, "a rank outside the group got a communicator");
  }
  /* The evens pass an empty group: nobody gets a communicator. */
  MPI_Comm none;
  OK(MPI_Comm_create(inter, p == 0 ? MPI_GROUP_EMPTY : lg, &none));
  CHECK(none == MPI_COMM_NULL, "a communicator with an empty side");

  OK(MPI_Group_free(&first));
  OK(MPI_Group_free(&rev));
  OK(MPI_Group_free(&lg));
  OK(MPI_Comm_free(&halves));
  OK(MPI_Comm_free(&low));
  OK(MPI_Comm_free(&dup));
  OK(MPI_Comm_free(&created));
  OK(MPI_Comm_free(&inter));
  OK(MPI_Comm_free(&local));
  if (rank == 0) printf("ok intercomms %d ranks\n", size);
  OK(MPI_Finalize());
  return 0;
}
