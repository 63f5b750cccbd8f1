//! Opening and closing files and what an open file carries: `MPI_File_open` (collective:
//! rank 0 creates, then every rank opens; with the `spools_layout` hint, a striped set
//! opened in place, raid.rs), `close`, `delete`, `set_size`,
//! `preallocate`, `get_size`, `sync`, atomicity, amode, group, info and error
//! handlers.

use std::ffi::{c_char, c_int, c_void, CStr};
use std::os::fd::AsRawFd;
use std::os::unix::fs::OpenOptionsExt;
use std::path::Path;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{Mutex, PoisonError};

use crate::abi::*;
use crate::comm::comm;
use crate::env::error::{valid_errhandler, MpiError, ERRHANDLERS};
use crate::file::backing::Backing;
use crate::file::pointer::SharedPointer;
use crate::file::raid;
use crate::file::{file, io_error, on_file, raise_file, FileObj, View, DEFAULT_HANDLER, FILES};
use crate::out::out;
use spools::Communicator;

/// A file's communicator runs this many collectives through the messages before it sets
/// up a shared-memory segment (`Communicator::defer_shared_memory`): an open, a few
/// accesses and a close (about 6, 2 and 3 collectives) would pay the segment's set-up
/// and unmapping (about 40 µs at 2 ranks) for a saving of under 1 µs a collective.
const FILE_COLLECTIVES_BEFORE_SEGMENT: u32 = 32;

/// Checks an amode as MPI defines it.
fn check_amode(amode: c_int, call: &'static str) -> Result<(), MpiError> {
    let access = [MPI_MODE_RDONLY, MPI_MODE_WRONLY, MPI_MODE_RDWR]
        .iter()
        .filter(|&&m| amode & m != 0)
        .count();
    let bad =
        |why: &str| MpiError::invalid(MPI_ERR_AMODE, format!("{call}: amode {amode:#x}: {why}"));
    if access != 1 {
        return Err(bad(
            "exactly one of MPI_MODE_RDONLY, MPI_MODE_WRONLY and MPI_MODE_RDWR",
        ));
    }
    if amode & MPI_MODE_RDONLY != 0 && amode & (MPI_MODE_CREATE | MPI_MODE_EXCL) != 0 {
        return Err(bad("MPI_MODE_RDONLY with MPI_MODE_CREATE or MPI_MODE_EXCL"));
    }
    if amode & MPI_MODE_RDWR != 0 && amode & MPI_MODE_SEQUENTIAL != 0 {
        return Err(bad("MPI_MODE_RDWR with MPI_MODE_SEQUENTIAL"));
    }
    Ok(())
}

/// The path of a file name (a `prefix:` of ROMIO's, such as `ufs:`, is dropped).
fn path_of(name: *const c_char, call: &'static str) -> Result<std::path::PathBuf, MpiError> {
    if name.is_null() {
        return Err(MpiError::invalid(
            MPI_ERR_BAD_FILE,
            format!("{call}: NULL file name"),
        ));
    }
    // SAFETY: a NUL-terminated string (the caller's contract).
    let s = unsafe { CStr::from_ptr(name) }
        .to_string_lossy()
        .into_owned();
    let s = match s.split_once(':') {
        Some(("ufs" | "nfs" | "lustre" | "gpfs" | "pvfs2" | "posix" | "file", rest)) => {
            rest.to_string()
        }
        _ => s,
    };
    if s.is_empty() {
        return Err(MpiError::invalid(
            MPI_ERR_BAD_FILE,
            format!("{call}: empty file name"),
        ));
    }
    Ok(s.into())
}

fn options(amode: c_int, create: bool) -> std::fs::OpenOptions {
    let mut o = std::fs::OpenOptions::new();
    o.read(amode & MPI_MODE_WRONLY == 0)
        .write(amode & MPI_MODE_RDONLY == 0)
        .mode(0o644);
    if create {
        if amode & MPI_MODE_EXCL != 0 {
            o.create_new(true);
        } else {
            o.create(true);
        }
    }
    o
}

