#!/usr/bin/env python3
"""Writes the Fortran layer over the MPI standard ABI into a build directory:

    fortran.h       the ABI's C types (declared here, so that building the layer needs no
                    mpi_abi.h), including
    prototypes.h    the prototypes of every C function the layer calls
    bindings.c      one `mpi_name_` (gfortran's external name) per row of TABLE: converts
                    Fortran INTEGER handles with MPI_<Kind>_fromint/toint, passes choice
                    buffers with the MPI_BOTTOM / MPI_IN_PLACE sentinels mapped, status
                    arrays in place (the ABI's MPI_Status is MPI_F_STATUS_SIZE integers),
                    strings trimmed and padded, 1-based indices, and stores ierror;
                    then C's MPI_<Kind>_f2c / _c2f and every binding's PMPI_ name
    mpif.h          the constants, for `include 'mpif.h'` (fixed and free form alike)
    mpi.f90         module `mpi`: the same constants, MPI_Sizeof
    mpi_f08.f90     module `mpi_f08`: typed handles, optional ierror (f08.py)

    python3 gen.py ABI_TABLE OUT_DIR

ABI_TABLE is the output of `cargo run -p spools-mpi --example abi_table` (every constant of
Spools' ABI with its value). What is written by hand is beside this file: support.c (the
sentinels' common blocks, the string helpers, the calls whose Fortran form is not a row)
and callbacks.c (operators, error handlers and attribute functions written in Fortran,
and the attribute calls).
"""
import pathlib
import re
import sys

