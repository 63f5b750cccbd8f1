//! Result arrays (new, or the caller's `out=` checked against the dtype and shape the
//! collective produces), overlap checks for the in-place forms, and the agreement of
//! every rank's arguments before a v-collective or a scatter.

use numpy::{PyArrayDescr, PyArrayDescrMethods, PyUntypedArrayMethods};
use pyo3::prelude::*;
use pyo3::sync::PyOnceLock;
use spools::{Communicator, MsgError};

use crate::buffer::{self, Access, View};
use crate::errors;

/// A collective's error: wrong local arguments are `ValueError`, the rest the runtime's
/// exceptions (an interrupted wait: `KeyboardInterrupt`).
pub(crate) fn coll_err(e: MsgError) -> PyErr {
    match e {
        MsgError::BadBuffer { .. } | MsgError::BadRank { .. } => errors::value_error(e.to_string()),
        e => errors::from_msg(e),
    }
}

/// The dtype of a view's array.
pub(crate) fn dtype_of<'py>(py: Python<'py>, v: &View) -> Bound<'py, PyArrayDescr> {
    v.array(py).dtype()
}

/// The array a collective fills: `out` (checked: writable, C-contiguous, of `dtype` and
/// `shape`) or a new one.
///
/// # Errors
/// `TypeError`/`ValueError` naming the expected and the given dtype or shape.
pub(crate) fn result<'py>(
    py: Python<'py>,
    out: Option<&Bound<'py, PyAny>>,
    dtype: &Bound<'py, PyArrayDescr>,
    shape: &[usize],
    op: &str,
) -> PyResult<(Bound<'py, PyAny>, View)> {
    match out {
        None => {
            let (a, v) = buffer::empty(py, dtype.as_any(), shape)?;
            Ok((a.into_any(), v))
        }
        Some(o) => {
            let v = buffer::view(o, Access::Write, "out").map_err(|e| prefixed(py, e, op))?;
            let d = dtype_of(py, &v);
            if !d.is_equiv_to(dtype) {
                return Err(errors::type_error(format!(
                    "{op}: out must have dtype {dtype} (the input's), got {d}"
                )));
            }
            if v.shape != shape {
                return Err(errors::value_error(format!(
                    "{op}: out must have shape {}, got {}",
                    tuple(shape),
                    tuple(&v.shape)
                )));
            }
            Ok((o.clone(), v))
        }
    }
}

/// Whether `a` and `b` are the same memory (an in-place call).
///
/// # Errors
/// `ValueError` when they overlap without being the same.
pub(crate) fn same_memory(a: &View, b: &View, op: &str) -> PyResult<bool> {
    let (pa, pb) = (a.bytes().as_ptr() as usize, b.bytes().as_ptr() as usize);
    if a.len() == 0 || b.len() == 0 {
        return Ok(false);
    }
    if pa == pb && a.len() == b.len() {
        return Ok(true);
    }
    if pa < pb + b.len() && pb < pa + a.len() {
        return Err(errors::value_error(format!(
            "{op}: out overlaps the input without being the same array (for the in-place \
             form pass out=a)"
        )));
    }
    Ok(false)
}

/// A shape as Python writes it: `(3,)`, `(2, 4)`.
pub(crate) fn tuple(shape: &[usize]) -> String {
    match shape {
        [one] => format!("({one},)"),
        s => format!(
            "({})",
            s.iter()
                .map(|d| d.to_string())
                .collect::<Vec<_>>()
                .join(", ")
        ),
    }
}

/// An array's first axis and the rest; `ValueError` for a 0-d array.
pub(crate) fn rows(v: &View, op: &str, what: &str) -> PyResult<(usize, Vec<usize>)> {
    match v.shape.split_first() {
        Some((r, tail)) => Ok((*r, tail.to_vec())),
        None => Err(errors::value_error(format!(
            "{op}: {what} must have at least one axis (its blocks are along the first), \
             got a 0-d array"
        ))),
    }
}

/// Bytes of one row (everything but the first axis).
pub(crate) fn row_bytes(v: &View, tail: &[usize]) -> usize {
    tail.iter().product::<usize>() * v.itemsize
}

