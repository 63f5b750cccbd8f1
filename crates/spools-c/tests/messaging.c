/*
 * messaging.c: tagged point-to-point messages through the C interface (3 ranks or more).
 *
 * Each section checks its results in C and prints "ok SECTION" on every rank:
 *   ring        send/recv to the right neighbour, status source/tag/len
 *   wildcards   SPOOLS_ANY_SOURCE / SPOOLS_ANY_TAG receives on rank 0, each status checked
 *   truncated   a receive into a too-small buffer (blocking and non-blocking):
 *               SPOOLS_ERR_TRUNCATED, status.len = the full length, nothing past the buffer
 *   nonblocking isend/irecv with test (polled until done), wait and waitall
 *   cancel      cancelling an unmatched irecv (cancelled = 1, wait's status.cancelled = 1);
 *               a send cannot be cancelled
 *   probe       probe and iprobe describe a queued message without taking it
 *   large       4 MiB messages (rendezvous) checked byte by byte, blocking and posted
 *   comms       dup (a separate message space) and split (sizes, ranks, keys, UNDEFINED)
 *   threads     4 threads per rank at once, each with its own tag for messages on the
 *               world communicator and its own duplicate for allreduces (the header's
 *               thread-safety rules)
 */
#define _POSIX_C_SOURCE 200809L
#include "ctest.h"

#include <pthread.h>

#define TAG_RING 10
#define TAG_WILD 100
#define TAG_TRUNC 300
#define TAG_NB 400
#define TAG_CANCEL 999
#define TAG_NOCANCEL 998
#define TAG_PROBE 500
#define TAG_LARGE 600

static uint8_t pattern(size_t i, uint32_t seed)
{
    return (uint8_t)((i * 131u + (i >> 11) * 7u + seed * 29u + 1u) & 0xffu);
}

static void ring(void)
{
    uint32_t right = (ct_rank + 1) % ct_size, left = (ct_rank + ct_size - 1) % ct_size;
    char out[64], in[64];
    int len = snprintf(out, sizeof out, "hello from rank %u", ct_rank);
    spools_msg_status_t st;
    memset(in, 0, sizeof in);
    /* Even ranks send first, odd ranks receive first: no reliance on buffering. */
    if (ct_rank % 2 == 0) {
        CHECK(spools_send(ct_comm, out, (size_t)len + 1, right, TAG_RING + (int)ct_rank));
        CHECK(spools_recv(ct_comm, in, sizeof in, (int32_t)left, TAG_RING + (int)left, &st));
    } else {
        CHECK(spools_recv(ct_comm, in, sizeof in, (int32_t)left, TAG_RING + (int)left, &st));
        CHECK(spools_send(ct_comm, out, (size_t)len + 1, right, TAG_RING + (int)ct_rank));
    }
    char want[64];
    int wlen = snprintf(want, sizeof want, "hello from rank %u", left);
    ASSERT(strcmp(in, want) == 0, "got \"%s\", expected \"%s\"", in, want);
    ASSERT(st.source == left, "status.source %u, expected %u", st.source, left);
    ASSERT(st.tag == TAG_RING + (int)left, "status.tag %d", st.tag);
    ASSERT(st.len == (size_t)wlen + 1, "status.len %zu, expected %d", st.len, wlen + 1);
    ASSERT(st.cancelled == 0, "status.cancelled %d", st.cancelled);

    /* A rank may send to itself. */
    uint32_t self = 0xabc00000u + ct_rank, back = 0;
    spools_request_t *req = NULL;
    CHECK(spools_isend(ct_comm, &self, sizeof self, ct_rank, 77, &req));
    CHECK(spools_recv(ct_comm, &back, sizeof back, (int32_t)ct_rank, 77, &st));
    CHECK(spools_wait(&req, NULL));
    ASSERT(back == self && st.source == ct_rank, "self message %#x from %u", back, st.source);
    OK("ring");
}

