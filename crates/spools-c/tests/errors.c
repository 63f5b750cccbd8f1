/*
 * errors.c DIR SECTION: how calls fail (2 ranks or more; run with 3). Every check asserts
 * the status, that spools_strerror() names it, and that spools_last_error_message() is
 * non-empty and mentions what went wrong (EXPECT_ERR in ctest.h).
 *
 * Printed by every rank, each after its checks passed:
 *   ok version      spools_version, spools_check_version, spools_strerror of every value
 *   ok init         init with NULL world / a newer header, then a second init
 *   ok handles      NULL handles and NULL outputs; destroyed handles; the world's comm;
 *                   spools_last_error_message per thread, kept by successful calls
 *   ok args         NULL buffers, bad dtype and op, negative tag and source, ranks and
 *                   roots out of range, bad colors and flags
 *   ok layout       specs that do not parse (with the parser's message), unsized layouts,
 *                   redistributions between datasets or with wrong buffers
 *   ok not-found    an unknown RPC function, a handler name, a region key
 *   ok finalize     finalize of NULL, init after finalize
 * Those are SECTION "api". The file sections (each its own job, so that one failing
 * does not hide the others), with every rank getting the same status:
 *   ok missing-file   reading a file that does not exist: SPOOLS_ERR_NOT_FOUND
 *   ok damaged-sums   a flipped byte in a checksummed canonical file: SPOOLS_ERR_DAMAGED
 *                     with checksums, the flipped data without
 *   ok damaged-raid5  two damaged blocks of one RAID-5 row: SPOOLS_ERR_DAMAGED
 *   ok oversized-shares  buffers 8 bytes longer than the rank's share are refused too
 *                     (SPOOLS_ERR_LAYOUT) by redistribute, write_file and read_file
 *   ok aliased-buffers  one buffer as both send and recv (allreduce, scan, reduce,
 *                     alltoall, redistribute): the right result or SPOOLS_ERR_INVALID_ARG,
 *                     never a crash
 *   ok file-kinds     one status per kind of file failure (the Python classes follow the
 *                     same kinds): a Zarr codec Spools does not implement and a sharded
 *                     bytes(3) array, SPOOLS_ERR_UNSUPPORTED; a zarr(...) spec that does
 *                     not fit the layout, SPOOLS_ERR_INVALID_ARG; HDF5 without a libhdf5
 *                     to load (SPOOLS_HDF5_LIB names none; or a build without HDF5),
 *                     SPOOLS_ERR_UNAVAILABLE; a zarr.json whose fill value does not fit
 *                     its data type, SPOOLS_ERR_DAMAGED
 *   ok declined       arguments wrong on one rank only, in every collective I/O call
 *                     (issue 58): a NULL layout handle (write_file, read_file,
 *                     redistribute), a NULL path, a format that does not parse: the rank
 *                     declines its part and every rank gets its status and message; a
 *                     NULL layout handle in a pipe's opening fails it on every rank
 *                     before any meeting (that rank SPOOLS_ERR_INVALID_ARG, the others
 *                     SPOOLS_ERR_LAYOUT naming it); then the calls meet as usual
 * ("ok version" and "ok init" come first and "ok finalize" last in every section.)
 */
#define _POSIX_C_SOURCE 200809L
#include "ctest.h"

#include <fcntl.h>
#include <pthread.h>
#include <sys/stat.h>
#include <unistd.h>

static const char *dir;

static void version(void)
{
    uint32_t major = 99, minor = 99, patch = 99;
    const char *v = spools_version(&major, &minor, &patch);
    ASSERT(v != NULL && strcmp(v, "0.1.0") == 0, "spools_version gave \"%s\"", v ? v : "NULL");
    ASSERT(major == SPOOLS_VERSION_MAJOR && minor == SPOOLS_VERSION_MINOR &&
               patch == SPOOLS_VERSION_PATCH,
           "version numbers %u.%u.%u", major, minor, patch);
    ASSERT(spools_version(NULL, NULL, NULL) == v, "spools_version(NULL...) gave another string");

    CHECK(spools_check_version(SPOOLS_VERSION_MAJOR, SPOOLS_VERSION_MINOR));
    CHECK(spools_check_version(SPOOLS_VERSION_MAJOR, 0));
    EXPECT_ERR(spools_check_version(SPOOLS_VERSION_MAJOR + 1, 0), SPOOLS_ERR_VERSION, "1.0");
    EXPECT_ERR(spools_check_version(SPOOLS_VERSION_MAJOR, SPOOLS_VERSION_MINOR + 1),
               SPOOLS_ERR_VERSION, "0.2");

    /* Every status has its name; others are "unknown status". */
    for (int s = 0; s <= SPOOLS_ERR_UNAVAILABLE; s++) {
        const char *name = ct_status_name(s), *str = spools_strerror(s);
        ASSERT(str != NULL && strncmp(str, name, strlen(name)) == 0 && str[strlen(name)] == ':',
               "spools_strerror(%d) = \"%s\"", s, str ? str : "NULL");
    }
    ASSERT(strcmp(spools_strerror(99), "unknown status") == 0, "strerror(99)");
    ASSERT(strcmp(spools_strerror(-1), "unknown status") == 0, "strerror(-1)");
    OK("version");
}

static void init(void)
{
    spools_init_params_t params = SPOOLS_INIT_PARAMS_DEFAULT;
    EXPECT_ERR(spools_init(&params, NULL), SPOOLS_ERR_INVALID_ARG, "world");
    /* A program built against a newer minor version: refused, and nothing started. */
    spools_init_params_t newer = SPOOLS_INIT_PARAMS_DEFAULT;
    newer.api_minor = SPOOLS_VERSION_MINOR + 1;
    spools_world_t *w = NULL;
    EXPECT_ERR(spools_init(&newer, &w), SPOOLS_ERR_VERSION, "0.2");
    ASSERT(w == NULL, "a refused init set the world");
    /* The real one (ct_init), then a second one. */
    ct_init("errors");
    EXPECT_ERR(spools_init(&params, &w), SPOOLS_ERR_INVALID_ARG, "already");
    OK("init");
}

