/* The non-blocking and persistent v collectives of an intracommunicator (gatherv,
 * scatterv, allgatherv, alltoallv, and alltoallw in every form, its datatypes differing
 * by block) against what each rank computes itself: blocks of
 * counts that differ by rank (zero among them), laid out in reverse rank order with a
 * gap after each, at sizes on both sides of the shared memory's limit and past the eager
 * one, to roots 0 and size-1, in place, with a strided receive type; all of one size in
 * flight at once and waited in reverse order; persistent ones started three times with
 * new data; an exclusive scan with a non-commutative user operator; and erroneous calls
 * (a root whose own blocks differ, ranks whose counts differ) that fail where they must
 * and end on every rank.
 * argv[1]: hosts to play (SPOOLS_HOST_ID by rank), 1 if absent. */
#include "check.h"
#include <stdint.h>
#include <string.h>

#define NREQ 16

static int rank, size;

static int v(int r, int i, int salt) { return r * 100003 + i * 7 + salt * 31 + 1; }

/* Rank r's block (ints) at size k: none for every third rank. */
static int cnt(int r, int k) { return (r + k) % 3 == 0 ? 0 : k + r; }

/* Rank i's block for rank j (ints), the same both ways. */
static int pair(int i, int j, int k) { return (i + j + k) % 3 == 0 ? 0 : k + i + j; }

/* Counts `c[r]` laid out in reverse rank order with a gap of one after each: fills
 * displacements `d` and returns the length spanned. */
static int reversed(const int *c, int *d) {
  int at = 0;
  for (int r = size - 1; r >= 0; r--) d[r] = at, at += c[r] + 1;
  return at;
}

static int *ints(int n, int fill) {
  int *p = malloc(sizeof(int) * (size_t)(n + 1));
  for (int i = 0; i <= n; i++) p[i] = fill;
  return p;
}

/* Checks `got` holds rank r's block of c[r] ints `want(r, i)` at d[r] (strided: every
 * other int) and `gap` everywhere else of `span` ints. */
static void blocks_are(const char *what, int k, const int *got, const int *c, const int *d,
                       int span, int stride, int (*want)(int, int, int), int salt, int gap) {
  char *mark = calloc((size_t)span * stride + 1, 1);
  for (int r = 0; r < size; r++)
    for (int i = 0; i < c[r]; i++) {
      int at = (d[r] + i) * stride;
      CHECK(got[at] == want(r, i, salt), "%s k=%d: rank %d's [%d] %d != %d", what, k, r, i,
            got[at], want(r, i, salt));
      mark[at] = 1;
    }
  for (int i = 0; i < span * stride; i++)
    if (!mark[i]) CHECK(got[i] == gap, "%s k=%d: gap [%d] %d != %d", what, k, i, got[i], gap);
  free(mark);
}

/* Rank r's i-th int of what it sends in a gather or allgather. */
static int part(int r, int i, int salt) { return v(r, i, salt); }
/* The i-th int of the root's block for rank r in a scatter. */
static int sblock(int r, int i, int salt) { return v(1000 + r, i, salt); }
static int pair_salt_rank; /* the receiving rank, for `from` */
/* The i-th int rank r sends to `pair_salt_rank` in an alltoallv. */
static int from(int r, int i, int salt) { return v(r, pair_salt_rank * 50000 + i, salt); }

