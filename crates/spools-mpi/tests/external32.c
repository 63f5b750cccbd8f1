/* The external32 data representation: MPI_Pack_external writes every primitive
 * big-endian at the standard's sizes (long in 4 bytes, long double as binary128) in
 * type-map order, MPI_Unpack_external reads it back, MPI_Pack_external_size agrees;
 * bad representations, short buffers and longs that do not fit are refused; a file
 * written through an external32 view holds big-endian data and reads back. Any number
 * of ranks (rank 0 alone does the packing; all do the file). Argument: a file path. */
#include <stddef.h>
#include <string.h>

#include "check.h"

struct rec {
  char c;
  double d;
  int i;
  long l;
  long double ld;
};

int main(int argc, char **argv) {
  int rank, size, cls = -1;
  OK(MPI_Init(&argc, &argv));
  OK(MPI_Comm_rank(MPI_COMM_WORLD, &rank));
  OK(MPI_Comm_size(MPI_COMM_WORLD, &size));
  CHECK(argc == 2, "usage: external32 FILE");
  OK(MPI_Comm_set_errhandler(MPI_COMM_SELF, MPI_ERRORS_RETURN));
  unsigned char buf[256];
  MPI_Aint pos = 0, sz = -1;

  /* Ints: big-endian, 4 bytes each. */
  int ints[2] = {0x01020304, -2};
  OK(MPI_Pack_external("external32", ints, 2, MPI_INT, buf, sizeof buf, &pos));
  CHECK(pos == 8, "2 ints took %ld bytes", (long)pos);
  unsigned char want_ints[8] = {1, 2, 3, 4, 0xff, 0xff, 0xff, 0xfe};
  CHECK(memcmp(buf, want_ints, 8) == 0, "ints not big-endian");

  /* A struct of char, double, int, long, long double, in a vector of 2 with a gap:
   * 1 + 8 + 4 + 4 + 16 = 33 bytes each, no padding. */
  int bl[5] = {1, 1, 1, 1, 1};
  MPI_Aint disp[5] = {offsetof(struct rec, c), offsetof(struct rec, d), offsetof(struct rec, i),
                      offsetof(struct rec, l), offsetof(struct rec, ld)};
  MPI_Datatype types[5] = {MPI_CHAR, MPI_DOUBLE, MPI_INT, MPI_LONG, MPI_LONG_DOUBLE};
  MPI_Datatype rt, two;
  OK(MPI_Type_create_struct(5, bl, disp, types, &rt));
  OK(MPI_Type_vector(2, 1, 2, rt, &two));
  OK(MPI_Type_commit(&two));
  OK(MPI_Pack_external_size("external32", 3, two, &sz));
  CHECK(sz == 3 * 2 * 33, "external size of 3 x 2 records: %ld", (long)sz);
  struct rec in[4] = {{'a', 1.0, 7, -9, 1.0L}, {'x', 0, 0, 0, 0}, {'b', -2.5, 8, 123456, -2.0L}, {'y', 0, 0, 0, 0}};
  pos = 0;
  OK(MPI_Pack_external("external32", in, 1, two, buf, sizeof buf, &pos));
  CHECK(pos == 66, "two records took %ld bytes", (long)pos);
  unsigned char want_rec[33] = {'a',  0x3f, 0xf0, 0, 0, 0, 0, 0, 0, /* 1.0 */
                                0,    0,    0,    7,                /* 7 */
                                0xff, 0xff, 0xff, 0xf7,             /* -9 in 4 bytes */
                                0x3f, 0xff, 0,    0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0};
  CHECK(memcmp(buf, want_rec, 33) == 0, "the first record's external32 bytes differ");
  CHECK(buf[33] == 'b' && buf[33 + 17] == 0xc0 && buf[33 + 18] == 0x00, "the second record");
  struct rec back[4];
  memset(back, 0, sizeof back);
  MPI_Aint at = 0;
  OK(MPI_Unpack_external("external32", buf, pos, &at, back, 1, two));
  CHECK(at == 66, "unpack ended at %ld", (long)at);
  CHECK(back[0].c == 'a' && back[0].d == 1.0 && back[0].i == 7 && back[0].l == -9 && back[0].ld == 1.0L,
        "first record back: %c %g %d %ld", back[0].c, back[0].d, back[0].i, back[0].l);
  CHECK(back[2].c == 'b' && back[2].d == -2.5 && back[2].i == 8 && back[2].l == 123456 &&
            back[2].ld == -2.0L,
        "second record back");
  CHECK(back[1].c == 0 && back[3].c == 0, "the gap was written");

  /* Refusals: another representation, a short buffer, a long that needs 8 bytes. */
  pos = 0;
  int rc = MPI_Pack_external("native", ints, 1, MPI_INT, buf, sizeof buf, &pos);
  OK(MPI_Error_class(rc, &cls));
  CHECK(cls == MPI_ERR_UNSUPPORTED_DATAREP, "datarep native: class %d", cls);
  rc = MPI_Pack_external("external32", ints, 2, MPI_INT, buf, 7, &pos);
  OK(MPI_Error_class(rc, &cls));
  CHECK(cls == MPI_ERR_TRUNCATE, "7-byte buffer: class %d", cls);
  long big = 1L << 40;
  rc = MPI_Pack_external("external32", &big, 1, MPI_LONG, buf, sizeof buf, &pos);
  OK(MPI_Error_class(rc, &cls));
  CHECK(cls == MPI_ERR_CONVERSION, "a long past 32 bits: class %d", cls);
  OK(MPI_Type_free(&two));
  OK(MPI_Type_free(&rt));

  /* A file through an external32 view: each rank writes 4 doubles at its place. */
  MPI_File fh;
  OK(MPI_File_open(MPI_COMM_WORLD, argv[1], MPI_MODE_CREATE | MPI_MODE_RDWR, MPI_INFO_NULL, &fh));
  OK(MPI_File_set_errhandler(fh, MPI_ERRORS_RETURN));
  OK(MPI_File_set_view(fh, 0, MPI_DOUBLE, MPI_DOUBLE, "external32", MPI_INFO_NULL));
  double d[4] = {rank + 0.5, rank + 1.5, -1.0, 2.0};
  OK(MPI_File_write_at_all(fh, 4 * rank, d, 4, MPI_DOUBLE, MPI_STATUS_IGNORE));
  rc = MPI_File_set_view(fh, 0, MPI_LONG, MPI_LONG, "external32", MPI_INFO_NULL);
  OK(MPI_Error_class(rc, &cls));
  CHECK(cls == MPI_ERR_UNSUPPORTED_DATAREP, "an external32 view of longs: class %d", cls);
  OK(MPI_File_set_view(fh, 0, MPI_BYTE, MPI_BYTE, "native", MPI_INFO_NULL));
  unsigned char raw[32];
  OK(MPI_File_read_at_all(fh, 32 * rank, raw, 32, MPI_BYTE, MPI_STATUS_IGNORE));
  CHECK(raw[16] == 0xbf && raw[17] == 0xf0 && raw[24] == 0x40, "the file's doubles are not big-endian");
  OK(MPI_File_set_view(fh, 0, MPI_DOUBLE, MPI_DOUBLE, "external32", MPI_INFO_NULL));
  double r[4] = {0};
  OK(MPI_File_read_at_all(fh, 4 * rank, r, 4, MPI_DOUBLE, MPI_STATUS_IGNORE));
  CHECK(r[0] == rank + 0.5 && r[1] == rank + 1.5 && r[2] == -1.0 && r[3] == 2.0,
        "read back %g %g %g %g", r[0], r[1], r[2], r[3]);
  char rep[MPI_MAX_DATAREP_STRING];
  MPI_Datatype et, ft;
  MPI_Offset disp0;
  OK(MPI_File_get_view(fh, &disp0, &et, &ft, rep));
  CHECK(strcmp(rep, "external32") == 0, "the view's representation: %s", rep);
  OK(MPI_File_close(&fh));

  OK(MPI_Barrier(MPI_COMM_WORLD));
  if (rank == 0) printf("ok external32 %d ranks\n", size);
  OK(MPI_Finalize());
  return 0;
}