/* A thread's own failure: its message is its own. */
static void *fail_in_thread(void *arg)
{
    char *seen = arg;
    uint32_t r;
    if (spools_comm_rank(NULL, &r) != SPOOLS_ERR_INVALID_ARG)
        snprintf(seen, 256, "spools_comm_rank(NULL) did not fail");
    else
        snprintf(seen, 256, "%s", spools_last_error_message());
    return NULL;
}

/* spools_last_error_message: per thread, and kept by successful calls (as errno). */
static void last_message(void)
{
    uint32_t r;
    EXPECT_ERR(spools_world_rank(NULL, &r), SPOOLS_ERR_INVALID_ARG, "spools_world_t");
    char mine[256], theirs[256] = "";
    snprintf(mine, sizeof mine, "%s", spools_last_error_message());
    CHECK(spools_world_rank(ct_world, &r)); /* success: the message stays */
    ASSERT(strcmp(spools_last_error_message(), mine) == 0, "a successful call changed it to %s",
           spools_last_error_message());
    pthread_t t;
    ASSERT(pthread_create(&t, NULL, fail_in_thread, theirs) == 0, "pthread_create");
    ASSERT(pthread_join(t, NULL) == 0, "pthread_join");
    ASSERT(ct_contains(theirs, "spools_comm_t"), "the thread's message: %s", theirs);
    ASSERT(strcmp(spools_last_error_message(), mine) == 0,
           "another thread's failure changed this thread's message to %s",
           spools_last_error_message());
}

static void handles(void)
{
    uint32_t r;
    spools_comm_t *c = NULL;
    EXPECT_ERR(spools_world_rank(NULL, &r), SPOOLS_ERR_INVALID_ARG, "spools_world_t");
    EXPECT_ERR(spools_world_rank(ct_world, NULL), SPOOLS_ERR_INVALID_ARG, "rank");
    EXPECT_ERR(spools_world_comm(NULL, &c), SPOOLS_ERR_INVALID_ARG, "spools_world_t");
    EXPECT_ERR(spools_comm_rank(NULL, &r), SPOOLS_ERR_INVALID_ARG, "spools_comm_t");
    EXPECT_ERR(spools_comm_size(ct_comm, NULL), SPOOLS_ERR_INVALID_ARG, "size");
    EXPECT_ERR(spools_send(NULL, "x", 1, 0, 0), SPOOLS_ERR_INVALID_ARG, "spools_comm_t");
    EXPECT_ERR(spools_barrier(NULL), SPOOLS_ERR_INVALID_ARG, "spools_comm_t");
    EXPECT_ERR(spools_layout_units(NULL, NULL), SPOOLS_ERR_INVALID_ARG, "spools_layout_t");
    EXPECT_ERR(spools_pipe_write(NULL, "x", 1), SPOOLS_ERR_INVALID_ARG, "spools_pipe_t");
    EXPECT_ERR(spools_region_key(NULL, &r), SPOOLS_ERR_INVALID_ARG, "spools_region_t");
    EXPECT_ERR(spools_cancel(NULL, NULL), SPOOLS_ERR_INVALID_ARG, "spools_request_t");
    EXPECT_ERR(spools_wait(NULL, NULL), SPOOLS_ERR_INVALID_ARG, "req");
    EXPECT_ERR(spools_waitall(2, NULL, NULL), SPOOLS_ERR_INVALID_ARG, "reqs");
    EXPECT_ERR(spools_config_string(ct_world, NULL, 0, NULL), SPOOLS_ERR_TRUNCATED, "bytes");
    EXPECT_ERR(spools_world_same_host(ct_world, 0, NULL), SPOOLS_ERR_INVALID_ARG, "same");

    /* Every rank of this job runs on this host. */
    for (uint32_t p = 0; p < ct_size; p++) {
        int32_t same = -1;
        CHECK(spools_world_same_host(ct_world, p, &same));
        ASSERT(same == 1, "rank %u: same_host %d", p, same);
    }

    /* The world's communicator belongs to the world. */
    EXPECT_ERR(spools_comm_destroy(ct_comm), SPOOLS_ERR_INVALID_ARG, "world");
    CHECK(spools_comm_rank(ct_comm, &r)); /* still usable */
    ASSERT(r == ct_rank, "rank %u", r);

    /* A destroyed handle is caught (its memory not yet reused by anything else). */
    spools_layout_t *l = NULL;
    CHECK(spools_layout_parse("u8[16] block on 2", &l));
    CHECK(spools_layout_destroy(l));
    uint64_t units;
    EXPECT_ERR(spools_layout_units(l, &units), SPOOLS_ERR_INVALID_ARG, "not a live one");
    CHECK(spools_layout_destroy(NULL)); /* NULL: nothing to do */
    EXPECT_ERR(spools_abort(NULL, "no world"), SPOOLS_ERR_INVALID_ARG, "spools_world_t");
    last_message();
    OK("handles");
}

/* A user operator (never run here). */
static void first_fn(const void *in, void *inout, size_t n, spools_dtype_t dt, void *ctx)
{
    (void)in;
    (void)inout;
    (void)n;
    (void)dt;
    (void)ctx;
}

