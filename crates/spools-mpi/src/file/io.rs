//! The bytes of one access: file runs read or written with positioned I/O, under an
//! advisory lock of the whole file in atomic mode (`MPI_File_set_atomicity`: shared for
//! reads, exclusive for writes, between the processes that opened it).

use std::os::fd::AsRawFd;
use std::os::unix::fs::FileExt;

use crate::env::error::MpiError;
use crate::file::view::FileRun;
use crate::file::{io_error, FileObj};

/// Holds the file's advisory lock while it lives (atomic mode).
struct Flock<'a>(Option<&'a std::fs::File>);

impl<'a> Flock<'a> {
    fn take(f: &'a FileObj, exclusive: bool) -> Flock<'a> {
        if !f.atomic.load(std::sync::atomic::Ordering::Relaxed) {
            return Flock(None);
        }
        let op = if exclusive {
            libc::LOCK_EX
        } else {
            libc::LOCK_SH
        };
        loop {
            // SAFETY: a valid descriptor of an open file; flock only takes a lock.
            let rc = unsafe { libc::flock(f.file.as_raw_fd(), op) };
            if rc == 0 {
                return Flock(Some(&f.file));
            }
            // Interrupted: take it again. Any other failure (a file system without
            // locks) leaves the access unlocked, as in non-atomic mode.
            if std::io::Error::last_os_error().kind() != std::io::ErrorKind::Interrupted {
                return Flock(None);
            }
        }
    }
}

impl Drop for Flock<'_> {
    fn drop(&mut self) {
        if let Some(file) = self.0 {
            // SAFETY: as in `take`.
            unsafe { libc::flock(file.as_raw_fd(), libc::LOCK_UN) };
        }
    }
}

/// Writes `data` into `runs` (as many bytes as the runs hold, in order).
///
/// # Errors
/// The file system's error, with its class (`MPI_ERR_NO_SPACE` for a full disk).
pub(crate) fn write(
    f: &FileObj,
    runs: &[FileRun],
    data: &[u8],
    call: &'static str,
) -> Result<(), MpiError> {
    let _lock = Flock::take(f, true);
    let mut at = 0usize;
    for &(off, len) in runs {
        f.file
            .write_all_at(&data[at..at + len], off)
            .map_err(|e| io_error(call, &f.path, &e))?;
        at += len;
    }
    Ok(())
}

/// Reads `runs` into `out`, in order, up to the end of the file; the bytes read.
///
/// # Errors
/// The file system's error.
pub(crate) fn read(
    f: &FileObj,
    runs: &[FileRun],
    out: &mut [u8],
    call: &'static str,
) -> Result<usize, MpiError> {
    let _lock = Flock::take(f, false);
    let mut at = 0usize;
    for &(off, len) in runs {
        let mut got = 0usize;
        while got < len {
            match f
                .file
                .read_at(&mut out[at + got..at + len], off + got as u64)
            {
                Ok(0) => return Ok(at + got),
                Ok(n) => got += n,
                Err(e) if e.kind() == std::io::ErrorKind::Interrupted => {}
                Err(e) => return Err(io_error(call, &f.path, &e)),
            }
        }
        at += len;
    }
    Ok(at)
}
