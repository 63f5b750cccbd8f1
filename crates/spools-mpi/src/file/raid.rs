//! Spools' `spools_layout` hint: an MPI file kept as a striped parallel file, a RAID-5
//! (`raid5(unit=SIZE,count=K)`) or RAID-0 (`raid0(...)`) set of unit files with a
//! manifest at the file's name, every block checksummed, that `spools fsck` verifies and
//! `spools repair` rebuilds from parity.
//!
//! While the file is open, the program's accesses go to a working file beside the set
//! (`.NAME.spools-open`), so every MPI-IO call behaves as on a plain file. The set is
//! committed from it, as a new version written by the whole group through
//! `spools_io`'s striped writer (aggregators own whole stripe rows, compute parity and
//! block checksums, the manifest is replaced last), at `MPI_File_sync` and
//! `MPI_File_close`; a crash in between leaves the previous version whole. Opening an
//! existing set starts the working file from its byte stream (every block verified,
//! damaged or missing blocks rebuilt from parity); opening a plain file with the hint
//! starts it from the file, which the first commit replaces by a set.

use std::ffi::c_int;
use std::os::unix::fs::{FileExt, OpenOptionsExt};
use std::path::{Path, PathBuf};

use spools::Communicator;
use spools_io::file::tools::{self, Opened};
use spools_io::file::{Format, Striping, WriteOptions};
use spools_map::Layout;

use crate::abi::*;
use crate::env::error::MpiError;
use crate::file::io_error;

/// The hint's key.
pub(crate) const HINT: &str = "spools_layout";

/// A file kept as a striped set.
#[derive(Debug, Clone)]
pub(crate) struct Set {
    /// The set's path (its manifest): the name the program opened.
    pub(crate) path: PathBuf,
    /// The layout of its units.
    pub(crate) striping: Striping,
}

/// The working file of the set at `path`: `.NAME.spools-open` in the same directory.
pub(crate) fn work_path(path: &Path) -> PathBuf {
    let name = path
        .file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_else(|| "file".into());
    path.with_file_name(format!(".{name}.spools-open"))
}

