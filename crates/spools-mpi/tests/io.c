/* MPI-IO: open/close/delete with their access modes and error classes, the file's size,
 * group, atomicity, info and default error handler (MPI_ERRORS_RETURN); explicit offsets
 * (independent and collective, short reads at the end of the file; collective reads and
 * writes of one run per rank, moved before the group decides, beside strided views that
 * take two phases, beside long runs and a whole subarray block that do not move early,
 * and beside a rank whose offset is refused); individual file
 * pointers with seek, position and byte offset; views (a cyclic vector, a subarray, a
 * darray) written collectively from non-contiguous memory and checked element by element
 * against a model of the global array, and get_view; the shared file pointer (write_shared,
 * ordered, seek_shared, read_shared); non-blocking and split collective operations
 * (non-blocking collectives made in a chain of messages that deadlocks if a call waits
 * for the group, tested in a loop, queued before a blocking collective); the
 * "external32" data representation (supported, or refused with its class); errors on a
 * read-only file, at negative offsets and on a full disk (/dev/full). Then M writers / N
 * readers: a 2-D array written under one darray view and read back under another. Whole
 * darrays (the exchange engine's path) at a displacement, at the second instance, in
 * Fortran order, with the reshuffle forced and disabled, and a group that reaches two
 * instances at once (the runs' path); a block-cyclic view of one block per instance, whole
 * (the engine's path) and not (the runs' path); subarrays whose boxes are a grid's blocks
 * (the engine's path), in C and Fortran order, with the reshuffle forced in 4 KiB rounds.
 * Arguments: DIR [write|read|both] [FILE]: the files go into DIR; `write` or `read` runs
 * only that half of the M/N case on FILE (in DIR unless it holds a '/'). 1 to 4 ranks. */
#include <string.h>
#include "check.h"

#define PATHLEN 4096
#define B 256     /* ints of a rank's block in the offset, pointer and non-blocking cases */
#define NC 96     /* ints each rank writes through the cyclic view */
#define R 8       /* ints of a shared-pointer record */
#define GR 13     /* rows and columns of the subarray case's global array */
#define GC 10

static int rank, size, next, prev;
static const char *dir;

/* What rank r writes as its i-th int (r may carry an offset to tell regions apart). */
static int val(int r, int i) { return r * 1000000 + i + 1; }
static int global_model(int i) { return i + 1; }
static int cyclic_model(int i) { return val(i % size, i / size); }

static void path_of(char *out, const char *name) {
  if (strchr(name, '/')) snprintf(out, PATHLEN, "%s", name);
  else snprintf(out, PATHLEN, "%s/%s", dir, name);
}

/* rc must be an error of class c1 or c2 (IO_VERBOSE=1 prints the class). */
static void want_error(int rc, int c1, int c2, const char *what) {
  int c = -1;
  MPI_Error_class(rc, &c);
  if (getenv("IO_VERBOSE")) fprintf(stderr, "rank %d: %s: class %d\n", rank, what, c);
  CHECK(rc != MPI_SUCCESS && (c == c1 || c == c2), "%s: returned %d (class %d), want an error of class %d or %d", what, rc, c, c1, c2);
}

/* Opens NAME in DIR afresh (rank 0 deletes it first) with CREATE|RDWR on every rank. */
static void open_fresh(const char *name, MPI_File *fh) {
  char path[PATHLEN];
  path_of(path, name);
  if (rank == 0) MPI_File_delete(path, MPI_INFO_NULL); /* may not exist */
  OK(MPI_Barrier(MPI_COMM_WORLD));
  OK(MPI_File_open(MPI_COMM_WORLD, path, MPI_MODE_CREATE | MPI_MODE_RDWR, MPI_INFO_NULL, fh));
  CHECK(*fh != MPI_FILE_NULL, "%s: open gave MPI_FILE_NULL", name);
}

static void close_file(MPI_File *fh, const char *what) {
  OK(MPI_File_close(fh));
  CHECK(*fh == MPI_FILE_NULL, "%s: closed handle %p, want MPI_FILE_NULL", what, (void *)*fh);
}

/* Sync-barrier-sync: the writes of every rank become visible to every rank. */
static void settle(MPI_File fh) {
  OK(MPI_File_sync(fh));
  OK(MPI_Barrier(MPI_COMM_WORLD));
  OK(MPI_File_sync(fh));
}

static void want_count(MPI_Status *st, MPI_Datatype t, int want, const char *what) {
  int n = -2;
  OK(MPI_Get_count(st, t, &n));
  CHECK(n == want, "%s: MPI_Get_count %d, want %d", what, n, want);
}

static void want_size(MPI_File fh, MPI_Offset want, const char *what) {
  MPI_Offset sz = -2;
  OK(MPI_File_get_size(fh, &sz));
  CHECK(sz == want, "%s: file size %lld, want %lld", what, (long long)sz, (long long)want);
}

static void want_position(MPI_File fh, MPI_Offset want, const char *what) {
  MPI_Offset pos = -2;
  OK(MPI_File_get_position(fh, &pos));
  CHECK(pos == want, "%s: position %lld, want %lld", what, (long long)pos, (long long)want);
}

/* Every rank checks the shared pointer, then waits for the others to have read it
 * (before anyone moves it again). */
static void want_shared_position(MPI_File fh, MPI_Offset want, const char *what) {
  MPI_Offset pos = -2;
  OK(MPI_File_get_position_shared(fh, &pos));
  CHECK(pos == want, "%s: shared position %lld, want %lld", what, (long long)pos, (long long)want);
  OK(MPI_Barrier(MPI_COMM_WORLD));
}

static void want_ints(const int *got, int r, int first, int n, const char *what) {
  for (int i = 0; i < n; i++)
    CHECK(got[i] == val(r, first + i), "%s: int %d is %d, want %d", what, i, got[i], val(r, first + i));
}

/* Rank 0 opens NAME alone (MPI_COMM_SELF, read-only) and checks its n ints against the
 * model, and the file's size; the others wait. */
static void check_file(const char *name, int n, int (*model)(int), const char *what) {
  if (rank == 0) {
    char path[PATHLEN];
    MPI_File fh;
    MPI_Status st;
    int *all = malloc((n + 1) * sizeof(int));
    path_of(path, name);
    OK(MPI_File_open(MPI_COMM_SELF, path, MPI_MODE_RDONLY, MPI_INFO_NULL, &fh));
    want_size(fh, (MPI_Offset)n * sizeof(int), what);
    OK(MPI_File_read_at(fh, 0, all, n + 1, MPI_INT, &st));
    want_count(&st, MPI_INT, n, what);
    for (int i = 0; i < n; i++) CHECK(all[i] == model(i), "%s: file int %d is %d, want %d", what, i, all[i], model(i));
    close_file(&fh, what);
    free(all);
  }
  OK(MPI_Barrier(MPI_COMM_WORLD));
}

/* Rank 0 reads `size` records of len ints at offset off of the current view and checks
 * that each rank's record (val(tag + r, j)) appears exactly once, whole. */
static void check_records(MPI_File fh, MPI_Offset off, int len, int tag, const char *what) {
  if (rank != 0) return;
  int *all = malloc(size * len * sizeof(int)), *seen = calloc(size, sizeof(int));
  MPI_Status st;
  OK(MPI_File_read_at(fh, off, all, size * len, MPI_INT, &st));
  want_count(&st, MPI_INT, size * len, what);
  for (int k = 0; k < size; k++) {
    int *rec = all + k * len, r = (rec[0] - 1) / 1000000 - tag;
    CHECK(r >= 0 && r < size && !seen[r], "%s: record %d starts %d: not a rank's (or seen twice)", what, k, rec[0]);
    seen[r] = 1;
    want_ints(rec, tag + r, 0, len, what);
  }
  free(all);
  free(seen);
}

