//! The collectives of picklable Python objects (mpi4py's lower-case forms; the
//! capitalised ones take arrays): `bcast`, `gather`, `allgather`, `scatter`, `alltoall`,
//! `reduce`, `allreduce`. Each rank's pickle travels with a marker byte: an object that
//! does not pickle raises its own exception on its rank and a `ValueError` naming that
//! rank on the ranks that wanted it, never a hang. The reductions gather the objects and
//! combine them in rank order (`spools._coll`): an operator error is raised after the
//! collective, on the ranks that apply it.

use pyo3::prelude::*;
use pyo3::types::PyList;

use super::shapes::{coll_err, dumps, err_text, loads};
use crate::comm::Comm;
use crate::errors;
use crate::runtime;

/// The marker of a pickle.
const OK: u8 = 0;
/// The marker of a pickling error's message.
const BAD: u8 = 1;

/// `obj` pickled behind its marker, or the pickling's error as text (and the error).
fn pack(py: Python<'_>, obj: &Bound<'_, PyAny>) -> (Vec<u8>, Option<PyErr>) {
    match dumps(py, obj) {
        Ok(mut b) => {
            b.insert(0, OK);
            (b, None)
        }
        Err(e) => {
            let mut b = vec![BAD];
            b.extend_from_slice(err_text(py, &e).as_bytes());
            (b, Some(e))
        }
    }
}

/// The object packed in `b` by rank `rank`.
fn unpack<'py>(py: Python<'py>, b: &[u8], rank: usize, op: &str) -> PyResult<Bound<'py, PyAny>> {
    match b.split_first() {
        Some((&OK, p)) => loads(py, p),
        Some((_, m)) => Err(errors::value_error(format!(
            "{op}: rank {rank}'s object could not be pickled: {}",
            String::from_utf8_lossy(m)
        ))),
        None => Err(errors::value_error(format!(
            "{op}: rank {rank} sent nothing (not a pickle)"
        ))),
    }
}

/// Every rank's part of a sequence argument `objs` of one object per rank (`n`), each
/// packed, with the first error; on an error in the sequence itself (not a sequence, or
/// of the wrong length), its message packed for every rank. `op` begins the message of
/// the latter ("scatter: the root must").
fn pack_each<'py>(
    py: Python<'py>,
    objs: Option<&Bound<'py, PyAny>>,
    n: usize,
    op: &str,
) -> (Vec<Vec<u8>>, Option<PyErr>) {
    let items: PyResult<Vec<Bound<'py, PyAny>>> = match objs {
        Some(o) => o.try_iter().and_then(|it| it.collect()),
        None => Err(errors::value_error(format!(
            "{op} give a sequence of one object per rank, got None"
        ))),
    };
    let items = items.and_then(|v| {
        if v.len() == n {
            Ok(v)
        } else {
            Err(errors::value_error(format!(
                "{op} give one object per rank ({n}), got {}",
                v.len()
            )))
        }
    });
    match items {
        Ok(v) => {
            let mut parts = Vec::with_capacity(n);
            let mut err = None;
            for o in &v {
                let (b, e) = pack(py, o);
                parts.push(b);
                if err.is_none() {
                    err = e;
                }
            }
            (parts, err)
        }
        Err(e) => {
            let mut b = vec![BAD];
            b.extend_from_slice(err_text(py, &e).as_bytes());
            (vec![b; n], Some(e))
        }
    }
}

/// `spools._coll.NAME`: the object reductions' pure-Python part.
fn coll_py<'py>(py: Python<'py>, name: &str) -> PyResult<Bound<'py, PyAny>> {
    py.import("spools._coll")?.getattr(name)
}

