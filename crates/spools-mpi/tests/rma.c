/* One-sided communication (RMA): the four window flavours (create on malloc'd memory,
 * allocate, allocate_shared, dynamic with attach/detach) under fence epochs with Put and
 * Get to every rank, with their attributes, group and name; derived datatypes at the
 * origin and at the target; passive target races (accumulates under shared locks, a
 * read-modify-write under exclusive locks, fetch_and_op, a compare_and_swap spin lock,
 * get_accumulate with REPLACE and NO_OP); request-based operations; post/start/complete/
 * wait on a ring (and win_test); a shared window's segments written with plain stores;
 * error classes under MPI_ERRORS_RETURN (out-of-range puts only with the argument
 * `range`); the one-copy path of predefined types byte by byte, with its errors, and a
 * window freed and replaced. 1 to 4 ranks on one host. */
#include <string.h>
#include "check.h"

#define N 16        /* ints each origin puts into each target in the fence tests */
#define ROUNDS 200  /* rounds of the fetch races under lock_all */
#define LOCKS 100   /* rounds of the races that lock (or spin-lock) a target per round */

static int rank, size, left, right;

static int pattern(int origin, int target, int i) { return origin * 1000000 + target * 1000 + i + 1; }

static int class_of(int rc) {
  int c = -1;
  MPI_Error_class(rc, &c);
  return c;
}

static void free_win(MPI_Win *win, const char *name) {
  OK(MPI_Win_free(win));
  CHECK(*win == MPI_WIN_NULL, "%s: freed window handle %p, want MPI_WIN_NULL", name, (void *)*win);
}

/* Makes the window's public copy (remote updates) visible in this process's memory. */
static void sync_own(MPI_Win win) {
  OK(MPI_Win_lock(MPI_LOCK_SHARED, rank, 0, win));
  OK(MPI_Win_sync(win));
  OK(MPI_Win_unlock(rank, win));
}

/* Stores v into the first n ints of this rank's window memory inside an exclusive
 * epoch on itself (which makes them public), then waits for every rank to do so. */
static void init_own(MPI_Win win, int *mem, int n, int v) {
  OK(MPI_Win_lock(MPI_LOCK_EXCLUSIVE, rank, 0, win));
  for (int i = 0; i < n; i++) mem[i] = v;
  OK(MPI_Win_unlock(rank, win));
  OK(MPI_Barrier(MPI_COMM_WORLD));
}

static void check_attrs(MPI_Win win, void *base, MPI_Aint bytes, int disp_unit, int flavor, const char *name) {
  void *b = (void *)&b;
  MPI_Aint *sz = NULL;
  int *du = NULL, *fl = NULL, *model = NULL, flag = 0;
  OK(MPI_Win_get_attr(win, MPI_WIN_BASE, &b, &flag));
  CHECK(flag && b == base, "%s: MPI_WIN_BASE %p (flag %d), want %p", name, b, flag, base);
  OK(MPI_Win_get_attr(win, MPI_WIN_SIZE, &sz, &flag));
  CHECK(flag && *sz == bytes, "%s: MPI_WIN_SIZE %ld (flag %d), want %ld", name, flag ? (long)*sz : -1L, flag, (long)bytes);
  OK(MPI_Win_get_attr(win, MPI_WIN_DISP_UNIT, &du, &flag));
  CHECK(flag && *du == disp_unit, "%s: MPI_WIN_DISP_UNIT %d (flag %d), want %d", name, flag ? *du : -1, flag, disp_unit);
  OK(MPI_Win_get_attr(win, MPI_WIN_CREATE_FLAVOR, &fl, &flag));
  CHECK(flag && *fl == flavor, "%s: MPI_WIN_CREATE_FLAVOR %d (flag %d), want %d", name, flag ? *fl : -1, flag, flavor);
  OK(MPI_Win_get_attr(win, MPI_WIN_MODEL, &model, &flag));
  CHECK(flag && (*model == MPI_WIN_UNIFIED || *model == MPI_WIN_SEPARATE), "%s: MPI_WIN_MODEL %d (flag %d), want %d or %d", name, flag ? *model : -1, flag, MPI_WIN_UNIFIED, MPI_WIN_SEPARATE);
  MPI_Group wg, cg;
  int cmp = -1;
  OK(MPI_Win_get_group(win, &wg));
  OK(MPI_Comm_group(MPI_COMM_WORLD, &cg));
  OK(MPI_Group_compare(wg, cg, &cmp));
  CHECK(cmp == MPI_IDENT, "%s: window group compares %d with the communicator's, want MPI_IDENT %d", name, cmp, MPI_IDENT);
  OK(MPI_Group_free(&wg));
  OK(MPI_Group_free(&cg));
  char got[MPI_MAX_OBJECT_NAME], want[MPI_MAX_OBJECT_NAME];
  int len = -1;
  OK(MPI_Win_get_name(win, got, &len));
  CHECK(len == 0 && got[0] == 0, "%s: default name '%s' (%d), want ''", name, got, len);
  snprintf(want, sizeof want, "rma %s window", name);
  OK(MPI_Win_set_name(win, want));
  OK(MPI_Win_get_name(win, got, &len));
  CHECK(strcmp(got, want) == 0 && len == (int)strlen(want), "%s: name '%s' (%d), want '%s'", name, got, len, want);
}

enum { CREATE, ALLOCATE, SHARED, DYNAMIC };
static const char *flavour_names[] = {"create", "allocate", "shared", "dynamic"};

/* Target displacement of int `elem` of rank t's window: in ints, or for the dynamic
 * window bytes from t's attached address. */
