//! What datatypes and statuses say about themselves in their large-count (`_c`) forms,
//! envelopes and contents, names, and `MPI_Type_match_size` / `MPI_Type_get_value_index`.

use std::ffi::{c_char, c_int, c_void, CStr};
use std::sync::PoisonError;

use crate::abi::*;
use crate::datatype::{dtype, Basic, TypeObj};
use crate::env::errhandler::on_self;
use crate::env::error::{put_string, MpiError};
use crate::out::out;

/// # Safety
/// `p` is NULL or holds `v.len()` writable values.
unsafe fn copy_out<T: Copy>(
    p: *mut T,
    v: &[T],
    max: i64,
    call: &'static str,
) -> Result<(), MpiError> {
    if v.is_empty() {
        return Ok(());
    }
    if p.is_null() || max < 0 || (max as usize) < v.len() {
        return Err(MpiError::invalid(
            MPI_ERR_ARG,
            format!(
                "{call}: an output array is NULL or too short ({max} for {})",
                v.len()
            ),
        ));
    }
    // SAFETY: `v.len()` writable values (checked above, the caller's contract).
    unsafe { std::ptr::copy_nonoverlapping(v.as_ptr(), p, v.len()) };
    Ok(())
}

/// `MPI_Type_get_envelope`.
#[no_mangle]
pub unsafe extern "C" fn MPI_Type_get_envelope(
    datatype: MPI_Datatype,
    num_integers: *mut c_int,
    num_addresses: *mut c_int,
    num_datatypes: *mut c_int,
    combiner: *mut c_int,
) -> c_int {
    let r = (|| {
        let call = "MPI_Type_get_envelope";
        let t = dtype(datatype)?;
        let e = &t.envelope;
        if !e.counts.is_empty() {
            return Err(MpiError::invalid(
                MPI_ERR_TYPE,
                format!(
                    "{call}: the datatype was made with large counts (use MPI_Type_get_envelope_c)"
                ),
            ));
        }
        // SAFETY: the caller's contract.
        unsafe {
            out(num_integers, e.ints.len() as c_int, call)?;
            out(num_addresses, e.aints.len() as c_int, call)?;
            out(num_datatypes, e.types.len() as c_int, call)?;
            out(combiner, e.combiner, call)
        }
    })();
    on_self(r)
}

/// `MPI_Type_get_envelope_c`.
#[no_mangle]
pub unsafe extern "C" fn MPI_Type_get_envelope_c(
    datatype: MPI_Datatype,
    num_integers: *mut MPI_Count,
    num_addresses: *mut MPI_Count,
    num_large_counts: *mut MPI_Count,
    num_datatypes: *mut MPI_Count,
    combiner: *mut c_int,
) -> c_int {
    let r = (|| {
        let call = "MPI_Type_get_envelope_c";
        let t = dtype(datatype)?;
        let e = &t.envelope;
        // SAFETY: the caller's contract.
        unsafe {
            out(num_integers, e.ints.len() as MPI_Count, call)?;
            out(num_addresses, e.aints.len() as MPI_Count, call)?;
            out(num_large_counts, e.counts.len() as MPI_Count, call)?;
            out(num_datatypes, e.types.len() as MPI_Count, call)?;
            out(combiner, e.combiner, call)
        }
    })();
    on_self(r)
}

/// New handles of the types a datatype was made of.
fn handles(e: &crate::datatype::Envelope) -> Result<Vec<MPI_Datatype>, MpiError> {
    e.types
        .iter()
        .zip(&e.keep)
        .map(|(&h, t)| crate::datatype::another_handle(h, t))
        .collect()
}

fn contents(t: &TypeObj, call: &'static str) -> Result<(), MpiError> {
    if t.envelope.combiner == MPI_COMBINER_NAMED {
        return Err(MpiError::invalid(
            MPI_ERR_TYPE,
            format!("{call}: a predefined datatype has no contents"),
        ));
    }
    Ok(())
}

