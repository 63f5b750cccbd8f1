//! MPI-IO (`MPI_File_*`): the plain file an MPI-IO program expects, reached through each
//! rank's view (`view.rs`: the mapping of its data onto the file's bytes).
//!
//! - `open.rs`: opening (collective; rank 0 creates), closing, deleting, sizes, sync,
//!   atomicity, amode, group, info and error handlers.
//! - `view.rs`: views; `io.rs`: the byte runs of an access read or written with
//!   positioned I/O, one call per run, in the file's `backing.rs` (a plain file or a
//!   striped set's unit files); `access.rs`: every read and write call
//!   (explicit offsets, individual and shared pointers, collective, ordered,
//!   non-blocking, split); `pointer.rs`: the shared file pointer, a word in shared
//!   memory; `twophase.rs`: collective accesses of short runs through aggregators;
//!   `deferred.rs`: non-blocking collective accesses, moved at once and their outcome
//!   agreed by a non-blocking collective;
//!   `position.rs`: views and pointers (`set_view`, `seek`, ...); `raid.rs`: the
//!   `spools_layout` hint (the file kept as a RAID-5 or RAID-0 set whose unit files every
//!   rank reads and writes in place, a new version committed at sync and close).
//!
//! Every access is done when its call returns (independent non-blocking ones give a
//! complete request); a non-blocking collective one has moved this rank's bytes too,
//! and its request completes when the group has agreed on the outcome, which the
//! progress engine drives in any wait of the rank (`deferred.rs`).
//! Collective calls agree on their outcome (`outcome.rs`), so that an error on one
//! rank (a full disk) is an error on every rank, in the failing rank's MPI class.

pub(crate) mod access;
mod backing;
pub(crate) mod datarep;
pub(crate) mod deferred;
mod io;
mod layout;
pub(crate) mod open;
mod outcome;
mod place;
mod pointer;
pub(crate) mod position;
mod queue;
mod raid;
mod rounds;
mod transfer;
mod twophase;
mod view;

pub(crate) use pointer::release_pages;

use std::ffi::c_int;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, PoisonError};

use spools::Communicator;

use crate::abi::*;
use crate::env::error::{code_of, MpiError, ERRHANDLERS};
use crate::handles::{Kind, Table};
use crate::runtime::rt;

pub(crate) use outcome::{agree_on, agree_on_min, agree_on_range, io_class, io_error};
pub(crate) use view::View;

/// An open file.
pub(crate) struct FileObj {
    pub(crate) file: backing::Backing,
    pub(crate) path: std::path::PathBuf,
    /// A private duplicate of the communicator the file was opened on.
    pub(crate) comm: Communicator,
    /// The file's group, as groups name processes (labels: `comm/worlds.rs`).
    pub(crate) labels: Vec<u32>,
    pub(crate) amode: c_int,
    /// The view, shared by the accesses that use it (set whole by `MPI_File_set_view`).
    pub(crate) view: Mutex<Arc<View>>,
    /// The individual file pointer, in etypes of the view.
    pub(crate) pos: Mutex<u64>,
    /// The shared file pointer (ranks of one host).
    pub(crate) shared: Option<pointer::SharedPointer>,
    pub(crate) atomic: AtomicBool,
    pub(crate) info: Mutex<Vec<(String, String)>>,
    /// The collective buffering hints of `info` as numbers, for reads and for writes
    /// ([`twophase::hints`]), once looked up (cleared when `info` changes).
    pub(crate) cb_hints: Mutex<Option<[[u64; 4]; 2]>>,
    pub(crate) errhandler: AtomicUsize,
    /// The status a split collective's begin left for its end.
    pub(crate) split: Mutex<Option<MPI_Status>>,
    /// Non-blocking collective accesses whose outcome is not settled yet, oldest first.
    pub(crate) deferred: queue::Queue,
}

pub(crate) static FILES: Table<FileObj> = Table::new(Kind::File);

/// The error handler of files not yet opened (`MPI_FILE_NULL`'s): `MPI_ERRORS_RETURN`
/// unless the program sets another.
pub(crate) static DEFAULT_HANDLER: AtomicUsize = AtomicUsize::new(MPI_ERRORS_RETURN);

/// The file of handle `h`.
///
/// # Errors
/// `MPI_ERR_FILE` for a handle that is not an open file.
pub(crate) fn file(h: MPI_File, call: &'static str) -> Result<Arc<FileObj>, MpiError> {
    rt(call)?;
    FILES.get(h).ok_or(MpiError::Handle {
        class: MPI_ERR_FILE,
        what: "file",
        handle: h,
    })
}

