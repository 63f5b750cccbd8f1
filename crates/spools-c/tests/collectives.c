/*
 * collectives.c: every collective of the C interface against a serial reference computed
 * here, for every dtype (2 ranks or more; run with 3 and 4).
 *
 * Printed by every rank, each after its checks passed:
 *   ok reductions TYPE   allreduce, reduce (root varies), scan and reduce_scatter with
 *                        SUM, PROD, MIN and MAX (integers wrap: u8 products do)
 *   ok movement TYPE     bcast, gather, gatherv, scatter, scatterv, allgather, allgatherv,
 *                        alltoall, alltoallv (counts of 0 included)
 *   ok barrier
 *   ok user-noncommutative  an associative, non-commutative user operator (composition
 *                        of affine maps x -> m*x + c mod 2^32, packed in a u64): allreduce,
 *                        reduce at two roots, scan, reduce_scatter = the left-to-right fold
 *   ok user-ctx          user operators get their own ctx (checked and counted) and the
 *                        dtype of the call
 */
#include "ctest.h"

#define COUNT 37 /* elements of the reductions: odd, not a power of 2 */

/* ---- values ------------------------------------------------------------------------- */

/* Reduction inputs of rank r at element i: small enough that sums and products of up to
 * 6 ranks are exact (and in range for signed types: no undefined behaviour); unsigned
 * products wrap around in u8 as they should in the library. */
static long long sval(uint32_t r, size_t i) { return (long long)((r * 3 + i * 5) % 5) - 2; }
static unsigned long long uval(uint32_t r, size_t i) { return (r * 3 + i * 7) % 6 + 1; }
static double fval(uint32_t r, size_t i) { return (r + 1) * 0.5 + (double)(i % 7) * 0.25; }

/* Data movement values: element i from rank src (and to rank dst), below 127. */
static int mval(uint32_t src, size_t i) { return (int)((src * 37 + i * 3) % 101); }
static int tval(uint32_t src, uint32_t dst, size_t i) { return (int)(src * 25 + dst * 5 + i); }

/* ---- per-type tests, generated for each dtype --------------------------------------- */

