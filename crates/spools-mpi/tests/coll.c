/* Collectives: barrier, bcast (contiguous and a vector type), reduce and allreduce with
 * every predefined operator family, in place, MINLOC/MAXLOC on pairs and on vectors of
 * pairs (with gaps, and a negative stride), a non-commutative
 * user operator, scan, gather, scatter, allgather, alltoall (with in place), and the
 * same on communicators from split and dup. Any number of ranks. */
#include <string.h>
#include "check.h"

/* Non-commutative: 2x2 matrix product, in rank order. */
static void matmul(void *in, void *inout, int *len, MPI_Datatype *dt) {
  (void)dt;
  long *a = in, *b = inout;
  for (int k = 0; k < *len; k++, a += 4, b += 4) {
    long r[4] = {a[0] * b[0] + a[1] * b[2], a[0] * b[1] + a[1] * b[3],
                 a[2] * b[0] + a[3] * b[2], a[2] * b[1] + a[3] * b[3]};
    memcpy(b, r, sizeof r);
  }
}

static void run(MPI_Comm comm, const char *name) {
  int rank, size;
  OK(MPI_Comm_rank(comm, &rank));
  OK(MPI_Comm_size(comm, &size));
  OK(MPI_Barrier(comm));

  for (int root = 0; root < size; root++) {
    double b[5];
    for (int i = 0; i < 5; i++) b[i] = rank == root ? root * 10 + i : -1;
    OK(MPI_Bcast(b, 5, MPI_DOUBLE, root, comm));
    for (int i = 0; i < 5; i++) CHECK(b[i] == root * 10 + i, "%s bcast root %d b[%d]=%g", name, root, i, b[i]);
  }
  MPI_Datatype every3;
  OK(MPI_Type_vector(3, 1, 3, MPI_INT, &every3));
  OK(MPI_Type_commit(&every3));
  int v[9];
  for (int i = 0; i < 9; i++) v[i] = rank == 0 ? i : -1;
  OK(MPI_Bcast(v, 1, every3, 0, comm));
  for (int i = 0; i < 9; i++) CHECK(v[i] == (i % 3 == 0 || rank == 0 ? i : -1), "%s bcast vector v[%d]=%d", name, i, v[i]);
  OK(MPI_Type_free(&every3));
  /* A long vector (every other double of 2N: 781 KiB of data, in segments of 128 KiB
   * with a tail), from two roots; odd ranks receive it as N contiguous doubles (the same
   * type signature), the others as the vector, whose gaps stay as they were. */
  enum { N = 100003 };
  MPI_Datatype longvec;
  OK(MPI_Type_vector(N, 1, 2, MPI_DOUBLE, &longvec));
  OK(MPI_Type_commit(&longvec));
  double *big = malloc(2 * N * sizeof *big);
  CHECK(big != NULL, "malloc");
  for (int root = 0; root < size; root += size > 1 ? size - 1 : 1) {
    int dense = rank != root && rank % 2 == 1;
    for (long i = 0; i < 2 * N; i++) big[i] = rank == root ? (i % 2 ? -2.0 : root + i * 0.5) : -1.0;
    if (dense)
      OK(MPI_Bcast(big, N, MPI_DOUBLE, root, comm));
    else
      OK(MPI_Bcast(big, 1, longvec, root, comm));
    long bad = 0;
    for (long i = 0; i < 2 * N; i++) {
      double want;
      if (dense)
        want = i < N ? root + 2 * i * 0.5 : -1.0;
      else if (i % 2)
        want = rank == root ? -2.0 : -1.0;
      else
        want = root + i * 0.5;
      bad += big[i] != want;
    }
    CHECK(bad == 0, "%s long vector bcast from %d: %ld elements wrong", name, root, bad);
  }
  /* Every rank contiguous at that length: the ranks agree, and it goes whole. */
  for (long i = 0; i < 2 * N; i++) big[i] = rank == 0 ? i * 0.25 : -1.0;
  OK(MPI_Bcast(big, 2 * N, MPI_DOUBLE, 0, comm));
  long wrong = 0;
  for (long i = 0; i < 2 * N; i++) wrong += big[i] != i * 0.25;
  CHECK(wrong == 0, "%s long contiguous bcast: %ld elements wrong", name, wrong);
  /* Reductions of the long vector (in segments): element i of rank r is i + r; the
   * result of the ranks in `a..b` is their count times i plus their sum; gaps stay. */
  double *res = malloc(2 * N * sizeof *res);
  CHECK(res != NULL, "malloc");
  for (int kind = 0; kind < 5; kind++) {
    for (long i = 0; i < 2 * N; i++) {
      big[i] = i % 2 ? -3.0 : i + rank;
      res[i] = -1.0;
    }
    const char *what[] = {"allreduce", "allreduce in place", "reduce", "scan", "exscan"};
    int root = size - 1, gets = 1;
    long lo = 0, hi = size - 1; /* the ranks whose elements the result sums */
    double *out = res;
    if (kind == 0) OK(MPI_Allreduce(big, res, 1, longvec, MPI_SUM, comm));
    if (kind == 1) { OK(MPI_Allreduce(MPI_IN_PLACE, big, 1, longvec, MPI_SUM, comm)); out = big; }
    if (kind == 2) { OK(MPI_Reduce(big, res, 1, longvec, MPI_SUM, root, comm)); gets = rank == root; }
    if (kind == 3) { OK(MPI_Scan(big, res, 1, longvec, MPI_SUM, comm)); hi = rank; }
    if (kind == 4) { OK(MPI_Exscan(big, res, 1, longvec, MPI_SUM, comm)); hi = rank - 1; gets = rank > 0; }
    long wrong = 0;
    double gap = out == big ? -3.0 : -1.0;
    for (long i = 0; i < 2 * N; i++) {
      double want = i % 2 ? gap : (double)(hi - lo + 1) * i + (double)(hi + lo) * (hi - lo + 1) / 2;
      if (!gets) want = i % 2 ? -1.0 : -1.0;
      wrong += out[i] != want;
    }
    CHECK(wrong == 0, "%s long vector %s: %ld elements wrong", name, what[kind], wrong);
  }
  /* Lengths that differ (an erroneous program): rank 0 passes the vector, the others a
   * shorter one (640 KiB; both in segments). Every rank fails alike, in the broadcast
   * and in the reduction, and the next collective still matches. */
  if (size > 1) {
    MPI_Datatype shorter;
    OK(MPI_Type_vector(N - 20000, 1, 2, MPI_DOUBLE, &shorter));
    OK(MPI_Type_commit(&shorter));
    MPI_Datatype mine = rank == 0 ? longvec : shorter;
    OK(MPI_Comm_set_errhandler(comm, MPI_ERRORS_RETURN));
    int rc = MPI_Bcast(big, 1, mine, 0, comm), all = 0;
    CHECK(rc != MPI_SUCCESS, "%s bcast of differing lengths succeeded", name);
    rc = MPI_Allreduce(big, res, 1, mine, MPI_SUM, comm);
    CHECK(rc != MPI_SUCCESS, "%s allreduce of differing lengths succeeded", name);
    OK(MPI_Comm_set_errhandler(comm, MPI_ERRORS_ARE_FATAL));
    int one = 1;
    OK(MPI_Allreduce(&one, &all, 1, MPI_INT, MPI_SUM, comm));
    CHECK(all == size, "%s after the failed collectives: %d", name, all);
    OK(MPI_Type_free(&shorter));
  }
  free(res);
  free(big);
  OK(MPI_Type_free(&longvec));

  long s = rank + 1, sum = 0, prod = 0, mx = 0, mn = 0;
  OK(MPI_Allreduce(&s, &sum, 1, MPI_LONG, MPI_SUM, comm));
  OK(MPI_Allreduce(&s, &prod, 1, MPI_LONG, MPI_PROD, comm));
  OK(MPI_Allreduce(&s, &mx, 1, MPI_LONG, MPI_MAX, comm));
  OK(MPI_Allreduce(&s, &mn, 1, MPI_LONG, MPI_MIN, comm));
  long fact = 1;
  for (int i = 1; i <= size; i++) fact *= i;
  CHECK(sum == (long)size * (size + 1) / 2 && prod == fact && mx == size && mn == 1, "%s allreduce %ld %ld %ld %ld", name, sum, prod, mx, mn);
  unsigned bits = 1u << rank, bor = 0, band = 0, bx = 0;
  OK(MPI_Allreduce(&bits, &bor, 1, MPI_UNSIGNED, MPI_BOR, comm));
  OK(MPI_Allreduce(&bits, &band, 1, MPI_UNSIGNED, MPI_BAND, comm));
  OK(MPI_Allreduce(&bits, &bx, 1, MPI_UNSIGNED, MPI_BXOR, comm));
  CHECK(bor == (1u << size) - 1 && band == (size == 1 ? 1u : 0u) && bx == bor, "%s bit ops %x %x %x", name, bor, band, bx);
  int t = rank % 2, land, lor, lx;
  OK(MPI_Allreduce(&t, &land, 1, MPI_INT, MPI_LAND, comm));
  OK(MPI_Allreduce(&t, &lor, 1, MPI_INT, MPI_LOR, comm));
  OK(MPI_Allreduce(&t, &lx, 1, MPI_INT, MPI_LXOR, comm));
  CHECK(land == (size == 1 ? 0 : 0) && lor == (size > 1) && lx == ((size / 2) % 2), "%s logical %d %d %d", name, land, lor, lx);
  /* Every predefined operator on vectors longer than any vector register, with a tail
   * (the combining loops are chosen by the CPU's vector width): element i of rank r is
   * a function of both, so a lane combined from the wrong place or left out shows. */
  {
    enum { N = 1003 };
    static unsigned short us[N], ur[N], uw[N];
    static long long ls[N], lr[N], lw[N];
    static double ds[N], dr[N], dw[N];
    MPI_Op uops[] = {MPI_BAND, MPI_BOR, MPI_BXOR, MPI_LAND, MPI_LOR, MPI_LXOR, MPI_SUM, MPI_PROD, MPI_MIN, MPI_MAX};
    for (int o = 0; o < 10; o++) {
      for (int i = 0; i < N; i++) {
        us[i] = (unsigned short)((i * 2654435761u) >> (rank + 3));
        ls[i] = (long long)(i % 7 == rank % 7 ? 0 : (i * 40503LL) ^ (rank * 977LL)) - 3000;
        for (int r = 0; r < size; r++) {
          unsigned short u = (unsigned short)((i * 2654435761u) >> (r + 3));
          long long l = (long long)(i % 7 == r % 7 ? 0 : (i * 40503LL) ^ (r * 977LL)) - 3000;
          if (r == 0) { uw[i] = u; lw[i] = l; continue; }
          switch (o) {
          case 0: uw[i] &= u; lw[i] &= l; break;
          case 1: uw[i] |= u; lw[i] |= l; break;
          case 2: uw[i] ^= u; lw[i] ^= l; break;
          case 3: uw[i] = uw[i] && u; lw[i] = lw[i] && l; break;
          case 4: uw[i] = uw[i] || u; lw[i] = lw[i] || l; break;
          case 5: uw[i] = !uw[i] != !u; lw[i] = !lw[i] != !l; break;
          case 6: uw[i] += u; lw[i] += l; break;
          case 7: uw[i] = (unsigned short)((unsigned)uw[i] * u); lw[i] = (long long)((unsigned long long)lw[i] * (unsigned long long)l); break;
          case 8: uw[i] = u < uw[i] ? u : uw[i]; lw[i] = l < lw[i] ? l : lw[i]; break;
          default: uw[i] = u > uw[i] ? u : uw[i]; lw[i] = l > lw[i] ? l : lw[i]; break;
          }
        }
      }
      OK(MPI_Allreduce(us, ur, N, MPI_UNSIGNED_SHORT, uops[o], comm));
      OK(MPI_Allreduce(ls, lr, N, MPI_LONG_LONG, uops[o], comm));
      int bad = -1;
      for (int i = 0; i < N && bad < 0; i++)
        if (ur[i] != uw[i] || lr[i] != lw[i]) bad = i;
      CHECK(bad < 0, "%s long vectors, operator %d: element %d", name, o, bad);
    }
    MPI_Op fops[] = {MPI_SUM, MPI_MIN, MPI_MAX};
    for (int o = 0; o < 3; o++) {
      for (int i = 0; i < N; i++) {
        ds[i] = (i * 31 + rank * 17) % 101 - 50.5;
        for (int r = 0; r < size; r++) {
          double x = (i * 31 + r * 17) % 101 - 50.5;
          dw[i] = r == 0 ? x : o == 0 ? dw[i] + x : o == 1 ? (x < dw[i] ? x : dw[i]) : (x > dw[i] ? x : dw[i]);
        }
      }
      OK(MPI_Allreduce(ds, dr, N, MPI_DOUBLE, fops[o], comm));
      int bad = -1;
      for (int i = 0; i < N && bad < 0; i++)
        if (dr[i] != dw[i]) bad = i;
      CHECK(bad < 0, "%s long double vectors, operator %d: element %d", name, o, bad);
    }
  }
  float f[3] = {rank * 0.5f, -rank, 1}, fs[3];
  OK(MPI_Allreduce(f, fs, 3, MPI_FLOAT, MPI_SUM, comm));
  CHECK(fs[2] == size && fs[0] == 0.25f * size * (size - 1), "%s float sum %g %g", name, fs[0], fs[2]);

  double d[2] = {rank, 2.0 * rank};
  OK(MPI_Allreduce(MPI_IN_PLACE, d, 2, MPI_DOUBLE, MPI_SUM, comm));
  CHECK(d[0] == size * (size - 1) / 2.0 && d[1] == size * (size - 1.0), "%s in place %g %g", name, d[0], d[1]);
  for (int root = 0; root < size; root++) {
    int r = rank * rank, total = -1;
    OK(MPI_Reduce(&r, &total, 1, MPI_INT, MPI_SUM, root, comm));
    if (rank == root) {
      int want = 0;
      for (int i = 0; i < size; i++) want += i * i;
      CHECK(total == want, "%s reduce root %d %d", name, root, total);
    } else {
      CHECK(total == -1, "%s reduce wrote a non-root buffer", name);
    }
    int ip = rank;
    if (rank == root) OK(MPI_Reduce(MPI_IN_PLACE, &ip, 1, MPI_INT, MPI_MAX, root, comm));
    else OK(MPI_Reduce(&ip, NULL, 1, MPI_INT, MPI_MAX, root, comm));
    if (rank == root) CHECK(ip == size - 1, "%s reduce in place %d", name, ip);
  }

  struct { double v; int i; } p = {(double)((rank * 7) % size), rank}, lo, hi;
  OK(MPI_Allreduce(&p, &lo, 1, MPI_DOUBLE_INT, MPI_MINLOC, comm));
  OK(MPI_Allreduce(&p, &hi, 1, MPI_DOUBLE_INT, MPI_MAXLOC, comm));
  CHECK(lo.v == 0 && lo.i == 0, "%s minloc %g %d", name, lo.v, lo.i);
  CHECK(hi.v == size - 1, "%s maxloc %g %d", name, hi.v, hi.i);
  int pi[2] = {rank / 2, rank}, po[2];
  OK(MPI_Allreduce(pi, po, 1, MPI_2INT, MPI_MAXLOC, comm));
  CHECK(po[0] == (size - 1) / 2 && po[1] == ((size - 1) / 2) * 2, "%s 2int maxloc %d %d", name, po[0], po[1]);

  /* MINLOC/MAXLOC on types made of pairs: a vector of MPI_DOUBLE_INT (2 of every 3
   * pairs, the third untouched), 2 elements of it, and a vector of MPI_2INT with a
   * negative stride. */
  {
    struct { double v; int i; } vin[6], vout[6];
    for (int k = 0; k < 6; k++) {
      vin[k].v = (double)((rank + k) % size);
      vin[k].i = rank;
      vout[k].v = -7;
      vout[k].i = -7;
    }
    MPI_Datatype vec, neg;
    OK(MPI_Type_vector(1, 2, 3, MPI_DOUBLE_INT, &vec));
    MPI_Datatype vec3;
    OK(MPI_Type_create_resized(vec, 0, 3 * (MPI_Aint)sizeof vin[0], &vec3));
    OK(MPI_Type_commit(&vec3));
    OK(MPI_Allreduce(vin, vout, 2, vec3, MPI_MINLOC, comm));
    for (int k = 0; k < 6; k++) {
      if (k % 3 == 2) {
        CHECK(vout[k].v == -7 && vout[k].i == -7, "%s vector minloc wrote the gap %d", name, k);
        continue;
      }
      /* The least (r + k) % size is 0, first at rank (size - k % size) % size. */
      int at = (size - k % size) % size;
      CHECK(vout[k].v == 0 && vout[k].i == at, "%s vector minloc [%d] %g %d", name, k, vout[k].v, vout[k].i);
    }
    int ni[6], no[6];
    for (int k = 0; k < 3; k++) { ni[2 * k] = k == 1 ? rank : -rank; ni[2 * k + 1] = rank; no[2 * k] = no[2 * k + 1] = -9; }
    OK(MPI_Type_vector(2, 1, -2, MPI_2INT, &neg));
    OK(MPI_Type_commit(&neg));
    /* Pairs 2 and 0 of each buffer (from its third pair on, 2 back). */
    OK(MPI_Allreduce(ni + 4, no + 4, 1, neg, MPI_MAXLOC, comm));
    CHECK(no[0] == 0 && no[1] == 0, "%s negative-stride maxloc [0] %d %d", name, no[0], no[1]);
    CHECK(no[4] == 0 && no[5] == 0, "%s negative-stride maxloc [2] %d %d", name, no[4], no[5]);
    CHECK(no[2] == -9 && no[3] == -9, "%s negative-stride maxloc wrote pair 1", name);
    OK(MPI_Type_free(&vec));
    OK(MPI_Type_free(&vec3));
    OK(MPI_Type_free(&neg));
  }

  MPI_Op mm;
  OK(MPI_Op_create(matmul, 0, &mm));
  int commute = -1;
  OK(MPI_Op_commutative(mm, &commute));
  CHECK(commute == 0, "commutative %d", commute);
  MPI_Datatype mat;
  OK(MPI_Type_contiguous(4, MPI_LONG, &mat));
  OK(MPI_Type_commit(&mat));
  long m[4] = {1, rank, 0, 1}, mr[4]; /* [[1, r], [0, 1]]: the product has sum of r on top */
  OK(MPI_Allreduce(m, mr, 1, mat, mm, comm));
  CHECK(mr[0] == 1 && mr[1] == (long)size * (size - 1) / 2 && mr[2] == 0 && mr[3] == 1, "%s user op %ld", name, mr[1]);
  long ms[4];
  OK(MPI_Scan(m, ms, 1, mat, mm, comm));
  CHECK(ms[1] == (long)rank * (rank + 1) / 2, "%s user scan %ld", name, ms[1]);
  OK(MPI_Op_free(&mm));
  OK(MPI_Type_free(&mat));
  CHECK(mm == MPI_OP_NULL, "op freed");
  int sc = rank + 1, scr;
  OK(MPI_Scan(&sc, &scr, 1, MPI_INT, MPI_SUM, comm));
  CHECK(scr == (rank + 1) * (rank + 2) / 2, "%s scan %d", name, scr);

  int mine[2] = {rank, -rank}, *all = malloc(sizeof(int) * 2 * size);
  for (int root = 0; root < size; root++) {
    OK(MPI_Gather(mine, 2, MPI_INT, all, 2, MPI_INT, root, comm));
    if (rank == root) for (int i = 0; i < size; i++) CHECK(all[2 * i] == i && all[2 * i + 1] == -i, "%s gather", name);
    int got[2];
    for (int i = 0; i < size; i++) { all[2 * i] = 10 * i; all[2 * i + 1] = root; }
    OK(MPI_Scatter(all, 2, MPI_INT, got, 2, MPI_INT, root, comm));
    CHECK(got[0] == 10 * rank && got[1] == root, "%s scatter %d %d", name, got[0], got[1]);
  }
  OK(MPI_Allgather(mine, 2, MPI_INT, all, 2, MPI_INT, comm));
  for (int i = 0; i < size; i++) CHECK(all[2 * i] == i, "%s allgather", name);
  for (int i = 0; i < size; i++) all[2 * i] = all[2 * i + 1] = -9;
  all[2 * rank] = rank * 3;
  all[2 * rank + 1] = 1;
  OK(MPI_Allgather(MPI_IN_PLACE, 0, MPI_DATATYPE_NULL, all, 2, MPI_INT, comm));
  for (int i = 0; i < size; i++) CHECK(all[2 * i] == 3 * i && all[2 * i + 1] == 1, "%s allgather in place", name);
  /* Allgatherv: rank i gives i+1 ints; blocks one after the other, then apart (the ints
   * between stay), then from a strided send type, then in place. */
  int *cnt = malloc(sizeof(int) * size), *dsp = malloc(sizeof(int) * size), tot = 0;
  for (int i = 0; i < size; i++) { cnt[i] = i + 1; dsp[i] = tot; tot += i + 1; }
  int span = size * (size + 2) + 2;
  int *vin = malloc(sizeof(int) * 2 * (rank + 1)), *vout = malloc(sizeof(int) * span);
  for (int j = 0; j <= rank; j++) vin[j] = rank * 10 + j;
  OK(MPI_Allgatherv(vin, rank + 1, MPI_INT, vout, cnt, dsp, MPI_INT, comm));
  for (int i = 0; i < size; i++)
    for (int j = 0; j <= i; j++) CHECK(vout[dsp[i] + j] == i * 10 + j, "%s allgatherv [%d][%d]", name, i, j);
  MPI_Datatype every2;
  OK(MPI_Type_create_resized(MPI_INT, 0, 2 * sizeof(int), &every2));
  OK(MPI_Type_commit(&every2));
  for (int j = 0; j <= rank; j++) { vin[2 * j] = rank * 10 + j + 5; vin[2 * j + 1] = -1; }
  for (int round = 0; round < 2; round++) {
    for (int i = 0; i < size; i++) dsp[i] = i * (size + 2) + 1;
    for (int i = 0; i < span; i++) vout[i] = -5;
    if (round == 0) {
      OK(MPI_Allgatherv(vin, rank + 1, every2, vout, cnt, dsp, MPI_INT, comm));
    } else {
      for (int j = 0; j <= rank; j++) vout[dsp[rank] + j] = rank * 10 + j + 5;
      OK(MPI_Allgatherv(MPI_IN_PLACE, 0, MPI_DATATYPE_NULL, vout, cnt, dsp, MPI_INT, comm));
    }
    for (int i = 0, at = 0; i < size; i++) {
      for (; at < dsp[i]; at++) CHECK(vout[at] == -5, "%s allgatherv %d gap [%d] = %d", name, round, at, vout[at]);
      for (int j = 0; j <= i; j++, at++) CHECK(vout[at] == i * 10 + j + 5, "%s allgatherv %d [%d][%d] = %d", name, round, i, j, vout[at]);
    }
  }
  OK(MPI_Type_free(&every2));
  free(cnt), free(dsp), free(vin), free(vout);
  /* Alltoallv: rank i sends (i + 2j) % 3 ints to rank j; blocks one after the other,
   * then apart on both sides (the ints between stay). */
  int *vsc = malloc(sizeof(int) * size), *sd = malloc(sizeof(int) * size);
  int *rc = malloc(sizeof(int) * size), *rd = malloc(sizeof(int) * size);
  int *a2s = malloc(sizeof(int) * 4 * size), *a2r = malloc(sizeof(int) * 4 * size);
  for (int gap = 0; gap < 2; gap++) {
    for (int j = 0, at = 0, bt = 0; j < size; j++) {
      vsc[j] = (rank + 2 * j) % 3;
      rc[j] = (j + 2 * rank) % 3;
      sd[j] = at;
      rd[j] = bt;
      at += vsc[j] + gap;
      bt += rc[j] + gap;
    }
    for (int i = 0; i < 4 * size; i++) {
      a2s[i] = -2;
      a2r[i] = -5;
    }
    for (int j = 0; j < size; j++)
      for (int e = 0; e < vsc[j]; e++) a2s[sd[j] + e] = rank * 1000 + j * 10 + e;
    OK(MPI_Alltoallv(a2s, vsc, sd, MPI_INT, a2r, rc, rd, MPI_INT, comm));
    for (int i = 0, at = 0; i < size; i++) {
      for (; at < rd[i]; at++) CHECK(a2r[at] == -5, "%s alltoallv gap %d [%d] = %d", name, gap, at, a2r[at]);
      for (int e = 0; e < rc[i]; e++, at++)
        CHECK(a2r[at] == i * 1000 + rank * 10 + e, "%s alltoallv %d from %d [%d] = %d", name, gap, i, e, a2r[at]);
    }
  }
  free(vsc), free(sd), free(rc), free(rd), free(a2s), free(a2r);
  /* Gatherv and scatterv to and from every root: rank i gives (receives) i % 3 ints
   * (zero counts too); blocks one after the other, then apart (the ints between stay) from
   * a strided type at the root, then in place at the root. */
  int *gc = malloc(sizeof(int) * size), *gd = malloc(sizeof(int) * size);
  int gspan = 4 * size + 2, gin[4], gout_[2 * 4], *gbuf = malloc(sizeof(int) * 2 * gspan);
  MPI_Datatype two;
  OK(MPI_Type_create_resized(MPI_INT, 0, 2 * sizeof(int), &two));
  OK(MPI_Type_commit(&two));
  for (int root = 0; root < size; root++) {
    for (int round = 0; round < 3; round++) {
      int stride = round == 1 ? 2 : 1;
      MPI_Datatype rt = round == 1 ? two : MPI_INT;
      for (int i = 0, at = 0; i < size; i++) {
        gc[i] = i % 3;
        gd[i] = at;
        at += gc[i] + (round == 0 ? 0 : 1);
      }
      for (int i = 0; i < 2 * gspan; i++) gbuf[i] = -5;
      for (int j = 0; j < rank % 3; j++) gin[j] = root * 1000 + rank * 10 + j;
      int inplace = round == 2 && rank == root;
      if (inplace)
        for (int j = 0; j < rank % 3; j++) gbuf[gd[rank] + j] = gin[j];
      OK(MPI_Gatherv(inplace ? MPI_IN_PLACE : gin, rank % 3, MPI_INT, gbuf, gc, gd, rt, root, comm));
      if (rank == root) {
        for (int i = 0, at = 0; i < size; i++) {
          for (; at < gd[i]; at++) CHECK(gbuf[at * stride] == -5, "%s gatherv %d gap [%d]", name, round, at);
          for (int j = 0; j < gc[i]; j++, at++)
            CHECK(gbuf[at * stride] == root * 1000 + i * 10 + j, "%s gatherv %d to %d [%d][%d] = %d", name, round, root,
                  i, j, gbuf[at * stride]);
        }
      }
      /* Scatter the gathered blocks back out: each rank gets its own again. */
      for (int j = 0; j < 2 * 4; j++) gout_[j] = -7;
      inplace = round == 2 && rank == root;
      OK(MPI_Scatterv(gbuf, gc, gd, rt, inplace ? MPI_IN_PLACE : gout_, rank % 3, MPI_INT, root, comm));
      if (!inplace)
        for (int j = 0; j < 2 * 4; j++)
          CHECK(gout_[j] == (j < rank % 3 ? root * 1000 + rank * 10 + j : -7), "%s scatterv %d from %d [%d] = %d",
                name, round, root, j, gout_[j]);
    }
  }
  OK(MPI_Type_free(&two));
  free(gc), free(gd), free(gbuf);
  int *to = malloc(sizeof(int) * size), *from = malloc(sizeof(int) * size);
  for (int i = 0; i < size; i++) to[i] = rank * 100 + i;
  OK(MPI_Alltoall(to, 1, MPI_INT, from, 1, MPI_INT, comm));
  for (int i = 0; i < size; i++) CHECK(from[i] == i * 100 + rank, "%s alltoall from[%d]=%d", name, i, from[i]);
  OK(MPI_Alltoall(MPI_IN_PLACE, 0, MPI_DATATYPE_NULL, from, 1, MPI_INT, comm));
  for (int i = 0; i < size; i++) CHECK(from[i] == rank * 100 + i, "%s alltoall in place", name);
  free(all);
  free(to);
  free(from);
}

