/* MPI-IO with Spools' layout hint: a file opened with the info
 * `spools_layout=raid5(unit=4KiB,count=3)` is kept as a RAID-5 set (a manifest at the
 * file's name, unit files beside it) that `spools fsck` verifies and `spools repair`
 * rebuilds. argv[1]: the file; argv[2]: the step.
 *
 *   write   a G0 x G1 int array (element i holds i) through a 2-D block darray view,
 *           write_all, MPI_File_sync (a first version), then its first row again
 *           (the same values) and close (a second version)
 *   update  elements 0..9 set to -1..-10 by rank 0 (write_at), every rank checks
 *           element 12345 (read_at), close
 *   read    the whole array in a cyclic(1) view of ints (rank r reads elements r, r+P,
 *           ...), each checked against i (or the update's values with argv[3] "updated")
 *   badhint an unknown layout and a RAID-5 with no data unit: MPI_ERR_INFO_VALUE on
 *           every rank, nothing left behind
 *   edit    a new set (argv[3]: its layout): blocks with holes between them written
 *           by every rank and seen by every rank (size, bytes, zeros in the holes, a
 *           short count at the end), sync, set_size down and up, writes in atomic
 *           mode, close; the bytes that must be left are in the test
 *   crash   elements 0..9 set to 7777 by rank 0, then close (the test makes rank 0
 *           abort in the commit, before the manifest is replaced)
 *   touch   open for writing and close (a plain file becomes a set)
 *   random  (argv[3]: seed, argv[4]: rounds, argv[5]: layout, argv[6]: `spools`, argv[7]:
 *           the layout's stripe row in bytes, which sizes are often a multiple of) rounds
 *           of random writes by every rank, set_size and sync on a new set, the same
 *           random choices on every rank, mirrored in memory; after each sync every
 *           rank reads the whole file back against the mirror and rank 0 runs
 *           `spools fsck` on the version just committed; the mirror goes to FILE.want
 *   doc     open for writing with MPI_MODE_DELETE_ON_CLOSE and close (nothing left)
 *   cut     (argv[3]: a size, argv[4]: the layout) set_size to it twice, a sync
 *           between; a second open for writing meanwhile fails with
 *           MPI_ERR_FILE_IN_USE on every rank
 *   two     the set open twice, read-only and for writing: a write and a sync through
 *           the second leave the first reading its version (element 0 as it was)
 *   delete  MPI_File_delete of the set (rank 0) */
#include <string.h>
#include "check.h"

#define G0 301
#define G1 257
#define N (G0 * G1)
#define HINT "raid5(unit=4KiB,count=3)"

static int rank, size;

static MPI_File open_layout(const char *path, int amode, const char *layout) {
  MPI_Info info;
  MPI_File fh;
  OK(MPI_Info_create(&info));
  OK(MPI_Info_set(info, "spools_layout", layout));
  OK(MPI_File_open(MPI_COMM_WORLD, path, amode, info, &fh));
  OK(MPI_Info_free(&info));
  return fh;
}

static MPI_File open_set(const char *path, int amode) { return open_layout(path, amode, HINT); }

static int want(int i, int updated) { return updated && i < 10 ? -1 - i : i; }

