/* Reductions with a user-defined operator on MPI_BOTTOM with a datatype of absolute
 * addresses (two blocks of ints, a[2] then b[1], at separate places): blocking and
 * non-blocking, in place and to a root. The library once read the data from address 0
 * up (a crash). The blocks lie differently in even and odd processes (b 10 ints after
 * a, or 37 ints before it): the same type signature in another layout, which the
 * library once shipped as this process's bytes from the lowest to the highest, so that
 * the other layout read them wrongly. Any number of ranks >= 1. */
#include "check.h"

static int store[64];
static int *a, *b;
static MPI_Aint addr_a, addr_b;

/* Sums the three ints of each element, found from the base the library gives (for
 * MPI_BOTTOM: the offsets are the variables' addresses). */
static void sum3(void *in, void *inout, int *len, MPI_Datatype *dt) {
  (void)dt;
  CHECK(*len == 1, "len %d", *len);
  int *ia = (int *)((char *)in + addr_a), *ib = (int *)((char *)in + addr_b);
  int *oa = (int *)((char *)inout + addr_a), *ob = (int *)((char *)inout + addr_b);
  oa[0] += ia[0];
  oa[1] += ia[1];
  ob[0] += ib[0];
}

static void fill(int rank) {
  a[0] = rank + 1;
  a[1] = 10 * (rank + 1);
  b[0] = 100 * (rank + 1);
}

static void expect(int size, const char *what) {
  int s = size * (size + 1) / 2;
  CHECK(a[0] == s && a[1] == 10 * s && b[0] == 100 * s, "%s: %d %d %d (want %d %d %d)", what,
        a[0], a[1], b[0], s, 10 * s, 100 * s);
}

int main(int argc, char **argv) {
  int rank, size;
  OK(MPI_Init(&argc, &argv));
  OK(MPI_Comm_rank(MPI_COMM_WORLD, &rank));
  OK(MPI_Comm_size(MPI_COMM_WORLD, &size));
  a = rank % 2 ? store + 40 : store;
  b = rank % 2 ? store + 3 : store + 10;
  OK(MPI_Get_address(a, &addr_a));
  OK(MPI_Get_address(b, &addr_b));
  int lens[2] = {2, 1};
  MPI_Aint disps[2] = {addr_a, addr_b};
  MPI_Datatype t;
  OK(MPI_Type_create_hindexed(2, lens, disps, MPI_INT, &t));
  OK(MPI_Type_commit(&t));
  MPI_Op op;
  OK(MPI_Op_create(sum3, 1, &op));

  fill(rank);
  OK(MPI_Allreduce(MPI_IN_PLACE, MPI_BOTTOM, 1, t, op, MPI_COMM_WORLD));
  expect(size, "allreduce in place");

  fill(rank);
  MPI_Request r;
  OK(MPI_Iallreduce(MPI_IN_PLACE, MPI_BOTTOM, 1, t, op, MPI_COMM_WORLD, &r));
  OK(MPI_Wait(&r, MPI_STATUS_IGNORE));
  expect(size, "iallreduce in place");

  for (int root = 0; root < size; root++) {
    fill(rank);
    if (rank == root)
      OK(MPI_Reduce(MPI_IN_PLACE, MPI_BOTTOM, 1, t, op, root, MPI_COMM_WORLD));
    else
      OK(MPI_Reduce(MPI_BOTTOM, NULL, 1, t, op, root, MPI_COMM_WORLD));
    if (rank == root) expect(size, "reduce in place at the root");
  }
  OK(MPI_Op_free(&op));
  OK(MPI_Type_free(&t));
  if (rank == 0) printf("ok bottom_ops %d ranks\n", size);
  OK(MPI_Finalize());
  return 0;
}
