//! Spools parallel I/O: moving a distributed dataset in one call, following a plan
//! `M1^-1 o M2` (see `spools-map`), between ranks ([`redistribute`]), into and out of
//! parallel files ([`mod@file`]), between two parallel programs ([`pipe`]), and out of and
//! into the job ([`stream`]).
//!
//! One engine, `spools-exchange` (re-exported here: [`exchange`], [`redistribute`],
//! [`ExchangeOptions`], [`agree_on_outcome`], ...), executes every plan: it packs each
//! peer's runs into transfer units, moves them with tagged messages, checksums while
//! copying, and scatters them on arrival, with two transfer units in flight per peer so
//! packing, moving and unpacking overlap. Between ranks of one host, the destination copies
//! the runs straight out of the source's buffers instead (one copy: from the shared heap,
//! or by `process_vm_readv`). The devices here only say what goes where.

mod error;
pub mod file;
pub mod pipe;
mod settings;
pub mod stream;
mod untrusted;

pub use error::{
    Cause, ChunkDefect, ErrorKind, ExchangeError, FileError, FormatDefect, FrameError, Hdf5Error,
    NpyError, PipeError, PipeStep, PipeViolation, Side, StreamError, StreamRecvError, ZarrError,
};
pub use settings::settings;
pub use spools_exchange::{
    agree_on_outcome, crc32c, exchange, message_chain, redistribute, redistribute_plan,
    ExchangeOptions, ExchangeStats, Owners,
};
pub use untrusted::decode_untrusted;