static void wildcards(void)
{
    /* Every other rank r sends rank 0 three messages: tag TAG_WILD + r with 8 + r bytes
     * of value r; tag TAG_WILD + 50 with its rank as a uint32; tag 7 + r with its rank. */
    if (ct_rank != 0) {
        uint8_t buf[64];
        uint32_t me = ct_rank;
        memset(buf, (int)ct_rank, sizeof buf);
        CHECK(spools_send(ct_comm, buf, 8 + ct_rank, 0, TAG_WILD + (int)ct_rank));
        CHECK(spools_send(ct_comm, &me, sizeof me, 0, TAG_WILD + 50));
        CHECK(spools_send(ct_comm, &me, sizeof me, 0, 7 + (int)ct_rank));
    } else {
        uint32_t seen = 0;
        for (uint32_t k = 1; k < ct_size; k++) {
            uint8_t buf[64];
            spools_msg_status_t st;
            memset(buf, 0xee, sizeof buf);
            /* SPOOLS_ANY_SOURCE with tag TAG_WILD + k: only rank k's first message
             * matches (the others stay queued for the receives below). */
            CHECK(spools_recv(ct_comm, buf, sizeof buf, SPOOLS_ANY_SOURCE, TAG_WILD + (int)k,
                              &st));
            ASSERT(st.source == k, "source %u for tag %d", st.source, TAG_WILD + (int)k);
            ASSERT(st.len == 8 + k, "len %zu", st.len);
            for (size_t i = 0; i < st.len; i++)
                ASSERT(buf[i] == k, "byte %zu is %u", i, buf[i]);
            ASSERT(buf[st.len] == 0xee, "a byte past the message was written");
        }
        /* SPOOLS_ANY_SOURCE with a fixed tag: every sender once, each saying its rank. */
        for (uint32_t k = 1; k < ct_size; k++) {
            uint32_t v = 0;
            spools_msg_status_t st;
            CHECK(spools_recv(ct_comm, &v, sizeof v, SPOOLS_ANY_SOURCE, TAG_WILD + 50, &st));
            ASSERT(st.tag == TAG_WILD + 50 && st.len == sizeof v, "tag %d len %zu", st.tag,
                   st.len);
            ASSERT(v == st.source && v >= 1 && v < ct_size, "value %u from %u", v, st.source);
            ASSERT(!(seen & (1u << v)), "rank %u twice", v);
            seen |= 1u << v;
        }
        /* A fixed source with SPOOLS_ANY_TAG, in descending source order. */
        for (uint32_t k = ct_size - 1; k >= 1; k--) {
            uint32_t v = 0;
            spools_msg_status_t st;
            CHECK(spools_recv(ct_comm, &v, sizeof v, (int32_t)k, SPOOLS_ANY_TAG, &st));
            ASSERT(st.source == k && st.tag == 7 + (int)k && v == k,
                   "source %u tag %d value %u, expected %u", st.source, st.tag, v, k);
        }
        /* Every other rank was seen exactly once. */
        ASSERT(seen == ((1u << ct_size) - 2u), "senders seen %#x", seen);
    }
    /* Both wildcards, with nothing else queued: a message the last rank sends now. */
    CHECK(spools_barrier(ct_comm));
    if (ct_rank == ct_size - 1) {
        double d[3] = {1.5, -2.25, 1e300};
        CHECK(spools_send(ct_comm, d, sizeof d, 0, 4242));
    } else if (ct_rank == 0) {
        double d[4] = {0, 0, 0, 0};
        spools_msg_status_t st;
        CHECK(spools_recv(ct_comm, d, sizeof d, SPOOLS_ANY_SOURCE, SPOOLS_ANY_TAG, &st));
        ASSERT(st.source == ct_size - 1 && st.tag == 4242 && st.len == 3 * sizeof(double),
               "source %u tag %d len %zu", st.source, st.tag, st.len);
        ASSERT(d[0] == 1.5 && d[1] == -2.25 && d[2] == 1e300 && d[3] == 0, "values");
    }
    OK("wildcards");
}

