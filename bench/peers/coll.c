/*
 * MPI collectives, the MPI side of `spools bench coll`.
 *
 * Usage: mpirun -n P coll [--ops LIST] [--sizes LIST] [--batches N] [--batch-ms MS]
 *
 * LIST is comma-separated. Ops: barrier, bcast, allreduce, alltoall (default
 * all four, in that order; the series come out in the order given). Sizes are
 * byte counts, optionally with a K or M suffix (powers of 1024); default
 * 8,64,512,4K,32K,256K,4M. Per op and size:
 *   barrier    MPI_Barrier; one point, bytes 0 (the sizes do not apply)
 *   bcast      MPI_Bcast of `bytes` MPI_BYTEs from root 0
 *   allreduce  MPI_Allreduce, MPI_SUM of bytes/8 doubles (at least one)
 *   alltoall   MPI_Alltoall of `bytes` MPI_BYTEs to every rank (itself included)
 *
 * For each (op, size): one verified call (bcast: every byte equals the root's
 * pattern; allreduce: every element equals the exact sum of the ranks'
 * contributions; alltoall: every block carries its sender's pattern), a
 * warm-up of 3 to 200 calls (about 1 MiB of payload), then N batches (default
 * 7) of as many calls as fit in about MS milliseconds (default 20; at least
 * one: rank 0 decides the count from the slowest rank's warm-up and
 * broadcasts it, so every rank makes the same calls). Each batch
 * starts with MPI_Barrier; each rank measures its mean time per call; the
 * batch's value is the maximum over the ranks, and the reported latency is the
 * median over the batches.
 *
 * Rank 0 prints one JSON document on one line of stdout:
 *   {"benchmark":"coll","impl":"mpi","ranks":P,"series":[{"op":"barrier",
 *    "points":[{"bytes":0,"latency_us":1.2}]},{"op":"bcast","points":[{"bytes":8,
 *    "latency_us":0.9},...]},...]}
 * Errors go to stderr and abort the job with a non-zero status.
 */
#define PEERS_PROGRAM "coll"
#define PEERS_USAGE                                                                                \
    "mpirun -n P coll [--ops barrier,bcast,allreduce,alltoall] [--sizes 8,64,4K,...] "            \
    "[--batches N] [--batch-ms MS]"
#include "peers.h"

#include <stdarg.h>
#include <stdint.h>
#include <string.h>

#define MAX_BATCHES 1000
#define MAX_SIZES 64
#define MAX_SIZE ((size_t)1 << 30)
/* Warm-up: enough calls to move about WARMUP_BYTES, from WARMUP_MIN to WARMUP_MAX calls. */
#define WARMUP_BYTES ((size_t)1 << 20)
#define WARMUP_MIN 3
#define WARMUP_MAX 200

/* The value of option argv[i] as a string, or a usage error if it is missing or empty. */
static const char *string_value(int argc, char **argv, int i)
{
    if (i + 1 >= argc || argv[i + 1][0] == '\0')
        usage_error("%s needs a value", argv[i]);
    return argv[i + 1];
}

enum op { OP_BARRIER, OP_BCAST, OP_ALLREDUCE, OP_ALLTOALL, NUM_OPS };
static const char *const op_names[NUM_OPS] = {"barrier", "bcast", "allreduce", "alltoall"};

static int nranks;

/*
 * Parse a positive byte count with an optional K/M (binary) suffix, at most
 * MAX_SIZE; 0 on error. s ends at the first comma or NUL.
 */
static size_t parse_size(const char *s, const char **rest)
{
    char *end = NULL;
    errno = 0;
    if (*s < '0' || *s > '9')
        return 0;
    unsigned long long v = strtoull(s, &end, 10);
    if (errno != 0 || end == s)
        return 0;
    unsigned shift = 0;
    switch (*end) {
    case 'k': case 'K': shift = 10; end++; break;
    case 'm': case 'M': shift = 20; end++; break;
    default: break;
    }
    if (*end == 'i' && shift != 0)
        end++;
    if (*end == 'B')
        end++;
    *rest = end;
    if ((*end != '\0' && *end != ',') || v == 0 || v > (MAX_SIZE >> shift))
        return 0;
    return (size_t)(v << shift);
}