static void write_step(const char *path) {
  MPI_File fh = open_set(path, MPI_MODE_CREATE | MPI_MODE_WRONLY);
  int gs[2] = {G0, G1}, ds[2] = {MPI_DISTRIBUTE_BLOCK, MPI_DISTRIBUTE_BLOCK},
      da[2] = {MPI_DISTRIBUTE_DFLT_DARG, MPI_DISTRIBUTE_DFLT_DARG}, ps[2] = {0, 0};
  OK(MPI_Dims_create(size, 2, ps));
  MPI_Datatype ft;
  OK(MPI_Type_create_darray(size, rank, 2, gs, ds, da, ps, MPI_ORDER_C, MPI_INT, &ft));
  OK(MPI_Type_commit(&ft));
  int tsize;
  OK(MPI_Type_size(ft, &tsize));
  int n = tsize / (int)sizeof(int), *buf = malloc(sizeof(int) * (n + 1));
  /* This rank's block, in the darray's order: rows of its column range. */
  int coords[2] = {rank / ps[1], rank % ps[1]};
  int b0 = (G0 + ps[0] - 1) / ps[0], b1 = (G1 + ps[1] - 1) / ps[1], k = 0;
  for (int i = coords[0] * b0; i < G0 && i < (coords[0] + 1) * b0; i++)
    for (int j = coords[1] * b1; j < G1 && j < (coords[1] + 1) * b1; j++) buf[k++] = i * G1 + j;
  CHECK(k == n, "block of %d elements, the darray has %d", k, n);
  OK(MPI_File_set_view(fh, 0, MPI_INT, ft, "native", MPI_INFO_NULL));
  MPI_Status st;
  OK(MPI_File_write_all(fh, buf, n, MPI_INT, &st));
  OK(MPI_File_sync(fh));
  MPI_Offset sz = -1;
  OK(MPI_File_get_size(fh, &sz));
  CHECK(sz == (MPI_Offset)N * 4, "size %lld after write_all, want %lld", (long long)sz, (long long)N * 4);
  OK(MPI_File_set_view(fh, 0, MPI_BYTE, MPI_BYTE, "native", MPI_INFO_NULL));
  if (rank == 0) {
    for (int j = 0; j < G1; j++) buf[j] = j;
    OK(MPI_File_write_at(fh, 0, buf, G1, MPI_INT, &st));
  }
  OK(MPI_File_close(&fh));
  OK(MPI_Type_free(&ft));
  free(buf);
}

static void update_step(const char *path) {
  MPI_File fh = open_set(path, MPI_MODE_RDWR);
  MPI_Status st;
  if (rank == 0) {
    int v[10];
    for (int i = 0; i < 10; i++) v[i] = -1 - i;
    OK(MPI_File_write_at(fh, 0, v, 10, MPI_INT, &st));
  }
  int x = 0;
  OK(MPI_File_read_at(fh, 12345 * (MPI_Offset)sizeof(int), &x, 1, MPI_INT, &st));
  CHECK(x == 12345, "element 12345 of the set is %d", x);
  OK(MPI_File_close(&fh));
}

static void read_step(const char *path, int updated) {
  MPI_File fh = open_set(path, MPI_MODE_RDONLY);
  MPI_Offset sz = -1;
  OK(MPI_File_get_size(fh, &sz));
  CHECK(sz == (MPI_Offset)N * 4, "size %lld, want %lld", (long long)sz, (long long)N * 4);
  MPI_Datatype one, ft;
  OK(MPI_Type_vector(1, 1, size, MPI_INT, &one));
  OK(MPI_Type_create_resized(one, 0, (MPI_Aint)sizeof(int) * size, &ft));
  OK(MPI_Type_commit(&ft));
  OK(MPI_File_set_view(fh, (MPI_Offset)sizeof(int) * rank, MPI_INT, ft, "native", MPI_INFO_NULL));
  int n = (N - rank + size - 1) / size, *buf = malloc(sizeof(int) * n);
  MPI_Status st;
  OK(MPI_File_read_all(fh, buf, n, MPI_INT, &st));
  int got = -1;
  OK(MPI_Get_count(&st, MPI_INT, &got));
  CHECK(got == n, "read %d elements, want %d", got, n);
  for (int k = 0; k < n; k++) {
    int i = rank + k * size;
    CHECK(buf[k] == want(i, updated), "element %d is %d, want %d", i, buf[k], want(i, updated));
  }
  OK(MPI_File_close(&fh));
  OK(MPI_Type_free(&ft));
  OK(MPI_Type_free(&one));
  free(buf);
}

