#!/usr/bin/env python3
"""Writes the Fortran layer over the MPI standard ABI into a build directory:

    fortran.h       the ABI's C types (declared here, so that building the layer needs no
                    mpi_abi.h), including
    prototypes.h    the prototypes of every C function the layer calls
    bindings.c      one `mpi_name_` (gfortran's external name) per row of TABLE: converts
                    Fortran INTEGER handles with MPI_<Kind>_fromint/toint, passes choice
                    buffers with the MPI_BOTTOM / MPI_IN_PLACE sentinels mapped, status
                    arrays in place (the ABI's MPI_Status is MPI_F_STATUS_SIZE integers),
                    strings trimmed and padded, 1-based indices, and stores ierror
    mpif.h          the constants, for `include 'mpif.h'` (fixed and free form alike)
    mpi.f90         module `mpi`: the same constants
    mpi_f08.f90     module `mpi_f08`: typed handles, optional ierror (f08.py)

    python3 gen.py ABI_TABLE OUT_DIR

ABI_TABLE is the output of `cargo run -p spools-mpi --example abi_table` (every constant of
Spools' ABI with its value); support.c (beside this file) holds what is written by hand:
the sentinels' common blocks, the string helpers, the user operators' trampolines.
"""
import pathlib
import re
import sys

import f08

# Handle kinds: Fortran INTEGER <-> C handle through MPI_<Kind>_fromint / _toint.
HANDLES = {
    "Comm": "MPI_Comm", "Datatype": "MPI_Datatype", "Group": "MPI_Group",
    "Request": "MPI_Request", "Op": "MPI_Op", "Info": "MPI_Info", "File": "MPI_File",
    "Win": "MPI_Win", "Errhandler": "MPI_Errhandler", "Message": "MPI_Message",
    "Session": "MPI_Session",
}
CONVERT = {"Datatype": "Type"}  # MPI_Type_fromint, not MPI_Datatype_fromint
WIDE = {"Aint": "MPI_Aint", "Offset": "MPI_Offset", "Count": "MPI_Count"}

