/*
 * files.c DIR: parallel files through the C interface (2 ranks or more; run with 3).
 *
 * The dataset: a 61x47 f64 matrix, element (i, j) = i*47 + j + 0.25, held in block rows
 * ("f64[61,47] block,* on Nx1"). Written as
 *   DIR/data.bin     canonical (params NULL)
 *   DIR/data.npy     format "npy"
 *   DIR/data.raid5   format "raid5(unit=4KiB,count=3)" (manifest + 3 unit files)
 *   DIR/data.raid0   format "raid0(unit=4KiB,count=2)"
 *   DIR/data.h5      format "hdf5(grid/data)" (an HDF5 file: libhdf5 loaded at run time)
 *   DIR/sums.npy     "npy" with checksums and sync (a .spools-sums sidecar)
 *   DIR/hurt.raid5   RAID-5 again; then rank 0 flips one byte of one unit file
 * and each is read back with other layouts (cyclic columns over every rank; the whole
 * matrix on rank 0) and checked element by element; hurt.raid5 must still read right
 * (rebuilt from parity). The driver then checks the files themselves (spools cat, numpy,
 * raw bytes). Printed by every rank: "ok write FILE" and "ok read FILE LAYOUT".
 */
#define _POSIX_C_SOURCE 200809L
#include "ctest.h"

#include <fcntl.h>
#include <unistd.h>

#define R 61
#define C 47

static const char *dir;

static double value(size_t i, size_t j) { return (double)(i * C + j) + 0.25; }

static void path_of(char *out, size_t cap, const char *name)
{
    snprintf(out, cap, "%s/%s", dir, name);
}

/* This rank's block rows: rows [lo, hi). */
static void my_rows(size_t *lo, size_t *hi)
{
    size_t b = (R + ct_size - 1) / ct_size;
    *lo = ct_rank * b < R ? ct_rank * b : R;
    *hi = *lo + b < R ? *lo + b : R;
}

static void write_one(const char *name, spools_layout_t *rows, const double *mine, size_t len,
                      const char *format, int checksums)
{
    char path[512];
    spools_write_params_t p = SPOOLS_WRITE_PARAMS_DEFAULT;
    path_of(path, sizeof path, name);
    if (format != NULL) {
        p.field_mask |= SPOOLS_WRITE_FIELD_FORMAT;
        p.format = format;
    }
    if (checksums) {
        p.field_mask |= SPOOLS_WRITE_FIELD_CHECKSUMS | SPOOLS_WRITE_FIELD_SYNC;
        p.checksums = 1;
        p.sync = 1;
    }
    /* No options at all: params NULL (a canonical file). */
    const spools_write_params_t *params = format == NULL && !checksums ? NULL : &p;
    CHECK(spools_write_file(ct_world, path, mine, len, rows, params));
    OK("write %s", name);
}

/* Reads `name` into cyclic columns (every rank) and checks each element. */
static void read_cyclic(const char *name, int checksums)
{
    char spec[64], path[4096];
    spools_layout_t *cols;
    snprintf(spec, sizeof spec, "f64[%d,%d] *,cyclic(3) on 1x%u", R, C, ct_size);
    CHECK(spools_layout_parse(spec, &cols));
    uint64_t len;
    CHECK(spools_layout_local_bytes(cols, ct_rank, &len));
    /* My columns: blocks of 3 starting at 3 * rank, every 3 * size. */
    size_t js[C], nj = 0;
    for (size_t blk = ct_rank; blk * 3 < C; blk += ct_size)
        for (size_t j = blk * 3; j < C && j < blk * 3 + 3; j++)
            js[nj++] = j;
    ASSERT(len == (uint64_t)R * nj * 8, "%s: local bytes %llu for %zu columns", name,
           (unsigned long long)len, nj);
    double *buf = ct_alloc((size_t)len);
    for (size_t k = 0; k < len / 8; k++)
        buf[k] = -1;
    spools_read_params_t p = SPOOLS_READ_PARAMS_DEFAULT;
    if (checksums) {
        p.field_mask |= SPOOLS_READ_FIELD_CHECKSUMS;
        p.checksums = 1;
    }
    path_of(path, sizeof path, name);
    CHECK(spools_read_file(ct_world, path, buf, (size_t)len, cols, &p));
    for (size_t i = 0; i < R; i++)
        for (size_t k = 0; k < nj; k++)
            ASSERT(buf[i * nj + k] == value(i, js[k]), "%s: (%zu, %zu) is %g", name, i, js[k],
                   buf[i * nj + k]);
    free(buf);
    CHECK(spools_layout_destroy(cols));
    OK("read %s cyclic%s", name, checksums ? " verified" : "");
}

