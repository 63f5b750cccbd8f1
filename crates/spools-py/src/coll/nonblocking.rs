//! The non-blocking collectives (`ibarrier`, `Ibcast`, `Ireduce`, `Iallreduce`,
//! `Igather`, `Iscatter`, `Iallgather`, `Ialltoall`, `Iscan`, `Ireduce_scatter`),
//! returning a [`CollRequest`]; also `Ibarrier` and `Barrier`, mpi4py's other spellings
//! of `ibarrier` and `barrier`.
//!
//! The runtime's non-blocking collectives own their buffers: the call copies the input
//! into a vector (so the caller may reuse its array at once), and the result vector
//! becomes the returned numpy array without a copy (or is copied into `out=`).

use pyo3::prelude::*;
use spools::Communicator;

use super::carrier::{to_vec, with_carrier, Carrier};
use super::ops::Reduction;
use super::request::{CollRequest, Finish, Pending, Typed, Unit};
use super::shapes::{coll_err, dtype_of, rows, tuple};
use crate::buffer::{self, Access, View};
use crate::comm::Comm;
use crate::errors;
use crate::runtime;

/// Which non-blocking reduction.
#[derive(Clone, Copy)]
enum Red {
    Reduce(u32),
    Allreduce,
    Scan,
    ReduceScatter,
}

/// Starts reduction `kind` of `data` (with GIL released: the first round may go out).
fn start_red<T: spools::Element + numpy::Element>(
    py: Python<'_>,
    c: &Communicator,
    kind: Red,
    data: Vec<T>,
    counts: Vec<usize>,
    op: spools::Op<T>,
) -> PyResult<Box<dyn Pending>> {
    let r = runtime::blocking(py, move || match kind {
        Red::Reduce(root) => c.ireduce(data, op, root),
        Red::Allreduce => c.iallreduce(data, op),
        Red::Scan => c.iscan(data, op),
        Red::ReduceScatter => c.ireduce_scatter(data, counts, op),
    })
    .map_err(coll_err)?;
    Ok(Box::new(Typed(Some(r))))
}

/// Which non-blocking move.
#[derive(Clone, Copy)]
enum Move {
    Bcast(u32),
    Gather(u32),
    Scatter(u32, usize),
    Allgather,
    Alltoall,
}

/// Starts move `kind` of `bytes` (as elements of `T`).
fn start_move<T: spools::Element + numpy::Element>(
    py: Python<'_>,
    c: &Communicator,
    kind: Move,
    bytes: &[u8],
) -> PyResult<Box<dyn Pending>> {
    let data = to_vec::<T>(bytes);
    let per = std::mem::size_of::<T>();
    let r = runtime::blocking(py, move || match kind {
        Move::Bcast(root) => c.ibcast(data, root),
        Move::Gather(root) => c.igather(data, root),
        Move::Scatter(root, count) => c.iscatter(data, count / per, root),
        Move::Allgather => c.iallgather(data),
        Move::Alltoall => c.ialltoall(data),
    })
    .map_err(coll_err)?;
    Ok(Box::new(Typed(Some(r))))
}

impl Comm {
    /// The shared body of the non-blocking reductions.
    #[allow(clippy::too_many_arguments)]
    fn coll_ireduction(
        &self,
        py: Python<'_>,
        kind: Red,
        a: &Bound<'_, PyAny>,
        op: Option<&Bound<'_, PyAny>>,
        counts: Option<&Bound<'_, PyAny>>,
        out: Option<&Bound<'_, PyAny>>,
        what: &'static str,
    ) -> PyResult<CollRequest> {
        let send = super::shapes::arg_view(py, a, Access::Read, "a", what)?;
        let red = Reduction::new(py, &send, op)?;
        let dt = dtype_of(py, &send);
        let (shape, counts) = match kind {
            Red::ReduceScatter => {
                let c = super::reduce::scatter_counts(&send, counts, self.comm.size(), what)?;
                let (_, tail) = rows(&send, what, "a")?;
                let mut shape = vec![c[self.comm.rank() as usize]];
                shape.extend_from_slice(&tail);
                let items = tail.iter().product::<usize>();
                (shape, super::shapes::scaled(&c, items, what)?)
            }
            _ => (send.shape.clone(), Vec::new()),
        };
        let gets = match kind {
            Red::Reduce(root) => root == self.comm.rank(),
            _ => true,
        };
        // A wrong `out` is raised by `wait()`, once the collective ended: raising here,
        // on this rank alone, would leave the other ranks waiting for its part.
        let pending = with_carrier!(red.carrier, T => {
            let per = send.itemsize / std::mem::size_of::<T>();
            let counts = super::shapes::scaled(&counts, per, what)?;
            start_red::<T>(py, &self.comm, kind, to_vec::<T>(send.bytes()), counts, red.op::<T>())
        })?;
        let finish = if gets {
            Finish::Array {
                dtype: dt.unbind(),
                shape,
                out: out.map(|o| o.clone().unbind()),
            }
        } else {
            Finish::Nothing
        };
        Ok(CollRequest::new(what, pending, finish, red.user()))
    }