/* Parse the --sizes list into sizes[]; returns the count (usage error on bad input). */
static int parse_sizes(const char *list, size_t *sizes)
{
    int n = 0;
    const char *p = list;
    for (;;) {
        const char *rest = p;
        size_t v = parse_size(p, &rest);
        if (v == 0) {
            int len = (int)strcspn(p, ",");
            usage_error("bad size in --sizes (a positive byte count up to 1 GiB, K/M suffix "
                        "allowed): '%.*s'",
                        len, p);
        }
        if (n == MAX_SIZES)
            usage_error("too many sizes in --sizes (at most %d)", MAX_SIZES);
        sizes[n++] = v;
        if (*rest == '\0')
            return n;
        p = rest + 1; /* past the comma */
    }
}

/* Parse the --ops list into ops[]; returns the count (usage error on bad input). */
static int parse_ops(const char *list, enum op *ops)
{
    int n = 0;
    const char *p = list;
    for (;;) {
        size_t len = strcspn(p, ",");
        int found = -1;
        for (int k = 0; k < NUM_OPS; k++)
            if (strlen(op_names[k]) == len && strncmp(p, op_names[k], len) == 0)
                found = k;
        if (found < 0)
            usage_error("unknown op in --ops (barrier, bcast, allreduce or alltoall): '%.*s'",
                        (int)len, p);
        for (int k = 0; k < n; k++)
            if ((int)ops[k] == found)
                usage_error("op listed twice in --ops: %s", op_names[found]);
        ops[n++] = (enum op)found;
        if (p[len] == '\0')
            return n;
        p += len + 1;
    }
}

/* Byte i of what rank src sends to rank dst (bcast: src 0, dst 0) in a message of size bytes. */
static unsigned char pattern_byte(size_t i, size_t size, int src, int dst)
{
    return (unsigned char)((i * 131u + size * 7u + (size_t)src * 29u + (size_t)dst * 17u + 1u) &
                           0xffu);
}

/* Element i of rank r's allreduce contribution: small integers, so sums are exact. */
static double contribution(size_t i, int r)
{
    return (double)(r + 1) + (double)(i % 13);
}

/* Report a wrong result of the verified call (where: which element) and abort the job. */
__attribute__((noreturn)) static void corrupt(const char *op, size_t bytes, const char *where,
                                              double want, double got)
{
    fprintf(stderr, "coll: rank %d: %s of %zu B: wrong result %s: expected %g, got %g\n", my_rank,
            op, bytes, where, want, got);
    MPI_Abort(MPI_COMM_WORLD, 3);
    exit(3);
}

/* Number of doubles of an allreduce of `bytes` bytes. */
static size_t doubles_of(size_t bytes)
{
    return bytes / 8 < 1 ? 1 : bytes / 8;
}

/* One call of op with the given buffers (the same calls the verified call and the batches make). */
static inline void call(enum op op, size_t bytes, unsigned char *sbuf, unsigned char *rbuf)
{
    switch (op) {
    case OP_BARRIER:
        MPI_CHECK(MPI_Barrier(MPI_COMM_WORLD));
        break;
    case OP_BCAST:
        MPI_CHECK(MPI_Bcast(sbuf, (int)bytes, MPI_BYTE, 0, MPI_COMM_WORLD));
        break;
    case OP_ALLREDUCE:
        MPI_CHECK(MPI_Allreduce(sbuf, rbuf, (int)doubles_of(bytes), MPI_DOUBLE, MPI_SUM,
                                MPI_COMM_WORLD));
        break;
    case OP_ALLTOALL:
        MPI_CHECK(MPI_Alltoall(sbuf, (int)bytes, MPI_BYTE, rbuf, (int)bytes, MPI_BYTE,
                               MPI_COMM_WORLD));
        break;
    default:
        break;
    }
}

