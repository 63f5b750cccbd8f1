//! Every data access call of MPI-IO: at explicit offsets (`*_at`), through the
//! individual pointer, through the shared pointer (`*_shared`, and `*_ordered`, which
//! takes the group's data in rank order), each blocking, collective (`*_all`),
//! non-blocking (`i*`: independent ones complete when made, collective ones moved when
//! made and completed by the group's agreement, `deferred.rs`) or split (`*_begin` / `*_end`), in `int` and `_c`
//! forms. One function, [`access_now`], does them all.

use std::ffi::{c_int, c_void};
use std::sync::PoisonError;

use crate::abi::*;
use crate::env::error::MpiError;
use crate::file::place::{Dir, Place};
use crate::file::transfer::access_now;
use crate::file::{deferred, file, on_file};
use crate::out::out;
use crate::p2p::request::{give, put_status, Op};

/// One access ([`access_now`]); a collective one first settles the file's non-blocking
/// collective accesses ([`deferred::flush`]).
///
/// # Safety
/// As [`access_now`].
#[allow(clippy::too_many_arguments)]
pub(crate) unsafe fn access(
    fh: MPI_File,
    buf: *mut u8,
    count: MPI_Count,
    dt: MPI_Datatype,
    place: Place,
    dir: Dir,
    coll: bool,
    call: &'static str,
) -> Result<MPI_Status, MpiError> {
    let f = file(fh, call)?;
    if coll || matches!(place, Place::Ordered) {
        deferred::flush(&f);
    }
    // SAFETY: the caller's contract.
    unsafe { access_now(&f, buf, count, dt, place, dir, coll, call) }
}

/// Finishes a blocking call: the status written, errors on the file.
fn blocking(fh: MPI_File, status: *mut MPI_Status, r: Result<MPI_Status, MpiError>) -> c_int {
    on_file(
        fh,
        r.map(|s| {
            // SAFETY: the caller's contract: NULL (MPI_STATUS_IGNORE) or writable.
            unsafe { put_status(status, s) }
        }),
    )
}

/// Finishes a non-blocking call: a complete request holding the status.
fn started(
    fh: MPI_File,
    request: *mut MPI_Request,
    r: Result<MPI_Status, MpiError>,
    call: &'static str,
) -> c_int {
    on_file(
        fh,
        r.and_then(|s| {
            let h = give(Op::Done(s), MPI_COMM_SELF)?;
            // SAFETY: the caller's contract.
            unsafe { out(request, h, call) }
        }),
    )
}

/// Begins a split collective: the access is done, its status kept for the end.
fn begun(fh: MPI_File, r: Result<MPI_Status, MpiError>, call: &'static str) -> c_int {
    let r = r.and_then(|s| {
        let f = file(fh, call)?;
        let mut slot = f.split.lock().unwrap_or_else(PoisonError::into_inner);
        if slot.is_some() {
            return Err(MpiError::invalid(
                MPI_ERR_OTHER,
                format!("{call}: a split collective is already in progress on this file"),
            ));
        }
        *slot = Some(s);
        Ok(())
    });
    on_file(fh, r)
}

/// Ends a split collective: the status of its begin.
fn ended(fh: MPI_File, status: *mut MPI_Status, call: &'static str) -> c_int {
    let r = file(fh, call).and_then(|f| {
        let s = f
            .split
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .take()
            .ok_or_else(|| {
                MpiError::invalid(
                    MPI_ERR_OTHER,
                    format!("{call}: no split collective was begun on this file"),
                )
            })?;
        // SAFETY: the caller's contract.
        unsafe { put_status(status, s) };
        Ok(())
    });
    on_file(fh, r)
}

/// `FN(fh, offset, buf, count, datatype, status)` and its `_c` form.
macro_rules! at_offset {
    ($name:ident, $name_c:ident, $buf:ty, $dir:expr, $coll:expr) => {
        #[doc = concat!("`", stringify!($name), "`.")]
        #[no_mangle]
        pub unsafe extern "C" fn $name(
            fh: MPI_File,
            offset: MPI_Offset,
            buf: $buf,
            count: c_int,
            datatype: MPI_Datatype,
            status: *mut MPI_Status,
        ) -> c_int {
            // SAFETY: the caller's contract.
            unsafe { $name_c(fh, offset, buf, count.into(), datatype, status) }
        }

        #[doc = concat!("`", stringify!($name_c), "`.")]
        #[no_mangle]
        pub unsafe extern "C" fn $name_c(
            fh: MPI_File,
            offset: MPI_Offset,
            buf: $buf,
            count: MPI_Count,
            datatype: MPI_Datatype,
            status: *mut MPI_Status,
        ) -> c_int {
            let call = stringify!($name);
            // SAFETY: the caller's contract.
            let r = unsafe {
                access(
                    fh,
                    buf as *mut u8,
                    count,
                    datatype,
                    Place::At(offset),
                    $dir,
                    $coll,
                    call,
                )
            };
            blocking(fh, status, r)
        }
    };
}

