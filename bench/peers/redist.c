/*
 * ScaLAPACK pdgemr2d, the peer of `spools bench redist`: one column-major f64
 * matrix redistributed between two 2-D block-cyclic distributions.
 *
 * Usage: mpirun -n P redist_scalapack --m M --n N --from-grid RxC --from-block MBxNB
 *            --to-grid RxC --to-block MBxNB [--reps K] [--from SPEC] [--to SPEC]
 *
 * The source distribution is BLACS grid --from-grid (R x C processes, ranks
 * numbered row-major over the grid, "R" ordering) with blocks of MB rows and NB
 * columns, first block on process (0,0); the destination likewise. This is
 * exactly the Spools layout `f64[M,N] cyclic(MB),cyclic(NB) on RxC order=F`
 * (block = cyclic(ceil(n/p)), * = one process along that dimension), local
 * storage column-major with the local row count as leading dimension. Both
 * grids need at most P processes.
 *
 * Element (i, j) holds its column-major global index i + j*M. A warm-up call
 * redistributes into a destination filled with -1, and every element of it is
 * checked (a wrong element aborts the job). Then K timed repetitions (default
 * 5): barrier, MPI_Wtime, pdgemr2d, barrier, MPI_Wtime on rank 0; rank 0 also
 * times one memcpy of the dataset's bytes after each (as spools bench redist).
 *
 * Rank 0 prints one JSON document on one line of stdout, in the shape of
 * `spools bench redist --json` (from and to are --from/--to as given, default
 * the ScaLAPACK descriptors), plus the peer's name and descriptors:
 *   {"benchmark":"redist","peer":"scalapack-pdgemr2d","ranks":P,"from":...,
 *    "to":...,"bytes":...,"runs":...,"mean_run_bytes":...,"integrity":false,
 *    "redistribute_s":...,"redistribute_gb_s":...,"memcpy_s":...,
 *    "memcpy_gb_s":...,"ratio":...,"verified":true,...}
 * runs counts the maximal stretches contiguous in both local storages between
 * one pair of processes (as a Spools plan counts them). Errors go to stderr and
 * abort the job with a non-zero status.
 */
#define PEERS_PROGRAM "redist_scalapack"
#define PEERS_USAGE                                                                                \
    "mpirun -n P redist_scalapack --m M --n N --from-grid RxC --from-block MBxNB --to-grid RxC "  \
    "--to-block MBxNB [--reps K] [--from SPEC] [--to SPEC]"
#include "peers.h"

#include <stdint.h>
#include <string.h>

#define MAX_REPS 10000
#define MAX_EXTENT (1L << 20)

/* BLACS (C interface) and ScaLAPACK (Fortran symbols) as Debian ships them. */
extern void Cblacs_get(int icontxt, int what, int *val);
extern void Cblacs_gridinit(int *icontxt, const char *order, int nprow, int npcol);
extern void Cblacs_gridinfo(int icontxt, int *nprow, int *npcol, int *myrow, int *mycol);
extern void Cblacs_gridexit(int icontxt);
extern int numroc_(const int *n, const int *nb, const int *iproc, const int *isrcproc,
                   const int *nprocs);
extern void descinit_(int *desc, const int *m, const int *n, const int *mb, const int *nb,
                      const int *irsrc, const int *icsrc, const int *ictxt, const int *lld,
                      int *info);
extern void pdgemr2d_(const int *m, const int *n, const double *a, const int *ia, const int *ja,
                      const int *desca, double *b, const int *ib, const int *jb, const int *descb,
                      const int *ictxt);

/* One distribution: grid, blocks, and this process's place and share in it. */
struct dist {
    int rows, cols;     /* process grid */
    int mb, nb;         /* block rows and columns */
    int ctxt;           /* BLACS context of the grid */
    int myrow, mycol;   /* -1 when this process is outside the grid */
    int mloc, nloc;     /* local rows and columns */
    int desc[9];        /* ScaLAPACK descriptor (desc[1] = -1 outside the grid) */
    char grid_s[32], block_s[32];
};

