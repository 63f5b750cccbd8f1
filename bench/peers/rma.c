/*
 * One-sided communication (RMA) between 2 ranks, as the OSU micro-benchmarks'
 * osu_put_latency, osu_get_latency, osu_put_bw, osu_get_bw and osu_acc_latency measure
 * it with their defaults (window by MPI_Win_allocate, passive target, "flush"
 * synchronisation): rank 0 is the origin, rank 1 the target, which only waits in
 * MPI_Barrier while rank 0 works. For any MPI: bench/peers/rma.sh builds it once with
 * the mpich wheel's mpicc_abi (run on Spools' and on MPICH's libmpi_abi.so.1) and once
 * with mpicc.openmpi.
 *
 * Usage: mpirun -n 2 rma TEST [--win allocate|create] [--min-size B] [--max-size B]
 *                             [--iterations N] [--warmup N]
 *
 * TEST is put_latency, get_latency, acc_latency, put_bw or get_bw.
 *   *_latency  MPI_Win_lock(MPI_LOCK_SHARED, 1) once per size, then per operation one
 *              MPI_Put / MPI_Get of `size` MPI_CHARs (acc: MPI_Accumulate of size/4
 *              MPI_INTs with MPI_SUM; OSU's default is MPI_CHAR, whose MPI_SUM the
 *              standard does not define) at displacement 0 and MPI_Win_flush(1);
 *              the time per operation in us; 10000 timed operations after 100 up to
 *              8 KiB, 1000 after 10 above (OSU's counts)
 *   *_bw       the same lock; windows of 64 MPI_Put / MPI_Get of `size` bytes, the j-th
 *              to and from slot j (j * size) of the target window and of the origin
 *              buffer, then one MPI_Win_flush(1); MB/s = 10^6 B/s; 100 windows after
 *              10 up to 8 KiB, 20 after 2 above (osu.c's counts)
 * Sizes are the powers of 2 from --min-size (default 8) to --max-size (default 4 MiB).
 * --win create: the window is malloc'd memory given to MPI_Win_create instead of memory
 * from MPI_Win_allocate (OSU's -w create). --iterations and --warmup override the counts.
 * Each test makes one window (of 4 MiB, or 64 x 4 MiB for bw, on both ranks, as OSU's
 * windows have at the largest size), zeroed by its rank, and measures every size on it.
 *
 * The data are checked once per size, before the timing: rank 0 puts a pattern of that
 * size (a new one for every size) into slot 0 (and, for bw, slot 63), flushes, gets it
 * back into a zeroed buffer, flushes and compares (acc_latency also accumulates a known
 * vector between the put and the get, and expects the sum); then rank 1 reads the same
 * bytes in its own window memory (MPI_Win_sync inside a lock on itself). A mismatch prints
 * "FAIL" on stderr and calls MPI_Abort.
 *
 * Rank 0 prints one table in the OSU programs' format: "# OSU MPI_Put Latency Test (LIB)"
 * with LIB the library as MPI_Get_library_version names it (Spools, MPICH or Open MPI),
 * "# Window creation: ...", "# Synchronization: MPI_Win_flush", "# Size" and the unit,
 * then %-10d%20.2f per size.
 */
#define PEERS_PROGRAM "rma"
#define PEERS_USAGE                                                                                \
    "mpirun -n 2 rma put_latency|get_latency|acc_latency|put_bw|get_bw "                           \
    "[--win allocate|create] [--min-size B] [--max-size B] [--iterations N] [--warmup N]"
#include "peers.h"

#include <stdint.h>
#include <string.h>

#define LARGE 8192
#define WINDOW 64
#define MAX_DEFAULT (4L << 20)

enum test { PUT_LAT, GET_LAT, ACC_LAT, PUT_BW, GET_BW };

static const char *const names[] = {"put_latency", "get_latency", "acc_latency", "put_bw",
                                    "get_bw"};