static void test_open_close(void) {
  char path[PATHLEN], missing[PATHLEN];
  MPI_File fh;
  MPI_Group fg, cg;
  MPI_Info info = MPI_INFO_NULL;
  MPI_Errhandler eh;
  int amode = -1, flag = -1, cmp = -1, rc;
  path_of(path, "basic");
  path_of(missing, "no-such-file");

  OK(MPI_File_get_errhandler(MPI_FILE_NULL, &eh));
  CHECK(eh == MPI_ERRORS_RETURN, "MPI_FILE_NULL's handler %p, want MPI_ERRORS_RETURN", (void *)eh);
  open_fresh("basic", &fh);
  OK(MPI_File_get_errhandler(fh, &eh));
  CHECK(eh == MPI_ERRORS_RETURN, "a file's default handler %p, want MPI_ERRORS_RETURN", (void *)eh);
  OK(MPI_File_get_amode(fh, &amode));
  CHECK(amode == (MPI_MODE_CREATE | MPI_MODE_RDWR), "amode %d, want %d", amode, MPI_MODE_CREATE | MPI_MODE_RDWR);
  OK(MPI_File_get_group(fh, &fg));
  OK(MPI_Comm_group(MPI_COMM_WORLD, &cg));
  OK(MPI_Group_compare(fg, cg, &cmp));
  CHECK(cmp == MPI_IDENT, "file group compares %d with the communicator's, want MPI_IDENT %d", cmp, MPI_IDENT);
  OK(MPI_Group_free(&fg));
  OK(MPI_Group_free(&cg));

  want_size(fh, 0, "new file");
  OK(MPI_File_set_size(fh, 100));
  want_size(fh, 100, "after set_size(100)");
  OK(MPI_File_preallocate(fh, 200));
  want_size(fh, 200, "after preallocate(200)");
  OK(MPI_File_preallocate(fh, 50));
  want_size(fh, 200, "after preallocate(50) (it never shrinks)");
  OK(MPI_File_set_size(fh, 40));
  want_size(fh, 40, "after set_size(40)");
  OK(MPI_File_sync(fh));

  OK(MPI_File_get_atomicity(fh, &flag));
  CHECK(flag == 0, "default atomicity %d, want 0", flag);
  for (int a = 1; a >= 0; a--) {
    OK(MPI_File_set_atomicity(fh, a));
    OK(MPI_File_get_atomicity(fh, &flag));
    CHECK(flag == a, "atomicity %d after setting %d", flag, a);
  }

  OK(MPI_File_get_info(fh, &info));
  CHECK(info != MPI_INFO_NULL, "get_info gave MPI_INFO_NULL");
  OK(MPI_Info_free(&info));
  OK(MPI_Info_create(&info));
  OK(MPI_Info_set(info, "access_style", "read_mostly"));
  OK(MPI_File_set_info(fh, info));
  OK(MPI_Info_free(&info));
  OK(MPI_File_get_info(fh, &info));
  CHECK(info != MPI_INFO_NULL, "get_info after set_info gave MPI_INFO_NULL");
  OK(MPI_Info_free(&info));
  close_file(&fh, "basic");

  /* Errors at open, returned (MPI_FILE_NULL's handler). */
  const struct { int missing, amode, class; const char *what; } bad[] = {
      {0, MPI_MODE_CREATE | MPI_MODE_EXCL | MPI_MODE_RDWR, MPI_ERR_FILE_EXISTS, "open EXCL of an existing file"},
      {1, MPI_MODE_RDWR, MPI_ERR_NO_SUCH_FILE, "open RDWR of a missing file"},
      {1, MPI_MODE_RDONLY, MPI_ERR_NO_SUCH_FILE, "open RDONLY of a missing file"},
      {0, MPI_MODE_RDONLY | MPI_MODE_CREATE, MPI_ERR_AMODE, "open RDONLY|CREATE"},
      {0, MPI_MODE_RDONLY | MPI_MODE_RDWR, MPI_ERR_AMODE, "open RDONLY|RDWR"},
      {0, MPI_MODE_CREATE, MPI_ERR_AMODE, "open with no access mode"},
      {0, MPI_MODE_RDWR | MPI_MODE_SEQUENTIAL, MPI_ERR_AMODE, "open RDWR|SEQUENTIAL"}};
  for (size_t k = 0; k < sizeof bad / sizeof bad[0]; k++) {
    rc = MPI_File_open(MPI_COMM_WORLD, bad[k].missing ? missing : path, bad[k].amode, MPI_INFO_NULL, &fh);
    want_error(rc, bad[k].class, bad[k].class, bad[k].what);
  }

  OK(MPI_File_open(MPI_COMM_WORLD, path, MPI_MODE_RDONLY, MPI_INFO_NULL, &fh));
  want_size(fh, 40, "reopened read-only");
  OK(MPI_File_get_amode(fh, &amode));
  CHECK(amode == MPI_MODE_RDONLY, "amode %d, want RDONLY %d", amode, MPI_MODE_RDONLY);
  close_file(&fh, "basic read-only");

  OK(MPI_Barrier(MPI_COMM_WORLD));
  if (rank == 0) {
    OK(MPI_File_delete(path, MPI_INFO_NULL));
    want_error(MPI_File_delete(missing, MPI_INFO_NULL), MPI_ERR_NO_SUCH_FILE, MPI_ERR_IO, "delete of a missing file");
  }
  OK(MPI_Barrier(MPI_COMM_WORLD));
  rc = MPI_File_open(MPI_COMM_WORLD, path, MPI_MODE_RDWR, MPI_INFO_NULL, &fh);
  want_error(rc, MPI_ERR_NO_SUCH_FILE, MPI_ERR_NO_SUCH_FILE, "open of a deleted file");

  /* DELETE_ON_CLOSE: gone after close. */
  int x = rank;
  MPI_Status st;
  OK(MPI_File_open(MPI_COMM_WORLD, path, MPI_MODE_CREATE | MPI_MODE_WRONLY | MPI_MODE_DELETE_ON_CLOSE, MPI_INFO_NULL, &fh));
  OK(MPI_File_write_at(fh, rank * sizeof(int), &x, 1, MPI_INT, &st));
  close_file(&fh, "delete on close");
  OK(MPI_Barrier(MPI_COMM_WORLD));
  rc = MPI_File_open(MPI_COMM_WORLD, path, MPI_MODE_RDONLY, MPI_INFO_NULL, &fh);
  want_error(rc, MPI_ERR_NO_SUCH_FILE, MPI_ERR_NO_SUCH_FILE, "open after DELETE_ON_CLOSE");
}

static void test_explicit(void) {
  MPI_File fh;
  MPI_Status st;
  const MPI_Offset blk = B * sizeof(int), end = 2 * size * blk;
  int buf[B], got[B];
  open_fresh("explicit", &fh);
  for (int i = 0; i < B; i++) buf[i] = val(rank, i);
  OK(MPI_File_write_at(fh, rank * blk, buf, B, MPI_INT, &st));
  want_count(&st, MPI_INT, B, "write_at");
  settle(fh);
  OK(MPI_File_read_at(fh, next * blk, got, B, MPI_INT, &st));
  want_count(&st, MPI_INT, B, "read_at");
  want_ints(got, next, 0, B, "read_at the next rank's block");

  for (int i = 0; i < B; i++) buf[i] = val(100 + rank, i);
  OK(MPI_File_write_at_all(fh, (size + rank) * blk, buf, B, MPI_INT, &st));
  want_count(&st, MPI_INT, B, "write_at_all");
  settle(fh);
  OK(MPI_File_read_at_all(fh, (size + prev) * blk, got, B, MPI_INT, &st));
  want_count(&st, MPI_INT, B, "read_at_all");
  want_ints(got, 100 + prev, 0, B, "read_at_all the previous rank's block");
  want_size(fh, end, "explicit");

  /* Reads across and past the end of the file: short counts, no error. */
  OK(MPI_File_read_at(fh, end - (B / 2) * sizeof(int), got, B, MPI_INT, &st));
  want_count(&st, MPI_INT, B / 2, "read_at across the end");
  want_ints(got, 100 + size - 1, B / 2, B / 2, "read_at across the end");
  OK(MPI_File_read_at(fh, end + 100, got, B, MPI_INT, &st));
  want_count(&st, MPI_INT, 0, "read_at past the end");
  OK(MPI_File_read_at_all(fh, end - rank * sizeof(int), got, B, MPI_INT, &st));
  want_count(&st, MPI_INT, rank, "read_at_all of the last `rank` ints");
  close_file(&fh, "explicit");
}

/* The byte view back, and the file's first n ints back to buf (rank 0 writes them). */
static void model_back(MPI_File fh, const int *buf, int n) {
  MPI_Status st;
  OK(MPI_File_set_view(fh, 0, MPI_BYTE, MPI_BYTE, "native", MPI_INFO_NULL));
  if (rank == 0) OK(MPI_File_write_at(fh, 0, buf, n, MPI_INT, &st));
  settle(fh);
}

/* Collective reads and writes of one run per rank move before the group decides its path
 * (and again where it goes in two phases): one run on rank 0 beside strided views of
 * single ints elsewhere (the group's path is two phases, rank 0's early read is done
 * again), every rank one run (the early reads are the whole call), one run beside two
 * long ones and a whole subarray block beside halves (the group's path is each rank's
 * runs, but not every rank moved early: all wait for the outcome), a read and a write
 * where the last rank passes a negative offset while the others move at once (every rank
 * fails, in the last rank's class), strided and mixed writes read back whole. */
