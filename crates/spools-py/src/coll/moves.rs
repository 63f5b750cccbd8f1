//! The blocking collectives that move equal blocks: `Bcast`, `Gather`, `Allgather`,
//! `Alltoall`, `Scatter`. They move bytes, so any dtype goes (complex, records).

use pyo3::prelude::*;

use super::shapes::{coll_err, dtype_of, dumps, err_text, loads, rows, target, tuple};
use crate::buffer::{self, Access};
use crate::comm::Comm;
use crate::errors;
use crate::runtime;

#[pymethods]
impl Comm {
    /// Copies rank `root`'s array `a` into `a` of every rank, in place, and returns `a`.
    /// Every rank gives a writable array of the same shape and dtype. Collective.
    #[pyo3(name = "Bcast", signature = (a, root = 0))]
    fn bcast<'py>(
        &self,
        py: Python<'py>,
        a: &Bound<'py, PyAny>,
        root: i64,
    ) -> PyResult<Bound<'py, PyAny>> {
        self.live_group()?;
        let root = self.check_rank(root, "Bcast: root")?;
        let v = buffer::view(a, Access::Write, "Bcast: a")?;
        // SAFETY: a writable view this call alone uses.
        let b = unsafe { v.bytes_mut() };
        runtime::blocking(py, || self.comm.bcast(b, root)).map_err(coll_err)?;
        Ok(a.clone())
    }

    /// Gathers every rank's array `a` (all of the same shape and dtype) on rank `root`:
    /// returns there an array of shape `(size, *a.shape)` whose `[i]` is rank i's `a`
    /// (new, or `out` filled), and `None` on the other ranks. Collective.
    #[pyo3(name = "Gather", signature = (a, root = 0, out = None))]
    fn gather(
        &self,
        py: Python<'_>,
        a: &Bound<'_, PyAny>,
        root: i64,
        out: Option<&Bound<'_, PyAny>>,
    ) -> PyResult<Option<Py<PyAny>>> {
        self.live_group()?;
        let root = self.check_rank(root, "Gather: root")?;
        let send = buffer::view(a, Access::Read, "Gather: a")?;
        if self.comm.rank() != root {
            runtime::blocking(py, || self.comm.gather(send.bytes(), &mut [], root))
                .map_err(coll_err)?;
            return Ok(None);
        }
        let mut shape = vec![self.comm.size() as usize];
        shape.extend_from_slice(&send.shape);
        let dt = dtype_of(py, &send);
        let t = target(py, out, &dt, &shape, Some(&send), None, "Gather")?;
        t.fill(py, |r| self.comm.gather(send.bytes(), r, root))
            .map(Some)
    }

    /// Gives every rank every rank's array `a` (all of the same shape and dtype): an
    /// array of shape `(size, *a.shape)` whose `[i]` is rank i's `a` (new, or `out`
    /// filled). Collective.
    #[pyo3(name = "Allgather", signature = (a, out = None))]
    fn allgather(
        &self,
        py: Python<'_>,
        a: &Bound<'_, PyAny>,
        out: Option<&Bound<'_, PyAny>>,
    ) -> PyResult<Py<PyAny>> {
        self.live_group()?;
        let send = buffer::view(a, Access::Read, "Allgather: a")?;
        let mut shape = vec![self.comm.size() as usize];
        shape.extend_from_slice(&send.shape);
        let dt = dtype_of(py, &send);
        let t = target(py, out, &dt, &shape, Some(&send), None, "Allgather")?;
        t.fill(py, |r| self.comm.allgather(send.bytes(), r))
    }

    /// All-to-all: `a[j]` (first axis == size) goes to rank j, which gets it as `[i]` of
    /// its result for this rank i. Returns an array of `a`'s shape and dtype (new, or
    /// `out` filled). Every rank gives the same shape and dtype. Collective.
    #[pyo3(name = "Alltoall", signature = (a, out = None))]
    fn alltoall(
        &self,
        py: Python<'_>,
        a: &Bound<'_, PyAny>,
        out: Option<&Bound<'_, PyAny>>,
    ) -> PyResult<Py<PyAny>> {
        self.live_group()?;
        let send = buffer::view(a, Access::Read, "Alltoall: a")?;
        let (n, _) = rows(&send, "Alltoall", "a")?;
        let size = self.comm.size() as usize;
        if n != size {
            return Err(errors::value_error(format!(
                "Alltoall: a's first axis must be the communicator's size {size} (block j \
                 goes to rank j), got shape {}",
                tuple(&send.shape)
            )));
        }
        let dt = dtype_of(py, &send);
        let t = target(
            py,
            out,
            &dt,
            &send.shape,
            Some(&send),
            Some("Alltoall: out must not be a (there is no in-place all-to-all)"),
            "Alltoall",
        )?;
        t.fill(py, |r| self.comm.alltoall(send.bytes(), r))
    }

    /// Scatters rank `root`'s array `a` (first axis == size) along its first axis: every
    /// rank i gets `a[i]` (a new array, or `out` filled). The other ranks' `a` is
    /// ignored (give `None`): the root tells them the block's dtype and shape first, so
    /// a root `a` of the wrong shape is the same `ValueError` on every rank. Collective.
    #[pyo3(name = "Scatter", signature = (a = None, root = 0, out = None))]
    fn scatter(
        &self,
        py: Python<'_>,
        a: Option<&Bound<'_, PyAny>>,
        root: i64,
        out: Option<&Bound<'_, PyAny>>,
    ) -> PyResult<Py<PyAny>> {
        self.live_group()?;
        let root = self.check_rank(root, "Scatter: root")?;
        let size = self.comm.size() as usize;
        let send = if self.comm.rank() == root {
            let v = match a {
                Some(a) => buffer::view(a, Access::Read, "Scatter: a"),
                None => Err(errors::value_error(
                    "Scatter: the root must give the array to scatter, got None",
                )),
            };
            Some(v.and_then(|v| {
                let (n, _) = rows(&v, "Scatter", "a")?;
                if n != size {
                    return Err(errors::value_error(format!(
                        "Scatter: the root's array must have first axis == size {size} (rank \
                         i gets a[i]), got shape {}",
                        tuple(&v.shape)
                    )));
                }
                Ok(v)
            }))
        } else {
            None
        };
        let (dtype, (shape, _)) = self.coll_scatter_header(
            py,
            root,
            send.as_ref(),
            |v| Ok((v.shape[1..].to_vec(), None)),
            "Scatter",
        )?;
        let send = send.transpose()?;
        let t = target(py, out, &dtype, &shape, send.as_ref(), None, "Scatter")?;
        let sb = send.as_ref().map(|s| s.bytes()).unwrap_or(&[]);
        t.fill(py, |r| self.comm.scatter(sb, r, root))
    }
}