# One row per function: its C name, then its parameters as KIND NAME, where KIND is
#   buf           a choice buffer (void *; MPI_BOTTOM and MPI_IN_PLACE mapped)
#   cbuf          a choice buffer passed as const void *
#   int, Aint, Offset, Count, logical           a value in
#   int*, Aint*, Offset*, Count*, logical*      a value out (logical: 0/1)
#   int[], Aint[], logical[]                    an array in, passed in place (LOGICAL: 0/1)
#   int[]*, logical[]*                          an array out, passed in place
#   index*        a 0-based index out, 1-based in Fortran (MPI_UNDEFINED kept)
#   index[N]*     N 0-based indices out, the count N being the named parameter
#   H             a handle in (H one of HANDLES)
#   H*            a handle out
#   H&            a handle in and out (freed, completed: MPI_Comm_free, MPI_Wait)
#   H[N]          N handles in (N the named parameter)
#   H[N]&         N handles in and out (MPI_Waitall's requests)
#   status*       a status out (MPI_STATUS_IGNORE mapped)
#   cstatus       a status in (const MPI_Status *)
#   status[N]*    N statuses out (MPI_STATUSES_IGNORE mapped)
#   str           a string in (trailing blanks trimmed)
#   str[MAX]*     a string out, into a C buffer of MAX+1 bytes, blank-padded in Fortran
# A row's C function returns int (stored in the Fortran ierror, the last argument) unless
# it is listed in FUNCTIONS.
TABLE = """
MPI_Finalize
MPI_Initialized logical* flag
MPI_Finalized logical* flag
MPI_Abort Comm comm, int errorcode
MPI_Query_thread int* provided
MPI_Is_thread_main logical* flag
MPI_Get_version int* version, int* subversion
MPI_Get_processor_name str[MPI_MAX_PROCESSOR_NAME]* name, int* resultlen
MPI_Get_library_version str[MPI_MAX_LIBRARY_VERSION_STRING]* version, int* resultlen
MPI_Error_string int errorcode, str[MPI_MAX_ERROR_STRING]* string, int* resultlen
MPI_Error_class int errorcode, int* errorclass
MPI_Comm_set_errhandler Comm comm, Errhandler errhandler
MPI_Comm_get_errhandler Comm comm, Errhandler* errhandler
MPI_File_set_errhandler File file, Errhandler errhandler
MPI_Win_set_errhandler Win win, Errhandler errhandler
MPI_Errhandler_free Errhandler& errhandler
MPI_Comm_call_errhandler Comm comm, int errorcode
MPI_Comm_size Comm comm, int* size
MPI_Comm_rank Comm comm, int* rank
MPI_Comm_dup Comm comm, Comm* newcomm
MPI_Comm_split Comm comm, int color, int key, Comm* newcomm
MPI_Comm_split_type Comm comm, int split_type, int key, Info info, Comm* newcomm
MPI_Comm_create Comm comm, Group group, Comm* newcomm
MPI_Comm_free Comm& comm
MPI_Comm_compare Comm comm1, Comm comm2, int* result
MPI_Comm_test_inter Comm comm, logical* flag
MPI_Comm_remote_size Comm comm, int* size
MPI_Comm_group Comm comm, Group* group
MPI_Comm_set_name Comm comm, str comm_name
MPI_Comm_get_name Comm comm, str[MPI_MAX_OBJECT_NAME]* comm_name, int* resultlen
MPI_Intercomm_create Comm local_comm, int local_leader, Comm peer_comm, int remote_leader, int tag, Comm* newintercomm
MPI_Intercomm_merge Comm intercomm, logical high, Comm* newintracomm
MPI_Group_size Group group, int* size
MPI_Group_rank Group group, int* rank
MPI_Group_incl Group group, int n, int[] ranks, Group* newgroup
MPI_Group_excl Group group, int n, int[] ranks, Group* newgroup
MPI_Group_translate_ranks Group group1, int n, int[] ranks1, Group group2, int[]* ranks2
MPI_Group_free Group& group
MPI_Dims_create int nnodes, int ndims, int[]* dims
MPI_Cart_create Comm comm_old, int ndims, int[] dims, logical[] periods, logical reorder, Comm* comm_cart
MPI_Cart_coords Comm comm, int rank, int maxdims, int[]* coords
MPI_Cart_rank Comm comm, int[] coords, int* rank
MPI_Cart_shift Comm comm, int direction, int disp, int* rank_source, int* rank_dest
MPI_Cart_sub Comm comm, logical[] remain_dims, Comm* newcomm
MPI_Cart_get Comm comm, int maxdims, int[]* dims, logical[]* periods, int[]* coords
MPI_Cartdim_get Comm comm, int* ndims
MPI_Send cbuf buf, int count, Datatype datatype, int dest, int tag, Comm comm
MPI_Ssend cbuf buf, int count, Datatype datatype, int dest, int tag, Comm comm
MPI_Rsend cbuf buf, int count, Datatype datatype, int dest, int tag, Comm comm
MPI_Bsend cbuf buf, int count, Datatype datatype, int dest, int tag, Comm comm
MPI_Buffer_attach buf buffer, int size
MPI_Recv buf buf, int count, Datatype datatype, int source, int tag, Comm comm, status* status
MPI_Isend cbuf buf, int count, Datatype datatype, int dest, int tag, Comm comm, Request* request
MPI_Issend cbuf buf, int count, Datatype datatype, int dest, int tag, Comm comm, Request* request
MPI_Irecv buf buf, int count, Datatype datatype, int source, int tag, Comm comm, Request* request
MPI_Send_init cbuf buf, int count, Datatype datatype, int dest, int tag, Comm comm, Request* request
MPI_Recv_init buf buf, int count, Datatype datatype, int source, int tag, Comm comm, Request* request
MPI_Start Request& request
MPI_Startall int count, Request[count]& array_of_requests
MPI_Sendrecv cbuf sendbuf, int sendcount, Datatype sendtype, int dest, int sendtag, buf recvbuf, int recvcount, Datatype recvtype, int source, int recvtag, Comm comm, status* status
MPI_Sendrecv_replace buf buf, int count, Datatype datatype, int dest, int sendtag, int source, int recvtag, Comm comm, status* status
MPI_Probe int source, int tag, Comm comm, status* status
MPI_Iprobe int source, int tag, Comm comm, logical* flag, status* status
MPI_Get_count cstatus status, Datatype datatype, int* count
MPI_Get_elements cstatus status, Datatype datatype, int* count
MPI_Wait Request& request, status* status
MPI_Test Request& request, logical* flag, status* status
MPI_Waitall int count, Request[count]& array_of_requests, status[count]* array_of_statuses
MPI_Testall int count, Request[count]& array_of_requests, logical* flag, status[count]* array_of_statuses
MPI_Waitany int count, Request[count]& array_of_requests, index* indx, status* status
MPI_Testany int count, Request[count]& array_of_requests, index* indx, logical* flag, status* status
MPI_Waitsome int incount, Request[incount]& array_of_requests, int* outcount, index[incount]* array_of_indices, status[incount]* array_of_statuses
MPI_Request_free Request& request
MPI_Cancel Request& request
MPI_Test_cancelled cstatus status, logical* flag
MPI_Barrier Comm comm
MPI_Bcast buf buffer, int count, Datatype datatype, int root, Comm comm
MPI_Reduce cbuf sendbuf, buf recvbuf, int count, Datatype datatype, Op op, int root, Comm comm
MPI_Allreduce cbuf sendbuf, buf recvbuf, int count, Datatype datatype, Op op, Comm comm
MPI_Reduce_scatter_block cbuf sendbuf, buf recvbuf, int recvcount, Datatype datatype, Op op, Comm comm
MPI_Reduce_scatter cbuf sendbuf, buf recvbuf, int[] recvcounts, Datatype datatype, Op op, Comm comm
MPI_Scan cbuf sendbuf, buf recvbuf, int count, Datatype datatype, Op op, Comm comm
MPI_Exscan cbuf sendbuf, buf recvbuf, int count, Datatype datatype, Op op, Comm comm
MPI_Gather cbuf sendbuf, int sendcount, Datatype sendtype, buf recvbuf, int recvcount, Datatype recvtype, int root, Comm comm
MPI_Gatherv cbuf sendbuf, int sendcount, Datatype sendtype, buf recvbuf, int[] recvcounts, int[] displs, Datatype recvtype, int root, Comm comm
MPI_Scatter cbuf sendbuf, int sendcount, Datatype sendtype, buf recvbuf, int recvcount, Datatype recvtype, int root, Comm comm
MPI_Scatterv cbuf sendbuf, int[] sendcounts, int[] displs, Datatype sendtype, buf recvbuf, int recvcount, Datatype recvtype, int root, Comm comm
MPI_Allgather cbuf sendbuf, int sendcount, Datatype sendtype, buf recvbuf, int recvcount, Datatype recvtype, Comm comm
MPI_Allgatherv cbuf sendbuf, int sendcount, Datatype sendtype, buf recvbuf, int[] recvcounts, int[] displs, Datatype recvtype, Comm comm
MPI_Alltoall cbuf sendbuf, int sendcount, Datatype sendtype, buf recvbuf, int recvcount, Datatype recvtype, Comm comm
MPI_Alltoallv cbuf sendbuf, int[] sendcounts, int[] sdispls, Datatype sendtype, buf recvbuf, int[] recvcounts, int[] rdispls, Datatype recvtype, Comm comm
MPI_Ibarrier Comm comm, Request* request
MPI_Ibcast buf buffer, int count, Datatype datatype, int root, Comm comm, Request* request
MPI_Iallreduce cbuf sendbuf, buf recvbuf, int count, Datatype datatype, Op op, Comm comm, Request* request
MPI_Ireduce cbuf sendbuf, buf recvbuf, int count, Datatype datatype, Op op, int root, Comm comm, Request* request
MPI_Iallgather cbuf sendbuf, int sendcount, Datatype sendtype, buf recvbuf, int recvcount, Datatype recvtype, Comm comm, Request* request
MPI_Ialltoall cbuf sendbuf, int sendcount, Datatype sendtype, buf recvbuf, int recvcount, Datatype recvtype, Comm comm, Request* request
MPI_Op_commutative Op op, logical* commute
MPI_Type_contiguous int count, Datatype oldtype, Datatype* newtype
MPI_Type_vector int count, int blocklength, int stride, Datatype oldtype, Datatype* newtype
MPI_Type_create_hvector int count, int blocklength, Aint stride, Datatype oldtype, Datatype* newtype
MPI_Type_indexed int count, int[] array_of_blocklengths, int[] array_of_displacements, Datatype oldtype, Datatype* newtype
MPI_Type_create_hindexed int count, int[] array_of_blocklengths, Aint[] array_of_displacements, Datatype oldtype, Datatype* newtype
MPI_Type_create_indexed_block int count, int blocklength, int[] array_of_displacements, Datatype oldtype, Datatype* newtype
MPI_Type_create_struct int count, int[] array_of_blocklengths, Aint[] array_of_displacements, Datatype[count] array_of_types, Datatype* newtype
MPI_Type_create_subarray int ndims, int[] array_of_sizes, int[] array_of_subsizes, int[] array_of_starts, int order, Datatype oldtype, Datatype* newtype
MPI_Type_create_darray int size, int rank, int ndims, int[] array_of_gsizes, int[] array_of_distribs, int[] array_of_dargs, int[] array_of_psizes, int order, Datatype oldtype, Datatype* newtype
MPI_Type_create_resized Datatype oldtype, Aint lb, Aint extent, Datatype* newtype
MPI_Type_dup Datatype oldtype, Datatype* newtype
MPI_Type_commit Datatype& datatype
MPI_Type_free Datatype& datatype
MPI_Type_size Datatype datatype, int* size
MPI_Type_size_x Datatype datatype, Count* size
MPI_Type_get_extent Datatype datatype, Aint* lb, Aint* extent
MPI_Type_get_true_extent Datatype datatype, Aint* true_lb, Aint* true_extent
MPI_Type_set_name Datatype datatype, str type_name
MPI_Type_get_name Datatype datatype, str[MPI_MAX_OBJECT_NAME]* type_name, int* resultlen
MPI_Get_address cbuf location, Aint* address
MPI_Pack cbuf inbuf, int incount, Datatype datatype, buf outbuf, int outsize, int* position, Comm comm
MPI_Unpack cbuf inbuf, int insize, int* position, buf outbuf, int outcount, Datatype datatype, Comm comm
MPI_Pack_size int incount, Datatype datatype, Comm comm, int* size
MPI_Info_create Info* info
MPI_Info_set Info info, str key, str value
MPI_Info_delete Info info, str key
MPI_Info_get_nkeys Info info, int* nkeys
MPI_Info_dup Info info, Info* newinfo
MPI_Info_free Info& info
MPI_File_open Comm comm, str filename, int amode, Info info, File* fh
MPI_File_close File& fh
MPI_File_delete str filename, Info info
MPI_File_set_size File fh, Offset size
MPI_File_preallocate File fh, Offset size
MPI_File_get_size File fh, Offset* size
MPI_File_get_amode File fh, int* amode
MPI_File_set_info File fh, Info info
MPI_File_get_info File fh, Info* info_used
MPI_File_set_view File fh, Offset disp, Datatype etype, Datatype filetype, str datarep, Info info
MPI_File_read_at File fh, Offset offset, buf buf, int count, Datatype datatype, status* status
MPI_File_read_at_all File fh, Offset offset, buf buf, int count, Datatype datatype, status* status
MPI_File_write_at File fh, Offset offset, cbuf buf, int count, Datatype datatype, status* status
MPI_File_write_at_all File fh, Offset offset, cbuf buf, int count, Datatype datatype, status* status
MPI_File_iread_at File fh, Offset offset, buf buf, int count, Datatype datatype, Request* request
MPI_File_iwrite_at File fh, Offset offset, cbuf buf, int count, Datatype datatype, Request* request
MPI_File_read File fh, buf buf, int count, Datatype datatype, status* status
MPI_File_read_all File fh, buf buf, int count, Datatype datatype, status* status
MPI_File_write File fh, cbuf buf, int count, Datatype datatype, status* status
MPI_File_write_all File fh, cbuf buf, int count, Datatype datatype, status* status
MPI_File_read_shared File fh, buf buf, int count, Datatype datatype, status* status
MPI_File_write_shared File fh, cbuf buf, int count, Datatype datatype, status* status
MPI_File_read_ordered File fh, buf buf, int count, Datatype datatype, status* status
MPI_File_write_ordered File fh, cbuf buf, int count, Datatype datatype, status* status
MPI_File_seek File fh, Offset offset, int whence
MPI_File_get_position File fh, Offset* offset
MPI_File_get_byte_offset File fh, Offset offset, Offset* disp
MPI_File_sync File fh
MPI_File_set_atomicity File fh, logical flag
MPI_File_get_atomicity File fh, logical* flag
MPI_Win_create buf base, Aint size, int disp_unit, Info info, Comm comm, Win* win
MPI_Win_free Win& win
MPI_Win_fence int assert, Win win
MPI_Win_lock int lock_type, int rank, int assert, Win win
MPI_Win_unlock int rank, Win win
MPI_Win_flush int rank, Win win
MPI_Put cbuf origin_addr, int origin_count, Datatype origin_datatype, int target_rank, Aint target_disp, int target_count, Datatype target_datatype, Win win
MPI_Get buf origin_addr, int origin_count, Datatype origin_datatype, int target_rank, Aint target_disp, int target_count, Datatype target_datatype, Win win
MPI_Accumulate cbuf origin_addr, int origin_count, Datatype origin_datatype, int target_rank, Aint target_disp, int target_count, Datatype target_datatype, Op op, Win win
"""

