/* Parallel HDF5 peer of bench/io/run.py --only formats: N ranks write (then read) one
 * contiguous f32[n][n][n] dataset "data" through HDF5's MPI-IO driver with collective
 * transfers, each rank its block of rows (block,*,* over dimension 0), every element its
 * global index. Prints {"write_s": [...], "read_s": [...]} on rank 0: for each repetition,
 * the slowest rank's time from H5Fcreate (H5Fopen) to H5Fclose. Built against Debian's
 * libhdf5-openmpi-dev by bench/io/run.py (mpicc, -I/usr/include/hdf5/openmpi).
 *
 *   mpirun -n 4 phdf5 --n 512 --file PATH [--reps R] [--read]
 */
#include <hdf5.h>
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static void die(const char *what) {
  fprintf(stderr, "phdf5: %s failed\n", what);
  MPI_Abort(MPI_COMM_WORLD, 1);
}

int main(int argc, char **argv) {
  MPI_Init(&argc, &argv);
  int rank, size;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  MPI_Comm_size(MPI_COMM_WORLD, &size);
  long n = 512;
  int reps = 1, read = 0;
  const char *path = NULL;
  for (int i = 1; i < argc; i++) {
    if (!strcmp(argv[i], "--n") && i + 1 < argc) n = atol(argv[++i]);
    else if (!strcmp(argv[i], "--file") && i + 1 < argc) path = argv[++i];
    else if (!strcmp(argv[i], "--reps") && i + 1 < argc) reps = atoi(argv[++i]);
    else if (!strcmp(argv[i], "--read")) read = 1;
  }
  if (!path || n % size != 0) die("arguments (--file, and --n a multiple of the ranks)");
  hsize_t rows = (hsize_t)(n / size), plane = (hsize_t)(n * n);
  size_t count = rows * plane;
  float *buf = malloc(count * sizeof(float));
  if (!buf) die("malloc");
  for (size_t i = 0; i < count; i++) buf[i] = (float)((hsize_t)rank * rows * plane + i);
  hsize_t dims[3] = {(hsize_t)n, (hsize_t)n, (hsize_t)n};
  hsize_t start[3] = {(hsize_t)rank * rows, 0, 0}, part[3] = {rows, (hsize_t)n, (hsize_t)n};
  double *wt = calloc(reps, sizeof(double)), *rt = calloc(reps, sizeof(double));
  for (int r = 0; r < reps; r++) {
    for (int pass = 0; pass < 1 + read; pass++) {
      MPI_Barrier(MPI_COMM_WORLD);
      double t = MPI_Wtime();
      hid_t fapl = H5Pcreate(H5P_FILE_ACCESS);
      H5Pset_fapl_mpio(fapl, MPI_COMM_WORLD, MPI_INFO_NULL);
      hid_t f = pass == 0 ? H5Fcreate(path, H5F_ACC_TRUNC, H5P_DEFAULT, fapl)
                          : H5Fopen(path, H5F_ACC_RDONLY, fapl);
      if (f < 0) die("H5Fcreate/H5Fopen");
      hid_t space = H5Screate_simple(3, dims, NULL);
      hid_t d = pass == 0 ? H5Dcreate2(f, "data", H5T_NATIVE_FLOAT, space, H5P_DEFAULT,
                                       H5P_DEFAULT, H5P_DEFAULT)
                          : H5Dopen2(f, "data", H5P_DEFAULT);
      if (d < 0) die("H5Dcreate2/H5Dopen2");
      H5Sselect_hyperslab(space, H5S_SELECT_SET, start, NULL, part, NULL);
      hid_t mem = H5Screate_simple(3, part, NULL);
      hid_t dxpl = H5Pcreate(H5P_DATASET_XFER);
      H5Pset_dxpl_mpio(dxpl, H5FD_MPIO_COLLECTIVE);
      herr_t e = pass == 0 ? H5Dwrite(d, H5T_NATIVE_FLOAT, mem, space, dxpl, buf)
                           : H5Dread(d, H5T_NATIVE_FLOAT, mem, space, dxpl, buf);
      if (e < 0) die("H5Dwrite/H5Dread");
      H5Pclose(dxpl);
      H5Sclose(mem);
      H5Sclose(space);
      H5Dclose(d);
      H5Pclose(fapl);
      H5Fclose(f);
      double mine = MPI_Wtime() - t, slowest;
      MPI_Reduce(&mine, &slowest, 1, MPI_DOUBLE, MPI_MAX, 0, MPI_COMM_WORLD);
      (pass == 0 ? wt : rt)[r] = slowest;
    }
    if (read) {
      for (size_t i = 0; i < count; i++)
        if (buf[i] != (float)((hsize_t)rank * rows * plane + i)) die("the read check");
    }
  }
  if (rank == 0) {
    printf("{\"write_s\": [");
    for (int r = 0; r < reps; r++) printf("%s%.6f", r ? ", " : "", wt[r]);
    printf("], \"read_s\": [");
    for (int r = 0; r < reps && read; r++) printf("%s%.6f", r ? ", " : "", rt[r]);
    printf("]}\n");
  }
  free(buf);
  free(wt);
  free(rt);
  MPI_Finalize();
  return 0;
}
