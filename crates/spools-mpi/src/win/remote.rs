//! One-sided access to a target on another host: memory messages, as remote procedure
//! calls (`Communicator::rpc`, StarT-X's JAM RPC) that the target's progress engine runs
//! by itself: a put carries the runs and their bytes, a get brings them back, and the
//! control block's words (the passive-target lock, the accumulate lock) are taken and
//! released by calls of their own. An accumulate is then the origin's: it takes the
//! target's accumulate lock, gets, combines and puts, so any operator the origin knows
//! works. The target serves calls whenever it drives progress: inside any MPI call, or
//! all the time with the progress thread (`SPOOLS_PROGRESS_THREAD=1`).
//!
//! `SPOOLS_MPI_WIN_MESSAGES=1` sends every access to another rank this way, also within
//! a host (the tests' way to run this path on one machine).

use std::collections::HashMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{OnceLock, PoisonError, RwLock};

use spools::Communicator;

use crate::abi::*;
use crate::error::MpiError;
use crate::win::ctl::LockKind;
use crate::win::target::{Mem, Run};
use crate::win::WINS;

/// The RPC function's name.
const NAME: &str = "spools-mpi.win";

/// Whether every access to another rank goes by message (`SPOOLS_MPI_WIN_MESSAGES=1`).
pub(crate) fn forced() -> bool {
    static F: OnceLock<bool> = OnceLock::new();
    *F.get_or_init(|| std::env::var("SPOOLS_MPI_WIN_MESSAGES").is_ok_and(|v| v == "1"))
}

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

/// What a call asks.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Ask {
    Put = 1,
    Get = 2,
    TryLock = 3,
    Unlock = 4,
    TryAcc = 5,
    ReleaseAcc = 6,
}

fn encode(ask: Ask, id: u64, arg: u8, runs: &[Run], data: &[u8]) -> Vec<u8> {
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

/// A call to the target `mem` names (a [`Mem::Remote`]); the reply.
fn call(
    mem: &Mem,
    ask: Ask,
    arg: u8,
    runs: &[Run],
    data: &[u8],
    what: &'static str,
) -> Result<Vec<u8>, MpiError> {
    let Mem::Remote { comm, rank, id } = mem else {
        return Err(MpiError::invalid(
            MPI_ERR_INTERN,
            format!("{what}: not a remote target"),
        ));
    };
    let args = encode(ask, *id, arg, runs, data);
    comm.rpc(*rank, NAME, &args)
        .and_then(|h| h.wait())
        .map_err(|e| MpiError::invalid(MPI_ERR_RMA_RANGE, format!("{what}: rank {rank}: {e}")))
}

/// Writes `data` into the runs of a remote target.
pub(crate) fn put(
    mem: &Mem,
    runs: &[Run],
    data: &[u8],
    what: &'static str,
) -> Result<(), MpiError> {
    call(mem, Ask::Put, 0, runs, data, what).map(|_| ())
}

/// Reads the runs of a remote target into `out`.
pub(crate) fn get(
    mem: &Mem,
    runs: &[Run],
    out: &mut [u8],
    what: &'static str,
) -> Result<(), MpiError> {
    let got = call(mem, Ask::Get, 0, runs, &[], what)?;
    if got.len() != out.len() {
        return Err(MpiError::invalid(
            MPI_ERR_INTERN,
            format!(
                "{what}: the target sent {} bytes for {}",
                got.len(),
                out.len()
            ),
        ));
    }
    out.copy_from_slice(&got);
    Ok(())
}

/// Tries to take a remote target's passive-target lock.
pub(crate) fn try_lock(mem: &Mem, kind: LockKind) -> Result<bool, MpiError> {
    let arg = u8::from(kind == LockKind::Exclusive);
    Ok(call(mem, Ask::TryLock, arg, &[], &[], "MPI_Win_lock")?.first() == Some(&1))
}

/// Releases a remote target's passive-target lock.
pub(crate) fn unlock(mem: &Mem, kind: LockKind) -> Result<(), MpiError> {
    let arg = u8::from(kind == LockKind::Exclusive);
    call(mem, Ask::Unlock, arg, &[], &[], "MPI_Win_unlock").map(|_| ())
}

/// Tries to take a remote target's accumulate lock.
pub(crate) fn try_acc(mem: &Mem) -> Result<bool, MpiError> {
    Ok(call(mem, Ask::TryAcc, 0, &[], &[], "an accumulate")?.first() == Some(&1))
}

/// Releases a remote target's accumulate lock.
pub(crate) fn release_acc(mem: &Mem) -> Result<(), MpiError> {
    call(mem, Ask::ReleaseAcc, 0, &[], &[], "an accumulate").map(|_| ())
}

#[cfg(test)]
mod tests {
    use super::*;

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