static void args(void)
{
    uint32_t n = ct_size, peer = (ct_rank + 1) % n;
    int32_t x[4] = {1, 2, 3, 4}, y[4];
    spools_request_t *req = NULL;
    spools_msg_status_t st;

    /* NULL buffers with a length. */
    EXPECT_ERR(spools_send(ct_comm, NULL, 10, peer, 0), SPOOLS_ERR_INVALID_ARG, "buf");
    EXPECT_ERR(spools_recv(ct_comm, NULL, 10, 0, 0, &st), SPOOLS_ERR_INVALID_ARG, "buf");
    EXPECT_ERR(spools_isend(ct_comm, x, sizeof x, peer, 0, NULL), SPOOLS_ERR_INVALID_ARG, "req");
    /* Collectives: every rank makes the same mistake and fails alone, at once. */
    EXPECT_ERR(spools_allreduce(ct_comm, NULL, y, 4, SPOOLS_DTYPE_I32, SPOOLS_OP_SUM),
               SPOOLS_ERR_INVALID_ARG, "send");
    EXPECT_ERR(spools_bcast(ct_comm, NULL, 4, SPOOLS_DTYPE_I32, 0), SPOOLS_ERR_INVALID_ARG,
               "buf");
    /* A misaligned buffer for 8-byte elements. */
    double d[3];
    EXPECT_ERR(spools_allreduce(ct_comm, (char *)d + 1, d, 1, SPOOLS_DTYPE_F64, SPOOLS_OP_SUM),
               SPOOLS_ERR_INVALID_ARG, "aligned");

    /* A bad dtype and a bad op. */
    EXPECT_ERR(spools_allreduce(ct_comm, x, y, 4, 99, SPOOLS_OP_SUM), SPOOLS_ERR_INVALID_ARG,
               "dtype 99");
    EXPECT_ERR(spools_bcast(ct_comm, x, 4, 0, 0), SPOOLS_ERR_INVALID_ARG, "dtype 0");
    EXPECT_ERR(spools_allreduce(ct_comm, x, y, 4, SPOOLS_DTYPE_I32, 77), SPOOLS_ERR_INVALID_ARG,
               "op 77");
    EXPECT_ERR(spools_reduce(ct_comm, x, y, 4, SPOOLS_DTYPE_I32, 0, 0), SPOOLS_ERR_INVALID_ARG,
               "op 0");
    EXPECT_ERR(spools_op_destroy(SPOOLS_OP_SUM), SPOOLS_ERR_INVALID_ARG, "op 1");
    spools_op_t op;
    EXPECT_ERR(spools_op_create(first_fn, NULL, 1, NULL), SPOOLS_ERR_INVALID_ARG, "op");
    EXPECT_ERR(spools_op_create(NULL, NULL, 1, &op), SPOOLS_ERR_INVALID_ARG, "fn");
    /* A user operator used after it was destroyed, and destroyed twice. */
    char opname[32];
    CHECK(spools_op_create(first_fn, NULL, 0, &op));
    CHECK(spools_op_destroy(op));
    snprintf(opname, sizeof opname, "op %u", op);
    EXPECT_ERR(spools_allreduce(ct_comm, x, y, 4, SPOOLS_DTYPE_I32, op), SPOOLS_ERR_INVALID_ARG,
               opname);
    EXPECT_ERR(spools_op_destroy(op), SPOOLS_ERR_INVALID_ARG, opname);

    /* Negative tags and sources (other than the wildcards). */
    EXPECT_ERR(spools_send(ct_comm, x, sizeof x, peer, -5), SPOOLS_ERR_INVALID_ARG, "tag");
    EXPECT_ERR(spools_recv(ct_comm, y, sizeof y, 0, -2, &st), SPOOLS_ERR_INVALID_ARG, "tag -2");
    EXPECT_ERR(spools_irecv(ct_comm, y, sizeof y, -3, 0, &req), SPOOLS_ERR_INVALID_ARG,
               "source -3");
    EXPECT_ERR(spools_probe(ct_comm, 0, -7, &st), SPOOLS_ERR_INVALID_ARG, "tag -7");
    EXPECT_ERR(spools_isend(ct_comm, x, sizeof x, peer, -1, &req), SPOOLS_ERR_INVALID_ARG,
               "tag");

    /* Ranks outside the communicator. */
    char bad[16];
    snprintf(bad, sizeof bad, "%u", n + 5);
    EXPECT_ERR(spools_send(ct_comm, x, sizeof x, n + 5, 0), SPOOLS_ERR_INVALID_ARG, bad);
    EXPECT_ERR(spools_recv(ct_comm, y, sizeof y, (int32_t)(n + 5), 0, &st),
               SPOOLS_ERR_INVALID_ARG, bad);
    EXPECT_ERR(spools_isend(ct_comm, x, sizeof x, n + 5, 0, &req), SPOOLS_ERR_INVALID_ARG, bad);
    EXPECT_ERR(spools_bcast(ct_comm, x, 4, SPOOLS_DTYPE_I32, n + 5), SPOOLS_ERR_INVALID_ARG,
               bad);
    EXPECT_ERR(spools_reduce(ct_comm, x, y, 4, SPOOLS_DTYPE_I32, SPOOLS_OP_SUM, n + 5),
               SPOOLS_ERR_INVALID_ARG, bad);
    EXPECT_ERR(spools_world_same_host(ct_world, n + 5, &(int32_t){0}), SPOOLS_ERR_INVALID_ARG,
               bad);
    EXPECT_ERR(spools_rpc_call(ct_comm, n + 5, "f", NULL, 0, NULL, 0, NULL),
               SPOOLS_ERR_INVALID_ARG, bad);
    uint64_t words[4] = {0, 0, 0, 0};
    EXPECT_ERR(spools_am_send_short(ct_world, n + 5, 0, words, 0, 0), SPOOLS_ERR_INVALID_ARG,
               bad);

    /* Bad colors, flags, handler ids. */
    spools_comm_t *nc = NULL;
    EXPECT_ERR(spools_comm_split(ct_comm, -5, 0, &nc), SPOOLS_ERR_INVALID_ARG, "color -5");
    EXPECT_ERR(spools_am_send_short(ct_world, peer, 0, words, 0, 0x80), SPOOLS_ERR_INVALID_ARG,
               "flags");
    EXPECT_ERR(spools_am_send_short(ct_world, peer, 123456, words, 0, 0),
               SPOOLS_ERR_INVALID_ARG, "123456");
    EXPECT_ERR(spools_am_register(ct_world, "h", NULL, NULL), SPOOLS_ERR_INVALID_ARG, "NULL");

    /* A string that is not UTF-8. */
    spools_layout_t *l = NULL;
    EXPECT_ERR(spools_layout_parse("u8[4] block on \xff", &l), SPOOLS_ERR_INVALID_ARG, "UTF-8");
    OK("args");
}

