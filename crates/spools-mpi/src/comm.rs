//! Communicators: the objects behind `MPI_Comm` handles, and the calls that make, name,
//! compare and free them.

use std::collections::BTreeMap;
use std::ffi::{c_char, c_int, c_void, CStr};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, PoisonError};

use spools::Communicator;

use crate::abi::*;
use crate::error::{on_comm, put_string, valid_errhandler, MpiError};
use crate::handles::{Kind, Table};
use crate::init::rt;

/// An MPI communicator: a Spools communicator with MPI's extras.
pub(crate) struct CommObj {
    /// The Spools communicator (its own context for messages and collectives).
    pub(crate) comm: Communicator,
    /// Its error handler (`MPI_ERRORS_ARE_FATAL` at first).
    pub(crate) errhandler: AtomicUsize,
    /// Its name (`MPI_Comm_set_name`).
    name: Mutex<String>,
    /// Cached attribute values by keyval.
    attrs: Mutex<BTreeMap<c_int, usize>>,
}

impl CommObj {
    pub(crate) fn new(comm: Communicator, name: &str) -> Arc<CommObj> {
        Arc::new(CommObj {
            comm,
            errhandler: AtomicUsize::new(MPI_ERRORS_ARE_FATAL),
            name: Mutex::new(name.to_string()),
            attrs: Mutex::new(BTreeMap::new()),
        })
    }

    /// A new communicator object for `comm`, inheriting this one's error handler.
    fn child(&self, comm: Communicator) -> CommObj {
        CommObj {
            comm,
            errhandler: AtomicUsize::new(self.errhandler.load(Ordering::Relaxed)),
            name: Mutex::new(String::new()),
            attrs: Mutex::new(BTreeMap::new()),
        }
    }
}

/// The communicators made by programs.
static COMMS: Table<CommObj> = Table::new(Kind::Comm);

/// The communicator of handle `h`.
///
/// # Errors
/// [`MpiError::NotInitialized`], [`MpiError::Handle`] with `MPI_ERR_COMM`.
pub(crate) fn comm(h: MPI_Comm, call: &'static str) -> Result<Arc<CommObj>, MpiError> {
    let rt = rt(call)?;
    match h {
        MPI_COMM_WORLD => Ok(rt.world_comm.clone()),
        MPI_COMM_SELF => Ok(rt.self_comm.clone()),
        _ => COMMS.get(h).ok_or(MpiError::Handle {
            class: MPI_ERR_COMM,
            what: "communicator",
            handle: h,
        }),
    }
}

/// The error handler errors on `h` go to (`MPI_COMM_WORLD`'s for an invalid handle;
/// `MPI_ERRORS_ARE_FATAL` before `MPI_Init`).
pub(crate) fn errhandler_of(h: MPI_Comm) -> MPI_Errhandler {
    let Some(rt) = crate::init::runtime() else {
        return MPI_ERRORS_ARE_FATAL;
    };
    let obj = match h {
        MPI_COMM_SELF => Some(rt.self_comm.clone()),
        MPI_COMM_WORLD => Some(rt.world_comm.clone()),
        _ => COMMS.get(h),
    };
    obj.unwrap_or_else(|| rt.world_comm.clone())
        .errhandler
        .load(Ordering::Relaxed)
}

/// Writes `v` through an output pointer.
///
/// # Errors
/// `MPI_ERR_ARG` for a NULL pointer.
///
/// # Safety
/// `p` is NULL or writable.
pub(crate) unsafe fn out<T>(p: *mut T, v: T, call: &'static str) -> Result<(), MpiError> {
    if p.is_null() {
        return Err(MpiError::invalid(
            MPI_ERR_ARG,
            format!("{call}: an output argument is NULL"),
        ));
    }
    // SAFETY: non-NULL and writable (the caller's contract).
    unsafe { *p = v };
    Ok(())
}

/// `MPI_Comm_rank`.
#[no_mangle]
pub unsafe extern "C" fn MPI_Comm_rank(comm: MPI_Comm, rank: *mut c_int) -> c_int {
    let r = self::comm(comm, "MPI_Comm_rank")
        // SAFETY: the caller's contract.
        .and_then(|c| unsafe { out(rank, c.comm.rank() as c_int, "MPI_Comm_rank") });
    on_comm(comm, r)
}