/// Opens the plain file at `path` on every rank of `wc` (collective): rank 0 creates it
/// (so that `MPI_MODE_EXCL` fails once, for everyone), the others open what it made.
///
/// # Errors
/// On every rank, in the class of rank 0's failure or the first rank that could not open
/// the file.
fn open_plain(
    wc: &Communicator,
    path: &Path,
    amode: c_int,
    call: &'static str,
) -> Result<std::fs::File, MpiError> {
    let first = if wc.rank() == 0 {
        let f = options(amode, amode & MPI_MODE_CREATE != 0).open(path);
        // The data are about to change: an old checksum sidecar would be stale (a new
        // one is written at close with the `spools_checksums` hint).
        if f.is_ok() && amode & MPI_MODE_RDONLY == 0 {
            let _ = std::fs::remove_file(spools_io::file::sidecar_path(path));
        }
        f
    } else {
        Err(std::io::Error::other("not opened yet"))
    };
    let verdict = match &first {
        Err(e) if wc.rank() == 0 => format!("{}\0{}", super::io_class(e), e).into_bytes(),
        _ => Vec::new(),
    };
    let verdict = wc.bcast_bytes(0, &verdict)?;
    if !verdict.is_empty() {
        let s = String::from_utf8_lossy(&verdict);
        let (class, msg) = s.split_once('\0').unwrap_or(("", &s));
        return Err(MpiError::invalid(
            class.parse().unwrap_or(MPI_ERR_IO),
            format!("{call}: {}: {msg}", path.display()),
        ));
    }
    let opened = match first {
        Ok(f) => Ok(f),
        Err(_) => options(amode, false).open(path),
    }
    .map_err(|e| io_error(call, path, &e));
    // All have the file or all fail, in the class of the first rank that could not open
    // it.
    super::agree_on(wc, opened, call)
}

/// `MPI_File_open` (collective).
#[no_mangle]
pub unsafe extern "C" fn MPI_File_open(
    comm_h: MPI_Comm,
    filename: *const c_char,
    amode: c_int,
    info: MPI_Info,
    fh: *mut MPI_File,
) -> c_int {
    let call = "MPI_File_open";
    let r = (|| {
        crate::runtime::rt(call)?;
        let c = comm(comm_h, call)?;
        if c.inter.is_some() {
            return Err(MpiError::invalid(
                MPI_ERR_COMM,
                format!("{call}: an intercommunicator cannot open a file"),
            ));
        }
        // The arguments are checked on every rank, and agreed once the group has its
        // communicator, so that a rank whose arguments fail leaves with the others,
        // every rank in its class.
        let checked = check_amode(amode, call).and_then(|()| {
            if fh.is_null() {
                return Err(MpiError::invalid(
                    MPI_ERR_ARG,
                    format!("{call}: NULL file handle"),
                ));
            }
            let labels = c.ctx.labels_of(&crate::comm::group::members(&c)?);
            let world = crate::comm::world_of(&c.ctx, call)?;
            Ok((
                path_of(filename, call)?,
                crate::env::info::entries(info)?,
                (labels, world),
            ))
        });
        let wc = c.comm.dup()?;
        wc.defer_shared_memory(FILE_COLLECTIVES_BEFORE_SEGMENT);
        // The same amode on every rank, as MPI asks (a rank that differs would take other
        // paths through later collective calls): found in the first agreement, before
        // rank 0 touches the file system, as ROMIO does.
        let ((path, info_entries, (labels, world)), [lo, hi]) =
            super::agree_on_range(&wc, checked, amode as u32, call)?;
        if lo != hi {
            return Err(MpiError::invalid(
                MPI_ERR_NOT_SAME,
                format!("{call}: the ranks passed different amodes ({amode:#x} here; from {lo:#x} to {hi:#x})"),
            ));
        }
        // With the `spools_layout` hint every rank reads and writes a striped set in place
        // (raid.rs).
        let striping = raid::agree_hint(&wc, &info_entries, call)?;
        let f = match &striping {
            Some(striping) => {
                Backing::Set(Box::new(raid::open(&wc, &path, striping, amode, call)?))
            }
            None => Backing::Plain(open_plain(&wc, &path, amode, call)?),
        };
        let size = f.len(call, &path).unwrap_or(0);
        let start = if amode & MPI_MODE_APPEND != 0 {
            size
        } else {
            0
        };
        let shared = SharedPointer::new(&world, &wc, start, call);
        let group = wc.clone();
        // The file in the table on every rank, or on none (a rank without it would leave
        // the others waiting in their next collective call on it): one agreement on its
        // shared pointer and its place in the table.
        let made = shared.and_then(|shared| {
            let obj = FileObj {
                file: f,
                path,
                comm: wc,
                labels,
                amode,
                view: Mutex::new(std::sync::Arc::new(View::bytes()?)),
                pos: Mutex::new(start),
                shared,
                atomic: AtomicBool::new(false),
                info: Mutex::new(info_entries),
                cb_hints: Mutex::new(None),
                errhandler: AtomicUsize::new(DEFAULT_HANDLER.load(Ordering::Relaxed)),
                split: Mutex::new(None),
                deferred: Default::default(),
            };
            FILES
                .insert(obj)
                .ok_or_else(|| MpiError::invalid(MPI_ERR_NO_MEM, "too many open files"))
        });
        let mine = made.as_ref().ok().copied();
        let h = match super::agree_on(&group, made, call) {
            Ok(h) => h,
            Err(e) => {
                if let Some(h) = mine {
                    FILES.remove(h);
                }
                return Err(e);
            }
        };
        // SAFETY: the caller's contract.
        unsafe { out(fh, h, call) }
    })();
    on_file(MPI_FILE_NULL, r)
}

