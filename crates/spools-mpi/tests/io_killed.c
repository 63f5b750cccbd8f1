/* A rank killed (SIGKILL) in the middle of collective file writes: the ranks open a file
 * in DIR (argv[1]) and write 1 MiB each per round with MPI_File_write_all through a cyclic
 * view (each rank one int of every `size`); rank 1 kills itself after the third round. The
 * others, in the fourth round's write_all, must not hang: the job ends with an error. A
 * rank still writing after 30 s prints FAIL. 3 ranks (any number from 2 works). */
#include <signal.h>
#include "check.h"

#define INTS (1 << 18) /* 1 MiB of ints per rank per round */

int main(int argc, char **argv) {
  int rank, size;
  OK(MPI_Init(&argc, &argv));
  OK(MPI_Comm_rank(MPI_COMM_WORLD, &rank));
  OK(MPI_Comm_size(MPI_COMM_WORLD, &size));
  CHECK(size >= 2, "needs at least 2 ranks, has %d", size);
  CHECK(argc >= 2, "usage: io_killed DIR");
  char path[4096];
  snprintf(path, sizeof path, "%s/io_killed", argv[1]);
  if (rank == 0) MPI_File_delete(path, MPI_INFO_NULL); /* may not exist */
  OK(MPI_Barrier(MPI_COMM_WORLD));

  MPI_File fh;
  MPI_Datatype ft;
  OK(MPI_File_open(MPI_COMM_WORLD, path, MPI_MODE_CREATE | MPI_MODE_WRONLY, MPI_INFO_NULL, &fh));
  OK(MPI_Type_create_resized(MPI_INT, 0, size * sizeof(int), &ft));
  OK(MPI_Type_commit(&ft));
  OK(MPI_File_set_view(fh, rank * sizeof(int), MPI_INT, ft, "native", MPI_INFO_NULL));
  int *buf = malloc(INTS * sizeof(int));
  for (int i = 0; i < INTS; i++) buf[i] = rank * 1000000 + i;

  double start = MPI_Wtime();
  for (long round = 0;; round++) {
    MPI_Status st;
    int rc = MPI_File_write_all(fh, buf, INTS, MPI_INT, &st);
    if (round < 3) OK(rc); /* later rounds may fail (rank 1 is gone): the job must end anyway */
    if (rank == 1 && round == 2) raise(SIGKILL);
    if (MPI_Wtime() - start > 30) {
      printf("FAIL rank %d still writing after 30 s (%ld rounds)\n", rank, round + 1);
      fflush(stdout);
      MPI_Abort(MPI_COMM_WORLD, 3);
    }
  }
}