static void round_of(MPI_Comm comm, int k, int root, int salt) {
  MPI_Request q[NREQ];
  int nq = 0;
  int *c = malloc(sizeof(int) * size), *d = malloc(sizeof(int) * size);
  int *sc = malloc(sizeof(int) * size), *sd = malloc(sizeof(int) * size);
  int *rc = malloc(sizeof(int) * size), *rd = malloc(sizeof(int) * size);
  for (int r = 0; r < size; r++) c[r] = cnt(r, k), sc[r] = pair(rank, r, k), rc[r] = pair(r, rank, k);
  int span = reversed(c, d), sspan = reversed(sc, sd), rspan = reversed(rc, rd);
  int mine = c[rank];
  int *send = ints(mine, 0);
  for (int i = 0; i < mine; i++) send[i] = part(rank, i, salt);
  /* gatherv, and in place at the root (its block already there). */
  int *gv = ints(span, -1), *gvin = ints(span, -1);
  if (rank == root)
    for (int i = 0; i < mine; i++) gvin[d[rank] + i] = part(rank, i, salt);
  /* scatterv from the root's blocks, and in place there. */
  int *sv = ints(span, -5), *sout = ints(mine, -1), *sin = ints(mine, -1);
  if (rank == root)
    for (int r = 0; r < size; r++)
      for (int i = 0; i < c[r]; i++) sv[d[r] + i] = sblock(r, i, salt);
  /* allgatherv, in place, and into every other int. */
  int *agv = ints(span, -1), *agin = ints(span, -1), *agstr = ints(2 * span, -1);
  for (int i = 0; i < mine; i++) agin[d[rank] + i] = part(rank, i, salt);
  /* alltoallv, and in place (the counts are the same both ways). */
  int *at = ints(sspan, -3), *atout = ints(rspan, -1), *atin = ints(rspan, -1);
  for (int j = 0; j < size; j++)
    for (int i = 0; i < sc[j]; i++) at[sd[j] + i] = v(rank, j * 50000 + i, salt);
  for (int j = 0; j < size; j++)
    for (int i = 0; i < rc[j]; i++) atin[rd[j] + i] = v(rank, j * 50000 + i, salt);
  MPI_Datatype every2;
  OK(MPI_Type_create_resized(MPI_INT, 0, 2 * sizeof(int), &every2));
  OK(MPI_Type_commit(&every2));

  OK(MPI_Igatherv(send, mine, MPI_INT, gv, c, d, MPI_INT, root, comm, &q[nq++]));
  if (rank == root)
    OK(MPI_Igatherv(MPI_IN_PLACE, 0, MPI_DATATYPE_NULL, gvin, c, d, MPI_INT, root, comm, &q[nq++]));
  else
    OK(MPI_Igatherv(send, mine, MPI_INT, NULL, NULL, NULL, MPI_DATATYPE_NULL, root, comm, &q[nq++]));
  OK(MPI_Iscatterv(sv, c, d, MPI_INT, sout, mine, MPI_INT, root, comm, &q[nq++]));
  if (rank == root)
    OK(MPI_Iscatterv(sv, c, d, MPI_INT, MPI_IN_PLACE, 0, MPI_DATATYPE_NULL, root, comm, &q[nq++]));
  else
    OK(MPI_Iscatterv(NULL, NULL, NULL, MPI_DATATYPE_NULL, sin, mine, MPI_INT, root, comm, &q[nq++]));
  OK(MPI_Iallgatherv(send, mine, MPI_INT, agv, c, d, MPI_INT, comm, &q[nq++]));
  OK(MPI_Iallgatherv(MPI_IN_PLACE, 0, MPI_DATATYPE_NULL, agin, c, d, MPI_INT, comm, &q[nq++]));
  OK(MPI_Iallgatherv(send, mine, MPI_INT, agstr, c, d, every2, comm, &q[nq++]));
  OK(MPI_Ialltoallv(at, sc, sd, MPI_INT, atout, rc, rd, MPI_INT, comm, &q[nq++]));
  OK(MPI_Ialltoallv(MPI_IN_PLACE, NULL, NULL, MPI_DATATYPE_NULL, atin, rc, rd, MPI_INT, comm, &q[nq++]));
  for (int i = nq - 1; i >= 0; i--) OK(MPI_Wait(&q[i], MPI_STATUS_IGNORE));

  if (rank == root) {
    blocks_are("igatherv", k, gv, c, d, span, 1, part, salt, -1);
    blocks_are("igatherv in place", k, gvin, c, d, span, 1, part, salt, -1);
  }
  for (int i = 0; i < mine; i++) {
    CHECK(sout[i] == sblock(rank, i, salt), "iscatterv k=%d [%d] %d", k, i, sout[i]);
    if (rank != root) CHECK(sin[i] == sblock(rank, i, salt), "iscatterv k=%d [%d] %d", k, i, sin[i]);
  }
  if (rank == root) blocks_are("iscatterv's root in place", k, sv, c, d, span, 1, sblock, salt, -5);
  blocks_are("iallgatherv", k, agv, c, d, span, 1, part, salt, -1);
  blocks_are("iallgatherv in place", k, agin, c, d, span, 1, part, salt, -1);
  blocks_are("iallgatherv strided", k, agstr, c, d, span, 2, part, salt, -1);
  pair_salt_rank = rank;
  blocks_are("ialltoallv", k, atout, rc, rd, rspan, 1, from, salt, -1);
  blocks_are("ialltoallv in place", k, atin, rc, rd, rspan, 1, from, salt, -1);

  OK(MPI_Type_free(&every2));
  free(c), free(d), free(sc), free(sd), free(rc), free(rd), free(send), free(gv), free(gvin);
  free(sv), free(sout), free(sin), free(agv), free(agin), free(agstr), free(at), free(atout);
  free(atin);
}

