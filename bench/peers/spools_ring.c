/*
 * ring.c ported to the Spools C interface (spools.h): the same token ring, with each MPI
 * call replaced by its Spools counterpart (bench/peers/c_api.sh runs both).
 *
 * Usage: spools run -n N -- spools_ring [--rounds R] [--reps K]
 *
 * An 8-byte token goes around all N ranks (0 -> 1 -> ... -> N-1 -> 0) R times
 * (default 10000); every rank adds one to it, so rank 0 checks that it comes
 * back as R*N. A warm-up of R/10 rounds (at most 1000) precedes K timed
 * repetitions (default 5), each started by a barrier. The time of a repetition
 * is rank 0's, from its first send to the last receive; hop_us is that time
 * divided by R*N, and the reported value is the median over the repetitions.
 *
 * Rank 0 prints one JSON document on one line of stdout:
 *   {"benchmark":"ring","transport":"spools-c","ranks":N,"rounds":R,"hop_us":...}
 * Errors go to stderr and abort the job with a non-zero status.
 */
#define PEERS_PROGRAM "ring"
#define PEERS_USAGE "spools run -n N -- spools_ring [--rounds R] [--reps K]"
#include "spools_peers.h"

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
    uint32_t next = (uint32_t)((my_rank + 1) % nranks);
    uint32_t prev = (uint32_t)((my_rank + nranks - 1) % nranks);
    uint64_t token = 0;

    SP_CHECK(spools_barrier(comm));
    double t0 = wtime();
    for (long r = 0; r < rounds; r++) {
        if (my_rank == 0) {
            token++;
            SP_CHECK(spools_send(comm, &token, sizeof token, next, TAG_TOKEN));
            SP_CHECK(spools_recv(comm, &token, sizeof token, (int32_t)prev, TAG_TOKEN, NULL));
        } else {
            SP_CHECK(spools_recv(comm, &token, sizeof token, (int32_t)prev, TAG_TOKEN, NULL));
            token++;
            SP_CHECK(spools_send(comm, &token, sizeof token, next, TAG_TOKEN));
        }
    }
    double elapsed = wtime() - t0;

    if (my_rank == 0 && token != (uint64_t)rounds * (uint64_t)nranks) {
        fprintf(stderr, "ring: token back as %llu after %ld rounds of %d ranks, not %llu\n",
                (unsigned long long)token, rounds, nranks,
                (unsigned long long)((uint64_t)rounds * (uint64_t)nranks));
        spools_abort(world, "token corrupt");
        exit(3);
    }
    return my_rank == 0 ? elapsed : 0.0;
}

int main(int argc, char **argv)
{
    long rounds = 10000;
    long reps = 5;

    int nranks = peers_init();

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
        printf("{\"benchmark\":\"ring\",\"transport\":\"spools-c\",\"ranks\":%d,\"rounds\":%ld,"
               "\"hop_us\":%.4f}\n",
               nranks, rounds, med);
        flush_stdout();
    }

    free(hop_us);
    SP_CHECK(spools_finalize(world));
    return 0;
}