/// `MPI_Type_get_contents`.
#[no_mangle]
pub unsafe extern "C" fn MPI_Type_get_contents(
    datatype: MPI_Datatype,
    max_integers: c_int,
    max_addresses: c_int,
    max_datatypes: c_int,
    array_of_integers: *mut c_int,
    array_of_addresses: *mut MPI_Aint,
    array_of_datatypes: *mut MPI_Datatype,
) -> c_int {
    let r = (|| {
        let call = "MPI_Type_get_contents";
        let t = dtype(datatype)?;
        contents(&t, call)?;
        let e = &t.envelope;
        // SAFETY: the caller's contract.
        unsafe {
            copy_out(array_of_integers, &e.ints, max_integers.into(), call)?;
            copy_out(array_of_addresses, &e.aints, max_addresses.into(), call)?;
            copy_out(array_of_datatypes, &handles(e)?, max_datatypes.into(), call)
        }
    })();
    on_self(r)
}

/// `MPI_Type_get_contents_c`.
#[no_mangle]
pub unsafe extern "C" fn MPI_Type_get_contents_c(
    datatype: MPI_Datatype,
    max_integers: MPI_Count,
    max_addresses: MPI_Count,
    max_large_counts: MPI_Count,
    max_datatypes: MPI_Count,
    array_of_integers: *mut c_int,
    array_of_addresses: *mut MPI_Aint,
    array_of_large_counts: *mut MPI_Count,
    array_of_datatypes: *mut MPI_Datatype,
) -> c_int {
    let r = (|| {
        let call = "MPI_Type_get_contents_c";
        let t = dtype(datatype)?;
        contents(&t, call)?;
        let e = &t.envelope;
        // SAFETY: the caller's contract.
        unsafe {
            copy_out(array_of_integers, &e.ints, max_integers, call)?;
            copy_out(array_of_addresses, &e.aints, max_addresses, call)?;
            copy_out(array_of_large_counts, &e.counts, max_large_counts, call)?;
            copy_out(array_of_datatypes, &handles(e)?, max_datatypes, call)
        }
    })();
    on_self(r)
}

macro_rules! extent_c {
    ($name:ident, $lb:ident, $ext:ident) => {
        #[doc = concat!("`", stringify!($name), "`.")]
        #[no_mangle]
        pub unsafe extern "C" fn $name(
            datatype: MPI_Datatype,
            lb: *mut MPI_Count,
            extent: *mut MPI_Count,
        ) -> c_int {
            let r = dtype(datatype).and_then(|t| {
                // SAFETY: the caller's contract.
                unsafe {
                    out(lb, t.$lb as MPI_Count, stringify!($name))?;
                    out(extent, t.$ext as MPI_Count, stringify!($name))
                }
            });
            on_self(r)
        }
    };
}
extent_c!(MPI_Type_get_extent_c, lb, extent);
extent_c!(MPI_Type_get_extent_x, lb, extent);
extent_c!(MPI_Type_get_true_extent_c, true_lb, true_extent);
extent_c!(MPI_Type_get_true_extent_x, true_lb, true_extent);

/// `MPI_Type_size_x`.
#[no_mangle]
pub unsafe extern "C" fn MPI_Type_size_x(datatype: MPI_Datatype, size: *mut MPI_Count) -> c_int {
    // SAFETY: the caller's contract.
    on_self(
        dtype(datatype).and_then(|t| unsafe { out(size, t.size as MPI_Count, "MPI_Type_size_x") }),
    )
}

/// `MPI_Type_set_name`.
#[no_mangle]
pub unsafe extern "C" fn MPI_Type_set_name(
    datatype: MPI_Datatype,
    type_name: *const c_char,
) -> c_int {
    let r = (|| {
        let t = dtype(datatype)?;
        if type_name.is_null() {
            return Err(MpiError::invalid(
                MPI_ERR_ARG,
                "MPI_Type_set_name: NULL name",
            ));
        }
        // SAFETY: NUL-terminated (the caller's contract).
        let s = unsafe { CStr::from_ptr(type_name) }.to_string_lossy();
        *t.name.lock().unwrap_or_else(PoisonError::into_inner) =
            s.chars().take(MPI_MAX_OBJECT_NAME as usize - 1).collect();
        Ok(())
    })();
    on_self(r)
}

