//! The target side of memory messages: this process's windows by the id peers name
//! them with, the RPC function that serves peers' calls ([`register`]), and the calls
//! themselves, run by the target's progress engine.

use std::collections::HashMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{OnceLock, PoisonError, RwLock};

use spools::Communicator;

use crate::abi::*;
use crate::env::error::MpiError;
use crate::win::ask::{Ask, NAME};
use crate::win::ctl::LockKind;
use crate::win::mem::Run;
use crate::win::WINS;

/// This process's windows by the id peers name them with.
static IDS: RwLock<Option<HashMap<u64, MPI_Win>>> = RwLock::new(None);

static NEXT: AtomicU64 = AtomicU64::new(1);

/// A new id for a window being made.
pub(crate) fn new_id() -> u64 {
    NEXT.fetch_add(1, Ordering::Relaxed)
}

/// Makes window `h` reachable by its id.
pub(crate) fn publish(id: u64, h: MPI_Win) {
    IDS.write()
        .unwrap_or_else(PoisonError::into_inner)
        .get_or_insert_with(HashMap::new)
        .insert(id, h);
}

/// Forgets a window's id (freed, or its making failed).
pub(crate) fn forget(id: u64) {
    if let Some(m) = IDS.write().unwrap_or_else(PoisonError::into_inner).as_mut() {
        m.remove(&id);
    }
}

/// Registers the RPC function on the world communicator, once per process (before the
/// first window's last collective step, so before any peer can call it).
///
/// # Errors
/// The registration's (a name taken by another library in this process).
pub(crate) fn register(world: &Communicator) -> Result<(), MpiError> {
    static DONE: OnceLock<Result<(), String>> = OnceLock::new();
    DONE.get_or_init(|| world.register_rpc(NAME, serve).map_err(|e| e.to_string()))
        .clone()
        .map_err(|e| MpiError::invalid(MPI_ERR_INTERN, format!("memory messages: {e}")))
}

/// Serves one call at the target (on the thread that drives progress: no blocking, no
/// Spools call).
fn serve(args: &[u8]) -> Result<Vec<u8>, String> {
    let bad = || "a malformed window call".to_string();
    let word = |i: usize| -> Result<u64, String> {
        args.get(i..i + 8)
            .and_then(|b| b.try_into().ok())
            .map(u64::from_le_bytes)
            .ok_or_else(bad)
    };
    let ask = *args.first().ok_or_else(bad)?;
    let id = word(1)?;
    let arg = *args.get(9).ok_or_else(bad)?;
    let nruns = args
        .get(10..14)
        .and_then(|b| b.try_into().ok())
        .map(u32::from_le_bytes)
        .ok_or_else(bad)? as usize;
    let data_at = nruns
        .checked_mul(16)
        .and_then(|n| n.checked_add(14))
        .filter(|&n| n <= args.len())
        .ok_or_else(bad)?;
    let runs: Vec<Run> = (0..nruns)
        .map(|i| Ok((word(14 + 16 * i)? as usize, word(22 + 16 * i)? as usize)))
        .collect::<Result<_, String>>()?;
    let h = IDS
        .read()
        .unwrap_or_else(PoisonError::into_inner)
        .as_ref()
        .and_then(|m| m.get(&id).copied())
        .ok_or_else(|| format!("window {id} is not open at the target"))?;
    let w = WINS
        .get(h)
        .filter(|w| w.id == id)
        .ok_or_else(|| format!("window {id} is not open at the target"))?;
    let me = &w.targets[w.comm.rank() as usize];
    let ctl = me.ctl().ok_or_else(bad)?;
    let kind = if arg == 1 {
        LockKind::Exclusive
    } else {
        LockKind::Shared
    };
    let call = "a memory message";
    match ask {
        a if a == Ask::Put as u8 => {
            let data = &args[data_at..];
            if runs.iter().try_fold(0usize, |a, r| a.checked_add(r.1)) != Some(data.len()) {
                return Err(bad());
            }
            me.check(&runs, call).map_err(|e| e.to_string())?;
            me.write(&runs, data, call).map_err(|e| e.to_string())?;
            Ok(Vec::new())
        }
        a if a == Ask::Get as u8 => {
            me.check(&runs, call).map_err(|e| e.to_string())?;
            let total = runs
                .iter()
                .try_fold(0usize, |a, r| a.checked_add(r.1))
                .ok_or_else(bad)?;
            let mut out = vec![0u8; total];
            me.read(&runs, &mut out, call).map_err(|e| e.to_string())?;
            Ok(out)
        }
        a if a == Ask::TryLock as u8 => Ok(vec![u8::from(ctl.try_lock(kind))]),
        a if a == Ask::Unlock as u8 => {
            ctl.unlock(kind);
            Ok(Vec::new())
        }
        a if a == Ask::TryAcc as u8 => Ok(vec![u8::from(ctl.try_acc())]),
        a if a == Ask::ReleaseAcc as u8 => {
            ctl.release_acc();
            Ok(Vec::new())
        }
        _ => Err(bad()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::win::ask::encode;

    #[test]
    fn malformed_calls_are_refused_without_a_panic() {
        for args in [
            &[][..],
            &[1][..],
            &[1, 0, 0, 0, 0, 0, 0, 0, 0, 0][..],
            &[2, 1, 0, 0, 0, 0, 0, 0, 0, 0, 255, 255, 255, 255][..],
        ] {
            assert!(serve(args).is_err(), "{args:?}");
        }
        // Well formed, but no such window here.
        let e = serve(&encode(Ask::Get, 77, 0, &[(0, 4)], &[])).unwrap_err();
        assert!(e.contains("not open"), "{e}");
    }
}
