//! Bounds-checked views of a run inside a unit's buffer.

use crate::error::{ExchangeError, Side};

/// `buf[at..at + len]`, or the error naming the unit whose buffer is too small.
pub(super) fn slice(
    side: Side,
    unit: u64,
    buf: &[u8],
    at: u64,
    len: u64,
) -> Result<&[u8], ExchangeError> {
    usize::try_from(at)
        .ok()
        .zip(usize::try_from(at + len).ok())
        .and_then(|(a, b)| buf.get(a..b))
        .ok_or(ExchangeError::BufferSize {
            side,
            unit,
            need: at + len,
            got: buf.len() as u64,
        })
}

/// `&mut buf[at..at + len]`, or the error naming the unit whose buffer is too small.
pub(super) fn slice_mut(
    side: Side,
    unit: u64,
    buf: &mut [u8],
    at: u64,
    len: u64,
) -> Result<&mut [u8], ExchangeError> {
    let got = buf.len() as u64;
    usize::try_from(at)
        .ok()
        .zip(usize::try_from(at + len).ok())
        .and_then(|(a, b)| buf.get_mut(a..b))
        .ok_or(ExchangeError::BufferSize {
            side,
            unit,
            need: at + len,
            got,
        })
}
