//! Arguments of the pipe and stream calls: layouts (a layout spec string or a
//! `spools.Layout`), the numpy dtype and local shape a layout gives a rank, and the check
//! of an array against them.

use numpy::PyUntypedArrayMethods;
use pyo3::prelude::*;
use spools_map::{DType, Layout};

use crate::buffer::View;
use crate::errors::{self, Kind};

/// A layout argument: a spec string (`"f64[8,6] block,* on 2x1"`) or a `spools.Layout`
/// (whose `str()` is its spec). `what` names it in errors.
///
/// # Errors
/// `LayoutError` for a spec that does not parse, `TypeError` for anything else.
pub(crate) fn layout_arg(obj: &Bound<'_, PyAny>, what: &str) -> PyResult<Layout> {
    let spec: String = if let Ok(s) = obj.extract::<String>() {
        s
    } else if obj.get_type().name().is_ok_and(|n| n == "Layout") {
        obj.str()?.extract()?
    } else {
        return Err(errors::type_error(format!(
            "{what} must be a spools.Layout or a layout spec string such as \
             \"f64[1024,1024] block,* on 4x1\", got {}",
            crate::buffer::type_name(obj)
        )));
    };
    spec.parse::<Layout>()
        .map_err(|e| errors::raise(Kind::Layout, format!("{what} {spec:?} does not parse: {e}")))
}

/// numpy's name of a layout's element type (`uint8` for byte streams, `V<k>` for
/// `bytes(k)`).
fn dtype_name(l: &Layout) -> String {
    let Layout::Array(a) = l else {
        return "uint8".into();
    };
    match a.dtype() {
        DType::U8 => "uint8".into(),
        DType::I8 => "int8".into(),
        DType::U16 => "uint16".into(),
        DType::I16 => "int16".into(),
        DType::U32 => "uint32".into(),
        DType::I32 => "int32".into(),
        DType::U64 => "uint64".into(),
        DType::I64 => "int64".into(),
        DType::F32 => "float32".into(),
        DType::F64 => "float64".into(),
        DType::C64 => "complex64".into(),
        DType::C128 => "complex128".into(),
        DType::Bytes(n) => format!("V{n}"),
    }
}

/// The numpy dtype of a layout's elements.
///
/// # Errors
/// numpy's.
pub(crate) fn numpy_dtype<'py>(py: Python<'py>, l: &Layout) -> PyResult<Bound<'py, PyAny>> {
    py.import("numpy")?
        .getattr("dtype")?
        .call1((dtype_name(l),))
}

/// The shape of `unit`'s share (zeros for a unit beyond the layout: a rank holding
/// nothing); byte streams and other layouts are one-dimensional, in elements.
pub(crate) fn local_shape(l: &Layout, unit: u64) -> Vec<usize> {
    let ndim = match l {
        Layout::Array(a) => a.shape().len(),
        _ => 1,
    };
    if unit >= l.units() {
        return vec![0; ndim];
    }
    match l {
        Layout::Array(a) => a
            .local_shape(unit)
            .map(|s| s.into_iter().map(|n| n as usize).collect())
            .unwrap_or_else(|_| vec![0; ndim]),
        _ => vec![l
            .local_bytes(unit)
            .unwrap_or(0)
            .div_ceil(l.elem_size().max(1)) as usize],
    }
}

/// Bytes of `unit`'s share (0 beyond the layout).
pub(crate) fn local_bytes(l: &Layout, unit: u64) -> u64 {
    if unit >= l.units() {
        return 0;
    }
    l.local_bytes(unit).unwrap_or(0)
}

/// Checks that `v` holds `rank`'s share of `l`: its dtype (for typed layouts) and its
/// size in bytes (any shape of that many elements is taken).
///
/// # Errors
/// `TypeError` for a dtype that is not the layout's, `ValueError` for a size that is not
/// the rank's share, both naming the expected and the given.
pub(crate) fn check_share(
    py: Python<'_>,
    v: &View,
    l: &Layout,
    rank: u32,
    what: &str,
) -> PyResult<()> {
    let typed = matches!(l, Layout::Array(a) if !matches!(a.dtype(), DType::Bytes(_)));
    let given = v.array(py).dtype();
    if typed && !given.as_any().eq(numpy_dtype(py, l)?)? {
        return Err(errors::type_error(format!(
            "{what}: layout {l} holds {} elements, got an array of dtype {}",
            dtype_name(l),
            given.str()?
        )));
    }
    let need = local_bytes(l, u64::from(rank));
    if v.len() as u64 != need {
        return Err(errors::value_error(format!(
            "{what}: rank {rank}'s share of layout {l} is shape {:?} ({need} bytes), got \
             an array of shape {:?} ({} bytes)",
            local_shape(l, u64::from(rank)),
            v.shape,
            v.len()
        )));
    }
    Ok(())
}

/// A new array of `rank`'s share of `l`, or `out` checked against it; and its view.
///
/// # Errors
/// As [`check_share`], and numpy's.
pub(crate) fn share_array<'py>(
    py: Python<'py>,
    out: Option<&Bound<'py, PyAny>>,
    l: &Layout,
    rank: u32,
    what: &str,
) -> PyResult<(Bound<'py, PyAny>, View)> {
    match out {
        Some(o) => {
            let v = crate::buffer::view(o, crate::buffer::Access::Write, what)?;
            check_share(py, &v, l, rank, what)?;
            Ok((o.clone(), v))
        }
        None => {
            let (a, v) =
                crate::buffer::empty(py, &numpy_dtype(py, l)?, &local_shape(l, u64::from(rank)))?;
            Ok((a.into_any(), v))
        }
    }
}
