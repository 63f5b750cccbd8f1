/* A collective MPI-IO call that fails on one rank only fails on every rank in that
 * rank's error class, not MPI_ERR_IO: the last rank alone passes an invalid amode
 * (MPI_ERR_AMODE), a path under a regular file (MPI_ERR_BAD_FILE), a missing file
 * (MPI_ERR_NO_SUCH_FILE), a NULL file handle (MPI_ERR_ARG); it passes a negative count
 * (MPI_ERR_COUNT) and an unknown data representation (MPI_ERR_UNSUPPORTED_DATAREP).
 * Arguments MPI asks to be the same on every rank fail every rank with
 * MPI_ERR_NOT_SAME where the last rank's differ: a valid amode of its own at open, the
 * flag of set_atomicity, the size of set_size, the whence of seek_shared. A file opened
 * read-only that the group writes fails with MPI_ERR_READ_ONLY (write_at_all,
 * write_all, write_at_all_begin, set_size), write-only that it reads with
 * MPI_ERR_ACCESS (read_at_all, read_all). After each failure the group goes on: a
 * later collective call succeeds on every rank.
 * Argument: DIR, where the files go. 1 or more ranks. */
#include <stdio.h>
#include <string.h>
#include "check.h"

#define PATHLEN 4096
#define N 64

static int rank, size, last;

/* rc must be an error of class `want`. */
static void want_class(int rc, int want, const char *what) {
  int c = -1;
  CHECK(rc != MPI_SUCCESS, "%s: succeeded, want class %d", what, want);
  OK(MPI_Error_class(rc, &c));
  CHECK(c == want, "%s: class %d, want %d", what, c, want);
}

/* A failed open leaves no file. */
static void failed_open(int rc, MPI_File fh, int want, const char *what) {
  want_class(rc, want, what);
  CHECK(fh == MPI_FILE_NULL, "%s: a failed open gave a file", what);
}

