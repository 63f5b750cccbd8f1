//! Buffers in place: any C-contiguous object with the buffer protocol (numpy arrays,
//! `bytearray`, `memoryview`, `bytes` for reading) seen as its memory, without a copy
//! through Python objects. A [`View`] keeps its array alive, so the memory stays valid
//! while the view lives, also with the GIL released.

use numpy::{PyArrayDescr, PyArrayDescrMethods, PyUntypedArray, PyUntypedArrayMethods};
use pyo3::prelude::*;
use pyo3::sync::PyOnceLock;
use spools::DType;

use crate::errors;

/// An array's element type as the runtime sees it: one of `spools_map::DType` (the one
/// vocabulary of element types, numpy's numeric dtypes in native byte order), numpy's
/// `bool`, or anything else (records, strings, non-native byte order), moved as bytes only.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Dtype {
    /// A numeric dtype: `int8` to `uint64`, `float32`, `float64`, `complex64`,
    /// `complex128`.
    Num(DType),
    /// `bool` (one byte).
    Bool,
    /// Any other dtype.
    Other,
}

impl Dtype {
    fn of(d: &Bound<'_, PyArrayDescr>) -> Dtype {
        if d.is_native_byteorder() == Some(false) || d.has_fields() || d.has_subarray() {
            return Dtype::Other;
        }
        let num = match (d.kind(), d.itemsize()) {
            (b'b', 1) => return Dtype::Bool,
            (b'i', 1) => DType::I8,
            (b'u', 1) => DType::U8,
            (b'i', 2) => DType::I16,
            (b'u', 2) => DType::U16,
            (b'i', 4) => DType::I32,
            (b'u', 4) => DType::U32,
            (b'i', 8) => DType::I64,
            (b'u', 8) => DType::U64,
            (b'f', 4) => DType::F32,
            (b'f', 8) => DType::F64,
            (b'c', 8) => DType::C64,
            (b'c', 16) => DType::C128,
            _ => return Dtype::Other,
        };
        Dtype::Num(num)
    }
}

/// Whether a view is read or written.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Access {
    /// The runtime only reads it (a send).
    Read,
    /// The runtime writes it (a receive): it must be writable.
    Write,
}

/// A C-contiguous buffer's memory, kept alive by its array.
pub(crate) struct View {
    ptr: *mut u8,
    /// Length in bytes.
    len: usize,
    /// Bytes per element.
    pub(crate) itemsize: usize,
    /// The element type.
    pub(crate) dtype: Dtype,
    /// The array's shape.
    pub(crate) shape: Vec<usize>,
    /// The numpy array over the memory (the caller's own array, or numpy's view of the
    /// caller's `bytearray`/`memoryview`).
    pub(crate) array: Py<PyUntypedArray>,
    writable: bool,
}

// SAFETY: the memory belongs to `array`, which the view keeps alive (a numpy array's
// data pointer does not move while the array lives), so the pointer may be used from any
// thread; concurrent use of the same array by other Python threads is the program's
// business, as with MPI.
unsafe impl Send for View {}
// SAFETY: as above; `bytes` gives shared access only, `bytes_mut` requires the caller's
// exclusive use (see there).
unsafe impl Sync for View {}

impl View {
    /// Length in bytes.
    pub(crate) fn len(&self) -> usize {
        self.len
    }

    /// Number of elements.
    pub(crate) fn count(&self) -> usize {
        self.len.checked_div(self.itemsize).unwrap_or(0)
    }

    /// The memory, read-only.
    pub(crate) fn bytes(&self) -> &[u8] {
        if self.len == 0 {
            return &[];
        }
        // SAFETY: `ptr` is the start of `len` contiguous bytes of the live array (see the
        // type's Send impl).
        unsafe { std::slice::from_raw_parts(self.ptr, self.len) }
    }

    /// The memory, to be written.
    ///
    /// # Safety
    /// Only one `bytes_mut` borrow of the same view at a time. The view was made with
    /// [`Access::Write`] (checked: it panics otherwise, a bug of this crate).
    #[allow(clippy::mut_from_ref)]
    pub(crate) unsafe fn bytes_mut(&self) -> &mut [u8] {
        assert!(self.writable, "bytes_mut of a read-only view");
        if self.len == 0 {
            return &mut [];
        }
        // SAFETY: as `bytes`; writable (asserted) and exclusive (the caller's contract).
        unsafe { std::slice::from_raw_parts_mut(self.ptr, self.len) }
    }

    /// The array (a new reference).
    pub(crate) fn array<'py>(&self, py: Python<'py>) -> Bound<'py, PyUntypedArray> {
        self.array.bind(py).clone()
    }
}