# C functions the bindings or support.c call besides TABLE's, with their prototypes.
EXTRA_PROTOTYPES = [
    "int MPI_Init(int *argc, char ***argv);",
    "int MPI_Init_thread(int *argc, char ***argv, int required, int *provided);",
    "double MPI_Wtime(void);",
    "double MPI_Wtick(void);",
    "int MPI_Op_create(MPI_User_function *user_fn, int commute, MPI_Op *op);",
    "int MPI_Op_free(MPI_Op *op);",
]


def parse_table():
    rows = []
    for line in TABLE.strip().splitlines():
        name, _, rest = line.partition(" ")
        params = []
        for p in filter(None, (x.strip() for x in rest.split(","))):
            kind, pname = p.rsplit(" ", 1)
            params.append((kind, pname))
        rows.append((name, params))
    return rows


ARRAY = re.compile(r"^(\w+)\[(\w*)\]([*&]?)$")


def c_param_type(kind):
    """The C ABI's type of a parameter of this KIND."""
    m = ARRAY.match(kind)
    if m:
        base, _, mark = m.groups()
        if base in HANDLES:
            return ("const " if mark == "" else "") + HANDLES[base] + " *"
        if base == "status":
            return "MPI_Status *"
        if base == "str":
            return "char *"
        if base in ("int", "logical", "index"):
            return "const int *" if mark == "" else "int *"
        return ("const " if mark == "" else "") + WIDE[base] + " *"
    if kind == "buf":
        return "void *"
    if kind == "cbuf":
        return "const void *"
    if kind in ("int", "logical"):
        return "int"
    if kind in ("int*", "logical*", "index*"):
        return "int *"
    if kind in WIDE:
        return WIDE[kind]
    if kind.rstrip("*") in WIDE:
        return WIDE[kind.rstrip("*")] + " *"
    if kind == "status*":
        return "MPI_Status *"
    if kind == "cstatus":
        return "const MPI_Status *"
    if kind == "str":
        return "const char *"
    base = kind.rstrip("*&")
    if base in HANDLES:
        return HANDLES[base] + (" *" if kind != base else "")
    raise SystemExit("gen.py: unknown parameter kind %r" % kind)


