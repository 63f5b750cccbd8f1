//! Spools parallel I/O: moving a distributed dataset in one call, following a plan
//! `M1^-1 o M2` (see `spools-map`), between ranks ([`redistribute`]), into and out of
//! parallel files ([`mod@file`]), and between two parallel programs ([`pipe`]).
//!
//! One engine ([`exchange`]) executes every plan: it packs each peer's runs into transfer
//! units, moves them with tagged messages, checksums while copying, and scatters them on
//! arrival, with two transfer units in flight per peer so packing, moving and unpacking
//! overlap.

mod crc;
mod cursor;
mod error;
mod exchange;
pub mod file;
pub mod pipe;
mod redistribute;

pub use crc::crc32c;
pub use error::{ExchangeError, FileError, PipeError, Side};
pub use exchange::{exchange, ExchangeOptions, ExchangeStats, Owners};
pub use redistribute::{redistribute, redistribute_plan};

/// Feeds untrusted bytes to every decoder of the I/O layer (pipe hellos and frames, `.npy`
/// headers, manifests) and returns how many accepted them. For fuzzing and garbage tests:
/// it must never panic, hang, or allocate beyond the input's size.
#[doc(hidden)]
pub fn decode_untrusted(data: &[u8]) -> usize {
    let mut ok = 0;
    ok += usize::from(pipe::decode_any(data).is_ok());
    ok += usize::from(file::parse_npy_header(data).is_ok());
    ok += usize::from(file::Manifest::parse(std::path::Path::new("fuzz"), data).is_ok());
    ok
}