/// `MPI_Comm_size`.
#[no_mangle]
pub unsafe extern "C" fn MPI_Comm_size(comm: MPI_Comm, size: *mut c_int) -> c_int {
    let r = self::comm(comm, "MPI_Comm_size")
        // SAFETY: the caller's contract.
        .and_then(|c| unsafe { out(size, c.comm.size() as c_int, "MPI_Comm_size") });
    on_comm(comm, r)
}

fn insert(obj: CommObj) -> Result<MPI_Comm, MpiError> {
    COMMS
        .insert(obj)
        .ok_or(MpiError::invalid(MPI_ERR_NO_MEM, "too many communicators"))
}

/// `MPI_Comm_dup`: collective; a communicator of the same ranks with a new context.
#[no_mangle]
pub unsafe extern "C" fn MPI_Comm_dup(comm: MPI_Comm, newcomm: *mut MPI_Comm) -> c_int {
    let r = (|| {
        let c = self::comm(comm, "MPI_Comm_dup")?;
        let d = c.comm.dup()?;
        let h = insert(c.child(d))?;
        // SAFETY: the caller's contract.
        unsafe { out(newcomm, h, "MPI_Comm_dup") }
    })();
    on_comm(comm, r)
}

/// `MPI_Comm_split`: collective; ranks of one `color` form a communicator, ordered by
/// `key` then by their rank here; `MPI_UNDEFINED` gets `MPI_COMM_NULL`.
#[no_mangle]
pub unsafe extern "C" fn MPI_Comm_split(
    comm: MPI_Comm,
    color: c_int,
    key: c_int,
    newcomm: *mut MPI_Comm,
) -> c_int {
    let r = (|| {
        let c = self::comm(comm, "MPI_Comm_split")?;
        let col = match color {
            MPI_UNDEFINED => None,
            c if c >= 0 => Some(c as u32),
            c => {
                return Err(MpiError::invalid(
                    MPI_ERR_ARG,
                    format!("MPI_Comm_split: color {c} is negative (0 or more, or MPI_UNDEFINED)"),
                ))
            }
        };
        let h = match c.comm.split(col, key)? {
            Some(s) => insert(c.child(s))?,
            None => MPI_COMM_NULL,
        };
        // SAFETY: the caller's contract.
        unsafe { out(newcomm, h, "MPI_Comm_split") }
    })();
    on_comm(comm, r)
}

/// `MPI_Comm_split_type`: `MPI_COMM_TYPE_SHARED` groups the ranks of each host; other
/// types give each rank a communicator of its own host too (the finest level Spools
/// knows); `MPI_UNDEFINED` gives `MPI_COMM_NULL`.
#[no_mangle]
pub unsafe extern "C" fn MPI_Comm_split_type(
    comm: MPI_Comm,
    split_type: c_int,
    key: c_int,
    info: MPI_Info,
    newcomm: *mut MPI_Comm,
) -> c_int {
    let _ = info;
    let r = (|| {
        let c = self::comm(comm, "MPI_Comm_split_type")?;
        // The host of a rank: the lowest communicator rank on the same host.
        let color = (split_type != MPI_UNDEFINED).then(|| {
            (0..c.comm.size())
                .find(|&r| c.comm.same_host(r))
                .unwrap_or(c.comm.rank())
        });
        let h = match c.comm.split(color, key)? {
            Some(s) => insert(c.child(s))?,
            None => MPI_COMM_NULL,
        };
        // SAFETY: the caller's contract.
        unsafe { out(newcomm, h, "MPI_Comm_split_type") }
    })();
    on_comm(comm, r)
}

/// `MPI_Comm_free`: frees a communicator the program made; sets the handle to
/// `MPI_COMM_NULL`.
#[no_mangle]
pub unsafe extern "C" fn MPI_Comm_free(comm: *mut MPI_Comm) -> c_int {
    let h = if comm.is_null() {
        MPI_COMM_NULL
    } else {
        // SAFETY: non-NULL (the caller's contract).
        unsafe { *comm }
    };
    let r = (|| {
        rt("MPI_Comm_free")?;
        if matches!(h, MPI_COMM_WORLD | MPI_COMM_SELF) {
            return Err(MpiError::invalid(
                MPI_ERR_COMM,
                "MPI_Comm_free: MPI_COMM_WORLD and MPI_COMM_SELF cannot be freed",
            ));
        }
        COMMS.remove(h).ok_or(MpiError::Handle {
            class: MPI_ERR_COMM,
            what: "communicator",
            handle: h,
        })?;
        // SAFETY: non-NULL: the handle was read from it above.
        unsafe { *comm = MPI_COMM_NULL };
        Ok(())
    })();
    on_comm(h, r)
}

