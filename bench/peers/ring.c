/*
 * MPI token ring, the MPI side of the Spools ring benchmark.
 *
 * Usage: mpirun -n N ring [--rounds R] [--reps K]
 *
 * An 8-byte token goes around all N ranks (0 -> 1 -> ... -> N-1 -> 0) R times
 * (default 10000); every rank adds one to it, so rank 0 checks that it comes
 * back as R*N. A warm-up of R/10 rounds (at most 1000) precedes K timed
 * repetitions (default 5), each started by a barrier. The time of a repetition
 * is rank 0's, from its first send to the last receive; hop_us is that time
 * divided by R*N, and the reported value is the median over the repetitions.
 *
 * Rank 0 prints one JSON document on one line of stdout:
 *   {"benchmark":"ring","transport":"mpi","ranks":N,"rounds":R,"hop_us":...}
 * Errors go to stderr and abort the job with a non-zero status.
 */
#include <mpi.h>

#include <errno.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define TAG_TOKEN 7
#define MAX_REPS 1000

static int my_rank = -1;

/* Report a failed MPI call with its error string and abort the whole job. */
static void mpi_fail(const char *what, int rc, int line)
{
    char msg[MPI_MAX_ERROR_STRING];
    int len = 0;
    if (MPI_Error_string(rc, msg, &len) != MPI_SUCCESS)
        snprintf(msg, sizeof msg, "MPI error code %d", rc);
    fprintf(stderr, "ring: rank %d: %s failed (line %d): %s\n", my_rank, what, line, msg);
    MPI_Abort(MPI_COMM_WORLD, 1);
    exit(1);
}

#define MPI_CHECK(call)                                                                            \
    do {                                                                                           \
        int rc_ = (call);                                                                          \
        if (rc_ != MPI_SUCCESS)                                                                    \
            mpi_fail(#call, rc_, __LINE__);                                                        \
    } while (0)

/* Print a usage or input error (from rank 0 only) and abort the job. */
static void fail(const char *fmt, ...)
{
    if (my_rank == 0) {
        va_list ap;
        va_start(ap, fmt);
        fprintf(stderr, "ring: ");
        vfprintf(stderr, fmt, ap);
        fprintf(stderr, "\nusage: mpirun -n N ring [--rounds R] [--reps K]\n");
        va_end(ap);
    }
    MPI_Abort(MPI_COMM_WORLD, 2);
    exit(2);
}

/* Parse a positive integer option value no larger than max; 0 on error. */
static long parse_count(const char *s, long max)
{
    char *end = NULL;
    errno = 0;
    long v = strtol(s, &end, 10);
    if (errno != 0 || end == s || *end != '\0' || v <= 0 || v > max)
        return 0;
    return v;
}

/*
 * Pass the token around the ring `rounds` times. Returns rank 0's elapsed
 * seconds (0 elsewhere) and checks on rank 0 that every hop incremented it.
 */
static double run_ring(long rounds, int nranks)
{
    int next = (my_rank + 1) % nranks;
    int prev = (my_rank + nranks - 1) % nranks;
    uint64_t token = 0;

    MPI_CHECK(MPI_Barrier(MPI_COMM_WORLD));
    double t0 = MPI_Wtime();
    for (long r = 0; r < rounds; r++) {
        if (my_rank == 0) {
            token++;
            MPI_CHECK(MPI_Send(&token, 1, MPI_UINT64_T, next, TAG_TOKEN, MPI_COMM_WORLD));
            MPI_CHECK(MPI_Recv(&token, 1, MPI_UINT64_T, prev, TAG_TOKEN, MPI_COMM_WORLD,
                               MPI_STATUS_IGNORE));
        } else {
            MPI_CHECK(MPI_Recv(&token, 1, MPI_UINT64_T, prev, TAG_TOKEN, MPI_COMM_WORLD,
                               MPI_STATUS_IGNORE));
            token++;
            MPI_CHECK(MPI_Send(&token, 1, MPI_UINT64_T, next, TAG_TOKEN, MPI_COMM_WORLD));
        }
    }
    double elapsed = MPI_Wtime() - t0;

    if (my_rank == 0 && token != (uint64_t)rounds * (uint64_t)nranks) {
        fprintf(stderr, "ring: token back as %llu after %ld rounds of %d ranks, not %llu\n",
                (unsigned long long)token, rounds, nranks,
                (unsigned long long)((uint64_t)rounds * (uint64_t)nranks));
        MPI_Abort(MPI_COMM_WORLD, 3);
        exit(3);
    }
    return my_rank == 0 ? elapsed : 0.0;
}

static int cmp_double(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

int main(int argc, char **argv)
{
    long rounds = 10000;
    long reps = 5;
    int nranks = 0;

    MPI_Init(&argc, &argv);
    MPI_Comm_rank(MPI_COMM_WORLD, &my_rank);
    MPI_CHECK(MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_RETURN));
    MPI_CHECK(MPI_Comm_size(MPI_COMM_WORLD, &nranks));

    for (int i = 1; i < argc; i++) {
        int is_rounds = strcmp(argv[i], "--rounds") == 0;
        if (!is_rounds && strcmp(argv[i], "--reps") != 0)
            fail("unknown argument: %s", argv[i]);
        long max = is_rounds ? 1000000000L : MAX_REPS;
        if (i + 1 >= argc)
            fail("%s needs a value", argv[i]);
        long v = parse_count(argv[i + 1], max);
        if (v == 0)
            fail("bad value for %s (an integer from 1 to %ld): %s", argv[i], max, argv[i + 1]);
        *(is_rounds ? &rounds : &reps) = v;
        i++;
    }
    if (nranks < 2)
        fail("needs at least 2 ranks, got %d", nranks);

    double *hop_us = calloc((size_t)reps, sizeof *hop_us);
    if (hop_us == NULL) {
        fprintf(stderr, "ring: rank %d: out of memory\n", my_rank);
        MPI_Abort(MPI_COMM_WORLD, 1);
        return 1;
    }

    long warm = rounds / 10;
    run_ring(warm < 1 ? 1 : (warm > 1000 ? 1000 : warm), nranks);
    for (long k = 0; k < reps; k++)
        hop_us[k] = run_ring(rounds, nranks) / ((double)rounds * nranks) * 1e6;

    if (my_rank == 0) {
        qsort(hop_us, (size_t)reps, sizeof *hop_us, cmp_double);
        double med = reps % 2 ? hop_us[reps / 2] : 0.5 * (hop_us[reps / 2 - 1] + hop_us[reps / 2]);
        printf("{\"benchmark\":\"ring\",\"transport\":\"mpi\",\"ranks\":%d,\"rounds\":%ld,"
               "\"hop_us\":%.4f}\n",
               nranks, rounds, med);
        if (fflush(stdout) != 0 || ferror(stdout)) {
            perror("ring: writing stdout");
            MPI_Abort(MPI_COMM_WORLD, 1);
        }
    }

    free(hop_us);
    MPI_CHECK(MPI_Finalize());
    return 0;
}