/* Parse "AxB" into two integers from 1 to max; 0 on error. */
static int parse_pair(const char *s, long max, int *a, int *b)
{
    char buf[64];
    const char *x = strchr(s, 'x');
    if (x == NULL || (size_t)(x - s) >= sizeof buf)
        return 0;
    memcpy(buf, s, (size_t)(x - s));
    buf[x - s] = '\0';
    long va = parse_count(buf, max), vb = parse_count(x + 1, max);
    if (va == 0 || vb == 0)
        return 0;
    *a = (int)va;
    *b = (int)vb;
    return 1;
}

/* The value of option argv[i] as "AxB", or a usage error. */
static void pair_option(int argc, char **argv, int i, long max, int *a, int *b)
{
    if (i + 1 >= argc)
        usage_error("%s needs a value", argv[i]);
    if (!parse_pair(argv[i + 1], max, a, b))
        usage_error("bad value for %s (AxB, integers from 1 to %ld): %s", argv[i], max,
                    argv[i + 1]);
}

/* A label for the JSON document: no quote, backslash or control character. */
static const char *label_option(int argc, char **argv, int i)
{
    if (i + 1 >= argc)
        usage_error("%s needs a value", argv[i]);
    for (const char *c = argv[i + 1]; *c; c++)
        if (*c == '"' || *c == '\\' || (unsigned char)*c < 0x20)
            usage_error("%s: quotes, backslashes and control characters are not allowed",
                        argv[i]);
    return argv[i + 1];
}

/* Set up the BLACS grid and the descriptor of distribution d of an m x n matrix. */
static void dist_init(struct dist *d, int m, int n, int nranks)
{
    const int zero = 0;
    int nprow = 0, npcol = 0, info = 0;
    if (d->rows * d->cols > nranks)
        usage_error("a %dx%d grid needs %d processes, the job has %d", d->rows, d->cols,
                    d->rows * d->cols, nranks);
    snprintf(d->grid_s, sizeof d->grid_s, "%dx%d", d->rows, d->cols);
    snprintf(d->block_s, sizeof d->block_s, "%dx%d", d->mb, d->nb);
    Cblacs_get(-1, 0, &d->ctxt);
    Cblacs_gridinit(&d->ctxt, "R", d->rows, d->cols);
    d->myrow = d->mycol = -1;
    d->mloc = d->nloc = 0;
    memset(d->desc, 0, sizeof d->desc);
    d->desc[1] = -1;
    if (d->ctxt < 0)
        return;
    Cblacs_gridinfo(d->ctxt, &nprow, &npcol, &d->myrow, &d->mycol);
    if (d->myrow < 0 || d->mycol < 0) {
        d->myrow = d->mycol = -1;
        return;
    }
    d->mloc = numroc_(&m, &d->mb, &d->myrow, &zero, &d->rows);
    d->nloc = numroc_(&n, &d->nb, &d->mycol, &zero, &d->cols);
    int lld = d->mloc > 1 ? d->mloc : 1;
    descinit_(d->desc, &m, &n, &d->mb, &d->nb, &zero, &zero, &d->ctxt, &lld, &info);
    if (info != 0)
        fail("rank %d: descinit failed (info %d)", my_rank, info);
}

/* The global index of local index l along a dimension of blocks b over p processes. */
static long l2g(long l, long b, long me, long p)
{
    return (l / b) * b * p + me * b + l % b;
}

/* Local elements of d on this process (0 outside its grid). */
static size_t local_len(const struct dist *d)
{
    return (size_t)d->mloc * (size_t)d->nloc;
}

/* Fill the local part of d with the global indices of its elements. */
static void fill(const struct dist *d, double *a, long m)
{
    for (long lj = 0; lj < d->nloc; lj++) {
        long gj = l2g(lj, d->nb, d->mycol, d->cols);
        for (long li = 0; li < d->mloc; li++)
            a[li + lj * d->mloc] = (double)(l2g(li, d->mb, d->myrow, d->rows) + gj * m);
    }
}

/* Elements of the local part of d that do not hold their global index. */
static long count_wrong(const struct dist *d, const double *b, long m, long *first)
{
    long wrong = 0;
    for (long lj = 0; lj < d->nloc; lj++) {
        long gj = l2g(lj, d->nb, d->mycol, d->cols);
        for (long li = 0; li < d->mloc; li++) {
            long g = l2g(li, d->mb, d->myrow, d->rows) + gj * m;
            if (b[li + lj * d->mloc] != (double)g) {
                if (wrong == 0)
                    *first = g;
                wrong++;
            }
        }
    }
    return wrong;
}

