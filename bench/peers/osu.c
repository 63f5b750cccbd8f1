/*
 * The MPI side of `spools bench osu`: the OSU micro-benchmarks' measurements,
 * sizes, iteration counts and table format, for Open MPI and MPICH alike (build
 * with mpicc.openmpi or mpicc.mpich).
 *
 * Usage: mpirun -n N osu TEST [--max-size BYTES] [--iterations N] [--warmup N]
 *
 * TEST is latency, bw, bibw (2 ranks) or allreduce, bcast, barrier, alltoall.
 *   latency    blocking send/recv ping-pong, one-way time; sizes 0, 1 B .. 4 MiB;
 *              10000 timed iterations after 100 up to 8 KiB, 1000 after 10 above
 *   bw, bibw   windows of 64 MPI_Isend (and MPI_Irecv), a 4-byte reply per window
 *              (bw) or both directions at once (bibw); MB/s = 10^6 B/s; 1 B .. 4 MiB;
 *              100 windows after 10 up to 8 KiB, 20 after 2 above
 *   collectives each call timed alone and followed by a barrier; allreduce of floats
 *              (4 B up), bcast from rank 0, alltoall (bytes per pair), 1 B .. 1 MiB;
 *              1000 calls after 200 up to 8 KiB, 100 after 10 above; the average over
 *              ranks of each rank's mean time per call
 * --max-size overrides the largest size, --iterations and --warmup the counts.
 * Every size starts with one checked exchange. Rank 0 prints the table as the OSU
 * programs do (%-10d%20.2f; barrier %17.2f) with "(Open MPI)" or "(MPICH)" after the
 * title. Errors go to stderr and abort the job with a non-zero status.
 */
#define PEERS_PROGRAM "osu"
#define PEERS_USAGE                                                                                \
    "mpirun -n N osu latency|bw|bibw|allreduce|bcast|barrier|alltoall [--max-size B] "             \
    "[--iterations N] [--warmup N]"
#include "peers.h"

#include <stdint.h>
#include <string.h>

#define LARGE 8192
#define WINDOW 64
#define TAG_DATA 100
#define TAG_REPLY 101

enum test { LATENCY, BW, BIBW, ALLREDUCE, BCAST, BARRIER, ALLTOALL };

static const char *const names[] = {"latency",   "bw",    "bibw",    "allreduce",
                                    "bcast",     "barrier", "alltoall"};
static const char *const titles[] = {
    "OSU MPI Latency Test",
    "OSU MPI Bandwidth Test",
    "OSU MPI Bi-Directional Bandwidth Test",
    "OSU MPI Allreduce Latency Test",
    "OSU MPI Broadcast Latency Test",
    "OSU MPI Barrier Latency Test",
    "OSU MPI All-to-All Personalized Exchange Latency Test",
};

static long opt_iters = 0, opt_skip = -1;

static const char *library(void)
{
#if defined(OPEN_MPI)
    return "Open MPI";
#elif defined(MPICH_VERSION)
    return "MPICH";
#else
    return "MPI";
#endif
}

static void counts(enum test t, long size, long *iters, long *skip)
{
    int large = size > LARGE;
    if (t == LATENCY) {
        *iters = large ? 1000 : 10000;
        *skip = large ? 10 : 100;
    } else if (t == BW || t == BIBW) {
        *iters = large ? 20 : 100;
        *skip = large ? 2 : 10;
    } else {
        *iters = large ? 100 : 1000;
        *skip = large ? 10 : 200;
    }
    if (opt_iters > 0)
        *iters = opt_iters;
    if (opt_skip >= 0)
        *skip = opt_skip;
}

static unsigned char byte_of(int rank, long i, long size)
{
    return (unsigned char)(rank * 31 + i * 7 + size);
}

static void fill(unsigned char *b, int rank, long size)
{
    for (long i = 0; i < size; i++)
        b[i] = byte_of(rank, i, size);
}

static void check(const unsigned char *b, int rank, long size, const char *what)
{
    for (long i = 0; i < size; i++)
        if (b[i] != byte_of(rank, i, size))
            fail("%s: %ld B arrived corrupt", what, size);
}

