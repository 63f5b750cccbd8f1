//! The blocking collectives of blocks of different sizes along the first axis:
//! `Gatherv`, `Allgatherv`, `Scatterv`, `Alltoallv`. The ranks first agree on every
//! rank's rows, dtype and row shape (see [`super::shapes::agree`]).

use pyo3::prelude::*;

use super::shapes::{
    agree, checked_sum, coll_err, counts_arg, dtype_of, out_rows, row_bytes, rows, scaled, target,
    tuple, Desc,
};
use crate::buffer::{self, Access, View};
use crate::comm::Comm;
use crate::errors;
use crate::runtime;

/// `(sum of rows, *tail)`.
fn stacked(rows: &[usize], tail: &[usize], op: &str) -> PyResult<Vec<usize>> {
    let mut s = vec![checked_sum(rows, op, "rows")?];
    s.extend_from_slice(tail);
    Ok(s)
}

#[pymethods]
impl Comm {
    /// Gathers every rank's array `a` on rank `root`, concatenated along the first axis
    /// (whose length may differ per rank; the other axes and the dtype may not): returns
    /// there the array of shape `(sum of the ranks' a.shape[0], *a.shape[1:])` (new, or
    /// `out` filled), `None` elsewhere. Collective.
    #[pyo3(name = "Gatherv", signature = (a, root = 0, out = None))]
    fn gatherv(
        &self,
        py: Python<'_>,
        a: &Bound<'_, PyAny>,
        root: i64,
        out: Option<&Bound<'_, PyAny>>,
    ) -> PyResult<Option<Py<PyAny>>> {
        self.live_group()?;
        let root = self.check_rank(root, "Gatherv: root")?;
        let send = buffer::view(a, Access::Read, "Gatherv: a");
        let desc = send.as_ref().map_err(|e| e.clone_ref(py)).and_then(|v| {
            let d = Desc::of(py, v, "Gatherv")?;
            if self.comm.rank() == root {
                out_rows(py, out, &dtype_of(py, v), &v.shape[1..], "Gatherv")?;
            }
            Ok(d)
        });
        let ag = agree(py, &self.comm, desc, "Gatherv")?;
        let send = send?;
        let row = row_bytes(&send, &ag.tail);
        let counts = scaled(&ag.rows, row, "Gatherv")?;
        if self.comm.rank() != root {
            runtime::blocking(py, || {
                self.comm.gatherv(send.bytes(), &mut [], &counts, root)
            })
            .map_err(coll_err)?;
            return Ok(None);
        }
        let shape = stacked(&ag.rows, &ag.tail, "Gatherv")?;
        let dt = dtype_of(py, &send);
        let t = target(py, out, &dt, &shape, Some(&send), None, "Gatherv")?;
        t.fill(py, |r| self.comm.gatherv(send.bytes(), r, &counts, root))
            .map(Some)
    }

    /// Gives every rank every rank's array `a` concatenated along the first axis (whose
    /// length may differ per rank; the other axes and the dtype may not): an array of
    /// shape `(sum of the ranks' a.shape[0], *a.shape[1:])` (new, or `out` filled).
    /// Collective.
    #[pyo3(name = "Allgatherv", signature = (a, out = None))]
    fn allgatherv(
        &self,
        py: Python<'_>,
        a: &Bound<'_, PyAny>,
        out: Option<&Bound<'_, PyAny>>,
    ) -> PyResult<Py<PyAny>> {
        self.live_group()?;
        let send = buffer::view(a, Access::Read, "Allgatherv: a");
        let desc = send.as_ref().map_err(|e| e.clone_ref(py)).and_then(|v| {
            let d = Desc::of(py, v, "Allgatherv")?;
            out_rows(py, out, &dtype_of(py, v), &v.shape[1..], "Allgatherv")?;
            Ok(d)
        });
        let ag = agree(py, &self.comm, desc, "Allgatherv")?;
        let send = send?;
        let counts = scaled(&ag.rows, row_bytes(&send, &ag.tail), "Allgatherv")?;
        let shape = stacked(&ag.rows, &ag.tail, "Allgatherv")?;
        let dt = dtype_of(py, &send);
        let t = target(py, out, &dt, &shape, Some(&send), None, "Allgatherv")?;
        t.fill(py, |r| self.comm.allgatherv(send.bytes(), r, &counts))
    }

