/*
 * Time MPI_Init on every rank, the MPI side of `spools bench init`.
 *
 * Usage: mpirun -n N init
 *
 * Every rank reads CLOCK_MONOTONIC just before and just after MPI_Init; the
 * difference (ms) is gathered to rank 0, then the job finalizes. This is the
 * in-process cost of joining the job only: starting the processes and tearing
 * them down is timed from outside by run.sh (wall_ms of launch-mpi.runI.json).
 *
 * Rank 0 prints one JSON document on one line of stdout:
 *   {"benchmark":"init","transport":"mpi","ranks":N,"init_ms":[rank 0, rank 1, ...]}
 * Errors go to stderr and abort the job with a non-zero status.
 */
#include <mpi.h>

#include <stdio.h>
#include <stdlib.h>
#include <time.h>

static int my_rank = -1;

/* Report a failed MPI call with its error string and abort the whole job. */
static void mpi_fail(const char *what, int rc, int line)
{
    char msg[MPI_MAX_ERROR_STRING];
    int len = 0;
    if (MPI_Error_string(rc, msg, &len) != MPI_SUCCESS)
        snprintf(msg, sizeof msg, "MPI error code %d", rc);
    fprintf(stderr, "init: rank %d: %s failed (line %d): %s\n", my_rank, what, line, msg);
    MPI_Abort(MPI_COMM_WORLD, 1);
    exit(1);
}

#define MPI_CHECK(call)                                                                            \
    do {                                                                                           \
        int rc_ = (call);                                                                          \
        if (rc_ != MPI_SUCCESS)                                                                    \
            mpi_fail(#call, rc_, __LINE__);                                                        \
    } while (0)

static double now_ms(void)
{
    struct timespec ts;
    if (clock_gettime(CLOCK_MONOTONIC, &ts) != 0) {
        perror("init: clock_gettime");
        exit(1);
    }
    return (double)ts.tv_sec * 1e3 + (double)ts.tv_nsec / 1e6;
}

int main(int argc, char **argv)
{
    double start = now_ms();
    /* Before MPI_Init no error handler is installed: a failure aborts by itself. */
    MPI_Init(&argc, &argv);
    double init_ms = now_ms() - start;

    int size = 0;
    MPI_CHECK(MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_RETURN));
    MPI_CHECK(MPI_Comm_rank(MPI_COMM_WORLD, &my_rank));
    MPI_CHECK(MPI_Comm_size(MPI_COMM_WORLD, &size));

    double *all = NULL;
    if (my_rank == 0) {
        all = malloc((size_t)size * sizeof *all);
        if (all == NULL) {
            fprintf(stderr, "init: rank 0: out of memory\n");
            MPI_Abort(MPI_COMM_WORLD, 1);
            return 1;
        }
    }
    MPI_CHECK(MPI_Gather(&init_ms, 1, MPI_DOUBLE, all, 1, MPI_DOUBLE, 0, MPI_COMM_WORLD));

    if (my_rank == 0) {
        printf("{\"benchmark\":\"init\",\"transport\":\"mpi\",\"ranks\":%d,\"init_ms\":[", size);
        for (int r = 0; r < size; r++)
            printf("%s%.6f", r > 0 ? "," : "", all[r]);
        printf("]}\n");
        fflush(stdout);
        free(all);
    }
    MPI_CHECK(MPI_Finalize());
    return 0;
}
