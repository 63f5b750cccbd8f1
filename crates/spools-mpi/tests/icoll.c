/* The non-blocking and persistent collectives of an intracommunicator against what each
 * rank computes itself: every uniform one (bcast, gather, scatter, allgather, alltoall,
 * reduce, allreduce, scan, exscan, reduce-scatter), at counts on both sides of the
 * shared memory's limit (4 KiB) and past it, to roots 0 and size-1, in place, with a
 * strided type, with send and receive types that differ but agree in signature, with
 * MINLOC (combined byte-wise) and a non-commutative user operator; all of one count in
 * flight at once and waited in reverse order; persistent ones started three times with
 * new data; and the blocking reduce-scatters (blocks of one count and of several, in
 * place, strided, MINLOC, the user operator) and exclusive scans (in place, the user
 * operator) beside them; and two erroneous calls that must end on every rank.
 * argv[1]: hosts to play (SPOOLS_HOST_ID by rank), 1 if absent. */
#include "check.h"
#include <stdint.h>
#include <string.h>

static int rank, size;

static int v(int r, int i, int salt) { return r * 100003 + i * 7 + salt * 31 + 1; }

/* A non-commutative operator: 2x2 integer matrices (mod 2^31), multiplied in order. */
static void matmul(void *in, void *inout, int *len, MPI_Datatype *t) {
  (void)t;
  int32_t *a = in, *b = inout;
  for (int k = 0; k < *len; k++, a += 4, b += 4) {
    int64_t r0 = ((int64_t)a[0] * b[0] + (int64_t)a[1] * b[2]) & 0x7fffffff;
    int64_t r1 = ((int64_t)a[0] * b[1] + (int64_t)a[1] * b[3]) & 0x7fffffff;
    int64_t r2 = ((int64_t)a[2] * b[0] + (int64_t)a[3] * b[2]) & 0x7fffffff;
    int64_t r3 = ((int64_t)a[2] * b[1] + (int64_t)a[3] * b[3]) & 0x7fffffff;
    b[0] = (int32_t)r0, b[1] = (int32_t)r1, b[2] = (int32_t)r2, b[3] = (int32_t)r3;
  }
}

static void mat_of(int r, int k, int32_t *m) {
  m[0] = 1 + r, m[1] = k + 2, m[2] = r * 3, m[3] = 1;
}

#define NREQ 24

