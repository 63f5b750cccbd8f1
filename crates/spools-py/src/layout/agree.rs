//! One exception class on every rank for a failed collective layout call
//! (redistribution, parallel files): the Rust call fails on every rank, but only the
//! rank at fault knows why (the others learn "rank R failed its part"). The ranks then
//! exchange their exceptions, and each rank that only heard of the failure raises the
//! faulty rank's class with its message, prefixed by its rank.

use pyo3::prelude::*;
use spools::Communicator;

use crate::errors::Kind;
use crate::runtime;

/// The modules whose exception classes travel (ours and Python's own).
const MODULES: [&str; 2] = ["spools.errors", "builtins"];

/// `err` as bytes: `module`, NUL, class name, NUL, message.
fn encode(py: Python<'_>, err: &PyErr) -> Vec<u8> {
    let t = err.get_type(py);
    let module = t
        .module()
        .map(|m| m.to_string())
        .unwrap_or_else(|_| "?".into());
    let name = t
        .name()
        .map(|n| n.to_string())
        .unwrap_or_else(|_| "?".into());
    let msg = err
        .value(py)
        .str()
        .map(|s| s.to_string())
        .unwrap_or_default();
    format!("{module}\0{name}\0{msg}").into_bytes()
}

/// The exception `bytes` describe, said to come from rank `rank`.
fn decode(py: Python<'_>, bytes: &[u8], rank: u32) -> Option<PyErr> {
    let s = String::from_utf8_lossy(bytes);
    let mut it = s.splitn(3, '\0');
    let (module, name, msg) = (it.next()?, it.next()?, it.next()?);
    if !MODULES.contains(&module) {
        return None;
    }
    let class = py.import(module).ok()?.getattr(name).ok()?;
    let value = class
        .call1((format!(
            "rank {rank} failed its part of the operation: {msg}"
        ),))
        .ok()?;
    Some(PyErr::from_value(value))
}

/// After a collective call failed on every rank: `mine` is this rank's exception and
/// `remote` the rank its error names as the faulty one (`None` when this rank's own
/// error says why). Returns the exception to raise: `mine`, or the faulty rank's class
/// and message. A dead peer (or an interrupt) ends the exchange: then `mine` is raised.
pub(crate) fn agree(
    py: Python<'_>,
    comm: &Communicator,
    mine: PyErr,
    remote: Option<u32>,
) -> PyErr {
    if matches!(kind_of(py, &mine), Kind::PeerGone | Kind::Finalized)
        || mine.is_instance_of::<pyo3::exceptions::PyKeyboardInterrupt>(py)
    {
        return mine;
    }
    let data = if remote.is_some() {
        Vec::new()
    } else {
        encode(py, &mine)
    };
    let all = match runtime::blocking(py, || comm.allgather_bytes(&data)) {
        Ok(all) => all,
        Err(_) => return mine,
    };
    let Some(r) = remote else {
        return mine;
    };
    // The named rank's exception, else the first rank that knew why.
    let pick = all
        .get(r as usize)
        .filter(|b| !b.is_empty())
        .map(|b| (r, b))
        .or_else(|| {
            all.iter()
                .enumerate()
                .find(|(_, b)| !b.is_empty())
                .map(|(i, b)| (i as u32, b))
        });
    match pick.and_then(|(r, b)| decode(py, b, r)) {
        Some(e) => e,
        None => mine,
    }
}

/// The kind of exception `e` is, for [`agree`]'s decision to take part.
fn kind_of(py: Python<'_>, e: &PyErr) -> Kind {
    let is = |name: &str| {
        py.import("spools.errors")
            .and_then(|m| m.getattr(name))
            .map(|c| e.get_type(py).is_subclass(&c).unwrap_or(false))
            .unwrap_or(false)
    };
    if is("PeerGoneError") {
        Kind::PeerGone
    } else if is("FinalizedError") {
        Kind::Finalized
    } else {
        Kind::Spools
    }
}
