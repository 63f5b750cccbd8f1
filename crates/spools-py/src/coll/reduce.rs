//! The blocking reductions: `Reduce`, `Allreduce`, `Scan`, `Reduce_scatter`.

use pyo3::prelude::*;
use spools::{Communicator, Element, MsgError};

use super::carrier::{cast, cast_mut, to_vec, with_carrier};
use super::ops::Reduction;
use super::shapes::{
    arg_view, checked_sum, coll_err, counts_arg, dtype_of, rows, scaled, target, tuple,
};
use crate::buffer::{self, Access, View};
use crate::comm::Comm;
use crate::errors;
use crate::runtime;

/// Which reduction runs.
#[derive(Clone, Copy)]
enum Kind {
    Reduce(u32),
    Allreduce,
    Scan,
}

/// Runs reduction `kind` of `send` into `recv` (the same memory when `inplace`).
fn run<T: Element>(
    py: Python<'_>,
    c: &Communicator,
    kind: Kind,
    send: &View,
    recv: Option<&View>,
    inplace: bool,
    op: spools::Op<T>,
) -> PyResult<()> {
    let what = "the array";
    // The in-place form reduces a copy of the input into the same memory: the runtime's
    // calls take distinct input and output.
    let copy: Option<Vec<T>> = inplace.then(|| to_vec::<T>(send.bytes()));
    let (s, r): (&[T], &mut [T]) = match (recv, &copy) {
        (Some(rv), Some(cp)) => {
            // SAFETY: `rv` is a writable view this call alone uses; `send` (the same
            // memory) is not read while this borrow lives (its copy is).
            (
                cp.as_slice(),
                cast_mut::<T>(unsafe { rv.bytes_mut() }, "out")?,
            )
        }
        (Some(rv), None) => (
            cast::<T>(send.bytes(), what)?,
            // SAFETY: a writable view distinct from `send` (checked by the caller), used
            // by this call alone.
            cast_mut::<T>(unsafe { rv.bytes_mut() }, "out")?,
        ),
        (None, _) => (cast::<T>(send.bytes(), what)?, &mut []),
    };
    let res: Result<(), MsgError> = runtime::blocking(py, || match kind {
        Kind::Reduce(root) => c.reduce(s, r, &op, root),
        Kind::Allreduce => c.allreduce(s, r, &op),
        Kind::Scan => c.scan(s, r, &op),
    });
    res.map_err(coll_err)
}

impl Comm {
    /// The shared body of `Reduce`, `Allreduce` and `Scan`.
    fn coll_reduction(
        &self,
        py: Python<'_>,
        kind: Kind,
        a: &Bound<'_, PyAny>,
        op: Option<&Bound<'_, PyAny>>,
        out: Option<&Bound<'_, PyAny>>,
        name: &'static str,
    ) -> PyResult<Option<Py<PyAny>>> {
        let send = arg_view(py, a, Access::Read, "a", name)?;
        let red = Reduction::new(py, &send, op)?;
        let gets = match kind {
            Kind::Reduce(root) => root == self.comm.rank(),
            _ => true,
        };
        let mut t = if gets {
            let dt = dtype_of(py, &send);
            Some(target(py, out, &dt, &send.shape, Some(&send), None, name)?)
        } else {
            None
        };
        let (recv, inplace) = match &t {
            Some(t) => (Some(&t.recv), t.inplace),
            None => (None, false),
        };
        let r = with_carrier!(red.carrier, T => run::<T>(
            py,
            &self.comm,
            kind,
            &send,
            recv,
            inplace,
            red.op::<T>()
        ));
        red.finish(py, &self.comm, r)?;
        match t.as_mut() {
            Some(t) => {
                t.check()?;
                Ok(Some(t.res.clone().unbind()))
            }
            None => Ok(None),
        }
    }
}

#[pymethods]
impl Comm {
    /// Combines every rank's array `a` element by element with `op` and returns the
    /// result on rank `root` (a new array, or `out` filled), `None` on the other ranks.
    /// Collective.
    ///
    /// `op` is `"sum"`, `"prod"`, `"min"`, `"max"` (also `spools.SUM`, ...), a callable
    /// `f(a, b) -> array` on whole arrays (`a` the lower ranks' partial result), or
    /// `spools.Op(f, commute=True)`; `None` (the default) is `"sum"`. Booleans reduce as
    /// numpy's: sum is `or`, prod `and`; integers wrap. A function is called with the GIL
    /// from inside the collective: its exception is raised by this call (on the ranks
    /// that called it) once the collective has ended everywhere, and the other ranks
    /// raise `SpoolsError` naming a rank whose function raised (their result would be
    /// wrong; the non-blocking forms raise on the calling ranks only); its result must
    /// have its arguments' dtype and shape. In place: `out=a` on the root. Every rank gives
    /// the same shape and dtype (sizes that differ are the runtime's `SpoolsError` where
    /// they are detected).
    #[pyo3(name = "Reduce", signature = (a, op = None, root = 0, out = None))]
    fn reduce(
        &self,
        py: Python<'_>,
        a: &Bound<'_, PyAny>,
        op: Option<&Bound<'_, PyAny>>,
        root: i64,
        out: Option<&Bound<'_, PyAny>>,
    ) -> PyResult<Option<Py<PyAny>>> {
        self.live_group()?;
        let root = self.check_rank(root, "Reduce: root")?;
        self.coll_reduction(py, Kind::Reduce(root), a, op, out, "Reduce")
    }

