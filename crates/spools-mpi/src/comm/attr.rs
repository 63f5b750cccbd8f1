//! Attribute caching: keyvals with their copy and delete callbacks, attributes of
//! communicators and datatypes (copied by `MPI_Comm_dup` / `MPI_Type_dup`, deleted on
//! free), and the predefined communicator attributes (`MPI_TAG_UB` and friends).

use std::ffi::{c_int, c_void};
use std::sync::PoisonError;

use crate::abi::*;
use crate::comm::comm;
use crate::env::errhandler::{on_comm, on_self};
use crate::env::error::MpiError;
use crate::handles::{Kind, Table};
use crate::out::out;
use crate::runtime::rt;

/// Attributes of one object: keyval to value.
pub(crate) use crate::comm::attrmap::Attrs;

/// `int copy(OBJ, int keyval, void *extra, void *in, void *out, int *flag)`.
type CopyFn =
    unsafe extern "C" fn(usize, c_int, *mut c_void, *mut c_void, *mut c_void, *mut c_int) -> c_int;
/// `int delete(OBJ, int keyval, void *value, void *extra)`.
type DeleteFn = unsafe extern "C" fn(usize, c_int, *mut c_void, *mut c_void) -> c_int;

/// What a keyval was made for.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Of {
    Comm,
    Type,
    Win,
}

/// A keyval: its callbacks (0: the NULL function, 1: the DUP function) and extra state.
pub(crate) struct Keyval {
    of: Of,
    copy: usize,
    delete: usize,
    extra: usize,
}

static KEYVALS: Table<Keyval> = Table::new(Kind::Keyval);

pub(crate) fn keyval(
    k: c_int,
    of: Of,
    call: &'static str,
) -> Result<std::sync::Arc<Keyval>, MpiError> {
    KEYVALS
        .get(k as u32 as usize)
        .filter(|kv| kv.of == of)
        .ok_or_else(|| {
            MpiError::invalid(
                MPI_ERR_KEYVAL,
                format!("{call}: {k} is not a keyval of this kind of object"),
            )
        })
}

fn callback_failed(rc: c_int, what: &'static str) -> MpiError {
    // The call returns the callback's code as it is (MPI 4.1, 7.7.2): a class the
    // program made with MPI_Add_error_class stays its own.
    MpiError::Program { code: rc, what }
}

/// Calls the delete callback of `k` for `value` on object `obj`.
fn delete_one(obj: usize, k: c_int, value: usize) -> Result<(), MpiError> {
    let Some(kv) = KEYVALS.get(k as u32 as usize) else {
        return Ok(());
    };
    if kv.delete > 1 {
        // SAFETY: a user callback of the standard's delete type.
        let f: DeleteFn = unsafe { std::mem::transmute(kv.delete) };
        // SAFETY: the callback's contract.
        let rc = unsafe { f(obj, k, value as *mut c_void, kv.extra as *mut c_void) };
        if rc != MPI_SUCCESS {
            return Err(callback_failed(rc, "an attribute delete callback"));
        }
    }
    Ok(())
}

/// Sets attribute `k` of `obj` (deleting the value it had).
pub(crate) fn set(obj: usize, attrs: &Attrs, k: c_int, value: usize) -> Result<(), MpiError> {
    let old = attrs
        .lock()
        .unwrap_or_else(PoisonError::into_inner)
        .get(&k)
        .copied();
    if let Some(v) = old {
        delete_one(obj, k, v)?;
    }
    attrs
        .lock()
        .unwrap_or_else(PoisonError::into_inner)
        .insert(k, value);
    Ok(())
}

/// Deletes attribute `k` of `obj`.
pub(crate) fn delete(
    obj: usize,
    attrs: &Attrs,
    k: c_int,
    call: &'static str,
) -> Result<(), MpiError> {
    let v = attrs
        .lock()
        .unwrap_or_else(PoisonError::into_inner)
        .get(&k)
        .copied()
        .ok_or_else(|| {
            MpiError::invalid(
                MPI_ERR_KEYVAL,
                format!("{call}: no attribute of keyval {k}"),
            )
        })?;
    delete_one(obj, k, v)?;
    attrs
        .lock()
        .unwrap_or_else(PoisonError::into_inner)
        .remove(&k);
    Ok(())
}