/* Reads `name` whole on rank 0 (a layout of one unit; the others hold nothing). */
static void read_all(const char *name)
{
    char spec[64], path[4096];
    spools_layout_t *all;
    snprintf(spec, sizeof spec, "f64[%d,%d] *,* on 1x1", R, C);
    CHECK(spools_layout_parse(spec, &all));
    uint64_t len;
    CHECK(spools_layout_local_bytes(all, ct_rank, &len));
    ASSERT(len == (ct_rank == 0 ? (uint64_t)R * C * 8 : 0), "local bytes %llu",
           (unsigned long long)len);
    double *buf = len ? ct_alloc((size_t)len) : NULL;
    path_of(path, sizeof path, name);
    CHECK(spools_read_file(ct_world, path, buf, (size_t)len, all, NULL));
    for (size_t k = 0; k < len / 8; k++)
        ASSERT(buf[k] == value(k / C, k % C), "%s: element %zu is %g", name, k, buf[k]);
    free(buf);
    CHECK(spools_layout_destroy(all));
    OK("read %s all", name);
}

/* Flips one byte in the middle of the first unit file of `name` that exists. */
static void damage_one_unit(const char *name)
{
    char path[512];
    for (int slot = 0; slot < 2; slot++) {
        snprintf(path, sizeof path, "%s/%s.u1.s%d", dir, name, slot);
        int fd = open(path, O_RDWR);
        if (fd < 0)
            continue;
        unsigned char b;
        ASSERT(pread(fd, &b, 1, 100) == 1, "reading %s", path);
        b ^= 0x5a;
        ASSERT(pwrite(fd, &b, 1, 100) == 1, "writing %s", path);
        close(fd);
        return;
    }
    ASSERT(0, "no unit file %s/%s.u1.s0 or .s1", dir, name);
}

int main(int argc, char **argv)
{
    ct_init("files");
    ASSERT(argc == 2, "usage: files DIR");
    dir = argv[1];

    char spec[64];
    spools_layout_t *rows;
    snprintf(spec, sizeof spec, "f64[%d,%d] block,* on %ux1", R, C, ct_size);
    CHECK(spools_layout_parse(spec, &rows));
    size_t lo, hi;
    my_rows(&lo, &hi);
    uint64_t len;
    CHECK(spools_layout_local_bytes(rows, ct_rank, &len));
    ASSERT(len == (hi - lo) * C * 8, "local bytes %llu for rows %zu..%zu",
           (unsigned long long)len, lo, hi);
    double *mine = ct_alloc((size_t)len);
    for (size_t i = lo; i < hi; i++)
        for (size_t j = 0; j < C; j++)
            mine[(i - lo) * C + j] = value(i, j);

    write_one("data.bin", rows, mine, (size_t)len, NULL, 0);
    write_one("data.npy", rows, mine, (size_t)len, "npy", 0);
    write_one("data.raid5", rows, mine, (size_t)len, "raid5(unit=4KiB,count=3)", 0);
    write_one("data.raid0", rows, mine, (size_t)len, "raid0(unit=4KiB,count=2)", 0);
    write_one("sums.npy", rows, mine, (size_t)len, "npy", 1);
    write_one("hurt.raid5", rows, mine, (size_t)len, "raid5(unit=4KiB,count=3)", 0);
    write_one("data.h5", rows, mine, (size_t)len, "hdf5(grid/data)", 0);

    const char *names[] = {"data.bin", "data.npy", "data.raid5", "data.raid0", "sums.npy",
                           "data.h5"};
    for (size_t k = 0; k < sizeof names / sizeof names[0]; k++)
        read_cyclic(names[k], 0);
    read_cyclic("sums.npy", 1); /* every block verified against the sidecar */
    read_all("data.bin");
    read_all("data.raid5");

    /* One flipped byte in one unit of a RAID-5 file: read right all the same. */
    if (ct_rank == 0)
        damage_one_unit("hurt.raid5");
    CHECK(spools_barrier(ct_comm));
    read_cyclic("hurt.raid5", 0);

    free(mine);
    CHECK(spools_layout_destroy(rows));
    OK("done");
    ct_finalize();
    return 0;
}
