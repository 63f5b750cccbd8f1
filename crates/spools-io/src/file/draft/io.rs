//! Positioned reads shared by the set's files.

use std::fs::File;
use std::os::unix::fs::FileExt;
use std::path::Path;

use crate::error::FileError;

/// Bytes of stripe rows one rank holds at once while it fills, reads or commits a version.
pub(super) const BATCH: u64 = 4 << 20;

/// Reads `out.len()` bytes at `off`, fewer where the file ends.
pub(super) fn read_full(
    f: &File,
    path: &Path,
    out: &mut [u8],
    off: u64,
) -> Result<usize, FileError> {
    let mut got = 0usize;
    while got < out.len() {
        match f.read_at(&mut out[got..], off + got as u64) {
            Ok(0) => break,
            Ok(n) => got += n,
            Err(e) if e.kind() == std::io::ErrorKind::Interrupted => {}
            Err(e) => return Err(FileError::io("read", path, e)),
        }
    }
    Ok(got)
}
