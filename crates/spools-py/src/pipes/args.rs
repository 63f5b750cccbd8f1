//! Arguments of the pipe and stream calls: the check of an array against the share a
//! layout gives a rank, and a new array of that share (the layout helpers themselves are
//! `spools.Layout`'s, in `layout.rs`).

use numpy::PyUntypedArrayMethods;
use pyo3::prelude::*;
use spools_map::Layout;

use crate::buffer::View;
use crate::errors;
pub(crate) use crate::layout::layout_arg;
use crate::layout::{dtype_matches, local_bytes, local_shape, numpy_dtype};

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
    let given = v.array(py).dtype();
    if !dtype_matches(py, l, &given)? {
        return Err(errors::type_error(format!(
            "{what}: layout {l} holds {} elements, got an array of dtype {}",
            numpy_dtype(py, l)?.str()?,
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