static void truncated(void)
{
    /* Rank 1 sends rank 0 three 100-byte messages; rank 0 takes each into 10 bytes:
     * with recv, with irecv + wait, with irecv + test. */
    if (ct_rank == 1) {
        uint8_t buf[100];
        for (size_t i = 0; i < sizeof buf; i++)
            buf[i] = pattern(i, 3);
        CHECK(spools_send(ct_comm, buf, sizeof buf, 0, TAG_TRUNC));
        CHECK(spools_send(ct_comm, buf, sizeof buf, 0, TAG_TRUNC + 1));
        CHECK(spools_send(ct_comm, buf, sizeof buf, 0, TAG_TRUNC + 2));
    } else if (ct_rank == 0) {
        uint8_t buf[100];
        spools_msg_status_t st = {0, 0, 0, 0};
        memset(buf, 0xaa, sizeof buf);
        EXPECT_ERR(spools_recv(ct_comm, buf, 10, 1, TAG_TRUNC, &st), SPOOLS_ERR_TRUNCATED,
                   "trunc");
        ASSERT(st.len == 100, "status.len %zu after truncation, expected 100", st.len);
        ASSERT(st.source == 1 && st.tag == TAG_TRUNC, "status source %u tag %d", st.source,
               st.tag);
        for (size_t i = 10; i < sizeof buf; i++)
            ASSERT(buf[i] == 0xaa, "byte %zu past the buffer was written", i);

        /* The same through irecv + wait: the wait reports it and frees the request. */
        spools_request_t *req = NULL;
        memset(buf, 0xaa, sizeof buf);
        memset(&st, 0, sizeof st);
        CHECK(spools_irecv(ct_comm, buf, 10, 1, TAG_TRUNC + 1, &req));
        ASSERT(req != NULL, "irecv gave no request");
        EXPECT_ERR(spools_wait(&req, &st), SPOOLS_ERR_TRUNCATED, "trunc");
        ASSERT(req == NULL, "the request was not freed after a truncated wait");
        ASSERT(st.len == 100 && st.source == 1 && st.tag == TAG_TRUNC + 1,
               "status len %zu source %u tag %d", st.len, st.source, st.tag);
        for (size_t i = 10; i < sizeof buf; i++)
            ASSERT(buf[i] == 0xaa, "byte %zu past the buffer was written", i);

        /* And through spools_test: the test that completes it reports it. */
        int32_t flag = 0;
        spools_status_t rc = SPOOLS_OK;
        memset(&st, 0, sizeof st);
        CHECK(spools_irecv(ct_comm, buf, 10, 1, TAG_TRUNC + 2, &req));
        while (rc == SPOOLS_OK && !flag)
            rc = spools_test(&req, &flag, &st);
        EXPECT_ERR(rc, SPOOLS_ERR_TRUNCATED, "100 bytes");
        ASSERT(flag == 1 && req == NULL && st.len == 100, "flag %d req %p len %zu", flag,
               (void *)req, st.len);
    }
    OK("truncated");
}

