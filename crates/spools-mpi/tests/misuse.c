/* Erroneous calls that Spools detects before any communication, so that every rank
 * gets the error and none waits: a collective's send buffer that is its receive buffer
 * (MPI_ERR_BUFFER, blocking and non-blocking, and at the root only where only the root's
 * receive counts), MPI_Comm_create with a group not within the communicator
 * (MPI_ERR_GROUP), an RMA access outside an epoch and a lock inside an access epoch
 * (MPI_ERR_RMA_SYNC), a gather or scatter root whose own part is not its receive
 * block's length (MPI_ERR_TRUNCATE, nothing written past the buffer), a Cartesian grid
 * too large (MPI_COMM_NULL written); and where an error of no communicator goes: to
 * MPI_COMM_WORLD's handler until the program sets MPI_COMM_SELF's, then to that one.
 * After each, a correct collective still gives the right result. 2 or more ranks. */
#include <string.h>
#include "check.h"

static int class_of(int rc) {
  int c = -1;
  MPI_Error_class(rc, &c);
  return c;
}

static int self_calls, world_calls;
static void on_self(MPI_Comm *comm, int *code, ...) {
  (void)comm;
  (void)code;
  self_calls++;
}
static void on_world(MPI_Comm *comm, int *code, ...) {
  (void)comm;
  (void)code;
  world_calls++;
}

/* A correct allreduce after an error: nothing of the refused call is left. */
static void still_works(int size) {
  int one = 1, sum = 0;
  OK(MPI_Allreduce(&one, &sum, 1, MPI_INT, MPI_SUM, MPI_COMM_WORLD));
  CHECK(sum == size, "allreduce after an error gave %d", sum);
}

