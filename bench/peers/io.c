/*
 * MPI-IO peer of `spools bench io` (SCI-MPICH Table 3, coll_perf): an i32 array of n^3
 * elements, each holding its own global index in C order, written with
 * MPI_File_write_all through a file view and read back with MPI_File_read_all, so the
 * file is the canonical row-major array, byte-identical to what `spools bench io
 * --layout "i32[n,n,n] block,block,block on AxBxC"` writes. The view (--view):
 *   darray  (the default) a 3-D BLOCK distribution (MPI_Type_create_darray over the
 *           MPI_Dims_create grid): each rank's runs are rows of its block, long runs
 *   cyclic  cyclic(1) over the ranks: rank r holds elements r, r + P, r + 2P, ...
 *           (about n^3/P ints), its filetype one MPI_INT in an extent of P ints
 *           (MPI_Type_vector, MPI_Type_create_resized) at displacement 4r: every run a
 *           single 4-byte element
 * Each timed region covers open, set_view, the collective call, (MPI_File_sync with
 * --sync) and close. Every element read back is compared with the value written (its
 * global index), and the element count of the read's status with the count asked for.
 * After the timed repetitions, untimed, each rank reads its 1/P of the file's bytes
 * (default view, MPI_File_read_at in chunks) and checks every element is its index, so
 * the file itself is the canonical array, whichever view wrote it.
 *
 * usage: io --n N --file PATH [--reps R] [--view darray|cyclic] [--sync] [--keep] [--hints]
 * Prints one JSON document on rank 0: the view, the grid, every repetition's seconds and
 * each rank's peak resident set at the end (peak_rss_kb: VmHWM, -1 where unknown).
 * --hints: rank 0 also prints the file's info (MPI_File_get_info) on stderr, one line
 * "io-hints: key=value ...". Choose Open MPI's MPI-IO component with mpirun's
 * --mca io ompio|romio321.
 */
#define PEERS_PROGRAM "io"
#define PEERS_USAGE "io --n N --file PATH [--reps R] [--view darray|cyclic] [--sync] [--keep] [--hints]"
#include "peers.h"

#include <limits.h>
#include <stdint.h>
#include <string.h>
#include <unistd.h>

/* Elements of the file checked per MPI_File_read_at in the untimed check. */
#define CHECK_CHUNK (4L << 20)

/* Wrong data, found by one rank alone: say so from that rank (fail prints from rank 0
 * only) and abort the job. */
__attribute__((noreturn, format(printf, 1, 2))) static void data_error(const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    fprintf(stderr, PEERS_PROGRAM ": rank %d: ", my_rank);
    vfprintf(stderr, fmt, ap);
    fprintf(stderr, "\n");
    va_end(ap);
    fflush(stderr);
    MPI_Abort(MPI_COMM_WORLD, 1);
    exit(1);
}

/* Compare the count elements read back with those written; abort at the first that differs. */
static void verify(const int32_t *want, const int32_t *got, long count, const char *what)
{
    for (long k = 0; k < count; k++)
        if (got[k] != want[k])
            data_error("%s: element %ld of its %ld is %d, not %d", what, k, count, (int)got[k],
                       (int)want[k]);
}

/* The number of elements of type MPI_INT a status says were read must be want. */
static void check_count(MPI_Status *st, long want, const char *what)
{
    int got = -1;
    MPI_CHECK(MPI_Get_count(st, MPI_INT, &got));
    if (got != want)
        data_error("%s read %d elements, not %ld", what, got, want);
}

/* Print the file's info (its hints) on stderr, from rank 0. */
static void print_hints(MPI_File fh)
{
    MPI_Info info;
    int nkeys = 0;
    MPI_CHECK(MPI_File_get_info(fh, &info));
    if (info == MPI_INFO_NULL) {
        fprintf(stderr, "io-hints: (MPI_INFO_NULL)\n");
        return;
    }
    MPI_CHECK(MPI_Info_get_nkeys(info, &nkeys));
    fprintf(stderr, "io-hints:");
    for (int i = 0; i < nkeys; i++) {
        char key[MPI_MAX_INFO_KEY + 1] = {0};
        char value[1024] = {0};
        int flag = 0;
        MPI_CHECK(MPI_Info_get_nthkey(info, i, key));
        /* MPI_Info_get: Open MPI 4.1 has no MPI_Info_get_string. */
        MPI_CHECK(MPI_Info_get(info, key, (int)sizeof value - 1, value, &flag));
        fprintf(stderr, " %s=%s", key, flag ? value : "?");
    }
    fprintf(stderr, "\n");
    MPI_Info_free(&info);
}

/* Untimed: this rank's 1/P of the file, read through the default (byte) view, holds the
 * canonical array (element e is e); the file has at least the array's size. */