static void nonblocking(void)
{
    /* Every rank exchanges with both neighbours at once: 2 irecvs, 2 isends. */
    uint32_t right = (ct_rank + 1) % ct_size, left = (ct_rank + ct_size - 1) % ct_size;
    int64_t to_right[50], to_left[70], from_left[50], from_right[80];
    for (int i = 0; i < 50; i++)
        to_right[i] = (int64_t)ct_rank * 1000000 + i;
    for (int i = 0; i < 70; i++)
        to_left[i] = -((int64_t)ct_rank * 1000000 + i);
    memset(from_left, 0, sizeof from_left);
    memset(from_right, 0, sizeof from_right);

    spools_request_t *reqs[4] = {NULL, NULL, NULL, NULL};
    CHECK(spools_irecv(ct_comm, from_left, sizeof from_left, (int32_t)left, TAG_NB, &reqs[0]));
    CHECK(spools_irecv(ct_comm, from_right, sizeof from_right, (int32_t)right, TAG_NB + 1,
                       &reqs[1]));
    CHECK(spools_isend(ct_comm, to_right, sizeof to_right, right, TAG_NB, &reqs[2]));
    CHECK(spools_isend(ct_comm, to_left, sizeof to_left, left, TAG_NB + 1, &reqs[3]));
    for (int i = 0; i < 4; i++)
        ASSERT(reqs[i] != NULL, "request %d is NULL", i);

    /* Poll the first receive with spools_test until it completes. */
    int32_t flag = 0;
    spools_msg_status_t st0;
    while (!flag)
        CHECK(spools_test(&reqs[0], &flag, &st0));
    ASSERT(reqs[0] == NULL, "a completed test left the request");
    ASSERT(st0.source == left && st0.tag == TAG_NB && st0.len == sizeof from_left,
           "test status source %u tag %d len %zu", st0.source, st0.tag, st0.len);
    /* A NULL request: test says done, wait accepts it and leaves the status alone. */
    flag = 0;
    CHECK(spools_test(&reqs[0], &flag, NULL));
    ASSERT(flag == 1, "test of a NULL request gave flag %d", flag);
    spools_msg_status_t keep = {77, 78, 79, 0};
    CHECK(spools_wait(&reqs[0], &keep));
    ASSERT(keep.source == 77 && keep.tag == 78 && keep.len == 79, "status of a NULL wait");

    /* The receive from the right with wait, the sends with waitall (entries 0 and 1 are
     * NULL by now: skipped). */
    spools_msg_status_t st1;
    CHECK(spools_wait(&reqs[1], &st1));
    ASSERT(reqs[1] == NULL, "wait left the request");
    ASSERT(st1.source == right && st1.tag == TAG_NB + 1 && st1.len == sizeof to_left,
           "wait status source %u tag %d len %zu", st1.source, st1.tag, st1.len);
    spools_msg_status_t sts[4];
    memset(sts, 0, sizeof sts);
    CHECK(spools_waitall(4, reqs, sts));
    for (int i = 0; i < 4; i++)
        ASSERT(reqs[i] == NULL, "waitall left request %d", i);
    ASSERT(sts[2].source == ct_rank && sts[3].source == ct_rank,
           "a send's status.source is %u / %u, expected this rank %u", sts[2].source,
           sts[3].source, ct_rank);

    for (int i = 0; i < 50; i++)
        ASSERT(from_left[i] == (int64_t)left * 1000000 + i, "from_left[%d]", i);
    for (int i = 0; i < 70; i++)
        ASSERT(from_right[i] == -((int64_t)right * 1000000 + i), "from_right[%d]", i);
    for (int i = 70; i < 80; i++)
        ASSERT(from_right[i] == 0, "from_right[%d] past the message", i);

    /* waitall over receives posted before their sends (each rank from every other). */
    uint32_t n = ct_size;
    spools_request_t **rr = ct_alloc(n * sizeof *rr);
    uint32_t *vals = ct_alloc(n * sizeof *vals);
    spools_msg_status_t *rs = ct_alloc(n * sizeof *rs);
    for (uint32_t p = 0; p < n; p++) {
        vals[p] = 0xffffffffu;
        rr[p] = NULL;
        if (p != ct_rank)
            CHECK(spools_irecv(ct_comm, &vals[p], sizeof vals[p], (int32_t)p, TAG_NB + 2,
                               &rr[p]));
    }
    CHECK(spools_barrier(ct_comm)); /* every receive is posted before any send */
    for (uint32_t p = 0; p < n; p++) {
        uint32_t v = ct_rank * 100 + p;
        if (p != ct_rank)
            CHECK(spools_send(ct_comm, &v, sizeof v, p, TAG_NB + 2));
    }
    CHECK(spools_waitall(n, rr, rs));
    for (uint32_t p = 0; p < n; p++) {
        if (p == ct_rank)
            continue;
        ASSERT(vals[p] == p * 100 + ct_rank, "from %u got %u", p, vals[p]);
        ASSERT(rs[p].source == p && rs[p].len == sizeof(uint32_t), "status %u", p);
    }
    free(rr);
    free(vals);
    free(rs);
    OK("nonblocking");
}