static void layout(void)
{
    spools_layout_t *l = NULL;
    /* The parser says where and why. */
    EXPECT_ERR(spools_layout_parse("f64[3] block(1) on 2", &l), SPOOLS_ERR_LAYOUT, "block(1)");
    EXPECT_ERR(spools_layout_parse("f64[3] block(1) on 2", &l), SPOOLS_ERR_LAYOUT, "column");
    EXPECT_ERR(spools_layout_parse("f64[4,4] blok,* on 2x1", &l), SPOOLS_ERR_LAYOUT, "column");
    EXPECT_ERR(spools_layout_parse("q64[4] block on 2", &l), SPOOLS_ERR_LAYOUT, "column");
    EXPECT_ERR(spools_layout_parse("", &l), SPOOLS_ERR_LAYOUT, "column");
    EXPECT_ERR(spools_layout_parse(NULL, &l), SPOOLS_ERR_INVALID_ARG, "spec");
    EXPECT_ERR(spools_layout_parse("u8[4] block on 2", NULL), SPOOLS_ERR_INVALID_ARG, "layout");

    /* A stripe without size= has no total size. */
    uint64_t b;
    CHECK(spools_layout_parse("stripe(unit=4KiB,count=3)", &l));
    EXPECT_ERR(spools_layout_total_bytes(l, &b), SPOOLS_ERR_LAYOUT, "size");
    EXPECT_ERR(spools_layout_local_bytes(l, 0, &b), SPOOLS_ERR_LAYOUT, "size");
    CHECK(spools_layout_destroy(l));

    /* Redistributions the layouts do not allow: every rank fails the same way. */
    char spec[64];
    spools_layout_t *a, *other, *toomany;
    snprintf(spec, sizeof spec, "f64[8,4] block,* on %ux1", ct_size);
    CHECK(spools_layout_parse(spec, &a));
    snprintf(spec, sizeof spec, "f64[8,5] block,* on %ux1", ct_size);
    CHECK(spools_layout_parse(spec, &other));
    snprintf(spec, sizeof spec, "f64[8,4] block,* on %ux1", ct_size + 1);
    CHECK(spools_layout_parse(spec, &toomany));
    uint64_t la, lo, lt;
    CHECK(spools_layout_local_bytes(a, ct_rank, &la));
    CHECK(spools_layout_local_bytes(other, ct_rank, &lo));
    CHECK(spools_layout_local_bytes(toomany, ct_rank, &lt));
    double *sa = ct_alloc((size_t)la + 8), *so = ct_alloc((size_t)lo + 8),
           *st = ct_alloc((size_t)lt + 8);
    memset(sa, 0, (size_t)la + 8);
    EXPECT_ERR(spools_redistribute(ct_world, sa, (size_t)la, a, so, (size_t)lo, other),
               SPOOLS_ERR_LAYOUT, "320 bytes");
    EXPECT_ERR(spools_redistribute(ct_world, sa, (size_t)la, a, st, (size_t)lt, toomany),
               SPOOLS_ERR_LAYOUT, "units");
    /* Buffers smaller than this rank's share (8 bytes short). */
    EXPECT_ERR(spools_redistribute(ct_world, sa, (size_t)la - 8, a, so, (size_t)la, a),
               SPOOLS_ERR_LAYOUT, "bytes");
    EXPECT_ERR(spools_redistribute(ct_world, sa, (size_t)la, a, so, (size_t)la - 8, a),
               SPOOLS_ERR_LAYOUT, "bytes");
    char path[512];
    snprintf(path, sizeof path, "%s/wrong-share.bin", dir);
    EXPECT_ERR(spools_write_file(ct_world, path, sa, (size_t)la - 8, a, NULL), SPOOLS_ERR_LAYOUT,
               "bytes");
    /* A NULL buffer on the last rank only: it declines its part, and every rank gets its
     * status and message (nothing waits for it). */
    const void *maybe = ct_rank == ct_size - 1 ? NULL : (const void *)sa;
    CHECK(spools_write_file(ct_world, path, sa, (size_t)la, a, NULL));
    EXPECT_ERR(spools_write_file(ct_world, path, maybe, (size_t)la, a, NULL),
               SPOOLS_ERR_INVALID_ARG, "is NULL with a");
    EXPECT_ERR(spools_read_file(ct_world, path, (void *)maybe, (size_t)la, a, NULL),
               SPOOLS_ERR_INVALID_ARG, "is NULL with a");
    EXPECT_ERR(spools_redistribute(ct_world, maybe, (size_t)la, a, so, (size_t)la, a),
               SPOOLS_ERR_INVALID_ARG, "is NULL with a");
    /* A bad format option. */
    spools_write_params_t p = SPOOLS_WRITE_PARAMS_DEFAULT;
    p.field_mask |= SPOOLS_WRITE_FIELD_FORMAT;
    p.format = "zip";
    EXPECT_ERR(spools_write_file(ct_world, path, sa, (size_t)la, a, &p), SPOOLS_ERR_INVALID_ARG,
               "zip");
    p.format = NULL;
    EXPECT_ERR(spools_write_file(ct_world, path, sa, (size_t)la, a, &p), SPOOLS_ERR_INVALID_ARG,
               "format");
    /* A bad pipe name (refused before any meeting). */
    spools_pipe_t *pipe = NULL;
    EXPECT_ERR(spools_pipe_open_writer(ct_world, "bogus:thing", a, &pipe),
               SPOOLS_ERR_INVALID_ARG, "bogus");
    ASSERT(pipe == NULL, "a failed open set the pipe");
    free(sa);
    free(so);
    free(st);
    CHECK(spools_layout_destroy(a));
    CHECK(spools_layout_destroy(other));
    CHECK(spools_layout_destroy(toomany));
    OK("layout");
}

static int32_t noop_rpc(const void *a, size_t len, spools_rpc_reply_t *r, void *ctx)
{
    (void)a;
    (void)len;
    (void)r;
    (void)ctx;
    return 0;
}