static void badhint_step(const char *path) {
  const char *bad[2] = {"zarr(chunk=8)", "raid5(unit=4KiB,count=1)"};
  for (int b = 0; b < 2; b++) {
    MPI_Info info;
    MPI_File fh = MPI_FILE_NULL;
    OK(MPI_Info_create(&info));
    OK(MPI_Info_set(info, "spools_layout", bad[b]));
    int rc = MPI_File_open(MPI_COMM_WORLD, path, MPI_MODE_CREATE | MPI_MODE_WRONLY, info, &fh);
    int cls = -1;
    OK(MPI_Error_class(rc, &cls));
    CHECK(cls == MPI_ERR_INFO_VALUE && fh == MPI_FILE_NULL, "spools_layout=%s: open gave class %d", bad[b], cls);
    OK(MPI_Info_free(&info));
  }
}

/* Rank r's block in the edit step: 1000 bytes of r + 1 at r * 20000 + 5000. */
#define BLOCK 1000
#define AT(r) ((MPI_Offset)(r) * 20000 + 5000)

static void check_size(MPI_File fh, MPI_Offset want_size, const char *when) {
  MPI_Offset sz = -1;
  OK(MPI_File_get_size(fh, &sz));
  CHECK(sz == want_size, "size %lld %s, want %lld", (long long)sz, when, (long long)want_size);
}

static void edit_step(const char *path, const char *layout) {
  MPI_File fh = open_layout(path, MPI_MODE_CREATE | MPI_MODE_RDWR, layout);
  MPI_Status st;
  check_size(fh, 0, "when new");
  OK(MPI_Barrier(MPI_COMM_WORLD));
  char mine[BLOCK];
  memset(mine, rank + 1, BLOCK);
  OK(MPI_File_write_at(fh, AT(rank), mine, BLOCK, MPI_BYTE, &st));
  OK(MPI_Barrier(MPI_COMM_WORLD));
  MPI_Offset end = AT(size - 1) + BLOCK;
  check_size(fh, end, "after every rank wrote");
  /* Every rank sees every block, and zeros in the holes. */
  char *all = malloc(end + 100);
  OK(MPI_File_read_at(fh, 0, all, (int)end, MPI_BYTE, &st));
  for (MPI_Offset i = 0; i < end; i++) {
    int r = (int)(i / 20000);
    char w = (i >= AT(r) && i < AT(r) + BLOCK) ? (char)(r + 1) : 0;
    CHECK(all[i] == w, "byte %lld is %d, want %d", (long long)i, all[i], w);
  }
  int got = -1;
  OK(MPI_File_read_at(fh, end - 10, all, 100, MPI_BYTE, &st));
  OK(MPI_Get_count(&st, MPI_BYTE, &got));
  CHECK(got == 10, "a read over the end gave %d bytes, want 10", got);
  OK(MPI_File_sync(fh));
  check_size(fh, end, "after sync");
  /* Cut into the last block, then grow: the cut bytes come back as zeros. */
  OK(MPI_File_set_size(fh, end - 500));
  check_size(fh, end - 500, "after set_size down");
  OK(MPI_File_read_at(fh, AT(size - 1), all, BLOCK, MPI_BYTE, &st));
  OK(MPI_Get_count(&st, MPI_BYTE, &got));
  CHECK(got == 500, "read %d bytes of the cut block, want 500", got);
  OK(MPI_File_set_size(fh, end + 3000));
  check_size(fh, end + 3000, "after set_size up");
  OK(MPI_File_read_at(fh, end - 500, all, 3500, MPI_BYTE, &st));
  for (int i = 0; i < 3500; i++) CHECK(all[i] == 0, "byte %lld after the regrowth is %d", (long long)(end - 500 + i), all[i]);
  /* Atomic mode: each rank 4 bytes at the start of its hole, read back. */
  OK(MPI_File_set_atomicity(fh, 1));
  int tag = 0x01020304 * (rank + 1);
  OK(MPI_File_write_at(fh, (MPI_Offset)rank * 20000, &tag, 1, MPI_INT, &st));
  int back = 0;
  OK(MPI_File_read_at(fh, (MPI_Offset)rank * 20000, &back, 1, MPI_INT, &st));
  CHECK(back == tag, "atomic mode read back %#x, want %#x", back, tag);
  OK(MPI_File_set_atomicity(fh, 0));
  OK(MPI_File_close(&fh));
  free(all);
}

