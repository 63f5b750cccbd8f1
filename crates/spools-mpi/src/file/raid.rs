//! Spools' `spools_layout` hint: an MPI file kept as a striped parallel file, a RAID-5
//! (`raid5(unit=SIZE,count=K)`) or RAID-0 (`raid0(...)`) set of unit files with a
//! manifest at the file's name, every block checksummed, that `spools fsck` verifies and
//! `spools repair` rebuilds from parity.
//!
//! Every rank reads and writes the set's unit files in place (`spools_io::file::Draft`,
//! behind the open file's `Backing`): opened for writing, the next version's unit files,
//! which start as the current version (each rank copies its share of the rows, every
//! block verified, a damaged one rebuilt from parity); opened read-only, the current
//! version, verified as it is read. `MPI_File_sync` and `MPI_File_close` commit the next
//! version: parity and block checksums by each rank for its share of the rows, the unit
//! files made durable, the manifest replaced last, so a crash in between leaves the
//! previous version whole. Opening a plain file with the hint starts the next version
//! from its bytes; the first commit replaces it by a set.

use std::ffi::c_int;
use std::path::{Path, PathBuf};

use spools::Communicator;
use spools_io::file::tools::{self, Opened};
use spools_io::file::{Draft, Format, Striping};

use crate::abi::*;
use crate::env::error::MpiError;
use crate::file::backing::set_error;
use crate::file::io_error;

/// The hint's key.
pub(crate) const HINT: &str = "spools_layout";

/// The group's `spools_layout` hint (rank 0's decides, as hints may differ between
/// ranks): `None` without it. Collective over `wc`.
///
/// # Errors
/// `MPI_ERR_INFO_VALUE` on every rank for a value that is not a `raid5(...)` or
/// `raid0(...)` layout.
pub(crate) fn agree_hint(
    wc: &Communicator,
    entries: &[(String, String)],
    call: &'static str,
) -> Result<Option<Striping>, MpiError> {
    let mine = entries
        .iter()
        .find(|(k, _)| k == HINT)
        .map(|(_, v)| v.as_str())
        .unwrap_or("");
    let value = wc.bcast_bytes(0, mine.as_bytes())?;
    let value = String::from_utf8_lossy(&value).into_owned();
    if value.is_empty() {
        return Ok(None);
    }
    let bad = |why: String| {
        MpiError::invalid(
            MPI_ERR_INFO_VALUE,
            format!("{call}: hint {HINT}={value:?}: {why} (raid5(unit=SIZE,count=K) or raid0(unit=SIZE,count=K))"),
        )
    };
    match Format::parse(value.trim(), Vec::new(), false) {
        Ok(Format::Striped(striping)) => Ok(Some(striping)),
        Ok(_) => Err(bad("not a striped layout".into())),
        Err(e) => Err(bad(e.to_string())),
    }
}

/// Rank 0's outcome broadcast to the group: the same error on every rank.
fn decided_by_rank0(
    wc: &Communicator,
    mine: Option<Result<(), MpiError>>,
    call: &'static str,
    path: &Path,
) -> Result<(), MpiError> {
    let verdict = match &mine {
        Some(Err(e)) => format!("{}\0{e}", e.class()).into_bytes(),
        _ => Vec::new(),
    };
    let verdict = wc.bcast_bytes(0, &verdict)?;
    if let Some(Err(e)) = mine {
        return Err(e);
    }
    if verdict.is_empty() {
        return Ok(());
    }
    let s = String::from_utf8_lossy(&verdict);
    let (class, msg) = s.split_once('\0').unwrap_or(("", &s));
    Err(MpiError::invalid(
        class.parse().unwrap_or(MPI_ERR_IO),
        format!("{call}: {}: rank 0: {msg}", path.display()),
    ))
}

/// Opens the set at `path` with `striping` for the group (collective): for writing
/// unless `amode` is read-only, starting from what `path` holds (a set, a plain file, or
/// nothing with `MPI_MODE_CREATE`).
///
/// # Errors
/// On every rank: `MPI_ERR_FILE_EXISTS` with `MPI_MODE_EXCL` for an existing file,
/// `MPI_ERR_NO_SUCH_FILE` for a missing one without `MPI_MODE_CREATE`, `MPI_ERR_BAD_FILE`
/// for a Zarr array, `MPI_ERR_IO` for a set that cannot be read (damage beyond parity,
/// a manifest that does not parse), a file system's error by its class.
pub(crate) fn open(
    wc: &Communicator,
    path: &Path,
    striping: &Striping,
    amode: c_int,
    call: &'static str,
) -> Result<Draft, MpiError> {
    let mine = (wc.rank() == 0).then(|| {
        check(path, amode, call).map(|()| {
            // A plain file's checksum sidecar goes stale with the first commit.
            if amode & MPI_MODE_RDONLY == 0 {
                let _ = std::fs::remove_file(spools_io::file::sidecar_path(path));
            }
        })
    });
    decided_by_rank0(wc, mine, call, path)?;
    Draft::open(wc, path, striping, amode & MPI_MODE_RDONLY == 0)
        .map_err(|e| set_error(&e, call, path))
}

