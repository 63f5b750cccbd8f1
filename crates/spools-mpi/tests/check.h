/* The tests' check: on failure print FAIL with the place and what, then end the job. */
#ifndef CHECK_H
#define CHECK_H
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>
#define CHECK(cond, ...)                                                              \
  do {                                                                                \
    if (!(cond)) {                                                                    \
      int r_ = -1;                                                                    \
      MPI_Comm_rank(MPI_COMM_WORLD, &r_);                                             \
      fprintf(stderr, "FAIL rank %d %s:%d: %s: ", r_, __FILE__, __LINE__, #cond);     \
      fprintf(stderr, __VA_ARGS__);                                                   \
      fprintf(stderr, "\n");                                                          \
      fflush(stderr);                                                                 \
      MPI_Abort(MPI_COMM_WORLD, 3);                                                   \
    }                                                                                 \
  } while (0)
#define OK(rc) CHECK((rc) == MPI_SUCCESS, "MPI call returned %d", (rc))

/* Before MPI_Init: with argv[1] = H > 1 hosts to play, this rank plays host
 * `rank % H` (SPOOLS_HOST_ID, from SPOOLS_RANK), so that neighbouring ranks are on
 * different hosts. Returns H (1 if absent). */
static inline int play_hosts(int argc, char **argv) {
  const char *r = getenv("SPOOLS_RANK");
  int hosts = argc > 1 ? atoi(argv[1]) : 1;
  if (hosts > 1 && r) {
    char id[16];
    snprintf(id, sizeof id, "h%d", atoi(r) % hosts);
    setenv("SPOOLS_HOST_ID", id, 1);
  }
  return hosts;
}
#endif
