/*
 * ctest.h: the helpers every C test program of crates/spools-c/tests shares.
 *
 * - CHECK(call): the call must return SPOOLS_OK; otherwise prints the call, its status,
 *   spools_last_error_message(), the rank and the line on stderr, aborts the job and
 *   exits with 1.
 * - ASSERT(cond, fmt, ...): the condition must hold; otherwise the same, with the
 *   printf-style explanation.
 * - EXPECT_ERR(call, status, needle): the call must fail with exactly `status`,
 *   spools_strerror(status) must name it, and spools_last_error_message() must be
 *   non-empty and contain `needle` (case-insensitively).
 * - OK(fmt, ...): prints "ok ..." on stdout (one line, flushed): the driver checks that
 *   every rank printed each of its expected lines.
 *
 * A program calls ct_init() (spools_init with SPOOLS_INIT_PARAMS_DEFAULT, rank, size,
 * world communicator) and ct_finalize().
 */
#ifndef CTEST_H
#define CTEST_H

#include <spools.h>

#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static spools_world_t *ct_world;  /* NULL before ct_init and after ct_finalize */
static spools_comm_t *ct_comm;    /* the world communicator */
static uint32_t ct_rank = 0xffffffffu;
static uint32_t ct_size;
static const char *ct_prog = "ctest";

/* Reports a failed check and ends the whole job (the other ranks' calls fail with
 * SPOOLS_ERR_PEER_GONE, the launcher stops the job), then exits with 1. */
static inline void ct_fail(const char *what, int line, const char *detail)
{
    fprintf(stderr, "FAIL %s rank %d line %d: %s%s%s\n", ct_prog, (int)ct_rank, line, what,
            detail != NULL ? ": " : "", detail != NULL ? detail : "");
    fflush(stdout);
    fflush(stderr);
    if (ct_world != NULL) {
        spools_world_t *w = ct_world;
        ct_world = NULL;
        spools_abort(w, what);
    }
    exit(1);
}

/* The enum name of a status value ("SPOOLS_ERR_TRUNCATED"). */
static inline const char *ct_status_name(int s)
{
    static const char *names[] = {
        "SPOOLS_OK",           "SPOOLS_ERR_INVALID_ARG", "SPOOLS_ERR_TRUNCATED",
        "SPOOLS_ERR_PEER_GONE", "SPOOLS_ERR_LAYOUT",     "SPOOLS_ERR_IO",
        "SPOOLS_ERR_DAMAGED",  "SPOOLS_ERR_NOT_FOUND",   "SPOOLS_ERR_INIT",
        "SPOOLS_ERR_FINALIZED", "SPOOLS_ERR_REMOTE",     "SPOOLS_ERR_TRANSPORT",
        "SPOOLS_ERR_VERSION",  "SPOOLS_ERR_INTERRUPTED", "SPOOLS_ERR_INTERNAL",
        "SPOOLS_ERR_UNSUPPORTED", "SPOOLS_ERR_UNAVAILABLE",
    };
    if (s < 0 || s >= (int)(sizeof names / sizeof names[0]))
        return "?";
    return names[s];
}

/* Whether `hay` contains `needle`, ignoring ASCII case. */
static inline int ct_contains(const char *hay, const char *needle)
{
    size_t n = strlen(needle);
    if (n == 0)
        return 1;
    for (; *hay != '\0'; hay++) {
        size_t i = 0;
        while (i < n && hay[i] != '\0') {
            char a = hay[i], b = needle[i];
            if (a >= 'A' && a <= 'Z')
                a = (char)(a - 'A' + 'a');
            if (b >= 'A' && b <= 'Z')
                b = (char)(b - 'A' + 'a');
            if (a != b)
                break;
            i++;
        }
        if (i == n)
            return 1;
    }
    return 0;
}

#define CHECK(call)                                                                          \
    do {                                                                                     \
        spools_status_t rc_ = (call);                                                        \
        if (rc_ != SPOOLS_OK) {                                                              \
            char m_[1024];                                                                   \
            snprintf(m_, sizeof m_, "returned %s: %s", spools_strerror(rc_),               \
                     spools_last_error_message());                                           \
            ct_fail(#call, __LINE__, m_);                                                    \
        }                                                                                    \
    } while (0)

#define ASSERT(cond, ...)                                                                    \
    do {                                                                                     \
        if (!(cond)) {                                                                       \
            char m_[2048];                                                                   \
            snprintf(m_, sizeof m_, __VA_ARGS__);                                            \
            ct_fail("assertion " #cond, __LINE__, m_);                                       \
        }                                                                                    \
    } while (0)

/* Checks a failure: the status, its name in spools_strerror, and the message. */
static inline void ct_expect_err(spools_status_t got, spools_status_t want, const char *needle,
                                 const char *call, int line)
{
    char m_[1024];
    const char *msg = spools_last_error_message();
    const char *name = ct_status_name((int)want);
    const char *str = spools_strerror((int)want);
    if (got != want) {
        snprintf(m_, sizeof m_, "returned %s, expected %s%s%s%s", ct_status_name((int)got), name,
                 got == SPOOLS_OK ? "" : " (its message: ", got == SPOOLS_OK ? "" : msg,
                 got == SPOOLS_OK ? "" : ")");
        ct_fail(call, line, m_);
    }
    if (strncmp(str, name, strlen(name)) != 0 || str[strlen(name)] != ':') {
        snprintf(m_, sizeof m_, "spools_strerror(%d) = \"%s\" does not name %s", (int)want,
                 str, name);
        ct_fail(call, line, m_);
    }
    if (msg == NULL || msg[0] == '\0') {
        ct_fail(call, line, "spools_last_error_message() is empty after a failure");
    }
    if (!ct_contains(msg, needle)) {
        snprintf(m_, sizeof m_, "the message \"%s\" does not mention \"%s\"", msg, needle);
        ct_fail(call, line, m_);
    }
}

#define EXPECT_ERR(call, status, needle)                                                     \
    ct_expect_err((call), (status), (needle), #call, __LINE__)

#define OK(...)                                                                              \
    do {                                                                                     \
        printf("ok " __VA_ARGS__);                                                           \
        printf("\n");                                                                        \
        fflush(stdout);                                                                      \
    } while (0)

/* Joins the job: world, rank, size and world communicator in the ct_* globals. */
static inline void ct_init(const char *prog)
{
    spools_init_params_t params = SPOOLS_INIT_PARAMS_DEFAULT;
    ct_prog = prog;
    CHECK(spools_init(&params, &ct_world));
    CHECK(spools_world_rank(ct_world, &ct_rank));
    CHECK(spools_world_size(ct_world, &ct_size));
    CHECK(spools_world_comm(ct_world, &ct_comm));
}

/* Leaves the job (every rank). */
static inline void ct_finalize(void)
{
    spools_world_t *w = ct_world;
    ct_world = NULL; /* freed by spools_finalize, whatever it returns */
    ct_comm = NULL;
    CHECK(spools_finalize(w));
}

/* malloc that cannot return NULL (n may be 0). */
static inline void *ct_alloc(size_t n)
{
    void *p = malloc(n == 0 ? 1 : n);
    if (p == NULL)
        ct_fail("malloc", __LINE__, "out of memory");
    return p;
}

#endif /* CTEST_H */
