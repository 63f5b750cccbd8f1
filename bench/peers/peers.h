/*
 * Shared helpers of the MPI peers (pingpong.c, ring.c, init.c): the rank
 * variable, MPI error checking, usage errors, option parsing and medians.
 *
 * Each peer is one translation unit: it defines PEERS_PROGRAM (its name, the
 * prefix of every message) and, if it takes options, PEERS_USAGE (the usage
 * line printed by fail) before including this header. Everything here is
 * static inline, so a peer that does not use a helper gets no warning for it.
 */
#ifndef PEERS_H
#define PEERS_H

#ifndef PEERS_PROGRAM
#error "define PEERS_PROGRAM (the program name) before including peers.h"
#endif

#include <mpi.h>

#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>

static int my_rank = -1;

/* Report a failed MPI call with its error string and abort the whole job. */
__attribute__((noreturn)) static inline void mpi_fail(const char *what, int rc, int line)
{
    char msg[MPI_MAX_ERROR_STRING];
    int len = 0;
    if (MPI_Error_string(rc, msg, &len) != MPI_SUCCESS)
        snprintf(msg, sizeof msg, "MPI error code %d", rc);
    fprintf(stderr, PEERS_PROGRAM ": rank %d: %s failed (line %d): %s\n", my_rank, what, line,
            msg);
    MPI_Abort(MPI_COMM_WORLD, 1);
    exit(1);
}

#define MPI_CHECK(call)                                                                            \
    do {                                                                                           \
        int rc_ = (call);                                                                          \
        if (rc_ != MPI_SUCCESS)                                                                    \
            mpi_fail(#call, rc_, __LINE__);                                                        \
    } while (0)

#ifdef PEERS_USAGE
/*
 * Print a usage or input error (from rank 0 only) and abort the job. With
 * meet, the ranks first meet in a barrier, so that another rank's MPI_Abort
 * cannot kill rank 0 before its message is out: for errors every rank finds
 * (the same arguments); without, for errors one rank may find alone.
 */
__attribute__((noreturn)) static inline void usage_abort(int meet, const char *fmt, va_list ap)
{
    if (my_rank == 0) {
        fprintf(stderr, PEERS_PROGRAM ": ");
        vfprintf(stderr, fmt, ap);
        fprintf(stderr, "\nusage: " PEERS_USAGE "\n");
    }
    if (meet)
        MPI_Barrier(MPI_COMM_WORLD);
    MPI_Abort(MPI_COMM_WORLD, 2);
    exit(2);
}

/* An error one rank may find alone (see usage_abort). */
__attribute__((noreturn, format(printf, 1, 2))) static inline void fail(const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    usage_abort(0, fmt, ap);
}

/* An error in the arguments, found by every rank alike (see usage_abort). */
__attribute__((noreturn, format(printf, 1, 2))) static inline void usage_error(const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    usage_abort(1, fmt, ap);
}
#endif

/*
 * MPI_Init, then set my_rank, make MPI calls return their errors (to
 * MPI_CHECK) instead of aborting, and return the number of ranks.
 */
static inline int peers_init(int *argc, char ***argv)
{
    int nranks = 0;
    MPI_Init(argc, argv);
    MPI_Comm_rank(MPI_COMM_WORLD, &my_rank);
    MPI_CHECK(MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_RETURN));
    MPI_CHECK(MPI_Comm_size(MPI_COMM_WORLD, &nranks));
    return nranks;
}

/* Report a failed allocation on this rank and abort the job. */
__attribute__((noreturn)) static inline void out_of_memory(void)
{
    fprintf(stderr, PEERS_PROGRAM ": rank %d: out of memory\n", my_rank);
    MPI_Abort(MPI_COMM_WORLD, 1);
    exit(1);
}

/* Flush the JSON document on stdout; abort the job if it could not be written. */
static inline void flush_stdout(void)
{
    if (fflush(stdout) != 0 || ferror(stdout)) {
        perror(PEERS_PROGRAM ": writing stdout");
        MPI_Abort(MPI_COMM_WORLD, 1);
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

#ifdef PEERS_USAGE
/*
 * The value of option argv[i]: argv[i + 1] as an integer from 1 to max, or a
 * usage error if it is missing or out of range (with meet: see usage_abort).
 */
static inline long checked_option(int argc, char **argv, int i, long max, int meet)
{
    const char *missing = "%s needs a value";
    const char *bad = "bad value for %s (an integer from 1 to %ld): %s";
    if (i + 1 >= argc) {
        if (meet)
            usage_error(missing, argv[i]);
        fail(missing, argv[i]);
    }
    long v = parse_count(argv[i + 1], max);
    if (v == 0) {
        if (meet)
            usage_error(bad, argv[i], max, argv[i + 1]);
        fail(bad, argv[i], max, argv[i + 1]);
    }
    return v;
}

/* checked_option without the barrier. */
static inline long option_value(int argc, char **argv, int i, long max)
{
    return checked_option(argc, argv, i, max, 0);
}

/* checked_option with the barrier (every rank parses the same arguments). */
static inline long count_value(int argc, char **argv, int i, long max)
{
    return checked_option(argc, argv, i, max, 1);
}
#endif

/* A byte count with an optional K or M suffix (powers of 1024), as the ddt peers take
 * their sizes (no checking: their arguments are the scripts'). */
static inline long size_arg(const char *s)
{
    char *end;
    long v = strtol(s, &end, 10);
    if (*end == 'K' || *end == 'k')
        v <<= 10;
    if (*end == 'M' || *end == 'm')
        v <<= 20;
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

#endif /* PEERS_H */
