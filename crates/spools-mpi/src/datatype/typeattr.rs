//! Attributes cached on datatypes (`MPI_Type_get_attr`, `MPI_Type_set_attr`,
//! `MPI_Type_delete_attr`), on the keyvals and stores of [`crate::comm::attr`].

use std::ffi::{c_int, c_void};
use std::sync::PoisonError;

use crate::abi::*;
use crate::comm::attr::{delete, keyval, set, Of};
use crate::datatype::dtype;
use crate::env::errhandler::on_self;
use crate::out::out;

/// `MPI_Type_get_attr`.
#[no_mangle]
pub unsafe extern "C" fn MPI_Type_get_attr(
    datatype: MPI_Datatype,
    type_keyval: c_int,
    attribute_val: *mut c_void,
    flag: *mut c_int,
) -> c_int {
    let r = (|| {
        let call = "MPI_Type_get_attr";
        let t = dtype(datatype)?;
        keyval(type_keyval, Of::Type, call)?;
        let value = t
            .attrs
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .get(&type_keyval)
            .copied();
        // SAFETY: the caller's contract.
        unsafe { out(flag, c_int::from(value.is_some()), call) }?;
        if let Some(v) = value {
            // SAFETY: the caller's contract: `attribute_val` points to a `void *`.
            unsafe { out(attribute_val.cast::<usize>(), v, call) }?;
        }
        Ok(())
    })();
    on_self(r)
}

/// `MPI_Type_set_attr`.
#[no_mangle]
pub unsafe extern "C" fn MPI_Type_set_attr(
    datatype: MPI_Datatype,
    type_keyval: c_int,
    attribute_val: *mut c_void,
) -> c_int {
    let r = (|| {
        let t = dtype(datatype)?;
        keyval(type_keyval, Of::Type, "MPI_Type_set_attr")?;
        set(datatype, &t.attrs, type_keyval, attribute_val as usize)
    })();
    on_self(r)
}

/// `MPI_Type_delete_attr`.
#[no_mangle]
pub unsafe extern "C" fn MPI_Type_delete_attr(datatype: MPI_Datatype, type_keyval: c_int) -> c_int {
    let r = (|| {
        let call = "MPI_Type_delete_attr";
        let t = dtype(datatype)?;
        keyval(type_keyval, Of::Type, call)?;
        delete(datatype, &t.attrs, type_keyval, call)
    })();
    on_self(r)
}
