//! The memory messages' format: the RPC function's name, what a call asks ([`Ask`]),
//! and its bytes ([`encode`]; the target decodes them in `serve.rs`).

use crate::win::mem::Run;

/// The RPC function's name.
pub(crate) const NAME: &str = "spools-mpi.win";

/// What a call asks.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Ask {
    Put = 1,
    Get = 2,
    TryLock = 3,
    Unlock = 4,
    TryAcc = 5,
    ReleaseAcc = 6,
}

pub(crate) fn encode(ask: Ask, id: u64, arg: u8, runs: &[Run], data: &[u8]) -> Vec<u8> {
    let mut v = Vec::with_capacity(14 + 16 * runs.len() + data.len());
    v.push(ask as u8);
    v.extend_from_slice(&id.to_le_bytes());
    v.push(arg);
    v.extend_from_slice(&(runs.len() as u32).to_le_bytes());
    for &(o, l) in runs {
        v.extend_from_slice(&(o as u64).to_le_bytes());
        v.extend_from_slice(&(l as u64).to_le_bytes());
    }
    v.extend_from_slice(data);
    v
}
