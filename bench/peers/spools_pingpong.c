/*
 * pingpong.c ported to the Spools C interface (spools.h): the same program, with each MPI
 * call replaced by its Spools counterpart (MPI_Send -> spools_send, MPI_Recv ->
 * spools_recv, MPI_Bcast -> spools_bcast, MPI_Wtime -> wtime), so that its latency can
 * be set beside Open MPI's pingpong.c and Spools' Rust benchmark (bench/peers/c_api.sh).
 *
 * Usage: spools run -n 2 -- spools_pingpong [--batches N] [--batch-ms MS] [SIZE...]
 *
 * SIZE is a byte count, optionally with a K, M or G suffix (powers of 1024).
 * Without sizes it measures 8 B and the powers of 4 from 64 B to 64 MiB.
 *
 * For each size: one verified round trip (every byte checked on both sides),
 * a warm-up (~8 MiB each way, at most 0.1 s), then N timed batches (default
 * 5) of as many round trips as fit in about MS milliseconds (default 30).
 * The one-way latency of a batch is half its mean round trip; the reported
 * latency is the median over the batches, and the bandwidth is the message
 * size divided by that latency, in 10^6 B/s.
 *
 * Rank 0 prints one JSON document on one line of stdout:
 *   {"benchmark":"pingpong","transport":"spools-c","series":[{"path":"spools-c",
 *    "points":[{"bytes":8,"latency_us":0.13,"bandwidth_MBps":61.5},...]}]}
 * Errors go to stderr and abort the job with a non-zero status.
 */
#define PEERS_PROGRAM "pingpong"
#define PEERS_USAGE "spools run -n 2 -- spools_pingpong [--batches N] [--batch-ms MS] [SIZE...]"
#include "spools_peers.h"

#include <stdint.h>
#include <string.h>

#define TAG_PING 1
#define TAG_PONG 2
#define TAG_LAST_WARMUP 3
#define WARMUP_SECONDS 0.1
#define MAX_BATCHES 1000
#define MAX_SIZES 256

/* Parse a positive byte count with an optional K/M/G (binary) suffix; 0 on error. */
static size_t parse_size(const char *s)
{
    char *end = NULL;
    errno = 0;
    unsigned long long v = strtoull(s, &end, 10);
    if (errno != 0 || end == s || s[0] == '-')
        return 0;
    unsigned shift = 0;
    switch (*end) {
    case '\0': break;
    case 'k': case 'K': shift = 10; end++; break;
    case 'm': case 'M': shift = 20; end++; break;
    case 'g': case 'G': shift = 30; end++; break;
    default: return 0;
    }
    if (*end == 'i' && shift != 0)
        end++;
    if (*end == 'B')
        end++;
    if (*end != '\0' || v == 0 || v > (SIZE_MAX >> shift) || (v << shift) > (size_t)INT32_MAX)
        return 0;
    return (size_t)(v << shift);
}

static unsigned char pattern_byte(size_t i, size_t size)
{
    return (unsigned char)((i * 131u + size * 7u + 1u) & 0xffu);
}

static void fill_pattern(unsigned char *buf, size_t size)
{
    for (size_t i = 0; i < size; i++)
        buf[i] = pattern_byte(i, size);
}

/* Check a received message byte by byte; abort the job on the first mismatch. */
static void check_pattern(const unsigned char *buf, size_t size, const char *where)
{
    for (size_t i = 0; i < size; i++) {
        if (buf[i] != pattern_byte(i, size)) {
            fprintf(stderr, "pingpong: rank %d: corrupt %s message of %zu B at byte %zu\n",
                    my_rank, where, size, i);
            spools_abort(world, "corrupt message");
            exit(3);
        }
    }
}

/* One round trip from rank 0's side (peer is rank 1). */
static inline void ping(unsigned char *sbuf, unsigned char *rbuf, size_t n)
{
    SP_CHECK(spools_send(comm, sbuf, n, 1, TAG_PING));
    SP_CHECK(spools_recv(comm, rbuf, n, 1, TAG_PONG, NULL));
}

/* One round trip from rank 1's side: receive and echo the same bytes back. */
static inline void pong(unsigned char *rbuf, size_t n)
{
    SP_CHECK(spools_recv(comm, rbuf, n, 0, TAG_PING, NULL));
    SP_CHECK(spools_send(comm, rbuf, n, 0, TAG_PONG));
}

/* Run `iters` round trips on either side; returns the elapsed seconds on rank 0. */
static double round_trips(long iters, unsigned char *sbuf, unsigned char *rbuf, size_t n)
{
    double t0 = wtime();
    if (my_rank == 0) {
        for (long i = 0; i < iters; i++)
            ping(sbuf, rbuf, n);
    } else {
        for (long i = 0; i < iters; i++)
            pong(rbuf, n);
    }
    return wtime() - t0;
}

/*
 * Warm up with ~8 MiB of traffic each way (1 to 10000 round trips), cut short
 * after WARMUP_SECONDS on a busy host. Rank 0 decides when to stop and marks
 * its last ping with TAG_LAST_WARMUP. Returns rank 0's mean round trip (s).
 */
