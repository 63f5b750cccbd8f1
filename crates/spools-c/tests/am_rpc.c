/*
 * am_rpc.c: callbacks from the library into C (3 ranks or more; run with 4).
 *
 * Printed by every rank, each after its checks passed:
 *   ok am-short    short active messages to every other rank: the handler checks the ctx
 *                  it was registered with, counts, and checks the words and their order
 *                  per sender; spools_am_wait_until waits for the count
 *   ok am-batched  batched short messages handed over by spools_am_flush
 *   ok am-progress one more message, polled for with spools_am_progress (no wait)
 *   ok am-bulk     bulk messages of several sizes (up to 64 KiB - the bulk limit),
 *                  payloads checked byte by byte in the handler
 *   ok regions     put/get between ranks (keys exchanged with spools_allgather of u32),
 *                  region_read/write, shared regions, errors past the end
 *   ok rpc         an RPC with a reply, its ctx checked and counted; a function failing
 *                  with a message (SPOOLS_ERR_REMOTE carrying it); one failing without;
 *                  a reply that does not fit (SPOOLS_ERR_TRUNCATED, reply_len)
 */
#include "ctest.h"

#define MAGIC 0xa11ce5ca1ab1e000ull
#define SHORTS 50
#define BATCHED 300
#define MAX_RANKS 64

/* ---- active messages --------------------------------------------------------------- */

struct am_state {
    uint64_t magic;                 /* MAGIC: the handler checks it got this ctx */
    uint64_t count;                 /* messages handled (atomic) */
    uint64_t next_seq[MAX_RANKS];   /* per sender: the sequence number expected next */
    uint64_t errors;                /* wrong words, order or payload (atomic) */
    uint64_t bulk_bytes;            /* payload bytes received (atomic) */
};

static uint8_t payload_byte(uint32_t from, uint64_t seq, size_t i)
{
    return (uint8_t)((i * 7u + seq * 13u + from * 101u) & 0xffu);
}

static void bad_ctx(void *ctx)
{
    fprintf(stderr, "FAIL am_rpc: a handler got ctx %p\n", ctx);
    exit(1);
}

/* Short messages: args = {sender, seq, MAGIC ^ seq, channel marker}; per sender and
 * channel the sequence numbers arrive in order. */
static void on_short(const spools_am_msg_t *m, void *ctx)
{
    struct am_state *s = ctx;
    if (s == NULL || s->magic != MAGIC)
        bad_ctx(ctx);
    if (m->from >= MAX_RANKS || m->args[0] != m->from || m->args[2] != (MAGIC ^ m->args[1]) ||
        m->payload != NULL || m->payload_len != 0 || m->channel != 3 ||
        m->args[1] != s->next_seq[m->from])
        __atomic_fetch_add(&s->errors, 1, __ATOMIC_SEQ_CST);
    else
        s->next_seq[m->from]++;
    __atomic_fetch_add(&s->count, 1, __ATOMIC_SEQ_CST);
}

/* Bulk messages: args = {sender, seq, length, 0}, payload bytes payload_byte(...). */
static void on_bulk(const spools_am_msg_t *m, void *ctx)
{
    struct am_state *s = ctx;
    if (s == NULL || s->magic != MAGIC)
        bad_ctx(ctx);
    int bad = m->args[0] != m->from || m->payload_len != m->args[2] || m->channel != 5 ||
              (m->payload_len > 0 && m->payload == NULL);
    const uint8_t *p = m->payload;
    for (size_t i = 0; !bad && i < m->payload_len; i++)
        bad = p[i] != payload_byte(m->from, m->args[1], i);
    if (bad)
        __atomic_fetch_add(&s->errors, 1, __ATOMIC_SEQ_CST);
    __atomic_fetch_add(&s->bulk_bytes, (uint64_t)m->payload_len, __ATOMIC_SEQ_CST);
    __atomic_fetch_add(&s->count, 1, __ATOMIC_SEQ_CST);
}

struct until {
    uint64_t *counter;
    uint64_t want;
    uint64_t calls;
};