/* Every collective at `k` elements per rank (per block), all in flight together. */
static void round_of(MPI_Comm comm, int k, int root, int salt) {
  MPI_Request q[NREQ];
  int nq = 0;
  size_t n = (size_t)k, all = n * (size_t)size;
  int *sum = malloc((n + 1) * sizeof(int)), *mine = malloc((n + 1) * sizeof(int));
  double *dmine = malloc((n + 1) * sizeof(double)), *dmax = malloc((n + 1) * sizeof(double));
  int *scan = malloc((n + 1) * sizeof(int)), *exscan = malloc((n + 1) * sizeof(int));
  int *inplace = malloc((n + 1) * sizeof(int));
  int *strided = malloc((2 * n + 1) * sizeof(int)), *strided_out = malloc((2 * n + 1) * sizeof(int));
  int *bc = malloc((n + 1) * sizeof(int)), *bc_strided = malloc((2 * n + 1) * sizeof(int));
  int *gsend = malloc((n + 1) * sizeof(int)), *gout = malloc((all + 1) * sizeof(int));
  int *gin = malloc((all + 1) * sizeof(int));
  int *ssend = malloc((all + 1) * sizeof(int)), *sout = malloc((n + 1) * sizeof(int));
  int *agout = malloc((all + 1) * sizeof(int)), *agin = malloc((all + 1) * sizeof(int));
  int *atsend = malloc((all + 1) * sizeof(int)), *atout = malloc((all + 1) * sizeof(int));
  int *atin = malloc((all + 1) * sizeof(int));
  int *rsvec = malloc((all + 1) * sizeof(int)), *rsout = malloc((n + 1) * sizeof(int));
  int (*loc)[2] = malloc((n + 1) * sizeof(int[2])), (*locout)[2] = malloc((n + 1) * sizeof(int[2]));
  int32_t *mats = malloc((4 * n + 4) * sizeof(int32_t)), *matout = malloc((4 * n + 4) * sizeof(int32_t));
  MPI_Datatype every2, mat;
  OK(MPI_Type_create_resized(MPI_INT, 0, 2 * sizeof(int), &every2)); /* every other int */
  OK(MPI_Type_commit(&every2));
  OK(MPI_Type_contiguous(4, MPI_INT, &mat));
  OK(MPI_Type_commit(&mat));
  MPI_Op mm;
  OK(MPI_Op_create(matmul, 0, &mm));

  for (size_t i = 0; i < n; i++) {
    mine[i] = v(rank, (int)i, salt);
    dmine[i] = (double)v((rank + (int)i) % size, (int)i, salt);
    inplace[i] = mine[i];
    gsend[i] = mine[i];
    loc[i][0] = (rank * 5 + (int)i) % 3, loc[i][1] = rank;
    mat_of(rank, (int)i, mats + 4 * i);
  }
  for (size_t i = 0; i < 2 * n; i++) strided[i] = (i % 2) ? -7 : v(rank, (int)i / 2, salt);
  for (size_t i = 0; i < 2 * n; i++) strided_out[i] = -9;
  for (size_t i = 0; i < n; i++) bc[i] = -1;
  for (size_t i = 0; i < 2 * n; i++) bc_strided[i] = (i % 2) ? -3 : v(root, (int)i / 2, salt);
  for (size_t i = 0; i < all; i++) {
    ssend[i] = rank == root ? v(root, (int)i, salt) : -1;
    agin[i] = (i / n == (size_t)rank) ? mine[i % n] : -1;
    gin[i] = (rank == root && i / n == (size_t)root) ? mine[i % n] : -1;
    atsend[i] = v(rank, (int)i, salt);
    atin[i] = v(rank, (int)i, salt);
    rsvec[i] = v(rank, (int)i, salt);
  }

  OK(MPI_Iallreduce(mine, sum, k, MPI_INT, MPI_SUM, comm, &q[nq++]));
  OK(MPI_Ireduce(dmine, dmax, k, MPI_DOUBLE, MPI_MAX, root, comm, &q[nq++]));
  OK(MPI_Iscan(mine, scan, k, MPI_INT, MPI_SUM, comm, &q[nq++]));
  OK(MPI_Iexscan(mine, exscan, k, MPI_INT, MPI_SUM, comm, &q[nq++]));
  OK(MPI_Iallreduce(MPI_IN_PLACE, inplace, k, MPI_INT, MPI_MAX, comm, &q[nq++]));
  OK(MPI_Iallreduce(strided, strided_out, k, every2, MPI_SUM, comm, &q[nq++]));
  OK(MPI_Iallreduce(loc, locout, k, MPI_2INT, MPI_MINLOC, comm, &q[nq++]));
  OK(MPI_Iallreduce(mats, matout, k, mat, mm, comm, &q[nq++]));
  OK(MPI_Ireduce_scatter_block(rsvec, rsout, k, MPI_INT, MPI_SUM, comm, &q[nq++]));
  /* The root sends k ints, every other one of its buffer; the others take k in a row. */
  if (rank == root)
    OK(MPI_Ibcast(bc_strided, k, every2, root, comm, &q[nq++]));
  else
    OK(MPI_Ibcast(bc, k, MPI_INT, root, comm, &q[nq++]));
  OK(MPI_Igather(gsend, k, MPI_INT, gout, k, MPI_INT, root, comm, &q[nq++]));
  if (rank == root)
    OK(MPI_Igather(MPI_IN_PLACE, 0, MPI_DATATYPE_NULL, gin, k, MPI_INT, root, comm, &q[nq++]));
  else
    OK(MPI_Igather(gsend, k, MPI_INT, NULL, 0, MPI_DATATYPE_NULL, root, comm, &q[nq++]));
  OK(MPI_Iscatter(ssend, k, MPI_INT, sout, k, MPI_INT, root, comm, &q[nq++]));
  OK(MPI_Iallgather(gsend, k, MPI_INT, agout, k, MPI_INT, comm, &q[nq++]));
  OK(MPI_Iallgather(MPI_IN_PLACE, 0, MPI_DATATYPE_NULL, agin, k, MPI_INT, comm, &q[nq++]));
  OK(MPI_Ialltoall(atsend, k, MPI_INT, atout, k, MPI_INT, comm, &q[nq++]));
  OK(MPI_Ialltoall(MPI_IN_PLACE, 0, MPI_DATATYPE_NULL, atin, k, MPI_INT, comm, &q[nq++]));
  for (int i = nq - 1; i >= 0; i--) OK(MPI_Wait(&q[i], MPI_STATUS_IGNORE));

  for (size_t i = 0; i < n; i++) {
    int s = 0, sc = 0, ex = 0, mx = mine[i];
    for (int r = 0; r < size; r++) {
      int x = v(r, (int)i, salt);
      s += x;
      if (r <= rank) sc += x;
      if (r < rank) ex += x;
      if (x > mx) mx = x;
    }
    CHECK(sum[i] == s, "allreduce k=%d [%zu] %d != %d", k, i, sum[i], s);
    CHECK(scan[i] == sc, "scan k=%d [%zu] %d != %d", k, i, scan[i], sc);
    if (rank > 0) CHECK(exscan[i] == ex, "exscan k=%d [%zu] %d != %d", k, i, exscan[i], ex);
    CHECK(inplace[i] == mx, "in place k=%d [%zu] %d != %d", k, i, inplace[i], mx);
    CHECK(strided_out[2 * i] == s && strided_out[2 * i + 1] == -9,
          "strided k=%d [%zu] %d %d", k, i, strided_out[2 * i], strided_out[2 * i + 1]);
    if (rank == root) {
      double dm = -1e300;
      for (int r = 0; r < size; r++) {
        double x = (double)v((r + (int)i) % size, (int)i, salt);
        if (x > dm) dm = x;
      }
      CHECK(dmax[i] == dm, "reduce max k=%d [%zu] %g != %g", k, i, dmax[i], dm);
    }
    int lv = 3, li = -1;
    for (int r = 0; r < size; r++) {
      int x = (r * 5 + (int)i) % 3;
      if (x < lv) lv = x, li = r;
    }
    CHECK(locout[i][0] == lv && locout[i][1] == li, "minloc k=%d [%zu] (%d,%d) != (%d,%d)", k, i,
          locout[i][0], locout[i][1], lv, li);
    int32_t m[4], t[4];
    mat_of(size - 1, (int)i, m);
    for (int r = size - 2; r >= 0; r--) {
      int one = 1;
      mat_of(r, (int)i, t);
      matmul(t, m, &one, NULL);
    }
    CHECK(memcmp(m, matout + 4 * i, sizeof m) == 0, "matrices k=%d [%zu] in rank order", k, i);
    int rs = 0;
    for (int r = 0; r < size; r++) rs += v(r, rank * k + (int)i, salt);
    CHECK(rsout[i] == rs, "reduce_scatter_block k=%d [%zu] %d != %d", k, i, rsout[i], rs);
    CHECK(sout[i] == v(root, rank * k + (int)i, salt), "scatter k=%d [%zu] %d", k, i, sout[i]);
  }
  for (size_t i = 0; i < n; i++) {
    int want = v(root, (int)i, salt);
    if (rank == root)
      CHECK(bc_strided[2 * i] == want && bc_strided[2 * i + 1] == -3, "bcast root k=%d", k);
    else
      CHECK(bc[i] == want, "bcast k=%d [%zu] %d != %d", k, i, bc[i], want);
  }
  for (size_t i = 0; i < all; i++) {
    int r = (int)(i / n), j = (int)(i % n);
    int want = v(r, j, salt);
    if (rank == root) {
      CHECK(gout[i] == want, "gather k=%d [%zu] %d != %d", k, i, gout[i], want);
      CHECK(gin[i] == want, "gather in place k=%d [%zu] %d != %d", k, i, gin[i], want);
    }
    CHECK(agout[i] == want, "allgather k=%d [%zu] %d != %d", k, i, agout[i], want);
    CHECK(agin[i] == want, "allgather in place k=%d [%zu] %d != %d", k, i, agin[i], want);
    int at = v(r, rank * k + j, salt);
    CHECK(atout[i] == at, "alltoall k=%d [%zu] %d != %d", k, i, atout[i], at);
    CHECK(atin[i] == at, "alltoall in place k=%d [%zu] %d != %d", k, i, atin[i], at);
  }

  OK(MPI_Op_free(&mm));
  OK(MPI_Type_free(&mat));
  OK(MPI_Type_free(&every2));
  free(sum), free(mine), free(dmine), free(dmax), free(scan), free(exscan), free(inplace);
  free(strided), free(strided_out), free(bc), free(bc_strided), free(gsend), free(gout);
  free(gin), free(ssend), free(sout), free(agout), free(agin), free(atsend), free(atout);
  free(atin), free(rsvec), free(rsout), free(loc), free(locout), free(mats), free(matout);
}

