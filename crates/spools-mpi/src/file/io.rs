//! The bytes of one access: file runs read or written with positioned I/O, under an
//! advisory lock of the whole file in atomic mode (`MPI_File_set_atomicity`: shared for
//! reads, exclusive for writes, between the processes that opened it).

use std::os::fd::RawFd;

use crate::env::error::MpiError;
use crate::file::view::FileRun;
use crate::file::FileObj;

/// Holds the file's advisory lock while it lives (atomic mode).
struct Flock<'a>(Option<RawFd>, std::marker::PhantomData<&'a FileObj>);

impl<'a> Flock<'a> {
    fn take(f: &'a FileObj, exclusive: bool) -> Flock<'a> {
        // Atomic mode looked at first: an access outside it asks nothing of the file.
        let fd = match f.atomic.load(std::sync::atomic::Ordering::Relaxed) {
            true => f.file.lock_fd(),
            false => None,
        };
        let Some(fd) = fd else {
            return Flock(None, std::marker::PhantomData);
        };
        let op = if exclusive {
            libc::LOCK_EX
        } else {
            libc::LOCK_SH
        };
        loop {
            // SAFETY: a descriptor of a file the open file holds for its life (`'a`);
            // flock only takes a lock.
            let rc = unsafe { libc::flock(fd, op) };
            if rc == 0 {
                return Flock(Some(fd), std::marker::PhantomData);
            }
            // Interrupted: take it again. Any other failure (a file system without
            // locks) leaves the access unlocked, as in non-atomic mode.
            if std::io::Error::last_os_error().kind() != std::io::ErrorKind::Interrupted {
                return Flock(None, std::marker::PhantomData);
            }
        }
    }
}

impl Drop for Flock<'_> {
    fn drop(&mut self) {
        if let Some(fd) = self.0 {
            // SAFETY: as in `take`.
            unsafe { libc::flock(fd, libc::LOCK_UN) };
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
        f.file.write_at(&data[at..at + len], off, call, &f.path)?;
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
        let got = f.file.read_at(&mut out[at..at + len], off, call, &f.path)?;
        if got < len {
            return Ok(at + got);
        }
        at += len;
    }
    Ok(at)
}