/// Copies the attributes of `old` into `new` through their copy callbacks (a dup).
pub(crate) fn copy_all(old_h: usize, old: &Attrs, new: &Attrs) -> Result<(), MpiError> {
    let items = old
        .lock()
        .unwrap_or_else(PoisonError::into_inner)
        .in_set_order();
    for (k, v) in items {
        let Some(kv) = KEYVALS.get(k as u32 as usize) else {
            continue;
        };
        match kv.copy {
            0 => {}
            1 => {
                new.lock()
                    .unwrap_or_else(PoisonError::into_inner)
                    .insert(k, v);
            }
            f => {
                // SAFETY: a user callback of the standard's copy type.
                let f: CopyFn = unsafe { std::mem::transmute(f) };
                let (mut outv, mut flag): (usize, c_int) = (0, 0);
                // SAFETY: the callback's contract: pointers to locals for the call.
                let rc = unsafe {
                    f(
                        old_h,
                        k,
                        kv.extra as *mut c_void,
                        v as *mut c_void,
                        (&mut outv as *mut usize).cast(),
                        &mut flag,
                    )
                };
                if rc != MPI_SUCCESS {
                    return Err(callback_failed(rc, "an attribute copy callback"));
                }
                if flag != 0 {
                    new.lock()
                        .unwrap_or_else(PoisonError::into_inner)
                        .insert(k, outv);
                }
            }
        }
    }
    Ok(())
}

/// Deletes every attribute of `obj` (a free, and `MPI_COMM_SELF`'s at `MPI_Finalize`),
/// the last set first (as MPI asks of `MPI_COMM_SELF`'s).
pub(crate) fn delete_all(obj: usize, attrs: &Attrs) -> Result<(), MpiError> {
    let mut items =
        std::mem::take(&mut *attrs.lock().unwrap_or_else(PoisonError::into_inner)).in_set_order();
    items.reverse();
    for (k, v) in items {
        delete_one(obj, k, v)?;
    }
    Ok(())
}

/// # Safety
/// `keyval` is writable.
pub(crate) unsafe fn create(
    of: Of,
    copy: *const c_void,
    delete: *const c_void,
    keyval: *mut c_int,
    extra: *mut c_void,
    call: &'static str,
) -> Result<(), MpiError> {
    let h = KEYVALS
        .insert(Keyval {
            of,
            copy: copy as usize,
            delete: delete as usize,
            extra: extra as usize,
        })
        .ok_or_else(|| MpiError::invalid(MPI_ERR_NO_MEM, "too many keyvals"))?;
    // SAFETY: the caller's contract.
    unsafe { out(keyval, h as c_int, call) }
}

/// # Safety
/// `keyval` is NULL or writable.
pub(crate) unsafe fn free(of: Of, keyval: *mut c_int, call: &'static str) -> Result<(), MpiError> {
    if keyval.is_null() {
        return Err(MpiError::invalid(
            MPI_ERR_ARG,
            format!("{call}: NULL keyval"),
        ));
    }
    // SAFETY: non-NULL (the caller's contract).
    let k = unsafe { *keyval };
    self::keyval(k, of, call)?;
    // The keyval stays known to the attributes that still use it (their delete
    // callbacks run when they go); only the program's handle is cleared.
    // SAFETY: as above.
    unsafe { *keyval = MPI_KEYVAL_INVALID };
    Ok(())
}

/// `MPI_Comm_create_keyval`.
#[no_mangle]
pub unsafe extern "C" fn MPI_Comm_create_keyval(
    comm_copy_attr_fn: *const c_void,
    comm_delete_attr_fn: *const c_void,
    comm_keyval: *mut c_int,
    extra_state: *mut c_void,
) -> c_int {
    // SAFETY: the caller's contract.
    on_self(unsafe {
        create(
            Of::Comm,
            comm_copy_attr_fn,
            comm_delete_attr_fn,
            comm_keyval,
            extra_state,
            "MPI_Comm_create_keyval",
        )
    })
}

