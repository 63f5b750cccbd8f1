//! Arguments of the pipe and stream calls: the check of an array against the share a
//! layout gives a rank, and a new array of that share. Both are `redistribute`'s
//! (`layout/redistribute.rs`): an `order=F` layout takes an F-contiguous array and gives
//! one back, exactly as `redistribute` and the files do.

use pyo3::prelude::*;
use spools_map::Layout;

use crate::buffer::{Access, View};
pub(crate) use crate::layout::layout_arg;
use crate::layout::redistribute::{check_part, destination};

/// Checks that `a` holds `rank`'s share of `l` (its dtype for typed layouts, its size in
/// bytes; F-contiguous for an `order=F` layout of more than one dimension) and views it
/// in place as the layout's local storage.
///
/// # Errors
/// `TypeError` for a dtype that is not the layout's, `ValueError` for a size that is not
/// the rank's share or a memory order that is not the layout's, naming the expected and
/// the given.
pub(crate) fn check_share(
    py: Python<'_>,
    a: &Bound<'_, PyAny>,
    l: &Layout,
    rank: u32,
    what: &str,
    role: &str,
) -> PyResult<View> {
    check_part(py, a, Access::Read, what, l, u64::from(rank), role)
}

/// A new array of `rank`'s share of `l` (F-ordered for an `order=F` layout), or `out`
/// checked against it (`role` names the layout in the messages); and its view as the layout's local storage.
///
/// # Errors
/// As [`check_share`], and numpy's.
pub(crate) fn share_array<'py>(
    py: Python<'py>,
    out: Option<&Bound<'py, PyAny>>,
    l: &Layout,
    rank: u32,
    role: &str,
) -> PyResult<(Bound<'py, PyAny>, View)> {
    destination(py, out, l, u64::from(rank), role)
}