#[pymethods]
impl Comm {
    /// Rank `root`'s object `obj` (any picklable object) on every rank: the root gets
    /// its own `obj` back, the others an unpickled copy (their `obj` is ignored).
    /// Collective.
    #[pyo3(name = "bcast", signature = (obj, root = 0))]
    fn bcast_obj<'py>(
        &self,
        py: Python<'py>,
        obj: &Bound<'py, PyAny>,
        root: i64,
    ) -> PyResult<Bound<'py, PyAny>> {
        self.live_group()?;
        let root = self.check_rank(root, "bcast: root")?;
        let me = self.comm.rank();
        let (mine, err) = if me == root {
            pack(py, obj)
        } else {
            (Vec::new(), None)
        };
        let got = runtime::blocking(py, || self.comm.bcast_bytes(root, &mine)).map_err(coll_err)?;
        if let Some(e) = err {
            return Err(e);
        }
        if me == root {
            return Ok(obj.clone());
        }
        unpack(py, &got, root as usize, "bcast")
    }

    /// Every rank's object `obj` (picklable) gathered on rank `root`: a list by rank
    /// there, `None` elsewhere. Collective.
    #[pyo3(name = "gather", signature = (obj, root = 0))]
    fn gather_obj<'py>(
        &self,
        py: Python<'py>,
        obj: &Bound<'py, PyAny>,
        root: i64,
    ) -> PyResult<Option<Bound<'py, PyList>>> {
        self.live_group()?;
        let root = self.check_rank(root, "gather: root")?;
        let (me, n) = (self.comm.rank(), self.comm.size() as usize);
        let (mine, err) = pack(py, obj);
        let mut lens = vec![0u64; if me == root { n } else { 0 }];
        let len = [mine.len() as u64];
        runtime::blocking(py, || self.comm.gather(&len, &mut lens, root)).map_err(coll_err)?;
        let counts: Vec<usize> = if me == root {
            lens.iter().map(|&l| l as usize).collect()
        } else {
            let mut c = vec![0; n];
            c[me as usize] = mine.len();
            c
        };
        let mut all = vec![0u8; if me == root { counts.iter().sum() } else { 0 }];
        runtime::blocking(py, || self.comm.gatherv(&mine, &mut all, &counts, root))
            .map_err(coll_err)?;
        if let Some(e) = err {
            return Err(e);
        }
        if me != root {
            return Ok(None);
        }
        let list = PyList::empty(py);
        let mut at = 0;
        for (r, &c) in counts.iter().enumerate() {
            list.append(unpack(py, &all[at..at + c], r, "gather")?)?;
            at += c;
        }
        Ok(Some(list))
    }

    /// Every rank's object `obj` (picklable) on every rank: a list by rank. Collective.
    #[pyo3(name = "allgather")]
    fn allgather_obj<'py>(
        &self,
        py: Python<'py>,
        obj: &Bound<'py, PyAny>,
    ) -> PyResult<Bound<'py, PyList>> {
        self.live_group()?;
        let (mine, err) = pack(py, obj);
        let all = runtime::blocking(py, || self.comm.allgather_bytes(&mine)).map_err(coll_err)?;
        if let Some(e) = err {
            return Err(e);
        }
        let list = PyList::empty(py);
        for (r, b) in all.iter().enumerate() {
            list.append(unpack(py, b, r, "allgather")?)?;
        }
        Ok(list)
    }

    /// Rank `root`'s sequence `objs` (one picklable object per rank) scattered: rank i
    /// gets `objs[i]` (the other ranks' `objs` is ignored). Collective.
    #[pyo3(name = "scatter", signature = (objs = None, root = 0))]
    fn scatter_obj<'py>(
        &self,
        py: Python<'py>,
        objs: Option<&Bound<'py, PyAny>>,
        root: i64,
    ) -> PyResult<Bound<'py, PyAny>> {
        self.live_group()?;
        let root = self.check_rank(root, "scatter: root")?;
        let (me, n) = (self.comm.rank(), self.comm.size() as usize);
        // At the root: every rank's packed object, or the error of the whole sequence.
        let (parts, err) = if me == root {
            pack_each(py, objs, n, "scatter: the root must")
        } else {
            (Vec::new(), None)
        };
        let lens: Vec<u64> = parts.iter().map(|p| p.len() as u64).collect();
        let mut len = [0u64];
        runtime::blocking(py, || self.comm.scatter(&lens, &mut len, root)).map_err(coll_err)?;
        let counts: Vec<usize> = if me == root {
            lens.iter().map(|&l| l as usize).collect()
        } else {
            let mut c = vec![0; n];
            c[me as usize] = len[0] as usize;
            c
        };
        let send: Vec<u8> = parts.concat();
        let mut got = vec![0u8; len[0] as usize];
        runtime::blocking(py, || self.comm.scatterv(&send, &counts, &mut got, root))
            .map_err(coll_err)?;
        if let Some(e) = err {
            return Err(e);
        }
        unpack(py, &got, root as usize, "scatter")
    }

    /// Every rank's sequence `objs` of one picklable object per rank exchanged: returns
    /// a list by rank whose `[i]` is rank i's `objs[this rank]`. Collective.
    #[pyo3(name = "alltoall")]
    fn alltoall_obj<'py>(
        &self,
        py: Python<'py>,
        objs: &Bound<'py, PyAny>,
    ) -> PyResult<Bound<'py, PyList>> {
        self.live_group()?;
        let n = self.comm.size() as usize;
        let (parts, err) = pack_each(py, Some(objs), n, "alltoall: each rank must");
        let lens: Vec<u64> = parts.iter().map(|p| p.len() as u64).collect();
        let mut got = vec![0u64; n];
        runtime::blocking(py, || self.comm.alltoall(&lens, &mut got)).map_err(coll_err)?;
        let sc: Vec<usize> = parts.iter().map(Vec::len).collect();
        let rc: Vec<usize> = got.iter().map(|&l| l as usize).collect();
        let send: Vec<u8> = parts.concat();
        let mut all = vec![0u8; rc.iter().sum()];
        runtime::blocking(py, || self.comm.alltoallv(&send, &sc, &mut all, &rc))
            .map_err(coll_err)?;
        if let Some(e) = err {
            return Err(e);
        }
        let list = PyList::empty(py);
        let mut at = 0;
        for (r, &c) in rc.iter().enumerate() {
            list.append(unpack(py, &all[at..at + c], r, "alltoall")?)?;
            at += c;
        }
        Ok(list)
    }

    /// Every rank's picklable object `obj` combined with `op` in rank order, on rank
    /// `root` (`None` elsewhere). `op`: `"sum"` (the default: `a + b`), `"prod"`
    /// (`a * b`), `"min"`, `"max"` (`spools.SUM`, ...), or a callable `f(a, b)` (also
    /// `spools.Op(f)`), `a` the lower ranks' result. The objects are gathered on the
    /// root, which combines them (mpi4py's object reduction). Collective.
    #[pyo3(name = "reduce", signature = (obj, op = None, root = 0))]
    fn reduce_obj<'py>(
        slf: &Bound<'py, Self>,
        obj: &Bound<'py, PyAny>,
        op: Option<&Bound<'py, PyAny>>,
        root: i64,
    ) -> PyResult<Bound<'py, PyAny>> {
        coll_py(slf.py(), "_reduce_obj")?.call1((slf, obj, op, root))
    }

    /// Every rank's picklable object `obj` combined with `op` in rank order, on every
    /// rank (each gathers every object and combines them). `op` as for `reduce`.
    /// Collective.
    #[pyo3(name = "allreduce", signature = (obj, op = None))]
    fn allreduce_obj<'py>(
        slf: &Bound<'py, Self>,
        obj: &Bound<'py, PyAny>,
        op: Option<&Bound<'py, PyAny>>,
    ) -> PyResult<Bound<'py, PyAny>> {
        coll_py(slf.py(), "_allreduce_obj")?.call1((slf, obj, op))
    }
}
