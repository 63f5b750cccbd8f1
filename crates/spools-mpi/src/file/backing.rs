//! What an open file's bytes live in: one plain file, or a striped set that every rank
//! reads and writes in place (the `spools_layout` hint, raid.rs). Every access, length,
//! resize and sync of an open file goes through here.

use std::fs::File;
use std::os::fd::{AsRawFd, RawFd};
use std::os::unix::fs::FileExt;
use std::path::Path;

use spools_io::file::Draft;

use crate::env::error::MpiError;
use crate::file::io_error;

/// An open file's storage.
#[derive(Debug)]
pub(crate) enum Backing {
    /// One file of the file system.
    Plain(File),
    /// A striped set's unit files (raid.rs).
    Set(Box<Draft>),
}

/// A striped set's error as MPI reports it (by the class of its cause).
pub(crate) fn set_error(e: &spools_io::FileError, call: &'static str, path: &Path) -> MpiError {
    MpiError::invalid(
        super::outcome::file_class(e),
        format!("{call}: the striped set {}: {e}", path.display()),
    )
}

impl Backing {
    /// The plain file, for the paths that work on one file (whole arrays, layout.rs).
    pub(crate) fn plain(&self) -> Option<&File> {
        match self {
            Backing::Plain(f) => Some(f),
            Backing::Set(_) => None,
        }
    }

    /// The striped set, if the file is one.
    pub(crate) fn set(&self) -> Option<&Draft> {
        match self {
            Backing::Plain(_) => None,
            Backing::Set(d) => Some(d),
        }
    }

    /// A descriptor every rank holds for atomic mode's advisory lock.
    pub(crate) fn lock_fd(&self) -> Option<RawFd> {
        match self {
            Backing::Plain(f) => Some(f.as_raw_fd()),
            Backing::Set(d) => d.lock_fd(),
        }
    }

    /// Writes all of `data` at `off`.
    ///
    /// # Errors
    /// The file system's error by its class (`MPI_ERR_NO_SPACE` for a full disk).
    pub(crate) fn write_at(
        &self,
        data: &[u8],
        off: u64,
        call: &'static str,
        path: &Path,
    ) -> Result<(), MpiError> {
        match self {
            Backing::Plain(f) => f
                .write_all_at(data, off)
                .map_err(|e| io_error(call, path, &e)),
            Backing::Set(d) => d.write_at(data, off).map_err(|e| set_error(&e, call, path)),
        }
    }

    /// Reads up to `out.len()` bytes at `off`, fewer only where the file ends; the bytes
    /// read.
    ///
    /// # Errors
    /// The file system's error; for a set, a block damaged beyond parity.
    pub(crate) fn read_at(
        &self,
        out: &mut [u8],
        off: u64,
        call: &'static str,
        path: &Path,
    ) -> Result<usize, MpiError> {
        match self {
            Backing::Plain(f) => {
                let mut got = 0usize;
                while got < out.len() {
                    match f.read_at(&mut out[got..], off + got as u64) {
                        Ok(0) => break,
                        Ok(n) => got += n,
                        Err(e) if e.kind() == std::io::ErrorKind::Interrupted => {}
                        Err(e) => return Err(io_error(call, path, &e)),
                    }
                }
                Ok(got)
            }
            Backing::Set(d) => d.read_at(out, off).map_err(|e| set_error(&e, call, path)),
        }
    }

    /// The file's length.
    ///
    /// # Errors
    /// The file system's error.
    pub(crate) fn len(&self, call: &'static str, path: &Path) -> Result<u64, MpiError> {
        match self {
            Backing::Plain(f) => f
                .metadata()
                .map(|m| m.len())
                .map_err(|e| io_error(call, path, &e)),
            Backing::Set(d) => d.len().map_err(|e| set_error(&e, call, path)),
        }
    }

    /// Cuts or extends the file to `n` bytes (one rank for the group).
    ///
    /// # Errors
    /// The file system's error.
    pub(crate) fn set_len(&self, n: u64, call: &'static str, path: &Path) -> Result<(), MpiError> {
        match self {
            Backing::Plain(f) => f.set_len(n).map_err(|e| io_error(call, path, &e)),
            Backing::Set(d) => d.set_len(n).map_err(|e| set_error(&e, call, path)),
        }
    }

    /// Makes the file's data durable (a set's become durable in the commit that follows
    /// every sync, raid.rs: nothing to do here).
    ///
    /// # Errors
    /// The file system's error.
    pub(crate) fn sync_data(&self, call: &'static str, path: &Path) -> Result<(), MpiError> {
        match self {
            Backing::Plain(f) => f.sync_data().map_err(|e| io_error(call, path, &e)),
            Backing::Set(_) => Ok(()),
        }
    }
}