/*
 * Runs into this process's part of `to`: walking it in local order, a run
 * goes on while the element comes from the same source process at the next
 * offset of that process's local storage.
 */
static long count_runs(const struct dist *from, const struct dist *to, int m)
{
    const int zero = 0;
    long runs = 0, prev_owner = -1, prev_off = -2;
    for (long lj = 0; lj < to->nloc; lj++) {
        long gj = l2g(lj, to->nb, to->mycol, to->cols);
        int pc = (int)((gj / from->nb) % from->cols);
        long sj = (gj / ((long)from->nb * from->cols)) * from->nb + gj % from->nb;
        for (long li = 0; li < to->mloc; li++) {
            long gi = l2g(li, to->mb, to->myrow, to->rows);
            int pr = (int)((gi / from->mb) % from->rows);
            long si = (gi / ((long)from->mb * from->rows)) * from->mb + gi % from->mb;
            long src_lld = numroc_(&m, &from->mb, &pr, &zero, &from->rows);
            long owner = (long)pr * from->cols + pc, off = si + sj * src_lld;
            if (owner != prev_owner || off != prev_off + 1)
                runs++;
            prev_owner = owner;
            prev_off = off;
        }
    }
    return runs;
}

static double *alloc_doubles(size_t n)
{
    double *p = malloc((n > 0 ? n : 1) * sizeof *p);
    if (p == NULL)
        out_of_memory();
    return p;
}