/// `FN(fh, buf, count, datatype, status)` and its `_c` form.
macro_rules! at_pointer {
    ($name:ident, $name_c:ident, $buf:ty, $place:expr, $dir:expr, $coll:expr) => {
        #[doc = concat!("`", stringify!($name), "`.")]
        #[no_mangle]
        pub unsafe extern "C" fn $name(
            fh: MPI_File,
            buf: $buf,
            count: c_int,
            datatype: MPI_Datatype,
            status: *mut MPI_Status,
        ) -> c_int {
            // SAFETY: the caller's contract.
            unsafe { $name_c(fh, buf, count.into(), datatype, status) }
        }

        #[doc = concat!("`", stringify!($name_c), "`.")]
        #[no_mangle]
        pub unsafe extern "C" fn $name_c(
            fh: MPI_File,
            buf: $buf,
            count: MPI_Count,
            datatype: MPI_Datatype,
            status: *mut MPI_Status,
        ) -> c_int {
            let call = stringify!($name);
            // SAFETY: the caller's contract.
            let r = unsafe {
                access(
                    fh,
                    buf as *mut u8,
                    count,
                    datatype,
                    $place,
                    $dir,
                    $coll,
                    call,
                )
            };
            blocking(fh, status, r)
        }
    };
}

/// `FN(fh, offset, buf, count, datatype, request)` and its `_c` form.
macro_rules! nonblocking_at {
    ($name:ident, $name_c:ident, $buf:ty, $dir:expr, $coll:expr) => {
        #[doc = concat!("`", stringify!($name), "`: an independent access is complete when it returns; a collective one has moved this rank's bytes and completes with the group's agreement (`deferred.rs`).")]
        #[no_mangle]
        pub unsafe extern "C" fn $name(
            fh: MPI_File,
            offset: MPI_Offset,
            buf: $buf,
            count: c_int,
            datatype: MPI_Datatype,
            request: *mut MPI_Request,
        ) -> c_int {
            // SAFETY: the caller's contract.
            unsafe { $name_c(fh, offset, buf, count.into(), datatype, request) }
        }

        #[doc = concat!("`", stringify!($name_c), "`.")]
        #[no_mangle]
        pub unsafe extern "C" fn $name_c(
            fh: MPI_File,
            offset: MPI_Offset,
            buf: $buf,
            count: MPI_Count,
            datatype: MPI_Datatype,
            request: *mut MPI_Request,
        ) -> c_int {
            let call = stringify!($name);
            if $coll {
                // SAFETY: the caller's contract.
                return unsafe {
                    deferred::start(fh, buf as *mut u8, count, datatype, Place::At(offset), $dir, call, request)
                };
            }
            // SAFETY: the caller's contract.
            let r = unsafe {
                access(
                    fh,
                    buf as *mut u8,
                    count,
                    datatype,
                    Place::At(offset),
                    $dir,
                    $coll,
                    call,
                )
            };
            started(fh, request, r, call)
        }
    };
}

/// `FN(fh, buf, count, datatype, request)` and its `_c` form.
macro_rules! nonblocking {
    ($name:ident, $name_c:ident, $buf:ty, $place:expr, $dir:expr, $coll:expr) => {
        #[doc = concat!("`", stringify!($name), "`: an independent access is complete when it returns; a collective one has moved this rank's bytes and completes with the group's agreement (`deferred.rs`).")]
        #[no_mangle]
        pub unsafe extern "C" fn $name(
            fh: MPI_File,
            buf: $buf,
            count: c_int,
            datatype: MPI_Datatype,
            request: *mut MPI_Request,
        ) -> c_int {
            // SAFETY: the caller's contract.
            unsafe { $name_c(fh, buf, count.into(), datatype, request) }
        }

        #[doc = concat!("`", stringify!($name_c), "`.")]
        #[no_mangle]
        pub unsafe extern "C" fn $name_c(
            fh: MPI_File,
            buf: $buf,
            count: MPI_Count,
            datatype: MPI_Datatype,
            request: *mut MPI_Request,
        ) -> c_int {
            let call = stringify!($name);
            if $coll {
                // SAFETY: the caller's contract.
                return unsafe {
                    deferred::start(fh, buf as *mut u8, count, datatype, $place, $dir, call, request)
                };
            }
            // SAFETY: the caller's contract.
            let r = unsafe {
                access(
                    fh,
                    buf as *mut u8,
                    count,
                    datatype,
                    $place,
                    $dir,
                    $coll,
                    call,
                )
            };
            started(fh, request, r, call)
        }
    };
}