/// `counts` (rows) scaled to bytes (or elements).
///
/// # Errors
/// `ValueError` when a product overflows.
pub(crate) fn scaled(counts: &[usize], row: usize, op: &str) -> PyResult<Vec<usize>> {
    counts
        .iter()
        .map(|&c| {
            c.checked_mul(row).ok_or_else(|| {
                errors::value_error(format!(
                    "{op}: a count of {c} rows of {row} units each is too large"
                ))
            })
        })
        .collect()
}

/// The sum of `counts`.
///
/// # Errors
/// `ValueError` naming `what` when it overflows.
pub(crate) fn checked_sum(counts: &[usize], op: &str, what: &str) -> PyResult<usize> {
    counts
        .iter()
        .try_fold(0usize, |a, &c| a.checked_add(c))
        .ok_or_else(|| {
            errors::value_error(format!(
                "{op}: the {what} {counts:?} add up to more than the largest size"
            ))
        })
}

/// Counts per rank given by the user: `size` non-negative ints.
///
/// # Errors
/// `ValueError` naming the expected length and the given.
pub(crate) fn counts_arg(
    c: &Bound<'_, PyAny>,
    size: u32,
    op: &str,
    what: &str,
) -> PyResult<Vec<usize>> {
    let v: Vec<i64> = c.extract().map_err(|_| {
        errors::type_error(format!(
            "{op}: {what} must be a sequence of {size} ints (one per rank), got {}",
            buffer::type_name(c)
        ))
    })?;
    if v.len() != size as usize {
        return Err(errors::value_error(format!(
            "{op}: {what} must hold one count per rank ({size}), got {} counts",
            v.len()
        )));
    }
    v.iter()
        .map(|&x| {
            usize::try_from(x)
                .map_err(|_| errors::value_error(format!("{op}: {what} must be >= 0, got {x}")))
        })
        .collect()
}

/// What one rank brings to a v-collective: its rows and the dtype and row shape every
/// rank must share, or the error its arguments gave locally.
pub(crate) enum Desc {
    /// Fine locally.
    Rows {
        rows: usize,
        dtype: String,
        itemsize: usize,
        tail: Vec<usize>,
    },
    /// The local arguments' error (every rank raises it).
    Bad(String),
}

const SEP: char = '\u{1f}';

impl Desc {
    /// The description of `v`'s rows.
    ///
    /// # Errors
    /// `ValueError` for a 0-d array.
    pub(crate) fn of(py: Python<'_>, v: &View, op: &str) -> PyResult<Desc> {
        let (rows, tail) = rows(v, op, "the array")?;
        Ok(Desc::Rows {
            rows,
            dtype: dtype_of(py, v).to_string(),
            itemsize: v.itemsize,
            tail,
        })
    }

    fn encode(&self) -> String {
        match self {
            Desc::Rows {
                rows,
                dtype,
                itemsize,
                tail,
            } => format!(
                "R{rows}{SEP}{itemsize}{SEP}{}{SEP}{dtype}",
                tail.iter()
                    .map(|d| d.to_string())
                    .collect::<Vec<_>>()
                    .join(",")
            ),
            Desc::Bad(m) => format!("B{m}"),
        }
    }

    fn decode(s: &str) -> Desc {
        if let Some(m) = s.strip_prefix('B') {
            return Desc::Bad(m.to_string());
        }
        let mut it = s.get(1..).unwrap_or("").splitn(4, SEP);
        let rows = it.next().and_then(|x| x.parse().ok()).unwrap_or(0);
        let itemsize = it.next().and_then(|x| x.parse().ok()).unwrap_or(0);
        let tail = it
            .next()
            .unwrap_or("")
            .split(',')
            .filter(|x| !x.is_empty())
            .filter_map(|x| x.parse().ok())
            .collect();
        let dtype = it.next().unwrap_or("?").to_string();
        Desc::Rows {
            rows,
            dtype,
            itemsize,
            tail,
        }
    }
}

/// What every rank agreed on: the rows of each rank, one dtype's item size and row shape.
pub(crate) struct Agreed {
    pub(crate) rows: Vec<usize>,
    pub(crate) tail: Vec<usize>,
}