/// Reports `e` on file `h` under its error handler (`MPI_FILE_NULL`'s for an invalid
/// file or one not opened).
pub(crate) fn raise_file(h: MPI_File, e: &MpiError) -> c_int {
    let handler = match FILES.get(h) {
        Some(f) => f.errhandler.load(Ordering::Relaxed),
        None => DEFAULT_HANDLER.load(Ordering::Relaxed),
    };
    let mut code = code_of(e);
    match handler {
        MPI_ERRORS_RETURN => code,
        MPI_ERRORS_ARE_FATAL | MPI_ERRORS_ABORT => crate::runtime::fatal(&e.to_string(), e.class()),
        hd => match ERRHANDLERS.get(hd) {
            Some(f) => {
                let mut fh = h;
                // SAFETY: a user handler of the standard's file type (`fn(MPI_File *,
                // int *, ...)`, a handle like a communicator's); pointers to locals.
                unsafe { f(&mut fh, &mut code) };
                code
            }
            None => code,
        },
    }
}

/// The result of a call whose errors go to file `h`.
pub(crate) fn on_file(h: MPI_File, r: Result<(), MpiError>) -> c_int {
    match r {
        Ok(()) => MPI_SUCCESS,
        Err(e) => raise_file(h, &e),
    }
}

impl FileObj {
    /// The shared file pointer.
    ///
    /// # Errors
    /// `MPI_ERR_UNSUPPORTED_OPERATION` for a group spanning hosts.
    pub(crate) fn shared_pointer(
        &self,
        call: &'static str,
    ) -> Result<&pointer::SharedPointer, MpiError> {
        self.shared.as_ref().ok_or_else(|| {
            MpiError::invalid(
                MPI_ERR_UNSUPPORTED_OPERATION,
                format!("{call}: the shared file pointer is built for groups within one host; this file's group spans hosts"),
            )
        })
    }

    /// The view in effect.
    pub(crate) fn view(&self) -> Arc<View> {
        self.view
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .clone()
    }

    /// Whether the file was opened for reading (`read`) or writing.
    ///
    /// # Errors
    /// `MPI_ERR_READ_ONLY` for a write to a read-only file, `MPI_ERR_ACCESS` for a
    /// read of a write-only one.
    pub(crate) fn may(&self, read: bool, call: &'static str) -> Result<(), MpiError> {
        if read && self.amode & MPI_MODE_WRONLY != 0 {
            return Err(MpiError::invalid(
                MPI_ERR_ACCESS,
                format!("{call}: the file was opened write-only"),
            ));
        }
        if !read && self.amode & MPI_MODE_RDONLY != 0 {
            return Err(MpiError::invalid(
                MPI_ERR_READ_ONLY,
                format!("{call}: the file was opened read-only"),
            ));
        }
        Ok(())
    }

    /// Checks that every rank of the group passed the same `values` (arguments MPI asks
    /// to be the same everywhere: `what`, as the message names them). Collective, one
    /// allgather: every rank sees every rank's values, so every rank fails where they
    /// differ.
    ///
    /// # Errors
    /// `MPI_ERR_NOT_SAME` naming this rank's values and another's, where they differ.
    pub(crate) fn same_everywhere(
        &self,
        values: &[i64],
        what: &str,
        call: &'static str,
    ) -> Result<(), MpiError> {
        let mine: Vec<u8> = values.iter().flat_map(|v| v.to_le_bytes()).collect();
        let all = self.comm.allgather_bytes(&mine)?;
        if let Some(other) = all.iter().find(|b| **b != mine) {
            let o: Vec<i64> = other
                .chunks(8)
                .map(|c| i64::from_le_bytes(c.try_into().unwrap_or_default()))
                .collect();
            let show = |v: &[i64]| v.iter().map(i64::to_string).collect::<Vec<_>>().join(", ");
            return Err(MpiError::invalid(
                MPI_ERR_NOT_SAME,
                format!(
                    "{call}: the ranks passed different {what} ({} here, {} on another rank)",
                    show(values),
                    show(&o)
                ),
            ));
        }
        Ok(())
    }

    /// Every rank's outcome of a collective call: [`agree_on`] the file's group.
    ///
    /// # Errors
    /// As [`agree_on`].
    pub(crate) fn agree<T>(
        &self,
        r: Result<T, MpiError>,
        call: &'static str,
    ) -> Result<T, MpiError> {
        agree_on(&self.comm, r, call)
    }

    /// [`agree`](Self::agree) with the least `word` of every rank folded in
    /// ([`agree_on_min`]).
    ///
    /// # Errors
    /// As [`agree_on`].
    pub(crate) fn agree_min<T>(
        &self,
        r: Result<T, MpiError>,
        word: u32,
        call: &'static str,
    ) -> Result<(T, u32), MpiError> {
        agree_on_min(&self.comm, r, word, call)
    }
}