/// `FN_begin(fh, offset, buf, count, datatype)` (and `_c`) and `FN_end(fh, buf, status)`.
macro_rules! split_at {
    ($begin:ident, $begin_c:ident, $end:ident, $buf:ty, $dir:expr) => {
        #[doc = concat!("`", stringify!($begin), "`: the access is done here.")]
        #[no_mangle]
        pub unsafe extern "C" fn $begin(
            fh: MPI_File,
            offset: MPI_Offset,
            buf: $buf,
            count: c_int,
            datatype: MPI_Datatype,
        ) -> c_int {
            // SAFETY: the caller's contract.
            unsafe { $begin_c(fh, offset, buf, count.into(), datatype) }
        }

        #[doc = concat!("`", stringify!($begin_c), "`.")]
        #[no_mangle]
        pub unsafe extern "C" fn $begin_c(
            fh: MPI_File,
            offset: MPI_Offset,
            buf: $buf,
            count: MPI_Count,
            datatype: MPI_Datatype,
        ) -> c_int {
            let call = stringify!($begin);
            // SAFETY: the caller's contract.
            let r = unsafe {
                access(
                    fh,
                    buf as *mut u8,
                    count,
                    datatype,
                    Place::At(offset),
                    $dir,
                    true,
                    call,
                )
            };
            begun(fh, r, call)
        }

        #[doc = concat!("`", stringify!($end), "`: the status of the begin.")]
        #[no_mangle]
        pub unsafe extern "C" fn $end(fh: MPI_File, buf: $buf, status: *mut MPI_Status) -> c_int {
            let _ = buf;
            ended(fh, status, stringify!($end))
        }
    };
}

/// `FN_begin(fh, buf, count, datatype)` (and `_c`) and `FN_end(fh, buf, status)`.
macro_rules! split {
    ($begin:ident, $begin_c:ident, $end:ident, $buf:ty, $place:expr, $dir:expr) => {
        #[doc = concat!("`", stringify!($begin), "`: the access is done here.")]
        #[no_mangle]
        pub unsafe extern "C" fn $begin(
            fh: MPI_File,
            buf: $buf,
            count: c_int,
            datatype: MPI_Datatype,
        ) -> c_int {
            // SAFETY: the caller's contract.
            unsafe { $begin_c(fh, buf, count.into(), datatype) }
        }

        #[doc = concat!("`", stringify!($begin_c), "`.")]
        #[no_mangle]
        pub unsafe extern "C" fn $begin_c(
            fh: MPI_File,
            buf: $buf,
            count: MPI_Count,
            datatype: MPI_Datatype,
        ) -> c_int {
            let call = stringify!($begin);
            // SAFETY: the caller's contract.
            let r = unsafe {
                access(
                    fh,
                    buf as *mut u8,
                    count,
                    datatype,
                    $place,
                    $dir,
                    true,
                    call,
                )
            };
            begun(fh, r, call)
        }

        #[doc = concat!("`", stringify!($end), "`: the status of the begin.")]
        #[no_mangle]
        pub unsafe extern "C" fn $end(fh: MPI_File, buf: $buf, status: *mut MPI_Status) -> c_int {
            let _ = buf;
            ended(fh, status, stringify!($end))
        }
    };
}

at_offset!(
    MPI_File_read_at,
    MPI_File_read_at_c,
    *mut c_void,
    Dir::Read,
    false
);
at_offset!(
    MPI_File_write_at,
    MPI_File_write_at_c,
    *const c_void,
    Dir::Write,
    false
);
at_offset!(
    MPI_File_read_at_all,
    MPI_File_read_at_all_c,
    *mut c_void,
    Dir::Read,
    true
);
at_offset!(
    MPI_File_write_at_all,
    MPI_File_write_at_all_c,
    *const c_void,
    Dir::Write,
    true
);