static MPI_Aint disp_of(int flavour, const MPI_Aint *addr, int t, int elem) {
  return flavour == DYNAMIC ? MPI_Aint_add(addr[t], (MPI_Aint)(elem * sizeof(int))) : elem;
}

/* Every rank puts N ints of pattern(origin, target, i) into block `origin` of every
 * rank's window in a fence epoch, checks its own memory, then gets every rank's whole
 * window back in a second epoch and checks it. */
static void flavour(int flavour) {
  const char *name = flavour_names[flavour];
  int n = size * N, du = sizeof(int);
  MPI_Aint bytes = n * sizeof(int), *addr = NULL, my_addr;
  int *mem = NULL;
  MPI_Win win;
  switch (flavour) {
  case CREATE:
    mem = malloc(bytes);
    for (int i = 0; i < n; i++) mem[i] = -1;
    OK(MPI_Win_create(mem, bytes, du, MPI_INFO_NULL, MPI_COMM_WORLD, &win));
    check_attrs(win, mem, bytes, du, MPI_WIN_FLAVOR_CREATE, name);
    break;
  case ALLOCATE:
    OK(MPI_Win_allocate(bytes, du, MPI_INFO_NULL, MPI_COMM_WORLD, &mem, &win));
    check_attrs(win, mem, bytes, du, MPI_WIN_FLAVOR_ALLOCATE, name);
    break;
  case SHARED:
    OK(MPI_Win_allocate_shared(bytes, du, MPI_INFO_NULL, MPI_COMM_WORLD, &mem, &win));
    check_attrs(win, mem, bytes, du, MPI_WIN_FLAVOR_SHARED, name);
    break;
  default:
    du = 1;
    OK(MPI_Win_create_dynamic(MPI_INFO_NULL, MPI_COMM_WORLD, &win));
    check_attrs(win, MPI_BOTTOM, 0, 1, MPI_WIN_FLAVOR_DYNAMIC, name);
    mem = malloc(bytes);
    OK(MPI_Win_attach(win, mem, bytes));
    addr = malloc(size * sizeof(MPI_Aint));
    OK(MPI_Get_address(mem, &my_addr));
    OK(MPI_Allgather(&my_addr, 1, MPI_AINT, addr, 1, MPI_AINT, MPI_COMM_WORLD));
  }
  for (int i = 0; i < n; i++) mem[i] = -1; /* visible to the others from the first fence on */

  int *out = malloc(bytes), *back = malloc(bytes * size);
  OK(MPI_Win_fence(MPI_MODE_NOPRECEDE, win));
  for (int t = 0; t < size; t++) {
    for (int i = 0; i < N; i++) out[t * N + i] = pattern(rank, t, i);
    OK(MPI_Put(out + t * N, N, MPI_INT, t, disp_of(flavour, addr, t, rank * N), N, MPI_INT, win));
  }
  OK(MPI_Win_fence(0, win));
  for (int o = 0; o < size; o++)
    for (int i = 0; i < N; i++)
      CHECK(mem[o * N + i] == pattern(o, rank, i), "%s: put from %d, element %d is %d, want %d", name, o, i, mem[o * N + i], pattern(o, rank, i));
  for (int i = 0; i < n * size; i++) back[i] = -2;
  for (int t = 0; t < size; t++) OK(MPI_Get(back + t * n, n, MPI_INT, t, disp_of(flavour, addr, t, 0), n, MPI_INT, win));
  OK(MPI_Win_fence(MPI_MODE_NOSUCCEED, win));
  for (int t = 0; t < size; t++)
    for (int o = 0; o < size; o++)
      for (int i = 0; i < N; i++)
        CHECK(back[t * n + o * N + i] == pattern(o, t, i), "%s: get from %d, block %d element %d is %d, want %d", name, t, o, i, back[t * n + o * N + i], pattern(o, t, i));
  if (flavour == DYNAMIC) OK(MPI_Win_detach(win, mem));
  free_win(&win, name);
  if (flavour == CREATE || flavour == DYNAMIC) free(mem);
  free(addr);
  free(out);
  free(back);
}

/* Strided origin (a vector of 4 blocks of 2 ints, stride 5) to a contiguous target and
 * contiguous origin to a strided target, for Put and Get, on the right neighbour's
 * window (MPI_Win_create on MPI_Alloc_mem memory), against a model. */
static void datatypes(void) {
  enum { M = 32, V = 8, SPAN = 17 };
  const int vidx[V] = {0, 1, 5, 6, 10, 11, 15, 16};
  int *mem;
  MPI_Win win;
  MPI_Datatype vec;
  OK(MPI_Type_vector(4, 2, 5, MPI_INT, &vec));
  OK(MPI_Type_commit(&vec));
  OK(MPI_Alloc_mem(M * sizeof(int), MPI_INFO_NULL, &mem));
  for (int i = 0; i < M; i++) mem[i] = -1;
  OK(MPI_Win_create(mem, M * sizeof(int), sizeof(int), MPI_INFO_NULL, MPI_COMM_WORLD, &win));
  int src[SPAN], c[V], g[SPAN], h[V], model[M];
  for (int i = 0; i < SPAN; i++) src[i] = pattern(rank, right, i);
  for (int k = 0; k < V; k++) c[k] = pattern(rank, right, 100 + k);
  OK(MPI_Win_fence(MPI_MODE_NOPRECEDE, win));
  OK(MPI_Put(src, 1, vec, right, 0, V, MPI_INT, win));
  OK(MPI_Put(c, V, MPI_INT, right, V, 1, vec, win));
  OK(MPI_Win_fence(0, win));
  for (int i = 0; i < M; i++) model[i] = -1;
  for (int k = 0; k < V; k++) {
    model[k] = pattern(left, rank, vidx[k]);
    model[V + vidx[k]] = pattern(left, rank, 100 + k);
  }
  for (int i = 0; i < M; i++) CHECK(mem[i] == model[i], "datatypes: put element %d is %d, want %d", i, mem[i], model[i]);
  for (int i = 0; i < SPAN; i++) g[i] = -7;
  for (int k = 0; k < V; k++) h[k] = -7;
  OK(MPI_Get(g, 1, vec, right, 0, V, MPI_INT, win));
  OK(MPI_Get(h, V, MPI_INT, right, V, 1, vec, win));
  OK(MPI_Win_fence(MPI_MODE_NOSUCCEED, win));
  for (int i = 0, k = 0; i < SPAN; i++) {
    int want = k < V && vidx[k] == i ? pattern(rank, right, vidx[k++]) : -7;
    CHECK(g[i] == want, "datatypes: get into a vector, element %d is %d, want %d", i, g[i], want);
  }
  for (int k = 0; k < V; k++) CHECK(h[k] == pattern(rank, right, 100 + k), "datatypes: get from a vector, element %d is %d, want %d", k, h[k], pattern(rank, right, 100 + k));
  free_win(&win, "datatypes");
  OK(MPI_Free_mem(mem));
  OK(MPI_Type_free(&vec));
}

