/* Point-to-point: every send mode, blocking and not, wildcards and status fields,
 * PROC_NULL, probes, sendrecv(_replace), Get_count, derived datatypes on both sides,
 * cancel, and a 4 MiB rendezvous message. Any number of ranks >= 2. At thread level
 * MULTIPLE, or with the argument "single" at MPI_THREAD_SINGLE (the path that takes no
 * lock), the level provided given as the one expected as a second argument: "multiple"
 * where SPOOLS_THREAD_LEVEL raised it. */
#include <malloc.h>
#include <stddef.h>
#include <string.h>
#include "check.h"

/* Receives into non-contiguous datatypes, unpacked piece by piece as the message
 * arrives, from sends packed piece by piece as they leave: a struct of three runs per
 * element (an int, two shorts 4 bytes apart, a double), whole messages of 32 B to
 * 3 MiB (eager and streamed) through MPI_Send, MPI_Isend and MPI_Issend to MPI_Recv
 * and MPI_Irecv from a named source and from any; a message that ends inside an
 * element; and truncation, which leaves every byte of the buffer as it was. */
struct three { int a; short pad0; short b; short pad1; short c; double d; };

static void fill3(struct three *t, long n, int who) {
  for (long i = 0; i < n; i++) {
    t[i].a = who * 1000003 + (int)i;
    t[i].b = (short)(i * 7 + who);
    t[i].c = (short)(i * 11 - who);
    t[i].d = who + i * 0.5;
    t[i].pad0 = t[i].pad1 = -5;
  }
}

static long bad3(const struct three *t, long n, int who) {
  long bad = 0;
  for (long i = 0; i < n; i++)
    bad += t[i].a != who * 1000003 + (int)i || t[i].b != (short)(i * 7 + who) ||
           t[i].c != (short)(i * 11 - who) || t[i].d != who + i * 0.5 || t[i].pad0 != -1 ||
           t[i].pad1 != -1;
  return bad;
}