static int32_t reached(void *ctx)
{
    struct until *u = ctx;
    u->calls++;
    return __atomic_load_n(u->counter, __ATOMIC_SEQ_CST) >= u->want;
}

static struct am_state shorts = {MAGIC, 0, {0}, 0, 0};
static struct am_state bulks = {MAGIC, 0, {0}, 0, 0};

static void wait_count(struct am_state *s, uint64_t want, const char *what)
{
    struct until u = {&s->count, want, 0};
    CHECK(spools_am_wait_until(ct_world, reached, &u));
    ASSERT(u.calls >= 1, "%s: the condition was never called", what);
    ASSERT(s->count == want, "%s: %llu messages, expected %llu", what,
           (unsigned long long)s->count, (unsigned long long)want);
    ASSERT(s->errors == 0, "%s: %llu messages with wrong words, order or payload", what,
           (unsigned long long)s->errors);
}

static void active_messages(void)
{
    uint32_t n = ct_size, me = ct_rank;
    uint32_t ids[2], *all = ct_alloc(2 * n * sizeof *all);
    CHECK(spools_am_register(ct_world, "short", on_short, &shorts));
    CHECK(spools_am_register(ct_world, "bulk", on_bulk, &bulks));
    EXPECT_ERR(spools_am_register(ct_world, "short", on_short, &shorts),
               SPOOLS_ERR_INVALID_ARG, "short");
    CHECK(spools_am_sync(ct_world));
    CHECK(spools_am_handler_id(ct_world, "short", &ids[0]));
    CHECK(spools_am_handler_id(ct_world, "bulk", &ids[1]));
    ASSERT(ids[0] != ids[1], "both handlers have id %u", ids[0]);
    /* One name-to-id table on every rank. */
    CHECK(spools_allgather(ct_comm, ids, 2, all, SPOOLS_DTYPE_U32));
    for (uint32_t p = 0; p < n; p++)
        ASSERT(all[2 * p] == ids[0] && all[2 * p + 1] == ids[1], "rank %u has ids %u %u", p,
               all[2 * p], all[2 * p + 1]);
    free(all);

    /* Short messages, immediate, channel 3, to every other rank. */
    for (uint64_t seq = 0; seq < SHORTS; seq++)
        for (uint32_t p = 0; p < n; p++) {
            uint64_t args[4] = {me, seq, MAGIC ^ seq, 0};
            if (p != me)
                CHECK(spools_am_send_short(ct_world, p, ids[0], args, 3, 0));
        }
    wait_count(&shorts, (uint64_t)SHORTS * (n - 1), "short");
    /* Nobody sends the next phase's messages before everyone has this phase's. */
    CHECK(spools_barrier(ct_comm));
    OK("am-short");

    /* Batched: handed over at the batch size or at the flush. */
    for (uint64_t seq = SHORTS; seq < SHORTS + BATCHED; seq++)
        for (uint32_t p = 0; p < n; p++) {
            uint64_t args[4] = {me, seq, MAGIC ^ seq, 0};
            if (p != me)
                CHECK(spools_am_send_short(ct_world, p, ids[0], args, 3, SPOOLS_AM_BATCHED));
        }
    CHECK(spools_am_flush(ct_world));
    wait_count(&shorts, (uint64_t)(SHORTS + BATCHED) * (n - 1), "batched");
    CHECK(spools_barrier(ct_comm));
    OK("am-batched");

    /* spools_am_progress runs handlers: rank 0 sends every other rank one more message,
     * which polls progress until it has run (unless a wait of the barrier ran it). */
    uint64_t target = (uint64_t)(SHORTS + BATCHED) * (n - 1) + 1;
    if (me == 0) {
        for (uint32_t p = 1; p < n; p++) {
            uint64_t seq = SHORTS + BATCHED, args[4] = {0, seq, MAGIC ^ seq, 0};
            CHECK(spools_am_send_short(ct_world, p, ids[0], args, 3, SPOOLS_AM_HIGH));
        }
    } else {
        int already = __atomic_load_n(&shorts.count, __ATOMIC_SEQ_CST) >= target;
        size_t total = 0;
        while (__atomic_load_n(&shorts.count, __ATOMIC_SEQ_CST) < target) {
            size_t handled = 0;
            CHECK(spools_am_progress(ct_world, &handled));
            total += handled;
        }
        ASSERT(already || total >= 1, "progress ran the handler but says it ran %zu", total);
        CHECK(spools_am_progress(ct_world, NULL));
        ASSERT(shorts.count == target && shorts.errors == 0, "%llu messages, %llu bad",
               (unsigned long long)shorts.count, (unsigned long long)shorts.errors);
    }
    CHECK(spools_barrier(ct_comm));
    OK("am-progress");

    /* Bulk messages of several sizes (64 KiB is the default bulk_limit), high priority
     * and unordered flags included. */
    static const size_t sizes[] = {0, 1, 100, 4096, 10000, 65536};
    enum { NS = sizeof sizes / sizeof sizes[0] };
    uint8_t *buf = ct_alloc(65536);
    uint64_t bytes_each = 0;
    for (uint64_t seq = 0; seq < NS; seq++) {
        bytes_each += sizes[seq];
        for (uint32_t p = 0; p < n; p++) {
            if (p == me)
                continue;
            for (size_t i = 0; i < sizes[seq]; i++)
                buf[i] = payload_byte(me, seq, i);
            uint64_t args[4] = {me, seq, sizes[seq], 0};
            uint32_t flags = seq % 3 == 1 ? SPOOLS_AM_HIGH : seq % 3 == 2 ? SPOOLS_AM_UNORDERED : 0;
            CHECK(spools_am_send_bulk(ct_world, p, ids[1], args, buf, sizes[seq], 5, flags));
            memset(buf, 0, sizes[seq]); /* the payload may be reused on return */
        }
    }
    /* Past the bulk limit: refused. */
    uint8_t *huge = ct_alloc(65537);
    uint64_t hargs[4] = {me, 0, 65537, 0};
    EXPECT_ERR(spools_am_send_bulk(ct_world, (me + 1) % n, ids[1], hargs, huge, 65537, 5, 0),
               SPOOLS_ERR_INVALID_ARG, "65537");
    free(huge);
    wait_count(&bulks, (uint64_t)NS * (n - 1), "bulk");
    ASSERT(bulks.bulk_bytes == bytes_each * (n - 1), "bulk bytes %llu",
           (unsigned long long)bulks.bulk_bytes);
    free(buf);
    /* Every rank has all its messages before anyone moves on (and sends no more). */
    CHECK(spools_barrier(ct_comm));
    OK("am-bulk");
}