/* The verified call: fill the send side with known values, call, check what arrived. */
static void verified_call(enum op op, size_t bytes, unsigned char *sbuf, unsigned char *rbuf)
{
    const char *name = op_names[op];
    char where[96];
    switch (op) {
    case OP_BARRIER:
        call(op, bytes, sbuf, rbuf);
        break;
    case OP_BCAST:
        for (size_t i = 0; i < bytes; i++)
            sbuf[i] = my_rank == 0 ? pattern_byte(i, bytes, 0, 0) : 0;
        call(op, bytes, sbuf, rbuf);
        for (size_t i = 0; i < bytes; i++)
            if (sbuf[i] != pattern_byte(i, bytes, 0, 0)) {
                snprintf(where, sizeof where, "at byte %zu", i);
                corrupt(name, bytes, where, pattern_byte(i, bytes, 0, 0), sbuf[i]);
            }
        break;
    case OP_ALLREDUCE: {
        size_t n = doubles_of(bytes);
        double *in = (double *)sbuf, *out = (double *)rbuf;
        for (size_t i = 0; i < n; i++) {
            in[i] = contribution(i, my_rank);
            out[i] = -1.0;
        }
        call(op, bytes, sbuf, rbuf);
        for (size_t i = 0; i < n; i++) {
            double want = 0;
            for (int r = 0; r < nranks; r++)
                want += contribution(i, r);
            if (out[i] != want) {
                snprintf(where, sizeof where, "at element %zu", i);
                corrupt(name, bytes, where, want, out[i]);
            }
        }
        break;
    }
    case OP_ALLTOALL:
        for (int d = 0; d < nranks; d++)
            for (size_t i = 0; i < bytes; i++)
                sbuf[(size_t)d * bytes + i] = pattern_byte(i, bytes, my_rank, d);
        memset(rbuf, 0, (size_t)nranks * bytes);
        call(op, bytes, sbuf, rbuf);
        for (int s = 0; s < nranks; s++)
            for (size_t i = 0; i < bytes; i++) {
                unsigned char want = pattern_byte(i, bytes, s, my_rank);
                unsigned char got = rbuf[(size_t)s * bytes + i];
                if (got != want) {
                    snprintf(where, sizeof where, "in the block from rank %d at byte %zu", s, i);
                    corrupt(name, bytes, where, want, got);
                }
            }
        break;
    default:
        break;
    }
}

/*
 * Measure one (op, size): verified call, warm-up, batches. Returns the median
 * over the batches of the per-batch maximum over the ranks of the mean time
 * per call (us), on rank 0 (0 elsewhere).
 */
static double measure(enum op op, size_t bytes, unsigned char *sbuf, unsigned char *rbuf,
                      long batches, long batch_ms, double *batch_us)
{
    verified_call(op, bytes, sbuf, rbuf);

    /*
     * Warm-up: the same count on every rank (from the size alone). Rank 0 sizes
     * the batches from the slowest rank's mean time per call (a root's calls
     * can return long before the others' are done).
     */
    size_t moved = bytes > 0 ? bytes : 1;
    long warm = (long)(WARMUP_BYTES / moved);
    warm = warm < WARMUP_MIN ? WARMUP_MIN : (warm > WARMUP_MAX ? WARMUP_MAX : warm);
    MPI_CHECK(MPI_Barrier(MPI_COMM_WORLD));
    double t0 = MPI_Wtime();
    for (long k = 0; k < warm; k++)
        call(op, bytes, sbuf, rbuf);
    double mine = (MPI_Wtime() - t0) / (double)warm, per_call = 0;
    MPI_CHECK(MPI_Reduce(&mine, &per_call, 1, MPI_DOUBLE, MPI_MAX, 0, MPI_COMM_WORLD));

    long iters = 1;
    if (my_rank == 0) {
        double want = (double)batch_ms * 1e-3 / (per_call > 0 ? per_call : 1e-9);
        iters = want < 1 ? 1 : (want > 1e7 ? 10000000 : (long)want);
    }
    MPI_CHECK(MPI_Bcast(&iters, 1, MPI_LONG, 0, MPI_COMM_WORLD));

    for (long b = 0; b < batches; b++) {
        MPI_CHECK(MPI_Barrier(MPI_COMM_WORLD));
        double start = MPI_Wtime();
        for (long k = 0; k < iters; k++)
            call(op, bytes, sbuf, rbuf);
        double mean_us = (MPI_Wtime() - start) / (double)iters * 1e6, slowest = 0;
        MPI_CHECK(MPI_Reduce(&mean_us, &slowest, 1, MPI_DOUBLE, MPI_MAX, 0, MPI_COMM_WORLD));
        batch_us[b] = slowest;
    }
    return my_rank == 0 ? median(batch_us, (int)batches) : 0.0;
}