static void scattered(int rank, int size, int right, int left) {
  MPI_Datatype three;
  MPI_Aint disp[3] = {offsetof(struct three, a), offsetof(struct three, b), offsetof(struct three, d)};
  MPI_Datatype sh2;
  OK(MPI_Type_create_hvector(2, 1, 4, MPI_SHORT, &sh2));
  MPI_Datatype parts[3] = {MPI_INT, sh2, MPI_DOUBLE};
  int one3[3] = {1, 1, 1};
  MPI_Datatype st3;
  OK(MPI_Type_create_struct(3, one3, disp, parts, &st3));
  OK(MPI_Type_create_resized(st3, 0, sizeof(struct three), &three));
  OK(MPI_Type_commit(&three));
  OK(MPI_Type_free(&st3));
  OK(MPI_Type_free(&sh2));
  int ts;
  OK(MPI_Type_size(three, &ts));
  CHECK(ts == 16, "struct three size %d", ts);
  long counts[4] = {2, 300, 70000, 196608}; /* 32 B, 4.7 KiB, 1.1 MiB, 3 MiB of data */
  for (int k = 0; k < 4; k++) {
    long n = counts[k];
    struct three *out = malloc(n * sizeof *out), *in = malloc(n * sizeof *in);
    CHECK(out && in, "malloc");
    fill3(out, n, rank);
    for (int way = 0; way < 7; way++) {
      memset(in, 0xff, n * sizeof *in); /* every gap -1 */
      MPI_Status s;
      MPI_Request r;
      int tag = way < 4 ? 500 + 4 * k + way : 700 + 8 * k + way;
      if (way == 0) {
        OK(MPI_Irecv(in, (int)n, three, left, tag, MPI_COMM_WORLD, &r));
        OK(MPI_Send(out, (int)n, three, right, tag, MPI_COMM_WORLD));
        OK(MPI_Wait(&r, &s));
      } else if (way == 1) {
        OK(MPI_Isend(out, (int)n, three, right, tag, MPI_COMM_WORLD, &r));
        OK(MPI_Recv(in, (int)n, three, left, tag, MPI_COMM_WORLD, &s));
        OK(MPI_Wait(&r, MPI_STATUS_IGNORE));
      } else if (way == 2) {
        /* From any source: the left neighbour is the only one sending this tag. */
        OK(MPI_Isend(out, (int)n, three, right, tag, MPI_COMM_WORLD, &r));
        OK(MPI_Recv(in, (int)n, three, MPI_ANY_SOURCE, tag, MPI_COMM_WORLD, &s));
        OK(MPI_Wait(&r, MPI_STATUS_IGNORE));
      } else if (way == 3) {
        /* Synchronous mode, packed as it leaves whatever its length. */
        OK(MPI_Issend(out, (int)n, three, right, tag, MPI_COMM_WORLD, &r));
        OK(MPI_Recv(in, (int)n, three, MPI_ANY_SOURCE, tag, MPI_COMM_WORLD, &s));
        OK(MPI_Wait(&r, MPI_STATUS_IGNORE));
      } else if (way == 4) {
        /* Sendrecv, scattered both ways. */
        OK(MPI_Sendrecv(out, (int)n, three, right, tag, in, (int)n, three, left, tag, MPI_COMM_WORLD, &s));
      } else if (way == 5) {
        /* Sendrecv, scattered out, into packed bytes (then unpacked here). */
        char *packed = malloc(n * 16);
        CHECK(packed != NULL, "malloc");
        OK(MPI_Sendrecv(out, (int)n, three, right, tag, packed, (int)n * 16, MPI_BYTE, left, tag, MPI_COMM_WORLD, &s));
        int pos = 0;
        OK(MPI_Unpack(packed, (int)n * 16, &pos, in, (int)n, three, MPI_COMM_WORLD));
        free(packed);
      } else {
        /* Sendrecv_replace: its own elements out, the left neighbour's in, gaps kept. */
        fill3(in, n, rank);
        for (long i = 0; i < n; i++) in[i].pad0 = in[i].pad1 = -1;
        OK(MPI_Sendrecv_replace(in, (int)n, three, right, tag, left, tag, MPI_COMM_WORLD, &s));
      }
      int cnt = -1;
      OK(MPI_Get_count(&s, three, &cnt));
      CHECK(cnt == n && s.MPI_SOURCE == left, "scattered %ld way %d: count %d from %d", n, way, cnt, s.MPI_SOURCE);
      long bad = bad3(in, n, left);
      CHECK(bad == 0, "scattered %ld way %d: %ld elements wrong", n, way, bad);
    }
    /* A message of 3 elements and 10 bytes (the int, both shorts, 2 bytes of the
     * double) into room for n: the elements, the two bytes, nothing past them. */
    /* Into room for n through MPI_Irecv, and into room for 4 through MPI_Recv (a
     * short receive, received on the stack and unpacked). */
    for (int blocking = 0; blocking < 2 && n >= 4; blocking++) {
      char packed[4 * 16];
      int pos = 0;
      OK(MPI_Pack(out, 4, three, packed, sizeof packed, &pos, MPI_COMM_WORLD));
      CHECK(pos == 64, "packed %d bytes", pos);
      memset(in, 0xff, n * sizeof *in);
      MPI_Request q;
      MPI_Status st;
      if (!blocking)
        OK(MPI_Irecv(in, (int)n, three, left, 520 + k, MPI_COMM_WORLD, &q));
      else
        OK(MPI_Isend(packed, 3 * 16 + 10, MPI_BYTE, right, 520 + k, MPI_COMM_WORLD, &q));
      if (!blocking)
        OK(MPI_Send(packed, 3 * 16 + 10, MPI_BYTE, right, 520 + k, MPI_COMM_WORLD));
      else
        OK(MPI_Recv(in, 4, three, left, 520 + k, MPI_COMM_WORLD, &st));
      OK(MPI_Wait(&q, blocking ? MPI_STATUS_IGNORE : &st));
      int cnt = 0, el = 0;
      OK(MPI_Get_count(&st, three, &cnt));
      OK(MPI_Get_elements(&st, three, &el));
      /* 2 bytes of a double are no whole basic element: both undefined. */
      CHECK(cnt == MPI_UNDEFINED && el == MPI_UNDEFINED, "part: count %d elements %d", cnt, el);
      CHECK(bad3(in, 3, left) == 0, "part: whole elements wrong");
      struct three want[4];
      fill3(want, 4, left);
      const unsigned char *d = (const unsigned char *)&in[3].d, *w = (const unsigned char *)&want[3].d;
      CHECK(in[3].a == want[3].a && in[3].b == want[3].b && in[3].c == want[3].c && d[0] == w[0] &&
            d[1] == w[1] && d[2] == 0xff && d[7] == 0xff && in[4].a == -1,
            "part: element 3 %d %d %d, bytes %x %x %x", in[3].a, in[3].b, in[3].c, d[0], d[1], d[2]);
    }
    /* Truncation: n elements into room for n - 1 (n / 2 for the long ones), under
     * MPI_ERRORS_RETURN; the buffer is left as it was. */
    OK(MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_RETURN));
    memset(in, 0xff, n * sizeof *in);
    long room = n > 1000 ? n / 2 : n - 1;
    MPI_Request r;
    MPI_Status st;
    OK(MPI_Isend(out, (int)n, three, right, 530 + k, MPI_COMM_WORLD, &r));
    int rc = MPI_Recv(in, (int)room, three, left, 530 + k, MPI_COMM_WORLD, &st), cls = -1;
    MPI_Error_class(rc, &cls);
    CHECK(cls == MPI_ERR_TRUNCATE, "scattered truncation of %ld: class %d", n, cls);
    OK(MPI_Wait(&r, MPI_STATUS_IGNORE));
    const unsigned char *bytes = (const unsigned char *)in;
    long touched = 0;
    for (long i = 0; i < n * (long)sizeof *in; i++) touched += bytes[i] != 0xff;
    CHECK(touched == 0, "scattered truncation of %ld: %ld bytes written", n, touched);
    /* The same through Sendrecv, scattered both ways: every rank's receive too short. */
    rc = MPI_Sendrecv(out, (int)n, three, right, 540 + k, in, (int)room, three, left, 540 + k,
                      MPI_COMM_WORLD, &st);
    MPI_Error_class(rc, &cls);
    CHECK(cls == MPI_ERR_TRUNCATE, "scattered sendrecv truncation of %ld: class %d", n, cls);
    OK(MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_ARE_FATAL));
    for (long i = 0; i < n * (long)sizeof *in; i++) touched += bytes[i] != 0xff;
    CHECK(touched == 0, "scattered sendrecv truncation of %ld: %ld bytes written", n, touched);
    free(out);
    free(in);
  }
  OK(MPI_Type_free(&three));
  (void)size;
}

