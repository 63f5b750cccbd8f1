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
#define PEERS_PROGRAM "init"
#include "peers.h"

#include <time.h>

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
        if (all == NULL)
            out_of_memory();
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