/// `MPI_Comm_compare`: `MPI_IDENT` for the same communicator, `MPI_CONGRUENT` for the
/// same ranks in the same order, `MPI_SIMILAR` for the same ranks in another order,
/// `MPI_UNEQUAL` otherwise.
#[no_mangle]
pub unsafe extern "C" fn MPI_Comm_compare(
    comm1: MPI_Comm,
    comm2: MPI_Comm,
    result: *mut c_int,
) -> c_int {
    let r = (|| {
        let a = self::comm(comm1, "MPI_Comm_compare")?;
        let b = self::comm(comm2, "MPI_Comm_compare")?;
        let ranks = |c: &Communicator| -> Result<Vec<u32>, MpiError> {
            (0..c.size())
                .map(|r| c.job_rank(r).map_err(MpiError::from))
                .collect()
        };
        let (ra, rb) = (ranks(&a.comm)?, ranks(&b.comm)?);
        let v = if Arc::ptr_eq(&a, &b) {
            MPI_IDENT
        } else if ra == rb {
            MPI_CONGRUENT
        } else {
            let (mut sa, mut sb) = (ra.clone(), rb.clone());
            sa.sort_unstable();
            sb.sort_unstable();
            if sa == sb {
                MPI_SIMILAR
            } else {
                MPI_UNEQUAL
            }
        };
        // SAFETY: the caller's contract.
        unsafe { out(result, v, "MPI_Comm_compare") }
    })();
    on_comm(comm1, r)
}

/// `MPI_Comm_test_inter`: always false (intercommunicators are not made yet).
#[no_mangle]
pub unsafe extern "C" fn MPI_Comm_test_inter(comm: MPI_Comm, flag: *mut c_int) -> c_int {
    let r = self::comm(comm, "MPI_Comm_test_inter")
        // SAFETY: the caller's contract.
        .and_then(|_| unsafe { out(flag, 0, "MPI_Comm_test_inter") });
    on_comm(comm, r)
}

/// `MPI_Comm_set_errhandler`.
#[no_mangle]
pub unsafe extern "C" fn MPI_Comm_set_errhandler(
    comm: MPI_Comm,
    errhandler: MPI_Errhandler,
) -> c_int {
    let r = (|| {
        let c = self::comm(comm, "MPI_Comm_set_errhandler")?;
        if !valid_errhandler(errhandler) {
            return Err(MpiError::Handle {
                class: MPI_ERR_ERRHANDLER,
                what: "error handler",
                handle: errhandler,
            });
        }
        c.errhandler.store(errhandler, Ordering::Relaxed);
        Ok(())
    })();
    on_comm(comm, r)
}

/// `MPI_Comm_get_errhandler`.
#[no_mangle]
pub unsafe extern "C" fn MPI_Comm_get_errhandler(
    comm: MPI_Comm,
    errhandler: *mut MPI_Errhandler,
) -> c_int {
    let r = self::comm(comm, "MPI_Comm_get_errhandler").and_then(|c| {
        // SAFETY: the caller's contract.
        unsafe {
            out(
                errhandler,
                c.errhandler.load(Ordering::Relaxed),
                "MPI_Comm_get_errhandler",
            )
        }
    });
    on_comm(comm, r)
}

/// `MPI_Comm_call_errhandler`: reports `errorcode` on `comm` as an error of a call.
#[no_mangle]
pub unsafe extern "C" fn MPI_Comm_call_errhandler(comm: MPI_Comm, errorcode: c_int) -> c_int {
    let msg = format!("MPI_Comm_call_errhandler with error code {errorcode}");
    match errhandler_of(comm) {
        MPI_ERRORS_RETURN => MPI_SUCCESS,
        MPI_ERRORS_ARE_FATAL | MPI_ERRORS_ABORT => crate::init::fatal(&msg, errorcode),
        h => {
            if let Some(f) = crate::error::ERRHANDLERS.get(h) {
                let (mut c, mut code) = (comm, errorcode);
                // SAFETY: a user function of the standard's errhandler type; pointers
                // to locals that live for the call.
                unsafe { f(&mut c, &mut code) };
            }
            MPI_SUCCESS
        }
    }
}

