/*
 * Column-distributed dense matrix multiply, the MPI side of `spools bench matmul`.
 *
 * Usage: mpirun -n P matmul --n N [--reps R]
 *
 * C = A * B for N x N matrices of doubles, column-major. N must be divisible
 * by P: rank r owns the contiguous block of N/P columns starting at r*N/P of
 * A, B and C. Global values: A[i][k] = (i + 2k) mod 7, B[k][j] = (k + j) mod 5
 * - 2 (small integers, so every element of C is an exact integer).
 *
 * Ring shift: the A block each rank holds travels around the ring. At step
 * s = 0..P-1 a rank holds the A block first owned by rank (me - s) mod P, the
 * columns k of A (rows k of B) of that block, and adds A[:, k block] *
 * B[k block, my columns] into its columns of C; then, unless s = P-1, it
 * passes the block on to rank me+1 and receives the next one from rank me-1
 * (MPI_Sendrecv, tag 7). The local kernel is a plain triple loop: for each
 * local column j, each k of the block, a = B[k][j], and for each row i,
 * C[i][j] += A[i][k] * a (innermost over i, contiguous in column-major).
 *
 * Each of R repetitions (default 5) zeroes C, then runs between two barriers
 * and is timed with MPI_Wtime; the time spent in MPI_Sendrecv is added up as
 * comm_seconds.
 * After the first repetition 16 sampled elements of C, spread over the
 * matrix, are checked against the exact value computed from the formulas.
 * Per repetition the time (and the communication time) is the maximum over
 * the ranks; the reported values are medians over the repetitions, and
 * gflops = 2 N^3 / seconds / 1e9.
 *
 * Rank 0 prints one JSON document on one line of stdout:
 *   {"benchmark":"matmul","impl":"mpi","ranks":P,"n":N,"seconds":0.5,
 *    "comm_seconds":0.01,"gflops":4.2,"check":"ok"}
 * Errors go to stderr and abort the job with a non-zero status.
 */
#define PEERS_PROGRAM "matmul"
#define PEERS_USAGE "mpirun -n P matmul --n N [--reps R]   (N divisible by P)"
#include "peers.h"

#include <limits.h>
#include <stdarg.h>
#include <string.h>

#define TAG_SHIFT 7
#define MAX_REPS 1000
#define MAX_N 65536
#define SAMPLES 16

static double a_value(long i, long k)
{
    return (double)((i + 2 * k) % 7);
}

static double b_value(long k, long j)
{
    return (double)((k + j) % 5) - 2.0;
}

/* C[i][j] computed directly from the formulas (exact: integers well below 2^53). */
static double c_value(long n, long i, long j)
{
    long sum = 0;
    for (long k = 0; k < n; k++)
        sum += (long)a_value(i, k) * (long)b_value(k, j);
    return (double)sum;
}

static double *alloc_doubles(size_t count)
{
    double *p = NULL;
    if (posix_memalign((void **)&p, 4096, count * sizeof *p) != 0) {
        fprintf(stderr, "matmul: rank %d: cannot allocate %zu B\n", my_rank, count * sizeof *p);
        MPI_Abort(MPI_COMM_WORLD, 1);
        exit(1);
    }
    return p;
}

/*
 * c[:, 0..nb) += a[:, 0..nb) * b[k0..k0+nb, 0..nb): a holds nb columns of A
 * (global k0..k0+nb), b and c this rank's nb columns of B and C; all n rows.
 */
static void multiply_block(long n, long nb, long k0, const double *restrict a,
                           const double *restrict b, double *restrict c)
{
    for (long j = 0; j < nb; j++) {
        double *cj = c + j * n;
        for (long kk = 0; kk < nb; kk++) {
            double s = b[(k0 + kk) + j * n];
            const double *ak = a + kk * n;
            for (long i = 0; i < n; i++)
                cj[i] += ak[i] * s;
        }
    }
}

/*
 * One repetition: C += A * B by the ring shift (C zeroed by the caller).
 * a_own is this rank's A block (left unchanged), bufs two more blocks for the
 * travelling copies. Adds the time spent in communication to *comm.
 */
static void ring_multiply(long n, long nb, int nranks, const double *a_own, double *bufs[2],
                          const double *b, double *c, double *comm)
{
    int next = (my_rank + 1) % nranks;
    int prev = (my_rank + nranks - 1) % nranks;
    int count = (int)(n * nb);
    const double *held = a_own;
    for (int s = 0; s < nranks; s++) {
        int owner = (my_rank - s + nranks) % nranks;
        multiply_block(n, nb, (long)owner * nb, held, b, c);
        if (s < nranks - 1) {
            double *into = bufs[s % 2];
            double t0 = MPI_Wtime();
            MPI_CHECK(MPI_Sendrecv(held, count, MPI_DOUBLE, next, TAG_SHIFT, into, count,
                                   MPI_DOUBLE, prev, TAG_SHIFT, MPI_COMM_WORLD,
                                   MPI_STATUS_IGNORE));
            *comm += MPI_Wtime() - t0;
            held = into;
        }
    }
}