/// `MPI_File_close` (collective): deletes the file when opened with
/// `MPI_MODE_DELETE_ON_CLOSE`.
#[no_mangle]
pub unsafe extern "C" fn MPI_File_close(fh: *mut MPI_File) -> c_int {
    let call = "MPI_File_close";
    if fh.is_null() {
        return on_file(
            MPI_FILE_NULL,
            Err(MpiError::invalid(
                MPI_ERR_ARG,
                format!("{call}: NULL file handle"),
            )),
        );
    }
    // SAFETY: non-NULL (the caller's contract).
    let h = unsafe { *fh };
    let r = (|| {
        let f = file(h, call)?;
        // Non-blocking collective accesses settled first (deferred.rs).
        super::deferred::flush(&f);
        // Rank 0's amode and hint decide for the group (MPI asks the same amode of every
        // rank, but hints may differ; a rank that differs must not leave the others in a
        // collective step it skips); a set's manifest carries its own checksums. One
        // allgather tells every rank rank 0's and is the close's barrier: every rank has
        // finished its accesses once it is through, so a file deleted on close goes
        // then, where nothing else follows.
        let mine = [
            u8::from(f.amode & MPI_MODE_RDONLY == 0 && f.amode & MPI_MODE_DELETE_ON_CLOSE == 0),
            u8::from(super::twophase::hint(&f, "spools_checksums").as_deref() == Some("crc32c")),
        ];
        let mut all = vec![0u8; mine.len() * f.comm.size() as usize];
        f.comm.allgather(&mine, &mut all)?;
        let keep = all[0] == 1;
        let set = f.file.set();
        // A set whose reopen after a sync failed has nothing to commit (the failure was
        // the sync's).
        if let Some(set) = set.filter(|s| keep && s.writable()) {
            raid::commit(&f.comm, set, false, &f.path, call)?;
        }
        let sums = keep && set.is_none() && all[1] == 1;
        if sums {
            let r = spools_io::file::write_sidecar(&f.comm, &f.path).map_err(|e| {
                MpiError::invalid(MPI_ERR_IO, format!("{call}: the checksum sidecar: {e}"))
            });
            f.agree(r, call)?;
        }
        if sums {
            // The sidecar ends on every rank before rank 0 may remove the file.
            f.comm.barrier()?;
        }
        if f.comm.rank() == 0 && f.amode & MPI_MODE_DELETE_ON_CLOSE != 0 {
            match set {
                Some(set) => {
                    set.discard();
                    // A set, or the plain file the path still is (opened with the hint
                    // and never committed, or committed empty).
                    if !matches!(raid::remove_set(&f.path, call), Ok(true)) {
                        let _ = std::fs::remove_file(&f.path);
                    }
                }
                None => {
                    let _ = std::fs::remove_file(&f.path);
                }
            }
        }
        FILES.remove(h);
        Ok(())
    })();
    let rc = on_file(h, r);
    if rc == MPI_SUCCESS {
        // SAFETY: as above.
        unsafe { *fh = MPI_FILE_NULL };
    }
    rc
}