static void not_found(void)
{
    uint32_t peer = (ct_rank + 1) % ct_size;
    /* An RPC function nobody registered (while another one is). */
    CHECK(spools_rpc_register(ct_comm, "known", noop_rpc, NULL));
    EXPECT_ERR(spools_rpc_register(ct_comm, "known", noop_rpc, NULL), SPOOLS_ERR_INVALID_ARG,
               "known");
    CHECK(spools_barrier(ct_comm));
    EXPECT_ERR(spools_rpc_call(ct_comm, peer, "no_such_function", "x", 1, NULL, 0, NULL),
               SPOOLS_ERR_NOT_FOUND, "no_such_function");
    CHECK(spools_rpc_call(ct_comm, peer, "known", NULL, 0, NULL, 0, NULL));
    /* A handler name not in the table. */
    uint32_t id;
    EXPECT_ERR(spools_am_handler_id(ct_world, "no_such_handler", &id), SPOOLS_ERR_NOT_FOUND,
               "no_such_handler");
    /* A region key nobody made. */
    uint8_t buf[8];
    EXPECT_ERR(spools_get(ct_world, peer, 987654, 0, buf, sizeof buf), SPOOLS_ERR_NOT_FOUND,
               "987654");
    CHECK(spools_barrier(ct_comm)); /* the RPCs above are served before anyone moves on */
    OK("not-found");
}

/* XORs one byte of `path` at `off` with 0xff. */
static void flip(const char *path, long off)
{
    int fd = open(path, O_RDWR);
    ASSERT(fd >= 0, "cannot open %s", path);
    unsigned char b;
    ASSERT(pread(fd, &b, 1, off) == 1, "cannot read %s", path);
    b ^= 0xff;
    ASSERT(pwrite(fd, &b, 1, off) == 1, "cannot write %s", path);
    close(fd);
}

/* A 4096-element i64 array in blocks over the ranks, element g = 3g + 1: the layout,
 * this rank's share (`mine`), a buffer as large (`back`) and their length in bytes. */
static spools_layout_t *int_array(int64_t **mine, int64_t **back, uint64_t *len)
{
    char spec[64];
    spools_layout_t *l;
    snprintf(spec, sizeof spec, "i64[4096] block on %u", ct_size);
    CHECK(spools_layout_parse(spec, &l));
    CHECK(spools_layout_local_bytes(l, ct_rank, len));
    size_t n = (size_t)*len / 8, b = (4096 + ct_size - 1) / ct_size;
    *mine = ct_alloc((size_t)*len);
    *back = ct_alloc((size_t)*len);
    for (size_t i = 0; i < n; i++)
        (*mine)[i] = (int64_t)(ct_rank * b + i) * 3 + 1;
    return l;
}

/* Reading a file that does not exist: every rank gets SPOOLS_ERR_NOT_FOUND naming it
 * (a collective call: every rank must be able to take the same branch). */
static void missing_file(void)
{
    char path[512];
    int64_t *mine, *back;
    uint64_t len;
    spools_layout_t *l = int_array(&mine, &back, &len);
    snprintf(path, sizeof path, "%s/missing-file.bin", dir);
    EXPECT_ERR(spools_read_file(ct_world, path, back, (size_t)len, l, NULL),
               SPOOLS_ERR_NOT_FOUND, "missing-file.bin");
    /* The job goes on: the same layout reads a file that exists. */
    snprintf(path, sizeof path, "%s/present.bin", dir);
    CHECK(spools_write_file(ct_world, path, mine, (size_t)len, l, NULL));
    CHECK(spools_read_file(ct_world, path, back, (size_t)len, l, NULL));
    ASSERT(memcmp(mine, back, (size_t)len) == 0, "present.bin read back differently");
    free(mine);
    free(back);
    CHECK(spools_layout_destroy(l));
    OK("missing-file");
}

/* A canonical file with checksums; rank 0 flips the low byte of element 1000. */
static void damaged_sums(void)
{
    char path[512];
    int64_t *mine, *back;
    uint64_t len;
    spools_layout_t *l = int_array(&mine, &back, &len);
    size_t n = (size_t)len / 8, b = (4096 + ct_size - 1) / ct_size;
    spools_write_params_t wp = SPOOLS_WRITE_PARAMS_DEFAULT;
    wp.field_mask |= SPOOLS_WRITE_FIELD_CHECKSUMS;
    wp.checksums = 1;
    snprintf(path, sizeof path, "%s/sums.bin", dir);
    CHECK(spools_write_file(ct_world, path, mine, (size_t)len, l, &wp));
    if (ct_rank == 0)
        flip(path, 1000 * 8);
    CHECK(spools_barrier(ct_comm));
    spools_read_params_t rp = SPOOLS_READ_PARAMS_DEFAULT;
    rp.field_mask |= SPOOLS_READ_FIELD_CHECKSUMS;
    rp.checksums = 1;
    EXPECT_ERR(spools_read_file(ct_world, path, back, (size_t)len, l, &rp), SPOOLS_ERR_DAMAGED,
               "CRC32C");
    EXPECT_ERR(spools_read_file(ct_world, path, back, (size_t)len, l, &rp), SPOOLS_ERR_DAMAGED,
               "sums.bin");
    /* Without checksums the damage goes through: the byte really was flipped. */
    CHECK(spools_read_file(ct_world, path, back, (size_t)len, l, NULL));
    for (size_t i = 0; i < n; i++) {
        size_t g = ct_rank * b + i;
        int64_t want = (int64_t)g * 3 + 1;
        if (g == 1000)
            want = (int64_t)((uint64_t)want ^ 0xff);
        ASSERT(back[i] == want, "element %zu is %lld", g, (long long)back[i]);
    }
    free(mine);
    free(back);
    CHECK(spools_layout_destroy(l));
    OK("damaged-sums");
}

/* RAID-5 over 3 units of 4 KiB: row 0 holds data on units 0 and 1 (parity on 2). Both
 * data blocks of row 0 damaged: parity cannot rebuild them; every rank gets
 * SPOOLS_ERR_DAMAGED. */