    /// Combines every rank's array `a` element by element with `op` and returns the
    /// result on every rank (a new array, or `out` filled; `out=a` reduces in place).
    /// Collective. `op` as for `Reduce`.
    #[pyo3(name = "Allreduce", signature = (a, op = None, out = None))]
    fn allreduce(
        &self,
        py: Python<'_>,
        a: &Bound<'_, PyAny>,
        op: Option<&Bound<'_, PyAny>>,
        out: Option<&Bound<'_, PyAny>>,
    ) -> PyResult<Py<PyAny>> {
        self.live_group()?;
        let r = self.coll_reduction(py, Kind::Allreduce, a, op, out, "Allreduce")?;
        r.ok_or_else(|| errors::value_error("Allreduce gave no result"))
    }

    /// Inclusive prefix reduction: rank i gets the arrays `a` of ranks 0 to i combined
    /// with `op` (a new array, or `out` filled; `out=a` in place). Collective. `op` as
    /// for `Reduce`.
    #[pyo3(name = "Scan", signature = (a, op = None, out = None))]
    fn scan(
        &self,
        py: Python<'_>,
        a: &Bound<'_, PyAny>,
        op: Option<&Bound<'_, PyAny>>,
        out: Option<&Bound<'_, PyAny>>,
    ) -> PyResult<Py<PyAny>> {
        self.live_group()?;
        let r = self.coll_reduction(py, Kind::Scan, a, op, out, "Scan")?;
        r.ok_or_else(|| errors::value_error("Scan gave no result"))
    }

    /// Reduces every rank's array `a` with `op` and gives rank i block i of the result
    /// along the first axis: `counts[i]` rows (every rank gives the same `counts`), or
    /// with `counts=None` equal blocks of `len(a) // size` rows. Returns this rank's
    /// block (a new array of shape `(counts[rank], *a.shape[1:])`, or `out` filled).
    /// Collective. `op` as for `Reduce`.
    #[pyo3(name = "Reduce_scatter", signature = (a, counts = None, op = None, out = None))]
    fn reduce_scatter(
        &self,
        py: Python<'_>,
        a: &Bound<'_, PyAny>,
        counts: Option<&Bound<'_, PyAny>>,
        op: Option<&Bound<'_, PyAny>>,
        out: Option<&Bound<'_, PyAny>>,
    ) -> PyResult<Py<PyAny>> {
        self.live_group()?;
        let name = "Reduce_scatter";
        let send = buffer::view(a, Access::Read, "Reduce_scatter: a")?;
        let red = Reduction::new(py, &send, op)?;
        let counts = scatter_counts(&send, counts, self.comm.size(), name)?;
        let (_, tail) = rows(&send, name, "a")?;
        let me = self.comm.rank() as usize;
        let mut shape = vec![counts[me]];
        shape.extend_from_slice(&tail);
        let dt = dtype_of(py, &send);
        let mut t = target(
            py,
            out,
            &dt,
            &shape,
            Some(&send),
            Some("Reduce_scatter: out must not be a (there is no in-place reduce-scatter)"),
            name,
        )?;
        let row_items = tail.iter().product::<usize>();
        let r = with_carrier!(red.carrier, T => {
            // Carrier elements per item (2 for a complex sum).
            let per = send.itemsize / std::mem::size_of::<T>();
            let c = scaled(&counts, row_items * per, name)?;
            reduce_scatter_t::<T>(py, &self.comm, &send, &t.recv, &c, red.op::<T>())
        });
        red.finish(py, &self.comm, r)?;
        t.check()?;
        Ok(t.res.unbind())
    }
}

/// The counts of a reduce-scatter: given (one per rank, summing to the rows), or equal.
pub(crate) fn scatter_counts(
    send: &View,
    counts: Option<&Bound<'_, PyAny>>,
    size: u32,
    name: &str,
) -> PyResult<Vec<usize>> {
    let (n, _) = rows(send, name, "a")?;
    match counts {
        Some(c) => {
            let c = counts_arg(c, size, name, "counts")?;
            let total = checked_sum(&c, name, "counts")?;
            if total != n {
                return Err(errors::value_error(format!(
                    "{name}: the counts must add up to a's first axis {n} (a has shape {}), \
                     got {total}",
                    tuple(&send.shape)
                )));
            }
            Ok(c)
        }
        None => {
            if n % size as usize != 0 {
                return Err(errors::value_error(format!(
                    "{name}: without counts, a's first axis must split evenly among the \
                     {size} ranks; got shape {}",
                    tuple(&send.shape)
                )));
            }
            Ok(vec![n / size as usize; size as usize])
        }
    }
}

fn reduce_scatter_t<T: Element>(
    py: Python<'_>,
    c: &Communicator,
    send: &View,
    recv: &View,
    counts: &[usize],
    op: spools::Op<T>,
) -> PyResult<()> {
    let s = cast::<T>(send.bytes(), "a")?;
    // SAFETY: a writable view distinct from `send` (checked), used by this call alone.
    let r = cast_mut::<T>(unsafe { recv.bytes_mut() }, "out")?;
    runtime::blocking(py, || c.reduce_scatter(s, r, counts, &op)).map_err(coll_err)
}