/* ---- regions ------------------------------------------------------------------------- */

static void regions(void)
{
    uint32_t n = ct_size, me = ct_rank;
    uint32_t right = (me + 1) % n, left = (me + n - 1) % n;
    const size_t len = 4096 + 17;
    spools_region_t *plain, *shm;
    uint32_t key[2], *keys = ct_alloc(2 * n * sizeof *keys);
    CHECK(spools_region_create(ct_world, len, 0, &plain));
    CHECK(spools_region_create(ct_world, len, 1, &shm));
    CHECK(spools_region_key(plain, &key[0]));
    CHECK(spools_region_key(shm, &key[1]));
    ASSERT(key[0] != key[1], "two regions have key %u", key[0]);
    /* A new region is zero-filled. */
    uint8_t *tmp = ct_alloc(len);
    CHECK(spools_region_read(plain, 0, tmp, len));
    for (size_t i = 0; i < len; i++)
        ASSERT(tmp[i] == 0, "a new region has byte %zu = %u", i, tmp[i]);
    CHECK(spools_allgather(ct_comm, key, 2, keys, SPOOLS_DTYPE_U32));
    ASSERT(keys[2 * me] == key[0] && keys[2 * me + 1] == key[1], "my keys in the allgather");

    /* Every rank puts 64 bytes at offset 64*me into both regions of its right
     * neighbour, and 17 bytes at the very end of the plain one. */
    uint8_t out[64], got[64];
    for (int i = 0; i < 64; i++)
        out[i] = (uint8_t)(me * 3 + (uint32_t)i);
    CHECK(spools_put(ct_world, right, keys[2 * right], 64u * me, out, sizeof out));
    CHECK(spools_put(ct_world, right, keys[2 * right + 1], 64u * me, out, sizeof out));
    CHECK(spools_put(ct_world, right, keys[2 * right], len - 17, out, 17));
    /* Past the end: refused. */
    EXPECT_ERR(spools_put(ct_world, right, keys[2 * right], len - 16, out, 17),
               SPOOLS_ERR_INVALID_ARG, "outside");
    EXPECT_ERR(spools_region_read(plain, len - 3, tmp, 4), SPOOLS_ERR_INVALID_ARG, "do not fit");
    CHECK(spools_barrier(ct_comm)); /* a put returns once its bytes are in place */

    for (int k = 0; k < 2; k++) {
        CHECK(spools_region_read(k == 0 ? plain : shm, 64u * left, got, sizeof got));
        for (int i = 0; i < 64; i++)
            ASSERT(got[i] == (uint8_t)(left * 3 + (uint32_t)i), "region %d byte %d from %u", k,
                   i, left);
    }
    CHECK(spools_region_read(plain, len - 17, got, 17));
    for (int i = 0; i < 17; i++)
        ASSERT(got[i] == (uint8_t)(left * 3 + (uint32_t)i), "the tail put, byte %d", i);
    /* get: read back what this rank put into its right neighbour. */
    memset(got, 0, sizeof got);
    CHECK(spools_get(ct_world, right, keys[2 * right], 64u * me, got, sizeof got));
    ASSERT(memcmp(got, out, sizeof out) == 0, "get from rank %u", right);
    memset(got, 0, sizeof got);
    CHECK(spools_get(ct_world, right, keys[2 * right + 1], 64u * me, got, sizeof got));
    ASSERT(memcmp(got, out, sizeof out) == 0, "get from rank %u's shared region", right);
    /* A local write is what a peer's get sees. */
    CHECK(spools_barrier(ct_comm));
    uint32_t stamp = 0xfeed0000u + me;
    CHECK(spools_region_write(plain, 8, &stamp, sizeof stamp));
    CHECK(spools_barrier(ct_comm));
    uint32_t seen = 0;
    CHECK(spools_get(ct_world, left, keys[2 * left], 8, &seen, sizeof seen));
    ASSERT(seen == 0xfeed0000u + left, "get of rank %u's write gave %#x", left, seen);
    CHECK(spools_barrier(ct_comm)); /* nobody gets from a region after it is destroyed */
    CHECK(spools_region_destroy(plain));
    CHECK(spools_region_destroy(shm));
    CHECK(spools_region_destroy(NULL));
    free(keys);
    free(tmp);
    OK("regions");
}

