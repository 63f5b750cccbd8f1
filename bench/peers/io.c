/*
 * MPI-IO peer of `spools bench io` (SCI-MPICH Table 3, coll_perf): a 3-D BLOCK
 * distributed i32 array of n^3 elements, each holding its own global index in C
 * order, written with MPI_File_write_all through a darray file view and read back
 * with MPI_File_read_all, so the file is the canonical row-major array,
 * byte-identical to what `spools bench io --layout "i32[n,n,n] block,block,block on
 * AxBxC"` writes. Each timed region covers open, set_view, the collective call,
 * (MPI_File_sync with --sync) and close. The read is verified element by element.
 *
 * usage: io --n N --file PATH [--reps R] [--sync] [--keep]
 * Prints one JSON document on rank 0: the grid and every repetition's seconds.
 * Choose the MPI-IO component with mpirun's --mca io ompio|romio321.
 */
#define PEERS_PROGRAM "io"
#define PEERS_USAGE "io --n N --file PATH [--reps R] [--sync] [--keep]"
#include "peers.h"

#include <stdint.h>
#include <string.h>
#include <unistd.h>

int main(int argc, char **argv)
{
    int nranks = peers_init(&argc, &argv);
    long n = 0, reps = 5;
    int sync = 0, keep = 0;
    const char *path = NULL;
    for (int i = 1; i < argc; i++) {
        if (strcmp(argv[i], "--n") == 0) {
            n = checked_option(argc, argv, i, 4096, 1);
            i++;
        } else if (strcmp(argv[i], "--reps") == 0) {
            reps = checked_option(argc, argv, i, 1000, 1);
            i++;
        } else if (strcmp(argv[i], "--file") == 0 && i + 1 < argc) {
            path = argv[++i];
        } else if (strcmp(argv[i], "--sync") == 0) {
            sync = 1;
        } else if (strcmp(argv[i], "--keep") == 0) {
            keep = 1;
        } else {
            usage_error("unknown option %s", argv[i]);
        }
    }
    if (n == 0 || path == NULL)
        usage_error("--n and --file are required");

    int dims[3] = {0, 0, 0};
    MPI_CHECK(MPI_Dims_create(nranks, 3, dims));
    int gsizes[3] = {(int)n, (int)n, (int)n};
    int distribs[3] = {MPI_DISTRIBUTE_BLOCK, MPI_DISTRIBUTE_BLOCK, MPI_DISTRIBUTE_BLOCK};
    int dargs[3] = {MPI_DISTRIBUTE_DFLT_DARG, MPI_DISTRIBUTE_DFLT_DARG, MPI_DISTRIBUTE_DFLT_DARG};
    MPI_Datatype ftype;
    MPI_CHECK(MPI_Type_create_darray(nranks, my_rank, 3, gsizes, distribs, dargs, dims,
                                     MPI_ORDER_C, MPI_INT, &ftype));
    MPI_CHECK(MPI_Type_commit(&ftype));
    int tsize = 0;
    MPI_CHECK(MPI_Type_size(ftype, &tsize));
    long count = tsize / 4;

    /* This rank's block: coordinates row-major over the grid, block size ceil(n/p). */
    long c[3], b[3], lo[3], len[3];
    long r = my_rank;
    for (int d = 2; d >= 0; d--) {
        c[d] = r % dims[d];
        r /= dims[d];
    }
    for (int d = 0; d < 3; d++) {
        b[d] = (n + dims[d] - 1) / dims[d];
        lo[d] = c[d] * b[d];
        len[d] = lo[d] >= n ? 0 : (lo[d] + b[d] > n ? n - lo[d] : b[d]);
    }
    if (len[0] * len[1] * len[2] != count)
        fail("block size %ld does not match the darray's %ld", len[0] * len[1] * len[2], count);
    int32_t *buf = malloc((size_t)(count ? count : 1) * 4);
    int32_t *back = malloc((size_t)(count ? count : 1) * 4);
    if (!buf || !back)
        out_of_memory();
    long k = 0;
    for (long i = 0; i < len[0]; i++)
        for (long j = 0; j < len[1]; j++)
            for (long l = 0; l < len[2]; l++)
                buf[k++] = (int32_t)(((lo[0] + i) * n + (lo[1] + j)) * n + lo[2] + l);

    double *tw = calloc((size_t)reps, sizeof(double));
    double *tr = calloc((size_t)reps, sizeof(double));
    if (!tw || !tr)
        out_of_memory();
    for (long rep = 0; rep < reps; rep++) {
        MPI_File fh;
        MPI_Status st;
        MPI_Barrier(MPI_COMM_WORLD);
        double t0 = MPI_Wtime();
        MPI_CHECK(MPI_File_open(MPI_COMM_WORLD, path, MPI_MODE_CREATE | MPI_MODE_RDWR,
                                MPI_INFO_NULL, &fh));
        MPI_CHECK(MPI_File_set_view(fh, 0, MPI_INT, ftype, "native", MPI_INFO_NULL));
        MPI_CHECK(MPI_File_write_all(fh, buf, (int)count, MPI_INT, &st));
        if (sync)
            MPI_CHECK(MPI_File_sync(fh));
        MPI_CHECK(MPI_File_close(&fh));
        MPI_Barrier(MPI_COMM_WORLD);
        tw[rep] = MPI_Wtime() - t0;

        memset(back, 0, (size_t)count * 4);
        MPI_Barrier(MPI_COMM_WORLD);
        t0 = MPI_Wtime();
        MPI_CHECK(MPI_File_open(MPI_COMM_WORLD, path, MPI_MODE_RDONLY, MPI_INFO_NULL, &fh));
        MPI_CHECK(MPI_File_set_view(fh, 0, MPI_INT, ftype, "native", MPI_INFO_NULL));
        MPI_CHECK(MPI_File_read_all(fh, back, (int)count, MPI_INT, &st));
        MPI_CHECK(MPI_File_close(&fh));
        MPI_Barrier(MPI_COMM_WORLD);
        tr[rep] = MPI_Wtime() - t0;
        if (count && memcmp(buf, back, (size_t)count * 4) != 0)
            fail("rank %d read back different data", my_rank);
    }
    if (my_rank == 0) {
        printf("{\"benchmark\": \"io-mpi\", \"ranks\": %d, \"n\": %ld, \"grid\": [%d, %d, %d], "
               "\"bytes\": %ld, \"sync\": %s, \"write_s\": [",
               nranks, n, dims[0], dims[1], dims[2], n * n * n * 4, sync ? "true" : "false");
        for (long i = 0; i < reps; i++)
            printf("%s%.6f", i ? ", " : "", tw[i]);
        printf("], \"read_s\": [");
        for (long i = 0; i < reps; i++)
            printf("%s%.6f", i ? ", " : "", tr[i]);
        printf("]}\n");
        flush_stdout();
        if (!keep)
            unlink(path);
    }
    MPI_Type_free(&ftype);
    free(buf);
    free(back);
    free(tw);
    free(tr);
    MPI_Finalize();
    return 0;
}