    /// The shared body of the non-blocking moves: `bytes` travel as elements of the
    /// widest carrier the item size allows.
    #[allow(clippy::too_many_arguments)]
    fn coll_imove(
        &self,
        py: Python<'_>,
        kind: Move,
        itemsize: usize,
        bytes: &[u8],
        finish: Finish,
        what: &'static str,
    ) -> PyResult<CollRequest> {
        let pending = with_carrier!(Carrier::for_bytes(itemsize), T => {
            start_move::<T>(py, &self.comm, kind, bytes)
        })?;
        Ok(CollRequest::new(what, pending, finish, None))
    }
}

#[pymethods]
impl Comm {
    /// Non-blocking `barrier`: returns a `CollRequest` whose `wait()` returns `None` once
    /// every rank has called `ibarrier`.
    fn ibarrier(&self, py: Python<'_>) -> PyResult<CollRequest> {
        self.live_group()?;
        let r = runtime::blocking(py, || self.comm.ibarrier()).map_err(coll_err)?;
        Ok(CollRequest::new(
            "ibarrier",
            Box::new(Unit(Some(r))),
            Finish::Nothing,
            None,
        ))
    }

    /// `ibarrier` (mpi4py has both spellings).
    #[pyo3(name = "Ibarrier")]
    fn ibarrier_cap(&self, py: Python<'_>) -> PyResult<CollRequest> {
        self.ibarrier(py)
    }

    /// `barrier` (mpi4py has both spellings): waits until every rank of the
    /// communicator has called it.
    #[pyo3(name = "Barrier")]
    fn barrier_cap(&self, py: Python<'_>) -> PyResult<()> {
        self.live_group()?;
        runtime::blocking(py, || self.comm.barrier()).map_err(errors::from_msg)
    }

    /// Non-blocking `Bcast`: the root's `a` is copied when the call starts; `wait()`
    /// copies the root's content into `a` on every rank and returns `a` (do not use `a`
    /// until then).
    #[pyo3(name = "Ibcast", signature = (a, root = 0))]
    fn ibcast(&self, py: Python<'_>, a: &Bound<'_, PyAny>, root: i64) -> PyResult<CollRequest> {
        self.live_group()?;
        let root = self.check_rank(root, "Ibcast: root")?;
        let v = buffer::view(a, Access::Write, "Ibcast: a")?;
        let finish = Finish::Into(a.clone().unbind());
        self.coll_imove(
            py,
            Move::Bcast(root),
            v.itemsize,
            v.bytes(),
            finish,
            "Ibcast",
        )
    }

    /// Non-blocking `Reduce`: `a` is copied when the call starts; `wait()` returns the
    /// result on the root (a new array without a copy, or `out` filled), `None`
    /// elsewhere. `op` as for `Reduce` (a Python function runs during `wait`/`test` or
    /// other calls of the rank, with the GIL; its exception is raised by `wait`).
    #[pyo3(name = "Ireduce", signature = (a, op = None, root = 0, out = None))]
    fn ireduce(
        &self,
        py: Python<'_>,
        a: &Bound<'_, PyAny>,
        op: Option<&Bound<'_, PyAny>>,
        root: i64,
        out: Option<&Bound<'_, PyAny>>,
    ) -> PyResult<CollRequest> {
        self.live_group()?;
        let root = self.check_rank(root, "Ireduce: root")?;
        self.coll_ireduction(py, Red::Reduce(root), a, op, None, out, "Ireduce")
    }