/* ---- RPC ------------------------------------------------------------------------------ */

struct rpc_ctx {
    uint64_t magic;
    uint64_t calls; /* atomic */
};

static struct rpc_ctx mul_ctx = {MAGIC, 0};

/* args: two int64; reply: their product and this rank. */
static int32_t mul(const void *args, size_t len, spools_rpc_reply_t *reply, void *ctx)
{
    struct rpc_ctx *c = ctx;
    if (c == NULL || c->magic != MAGIC) {
        spools_rpc_fail(reply, "mul got a wrong ctx");
        return 1;
    }
    __atomic_fetch_add(&c->calls, 1, __ATOMIC_SEQ_CST);
    if (len != 16) {
        spools_rpc_fail(reply, "mul wants 16 bytes");
        return 1;
    }
    int64_t ab[2], out[2];
    memcpy(ab, args, sizeof ab);
    out[0] = ab[0] * ab[1];
    out[1] = ct_rank;
    return spools_rpc_reply(reply, out, sizeof out) == SPOOLS_OK ? 0 : 1;
}

static int32_t failing(const void *args, size_t len, spools_rpc_reply_t *reply, void *ctx)
{
    (void)args;
    (void)ctx;
    char msg[64];
    snprintf(msg, sizeof msg, "deliberate failure %zu on rank %u", len, ct_rank);
    spools_rpc_fail(reply, msg);
    return 1;
}