/// `MPI_Type_get_name`: the name set, or the predefined type's own (`MPI_INT`).
#[no_mangle]
pub unsafe extern "C" fn MPI_Type_get_name(
    datatype: MPI_Datatype,
    type_name: *mut c_char,
    resultlen: *mut c_int,
) -> c_int {
    if datatype == MPI_DATATYPE_NULL {
        // SAFETY: the standard's contract: MPI_MAX_OBJECT_NAME bytes.
        unsafe {
            put_string(
                "MPI_DATATYPE_NULL",
                type_name,
                MPI_MAX_OBJECT_NAME as usize,
                resultlen,
            )
        };
        return MPI_SUCCESS;
    }
    let r = dtype(datatype).map(|t| {
        let mut name = t
            .name
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .clone();
        if name.is_empty() {
            if let Some(h) = t.named {
                // The standard ABI makes MPI_C_COMPLEX and MPI_C_FLOAT_COMPLEX one
                // handle, and MPI_LONG_LONG_INT and MPI_LONG_LONG: each is named by
                // the older name (MPI 2.2's, as MPICH names them).
                name = if h == MPI_C_FLOAT_COMPLEX {
                    "MPI_C_COMPLEX".to_string()
                } else if h == MPI_LONG_LONG {
                    "MPI_LONG_LONG_INT".to_string()
                } else {
                    DATATYPES
                        .iter()
                        .find(|(_, v)| *v as usize == h)
                        .map(|(n, _)| n.to_string())
                        .unwrap_or_default()
                };
            }
        }
        // SAFETY: the standard's contract: MPI_MAX_OBJECT_NAME bytes.
        unsafe { put_string(&name, type_name, MPI_MAX_OBJECT_NAME as usize, resultlen) };
    });
    on_self(r)
}

/// `MPI_Type_match_size`: the predefined type of a class and size.
#[no_mangle]
pub unsafe extern "C" fn MPI_Type_match_size(
    typeclass: c_int,
    size: c_int,
    datatype: *mut MPI_Datatype,
) -> c_int {
    let r = (|| {
        let h = match (typeclass, size) {
            (MPI_TYPECLASS_INTEGER, 1) => MPI_INT8_T,
            (MPI_TYPECLASS_INTEGER, 2) => MPI_INT16_T,
            (MPI_TYPECLASS_INTEGER, 4) => MPI_INT32_T,
            (MPI_TYPECLASS_INTEGER, 8) => MPI_INT64_T,
            (MPI_TYPECLASS_INTEGER, 16) => MPI_INTEGER16,
            (MPI_TYPECLASS_REAL, 2) => MPI_REAL2,
            (MPI_TYPECLASS_REAL, 4) => MPI_FLOAT,
            (MPI_TYPECLASS_REAL, 8) => MPI_DOUBLE,
            (MPI_TYPECLASS_REAL, 16) => MPI_LONG_DOUBLE,
            (MPI_TYPECLASS_COMPLEX, 4) => MPI_COMPLEX4,
            (MPI_TYPECLASS_COMPLEX, 8) => MPI_C_FLOAT_COMPLEX,
            (191, 1) => MPI_LOGICAL1,
            (191, 2) => MPI_LOGICAL2,
            (191, 4) => MPI_LOGICAL4,
            (191, 8) => MPI_LOGICAL8,
            (191, 16) => MPI_LOGICAL16,
            (MPI_TYPECLASS_COMPLEX, 16) => MPI_C_DOUBLE_COMPLEX,
            (MPI_TYPECLASS_COMPLEX, 32) => MPI_C_LONG_DOUBLE_COMPLEX,
            _ => {
                return Err(MpiError::invalid(
                    MPI_ERR_ARG,
                    format!("MPI_Type_match_size: no type of class {typeclass} and size {size}"),
                ))
            }
        };
        // SAFETY: the caller's contract.
        unsafe { out(datatype, h, "MPI_Type_match_size") }
    })();
    on_self(r)
}

