/*
 * pipe_producer.c NAME K ROWS COLS [--refusals]: the C end of the pipe tests (any number
 * of ranks; run with 3). Writes K records of a ROWS x COLS f64 dataset into "pipe:NAME",
 * rows in blocks over the ranks ("f64[ROWS,COLS] block,* on Nx1"); record k holds
 *   element (i, j) = 1000 k + i*COLS + j.
 * The consumer (examples/pipe_consumer.rs or pipe_reader.c, another job) reads it with
 * columns dealt cyclically over its own ranks and checks every value.
 *
 * Printed by every rank:
 *   ok refused   (with --refusals, before the records) wrong calls are refused and send
 *                nothing: shares 8 bytes too short (too long where a rank holds none)
 *                and 8 bytes too long (SPOOLS_ERR_INVALID_ARG: "a share of the wrong
 *                size"), a read on a writer, a NULL pipe; and a wrong share or a NULL
 *                buffer on the last rank only, which fails the record on every rank (the
 *                others' message names that rank) and sends nothing
 *   ok wrote K   after the K records, spools_pipe_records = K and the pipe closed
 */
#include "ctest.h"

int main(int argc, char **argv)
{
    ct_init("pipe_producer");
    ASSERT(argc == 5 || (argc == 6 && strcmp(argv[5], "--refusals") == 0),
           "usage: pipe_producer NAME K ROWS COLS [--refusals]");
    char name[256], spec[128];
    snprintf(name, sizeof name, "pipe:%s", argv[1]);
    long k_records = strtol(argv[2], NULL, 10);
    size_t rows = (size_t)strtoul(argv[3], NULL, 10), cols = (size_t)strtoul(argv[4], NULL, 10);
    snprintf(spec, sizeof spec, "f64[%zu,%zu] block,* on %ux1", rows, cols, ct_size);

    spools_layout_t *layout;
    CHECK(spools_layout_parse(spec, &layout));
    uint64_t len;
    CHECK(spools_layout_local_bytes(layout, ct_rank, &len));
    size_t b = (rows + ct_size - 1) / ct_size;
    size_t lo = ct_rank * b < rows ? ct_rank * b : rows;
    size_t hi = lo + b < rows ? lo + b : rows;
    ASSERT(len == (hi - lo) * cols * 8, "local bytes %llu for rows %zu..%zu",
           (unsigned long long)len, lo, hi);

    spools_pipe_t *pipe = NULL;
    CHECK(spools_pipe_open_writer(ct_world, name, layout, &pipe));
    ASSERT(pipe != NULL, "open gave no pipe");

    double *share = ct_alloc((size_t)len + 8);
    uint64_t records = 99;
    CHECK(spools_pipe_records(pipe, &records));
    ASSERT(records == 0, "%llu records before any write", (unsigned long long)records);
    if (argc == 6) {
        /* Wrong calls, refused before anything is sent. */
        int32_t got = -1;
        memset(share, 0, (size_t)len + 8);
        EXPECT_ERR(spools_pipe_read(pipe, share, (size_t)len, &got), SPOOLS_ERR_INVALID_ARG,
                   "writer");
        EXPECT_ERR(spools_pipe_write(NULL, share, (size_t)len), SPOOLS_ERR_INVALID_ARG,
                   "spools_pipe_t");
        /* Every rank passes a wrong size (a write is collective: every rank calls it). */
        EXPECT_ERR(spools_pipe_write(pipe, share, len >= 8 ? (size_t)len - 8 : (size_t)len + 8),
                   SPOOLS_ERR_INVALID_ARG, "bytes");
        EXPECT_ERR(spools_pipe_write(pipe, share, (size_t)len + 8), SPOOLS_ERR_INVALID_ARG,
                   "bytes");
        /* The last rank alone passes a wrong share, then a NULL buffer: every rank's write
         * fails, the others' naming it; nothing is sent. */
        int is_last = ct_rank + 1 == ct_size;
        char last_name[32];
        snprintf(last_name, sizeof last_name, "rank %u", ct_size - 1);
        spools_status_t st =
            spools_pipe_write(pipe, share, is_last ? (size_t)len + 8 : (size_t)len);
        ct_expect_err(st, SPOOLS_ERR_INVALID_ARG, is_last ? "bytes" : last_name,
                      "spools_pipe_write", __LINE__);
        st = spools_pipe_write(pipe, is_last ? NULL : share, (size_t)len);
        ct_expect_err(st, SPOOLS_ERR_INVALID_ARG, is_last ? "data" : last_name,
                      "spools_pipe_write", __LINE__);
        CHECK(spools_pipe_records(pipe, &records));
        ASSERT(records == 0, "%llu records after refused writes", (unsigned long long)records);
        OK("refused");
    }

    for (long k = 0; k < k_records; k++) {
        for (size_t i = lo; i < hi; i++)
            for (size_t j = 0; j < cols; j++)
                share[(i - lo) * cols + j] = 1000.0 * (double)k + (double)(i * cols + j);
        CHECK(spools_pipe_write(pipe, share, (size_t)len));
    }
    CHECK(spools_pipe_records(pipe, &records));
    ASSERT(records == (uint64_t)k_records, "spools_pipe_records gave %llu",
           (unsigned long long)records);
    CHECK(spools_pipe_close(pipe));
    CHECK(spools_pipe_close(NULL)); /* NULL: nothing to do */
    free(share);
    CHECK(spools_layout_destroy(layout));
    OK("wrote %ld", k_records);
    ct_finalize();
    return 0;
}
