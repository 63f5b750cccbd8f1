//! Info objects: ordered (key, value) strings (`MPI_Info_*`), and `MPI_INFO_ENV`.

use std::ffi::{c_char, c_int, CStr};
use std::sync::{Arc, Mutex, PoisonError};

use crate::abi::*;
use crate::env::errhandler::on_self;
use crate::env::error::{put_string, MpiError};
use crate::handles::{Kind, Table};
use crate::out::out;

/// An info object's entries, in the order their keys were first set.
#[derive(Default)]
pub(crate) struct InfoObj(Mutex<Vec<(String, String)>>);

static INFOS: Table<InfoObj> = Table::new(Kind::Info);

fn env_info() -> Arc<InfoObj> {
    static ENV: std::sync::OnceLock<Arc<InfoObj>> = std::sync::OnceLock::new();
    ENV.get_or_init(|| {
        let mut v = Vec::new();
        let args: Vec<String> = std::env::args().collect();
        if let Some(c) = args.first() {
            v.push(("command".to_string(), c.clone()));
        }
        if args.len() > 1 {
            v.push(("argv".to_string(), args[1..].join(" ")));
        }
        if let Ok(d) = std::env::current_dir() {
            v.push(("wdir".to_string(), d.display().to_string()));
        }
        v.push(("arch".to_string(), std::env::consts::ARCH.to_string()));
        Arc::new(InfoObj(Mutex::new(v)))
    })
    .clone()
}

pub(crate) fn info(h: MPI_Info) -> Result<Arc<InfoObj>, MpiError> {
    if h == MPI_INFO_ENV {
        return Ok(env_info());
    }
    INFOS.get(h).ok_or(MpiError::Handle {
        class: MPI_ERR_INFO,
        what: "info",
        handle: h,
    })
}

/// A new info object holding `entries`.
pub(crate) fn make(entries: Vec<(String, String)>) -> Result<MPI_Info, MpiError> {
    INFOS
        .insert(InfoObj(Mutex::new(entries)))
        .ok_or_else(|| MpiError::invalid(MPI_ERR_NO_MEM, "too many info objects"))
}

/// The hints of `entries` an object keeps, as MPI's `get_info` calls report the hints
/// in use: the standard's (`mpi_` keys, and `names`, those of the object's kind that
/// have no prefix); others (`invalid_test_key`, another MPI's own) are ignored.
pub(crate) fn standard(entries: Vec<(String, String)>, names: &[&str]) -> Vec<(String, String)> {
    entries
        .into_iter()
        .filter(|(k, _)| k.starts_with("mpi_") || names.contains(&k.as_str()))
        .collect()
}

/// Window hints the standard names without the `mpi_` prefix.
pub(crate) const WIN_HINTS: &[&str] = &[
    "no_locks",
    "accumulate_ordering",
    "accumulate_ops",
    "same_size",
    "same_disp_unit",
    "alloc_shared_noncontig",
];

/// The entries of an info argument (`MPI_INFO_NULL`: none).
pub(crate) fn entries(h: MPI_Info) -> Result<Vec<(String, String)>, MpiError> {
    if h == MPI_INFO_NULL {
        return Ok(Vec::new());
    }
    Ok(info(h)?
        .0
        .lock()
        .unwrap_or_else(PoisonError::into_inner)
        .clone())
}

/// # Safety
/// `p` is NULL or NUL-terminated.
unsafe fn key(p: *const c_char, call: &'static str) -> Result<String, MpiError> {
    if p.is_null() {
        return Err(MpiError::invalid(
            MPI_ERR_INFO_KEY,
            format!("{call}: NULL key"),
        ));
    }
    // SAFETY: NUL-terminated (the caller's contract).
    let k = unsafe { CStr::from_ptr(p) }.to_string_lossy().into_owned();
    if k.is_empty() || k.len() >= MPI_MAX_INFO_KEY as usize {
        return Err(MpiError::invalid(
            MPI_ERR_INFO_KEY,
            format!("{call}: key {k:?} is empty or longer than MPI_MAX_INFO_KEY"),
        ));
    }
    Ok(k)
}

/// `MPI_Info_create`.
#[no_mangle]
pub unsafe extern "C" fn MPI_Info_create(info: *mut MPI_Info) -> c_int {
    // SAFETY: the caller's contract.
    on_self(make(Vec::new()).and_then(|h| unsafe { out(info, h, "MPI_Info_create") }))
}

