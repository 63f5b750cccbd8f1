/*
 * redistribute.c: layouts and spools_redistribute (any number of ranks >= 2; run with 3
 * and 4).
 *
 * A 13x10 f64 matrix, element (i, j) = i*10 + j + 0.5, travels
 *   rank 0 alone (*,* on 1x1) -> block rows -> cyclic columns -> a 2-d block-cyclic grid
 *   -> 2 units of column blocks (fewer units than ranks) -> rank 0 alone
 * and after every step each rank's share is compared with what MPI_Type_create_darray's
 * rules (docs/layouts.md) give, computed here independently of the library; the last step
 * must give back the original matrix. Then a 1-d i32 array goes block -> cyclic(3) ->
 * block. Printed by every rank: "ok info", "ok step NAME" for each step, "ok 1d".
 */
#include "ctest.h"

#define R 13
#define C 10

/* One dimension's distribution: "block", "cyclic" or "*", with a block size (0: the
 * default, ceil(n/p) for block and 1 for cyclic). */
struct dist {
    const char *kind;
    size_t b;
};

/* A 2-d f64 layout: R x C over a p[0] x p[1] grid. */
struct layout2 {
    const char *name;
    struct dist d[2];
    uint32_t p[2];
};

static void spec_of(const struct layout2 *l, char *out, size_t cap)
{
    char part[2][32];
    for (int k = 0; k < 2; k++) {
        if (l->d[k].b != 0)
            snprintf(part[k], sizeof part[k], "%s(%zu)", l->d[k].kind, l->d[k].b);
        else
            snprintf(part[k], sizeof part[k], "%s", l->d[k].kind);
    }
    snprintf(out, cap, "f64[%d,%d] %s,%s on %ux%u", R, C, part[0], part[1], l->p[0], l->p[1]);
}

/* The global indices (ascending: the local order) that grid coordinate `c` of `p` owns of
 * a dimension of extent n; returns how many. */
static size_t owned(size_t n, struct dist d, uint32_t p, uint32_t c, size_t *idx)
{
    size_t k = 0;
    if (strcmp(d.kind, "*") == 0) {
        for (size_t i = 0; i < n; i++)
            idx[k++] = i;
    } else if (strcmp(d.kind, "block") == 0) {
        size_t b = d.b != 0 ? d.b : (n + p - 1) / p;
        for (size_t i = (size_t)c * b; i < n && i < ((size_t)c + 1) * b; i++)
            idx[k++] = i;
    } else { /* cyclic(b): blocks c, c + p, c + 2p, ... */
        size_t b = d.b != 0 ? d.b : 1;
        for (size_t blk = c; blk * b < n; blk += p)
            for (size_t i = blk * b; i < n && i < (blk + 1) * b; i++)
                idx[k++] = i;
    }
    return k;
}

static double value(size_t i, size_t j) { return (double)(i * C + j) + 0.5; }

/* The share of unit u (C order over its rows and columns): returns its element count and
 * fills `out` (if not NULL) with the expected values. Units past the grid own nothing. */
static size_t expected(const struct layout2 *l, uint32_t u, double *out)
{
    size_t rows[R], cols[C];
    if (u >= l->p[0] * l->p[1])
        return 0;
    size_t nr = owned(R, l->d[0], l->p[0], u / l->p[1], rows);
    size_t nc = owned(C, l->d[1], l->p[1], u % l->p[1], cols);
    if (out != NULL)
        for (size_t a = 0; a < nr; a++)
            for (size_t b = 0; b < nc; b++)
                out[a * nc + b] = value(rows[a], cols[b]);
    return nr * nc;
}

static spools_layout_t *parse2(const struct layout2 *l)
{
    char spec[128];
    spools_layout_t *h = NULL;
    spec_of(l, spec, sizeof spec);
    CHECK(spools_layout_parse(spec, &h));
    ASSERT(h != NULL, "parse gave NULL for %s", spec);
    return h;
}

/* What the library says about a layout agrees with the formulas, for every unit. */
static void check_info(const struct layout2 *l, spools_layout_t *h)
{
    uint64_t units, esize, total, local;
    CHECK(spools_layout_units(h, &units));
    CHECK(spools_layout_elem_size(h, &esize));
    CHECK(spools_layout_total_bytes(h, &total));
    ASSERT(units == (uint64_t)l->p[0] * l->p[1], "%s: %llu units", l->name,
           (unsigned long long)units);
    ASSERT(esize == 8 && total == R * C * 8, "%s: elem %llu total %llu", l->name,
           (unsigned long long)esize, (unsigned long long)total);
    uint64_t sum = 0;
    for (uint32_t u = 0; u < units + 2; u++) {
        CHECK(spools_layout_local_bytes(h, u, &local));
        ASSERT(local == expected(l, u, NULL) * 8, "%s: unit %u holds %llu bytes, expected %zu",
               l->name, u, (unsigned long long)local, expected(l, u, NULL) * 8);
        sum += local;
    }
    ASSERT(sum == total, "%s: the shares add up to %llu bytes", l->name,
           (unsigned long long)sum);

    /* The canonical spec: parses to a layout that prints the same. */
    char text[160], again[160];
    size_t needed = 0;
    CHECK(spools_layout_to_string(h, text, sizeof text, &needed));
    ASSERT(needed == strlen(text) + 1, "needed %zu for \"%s\"", needed, text);
    spools_layout_t *h2 = NULL;
    CHECK(spools_layout_parse(text, &h2));
    CHECK(spools_layout_to_string(h2, again, sizeof again, NULL));
    ASSERT(strcmp(text, again) == 0, "\"%s\" reprints as \"%s\"", text, again);
    CHECK(spools_layout_destroy(h2));
    /* A buffer one byte short: truncated, nothing written, needed said. */
    memset(again, '#', sizeof again);
    size_t needed2 = 0;
    EXPECT_ERR(spools_layout_to_string(h, again, needed - 1, &needed2), SPOOLS_ERR_TRUNCATED,
               "bytes");
    ASSERT(needed2 == needed && again[0] == '#', "needed %zu, first byte %c", needed2, again[0]);
}