/// The group's `spools_layout` hint (rank 0's decides, as hints may differ between
/// ranks): `None` without it. Collective over `wc`.
///
/// # Errors
/// `MPI_ERR_INFO_VALUE` on every rank for a value that is not a `raid5(...)` or
/// `raid0(...)` layout.
pub(crate) fn agree_hint(
    wc: &Communicator,
    entries: &[(String, String)],
    path: &Path,
    call: &'static str,
) -> Result<Option<Set>, MpiError> {
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
        Ok(Format::Striped(striping)) => Ok(Some(Set {
            path: path.to_path_buf(),
            striping,
        })),
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

/// Makes the working file of `set` (collective): rank 0 fills it from what the set's
/// path holds (a set: its verified byte stream, blocks rebuilt from parity where
/// damaged; a plain file: a copy; nothing: empty, with `MPI_MODE_CREATE`). Gives the
/// working file's path.
///
/// # Errors
/// On every rank: `MPI_ERR_FILE_EXISTS` with `MPI_MODE_EXCL` for an existing file,
/// `MPI_ERR_NO_SUCH_FILE` for a missing one without `MPI_MODE_CREATE`, `MPI_ERR_BAD_FILE`
/// for a Zarr array, `MPI_ERR_IO` for a set that cannot be read (damage beyond parity,
/// a manifest that does not parse), a file system's error by its class.
pub(crate) fn prepare(
    wc: &Communicator,
    set: &Set,
    amode: c_int,
    call: &'static str,
) -> Result<PathBuf, MpiError> {
    let work = work_path(&set.path);
    let mine = (wc.rank() == 0).then(|| fill(set, &work, amode, call));
    decided_by_rank0(wc, mine, call, &set.path)?;
    Ok(work)
}

/// Rank 0's part of [`prepare`].
fn fill(set: &Set, work: &Path, amode: c_int, call: &'static str) -> Result<(), MpiError> {
    let path = &set.path;
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
    let mut out = std::fs::OpenOptions::new()
        .read(true)
        .write(true)
        .create(true)
        .truncate(true)
        .mode(0o644)
        .open(work)
        .map_err(|e| io_error(call, work, &e))?;
    if !exists {
        return Ok(());
    }
    let set_error = |e: spools_io::FileError| {
        MpiError::invalid(
            MPI_ERR_IO,
            format!("{call}: the striped set {}: {e}", path.display()),
        )
    };
    match tools::open(path).map_err(set_error)? {
        Opened::Striped(_) => {
            tools::cat(path, &mut out, &mut |_, _| {}).map_err(set_error)?;
        }
        Opened::Plain { .. } => {
            std::fs::copy(path, work).map_err(|e| io_error(call, path, &e))?;
        }
        Opened::Zarr(_) => {
            return Err(MpiError::invalid(
                MPI_ERR_BAD_FILE,
                format!(
                    "{call}: {}: a Zarr array, not a file an MPI program can open",
                    path.display()
                ),
            ))
        }
    }
    Ok(())
}

/// Commits the working file `file` as a new version of `set` (collective over `comm`):
/// each rank reads its block of the working file and the group writes the set through
/// `spools_io`'s striped writer, durable before it returns. An empty working file leaves
/// an empty plain file at the set's path (a set holds at least one byte).
///
/// # Errors
/// On every rank: a read of the working file by its class, the striped writer's error
/// (a full disk, a dead rank) as `MPI_ERR_IO`.
pub(crate) fn commit(
    comm: &Communicator,
    set: &Set,
    file: &std::fs::File,
    work: &Path,
    call: &'static str,
) -> Result<(), MpiError> {
    let len = if comm.rank() == 0 {
        file.metadata().map(|m| m.len()).unwrap_or(0)
    } else {
        0
    };
    let len = comm.bcast_bytes(0, &len.to_le_bytes())?;
    let len = u64::from_le_bytes(len.as_slice().try_into().unwrap_or_default());
    if len == 0 {
        let mine = (comm.rank() == 0).then(|| {
            remove_set(&set.path, call)?;
            std::fs::File::create(&set.path)
                .map(drop)
                .map_err(|e| io_error(call, &set.path, &e))
        });
        return decided_by_rank0(comm, mine, call, &set.path);
    }
    let layout: Layout = format!("u8[{len}] block on {}", comm.size())
        .parse()
        .map_err(|e| MpiError::invalid(MPI_ERR_INTERN, format!("{call}: {e}")))?;
    let share = read_share(file, work, &layout, comm.rank(), call);
    let share = super::agree_on(comm, share, call)?;
    let opts = WriteOptions {
        format: Format::Striped(set.striping.clone()),
        sync: true,
        ..WriteOptions::default()
    };
    spools_io::file::write(comm, &set.path, &share, &layout, &opts)
        .map(drop)
        .map_err(|e| {
            MpiError::invalid(
                super::outcome::file_class(&e),
                format!("{call}: the striped set {}: {e}", set.path.display()),
            )
        })
}

/// This rank's block of the working file.
fn read_share(
    file: &std::fs::File,
    work: &Path,
    layout: &Layout,
    rank: u32,
    call: &'static str,
) -> Result<Vec<u8>, MpiError> {
    let intern =
        |e: spools_map::LayoutError| MpiError::invalid(MPI_ERR_INTERN, format!("{call}: {e}"));
    let n = layout.local_bytes(u64::from(rank)).map_err(intern)?;
    let mut share = vec![
        0u8;
        usize::try_from(n).map_err(|_| MpiError::invalid(
            MPI_ERR_NO_MEM,
            format!("{call}: a share of {n} bytes")
        ))?
    ];
    for x in layout.extents(u64::from(rank)).map_err(intern)? {
        let (lo, hi) = (x.local as usize, (x.local + x.len) as usize);
        file.read_exact_at(&mut share[lo..hi], x.global)
            .map_err(|e| io_error(call, work, &e))?;
    }
    Ok(share)
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
    fn the_working_file_is_hidden_beside_the_set() {
        assert_eq!(
            work_path(Path::new("/d/out.dat")),
            Path::new("/d/.out.dat.spools-open")
        );
        assert_eq!(work_path(Path::new("a")), Path::new(".a.spools-open"));
    }
}