    /// Non-blocking `Allreduce`: `a` is copied when the call starts (so `out=a` is fine);
    /// `wait()` returns the result (a new array without a copy, or `out` filled). `op`
    /// as for `Ireduce`.
    #[pyo3(name = "Iallreduce", signature = (a, op = None, out = None))]
    fn iallreduce(
        &self,
        py: Python<'_>,
        a: &Bound<'_, PyAny>,
        op: Option<&Bound<'_, PyAny>>,
        out: Option<&Bound<'_, PyAny>>,
    ) -> PyResult<CollRequest> {
        self.live_group()?;
        self.coll_ireduction(py, Red::Allreduce, a, op, None, out, "Iallreduce")
    }

    /// Non-blocking `Scan`: `a` is copied when the call starts; `wait()` returns the
    /// prefix result (new, or `out` filled). `op` as for `Ireduce`.
    #[pyo3(name = "Iscan", signature = (a, op = None, out = None))]
    fn iscan(
        &self,
        py: Python<'_>,
        a: &Bound<'_, PyAny>,
        op: Option<&Bound<'_, PyAny>>,
        out: Option<&Bound<'_, PyAny>>,
    ) -> PyResult<CollRequest> {
        self.live_group()?;
        self.coll_ireduction(py, Red::Scan, a, op, None, out, "Iscan")
    }

    /// Non-blocking `Reduce_scatter`: `a` is copied when the call starts; `wait()`
    /// returns this rank's block (new, or `out` filled). `counts` and `op` as for
    /// `Reduce_scatter`.
    #[pyo3(name = "Ireduce_scatter", signature = (a, counts = None, op = None, out = None))]
    fn ireduce_scatter(
        &self,
        py: Python<'_>,
        a: &Bound<'_, PyAny>,
        counts: Option<&Bound<'_, PyAny>>,
        op: Option<&Bound<'_, PyAny>>,
        out: Option<&Bound<'_, PyAny>>,
    ) -> PyResult<CollRequest> {
        self.live_group()?;
        self.coll_ireduction(
            py,
            Red::ReduceScatter,
            a,
            op,
            counts,
            out,
            "Ireduce_scatter",
        )
    }

    /// Non-blocking `Gather`: `a` is copied when the call starts; `wait()` returns on
    /// the root the array of shape `(size, *a.shape)` (new, or `out` filled), `None`
    /// elsewhere.
    #[pyo3(name = "Igather", signature = (a, root = 0, out = None))]
    fn igather(
        &self,
        py: Python<'_>,
        a: &Bound<'_, PyAny>,
        root: i64,
        out: Option<&Bound<'_, PyAny>>,
    ) -> PyResult<CollRequest> {
        self.live_group()?;
        let root = self.check_rank(root, "Igather: root")?;
        let v = buffer::view(a, Access::Read, "Igather: a")?;
        let finish = if self.comm.rank() == root {
            let mut shape = vec![self.comm.size() as usize];
            shape.extend_from_slice(&v.shape);
            array_finish(py, &v, shape, out, "Igather")?
        } else {
            Finish::Nothing
        };
        self.coll_imove(
            py,
            Move::Gather(root),
            v.itemsize,
            v.bytes(),
            finish,
            "Igather",
        )
    }