static void test_early_accesses(void) {
  MPI_File fh;
  MPI_Status st;
  const int n = 8 * size;
  int *buf = malloc(n * sizeof(int)), *got = malloc((n + 1) * sizeof(int));
  open_fresh("early", &fh);
  for (int i = 0; i < n; i++) buf[i] = global_model(i);
  if (rank == 0) OK(MPI_File_write_at(fh, 0, buf, n, MPI_INT, &st));
  settle(fh);
  /* Rank 0: its 8 ints as one run; the others: every size-th int from their rank on. */
  MPI_Datatype vec, ft;
  OK(MPI_Type_vector(8, 1, size, MPI_INT, &vec));
  OK(MPI_Type_create_resized(vec, 0, (MPI_Aint)(n * sizeof(int)), &ft));
  OK(MPI_Type_commit(&ft));
  if (rank == 0) OK(MPI_File_set_view(fh, 0, MPI_INT, MPI_INT, "native", MPI_INFO_NULL));
  else OK(MPI_File_set_view(fh, rank * sizeof(int), MPI_INT, ft, "native", MPI_INFO_NULL));
  for (int i = 0; i <= 8; i++) got[i] = -1;
  OK(MPI_File_read_at_all(fh, 0, got, 8, MPI_INT, &st));
  want_count(&st, MPI_INT, 8, "early reads beside strided views");
  for (int k = 0; k < 8; k++) {
    int want = rank == 0 ? global_model(k) : global_model(k * size + rank);
    CHECK(got[k] == want, "early reads beside strided views: [%d] is %d, want %d", k, got[k], want);
  }
  CHECK(got[8] == -1, "early reads beside strided views: read past 8 ints");
  /* Every rank one run: its own 8 ints, then its next neighbour's. */
  OK(MPI_File_set_view(fh, 0, MPI_BYTE, MPI_BYTE, "native", MPI_INFO_NULL));
  for (int pass = 0; pass < 2; pass++) {
    int from = pass == 0 ? rank : next;
    OK(MPI_File_read_at_all(fh, (MPI_Offset)from * 8 * sizeof(int), got, 8, MPI_INT, &st));
    want_count(&st, MPI_INT, 8, "early reads of one run each");
    for (int k = 0; k < 8; k++)
      CHECK(got[k] == global_model(from * 8 + k), "early reads of one run each: [%d] is %d", k, got[k]);
  }
  /* Rank 0 one run, the others two runs of 16 KiB each (each rank's own runs, but only
   * rank 0 read early): rank 0 waits for the others' outcome as they do. */
  {
    const int L = 4096, m = 2 * L * size;
    int *big = malloc(m * sizeof(int)), *back = malloc(2 * L * sizeof(int));
    for (int i = 0; i < m; i++) big[i] = global_model(i);
    OK(MPI_File_set_view(fh, 0, MPI_BYTE, MPI_BYTE, "native", MPI_INFO_NULL));
    if (rank == 0) OK(MPI_File_write_at(fh, 0, big, m, MPI_INT, &st));
    settle(fh);
    MPI_Datatype two, ft2;
    OK(MPI_Type_vector(2, L, L * size, MPI_INT, &two));
    OK(MPI_Type_create_resized(two, 0, (MPI_Aint)m * (MPI_Aint)sizeof(int), &ft2));
    OK(MPI_Type_commit(&ft2));
    if (rank == 0) OK(MPI_File_set_view(fh, 0, MPI_INT, MPI_INT, "native", MPI_INFO_NULL));
    else OK(MPI_File_set_view(fh, (MPI_Offset)rank * L * (MPI_Offset)sizeof(int), MPI_INT, ft2, "native", MPI_INFO_NULL));
    int cnt = rank == 0 ? L : 2 * L;
    OK(MPI_File_read_at_all(fh, 0, back, cnt, MPI_INT, &st));
    want_count(&st, MPI_INT, cnt, "one run beside two long ones");
    for (int k = 0; k < cnt; k++) {
      int want = rank == 0 ? global_model(k) : global_model((k / L) * L * size + rank * L + k % L);
      CHECK(back[k] == want, "one run beside two long ones: [%d] is %d, want %d", k, back[k], want);
    }
    OK(MPI_Type_free(&two));
    OK(MPI_Type_free(&ft2));
    free(big);
    free(back);
    model_back(fh, buf, n);
  }
  /* A subarray view of each rank's block of a 1-D array: rank 0 reads its whole block (a
   * whole array's access, not early), the others half of theirs (one run, early); the
   * keys differ, so the group decides again with every rank's runs listed, each one run:
   * every rank still waits for the others' outcome (rank 0 did not move early). */
  {
    const int L = 16;
    int gsz[1] = {L * size}, sub[1] = {L}, st0[1] = {L * rank};
    MPI_Datatype sa;
    OK(MPI_Type_create_subarray(1, gsz, sub, st0, MPI_ORDER_C, MPI_INT, &sa));
    OK(MPI_Type_commit(&sa));
    int *arr = malloc(L * size * sizeof(int)), *part = malloc(L * sizeof(int));
    for (int i = 0; i < L * size; i++) arr[i] = global_model(i);
    OK(MPI_File_set_view(fh, 0, MPI_BYTE, MPI_BYTE, "native", MPI_INFO_NULL));
    if (rank == 0) OK(MPI_File_write_at(fh, 0, arr, L * size, MPI_INT, &st));
    settle(fh);
    OK(MPI_File_set_view(fh, 0, MPI_INT, sa, "native", MPI_INFO_NULL));
    int cnt = rank == 0 ? L : L / 2;
    for (int pass = 0; pass < 3; pass++) {
      OK(MPI_File_read_at_all(fh, 0, part, cnt, MPI_INT, &st));
      want_count(&st, MPI_INT, cnt, "a whole block beside halves");
      for (int k = 0; k < cnt; k++)
        CHECK(part[k] == global_model(rank * L + k), "a whole block beside halves: [%d] is %d", k, part[k]);
    }
    OK(MPI_Type_free(&sa));
    free(arr);
    free(part);
    model_back(fh, buf, n);
  }
  /* The last rank's offset is negative: it fails before reading, the others read at once;
   * every rank fails, in the last rank's class (the default handler returns). The same
   * for a write (the others' runs are written). */
  MPI_Offset off = rank == size - 1 ? -16 : (MPI_Offset)(rank * 8 * (int)sizeof(int));
  int rc = MPI_File_read_at_all(fh, off, got, 8, MPI_INT, &st);
  want_error(rc, MPI_ERR_ARG, MPI_ERR_ARG, "read_at_all with one negative offset");
  rc = MPI_File_write_at_all(fh, off, buf + 8 * rank, 8, MPI_INT, &st);
  want_error(rc, MPI_ERR_ARG, MPI_ERR_ARG, "write_at_all with one negative offset");
  /* Writes: every rank every size-th int through a strided view (two phases), negated;
   * then rank 0 one run past them (its early write is written again by the group's
   * aggregators) beside the others' strided runs back to positive. Read back each time. */
  for (int i = 0; i < n; i++) buf[i] = -global_model(i);
  int mine[8];
  for (int k = 0; k < 8; k++) mine[k] = -global_model(k * size + rank);
  OK(MPI_File_set_view(fh, rank * sizeof(int), MPI_INT, ft, "native", MPI_INFO_NULL));
  OK(MPI_File_write_at_all(fh, 0, mine, 8, MPI_INT, &st));
  want_count(&st, MPI_INT, 8, "strided write_at_all");
  settle(fh);
  OK(MPI_File_set_view(fh, 0, MPI_INT, MPI_INT, "native", MPI_INFO_NULL));
  OK(MPI_File_read_at_all(fh, 0, got, n, MPI_INT, &st));
  for (int k = 0; k < n; k++) CHECK(got[k] == -global_model(k), "strided write_at_all: [%d] is %d, want %d", k, got[k], -global_model(k));
  /* (set_view is collective: rank 0 keeps its contiguous view.) */
  if (rank == 0) OK(MPI_File_set_view(fh, 0, MPI_INT, MPI_INT, "native", MPI_INFO_NULL));
  else OK(MPI_File_set_view(fh, rank * sizeof(int), MPI_INT, ft, "native", MPI_INFO_NULL));
  if (rank == 0) {
    for (int k = 0; k < 8; k++) mine[k] = 7770000 + k;
    OK(MPI_File_write_at_all(fh, n, mine, 8, MPI_INT, &st));
  } else {
    for (int k = 0; k < 8; k++) mine[k] = global_model(k * size + rank);
    OK(MPI_File_write_at_all(fh, 0, mine, 8, MPI_INT, &st));
  }
  want_count(&st, MPI_INT, 8, "one run beside strided writes");
  settle(fh);
  OK(MPI_File_set_view(fh, 0, MPI_INT, MPI_INT, "native", MPI_INFO_NULL));
  OK(MPI_File_read_at_all(fh, 0, got, n, MPI_INT, &st));
  for (int k = 0; k < n; k++) {
    int want = k % size != 0 ? global_model(k) : -global_model(k);
    CHECK(got[k] == want, "one run beside strided writes: [%d] is %d, want %d", k, got[k], want);
  }
  OK(MPI_File_read_at_all(fh, n, got, 8, MPI_INT, &st));
  for (int k = 0; k < 8; k++) CHECK(got[k] == 7770000 + k, "one run beside strided writes: rank 0's [%d] is %d", k, got[k]);
  /* Every rank one run: its own 8 ints back to the model. */
  OK(MPI_File_write_at_all(fh, (MPI_Offset)rank * 8, buf + 8 * rank, 8, MPI_INT, &st));
  for (int i = 0; i < n; i++) buf[i] = global_model(i);
  OK(MPI_File_write_at_all(fh, (MPI_Offset)rank * 8, buf + 8 * rank, 8, MPI_INT, &st));
  want_count(&st, MPI_INT, 8, "write_at_all of one run each");
  settle(fh);
  OK(MPI_File_read_at_all(fh, 0, got, n, MPI_INT, &st));
  want_count(&st, MPI_INT, n, "read_at_all of the whole file after");
  for (int k = 0; k < n; k++) CHECK(got[k] == global_model(k), "whole file after: [%d] is %d", k, got[k]);
  OK(MPI_Type_free(&vec));
  OK(MPI_Type_free(&ft));
  free(buf);
  free(got);
  close_file(&fh, "early");
}

static void test_pointers(void) {
  MPI_File fh;
  MPI_Status st;
  MPI_Offset byte = -1;
  int buf[B], got[B];
  open_fresh("pointers", &fh);
  OK(MPI_File_set_view(fh, rank * B * sizeof(int), MPI_INT, MPI_INT, "native", MPI_INFO_NULL));
  want_position(fh, 0, "after set_view");
  for (int i = 0; i < B; i++) buf[i] = val(rank, i);
  OK(MPI_File_write(fh, buf, B / 2, MPI_INT, &st));
  want_count(&st, MPI_INT, B / 2, "first write");
  want_position(fh, B / 2, "after the first write");
  OK(MPI_File_write(fh, buf + B / 2, B / 2, MPI_INT, &st));
  want_position(fh, B, "after the second write");
  OK(MPI_File_get_byte_offset(fh, B, &byte));
  CHECK(byte == (MPI_Offset)(rank + 1) * B * 4, "byte offset of %d: %lld", B, (long long)byte);
  OK(MPI_File_get_byte_offset(fh, 3, &byte));
  CHECK(byte == (MPI_Offset)rank * B * 4 + 12, "byte offset of 3: %lld", (long long)byte);
  settle(fh);

  OK(MPI_File_seek(fh, B / 4, MPI_SEEK_SET));
  want_position(fh, B / 4, "seek SET");
  OK(MPI_File_seek(fh, B / 4, MPI_SEEK_CUR));
  want_position(fh, B / 2, "seek CUR forward");
  OK(MPI_File_read(fh, got, B / 4, MPI_INT, &st));
  want_count(&st, MPI_INT, B / 4, "read");
  want_ints(got, rank, B / 2, B / 4, "read after seeks");
  want_position(fh, 3 * B / 4, "after the read");
  OK(MPI_File_seek(fh, -B / 2, MPI_SEEK_CUR));
  OK(MPI_File_read(fh, got, 1, MPI_INT, &st));
  want_ints(got, rank, B / 4, 1, "read after seek CUR backward");
  /* The end of the file in this rank's view: (size - rank) blocks past its displacement. */
  OK(MPI_File_seek(fh, 0, MPI_SEEK_END));
  want_position(fh, (MPI_Offset)(size - rank) * B, "seek END");
  OK(MPI_File_seek(fh, -(MPI_Offset)(size - rank) * B, MPI_SEEK_END));
  want_position(fh, 0, "seek END backward");
  OK(MPI_File_read(fh, got, B, MPI_INT, &st));
  want_ints(got, rank, 0, B, "read from the start of the view");
  /* The view goes on into the next block (none after the last rank's). */
  OK(MPI_File_read(fh, got, B, MPI_INT, &st));
  want_count(&st, MPI_INT, rank == size - 1 ? 0 : B, "read on past the own block");
  if (rank < size - 1) want_ints(got, rank + 1, 0, B, "read on into the next block");
  close_file(&fh, "pointers");
}