int main(int argc, char **argv)
{
    static const size_t default_sizes[] = {8, 64, 512, 4096, 32768, 262144, 4194304};
    enum op ops[NUM_OPS] = {OP_BARRIER, OP_BCAST, OP_ALLREDUCE, OP_ALLTOALL};
    int nops = NUM_OPS;
    size_t sizes[MAX_SIZES];
    int nsizes = (int)(sizeof default_sizes / sizeof default_sizes[0]);
    memcpy(sizes, default_sizes, sizeof default_sizes);
    long batches = 7;
    long batch_ms = 20;

    nranks = peers_init(&argc, &argv);

    for (int i = 1; i < argc; i++) {
        if (strcmp(argv[i], "--ops") == 0) {
            nops = parse_ops(string_value(argc, argv, i), ops);
        } else if (strcmp(argv[i], "--sizes") == 0) {
            nsizes = parse_sizes(string_value(argc, argv, i), sizes);
        } else if (strcmp(argv[i], "--batches") == 0) {
            batches = count_value(argc, argv, i, MAX_BATCHES);
        } else if (strcmp(argv[i], "--batch-ms") == 0) {
            batch_ms = count_value(argc, argv, i, 60000);
        } else {
            usage_error("unknown argument: %s", argv[i]);
        }
        i++;
    }

    /* Buffers for the largest call: alltoall needs P blocks each way. */
    size_t max_size = 8;
    for (int k = 0; k < nsizes; k++)
        if (sizes[k] > max_size)
            max_size = sizes[k];
    size_t buf_size = max_size;
    for (int k = 0; k < nops; k++)
        if (ops[k] == OP_ALLTOALL)
            buf_size = max_size * (size_t)nranks;
    buf_size = (buf_size + 7) & ~(size_t)7;

    /* Page-aligned, pre-touched buffers so that no page fault lands in a timed loop. */
    unsigned char *sbuf = NULL, *rbuf = NULL;
    if (posix_memalign((void **)&sbuf, 4096, buf_size) != 0 ||
        posix_memalign((void **)&rbuf, 4096, buf_size) != 0) {
        fprintf(stderr, "coll: rank %d: cannot allocate 2 x %zu B\n", my_rank, buf_size);
        MPI_Abort(MPI_COMM_WORLD, 1);
        return 1;
    }
    memset(sbuf, 0, buf_size);
    memset(rbuf, 0, buf_size);

    double *batch_us = calloc((size_t)batches, sizeof *batch_us);
    double *lat_us = calloc((size_t)nops * (size_t)nsizes, sizeof *lat_us);
    if (batch_us == NULL || lat_us == NULL)
        out_of_memory();

    for (int o = 0; o < nops; o++) {
        if (ops[o] == OP_BARRIER) {
            lat_us[(size_t)o * nsizes] =
                measure(OP_BARRIER, 0, sbuf, rbuf, batches, batch_ms, batch_us);
            continue;
        }
        for (int k = 0; k < nsizes; k++)
            lat_us[(size_t)o * nsizes + k] =
                measure(ops[o], sizes[k], sbuf, rbuf, batches, batch_ms, batch_us);
    }

    if (my_rank == 0) {
        printf("{\"benchmark\":\"coll\",\"impl\":\"mpi\",\"ranks\":%d,\"series\":[", nranks);
        for (int o = 0; o < nops; o++) {
            printf("%s{\"op\":\"%s\",\"points\":[", o ? "," : "", op_names[ops[o]]);
            if (ops[o] == OP_BARRIER) {
                printf("{\"bytes\":0,\"latency_us\":%.4f}", lat_us[(size_t)o * nsizes]);
            } else {
                for (int k = 0; k < nsizes; k++)
                    printf("%s{\"bytes\":%zu,\"latency_us\":%.4f}", k ? "," : "", sizes[k],
                           lat_us[(size_t)o * nsizes + k]);
            }
            printf("]}");
        }
        printf("]}\n");
        flush_stdout();
    }

    free(lat_us);
    free(batch_us);
    free(sbuf);
    free(rbuf);
    MPI_CHECK(MPI_Finalize());
    return 0;
}