/* Persistent gatherv, allgatherv and alltoallv started three times with new data. */
static void persistent(MPI_Comm comm, int k) {
  int *c = malloc(sizeof(int) * size), *d = malloc(sizeof(int) * size);
  int *sc = malloc(sizeof(int) * size), *sd = malloc(sizeof(int) * size);
  int *rc = malloc(sizeof(int) * size), *rd = malloc(sizeof(int) * size);
  for (int r = 0; r < size; r++) c[r] = cnt(r, k), sc[r] = pair(rank, r, k), rc[r] = pair(r, rank, k);
  int span = reversed(c, d), sspan = reversed(sc, sd), rspan = reversed(rc, rd);
  int mine = c[rank];
  int *send = ints(mine, 0), *gv = ints(span, -1), *agv = ints(span, -1);
  int *at = ints(sspan, -3), *atout = ints(rspan, -1);
  MPI_Request q[3];
  OK(MPI_Gatherv_init(send, mine, MPI_INT, gv, c, d, MPI_INT, 0, comm, MPI_INFO_NULL, &q[0]));
  OK(MPI_Allgatherv_init(send, mine, MPI_INT, agv, c, d, MPI_INT, comm, MPI_INFO_NULL, &q[1]));
  OK(MPI_Alltoallv_init(at, sc, sd, MPI_INT, atout, rc, rd, MPI_INT, comm, MPI_INFO_NULL, &q[2]));
  for (int salt = 0; salt < 3; salt++) {
    for (int i = 0; i < mine; i++) send[i] = part(rank, i, salt);
    for (int j = 0; j < size; j++)
      for (int i = 0; i < sc[j]; i++) at[sd[j] + i] = v(rank, j * 50000 + i, salt);
    OK(MPI_Startall(3, q));
    OK(MPI_Waitall(3, q, MPI_STATUSES_IGNORE));
    if (rank == 0) blocks_are("persistent gatherv", k, gv, c, d, span, 1, part, salt, -1);
    blocks_are("persistent allgatherv", k, agv, c, d, span, 1, part, salt, -1);
    pair_salt_rank = rank;
    blocks_are("persistent alltoallv", k, atout, rc, rd, rspan, 1, from, salt, -1);
  }
  for (int i = 0; i < 3; i++) OK(MPI_Request_free(&q[i]));
  free(c), free(d), free(sc), free(sd), free(rc), free(rd), free(send), free(gv), free(agv);
  free(at), free(atout);
}

/* Alltoallw: to rank j, pair(rank, j, k) ints, sent as ints where j is even and as
 * every other int (a resized MPI_INT of two ints' extent) where j is odd; received the
 * other way round (from r, every other int where r is even); blocks at byte
 * displacements in reverse rank order, with gaps. Blocking, non-blocking, persistent
 * (started twice with new data) and in place (the receive side's types both ways). */
