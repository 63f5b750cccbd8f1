/* NULL buffers under MPI_ERRORS_RETURN: a NULL buffer (or MPI_IN_PLACE where the
 * argument does not allow it) with a nonzero count of a datatype with bytes is
 * MPI_ERR_BUFFER, not a crash, in every kind of call that moves data: blocking,
 * non-blocking and persistent point-to-point in every mode, Sendrecv(_replace) and
 * their non-blocking forms, matched receives (the message stays for a correct call),
 * collectives blocking, non-blocking and persistent with their v and w forms and
 * neighbourhood ones (every rank passes NULL, and the communicator works after),
 * Reduce_local, Pack and Unpack, one-sided accesses (to this rank's own window, the fast
 * path, and to a peer's) and window creation (one rank's NULL base fails the whole
 * group), MPI-IO reads and writes independent, collective (one rank's NULL buffer fails
 * the whole group), non-blocking and split, and the large-count (_c) forms. What stays
 * allowed: NULL with a zero count, MPI_BOTTOM with a datatype of absolute addresses and
 * with absolute displacements in a w collective, a NULL receive buffer where it is not
 * significant (a reduce's non-root) and the origin of MPI_NO_OP. Rank 0 prints how many
 * calls returned MPI_ERR_BUFFER. Argument: DIR for the file. 2 or 3 ranks. */
#include <string.h>
#include "check.h"

#define PATHLEN 4096

static int rank, size, next, prev, buffer_errors;

static int class_of(int rc) {
  int c = -1;
  MPI_Error_class(rc, &c);
  return c;
}

