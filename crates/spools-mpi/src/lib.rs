//! `libmpi_abi.so.1`: the MPI 5.0 standard ABI implemented over Spools' own layers, so
//! that a program built by any `mpicc_abi` (or mpi4py built with
//! `MPI4PY_BUILD_MPIABI=1`) runs on Spools unmodified: `spools run -n 4 -- ./prog`.
//!
//! Every function the ABI declares is exported (with its `PMPI_` name): those built here
//! work; the rest are generated stubs (`exports.rs`, by `gen/exports.py`) that fail with
//! `MPI_ERR_UNSUPPORTED_OPERATION` and a message naming the function, under the
//! communicator's error handler. docs/mpi.md lists what is built.
//!
//! Layout: a module per chapter of the standard: `p2p` (point-to-point and requests),
//! `coll` (collectives and reduction operators), `comm` (communicators, groups,
//! topologies, attributes), `datatype`, `file` (MPI-IO), `win` (one-sided), `env` (init
//! and sessions, errors, info); and what they share: `abi` (constants and types of the
//! standard), `handles` (handle tables), `runtime`, `convert` (handle <-> int), `out`,
//! `special` (`long double` and complex arithmetic), `removed` (MPI-1 calls MPI 3
//! removed), `exports` (generated).
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
mod coll;
mod comm;
mod convert;
mod datatype;
pub mod embed;
mod env;
mod exports;
mod file;
mod handles;
mod out;
mod p2p;
mod removed;
mod runtime;
mod special;
mod win;