/* A user operator on an indexed type whose data starts 4 bytes in (lb 4). */
static void addints(void *in, void *inout, int *len, MPI_Datatype *dt) {
  (void)dt;
  int *a = in, *b = inout;
  for (int k = 0; k < *len; k++) b[1 + 2 * k] += a[1 + 2 * k];
}

/* Cases a review found: in-place alltoall(v) with a strided resized type (the blocks lie
 * beyond count x extent), a persistent in-place alltoall started twice (each start sends
 * the buffer as it is then), MAXLOC on long values beyond 2^53, a user operator on a type
 * with a non-zero lower bound. */
static void regressions(MPI_Comm comm) {
  int rank, size;
  OK(MPI_Comm_rank(comm, &rank));
  OK(MPI_Comm_size(comm, &size));
  int n = size;
  double *m = malloc(sizeof(double) * n * n);
  for (int i = 0; i < n * n; i++) m[i] = rank * 1000 + i;
  MPI_Datatype col, coltype;
  OK(MPI_Type_vector(n, 1, n, MPI_DOUBLE, &col));
  OK(MPI_Type_create_resized(col, 0, sizeof(double), &coltype));
  OK(MPI_Type_commit(&coltype));
  int *ones = malloc(sizeof(int) * n), *displs = malloc(sizeof(int) * n);
  for (int i = 0; i < n; i++) { ones[i] = 1; displs[i] = i; }
  /* Column i of my matrix goes to rank i, whose column r it becomes. */
  OK(MPI_Alltoallv(MPI_IN_PLACE, NULL, NULL, MPI_DATATYPE_NULL, m, ones, displs, coltype, comm));
  for (int i = 0; i < n; i++)
    for (int j = 0; j < n; j++)
      CHECK(m[i * n + j] == j * 1000 + i * n + rank, "in-place alltoallv m[%d][%d] = %g", i, j, m[i * n + j]);
  OK(MPI_Type_free(&coltype));
  OK(MPI_Type_free(&col));
  free(ones);
  free(displs);
  free(m);

  int *v = malloc(sizeof(int) * n);
  MPI_Request pr;
  OK(MPI_Alltoall_init(MPI_IN_PLACE, 0, MPI_DATATYPE_NULL, v, 1, MPI_INT, comm, MPI_INFO_NULL, &pr));
  for (int round = 0; round < 2; round++) {
    for (int i = 0; i < n; i++) v[i] = round * 100000 + rank * 100 + i;
    OK(MPI_Start(&pr));
    OK(MPI_Wait(&pr, MPI_STATUS_IGNORE));
    for (int i = 0; i < n; i++) CHECK(v[i] == round * 100000 + i * 100 + rank, "persistent in-place round %d v[%d] = %d", round, i, v[i]);
  }
  OK(MPI_Request_free(&pr));
  free(v);

  struct { long v; int i; } li = {(1L << 53) + (rank == size - 1 ? 1 : 0), rank}, lo;
  OK(MPI_Allreduce(&li, &lo, 1, MPI_LONG_INT, MPI_MAXLOC, comm));
  CHECK(lo.i == size - 1 && lo.v == (1L << 53) + 1, "long maxloc %ld %d", lo.v, lo.i);

  MPI_Datatype second;
  int bl = 1, disp = 1;
  OK(MPI_Type_indexed(1, &bl, &disp, MPI_INT, &second));
  MPI_Datatype pairs;
  OK(MPI_Type_create_resized(second, 0, 2 * sizeof(int), &pairs));
  OK(MPI_Type_commit(&pairs));
  MPI_Op add;
  OK(MPI_Op_create(addints, 1, &add));
  int in[4] = {-1, rank, -1, 2 * rank}, res[4] = {-5, -5, -5, -5};
  OK(MPI_Allreduce(in, res, 2, pairs, add, comm));
  CHECK(res[0] == -5 && res[2] == -5 && res[1] == size * (size - 1) / 2 && res[3] == size * (size - 1), "user op on lb type %d %d %d %d", res[0], res[1], res[2], res[3]);
  OK(MPI_Op_free(&add));
  OK(MPI_Type_free(&pairs));
  OK(MPI_Type_free(&second));
}