/* xorshift64: the same choices on every rank. */
static unsigned long long rng_state;
static unsigned long long rnd(unsigned long long n) {
  rng_state ^= rng_state << 13;
  rng_state ^= rng_state >> 7;
  rng_state ^= rng_state << 17;
  return n ? rng_state % n : 0;
}

#define RMAX 60000

static void random_step(const char *path, unsigned long long seed, int rounds, const char *layout,
                        const char *spools, MPI_Offset row) {
  rng_state = seed * 2654435761ULL + 1;
  char *mirror = calloc(RMAX, 1), *got = malloc(RMAX), *mine = malloc(RMAX);
  MPI_Offset len = 0;
  MPI_Status st;
  MPI_File fh = open_layout(path, MPI_MODE_CREATE | MPI_MODE_RDWR, layout);
  for (int round = 0; round < rounds; round++) {
    unsigned long long op = rnd(10);
    if (op < 6) {
      /* Each rank a range of its own slot of the file, of its own value. */
      MPI_Offset slot = RMAX / size;
      for (int r = 0; r < size; r++) {
        MPI_Offset off = r * slot + (MPI_Offset)rnd(slot), room = r * slot + slot - off;
        MPI_Offset n = (MPI_Offset)rnd((room < 3000 ? room : 3000) + 1);
        char v = (char)(round * 31 + r + 1);
        memset(mirror + off, v, n);
        if (n > 0 && off + n > len) len = off + n;
        if (r == rank) {
          memset(mine, v, n);
          OK(MPI_File_write_at(fh, off, mine, (int)n, MPI_BYTE, &st));
        }
      }
      OK(MPI_Barrier(MPI_COMM_WORLD));
    } else if (op < 8) {
      MPI_Offset to = (MPI_Offset)rnd(RMAX + 1);
      unsigned long long how = rnd(3);
      if (how == 0) to = len; /* the size it has */
      if (how == 1) to -= to % row; /* whole rows */
      if (to < len) memset(mirror + to, 0, len - to);
      len = to;
      OK(MPI_File_set_size(fh, to));
    } else {
      OK(MPI_File_sync(fh));
      check_size(fh, len, "after a sync");
      int n = -1;
      OK(MPI_File_read_at(fh, 0, got, RMAX, MPI_BYTE, &st));
      OK(MPI_Get_count(&st, MPI_BYTE, &n));
      CHECK(n == len, "round %d: read %d bytes back, want %lld", round, n, (long long)len);
      for (int i = 0; i < n; i++) CHECK(got[i] == mirror[i], "round %d: byte %d is %d, want %d", round, i, got[i], mirror[i]);
      if (rank == 0 && len > 0) {
        char cmd[8192];
        snprintf(cmd, sizeof cmd, "%s fsck %s >/dev/null", spools, path);
        CHECK(system(cmd) == 0, "round %d: spools fsck of the version just committed failed", round);
      }
      OK(MPI_Barrier(MPI_COMM_WORLD));
    }
  }
  OK(MPI_File_close(&fh));
  if (rank == 0) {
    char want[4096];
    snprintf(want, sizeof want, "%s.want", path);
    FILE *f = fopen(want, "wb");
    CHECK(f && fwrite(mirror, 1, len, f) == (size_t)len && fclose(f) == 0, "writing %s", want);
  }
  free(mirror);
  free(got);
  free(mine);
}

static void crash_step(const char *path) {
  MPI_File fh = open_set(path, MPI_MODE_RDWR);
  MPI_Status st;
  if (rank == 0) {
    int v[10];
    for (int i = 0; i < 10; i++) v[i] = 7777;
    OK(MPI_File_write_at(fh, 0, v, 10, MPI_INT, &st));
  }
  OK(MPI_File_close(&fh));
}

