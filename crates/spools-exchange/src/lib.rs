//! Spools' exchange engine: moves a distributed dataset between the ranks' buffers in one
//! call, following a plan `M1^-1 o M2` (see `spools-map`). It is the one engine every
//! transfer of the I/O layer runs on: redistribution ([`redistribute`]), the reshuffles of
//! parallel files, pipes and streams (`spools-io`).
//!
//! [`exchange`] packs each peer's runs into transfer units, moves them with tagged
//! messages, checksums while copying ([`crc`]), and scatters them on arrival, with two
//! transfer units in flight per peer so packing, moving and unpacking overlap. Between
//! ranks of one host, the destination copies the runs straight out of the source's buffers
//! instead (one copy: from the shared heap, or by `process_vm_readv`). [`cursor`] hands a
//! pair's runs out a frame at a time, for the pipes' sockets.
//!
//! Every collective step ends in [`agree_on_outcome`]: every rank learns whether any
//! failed, and the first failing rank's [`Cause`] (its [`ErrorKind`] and message).

#[doc(hidden)]
pub mod bench_hooks;
mod bounds;
mod cma;
pub mod collective;
pub mod crc;
pub mod cursor;
mod descriptor;
mod digest;
mod engine;
mod error;
mod local;
mod options;
mod owners;
mod peer_runs;
mod pieces;
mod pool;
mod pull;
mod redistribute;
mod short_copy;

pub use collective::{agree_on_call, agree_on_outcome};
pub use crc::crc32c;
pub use digest::Digest;
#[doc(hidden)]
pub use engine::decode_any;
pub use engine::exchange;
pub use error::{message_chain, Cause, ErrorKind, ExchangeError, Side, Told};
pub use local::copy_local;
pub use options::{ExchangeOptions, ExchangeStats};
pub use owners::Owners;
pub use redistribute::{redistribute, redistribute_plan};