static void test_cyclic(void) {
  MPI_File fh;
  MPI_Status st;
  MPI_Datatype vec, ft;
  int buf[NC], got[NC];
  open_fresh("cyclic", &fh);
  /* A tile of NC/3 ints, one of every `size`, resized so that tiles follow each other. */
  OK(MPI_Type_vector(NC / 3, 1, size, MPI_INT, &vec));
  OK(MPI_Type_create_resized(vec, 0, (MPI_Aint)(NC / 3) * size * sizeof(int), &ft));
  OK(MPI_Type_commit(&ft));
  OK(MPI_File_set_view(fh, rank * sizeof(int), MPI_INT, ft, "native", MPI_INFO_NULL));
  for (int i = 0; i < NC; i++) buf[i] = val(rank, i);
  OK(MPI_File_write_all(fh, buf, 40, MPI_INT, &st)); /* ends inside the second tile */
  want_count(&st, MPI_INT, 40, "cyclic write_all");
  OK(MPI_File_write_all(fh, buf + 40, NC - 40, MPI_INT, &st));
  want_count(&st, MPI_INT, NC - 40, "cyclic write_all");
  want_position(fh, NC, "after the cyclic writes");
  settle(fh);
  check_file("cyclic", size * NC, cyclic_model, "cyclic view");
  OK(MPI_File_seek(fh, 0, MPI_SEEK_SET));
  OK(MPI_File_read_all(fh, got, NC, MPI_INT, &st));
  want_count(&st, MPI_INT, NC, "cyclic read_all");
  want_ints(got, rank, 0, NC, "cyclic read_all");
  close_file(&fh, "cyclic");
  OK(MPI_Type_free(&ft));
  OK(MPI_Type_free(&vec));
}

/* The subarray case: each rank's block of a GR x GC array (a block row, or a 2x2 grid
 * with 4 ranks), from memory with 2 ints of padding after each row. */
static void test_subarray(void) {
  int dims[2] = {0, 0}, lo[2], hi[2];
  OK(MPI_Dims_create(size, 2, dims));
  int co[2] = {rank / dims[1], rank % dims[1]};
  for (int d = 0; d < 2; d++) {
    int n = d == 0 ? GR : GC;
    lo[d] = n * co[d] / dims[d];
    hi[d] = n * (co[d] + 1) / dims[d];
  }
  int sizes[2] = {GR, GC}, sub[2] = {hi[0] - lo[0], hi[1] - lo[1]}, pitch = sub[1] + 2;
  MPI_Datatype ft, mt;
  MPI_File fh;
  MPI_Status st;
  OK(MPI_Type_create_subarray(2, sizes, sub, lo, MPI_ORDER_C, MPI_INT, &ft));
  OK(MPI_Type_commit(&ft));
  OK(MPI_Type_vector(sub[0], sub[1], pitch, MPI_INT, &mt));
  OK(MPI_Type_commit(&mt));
  int *buf = malloc(sub[0] * pitch * sizeof(int));
  for (int r = 0; r < sub[0]; r++)
    for (int c = 0; c < pitch; c++) buf[r * pitch + c] = c < sub[1] ? (lo[0] + r) * GC + lo[1] + c + 1 : -7;
  open_fresh("subarray", &fh);
  OK(MPI_File_set_view(fh, 0, MPI_INT, ft, "native", MPI_INFO_NULL));
  OK(MPI_File_write_all(fh, buf, 1, mt, &st));
  want_count(&st, mt, 1, "subarray write_all");
  settle(fh);
  check_file("subarray", GR * GC, global_model, "subarray view");
  for (int i = 0; i < sub[0] * pitch; i++) buf[i] = -1;
  OK(MPI_File_read_at_all(fh, 0, buf, 1, mt, &st));
  want_count(&st, mt, 1, "subarray read_at_all");
  for (int r = 0; r < sub[0]; r++)
    for (int c = 0; c < pitch; c++) {
      int want = c < sub[1] ? (lo[0] + r) * GC + lo[1] + c + 1 : -1;
      CHECK(buf[r * pitch + c] == want, "subarray read: local [%d][%d] is %d, want %d", r, c, buf[r * pitch + c], want);
    }
  close_file(&fh, "subarray");
  free(buf);
  OK(MPI_Type_free(&ft));
  OK(MPI_Type_free(&mt));
}

/* Subarrays that tile their array as blocks (the exchange engine's path: each rank's box
 * is block (ceil(n/p)) of a row-major process grid, the last one shorter): a 3-D C-order
 * array of ints (37 x 20 x 6), and a 2-D Fortran-order one (29 x 11) written with the
 * reshuffle forced in 4 KiB rounds; each written collectively from contiguous memory,
 * checked against the model by rank 0, read back collectively by every rank and
 * checked element by element. */
static void subarray_blocks(const char *name, int nd, const int *gs, int order, MPI_Info info) {
  int dims[3] = {0, 0, 0}, sub[3], lo[3], n = 1;
  OK(MPI_Dims_create(size, nd, dims));
  for (int d = 0, rest = rank; d < nd; d++) {
    int stride = 1;
    for (int e = d + 1; e < nd; e++) stride *= dims[e];
    int co = rest / stride, b = (gs[d] + dims[d] - 1) / dims[d];
    rest %= stride;
    lo[d] = co * b < gs[d] ? co * b : gs[d];
    sub[d] = gs[d] - lo[d] < b ? gs[d] - lo[d] : b;
    n *= sub[d];
  }
  CHECK(n > 0, "subarray blocks: rank %d has an empty box", rank);
  int total = 1;
  for (int d = 0; d < nd; d++) total *= gs[d];
  MPI_Datatype ft;
  OK(MPI_Type_create_subarray(nd, gs, sub, lo, order, MPI_INT, &ft));
  OK(MPI_Type_commit(&ft));
  int *buf = malloc(n * sizeof(int)), *back = malloc(n * sizeof(int));
  /* The box's elements in the array's order, each holding its global index + 1. */
  for (int k = 0; k < n; k++) {
    int idx[3], rest = k, g = 0;
    if (order == MPI_ORDER_C)
      for (int d = nd - 1; d >= 0; d--) idx[d] = rest % sub[d], rest /= sub[d];
    else
      for (int d = 0; d < nd; d++) idx[d] = rest % sub[d], rest /= sub[d];
    if (order == MPI_ORDER_C)
      for (int d = 0; d < nd; d++) g = g * gs[d] + lo[d] + idx[d];
    else
      for (int d = nd - 1; d >= 0; d--) g = g * gs[d] + lo[d] + idx[d];
    buf[k] = g + 1;
  }
  MPI_File fh;
  MPI_Status st;
  open_fresh(name, &fh);
  OK(MPI_File_set_view(fh, 0, MPI_INT, ft, "native", info));
  OK(MPI_File_write_all(fh, buf, n, MPI_INT, &st));
  want_count(&st, MPI_INT, n, "subarray blocks write_all");
  settle(fh);
  check_file(name, total, global_model, "subarray blocks");
  OK(MPI_File_read_at_all(fh, 0, back, n, MPI_INT, &st));
  want_count(&st, MPI_INT, n, "subarray blocks read_at_all");
  for (int k = 0; k < n; k++) CHECK(back[k] == buf[k], "subarray blocks read: element %d of the box is %d, want %d", k, back[k], buf[k]);
  close_file(&fh, "subarray blocks");
  free(buf);
  free(back);
  OK(MPI_Type_free(&ft));
}

static void test_subarray_blocks(void) {
  const int g3[3] = {37, 20, 6}, g2[2] = {29, 11};
  subarray_blocks("subarray-c", 3, g3, MPI_ORDER_C, MPI_INFO_NULL);
  MPI_Info info;
  OK(MPI_Info_create(&info));
  OK(MPI_Info_set(info, "romio_cb_write", "enable"));
  OK(MPI_Info_set(info, "romio_cb_read", "enable"));
  OK(MPI_Info_set(info, "cb_buffer_size", "4096"));
  subarray_blocks("subarray-f", 2, g2, MPI_ORDER_FORTRAN, info);
  OK(MPI_Info_free(&info));
}

/* The process-grid coordinate owning index i of a dimension of n over p processes. */
static int owner(int distrib, int darg, int n, int p, int i) {
  if (distrib == MPI_DISTRIBUTE_NONE) return 0;
  if (distrib == MPI_DISTRIBUTE_BLOCK) return i / (darg == MPI_DISTRIBUTE_DFLT_DARG ? (n + p - 1) / p : darg);
  return i / (darg == MPI_DISTRIBUTE_DFLT_DARG ? 1 : darg) % p;
}

/* Writes (or reads and checks) the gs[0] x gs[1] array of ints, value = row-major index
 * + 1, under a darray view of this rank's part: written from a vector memory type (an int
 * then a gap), read into resized ints (an int then two gaps). */