int main(int argc, char **argv) {
  OK(MPI_Init(&argc, &argv));
  OK(MPI_Comm_rank(MPI_COMM_WORLD, &rank));
  OK(MPI_Comm_size(MPI_COMM_WORLD, &size));
  CHECK(argc >= 3, "usage: io_raid FILE write|update|read|badhint|edit|crash|touch|doc|two|cut|random|delete [updated|LAYOUT]");
  const char *step = argv[2];
  if (strcmp(step, "write") == 0) write_step(argv[1]);
  else if (strcmp(step, "update") == 0) update_step(argv[1]);
  else if (strcmp(step, "read") == 0) read_step(argv[1], argc > 3 && strcmp(argv[3], "updated") == 0);
  else if (strcmp(step, "badhint") == 0) badhint_step(argv[1]);
  else if (strcmp(step, "edit") == 0) edit_step(argv[1], argc > 3 ? argv[3] : HINT);
  else if (strcmp(step, "crash") == 0) crash_step(argv[1]);
  else if (strcmp(step, "random") == 0) {
    CHECK(argc > 7, "random SEED ROUNDS LAYOUT SPOOLS ROW");
    random_step(argv[1], strtoull(argv[3], 0, 10), atoi(argv[4]), argv[5], argv[6], atoll(argv[7]));
  } else if (strcmp(step, "cut") == 0) {
    MPI_Offset to = atoll(argv[3]);
    MPI_File fh = open_layout(argv[1], MPI_MODE_RDWR, argv[4]), again = MPI_FILE_NULL;
    MPI_Info info;
    OK(MPI_Info_create(&info));
    OK(MPI_Info_set(info, "spools_layout", argv[4]));
    int rc = MPI_File_open(MPI_COMM_WORLD, argv[1], MPI_MODE_RDWR, info, &again), cls = -1;
    OK(MPI_Info_free(&info));
    OK(MPI_Error_class(rc, &cls));
    CHECK(cls == MPI_ERR_FILE_IN_USE && again == MPI_FILE_NULL, "a second writer's open gave class %d", cls);
    OK(MPI_File_set_size(fh, to));
    OK(MPI_File_sync(fh));
    OK(MPI_File_set_size(fh, to));
    check_size(fh, to, "after set_size");
    OK(MPI_File_close(&fh));
  } else if (strcmp(step, "doc") == 0) {
    MPI_File fh = open_set(argv[1], MPI_MODE_RDWR | MPI_MODE_DELETE_ON_CLOSE);
    OK(MPI_File_close(&fh));
  } else if (strcmp(step, "two") == 0) {
    MPI_File r = open_set(argv[1], MPI_MODE_RDONLY), w = open_set(argv[1], MPI_MODE_RDWR);
    MPI_Status st;
    int v = 4242, x = -1, before = -1;
    OK(MPI_File_read_at(r, 0, &before, 1, MPI_INT, &st));
    CHECK(before != v, "element 0 is %d before", before);
    if (rank == 0) OK(MPI_File_write_at(w, 0, &v, 1, MPI_INT, &st));
    OK(MPI_File_sync(w));
    OK(MPI_File_sync(w));
    OK(MPI_File_read_at(r, 0, &x, 1, MPI_INT, &st));
    CHECK(x == before, "element 0 is %d through the read-only handle after two syncs, want %d", x, before);
    OK(MPI_File_read_at(w, 0, &x, 1, MPI_INT, &st));
    CHECK(x == 4242, "element 0 is %d through the writer, want 4242", x);
    OK(MPI_File_close(&w));
    OK(MPI_File_close(&r));
  } else if (strcmp(step, "touch") == 0) {
    MPI_File fh = open_set(argv[1], MPI_MODE_RDWR);
    OK(MPI_File_close(&fh));
  }
  else if (strcmp(step, "delete") == 0) {
    if (rank == 0) OK(MPI_File_delete(argv[1], MPI_INFO_NULL));
  } else CHECK(0, "unknown step %s", step);
  OK(MPI_Barrier(MPI_COMM_WORLD));
  if (rank == 0) printf("ok io_raid %s %d ranks\n", step, size);
  OK(MPI_Finalize());
  return 0;
}