def c_prototype(name, params):
    args = ", ".join("%s%s%s" % (t, "" if t.endswith("*") else " ", p)
                     for t, p in ((c_param_type(k), p) for k, p in params))
    return "int %s(%s);" % (name, args or "void")


def conv(kind, direction):
    c = CONVERT.get(kind, kind)
    return "MPI_%s_%s" % (c, direction)


def binding(name, params):
    """The C text of `mpi_name_` for one row."""
    fargs, strlens, pre, call, post, always, cleanup = [], [], [], [], [], [], []
    for kind, p in params:
        m = ARRAY.match(kind)
        if m:
            base, count, mark = m.groups()
            if base in HANDLES:
                t = HANDLES[base]
                fargs.append("MPI_Fint *%s" % p)
                pre.append("%s *c_%s = spools_f_handles(sizeof(%s), *%s);" % (t, p, t, count))
                pre.append("if (c_%s == NULL) { *ierror = MPI_ERR_NO_MEM; return; }" % p)
                pre.append("for (int i = 0; i < *%s; i++) c_%s[i] = %s(%s[i]);"
                           % (count, p, conv(base, "fromint"), p))
                call.append("c_" + p)
                if mark == "&":
                    always.append("for (int i = 0; i < *%s; i++) %s[i] = %s(c_%s[i]);"
                                  % (count, p, conv(base, "toint"), p))
                cleanup.append("free(c_%s);" % p)
            elif base == "status":
                fargs.append("MPI_Fint *%s" % p)
                call.append("spools_f_statuses(%s)" % p)
            elif base == "str":
                fargs.append("char *%s" % p)
                strlens.append("size_t %s_len" % p)
                pre.append("char c_%s[%s + 1];" % (p, count))
                pre.append("c_%s[0] = 0;" % p)
                call.append("c_" + p)
                always.append("spools_f_str_out(%s, %s_len, c_%s);" % (p, p, p))
            elif base == "index":
                fargs.append("MPI_Fint *%s" % p)
                call.append(p)
                always.append("if ((rc == MPI_SUCCESS || rc == MPI_ERR_IN_STATUS)"
                              " && *outcount != MPI_UNDEFINED)"
                              " for (int i = 0; i < *outcount; i++) %s[i] += 1;" % p)
            else:
                fargs.append("%s *%s" % ("MPI_Fint" if base in ("int", "logical") else WIDE[base], p))
                call.append(p)
        elif kind in ("buf", "cbuf"):
            fargs.append("void *%s" % p)
            call.append("spools_f_buf(%s)" % p)
        elif kind in ("int", "logical"):
            fargs.append("MPI_Fint *%s" % p)
            call.append("*" + p)
        elif kind == "int*":
            fargs.append("MPI_Fint *%s" % p)
            call.append(p)
        elif kind == "logical*":
            fargs.append("MPI_Fint *%s" % p)
            pre.append("int c_%s = 0;" % p)
            call.append("&c_" + p)
            always.append("*%s = c_%s != 0;" % (p, p))
        elif kind == "index*":
            fargs.append("MPI_Fint *%s" % p)
            call.append(p)
            post.append("if (*%s >= 0) *%s += 1;" % (p, p))
        elif kind in WIDE:
            fargs.append("%s *%s" % (WIDE[kind], p))
            call.append("*" + p)
        elif kind.rstrip("*") in WIDE:
            fargs.append("%s *%s" % (WIDE[kind.rstrip("*")], p))
            call.append(p)
        elif kind == "status*":
            fargs.append("MPI_Fint *%s" % p)
            call.append("spools_f_status(%s)" % p)
        elif kind == "cstatus":
            fargs.append("MPI_Fint *%s" % p)
            call.append("(const MPI_Status *)%s" % p)
        elif kind == "str":
            fargs.append("char *%s" % p)
            strlens.append("size_t %s_len" % p)
            pre.append("char *c_%s = spools_f_str_in(%s, %s_len);" % (p, p, p))
            pre.append("if (c_%s == NULL) { *ierror = MPI_ERR_NO_MEM; return; }" % p)
            call.append("c_" + p)
            cleanup.append("free(c_%s);" % p)
        else:
            base = kind.rstrip("*&")
            if base not in HANDLES:
                raise SystemExit("gen.py: unknown parameter kind %r in %s" % (kind, name))
            t = HANDLES[base]
            fargs.append("MPI_Fint *%s" % p)
            if kind == base:
                call.append("%s(*%s)" % (conv(base, "fromint"), p))
            else:
                inout = kind.endswith("&")
                init = "%s(*%s)" % (conv(base, "fromint"), p) if inout else "0"
                pre.append("%s c_%s = %s;" % (t, p, init))
                call.append("&c_" + p)
                # A handle in and out is written back whatever the outcome (the C
                # function leaves it as it was on failure); one only out, on success.
                (always if inout else post).append("*%s = %s(c_%s);" % (p, conv(base, "toint"), p))
    fargs.append("MPI_Fint *ierror")
    lower = name.lower() + "_"
    body = ["void %s(%s)" % (lower, ", ".join(fargs + strlens)), "{"]
    body += ["    " + s for s in pre]
    body.append("    int rc = %s(%s);" % (name, ", ".join(call)))
    # New handles and indices are written only on success: a failed call leaves the
    # program's variables as they were, as the C binding does.
    if post:
        body.append("    if (rc == MPI_SUCCESS) {")
        body += ["        " + s for s in post]
        body.append("    }")
    body += ["    " + s for s in always]
    body += ["    " + s for s in cleanup]
    body.append("    *ierror = rc;")
    body.append("}")
    return "\n".join(body)