static void check_file(const char *path, long total, int nranks, int hints)
{
    MPI_File fh;
    MPI_Status st;
    MPI_Offset size = 0;
    long lo = (long)((__int128)total * my_rank / nranks);
    long hi = (long)((__int128)total * (my_rank + 1) / nranks);
    int32_t *chunk = malloc((size_t)CHECK_CHUNK * 4);
    if (!chunk)
        out_of_memory();
    MPI_CHECK(MPI_File_open(MPI_COMM_WORLD, path, MPI_MODE_RDONLY, MPI_INFO_NULL, &fh));
    if (hints && my_rank == 0)
        print_hints(fh);
    MPI_CHECK(MPI_File_get_size(fh, &size));
    if (size < (MPI_Offset)total * 4) /* larger is an older file overwritten in place */
        data_error("the file has %lld bytes, not %ld", (long long)size, total * 4);
    for (long e = lo; e < hi; e += CHECK_CHUNK) {
        long m = hi - e < CHECK_CHUNK ? hi - e : CHECK_CHUNK;
        memset(chunk, 0xff, (size_t)m * 4);
        MPI_CHECK(MPI_File_read_at(fh, (MPI_Offset)e * 4, chunk, (int)m, MPI_INT, &st));
        check_count(&st, m, "the file check's MPI_File_read_at");
        for (long k = 0; k < m; k++)
            if (chunk[k] != (int32_t)(e + k))
                data_error("the file's element %ld is %d, not %d", e + k, (int)chunk[k],
                           (int)(int32_t)(e + k));
    }
    MPI_CHECK(MPI_File_close(&fh));
    free(chunk);
}

/* This process's peak resident set (VmHWM of /proc/self/status) in KiB; -1 if unknown. */
static long peak_rss_kb(void)
{
    char line[256];
    long kb = -1;
    FILE *f = fopen("/proc/self/status", "r");
    if (!f)
        return -1;
    while (fgets(line, sizeof line, f))
        if (strncmp(line, "VmHWM:", 6) == 0) {
            kb = strtol(line + 6, NULL, 10);
            break;
        }
    fclose(f);
    return kb;
}