int main(int argc, char **argv) {
  OK(MPI_Init(&argc, &argv));
  OK(MPI_Comm_rank(MPI_COMM_WORLD, &rank));
  OK(MPI_Comm_size(MPI_COMM_WORLD, &size));
  CHECK(argc == 2, "usage: io_classes DIR");
  last = size - 1;
  char path[PATHLEN], plain[PATHLEN], under[PATHLEN], missing[PATHLEN];
  snprintf(path, sizeof path, "%s/io_classes", argv[1]);
  snprintf(plain, sizeof plain, "%s/io_classes_plain", argv[1]);
  snprintf(under, sizeof under, "%s/io_classes_plain/x", argv[1]);
  snprintf(missing, sizeof missing, "%s/io_classes_missing", argv[1]);
  if (rank == 0) {
    FILE *p = fopen(plain, "w");
    CHECK(p != NULL, "cannot make %s", plain);
    fclose(p);
  }
  int buf[N], got[N];
  for (int i = 0; i < N; i++) buf[i] = rank * 1000 + i;
  const MPI_Offset at = (MPI_Offset)rank * sizeof buf;
  MPI_File fh = MPI_FILE_NULL;
  MPI_Status st;
  OK(MPI_Barrier(MPI_COMM_WORLD));

  /* Opening: the last rank's arguments or path fail. */
  int amode = rank == last ? MPI_MODE_RDONLY | MPI_MODE_CREATE : MPI_MODE_CREATE | MPI_MODE_RDWR;
  failed_open(MPI_File_open(MPI_COMM_WORLD, path, amode, MPI_INFO_NULL, &fh), fh, MPI_ERR_AMODE,
              "open, the last rank's amode RDONLY|CREATE");
  failed_open(MPI_File_open(MPI_COMM_WORLD, rank == last ? under : path, MPI_MODE_CREATE | MPI_MODE_RDWR,
                            MPI_INFO_NULL, &fh),
              fh, MPI_ERR_BAD_FILE, "open, the last rank's path under a regular file");
  /* Now made (by rank 0, unless it is the last rank). */
  OK(MPI_File_open(MPI_COMM_WORLD, path, MPI_MODE_CREATE | MPI_MODE_RDWR, MPI_INFO_NULL, &fh));
  OK(MPI_File_write_at_all(fh, at, buf, N, MPI_INT, &st));
  OK(MPI_File_close(&fh));
  failed_open(MPI_File_open(MPI_COMM_WORLD, rank == last ? missing : path, MPI_MODE_RDWR, MPI_INFO_NULL, &fh),
              fh, MPI_ERR_NO_SUCH_FILE, "open, the last rank's file missing");

  /* The last rank's handle NULL. */
  MPI_File *where = rank == last ? NULL : &fh;
  want_class(MPI_File_open(MPI_COMM_WORLD, path, MPI_MODE_RDWR, MPI_INFO_NULL, where), MPI_ERR_ARG,
             "open, the last rank's handle NULL");
  CHECK(fh == MPI_FILE_NULL, "open, the last rank's handle NULL: a failed open gave a file");
  if (size > 1) {
    /* The last rank's own valid amode: every rank fails, and no rank has a file. */
    failed_open(MPI_File_open(MPI_COMM_WORLD, path, rank == last ? MPI_MODE_RDONLY : MPI_MODE_RDWR,
                              MPI_INFO_NULL, &fh),
                fh, MPI_ERR_NOT_SAME, "open, the last rank's amode RDONLY, the others' RDWR");
    /* Refused before anything changes: rank 0's CREATE|EXCL made no file. */
    char fresh[PATHLEN];
    snprintf(fresh, sizeof fresh, "%s/io_classes_fresh", argv[1]);
    const int excl = MPI_MODE_CREATE | MPI_MODE_EXCL | MPI_MODE_RDWR;
    failed_open(MPI_File_open(MPI_COMM_WORLD, fresh, rank == last ? MPI_MODE_CREATE | MPI_MODE_RDWR : excl,
                              MPI_INFO_NULL, &fh),
                fh, MPI_ERR_NOT_SAME, "open, CREATE|EXCL but on the last rank");
    OK(MPI_File_open(MPI_COMM_WORLD, fresh, excl, MPI_INFO_NULL, &fh));
    OK(MPI_File_close(&fh));
    OK(MPI_Barrier(MPI_COMM_WORLD));
    if (rank == 0) OK(MPI_File_delete(fresh, MPI_INFO_NULL));
  }

  /* The file opened read-only. */
  OK(MPI_File_open(MPI_COMM_WORLD, path, MPI_MODE_RDONLY, MPI_INFO_NULL, &fh));
  want_class(MPI_File_write_at_all(fh, at, buf, N, MPI_INT, &st), MPI_ERR_READ_ONLY,
             "write_at_all, read-only");
  OK(MPI_File_seek(fh, at, MPI_SEEK_SET));
  want_class(MPI_File_write_all(fh, buf, N, MPI_INT, &st), MPI_ERR_READ_ONLY, "write_all, read-only");
  want_class(MPI_File_write_at_all_begin(fh, at, buf, N, MPI_INT), MPI_ERR_READ_ONLY,
             "write_at_all_begin, read-only");
  want_class(MPI_File_set_size(fh, 0), MPI_ERR_READ_ONLY, "set_size, read-only");
  OK(MPI_File_read_at_all(fh, at, got, N, MPI_INT, &st));
  CHECK(memcmp(got, buf, sizeof buf) == 0, "read_at_all after the failures: other data");
  OK(MPI_File_close(&fh));

  /* The file opened write-only. */
  OK(MPI_File_open(MPI_COMM_WORLD, path, MPI_MODE_WRONLY, MPI_INFO_NULL, &fh));
  want_class(MPI_File_read_at_all(fh, at, got, N, MPI_INT, &st), MPI_ERR_ACCESS,
             "read_at_all, write-only");
  OK(MPI_File_seek(fh, at, MPI_SEEK_SET));
  want_class(MPI_File_read_all(fh, got, N, MPI_INT, &st), MPI_ERR_ACCESS, "read_all, write-only");
  OK(MPI_File_write_at_all(fh, at, buf, N, MPI_INT, &st));
  OK(MPI_File_close(&fh));

  /* Arguments that must be the same everywhere, the last rank's different. */
  if (size > 1) {
    OK(MPI_File_open(MPI_COMM_WORLD, path, MPI_MODE_RDWR, MPI_INFO_NULL, &fh));
    want_class(MPI_File_set_atomicity(fh, rank == last), MPI_ERR_NOT_SAME,
               "set_atomicity, the last rank's flag 1, the others' 0");
    int flag = -1;
    OK(MPI_File_get_atomicity(fh, &flag));
    CHECK(flag == 0, "set_atomicity refused: the flag changed to %d", flag);
    want_class(MPI_File_set_size(fh, rank == last ? 7 * (MPI_Offset)sizeof buf : 8 * (MPI_Offset)sizeof buf),
               MPI_ERR_NOT_SAME, "set_size, the last rank's size");
    want_class(MPI_File_seek_shared(fh, 0, rank == last ? MPI_SEEK_CUR : MPI_SEEK_SET), MPI_ERR_NOT_SAME,
               "seek_shared, the last rank's whence");
    OK(MPI_File_write_at_all(fh, at, buf, N, MPI_INT, &st));
    OK(MPI_File_read_at_all(fh, at, got, N, MPI_INT, &st));
    CHECK(memcmp(got, buf, sizeof buf) == 0, "read_at_all after the differing arguments: other data");
    OK(MPI_File_close(&fh));
  }

  /* Arguments of the last rank. */
  OK(MPI_File_open(MPI_COMM_WORLD, path, MPI_MODE_RDWR, MPI_INFO_NULL, &fh));
  want_class(MPI_File_write_at_all(fh, at, buf, rank == last ? -1 : N, MPI_INT, &st), MPI_ERR_COUNT,
             "write_at_all, the last rank's count -1");
  want_class(MPI_File_set_view(fh, 0, MPI_INT, MPI_INT, rank == last ? "bogus" : "native", MPI_INFO_NULL),
             MPI_ERR_UNSUPPORTED_DATAREP, "set_view, the last rank's data representation unknown");
  OK(MPI_File_set_view(fh, 0, MPI_INT, MPI_INT, "native", MPI_INFO_NULL));
  OK(MPI_File_close(&fh));

  OK(MPI_Barrier(MPI_COMM_WORLD));
  if (rank == 0) {
    OK(MPI_File_delete(path, MPI_INFO_NULL));
    remove(plain);
    printf("ok io_classes %d ranks\n", size);
  }
  OK(MPI_Finalize());
  return 0;
}