/* Checks that the n values gathered to rank 0 plus `extra` are each of 0..n+extra-1 once. */
static void check_permutation(const int *mine, int count, const int *extra, const char *name) {
  int n = count * size, *all = rank == 0 ? malloc(n * sizeof(int)) : NULL;
  OK(MPI_Gather(mine, count, MPI_INT, all, count, MPI_INT, 0, MPI_COMM_WORLD));
  if (rank != 0) return;
  int total = n + (extra != NULL), *seen = calloc(total, sizeof(int));
  for (int i = 0; i < total; i++) {
    int v = i < n ? all[i] : *extra;
    CHECK(v >= 0 && v < total && !seen[v], "%s: value %d (from rank %d) out of 0..%d or seen twice", name, v, i < n ? i / count : -1, total - 1);
    seen[v] = 1;
  }
  free(seen);
  free(all);
}

/* Passive target races on one MPI_Win_allocate window: ints 0 and 1 at every rank are
 * accumulate counters, 2 an exclusive-lock counter; at rank 0 int 3 is a fetch_and_op
 * counter, 4 a spin lock word, 5 the counter it protects, 6 a get_accumulate slot. */
static void atomics(void) {
  const int one = 1, zero = 0, me = rank + 1;
  int *mem, *got = malloc(ROUNDS * sizeof(int)), v, old, fin;
  MPI_Win win;
  OK(MPI_Win_allocate(8 * sizeof(int), sizeof(int), MPI_INFO_NULL, MPI_COMM_WORLD, &mem, &win));
  init_own(win, mem, 8, 0);

  for (int r = 0; r < LOCKS; r++)
    for (int t = 0; t < size; t++) {
      OK(MPI_Win_lock(MPI_LOCK_SHARED, t, 0, win));
      OK(MPI_Accumulate(&one, 1, MPI_INT, t, 0, 1, MPI_INT, MPI_SUM, win));
      OK(MPI_Accumulate(&rank, 1, MPI_INT, t, 1, 1, MPI_INT, MPI_SUM, win));
      OK(MPI_Win_unlock(t, win));
    }
  OK(MPI_Barrier(MPI_COMM_WORLD));
  sync_own(win);
  CHECK(mem[0] == LOCKS * size, "accumulate +1: counter %d, want %d", mem[0], LOCKS * size);
  CHECK(mem[1] == LOCKS * size * (size - 1) / 2, "accumulate +rank: counter %d, want %d", mem[1], LOCKS * size * (size - 1) / 2);

  for (int r = 0; r < LOCKS; r++)
    for (int t = 0; t < size; t++) {
      OK(MPI_Win_lock(MPI_LOCK_EXCLUSIVE, t, 0, win));
      OK(MPI_Get(&v, 1, MPI_INT, t, 2, 1, MPI_INT, win));
      OK(MPI_Win_flush(t, win));
      v++;
      OK(MPI_Put(&v, 1, MPI_INT, t, 2, 1, MPI_INT, win));
      OK(MPI_Win_unlock(t, win));
    }
  OK(MPI_Barrier(MPI_COMM_WORLD));
  sync_own(win);
  CHECK(mem[2] == LOCKS * size, "exclusive get/+1/put: counter %d, want %d (exclusive locks overlapped)", mem[2], LOCKS * size);

  OK(MPI_Win_lock_all(0, win));
  for (int r = 0; r < ROUNDS; r++) {
    got[r] = -1;
    OK(MPI_Fetch_and_op(&one, &got[r], MPI_INT, 0, 3, MPI_SUM, win));
    OK(MPI_Win_flush(0, win));
  }
  OK(MPI_Win_unlock_all(win));
  check_permutation(got, ROUNDS, NULL, "fetch_and_op");

  OK(MPI_Win_lock_all(0, win));
  for (int r = 0; r < LOCKS; r++) {
    int spins = 0;
    do {
      OK(MPI_Compare_and_swap(&me, &zero, &old, MPI_INT, 0, 4, win));
      OK(MPI_Win_flush(0, win));
      CHECK(old >= 0 && old <= size && old != me, "spin lock: lock word %d, want 0..%d and not mine (%d)", old, size, me);
      CHECK(++spins < 100000000, "spin lock: no progress after %d tries", spins);
    } while (old != 0);
    OK(MPI_Get(&v, 1, MPI_INT, 0, 5, 1, MPI_INT, win));
    OK(MPI_Win_flush(0, win));
    v++;
    OK(MPI_Put(&v, 1, MPI_INT, 0, 5, 1, MPI_INT, win));
    OK(MPI_Win_flush(0, win));
    OK(MPI_Fetch_and_op(&zero, &old, MPI_INT, 0, 4, MPI_REPLACE, win));
    OK(MPI_Win_flush(0, win));
    CHECK(old == me, "spin lock: released word was %d, want %d", old, me);
  }
  OK(MPI_Win_unlock_all(win));

  /* REPLACE chain: every value written is fetched by exactly one later replace or is
   * the one left at the end, and 0 (the initial value) is fetched once. */
  OK(MPI_Win_lock_all(0, win));
  for (int r = 0; r < ROUNDS; r++) {
    int val = rank * ROUNDS + r + 1, peek = -1;
    OK(MPI_Get_accumulate(&val, 1, MPI_INT, &got[r], 1, MPI_INT, 0, 6, 1, MPI_INT, MPI_REPLACE, win));
    OK(MPI_Get_accumulate(NULL, 0, MPI_INT, &peek, 1, MPI_INT, 0, 6, 1, MPI_INT, MPI_NO_OP, win));
    OK(MPI_Win_flush(0, win));
    CHECK(peek >= 1 && peek <= ROUNDS * size, "get_accumulate NO_OP read %d, want 1..%d", peek, ROUNDS * size);
  }
  OK(MPI_Win_unlock_all(win));
  OK(MPI_Barrier(MPI_COMM_WORLD));
  OK(MPI_Win_lock_all(0, win));
  OK(MPI_Get_accumulate(NULL, 0, MPI_INT, &fin, 1, MPI_INT, 0, 6, 1, MPI_INT, MPI_NO_OP, win));
  OK(MPI_Win_unlock_all(win));
  check_permutation(got, ROUNDS, &fin, "get_accumulate REPLACE");
  OK(MPI_Barrier(MPI_COMM_WORLD));
  if (rank == 0) {
    sync_own(win);
    CHECK(mem[3] == ROUNDS * size, "fetch_and_op counter %d, want %d", mem[3], ROUNDS * size);
    CHECK(mem[4] == 0 && mem[5] == LOCKS * size, "spin lock word %d (want 0), counter %d (want %d)", mem[4], mem[5], LOCKS * size);
    CHECK(mem[6] == fin, "get_accumulate slot %d, NO_OP read %d", mem[6], fin);
  }
  free_win(&win, "atomics");
  free(got);
}