/* Blocking reduce-scatters: rank i's block is k (+ i % 2 for MPI_Reduce_scatter)
 * elements of everyone's vector combined. */
static void reduce_scatters(MPI_Comm comm, int k, int salt) {
  size_t n = (size_t)k;
  int *cnt = malloc(sizeof(int) * size), tot = 0, from = 0;
  for (int i = 0; i < size; i++) {
    cnt[i] = k + i % 2;
    if (i < rank) from += cnt[i];
    tot += cnt[i];
  }
  size_t all = n * size, mine = (size_t)cnt[rank];
  int *in = malloc((all + 1) * sizeof(int)), *out = malloc((n + 1) * sizeof(int));
  int *vin = malloc((tot + 1) * sizeof(int)), *vout = malloc((mine + 1) * sizeof(int));
  int *ip = malloc((tot + 1) * sizeof(int)), *str = malloc((2 * all + 1) * sizeof(int));
  int *strout = malloc((2 * n + 1) * sizeof(int));
  int (*loc)[2] = malloc((all + 1) * sizeof(int[2])), (*locout)[2] = malloc((n + 1) * sizeof(int[2]));
  int32_t *mats = malloc((4 * all + 4) * sizeof(int32_t)), *matout = malloc((4 * n + 4) * sizeof(int32_t));
  for (size_t i = 0; i < all; i++) {
    in[i] = v(rank, (int)i, salt);
    str[2 * i] = v(rank, (int)i, salt), str[2 * i + 1] = -1;
    loc[i][0] = (rank * 5 + (int)i) % 3, loc[i][1] = rank;
    mat_of(rank, (int)i, mats + 4 * i);
  }
  for (int i = 0; i < tot; i++) vin[i] = ip[i] = v(rank, i, salt + 1);
  for (size_t i = 0; i < 2 * n; i++) strout[i] = -9;
  MPI_Datatype every2, mat;
  OK(MPI_Type_create_resized(MPI_INT, 0, 2 * sizeof(int), &every2));
  OK(MPI_Type_commit(&every2));
  OK(MPI_Type_contiguous(4, MPI_INT, &mat));
  OK(MPI_Type_commit(&mat));
  MPI_Op mm;
  OK(MPI_Op_create(matmul, 0, &mm));
  OK(MPI_Reduce_scatter_block(in, out, k, MPI_INT, MPI_SUM, comm));
  OK(MPI_Reduce_scatter(vin, vout, cnt, MPI_INT, MPI_SUM, comm));
  OK(MPI_Reduce_scatter(MPI_IN_PLACE, ip, cnt, MPI_INT, MPI_MAX, comm));
  OK(MPI_Reduce_scatter_block(str, strout, k, every2, MPI_SUM, comm));
  OK(MPI_Reduce_scatter_block(loc, locout, k, MPI_2INT, MPI_MINLOC, comm));
  OK(MPI_Reduce_scatter_block(mats, matout, k, mat, mm, comm));
  for (size_t j = 0; j < n; j++) {
    int at = rank * k + (int)j, s = 0, lv = 3, li = -1;
    for (int r = 0; r < size; r++) {
      s += v(r, at, salt);
      int x = (r * 5 + at) % 3;
      if (x < lv) lv = x, li = r;
    }
    CHECK(out[j] == s, "reduce_scatter_block k=%d [%zu] %d != %d", k, j, out[j], s);
    CHECK(strout[2 * j] == s && strout[2 * j + 1] == -9, "strided reduce_scatter_block k=%d [%zu]", k, j);
    CHECK(locout[j][0] == lv && locout[j][1] == li, "minloc reduce_scatter_block k=%d [%zu]", k, j);
    int32_t m[4], t[4];
    mat_of(size - 1, at, m);
    for (int r = size - 2; r >= 0; r--) {
      int one = 1;
      mat_of(r, at, t);
      matmul(t, m, &one, NULL);
    }
    CHECK(memcmp(m, matout + 4 * j, sizeof m) == 0, "matrices reduce_scatter_block k=%d [%zu]", k, j);
  }
  for (size_t j = 0; j < mine; j++) {
    int s = 0, mx = v(size - 1, from + (int)j, salt + 1);
    for (int r = 0; r < size; r++) s += v(r, from + (int)j, salt + 1);
    CHECK(vout[j] == s, "reduce_scatter k=%d [%zu] %d != %d", k, j, vout[j], s);
    CHECK(ip[j] == mx, "reduce_scatter in place k=%d [%zu] %d != %d", k, j, ip[j], mx);
  }
  OK(MPI_Op_free(&mm));
  OK(MPI_Type_free(&mat));
  OK(MPI_Type_free(&every2));
  free(cnt), free(in), free(out), free(vin), free(vout), free(ip), free(str), free(strout);
  free(loc), free(locout), free(mats), free(matout);
}

