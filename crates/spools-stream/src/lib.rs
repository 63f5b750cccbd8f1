//! Spools streams: a distributed dataset out of the job (and into it) over K TCP links, in
//! the iWarp paper's format of Application Data Units, Transfer Units and Striping Units.
//!
//! The wire format is [`spools_proto::stream`]. This crate holds what a receiver needs and
//! what does not depend on the runtime, so that a plain Rust program can receive a job's
//! streams: [`Reassembler`], the sans-IO reassembly of one logical connection (SUs from K
//! links in any interleaving become whole ADUs, handed out in order, after the stream they
//! are sequenced behind, and in lock step within a synchronisation group).

mod error;
mod reassembly;

pub use error::ReassemblyError;
pub use reassembly::{Event, Limits, Reassembler};
