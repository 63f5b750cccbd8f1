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
#endif