def read_abi(path):
    consts, sizes = {}, {}
    for line in pathlib.Path(path).read_text().splitlines():
        kind, name, value = line.split()
        if kind == "const":
            consts[name] = int(value)
        elif kind == "sizeof":
            sizes[name] = int(value)
    return consts, sizes


# Constants that are addresses in C: in Fortran they are variables in common blocks
# whose addresses support.c recognises (MPI_BOTTOM, MPI_IN_PLACE, ...).
SENTINELS = [
    ("MPI_BOTTOM", "INTEGER", "", "spools_bottom"),
    ("MPI_IN_PLACE", "INTEGER", "", "spools_in_place"),
    ("MPI_STATUS_IGNORE", "INTEGER", "(MPI_STATUS_SIZE)", "spools_status_ignore"),
    ("MPI_STATUSES_IGNORE", "INTEGER", "(MPI_STATUS_SIZE,1)", "spools_statuses_ignore"),
    ("MPI_ERRCODES_IGNORE", "INTEGER", "(1)", "spools_errcodes_ignore"),
    ("MPI_UNWEIGHTED", "INTEGER", "(1)", "spools_unweighted"),
    ("MPI_WEIGHTS_EMPTY", "INTEGER", "(1)", "spools_weights_empty"),
]


# The ABI's handle constants come first in its table, each kind in a range of values.
HANDLE_RANGES = [(32, 63, "Op"), (256, 263, "Comm"), (264, 271, "Group"), (272, 279, "Win"),
                 (280, 287, "File"), (288, 295, "Session"), (296, 303, "Message"),
                 (304, 311, "Info"), (320, 327, "Errhandler"), (384, 391, "Request"),
                 (512, 1023, "Datatype")]