static void darray_io(const char *name, const int *gs, const int *dist, const int *darg, int write, const char *what) {
  int ps[2] = {dist[0] == MPI_DISTRIBUTE_NONE, dist[1] == MPI_DISTRIBUTE_NONE}, n = 0, tsz = -1;
  OK(MPI_Dims_create(size, 2, ps));
  int c0 = rank / ps[1], c1 = rank % ps[1];
  int *idx = malloc(gs[0] * gs[1] * sizeof(int)), *buf = malloc(3 * gs[0] * gs[1] * sizeof(int));
  for (int i = 0; i < gs[0]; i++)
    for (int j = 0; j < gs[1]; j++)
      if (owner(dist[0], darg[0], gs[0], ps[0], i) == c0 && owner(dist[1], darg[1], gs[1], ps[1], j) == c1) idx[n++] = i * gs[1] + j;
  MPI_Datatype ft, mt;
  MPI_File fh;
  MPI_Status st;
  OK(MPI_Type_create_darray(size, rank, 2, gs, dist, darg, ps, MPI_ORDER_C, MPI_INT, &ft));
  OK(MPI_Type_commit(&ft));
  OK(MPI_Type_size(ft, &tsz));
  CHECK(tsz == n * (int)sizeof(int), "%s: darray type size %d, want %d ints", what, tsz, n);
  if (write) {
    OK(MPI_Type_vector(n, 1, 2, MPI_INT, &mt));
    OK(MPI_Type_commit(&mt));
    for (int k = 0; k < n; k++) buf[2 * k] = idx[k] + 1, buf[2 * k + 1] = -5;
    open_fresh(name, &fh);
    OK(MPI_File_set_view(fh, 0, MPI_INT, ft, "native", MPI_INFO_NULL));
    OK(MPI_File_write_all(fh, buf, 1, mt, &st));
    want_count(&st, mt, 1, what);
    close_file(&fh, what);
    OK(MPI_Barrier(MPI_COMM_WORLD));
    check_file(name, gs[0] * gs[1], global_model, what);
  } else {
    char path[PATHLEN];
    path_of(path, name);
    OK(MPI_Type_create_resized(MPI_INT, 0, 3 * sizeof(int), &mt));
    OK(MPI_Type_commit(&mt));
    for (int k = 0; k < 3 * n; k++) buf[k] = -1;
    OK(MPI_File_open(MPI_COMM_WORLD, path, MPI_MODE_RDONLY, MPI_INFO_NULL, &fh));
    OK(MPI_File_set_view(fh, 0, MPI_INT, ft, "native", MPI_INFO_NULL));
    OK(MPI_File_read_all(fh, buf, n, mt, &st));
    want_count(&st, mt, n, what);
    for (int k = 0; k < n; k++) {
      CHECK(buf[3 * k] == idx[k] + 1, "%s: local int %d (global %d) is %d, want %d", what, k, idx[k], buf[3 * k], idx[k] + 1);
      CHECK(buf[3 * k + 1] == -1 && buf[3 * k + 2] == -1, "%s: the gap after local int %d was written: %d %d", what, k, buf[3 * k + 1], buf[3 * k + 2]);
    }
    close_file(&fh, what);
  }
  free(idx);
  free(buf);
  OK(MPI_Type_free(&mt));
  OK(MPI_Type_free(&ft));
}

static void test_darray(void) {
  const int gs[2] = {12, 10}, dist[2] = {MPI_DISTRIBUTE_CYCLIC, MPI_DISTRIBUTE_BLOCK}, darg[2] = {2, MPI_DISTRIBUTE_DFLT_DARG};
  darray_io("darray", gs, dist, darg, 1, "darray write_all");
  darray_io("darray", gs, dist, darg, 0, "darray read_all");
  /* 4 MiB and more of single ints dealt cyclically: the read is sieved, its windows
   * read once on the host and shared by the ranks. */
  const int big[2] = {1040, 1024}, bdist[2] = {MPI_DISTRIBUTE_NONE, MPI_DISTRIBUTE_CYCLIC};
  const int bdarg[2] = {MPI_DISTRIBUTE_DFLT_DARG, 1};
  darray_io("darray-big", big, bdist, bdarg, 1, "cyclic darray of 4 MiB write_all");
  darray_io("darray-big", big, bdist, bdarg, 0, "cyclic darray of 4 MiB read_all (sieved, shared)");
}

/* Whole darrays at a displacement: a 3-D Fortran-order array of doubles (block(b) x
 * cyclic(2) x none) behind a 24-byte header, two instances of the filetype written
 * collectively (explicit offset with the reshuffle forced in 4 KiB rounds, then the
 * individual pointer with it disabled), read back collectively, then a collective write
 * where rank 0 and the others reach different instances (the group cannot move one whole
 * array). Rank 0 checks every byte of the file against the model. */
#define RG0 40
#define RG1 21
#define RG2 5
#define RT (RG0 * RG1 * RG2)
#define HDR 24
static double rval(int tag, int l) { return tag * 1000000.0 + l + 1; }

static void test_darray_regions(void) {
  int gs[3] = {RG0, RG1, RG2}, ps[3] = {0, 0, 1};
  OK(MPI_Dims_create(size, 3, ps));
  int dist[3] = {MPI_DISTRIBUTE_BLOCK, MPI_DISTRIBUTE_CYCLIC, MPI_DISTRIBUTE_NONE};
  int darg[3] = {(RG0 + ps[0] - 1) / ps[0] + 1, 2, MPI_DISTRIBUTE_DFLT_DARG};
  /* Owner rank of each global element (row-major process grid), and this rank's
   * elements in Fortran order (the first index fastest). */
  int *own = malloc(RT * sizeof(int)), *idx = malloc(RT * sizeof(int)), n = 0;
  for (int k = 0; k < RG2; k++)
    for (int j = 0; j < RG1; j++)
      for (int i = 0; i < RG0; i++) {
        int l = i + RG0 * (j + RG1 * k);
        int c0 = i / darg[0], c1 = (j / 2) % ps[1];
        own[l] = c0 * ps[1] * ps[2] + c1 * ps[2];
        if (own[l] == rank) idx[n++] = l;
      }
  MPI_Datatype ft;
  OK(MPI_Type_create_darray(size, rank, 3, gs, dist, darg, ps, MPI_ORDER_FORTRAN, MPI_DOUBLE, &ft));
  OK(MPI_Type_commit(&ft));
  double *buf = malloc((n + 1) * sizeof(double));
  MPI_File fh;
  MPI_Status st;
  MPI_Info on, off;
  OK(MPI_Info_create(&on));
  OK(MPI_Info_set(on, "romio_cb_write", "enable"));
  OK(MPI_Info_set(on, "romio_cb_read", "enable"));
  OK(MPI_Info_set(on, "cb_buffer_size", "4096"));
  OK(MPI_Info_create(&off));
  OK(MPI_Info_set(off, "romio_cb_write", "disable"));
  OK(MPI_Info_set(off, "romio_cb_read", "disable"));
  open_fresh("regions", &fh);
  char hdr[HDR];
  memset(hdr, 'H', HDR);
  if (rank == 0) OK(MPI_File_write_at(fh, 0, hdr, HDR, MPI_BYTE, &st));
  settle(fh);
  OK(MPI_File_set_view(fh, HDR, MPI_DOUBLE, ft, "native", on));
  for (int k = 0; k < n; k++) buf[k] = rval(1, idx[k]);
  OK(MPI_File_write_at_all(fh, 0, buf, n, MPI_DOUBLE, &st));
  want_count(&st, MPI_DOUBLE, n, "regions: write_at_all of instance 0");
  OK(MPI_File_set_info(fh, off));
  OK(MPI_File_seek(fh, n, MPI_SEEK_SET));
  for (int k = 0; k < n; k++) buf[k] = rval(2, idx[k]);
  OK(MPI_File_write_all(fh, buf, n, MPI_DOUBLE, &st));
  want_count(&st, MPI_DOUBLE, n, "regions: write_all of instance 1");
  want_position(fh, 2 * n, "regions: the pointer after instance 1");
  settle(fh);
  for (int inst = 0; inst < 2; inst++) {
    OK(MPI_File_set_info(fh, inst ? on : off));
    for (int k = 0; k <= n; k++) buf[k] = -1;
    OK(MPI_File_read_at_all(fh, (MPI_Offset)inst * n, buf, n, MPI_DOUBLE, &st));
    want_count(&st, MPI_DOUBLE, n, "regions: read_at_all");
    for (int k = 0; k < n; k++)
      CHECK(buf[k] == rval(inst + 1, idx[k]), "regions: instance %d local %d (global %d) is %g, want %g", inst, k, idx[k], buf[k], rval(inst + 1, idx[k]));
    CHECK(buf[n] == -1, "regions: read past its %d doubles", n);
  }
  /* Rank 0 at instance 0, the others at instance 1: not one array. */
  for (int k = 0; k < n; k++) buf[k] = rval(3, idx[k]);
  OK(MPI_File_write_at_all(fh, rank == 0 ? 0 : n, buf, n, MPI_DOUBLE, &st));
  want_count(&st, MPI_DOUBLE, n, "regions: write_at_all at two instances");
  settle(fh);
  close_file(&fh, "regions");
  if (rank == 0) {
    char path[PATHLEN], got[HDR];
    double *all = malloc(2 * RT * sizeof(double));
    path_of(path, "regions");
    OK(MPI_File_open(MPI_COMM_SELF, path, MPI_MODE_RDONLY, MPI_INFO_NULL, &fh));
    want_size(fh, HDR + 2 * RT * (MPI_Offset)sizeof(double), "regions: file size");
    OK(MPI_File_read_at(fh, 0, got, HDR, MPI_BYTE, &st));
    CHECK(memcmp(got, hdr, HDR) == 0, "regions: the header was overwritten");
    OK(MPI_File_read_at(fh, HDR, all, 2 * RT, MPI_DOUBLE, &st));
    for (int l = 0; l < RT; l++) {
      double w0 = rval(own[l] == 0 ? 3 : 1, l), w1 = rval(own[l] == 0 ? 2 : 3, l);
      CHECK(all[l] == w0, "regions: file instance 0 global %d is %g, want %g", l, all[l], w0);
      CHECK(all[RT + l] == w1, "regions: file instance 1 global %d is %g, want %g", l, all[RT + l], w1);
    }
    close_file(&fh, "regions: check");
    free(all);
  }
  OK(MPI_Barrier(MPI_COMM_WORLD));
  OK(MPI_Info_free(&on));
  OK(MPI_Info_free(&off));
  OK(MPI_Type_free(&ft));
  free(buf);
  free(idx);
  free(own);
}

/* A block-cyclic view (3 ints of every 3 * size, from 8 + 12 * rank): each rank writes
 * its cyclic(3) deal of a 100-int array collectively (the exchange engine's path) and
 * reads it back, then every rank rewrites only its first 5 ints (not the deal: the runs'
 * path). Rank 0 checks the file: 8 untouched bytes, then the ints. */
#define SN 100
static int strided_global(int r, int k) { return ((k / 3) * size + r) * 3 + k % 3; }