/// `MPI_Info_create_env`: a copy of `MPI_INFO_ENV`.
#[no_mangle]
pub unsafe extern "C" fn MPI_Info_create_env(
    argc: c_int,
    argv: *mut *mut c_char,
    info: *mut MPI_Info,
) -> c_int {
    let _ = (argc, argv);
    let r = (|| {
        let v = env_info()
            .0
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .clone();
        // SAFETY: the caller's contract.
        unsafe { out(info, make(v)?, "MPI_Info_create_env") }
    })();
    on_self(r)
}

/// `MPI_Info_set`.
#[no_mangle]
pub unsafe extern "C" fn MPI_Info_set(
    info: MPI_Info,
    key: *const c_char,
    value: *const c_char,
) -> c_int {
    let r = (|| {
        let call = "MPI_Info_set";
        if info == MPI_INFO_ENV {
            return Err(MpiError::invalid(
                MPI_ERR_INFO,
                "MPI_Info_set: MPI_INFO_ENV cannot be changed",
            ));
        }
        let i = self::info(info)?;
        // SAFETY: the caller's contract.
        let k = unsafe { self::key(key, call)? };
        if value.is_null() {
            return Err(MpiError::invalid(
                MPI_ERR_INFO_VALUE,
                "MPI_Info_set: NULL value",
            ));
        }
        // SAFETY: NUL-terminated (the caller's contract).
        let v = unsafe { CStr::from_ptr(value) }
            .to_string_lossy()
            .into_owned();
        if v.len() >= MPI_MAX_INFO_VAL as usize {
            return Err(MpiError::invalid(
                MPI_ERR_INFO_VALUE,
                "MPI_Info_set: value longer than MPI_MAX_INFO_VAL",
            ));
        }
        let mut g = i.0.lock().unwrap_or_else(PoisonError::into_inner);
        match g.iter_mut().find(|(kk, _)| *kk == k) {
            Some(e) => e.1 = v,
            None => g.push((k, v)),
        }
        Ok(())
    })();
    on_self(r)
}

/// `MPI_Info_delete`.
#[no_mangle]
pub unsafe extern "C" fn MPI_Info_delete(info: MPI_Info, key: *const c_char) -> c_int {
    let r = (|| {
        let call = "MPI_Info_delete";
        let i = self::info(info)?;
        // SAFETY: the caller's contract.
        let k = unsafe { self::key(key, call)? };
        let mut g = i.0.lock().unwrap_or_else(PoisonError::into_inner);
        let p = g.iter().position(|(kk, _)| *kk == k).ok_or_else(|| {
            MpiError::invalid(MPI_ERR_INFO_NOKEY, format!("{call}: no key {k:?}"))
        })?;
        g.remove(p);
        Ok(())
    })();
    on_self(r)
}

fn lookup(
    info: MPI_Info,
    key: *const c_char,
    call: &'static str,
) -> Result<Option<String>, MpiError> {
    let i = self::info(info)?;
    // SAFETY: MPI's contract: a NUL-terminated key.
    let k = unsafe { self::key(key, call)? };
    let g = i.0.lock().unwrap_or_else(PoisonError::into_inner);
    Ok(g.iter().find(|(kk, _)| *kk == k).map(|(_, v)| v.clone()))
}

/// `MPI_Info_get` (deprecated): at most `valuelen` characters of the value.
#[no_mangle]
pub unsafe extern "C" fn MPI_Info_get(
    info: MPI_Info,
    key: *const c_char,
    valuelen: c_int,
    value: *mut c_char,
    flag: *mut c_int,
) -> c_int {
    let r = lookup(info, key, "MPI_Info_get").and_then(|v| {
        if let Some(v) = &v {
            // SAFETY: `valuelen + 1` writable bytes (the standard's contract).
            unsafe { put_string(v, value, valuelen.max(0) as usize + 1, std::ptr::null_mut()) };
        }
        // SAFETY: the caller's contract.
        unsafe { out(flag, c_int::from(v.is_some()), "MPI_Info_get") }
    });
    on_self(r)
}