/// `MPI_File_delete`.
#[no_mangle]
pub unsafe extern "C" fn MPI_File_delete(filename: *const c_char, info: MPI_Info) -> c_int {
    let call = "MPI_File_delete";
    let r = (|| {
        crate::runtime::rt(call)?;
        crate::env::info::entries(info)?;
        let path = path_of(filename, call)?;
        // A striped set (the `spools_layout` hint's) goes with its unit files.
        if raid::remove_set(&path, call)? {
            return Ok(());
        }
        std::fs::remove_file(&path).map_err(|e| io_error(call, &path, &e))
    })();
    on_file(MPI_FILE_NULL, r)
}

/// Checks that every rank passed the same size (collective: no rank changes the file
/// before every rank has called, as ROMIO's check does too).
///
/// # Errors
/// `MPI_ERR_NOT_SAME` naming the sizes when they differ; `MPI_ERR_ARG` for a negative
/// size.
fn same_size(f: &FileObj, size: MPI_Offset, call: &'static str) -> Result<u64, MpiError> {
    f.same_everywhere(&[size], "sizes", call)?;
    u64::try_from(size)
        .map_err(|_| MpiError::invalid(MPI_ERR_ARG, format!("{call}: size {size} is negative")))
}

/// `MPI_File_set_size` (collective): truncates or extends the file.
#[no_mangle]
pub unsafe extern "C" fn MPI_File_set_size(fh: MPI_File, size: MPI_Offset) -> c_int {
    let call = "MPI_File_set_size";
    let r = (|| {
        let f = file(fh, call)?;
        // Non-blocking collective accesses settled first (deferred.rs).
        super::deferred::flush(&f);
        // Checked after every rank called (the same size everywhere), so that no rank
        // leaves while the others wait.
        let n = same_size(&f, size, call)?;
        // Agreed, as the change is: a rank that may not write fails every rank.
        let mine = f.may(false, call).and_then(|()| {
            if f.comm.rank() == 0 {
                f.file.set_len(n, call, &f.path)
            } else {
                Ok(())
            }
        });
        f.agree(mine, call)
    })();
    on_file(fh, r)
}

/// `MPI_File_preallocate` (collective): makes sure `size` bytes are allocated (the file
/// grows to `size` if shorter).
#[no_mangle]
pub unsafe extern "C" fn MPI_File_preallocate(fh: MPI_File, size: MPI_Offset) -> c_int {
    let call = "MPI_File_preallocate";
    let r = (|| {
        let f = file(fh, call)?;
        // Non-blocking collective accesses settled first (deferred.rs).
        super::deferred::flush(&f);
        // Checked after every rank called (the same size everywhere), so that no rank
        // leaves while the others wait.
        let n = same_size(&f, size, call)?;
        // Agreed, as the change is: a rank that may not write fails every rank.
        let may = f.may(false, call);
        let mine = if may.is_err() {
            may
        } else if f.comm.rank() == 0 && n > 0 {
            // A striped set is extended (its unit files' blocks are allocated as written).
            let rc = match f.file.plain() {
                // SAFETY: a valid descriptor; posix_fallocate only allocates.
                Some(file) => unsafe {
                    libc::posix_fallocate(file.as_raw_fd(), 0, n as libc::off_t)
                },
                None => libc::EOPNOTSUPP,
            };
            match rc {
                0 => Ok(()),
                // A file system without fallocate: extend the file instead.
                libc::EOPNOTSUPP | libc::EINVAL => {
                    let len = f.file.len(call, &f.path).unwrap_or(0);
                    if len < n {
                        f.file.set_len(n, call, &f.path)
                    } else {
                        Ok(())
                    }
                }
                e => Err(io_error(
                    call,
                    &f.path,
                    &std::io::Error::from_raw_os_error(e),
                )),
            }
        } else {
            Ok(())
        };
        f.agree(mine, call)
    })();
    on_file(fh, r)
}