/// `MPI_Keyval_create` (deprecated name of `MPI_Comm_create_keyval`).
#[no_mangle]
pub unsafe extern "C" fn MPI_Keyval_create(
    copy_fn: *const c_void,
    delete_fn: *const c_void,
    keyval: *mut c_int,
    extra_state: *mut c_void,
) -> c_int {
    // SAFETY: the caller's contract.
    unsafe { MPI_Comm_create_keyval(copy_fn, delete_fn, keyval, extra_state) }
}

/// `MPI_Comm_free_keyval`.
#[no_mangle]
pub unsafe extern "C" fn MPI_Comm_free_keyval(comm_keyval: *mut c_int) -> c_int {
    // SAFETY: the caller's contract.
    on_self(unsafe { free(Of::Comm, comm_keyval, "MPI_Comm_free_keyval") })
}

/// `MPI_Keyval_free`.
#[no_mangle]
pub unsafe extern "C" fn MPI_Keyval_free(keyval: *mut c_int) -> c_int {
    // SAFETY: the caller's contract.
    unsafe { MPI_Comm_free_keyval(keyval) }
}

/// `MPI_Type_create_keyval`.
#[no_mangle]
pub unsafe extern "C" fn MPI_Type_create_keyval(
    type_copy_attr_fn: *const c_void,
    type_delete_attr_fn: *const c_void,
    type_keyval: *mut c_int,
    extra_state: *mut c_void,
) -> c_int {
    // SAFETY: the caller's contract.
    on_self(unsafe {
        create(
            Of::Type,
            type_copy_attr_fn,
            type_delete_attr_fn,
            type_keyval,
            extra_state,
            "MPI_Type_create_keyval",
        )
    })
}

/// `MPI_Type_free_keyval`.
#[no_mangle]
pub unsafe extern "C" fn MPI_Type_free_keyval(type_keyval: *mut c_int) -> c_int {
    // SAFETY: the caller's contract.
    on_self(unsafe { free(Of::Type, type_keyval, "MPI_Type_free_keyval") })
}

/// Values of the predefined attributes, kept for the life of the process because
/// `MPI_Comm_get_attr` hands out pointers to them.
static TAG_UB: c_int = i32::MAX;
static WTIME_IS_GLOBAL: c_int = 0;
static IO_ANY: c_int = MPI_ANY_SOURCE;
static HOST_NONE: c_int = MPI_PROC_NULL;
static UNIVERSE: std::sync::OnceLock<c_int> = std::sync::OnceLock::new();
/// `MPI_APPNUM`: a spawned process's command number (`comm/spawn.rs`), else 0.
static APPNUM: std::sync::OnceLock<c_int> = std::sync::OnceLock::new();
static LASTUSEDCODE: std::sync::atomic::AtomicI32 =
    std::sync::atomic::AtomicI32::new(MPI_ERR_LASTCODE);

/// Raises `MPI_LASTUSEDCODE` to `code` (a user class or code was added).
pub(crate) fn set_last_used_code(code: c_int) {
    LASTUSEDCODE.fetch_max(code, std::sync::atomic::Ordering::Relaxed);
}