/* MPI_Rput, MPI_Raccumulate, MPI_Rget_accumulate and MPI_Rget to every rank inside
 * lock_all, completed with MPI_Waitall / MPI_Wait and MPI_Win_flush_all. Window: ints
 * 0..size-1 take one Rput from each rank, int size an Raccumulate sum, size+1 a fetched
 * counter. */
static void requests(void) {
  int w = size + 2, *mem, *out = malloc(size * sizeof(int)), *fetched = malloc(size * sizeof(int));
  int *back = malloc(size * w * sizeof(int)), *bits = malloc(size * sizeof(int)), *all = malloc(size * sizeof(int));
  const int add = rank + 1, one = 1;
  MPI_Request *req = malloc(size * sizeof(MPI_Request));
  MPI_Win win;
  OK(MPI_Win_allocate(w * sizeof(int), sizeof(int), MPI_INFO_NULL, MPI_COMM_WORLD, &mem, &win));
  init_own(win, mem, w, 0);
  OK(MPI_Win_lock_all(0, win));
  for (int t = 0; t < size; t++) {
    out[t] = 1000 * rank + t + 1;
    OK(MPI_Rput(&out[t], 1, MPI_INT, t, rank, 1, MPI_INT, win, &req[t]));
  }
  OK(MPI_Waitall(size, req, MPI_STATUSES_IGNORE));
  for (int t = 0; t < size; t++) OK(MPI_Raccumulate(&add, 1, MPI_INT, t, size, 1, MPI_INT, MPI_SUM, win, &req[t]));
  OK(MPI_Waitall(size, req, MPI_STATUSES_IGNORE));
  for (int t = 0; t < size; t++) {
    fetched[t] = -1;
    OK(MPI_Rget_accumulate(&one, 1, MPI_INT, &fetched[t], 1, MPI_INT, t, size + 1, 1, MPI_INT, MPI_SUM, win, &req[t]));
  }
  OK(MPI_Waitall(size, req, MPI_STATUSES_IGNORE));
  for (int t = 0; t < size; t++) {
    CHECK(fetched[t] >= 0 && fetched[t] < size, "rget_accumulate from %d fetched %d, want 0..%d", t, fetched[t], size - 1);
    bits[t] = 1 << fetched[t];
  }
  OK(MPI_Win_flush_all(win));
  OK(MPI_Barrier(MPI_COMM_WORLD));
  for (int t = 0; t < size; t++) {
    for (int i = 0; i < w; i++) back[t * w + i] = -1;
    MPI_Request r;
    OK(MPI_Rget(back + t * w, w, MPI_INT, t, 0, w, MPI_INT, win, &r));
    OK(MPI_Wait(&r, MPI_STATUS_IGNORE));
    CHECK(r == MPI_REQUEST_NULL, "rget request not freed by MPI_Wait");
    for (int o = 0; o < size; o++) CHECK(back[t * w + o] == 1000 * o + t + 1, "rput from %d to %d is %d, want %d", o, t, back[t * w + o], 1000 * o + t + 1);
    CHECK(back[t * w + size] == size * (size + 1) / 2, "raccumulate at %d is %d, want %d", t, back[t * w + size], size * (size + 1) / 2);
    CHECK(back[t * w + size + 1] == size, "rget_accumulate counter at %d is %d, want %d", t, back[t * w + size + 1], size);
    int sum = -1;
    OK(MPI_Rget_accumulate(NULL, 0, MPI_INT, &sum, 1, MPI_INT, t, size, 1, MPI_INT, MPI_NO_OP, win, &r));
    OK(MPI_Wait(&r, MPI_STATUS_IGNORE));
    CHECK(sum == size * (size + 1) / 2, "rget_accumulate NO_OP at %d read %d, want %d", t, sum, size * (size + 1) / 2);
  }
  OK(MPI_Win_unlock_all(win));
  OK(MPI_Allreduce(bits, all, size, MPI_INT, MPI_BOR, MPI_COMM_WORLD));
  for (int t = 0; t < size; t++) CHECK(all[t] == (1 << size) - 1, "rget_accumulate at %d fetched the set %#x, want %#x", t, all[t], (1 << size) - 1);
  free_win(&win, "requests");
  free(out), free(fetched), free(back), free(bits), free(all), free(req);
}

