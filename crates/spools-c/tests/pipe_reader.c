/*
 * pipe_reader.c NAME K ROWS COLS: a C consumer of pipe_producer.c's records (any number
 * of ranks; run with 4): "f64[ROWS,COLS] *,cyclic(2) on 1xN", record k holding
 * 1000 k + i*COLS + j at (i, j). Checks every value of every record it gets, and:
 *   - a write on a reader and a buffer 8 bytes short are refused (nothing consumed);
 *   - spools_pipe_read gives *got = 1 per record, then 0 at the end, and 0 again;
 *   - spools_pipe_records counts the records.
 * Printed by every rank: "ok read K".
 */
#include "ctest.h"

int main(int argc, char **argv)
{
    ct_init("pipe_reader");
    ASSERT(argc == 5, "usage: pipe_reader NAME K ROWS COLS");
    char name[256], spec[128];
    snprintf(name, sizeof name, "pipe:%s", argv[1]);
    long k_records = strtol(argv[2], NULL, 10);
    size_t rows = (size_t)strtoul(argv[3], NULL, 10), cols = (size_t)strtoul(argv[4], NULL, 10);
    snprintf(spec, sizeof spec, "f64[%zu,%zu] *,cyclic(2) on 1x%u", rows, cols, ct_size);

    spools_layout_t *layout;
    CHECK(spools_layout_parse(spec, &layout));
    uint64_t len;
    CHECK(spools_layout_local_bytes(layout, ct_rank, &len));
    /* My columns: pairs starting at 2 * rank, every 2 * size. */
    size_t *js = ct_alloc(cols * sizeof *js), nj = 0;
    for (size_t blk = ct_rank; blk * 2 < cols; blk += ct_size)
        for (size_t j = blk * 2; j < cols && j < blk * 2 + 2; j++)
            js[nj++] = j;
    ASSERT(len == rows * nj * 8, "local bytes %llu for %zu columns", (unsigned long long)len, nj);

    spools_pipe_t *pipe = NULL;
    CHECK(spools_pipe_open_reader(ct_world, name, layout, &pipe));
    double *buf = ct_alloc((size_t)len + 8);
    int32_t got = -1;
    EXPECT_ERR(spools_pipe_write(pipe, buf, (size_t)len), SPOOLS_ERR_INVALID_ARG, "reader");
    /* A read is collective: every rank passes a wrong size, then the last rank alone (a
     * share too long, then a NULL got): every rank's read fails, nothing is taken. */
    EXPECT_ERR(spools_pipe_read(pipe, buf, len >= 8 ? (size_t)len - 8 : (size_t)len + 8, &got),
               SPOOLS_ERR_INVALID_ARG, "bytes");
    int is_last = ct_rank + 1 == ct_size;
    char last_name[32];
    snprintf(last_name, sizeof last_name, "rank %u", ct_size - 1);
    spools_status_t st =
        spools_pipe_read(pipe, buf, is_last ? (size_t)len + 8 : (size_t)len, &got);
    ct_expect_err(st, SPOOLS_ERR_INVALID_ARG, is_last ? "bytes" : last_name, "spools_pipe_read",
                  __LINE__);
    st = spools_pipe_read(pipe, buf, (size_t)len, is_last ? NULL : &got);
    ct_expect_err(st, SPOOLS_ERR_INVALID_ARG, is_last ? "got" : last_name, "spools_pipe_read",
                  __LINE__);

    long k = 0;
    for (;;) {
        for (size_t i = 0; i < len / 8; i++)
            buf[i] = -1;
        got = -1;
        CHECK(spools_pipe_read(pipe, buf, (size_t)len, &got));
        ASSERT(got == 0 || got == 1, "got %d", got);
        if (!got)
            break;
        for (size_t i = 0; i < rows; i++)
            for (size_t c = 0; c < nj; c++)
                ASSERT(buf[i * nj + c] == 1000.0 * (double)k + (double)(i * cols + js[c]),
                       "record %ld (%zu, %zu) is %g", k, i, js[c], buf[i * nj + c]);
        k++;
    }
    ASSERT(k == k_records, "%ld records, expected %ld", k, k_records);
    got = -1;
    CHECK(spools_pipe_read(pipe, buf, (size_t)len, &got));
    ASSERT(got == 0, "a read after the end gave got = %d", got);
    uint64_t records = 0;
    CHECK(spools_pipe_records(pipe, &records));
    ASSERT(records == (uint64_t)k_records, "spools_pipe_records gave %llu",
           (unsigned long long)records);
    CHECK(spools_pipe_close(pipe));
    free(buf);
    free(js);
    CHECK(spools_layout_destroy(layout));
    OK("read %ld", k);
    ct_finalize();
    return 0;
}