/* Blocking exclusive scans: rank i > 0 gets the fold of ranks 0 to i - 1; rank 0's
 * buffer is not looked at. */
static void exscans(MPI_Comm comm, int k, int salt) {
  size_t n = (size_t)k;
  int *in = malloc((n + 1) * sizeof(int)), *out = malloc((n + 1) * sizeof(int));
  int *ip = malloc((n + 1) * sizeof(int));
  int32_t *mats = malloc((4 * n + 4) * sizeof(int32_t)), *matout = malloc((4 * n + 4) * sizeof(int32_t));
  for (size_t i = 0; i < n; i++) {
    in[i] = ip[i] = v(rank, (int)i, salt);
    mat_of(rank, (int)i, mats + 4 * i);
  }
  MPI_Datatype mat;
  OK(MPI_Type_contiguous(4, MPI_INT, &mat));
  OK(MPI_Type_commit(&mat));
  MPI_Op mm;
  OK(MPI_Op_create(matmul, 0, &mm));
  OK(MPI_Exscan(in, out, k, MPI_INT, MPI_SUM, comm));
  OK(MPI_Exscan(MPI_IN_PLACE, ip, k, MPI_INT, MPI_MAX, comm));
  OK(MPI_Exscan(mats, matout, k, mat, mm, comm));
  for (size_t i = 0; i < n && rank > 0; i++) {
    int s = 0;
    for (int r = 0; r < rank; r++) s += v(r, (int)i, salt);
    CHECK(out[i] == s, "exscan k=%d [%zu] %d != %d", k, i, out[i], s);
    CHECK(ip[i] == v(rank - 1, (int)i, salt), "exscan in place k=%d [%zu] %d", k, i, ip[i]);
    int32_t m[4], t[4];
    mat_of(rank - 1, (int)i, m);
    for (int r = rank - 2; r >= 0; r--) {
      int one = 1;
      mat_of(r, (int)i, t);
      matmul(t, m, &one, NULL);
    }
    CHECK(memcmp(m, matout + 4 * i, sizeof m) == 0, "matrices exscan k=%d [%zu] in rank order", k, i);
  }
  OK(MPI_Op_free(&mm));
  OK(MPI_Type_free(&mat));
  free(in), free(out), free(ip), free(mats), free(matout);
}