/* The call must fail with MPI_ERR_BUFFER. */
#define BUF(call)                                                                       \
  do {                                                                                  \
    int rc_ = (call);                                                                   \
    CHECK(class_of(rc_) == MPI_ERR_BUFFER, "%s returned %d (class %d), want MPI_ERR_BUFFER", \
          #call, rc_, class_of(rc_));                                                   \
    buffer_errors++;                                                                    \
  } while (0)

static void point_to_point(void) {
  MPI_Comm w = MPI_COMM_WORLD;
  MPI_Request q = MPI_REQUEST_NULL;
  MPI_Status st;
  int x[4] = {1, 2, 3, 4}, y[4] = {0, 0, 0, 0};

  BUF(MPI_Send(NULL, 4, MPI_INT, next, 0, w));
  BUF(MPI_Ssend(NULL, 4, MPI_INT, next, 0, w));
  BUF(MPI_Rsend(NULL, 4, MPI_INT, next, 0, w));
  BUF(MPI_Bsend(NULL, 4, MPI_INT, next, 0, w));
  BUF(MPI_Send_c(NULL, 4, MPI_INT, next, 0, w));
  BUF(MPI_Ssend_c(NULL, 4, MPI_INT, next, 0, w));
  BUF(MPI_Send(NULL, 4, MPI_INT, MPI_PROC_NULL, 0, w));
  BUF(MPI_Send(MPI_IN_PLACE, 4, MPI_INT, next, 0, w));
  BUF(MPI_Recv(NULL, 4, MPI_INT, prev, 0, w, &st));
  BUF(MPI_Recv_c(NULL, 4, MPI_INT, prev, 0, w, &st));
  BUF(MPI_Recv(NULL, 4, MPI_INT, MPI_ANY_SOURCE, MPI_ANY_TAG, w, &st));
  BUF(MPI_Isend(NULL, 4, MPI_INT, next, 0, w, &q));
  BUF(MPI_Issend(NULL, 4, MPI_INT, next, 0, w, &q));
  BUF(MPI_Irsend(NULL, 4, MPI_INT, next, 0, w, &q));
  BUF(MPI_Ibsend(NULL, 4, MPI_INT, next, 0, w, &q));
  BUF(MPI_Isend_c(NULL, 4, MPI_INT, next, 0, w, &q));
  BUF(MPI_Irecv(NULL, 4, MPI_INT, prev, 0, w, &q));
  BUF(MPI_Irecv_c(NULL, 4, MPI_INT, prev, 0, w, &q));
  BUF(MPI_Send_init(NULL, 4, MPI_INT, next, 0, w, &q));
  BUF(MPI_Ssend_init(NULL, 4, MPI_INT, next, 0, w, &q));
  BUF(MPI_Rsend_init(NULL, 4, MPI_INT, next, 0, w, &q));
  BUF(MPI_Bsend_init(NULL, 4, MPI_INT, next, 0, w, &q));
  BUF(MPI_Send_init_c(NULL, 4, MPI_INT, next, 0, w, &q));
  BUF(MPI_Recv_init(NULL, 4, MPI_INT, prev, 0, w, &q));
  BUF(MPI_Recv_init_c(NULL, 4, MPI_INT, prev, 0, w, &q));
  CHECK(q == MPI_REQUEST_NULL, "a failed call gave a request");
  /* A NULL send buffer fails before the receive is posted (no wait on it), a NULL
   * receive buffer before anything is sent. */
  BUF(MPI_Sendrecv(NULL, 4, MPI_INT, next, 0, y, 4, MPI_INT, prev, 0, w, &st));
  BUF(MPI_Sendrecv(x, 4, MPI_INT, next, 0, NULL, 4, MPI_INT, prev, 0, w, &st));
  BUF(MPI_Sendrecv_c(NULL, 4, MPI_INT, next, 0, y, 4, MPI_INT, prev, 0, w, &st));
  BUF(MPI_Sendrecv_replace(NULL, 4, MPI_INT, next, 0, prev, 0, w, &st));
  BUF(MPI_Sendrecv_replace_c(NULL, 4, MPI_INT, next, 0, prev, 0, w, &st));
  BUF(MPI_Isendrecv(NULL, 4, MPI_INT, next, 0, y, 4, MPI_INT, prev, 0, w, &q));
  BUF(MPI_Isendrecv(x, 4, MPI_INT, next, 0, NULL, 4, MPI_INT, prev, 0, w, &q));
  BUF(MPI_Isendrecv_replace(NULL, 4, MPI_INT, next, 0, prev, 0, w, &q));
  CHECK(q == MPI_REQUEST_NULL, "a failed call gave a request");

  /* Allowed: NULL with nothing in it, and MPI_BOTTOM with absolute addresses. */
  OK(MPI_Sendrecv(NULL, 0, MPI_INT, next, 1, NULL, 0, MPI_INT, prev, 1, w, &st));
  int n = -1;
  OK(MPI_Get_count(&st, MPI_INT, &n));
  CHECK(n == 0 && st.MPI_SOURCE == prev, "empty sendrecv: count %d from %d", n, st.MPI_SOURCE);
  int v = 100 + rank, got = -1, one = 1;
  MPI_Aint at_v, at_got;
  MPI_Datatype tv, tgot, ints[1] = {MPI_INT};
  OK(MPI_Get_address(&v, &at_v));
  OK(MPI_Get_address(&got, &at_got));
  OK(MPI_Type_create_struct(1, &one, &at_v, ints, &tv));
  OK(MPI_Type_create_struct(1, &one, &at_got, ints, &tgot));
  OK(MPI_Type_commit(&tv));
  OK(MPI_Type_commit(&tgot));
  OK(MPI_Sendrecv(MPI_BOTTOM, 1, tv, next, 2, MPI_BOTTOM, 1, tgot, prev, 2, w, &st));
  CHECK(got == 100 + prev, "MPI_BOTTOM sendrecv got %d, want %d", got, 100 + prev);
  OK(MPI_Bcast(MPI_BOTTOM, 1, tv, 0, w));
  CHECK(v == 100, "MPI_BOTTOM bcast gave %d", v);
  OK(MPI_Type_free(&tv));
  OK(MPI_Type_free(&tgot));

  /* A matched message stays for a correct receive after a NULL one. */
  MPI_Message m = MPI_MESSAGE_NULL;
  OK(MPI_Send(x, 4, MPI_INT, next, 5, w));
  OK(MPI_Mprobe(prev, 5, w, &m, &st));
  BUF(MPI_Mrecv(NULL, 4, MPI_INT, &m, &st));
  BUF(MPI_Mrecv_c(NULL, 4, MPI_INT, &m, &st));
  BUF(MPI_Imrecv(NULL, 4, MPI_INT, &m, &q));
  CHECK(m != MPI_MESSAGE_NULL, "the message went with a failed receive");
  OK(MPI_Mrecv(y, 4, MPI_INT, &m, &st));
  CHECK(y[0] == 1 && y[3] == 4, "matched receive got %d %d", y[0], y[3]);
}

static void collectives(void) {
  MPI_Comm w = MPI_COMM_WORLD;
  MPI_Request q = MPI_REQUEST_NULL;
  int x[16], y[16], counts[4], displs[4], bdispls[4];
  MPI_Datatype types[4];
  for (int i = 0; i < 16; i++) x[i] = rank + i, y[i] = -1;
  for (int i = 0; i < 4; i++) counts[i] = 1, displs[i] = i, bdispls[i] = i * 4, types[i] = MPI_INT;
  MPI_Info ni = MPI_INFO_NULL;

  BUF(MPI_Bcast(NULL, 4, MPI_INT, 0, w));
  BUF(MPI_Bcast_c(NULL, 4, MPI_INT, 0, w));
  BUF(MPI_Ibcast(NULL, 4, MPI_INT, 0, w, &q));
  BUF(MPI_Bcast_init(NULL, 4, MPI_INT, 0, w, ni, &q));
  BUF(MPI_Bcast(MPI_IN_PLACE, 4, MPI_INT, 0, w));
  BUF(MPI_Reduce(NULL, y, 4, MPI_INT, MPI_SUM, 0, w));
  BUF(MPI_Ireduce(NULL, y, 4, MPI_INT, MPI_SUM, 0, w, &q));
  BUF(MPI_Reduce_init(NULL, y, 4, MPI_INT, MPI_SUM, 0, w, ni, &q));
  BUF(MPI_Allreduce(NULL, y, 4, MPI_INT, MPI_SUM, w));
  BUF(MPI_Allreduce(x, NULL, 4, MPI_INT, MPI_SUM, w));
  BUF(MPI_Allreduce(MPI_IN_PLACE, NULL, 4, MPI_INT, MPI_SUM, w));
  BUF(MPI_Allreduce(x, MPI_IN_PLACE, 4, MPI_INT, MPI_SUM, w));
  BUF(MPI_Allreduce_c(NULL, y, 4, MPI_INT, MPI_SUM, w));
  BUF(MPI_Iallreduce(NULL, y, 4, MPI_INT, MPI_SUM, w, &q));
  BUF(MPI_Allreduce_init(x, NULL, 4, MPI_INT, MPI_SUM, w, ni, &q));
  BUF(MPI_Scan(NULL, y, 4, MPI_INT, MPI_SUM, w));
  BUF(MPI_Iscan(x, NULL, 4, MPI_INT, MPI_SUM, w, &q));
  BUF(MPI_Exscan(NULL, y, 4, MPI_INT, MPI_SUM, w));
  BUF(MPI_Iexscan_c(NULL, y, 4, MPI_INT, MPI_SUM, w, &q));
  BUF(MPI_Reduce_scatter_block(NULL, y, 1, MPI_INT, MPI_SUM, w));
  BUF(MPI_Reduce_scatter_block(x, NULL, 1, MPI_INT, MPI_SUM, w));
  BUF(MPI_Reduce_scatter(NULL, y, counts, MPI_INT, MPI_SUM, w));
  BUF(MPI_Ireduce_scatter(MPI_IN_PLACE, NULL, counts, MPI_INT, MPI_SUM, w, &q));
  BUF(MPI_Reduce_scatter_init(x, NULL, counts, MPI_INT, MPI_SUM, w, ni, &q));
  /* Every rank passes NULL where it is significant to it. */
  BUF(MPI_Gather(NULL, 1, MPI_INT, NULL, 1, MPI_INT, 0, w));
  BUF(MPI_Gather_c(NULL, 1, MPI_INT, NULL, 1, MPI_INT, 0, w));
  BUF(MPI_Igather(NULL, 1, MPI_INT, NULL, 1, MPI_INT, 0, w, &q));
  BUF(MPI_Gather_init(NULL, 1, MPI_INT, NULL, 1, MPI_INT, 0, w, ni, &q));
  BUF(MPI_Scatter(NULL, 1, MPI_INT, NULL, 1, MPI_INT, 0, w));
  BUF(MPI_Iscatter(NULL, 1, MPI_INT, NULL, 1, MPI_INT, 0, w, &q));
  BUF(MPI_Allgather(NULL, 1, MPI_INT, y, 1, MPI_INT, w));
  BUF(MPI_Allgather(x, 1, MPI_INT, NULL, 1, MPI_INT, w));
  BUF(MPI_Allgather(MPI_IN_PLACE, 1, MPI_INT, NULL, 1, MPI_INT, w));
  BUF(MPI_Iallgather(x, 1, MPI_INT, NULL, 1, MPI_INT, w, &q));
  BUF(MPI_Alltoall(NULL, 1, MPI_INT, y, 1, MPI_INT, w));
  BUF(MPI_Alltoall(x, 1, MPI_INT, NULL, 1, MPI_INT, w));
  BUF(MPI_Alltoall_init(MPI_IN_PLACE, 1, MPI_INT, NULL, 1, MPI_INT, w, ni, &q));
  BUF(MPI_Gatherv(NULL, 1, MPI_INT, NULL, counts, displs, MPI_INT, 0, w));
  BUF(MPI_Igatherv(NULL, 1, MPI_INT, NULL, counts, displs, MPI_INT, 0, w, &q));
  BUF(MPI_Scatterv(NULL, counts, displs, MPI_INT, NULL, 1, MPI_INT, 0, w));
  BUF(MPI_Scatterv_init(NULL, counts, displs, MPI_INT, NULL, 1, MPI_INT, 0, w, ni, &q));
  BUF(MPI_Allgatherv(x, 1, MPI_INT, NULL, counts, displs, MPI_INT, w));
  BUF(MPI_Allgatherv(NULL, 1, MPI_INT, y, counts, displs, MPI_INT, w));
  BUF(MPI_Iallgatherv(MPI_IN_PLACE, 1, MPI_INT, NULL, counts, displs, MPI_INT, w, &q));
  BUF(MPI_Alltoallv(NULL, counts, displs, MPI_INT, y, counts, displs, MPI_INT, w));
  BUF(MPI_Alltoallv(x, counts, displs, MPI_INT, NULL, counts, displs, MPI_INT, w));
  BUF(MPI_Ialltoallv(MPI_IN_PLACE, counts, displs, MPI_INT, NULL, counts, displs, MPI_INT, w, &q));
  BUF(MPI_Alltoallw(NULL, counts, bdispls, types, y, counts, bdispls, types, w));
  BUF(MPI_Alltoallw(x, counts, bdispls, types, NULL, counts, bdispls, types, w));
  BUF(MPI_Alltoallw(MPI_IN_PLACE, counts, bdispls, types, NULL, counts, bdispls, types, w));
  BUF(MPI_Alltoallw_init(NULL, counts, bdispls, types, y, counts, bdispls, types, w, ni, &q));
  CHECK(q == MPI_REQUEST_NULL, "a failed call gave a request");

  MPI_Comm ring;
  int dims[1] = {size}, periods[1] = {1};
  OK(MPI_Cart_create(w, 1, dims, periods, 0, &ring));
  OK(MPI_Comm_set_errhandler(ring, MPI_ERRORS_RETURN));
  MPI_Aint nbd[2] = {0, 4};
  BUF(MPI_Neighbor_allgather(NULL, 1, MPI_INT, y, 1, MPI_INT, ring));
  BUF(MPI_Neighbor_allgather(x, 1, MPI_INT, NULL, 1, MPI_INT, ring));
  BUF(MPI_Neighbor_allgatherv(x, 1, MPI_INT, NULL, counts, displs, MPI_INT, ring));
  BUF(MPI_Neighbor_alltoall(NULL, 1, MPI_INT, y, 1, MPI_INT, ring));
  BUF(MPI_Ineighbor_alltoall(x, 1, MPI_INT, NULL, 1, MPI_INT, ring, &q));
  BUF(MPI_Neighbor_alltoall_init(NULL, 1, MPI_INT, y, 1, MPI_INT, ring, ni, &q));
  BUF(MPI_Neighbor_alltoallv(NULL, counts, displs, MPI_INT, y, counts, displs, MPI_INT, ring));
  BUF(MPI_Neighbor_alltoallw(x, counts, nbd, types, NULL, counts, nbd, types, ring));
  BUF(MPI_Neighbor_alltoall_c(NULL, 1, MPI_INT, y, 1, MPI_INT, ring));
  CHECK(q == MPI_REQUEST_NULL, "a failed call gave a request");
  OK(MPI_Comm_free(&ring));

  /* Allowed: MPI_BOTTOM with absolute byte displacements (each block at its address). */
  MPI_Aint sabs[4], rabs[4];
  MPI_Count ones[4];
  for (int i = 0; i < size; i++) {
    OK(MPI_Get_address(&x[i], &sabs[i]));
    OK(MPI_Get_address(&y[i], &rabs[i]));
    ones[i] = 1;
  }
  OK(MPI_Alltoallw_c(MPI_BOTTOM, ones, sabs, types, MPI_BOTTOM, ones, rabs, types, w));
  for (int i = 0; i < size; i++) CHECK(y[i] == i + rank, "alltoallw at MPI_BOTTOM: y[%d] = %d", i, y[i]);
  /* Allowed: a non-root's receive buffer is not significant. */
  OK(MPI_Reduce(x, rank == 0 ? y : NULL, 4, MPI_INT, MPI_SUM, 0, w));
  if (rank == 0) CHECK(y[0] == size * (size - 1) / 2, "reduce gave %d", y[0]);
  OK(MPI_Gather(x, 1, MPI_INT, rank == 0 ? y : NULL, 1, MPI_INT, 0, w));
  /* The group's collectives work after the failed ones. */
  OK(MPI_Allreduce(x, y, 4, MPI_INT, MPI_SUM, w));
  CHECK(y[3] == size * (size - 1) / 2 + 3 * size, "allreduce after the errors gave %d", y[3]);
}

static void local(void) {
  MPI_Comm w = MPI_COMM_WORLD;
  int x[4] = {1, 2, 3, 4}, y[4] = {0, 0, 0, 0}, pos = 0;
  MPI_Count cpos = 0;
  char packed[64];
  BUF(MPI_Reduce_local(NULL, y, 4, MPI_INT, MPI_SUM));
  BUF(MPI_Reduce_local(x, NULL, 4, MPI_INT, MPI_SUM));
  BUF(MPI_Reduce_local_c(NULL, y, 4, MPI_INT, MPI_SUM));
  BUF(MPI_Pack(NULL, 4, MPI_INT, packed, sizeof packed, &pos, w));
  BUF(MPI_Pack(x, 4, MPI_INT, NULL, sizeof packed, &pos, w));
  BUF(MPI_Pack_c(NULL, 4, MPI_INT, packed, sizeof packed, &cpos, w));
  CHECK(pos == 0 && cpos == 0, "a failed pack moved the position");
  OK(MPI_Pack(x, 4, MPI_INT, packed, sizeof packed, &pos, w));
  pos = 0;
  BUF(MPI_Unpack(NULL, sizeof packed, &pos, y, 4, MPI_INT, w));
  BUF(MPI_Unpack(packed, sizeof packed, &pos, NULL, 4, MPI_INT, w));
  BUF(MPI_Unpack_c(packed, sizeof packed, &cpos, NULL, 4, MPI_INT, w));
  OK(MPI_Unpack(packed, sizeof packed, &pos, y, 4, MPI_INT, w));
  CHECK(y[3] == 4 && pos == 16, "unpack gave %d at %d", y[3], pos);
}

static void one_sided(void) {
  MPI_Comm w = MPI_COMM_WORLD;
  MPI_Request q = MPI_REQUEST_NULL;
  MPI_Win win;
  int *base, x[4] = {1, 2, 3, 4}, y[4] = {0, 0, 0, 0};
  OK(MPI_Win_allocate(64, sizeof(int), MPI_INFO_NULL, w, &base, &win));
  OK(MPI_Win_set_errhandler(win, MPI_ERRORS_RETURN));
  OK(MPI_Win_fence(0, win));
  for (int pass = 0; pass < 2; pass++) {
    int t = pass == 0 ? rank : next; /* this rank's own window first (the fast path) */
    BUF(MPI_Put(NULL, 4, MPI_INT, t, 0, 4, MPI_INT, win));
    BUF(MPI_Put(MPI_IN_PLACE, 4, MPI_INT, t, 0, 4, MPI_INT, win));
    BUF(MPI_Put_c(NULL, 4, MPI_INT, t, 0, 4, MPI_INT, win));
    BUF(MPI_Get(NULL, 4, MPI_INT, t, 0, 4, MPI_INT, win));
    BUF(MPI_Get_c(NULL, 4, MPI_INT, t, 0, 4, MPI_INT, win));
    BUF(MPI_Accumulate(NULL, 4, MPI_INT, t, 0, 4, MPI_INT, MPI_SUM, win));
    BUF(MPI_Accumulate_c(NULL, 4, MPI_INT, t, 0, 4, MPI_INT, MPI_SUM, win));
    BUF(MPI_Get_accumulate(NULL, 4, MPI_INT, y, 4, MPI_INT, t, 0, 4, MPI_INT, MPI_SUM, win));
    BUF(MPI_Get_accumulate(x, 4, MPI_INT, NULL, 4, MPI_INT, t, 0, 4, MPI_INT, MPI_SUM, win));
    BUF(MPI_Fetch_and_op(NULL, y, MPI_INT, t, 0, MPI_SUM, win));
    BUF(MPI_Fetch_and_op(x, NULL, MPI_INT, t, 0, MPI_NO_OP, win));
    BUF(MPI_Compare_and_swap(NULL, x, y, MPI_INT, t, 0, win));
    BUF(MPI_Compare_and_swap(x, NULL, y, MPI_INT, t, 0, win));
    BUF(MPI_Compare_and_swap(x, x, NULL, MPI_INT, t, 0, win));
    BUF(MPI_Rput(NULL, 4, MPI_INT, t, 0, 4, MPI_INT, win, &q));
    BUF(MPI_Rget(NULL, 4, MPI_INT, t, 0, 4, MPI_INT, win, &q));
    BUF(MPI_Raccumulate(NULL, 4, MPI_INT, t, 0, 4, MPI_INT, MPI_SUM, win, &q));
    BUF(MPI_Rget_accumulate(x, 4, MPI_INT, NULL, 4, MPI_INT, t, 0, 4, MPI_INT, MPI_SUM, win, &q));
    CHECK(q == MPI_REQUEST_NULL, "a failed call gave a request");
    /* MPI_NO_OP ignores the origin. */
    OK(MPI_Get_accumulate(NULL, 0, MPI_INT, y, 4, MPI_INT, t, 0, 4, MPI_INT, MPI_NO_OP, win));
    OK(MPI_Fetch_and_op(NULL, y, MPI_INT, t, 0, MPI_NO_OP, win));
  }
  OK(MPI_Win_fence(0, win));
  OK(MPI_Win_free(&win));

  /* One rank's NULL base fails the window on every rank. */
  int mem[16];
  MPI_Win w2 = MPI_WIN_NULL;
  int rc = MPI_Win_create(rank == 0 ? NULL : mem, sizeof mem, sizeof(int), MPI_INFO_NULL, w, &w2);
  if (rank == 0) BUF(rc);
  else CHECK(rc != MPI_SUCCESS, "Win_create succeeded beside a NULL base");
  CHECK(w2 == MPI_WIN_NULL, "a failed Win_create gave a window");
  OK(MPI_Win_create_dynamic(MPI_INFO_NULL, w, &w2));
  OK(MPI_Win_set_errhandler(w2, MPI_ERRORS_RETURN));
  BUF(MPI_Win_attach(w2, NULL, sizeof mem));
  OK(MPI_Win_free(&w2));
}

static void files(const char *dir) {
  MPI_Comm w = MPI_COMM_WORLD;
  MPI_Request q = MPI_REQUEST_NULL;
  MPI_Status st;
  MPI_File fh;
  char path[PATHLEN];
  int x[4] = {1, 2, 3, 4};
  snprintf(path, sizeof path, "%s/null_buffers.dat", dir);
  OK(MPI_File_open(w, path, MPI_MODE_CREATE | MPI_MODE_RDWR, MPI_INFO_NULL, &fh));
  MPI_Offset mine = (MPI_Offset)rank * sizeof x;
  BUF(MPI_File_write(fh, NULL, 4, MPI_INT, &st));
  BUF(MPI_File_write_c(fh, NULL, 4, MPI_INT, &st));
  BUF(MPI_File_read(fh, NULL, 4, MPI_INT, &st));
  BUF(MPI_File_write_at(fh, mine, NULL, 4, MPI_INT, &st));
  BUF(MPI_File_read_at(fh, mine, NULL, 4, MPI_INT, &st));
  BUF(MPI_File_write_shared(fh, NULL, 4, MPI_INT, &st));
  BUF(MPI_File_iwrite(fh, NULL, 4, MPI_INT, &q));
  BUF(MPI_File_iread_at(fh, mine, NULL, 4, MPI_INT, &q));
  CHECK(q == MPI_REQUEST_NULL, "a failed call gave a request");
  /* Collective: every rank, then one rank only (the group fails together). */
  BUF(MPI_File_write_all(fh, NULL, 4, MPI_INT, &st));
  BUF(MPI_File_read_at_all(fh, mine, NULL, 4, MPI_INT, &st));
  BUF(MPI_File_write_ordered(fh, NULL, 4, MPI_INT, &st));
  BUF(MPI_File_write_all_begin(fh, NULL, 4, MPI_INT));
  int rc = MPI_File_write_at_all(fh, mine, rank == 0 ? NULL : x, 4, MPI_INT, &st);
  if (rank == 0) BUF(rc);
  else CHECK(rc != MPI_SUCCESS, "write_at_all succeeded beside a NULL buffer");
  /* A non-blocking collective access fails at its wait. */
  OK(MPI_File_iwrite_at_all(fh, mine, NULL, 4, MPI_INT, &q));
  BUF(MPI_Wait(&q, &st));
  /* The file works after. */
  OK(MPI_File_write_at_all(fh, mine, x, 4, MPI_INT, &st));
  int y[4] = {0, 0, 0, 0};
  OK(MPI_File_read_at_all(fh, mine, y, 4, MPI_INT, &st));
  CHECK(y[0] == 1 && y[3] == 4, "read back %d %d", y[0], y[3]);
  OK(MPI_File_close(&fh));
  OK(MPI_Barrier(w));
  if (rank == 0) OK(MPI_File_delete(path, MPI_INFO_NULL));
}

int main(int argc, char **argv) {
  OK(MPI_Init(&argc, &argv));
  OK(MPI_Comm_rank(MPI_COMM_WORLD, &rank));
  OK(MPI_Comm_size(MPI_COMM_WORLD, &size));
  CHECK(argc > 1, "usage: null_buffers DIR");
  next = (rank + 1) % size;
  prev = (rank + size - 1) % size;
  OK(MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_RETURN));
  OK(MPI_Comm_set_errhandler(MPI_COMM_SELF, MPI_ERRORS_RETURN));

  /* The message says what is wrong. */
  int rc = MPI_Send(NULL, 4, MPI_INT, next, 0, MPI_COMM_WORLD);
  char msg[MPI_MAX_ERROR_STRING];
  int len;
  OK(MPI_Error_string(rc, msg, &len));
  CHECK(strstr(msg, "MPI_Send") && strstr(msg, "NULL"), "message: %s", msg);

  point_to_point();
  collectives();
  local();
  one_sided();
  files(argv[1]);

  OK(MPI_Barrier(MPI_COMM_WORLD));
  if (rank == 0) printf("ok null_buffers %d ranks: %d calls gave MPI_ERR_BUFFER\n", size, buffer_errors);
  OK(MPI_Finalize());
  return 0;
}