/// `MPI_Comm_set_name`.
#[no_mangle]
pub unsafe extern "C" fn MPI_Comm_set_name(comm: MPI_Comm, comm_name: *const c_char) -> c_int {
    let r = (|| {
        let c = self::comm(comm, "MPI_Comm_set_name")?;
        if comm_name.is_null() {
            return Err(MpiError::invalid(
                MPI_ERR_ARG,
                "MPI_Comm_set_name: NULL name",
            ));
        }
        // SAFETY: a NUL-terminated string (the caller's contract).
        let s = unsafe { CStr::from_ptr(comm_name) }.to_string_lossy();
        let max = MPI_MAX_OBJECT_NAME as usize - 1;
        *c.name.lock().unwrap_or_else(PoisonError::into_inner) = s.chars().take(max).collect();
        Ok(())
    })();
    on_comm(comm, r)
}

/// `MPI_Comm_get_name`.
#[no_mangle]
pub unsafe extern "C" fn MPI_Comm_get_name(
    comm: MPI_Comm,
    comm_name: *mut c_char,
    resultlen: *mut c_int,
) -> c_int {
    let r = self::comm(comm, "MPI_Comm_get_name").map(|c| {
        let n = c
            .name
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .clone();
        // SAFETY: the standard's contract: MPI_MAX_OBJECT_NAME bytes.
        unsafe { put_string(&n, comm_name, MPI_MAX_OBJECT_NAME as usize, resultlen) };
    });
    on_comm(comm, r)
}

/// Values of the predefined attributes (`MPI_TAG_UB` and friends), kept for the life of
/// the process because `MPI_Comm_get_attr` hands out pointers to them.
static TAG_UB: c_int = i32::MAX;
static WTIME_IS_GLOBAL: c_int = 0;
static IO_ANY: c_int = MPI_ANY_SOURCE;
static HOST_NONE: c_int = MPI_PROC_NULL;
static UNIVERSE: std::sync::OnceLock<c_int> = std::sync::OnceLock::new();
static APPNUM: c_int = 0;
static LASTUSEDCODE: c_int = MPI_ERR_LASTCODE;

/// `MPI_Comm_get_attr`: the predefined attributes (`MPI_TAG_UB`, `MPI_HOST`, `MPI_IO`,
/// `MPI_WTIME_IS_GLOBAL`, `MPI_UNIVERSE_SIZE`, `MPI_APPNUM`, `MPI_LASTUSEDCODE`) as
/// pointers to `int`, and values set with `MPI_Comm_set_attr`.
#[no_mangle]
pub unsafe extern "C" fn MPI_Comm_get_attr(
    comm: MPI_Comm,
    comm_keyval: c_int,
    attribute_val: *mut c_void,
    flag: *mut c_int,
) -> c_int {
    let r = (|| {
        let c = self::comm(comm, "MPI_Comm_get_attr")?;
        let size = rt("MPI_Comm_get_attr")?.world_comm.comm.size() as c_int;
        let predefined: Option<&'static c_int> = match comm_keyval {
            MPI_TAG_UB => Some(&TAG_UB),
            MPI_HOST => Some(&HOST_NONE),
            MPI_IO => Some(&IO_ANY),
            MPI_WTIME_IS_GLOBAL => Some(&WTIME_IS_GLOBAL),
            MPI_UNIVERSE_SIZE => Some(UNIVERSE.get_or_init(|| size)),
            MPI_APPNUM => Some(&APPNUM),
            MPI_LASTUSEDCODE => Some(&LASTUSEDCODE),
            _ => None,
        };
        let value = match predefined {
            Some(p) => Some(std::ptr::from_ref(p) as usize),
            None => c
                .attrs
                .lock()
                .unwrap_or_else(PoisonError::into_inner)
                .get(&comm_keyval)
                .copied(),
        };
        // SAFETY: the caller's contract: `flag` writable.
        unsafe { out(flag, c_int::from(value.is_some()), "MPI_Comm_get_attr") }?;
        if let Some(v) = value {
            // SAFETY: the caller's contract: `attribute_val` points to a `void *`.
            unsafe { out(attribute_val.cast::<usize>(), v, "MPI_Comm_get_attr") }?;
        }
        Ok(())
    })();
    on_comm(comm, r)
}

/// `MPI_Comm_set_attr`: caches `attribute_val` under a keyval (no copy or delete
/// callbacks yet).
#[no_mangle]
pub unsafe extern "C" fn MPI_Comm_set_attr(
    comm: MPI_Comm,
    comm_keyval: c_int,
    attribute_val: *mut c_void,
) -> c_int {
    let r = self::comm(comm, "MPI_Comm_set_attr").map(|c| {
        c.attrs
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .insert(comm_keyval, attribute_val as usize);
    });
    on_comm(comm, r)
}