/// Exchanges every rank's [`Desc`] (collective), or the error of its arguments: every
/// rank raises when one rank's arguments were wrong (that rank its own exception, the
/// others a `ValueError` naming it) or the ranks' dtypes or row shapes differ.
///
/// # Errors
/// Those; the exchange's own errors.
pub(crate) fn agree(
    py: Python<'_>,
    c: &Communicator,
    mine: PyResult<Desc>,
    op: &str,
) -> PyResult<Agreed> {
    let enc = match &mine {
        Ok(d) => d.encode(),
        Err(e) => Desc::Bad(err_text(py, e)).encode(),
    };
    let all =
        crate::runtime::blocking(py, || c.allgather_bytes(enc.as_bytes())).map_err(coll_err)?;
    let all: Vec<Desc> = all
        .iter()
        .map(|b| Desc::decode(&String::from_utf8_lossy(b)))
        .collect();
    let mut rows = Vec::with_capacity(all.len());
    let mut first: Option<(usize, &str, usize, &[usize])> = None;
    for (r, d) in all.iter().enumerate() {
        match d {
            Desc::Bad(m) => {
                return match mine {
                    Err(e) => Err(e),
                    Ok(_) => Err(errors::value_error(format!(
                        "{op}: rank {r}'s arguments are wrong: {m}"
                    ))),
                }
            }
            Desc::Rows {
                rows: n,
                dtype,
                itemsize,
                tail,
            } => {
                rows.push(*n);
                match first {
                    None => first = Some((r, dtype, *itemsize, tail)),
                    Some((r0, d0, i0, t0)) => {
                        if d0 != dtype || i0 != *itemsize || t0 != tail.as_slice() {
                            return Err(errors::value_error(format!(
                                "{op}: every rank must give the same dtype and row shape \
                                 (all axes but the first): rank {r0} gave {d0} rows of \
                                 shape {}, rank {r} gave {dtype} rows of shape {}",
                                tuple(t0),
                                tuple(tail)
                            )));
                        }
                    }
                }
            }
        }
    }
    let tail = first.map(|(_, _, _, t)| t.to_vec()).unwrap_or_default();
    Ok(Agreed { rows, tail })
}

/// `pickle.dumps(obj, protocol=HIGHEST)` and `pickle.loads`.
pub(crate) fn pickle<'py>(py: Python<'py>) -> PyResult<&'py Bound<'py, PyModule>> {
    static M: PyOnceLock<Py<PyModule>> = PyOnceLock::new();
    M.get_or_try_init(py, || Ok::<_, PyErr>(py.import("pickle")?.unbind()))
        .map(|m| m.bind(py))
}

/// `obj` pickled.
///
/// # Errors
/// The pickling's own exception.
pub(crate) fn dumps(py: Python<'_>, obj: &Bound<'_, PyAny>) -> PyResult<Vec<u8>> {
    let p = pickle(py)?;
    let proto = p.getattr("HIGHEST_PROTOCOL")?;
    p.call_method1("dumps", (obj, proto))?.extract()
}

/// The object pickled in `b`.
///
/// # Errors
/// The unpickling's own exception.
pub(crate) fn loads<'py>(py: Python<'py>, b: &[u8]) -> PyResult<Bound<'py, PyAny>> {
    pickle(py)?.call_method1("loads", (pyo3::types::PyBytes::new(py, b),))
}

/// An exception's message (without its class name).
pub(crate) fn err_text(py: Python<'_>, e: &PyErr) -> String {
    e.value(py).to_string()
}

/// `e` with `op` before its message (same exception class): the views name their
/// argument only, and the calls add their own name on the error path alone.
pub(crate) fn prefixed(py: Python<'_>, e: PyErr, op: &str) -> PyErr {
    let msg = format!("{op}: {}", e.value(py));
    match e.get_type(py).call1((msg,)) {
        Ok(v) => PyErr::from_value(v),
        Err(_) => e,
    }
}

/// `obj` as a view for `access`, its errors naming `op` and `what`.
///
/// # Errors
/// As [`buffer::view`].
pub(crate) fn arg_view(
    py: Python<'_>,
    obj: &Bound<'_, PyAny>,
    access: Access,
    what: &'static str,
    op: &str,
) -> PyResult<View> {
    buffer::view(obj, access, what).map_err(|e| prefixed(py, e, op))
}