static void cancel(void)
{
    /* A receive nobody will match: cancelled, and its wait says so. */
    uint8_t buf[16];
    spools_request_t *req = NULL;
    int32_t cancelled = -1;
    CHECK(spools_irecv(ct_comm, buf, sizeof buf, SPOOLS_ANY_SOURCE, TAG_CANCEL, &req));
    CHECK(spools_cancel(req, &cancelled));
    ASSERT(cancelled == 1, "cancel of an unmatched irecv gave cancelled = %d", cancelled);
    spools_msg_status_t st = {0, 0, 0, 0};
    CHECK(spools_wait(&req, &st));
    ASSERT(req == NULL, "wait left the cancelled request");
    ASSERT(st.cancelled == 1, "the cancelled receive's status.cancelled is %d", st.cancelled);

    /* A send cannot be cancelled: it is delivered all the same. */
    uint32_t right = (ct_rank + 1) % ct_size, left = (ct_rank + ct_size - 1) % ct_size;
    uint32_t v = 0xc0ffee00u + ct_rank, got = 0;
    CHECK(spools_isend(ct_comm, &v, sizeof v, right, TAG_NOCANCEL, &req));
    cancelled = -1;
    CHECK(spools_cancel(req, &cancelled));
    ASSERT(cancelled == 0, "cancel of a send gave cancelled = %d", cancelled);
    CHECK(spools_recv(ct_comm, &got, sizeof got, (int32_t)left, TAG_NOCANCEL, &st));
    ASSERT(got == 0xc0ffee00u + left && st.cancelled == 0, "got %#x", got);
    CHECK(spools_wait(&req, NULL));
    ASSERT(req == NULL, "wait left the send request");
    OK("cancel");
}

static void probe(void)
{
    /* Rank 1 sends rank 0 a 1234-byte message (TAG_PROBE) and a 77-byte one (TAG_PROBE+1). */
    if (ct_rank == 1) {
        uint8_t buf[1234];
        for (size_t i = 0; i < sizeof buf; i++)
            buf[i] = pattern(i, 5);
        CHECK(spools_send(ct_comm, buf, sizeof buf, 0, TAG_PROBE));
        CHECK(spools_send(ct_comm, buf, 77, 0, TAG_PROBE + 1));
    } else if (ct_rank == 0) {
        int32_t flag = -1;
        spools_msg_status_t st = {0, 0, 0, 0};
        /* Nobody ever sends tag 777: iprobe finds nothing. */
        CHECK(spools_iprobe(ct_comm, SPOOLS_ANY_SOURCE, 777, &flag, &st));
        ASSERT(flag == 0, "iprobe of a tag never sent gave flag %d", flag);

        CHECK(spools_probe(ct_comm, SPOOLS_ANY_SOURCE, TAG_PROBE, &st));
        ASSERT(st.source == 1 && st.tag == TAG_PROBE && st.len == 1234,
               "probe: source %u tag %d len %zu", st.source, st.tag, st.len);
        /* Probing again finds the same message: probe does not take it. */
        CHECK(spools_probe(ct_comm, 1, SPOOLS_ANY_TAG, &st));
        ASSERT(st.tag == TAG_PROBE && st.len == 1234, "second probe: tag %d len %zu", st.tag,
               st.len);
        uint8_t *buf = ct_alloc(st.len);
        spools_msg_status_t rst;
        CHECK(spools_recv(ct_comm, buf, st.len, (int32_t)st.source, st.tag, &rst));
        ASSERT(rst.len == 1234, "recv after probe: len %zu", rst.len);
        for (size_t i = 0; i < rst.len; i++)
            ASSERT(buf[i] == pattern(i, 5), "byte %zu", i);
        free(buf);

        /* iprobe, polled until the second message is there. */
        flag = 0;
        while (!flag)
            CHECK(spools_iprobe(ct_comm, 1, TAG_PROBE + 1, &flag, &st));
        ASSERT(st.source == 1 && st.tag == TAG_PROBE + 1 && st.len == 77,
               "iprobe: source %u tag %d len %zu", st.source, st.tag, st.len);
        uint8_t small[77];
        CHECK(spools_recv(ct_comm, small, sizeof small, 1, TAG_PROBE + 1, NULL));
        for (size_t i = 0; i < sizeof small; i++)
            ASSERT(small[i] == pattern(i, 5), "byte %zu", i);
        CHECK(spools_iprobe(ct_comm, 1, TAG_PROBE + 1, &flag, NULL));
        ASSERT(flag == 0, "iprobe still finds a received message");
    }
    OK("probe");
}

