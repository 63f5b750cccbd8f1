//! Spools parallel I/O: moving a distributed dataset in one call, following a plan
//! `M1^-1 o M2` (see `spools-map`), between ranks ([`redistribute`]), into and out of
//! parallel files ([`mod@file`]), and between two parallel programs ([`pipe`]).
//!
//! One engine ([`exchange`]) executes every plan: it packs each peer's runs into transfer
//! units, moves them with tagged messages, checksums while copying, and scatters them on
//! arrival, with two transfer units in flight per peer so packing, moving and unpacking
//! overlap. Between ranks of one host, the destination copies the runs straight out of
//! the source's buffers instead (one copy: from the shared heap, or by `process_vm_readv`).

mod collective;
mod crc;
mod cursor;
mod error;
mod exchange;
pub mod file;
pub mod pipe;
mod redistribute;
mod settings;
pub mod stream;
mod untrusted;

pub use collective::agree_on_outcome;
pub use crc::crc32c;
pub use error::{
    Cause, ChunkDefect, ErrorKind, ExchangeError, FileError, FormatDefect, FrameError, Hdf5Error,
    NpyError, PipeError, PipeStep, PipeViolation, Side, StreamError, StreamRecvError, ZarrError,
};
#[doc(hidden)]
pub use exchange::bench_hooks;
pub use exchange::{exchange, ExchangeOptions, ExchangeStats, Owners};
pub use redistribute::{redistribute, redistribute_plan};
pub use settings::settings;
pub use untrusted::decode_untrusted;