/// `MPI_Type_get_value_index`: the predefined pair type of a value and an index type
/// (`MPI_DATATYPE_NULL` when there is none).
#[no_mangle]
pub unsafe extern "C" fn MPI_Type_get_value_index(
    value_type: MPI_Datatype,
    index_type: MPI_Datatype,
    pair_type: *mut MPI_Datatype,
) -> c_int {
    if dtype(value_type).is_err() || dtype(index_type).is_err() {
        return on_self(Err(MpiError::invalid(
            MPI_ERR_TYPE,
            "MPI_Type_get_value_index: an invalid datatype",
        )));
    }
    let h = match (value_type, index_type) {
        (MPI_FLOAT, MPI_INT) => MPI_FLOAT_INT,
        (MPI_DOUBLE, MPI_INT) => MPI_DOUBLE_INT,
        (MPI_LONG, MPI_INT) => MPI_LONG_INT,
        (MPI_INT, MPI_INT) => MPI_2INT,
        (MPI_SHORT, MPI_INT) => MPI_SHORT_INT,
        (MPI_LONG_DOUBLE, MPI_INT) => MPI_LONG_DOUBLE_INT,
        (MPI_REAL, MPI_REAL) => MPI_2REAL,
        (MPI_DOUBLE_PRECISION, MPI_DOUBLE_PRECISION) => MPI_2DOUBLE_PRECISION,
        (MPI_INTEGER, MPI_INTEGER) => MPI_2INTEGER,
        _ => MPI_DATATYPE_NULL,
    };
    // SAFETY: the caller's contract.
    on_self(unsafe { out(pair_type, h, "MPI_Type_get_value_index") })
}

fn status_len(s: &MPI_Status) -> u64 {
    s.MPI_internal[0] as u32 as u64 | ((s.MPI_internal[1] as u32 as u64) << 32)
}

/// The bytes `count` basic elements of `t` take (`MPI_Status_set_elements`): whole
/// elements of `t`, then the first basic elements of one more.
pub(crate) fn bytes_of_elements(count: u64, t: &TypeObj) -> u64 {
    if t.basic.is_some() || t.size == 0 {
        return count * t.basic_size.max(1) as u64;
    }
    match crate::datatype::external::basic_sizes(t) {
        Ok(sizes) if !sizes.is_empty() => {
            let per = sizes.len() as u64;
            let rest: usize = sizes[..(count % per) as usize].iter().sum();
            count / per * t.size as u64 + rest as u64
        }
        _ => count * t.size as u64,
    }
}

/// What `MPI_Get_elements` (`basic`) or `MPI_Get_count` reports for a message of `len`
/// bytes of `t`: basic elements (whole elements' and a partial one's, `MPI_UNDEFINED`
/// when the bytes end inside a basic element) or whole elements.
pub(crate) fn elements_of(len: u64, t: &TypeObj, basic: bool) -> MPI_Count {
    if basic && t.basic.is_none() && t.size > 0 {
        if let Ok(sizes) = crate::datatype::external::basic_sizes(t) {
            let whole = len / t.size as u64;
            let mut rest = len % t.size as u64;
            let mut n = whole * sizes.len() as u64;
            for s in sizes {
                if rest == 0 {
                    break;
                }
                if rest < s as u64 {
                    return MPI_UNDEFINED.into();
                }
                rest -= s as u64;
                n += 1;
            }
            return n as MPI_Count;
        }
    }
    if basic
        && t.basic
            .is_some_and(|b| b != Basic::Opaque || t.basic_size == 1)
        && t.basic_size > 0
    {
        return if len % t.basic_size as u64 == 0 {
            (len / t.basic_size as u64) as MPI_Count
        } else {
            MPI_UNDEFINED.into()
        };
    }
    if t.size == 0 {
        return 0;
    }
    if len % t.size as u64 != 0 {
        return MPI_UNDEFINED.into();
    }
    (len / t.size as u64) as MPI_Count
}

