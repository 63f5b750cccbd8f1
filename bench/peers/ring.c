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
#define PEERS_PROGRAM "ring"
#define PEERS_USAGE "mpirun -n N ring [--rounds R] [--reps K]"
#include "peers.h"

#include <stdint.h>
#include <string.h>

#define TAG_TOKEN 7
#define MAX_REPS 1000

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

int main(int argc, char **argv)
{
    long rounds = 10000;
    long reps = 5;

    int nranks = peers_init(&argc, &argv);

    for (int i = 1; i < argc; i++) {
        int is_rounds = strcmp(argv[i], "--rounds") == 0;
        if (!is_rounds && strcmp(argv[i], "--reps") != 0)
            fail("unknown argument: %s", argv[i]);
        long max = is_rounds ? 1000000000L : MAX_REPS;
        *(is_rounds ? &rounds : &reps) = option_value(argc, argv, i, max);
        i++;
    }
    if (nranks < 2)
        fail("needs at least 2 ranks, got %d", nranks);

    double *hop_us = calloc((size_t)reps, sizeof *hop_us);
    if (hop_us == NULL)
        out_of_memory();

    long warm = rounds / 10;
    run_ring(warm < 1 ? 1 : (warm > 1000 ? 1000 : warm), nranks);
    for (long k = 0; k < reps; k++)
        hop_us[k] = run_ring(rounds, nranks) / ((double)rounds * nranks) * 1e6;

    if (my_rank == 0) {
        double med = median(hop_us, (int)reps);
        printf("{\"benchmark\":\"ring\",\"transport\":\"mpi\",\"ranks\":%d,\"rounds\":%ld,"
               "\"hop_us\":%.4f}\n",
               nranks, rounds, med);
        flush_stdout();
    }

    free(hop_us);
    MPI_CHECK(MPI_Finalize());
    return 0;
}