static void large(void)
{
    /* Rank 0 sends 4 MiB to the last rank, which returns it with every byte complemented;
     * then the last rank sends 4 MiB + 3 bytes into an irecv rank 0 posted first. */
    const size_t big = (size_t)4 << 20;
    uint32_t last = ct_size - 1;
    if (ct_rank == 0) {
        uint8_t *out = ct_alloc(big), *in = ct_alloc(big + 3);
        for (size_t i = 0; i < big; i++)
            out[i] = pattern(i, 11);
        spools_request_t *req = NULL;
        CHECK(spools_send(ct_comm, out, big, last, TAG_LARGE));
        spools_msg_status_t st;
        CHECK(spools_recv(ct_comm, in, big, (int32_t)last, TAG_LARGE, &st));
        ASSERT(st.len == big, "echo len %zu", st.len);
        for (size_t i = 0; i < big; i++)
            ASSERT((in[i] ^ pattern(i, 11)) == 0xff, "echoed byte %zu is %u", i, in[i]);
        CHECK(spools_irecv(ct_comm, in, big + 3, (int32_t)last, TAG_LARGE + 1, &req));
        CHECK(spools_send(ct_comm, "go", 3, last, TAG_LARGE + 2));
        CHECK(spools_wait(&req, &st));
        ASSERT(st.len == big + 3 && st.source == last, "posted large: len %zu", st.len);
        for (size_t i = 0; i < big + 3; i++)
            ASSERT(in[i] == pattern(i, 13), "posted byte %zu is %u", i, in[i]);
        free(out);
        free(in);
    } else if (ct_rank == last) {
        uint8_t *buf = ct_alloc(big + 3);
        spools_msg_status_t st;
        char go[3];
        CHECK(spools_recv(ct_comm, buf, big, 0, TAG_LARGE, &st));
        ASSERT(st.len == big, "len %zu", st.len);
        for (size_t i = 0; i < big; i++) {
            ASSERT(buf[i] == pattern(i, 11), "byte %zu is %u", i, buf[i]);
            buf[i] = (uint8_t)(0xffu ^ buf[i]);
        }
        CHECK(spools_send(ct_comm, buf, big, 0, TAG_LARGE));
        CHECK(spools_recv(ct_comm, go, sizeof go, 0, TAG_LARGE + 2, NULL));
        for (size_t i = 0; i < big + 3; i++)
            buf[i] = pattern(i, 13);
        CHECK(spools_send(ct_comm, buf, big + 3, 0, TAG_LARGE + 1));
        free(buf);
    }
    OK("large");
}