macro_rules! count_c {
    ($name:ident, $basic:expr) => {
        #[doc = concat!("`", stringify!($name), "`.")]
        #[no_mangle]
        pub unsafe extern "C" fn $name(
            status: *const MPI_Status,
            datatype: MPI_Datatype,
            count: *mut MPI_Count,
        ) -> c_int {
            let r = (|| {
                if status.is_null() {
                    return Err(MpiError::invalid(
                        MPI_ERR_ARG,
                        concat!(stringify!($name), ": NULL status"),
                    ));
                }
                let t = dtype(datatype)?;
                // SAFETY: non-NULL (the caller's contract).
                let len = status_len(unsafe { &*status });
                // SAFETY: the caller's contract.
                unsafe { out(count, elements_of(len, &t, $basic), stringify!($name)) }
            })();
            on_self(r)
        }
    };
}
count_c!(MPI_Get_count_c, false);
count_c!(MPI_Get_elements_c, true);
count_c!(MPI_Get_elements_x, true);

macro_rules! set_elements_c {
    ($name:ident) => {
        #[doc = concat!("`", stringify!($name), "`.")]
        #[no_mangle]
        pub unsafe extern "C" fn $name(
            status: *mut MPI_Status,
            datatype: MPI_Datatype,
            count: MPI_Count,
        ) -> c_int {
            let r = (|| {
                let t = dtype(datatype)?;
                if status.is_null() || count < 0 {
                    return Err(MpiError::invalid(
                        MPI_ERR_ARG,
                        concat!(stringify!($name), ": NULL status or negative count"),
                    ));
                }
                let len = bytes_of_elements(count as u64, &t);
                // SAFETY: non-NULL (the caller's contract).
                unsafe {
                    (*status).MPI_internal[0] = len as u32 as c_int;
                    (*status).MPI_internal[1] = (len >> 32) as u32 as c_int;
                }
                Ok(())
            })();
            on_self(r)
        }
    };
}
set_elements_c!(MPI_Status_set_elements_c);
set_elements_c!(MPI_Status_set_elements_x);

macro_rules! status_field {
    ($set:ident, $get:ident; $field:ident) => {
        #[doc = concat!("`", stringify!($set), "`.")]
        #[no_mangle]
        pub unsafe extern "C" fn $set(status: *mut MPI_Status, v: c_int) -> c_int {
            if status.is_null() {
                return on_self(Err(MpiError::invalid(
                    MPI_ERR_ARG,
                    concat!(stringify!($set), ": NULL status"),
                )));
            }
            // SAFETY: non-NULL (the caller's contract).
            unsafe { (*status).$field = v };
            MPI_SUCCESS
        }

        #[doc = concat!("`", stringify!($get), "`.")]
        #[no_mangle]
        pub unsafe extern "C" fn $get(status: *const MPI_Status, v: *mut c_int) -> c_int {
            if status.is_null() {
                return on_self(Err(MpiError::invalid(
                    MPI_ERR_ARG,
                    concat!(stringify!($get), ": NULL status"),
                )));
            }
            // SAFETY: non-NULL (the caller's contract).
            on_self(unsafe { out(v, (*status).$field, stringify!($get)) })
        }
    };
}
status_field!(MPI_Status_set_source, MPI_Status_get_source; MPI_SOURCE);
status_field!(MPI_Status_set_tag, MPI_Status_get_tag; MPI_TAG);
status_field!(MPI_Status_set_error, MPI_Status_get_error; MPI_ERROR);

/// `MPI_Status_set_cancelled`.
#[no_mangle]
pub unsafe extern "C" fn MPI_Status_set_cancelled(status: *mut MPI_Status, flag: c_int) -> c_int {
    if status.is_null() {
        return on_self(Err(MpiError::invalid(
            MPI_ERR_ARG,
            "MPI_Status_set_cancelled: NULL status",
        )));
    }
    // SAFETY: non-NULL (the caller's contract).
    unsafe { (*status).MPI_internal[2] = c_int::from(flag != 0) };
    MPI_SUCCESS
}

/// `MPI_Pack_size_c`.
#[no_mangle]
pub unsafe extern "C" fn MPI_Pack_size_c(
    incount: MPI_Count,
    datatype: MPI_Datatype,
    comm: MPI_Comm,
    size: *mut MPI_Count,
) -> c_int {
    let r = (|| {
        let k = crate::datatype::count(incount, "MPI_Pack_size_c")?;
        let t = dtype(datatype)?;
        // SAFETY: the caller's contract.
        unsafe { out(size, (k * t.size) as MPI_Count, "MPI_Pack_size_c") }
    })();
    crate::env::errhandler::on_comm(comm, r)
}

