//! The collectives of picklable Python objects (mpi4py's lower-case forms): `bcast_obj`,
//! `gather_obj`, `allgather_obj`, `scatter_obj`. Each rank's pickle travels with a
//! marker byte: an object that does not pickle raises its own exception on its rank
//! and a `ValueError` naming that rank on the ranks that wanted it, never a hang.

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

#[pymethods]
impl Comm {
    /// Rank `root`'s object `obj` (any picklable object) on every rank: the root gets
    /// its own `obj` back, the others an unpickled copy (their `obj` is ignored).
    /// Collective.
    #[pyo3(signature = (obj, root = 0))]
    fn bcast_obj<'py>(
        &self,
        py: Python<'py>,
        obj: &Bound<'py, PyAny>,
        root: i64,
    ) -> PyResult<Bound<'py, PyAny>> {
        self.live()?;
        let root = self.check_rank(root, "bcast_obj: root")?;
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
        unpack(py, &got, root as usize, "bcast_obj")
    }

    /// Every rank's object `obj` (picklable) gathered on rank `root`: a list by rank
    /// there, `None` elsewhere. Collective.
    #[pyo3(signature = (obj, root = 0))]
    fn gather_obj<'py>(
        &self,
        py: Python<'py>,
        obj: &Bound<'py, PyAny>,
        root: i64,
    ) -> PyResult<Option<Bound<'py, PyList>>> {
        self.live()?;
        let root = self.check_rank(root, "gather_obj: root")?;
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
            list.append(unpack(py, &all[at..at + c], r, "gather_obj")?)?;
            at += c;
        }
        Ok(Some(list))
    }

    /// Every rank's object `obj` (picklable) on every rank: a list by rank. Collective.
    fn allgather_obj<'py>(
        &self,
        py: Python<'py>,
        obj: &Bound<'py, PyAny>,
    ) -> PyResult<Bound<'py, PyList>> {
        self.live()?;
        let (mine, err) = pack(py, obj);
        let all = runtime::blocking(py, || self.comm.allgather_bytes(&mine)).map_err(coll_err)?;
        if let Some(e) = err {
            return Err(e);
        }
        let list = PyList::empty(py);
        for (r, b) in all.iter().enumerate() {
            list.append(unpack(py, b, r, "allgather_obj")?)?;
        }
        Ok(list)
    }

    /// Rank `root`'s sequence `objs` (one picklable object per rank) scattered: rank i
    /// gets `objs[i]` (the other ranks' `objs` is ignored). Collective.
    #[pyo3(signature = (objs = None, root = 0))]
    fn scatter_obj<'py>(
        &self,
        py: Python<'py>,
        objs: Option<&Bound<'py, PyAny>>,
        root: i64,
    ) -> PyResult<Bound<'py, PyAny>> {
        self.live()?;
        let root = self.check_rank(root, "scatter_obj: root")?;
        let (me, n) = (self.comm.rank(), self.comm.size() as usize);
        // At the root: every rank's packed object, or the error of the whole sequence.
        let mut parts: Vec<Vec<u8>> = Vec::new();
        let mut err = None;
        if me == root {
            let items: PyResult<Vec<Bound<'py, PyAny>>> = match objs {
                Some(o) => o.try_iter().and_then(|it| it.collect()),
                None => Err(errors::value_error(
                    "scatter_obj: the root must give a sequence of one object per rank, \
                     got None",
                )),
            };
            let items = items.and_then(|v| {
                if v.len() == n {
                    Ok(v)
                } else {
                    Err(errors::value_error(format!(
                        "scatter_obj: the root must give one object per rank ({n}), got {}",
                        v.len()
                    )))
                }
            });
            match items {
                Ok(v) => {
                    for o in &v {
                        let (b, e) = pack(py, o);
                        parts.push(b);
                        if err.is_none() {
                            err = e;
                        }
                    }
                }
                Err(e) => {
                    let mut b = vec![BAD];
                    b.extend_from_slice(err_text(py, &e).as_bytes());
                    parts = vec![b; n];
                    err = Some(e);
                }
            }
        }
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
        unpack(py, &got, root as usize, "scatter_obj")
    }
}