int main(int argc, char **argv) {
  int rank, size;
  OK(MPI_Init(&argc, &argv));
  OK(MPI_Comm_rank(MPI_COMM_WORLD, &rank));
  OK(MPI_Comm_size(MPI_COMM_WORLD, &size));
  run(MPI_COMM_WORLD, "world");
  regressions(MPI_COMM_WORLD);
  run(MPI_COMM_SELF, "self");
  MPI_Comm dup, half;
  OK(MPI_Comm_dup(MPI_COMM_WORLD, &dup));
  int cmp;
  OK(MPI_Comm_compare(MPI_COMM_WORLD, dup, &cmp));
  CHECK(cmp == MPI_CONGRUENT, "compare %d", cmp);
  run(dup, "dup");
  OK(MPI_Comm_split(MPI_COMM_WORLD, rank % 2, -rank, &half));
  int hr, hs;
  OK(MPI_Comm_rank(half, &hr));
  OK(MPI_Comm_size(half, &hs));
  CHECK(hs == (size + 1 - rank % 2) / 2 && hr == hs - 1 - rank / 2, "split rank %d of %d", hr, hs);
  run(half, "split");
  MPI_Comm none;
  OK(MPI_Comm_split(MPI_COMM_WORLD, rank == 0 ? 0 : MPI_UNDEFINED, 0, &none));
  CHECK((rank == 0) == (none != MPI_COMM_NULL), "undefined color");
  if (none != MPI_COMM_NULL) OK(MPI_Comm_free(&none));
  MPI_Comm node;
  OK(MPI_Comm_split_type(MPI_COMM_WORLD, MPI_COMM_TYPE_SHARED, 0, MPI_INFO_NULL, &node));
  int ns;
  OK(MPI_Comm_size(node, &ns));
  CHECK(ns == size, "one host: shared split has %d of %d", ns, size);
  OK(MPI_Comm_free(&node));
  OK(MPI_Comm_free(&half));
  OK(MPI_Comm_free(&dup));
  CHECK(dup == MPI_COMM_NULL, "freed comm handle");
  if (rank == 0) printf("ok coll %d ranks\n", size);
  OK(MPI_Finalize());
  return 0;
}