/// Where a blocking collective puts its result: `out` checked (or a new array), or, when
/// `out` is wrong, a scratch array and the error, which the call raises only after the
/// collective (the other ranks need this rank's part: leaving would make the next
/// collective hang).
pub(crate) struct Target<'py> {
    pub(crate) res: Bound<'py, PyAny>,
    pub(crate) recv: View,
    /// `out` is the input itself (an in-place call).
    pub(crate) inplace: bool,
    /// The error of `out`, raised after the collective.
    pub(crate) err: Option<PyErr>,
}

impl Target<'_> {
    /// `Ok(())`, or the error of `out` (once the collective ended).
    ///
    /// # Errors
    /// That error.
    pub(crate) fn check(&mut self) -> PyResult<()> {
        self.err.take().map_or(Ok(()), Err)
    }

    /// Runs the collective `f` into the target's memory with the GIL released, then
    /// gives the result array (or `out`'s error, once the collective ended everywhere).
    /// The target's view is writable and distinct from the collective's input (checked
    /// by [`target`]).
    ///
    /// # Errors
    /// The collective's error, or `out`'s.
    pub(crate) fn fill(
        mut self,
        py: Python<'_>,
        f: impl Send + FnOnce(&mut [u8]) -> Result<(), MsgError>,
    ) -> PyResult<Py<PyAny>> {
        // SAFETY: a writable view distinct from the input (checked by `target`), used by
        // this call alone.
        let r = unsafe { self.recv.bytes_mut() };
        crate::runtime::blocking(py, || f(r)).map_err(coll_err)?;
        self.check()?;
        Ok(self.res.unbind())
    }
}

/// The [`Target`] of a collective producing `dtype` and `shape`; `send` the input (for
/// the overlap check) and `refuse` the message when `out` may not be the input itself.
///
/// # Errors
/// Only the allocation's error: `out`'s errors are kept in the target.
pub(crate) fn target<'py>(
    py: Python<'py>,
    out: Option<&Bound<'py, PyAny>>,
    dtype: &Bound<'py, PyArrayDescr>,
    shape: &[usize],
    send: Option<&View>,
    refuse: Option<&str>,
    op: &str,
) -> PyResult<Target<'py>> {
    let checked = result(py, out, dtype, shape, op).and_then(|(res, recv)| {
        let same = match send {
            Some(s) => same_memory(s, &recv, op)?,
            None => false,
        };
        match refuse {
            Some(m) if same => Err(errors::value_error(m.to_string())),
            _ => Ok((res, recv, same)),
        }
    });
    match checked {
        Ok((res, recv, inplace)) => Ok(Target {
            res,
            recv,
            inplace,
            err: None,
        }),
        Err(e) => {
            let (a, recv) = buffer::empty(py, dtype.as_any(), shape)?;
            Ok(Target {
                res: a.into_any(),
                recv,
                inplace: false,
                err: Some(e),
            })
        }
    }
}

/// The checks of `out` that need no other rank (before the ranks agree, so that a wrong
/// `out` is the same `ValueError` on every rank): writable, of `dtype`, with the row
/// shape `tail` after its first axis.
///
/// # Errors
/// `TypeError`/`ValueError` naming the expected and the given.
pub(crate) fn out_rows(
    py: Python<'_>,
    out: Option<&Bound<'_, PyAny>>,
    dtype: &Bound<'_, PyArrayDescr>,
    tail: &[usize],
    op: &str,
) -> PyResult<()> {
    let Some(o) = out else {
        return Ok(());
    };
    let v = buffer::view(o, Access::Write, "out").map_err(|e| prefixed(py, e, op))?;
    let d = dtype_of(py, &v);
    if !d.is_equiv_to(dtype) {
        return Err(errors::type_error(format!(
            "{op}: out must have dtype {dtype} (the input's), got {d}"
        )));
    }
    if v.shape.get(1..) != Some(tail) {
        return Err(errors::value_error(format!(
            "{op}: out must have shape (total rows,) + {} (the rows of every rank), got {}",
            tuple(tail),
            tuple(&v.shape)
        )));
    }
    Ok(())
}
