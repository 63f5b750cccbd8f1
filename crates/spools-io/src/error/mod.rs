//! Errors of the exchange engine, parallel files and parallel pipes.

mod exchange;
mod file;
mod pipe;
mod side;

pub use exchange::ExchangeError;
pub use file::{FileError, FormatDefect, NpyError};
pub use pipe::{FrameError, PipeError, PipeStep, PipeViolation};
pub use side::Side;