/// What a scatter's root tells the other ranks: the block's shape and the counts of a
/// v-scatter.
pub(crate) type BlockShape = (Vec<usize>, Option<Vec<usize>>);

impl Comm {
    /// The root's header of a scatter (collective): its array's dtype and `shape(a)`, or
    /// its error, which every rank then raises.
    pub(crate) fn coll_scatter_header<'py>(
        &self,
        py: Python<'py>,
        root: u32,
        send: Option<&PyResult<crate::buffer::View>>,
        shape: impl FnOnce(&crate::buffer::View) -> PyResult<BlockShape>,
        op: &str,
    ) -> PyResult<(Bound<'py, numpy::PyArrayDescr>, BlockShape)> {
        let local = send.map(|s| match s {
            Ok(v) => shape(v).map(|s| (dtype_of(py, v), s)),
            Err(e) => Err(e.clone_ref(py)),
        });
        let mine: Vec<u8> = match &local {
            Some(Ok((d, (s, c)))) => dumps(py, &("ok", d, s, c).into_pyobject(py)?.into_any())?,
            Some(Err(e)) => dumps(py, &("err", err_text(py, e)).into_pyobject(py)?.into_any())?,
            None => Vec::new(),
        };
        let got = runtime::blocking(py, || self.comm.bcast_bytes(root, &mine)).map_err(coll_err)?;
        let h = loads(py, &got)?;
        let tag: String = h.get_item(0)?.extract()?;
        if tag != "ok" {
            let m: String = h.get_item(1)?.extract()?;
            if let Some(Err(e)) = local {
                return Err(e);
            }
            return Err(errors::value_error(format!(
                "{op}: the root's arguments are wrong: {m}"
            )));
        }
        let dtype = h
            .get_item(1)?
            .cast_into::<numpy::PyArrayDescr>()
            .map_err(|_| errors::type_error(format!("{op}: the root's header has no dtype")))?;
        let shape: Vec<usize> = h.get_item(2)?.extract()?;
        let counts: Option<Vec<usize>> = h.get_item(3)?.extract()?;
        Ok((dtype, (shape, counts)))
    }
}