static int32_t silent_failure(const void *args, size_t len, spools_rpc_reply_t *reply,
                              void *ctx)
{
    (void)args;
    (void)len;
    (void)reply;
    (void)ctx;
    return 7;
}

static void rpc(void)
{
    uint32_t n = ct_size, me = ct_rank;
    CHECK(spools_rpc_register(ct_comm, "mul", mul, &mul_ctx));
    CHECK(spools_rpc_register(ct_comm, "failing", failing, NULL));
    CHECK(spools_rpc_register(ct_comm, "silent", silent_failure, NULL));
    CHECK(spools_barrier(ct_comm)); /* registered everywhere before anyone calls */

    /* mul on every other rank (and on this one). */
    for (uint32_t p = 0; p < n; p++) {
        int64_t ab[2] = {(int64_t)me + 2, -(int64_t)p - 3}, out[2] = {0, 0};
        size_t rlen = 0;
        CHECK(spools_rpc_call(ct_comm, p, "mul", ab, sizeof ab, out, sizeof out, &rlen));
        ASSERT(rlen == sizeof out && out[0] == ab[0] * ab[1] && out[1] == (int64_t)p,
               "mul on rank %u: len %zu, %lld, rank %lld", p, rlen, (long long)out[0],
               (long long)out[1]);
    }
    /* A reply that does not fit: truncated, with its length. */
    int64_t ab[2] = {6, 7}, small = 0;
    size_t rlen = 0;
    EXPECT_ERR(spools_rpc_call(ct_comm, (me + 1) % n, "mul", ab, sizeof ab, &small, sizeof small,
                               &rlen),
               SPOOLS_ERR_TRUNCATED, "16 bytes");
    ASSERT(rlen == 16, "reply_len %zu after truncation", rlen);
    /* The function's own failure, with its message. */
    char want[64];
    uint32_t peer = (me + 1) % n;
    snprintf(want, sizeof want, "deliberate failure 3 on rank %u", peer);
    EXPECT_ERR(spools_rpc_call(ct_comm, peer, "failing", "abc", 3, NULL, 0, NULL),
               SPOOLS_ERR_REMOTE, want);
    EXPECT_ERR(spools_rpc_call(ct_comm, peer, "silent", NULL, 0, NULL, 0, NULL),
               SPOOLS_ERR_REMOTE, "returned 7");
    /* A wrong argument length, refused by mul itself. */
    EXPECT_ERR(spools_rpc_call(ct_comm, peer, "mul", ab, 8, NULL, 0, NULL), SPOOLS_ERR_REMOTE,
               "mul wants 16 bytes");

    /* Every rank ran mul once per rank, plus the truncated call and the short one. */
    CHECK(spools_barrier(ct_comm));
    uint64_t calls = __atomic_load_n(&mul_ctx.calls, __ATOMIC_SEQ_CST), total = 0;
    CHECK(spools_allreduce(ct_comm, &calls, &total, 1, SPOOLS_DTYPE_U64, SPOOLS_OP_SUM));
    ASSERT(total == (uint64_t)n * n + 2 * n, "mul ran %llu times, expected %u",
           (unsigned long long)total, n * n + 2 * n);
    ASSERT(calls == n + 2, "mul ran %llu times here, expected %u", (unsigned long long)calls,
           n + 2);
    OK("rpc");
}

int main(void)
{
    ct_init("am_rpc");
    ASSERT(ct_size >= 2 && ct_size <= MAX_RANKS, "needs 2 to %d ranks", MAX_RANKS);
    active_messages();
    regions();
    rpc();
    CHECK(spools_barrier(ct_comm));
    OK("done");
    ct_finalize();
    return 0;
}