/// `MPI_File_get_size`.
#[no_mangle]
pub unsafe extern "C" fn MPI_File_get_size(fh: MPI_File, size: *mut MPI_Offset) -> c_int {
    let call = "MPI_File_get_size";
    let r = (|| {
        let f = file(fh, call)?;
        let n = f.file.len(call, &f.path)?;
        // SAFETY: the caller's contract.
        unsafe { out(size, n as MPI_Offset, call) }
    })();
    on_file(fh, r)
}

/// `MPI_File_sync` (collective): the file's data reach the storage device.
#[no_mangle]
pub unsafe extern "C" fn MPI_File_sync(fh: MPI_File) -> c_int {
    let call = "MPI_File_sync";
    let r = (|| {
        let f = file(fh, call)?;
        // Non-blocking collective accesses settled first (deferred.rs).
        super::deferred::flush(&f);
        let mine = if f.amode & MPI_MODE_RDONLY != 0 {
            Ok(())
        } else {
            f.file.sync_data(call, &f.path)
        };
        f.agree(mine, call)?;
        // A set commits a new version: what the group wrote is durable in it.
        match f.file.set().filter(|_| f.amode & MPI_MODE_RDONLY == 0) {
            Some(set) => raid::commit(&f.comm, set, true, &f.path, call),
            None => Ok(()),
        }
    })();
    on_file(fh, r)
}

/// `MPI_File_set_atomicity` (collective).
#[no_mangle]
pub unsafe extern "C" fn MPI_File_set_atomicity(fh: MPI_File, flag: c_int) -> c_int {
    let call = "MPI_File_set_atomicity";
    let r = (|| {
        let f = file(fh, call)?;
        // Non-blocking collective accesses settled first (deferred.rs).
        super::deferred::flush(&f);
        // The same flag on every rank, as MPI asks: a rank in atomic mode takes each
        // collective access's direct path, where the others could go in two phases.
        f.same_everywhere(&[i64::from(flag != 0)], "flags", call)?;
        f.atomic.store(flag != 0, Ordering::Relaxed);
        Ok(())
    })();
    on_file(fh, r)
}

/// `MPI_File_get_atomicity`.
#[no_mangle]
pub unsafe extern "C" fn MPI_File_get_atomicity(fh: MPI_File, flag: *mut c_int) -> c_int {
    let call = "MPI_File_get_atomicity";
    let r = file(fh, call).and_then(|f| {
        // SAFETY: the caller's contract.
        unsafe { out(flag, c_int::from(f.atomic.load(Ordering::Relaxed)), call) }
    });
    on_file(fh, r)
}

/// `MPI_File_get_amode`.
#[no_mangle]
pub unsafe extern "C" fn MPI_File_get_amode(fh: MPI_File, amode: *mut c_int) -> c_int {
    let call = "MPI_File_get_amode";
    let r = file(fh, call).and_then(|f| {
        // SAFETY: the caller's contract.
        unsafe { out(amode, f.amode, call) }
    });
    on_file(fh, r)
}

/// `MPI_File_get_group`.
#[no_mangle]
pub unsafe extern "C" fn MPI_File_get_group(fh: MPI_File, group: *mut MPI_Group) -> c_int {
    let call = "MPI_File_get_group";
    let r = file(fh, call).and_then(|f| {
        // SAFETY: the caller's contract.
        unsafe { crate::comm::group::give_group(f.labels.clone(), group, call) }
    });
    on_file(fh, r)
}

/// `MPI_File_set_info` (collective): the hints are kept (and given back by
/// `MPI_File_get_info`).
#[no_mangle]
pub unsafe extern "C" fn MPI_File_set_info(fh: MPI_File, info: MPI_Info) -> c_int {
    let call = "MPI_File_set_info";
    let r = (|| {
        let f = file(fh, call)?;
        // Non-blocking collective accesses settled first (deferred.rs).
        super::deferred::flush(&f);
        let mut e = crate::env::info::entries(info)?;
        let mut cur = f.info.lock().unwrap_or_else(PoisonError::into_inner);
        for (k, v) in e.drain(..) {
            match cur.iter_mut().find(|(ck, _)| *ck == k) {
                Some(slot) => slot.1 = v,
                None => cur.push((k, v)),
            }
        }
        // Looked up again from the new hints at the next access (the info's lock let go
        // first: `twophase::hints` takes the two the other way round).
        drop(cur);
        *f.cb_hints.lock().unwrap_or_else(PoisonError::into_inner) = None;
        Ok(())
    })();
    on_file(fh, r)
}