/* Post/start/complete/wait on a ring: each rank exposes its window to its left
 * neighbour and accesses its right one (with 1 rank, itself); the second round ends the
 * exposure with MPI_Win_test. */
static void pscw(void) {
  int *mem, marker = -1;
  MPI_Win win;
  MPI_Group world, gl, gr;
  OK(MPI_Comm_group(MPI_COMM_WORLD, &world));
  OK(MPI_Group_incl(world, 1, &left, &gl));
  OK(MPI_Group_incl(world, 1, &right, &gr));
  OK(MPI_Win_allocate(3 * sizeof(int), sizeof(int), MPI_INFO_NULL, MPI_COMM_WORLD, &mem, &win));
  mem[0] = 100 + rank; /* public at the post */
  mem[1] = mem[2] = -1;
  const int v1 = 200 + rank, v2 = 300 + rank;
  OK(MPI_Win_post(gl, 0, win));
  OK(MPI_Win_start(gr, 0, win));
  OK(MPI_Put(&v1, 1, MPI_INT, right, 1, 1, MPI_INT, win));
  OK(MPI_Get(&marker, 1, MPI_INT, right, 0, 1, MPI_INT, win));
  OK(MPI_Win_complete(win));
  OK(MPI_Win_wait(win));
  CHECK(marker == 100 + right, "pscw: get from %d read %d, want %d", right, marker, 100 + right);
  CHECK(mem[1] == 200 + left, "pscw: put from %d is %d, want %d", left, mem[1], 200 + left);
  OK(MPI_Win_post(gl, 0, win));
  OK(MPI_Win_start(gr, 0, win));
  OK(MPI_Put(&v2, 1, MPI_INT, right, 2, 1, MPI_INT, win));
  OK(MPI_Win_complete(win));
  int flag = 0;
  long tests = 0;
  while (!flag) {
    OK(MPI_Win_test(win, &flag));
    CHECK(++tests < 100000000, "pscw: MPI_Win_test still false after %ld calls", tests);
  }
  CHECK(mem[2] == 300 + left, "pscw: put from %d after win_test is %d, want %d", left, mem[2], 300 + left);
  free_win(&win, "pscw");
  OK(MPI_Group_free(&gl));
  OK(MPI_Group_free(&gr));
  OK(MPI_Group_free(&world));
}

/* A shared window of this host's ranks with (r+1)*16 ints at node rank r:
 * MPI_Win_shared_query gives every segment (contiguous, as the default without alloc_shared_noncontig requires); each
 * rank writes its right neighbour's segment with plain stores, then reads its own. */
static void shared(void) {
  MPI_Comm node;
  int me, np;
  OK(MPI_Comm_split_type(MPI_COMM_WORLD, MPI_COMM_TYPE_SHARED, 0, MPI_INFO_NULL, &node));
  OK(MPI_Comm_rank(node, &me));
  OK(MPI_Comm_size(node, &np));
  int lft = (me + np - 1) % np, rgt = (me + 1) % np;
  int *mine, **seg = malloc(np * sizeof(int *)), n = (me + 1) * 16, nr = (rgt + 1) * 16;
  MPI_Win win;
  OK(MPI_Win_allocate_shared(n * sizeof(int), sizeof(int), MPI_INFO_NULL, node, &mine, &win));
  for (int r = 0; r < np; r++) {
    MPI_Aint sz = -1;
    int du = -1;
    OK(MPI_Win_shared_query(win, r, &sz, &du, &seg[r]));
    CHECK(sz == (MPI_Aint)((r + 1) * 16 * sizeof(int)) && du == (int)sizeof(int), "shared_query %d: size %ld disp_unit %d, want %ld %d", r, (long)sz, du, (long)((r + 1) * 16 * sizeof(int)), (int)sizeof(int));
    if (r > 0) CHECK(seg[r] == seg[r - 1] + r * 16, "shared_query %d: segment at %p, want %p (contiguous)", r, (void *)seg[r], (void *)(seg[r - 1] + r * 16));
  }
  CHECK(seg[me] == mine, "shared_query of myself gives %p, allocate gave %p", (void *)seg[me], (void *)mine);
  MPI_Aint sz = -1;
  int du = -1, *first = NULL;
  OK(MPI_Win_shared_query(win, MPI_PROC_NULL, &sz, &du, &first));
  CHECK(first == seg[0] && sz == 16 * (MPI_Aint)sizeof(int), "shared_query MPI_PROC_NULL: %p size %ld, want %p %ld", (void *)first, (long)sz, (void *)seg[0], 16 * (long)sizeof(int));
  OK(MPI_Win_lock_all(MPI_MODE_NOCHECK, win));
  for (int i = 0; i < nr; i++) seg[rgt][i] = me * 1000 + i;
  OK(MPI_Win_sync(win));
  OK(MPI_Barrier(node));
  OK(MPI_Win_sync(win));
  for (int i = 0; i < n; i++) CHECK(mine[i] == lft * 1000 + i, "shared: element %d written by %d is %d, want %d", i, lft, mine[i], lft * 1000 + i);
  int *got = malloc(nr * sizeof(int));
  OK(MPI_Get(got, nr, MPI_INT, rgt, 0, nr, MPI_INT, win));
  OK(MPI_Win_flush(rgt, win));
  for (int i = 0; i < nr; i++) CHECK(got[i] == me * 1000 + i, "shared: get of %d's element %d is %d, want %d", rgt, i, got[i], me * 1000 + i);
  OK(MPI_Win_unlock_all(win));
  free_win(&win, "shared");
  free(got);
  free(seg);
  OK(MPI_Comm_free(&node));
}