static const char *const titles[] = {
    "OSU MPI_Put Latency Test",       "OSU MPI_Get latency Test",
    "OSU MPI_Accumulate latency Test", "OSU MPI_Put Bandwidth Test",
    "OSU MPI_Get Bandwidth Test",
};

static long opt_iters = 0, opt_skip = -1;

/* Who implements MPI here, by its own account (one binary runs on several libraries). */
static const char *library(void)
{
    static char v[MPI_MAX_LIBRARY_VERSION_STRING];
    int len = 0;
    if (MPI_Get_library_version(v, &len) != MPI_SUCCESS)
        return "MPI";
    if (strstr(v, "Spools"))
        return "Spools";
    if (strstr(v, "Open MPI"))
        return "Open MPI";
    if (strstr(v, "MPICH"))
        return "MPICH";
    return "MPI";
}

static int is_bw(enum test t) { return t == PUT_BW || t == GET_BW; }

static void counts(enum test t, long size, long *iters, long *skip)
{
    int large = size > LARGE;
    if (is_bw(t)) {
        *iters = large ? 20 : 100;
        *skip = large ? 2 : 10;
    } else {
        *iters = large ? 1000 : 10000;
        *skip = large ? 10 : 100;
    }
    if (opt_iters > 0)
        *iters = opt_iters;
    if (opt_skip >= 0)
        *skip = opt_skip;
}

/* The check pattern of a size and slot: bytes (put, get), small ints (acc). */
static unsigned char byte_of(long size, long slot, long i)
{
    return (unsigned char)(size * 131 + slot * 17 + i * 7 + (i >> 8) * 3 + 1);
}

static int int_of(long size, long i) { return (int)((size * 13 + i * 7) % 100003); }

static int add_of(long i) { return (int)(i % 11) + 1; }

/* The bytes slot `slot` of the target window must hold after the check of `size`. */
static void expected(enum test t, long size, long slot, unsigned char *buf)
{
    if (t == ACC_LAT) {
        int *v = (int *)buf;
        for (long i = 0; i < size / 4; i++)
            v[i] = int_of(size, i) + add_of(i);
    } else {
        for (long i = 0; i < size; i++)
            buf[i] = byte_of(size, slot, i);
    }
}

static void compare(enum test t, long size, long slot, const unsigned char *got,
                    unsigned char *want, const char *where)
{
    expected(t, size, slot, want);
    if (memcmp(got, want, (size_t)size) != 0) {
        long i = 0;
        while (got[i] == want[i])
            i++;
        fprintf(stderr,
                "FAIL: rma: %s: %ld B at slot %ld: %s differs first at byte %ld "
                "(0x%02x, want 0x%02x)\n",
                names[t], size, slot, where, i, got[i], want[i]);
        fflush(stderr);
        MPI_Abort(MPI_COMM_WORLD, 3);
        exit(3);
    }
}

/*
 * The check of one size. Rank 0, in its own lock epoch on rank 1: put the pattern
 * (acc: put ints, accumulate the known addends), flush, get it back into a zeroed buffer,
 * flush, compare. Then rank 1 compares its own window memory. Both ranks call this.
 */