static void comms(void)
{
    /* dup: the same ranks, its own message space. Rank 0 sends rank 1 "world" on the
     * world communicator, then "dup" on the duplicate, same tag; rank 1 receives on the
     * duplicate first: it must get "dup", not the older "world". */
    spools_comm_t *dup = NULL;
    uint32_t r, s;
    CHECK(spools_comm_dup(ct_comm, &dup));
    ASSERT(dup != NULL && dup != ct_comm, "dup gave %p", (void *)dup);
    CHECK(spools_comm_rank(dup, &r));
    CHECK(spools_comm_size(dup, &s));
    ASSERT(r == ct_rank && s == ct_size, "dup: rank %u size %u", r, s);
    if (ct_rank == 0) {
        CHECK(spools_send(ct_comm, "world", 6, 1, 5));
        CHECK(spools_send(dup, "dup", 4, 1, 5));
    } else if (ct_rank == 1) {
        char a[8] = "", b[8] = "";
        CHECK(spools_recv(dup, b, sizeof b, 0, 5, NULL));
        CHECK(spools_recv(ct_comm, a, sizeof a, 0, 5, NULL));
        ASSERT(strcmp(b, "dup") == 0 && strcmp(a, "world") == 0, "dup got \"%s\", world \"%s\"",
               b, a);
    }
    CHECK(spools_barrier(dup));

    /* split by parity, ordered by descending world rank (key = -rank). */
    spools_comm_t *half = NULL;
    CHECK(spools_comm_split(ct_comm, (int32_t)(ct_rank % 2), -(int32_t)ct_rank, &half));
    ASSERT(half != NULL, "split gave NULL for color %u", ct_rank % 2);
    CHECK(spools_comm_rank(half, &r));
    CHECK(spools_comm_size(half, &s));
    uint32_t want_size = 0, want_rank = 0;
    for (uint32_t p = 0; p < ct_size; p++) {
        if (p % 2 == ct_rank % 2) {
            want_size++;
            if (p > ct_rank)
                want_rank++;
        }
    }
    ASSERT(s == want_size && r == want_rank, "split: rank %u size %u, expected %u of %u", r, s,
           want_rank, want_size);
    /* The members' world ranks, gathered in the new order: descending. */
    uint32_t *members = ct_alloc(s * sizeof *members);
    CHECK(spools_allgather(half, &ct_rank, 1, members, SPOOLS_DTYPE_U32));
    for (uint32_t i = 0; i < s; i++) {
        uint32_t want = (ct_size - 1) - ((ct_size - 1) % 2 != ct_rank % 2) - 2 * i;
        ASSERT(members[i] == want, "member %u is world rank %u, expected %u", i, members[i],
               want);
    }
    free(members);
    /* A ring on the new communicator, addressed by its ranks. */
    if (s > 1) {
        uint32_t got = 0xffffffffu;
        uint32_t to = (r + 1) % s, from = (r + s - 1) % s;
        spools_request_t *req = NULL;
        spools_msg_status_t st;
        CHECK(spools_isend(half, &ct_rank, sizeof ct_rank, to, 9, &req));
        CHECK(spools_recv(half, &got, sizeof got, (int32_t)from, 9, &st));
        CHECK(spools_wait(&req, NULL));
        ASSERT(st.source == from, "status.source %u on the split, expected %u", st.source, from);
        /* new rank `from` is world rank top - 2 * from */
        uint32_t top = (ct_size - 1) - ((ct_size - 1) % 2 != ct_rank % 2);
        ASSERT(got == top - 2 * from, "got world rank %u from new rank %u", got, from);
    }
    CHECK(spools_comm_destroy(half));

    /* SPOOLS_UNDEFINED: the last rank joins nothing and gets NULL. */
    spools_comm_t *most = (spools_comm_t *)&most; /* not NULL: the split must set it */
    int32_t color = ct_rank == ct_size - 1 ? SPOOLS_UNDEFINED : 3;
    CHECK(spools_comm_split(dup, color, 0, &most));
    if (ct_rank == ct_size - 1) {
        ASSERT(most == NULL, "SPOOLS_UNDEFINED gave a communicator");
    } else {
        ASSERT(most != NULL, "split gave NULL");
        CHECK(spools_comm_size(most, &s));
        CHECK(spools_comm_rank(most, &r));
        ASSERT(s == ct_size - 1 && r == ct_rank, "rank %u size %u", r, s);
        int64_t one = 1, sum = 0;
        CHECK(spools_allreduce(most, &one, &sum, 1, SPOOLS_DTYPE_I64, SPOOLS_OP_SUM));
        ASSERT(sum == (int64_t)ct_size - 1, "sum %lld", (long long)sum);
    }
    CHECK(spools_comm_destroy(most)); /* NULL is accepted */
    CHECK(spools_comm_destroy(dup));
    OK("comms");
}