static void damaged_raid5(void)
{
    char path[512];
    int64_t *mine, *back;
    uint64_t len;
    spools_layout_t *l = int_array(&mine, &back, &len);
    spools_write_params_t r5 = SPOOLS_WRITE_PARAMS_DEFAULT;
    r5.field_mask |= SPOOLS_WRITE_FIELD_FORMAT;
    r5.format = "raid5(unit=4KiB,count=3)";
    snprintf(path, sizeof path, "%s/two.raid5", dir);
    CHECK(spools_write_file(ct_world, path, mine, (size_t)len, l, &r5));
    if (ct_rank == 0) {
        for (int u = 0; u < 2; u++) {
            char unit[600];
            int done = 0;
            for (int s = 0; s < 2 && !done; s++) {
                snprintf(unit, sizeof unit, "%s.u%d.s%d", path, u, s);
                if (access(unit, F_OK) == 0) {
                    flip(unit, 8);
                    done = 1;
                }
            }
            ASSERT(done, "no unit file %s.u%d.s*", path, u);
        }
    }
    CHECK(spools_barrier(ct_comm));
    EXPECT_ERR(spools_read_file(ct_world, path, back, (size_t)len, l, NULL), SPOOLS_ERR_DAMAGED,
               "lost");
    free(mine);
    free(back);
    CHECK(spools_layout_destroy(l));
    OK("damaged-raid5");
}

/* Buffers 8 bytes longer than this rank's share: "not this rank's share" (the header's
 * SPOOLS_ERR_LAYOUT for redistribute, write_file and read_file), refused like shorter
 * ones rather than read or written in part. */
static void oversized_shares(void)
{
    char spec[64], path[512];
    spools_layout_t *a;
    snprintf(spec, sizeof spec, "f64[8,4] block,* on %ux1", ct_size);
    CHECK(spools_layout_parse(spec, &a));
    uint64_t la;
    CHECK(spools_layout_local_bytes(a, ct_rank, &la));
    double *src = ct_alloc((size_t)la + 8), *dst = ct_alloc((size_t)la + 8);
    memset(src, 0, (size_t)la + 8);
    snprintf(path, sizeof path, "%s/exact.bin", dir);
    CHECK(spools_write_file(ct_world, path, src, (size_t)la, a, NULL));
    /* Every call is made (they are collective: all ranks make the same ones), then the
     * ones that took the oversized buffer are named together. */
    spools_status_t got[4];
    const char *calls[4] = {"spools_redistribute (src)", "spools_redistribute (dst)",
                            "spools_write_file", "spools_read_file"};
    got[0] = spools_redistribute(ct_world, src, (size_t)la + 8, a, dst, (size_t)la, a);
    got[1] = spools_redistribute(ct_world, src, (size_t)la, a, dst, (size_t)la + 8, a);
    got[2] = spools_write_file(ct_world, path, src, (size_t)la + 8, a, NULL);
    got[3] = spools_read_file(ct_world, path, dst, (size_t)la + 8, a, NULL);
    char took[256] = "";
    for (int i = 0; i < 4; i++)
        if (got[i] != SPOOLS_ERR_LAYOUT)
            snprintf(took + strlen(took), sizeof took - strlen(took), "%s%s gave %s",
                     took[0] ? "; " : "", calls[i], ct_status_name((int)got[i]));
    ASSERT(took[0] == '\0', "buffers 8 bytes longer than the share (%llu bytes), expected "
           "SPOOLS_ERR_LAYOUT: %s", (unsigned long long)la, took);
    /* Each refusal names the sizes. */
    EXPECT_ERR(spools_read_file(ct_world, path, dst, (size_t)la + 8, a, NULL), SPOOLS_ERR_LAYOUT,
               "bytes");
    free(src);
    free(dst);
    CHECK(spools_layout_destroy(a));
    OK("oversized-shares");
}

/* The outcome of a call given one buffer as both input and output: the header does not
 * forbid it, so it either works (the result checked by the caller, `right`) or is
 * refused with SPOOLS_ERR_INVALID_ARG; never a crash. */
static void aliased_one(const char *what, spools_status_t s, int right)
{
    char m[128];
    if (s == SPOOLS_OK) {
        ASSERT(right, "%s with one buffer for both: SPOOLS_OK but a wrong result", what);
        return;
    }
    snprintf(m, sizeof m, "%s (one buffer for both)", what);
    ct_expect_err(s, SPOOLS_ERR_INVALID_ARG, "", m, __LINE__);
}

static void aliased_buffers(void)
{
    uint32_t n = ct_size, me = ct_rank;
    int64_t v[8], want = 0;
    for (uint32_t r = 0; r < n; r++)
        want += r + 1;
    for (int i = 0; i < 8; i++)
        v[i] = me + 1;
    /* The call first: C leaves the order of a call's arguments unspecified. */
    spools_status_t s = spools_allreduce(ct_comm, v, v, 8, SPOOLS_DTYPE_I64, SPOOLS_OP_SUM);
    aliased_one("spools_allreduce", s, v[0] == want && v[7] == want);
    for (int i = 0; i < 8; i++)
        v[i] = me + 1;
    s = spools_scan(ct_comm, v, v, 8, SPOOLS_DTYPE_I64, SPOOLS_OP_SUM);
    aliased_one("spools_scan", s, v[0] == (int64_t)((me + 1) * (me + 2) / 2));
    for (int i = 0; i < 8; i++)
        v[i] = me + 1;
    s = spools_reduce(ct_comm, v, v, 8, SPOOLS_DTYPE_I64, SPOOLS_OP_SUM, 0);
    aliased_one("spools_reduce", s, me != 0 || v[0] == want);
    int64_t a[64];
    int right = 1;
    ASSERT(n <= 32, "at most 32 ranks");
    for (uint32_t j = 0; j < n; j++)
        for (uint32_t i = 0; i < 2; i++)
            a[j * 2 + i] = me * 100 + j * 10 + i;
    spools_status_t st = spools_alltoall(ct_comm, a, a, 2, SPOOLS_DTYPE_I64);
    for (uint32_t p = 0; p < n; p++)
        for (uint32_t i = 0; i < 2; i++)
            right &= a[p * 2 + i] == p * 100 + me * 10 + i;
    aliased_one("spools_alltoall", st, right);
    /* The same layout on both sides, one buffer. */
    char spec[64];
    spools_layout_t *l;
    snprintf(spec, sizeof spec, "i64[%u] block on %u", 8 * n, n);
    CHECK(spools_layout_parse(spec, &l));
    for (int i = 0; i < 8; i++)
        v[i] = me * 8 + (uint32_t)i;
    s = spools_redistribute(ct_world, v, sizeof v, l, v, sizeof v, l);
    aliased_one("spools_redistribute", s, v[0] == me * 8 && v[7] == me * 8 + 7);
    CHECK(spools_layout_destroy(l));
    OK("aliased-buffers");
}