/* An alltoallv whose rank 0 sends itself 2 ints and takes 1 (erroneous): rank 0 fails
 * with MPI_ERR_TRUNCATE, the others get their blocks, and nobody waits. */
static void alltoallv_own_block_mismatch(void) {
  MPI_Comm comm;
  OK(MPI_Comm_dup(MPI_COMM_WORLD, &comm));
  OK(MPI_Comm_set_errhandler(comm, MPI_ERRORS_RETURN));
  int *sc = malloc(sizeof(int) * size), *sd = malloc(sizeof(int) * size);
  int *rc = malloc(sizeof(int) * size), *rd = malloc(sizeof(int) * size);
  int *in = malloc(sizeof(int) * (size + 1)), *out = malloc(sizeof(int) * (size + 1));
  for (int j = 0, at = 0; j < size; j++) {
    sc[j] = (rank == 0 && j == 0) ? 2 : 1;
    rc[j] = 1;
    sd[j] = at;
    rd[j] = j;
    at += sc[j];
  }
  for (int j = 0; j <= size; j++) in[j] = rank * 100 + j, out[j] = -1;
  int rc_ = MPI_Alltoallv(in, sc, sd, MPI_INT, out, rc, rd, MPI_INT, comm);
  if (rank == 0) {
    int cls = -1;
    MPI_Error_class(rc_, &cls);
    CHECK(cls == MPI_ERR_TRUNCATE, "own block mismatch: class %d", cls);
  } else {
    OK(rc_);
    int want = rank + 1; /* rank 0 sends its ints 2, 3, ... to ranks 1, 2, ... */
    CHECK(out[0] == want, "own block mismatch: from rank 0 got %d, want %d", out[0], want);
    for (int i = 1; i < size; i++) CHECK(out[i] == i * 100 + rank, "own block mismatch: from %d got %d", i, out[i]);
  }
  OK(MPI_Barrier(comm));
  OK(MPI_Comm_free(&comm));
  free(sc), free(sd), free(rc), free(rd), free(in), free(out);
}