static void alltoallw_of(MPI_Comm comm, int k) {
  MPI_Datatype every_other;
  OK(MPI_Type_create_resized(MPI_INT, 0, (MPI_Aint)(2 * sizeof(int)), &every_other));
  OK(MPI_Type_commit(&every_other));
  int *sc = malloc(sizeof(int) * size), *sd = malloc(sizeof(int) * size);
  int *rc = malloc(sizeof(int) * size), *rd = malloc(sizeof(int) * size);
  MPI_Datatype *st = malloc(sizeof(MPI_Datatype) * size), *rt = malloc(sizeof(MPI_Datatype) * size);
  /* Ints spanned by a block of n elements of a type of stride 1 or 2, and a gap of 1. */
  int sspan = 0, rspan = 0;
  for (int r = size - 1; r >= 0; r--) {
    sc[r] = pair(rank, r, k), st[r] = r % 2 ? every_other : MPI_INT;
    sd[r] = sspan * (int)sizeof(int), sspan += sc[r] * (r % 2 ? 2 : 1) + 1;
    rc[r] = pair(r, rank, k), rt[r] = r % 2 ? MPI_INT : every_other;
    rd[r] = rspan * (int)sizeof(int), rspan += rc[r] * (r % 2 ? 1 : 2) + 1;
  }
  int *in = ints(sspan, -3), *out = ints(rspan, -1);
  MPI_Request q;
  OK(MPI_Alltoallw_init(in, sc, sd, st, out, rc, rd, rt, comm, MPI_INFO_NULL, &q));
  for (int form = 0; form < 5; form++) {
    int salt = 7 * form + 1;
    for (int j = 0; j < size; j++)
      for (int i = 0; i < sc[j]; i++) in[sd[j] / (int)sizeof(int) + i * (j % 2 ? 2 : 1)] = v(rank, j * 50000 + i, salt);
    for (int i = 0; i < rspan; i++) out[i] = -1;
    if (form == 0) OK(MPI_Alltoallw(in, sc, sd, st, out, rc, rd, rt, comm));
    if (form == 1) {
      MPI_Request r1;
      OK(MPI_Ialltoallw(in, sc, sd, st, out, rc, rd, rt, comm, &r1));
      OK(MPI_Wait(&r1, MPI_STATUS_IGNORE));
    }
    if (form == 2 || form == 3) {
      OK(MPI_Start(&q));
      OK(MPI_Wait(&q, MPI_STATUS_IGNORE));
    }
    int *got = out;
    if (form == 4) {
      /* In place: each block of `out` (the receive side's layout) holds what goes to
       * that rank, as many ints as come from it (pair() is the same both ways). */
      for (int r = 0; r < size; r++)
        for (int i = 0; i < rc[r]; i++)
          out[rd[r] / (int)sizeof(int) + i * (r % 2 ? 1 : 2)] = v(rank, r * 50000 + i, salt);
      OK(MPI_Alltoallw(MPI_IN_PLACE, NULL, NULL, NULL, out, rc, rd, rt, comm));
    }
    char *mark = calloc((size_t)rspan, 1);
    for (int r = 0; r < size; r++)
      for (int i = 0; i < rc[r]; i++) {
        int at = rd[r] / (int)sizeof(int) + i * (r % 2 ? 1 : 2);
        CHECK(got[at] == v(r, rank * 50000 + i, salt), "alltoallw form %d k=%d: rank %d's [%d] %d",
              form, k, r, i, got[at]);
        mark[at] = 1;
      }
    for (int i = 0; i < rspan; i++)
      if (!mark[i]) CHECK(got[i] == -1, "alltoallw form %d k=%d: gap [%d] %d", form, k, i, got[i]);
    free(mark);
  }
  OK(MPI_Request_free(&q));
  OK(MPI_Type_free(&every_other));
  free(sc), free(sd), free(rc), free(rd), free(st), free(rt), free(in), free(out);
}

/* 2x2 integer matrices (mod 2^31), multiplied in order: not commutative. */
static void matmul(void *in, void *inout, int *len, MPI_Datatype *t) {
  (void)t;
  int32_t *a = in, *b = inout;
  for (int i = 0; i < *len; i++, a += 4, b += 4) {
    int32_t r[4] = {a[0] * b[0] + a[1] * b[2], a[0] * b[1] + a[1] * b[3],
                    a[2] * b[0] + a[3] * b[2], a[2] * b[1] + a[3] * b[3]};
    memcpy(b, r, sizeof r);
  }
}

static void mat_of(int r, int i, int32_t *m) {
  m[0] = r + 1, m[1] = i % 5, m[2] = 2 * r + i % 3, m[3] = 1;
}

/* An exclusive scan with the user operator, non-blocking: rank order kept, rank 0's
 * buffer left as it was. */