/* Moves the matrix from `from` to `to`; each rank checks its new share. `src` is this
 * rank's share of `from`; returns its share of `to` (malloc'd). */
static double *step(const struct layout2 *from, spools_layout_t *hf, const double *src,
                    const struct layout2 *to, spools_layout_t *ht)
{
    uint64_t src_len, dst_len;
    CHECK(spools_layout_local_bytes(hf, ct_rank, &src_len));
    CHECK(spools_layout_local_bytes(ht, ct_rank, &dst_len));
    size_t n = expected(to, ct_rank, NULL);
    ASSERT(dst_len == n * 8, "%s: local_bytes %llu", to->name, (unsigned long long)dst_len);
    double *dst = ct_alloc(n * 8), *want = ct_alloc(n * 8);
    for (size_t i = 0; i < n; i++)
        dst[i] = -1.0;
    expected(to, ct_rank, want);
    CHECK(spools_redistribute(ct_world, src, (size_t)src_len, hf, dst, (size_t)dst_len, ht));
    for (size_t i = 0; i < n; i++)
        ASSERT(dst[i] == want[i], "%s -> %s: local element %zu is %g, expected %g", from->name,
               to->name, i, dst[i], want[i]);
    free(want);
    OK("step %s-to-%s", from->name, to->name);
    return dst;
}

static void one_d(void)
{
    /* i32[100]: block -> cyclic(3) -> block, each share checked. */
    const size_t n = 100;
    char spec[64];
    spools_layout_t *blk, *cyc;
    snprintf(spec, sizeof spec, "i32[100] block on %u", ct_size);
    CHECK(spools_layout_parse(spec, &blk));
    snprintf(spec, sizeof spec, "i32[100] cyclic(3) on %u", ct_size);
    CHECK(spools_layout_parse(spec, &cyc));
    size_t bidx[100], cidx[100];
    struct dist db = {"block", 0}, dc = {"cyclic", 3};
    size_t nb = owned(n, db, ct_size, ct_rank, bidx), nc = owned(n, dc, ct_size, ct_rank, cidx);
    uint64_t lb, lc;
    CHECK(spools_layout_local_bytes(blk, ct_rank, &lb));
    CHECK(spools_layout_local_bytes(cyc, ct_rank, &lc));
    ASSERT(lb == nb * 4 && lc == nc * 4, "1d local bytes %llu %llu", (unsigned long long)lb,
           (unsigned long long)lc);
    int32_t *a = ct_alloc(nb * 4), *b = ct_alloc(nc * 4), *back = ct_alloc(nb * 4);
    for (size_t i = 0; i < nb; i++)
        a[i] = (int32_t)(bidx[i] * 7) - 300;
    CHECK(spools_redistribute(ct_world, a, nb * 4, blk, b, nc * 4, cyc));
    for (size_t i = 0; i < nc; i++)
        ASSERT(b[i] == (int32_t)(cidx[i] * 7) - 300, "cyclic element %zu is %d", i, b[i]);
    CHECK(spools_redistribute(ct_world, b, nc * 4, cyc, back, nb * 4, blk));
    ASSERT(nb == 0 || memcmp(a, back, nb * 4) == 0, "the round trip changed the data");
    CHECK(spools_layout_destroy(blk));
    CHECK(spools_layout_destroy(cyc));
    free(a);
    free(b);
    free(back);
    OK("1d");
}

int main(void)
{
    ct_init("redistribute");
    uint32_t n = ct_size;
    ASSERT(n >= 2, "needs 2 ranks or more");
    struct layout2 all = {"all", {{"*", 0}, {"*", 0}}, {1, 1}};
    struct layout2 rows = {"rows", {{"block", 0}, {"*", 0}}, {n, 1}};
    struct layout2 cols = {"cols", {{"*", 0}, {"cyclic", 0}}, {1, n}};
    struct layout2 grid = {"grid", {{"cyclic", 2}, {"block", 0}}, {2, n / 2}};
    if (n % 2 != 0) { /* an odd number of ranks: one grid row of column blocks of 4 */
        grid.d[0].b = 3;
        grid.d[1].b = 4;
        grid.p[0] = 1;
        grid.p[1] = n;
    }
    struct layout2 two = {"two", {{"*", 0}, {"block", 0}}, {1, 2}};
    struct layout2 *ls[] = {&all, &rows, &cols, &grid, &two};
    spools_layout_t *hs[5];
    for (int k = 0; k < 5; k++) {
        hs[k] = parse2(ls[k]);
        check_info(ls[k], hs[k]);
    }
    OK("info");

    /* Rank 0 holds the whole matrix; the others pass nothing (NULL, 0 bytes). */
    double *cur = NULL;
    if (ct_rank == 0) {
        cur = ct_alloc(R * C * 8);
        expected(&all, 0, cur);
    }
    for (int k = 0; k < 5; k++) {
        int next = (k + 1) % 5;
        double *dst = step(ls[k], hs[k], cur, ls[next], hs[next]);
        free(cur);
        cur = dst;
    }
    /* Back on rank 0 alone: the original, element by element (checked in step). */
    free(cur);
    for (int k = 0; k < 5; k++)
        CHECK(spools_layout_destroy(hs[k]));
    one_d();
    OK("done");
    ct_finalize();
    return 0;
}