/// `MPI_Comm_get_attr`: the predefined attributes (`MPI_TAG_UB`, `MPI_HOST`, `MPI_IO`,
/// `MPI_WTIME_IS_GLOBAL`, `MPI_UNIVERSE_SIZE`, `MPI_APPNUM`, `MPI_LASTUSEDCODE`) as
/// pointers to `int`, and cached values.
#[no_mangle]
pub unsafe extern "C" fn MPI_Comm_get_attr(
    comm: MPI_Comm,
    comm_keyval: c_int,
    attribute_val: *mut c_void,
    flag: *mut c_int,
) -> c_int {
    let r = (|| {
        let call = "MPI_Comm_get_attr";
        let c = self::comm(comm, call)?;
        let size = rt(call)?.world_comm.comm.size() as c_int;
        let predefined: Option<&'static c_int> = match comm_keyval {
            MPI_TAG_UB => Some(&TAG_UB),
            MPI_HOST => Some(&HOST_NONE),
            MPI_IO => Some(&IO_ANY),
            MPI_WTIME_IS_GLOBAL => Some(&WTIME_IS_GLOBAL),
            // The world and as many more processes as this process has CPUs to run on:
            // what a spawn may start without waiting (`MPI_Comm_spawn` runs the
            // children on this host; mpi4py.futures sizes its default pool so).
            MPI_UNIVERSE_SIZE => Some(UNIVERSE.get_or_init(|| {
                let cpus = std::thread::available_parallelism().map_or(1, |n| n.get());
                size.saturating_add(c_int::try_from(cpus).unwrap_or(c_int::MAX))
            })),
            MPI_APPNUM => Some(APPNUM.get_or_init(|| {
                std::env::var(crate::comm::APPNUM_VAR)
                    .ok()
                    .and_then(|v| v.trim().parse().ok())
                    .unwrap_or(0)
            })),
            MPI_LASTUSEDCODE => Some(&WTIME_IS_GLOBAL),
            _ => None,
        };
        let value = match predefined {
            // An AtomicI32 has the layout of an int.
            Some(_) if comm_keyval == MPI_LASTUSEDCODE => Some(LASTUSEDCODE.as_ptr() as usize),
            Some(p) => Some(std::ptr::from_ref(p) as usize),
            None => {
                keyval(comm_keyval, Of::Comm, call)?;
                c.attrs
                    .lock()
                    .unwrap_or_else(PoisonError::into_inner)
                    .get(&comm_keyval)
                    .copied()
            }
        };
        // SAFETY: the caller's contract.
        unsafe { out(flag, c_int::from(value.is_some()), call) }?;
        if let Some(v) = value {
            // SAFETY: the caller's contract: `attribute_val` points to a `void *`.
            unsafe { out(attribute_val.cast::<usize>(), v, call) }?;
        }
        Ok(())
    })();
    on_comm(comm, r)
}

/// `MPI_Comm_set_attr`.
#[no_mangle]
pub unsafe extern "C" fn MPI_Comm_set_attr(
    comm: MPI_Comm,
    comm_keyval: c_int,
    attribute_val: *mut c_void,
) -> c_int {
    let r = (|| {
        let call = "MPI_Comm_set_attr";
        let c = self::comm(comm, call)?;
        keyval(comm_keyval, Of::Comm, call)?;
        set(comm, &c.attrs, comm_keyval, attribute_val as usize)
    })();
    on_comm(comm, r)
}

/// `MPI_Comm_delete_attr`.
#[no_mangle]
pub unsafe extern "C" fn MPI_Comm_delete_attr(comm: MPI_Comm, comm_keyval: c_int) -> c_int {
    let r = (|| {
        let call = "MPI_Comm_delete_attr";
        let c = self::comm(comm, call)?;
        keyval(comm_keyval, Of::Comm, call)?;
        delete(comm, &c.attrs, comm_keyval, call)
    })();
    on_comm(comm, r)
}

/// `MPI_Attr_get` (deprecated): as `MPI_Comm_get_attr`.
#[no_mangle]
pub unsafe extern "C" fn MPI_Attr_get(
    comm: MPI_Comm,
    keyval: c_int,
    attribute_val: *mut c_void,
    flag: *mut c_int,
) -> c_int {
    // SAFETY: the caller's contract.
    unsafe { MPI_Comm_get_attr(comm, keyval, attribute_val, flag) }
}

/// `MPI_Attr_put` (deprecated): as `MPI_Comm_set_attr`.
#[no_mangle]
pub unsafe extern "C" fn MPI_Attr_put(
    comm: MPI_Comm,
    keyval: c_int,
    attribute_val: *mut c_void,
) -> c_int {
    // SAFETY: the caller's contract.
    unsafe { MPI_Comm_set_attr(comm, keyval, attribute_val) }
}

/// `MPI_Attr_delete` (deprecated): as `MPI_Comm_delete_attr`.
#[no_mangle]
pub unsafe extern "C" fn MPI_Attr_delete(comm: MPI_Comm, keyval: c_int) -> c_int {
    // SAFETY: the caller's contract.
    unsafe { MPI_Comm_delete_attr(comm, keyval) }
}