static void test_strided_whole(void) {
  MPI_File fh;
  MPI_Status st;
  MPI_Datatype three, ft;
  int buf[SN], got[SN + 1], n = 0;
  while (strided_global(rank, n) < SN) n++;
  OK(MPI_Type_contiguous(3, MPI_INT, &three));
  OK(MPI_Type_create_resized(three, 0, (MPI_Aint)3 * size * sizeof(int), &ft));
  OK(MPI_Type_commit(&ft));
  open_fresh("strided", &fh);
  OK(MPI_File_set_view(fh, 8 + 12 * rank, MPI_INT, ft, "native", MPI_INFO_NULL));
  for (int k = 0; k < n; k++) buf[k] = strided_global(rank, k) + 1;
  OK(MPI_File_write_all(fh, buf, n, MPI_INT, &st));
  want_count(&st, MPI_INT, n, "strided write_all");
  settle(fh);
  OK(MPI_File_seek(fh, 0, MPI_SEEK_SET));
  for (int k = 0; k <= n; k++) got[k] = -1;
  OK(MPI_File_read_all(fh, got, n, MPI_INT, &st));
  want_count(&st, MPI_INT, n, "strided read_all");
  for (int k = 0; k < n; k++) CHECK(got[k] == buf[k], "strided read_all: local %d is %d, want %d", k, got[k], buf[k]);
  CHECK(got[n] == -1, "strided read_all: read past its %d ints", n);
  for (int k = 0; k < 5; k++) buf[k] = -(strided_global(rank, k) + 1);
  OK(MPI_File_write_at_all(fh, 0, buf, 5, MPI_INT, &st));
  want_count(&st, MPI_INT, 5, "strided write_at_all of 5");
  settle(fh);
  close_file(&fh, "strided");
  if (rank == 0) {
    char path[PATHLEN];
    int all[SN + 2];
    path_of(path, "strided");
    OK(MPI_File_open(MPI_COMM_SELF, path, MPI_MODE_RDONLY, MPI_INFO_NULL, &fh));
    want_size(fh, 8 + SN * (MPI_Offset)sizeof(int), "strided: file size");
    OK(MPI_File_read_at(fh, 0, all, SN + 2, MPI_INT, &st));
    want_count(&st, MPI_INT, SN + 2, "strided: the whole file");
    CHECK(all[0] == 0 && all[1] == 0, "strided: the 8 bytes before the array are %d %d", all[0], all[1]);
    for (int i = 0; i < SN; i++) {
      int r = (i / 3) % size, k = (i / (3 * size)) * 3 + i % 3, want = k < 5 ? -(i + 1) : i + 1;
      CHECK(all[2 + i] == want, "strided: file int %d (rank %d's %d) is %d, want %d", i, r, k, all[2 + i], want);
    }
    close_file(&fh, "strided: check");
  }
  OK(MPI_Barrier(MPI_COMM_WORLD));
  OK(MPI_Type_free(&ft));
  OK(MPI_Type_free(&three));
}

static void test_get_view(void) {
  MPI_File fh;
  MPI_Offset disp = -1;
  MPI_Datatype et, ft, vec;
  MPI_Aint lb, ext, vlb, vext;
  char rep[MPI_MAX_DATAREP_STRING + 1];
  int ni = -1, na = -1, nd = -1, comb = -1, tsz, vsz;
  open_fresh("view", &fh);
  OK(MPI_File_get_view(fh, &disp, &et, &ft, rep));
  CHECK(disp == 0 && et == MPI_BYTE && ft == MPI_BYTE && strcmp(rep, "native") == 0, "default view: disp %lld etype %p filetype %p datarep '%s', want 0 MPI_BYTE MPI_BYTE 'native'", (long long)disp, (void *)et, (void *)ft, rep);
  OK(MPI_Type_vector(4, 2, 3 * size, MPI_INT, &vec));
  OK(MPI_Type_commit(&vec));
  OK(MPI_File_set_view(fh, 8 + rank * 8, MPI_INT, vec, "native", MPI_INFO_NULL));
  OK(MPI_File_get_view(fh, &disp, &et, &ft, rep));
  CHECK(disp == 8 + rank * 8, "view disp %lld, want %d", (long long)disp, 8 + rank * 8);
  CHECK(strcmp(rep, "native") == 0, "view datarep '%s', want 'native'", rep);
  OK(MPI_Type_get_envelope(et, &ni, &na, &nd, &comb));
  CHECK(comb == MPI_COMBINER_NAMED && et == MPI_INT, "view etype: combiner %d handle %p, want MPI_COMBINER_NAMED MPI_INT", comb, (void *)et);
  /* The filetype: a new derived type whose typemap is the vector's (the standard asks no
   * more: MPICH gives a contiguous of one vector). Same sizes, and the same bytes packed. */
  OK(MPI_Type_get_envelope(ft, &ni, &na, &nd, &comb));
  CHECK(comb != MPI_COMBINER_NAMED, "view filetype: combiner MPI_COMBINER_NAMED, want a derived type");
  OK(MPI_Type_size(ft, &tsz));
  OK(MPI_Type_size(vec, &vsz));
  OK(MPI_Type_get_extent(ft, &lb, &ext));
  OK(MPI_Type_get_extent(vec, &vlb, &vext));
  CHECK(tsz == vsz && lb == vlb && ext == vext, "view filetype size %d lb %ld extent %ld, want %d %ld %ld", tsz, (long)lb, (long)ext, vsz, (long)vlb, (long)vext);
  int src[64], p1[16], p2[16], pos1 = 0, pos2 = 0;
  for (int i = 0; i < 64; i++) src[i] = i + 1;
  OK(MPI_Pack(src, 1, ft, p1, sizeof p1, &pos1, MPI_COMM_SELF));
  OK(MPI_Pack(src, 1, vec, p2, sizeof p2, &pos2, MPI_COMM_SELF));
  CHECK(pos1 == pos2 && pos1 == 32 && memcmp(p1, p2, pos1) == 0, "view filetype packs %d bytes (first ints %d %d %d), want the vector's %d (%d %d %d)", pos1, p1[0], p1[1], p1[2], pos2, p2[0], p2[1], p2[2]);
  OK(MPI_Type_free(&ft));
  close_file(&fh, "view");
  OK(MPI_Type_free(&vec));
}

static void test_shared(void) {
  MPI_File fh;
  MPI_Status st;
  int rec[R + 4], got[R + 4], n = rank + 1, tot = size * (size + 1) / 2;
  const MPI_Offset ord = size * R; /* where the ordered writes go */
  open_fresh("shared", &fh);
  OK(MPI_File_set_view(fh, 0, MPI_INT, MPI_INT, "native", MPI_INFO_NULL));
  want_shared_position(fh, 0, "after set_view");
  for (int j = 0; j < R; j++) rec[j] = val(rank, j);
  OK(MPI_File_write_shared(fh, rec, R, MPI_INT, &st));
  want_count(&st, MPI_INT, R, "write_shared");
  settle(fh);
  want_shared_position(fh, ord, "after every rank's write_shared");
  check_records(fh, 0, R, 0, "write_shared records");

  OK(MPI_File_seek_shared(fh, ord, MPI_SEEK_SET));
  for (int j = 0; j < n; j++) rec[j] = val(rank, 100 + j);
  OK(MPI_File_write_ordered(fh, rec, n, MPI_INT, &st));
  want_count(&st, MPI_INT, n, "write_ordered");
  want_shared_position(fh, ord + tot, "after write_ordered");
  settle(fh);
  if (rank == 0) { /* rank r's r + 1 ints, in rank order */
    int *all = malloc(tot * sizeof(int));
    OK(MPI_File_read_at(fh, ord, all, tot, MPI_INT, &st));
    want_count(&st, MPI_INT, tot, "write_ordered content");
    for (int r = 0, k = 0; r < size; k += ++r) want_ints(all + k, r, 100, r + 1, "write_ordered content");
    free(all);
  }
  OK(MPI_File_seek_shared(fh, 0, MPI_SEEK_END));
  want_shared_position(fh, ord + tot, "seek_shared END");
  OK(MPI_File_seek_shared(fh, -tot, MPI_SEEK_CUR));
  want_shared_position(fh, ord, "seek_shared CUR backward");
  for (int j = 0; j < R + 4; j++) got[j] = -1;
  OK(MPI_File_read_ordered(fh, got, n, MPI_INT, &st));
  want_count(&st, MPI_INT, n, "read_ordered");
  want_ints(got, rank, 100, n, "read_ordered");
  want_shared_position(fh, ord + tot, "after read_ordered");

  /* read_shared: each rank takes a different one of the first records. */
  OK(MPI_File_seek_shared(fh, 0, MPI_SEEK_SET));
  OK(MPI_File_read_shared(fh, got, R, MPI_INT, &st));
  want_count(&st, MPI_INT, R, "read_shared");
  int r = (got[0] - 1) / 1000000, *owners = malloc(size * sizeof(int)), seen = 0;
  CHECK(r >= 0 && r < size, "read_shared record starts %d: not a rank's", got[0]);
  want_ints(got, r, 0, R, "read_shared record");
  OK(MPI_Allgather(&r, 1, MPI_INT, owners, 1, MPI_INT, MPI_COMM_WORLD));
  for (int k = 0; k < size; k++) seen |= 1 << owners[k];
  CHECK(seen == (1 << size) - 1, "read_shared: the ranks took records of %#x, want each once", seen);
  free(owners);

  /* set_view resets a shared pointer the ranks moved, before any rank moves it again:
     every rank's write_shared right after it lands in the first size * R ints. */
  OK(MPI_File_set_view(fh, 0, MPI_INT, MPI_INT, "native", MPI_INFO_NULL));
  for (int j = 0; j < R; j++) rec[j] = val(200 + rank, j);
  OK(MPI_File_write_shared(fh, rec, R, MPI_INT, &st));
  want_count(&st, MPI_INT, R, "write_shared after set_view");
  settle(fh);
  want_shared_position(fh, ord, "after set_view and every rank's write_shared");
  check_records(fh, 0, R, 200, "write_shared records after set_view");
  close_file(&fh, "shared");
}