int main(int argc, char **argv)
{
    int nranks = peers_init(&argc, &argv);
    long m = 0, n = 0, reps = 5;
    struct dist from = {0}, to = {0};
    const char *from_label = NULL, *to_label = NULL;

    for (int i = 1; i < argc; i += 2) {
        if (strcmp(argv[i], "--m") == 0)
            m = count_value(argc, argv, i, MAX_EXTENT);
        else if (strcmp(argv[i], "--n") == 0)
            n = count_value(argc, argv, i, MAX_EXTENT);
        else if (strcmp(argv[i], "--reps") == 0)
            reps = count_value(argc, argv, i, MAX_REPS);
        else if (strcmp(argv[i], "--from-grid") == 0)
            pair_option(argc, argv, i, nranks, &from.rows, &from.cols);
        else if (strcmp(argv[i], "--to-grid") == 0)
            pair_option(argc, argv, i, nranks, &to.rows, &to.cols);
        else if (strcmp(argv[i], "--from-block") == 0)
            pair_option(argc, argv, i, MAX_EXTENT, &from.mb, &from.nb);
        else if (strcmp(argv[i], "--to-block") == 0)
            pair_option(argc, argv, i, MAX_EXTENT, &to.mb, &to.nb);
        else if (strcmp(argv[i], "--from") == 0)
            from_label = label_option(argc, argv, i);
        else if (strcmp(argv[i], "--to") == 0)
            to_label = label_option(argc, argv, i);
        else
            usage_error("unknown argument: %s", argv[i]);
    }
    if (m == 0 || n == 0 || from.rows == 0 || to.rows == 0 || from.mb == 0 || to.mb == 0)
        usage_error("--m, --n, --from-grid, --from-block, --to-grid and --to-block are needed");
    if (m * n > (1L << 40))
        usage_error("the matrix is too large: %ld x %ld", m, n);

    int im = (int)m, in = (int)n, one = 1, all = 0;
    Cblacs_get(-1, 0, &all);
    Cblacs_gridinit(&all, "R", 1, nranks);
    dist_init(&from, im, in, nranks);
    dist_init(&to, im, in, nranks);

    double *a = alloc_doubles(local_len(&from));
    double *b = alloc_doubles(local_len(&to));
    fill(&from, a, m);
    for (size_t k = 0; k < local_len(&to); k++)
        b[k] = -1.0;

    /* The checked warm-up call. */
    pdgemr2d_(&im, &in, a, &one, &one, from.desc, b, &one, &one, to.desc, &all);
    long first = -1, wrong = count_wrong(&to, b, m, &first), wrong_all = 0;
    MPI_CHECK(MPI_Allreduce(&wrong, &wrong_all, 1, MPI_LONG, MPI_SUM, MPI_COMM_WORLD));
    if (wrong > 0)
        fprintf(stderr, PEERS_PROGRAM ": rank %d: %ld elements wrong, the first global %ld\n",
                my_rank, wrong, first);
    if (wrong_all > 0) {
        MPI_CHECK(MPI_Barrier(MPI_COMM_WORLD));
        if (my_rank == 0)
            fprintf(stderr, PEERS_PROGRAM ": %ld elements wrong after pdgemr2d\n", wrong_all);
        MPI_Abort(MPI_COMM_WORLD, 3);
        return 3;
    }
    long runs = count_runs(&from, &to, im), runs_all = 0;
    MPI_CHECK(MPI_Reduce(&runs, &runs_all, 1, MPI_LONG, MPI_SUM, 0, MPI_COMM_WORLD));

    size_t bytes = (size_t)m * (size_t)n * sizeof(double);
    char *big = NULL, *copy = NULL;
    if (my_rank == 0) {
        big = malloc(bytes);
        copy = malloc(bytes);
        if (big == NULL || copy == NULL)
            out_of_memory();
        memset(big, 1, bytes);
        memset(copy, 0, bytes);
    }
    double *t_x = alloc_doubles((size_t)reps), *t_m = alloc_doubles((size_t)reps);
    for (long r = 0; r < reps; r++) {
        MPI_CHECK(MPI_Barrier(MPI_COMM_WORLD));
        double t0 = MPI_Wtime();
        pdgemr2d_(&im, &in, a, &one, &one, from.desc, b, &one, &one, to.desc, &all);
        MPI_CHECK(MPI_Barrier(MPI_COMM_WORLD));
        t_x[r] = MPI_Wtime() - t0;
        if (my_rank == 0) {
            t0 = MPI_Wtime();
            memcpy(copy, big, bytes);
            __asm__ volatile("" : : "r"(copy) : "memory");
            t_m[r] = MPI_Wtime() - t0;
        }
        MPI_CHECK(MPI_Barrier(MPI_COMM_WORLD));
    }

    if (my_rank == 0) {
        char from_desc[96], to_desc[96];
        snprintf(from_desc, sizeof from_desc, "pdgemr2d %s grid, %s blocks", from.grid_s,
                 from.block_s);
        snprintf(to_desc, sizeof to_desc, "pdgemr2d %s grid, %s blocks", to.grid_s, to.block_s);
        double x = median(t_x, (int)reps), mc = median(t_m, (int)reps);
        double bx = (double)bytes / x / 1e9, bm = (double)bytes / mc / 1e9;
        printf("{\"benchmark\":\"redist\",\"peer\":\"scalapack-pdgemr2d\",\"ranks\":%d,"
               "\"from\":\"%s\",\"to\":\"%s\",\"bytes\":%zu,\"runs\":%ld,"
               "\"mean_run_bytes\":%.1f,\"integrity\":false,\"redistribute_s\":%.9f,"
               "\"redistribute_gb_s\":%.4f,\"memcpy_s\":%.9f,\"memcpy_gb_s\":%.4f,"
               "\"ratio\":%.4f,\"verified\":true,\"m\":%ld,\"n\":%ld,\"from_grid\":\"%s\","
               "\"from_block\":\"%s\",\"to_grid\":\"%s\",\"to_block\":\"%s\",\"reps\":%ld}\n",
               nranks, from_label ? from_label : from_desc, to_label ? to_label : to_desc, bytes,
               runs_all, (double)bytes / (double)(runs_all > 0 ? runs_all : 1), x, bx, mc, bm,
               bx / bm, m, n, from.grid_s, from.block_s, to.grid_s, to.block_s, reps);
        flush_stdout();
    }

    free(t_x);
    free(t_m);
    free(big);
    free(copy);
    free(a);
    free(b);
    if (from.myrow >= 0)
        Cblacs_gridexit(from.ctxt);
    if (to.myrow >= 0)
        Cblacs_gridexit(to.ctxt);
    Cblacs_gridexit(all);
    MPI_Finalize();
    return 0;
}