static void exscan_user(MPI_Comm comm, int k) {
  MPI_Datatype mat;
  OK(MPI_Type_contiguous(4, MPI_INT, &mat));
  OK(MPI_Type_commit(&mat));
  MPI_Op mm;
  OK(MPI_Op_create(matmul, 0, &mm));
  int32_t *in = malloc(sizeof(int32_t) * 4 * (size_t)(k + 1));
  int32_t *out = malloc(sizeof(int32_t) * 4 * (size_t)(k + 1));
  for (int i = 0; i < k; i++) mat_of(rank, i, in + 4 * i);
  for (int i = 0; i < 4 * k; i++) out[i] = -7;
  MPI_Request q;
  OK(MPI_Iexscan(in, out, k, mat, mm, comm, &q));
  OK(MPI_Wait(&q, MPI_STATUS_IGNORE));
  for (int i = 0; i < k; i++) {
    if (rank == 0) {
      for (int j = 0; j < 4; j++) CHECK(out[4 * i + j] == -7, "iexscan: rank 0's buffer written");
      continue;
    }
    int32_t m[4], t[4];
    mat_of(rank - 1, i, m);
    for (int r = rank - 2; r >= 0; r--) {
      int one = 1;
      mat_of(r, i, t);
      matmul(t, m, &one, NULL);
    }
    CHECK(memcmp(m, out + 4 * i, sizeof m) == 0, "iexscan k=%d [%d] not in rank order", k, i);
  }
  OK(MPI_Op_free(&mm));
  OK(MPI_Type_free(&mat));
  free(in), free(out);
}

/* A root (0) that sends itself `n` ints and takes n + 1: it fails with MPI_ERR_TRUNCATE
 * at the wait, the others succeed; then an allgatherv whose rank 0 counts its own block
 * one int longer than the others do: some rank fails, nobody waits forever, and the job
 * goes on. */
static void mismatches(int n) {
  MPI_Comm comm;
  OK(MPI_Comm_dup(MPI_COMM_WORLD, &comm));
  OK(MPI_Comm_set_errhandler(comm, MPI_ERRORS_RETURN));
  int *c = malloc(sizeof(int) * size), *d = malloc(sizeof(int) * size);
  int *in = ints(n + 1, 5), *out = ints((n + 1) * size, -1);
  for (int r = 0; r < size; r++) c[r] = n + (r == 0 && rank == 0), d[r] = r * (n + 1);
  MPI_Request q;
  OK(MPI_Igatherv(in, n, MPI_INT, out, c, d, MPI_INT, 0, comm, &q));
  int rc_ = MPI_Wait(&q, MPI_STATUS_IGNORE), cls = -1;
  MPI_Error_class(rc_, &cls);
  if (rank == 0)
    CHECK(cls == MPI_ERR_TRUNCATE, "igatherv own block mismatch of %d ints: class %d", n, cls);
  else
    OK(rc_);
  OK(MPI_Iallgatherv(in, c[rank], MPI_INT, out, c, d, MPI_INT, comm, &q));
  int failed = MPI_Wait(&q, MPI_STATUS_IGNORE) != MPI_SUCCESS, failures = 0;
  OK(MPI_Allreduce(&failed, &failures, 1, MPI_INT, MPI_SUM, MPI_COMM_WORLD));
  CHECK(size == 1 || failures > 0, "iallgatherv mismatch of %d ints: every rank succeeded", n);
  OK(MPI_Comm_free(&comm));
  free(c), free(d), free(in), free(out);
}

int main(int argc, char **argv) {
  int hosts = play_hosts(argc, argv);
  OK(MPI_Init(&argc, &argv));
  OK(MPI_Comm_rank(MPI_COMM_WORLD, &rank));
  OK(MPI_Comm_size(MPI_COMM_WORLD, &size));
  static const int ks[] = {0, 1, 5, 300, 1100, 20000};
  int salt = 0;
  for (size_t i = 0; i < sizeof ks / sizeof *ks; i++) {
    round_of(MPI_COMM_WORLD, ks[i], 0, salt++);
    round_of(MPI_COMM_WORLD, ks[i], size - 1, salt++);
  }
  persistent(MPI_COMM_WORLD, 3);
  persistent(MPI_COMM_WORLD, 1500);
  alltoallw_of(MPI_COMM_WORLD, 0);
  alltoallw_of(MPI_COMM_WORLD, 5);
  alltoallw_of(MPI_COMM_WORLD, 3000);
  exscan_user(MPI_COMM_WORLD, 1);
  exscan_user(MPI_COMM_WORLD, 40);
  mismatches(16);
  mismatches(20000);
  if (rank == 0) printf("ok icollv %d ranks %d hosts\n", size, hosts);
  OK(MPI_Finalize());
  return 0;
}