static double latency(long size, long iters, long skip, unsigned char *s, unsigned char *r)
{
    int peer = 1 - my_rank;
    fill(s, my_rank, size);
    if (my_rank == 0) {
        MPI_CHECK(MPI_Send(s, (int)size, MPI_CHAR, peer, TAG_DATA, MPI_COMM_WORLD));
        MPI_CHECK(MPI_Recv(r, (int)size, MPI_CHAR, peer, TAG_DATA, MPI_COMM_WORLD, MPI_STATUS_IGNORE));
    } else {
        MPI_CHECK(MPI_Recv(r, (int)size, MPI_CHAR, peer, TAG_DATA, MPI_COMM_WORLD, MPI_STATUS_IGNORE));
        MPI_CHECK(MPI_Send(s, (int)size, MPI_CHAR, peer, TAG_DATA, MPI_COMM_WORLD));
    }
    check(r, peer, size, "latency");
    MPI_CHECK(MPI_Barrier(MPI_COMM_WORLD));
    double t0 = MPI_Wtime();
    for (long i = 0; i < iters + skip; i++) {
        if (i == skip)
            t0 = MPI_Wtime();
        if (my_rank == 0) {
            MPI_CHECK(MPI_Send(s, (int)size, MPI_CHAR, peer, TAG_DATA, MPI_COMM_WORLD));
            MPI_CHECK(MPI_Recv(r, (int)size, MPI_CHAR, peer, TAG_DATA, MPI_COMM_WORLD, MPI_STATUS_IGNORE));
        } else {
            MPI_CHECK(MPI_Recv(r, (int)size, MPI_CHAR, peer, TAG_DATA, MPI_COMM_WORLD, MPI_STATUS_IGNORE));
            MPI_CHECK(MPI_Send(s, (int)size, MPI_CHAR, peer, TAG_DATA, MPI_COMM_WORLD));
        }
    }
    return (MPI_Wtime() - t0) * 1e6 / (2.0 * (double)iters);
}

/* Windows of 64; window 0 is checked and neither warm-up nor timed (as spools bench osu). */
static double bandwidth(long size, long iters, long skip, int bidir, unsigned char *s,
                        unsigned char *r)
{
    int peer = 1 - my_rank;
    MPI_Request req[2 * WINDOW];
    MPI_Status st[2 * WINDOW];
    unsigned char reply[4] = {0};
    fill(s, my_rank, size);
    MPI_CHECK(MPI_Barrier(MPI_COMM_WORLD));
    double t0 = MPI_Wtime();
    for (long i = 0; i <= iters + skip; i++) {
        if (i == skip + 1)
            t0 = MPI_Wtime();
        /* Each receive of a window lands in its own slot, so window 0 can be checked. */
        if (bidir) {
            for (int j = 0; j < WINDOW; j++)
                MPI_CHECK(MPI_Irecv(r + (size_t)j * size, (int)size, MPI_CHAR, peer, TAG_DATA,
                                    MPI_COMM_WORLD, &req[j]));
            for (int j = 0; j < WINDOW; j++)
                MPI_CHECK(MPI_Isend(s, (int)size, MPI_CHAR, peer, TAG_DATA, MPI_COMM_WORLD,
                                    &req[WINDOW + j]));
            MPI_CHECK(MPI_Waitall(2 * WINDOW, req, st));
        } else if (my_rank == 0) {
            for (int j = 0; j < WINDOW; j++)
                MPI_CHECK(MPI_Isend(s, (int)size, MPI_CHAR, peer, TAG_DATA, MPI_COMM_WORLD, &req[j]));
            MPI_CHECK(MPI_Waitall(WINDOW, req, st));
            MPI_CHECK(MPI_Recv(reply, 4, MPI_CHAR, peer, TAG_REPLY, MPI_COMM_WORLD, MPI_STATUS_IGNORE));
        } else {
            for (int j = 0; j < WINDOW; j++)
                MPI_CHECK(MPI_Irecv(r + (size_t)j * size, (int)size, MPI_CHAR, peer, TAG_DATA,
                                    MPI_COMM_WORLD, &req[j]));
            MPI_CHECK(MPI_Waitall(WINDOW, req, st));
            MPI_CHECK(MPI_Send(reply, 4, MPI_CHAR, peer, TAG_REPLY, MPI_COMM_WORLD));
        }
        if (i == 0 && (bidir || my_rank == 1))
            for (int j = 0; j < WINDOW; j++)
                check(r + (size_t)j * size, peer, size, "bandwidth");
    }
    double secs = MPI_Wtime() - t0;
    return (double)size / 1e6 * (double)(iters * WINDOW) * (bidir ? 2.0 : 1.0) / secs;
}

static void coll_call(enum test t, long size, int n, unsigned char *s, unsigned char *r)
{
    switch (t) {
    case BARRIER:
        MPI_CHECK(MPI_Barrier(MPI_COMM_WORLD));
        break;
    case BCAST:
        MPI_CHECK(MPI_Bcast(s, (int)size, MPI_CHAR, 0, MPI_COMM_WORLD));
        break;
    case ALLREDUCE:
        MPI_CHECK(MPI_Allreduce(s, r, (int)(size / 4), MPI_FLOAT, MPI_SUM, MPI_COMM_WORLD));
        break;
    case ALLTOALL:
        MPI_CHECK(MPI_Alltoall(s, (int)size, MPI_CHAR, r, (int)size, MPI_CHAR, MPI_COMM_WORLD));
        break;
    default:
        (void)n;
        break;
    }
}