static void test_nonblocking(void) {
  MPI_File fh;
  MPI_Request rq[2];
  MPI_Status sts[2], st;
  const MPI_Offset blk = B * sizeof(int);
  int a[B], b[B], got[B], rec[B / 4];
  for (int i = 0; i < B; i++) a[i] = val(rank, i), b[i] = val(100 + rank, i);
  open_fresh("nonblocking", &fh);
  /* Explicit offsets: blocks 0 (a) and 1 (b) of each rank's pair. */
  OK(MPI_File_iwrite_at(fh, rank * blk, a, B, MPI_INT, &rq[0]));
  OK(MPI_File_iwrite_at(fh, (size + rank) * blk, b, B, MPI_INT, &rq[1]));
  OK(MPI_Waitall(2, rq, sts));
  CHECK(rq[0] == MPI_REQUEST_NULL && rq[1] == MPI_REQUEST_NULL, "iwrite_at requests not freed by Waitall");
  want_count(&sts[0], MPI_INT, B, "iwrite_at");
  want_count(&sts[1], MPI_INT, B, "iwrite_at");
  settle(fh);
  OK(MPI_File_iread_at(fh, next * blk, got, B, MPI_INT, &rq[0]));
  OK(MPI_Wait(&rq[0], &st));
  want_count(&st, MPI_INT, B, "iread_at");
  want_ints(got, next, 0, B, "iread_at the next rank's block");

  /* Individual pointer: the pointer moves when the operation starts. */
  OK(MPI_File_set_view(fh, (2 * size + rank) * blk, MPI_INT, MPI_INT, "native", MPI_INFO_NULL));
  OK(MPI_File_iwrite(fh, a, B, MPI_INT, &rq[0]));
  want_position(fh, B, "right after iwrite");
  OK(MPI_Wait(&rq[0], &st));
  want_count(&st, MPI_INT, B, "iwrite");
  OK(MPI_File_seek(fh, 0, MPI_SEEK_SET));
  OK(MPI_File_iread(fh, got, B, MPI_INT, &rq[0]));
  want_position(fh, B, "right after iread");
  OK(MPI_Wait(&rq[0], &st));
  want_count(&st, MPI_INT, B, "iread");
  want_ints(got, rank, 0, B, "iread");

  /* Non-blocking collectives, then the next rank's block read through a moved view. */
  OK(MPI_File_set_view(fh, (3 * size + rank) * blk, MPI_INT, MPI_INT, "native", MPI_INFO_NULL));
  OK(MPI_File_iwrite_all(fh, b, B, MPI_INT, &rq[0]));
  OK(MPI_Wait(&rq[0], &st));
  want_count(&st, MPI_INT, B, "iwrite_all");
  settle(fh);
  OK(MPI_File_set_view(fh, (3 * size + next) * blk, MPI_INT, MPI_INT, "native", MPI_INFO_NULL));
  OK(MPI_File_iread_all(fh, got, B, MPI_INT, &rq[0]));
  OK(MPI_Wait(&rq[0], &st));
  want_count(&st, MPI_INT, B, "iread_all");
  want_ints(got, 100 + next, 0, B, "iread_all the next rank's block");

  /* The shared pointer (the same view everywhere). */
  OK(MPI_File_set_view(fh, 4 * size * blk, MPI_INT, MPI_INT, "native", MPI_INFO_NULL));
  for (int j = 0; j < B / 4; j++) rec[j] = val(200 + rank, j);
  OK(MPI_File_iwrite_shared(fh, rec, B / 4, MPI_INT, &rq[0]));
  OK(MPI_Wait(&rq[0], &st));
  want_count(&st, MPI_INT, B / 4, "iwrite_shared");
  settle(fh);
  check_records(fh, 0, B / 4, 200, "iwrite_shared records");

  /* Split collectives on a plain int view past all of the above. */
  const MPI_Offset base = 5 * size * B;
  OK(MPI_File_set_view(fh, 0, MPI_INT, MPI_INT, "native", MPI_INFO_NULL));
  OK(MPI_File_write_at_all_begin(fh, base + rank * B, a, B, MPI_INT));
  OK(MPI_File_write_at_all_end(fh, a, &st));
  want_count(&st, MPI_INT, B, "write_at_all_begin/end");
  OK(MPI_File_seek(fh, base + (size + rank) * B, MPI_SEEK_SET));
  OK(MPI_File_write_all_begin(fh, b, B, MPI_INT));
  OK(MPI_File_write_all_end(fh, b, &st));
  want_count(&st, MPI_INT, B, "write_all_begin/end");
  want_position(fh, base + (size + rank + 1) * B, "after write_all_begin/end");
  settle(fh);
  OK(MPI_File_read_at_all_begin(fh, base + next * B, got, B, MPI_INT));
  OK(MPI_File_read_at_all_end(fh, got, &st));
  want_count(&st, MPI_INT, B, "read_at_all_begin/end");
  want_ints(got, next, 0, B, "read_at_all_begin/end");
  OK(MPI_File_seek(fh, base + (size + prev) * B, MPI_SEEK_SET));
  OK(MPI_File_read_all_begin(fh, got, B, MPI_INT));
  OK(MPI_File_read_all_end(fh, got, &st));
  want_count(&st, MPI_INT, B, "read_all_begin/end");
  want_ints(got, 100 + prev, 0, B, "read_all_begin/end");
  OK(MPI_File_seek_shared(fh, base + 2 * size * B, MPI_SEEK_SET));
  OK(MPI_File_write_ordered_begin(fh, a, B, MPI_INT));
  OK(MPI_File_write_ordered_end(fh, a, &st));
  want_count(&st, MPI_INT, B, "write_ordered_begin/end");
  settle(fh);
  OK(MPI_File_read_at(fh, base + (2 * size + rank) * B, got, B, MPI_INT, &st));
  want_ints(got, rank, 0, B, "write_ordered_begin/end put the ranks in order");
  OK(MPI_File_seek_shared(fh, base + 2 * size * B, MPI_SEEK_SET));
  OK(MPI_File_read_ordered_begin(fh, got, B, MPI_INT));
  OK(MPI_File_read_ordered_end(fh, got, &st));
  want_count(&st, MPI_INT, B, "read_ordered_begin/end");
  want_ints(got, rank, 0, B, "read_ordered_begin/end");
  close_file(&fh, "nonblocking");
}

/* Non-blocking collective accesses return before the group has called: each rank makes
 * its call only after a message from the rank before it, which that rank sends right
 * after its own call (a chain that deadlocks if a call waits for the group). Then the
 * same with MPI_Test loops for a read, and two accesses queued before a blocking
 * collective and waited for in reverse order; every block checked. */
static void test_nonblocking_order(void) {
  MPI_File fh;
  MPI_Request rq[2];
  MPI_Status st;
  const MPI_Offset blk = B * sizeof(int);
  int a[B], b[B], c[B], got[B], token = 0, done = 0;
  for (int i = 0; i < B; i++) a[i] = val(300 + rank, i), b[i] = val(400 + rank, i), c[i] = val(500 + rank, i);
  open_fresh("nonblocking-order", &fh);
  OK(MPI_File_set_view(fh, rank * blk, MPI_INT, MPI_INT, "native", MPI_INFO_NULL));
  if (rank > 0) OK(MPI_Recv(&token, 1, MPI_INT, prev, 71, MPI_COMM_WORLD, MPI_STATUS_IGNORE));
  OK(MPI_File_iwrite_all(fh, a, B, MPI_INT, &rq[0]));
  want_position(fh, B, "right after iwrite_all");
  if (rank < size - 1) OK(MPI_Send(&token, 1, MPI_INT, next, 71, MPI_COMM_WORLD));
  OK(MPI_Wait(&rq[0], &st));
  want_count(&st, MPI_INT, B, "chained iwrite_all");
  settle(fh);
  OK(MPI_File_set_view(fh, 0, MPI_INT, MPI_INT, "native", MPI_INFO_NULL));
  if (rank > 0) OK(MPI_Recv(&token, 1, MPI_INT, prev, 72, MPI_COMM_WORLD, MPI_STATUS_IGNORE));
  OK(MPI_File_iread_at_all(fh, next * B, got, B, MPI_INT, &rq[0]));
  if (rank < size - 1) OK(MPI_Send(&token, 1, MPI_INT, next, 72, MPI_COMM_WORLD));
  while (!done) OK(MPI_Test(&rq[0], &done, &st));
  want_count(&st, MPI_INT, B, "chained iread_at_all");
  want_ints(got, 300 + next, 0, B, "chained iread_at_all of the next rank's block");
  /* Two queued, a blocking collective after them, waited for in reverse order. */
  OK(MPI_File_iwrite_at_all(fh, (size + rank) * B, b, B, MPI_INT, &rq[0]));
  OK(MPI_File_iwrite_at_all(fh, (2 * size + rank) * B, c, B, MPI_INT, &rq[1]));
  OK(MPI_File_write_at_all(fh, (3 * size + rank) * B, a, B, MPI_INT, &st));
  OK(MPI_Wait(&rq[1], &st));
  want_count(&st, MPI_INT, B, "second queued iwrite_at_all");
  OK(MPI_Wait(&rq[0], &st));
  want_count(&st, MPI_INT, B, "first queued iwrite_at_all");
  settle(fh);
  for (int k = 1; k <= 3; k++) {
    OK(MPI_File_read_at(fh, (k * size + prev) * B, got, B, MPI_INT, &st));
    want_ints(got, (k == 1 ? 400 : k == 2 ? 500 : 300) + prev, 0, B, "queued and blocking writes");
  }
  close_file(&fh, "nonblocking-order");
  /* A queued write to a read-only file fails at its wait, on every rank, under the
   * file's handler (MPI_ERRORS_RETURN). */
  char path[PATHLEN];
  path_of(path, "nonblocking-order");
  OK(MPI_File_open(MPI_COMM_WORLD, path, MPI_MODE_RDONLY, MPI_INFO_NULL, &fh));
  OK(MPI_File_iwrite_at_all(fh, rank * B, a, B, MPI_INT, &rq[0]));
  int rc = MPI_Wait(&rq[0], &st), cls = -1;
  OK(MPI_Error_class(rc, &cls));
  CHECK(cls == MPI_ERR_READ_ONLY && rq[0] == MPI_REQUEST_NULL, "queued iwrite_at_all to a read-only file: class %d", cls);
  close_file(&fh, "nonblocking-order read-only");
}

/* "external32" may be refused by name (MPI_ERR_UNSUPPORTED_DATAREP); if accepted, the
 * file holds big-endian ints. "native" must work; an unknown name is refused. */