/* An allgatherv whose rank 0 counts two ints per rank where the others count one
 * (erroneous), with a block past the eager limit and one within the shared memory's:
 * rank 0 fails, no rank waits forever (across hosts the ring's ranks after the one that
 * finds it fail too), and the job goes on. */
static void allgatherv_mismatch(int ints) {
  MPI_Comm comm;
  OK(MPI_Comm_dup(MPI_COMM_WORLD, &comm));
  OK(MPI_Comm_set_errhandler(comm, MPI_ERRORS_RETURN));
  int k = rank == 0 ? 2 * ints : ints;
  int *counts = malloc(sizeof(int) * size), *displs = malloc(sizeof(int) * size);
  int *in = malloc(sizeof(int) * k), *out = malloc(sizeof(int) * k * size);
  for (int j = 0; j < size; j++) counts[j] = k, displs[j] = j * k;
  for (int i = 0; i < k; i++) in[i] = v(rank, i, 9);
  int rc_ = MPI_Allgatherv(in, k, MPI_INT, out, counts, displs, MPI_INT, comm);
  if (rank == 0) CHECK(rc_ != MPI_SUCCESS, "allgatherv mismatch of %d ints: rank 0 succeeded", ints);
  OK(MPI_Comm_free(&comm));
  OK(MPI_Barrier(MPI_COMM_WORLD));
  free(counts), free(displs), free(in), free(out);
}