/* Under MPI_ERRORS_RETURN on the window: an invalid lock type (MPI_ERR_LOCKTYPE or
 * MPI_ERR_ARG), a put to rank size (MPI_ERR_RANK), and with `range` a put past the end
 * of the target's window (MPI_ERR_RMA_RANGE, raised by the put or by the unlock that
 * completes it; MPI need not detect it and MPICH does not, it writes past the end);
 * then the window still works. */
static void errors(int range) {
  int *mem, v[4] = {7, 7, 7, 7};
  MPI_Win win;
  MPI_Errhandler eh;
  OK(MPI_Win_allocate(8 * sizeof(int), sizeof(int), MPI_INFO_NULL, MPI_COMM_WORLD, &mem, &win));
  OK(MPI_Win_get_errhandler(win, &eh));
  CHECK(eh == MPI_ERRORS_ARE_FATAL, "window's default error handler %p, want MPI_ERRORS_ARE_FATAL", (void *)eh);
  OK(MPI_Win_set_errhandler(win, MPI_ERRORS_RETURN));
  OK(MPI_Win_get_errhandler(win, &eh));
  CHECK(eh == MPI_ERRORS_RETURN, "window's error handler %p, want MPI_ERRORS_RETURN", (void *)eh);
  init_own(win, mem, 8, 0);

  for (int k = 0; range && k < 2; k++) { /* wholly past the end, then straddling it */
    int disp = k == 0 ? 8 : 6, count = k == 0 ? 1 : 4;
    OK(MPI_Win_lock(MPI_LOCK_SHARED, right, 0, win));
    int rc = MPI_Put(v, count, MPI_INT, right, disp, count, MPI_INT, win);
    int rcu = MPI_Win_unlock(right, win);
    CHECK((class_of(rc) == MPI_ERR_RMA_RANGE && rcu == MPI_SUCCESS) || (rc == MPI_SUCCESS && class_of(rcu) == MPI_ERR_RMA_RANGE),
          "put of %d at %d into 8 ints: put class %d, unlock class %d, want MPI_ERR_RMA_RANGE %d from one of them", count, disp, class_of(rc), class_of(rcu), MPI_ERR_RMA_RANGE);
  }
  int rc = MPI_Win_lock(12345, right, 0, win);
  CHECK(class_of(rc) == MPI_ERR_LOCKTYPE || class_of(rc) == MPI_ERR_ARG, "lock type 12345: class %d, want MPI_ERR_LOCKTYPE %d or MPI_ERR_ARG %d", class_of(rc), MPI_ERR_LOCKTYPE, MPI_ERR_ARG);
  OK(MPI_Barrier(MPI_COMM_WORLD));
  OK(MPI_Win_lock_all(0, win));
  rc = MPI_Put(v, 1, MPI_INT, size, 0, 1, MPI_INT, win);
  CHECK(class_of(rc) == MPI_ERR_RANK, "put to rank %d: class %d, want MPI_ERR_RANK %d", size, class_of(rc), MPI_ERR_RANK);
  const int good = 42 + rank;
  OK(MPI_Put(&good, 1, MPI_INT, right, 0, 1, MPI_INT, win));
  OK(MPI_Win_flush(right, win));
  OK(MPI_Win_unlock_all(win));
  OK(MPI_Barrier(MPI_COMM_WORLD));
  sync_own(win);
  CHECK(mem[0] == 42 + left, "after the errors: put from %d is %d, want %d", left, mem[0], 42 + left);
  free_win(&win, "errors");
}

/* MAXLOC and MINLOC accumulate on MPI_DOUBLE_INT, a pair type whose size (12) is not its
 * extent (16): the global maximum with its location, and the minimum fetched back. */
static void maxloc(void) {
  struct { double v; int i; } *mem, mine, got;
  MPI_Win win;
  OK(MPI_Win_allocate(2 * sizeof(*mem), sizeof(*mem), MPI_INFO_NULL, MPI_COMM_WORLD, &mem, &win));
  OK(MPI_Win_lock(MPI_LOCK_EXCLUSIVE, rank, 0, win));
  mem[0].v = -1.0; mem[0].i = -1;
  mem[1].v = 1e9; mem[1].i = -1;
  OK(MPI_Win_unlock(rank, win));
  OK(MPI_Barrier(MPI_COMM_WORLD));
  mine.v = 1.5 * ((rank * 7) % size); /* a permutation of 0..size-1, scaled */
  mine.i = rank;
  OK(MPI_Win_lock(MPI_LOCK_SHARED, 0, 0, win));
  OK(MPI_Accumulate(&mine, 1, MPI_DOUBLE_INT, 0, 0, 1, MPI_DOUBLE_INT, MPI_MAXLOC, win));
  OK(MPI_Fetch_and_op(&mine, &got, MPI_DOUBLE_INT, 0, 1, MPI_MINLOC, win));
  OK(MPI_Win_unlock(0, win));
  CHECK(got.v >= 0.0 || got.i == -1, "MINLOC fetched %g at %d", got.v, got.i);
  OK(MPI_Barrier(MPI_COMM_WORLD));
  if (rank == 0) {
    int top = 0, low = 0;
    for (int r = 0; r < size; r++) {
      if ((r * 7) % size > (top * 7) % size) top = r;
      if ((r * 7) % size < (low * 7) % size) low = r;
    }
    OK(MPI_Win_lock(MPI_LOCK_SHARED, 0, 0, win));
    CHECK(mem[0].v == 1.5 * ((top * 7) % size) && mem[0].i == top, "MAXLOC gave %g at %d, want %g at %d",
          mem[0].v, mem[0].i, 1.5 * ((top * 7) % size), top);
    CHECK(mem[1].v == 1.5 * ((low * 7) % size) && mem[1].i == low, "MINLOC gave %g at %d, want %g at %d",
          mem[1].v, mem[1].i, 1.5 * ((low * 7) % size), low);
    OK(MPI_Win_unlock(0, win));
  }
  free_win(&win, "maxloc");
}