#define DEFINE_TYPE_TESTS(T, DT, NAME, GEN)                                                  \
    static T NAME##_apply(spools_op_t op, T a, T b)                                           \
    {                                                                                        \
        switch (op) {                                                                        \
        case SPOOLS_OP_SUM: return (T)(a + b);                                               \
        case SPOOLS_OP_PROD: return (T)(a * b);                                              \
        case SPOOLS_OP_MIN: return b < a ? b : a;                                            \
        default: return b > a ? b : a;                                                       \
        }                                                                                    \
    }                                                                                        \
    /* ref[i] = fold of ranks 0..last of GEN(r, i + off) with op */                          \
    static void NAME##_fold(spools_op_t op, uint32_t last, size_t off, size_t n, T *ref)     \
    {                                                                                        \
        for (size_t i = 0; i < n; i++) {                                                     \
            T acc = (T)GEN(0, i + off);                                                      \
            for (uint32_t r = 1; r <= last; r++)                                             \
                acc = NAME##_apply(op, acc, (T)GEN(r, i + off));                             \
            ref[i] = acc;                                                                    \
        }                                                                                    \
    }                                                                                        \
    static void NAME##_reductions(void)                                                      \
    {                                                                                        \
        uint32_t n = ct_size, me = ct_rank;                                                  \
        size_t total = (size_t)n * (n + 1) / 2; /* reduce_scatter: counts k + 1 */           \
        size_t cap = total > COUNT ? total : COUNT;                                          \
        T *send = ct_alloc(cap * sizeof(T)), *recv = ct_alloc(cap * sizeof(T));              \
        T *ref = ct_alloc(cap * sizeof(T));                                                  \
        size_t *counts = ct_alloc(n * sizeof(size_t));                                       \
        for (spools_op_t op = SPOOLS_OP_SUM; op <= SPOOLS_OP_MAX; op++) {                    \
            for (size_t i = 0; i < cap; i++)                                                 \
                send[i] = (T)GEN(me, i);                                                     \
            /* allreduce */                                                                  \
            memset(recv, 0x5a, cap * sizeof(T));                                             \
            CHECK(spools_allreduce(ct_comm, send, recv, COUNT, DT, op));                     \
            NAME##_fold(op, n - 1, 0, COUNT, ref);                                           \
            for (size_t i = 0; i < COUNT; i++)                                               \
                ASSERT(recv[i] == ref[i], #NAME " allreduce op %u element %zu", op, i);      \
            /* reduce, at a root that changes with the op; NULL recv elsewhere */            \
            uint32_t root = op % n;                                                          \
            memset(recv, 0x5a, cap * sizeof(T));                                             \
            CHECK(spools_reduce(ct_comm, send, me == root ? recv : NULL, COUNT, DT, op,      \
                                root));                                                      \
            if (me == root)                                                                  \
                for (size_t i = 0; i < COUNT; i++)                                           \
                    ASSERT(recv[i] == ref[i], #NAME " reduce op %u element %zu", op, i);     \
            /* scan: ranks 0..me */                                                          \
            memset(recv, 0x5a, cap * sizeof(T));                                             \
            CHECK(spools_scan(ct_comm, send, recv, COUNT, DT, op));                          \
            NAME##_fold(op, me, 0, COUNT, ref);                                              \
            for (size_t i = 0; i < COUNT; i++)                                               \
                ASSERT(recv[i] == ref[i], #NAME " scan op %u element %zu", op, i);           \
            /* reduce_scatter: rank k gets k + 1 elements of the reduction */                \
            size_t off = 0;                                                                  \
            for (uint32_t k = 0; k < n; k++) {                                               \
                counts[k] = k + 1;                                                           \
                if (k < me)                                                                  \
                    off += k + 1;                                                            \
            }                                                                                \
            memset(recv, 0x5a, cap * sizeof(T));                                             \
            CHECK(spools_reduce_scatter(ct_comm, send, recv, counts, DT, op));               \
            NAME##_fold(op, n - 1, off, me + 1, ref);                                        \
            for (size_t i = 0; i <= me; i++)                                                 \
                ASSERT(recv[i] == ref[i], #NAME " reduce_scatter op %u element %zu", op, i); \
        }                                                                                    \
        free(send);                                                                          \
        free(recv);                                                                          \
        free(ref);                                                                           \
        free(counts);                                                                        \
        OK("reductions " #NAME);                                                             \
    }                                                                                        \
    static void NAME##_movement(void)                                                        \
    {                                                                                        \
        uint32_t n = ct_size, me = ct_rank;                                                  \
        size_t cap = (size_t)n * 16;                                                         \
        T *send = ct_alloc(cap * sizeof(T)), *recv = ct_alloc(cap * sizeof(T));              \
        size_t *counts = ct_alloc(n * sizeof(size_t)), *rcounts = ct_alloc(n * sizeof(size_t)); \
        size_t sum, off;                                                                     \
        /* bcast of 13 elements from rank 1 */                                               \
        uint32_t root = 1 % n;                                                               \
        for (size_t i = 0; i < 13; i++)                                                      \
            recv[i] = (T)(me == root ? mval(root, i) : 0);                                   \
        CHECK(spools_bcast(ct_comm, recv, 13, DT, root));                                    \
        for (size_t i = 0; i < 13; i++)                                                      \
            ASSERT(recv[i] == (T)mval(root, i), #NAME " bcast element %zu", i);              \
        /* gather of 5 elements each on the last rank */                                     \
        root = n - 1;                                                                        \
        for (size_t i = 0; i < 5; i++)                                                       \
            send[i] = (T)mval(me, i);                                                        \
        memset(recv, 0x5a, cap * sizeof(T));                                                 \
        CHECK(spools_gather(ct_comm, send, 5, me == root ? recv : NULL, DT, root));          \
        if (me == root)                                                                      \
            for (uint32_t p = 0; p < n; p++)                                                 \
                for (size_t i = 0; i < 5; i++)                                               \
                    ASSERT(recv[p * 5 + i] == (T)mval(p, i), #NAME " gather %u.%zu", p, i);  \
        /* gatherv on rank 0: rank p gives p + 2 elements, rank 1 none */                    \
        root = 0;                                                                            \
        for (uint32_t p = 0; p < n; p++)                                                     \
            counts[p] = p == 1 ? 0 : p + 2;                                                  \
        for (size_t i = 0; i < counts[me]; i++)                                              \
            send[i] = (T)mval(me, i);                                                        \
        memset(recv, 0x5a, cap * sizeof(T));                                                 \
        CHECK(spools_gatherv(ct_comm, send, counts[me], me == root ? recv : NULL, counts, DT, \
                             root));                                                         \
        if (me == root) {                                                                    \
            off = 0;                                                                         \
            for (uint32_t p = 0; p < n; p++)                                                 \
                for (size_t i = 0; i < counts[p]; i++, off++)                                \
                    ASSERT(recv[off] == (T)mval(p, i), #NAME " gatherv %u.%zu", p, i);       \
        }                                                                                    \
        /* scatter of 4 elements each from rank 1 */                                         \
        root = 1 % n;                                                                        \
        if (me == root)                                                                      \
            for (uint32_t p = 0; p < n; p++)                                                 \
                for (size_t i = 0; i < 4; i++)                                               \
                    send[p * 4 + i] = (T)mval(p, i + 50);                                    \
        memset(recv, 0x5a, cap * sizeof(T));                                                 \
        CHECK(spools_scatter(ct_comm, me == root ? send : NULL, recv, 4, DT, root));         \
        for (size_t i = 0; i < 4; i++)                                                       \
            ASSERT(recv[i] == (T)mval(me, i + 50), #NAME " scatter element %zu", i);         \
        /* scatterv from the last rank: rank p gets p % 3 elements (rank 0 none) */          \
        root = n - 1;                                                                        \
        for (uint32_t p = 0; p < n; p++)                                                     \
            counts[p] = p % 3;                                                               \
        if (me == root) {                                                                    \
            off = 0;                                                                         \
            for (uint32_t p = 0; p < n; p++)                                                 \
                for (size_t i = 0; i < counts[p]; i++)                                       \
                    send[off++] = (T)mval(p, i + 20);                                        \
        }                                                                                    \
        memset(recv, 0x5a, cap * sizeof(T));                                                 \
        CHECK(spools_scatterv(ct_comm, me == root ? send : NULL, counts, recv, counts[me],   \
                              DT, root));                                                    \
        for (size_t i = 0; i < counts[me]; i++)                                              \
            ASSERT(recv[i] == (T)mval(me, i + 20), #NAME " scatterv element %zu", i);        \
        /* allgather of 3 elements each */                                                   \
        for (size_t i = 0; i < 3; i++)                                                       \
            send[i] = (T)mval(me, i + 7);                                                    \
        memset(recv, 0x5a, cap * sizeof(T));                                                 \
        CHECK(spools_allgather(ct_comm, send, 3, recv, DT));                                 \
        for (uint32_t p = 0; p < n; p++)                                                     \
            for (size_t i = 0; i < 3; i++)                                                   \
                ASSERT(recv[p * 3 + i] == (T)mval(p, i + 7), #NAME " allgather %u.%zu", p, i); \
        /* allgatherv: rank p gives (2p + 1) % 4 elements */                                 \
        for (uint32_t p = 0; p < n; p++)                                                     \
            counts[p] = (2 * p + 1) % 4;                                                     \
        for (size_t i = 0; i < counts[me]; i++)                                              \
            send[i] = (T)mval(me, i + 9);                                                    \
        memset(recv, 0x5a, cap * sizeof(T));                                                 \
        CHECK(spools_allgatherv(ct_comm, send, counts[me], recv, counts, DT));               \
        off = 0;                                                                             \
        for (uint32_t p = 0; p < n; p++)                                                     \
            for (size_t i = 0; i < counts[p]; i++, off++)                                    \
                ASSERT(recv[off] == (T)mval(p, i + 9), #NAME " allgatherv %u.%zu", p, i);    \
        /* alltoall of 2 elements per pair */                                                \
        for (uint32_t j = 0; j < n; j++)                                                     \
            for (size_t i = 0; i < 2; i++)                                                   \
                send[j * 2 + i] = (T)tval(me, j, i);                                         \
        memset(recv, 0x5a, cap * sizeof(T));                                                 \
        CHECK(spools_alltoall(ct_comm, send, recv, 2, DT));                                  \
        for (uint32_t p = 0; p < n; p++)                                                     \
            for (size_t i = 0; i < 2; i++)                                                   \
                ASSERT(recv[p * 2 + i] == (T)tval(p, me, i), #NAME " alltoall %u.%zu", p, i); \
        /* alltoallv: (src + dst) % 3 elements from src to dst (some 0) */                   \
        sum = 0;                                                                             \
        for (uint32_t j = 0; j < n; j++) {                                                   \
            counts[j] = (me + j) % 3;                                                        \
            rcounts[j] = (j + me) % 3;                                                       \
            for (size_t i = 0; i < counts[j]; i++)                                           \
                send[sum++] = (T)tval(me, j, i);                                             \
        }                                                                                    \
        memset(recv, 0x5a, cap * sizeof(T));                                                 \
        CHECK(spools_alltoallv(ct_comm, send, counts, recv, rcounts, DT));                   \
        off = 0;                                                                             \
        for (uint32_t p = 0; p < n; p++)                                                     \
            for (size_t i = 0; i < rcounts[p]; i++, off++)                                   \
                ASSERT(recv[off] == (T)tval(p, me, i), #NAME " alltoallv %u.%zu", p, i);     \
        free(send);                                                                          \
        free(recv);                                                                          \
        free(counts);                                                                        \
        free(rcounts);                                                                       \
        OK("movement " #NAME);                                                               \
    }

#define FOR_TYPES(X)                                                                         \
    X(int32_t, SPOOLS_DTYPE_I32, i32, sval)                                                  \
    X(int64_t, SPOOLS_DTYPE_I64, i64, sval)                                                  \
    X(double, SPOOLS_DTYPE_F64, f64, fval)                                                   \
    X(uint8_t, SPOOLS_DTYPE_U8, u8, uval)                                                    \
    X(int8_t, SPOOLS_DTYPE_I8, i8, sval)                                                     \
    X(uint16_t, SPOOLS_DTYPE_U16, u16, uval)                                                 \
    X(int16_t, SPOOLS_DTYPE_I16, i16, sval)                                                  \
    X(uint32_t, SPOOLS_DTYPE_U32, u32, uval)                                                 \
    X(uint64_t, SPOOLS_DTYPE_U64, u64, uval)                                                 \
    X(float, SPOOLS_DTYPE_F32, f32, fval)

FOR_TYPES(DEFINE_TYPE_TESTS)

/* ---- user operators ------------------------------------------------------------------ */

#define CTX_MAGIC 0x5eedf00dcafe1234ull

struct op_ctx {
    uint64_t magic;     /* CTX_MAGIC: the callback checks it got this ctx */
    uint64_t calls;     /* calls of the callback with this ctx (atomic) */
    uint64_t elems;     /* elements it combined */
    uint64_t bad;       /* calls with a wrong ctx or dtype */
    spools_dtype_t want_dtype;
};

static void count_call(struct op_ctx *c, size_t count, spools_dtype_t dt)
{
    if (c == NULL || c->magic != CTX_MAGIC) {
        /* Cannot count in a foreign ctx: end the test at once. */
        fprintf(stderr, "FAIL collectives: a user operator got ctx %p\n", (void *)c);
        exit(1);
    }
    if (dt != c->want_dtype)
        __atomic_fetch_add(&c->bad, 1, __ATOMIC_SEQ_CST);
    __atomic_fetch_add(&c->calls, 1, __ATOMIC_SEQ_CST);
    __atomic_fetch_add(&c->elems, (uint64_t)count, __ATOMIC_SEQ_CST);
}

/* An affine map x -> m*x + c (mod 2^32) packed as m << 32 | c. */
static uint64_t affine(uint32_t m, uint32_t c) { return ((uint64_t)m << 32) | c; }

/* The map "f, then g": x -> m2*(m1*x + c1) + c2. Associative, not commutative. */
static uint64_t then(uint64_t f, uint64_t g)
{
    uint32_t m1 = (uint32_t)(f >> 32), c1 = (uint32_t)f;
    uint32_t m2 = (uint32_t)(g >> 32), c2 = (uint32_t)g;
    return affine(m1 * m2, m2 * c1 + c2);
}

/* The contract: inout[i] = in[i] op inout[i], `in` holding lower ranks. */
static void compose_fn(const void *in, void *inout, size_t count, spools_dtype_t dt, void *ctx)
{
    const uint64_t *a = in;
    uint64_t *b = inout;
    count_call(ctx, count, dt);
    for (size_t i = 0; i < count; i++)
        b[i] = then(a[i], b[i]);
}

static uint64_t map_of(uint32_t r, size_t i)
{
    return affine(2 * r + 3 + (uint32_t)i, 7 * r + 3 * (uint32_t)i + 1);
}

/* ref[i] = map_of(0, i + off) then ... then map_of(last, i + off). */
static void compose_fold(uint32_t last, size_t off, size_t n, uint64_t *ref)
{
    for (size_t i = 0; i < n; i++) {
        uint64_t acc = map_of(0, i + off);
        for (uint32_t r = 1; r <= last; r++)
            acc = then(acc, map_of(r, i + off));
        ref[i] = acc;
    }
}

static void user_noncommutative(void)
{
    uint32_t n = ct_size, me = ct_rank;
    struct op_ctx ctx = {CTX_MAGIC, 0, 0, 0, SPOOLS_DTYPE_U64};
    spools_op_t op;
    CHECK(spools_op_create(compose_fn, &ctx, 0, &op));
    ASSERT(op > SPOOLS_OP_MAX, "a user operator got the built-in value %u", op);
    size_t total = (size_t)n * (n + 1) / 2, cap = total > COUNT ? total : COUNT;
    uint64_t *send = ct_alloc(cap * 8), *recv = ct_alloc(cap * 8), *ref = ct_alloc(cap * 8);
    uint64_t *rev = ct_alloc(cap * 8);
    for (size_t i = 0; i < cap; i++)
        send[i] = map_of(me, i);

    /* The reference in rank order, and proof that the order matters here. */
    compose_fold(n - 1, 0, COUNT, ref);
    int differs = 0;
    for (size_t i = 0; i < COUNT; i++) {
        uint64_t acc = map_of(n - 1, i);
        for (uint32_t r = n - 1; r-- > 0;)
            acc = then(acc, map_of(r, i));
        rev[i] = acc;
        differs |= rev[i] != ref[i];
    }
    ASSERT(differs, "the operator does not tell the orders apart: a useless test");

    CHECK(spools_allreduce(ct_comm, send, recv, COUNT, SPOOLS_DTYPE_U64, op));
    for (size_t i = 0; i < COUNT; i++)
        ASSERT(recv[i] == ref[i], "allreduce element %zu: %#llx, expected %#llx%s", i,
               (unsigned long long)recv[i], (unsigned long long)ref[i],
               recv[i] == rev[i] ? " (the reverse order)" : "");
    for (uint32_t root = 0; root < n; root += n - 1) {
        memset(recv, 0, cap * 8);
        CHECK(spools_reduce(ct_comm, send, recv, COUNT, SPOOLS_DTYPE_U64, op, root));
        if (me == root)
            for (size_t i = 0; i < COUNT; i++)
                ASSERT(recv[i] == ref[i], "reduce at %u element %zu", root, i);
        if (n == 1)
            break;
    }
    CHECK(spools_scan(ct_comm, send, recv, COUNT, SPOOLS_DTYPE_U64, op));
    compose_fold(me, 0, COUNT, ref);
    for (size_t i = 0; i < COUNT; i++)
        ASSERT(recv[i] == ref[i], "scan element %zu: %#llx, expected %#llx", i,
               (unsigned long long)recv[i], (unsigned long long)ref[i]);
    size_t *counts = ct_alloc(n * sizeof *counts), off = 0;
    for (uint32_t k = 0; k < n; k++) {
        counts[k] = k + 1;
        if (k < me)
            off += k + 1;
    }
    CHECK(spools_reduce_scatter(ct_comm, send, recv, counts, SPOOLS_DTYPE_U64, op));
    compose_fold(n - 1, off, me + 1, ref);
    for (size_t i = 0; i <= me; i++)
        ASSERT(recv[i] == ref[i], "reduce_scatter element %zu", i);
    ASSERT(ctx.bad == 0, "the operator was called with another dtype %llu times",
           (unsigned long long)ctx.bad);
    CHECK(spools_op_destroy(op));
    free(send);
    free(recv);
    free(ref);
    free(rev);
    free(counts);
    OK("user-noncommutative");
}

/* A commutative sum of i64 or f64, by the dtype it is given. */
static void sum_fn(const void *in, void *inout, size_t count, spools_dtype_t dt, void *ctx)
{
    count_call(ctx, count, dt);
    if (dt == SPOOLS_DTYPE_F64) {
        const double *a = in;
        double *b = inout;
        for (size_t i = 0; i < count; i++)
            b[i] += a[i];
    } else {
        const int64_t *a = in;
        int64_t *b = inout;
        for (size_t i = 0; i < count; i++)
            b[i] += a[i];
    }
}

static void user_ctx(void)
{
    uint32_t n = ct_size, me = ct_rank;
    struct op_ctx a = {CTX_MAGIC, 0, 0, 0, SPOOLS_DTYPE_I64};
    struct op_ctx b = {CTX_MAGIC, 0, 0, 0, SPOOLS_DTYPE_F64};
    spools_op_t opa, opb;
    CHECK(spools_op_create(sum_fn, &a, 1, &opa));
    CHECK(spools_op_create(sum_fn, &b, 1, &opb));
    ASSERT(opa != opb, "two user operators got the same value %u", opa);

    enum { N = 29 };
    int64_t si[N], ri[N];
    double sd[N], rd[N];
    for (int i = 0; i < N; i++) {
        si[i] = (int64_t)me * 1000 + i;
        sd[i] = me * 0.5 + i;
    }
    CHECK(spools_allreduce(ct_comm, si, ri, N, SPOOLS_DTYPE_I64, opa));
    for (int i = 0; i < N; i++)
        ASSERT(ri[i] == (int64_t)(1000 * (n * (n - 1) / 2) + n * i), "i64 sum element %d", i);
    ASSERT(b.calls == 0, "the operator of ctx b ran for a's collective (%llu calls)",
           (unsigned long long)b.calls);
    CHECK(spools_allreduce(ct_comm, sd, rd, N, SPOOLS_DTYPE_F64, opb));
    for (int i = 0; i < N; i++)
        ASSERT(rd[i] == 0.5 * (n * (n - 1) / 2) + (double)n * i, "f64 sum element %d", i);
    ASSERT(a.bad == 0 && b.bad == 0, "wrong dtypes: %llu, %llu", (unsigned long long)a.bad,
           (unsigned long long)b.bad);

    /* n values of N elements need at least (n - 1) * N element combinations in all. */
    uint64_t mine[2] = {a.elems, b.elems}, all[2];
    CHECK(spools_allreduce(ct_comm, mine, all, 2, SPOOLS_DTYPE_U64, SPOOLS_OP_SUM));
    ASSERT(all[0] >= (uint64_t)(n - 1) * N && all[1] >= (uint64_t)(n - 1) * N,
           "the callbacks combined %llu and %llu elements, fewer than %u",
           (unsigned long long)all[0], (unsigned long long)all[1], (n - 1) * N);
    CHECK(spools_op_destroy(opa));
    CHECK(spools_op_destroy(opb));
    OK("user-ctx");
}

int main(void)
{
    ct_init("collectives");
    ASSERT(ct_size >= 2, "needs 2 ranks or more, got %u", ct_size);
#define RUN_TYPE(T, DT, NAME, GEN) NAME##_reductions();
    FOR_TYPES(RUN_TYPE)
#undef RUN_TYPE
#define RUN_TYPE(T, DT, NAME, GEN) NAME##_movement();
    FOR_TYPES(RUN_TYPE)
#undef RUN_TYPE
    for (int i = 0; i < 5; i++)
        CHECK(spools_barrier(ct_comm));
    OK("barrier");
    user_noncommutative();
    user_ctx();
    OK("done");
    ct_finalize();
    return 0;
}