/// `numpy.asarray`, looked up once.
fn asarray(py: Python<'_>) -> PyResult<&Bound<'_, PyAny>> {
    static ASARRAY: PyOnceLock<Py<PyAny>> = PyOnceLock::new();
    ASARRAY
        .get_or_try_init(py, || {
            Ok::<_, PyErr>(py.import("numpy")?.getattr("asarray")?.unbind())
        })
        .map(|f| f.bind(py))
}

/// Sees `obj` as memory for `access`; `what` names the argument in errors ("send
/// buffer").
///
/// # Errors
/// `TypeError` for an object without the buffer protocol; `ValueError` for a
/// non-contiguous array or a read-only one given to be written.
pub(crate) fn view(obj: &Bound<'_, PyAny>, access: Access, what: &str) -> PyResult<View> {
    let owned;
    let arr: &Bound<'_, PyUntypedArray> = match obj.cast::<PyUntypedArray>() {
        Ok(a) => a,
        Err(_) => {
            // Through a memoryview: the buffer protocol itself (numpy.asarray would
            // read `bytes` as a string scalar, a copy).
            let a = pyo3::types::PyMemoryView::from(obj)
                .and_then(|mv| asarray(obj.py())?.call1((mv,)))
                .map_err(|_| {
                    errors::type_error(format!(
                        "{what} must be a numpy array or an object with the buffer protocol \
                     (bytearray, memoryview), got {}",
                        type_name(obj)
                    ))
                })?;
            owned = a.cast_into::<PyUntypedArray>().map_err(|_| {
                errors::type_error(format!("{what}: numpy.asarray did not give an array"))
            })?;
            if owned.dtype().has_object() {
                return Err(errors::type_error(format!(
                    "{what} must be a numpy array or an object with the buffer protocol \
                     (bytearray, memoryview), got {}",
                    type_name(obj)
                )));
            }
            &owned
        }
    };
    let d = arr.dtype();
    if d.has_object() {
        return Err(errors::type_error(format!(
            "{what} has dtype object: only arrays of plain values can be sent \
             (use the lower-case send/recv, bcast, ... for Python objects)"
        )));
    }
    if !arr.is_c_contiguous() {
        return Err(errors::value_error(format!(
            "{what} must be C-contiguous; got an array of shape {} with strides {} \
             (use numpy.ascontiguousarray)",
            py_tuple(arr.shape()),
            py_tuple(&strides(arr))
        )));
    }
    let p = arr.as_array_ptr();
    // SAFETY: `p` is a live numpy array object (we hold a reference); reading its
    // fields is what numpy's own macros do.
    let (data, flags) = unsafe { ((*p).fields.data, (*p).fields.flags) };
    let writable = flags & numpy::npyffi::NPY_ARRAY_WRITEABLE != 0;
    if access == Access::Write && !writable {
        return Err(errors::value_error(format!(
            "{what} is read-only; a receive needs a writable buffer (a numpy array, \
             bytearray or writable memoryview)"
        )));
    }
    let itemsize = d.itemsize();
    let count: usize = arr.shape().iter().product();
    Ok(View {
        ptr: data.cast::<u8>(),
        len: count * itemsize,
        itemsize,
        dtype: Dtype::of(&d),
        shape: arr.shape().to_vec(),
        array: arr.clone().unbind(),
        writable,
    })
}

fn strides(arr: &Bound<'_, PyUntypedArray>) -> Vec<isize> {
    arr.getattr("strides")
        .and_then(|s| s.extract::<Vec<isize>>())
        .unwrap_or_default()
}

/// A shape or strides as Python prints a tuple: `(10,)`, `(4, 2)`.
pub(crate) fn py_tuple<T: std::fmt::Display>(v: &[T]) -> String {
    match v {
        [one] => format!("({one},)"),
        _ => format!(
            "({})",
            v.iter()
                .map(|x| x.to_string())
                .collect::<Vec<_>>()
                .join(", ")
        ),
    }
}

/// The Python type name of `obj`, for errors.
pub(crate) fn type_name(obj: &Bound<'_, PyAny>) -> String {
    obj.get_type()
        .name()
        .map(|n| n.to_string())
        .unwrap_or_else(|_| "?".into())
}

