//! Errors of the exchange engine, parallel files, parallel pipes and streams.

mod exchange;
mod file;
mod hdf5;
mod pipe;
mod side;
mod stream;
mod stream_recv;
mod zarr;

pub use exchange::ExchangeError;
pub use file::{FileError, FormatDefect, NpyError};
pub use hdf5::Hdf5Error;
pub use pipe::{FrameError, PipeError, PipeStep, PipeViolation};
pub use side::Side;
pub use stream::StreamError;
pub use stream_recv::StreamRecvError;
pub use zarr::{ChunkDefect, ZarrError};