/// `MPI_Info_get_string`: the value into `buflen` bytes; `buflen` becomes its length
/// plus one.
#[no_mangle]
pub unsafe extern "C" fn MPI_Info_get_string(
    info: MPI_Info,
    key: *const c_char,
    buflen: *mut c_int,
    value: *mut c_char,
    flag: *mut c_int,
) -> c_int {
    let r = lookup(info, key, "MPI_Info_get_string").and_then(|v| {
        if buflen.is_null() {
            return Err(MpiError::invalid(
                MPI_ERR_ARG,
                "MPI_Info_get_string: NULL buflen",
            ));
        }
        if let Some(v) = &v {
            // SAFETY: non-NULL (the caller's contract).
            let cap = unsafe { *buflen };
            if cap > 0 {
                // SAFETY: `cap` writable bytes (the caller's contract).
                unsafe { put_string(v, value, cap as usize, std::ptr::null_mut()) };
            }
            // SAFETY: as above.
            unsafe { *buflen = v.len() as c_int + 1 };
        }
        // SAFETY: the caller's contract.
        unsafe { out(flag, c_int::from(v.is_some()), "MPI_Info_get_string") }
    });
    on_self(r)
}

/// `MPI_Info_get_valuelen` (deprecated).
#[no_mangle]
pub unsafe extern "C" fn MPI_Info_get_valuelen(
    info: MPI_Info,
    key: *const c_char,
    valuelen: *mut c_int,
    flag: *mut c_int,
) -> c_int {
    let r = lookup(info, key, "MPI_Info_get_valuelen").and_then(|v| {
        if let Some(v) = &v {
            // SAFETY: the caller's contract.
            unsafe { out(valuelen, v.len() as c_int, "MPI_Info_get_valuelen")? };
        }
        // SAFETY: the caller's contract.
        unsafe { out(flag, c_int::from(v.is_some()), "MPI_Info_get_valuelen") }
    });
    on_self(r)
}

/// `MPI_Info_get_nkeys`.
#[no_mangle]
pub unsafe extern "C" fn MPI_Info_get_nkeys(info: MPI_Info, nkeys: *mut c_int) -> c_int {
    let r = self::info(info).and_then(|i| {
        let n = i.0.lock().unwrap_or_else(PoisonError::into_inner).len() as c_int;
        // SAFETY: the caller's contract.
        unsafe { out(nkeys, n, "MPI_Info_get_nkeys") }
    });
    on_self(r)
}

/// `MPI_Info_get_nthkey`.
#[no_mangle]
pub unsafe extern "C" fn MPI_Info_get_nthkey(info: MPI_Info, n: c_int, key: *mut c_char) -> c_int {
    let r = self::info(info).and_then(|i| {
        let g = i.0.lock().unwrap_or_else(PoisonError::into_inner);
        let k = usize::try_from(n)
            .ok()
            .and_then(|n| g.get(n))
            .ok_or_else(|| {
                MpiError::invalid(
                    MPI_ERR_ARG,
                    format!("MPI_Info_get_nthkey: no key number {n} of {}", g.len()),
                )
            })?;
        // SAFETY: MPI_MAX_INFO_KEY bytes (the standard's contract).
        unsafe { put_string(&k.0, key, MPI_MAX_INFO_KEY as usize, std::ptr::null_mut()) };
        Ok(())
    });
    on_self(r)
}

/// `MPI_Info_dup`.
#[no_mangle]
pub unsafe extern "C" fn MPI_Info_dup(info: MPI_Info, newinfo: *mut MPI_Info) -> c_int {
    let r = (|| {
        let v = self::info(info)?
            .0
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .clone();
        // SAFETY: the caller's contract.
        unsafe { out(newinfo, make(v)?, "MPI_Info_dup") }
    })();
    on_self(r)
}

/// `MPI_Info_free`.
#[no_mangle]
pub unsafe extern "C" fn MPI_Info_free(info: *mut MPI_Info) -> c_int {
    let r = (|| {
        if info.is_null() {
            return Err(MpiError::invalid(MPI_ERR_ARG, "MPI_Info_free: NULL"));
        }
        // SAFETY: non-NULL (the caller's contract).
        let h = unsafe { *info };
        if h == MPI_INFO_ENV {
            return Err(MpiError::invalid(
                MPI_ERR_INFO,
                "MPI_Info_free: MPI_INFO_ENV cannot be freed",
            ));
        }
        INFOS.remove(h).ok_or(MpiError::Handle {
            class: MPI_ERR_INFO,
            what: "info",
            handle: h,
        })?;
        // SAFETY: as above.
        unsafe { *info = MPI_INFO_NULL };
        Ok(())
    })();
    on_self(r)
}