int main(int argc, char **argv) {
  int rank, size;
  OK(MPI_Init(&argc, &argv));
  OK(MPI_Comm_rank(MPI_COMM_WORLD, &rank));
  OK(MPI_Comm_size(MPI_COMM_WORLD, &size));

  /* An error of no communicator, MPI_COMM_SELF's handler never set: MPI_COMM_WORLD's
   * handler decides (a user handler, called once, and the code returned). */
  MPI_Errhandler weh, seh;
  OK(MPI_Comm_create_errhandler(on_world, &weh));
  OK(MPI_Comm_set_errhandler(MPI_COMM_WORLD, weh));
  int rc = MPI_Type_contiguous(1, MPI_INT, NULL);
  CHECK(class_of(rc) == MPI_ERR_ARG && world_calls == 1 && self_calls == 0,
        "no-object error before MPI_COMM_SELF's handler: class %d, world %d, self %d",
        class_of(rc), world_calls, self_calls);
  /* Once the program sets MPI_COMM_SELF's handler, that one decides (MPI 4.1, 9.3). */
  OK(MPI_Comm_create_errhandler(on_self, &seh));
  OK(MPI_Comm_set_errhandler(MPI_COMM_SELF, seh));
  rc = MPI_Type_contiguous(1, MPI_INT, NULL);
  CHECK(class_of(rc) == MPI_ERR_ARG && world_calls == 1 && self_calls == 1,
        "no-object error after: class %d, world %d, self %d", class_of(rc), world_calls,
        self_calls);
  OK(MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_RETURN));
  OK(MPI_Comm_set_errhandler(MPI_COMM_SELF, MPI_ERRORS_RETURN));
  OK(MPI_Errhandler_free(&weh));
  OK(MPI_Errhandler_free(&seh));

  /* Aliased buffers. */
  int buf[64];
  for (int i = 0; i < 64; i++) buf[i] = i;
  rc = MPI_Allreduce(buf, buf, 1, MPI_INT, MPI_SUM, MPI_COMM_WORLD);
  CHECK(class_of(rc) == MPI_ERR_BUFFER, "aliased allreduce: class %d", class_of(rc));
  MPI_Request req = MPI_REQUEST_NULL;
  rc = MPI_Iallreduce(buf, buf, 1, MPI_INT, MPI_SUM, MPI_COMM_WORLD, &req);
  CHECK(class_of(rc) == MPI_ERR_BUFFER && req == MPI_REQUEST_NULL,
        "aliased iallreduce: class %d", class_of(rc));
  rc = MPI_Allgather(&buf[rank], 1, MPI_INT, buf, 1, MPI_INT, MPI_COMM_WORLD);
  CHECK(class_of(rc) == MPI_ERR_BUFFER, "allgather from its own block: class %d",
        class_of(rc));
  rc = MPI_Alltoall(buf, 1, MPI_INT, buf, 1, MPI_INT, MPI_COMM_WORLD);
  CHECK(class_of(rc) == MPI_ERR_BUFFER, "aliased alltoall: class %d", class_of(rc));
  rc = MPI_Scan(buf, buf, 1, MPI_INT, MPI_SUM, MPI_COMM_WORLD);
  CHECK(class_of(rc) == MPI_ERR_BUFFER, "aliased scan: class %d", class_of(rc));
  if (rank == 0) {
    /* Only the root's receive counts: the others are not called. */
    rc = MPI_Gather(buf, 1, MPI_INT, buf, 1, MPI_INT, 0, MPI_COMM_WORLD);
    CHECK(class_of(rc) == MPI_ERR_BUFFER, "aliased gather root: class %d", class_of(rc));
    rc = MPI_Reduce(buf, buf, 1, MPI_INT, MPI_SUM, 0, MPI_COMM_WORLD);
    CHECK(class_of(rc) == MPI_ERR_BUFFER, "aliased reduce root: class %d", class_of(rc));
  }
  /* Aliasing with nothing to send is no error, and MPI_IN_PLACE never is. */
  OK(MPI_Allreduce(buf, buf, 0, MPI_INT, MPI_SUM, MPI_COMM_WORLD));
  {
    int *zeros = calloc((size_t)size * 2, sizeof(int));
    OK(MPI_Alltoallv(buf, zeros, zeros + size, MPI_INT, buf, zeros, zeros + size, MPI_INT,
                     MPI_COMM_WORLD));
    free(zeros);
  }
  {
    /* One buffer, sent from its first half and received into its second by the
     * displacements: no alias, it works. */
    int *one = malloc(sizeof(int) * (size_t)size * 2);
    int *sc = malloc(sizeof(int) * (size_t)size * 4);
    int *sd = sc + size, *rc_ = sc + 2 * size, *rd = sc + 3 * size;
    for (int i = 0; i < size; i++) {
      one[i] = rank * 100 + i;
      one[size + i] = -1;
      sc[i] = rc_[i] = 1;
      sd[i] = i;
      rd[i] = size + i;
    }
    OK(MPI_Alltoallv(one, sc, sd, MPI_INT, one, rc_, rd, MPI_INT, MPI_COMM_WORLD));
    for (int i = 0; i < size; i++)
      CHECK(one[size + i] == i * 100 + rank, "alltoallv within one buffer: %d from %d",
            one[size + i], i);
    /* A gatherv root whose blocks start past the send part at the buffer's head. */
    int *rcounts = malloc(sizeof(int) * (size_t)size * 2), *displs = rcounts + size;
    for (int i = 0; i < size; i++) {
      rcounts[i] = 1;
      displs[i] = 1 + i;
    }
    one[0] = rank + 7;
    OK(MPI_Gatherv(one, 1, MPI_INT, one, rcounts, displs, MPI_INT, 0, MPI_COMM_WORLD));
    if (rank == 0)
      for (int i = 0; i < size; i++)
        CHECK(one[1 + i] == i + 7, "gatherv past the send part: %d from %d", one[1 + i], i);
    free(rcounts);
    free(sc);
    free(one);
  }
  int v = rank;
  OK(MPI_Allreduce(MPI_IN_PLACE, &v, 1, MPI_INT, MPI_SUM, MPI_COMM_WORLD));
  CHECK(v == size * (size - 1) / 2, "in place allreduce gave %d", v);
  still_works(size);

  /* MPI_Comm_create with a group holding a rank outside the communicator. */
  MPI_Comm half;
  OK(MPI_Comm_split(MPI_COMM_WORLD, rank == 0, rank, &half));
  MPI_Group wg;
  OK(MPI_Comm_group(MPI_COMM_WORLD, &wg));
  MPI_Comm bad = MPI_COMM_WORLD;
  OK(MPI_Comm_set_errhandler(half, MPI_ERRORS_RETURN));
  rc = MPI_Comm_create(half, wg, &bad);
  int half_size;
  OK(MPI_Comm_size(half, &half_size));
  if (half_size < size)
    CHECK(class_of(rc) == MPI_ERR_GROUP, "group beyond the communicator: class %d",
          class_of(rc));
  else
    CHECK(rc == MPI_SUCCESS && bad != MPI_COMM_NULL, "a group of all ranks: rc %d", rc);
  if (rc == MPI_SUCCESS) OK(MPI_Comm_free(&bad));
  OK(MPI_Group_free(&wg));
  OK(MPI_Comm_free(&half));
  still_works(size);

  /* RMA epochs. */
  int word = rank, got = -1;
  MPI_Win win;
  OK(MPI_Win_create(&word, sizeof word, sizeof word, MPI_INFO_NULL, MPI_COMM_WORLD, &win));
  OK(MPI_Win_set_errhandler(win, MPI_ERRORS_RETURN));
  int peer = (rank + 1) % size;
  rc = MPI_Get(&got, 1, MPI_INT, peer, 0, 1, MPI_INT, win);
  CHECK(class_of(rc) == MPI_ERR_RMA_SYNC && got == -1, "get outside an epoch: class %d",
        class_of(rc));
  OK(MPI_Win_fence(0, win));
  OK(MPI_Get(&got, 1, MPI_INT, peer, 0, 1, MPI_INT, win));
  OK(MPI_Win_fence(MPI_MODE_NOSUCCEED, win));
  CHECK(got == peer, "get in a fence epoch gave %d", got);
  rc = MPI_Put(&word, 1, MPI_INT, peer, 0, 1, MPI_INT, win);
  CHECK(class_of(rc) == MPI_ERR_RMA_SYNC, "put after the closing fence: class %d",
        class_of(rc));
  /* A lock after a fence ends the fence's epoch: past the unlock nothing is open. */
  OK(MPI_Win_fence(0, win));
  OK(MPI_Win_lock(MPI_LOCK_SHARED, peer, 0, win));
  got = -1;
  OK(MPI_Get(&got, 1, MPI_INT, peer, 0, 1, MPI_INT, win));
  OK(MPI_Win_unlock(peer, win));
  CHECK(got == peer, "get under a lock gave %d", got);
  rc = MPI_Get(&got, 1, MPI_INT, peer, 0, 1, MPI_INT, win);
  CHECK(class_of(rc) == MPI_ERR_RMA_SYNC, "get after the unlock: class %d", class_of(rc));
  /* A lock inside an access epoch. */
  MPI_Group all;
  OK(MPI_Comm_group(MPI_COMM_WORLD, &all));
  OK(MPI_Win_post(all, 0, win));
  OK(MPI_Win_start(all, 0, win));
  rc = MPI_Win_lock(MPI_LOCK_SHARED, peer, 0, win);
  CHECK(class_of(rc) == MPI_ERR_RMA_SYNC, "lock in an access epoch: class %d",
        class_of(rc));
  OK(MPI_Win_complete(win));
  OK(MPI_Win_wait(win));
  OK(MPI_Group_free(&all));
  OK(MPI_Win_free(&win));
  still_works(size);

  /* A gather root whose own part is longer than its receive blocks: it takes part,
   * fails, and writes nothing past its buffer. */
  int parts[4] = {rank, rank, rank, rank};
  int *room = malloc(sizeof(int) * (size_t)(size + 4));
  for (int i = 0; i < size + 4; i++) room[i] = -7;
  rc = MPI_Gather(parts, rank == 0 ? 4 : 1, MPI_INT, room, 1, MPI_INT, 0, MPI_COMM_WORLD);
  if (rank == 0) {
    CHECK(class_of(rc) == MPI_ERR_TRUNCATE, "gather root's long part: class %d",
          class_of(rc));
    for (int i = size; i < size + 4; i++)
      CHECK(room[i] == -7, "gather wrote past the root's buffer at %d: %d", i, room[i]);
  }
  /* A scatter root whose send blocks are longer than its receive. */
  for (int i = 0; i < size + 4; i++) room[i] = 100 + i;
  int one[2] = {-7, -7};
  rc = MPI_Scatter(room, 1, MPI_INT, one, rank == 0 ? 0 : 1, MPI_INT, 0, MPI_COMM_WORLD);
  if (rank == 0)
    CHECK(class_of(rc) == MPI_ERR_TRUNCATE && one[0] == -7,
          "scatter root's short receive: class %d, wrote %d", class_of(rc), one[0]);
  free(room);
  still_works(size);

  /* A grid larger than the communicator: MPI_COMM_NULL in the output. */
  int dims[2] = {size, 2}, periods[2] = {0, 0};
  MPI_Comm cart = MPI_COMM_WORLD;
  rc = MPI_Cart_create(MPI_COMM_WORLD, 2, dims, periods, 0, &cart);
  CHECK(class_of(rc) == MPI_ERR_DIMS && cart == MPI_COMM_NULL,
        "cart too large: class %d, null %d", class_of(rc), cart == MPI_COMM_NULL);
  still_works(size);

  OK(MPI_Finalize());
  if (rank == 0) printf("ok misuse %d ranks\n", size);
  return 0;
}