def handle_constants(consts):
    """(name, kind, value) of every predefined handle: the constants before MPI_SUCCESS."""
    out = []
    for n, v in consts.items():
        if n == "MPI_SUCCESS":
            return out
        kind = [k for lo, hi, k in HANDLE_RANGES if lo <= v <= hi]
        if len(kind) != 1:
            raise SystemExit("gen.py: handle constant %s = %d in no kind's range" % (n, v))
        out.append((n, kind[0], v))
    raise SystemExit("gen.py: no MPI_SUCCESS in the ABI table")


def integer_values(consts, sizes):
    """Every constant of mpif.h with its value (handles included, as integers)."""
    skip = {s[0] for s in SENTINELS}
    values = dict((n, v) for n, v in consts.items()
                  if n not in skip and not n.startswith("MPI_F_"))
    values.update({
        "MPI_STATUS_SIZE": consts["MPI_F_STATUS_SIZE"],
        "MPI_SOURCE": consts["MPI_F_SOURCE"] + 1,
        "MPI_TAG": consts["MPI_F_TAG"] + 1,
        "MPI_ERROR": consts["MPI_F_ERROR"] + 1,
        "MPI_ADDRESS_KIND": sizes["MPI_Aint"],
        "MPI_OFFSET_KIND": sizes["MPI_Offset"],
        "MPI_COUNT_KIND": sizes["MPI_Count"],
        "MPI_INTEGER_KIND": 4,
    })
    return values


