//! `libmpi_abi.so.1`: the MPI 5.0 standard ABI implemented over Spools' own layers, so
//! that a program built by any `mpicc_abi` (or mpi4py built with
//! `MPI4PY_BUILD_MPIABI=1`) runs on Spools unmodified: `spools run -n 4 -- ./prog`.
//!
//! Every function the ABI declares is exported (with its `PMPI_` name): those built here
//! work; the rest are generated stubs (`exports.rs`, by `gen/exports.py`) that fail with
//! `MPI_ERR_UNSUPPORTED_OPERATION` and a message naming the function, under the
//! communicator's error handler. docs/mpi.md lists what is built.
//!
//! Layout: `abi` (constants and types of the standard), `handles` (handle tables),
//! `error` (classes, codes, handlers), `init`, `comm`, `datatype`, `p2p`, `request`,
//! `buffer` (buffered sends), `op` (reductions), `coll`, `convert` (handle <-> int).
// The exported C functions keep the standard's names and check their arguments
// themselves; each states its contract in the standard's terms.
// The standard fixes the C functions' parameter lists (many have more than seven).
#![allow(
    non_snake_case,
    clippy::missing_safety_doc,
    clippy::too_many_arguments,
    unreachable_pub
)]

pub mod abi;
mod agree;
mod attr;
mod attrmap;
mod buffer;
mod coll;
mod collv;
mod comm;
mod convert;
mod datatype;
pub mod embed;
mod errhandler;
mod error;
mod exports;
mod external;
mod file;
mod grequest;
mod group;
mod handles;
mod icoll;
mod info;
mod init;
mod inter;
mod mem;
mod misc;
mod op;
mod out;
mod p2p;
mod part;
mod pcoll;
mod persist;
mod port;
mod removed;
mod request;
mod runtime;
mod session;
mod special;
mod topo;
mod typeattr;
mod typector;
mod typeinfo;
mod vcoll;
mod win;