at_pointer!(
    MPI_File_read,
    MPI_File_read_c,
    *mut c_void,
    Place::Own,
    Dir::Read,
    false
);
at_pointer!(
    MPI_File_write,
    MPI_File_write_c,
    *const c_void,
    Place::Own,
    Dir::Write,
    false
);
at_pointer!(
    MPI_File_read_all,
    MPI_File_read_all_c,
    *mut c_void,
    Place::Own,
    Dir::Read,
    true
);
at_pointer!(
    MPI_File_write_all,
    MPI_File_write_all_c,
    *const c_void,
    Place::Own,
    Dir::Write,
    true
);
at_pointer!(
    MPI_File_read_shared,
    MPI_File_read_shared_c,
    *mut c_void,
    Place::Shared,
    Dir::Read,
    false
);
at_pointer!(
    MPI_File_write_shared,
    MPI_File_write_shared_c,
    *const c_void,
    Place::Shared,
    Dir::Write,
    false
);
at_pointer!(
    MPI_File_read_ordered,
    MPI_File_read_ordered_c,
    *mut c_void,
    Place::Ordered,
    Dir::Read,
    true
);
at_pointer!(
    MPI_File_write_ordered,
    MPI_File_write_ordered_c,
    *const c_void,
    Place::Ordered,
    Dir::Write,
    true
);

nonblocking_at!(
    MPI_File_iread_at,
    MPI_File_iread_at_c,
    *mut c_void,
    Dir::Read,
    false
);
nonblocking_at!(
    MPI_File_iwrite_at,
    MPI_File_iwrite_at_c,
    *const c_void,
    Dir::Write,
    false
);
nonblocking_at!(
    MPI_File_iread_at_all,
    MPI_File_iread_at_all_c,
    *mut c_void,
    Dir::Read,
    true
);
nonblocking_at!(
    MPI_File_iwrite_at_all,
    MPI_File_iwrite_at_all_c,
    *const c_void,
    Dir::Write,
    true
);

nonblocking!(
    MPI_File_iread,
    MPI_File_iread_c,
    *mut c_void,
    Place::Own,
    Dir::Read,
    false
);
nonblocking!(
    MPI_File_iwrite,
    MPI_File_iwrite_c,
    *const c_void,
    Place::Own,
    Dir::Write,
    false
);
nonblocking!(
    MPI_File_iread_all,
    MPI_File_iread_all_c,
    *mut c_void,
    Place::Own,
    Dir::Read,
    true
);
nonblocking!(
    MPI_File_iwrite_all,
    MPI_File_iwrite_all_c,
    *const c_void,
    Place::Own,
    Dir::Write,
    true
);
nonblocking!(
    MPI_File_iread_shared,
    MPI_File_iread_shared_c,
    *mut c_void,
    Place::Shared,
    Dir::Read,
    false
);
nonblocking!(
    MPI_File_iwrite_shared,
    MPI_File_iwrite_shared_c,
    *const c_void,
    Place::Shared,
    Dir::Write,
    false
);

split_at!(
    MPI_File_read_at_all_begin,
    MPI_File_read_at_all_begin_c,
    MPI_File_read_at_all_end,
    *mut c_void,
    Dir::Read
);
split_at!(
    MPI_File_write_at_all_begin,
    MPI_File_write_at_all_begin_c,
    MPI_File_write_at_all_end,
    *const c_void,
    Dir::Write
);
split!(
    MPI_File_read_all_begin,
    MPI_File_read_all_begin_c,
    MPI_File_read_all_end,
    *mut c_void,
    Place::Own,
    Dir::Read
);
split!(
    MPI_File_write_all_begin,
    MPI_File_write_all_begin_c,
    MPI_File_write_all_end,
    *const c_void,
    Place::Own,
    Dir::Write
);
split!(
    MPI_File_read_ordered_begin,
    MPI_File_read_ordered_begin_c,
    MPI_File_read_ordered_end,
    *mut c_void,
    Place::Ordered,
    Dir::Read
);
split!(
    MPI_File_write_ordered_begin,
    MPI_File_write_ordered_begin_c,
    MPI_File_write_ordered_end,
    *const c_void,
    Place::Ordered,
    Dir::Write
);