def fortran_constants(consts, sizes):
    """The lines of mpif.h (valid in fixed and free form: columns 7 to 72, no
    continuations, comments with ! in column 1)."""
    values = integer_values(consts, sizes)
    out = ["! The MPI constants of Spools' Fortran layer (generated by gen.py",
           "! from Spools' standard ABI table: do not edit)."]
    for n, v in values.items():
        out.append("      INTEGER %s" % n)
        out.append("      PARAMETER (%s=%d)" % (n, v))
    for n, t, dims, common in SENTINELS:
        out.append("      %s %s%s" % (t, n, dims))
        out.append("      COMMON /%s/ %s" % (common.upper(), n))
    out.append("      DOUBLE PRECISION MPI_WTIME, MPI_WTICK")
    out.append("      EXTERNAL MPI_WTIME, MPI_WTICK")
    for line in out:
        assert len(line) <= 72, line
    return out


def main():
    if len(sys.argv) != 3:
        raise SystemExit(__doc__)
    consts, sizes = read_abi(sys.argv[1])
    out = pathlib.Path(sys.argv[2])
    out.mkdir(parents=True, exist_ok=True)
    rows = parse_table()

    header = [
        "/* The MPI standard ABI's C types and the prototypes the Fortran layer calls",
        " * (generated by crates/spools-mpi/fortran/gen.py: do not edit). */",
        "#ifndef SPOOLS_FORTRAN_H", "#define SPOOLS_FORTRAN_H",
        "#include <stddef.h>", "#include <stdint.h>",
        "typedef int MPI_Fint;",
        "typedef intptr_t MPI_Aint;", "typedef int64_t MPI_Offset;", "typedef int64_t MPI_Count;",
        "typedef struct { int MPI_SOURCE; int MPI_TAG; int MPI_ERROR; int mpi_abi_slot[5]; }"
        " MPI_Status;",
    ]
    for kind, t in HANDLES.items():
        header.append("typedef struct MPI_ABI_%s *%s;" % (kind, t))
    header.append("typedef void (MPI_User_function)(void *invec, void *inoutvec, int *len,"
                  " MPI_Datatype *datatype);")
    for n in ("MPI_SUCCESS", "MPI_ERR_IN_STATUS", "MPI_ERR_NO_MEM", "MPI_ERR_OP", "MPI_ERR_ARG", "MPI_UNDEFINED",
              "MPI_OP_NULL"):
        header.append("#define %s %d" % (n, consts[n]))
    header.append("#define MPI_F_STATUS_SIZE %d" % consts["MPI_F_STATUS_SIZE"])
    for n in sorted(consts):
        if n.startswith("MPI_MAX_"):
            header.append("#define %s %d" % (n, consts[n]))
    for kind, t in HANDLES.items():
        c = CONVERT.get(kind, kind)
        header.append("MPI_Fint MPI_%s_toint(%s h);" % (c, t))
        header.append("%s MPI_%s_fromint(MPI_Fint i);" % (t, c))
    header.append('#include "prototypes.h"')
    header += [
        "/* support.c */",
        "void *spools_f_buf(void *p);",
        "MPI_Status *spools_f_status(MPI_Fint *p);",
        "MPI_Status *spools_f_statuses(MPI_Fint *p);",
        "char *spools_f_str_in(const char *s, size_t len);",
        "void spools_f_str_out(char *dst, size_t len, const char *src);",
        "void *spools_f_handles(size_t size, MPI_Fint count);",
        "void *spools_f08_addr(void **descriptor);",
        "#endif",
    ]
    (out / "fortran.h").write_text("\n".join(header) + "\n")
    # The prototypes alone: scripts/test-mpi.sh compiles them after another
    # implementation's mpi_abi.h, where any that differs from the standard's is an error.
    protos = ["/* The C functions the Fortran layer calls (generated by gen.py). */"]
    protos += EXTRA_PROTOTYPES + [c_prototype(n, p) for n, p in rows]
    (out / "prototypes.h").write_text("\n".join(protos) + "\n")

    c = ["/* One gfortran external per MPI function (generated by",
         " * crates/spools-mpi/fortran/gen.py: do not edit). */",
         "#include <stdlib.h>", '#include "fortran.h"', ""]
    for n, p in rows:
        c.append(binding(n, p))
        c.append("")
    (out / "bindings.c").write_text("\n".join(c))

    consts_lines = fortran_constants(consts, sizes)
    (out / "mpif.h").write_text("\n".join(consts_lines) + "\n")
    module = ["! Module mpi of Spools' Fortran layer (generated by gen.py: do not edit).",
              "module mpi", "implicit none"]
    module += [l.strip() if not l.startswith("!") else l for l in consts_lines]
    module += ["end module mpi"]
    (out / "mpi.f90").write_text("\n".join(module) + "\n")
    handles = handle_constants(consts)
    names = {n for n, _, _ in handles}
    ints = [(n, v) for n, v in integer_values(consts, sizes).items() if n not in names]
    (out / "mpi_f08.f90").write_text(f08.module(rows, handles, ints, list(HANDLES)))


if __name__ == "__main__":
    main()