/// A new, uninitialised, C-contiguous numpy array of `dtype` and `shape`, and its view
/// (writable).
///
/// # Errors
/// numpy's own (out of memory, a bad dtype).
pub(crate) fn empty<'py>(
    py: Python<'py>,
    dtype: &Bound<'py, PyAny>,
    shape: &[usize],
) -> PyResult<(Bound<'py, PyUntypedArray>, View)> {
    static EMPTY: PyOnceLock<Py<PyAny>> = PyOnceLock::new();
    let f = EMPTY.get_or_try_init(py, || {
        Ok::<_, PyErr>(py.import("numpy")?.getattr("empty")?.unbind())
    })?;
    let a = f
        .bind(py)
        .call1((shape.to_vec(), dtype))?
        .cast_into::<PyUntypedArray>()
        .map_err(|_| errors::type_error("numpy.empty did not give an array"))?;
    let v = view(a.as_any(), Access::Write, "new array")?;
    Ok((a, v))
}

impl View {
    /// The start of the memory (for an operation that keeps the view alive while the
    /// engine uses it).
    pub(crate) fn as_mut_ptr(&self) -> *mut u8 {
        self.ptr
    }
}

/// A buffer argument of a blocking call: the memory of a numpy array seen directly (no
/// reference taken, no allocation: the argument keeps it alive for the call), or, for
/// other objects, a [`View`].
pub(crate) enum Mem<'a> {
    /// A C-contiguous numpy array's memory (start, length in bytes), borrowed for the
    /// call. A raw pointer, not a `&[u8]`: `bytes_mut` writes through it, which a
    /// shared reference's provenance would not allow.
    Direct(*mut u8, usize, std::marker::PhantomData<&'a [u8]>),
    /// Any other buffer, through numpy.
    Viewed(View),
}

// SAFETY: `Direct` is a borrowed byte range as `&[u8]` would be (shared by `bytes`;
// written only through the `unsafe bytes_mut`, whose caller guarantees exclusivity);
// `View` is Send and Sync.
unsafe impl Send for Mem<'_> {}
// SAFETY: as for Send.
unsafe impl Sync for Mem<'_> {}

impl Mem<'_> {
    /// The memory.
    pub(crate) fn bytes(&self) -> &[u8] {
        match self {
            Mem::Direct(_, 0, _) => &[],
            // SAFETY: a C-contiguous array's `len` bytes, alive while the argument the
            // value borrows is (see `mem`).
            Mem::Direct(p, len, _) => unsafe { std::slice::from_raw_parts(*p, *len) },
            Mem::Viewed(v) => v.bytes(),
        }
    }

    /// The memory, to be written.
    ///
    /// # Safety
    /// The value was made with [`Access::Write`] (the array is writable), and no other
    /// borrow of it is in use.
    #[allow(clippy::mut_from_ref)]
    pub(crate) unsafe fn bytes_mut(&self) -> &mut [u8] {
        if let Mem::Direct(p, len, _) = self {
            if *len == 0 {
                return &mut [];
            }
            // SAFETY: writable (checked when made with Access::Write) and exclusive (the
            // caller's contract); the pointer comes from the array's data pointer, not
            // from a shared reference.
            return unsafe { std::slice::from_raw_parts_mut(*p, *len) };
        }
        let b = self.bytes();
        if b.is_empty() {
            return &mut [];
        }
        // SAFETY: writable (checked when made with Access::Write) and exclusive (the
        // caller's contract); the memory is the live array's.
        unsafe { std::slice::from_raw_parts_mut(b.as_ptr().cast_mut(), b.len()) }
    }
}

/// Sees `obj` as memory for a blocking call: a numpy array directly (the fast path: a
/// cast and a few field reads), anything else through [`view`].
///
/// # Errors
/// As [`view`].
pub(crate) fn mem<'a>(obj: &'a Bound<'_, PyAny>, access: Access, what: &str) -> PyResult<Mem<'a>> {
    if let Ok(arr) = obj.cast::<PyUntypedArray>() {
        let p = arr.as_array_ptr();
        // SAFETY: `p` is a live numpy array (`obj` holds a reference for the call);
        // reading its fields is what numpy's own macros do.
        let (data, flags) = unsafe { ((*p).fields.data, (*p).fields.flags) };
        let need = numpy::npyffi::NPY_ARRAY_C_CONTIGUOUS
            | if access == Access::Write {
                numpy::npyffi::NPY_ARRAY_WRITEABLE
            } else {
                0
            };
        if flags & need == need {
            let d = arr.dtype();
            if !d.has_object() {
                let len = arr.len() * d.itemsize();
                // A C-contiguous array's `len` bytes from `data`, alive while `obj` is
                // (the lifetime 'a ties the value to the argument).
                return Ok(Mem::Direct(
                    data.cast::<u8>(),
                    len,
                    std::marker::PhantomData,
                ));
            }
        }
    }
    view(obj, access, what).map(Mem::Viewed)
}