int main(int argc, char **argv)
{
    int nranks = peers_init(&argc, &argv);
    long n = 0, reps = 5;
    int sync = 0, keep = 0, hints = 0, cyclic = 0;
    const char *path = NULL;
    for (int i = 1; i < argc; i++) {
        if (strcmp(argv[i], "--n") == 0) {
            n = checked_option(argc, argv, i, 4096, 1);
            i++;
        } else if (strcmp(argv[i], "--reps") == 0) {
            reps = checked_option(argc, argv, i, 1000, 1);
            i++;
        } else if (strcmp(argv[i], "--file") == 0 && i + 1 < argc) {
            path = argv[++i];
        } else if (strcmp(argv[i], "--view") == 0 && i + 1 < argc) {
            i++;
            if (strcmp(argv[i], "darray") == 0)
                cyclic = 0;
            else if (strcmp(argv[i], "cyclic") == 0)
                cyclic = 1;
            else
                usage_error("--view needs darray or cyclic, not %s", argv[i]);
        } else if (strcmp(argv[i], "--sync") == 0) {
            sync = 1;
        } else if (strcmp(argv[i], "--keep") == 0) {
            keep = 1;
        } else if (strcmp(argv[i], "--hints") == 0) {
            hints = 1;
        } else {
            usage_error("unknown option %s", argv[i]);
        }
    }
    if (n == 0 || path == NULL)
        usage_error("--n and --file are required");
    long total = n * n * n;

    int dims[3] = {0, 0, 0};
    MPI_Datatype ftype;
    MPI_Offset disp = 0;
    long count = 0;
    int32_t *buf = NULL;
    if (!cyclic) {
        MPI_CHECK(MPI_Dims_create(nranks, 3, dims));
        int gsizes[3] = {(int)n, (int)n, (int)n};
        int distribs[3] = {MPI_DISTRIBUTE_BLOCK, MPI_DISTRIBUTE_BLOCK, MPI_DISTRIBUTE_BLOCK};
        int dargs[3] = {MPI_DISTRIBUTE_DFLT_DARG, MPI_DISTRIBUTE_DFLT_DARG,
                        MPI_DISTRIBUTE_DFLT_DARG};
        MPI_CHECK(MPI_Type_create_darray(nranks, my_rank, 3, gsizes, distribs, dargs, dims,
                                         MPI_ORDER_C, MPI_INT, &ftype));
        MPI_CHECK(MPI_Type_commit(&ftype));
        int tsize = 0;
        MPI_CHECK(MPI_Type_size(ftype, &tsize));
        count = tsize / 4;

        /* This rank's block: coordinates row-major over the grid, block size ceil(n/p). */
        long c[3], b[3], lo[3], len[3];
        long r = my_rank;
        for (int d = 2; d >= 0; d--) {
            c[d] = r % dims[d];
            r /= dims[d];
        }
        for (int d = 0; d < 3; d++) {
            b[d] = (n + dims[d] - 1) / dims[d];
            lo[d] = c[d] * b[d];
            len[d] = lo[d] >= n ? 0 : (lo[d] + b[d] > n ? n - lo[d] : b[d]);
        }
        if (len[0] * len[1] * len[2] != count)
            fail("block size %ld does not match the darray's %ld", len[0] * len[1] * len[2],
                 count);
        buf = malloc((size_t)(count ? count : 1) * 4);
        if (!buf)
            out_of_memory();
        long k = 0;
        for (long i = 0; i < len[0]; i++)
            for (long j = 0; j < len[1]; j++)
                for (long l = 0; l < len[2]; l++)
                    buf[k++] = (int32_t)(((lo[0] + i) * n + (lo[1] + j)) * n + lo[2] + l);
    } else {
        /* One int in an extent of nranks ints, tiled from byte 4 * rank. */
        MPI_Datatype one;
        MPI_CHECK(MPI_Type_vector(1, 1, nranks, MPI_INT, &one));
        MPI_CHECK(MPI_Type_create_resized(one, 0, (MPI_Aint)nranks * 4, &ftype));
        MPI_CHECK(MPI_Type_free(&one));
        MPI_CHECK(MPI_Type_commit(&ftype));
        disp = (MPI_Offset)my_rank * 4;
        count = total > my_rank ? (total - my_rank + nranks - 1) / nranks : 0;
        buf = malloc((size_t)(count ? count : 1) * 4);
        if (!buf)
            out_of_memory();
        for (long k = 0; k < count; k++)
            buf[k] = (int32_t)(my_rank + k * nranks);
    }
    if (count > INT_MAX)
        fail("%ld elements on one rank: more than an int count", count);
    int32_t *back = malloc((size_t)(count ? count : 1) * 4);
    if (!back)
        out_of_memory();

    double *tw = calloc((size_t)reps, sizeof(double));
    double *tr = calloc((size_t)reps, sizeof(double));
    if (!tw || !tr)
        out_of_memory();
    for (long rep = 0; rep < reps; rep++) {
        MPI_File fh;
        MPI_Status st;
        MPI_Barrier(MPI_COMM_WORLD);
        double t0 = MPI_Wtime();
        MPI_CHECK(MPI_File_open(MPI_COMM_WORLD, path, MPI_MODE_CREATE | MPI_MODE_RDWR,
                                MPI_INFO_NULL, &fh));
        MPI_CHECK(MPI_File_set_view(fh, disp, MPI_INT, ftype, "native", MPI_INFO_NULL));
        MPI_CHECK(MPI_File_write_all(fh, buf, (int)count, MPI_INT, &st));
        if (sync)
            MPI_CHECK(MPI_File_sync(fh));
        MPI_CHECK(MPI_File_close(&fh));
        MPI_Barrier(MPI_COMM_WORLD);
        tw[rep] = MPI_Wtime() - t0;

        memset(back, 0, (size_t)count * 4);
        MPI_Barrier(MPI_COMM_WORLD);
        t0 = MPI_Wtime();
        MPI_CHECK(MPI_File_open(MPI_COMM_WORLD, path, MPI_MODE_RDONLY, MPI_INFO_NULL, &fh));
        MPI_CHECK(MPI_File_set_view(fh, disp, MPI_INT, ftype, "native", MPI_INFO_NULL));
        MPI_CHECK(MPI_File_read_all(fh, back, (int)count, MPI_INT, &st));
        MPI_CHECK(MPI_File_close(&fh));
        MPI_Barrier(MPI_COMM_WORLD);
        tr[rep] = MPI_Wtime() - t0;
        check_count(&st, count, "MPI_File_read_all");
        verify(buf, back, count, "MPI_File_read_all");
    }
    check_file(path, total, nranks, hints);
    long rss = peak_rss_kb();
    long *rss_all = calloc((size_t)nranks, sizeof(long));
    if (!rss_all)
        out_of_memory();
    MPI_CHECK(MPI_Gather(&rss, 1, MPI_LONG, rss_all, 1, MPI_LONG, 0, MPI_COMM_WORLD));
    if (my_rank == 0) {
        printf("{\"benchmark\": \"io-mpi\", \"view\": \"%s\", \"ranks\": %d, \"n\": %ld, ",
               cyclic ? "cyclic" : "darray", nranks, n);
        if (cyclic)
            printf("\"grid\": [%d], ", nranks);
        else
            printf("\"grid\": [%d, %d, %d], ", dims[0], dims[1], dims[2]);
        printf("\"bytes\": %ld, \"sync\": %s, \"write_s\": [", total * 4, sync ? "true" : "false");
        for (long i = 0; i < reps; i++)
            printf("%s%.6f", i ? ", " : "", tw[i]);
        printf("], \"read_s\": [");
        for (long i = 0; i < reps; i++)
            printf("%s%.6f", i ? ", " : "", tr[i]);
        printf("], \"peak_rss_kb\": [");
        for (int i = 0; i < nranks; i++)
            printf("%s%ld", i ? ", " : "", rss_all[i]);
        printf("]}\n");
        flush_stdout();
        if (!keep)
            unlink(path);
    }
    MPI_Type_free(&ftype);
    free(buf);
    free(back);
    free(tw);
    free(tr);
    free(rss_all);
    MPI_Finalize();
    return 0;
}
