//! The processes a rank asks its launcher to start ([`crate::boot::ToServer::Spawn`]: MPI's
//! `MPI_Comm_spawn` under `spools run`), as they travel in a bootstrap frame.
//!
//! Each process is its program, arguments, the variables to set in its environment, its
//! working directory and the host it should run on. Counts and lengths are bounded
//! ([`MAX_SPAWN_PROCS`], [`MAX_SPAWN_WORDS`], [`MAX_SPAWN_TEXT`]), and every count is
//! checked against the bytes left before anything is allocated for it.

use crate::codec::{put_bytes, put_u32, Reader};
use crate::WireError;

/// Most processes one spawn request starts.
pub const MAX_SPAWN_PROCS: u32 = 1 << 16;
/// Most arguments, and most environment variables, of one process.
pub const MAX_SPAWN_WORDS: u32 = 1 << 12;
/// Longest program, argument, variable name or value, directory or host name.
pub const MAX_SPAWN_TEXT: usize = 1 << 16;

/// One process to start.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct SpawnProc {
    /// The program: a path, or a name the host looks up in its `PATH`.
    pub program: String,
    /// Its arguments (not the program's name).
    pub args: Vec<String>,
    /// Variables set in its environment, beside the launcher's own.
    pub env: Vec<(String, String)>,
    /// Its working directory; empty: the launcher's.
    pub wdir: String,
    /// The host it runs on; empty: the launcher places it.
    pub host: String,
}

fn put_str(v: &mut Vec<u8>, s: &str) {
    put_bytes(v, s.as_bytes());
}

fn len32(n: usize) -> u32 {
    u32::try_from(n).unwrap_or(u32::MAX)
}

/// Encodes `procs` (a count, then each process).
pub(crate) fn put_procs(v: &mut Vec<u8>, procs: &[SpawnProc]) {
    put_u32(v, len32(procs.len()));
    for p in procs {
        put_str(v, &p.program);
        put_u32(v, len32(p.args.len()));
        for a in &p.args {
            put_str(v, a);
        }
        put_u32(v, len32(p.env.len()));
        for (k, val) in &p.env {
            put_str(v, k);
            put_str(v, val);
        }
        put_str(v, &p.wdir);
        put_str(v, &p.host);
    }
}

/// A count of at most `max` entries of at least `min_bytes` each: refused before any
/// allocation when the bytes left cannot hold them.
fn count(
    r: &mut Reader<'_>,
    what: &'static str,
    max: u32,
    min_bytes: usize,
) -> Result<usize, WireError> {
    let n = r.u32()?;
    if n > max {
        return Err(WireError::TooLong {
            what,
            len: u64::from(n),
            max: u64::from(max),
        });
    }
    let need = n as usize * min_bytes;
    if r.remaining() < need {
        return Err(WireError::Truncated {
            need,
            have: r.remaining(),
        });
    }
    Ok(n as usize)
}

/// Decodes what [`put_procs`] wrote.
pub(crate) fn procs(r: &mut Reader<'_>) -> Result<Vec<SpawnProc>, WireError> {
    // The smallest process: five empty strings and two counts.
    let n = count(r, "spawned processes", MAX_SPAWN_PROCS, 20)?;
    let mut out = Vec::with_capacity(n);
    for _ in 0..n {
        let program = r.string("spawned program", MAX_SPAWN_TEXT)?;
        let na = count(r, "spawned arguments", MAX_SPAWN_WORDS, 4)?;
        let mut args = Vec::with_capacity(na);
        for _ in 0..na {
            args.push(r.string("spawned argument", MAX_SPAWN_TEXT)?);
        }
        let ne = count(r, "spawned environment", MAX_SPAWN_WORDS, 8)?;
        let mut env = Vec::with_capacity(ne);
        for _ in 0..ne {
            let k = r.string("variable name", MAX_SPAWN_TEXT)?;
            env.push((k, r.string("variable value", MAX_SPAWN_TEXT)?));
        }
        out.push(SpawnProc {
            program,
            args,
            env,
            wdir: r.string("working directory", MAX_SPAWN_TEXT)?,
            host: r.string("host name", MAX_SPAWN_TEXT)?,
        });
    }
    Ok(out)
}