static double warm_up(size_t size, unsigned char *sbuf, unsigned char *rbuf)
{
    size_t n = size;
    long want = (long)((8u << 20) / size);
    want = want < 1 ? 1 : (want > 10000 ? 10000 : want);

    if (my_rank != 0) {
        spools_msg_status_t st;
        do {
            SP_CHECK(spools_recv(comm, rbuf, n, 0, SPOOLS_ANY_TAG, &st));
            SP_CHECK(spools_send(comm, rbuf, n, 0, TAG_PONG));
        } while (st.tag != TAG_LAST_WARMUP);
        return 0.0;
    }
    double t0 = wtime(), elapsed = 0;
    long done = 0;
    for (int last = 0; !last;) {
        last = done + 1 >= want || elapsed >= WARMUP_SECONDS;
        int tag = last ? TAG_LAST_WARMUP : TAG_PING;
        SP_CHECK(spools_send(comm, sbuf, n, 1, tag));
        SP_CHECK(spools_recv(comm, rbuf, n, 1, TAG_PONG, NULL));
        done++;
        elapsed = wtime() - t0;
    }
    return elapsed / (double)done;
}

int main(int argc, char **argv)
{
    static const size_t default_sizes[] = {8,      64,      512,      4096,     16384,   65536,
                                           262144, 1048576, 4194304, 16777216, 67108864};
    size_t sizes[MAX_SIZES];
    int nsizes = 0;
    long batches = 5;
    long batch_ms = 30;

    int nranks = peers_init();

    for (int i = 1; i < argc; i++) {
        int is_batches = strcmp(argv[i], "--batches") == 0;
        if (is_batches || strcmp(argv[i], "--batch-ms") == 0) {
            long max = is_batches ? MAX_BATCHES : 60000;
            *(is_batches ? &batches : &batch_ms) = option_value(argc, argv, i, max);
            i++;
        } else if (argv[i][0] == '-') {
            fail("unknown option: %s", argv[i]);
        } else {
            if (nsizes == MAX_SIZES)
                fail("too many sizes (at most %d): %s", MAX_SIZES, argv[i]);
            size_t s = parse_size(argv[i]);
            if (s == 0)
                fail("bad size (a positive byte count below 2 GiB, K/M/G suffix allowed): %s",
                     argv[i]);
            sizes[nsizes++] = s;
        }
    }
    if (nsizes == 0) {
        nsizes = (int)(sizeof default_sizes / sizeof default_sizes[0]);
        memcpy(sizes, default_sizes, sizeof default_sizes);
    }
    if (nranks != 2)
        fail("needs exactly 2 ranks, got %d", nranks);

    size_t max_size = 0;
    for (int i = 0; i < nsizes; i++)
        if (sizes[i] > max_size)
            max_size = sizes[i];

    /* Page-aligned, pre-touched buffers so that no page fault lands in a timed loop. */
    unsigned char *sbuf = NULL, *rbuf = NULL;
    if (posix_memalign((void **)&sbuf, 4096, max_size) != 0 ||
        posix_memalign((void **)&rbuf, 4096, max_size) != 0) {
        fprintf(stderr, "pingpong: rank %d: cannot allocate 2 x %zu B\n", my_rank, max_size);
        spools_abort(world, "cannot allocate");
        return 1;
    }
    memset(sbuf, 0, max_size);
    memset(rbuf, 0, max_size);

    double *lat_us = calloc((size_t)nsizes, sizeof *lat_us);
    double *batch_us = calloc((size_t)batches, sizeof *batch_us);
    if (lat_us == NULL || batch_us == NULL)
        out_of_memory();

    for (int k = 0; k < nsizes; k++) {
        size_t size = sizes[k];
        size_t n = size;

        /* Verified round trip: both sides check every byte of what they received. */
        if (my_rank == 0) {
            fill_pattern(sbuf, size);
            memset(rbuf, 0, size);
            ping(sbuf, rbuf, n);
            check_pattern(rbuf, size, "echoed");
        } else {
            memset(rbuf, 0, size);
            SP_CHECK(spools_recv(comm, rbuf, n, 0, TAG_PING, NULL));
            check_pattern(rbuf, size, "ping");
            SP_CHECK(spools_send(comm, rbuf, n, 0, TAG_PONG));
        }

        /* Warm-up, whose mean round trip sizes the timed batches. */
        double per_rt = warm_up(size, sbuf, rbuf);
        int64_t iters = 1;
        if (my_rank == 0) {
            double want = (double)batch_ms * 1e-3 / (per_rt > 0 ? per_rt : 1e-9);
            iters = want < 1 ? 1 : (want > 1e7 ? 10000000 : (int64_t)want);
        }
        SP_CHECK(spools_bcast(comm, &iters, 1, SPOOLS_DTYPE_I64, 0));

        for (long b = 0; b < batches; b++) {
            double s = round_trips(iters, sbuf, rbuf, n);
            batch_us[b] = s / (double)iters / 2.0 * 1e6;
        }
        if (my_rank == 0)
            lat_us[k] = median(batch_us, (int)batches);
    }

    if (my_rank == 0) {
        printf("{\"benchmark\":\"pingpong\",\"transport\":\"spools-c\",\"series\":[{\"path\":\"spools-c\","
               "\"points\":[");
        for (int k = 0; k < nsizes; k++) {
            double mbps = (double)sizes[k] / lat_us[k];
            printf("%s{\"bytes\":%zu,\"latency_us\":%.4f,\"bandwidth_MBps\":%.2f}", k ? "," : "",
                   sizes[k], lat_us[k], mbps);
        }
        printf("]}]}\n");
        flush_stdout();
    }

    free(batch_us);
    free(lat_us);
    free(sbuf);
    free(rbuf);
    SP_CHECK(spools_finalize(world));
    return 0;
}