/// `MPI_Pack_c`.
#[no_mangle]
pub unsafe extern "C" fn MPI_Pack_c(
    inbuf: *const c_void,
    incount: MPI_Count,
    datatype: MPI_Datatype,
    outbuf: *mut c_void,
    outsize: MPI_Count,
    position: *mut MPI_Count,
    comm: MPI_Comm,
) -> c_int {
    let r = (|| {
        let call = "MPI_Pack_c";
        let k = crate::datatype::count(incount, call)?;
        let t = crate::datatype::committed(datatype, call)?;
        if position.is_null() {
            return Err(MpiError::invalid(
                MPI_ERR_ARG,
                "MPI_Pack_c: position is NULL",
            ));
        }
        // SAFETY: non-NULL (the caller's contract).
        let pos = crate::datatype::count(unsafe { *position }, call)?;
        crate::datatype::buffer(inbuf as usize, k, &t, call, "inbuf")?;
        // SAFETY: `inbuf` holds `incount` elements (the caller's contract).
        let data = unsafe { crate::datatype::pack(inbuf.cast(), k, &t) };
        if pos + data.len() > crate::datatype::count(outsize, call)? {
            return Err(MpiError::invalid(
                MPI_ERR_TRUNCATE,
                "MPI_Pack_c: outbuf is too small",
            ));
        }
        crate::datatype::byte_buffer(outbuf as usize, data.len(), call, "outbuf")?;
        // SAFETY: `outbuf` holds `outsize` bytes, checked above.
        unsafe {
            std::ptr::copy_nonoverlapping(data.as_ptr(), outbuf.cast::<u8>().add(pos), data.len());
            *position = (pos + data.len()) as MPI_Count;
        }
        Ok(())
    })();
    crate::env::errhandler::on_comm(comm, r)
}

/// `MPI_Unpack_c`.
#[no_mangle]
pub unsafe extern "C" fn MPI_Unpack_c(
    inbuf: *const c_void,
    insize: MPI_Count,
    position: *mut MPI_Count,
    outbuf: *mut c_void,
    outcount: MPI_Count,
    datatype: MPI_Datatype,
    comm: MPI_Comm,
) -> c_int {
    let r = (|| {
        let call = "MPI_Unpack_c";
        let k = crate::datatype::count(outcount, call)?;
        let t = crate::datatype::committed(datatype, call)?;
        if position.is_null() {
            return Err(MpiError::invalid(
                MPI_ERR_ARG,
                "MPI_Unpack_c: position is NULL",
            ));
        }
        // SAFETY: non-NULL (the caller's contract).
        let pos = crate::datatype::count(unsafe { *position }, call)?;
        let len = k * t.size;
        if pos + len > crate::datatype::count(insize, call)? {
            return Err(MpiError::invalid(
                MPI_ERR_TRUNCATE,
                "MPI_Unpack_c: inbuf holds fewer bytes than asked for",
            ));
        }
        crate::datatype::byte_buffer(inbuf as usize, len, call, "inbuf")?;
        crate::datatype::buffer(outbuf as usize, k, &t, call, "outbuf")?;
        // SAFETY: `inbuf` holds `insize` bytes (checked); `outbuf` `outcount` elements.
        unsafe {
            let data = std::slice::from_raw_parts(inbuf.cast::<u8>().add(pos), len);
            crate::datatype::unpack(data, outbuf.cast(), &t);
            *position = (pos + len) as MPI_Count;
        }
        Ok(())
    })();
    crate::env::errhandler::on_comm(comm, r)
}

/// (combiner, p or r, r).
type F90Key = (c_int, c_int, c_int);

/// The Fortran 90 parameterised types handed out (one handle per kind and parameters).
static F90: std::sync::Mutex<Vec<(F90Key, MPI_Datatype)>> = std::sync::Mutex::new(Vec::new());

