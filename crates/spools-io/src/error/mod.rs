//! Errors of parallel files, parallel pipes and streams; the exchange engine's, the kinds
//! and the causes are `spools-exchange`'s, re-exported.

mod file;
mod hdf5;
mod pipe;
mod stream;
mod stream_recv;
mod zarr;

pub use file::{FileError, FormatDefect, NpyError, SumsDefect};
pub use hdf5::Hdf5Error;
pub use pipe::{FrameError, PipeError, PipeStep, PipeViolation};
pub(crate) use spools_exchange::Told;
pub use spools_exchange::{Cause, ErrorKind, ExchangeError, Side};
pub use stream::StreamError;
pub use stream_recv::StreamRecvError;
pub use zarr::{ChunkDefect, ZarrError};