#define THREADS 4
#define ROUNDS 100

struct worker {
    int t;
    spools_comm_t *own; /* this thread's duplicate, for its collectives */
};

static void *worker_main(void *arg)
{
    struct worker *w = arg;
    uint32_t right = (ct_rank + 1) % ct_size, left = (ct_rank + ct_size - 1) % ct_size;
    int32_t tag = 2000 + w->t;
    for (int64_t i = 0; i < ROUNDS; i++) {
        int64_t out = (int64_t)ct_rank * 1000000 + w->t * 1000 + i, in = -1, sum = 0;
        spools_request_t *req = NULL;
        spools_msg_status_t st;
        CHECK(spools_isend(ct_comm, &out, sizeof out, right, tag, &req));
        CHECK(spools_recv(ct_comm, &in, sizeof in, (int32_t)left, tag, &st));
        CHECK(spools_wait(&req, NULL));
        ASSERT(in == (int64_t)left * 1000000 + w->t * 1000 + i && st.tag == tag,
               "thread %d round %lld got %lld (tag %d)", w->t, (long long)i, (long long)in,
               st.tag);
        int64_t mine = (int64_t)ct_rank + i * w->t;
        CHECK(spools_allreduce(w->own, &mine, &sum, 1, SPOOLS_DTYPE_I64, SPOOLS_OP_SUM));
        ASSERT(sum == (int64_t)ct_size * (ct_size - 1) / 2 + (int64_t)ct_size * i * w->t,
               "thread %d round %lld: sum %lld", w->t, (long long)i, (long long)sum);
    }
    return NULL;
}

static void threads(void)
{
    struct worker ws[THREADS];
    pthread_t ids[THREADS];
    for (int t = 0; t < THREADS; t++) { /* collective: same order on every rank */
        ws[t].t = t;
        CHECK(spools_comm_dup(ct_comm, &ws[t].own));
    }
    for (int t = 0; t < THREADS; t++)
        ASSERT(pthread_create(&ids[t], NULL, worker_main, &ws[t]) == 0, "pthread_create");
    for (int t = 0; t < THREADS; t++)
        ASSERT(pthread_join(ids[t], NULL) == 0, "pthread_join");
    for (int t = 0; t < THREADS; t++)
        CHECK(spools_comm_destroy(ws[t].own));
    OK("threads");
}

int main(void)
{
    ct_init("messaging");
    ASSERT(ct_size >= 3, "needs 3 ranks or more, got %u", ct_size);
    /* A barrier between sections: no section's messages meet another's receives. */
    void (*sections[])(void) = {ring,  wildcards, truncated, nonblocking, cancel,
                                probe, large,     comms,     threads};
    for (size_t i = 0; i < sizeof sections / sizeof sections[0]; i++) {
        sections[i]();
        CHECK(spools_barrier(ct_comm));
    }
    OK("done");
    ct_finalize();
    return 0;
}