int main(int argc, char **argv) {
  int provided, rank, size, queried, is_main;
  int single = argc > 1 && strcmp(argv[1], "single") == 0;
  int expect_single = single && !(argc > 2 && strcmp(argv[2], "multiple") == 0);
  int required = single ? MPI_THREAD_SINGLE : MPI_THREAD_MULTIPLE;
  int expected = expect_single ? MPI_THREAD_SINGLE : MPI_THREAD_MULTIPLE;
  OK(MPI_Init_thread(&argc, &argv, required, &provided));
  CHECK(provided == expected, "provided %d, expected %d", provided, expected);
  OK(MPI_Query_thread(&queried));
  CHECK(queried == provided, "MPI_Query_thread gave %d, provided %d", queried, provided);
  OK(MPI_Is_thread_main(&is_main));
  CHECK(is_main, "the thread that initialised is not the main thread");
  OK(MPI_Comm_rank(MPI_COMM_WORLD, &rank));
  OK(MPI_Comm_size(MPI_COMM_WORLD, &size));
  int right = (rank + 1) % size, left = (rank + size - 1) % size;
  MPI_Status st;

  /* Standard, synchronous, ready and buffered modes around a ring. */
  int modes = 4;
  char bsendbuf[4096];
  OK(MPI_Buffer_attach(bsendbuf, sizeof bsendbuf));
  for (int m = 0; m < modes; m++) {
    int out[3] = {rank, m, 7 * rank + m}, in[3] = {-1, -1, -1};
    MPI_Request r;
    OK(MPI_Irecv(in, 3, MPI_INT, left, 10 + m, MPI_COMM_WORLD, &r));
    OK(MPI_Barrier(MPI_COMM_WORLD)); /* every receive is posted: ready mode is valid */
    switch (m) {
      case 0: OK(MPI_Send(out, 3, MPI_INT, right, 10 + m, MPI_COMM_WORLD)); break;
      case 1: OK(MPI_Ssend(out, 3, MPI_INT, right, 10 + m, MPI_COMM_WORLD)); break;
      case 2: OK(MPI_Rsend(out, 3, MPI_INT, right, 10 + m, MPI_COMM_WORLD)); break;
      case 3: OK(MPI_Bsend(out, 3, MPI_INT, right, 10 + m, MPI_COMM_WORLD)); break;
    }
    OK(MPI_Wait(&r, &st));
    CHECK(in[0] == left && in[1] == m && in[2] == 7 * left + m, "mode %d got %d %d %d", m, in[0], in[1], in[2]);
    CHECK(st.MPI_SOURCE == left && st.MPI_TAG == 10 + m, "status %d %d", st.MPI_SOURCE, st.MPI_TAG);
    int n;
    OK(MPI_Get_count(&st, MPI_INT, &n));
    CHECK(n == 3, "count %d", n);
  }
  void *b; int bs;
  OK(MPI_Buffer_detach(&b, &bs));
  CHECK(b == bsendbuf && bs == (int)sizeof bsendbuf, "detach gave %p %d", b, bs);

  /* Wildcards: rank 0 receives one message from every other rank, any order. */
  if (rank == 0) {
    int seen = 0;
    for (int i = 1; i < size; i++) {
      double v;
      OK(MPI_Recv(&v, 1, MPI_DOUBLE, MPI_ANY_SOURCE, MPI_ANY_TAG, MPI_COMM_WORLD, &st));
      CHECK(st.MPI_TAG == 100 + st.MPI_SOURCE && v == st.MPI_SOURCE * 0.5, "from %d tag %d v %g", st.MPI_SOURCE, st.MPI_TAG, v);
      seen |= 1 << st.MPI_SOURCE;
    }
    CHECK(seen == ((1 << size) - 2), "seen %x", seen);
  } else {
    double v = rank * 0.5;
    OK(MPI_Send(&v, 1, MPI_DOUBLE, 0, 100 + rank, MPI_COMM_WORLD));
  }
  OK(MPI_Barrier(MPI_COMM_WORLD)); /* no later message meets the wildcard receives */

  /* PROC_NULL: completes at once with the standard's status. */
  int x = 5;
  OK(MPI_Send(&x, 1, MPI_INT, MPI_PROC_NULL, 0, MPI_COMM_WORLD));
  OK(MPI_Recv(&x, 1, MPI_INT, MPI_PROC_NULL, 0, MPI_COMM_WORLD, &st));
  CHECK(st.MPI_SOURCE == MPI_PROC_NULL && st.MPI_TAG == MPI_ANY_TAG && x == 5, "proc null status %d %d", st.MPI_SOURCE, st.MPI_TAG);
  int n = -1;
  OK(MPI_Get_count(&st, MPI_INT, &n));
  CHECK(n == 0, "proc null count %d", n);

  /* Probe and Iprobe, then a receive of the size the probe told. */
  if (rank == 1) {
    char msg[37];
    memset(msg, 'p', sizeof msg);
    OK(MPI_Send(msg, sizeof msg, MPI_CHAR, 0, 33, MPI_COMM_WORLD));
  } else if (rank == 0) {
    OK(MPI_Probe(1, 33, MPI_COMM_WORLD, &st));
    OK(MPI_Get_count(&st, MPI_CHAR, &n));
    CHECK(n == 37, "probe count %d", n);
    int flag = 0;
    OK(MPI_Iprobe(1, 33, MPI_COMM_WORLD, &flag, &st));
    CHECK(flag == 1, "iprobe flag %d", flag);
    char got[37];
    OK(MPI_Recv(got, n, MPI_CHAR, 1, 33, MPI_COMM_WORLD, &st));
    CHECK(got[0] == 'p' && got[36] == 'p', "probe data");
    OK(MPI_Iprobe(1, 33, MPI_COMM_WORLD, &flag, &st));
    CHECK(flag == 0, "iprobe after receive %d", flag);
  }

  /* Sendrecv and Sendrecv_replace around the ring. */
  long a = rank, c = -1;
  OK(MPI_Sendrecv(&a, 1, MPI_LONG, right, 5, &c, 1, MPI_LONG, left, 5, MPI_COMM_WORLD, &st));
  CHECK(c == left, "sendrecv got %ld", c);
  OK(MPI_Sendrecv_replace(&a, 1, MPI_LONG, right, 6, left, 6, MPI_COMM_WORLD, &st));
  CHECK(a == left, "sendrecv_replace got %ld", a);
  /* MPI_PROC_NULL on either side: the other half alone, and a receive from
   * MPI_PROC_NULL leaves the proc-null status. */
  int cnt = -1;
  long pn = rank * 3 + 1, got1 = -1;
  OK(MPI_Sendrecv(&pn, 1, MPI_LONG, right, 7, &c, 1, MPI_LONG, MPI_PROC_NULL, 7, MPI_COMM_WORLD, &st));
  CHECK(st.MPI_SOURCE == MPI_PROC_NULL && st.MPI_TAG == MPI_ANY_TAG, "proc-null source status %d %d", st.MPI_SOURCE, st.MPI_TAG);
  OK(MPI_Get_count(&st, MPI_LONG, &cnt));
  CHECK(cnt == 0, "proc-null receive count %d", cnt);
  OK(MPI_Sendrecv(&pn, 1, MPI_LONG, MPI_PROC_NULL, 7, &got1, 1, MPI_LONG, left, 7, MPI_COMM_WORLD, &st));
  CHECK(got1 == left * 3 + 1 && st.MPI_SOURCE == left && st.MPI_TAG == 7, "recv half got %ld from %d", got1, st.MPI_SOURCE);
  /* A strided receive type (every other int of 6) and a status counted in it. */
  MPI_Datatype every2;
  OK(MPI_Type_vector(3, 1, 2, MPI_INT, &every2));
  OK(MPI_Type_commit(&every2));
  int three[3] = {rank, rank + 100, rank + 200}, spread[6] = {-1, -1, -1, -1, -1, -1};
  OK(MPI_Sendrecv(three, 3, MPI_INT, right, 8, spread, 1, every2, left, 8, MPI_COMM_WORLD, &st));
  CHECK(spread[0] == left && spread[2] == left + 100 && spread[4] == left + 200 && spread[1] == -1 && spread[5] == -1,
        "strided sendrecv %d %d %d %d", spread[0], spread[1], spread[2], spread[4]);
  OK(MPI_Get_count(&st, MPI_INT, &cnt));
  CHECK(cnt == 3, "strided sendrecv count %d", cnt);
  /* Sendrecv_replace through the strided type: the gaps kept, the elements replaced. */
  for (int i = 0; i < 6; i++) spread[i] = i % 2 ? -7 : rank * 10 + i;
  OK(MPI_Sendrecv_replace(spread, 1, every2, right, 11, left, 11, MPI_COMM_WORLD, &st));
  CHECK(spread[0] == left * 10 && spread[2] == left * 10 + 2 && spread[4] == left * 10 + 4 &&
        spread[1] == -7 && spread[3] == -7 && spread[5] == -7,
        "strided sendrecv_replace %d %d %d %d", spread[0], spread[1], spread[2], spread[4]);
  /* ... and with MPI_PROC_NULL as its source: sent (the left neighbour's left's
   * elements now), the buffer kept. */
  OK(MPI_Sendrecv_replace(spread, 1, every2, right, 12, MPI_PROC_NULL, 12, MPI_COMM_WORLD, &st));
  CHECK(st.MPI_SOURCE == MPI_PROC_NULL && spread[0] == left * 10, "proc-null sendrecv_replace");
  int drop[3];
  OK(MPI_Recv(drop, 3, MPI_INT, left, 12, MPI_COMM_WORLD, &st));
  CHECK(drop[0] == (left + size - 1) % size * 10 && drop[2] == drop[0] + 4,
        "proc-null sendrecv_replace sent %d %d", drop[0], drop[2]);
  OK(MPI_Type_free(&every2));
  /* A receive too short for the message: MPI_ERR_TRUNCATE under MPI_ERRORS_RETURN
   * (what the buffer holds then is not asked). */
  OK(MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_RETURN));
  int pair[2] = {rank, rank + 1}, one = -1, rc, cls = -1;
  rc = MPI_Sendrecv(pair, 2, MPI_INT, right, 9, &one, 1, MPI_INT, left, 9, MPI_COMM_WORLD, &st);
  MPI_Error_class(rc, &cls);
  CHECK(cls == MPI_ERR_TRUNCATE, "short sendrecv receive gave class %d", cls);
  OK(MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_ARE_FATAL));
  OK(MPI_Barrier(MPI_COMM_WORLD));

  /* A vector type (every other double of 8) sent to a contiguous receive and back into
   * a strided receive, and a struct type. */
  MPI_Datatype vec;
  OK(MPI_Type_vector(4, 1, 2, MPI_DOUBLE, &vec));
  OK(MPI_Type_commit(&vec));
  int vs; MPI_Aint lb, ext;
  OK(MPI_Type_size(vec, &vs));
  OK(MPI_Type_get_extent(vec, &lb, &ext));
  CHECK(vs == 32 && lb == 0 && ext == 56, "vector size %d lb %ld extent %ld", vs, (long)lb, (long)ext);
  double src[8], dense[4], back[8];
  for (int i = 0; i < 8; i++) { src[i] = rank * 10 + i; back[i] = -1; }
  OK(MPI_Sendrecv(src, 1, vec, right, 7, dense, 4, MPI_DOUBLE, left, 7, MPI_COMM_WORLD, &st));
  for (int i = 0; i < 4; i++) CHECK(dense[i] == left * 10 + 2 * i, "dense[%d] = %g", i, dense[i]);
  OK(MPI_Sendrecv(dense, 4, MPI_DOUBLE, left, 8, back, 1, vec, right, 8, MPI_COMM_WORLD, &st));
  for (int i = 0; i < 8; i++) {
    double want = (i % 2 == 0) ? rank * 10 + i : -1;
    CHECK(back[i] == want, "back[%d] = %g, want %g", i, back[i], want);
  }
  OK(MPI_Type_free(&vec));
  CHECK(vec == MPI_DATATYPE_NULL, "freed type handle");
  struct rec { int id; double w; char tag[3]; } rin, rout = {rank, rank * 1.5, {'a', 'b', 'c'}};
  int bl[3] = {1, 1, 3};
  MPI_Aint disp[3] = {offsetof(struct rec, id), offsetof(struct rec, w), offsetof(struct rec, tag)};
  MPI_Datatype types[3] = {MPI_INT, MPI_DOUBLE, MPI_CHAR}, rect;
  OK(MPI_Type_create_struct(3, bl, disp, types, &rect));
  OK(MPI_Type_commit(&rect));
  OK(MPI_Type_get_extent(rect, &lb, &ext));
  CHECK(ext == sizeof(struct rec), "struct extent %ld, sizeof %zu", (long)ext, sizeof(struct rec));
  OK(MPI_Sendrecv(&rout, 1, rect, right, 9, &rin, 1, rect, left, 9, MPI_COMM_WORLD, &st));
  CHECK(rin.id == left && rin.w == left * 1.5 && rin.tag[2] == 'c', "struct got %d %g", rin.id, rin.w);
  OK(MPI_Type_free(&rect));

  /* Waitany, Testall and Waitsome over several receives. */
  enum { K = 6 };
  int vals[K], outv[K];
  MPI_Request rq[K], sq[K];
  for (int i = 0; i < K; i++) {
    outv[i] = rank * 100 + i;
    OK(MPI_Irecv(&vals[i], 1, MPI_INT, left, 200 + i, MPI_COMM_WORLD, &rq[i]));
  }
  for (int i = K - 1; i >= 0; i--) OK(MPI_Isend(&outv[i], 1, MPI_INT, right, 200 + i, MPI_COMM_WORLD, &sq[i]));
  int idx, done = 0;
  OK(MPI_Waitany(K, rq, &idx, &st));
  CHECK(idx >= 0 && idx < K && rq[idx] == MPI_REQUEST_NULL && vals[idx] == left * 100 + idx, "waitany %d", idx);
  done++;
  while (done < K) {
    int outcount, idxs[K];
    MPI_Status sts[K];
    OK(MPI_Waitsome(K, rq, &outcount, idxs, sts));
    CHECK(outcount >= 1, "waitsome %d", outcount);
    for (int j = 0; j < outcount; j++) CHECK(vals[idxs[j]] == left * 100 + idxs[j], "waitsome value");
    done += outcount;
  }
  int all = 0;
  while (!all) OK(MPI_Testall(K, sq, &all, MPI_STATUSES_IGNORE));

  /* Cancel a receive nothing will match. */
  MPI_Request cr;
  int never;
  OK(MPI_Irecv(&never, 1, MPI_INT, MPI_ANY_SOURCE, 999, MPI_COMM_WORLD, &cr));
  OK(MPI_Cancel(&cr));
  OK(MPI_Wait(&cr, &st));
  int cancelled = 0;
  OK(MPI_Test_cancelled(&st, &cancelled));
  CHECK(cancelled == 1, "cancelled %d", cancelled);

  /* A 4 MiB message (rendezvous), non-blocking both ways. */
  size_t big = 4u << 20;
  unsigned char *s = malloc(big), *r = malloc(big);
  for (size_t i = 0; i < big; i++) s[i] = (unsigned char)(i * 7 + rank);
  MPI_Request two[2];
  OK(MPI_Irecv(r, (int)big, MPI_BYTE, left, 300, MPI_COMM_WORLD, &two[0]));
  OK(MPI_Isend(s, (int)big, MPI_BYTE, right, 300, MPI_COMM_WORLD, &two[1]));
  MPI_Status sts[2];
  OK(MPI_Waitall(2, two, sts));
  for (size_t i = 0; i < big; i += 4093) CHECK(r[i] == (unsigned char)(i * 7 + left), "big[%zu]", i);
  OK(MPI_Get_count(&sts[0], MPI_BYTE, &n));
  CHECK(n == (int)big, "big count %d", n);
  CHECK(sts[1].MPI_ERROR == MPI_SUCCESS, "send's MPI_ERROR %d", sts[1].MPI_ERROR);

  /* A send's completion writes its cancelled flag only (as MPICH's does): a receive and a
   * send completed into one status leave the receive's source and tag, in either order. */
  for (int order = 0; order < 2; order++) {
    int in = -1, out = rank;
    MPI_Request rs[2];
    MPI_Status one;
    OK(MPI_Irecv(&in, 1, MPI_INT, left, 400, MPI_COMM_WORLD, &rs[0]));
    OK(MPI_Isend(&out, 1, MPI_INT, right, 400, MPI_COMM_WORLD, &rs[1]));
    OK(MPI_Wait(&rs[order], &one));
    OK(MPI_Wait(&rs[1 - order], &one));
    CHECK(in == left, "value %d", in);
    CHECK(one.MPI_SOURCE == left && one.MPI_TAG == 400, "order %d: status %d/%d after the send's",
          order, one.MPI_SOURCE, one.MPI_TAG);
    if (order == 0) {
      OK(MPI_Get_count(&one, MPI_INT, &n));
      CHECK(n == 1, "the receive's count %d", n);
      OK(MPI_Test_cancelled(&one, &cancelled));
      CHECK(cancelled == 0, "a send completes uncancelled");
    }
  }
  free(s);
  free(r);
  scattered(rank, size, right, left);

  /* MPI_Isendrecv_replace of 4 MiB (a rendezvous, which leaves after the call
   * returned), contiguous and through a vector type: the left neighbour's values, the
   * gaps kept. Freed memory is overwritten from here on (glibc's M_PERTURB), so that a
   * send from memory freed before it left shows. */
  {
    mallopt(M_PERTURB, 0xa5);
    long n = 1L << 20;
    int *big = malloc(2 * n * sizeof *big);
    CHECK(big != NULL, "malloc");
    MPI_Datatype every2;
    OK(MPI_Type_vector((int)n, 1, 2, MPI_INT, &every2));
    OK(MPI_Type_commit(&every2));
    for (int typed = 0; typed < 2; typed++) {
      for (long i = 0; i < 2 * n; i++) big[i] = rank * 7 + (int)i;
      MPI_Request q;
      if (typed)
        OK(MPI_Isendrecv_replace(big, 1, every2, right, 600, left, 600, MPI_COMM_WORLD, &q));
      else
        OK(MPI_Isendrecv_replace(big, (int)n, MPI_INT, right, 600, left, 600, MPI_COMM_WORLD, &q));
      OK(MPI_Wait(&q, &st));
      long bad = 0;
      for (long i = 0; i < n; i++) {
        long at = typed ? 2 * i : i;
        bad += big[at] != left * 7 + (int)at;
        if (typed) bad += big[2 * i + 1] != rank * 7 + (int)(2 * i + 1);
      }
      CHECK(bad == 0, "isendrecv_replace of 4 MiB (typed %d): %ld wrong", typed, bad);
    }
    OK(MPI_Type_free(&every2));
    free(big);
  }
  /* A NULL request argument: MPI_ERR_ARG, with nothing posted and nothing sent (the
   * first message on the send half's tag is the one sent after, and the refused call's
   * receive buffer is left as it was). */
  {
    OK(MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_RETURN));
    int a = rank + 1000, b = -1, c = -1, cls = -1;
    for (int replace = 0; replace < 2; replace++) {
      int rc = replace ? MPI_Isendrecv_replace(&a, 1, MPI_INT, right, 611, left, 612, MPI_COMM_WORLD, NULL)
                       : MPI_Isendrecv(&a, 1, MPI_INT, right, 611, &b, 1, MPI_INT, left, 612, MPI_COMM_WORLD, NULL);
      MPI_Error_class(rc, &cls);
      CHECK(cls == MPI_ERR_ARG, "isendrecv (replace %d) with a NULL request: class %d", replace, cls);
    }
    OK(MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_ARE_FATAL));
    int a2 = rank + 2000;
    OK(MPI_Sendrecv(&a2, 1, MPI_INT, right, 611, &c, 1, MPI_INT, left, 611, MPI_COMM_WORLD, &st));
    CHECK(c == left + 2000 && b == -1 && a == rank + 1000, "after the refused isendrecv: got %d, its buffers %d %d", c, b, a);
  }

  OK(MPI_Barrier(MPI_COMM_WORLD));
  if (rank == 0) printf("ok p2p %d ranks at level %d\n", size, provided == MPI_THREAD_SINGLE ? 0 : 3);
  OK(MPI_Finalize());
  return 0;
}