static void test_datarep(void) {
  MPI_File fh;
  MPI_Status st;
  int a[B], got[B], ok, lo, hi;
  for (int i = 0; i < B; i++) a[i] = val(rank, i);
  open_fresh("datarep", &fh);
  int rc = MPI_File_set_view(fh, 0, MPI_INT, MPI_INT, "external32", MPI_INFO_NULL);
  if (rc != MPI_SUCCESS) want_error(rc, MPI_ERR_UNSUPPORTED_DATAREP, MPI_ERR_UNSUPPORTED_DATAREP, "set_view external32");
  ok = rc == MPI_SUCCESS;
  OK(MPI_Allreduce(&ok, &lo, 1, MPI_INT, MPI_MIN, MPI_COMM_WORLD));
  OK(MPI_Allreduce(&ok, &hi, 1, MPI_INT, MPI_MAX, MPI_COMM_WORLD));
  CHECK(lo == hi, "set_view external32 succeeded on some ranks only");
  if (ok) {
    OK(MPI_File_write_at_all(fh, rank * B, a, B, MPI_INT, &st));
    want_count(&st, MPI_INT, B, "external32 write_at_all");
    settle(fh);
    OK(MPI_File_read_at_all(fh, next * B, got, B, MPI_INT, &st));
    want_ints(got, next, 0, B, "external32 read_at_all");
    OK(MPI_File_set_view(fh, 0, MPI_BYTE, MPI_BYTE, "native", MPI_INFO_NULL));
    if (rank == 0) {
      unsigned char bytes[4 * B];
      OK(MPI_File_read_at(fh, 0, bytes, 4 * B, MPI_BYTE, &st));
      for (int i = 0; i < B; i++) {
        unsigned u = (unsigned)bytes[4 * i] << 24 | bytes[4 * i + 1] << 16 | bytes[4 * i + 2] << 8 | bytes[4 * i + 3];
        CHECK(u == (unsigned)a[i], "external32 int %d reads %u big-endian, want %d", i, u, a[i]);
      }
    }
    OK(MPI_Barrier(MPI_COMM_WORLD));
  }
  OK(MPI_File_set_view(fh, 0, MPI_INT, MPI_INT, "native", MPI_INFO_NULL));
  for (int i = 0; i < B; i++) a[i] = val(50 + rank, i);
  OK(MPI_File_write_at_all(fh, rank * B, a, B, MPI_INT, &st));
  settle(fh);
  OK(MPI_File_read_at_all(fh, prev * B, got, B, MPI_INT, &st));
  want_count(&st, MPI_INT, B, "native read_at_all");
  want_ints(got, 50 + prev, 0, B, "native read_at_all");
  rc = MPI_File_set_view(fh, 0, MPI_INT, MPI_INT, "no-such-datarep", MPI_INFO_NULL);
  want_error(rc, MPI_ERR_UNSUPPORTED_DATAREP, MPI_ERR_UNSUPPORTED_DATAREP, "set_view with an unknown datarep");
  close_file(&fh, "datarep");
}

/* Errors returned by the default file handler: writes to a read-only file, negative
 * offsets. */
/* Collective accesses far apart: rank r writes 8 bytes at r * 64 GiB (a sparse file),
 * reads them back collectively, and the file's size follows; an aggregator must not
 * take memory for the 64 GiB between the pieces. */
static void test_sparse(void) {
  MPI_File fh;
  MPI_Status st;
  open_fresh("sparse", &fh);
  long long mine[1] = {1000 + rank}, got[1] = {-1};
  MPI_Offset at = (MPI_Offset)rank << 36;
  OK(MPI_File_write_at_all(fh, at, mine, 1, MPI_LONG_LONG, &st));
  want_count(&st, MPI_LONG_LONG, 1, "sparse write_at_all");
  settle(fh);
  OK(MPI_File_read_at_all(fh, at, got, 1, MPI_LONG_LONG, &st));
  want_count(&st, MPI_LONG_LONG, 1, "sparse read_at_all");
  CHECK(got[0] == 1000 + rank, "sparse read_at_all gave %lld, want %d", got[0], 1000 + rank);
  want_size(fh, ((MPI_Offset)(size - 1) << 36) + 8, "sparse file");
  OK(MPI_File_set_size(fh, 0));
  close_file(&fh, "sparse");
}

static void test_errors(void) {
  char path[PATHLEN];
  MPI_File fh;
  MPI_Status st;
  int x[4] = {val(rank, 0), val(rank, 1), val(rank, 2), val(rank, 3)}, got[4], rc;
  path_of(path, "readonly");
  open_fresh("readonly", &fh);
  OK(MPI_File_write_at(fh, rank * sizeof x, x, 4, MPI_INT, &st));
  close_file(&fh, "readonly");
  OK(MPI_Barrier(MPI_COMM_WORLD));
  OK(MPI_File_open(MPI_COMM_WORLD, path, MPI_MODE_RDONLY, MPI_INFO_NULL, &fh));
  rc = MPI_File_write_at(fh, rank * sizeof x, x, 4, MPI_INT, &st);
  want_error(rc, MPI_ERR_READ_ONLY, MPI_ERR_ACCESS, "write_at on a RDONLY file");
  rc = MPI_File_write(fh, x, 4, MPI_INT, &st);
  want_error(rc, MPI_ERR_READ_ONLY, MPI_ERR_ACCESS, "write on a RDONLY file");
  rc = MPI_File_write_at_all(fh, rank * sizeof x, x, 4, MPI_INT, &st);
  want_error(rc, MPI_ERR_READ_ONLY, MPI_ERR_ACCESS, "write_at_all on a RDONLY file");
  OK(MPI_File_read_at(fh, rank * sizeof x, got, 4, MPI_INT, &st));
  want_ints(got, rank, 0, 4, "read_at on the RDONLY file after the failed writes");
  rc = MPI_File_read_at(fh, -16, got, 4, MPI_INT, &st);
  want_error(rc, MPI_ERR_ARG, MPI_ERR_ARG, "read_at at offset -16");
  rc = MPI_File_seek(fh, -1, MPI_SEEK_SET);
  want_error(rc, MPI_ERR_ARG, MPI_ERR_ARG, "seek to -1");
  close_file(&fh, "readonly read-only");
  open_fresh("negative", &fh);
  rc = MPI_File_write_at(fh, -16, x, 4, MPI_INT, &st);
  want_error(rc, MPI_ERR_ARG, MPI_ERR_ARG, "write_at at offset -16");
  rc = MPI_File_write_at_all(fh, -16, x, 4, MPI_INT, &st);
  want_error(rc, MPI_ERR_ARG, MPI_ERR_ARG, "write_at_all at offset -16");
  close_file(&fh, "negative");
}

/* /dev/full: writes fail on every rank (no space), the program goes on. */
static void test_disk_full(void) {
  MPI_File fh = MPI_FILE_NULL;
  MPI_Status st;
  char buf[4096];
  memset(buf, rank + 1, sizeof buf);
  int rc = MPI_File_open(MPI_COMM_WORLD, "/dev/full", MPI_MODE_WRONLY, MPI_INFO_NULL, &fh);
  if (rc != MPI_SUCCESS) {
    want_error(rc, MPI_ERR_NO_SPACE, MPI_ERR_IO, "open of /dev/full");
    return;
  }
  rc = MPI_File_write_at_all(fh, rank * sizeof buf, buf, sizeof buf, MPI_BYTE, &st);
  want_error(rc, MPI_ERR_NO_SPACE, MPI_ERR_IO, "write_at_all on /dev/full");
  rc = MPI_File_write_at(fh, rank * sizeof buf, buf, sizeof buf, MPI_BYTE, &st);
  want_error(rc, MPI_ERR_NO_SPACE, MPI_ERR_IO, "write_at on /dev/full");
  rc = MPI_File_write_all(fh, buf, sizeof buf, MPI_BYTE, &st);
  want_error(rc, MPI_ERR_NO_SPACE, MPI_ERR_IO, "write_all on /dev/full");
  close_file(&fh, "/dev/full");
}

/* M writers / N readers: a darray (block rows, cyclic(3) columns) written; read back
 * through another darray (cyclic rows), possibly by another number of ranks. */
static void test_mn(const char *name, int write, int read) {
  const int gs[2] = {64, 48};
  const int wdist[2] = {MPI_DISTRIBUTE_BLOCK, MPI_DISTRIBUTE_CYCLIC}, wdarg[2] = {MPI_DISTRIBUTE_DFLT_DARG, 3};
  const int rdist[2] = {MPI_DISTRIBUTE_CYCLIC, MPI_DISTRIBUTE_NONE}, rdarg[2] = {MPI_DISTRIBUTE_DFLT_DARG, MPI_DISTRIBUTE_DFLT_DARG};
  if (write) darray_io(name, gs, wdist, wdarg, 1, "M/N darray write");
  if (read) darray_io(name, gs, rdist, rdarg, 0, "M/N darray read");
}

int main(int argc, char **argv) {
  OK(MPI_Init(&argc, &argv));
  OK(MPI_Comm_rank(MPI_COMM_WORLD, &rank));
  OK(MPI_Comm_size(MPI_COMM_WORLD, &size));
  next = (rank + 1) % size;
  prev = (rank + size - 1) % size;
  CHECK(argc >= 2, "usage: io DIR [write|read|both] [FILE]");
  dir = argv[1];
  const char *mode = argc > 2 ? argv[2] : "both", *mn = argc > 3 ? argv[3] : "mn";
  int w = strcmp(mode, "write") == 0, r = strcmp(mode, "read") == 0;
  CHECK(w || r || strcmp(mode, "both") == 0, "mode '%s', want write, read or both", mode);
  if (!w && !r) {
    test_open_close();
    test_explicit();
    test_early_accesses();
    test_pointers();
    test_cyclic();
    test_subarray();
    test_subarray_blocks();
    test_darray();
    test_darray_regions();
    test_strided_whole();
    test_get_view();
    test_shared();
    test_nonblocking();
    test_nonblocking_order();
    test_datarep();
    test_sparse();
    test_errors();
    test_disk_full();
  }
  test_mn(mn, !r, !w);
  OK(MPI_Barrier(MPI_COMM_WORLD));
  if (rank == 0) printf("ok io%s %d ranks\n", w ? "-write" : r ? "-read" : "", size);
  MPI_Finalize();
  return 0;
}