static void coll_checked(enum test t, long size, int n, unsigned char *s, unsigned char *r)
{
    if (t == BCAST) {
        if (my_rank == 0)
            fill(s, 0, size);
        else
            memset(s, 0, (size_t)size);
        coll_call(t, size, n, s, r);
        check(s, 0, size, "bcast");
    } else if (t == ALLREDUCE) {
        float *f = (float *)s, *g = (float *)r;
        long k = size / 4;
        for (long i = 0; i < k; i++)
            f[i] = (float)(my_rank + i % 64);
        coll_call(t, size, n, s, r);
        for (long i = 0; i < k; i++)
            if (g[i] != (float)(n * (n - 1) / 2 + n * (i % 64)))
                fail("allreduce of %ld B wrong", size);
        for (long i = 0; i < k; i++)
            f[i] = 1.0f;
    } else if (t == ALLTOALL) {
        for (int j = 0; j < n; j++)
            memset(s + (size_t)j * size, my_rank * 16 + j, (size_t)size);
        coll_call(t, size, n, s, r);
        for (int i = 0; i < n; i++)
            for (long b = 0; b < size; b++)
                if (r[(size_t)i * size + b] != (unsigned char)(i * 16 + my_rank))
                    fail("alltoall block of %ld B from rank %d wrong", size, i);
    } else {
        coll_call(t, size, n, s, r);
    }
}

static double collective(enum test t, long size, long iters, long skip, int n, unsigned char *s,
                         unsigned char *r)
{
    coll_checked(t, size, n, s, r);
    MPI_CHECK(MPI_Barrier(MPI_COMM_WORLD));
    double total = 0;
    for (long i = 0; i < iters + skip; i++) {
        double t0 = MPI_Wtime();
        coll_call(t, size, n, s, r);
        if (i >= skip)
            total += MPI_Wtime() - t0;
        if (t != BARRIER)
            MPI_CHECK(MPI_Barrier(MPI_COMM_WORLD));
    }
    double mine = total * 1e6 / (double)iters, sum = 0;
    MPI_CHECK(MPI_Reduce(&mine, &sum, 1, MPI_DOUBLE, MPI_SUM, 0, MPI_COMM_WORLD));
    return sum / n;
}

int main(int argc, char **argv)
{
    int n = peers_init(&argc, &argv);
    if (argc < 2)
        usage_error("which test?");
    int t = -1;
    for (int k = 0; k < (int)(sizeof names / sizeof *names); k++)
        if (strcmp(argv[1], names[k]) == 0)
            t = k;
    if (t < 0)
        usage_error("unknown test %s", argv[1]);
    int p2p = t == LATENCY || t == BW || t == BIBW;
    long max = p2p ? 4L << 20 : 1L << 20;
    for (int i = 2; i < argc; i += 2) {
        if (strcmp(argv[i], "--max-size") == 0)
            max = count_value(argc, argv, i, 1L << 26);
        else if (strcmp(argv[i], "--iterations") == 0)
            opt_iters = count_value(argc, argv, i, 100000000L);
        else if (strcmp(argv[i], "--warmup") == 0)
            opt_skip = strcmp(argv[i + 1 < argc ? i + 1 : i], "0") == 0
                           ? 0
                           : count_value(argc, argv, i, 100000000L);
        else
            usage_error("unknown option %s", argv[i]);
    }
    if (p2p && n != 2)
        usage_error("%s needs exactly 2 ranks", names[t]);
    if (!p2p && n < 2)
        usage_error("%s needs at least 2 ranks", names[t]);
    long min = t == ALLREDUCE ? 4 : 1;
    if (max < min)
        usage_error("--max-size %ld: the smallest size of %s is %ld B", max, names[t], min);

    size_t bufsize = (size_t)max * (size_t)(t == BW || t == BIBW ? WINDOW : n);
    unsigned char *s = malloc(bufsize + 1), *r = malloc(bufsize + 1);
    if (!s || !r)
        out_of_memory();
    memset(s, 1, bufsize + 1);
    memset(r, 0, bufsize + 1);

    if (my_rank == 0) {
        if (!p2p)
            printf("\n");
        printf("# %s (%s)\n", titles[t], library());
        if (t == BARRIER)
            printf("# Avg Latency(us)\n");
        else
            printf("%-10s%20s\n", "# Size",
                   t == LATENCY ? "Latency (us)"
                   : p2p        ? "Bandwidth (MB/s)"
                                : "Avg Latency(us)");
        flush_stdout();
    }
    long first = t == LATENCY ? 0 : (t == BARRIER ? 0 : min);
    for (long size = first; size <= (t == BARRIER ? 0 : max); size = size ? size * 2 : 1) {
        long iters, skip;
        counts(t, size, &iters, &skip);
        double v;
        if (t == LATENCY)
            v = latency(size, iters, skip, s, r);
        else if (t == BW || t == BIBW)
            v = bandwidth(size, iters, skip, t == BIBW, s, r);
        else
            v = collective(t, size, iters, skip, n, s, r);
        if (my_rank == 0) {
            if (t == BARRIER)
                printf("%17.2f\n", v);
            else
                printf("%-10ld%20.2f\n", size, v);
            flush_stdout();
        }
        MPI_CHECK(MPI_Barrier(MPI_COMM_WORLD));
        if (t == BARRIER)
            break;
    }
    free(s);
    free(r);
    MPI_Finalize();
    return 0;
}