/* Rank 0 makes `DIR/name` a Zarr array directory holding only a zarr.json of an
 * i64[4096] array with `codecs` and `fill`; every rank waits for it. */
static void foreign_zarr(const char *name, const char *codecs, const char *fill, char *path,
                         size_t size)
{
    snprintf(path, size, "%s/%s", dir, name);
    if (ct_rank == 0) {
        char meta[600];
        ASSERT(mkdir(path, 0755) == 0, "cannot make %s", path);
        snprintf(meta, sizeof meta, "%s/zarr.json", path);
        FILE *f = fopen(meta, "w");
        ASSERT(f != NULL, "cannot create %s", meta);
        fprintf(f,
                "{\"zarr_format\":3,\"node_type\":\"array\",\"shape\":[4096],"
                "\"data_type\":\"int64\",\"chunk_grid\":{\"name\":\"regular\","
                "\"configuration\":{\"chunk_shape\":[1024]}},\"fill_value\":%s,"
                "\"codecs\":%s}\n",
                fill, codecs);
        ASSERT(fclose(f) == 0, "cannot write %s", meta);
    }
    CHECK(spools_barrier(ct_comm));
}

/* One status per kind of file failure; every rank gets the same. */
static void file_kinds(void)
{
    char path[512];
    int64_t *mine, *back;
    uint64_t len;
    spools_layout_t *l = int_array(&mine, &back, &len);
    spools_write_params_t wp = SPOOLS_WRITE_PARAMS_DEFAULT;
    wp.field_mask |= SPOOLS_WRITE_FIELD_FORMAT;

    /* Unsupported: a well-formed array with a codec Spools does not implement. */
    foreign_zarr("blosc.zarr",
                 "[{\"name\":\"bytes\",\"configuration\":{\"endian\":\"little\"}},"
                 "{\"name\":\"blosc\",\"configuration\":{\"cname\":\"lz4\"}}]",
                 "0", path, sizeof path);
    EXPECT_ERR(spools_read_file(ct_world, path, back, (size_t)len, l, NULL),
               SPOOLS_ERR_UNSUPPORTED, "blosc");
    /* Unsupported: bytes(3) in shards, which zarr-python cannot read. */
    {
        char spec[64];
        spools_layout_t *b;
        uint64_t blen;
        snprintf(spec, sizeof spec, "bytes(3)[%u,4] block,* on %ux1", 2 * ct_size, ct_size);
        CHECK(spools_layout_parse(spec, &b));
        CHECK(spools_layout_local_bytes(b, ct_rank, &blen));
        unsigned char *bytes = ct_alloc((size_t)blen);
        memset(bytes, 7, (size_t)blen);
        wp.format = "zarr(chunk=1x4,shard=2x4)";
        snprintf(path, sizeof path, "%s/sharded-bytes.zarr", dir);
        EXPECT_ERR(spools_write_file(ct_world, path, bytes, (size_t)blen, b, &wp),
                   SPOOLS_ERR_UNSUPPORTED, "shard");
        /* Unsharded, it is written. */
        wp.format = "zarr(chunk=1x4)";
        CHECK(spools_write_file(ct_world, path, bytes, (size_t)blen, b, &wp));
        free(bytes);
        CHECK(spools_layout_destroy(b));
    }
    /* A bad argument: a zarr(...) spec of two dimensions for a one-dimensional array. */
    wp.format = "zarr(chunk=64x64)";
    snprintf(path, sizeof path, "%s/bad-spec.zarr", dir);
    EXPECT_ERR(spools_write_file(ct_world, path, mine, (size_t)len, l, &wp),
               SPOOLS_ERR_INVALID_ARG, "chunk shape");
    /* Unavailable: HDF5 with no libhdf5 to load (the test names a missing one in
     * SPOOLS_HDF5_LIB), or a library built without HDF5. */
    wp.format = "hdf5(data)";
    snprintf(path, sizeof path, "%s/a.h5", dir);
    EXPECT_ERR(spools_write_file(ct_world, path, mine, (size_t)len, l, &wp),
               SPOOLS_ERR_UNAVAILABLE, "HDF5");
    /* Damaged: metadata that contradicts itself (a fill value no int64 holds). */
    foreign_zarr("bad-fill.zarr", "[{\"name\":\"bytes\"}]", "\"zero\"", path, sizeof path);
    EXPECT_ERR(spools_read_file(ct_world, path, back, (size_t)len, l, NULL),
               SPOOLS_ERR_DAMAGED, "fill value");
    free(mine);
    free(back);
    CHECK(spools_layout_destroy(l));
    OK("file-kinds");
}