/* Persistent collectives started three times, with new data each time. */
static void persistent(MPI_Comm comm, int k) {
  size_t n = (size_t)k;
  int *in = calloc(n + 1, sizeof(int)), *out = malloc((n + 1) * sizeof(int));
  int *bc = malloc((n + 1) * sizeof(int)), *g = malloc((n * size + 1) * sizeof(int));
  MPI_Request q[3];
  OK(MPI_Allreduce_init(in, out, k, MPI_INT, MPI_SUM, comm, MPI_INFO_NULL, &q[0]));
  OK(MPI_Bcast_init(bc, k, MPI_INT, size - 1, comm, MPI_INFO_NULL, &q[1]));
  OK(MPI_Gather_init(in, k, MPI_INT, g, k, MPI_INT, 0, comm, MPI_INFO_NULL, &q[2]));
  for (int salt = 0; salt < 3; salt++) {
    for (size_t i = 0; i < n; i++) {
      in[i] = v(rank, (int)i, salt);
      bc[i] = rank == size - 1 ? v(size - 1, (int)i, salt + 5) : -1;
    }
    OK(MPI_Startall(3, q));
    OK(MPI_Waitall(3, q, MPI_STATUSES_IGNORE));
    for (size_t i = 0; i < n; i++) {
      int s = 0;
      for (int r = 0; r < size; r++) s += v(r, (int)i, salt);
      CHECK(out[i] == s, "persistent allreduce start %d k=%d [%zu] %d != %d", salt, k, i, out[i], s);
      CHECK(bc[i] == v(size - 1, (int)i, salt + 5), "persistent bcast start %d k=%d", salt, k);
    }
    if (rank == 0)
      for (size_t i = 0; i < n * size; i++)
        CHECK(g[i] == v((int)(i / n), (int)(i % n), salt), "persistent gather start %d k=%d", salt, k);
  }
  for (int i = 0; i < 3; i++) OK(MPI_Request_free(&q[i]));
  free(in), free(out), free(bc), free(g);
}

int main(int argc, char **argv) {
  int hosts = play_hosts(argc, argv);
  OK(MPI_Init(&argc, &argv));
  OK(MPI_Comm_rank(MPI_COMM_WORLD, &rank));
  OK(MPI_Comm_size(MPI_COMM_WORLD, &size));
  static const int counts[] = {0, 1, 5, 700, 1100, 20000};
  int salt = 0;
  for (size_t c = 0; c < sizeof counts / sizeof *counts; c++) {
    round_of(MPI_COMM_WORLD, counts[c], 0, salt++);
    round_of(MPI_COMM_WORLD, counts[c], size - 1, salt++);
    reduce_scatters(MPI_COMM_WORLD, counts[c], salt++);
    exscans(MPI_COMM_WORLD, counts[c], salt++);
  }
  alltoallv_own_block_mismatch();
  if (size > 1) {
    allgatherv_mismatch(16);
    allgatherv_mismatch(20000);
  }
  persistent(MPI_COMM_WORLD, 3);
  persistent(MPI_COMM_WORLD, 1500);
  if (rank == 0) printf("ok icoll %d ranks %d hosts\n", size, hosts);
  OK(MPI_Finalize());
  return 0;
}