static void check_size(enum test t, long size, MPI_Win win, unsigned char *base,
                       unsigned char *chk, unsigned char *back, unsigned char *want)
{
    long slots[2] = {0, is_bw(t) ? WINDOW - 1 : 0};
    int nslots = is_bw(t) ? 2 : 1;
    if (my_rank == 0) {
        MPI_CHECK(MPI_Win_lock(MPI_LOCK_SHARED, 1, 0, win));
        for (int k = 0; k < nslots; k++) {
            long slot = slots[k];
            MPI_Aint disp = (MPI_Aint)(slot * size);
            if (t == ACC_LAT) {
                /* The addends go in `want`, which compare() overwrites after the flush. */
                int *v = (int *)chk, *a = (int *)want;
                int count = (int)(size / 4);
                for (long i = 0; i < count; i++) {
                    v[i] = int_of(size, i);
                    a[i] = add_of(i);
                }
                MPI_CHECK(MPI_Put(chk, count, MPI_INT, 1, disp, count, MPI_INT, win));
                MPI_CHECK(MPI_Win_flush(1, win));
                MPI_CHECK(MPI_Accumulate(want, count, MPI_INT, 1, disp, count, MPI_INT, MPI_SUM,
                                         win));
                MPI_CHECK(MPI_Win_flush(1, win));
            } else {
                for (long i = 0; i < size; i++)
                    chk[i] = byte_of(size, slot, i);
                MPI_CHECK(MPI_Put(chk, (int)size, MPI_CHAR, 1, disp, (int)size, MPI_CHAR, win));
                MPI_CHECK(MPI_Win_flush(1, win));
            }
            memset(back, 0, (size_t)size);
            MPI_CHECK(MPI_Get(back, (int)size, MPI_CHAR, 1, disp, (int)size, MPI_CHAR, win));
            MPI_CHECK(MPI_Win_flush(1, win));
            compare(t, size, slot, back, want, "got back (MPI_Get after the flushed put)");
        }
        MPI_CHECK(MPI_Win_unlock(1, win));
    }
    MPI_CHECK(MPI_Barrier(MPI_COMM_WORLD));
    if (my_rank == 1) {
        MPI_CHECK(MPI_Win_lock(MPI_LOCK_SHARED, 1, 0, win));
        MPI_CHECK(MPI_Win_sync(win));
        for (int k = 0; k < nslots; k++)
            compare(t, size, slots[k], base + slots[k] * size, want,
                    "the target's window memory");
        MPI_CHECK(MPI_Win_unlock(1, win));
    }
    MPI_CHECK(MPI_Barrier(MPI_COMM_WORLD));
}

/* The timed part of one size on rank 0: latency in us or bandwidth in MB/s. */
static double measure(enum test t, long size, long iters, long skip, MPI_Win win,
                      unsigned char *s, unsigned char *r)
{
    int n = (int)size, count = (int)(size / 4);
    double t0 = 0;
    MPI_CHECK(MPI_Win_lock(MPI_LOCK_SHARED, 1, 0, win));
    for (long i = 0; i < iters + skip; i++) {
        if (i == skip)
            t0 = MPI_Wtime();
        switch (t) {
        case PUT_LAT:
            MPI_CHECK(MPI_Put(s, n, MPI_CHAR, 1, 0, n, MPI_CHAR, win));
            break;
        case GET_LAT:
            MPI_CHECK(MPI_Get(r, n, MPI_CHAR, 1, 0, n, MPI_CHAR, win));
            break;
        case ACC_LAT:
            MPI_CHECK(MPI_Accumulate(s, count, MPI_INT, 1, 0, count, MPI_INT, MPI_SUM, win));
            break;
        case PUT_BW:
            for (int j = 0; j < WINDOW; j++)
                MPI_CHECK(MPI_Put(s + (size_t)j * size, n, MPI_CHAR, 1, (MPI_Aint)j * size, n,
                                  MPI_CHAR, win));
            break;
        case GET_BW:
            for (int j = 0; j < WINDOW; j++)
                MPI_CHECK(MPI_Get(r + (size_t)j * size, n, MPI_CHAR, 1, (MPI_Aint)j * size, n,
                                  MPI_CHAR, win));
            break;
        }
        MPI_CHECK(MPI_Win_flush(1, win));
    }
    double secs = MPI_Wtime() - t0;
    MPI_CHECK(MPI_Win_unlock(1, win));
    if (is_bw(t))
        return (double)size / 1e6 * (double)(iters * WINDOW) / secs;
    return secs * 1e6 / (double)iters;
}