    /// Non-blocking `Scatter`: the root gives `a` (first axis == size; copied when the
    /// call starts); the other ranks give `out`, the array of the block's shape and dtype
    /// (`a.shape[1:]`) that `wait()` fills, since no header goes first here. `wait()`
    /// returns this rank's block (`out` filled, or on the root without `out` a new array).
    #[pyo3(name = "Iscatter", signature = (a = None, root = 0, out = None))]
    fn iscatter(
        &self,
        py: Python<'_>,
        a: Option<&Bound<'_, PyAny>>,
        root: i64,
        out: Option<&Bound<'_, PyAny>>,
    ) -> PyResult<CollRequest> {
        self.live_group()?;
        let root = self.check_rank(root, "Iscatter: root")?;
        let size = self.comm.size() as usize;
        if self.comm.rank() == root {
            let Some(a) = a else {
                return Err(errors::value_error(
                    "Iscatter: the root must give the array to scatter, got None",
                ));
            };
            let v = buffer::view(a, Access::Read, "Iscatter: a")?;
            let (n, tail) = rows(&v, "Iscatter", "a")?;
            if n != size {
                return Err(errors::value_error(format!(
                    "Iscatter: the root's array must have first axis == size {size} (rank i \
                     gets a[i]), got shape {}",
                    tuple(&v.shape)
                )));
            }
            let block = v.len() / size;
            let finish = array_finish(py, &v, tail, out, "Iscatter")?;
            self.coll_imove(
                py,
                Move::Scatter(root, block),
                v.itemsize,
                v.bytes(),
                finish,
                "Iscatter",
            )
        } else {
            let Some(o) = out else {
                return Err(errors::value_error(
                    "Iscatter: the ranks other than the root must give out= (an array of \
                     the block's shape and dtype, filled by wait())",
                ));
            };
            let v = buffer::view(o, Access::Write, "Iscatter: out")?;
            let finish = Finish::Array {
                dtype: dtype_of(py, &v).unbind(),
                shape: v.shape.clone(),
                out: Some(o.clone().unbind()),
            };
            self.coll_imove(
                py,
                Move::Scatter(root, v.len()),
                v.itemsize,
                &[],
                finish,
                "Iscatter",
            )
        }
    }

    /// Non-blocking `Allgather`: `a` is copied when the call starts; `wait()` returns the
    /// array of shape `(size, *a.shape)` (new, or `out` filled).
    #[pyo3(name = "Iallgather", signature = (a, out = None))]
    fn iallgather(
        &self,
        py: Python<'_>,
        a: &Bound<'_, PyAny>,
        out: Option<&Bound<'_, PyAny>>,
    ) -> PyResult<CollRequest> {
        self.live_group()?;
        let v = buffer::view(a, Access::Read, "Iallgather: a")?;
        let mut shape = vec![self.comm.size() as usize];
        shape.extend_from_slice(&v.shape);
        let finish = array_finish(py, &v, shape, out, "Iallgather")?;
        self.coll_imove(
            py,
            Move::Allgather,
            v.itemsize,
            v.bytes(),
            finish,
            "Iallgather",
        )
    }

    /// Non-blocking `Alltoall`: `a` (first axis == size) is copied when the call starts;
    /// `wait()` returns the received blocks (new, or `out` filled).
    #[pyo3(name = "Ialltoall", signature = (a, out = None))]
    fn ialltoall(
        &self,
        py: Python<'_>,
        a: &Bound<'_, PyAny>,
        out: Option<&Bound<'_, PyAny>>,
    ) -> PyResult<CollRequest> {
        self.live_group()?;
        let v = buffer::view(a, Access::Read, "Ialltoall: a")?;
        let (n, _) = rows(&v, "Ialltoall", "a")?;
        let size = self.comm.size() as usize;
        if n != size {
            return Err(errors::value_error(format!(
                "Ialltoall: a's first axis must be the communicator's size {size} (block j \
                 goes to rank j), got shape {}",
                tuple(&v.shape)
            )));
        }
        let finish = array_finish(py, &v, v.shape.clone(), out, "Ialltoall")?;
        self.coll_imove(
            py,
            Move::Alltoall,
            v.itemsize,
            v.bytes(),
            finish,
            "Ialltoall",
        )
    }
}

/// The result of a move: of `v`'s dtype and `shape`, in `out` (checked by `wait()`) if
/// given.
fn array_finish(
    py: Python<'_>,
    v: &View,
    shape: Vec<usize>,
    out: Option<&Bound<'_, PyAny>>,
    _what: &str,
) -> PyResult<Finish> {
    // A wrong `out` is raised by `wait()` (see `coll_ireduction`).
    let dt = dtype_of(py, v);
    Ok(Finish::Array {
        dtype: dt.unbind(),
        shape,
        out: out.map(|o| o.clone().unbind()),
    })
}