/* Arguments wrong on one rank only: nothing waits for that rank, every rank fails. */
static void declined(void)
{
    char path[512];
    int64_t *mine, *back;
    uint64_t len;
    spools_layout_t *l = int_array(&mine, &back, &len);
    uint32_t last = ct_size - 1;
    int is_last = ct_rank == last;
    snprintf(path, sizeof path, "%s/declined.bin", dir);
    CHECK(spools_write_file(ct_world, path, mine, (size_t)len, l, NULL));
    /* A NULL layout handle on the last rank, then on rank 0. */
    EXPECT_ERR(spools_write_file(ct_world, path, mine, (size_t)len, is_last ? NULL : l, NULL),
               SPOOLS_ERR_INVALID_ARG, "spools_layout_t");
    EXPECT_ERR(spools_write_file(ct_world, path, mine, (size_t)len, ct_rank == 0 ? NULL : l,
                                 NULL),
               SPOOLS_ERR_INVALID_ARG, "spools_layout_t");
    /* A read: the declining rank's placeholder layout is of another size than the file,
     * which spools_io's one-file read checks before it looks at the declined part (and
     * then compares): the others may get SPOOLS_ERR_LAYOUT naming the last rank instead
     * of its status. Either way every rank fails, and nothing waits. */
    char rank_name[32];
    snprintf(rank_name, sizeof rank_name, "rank %u", last);
    spools_status_t st =
        spools_read_file(ct_world, path, back, (size_t)len, is_last ? NULL : l, NULL);
    if (is_last || st != SPOOLS_ERR_LAYOUT)
        ct_expect_err(st, SPOOLS_ERR_INVALID_ARG, is_last ? "spools_layout_t" : rank_name,
                      "spools_read_file (a NULL layout on the last rank)", __LINE__);
    else
        ct_expect_err(st, SPOOLS_ERR_LAYOUT, rank_name,
                      "spools_read_file (a NULL layout on the last rank)", __LINE__);
    EXPECT_ERR(spools_redistribute(ct_world, mine, (size_t)len, is_last ? NULL : l, back,
                                   (size_t)len, l),
               SPOOLS_ERR_INVALID_ARG, "spools_layout_t");
    EXPECT_ERR(spools_redistribute(ct_world, mine, (size_t)len, l, back, (size_t)len,
                                   ct_rank == 0 ? NULL : l),
               SPOOLS_ERR_INVALID_ARG, "spools_layout_t");
    /* A NULL path, a format that does not parse, on the last rank. */
    EXPECT_ERR(spools_write_file(ct_world, is_last ? NULL : path, mine, (size_t)len, l, NULL),
               SPOOLS_ERR_INVALID_ARG, "path");
    spools_write_params_t p = SPOOLS_WRITE_PARAMS_DEFAULT;
    p.field_mask |= SPOOLS_WRITE_FIELD_FORMAT;
    p.format = is_last ? "zip" : "canonical";
    EXPECT_ERR(spools_write_file(ct_world, path, mine, (size_t)len, l, &p),
               SPOOLS_ERR_INVALID_ARG, "zip");
    /* A pipe's opening with a NULL layout handle on the last rank: it fails on every rank
     * before any meeting (no consumer is started: a rank that met alone would wait). */
    spools_pipe_t *pipe = NULL;
    char name[64];
    snprintf(name, sizeof name, "pipe:declined-%d", (int)getpid());
    CHECK(spools_bcast(ct_comm, name, sizeof name, SPOOLS_DTYPE_U8, 0));
    st = spools_pipe_open_writer(ct_world, name, is_last ? NULL : l, &pipe);
    if (is_last)
        ct_expect_err(st, SPOOLS_ERR_INVALID_ARG, "spools_layout_t", "spools_pipe_open_writer",
                      __LINE__);
    else
        ct_expect_err(st, SPOOLS_ERR_INVALID_ARG, rank_name, "spools_pipe_open_writer", __LINE__);
    ASSERT(pipe == NULL, "a failed open set the pipe");
    st = spools_pipe_open_reader(ct_world, name, is_last ? NULL : l, &pipe);
    if (is_last)
        ct_expect_err(st, SPOOLS_ERR_INVALID_ARG, "spools_layout_t", "spools_pipe_open_reader",
                      __LINE__);
    else
        ct_expect_err(st, SPOOLS_ERR_INVALID_ARG, rank_name, "spools_pipe_open_reader", __LINE__);
    ASSERT(pipe == NULL, "a failed open set the pipe");
    /* The calls still meet: the file is the one first written. */
    CHECK(spools_read_file(ct_world, path, back, (size_t)len, l, NULL));
    ASSERT(memcmp(mine, back, (size_t)len) == 0, "declined.bin read back differently");
    free(mine);
    free(back);
    CHECK(spools_layout_destroy(l));
    OK("declined");
}

int main(int argc, char **argv)
{
    ct_prog = "errors";
    if (argc != 3) {
        fprintf(stderr, "usage: errors DIR api|missing-file|damaged-sums|damaged-raid5|"
                        "oversized-shares|aliased-buffers|file-kinds|declined\n");
        return 2;
    }
    dir = argv[1];
    const char *section = argv[2];
    version(); /* before spools_init: these need no runtime */
    init();
    if (strcmp(section, "api") == 0) {
        handles();
        args();
        layout();
        not_found();
    } else if (strcmp(section, "missing-file") == 0) {
        missing_file();
    } else if (strcmp(section, "damaged-sums") == 0) {
        damaged_sums();
    } else if (strcmp(section, "damaged-raid5") == 0) {
        damaged_raid5();
    } else if (strcmp(section, "oversized-shares") == 0) {
        oversized_shares();
    } else if (strcmp(section, "aliased-buffers") == 0) {
        aliased_buffers();
    } else if (strcmp(section, "file-kinds") == 0) {
        file_kinds();
    } else if (strcmp(section, "declined") == 0) {
        declined();
    } else {
        ASSERT(0, "unknown section %s", section);
    }

    /* Finalize: NULL is refused; afterwards spools_init refuses to start again. */
    EXPECT_ERR(spools_finalize(NULL), SPOOLS_ERR_INVALID_ARG, "spools_world_t");
    ct_finalize();
    spools_init_params_t params = SPOOLS_INIT_PARAMS_DEFAULT;
    spools_world_t *w = NULL;
    EXPECT_ERR(spools_init(&params, &w), SPOOLS_ERR_INVALID_ARG, "already");
    OK("finalize");
    return 0;
}