/// Rank 0's checks of what `path` holds against `amode`.
fn check(path: &Path, amode: c_int, call: &'static str) -> Result<(), MpiError> {
    let exists = match path.symlink_metadata() {
        Ok(_) => true,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => false,
        Err(e) => return Err(io_error(call, path, &e)),
    };
    if exists && amode & MPI_MODE_EXCL != 0 {
        return Err(MpiError::invalid(
            MPI_ERR_FILE_EXISTS,
            format!("{call}: {}: exists (MPI_MODE_EXCL)", path.display()),
        ));
    }
    if !exists && amode & MPI_MODE_CREATE == 0 {
        return Err(MpiError::invalid(
            MPI_ERR_NO_SUCH_FILE,
            format!("{call}: {}: no such file", path.display()),
        ));
    }
    if exists && matches!(tools::open(path), Ok(Opened::Zarr(_))) {
        return Err(MpiError::invalid(
            MPI_ERR_BAD_FILE,
            format!(
                "{call}: {}: a Zarr array, not a file an MPI program can open",
                path.display()
            ),
        ));
    }
    Ok(())
}

/// Commits what the group wrote to `set` as its next version (collective over `comm`),
/// keeping it open for writing with `reopen`.
///
/// # Errors
/// On every rank: the file system's errors by class (a full disk), a failed peer.
pub(crate) fn commit(
    comm: &Communicator,
    set: &Draft,
    reopen: bool,
    path: &Path,
    call: &'static str,
) -> Result<(), MpiError> {
    set.commit(comm, reopen)
        .map(drop)
        .map_err(|e| set_error(&e, call, path))
}

/// Removes the striped set at `path`: both slots' unit files, then the manifest. A path
/// that is not a set (or does not exist) is left alone.
///
/// # Errors
/// A unit file or the manifest that exists and cannot be removed, by its class.
pub(crate) fn remove_set(path: &Path, call: &'static str) -> Result<bool, MpiError> {
    let Ok(Opened::Striped(m)) = tools::open(path) else {
        return Ok(false);
    };
    let other = 1 - m.slot % 2;
    for (unit, p) in m.unit_paths(path).into_iter().enumerate() {
        let text = p.to_string_lossy().into_owned();
        let old = text
            .strip_suffix(&format!(".u{unit}.s{}", m.slot))
            .map(|stem| PathBuf::from(format!("{stem}.u{unit}.s{other}")));
        for q in std::iter::once(p).chain(old) {
            match std::fs::remove_file(&q) {
                Err(e) if e.kind() != std::io::ErrorKind::NotFound => {
                    return Err(io_error(call, &q, &e))
                }
                _ => {}
            }
        }
    }
    std::fs::remove_file(path).map_err(|e| io_error(call, path, &e))?;
    Ok(true)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rank_0s_checks_follow_the_amode() {
        let dir = std::env::temp_dir().join(format!("spools-raid-check-{}", std::process::id()));
        let _ = std::fs::create_dir_all(&dir);
        let p = dir.join("x");
        let class = |r: Result<(), MpiError>| r.err().map(|e| e.class());
        assert_eq!(
            class(check(&p, MPI_MODE_RDWR, "t")),
            Some(MPI_ERR_NO_SUCH_FILE)
        );
        assert_eq!(class(check(&p, MPI_MODE_RDWR | MPI_MODE_CREATE, "t")), None);
        let _ = std::fs::write(&p, b"1");
        assert_eq!(
            class(check(
                &p,
                MPI_MODE_RDWR | MPI_MODE_CREATE | MPI_MODE_EXCL,
                "t"
            )),
            Some(MPI_ERR_FILE_EXISTS)
        );
        assert_eq!(class(check(&p, MPI_MODE_RDONLY, "t")), None);
        let _ = std::fs::remove_dir_all(&dir);
    }
}
