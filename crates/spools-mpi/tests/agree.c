/* MPIX_Comm_agree and MPIX_Comm_iagree (the standard ABI's header does not declare
 * them, and mpicc_abi links against MPICH's libmpi_abi.so.1, which lacks them: declared
 * weak here, found in Spools' library at run time): every rank gets the bitwise AND of
 * all flags, on the world and on a split. Any number of ranks. */
#include "check.h"

int MPIX_Comm_agree(MPI_Comm comm, int *flag) __attribute__((weak));
int MPIX_Comm_iagree(MPI_Comm comm, int *flag, MPI_Request *request) __attribute__((weak));

int main(int argc, char **argv) {
  int rank, size;
  OK(MPI_Init(&argc, &argv));
  CHECK(MPIX_Comm_agree && MPIX_Comm_iagree, "the library does not export MPIX_Comm_agree");
  OK(MPI_Comm_rank(MPI_COMM_WORLD, &rank));
  OK(MPI_Comm_size(MPI_COMM_WORLD, &size));
  /* Bit r is clear on rank r only; bit 30 is set everywhere. */
  int flag = ~(1 << (rank % 30));
  OK(MPIX_Comm_agree(MPI_COMM_WORLD, &flag));
  int want = ~0;
  for (int r = 0; r < size; r++) want &= ~(1 << (r % 30));
  CHECK(flag == want, "agree: %#x, want %#x", flag, want);
  MPI_Comm half;
  OK(MPI_Comm_split(MPI_COMM_WORLD, rank % 2, rank, &half));
  flag = rank == 0 ? 0 : 1;
  MPI_Request req;
  OK(MPIX_Comm_iagree(half, &flag, &req));
  OK(MPI_Wait(&req, MPI_STATUS_IGNORE));
  CHECK(flag == (rank % 2 == 0 ? 0 : 1), "iagree on the half of rank %d: %d", rank, flag);
  OK(MPI_Comm_free(&half));
  if (rank == 0) printf("ok agree %d ranks\n", size);
  OK(MPI_Finalize());
  return 0;
}
