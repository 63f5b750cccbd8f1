//! The C interface of Spools: `libspools.so` / `libspools.a` and `include/spools.h`
//! (generated from this crate by cbindgen; `tests/header.rs` fails when the committed
//! header differs).
//!
//! Conventions, in the style of UCX, libfabric and MPI:
//! - opaque handles (`spools_world_t*`, `spools_comm_t*`, ...) with create/destroy pairs;
//! - every call returns a `spools_status_t`; `spools_last_error_message()` gives the full
//!   message of the calling thread's last failure;
//! - no Rust panic crosses the boundary (`SPOOLS_ERR_INTERNAL`), NULL pointers and
//!   impossible lengths are `SPOOLS_ERR_INVALID_ARG`;
//! - parameter structs carry a `field_mask`, so that they can grow within a major
//!   version;
//! - each call's thread safety is stated in its documentation (in the header).
#![allow(non_camel_case_types)]
// Every extern function checks its pointers itself (NULL, length, handle tag) and states
// its contract in a `# Safety` section.
#![allow(clippy::missing_safety_doc)]

mod am;
mod args;
mod coll;
mod comm;
mod declined;
mod dtype;
mod errmap;
mod framebuffer;
mod io;
mod layout;
mod op;
mod p2p;
mod pipe;
mod region;
mod request;
mod rpc;
mod status;
mod stream;
mod stream_conn;
mod stream_reader;
mod version;
mod world;

pub use am::{
    spools_am_flush, spools_am_handler_fn, spools_am_handler_id, spools_am_msg_t,
    spools_am_progress, spools_am_register, spools_am_send_bulk, spools_am_send_short,
    spools_am_sync, spools_am_wait_until, spools_cond_fn, SPOOLS_AM_BATCHED, SPOOLS_AM_HIGH,
    SPOOLS_AM_UNORDERED,
};
pub use coll::{
    spools_allgather, spools_allgatherv, spools_allreduce, spools_alltoall, spools_alltoallv,
    spools_barrier, spools_bcast, spools_gather, spools_gatherv, spools_reduce,
    spools_reduce_scatter, spools_scan, spools_scatter, spools_scatterv,
};
pub use comm::{
    spools_comm_destroy, spools_comm_dup, spools_comm_rank, spools_comm_size, spools_comm_split,
    spools_comm_t, SPOOLS_UNDEFINED,
};
pub use dtype::{
    spools_dtype_t, SPOOLS_DTYPE_F32, SPOOLS_DTYPE_F64, SPOOLS_DTYPE_I16, SPOOLS_DTYPE_I32,
    SPOOLS_DTYPE_I64, SPOOLS_DTYPE_I8, SPOOLS_DTYPE_U16, SPOOLS_DTYPE_U32, SPOOLS_DTYPE_U64,
    SPOOLS_DTYPE_U8,
};
pub use framebuffer::{
    spools_frame_style_t, SPOOLS_COLORMAP_GREY, SPOOLS_COLORMAP_INFERNO, SPOOLS_COLORMAP_NONE,
    SPOOLS_COLORMAP_VIRIDIS, SPOOLS_FRAME_FIELD_COLORMAP, SPOOLS_FRAME_FIELD_HI,
    SPOOLS_FRAME_FIELD_LO, SPOOLS_FRAME_FIELD_TITLE,
};
pub use io::{
    spools_read_file, spools_read_params_t, spools_redistribute, spools_write_file,
    spools_write_params_t, SPOOLS_READ_FIELD_CHECKSUMS, SPOOLS_READ_FIELD_COLL_BUFFER,
    SPOOLS_READ_FIELD_INTEGRITY, SPOOLS_WRITE_FIELD_CHECKSUMS, SPOOLS_WRITE_FIELD_COLL_BUFFER,
    SPOOLS_WRITE_FIELD_FORMAT, SPOOLS_WRITE_FIELD_INTEGRITY, SPOOLS_WRITE_FIELD_IN_PLACE,
    SPOOLS_WRITE_FIELD_SYNC,
};
pub use layout::{
    spools_layout_destroy, spools_layout_elem_size, spools_layout_local_bytes, spools_layout_parse,
    spools_layout_t, spools_layout_to_string, spools_layout_total_bytes, spools_layout_units,
};
pub use op::{
    spools_op_create, spools_op_destroy, spools_op_t, spools_user_fn, SPOOLS_OP_MAX, SPOOLS_OP_MIN,
    SPOOLS_OP_PROD, SPOOLS_OP_SUM,
};
pub use p2p::{
    spools_iprobe, spools_msg_status_t, spools_probe, spools_recv, spools_send, SPOOLS_ANY_SOURCE,
    SPOOLS_ANY_TAG,
};
pub use pipe::{
    spools_pipe_close, spools_pipe_open_reader, spools_pipe_open_writer, spools_pipe_read,
    spools_pipe_records, spools_pipe_t, spools_pipe_write,
};
pub use region::{
    spools_get, spools_put, spools_region_create, spools_region_destroy, spools_region_key,
    spools_region_read, spools_region_t, spools_region_write,
};
pub use request::{
    spools_cancel, spools_irecv, spools_isend, spools_request_t, spools_test, spools_wait,
    spools_waitall,
};
pub use rpc::{
    spools_rpc_call, spools_rpc_fail, spools_rpc_fn, spools_rpc_register, spools_rpc_reply,
    spools_rpc_reply_t,
};
pub use status::{spools_last_error_message, spools_status_t, spools_strerror};
pub use stream::{
    spools_stream_close, spools_stream_open, spools_stream_params_t, spools_stream_send,
    spools_stream_send_frame, spools_stream_t, SPOOLS_STREAM_FIELD_LINKS,
    SPOOLS_STREAM_FIELD_PRIORITY, SPOOLS_STREAM_FIELD_TU, SPOOLS_STREAM_FIELD_WINDOW,
};
pub use stream_conn::{
    spools_frame_item_t, spools_stream_conn_adus, spools_stream_conn_close,
    spools_stream_conn_close_stream, spools_stream_conn_open_stream, spools_stream_conn_send,
    spools_stream_conn_send_frame, spools_stream_conn_send_frames, spools_stream_conn_send_group,
    spools_stream_conn_send_var, spools_stream_conn_t, spools_stream_connect, spools_stream_item_t,
    spools_stream_options_t, SPOOLS_STREAM_OPTION_AFTER, SPOOLS_STREAM_OPTION_GROUP,
    SPOOLS_STREAM_OPTION_PRIORITY, SPOOLS_STREAM_OPTION_TU, SPOOLS_STREAM_OPTION_VARIABLE,
    SPOOLS_STREAM_OPTION_WINDOW,
};
pub use stream_reader::{
    spools_adu_info_t, spools_stream_listen, spools_stream_reader_address,
    spools_stream_reader_close, spools_stream_reader_next, spools_stream_reader_recv,
    spools_stream_reader_skip, spools_stream_reader_t,
};
pub use version::{
    spools_check_version, spools_version, SPOOLS_VERSION_MAJOR, SPOOLS_VERSION_MINOR,
    SPOOLS_VERSION_PATCH,
};
pub use world::{
    spools_abort, spools_config_string, spools_finalize, spools_init, spools_init_params_t,
    spools_world_comm, spools_world_rank, spools_world_same_host, spools_world_size,
    spools_world_t, SPOOLS_INIT_FIELD_API_VERSION,
};