sys.dont_write_bytecode = True  # no __pycache__ in the source tree
import f08  # noqa: E402

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
#   str[MAX]*     a string out, into a C buffer of MAX+1 bytes (MAX a constant or an int
#                 parameter), blank-padded in Fortran
#   H[N]*         N handles out (MPI_Type_get_contents)
#   H[@comm]      as many handles as the communicator parameter COMM has ranks (remote
#                 ranks for an intercommunicator: MPI_Alltoallw)
#   ptr*          an address out into an INTEGER(KIND=MPI_ADDRESS_KIND) (MPI_Win_allocate)
#   aint32        an address or displacement that the MPI-1 calls take as an INTEGER
#   aint32*       one out, as an INTEGER (an error if it does not fit)
#   aint32[N]     N in, widened into a C array
#   ranges        MPI_Group_range_incl's triplets, INTEGER RANGES(3, N)
#   weights       graph weights in (MPI_UNWEIGHTED and MPI_WEIGHTS_EMPTY mapped)
#   weights*      graph weights out (MPI_UNWEIGHTED mapped)
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
MPI_Comm_delete_attr Comm comm, int comm_keyval
MPI_Type_delete_attr Datatype datatype, int type_keyval
MPI_Win_delete_attr Win win, int win_keyval
MPI_Comm_free_keyval int* comm_keyval
MPI_Type_free_keyval int* type_keyval
MPI_Win_free_keyval int* win_keyval
MPI_Keyval_free int* keyval
MPI_Add_error_string int errorcode, str string
MPI_Add_error_code int errorclass, int* errorcode
MPI_Add_error_class int* errorclass
MPI_Info_get_valuelen Info info, str key, int* valuelen, logical* flag
MPI_Info_get_nthkey Info info, int n, str[MPI_MAX_INFO_KEY]* key
MPI_Comm_set_info Comm comm, Info info
MPI_Comm_get_info Comm comm, Info* info_used
MPI_Comm_dup_with_info Comm comm, Info info, Comm* newcomm
MPI_Comm_idup Comm comm, Comm* newcomm, Request* request
MPI_Comm_create_group Comm comm, Group group, int tag, Comm* newcomm
MPI_Comm_remote_group Comm comm, Group* group
MPI_Comm_get_parent Comm* parent
MPI_Comm_disconnect Comm& comm
MPI_Group_compare Group group1, Group group2, int* result
MPI_Group_union Group group1, Group group2, Group* newgroup
MPI_Group_intersection Group group1, Group group2, Group* newgroup
MPI_Group_difference Group group1, Group group2, Group* newgroup
MPI_Group_range_incl Group group, int n, ranges ranges, Group* newgroup
MPI_Group_range_excl Group group, int n, ranges ranges, Group* newgroup
MPI_Pack_external_size str datarep, int incount, Datatype datatype, Aint* size
MPI_Pack_external str datarep, cbuf inbuf, int incount, Datatype datatype, buf outbuf, Aint outsize, Aint* position
MPI_Unpack_external str datarep, cbuf inbuf, Aint insize, Aint* position, buf outbuf, int outcount, Datatype datatype
MPI_Mprobe int source, int tag, Comm comm, Message* message, status* status
MPI_Improbe int source, int tag, Comm comm, logical* flag, Message* message, status* status
MPI_Mrecv buf buf, int count, Datatype datatype, Message& message, status* status
MPI_Imrecv buf buf, int count, Datatype datatype, Message& message, Request* request
MPI_Ibsend cbuf buf, int count, Datatype datatype, int dest, int tag, Comm comm, Request* request
MPI_Irsend cbuf buf, int count, Datatype datatype, int dest, int tag, Comm comm, Request* request
MPI_Ssend_init cbuf buf, int count, Datatype datatype, int dest, int tag, Comm comm, Request* request
MPI_Rsend_init cbuf buf, int count, Datatype datatype, int dest, int tag, Comm comm, Request* request
MPI_Bsend_init cbuf buf, int count, Datatype datatype, int dest, int tag, Comm comm, Request* request
MPI_Testsome int incount, Request[incount]& array_of_requests, int* outcount, index[incount]* array_of_indices, status[incount]* array_of_statuses
MPI_Request_get_status Request request, logical* flag, status* status
MPI_Grequest_complete Request request
MPI_Status_set_elements status* status, Datatype datatype, int count
MPI_Status_set_cancelled status* status, logical flag
MPI_Get_elements_x cstatus status, Datatype datatype, Count* count
MPI_Alltoallw cbuf sendbuf, int[] sendcounts, int[] sdispls, Datatype[@comm] sendtypes, buf recvbuf, int[] recvcounts, int[] rdispls, Datatype[@comm] recvtypes, Comm comm
MPI_Ialltoallw cbuf sendbuf, int[] sendcounts, int[] sdispls, Datatype[@comm] sendtypes, buf recvbuf, int[] recvcounts, int[] rdispls, Datatype[@comm] recvtypes, Comm comm, Request* request
MPI_Ialltoallv cbuf sendbuf, int[] sendcounts, int[] sdispls, Datatype sendtype, buf recvbuf, int[] recvcounts, int[] rdispls, Datatype recvtype, Comm comm, Request* request
MPI_Igather cbuf sendbuf, int sendcount, Datatype sendtype, buf recvbuf, int recvcount, Datatype recvtype, int root, Comm comm, Request* request
MPI_Igatherv cbuf sendbuf, int sendcount, Datatype sendtype, buf recvbuf, int[] recvcounts, int[] displs, Datatype recvtype, int root, Comm comm, Request* request
MPI_Iscatter cbuf sendbuf, int sendcount, Datatype sendtype, buf recvbuf, int recvcount, Datatype recvtype, int root, Comm comm, Request* request
MPI_Iscatterv cbuf sendbuf, int[] sendcounts, int[] displs, Datatype sendtype, buf recvbuf, int recvcount, Datatype recvtype, int root, Comm comm, Request* request
MPI_Iallgatherv cbuf sendbuf, int sendcount, Datatype sendtype, buf recvbuf, int[] recvcounts, int[] displs, Datatype recvtype, Comm comm, Request* request
MPI_Iscan cbuf sendbuf, buf recvbuf, int count, Datatype datatype, Op op, Comm comm, Request* request
MPI_Iexscan cbuf sendbuf, buf recvbuf, int count, Datatype datatype, Op op, Comm comm, Request* request
MPI_Ireduce_scatter cbuf sendbuf, buf recvbuf, int[] recvcounts, Datatype datatype, Op op, Comm comm, Request* request
MPI_Ireduce_scatter_block cbuf sendbuf, buf recvbuf, int recvcount, Datatype datatype, Op op, Comm comm, Request* request
MPI_Reduce_local cbuf inbuf, buf inoutbuf, int count, Datatype datatype, Op op
MPI_Neighbor_allgather cbuf sendbuf, int sendcount, Datatype sendtype, buf recvbuf, int recvcount, Datatype recvtype, Comm comm
MPI_Neighbor_alltoall cbuf sendbuf, int sendcount, Datatype sendtype, buf recvbuf, int recvcount, Datatype recvtype, Comm comm
MPI_Neighbor_allgatherv cbuf sendbuf, int sendcount, Datatype sendtype, buf recvbuf, int[] recvcounts, int[] displs, Datatype recvtype, Comm comm
MPI_Neighbor_alltoallv cbuf sendbuf, int[] sendcounts, int[] sdispls, Datatype sendtype, buf recvbuf, int[] recvcounts, int[] rdispls, Datatype recvtype, Comm comm
MPI_Win_call_errhandler Win win, int errorcode
MPI_File_call_errhandler File fh, int errorcode
MPI_Win_get_errhandler Win win, Errhandler* errhandler
MPI_File_get_errhandler File file, Errhandler* errhandler
MPI_Dist_graph_create_adjacent Comm comm_old, int indegree, int[] sources, weights sourceweights, int outdegree, int[] destinations, weights destweights, Info info, logical reorder, Comm* comm_dist_graph
MPI_Dist_graph_create Comm comm_old, int n, int[] sources, int[] degrees, int[] destinations, weights weights, Info info, logical reorder, Comm* comm_dist_graph
MPI_Dist_graph_neighbors_count Comm comm, int* indegree, int* outdegree, logical* weighted
MPI_Dist_graph_neighbors Comm comm, int maxindegree, int[]* sources, weights* sourceweights, int maxoutdegree, int[]* destinations, weights* destweights
MPI_Graph_create Comm comm_old, int nnodes, int[] index, int[] edges, logical reorder, Comm* comm_graph
MPI_Graphdims_get Comm comm, int* nnodes, int* nedges
MPI_Graph_get Comm comm, int maxindex, int maxedges, int[]* index, int[]* edges
MPI_Graph_neighbors_count Comm comm, int rank, int* nneighbors
MPI_Graph_neighbors Comm comm, int rank, int maxneighbors, int[]* neighbors
MPI_Cart_map Comm comm, int ndims, int[] dims, logical[] periods, int* newrank
MPI_Topo_test Comm comm, int* status
MPI_Win_create_dynamic Info info, Comm comm, Win* win
MPI_Win_allocate Aint size, int disp_unit, Info info, Comm comm, ptr* baseptr, Win* win
MPI_Win_allocate_shared Aint size, int disp_unit, Info info, Comm comm, ptr* baseptr, Win* win
MPI_Win_shared_query Win win, int rank, Aint* size, int* disp_unit, ptr* baseptr
MPI_Win_attach Win win, buf base, Aint size
MPI_Win_detach Win win, cbuf base
MPI_Win_start Group group, int assert, Win win
MPI_Win_post Group group, int assert, Win win
MPI_Win_complete Win win
MPI_Win_wait Win win
MPI_Win_test Win win, logical* flag
MPI_Win_lock_all int assert, Win win
MPI_Win_unlock_all Win win
MPI_Win_flush_all Win win
MPI_Win_flush_local int rank, Win win
MPI_Win_flush_local_all Win win
MPI_Win_sync Win win
MPI_Win_get_name Win win, str[MPI_MAX_OBJECT_NAME]* win_name, int* resultlen
MPI_Win_set_name Win win, str win_name
MPI_Win_get_group Win win, Group* group
MPI_Compare_and_swap cbuf origin_addr, cbuf compare_addr, buf result_addr, Datatype datatype, int target_rank, Aint target_disp, Win win
MPI_Fetch_and_op cbuf origin_addr, buf result_addr, Datatype datatype, int target_rank, Aint target_disp, Op op, Win win
MPI_Get_accumulate cbuf origin_addr, int origin_count, Datatype origin_datatype, buf result_addr, int result_count, Datatype result_datatype, int target_rank, Aint target_disp, int target_count, Datatype target_datatype, Op op, Win win
MPI_Rput cbuf origin_addr, int origin_count, Datatype origin_datatype, int target_rank, Aint target_disp, int target_count, Datatype target_datatype, Win win, Request* request
MPI_Rget buf origin_addr, int origin_count, Datatype origin_datatype, int target_rank, Aint target_disp, int target_count, Datatype target_datatype, Win win, Request* request
MPI_Raccumulate cbuf origin_addr, int origin_count, Datatype origin_datatype, int target_rank, Aint target_disp, int target_count, Datatype target_datatype, Op op, Win win, Request* request
MPI_Type_create_f90_integer int r, Datatype* newtype
MPI_Type_create_f90_real int p, int r, Datatype* newtype
MPI_Type_create_f90_complex int p, int r, Datatype* newtype
MPI_Type_match_size int typeclass, int size, Datatype* datatype
MPI_Type_create_hindexed_block int count, int blocklength, Aint[] array_of_displacements, Datatype oldtype, Datatype* newtype
MPI_Type_get_envelope Datatype datatype, int* num_integers, int* num_addresses, int* num_datatypes, int* combiner
MPI_Type_get_contents Datatype datatype, int max_integers, int max_addresses, int max_datatypes, int[]* array_of_integers, Aint[]* array_of_addresses, Datatype[max_datatypes]* array_of_datatypes
MPI_Type_get_extent_x Datatype datatype, Count* lb, Count* extent
MPI_Type_get_true_extent_x Datatype datatype, Count* true_lb, Count* true_extent
MPI_File_get_view File fh, Offset* disp, Datatype* etype, Datatype* filetype, str[MPI_MAX_DATAREP_STRING]* datarep
MPI_File_get_type_extent File fh, Datatype datatype, Aint* extent
MPI_File_get_group File fh, Group* group
MPI_File_seek_shared File fh, Offset offset, int whence
MPI_File_get_position_shared File fh, Offset* offset
MPI_File_iread File fh, buf buf, int count, Datatype datatype, Request* request
MPI_File_iwrite File fh, cbuf buf, int count, Datatype datatype, Request* request
MPI_File_iread_shared File fh, buf buf, int count, Datatype datatype, Request* request
MPI_File_iwrite_shared File fh, cbuf buf, int count, Datatype datatype, Request* request
MPI_File_iread_all File fh, buf buf, int count, Datatype datatype, Request* request
MPI_File_iwrite_all File fh, cbuf buf, int count, Datatype datatype, Request* request
MPI_File_iread_at_all File fh, Offset offset, buf buf, int count, Datatype datatype, Request* request
MPI_File_iwrite_at_all File fh, Offset offset, cbuf buf, int count, Datatype datatype, Request* request
MPI_File_read_all_begin File fh, buf buf, int count, Datatype datatype
MPI_File_read_all_end File fh, buf buf, status* status
MPI_File_write_all_begin File fh, cbuf buf, int count, Datatype datatype
MPI_File_write_all_end File fh, cbuf buf, status* status
MPI_File_read_at_all_begin File fh, Offset offset, buf buf, int count, Datatype datatype
MPI_File_read_at_all_end File fh, buf buf, status* status
MPI_File_write_at_all_begin File fh, Offset offset, cbuf buf, int count, Datatype datatype
MPI_File_write_at_all_end File fh, cbuf buf, status* status
MPI_File_read_ordered_begin File fh, buf buf, int count, Datatype datatype
MPI_File_read_ordered_end File fh, buf buf, status* status
MPI_File_write_ordered_begin File fh, cbuf buf, int count, Datatype datatype
MPI_File_write_ordered_end File fh, cbuf buf, status* status
MPI_Open_port Info info, str[MPI_MAX_PORT_NAME]* port_name
MPI_Close_port str port_name
MPI_Comm_accept str port_name, Info info, int root, Comm comm, Comm* newcomm
MPI_Comm_connect str port_name, Info info, int root, Comm comm, Comm* newcomm
MPI_Publish_name str service_name, Info info, str port_name
MPI_Unpublish_name str service_name, Info info, str port_name
MPI_Lookup_name str service_name, Info info, str[MPI_MAX_PORT_NAME]* port_name
MPI_Comm_join int fd, Comm* intercomm
MPI_Type_extent Datatype datatype, aint32* extent
MPI_Type_lb Datatype datatype, aint32* displacement
MPI_Type_ub Datatype datatype, aint32* displacement
MPI_Address cbuf location, aint32* address
MPI_Type_hvector int count, int blocklength, aint32 stride, Datatype oldtype, Datatype* newtype
MPI_Type_hindexed int count, int[] array_of_blocklengths, aint32[count] array_of_displacements, Datatype oldtype, Datatype* newtype
MPI_Type_struct int count, int[] array_of_blocklengths, aint32[count] array_of_displacements, Datatype[count] array_of_types, Datatype* newtype
MPI_Errhandler_set Comm comm, Errhandler errhandler
MPI_Errhandler_get Comm comm, Errhandler* errhandler
"""

# C functions the bindings or support.c call besides TABLE's, with their prototypes.
EXTRA_PROTOTYPES = [
    "int MPI_Init(int *argc, char ***argv);",
    "int MPI_Init_thread(int *argc, char ***argv, int required, int *provided);",
    "double MPI_Wtime(void);",
    "double MPI_Wtick(void);",
    "int MPI_Op_create(MPI_User_function *user_fn, int commute, MPI_Op *op);",
    "int MPI_Op_free(MPI_Op *op);",
    "int MPI_Comm_get_attr(MPI_Comm comm, int comm_keyval, void *attribute_val, int *flag);",
    "int MPI_Type_get_attr(MPI_Datatype datatype, int type_keyval, void *attribute_val, int *flag);",
    "int MPI_Win_get_attr(MPI_Win win, int win_keyval, void *attribute_val, int *flag);",
    "int MPI_Attr_get(MPI_Comm comm, int keyval, void *attribute_val, int *flag);",
    "int MPI_Attr_put(MPI_Comm comm, int keyval, void *attribute_val);",
    "int MPI_Comm_set_attr(MPI_Comm comm, int comm_keyval, void *attribute_val);",
    "int MPI_Type_set_attr(MPI_Datatype datatype, int type_keyval, void *attribute_val);",
    "int MPI_Win_set_attr(MPI_Win win, int win_keyval, void *attribute_val);",
    "int MPI_Comm_create_keyval(MPI_Comm_copy_attr_function *comm_copy_attr_fn,"
    " MPI_Comm_delete_attr_function *comm_delete_attr_fn, int *comm_keyval, void *extra_state);",
    "int MPI_Type_create_keyval(MPI_Type_copy_attr_function *type_copy_attr_fn,"
    " MPI_Type_delete_attr_function *type_delete_attr_fn, int *type_keyval, void *extra_state);",
    "int MPI_Win_create_keyval(MPI_Win_copy_attr_function *win_copy_attr_fn,"
    " MPI_Win_delete_attr_function *win_delete_attr_fn, int *win_keyval, void *extra_state);",
    "int MPI_Keyval_create(MPI_Copy_function *copy_fn, MPI_Delete_function *delete_fn,"
    " int *keyval, void *extra_state);",
    "int MPI_Comm_create_errhandler(MPI_Comm_errhandler_function *comm_errhandler_fn,"
    " MPI_Errhandler *errhandler);",
    "int MPI_Win_create_errhandler(MPI_Win_errhandler_function *win_errhandler_fn,"
    " MPI_Errhandler *errhandler);",
    "int MPI_File_create_errhandler(MPI_File_errhandler_function *file_errhandler_fn,"
    " MPI_Errhandler *errhandler);",
    "int MPI_Buffer_detach(void *buffer_addr, int *size);",
    "int MPI_Info_create_env(int argc, char *argv[], MPI_Info *info);",
    "int MPI_Info_get_string(MPI_Info info, const char *key, int *buflen, char *value, int *flag);",
    "int MPI_Info_get(MPI_Info info, const char *key, int valuelen, char *value, int *flag);",
    "int MPI_Pcontrol(const int level, ...);",
    "int MPI_Comm_spawn(const char *command, char *argv[], int maxprocs, MPI_Info info,"
    " int root, MPI_Comm comm, MPI_Comm *intercomm, int array_of_errcodes[]);",
    "int MPI_Comm_spawn_multiple(int count, char *array_of_commands[],"
    " char **array_of_argv[], const int array_of_maxprocs[], const MPI_Info array_of_info[],"
    " int root, MPI_Comm comm, MPI_Comm *intercomm, int array_of_errcodes[]);",
    "MPI_Aint MPI_Aint_add(MPI_Aint base, MPI_Aint disp);",
    "MPI_Aint MPI_Aint_diff(MPI_Aint addr1, MPI_Aint addr2);",
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


ARRAY = re.compile(r"^(\w+)\[(@?\w*)\]([*&]?)$")


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
        if base == "aint32":
            return "const MPI_Aint *"
        if base in ("int", "logical", "index"):
            return "const int *" if mark == "" else "int *"
        return ("const " if mark == "" else "") + WIDE[base] + " *"
    if kind in ("buf", "ptr*"):
        return "void *"
    if kind == "aint32":
        return "MPI_Aint"
    if kind == "aint32*":
        return "MPI_Aint *"
    if kind == "weights":
        return "const int *"
    if kind == "ranges":
        return "int (*)[3]"
    if kind == "weights*":
        return "int *"
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
    args = ", ".join("int %s[][3]" % p if k == "ranges" else
                     "%s%s%s" % (t, "" if t.endswith("*") else " ", p)
                     for k, t, p in ((k, c_param_type(k), p) for k, p in params))
    return "int %s(%s);" % (name, args or "void")


def conv(kind, direction):
    c = CONVERT.get(kind, kind)
    return "MPI_%s_%s" % (c, direction)


# Parameters passed on as they are, or through one expression: KIND -> (the C type the
# Fortran argument points to, the C argument made of it, {p} its name).
PASS = {
    "buf": ("void", "spools_f_buf({p})"),
    "cbuf": ("void", "spools_f_buf({p})"),
    "int": ("MPI_Fint", "*{p}"),
    "logical": ("MPI_Fint", "*{p}"),
    "int*": ("MPI_Fint", "{p}"),
    "aint32": ("MPI_Fint", "(MPI_Aint)*{p}"),
    "ranges": ("MPI_Fint", "(int (*)[3]){p}"),
    "ptr*": ("MPI_Aint", "{p}"),
    "weights": ("MPI_Fint", "spools_f_weights({p})"),
    "weights*": ("MPI_Fint", "spools_f_weights({p})"),
    "status*": ("MPI_Fint", "spools_f_status({p})"),
    "cstatus": ("MPI_Fint", "(const MPI_Status *){p}"),
}
PASS.update({k: (t, "*{p}") for k, t in WIDE.items()})
PASS.update({k + "*": (t, "{p}") for k, t in WIDE.items()})


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
                if count.startswith("@"):
                    n = "spools_f_comm_ranks(MPI_Comm_fromint(*%s))" % count[1:]
                else:
                    n = "*" + count
                pre.append("int n_%s = %s;" % (p, n))
                pre.append("%s *c_%s = spools_f_handles(sizeof(%s), n_%s);" % (t, p, t, p))
                pre.append("if (c_%s == NULL) { *ierror = MPI_ERR_NO_MEM; return; }" % p)
                if mark != "*":
                    pre.append("for (int i = 0; i < n_%s; i++) c_%s[i] = %s(%s[i]);"
                               % (p, p, conv(base, "fromint"), p))
                call.append("c_" + p)
                back = "for (int i = 0; i < n_%s; i++) %s[i] = %s(c_%s[i]);" % (
                    p, p, conv(base, "toint"), p)
                if mark == "&":
                    always.append(back)
                elif mark == "*":
                    post.append(back)
                cleanup.append("free(c_%s);" % p)
            elif base == "status":
                fargs.append("MPI_Fint *%s" % p)
                call.append("spools_f_statuses(%s)" % p)
            elif base == "aint32":
                fargs.append("MPI_Fint *%s" % p)
                pre.append("MPI_Aint *c_%s = spools_f_handles(sizeof(MPI_Aint), *%s);" % (p, count))
                pre.append("if (c_%s == NULL) { *ierror = MPI_ERR_NO_MEM; return; }" % p)
                pre.append("for (int i = 0; i < *%s; i++) c_%s[i] = %s[i];" % (count, p, p))
                call.append("c_" + p)
                cleanup.append("free(c_%s);" % p)
            elif base == "str":
                fargs.append("char *%s" % p)
                strlens.append("size_t %s_len" % p)
                size = "(*%s > 0 ? *%s : 0)" % (count, count) if count.islower() else count
                pre.append("char c_%s[%s + 1];" % (p, size))
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
        elif kind in PASS:
            ftype, expr = PASS[kind]
            fargs.append("%s *%s" % (ftype, p))
            call.append(expr.format(p=p))
        elif kind == "aint32*":
            fargs.append("MPI_Fint *%s" % p)
            pre.append("MPI_Aint c_%s = 0;" % p)
            call.append("&c_" + p)
            post.append("if (c_%s != (MPI_Fint)c_%s) rc = spools_f_too_wide(\"%s\");"
                        % (p, p, name))
            post.append("else *%s = (MPI_Fint)c_%s;" % (p, p))
        elif kind == "index*":
            fargs.append("MPI_Fint *%s" % p)
            call.append(p)
            post.append("if (*%s >= 0) *%s += 1;" % (p, p))
        elif kind == "logical*":
            fargs.append("MPI_Fint *%s" % p)
            pre.append("int c_%s = 0;" % p)
            call.append("&c_" + p)
            always.append("*%s = c_%s != 0;" % (p, p))
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
    ("MPI_ARGV_NULL", "CHARACTER*1", "(1)", "spools_argv_null"),
    ("MPI_ARGVS_NULL", "CHARACTER*1", "(1,1)", "spools_argvs_null"),
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


# Other names of constants, as the ABI's mpi_abi.h defines them.
ALIASES = [("MPI_LONG_LONG_INT", "MPI_LONG_LONG"), ("MPI_C_COMPLEX", "MPI_C_FLOAT_COMPLEX")]


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
    for alias, name in ALIASES:
        values[alias] = consts[name]
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
    # MPI_Offset's -1 in the ABI's mpi_abi.h.
    out.append("      INTEGER(KIND=MPI_OFFSET_KIND) MPI_DISPLACEMENT_CURRENT")
    out.append("      PARAMETER (MPI_DISPLACEMENT_CURRENT=-1)")
    out.append("      DOUBLE PRECISION MPI_WTIME, MPI_WTICK, PMPI_WTIME, PMPI_WTICK")
    out.append("      EXTERNAL MPI_WTIME, MPI_WTICK, PMPI_WTIME, PMPI_WTICK")
    # The predefined attribute copy and delete functions (callbacks.c).
    for prefix in ("", "COMM_", "TYPE_", "WIN_"):
        out.append("      EXTERNAL MPI_%sNULL_COPY_FN, MPI_%sNULL_DELETE_FN"
                   % (prefix, prefix))
        out.append("      EXTERNAL MPI_%sDUP_FN" % prefix)
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
    for kind, t in (("Comm", "MPI_Comm"), ("Type", "MPI_Datatype"), ("Win", "MPI_Win")):
        header.append("typedef int (MPI_%s_copy_attr_function)(%s, int, void *, void *, void *,"
                      " int *);" % (kind, t))
        header.append("typedef int (MPI_%s_delete_attr_function)(%s, int, void *, void *);"
                      % (kind, t))
    header.append("typedef int (MPI_Copy_function)(MPI_Comm, int, void *, void *, void *, int *);")
    header.append("typedef int (MPI_Delete_function)(MPI_Comm, int, void *, void *);")
    for kind in ("Comm", "Win", "File"):
        header.append("typedef void (MPI_%s_errhandler_function)(MPI_%s *, int *, ...);"
                      % (kind, kind))
    # The integer constants (not the handles, which are pointers in C, nor the
    # sentinels, which are addresses).
    handle_names = {n for n, _, _ in handle_constants(consts)}
    sentinel_names = {x[0] for x in SENTINELS}
    for n, v in consts.items():
        if n not in handle_names and n not in sentinel_names:
            header.append("#define %s %d" % (n, v))
    # Predefined handles as Fortran integers (MPI_Comm_fromint gives the C handle).
    for n in ("MPI_COMM_WORLD", "MPI_COMM_SELF"):
        header.append("#define SPOOLS_F_%s %d" % (n[4:], consts[n]))
    for n, t in (("MPI_BOTTOM", "void"), ("MPI_IN_PLACE", "void"), ("MPI_UNWEIGHTED", "int"),
                 ("MPI_WEIGHTS_EMPTY", "int")):
        header.append("#define %s ((%s *)%d)" % (n, t, consts[n]))
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
        "/* PMPI(mpi_send) defines pmpi_send_, the profiling name of mpi_send_. */",
        "#define PMPI(name) extern __typeof__(name##_) p##name##_ "
        "__attribute__((alias(#name \"_\")));",
        "int *spools_f_weights(MPI_Fint *p);",
        "int spools_f_too_wide(const char *call);",
        "int MPI_Comm_call_errhandler(MPI_Comm comm, int errorcode);",
        "int spools_f_comm_ranks(MPI_Comm comm);",
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
    # C's handle conversions (MPI_Comm_f2c, MPI_Comm_c2f, ...): a Fortran handle is the
    # ABI's int form of the C one. The ABI's header declares none of them (they belong to
    # the Fortran layer, which defines MPI_Fint); C code linked with Fortran calls them.
    for kind, t in HANDLES.items():
        c_name = CONVERT.get(kind, kind)
        c.append("%s MPI_%s_f2c(MPI_Fint f) { return %s(f); }"
                 % (t, c_name, conv(kind, "fromint")))
        c.append("MPI_Fint MPI_%s_c2f(%s h) { return %s(h); }" % (c_name, t, conv(kind, "toint")))
    c.append("")
    # The profiling names (PMPI_SEND), the same functions.
    for n, _ in rows:
        c.append("PMPI(%s)" % n.lower())
    c.append("")
    (out / "bindings.c").write_text("\n".join(c))

    consts_lines = fortran_constants(consts, sizes)
    (out / "mpif.h").write_text("\n".join(consts_lines) + "\n")
    module = ["! Module mpi of Spools' Fortran layer (generated by gen.py: do not edit).",
              "module mpi", "implicit none"]
    module += [l.strip() if not l.startswith("!") else l for l in consts_lines]
    # Functions a free-form program does not declare itself (mpif.h leaves MPI_AINT_ADD
    # and MPI_AINT_DIFF to the program, as MPICH's does).
    module += ["integer(kind=MPI_ADDRESS_KIND), external :: MPI_Aint_add, MPI_Aint_diff"]
    head, body = f08.sizeof_procedures()
    module += head + ["contains"] + body
    module += ["end module mpi"]
    module = [w for line in module for w in f08.wrap(line)]
    (out / "mpi.f90").write_text("\n".join(module) + "\n")
    handles = handle_constants(consts)
    kinds = {n: k for n, k, _ in handles}
    handles += [(alias, kinds[name], consts[name]) for alias, name in ALIASES if name in kinds]
    names = {n for n, _, _ in handles}
    ints = [(n, v) for n, v in integer_values(consts, sizes).items() if n not in names]
    (out / "mpi_f08.f90").write_text(f08.module(rows, handles, ints, list(HANDLES)))


if __name__ == "__main__":
    main()