/// The type of `MPI_Type_create_f90_*` for `base` with `params`: one handle per kind and
/// parameters, of combiner `combiner`.
fn f90(
    combiner: c_int,
    params: &[c_int],
    base: MPI_Datatype,
    newtype: *mut MPI_Datatype,
    call: &'static str,
) -> Result<(), MpiError> {
    let key = (combiner, params[0], params.get(1).copied().unwrap_or(0));
    let mut g = F90.lock().unwrap_or_else(PoisonError::into_inner);
    let h = match g.iter().find(|(k, _)| *k == key) {
        Some(&(_, h)) => h,
        None => {
            let t = dtype(base)?;
            let mut v = crate::datatype::build(&[(0, 1, t.clone())], false)?;
            v.basic = t.basic;
            v.basic_size = t.basic_size;
            v.committed
                .store(true, std::sync::atomic::Ordering::Release);
            v.envelope = crate::datatype::Envelope {
                combiner,
                ints: params.to_vec(),
                ..Default::default()
            };
            let h = crate::datatype::insert(v)?;
            g.push((key, h));
            h
        }
    };
    // SAFETY: MPI's contract: `newtype` writable.
    unsafe { out(newtype, h, call) }
}

fn real_kind(p: c_int, r: c_int) -> Option<usize> {
    let p = if p == MPI_UNDEFINED { 0 } else { p };
    let r = if r == MPI_UNDEFINED { 0 } else { r };
    if p <= 6 && r <= 37 {
        Some(4)
    } else if p <= 15 && r <= 307 {
        Some(8)
    } else if p <= 18 && r <= 4931 {
        Some(16)
    } else {
        None
    }
}

/// `MPI_Type_create_f90_integer`: an integer of at least `r` decimal digits.
#[no_mangle]
pub unsafe extern "C" fn MPI_Type_create_f90_integer(
    r: c_int,
    newtype: *mut MPI_Datatype,
) -> c_int {
    let base = match r {
        MPI_UNDEFINED | i32::MIN..=2 => MPI_INTEGER1,
        3..=4 => MPI_INTEGER2,
        5..=9 => MPI_INTEGER4,
        10..=18 => MPI_INTEGER8,
        19..=38 => MPI_INTEGER16,
        _ => {
            return on_self(Err(MpiError::invalid(
                MPI_ERR_ARG,
                format!("MPI_Type_create_f90_integer: no integer of {r} digits"),
            )))
        }
    };
    on_self(f90(
        MPI_COMBINER_F90_INTEGER,
        &[r],
        base,
        newtype,
        "MPI_Type_create_f90_integer",
    ))
}

/// `MPI_Type_create_f90_real`: a real of at least precision `p` and range `r`.
#[no_mangle]
pub unsafe extern "C" fn MPI_Type_create_f90_real(
    p: c_int,
    r: c_int,
    newtype: *mut MPI_Datatype,
) -> c_int {
    let base = match real_kind(p, r) {
        Some(4) => MPI_REAL4,
        Some(8) => MPI_REAL8,
        Some(_) => MPI_REAL16,
        None => {
            return on_self(Err(MpiError::invalid(
                MPI_ERR_ARG,
                format!("MPI_Type_create_f90_real: no real of precision {p} and range {r}"),
            )))
        }
    };
    on_self(f90(
        MPI_COMBINER_F90_REAL,
        &[p, r],
        base,
        newtype,
        "MPI_Type_create_f90_real",
    ))
}

/// `MPI_Type_create_f90_complex`: a complex of reals of precision `p` and range `r`.
#[no_mangle]
pub unsafe extern "C" fn MPI_Type_create_f90_complex(
    p: c_int,
    r: c_int,
    newtype: *mut MPI_Datatype,
) -> c_int {
    let base = match real_kind(p, r) {
        Some(4) => MPI_COMPLEX8,
        Some(8) => MPI_COMPLEX16,
        Some(_) => MPI_COMPLEX32,
        None => {
            return on_self(Err(MpiError::invalid(
                MPI_ERR_ARG,
                format!("MPI_Type_create_f90_complex: no complex of precision {p} and range {r}"),
            )))
        }
    };
    on_self(f90(
        MPI_COMBINER_F90_COMPLEX,
        &[p, r],
        base,
        newtype,
        "MPI_Type_create_f90_complex",
    ))
}