    /// Scatters rank `root`'s array `a` along its first axis in blocks of `counts[i]`
    /// rows for rank i (`counts` given on the root, one per rank, adding up to
    /// `a.shape[0]`): returns this rank's block, of shape `(counts[rank], *a.shape[1:])`
    /// (new, or `out` filled). Other ranks' `a` and `counts` are ignored (give `None`).
    /// Collective.
    #[pyo3(name = "Scatterv", signature = (a = None, counts = None, root = 0, out = None))]
    fn scatterv(
        &self,
        py: Python<'_>,
        a: Option<&Bound<'_, PyAny>>,
        counts: Option<&Bound<'_, PyAny>>,
        root: i64,
        out: Option<&Bound<'_, PyAny>>,
    ) -> PyResult<Py<PyAny>> {
        self.live_group()?;
        let root = self.check_rank(root, "Scatterv: root")?;
        let size = self.comm.size();
        let send: Option<PyResult<View>> = (self.comm.rank() == root).then(|| match a {
            Some(a) => buffer::view(a, Access::Read, "Scatterv: a"),
            None => Err(errors::value_error(
                "Scatterv: the root must give the array to scatter, got None",
            )),
        });
        let (dtype, (tail, counts)) = self.coll_scatter_header(
            py,
            root,
            send.as_ref(),
            |v| {
                let (n, tail) = rows(v, "Scatterv", "a")?;
                let c = match counts {
                    Some(c) => counts_arg(c, size, "Scatterv", "counts")?,
                    None => {
                        return Err(errors::value_error(
                            "Scatterv: the root must give the counts (one per rank)",
                        ))
                    }
                };
                let total = checked_sum(&c, "Scatterv", "counts")?;
                if total != n {
                    return Err(errors::value_error(format!(
                        "Scatterv: the counts must add up to a's first axis {n} (a has \
                         shape {}), got {total}",
                        tuple(&v.shape)
                    )));
                }
                Ok((tail, Some(c)))
            },
            "Scatterv",
        )?;
        let counts = counts.unwrap_or_default();
        let send = send.transpose()?;
        let me = self.comm.rank() as usize;
        let mut shape = vec![counts.get(me).copied().unwrap_or(0)];
        shape.extend_from_slice(&tail);
        let t = target(py, out, &dtype, &shape, send.as_ref(), None, "Scatterv")?;
        let row = tail.iter().product::<usize>() * dtype_itemsize(&dtype)?;
        let counts = scaled(&counts, row, "Scatterv")?;
        let sb = send.as_ref().map(|s| s.bytes()).unwrap_or(&[]);
        t.fill(py, |r| self.comm.scatterv(sb, &counts, r, root))
    }

    /// All-to-all of blocks of different sizes: rows `a[d_j : d_j + sendcounts[j]]` (the
    /// blocks one after the other along the first axis, `sendcounts` one per rank adding
    /// up to `a.shape[0]`) go to rank j. Returns the blocks this rank received, in rank
    /// order, concatenated along the first axis (new, or `out` filled); how many rows came
    /// from each rank is what they gave as `sendcounts[this rank]`. Every rank gives the
    /// same dtype and row shape. Collective.
    #[pyo3(name = "Alltoallv", signature = (a, sendcounts, out = None))]
    fn alltoallv(
        &self,
        py: Python<'_>,
        a: &Bound<'_, PyAny>,
        sendcounts: &Bound<'_, PyAny>,
        out: Option<&Bound<'_, PyAny>>,
    ) -> PyResult<Py<PyAny>> {
        self.live_group()?;
        let size = self.comm.size();
        let send = buffer::view(a, Access::Read, "Alltoallv: a");
        let local = send.as_ref().map_err(|e| e.clone_ref(py)).and_then(|v| {
            let d = Desc::of(py, v, "Alltoallv")?;
            let c = counts_arg(sendcounts, size, "Alltoallv", "sendcounts")?;
            let total = checked_sum(&c, "Alltoallv", "sendcounts")?;
            if total != v.shape[0] {
                return Err(errors::value_error(format!(
                    "Alltoallv: the sendcounts must add up to a's first axis {} (a has shape \
                     {}), got {total}",
                    v.shape[0],
                    tuple(&v.shape)
                )));
            }
            out_rows(py, out, &dtype_of(py, v), &v.shape[1..], "Alltoallv")?;
            Ok((d, c))
        });
        let (desc, sc) = match local {
            Ok((d, c)) => (Ok(d), c),
            Err(e) => (Err(e), Vec::new()),
        };
        let ag = agree(py, &self.comm, desc, "Alltoallv")?;
        let send = send?;
        let sc64: Vec<u64> = sc.iter().map(|&c| c as u64).collect();
        let mut rc64 = vec![0u64; size as usize];
        runtime::blocking(py, || self.comm.alltoall(&sc64, &mut rc64)).map_err(coll_err)?;
        let rc: Vec<usize> = rc64.iter().map(|&c| c as usize).collect();
        let shape = stacked(&rc, &ag.tail, "Alltoallv")?;
        let dt = dtype_of(py, &send);
        let t = target(
            py,
            out,
            &dt,
            &shape,
            Some(&send),
            Some("Alltoallv: out must not be a (there is no in-place all-to-all)"),
            "Alltoallv",
        )?;
        let row = row_bytes(&send, &ag.tail);
        let (sc, rc) = (
            scaled(&sc, row, "Alltoallv")?,
            scaled(&rc, row, "Alltoallv")?,
        );
        t.fill(py, |r| self.comm.alltoallv(send.bytes(), &sc, r, &rc))
    }
}

/// A dtype's item size.
fn dtype_itemsize(d: &Bound<'_, numpy::PyArrayDescr>) -> PyResult<usize> {
    use numpy::PyArrayDescrMethods;
    Ok(d.itemsize())
}