/* The one-copy path of puts and gets of predefined contiguous types (a thread's last
 * window cached; no run list), under MPI_ERRORS_RETURN, byte by byte: MPI_BYTE puts into
 * a window of 8 ints (disp_unit 4) at every int displacement, ending at its last byte;
 * origin and target types that differ with equal bytes; gets back; a put one byte past
 * the end (MPI_ERR_RMA_RANGE), a negative displacement (MPI_ERR_DISP), byte counts that
 * differ (MPI_ERR_TYPE), a count of zero from NULL and MPI_PROC_NULL (nothing);
 * accumulates combined in place (SUM, REPLACE, SUM on bytes refused, a window's ints
 * added into themselves); then the
 * window freed and a smaller one made (which may get the same handle): a put past the
 * new one's end must fail where the old one's was in range. With `range` only, as
 * errors(). */
static void fast(int range) {
  unsigned char *mem, src[32], back[32];
  MPI_Win win;
  OK(MPI_Win_allocate(32, sizeof(int), MPI_INFO_NULL, MPI_COMM_WORLD, &mem, &win));
  OK(MPI_Win_set_errhandler(win, MPI_ERRORS_RETURN));
  init_own(win, (int *)mem, 8, 0);
  OK(MPI_Win_lock_all(0, win));
  for (int d = 0; d < 8; d++) {
    int n = 32 - 4 * d;
    for (int i = 0; i < n; i++) src[i] = (unsigned char)(rank * 31 + d * 7 + i + 1);
    OK(MPI_Put(src, n, MPI_BYTE, right, d, n, MPI_BYTE, win));
    OK(MPI_Win_flush(right, win));
    memset(back, 0, sizeof back);
    OK(MPI_Get(back, n, MPI_UNSIGNED_CHAR, right, d, n, MPI_CHAR, win));
    OK(MPI_Win_flush(right, win));
    for (int i = 0; i < n; i++)
      CHECK(back[i] == src[i], "fast: %d bytes at int %d, byte %d got back %d, want %d", n, d, i, back[i], src[i]);
  }
  /* 8 bytes as 2 ints at the target, then read back as 1 double's bytes. */
  const int two[2] = {1000 + rank, 2000 + rank};
  OK(MPI_Put(two, 8, MPI_BYTE, right, 6, 2, MPI_INT, win));
  OK(MPI_Win_flush(right, win));
  int got2[2] = {0, 0};
  OK(MPI_Get(got2, 1, MPI_DOUBLE, right, 6, 8, MPI_BYTE, win));
  OK(MPI_Win_flush(right, win));
  CHECK(got2[0] == two[0] && got2[1] == two[1], "fast: 2 ints as bytes got back %d %d, want %d %d", got2[0], got2[1], two[0], two[1]);
  if (range) {
    int rc = MPI_Put(src, 5, MPI_BYTE, right, 7, 5, MPI_BYTE, win);
    CHECK(class_of(rc) == MPI_ERR_RMA_RANGE, "fast: 5 bytes at int 7 of 8: class %d, want MPI_ERR_RMA_RANGE %d", class_of(rc), MPI_ERR_RMA_RANGE);
    rc = MPI_Get(back, 1, MPI_INT, right, 8, 1, MPI_INT, win);
    CHECK(class_of(rc) == MPI_ERR_RMA_RANGE, "fast: get of int 8 of 8: class %d, want MPI_ERR_RMA_RANGE %d", class_of(rc), MPI_ERR_RMA_RANGE);
  }
  int rc = MPI_Put(src, 1, MPI_INT, right, -1, 1, MPI_INT, win);
  CHECK(class_of(rc) == MPI_ERR_DISP, "fast: put at -1: class %d, want MPI_ERR_DISP %d", class_of(rc), MPI_ERR_DISP);
  rc = MPI_Put(src, 3, MPI_BYTE, right, 0, 1, MPI_INT, win);
  CHECK(class_of(rc) == MPI_ERR_TYPE, "fast: 3 bytes into 1 int: class %d, want MPI_ERR_TYPE %d", class_of(rc), MPI_ERR_TYPE);
  rc = MPI_Put(src, -1, MPI_BYTE, right, 0, -1, MPI_BYTE, win);
  CHECK(class_of(rc) == MPI_ERR_COUNT, "fast: count -1: class %d, want MPI_ERR_COUNT %d", class_of(rc), MPI_ERR_COUNT);
  OK(MPI_Put(NULL, 0, MPI_INT, right, 100, 0, MPI_INT, win));
  OK(MPI_Get(NULL, 0, MPI_INT, right, 100, 0, MPI_INT, win));
  OK(MPI_Put(src, 1, MPI_INT, MPI_PROC_NULL, 100, 1, MPI_INT, win));
  OK(MPI_Win_flush(MPI_PROC_NULL, win));
  /* Accumulates in place: SUM of ints 0..3 (+1..+4), REPLACE of int 4, SUM on MPI_BYTE
   * refused (MPI_ERR_OP), then (after the barrier) ints 0..3 of this rank's own window
   * added into themselves (origin and target overlap). */
  for (int i = 0; i < 5; i++) ((int *)src)[i] = i + 1;
  int before[4];
  OK(MPI_Get(before, 4, MPI_INT, right, 0, 4, MPI_INT, win));
  OK(MPI_Win_flush(right, win));
  OK(MPI_Accumulate(src, 4, MPI_INT, right, 0, 4, MPI_INT, MPI_SUM, win));
  OK(MPI_Accumulate(src + 16, 1, MPI_INT, right, 4, 1, MPI_INT, MPI_REPLACE, win));
  OK(MPI_Win_flush(right, win));
  int after[5];
  OK(MPI_Get(after, 5, MPI_INT, right, 0, 5, MPI_INT, win));
  OK(MPI_Win_flush(right, win));
  for (int i = 0; i < 4; i++)
    CHECK(after[i] == before[i] + i + 1, "fast: accumulate SUM int %d is %d, want %d", i, after[i], before[i] + i + 1);
  CHECK(after[4] == 5, "fast: accumulate REPLACE gave %d, want 5", after[4]);
  rc = MPI_Accumulate(src, 4, MPI_BYTE, right, 0, 4, MPI_BYTE, MPI_SUM, win);
  CHECK(class_of(rc) == MPI_ERR_OP, "fast: SUM on MPI_BYTE: class %d, want MPI_ERR_OP %d", class_of(rc), MPI_ERR_OP);
  OK(MPI_Win_unlock_all(win));
  OK(MPI_Barrier(MPI_COMM_WORLD));
  OK(MPI_Win_lock(MPI_LOCK_EXCLUSIVE, rank, 0, win));
  int mine[4];
  memcpy(mine, mem, sizeof mine);
  OK(MPI_Accumulate(mem, 4, MPI_INT, rank, 0, 4, MPI_INT, MPI_SUM, win));
  OK(MPI_Win_unlock(rank, win));
  OK(MPI_Win_lock(MPI_LOCK_SHARED, rank, 0, win));
  OK(MPI_Win_sync(win));
  for (int i = 0; i < 4; i++)
    CHECK(((int *)mem)[i] == 2 * mine[i], "fast: own ints added into themselves: int %d is %d, want %d", i, ((int *)mem)[i], 2 * mine[i]);
  OK(MPI_Win_unlock(rank, win));
  OK(MPI_Barrier(MPI_COMM_WORLD));
  sync_own(win);
  CHECK(((int *)mem)[6] == 1000 + left && ((int *)mem)[7] == 2000 + left, "fast: ints 6, 7 from %d are %d %d, want %d %d", left, ((int *)mem)[6], ((int *)mem)[7], 1000 + left, 2000 + left);
  free_win(&win, "fast");
  /* A window of 2 ints in place of 8: int 4 was in the old window, not in this one. */
  int *small;
  OK(MPI_Win_allocate(2 * sizeof(int), sizeof(int), MPI_INFO_NULL, MPI_COMM_WORLD, &small, &win));
  OK(MPI_Win_set_errhandler(win, MPI_ERRORS_RETURN));
  init_own(win, small, 2, 0);
  OK(MPI_Win_lock_all(0, win));
  if (range) {
    rc = MPI_Put(two, 1, MPI_INT, right, 4, 1, MPI_INT, win);
    CHECK(class_of(rc) == MPI_ERR_RMA_RANGE, "fast: int 4 of a new window of 2: class %d, want MPI_ERR_RMA_RANGE %d", class_of(rc), MPI_ERR_RMA_RANGE);
  }
  OK(MPI_Put(two, 2, MPI_INT, right, 0, 2, MPI_INT, win));
  OK(MPI_Win_unlock_all(win));
  OK(MPI_Barrier(MPI_COMM_WORLD));
  sync_own(win);
  CHECK(small[0] == 1000 + left && small[1] == 2000 + left, "fast: new window from %d holds %d %d, want %d %d", left, small[0], small[1], 1000 + left, 2000 + left);
  free_win(&win, "fast (second window)");
}

int main(int argc, char **argv) {
  OK(MPI_Init(&argc, &argv));
  OK(MPI_Comm_rank(MPI_COMM_WORLD, &rank));
  OK(MPI_Comm_size(MPI_COMM_WORLD, &size));
  left = (rank + size - 1) % size;
  right = (rank + 1) % size;
  /* A world over several hosts has no shared window of all its ranks. */
  MPI_Comm node;
  int local = 0;
  OK(MPI_Comm_split_type(MPI_COMM_WORLD, MPI_COMM_TYPE_SHARED, 0, MPI_INFO_NULL, &node));
  OK(MPI_Comm_size(node, &local));
  OK(MPI_Comm_free(&node));
  for (int f = CREATE; f <= DYNAMIC; f++)
    if (f != SHARED || local == size) flavour(f);
  datatypes();
  atomics();
  requests();
  pscw();
  shared();
  maxloc();
  errors(argc > 1 && strcmp(argv[1], "range") == 0);
  fast(argc > 1 && strcmp(argv[1], "range") == 0);
  OK(MPI_Barrier(MPI_COMM_WORLD));
  if (rank == 0) printf("ok rma %d ranks\n", size);
  OK(MPI_Finalize());
  return 0;
}