/// `MPI_File_get_info`: a new info object with the hints in effect.
#[no_mangle]
pub unsafe extern "C" fn MPI_File_get_info(fh: MPI_File, info_used: *mut MPI_Info) -> c_int {
    let call = "MPI_File_get_info";
    let r = (|| {
        let f = file(fh, call)?;
        let e = f
            .info
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .clone();
        // SAFETY: the caller's contract.
        unsafe { out(info_used, crate::env::info::make(e)?, call) }
    })();
    on_file(fh, r)
}

/// `MPI_File_create_errhandler`.
#[no_mangle]
pub unsafe extern "C" fn MPI_File_create_errhandler(
    file_errhandler_fn: *const c_void,
    errhandler: *mut MPI_Errhandler,
) -> c_int {
    // A file handler is called as a communicator's is: a handle and a code by pointer.
    // SAFETY: the caller's contract.
    unsafe { crate::env::errhandler::MPI_Comm_create_errhandler(file_errhandler_fn, errhandler) }
}

/// `MPI_File_set_errhandler`: on `MPI_FILE_NULL`, the handler of files opened later
/// and of errors in opening.
#[no_mangle]
pub unsafe extern "C" fn MPI_File_set_errhandler(
    fh: MPI_File,
    errhandler: MPI_Errhandler,
) -> c_int {
    let call = "MPI_File_set_errhandler";
    let r = (|| {
        crate::runtime::rt(call)?;
        if !valid_errhandler(errhandler) {
            return Err(MpiError::Handle {
                class: MPI_ERR_ERRHANDLER,
                what: "error handler",
                handle: errhandler,
            });
        }
        if fh == MPI_FILE_NULL {
            DEFAULT_HANDLER.store(errhandler, Ordering::Relaxed);
            return Ok(());
        }
        file(fh, call)?
            .errhandler
            .store(errhandler, Ordering::Relaxed);
        Ok(())
    })();
    on_file(fh, r)
}

/// `MPI_File_get_errhandler`.
#[no_mangle]
pub unsafe extern "C" fn MPI_File_get_errhandler(
    fh: MPI_File,
    errhandler: *mut MPI_Errhandler,
) -> c_int {
    let call = "MPI_File_get_errhandler";
    let r = (|| {
        crate::runtime::rt(call)?;
        let h = if fh == MPI_FILE_NULL {
            DEFAULT_HANDLER.load(Ordering::Relaxed)
        } else {
            file(fh, call)?.errhandler.load(Ordering::Relaxed)
        };
        // SAFETY: the caller's contract.
        unsafe { out(errhandler, h, call) }
    })();
    on_file(fh, r)
}

/// `MPI_File_call_errhandler`: reports `errorcode` on the file as an error of a call.
#[no_mangle]
pub unsafe extern "C" fn MPI_File_call_errhandler(fh: MPI_File, errorcode: c_int) -> c_int {
    let call = "MPI_File_call_errhandler";
    let handler = if fh == MPI_FILE_NULL {
        DEFAULT_HANDLER.load(Ordering::Relaxed)
    } else {
        match file(fh, call) {
            Ok(f) => f.errhandler.load(Ordering::Relaxed),
            Err(e) => return raise_file(fh, &e),
        }
    };
    match handler {
        MPI_ERRORS_RETURN => MPI_SUCCESS,
        MPI_ERRORS_ARE_FATAL | MPI_ERRORS_ABORT => {
            crate::runtime::fatal(&format!("{call} with error code {errorcode}"), errorcode)
        }
        h => {
            if let Some(f) = ERRHANDLERS.get(h) {
                let (mut fh, mut code) = (fh, errorcode);
                // SAFETY: a user function of the standard's errhandler type; pointers
                // to locals that live for the call.
                unsafe { f(&mut fh, &mut code) };
            }
            MPI_SUCCESS
        }
    }
}
