/*
 * Shared helpers of the Spools C-API peers (spools_pingpong.c, spools_ring.c): the same
 * helpers as peers.h gives the MPI peers, on the Spools C interface (spools.h), so that
 * each peer has the same structure as its MPI counterpart and differs only in the calls.
 *
 * Each peer defines PEERS_PROGRAM and PEERS_USAGE before including this header.
 */
#ifndef SPOOLS_PEERS_H
#define SPOOLS_PEERS_H

#ifndef PEERS_PROGRAM
#error "define PEERS_PROGRAM (the program name) before including spools_peers.h"
#endif

#include <spools.h>

#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

static int my_rank = -1;
static spools_world_t *world;
static spools_comm_t *comm;

/* Report a failed Spools call with its message and abort the whole job. */
__attribute__((noreturn)) static inline void sp_fail(const char *what, spools_status_t rc, int line)
{
    fprintf(stderr, PEERS_PROGRAM ": rank %d: %s failed (line %d): %s: %s\n", my_rank, what,
            line, spools_strerror(rc), spools_last_error_message());
    if (world != NULL)
        spools_abort(world, PEERS_PROGRAM " failed");
    exit(1);
}

#define SP_CHECK(call)                                                                             \
    do {                                                                                           \
        spools_status_t rc_ = (call);                                                              \
        if (rc_ != SPOOLS_OK)                                                                      \
            sp_fail(#call, rc_, __LINE__);                                                         \
    } while (0)

/* A usage or input error: printed by rank 0, then the job ends. */
__attribute__((noreturn, format(printf, 1, 2))) static inline void fail(const char *fmt, ...)
{
    if (my_rank <= 0) {
        va_list ap;
        va_start(ap, fmt);
        fprintf(stderr, PEERS_PROGRAM ": ");
        vfprintf(stderr, fmt, ap);
        va_end(ap);
        fprintf(stderr, "\nusage: " PEERS_USAGE "\n");
    }
    if (world != NULL)
        spools_abort(world, "usage error");
    exit(2);
}

/* spools_init, then set my_rank and the world communicator; returns the number of ranks. */
static inline int peers_init(void)
{
    spools_init_params_t params = SPOOLS_INIT_PARAMS_DEFAULT;
    uint32_t rank = 0, size = 0;
    SP_CHECK(spools_init(&params, &world));
    SP_CHECK(spools_world_rank(world, &rank));
    SP_CHECK(spools_world_size(world, &size));
    SP_CHECK(spools_world_comm(world, &comm));
    my_rank = (int)rank;
    return (int)size;
}

/* MPI_Wtime's counterpart: seconds of the monotonic clock. */
static inline double wtime(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec + (double)t.tv_nsec * 1e-9;
}

/* Report a failed allocation on this rank and abort the job. */
__attribute__((noreturn)) static inline void out_of_memory(void)
{
    fprintf(stderr, PEERS_PROGRAM ": rank %d: out of memory\n", my_rank);
    spools_abort(world, "out of memory");
    exit(1);
}

/* Flush the JSON document on stdout; abort the job if it could not be written. */
static inline void flush_stdout(void)
{
    if (fflush(stdout) != 0 || ferror(stdout)) {
        perror(PEERS_PROGRAM ": writing stdout");
        spools_abort(world, "cannot write stdout");
        exit(1);
    }
}

/* Parse a positive integer option value no larger than max; 0 on error. */
static inline long parse_count(const char *s, long max)
{
    char *end = NULL;
    errno = 0;
    long v = strtol(s, &end, 10);
    if (errno != 0 || end == s || *end != '\0' || v <= 0 || v > max)
        return 0;
    return v;
}

/* The value of option argv[i]: argv[i + 1] as an integer from 1 to max, or a usage error. */
static inline long option_value(int argc, char **argv, int i, long max)
{
    if (i + 1 >= argc)
        fail("%s needs a value", argv[i]);
    long v = parse_count(argv[i + 1], max);
    if (v == 0)
        fail("bad value for %s (an integer from 1 to %ld): %s", argv[i], max, argv[i + 1]);
    return v;
}

static inline int cmp_double(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

/* Sort v in place and return its median. */
static inline double median(double *v, int n)
{
    qsort(v, (size_t)n, sizeof *v, cmp_double);
    return n % 2 ? v[n / 2] : 0.5 * (v[n / 2 - 1] + v[n / 2]);
}

#endif /* SPOOLS_PEERS_H */