/*
 * Check SAMPLES elements of C, spread over rows and columns (corners
 * included), against the formulas; each rank checks those in its columns.
 * Aborts the job on a mismatch. Returns the number of samples checked here.
 */
static int verify(long n, long nb, const double *c)
{
    int checked = 0;
    for (long t = 0; t < SAMPLES; t++) {
        long i = t * (n - 1) / (SAMPLES - 1);
        long j = (t * 7 % SAMPLES) * (n - 1) / (SAMPLES - 1);
        if (j / nb != my_rank)
            continue;
        double want = c_value(n, i, j);
        double got = c[i + (j - (long)my_rank * nb) * n];
        if (got != want) {
            fprintf(stderr, "matmul: rank %d: wrong result C[%ld][%ld]: expected %.17g, "
                    "got %.17g\n",
                    my_rank, i, j, want, got);
            MPI_Abort(MPI_COMM_WORLD, 3);
            exit(3);
        }
        checked++;
    }
    return checked;
}

int main(int argc, char **argv)
{
    long n = 0;
    long reps = 5;

    int nranks = peers_init(&argc, &argv);

    for (int i = 1; i < argc; i++) {
        if (strcmp(argv[i], "--n") == 0)
            n = count_value(argc, argv, i, MAX_N);
        else if (strcmp(argv[i], "--reps") == 0)
            reps = count_value(argc, argv, i, MAX_REPS);
        else
            usage_error("unknown argument: %s", argv[i]);
        i++;
    }
    if (n == 0)
        usage_error("--n N is required");
    if (n % nranks != 0)
        usage_error("N must be divisible by the number of ranks: N = %ld, P = %d", n, nranks);
    long nb = n / nranks;
    if (n * nb > INT_MAX)
        usage_error("a block of N x N/P doubles must hold at most %d elements (N = %ld, P = %d)",
                    INT_MAX, n, nranks);

    /* This rank's columns of A, B and C, and two buffers for the travelling A blocks. */
    size_t block = (size_t)(n * nb);
    double *a = alloc_doubles(block), *b = alloc_doubles(block), *c = alloc_doubles(block);
    double *bufs[2] = {alloc_doubles(block), alloc_doubles(block)};
    long col0 = (long)my_rank * nb;
    for (long jj = 0; jj < nb; jj++)
        for (long i = 0; i < n; i++) {
            a[i + jj * n] = a_value(i, col0 + jj);
            b[i + jj * n] = b_value(i, col0 + jj);
        }
    memset(bufs[0], 0, block * sizeof *c);
    memset(bufs[1], 0, block * sizeof *c);

    double *seconds = calloc((size_t)reps, sizeof *seconds);
    double *comm_seconds = calloc((size_t)reps, sizeof *comm_seconds);
    if (seconds == NULL || comm_seconds == NULL)
        out_of_memory();

    for (long r = 0; r < reps; r++) {
        double comm = 0;
        memset(c, 0, block * sizeof *c);
        MPI_CHECK(MPI_Barrier(MPI_COMM_WORLD));
        double t0 = MPI_Wtime();
        ring_multiply(n, nb, nranks, a, bufs, b, c, &comm);
        MPI_CHECK(MPI_Barrier(MPI_COMM_WORLD));
        double mine[2] = {MPI_Wtime() - t0, comm}, slowest[2] = {0, 0};
        MPI_CHECK(MPI_Reduce(mine, slowest, 2, MPI_DOUBLE, MPI_MAX, 0, MPI_COMM_WORLD));
        seconds[r] = slowest[0];
        comm_seconds[r] = slowest[1];
        if (r == 0) {
            int checked = verify(n, nb, c), total = 0;
            MPI_CHECK(MPI_Reduce(&checked, &total, 1, MPI_INT, MPI_SUM, 0, MPI_COMM_WORLD));
            if (my_rank == 0 && total != SAMPLES) {
                fprintf(stderr, "matmul: checked %d samples of C, not %d\n", total, SAMPLES);
                MPI_Abort(MPI_COMM_WORLD, 3);
                exit(3);
            }
        }
    }

    if (my_rank == 0) {
        double s = median(seconds, (int)reps);
        double cs = median(comm_seconds, (int)reps);
        double gflops = s > 0 ? 2.0 * (double)n * (double)n * (double)n / s / 1e9 : 0.0;
        printf("{\"benchmark\":\"matmul\",\"impl\":\"mpi\",\"ranks\":%d,\"n\":%ld,"
               "\"seconds\":%.6g,\"comm_seconds\":%.6g,\"gflops\":%.4g,\"check\":\"ok\"}\n",
               nranks, n, s, cs, gflops);
        flush_stdout();
    }

    free(comm_seconds);
    free(seconds);
    free(bufs[1]);
    free(bufs[0]);
    free(c);
    free(b);
    free(a);
    MPI_CHECK(MPI_Finalize());
    return 0;
}