static unsigned char *buffer(size_t bytes, int fill)
{
    void *p = NULL;
    if (posix_memalign(&p, 4096, bytes ? bytes : 1) != 0)
        out_of_memory();
    memset(p, fill, bytes);
    return p;
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
    long min = 8, max = MAX_DEFAULT;
    int create = 0;
    for (int i = 2; i < argc; i += 2) {
        if (strcmp(argv[i], "--win") == 0) {
            if (i + 1 >= argc)
                usage_error("--win needs allocate or create");
            if (strcmp(argv[i + 1], "create") == 0)
                create = 1;
            else if (strcmp(argv[i + 1], "allocate") != 0)
                usage_error("--win %s: allocate or create", argv[i + 1]);
        } else if (strcmp(argv[i], "--min-size") == 0)
            min = count_value(argc, argv, i, 1L << 26);
        else if (strcmp(argv[i], "--max-size") == 0)
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
    if (n != 2)
        usage_error("%s needs exactly 2 ranks", names[t]);
    if (t == ACC_LAT && min % 4 != 0)
        usage_error("--min-size %ld: acc_latency needs a multiple of 4 (MPI_INTs)", min);
    if (max < min)
        usage_error("--max-size %ld is below the smallest size, %ld B", max, min);

    /* One window for every size: the largest size (times 64 slots for bw) on both ranks. */
    size_t bytes = (size_t)max * (is_bw(t) ? WINDOW : 1);
    unsigned char *base = NULL;
    MPI_Win win = MPI_WIN_NULL;
    if (create) {
        base = malloc(bytes);
        if (!base)
            out_of_memory();
        MPI_CHECK(MPI_Win_create(base, (MPI_Aint)bytes, 1, MPI_INFO_NULL, MPI_COMM_WORLD, &win));
    } else {
        MPI_CHECK(MPI_Win_allocate((MPI_Aint)bytes, 1, MPI_INFO_NULL, MPI_COMM_WORLD, &base, &win));
    }
    MPI_CHECK(MPI_Win_set_errhandler(win, MPI_ERRORS_RETURN));
    /* Each rank zeroes (and so touches) its window memory in an epoch on itself. */
    MPI_CHECK(MPI_Win_lock(MPI_LOCK_EXCLUSIVE, my_rank, 0, win));
    memset(base, 0, bytes);
    MPI_CHECK(MPI_Win_unlock(my_rank, win));
    MPI_CHECK(MPI_Barrier(MPI_COMM_WORLD));

    unsigned char *s = NULL, *r = NULL, *chk = buffer((size_t)max, 0),
                  *back = buffer((size_t)max, 0), *want = buffer((size_t)max, 0);
    if (my_rank == 0) {
        s = buffer(bytes, 1);
        r = buffer(bytes, 0);
        if (t == ACC_LAT)
            for (size_t i = 0; i < bytes / 4; i++)
                ((int *)s)[i] = 1;
        printf("# %s (%s)\n", titles[t], library());
        printf("# Window creation: %s\n", create ? "MPI_Win_create" : "MPI_Win_allocate");
        printf("# Synchronization: MPI_Win_flush\n");
        printf("%-10s%20s\n", "# Size", is_bw(t) ? "Bandwidth (MB/s)" : "Latency (us)");
        flush_stdout();
    }
    for (long size = min; size <= max; size *= 2) {
        long iters, skip;
        counts(t, size, &iters, &skip);
        check_size(t, size, win, base, chk, back, want);
        if (my_rank == 0) {
            double v = measure(t, size, iters, skip, win, s, r);
            printf("%-10ld%20.2f\n", size, v);
            flush_stdout();
        }
        /* The target waits here while rank 0 measures. */
        MPI_CHECK(MPI_Barrier(MPI_COMM_WORLD));
    }
    MPI_CHECK(MPI_Win_free(&win));
    if (create)
        free(base);
    free(s);
    free(r);
    free(chk);
    free(back);
    free(want);
    MPI_Finalize();
    return 0;
}
