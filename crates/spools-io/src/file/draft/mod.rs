//! A striped set (RAID-0 / RAID-5) open for direct access by every rank of a parallel
//! program, as MPI-IO's `spools_layout` hint keeps a file: reads and writes go straight
//! to unit files, with no working copy of the file.
//!
//! A set opened for writing gets the unit files of its next version (the slot the
//! manifest does not name, made anew), filled from the current version in parallel
//! (each rank its share of the stripe rows, every block verified and a damaged one
//! rebuilt from parity as it is copied; rows of a set of the same layout copied whole,
//! parity too). The program's writes land in data blocks; the stream's length is what
//! the unit files' lengths say ([`Map::end_from`]), so every rank sees every rank's
//! writes and extensions as on a plain file. Each rank notes the stripe rows it changed.
//! A commit computes parity and block checksums of the rows any rank changed (each rank
//! its share, one batch of rows in memory at a time; the others keep theirs), makes the
//! units durable, replaces the manifest last and then removes the version before: a
//! crash before the manifest leaves the previous version whole, since its slot is never
//! written. After a commit that keeps the set open, the next version's unit files start
//! as a kernel copy (`copy_file_range`) of the version just committed. One handle per
//! process writes a set.
//!
//! A set opened read-only is read from its current version, every block verified as it
//! is read and a damaged one rebuilt from parity.

mod commit;
mod current;
mod io;
mod map;
mod next;
mod source;

use std::fs::File;
use std::os::fd::{AsRawFd, RawFd};
use std::path::{Path, PathBuf};
use std::sync::{Mutex, PoisonError, RwLock};

use spools_msg::{Communicator, Op};

pub use commit::CRASH_AT;
use current::Current;
use io::read_full;
use map::Map;
use next::Next;
use source::{fill, Source};

use crate::error::FileError;
use crate::file::manifest::Manifest;
use crate::file::options::Striping;
use crate::file::steps::agree_on_outcome;
use crate::file::sys;

/// Why a set takes no writes (a read-only open, a last commit, or a commit whose reopen
/// failed).
const NOT_WRITABLE: &str =
    "the striped set is not open for writing (opened read-only, closed, or a failed commit left it so: close and open it again)";

#[derive(Debug)]
enum State {
    /// Read-only, a striped set.
    Current(Box<Current>),
    /// Read-only, a plain file.
    Plain(File),
    /// Open for writing: the next version.
    Next(Next),
    /// Committed for the last time.
    Done,
}

/// A striped set open for direct access by every rank of a group (see the module docs):
/// what MPI-IO's `spools_layout` hint keeps a file as.
///
/// ```no_run
/// # fn main() -> Result<(), Box<dyn std::error::Error>> {
/// use spools_io::file::{Draft, Striping};
/// let world = spools::init()?;
/// let comm = world.io_communicator()?;
/// let striping = Striping {
///     layout: "raid5(unit=64KiB,count=4)".parse()?,
///     dirs: Vec::new(),
///     node_local: false,
/// };
/// let set = Draft::open(comm, "out.dat".as_ref(), &striping, true)?;
/// set.write_at(b"hello", u64::from(world.rank()) * 5)?;
/// set.commit(comm, false)?; // version 1, durable
/// # Ok(()) }
/// ```
#[derive(Debug)]
pub struct Draft {
    path: PathBuf,
    striping: Striping,
    map: Map,
    state: RwLock<State>,
    /// The set's place among those this process writes (writable opens).
    _claim: Option<Claim>,
}

/// The sets this process has open for writing, by absolute path.
static WRITING: Mutex<Vec<PathBuf>> = Mutex::new(Vec::new());

/// A set's path held in [`WRITING`] while it lives.
#[derive(Debug)]
struct Claim(PathBuf);

impl Claim {
    /// Takes `path` for this process's only writer of it.
    ///
    /// # Errors
    /// [`FileError::Io`] with `EBUSY` (MPI's `MPI_ERR_FILE_IN_USE`) where this process
    /// writes the set already.
    fn take(path: &Path) -> Result<Claim, FileError> {
        let key = std::path::absolute(path).unwrap_or_else(|_| path.to_path_buf());
        let mut w = WRITING.lock().unwrap_or_else(PoisonError::into_inner);
        if w.contains(&key) {
            return Err(FileError::io(
                "open for writing (this process has it open for writing already)",
                path,
                std::io::Error::from_raw_os_error(libc::EBUSY),
            ));
        }
        w.push(key.clone());
        Ok(Claim(key))
    }
}

impl Drop for Claim {
    fn drop(&mut self) {
        WRITING
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .retain(|p| *p != self.0);
    }
}

/// Rank 0's look at what `path` holds, the same on every rank: its bytes and what they
/// say. Collective.
fn look(comm: &Communicator, path: &Path) -> Result<(Vec<u8>, Source), FileError> {
    let look = if comm.rank() == 0 {
        Source::look(path)
    } else {
        Ok(Vec::new())
    };
    let look = agree_on_outcome(comm, path, look)?;
    let look = comm.bcast_bytes(0, &look)?;
    let source = agree_on_outcome(comm, path, Source::decode(path, &look))?;
    Ok((look, source))
}

/// The next version of `path`'s set made and filled from what `path` holds. Collective.
fn open_next(
    comm: &Communicator,
    path: &Path,
    striping: &Striping,
    map: &Map,
) -> Result<State, FileError> {
    let (_, source) = look(comm, path)?;
    let version = match &source {
        Source::Set(m) => m.version + 1,
        _ => 1,
    };
    let mut next = Next::create(comm, path, striping, version)?;
    let filled = fill(comm, path, map, &next, &source);
    match agree_on_outcome(comm, path, filled) {
        Ok(base) => next.base = base,
        Err(e) => {
            next.discard();
            return Err(e);
        }
    }
    Ok(State::Next(next))
}

/// Looks a read-only open takes at most: a commit elsewhere that replaced the version
/// between rank 0's look and the ranks' opening of its unit files sends the ranks back
/// to look again, as often as that (rank 0 looks once more after each opening); a set
/// replaced at every look is [`FileError::KeptChanging`] on every rank.
const LOOKS: u32 = 64;

/// Internal to the tests (see docs/configuration.md): a shell command rank 0 runs once
/// per process right after its first look of a read-only open, to replace the set there
/// as a commit elsewhere would.
const AFTER_LOOK: &str = "SPOOLS_TEST_RUN_AFTER_LOOK";

/// The current version of `path` opened read-only: its unit files held open, so later
/// commits elsewhere cannot take them away. Collective.
fn open_current(comm: &Communicator, path: &Path) -> Result<State, FileError> {
    static HOOK: std::sync::Once = std::sync::Once::new();
    let mut looks = 0;
    loop {
        let (seen, source) = look(comm, path)?;
        looks += 1;
        if comm.rank() == 0 {
            HOOK.call_once(|| {
                if let Ok(cmd) = std::env::var(AFTER_LOOK) {
                    let _ = std::process::Command::new("sh").arg("-c").arg(cmd).status();
                }
            });
        }
        let current = match &source {
            Source::Set(m) => m.geometry(path).and_then(|geo| {
                let paths = m.unit_paths(path);
                Ok(State::Current(Box::new(Current {
                    geo,
                    files: paths.iter().map(|p| sys::open_unit_read(p).ok()).collect(),
                    crcs: m.crcs(),
                    paths,
                    lock: sys::open_read(path)?,
                })))
            }),
            _ => sys::open_read(path).map(State::Plain),
        };
        let current = agree_on_outcome(comm, path, current)?;
        // Every rank has opened the unit files the manifest names (or found some
        // missing: damage, which RAID-5 reads rebuild, or a version a commit elsewhere
        // removed). Rank 0 looks again: a manifest that changed since its first look
        // means the files opened may belong to no version it names (removed, or a slot
        // reused by a commit under way), and every rank starts over, or, at the last
        // look, fails alike. Versions only grow, so the same manifest means the same
        // version's files.
        let moved = comm.rank() == 0 && Source::look(path).map_or(true, |now| now != seen);
        let moved = comm.bcast_bytes(0, &[u8::from(moved)])?;
        if moved.first() != Some(&1) {
            return Ok(current);
        }
        if looks >= LOOKS {
            return Err(FileError::KeptChanging {
                path: path.to_path_buf(),
                looks,
            });
        }
    }
}

impl Draft {
    /// Opens the set at `path` (collective over `comm`, whose ranks all pass the same
    /// `striping`): with `writable`, the next version's unit files filled from what
    /// `path` holds (a set's current version, a plain file's bytes, or nothing);
    /// without, the current version (or the plain file) read in place.
    ///
    /// # Errors
    /// On every rank: [`FileError::Options`] for a layout that is not `stripe(...)` or
    /// `raid5(...)` with a data unit, for node-local units, or for a Zarr array at
    /// `path`; a manifest that does not parse; a row damaged beyond parity
    /// ([`FileError::Unrecoverable`], [`FileError::Corrupt`] or
    /// [`FileError::MissingUnit`] for RAID-0); the file system's errors.
    pub fn open(
        comm: &Communicator,
        path: &Path,
        striping: &Striping,
        writable: bool,
    ) -> Result<Draft, FileError> {
        let map = match Map::of(&striping.layout) {
            _ if striping.node_local => Err(FileError::Options(
                "node-local units are not open to every rank: a set opened for direct access has shared units",
            )),
            Some(m) => Ok(m),
            None => Err(FileError::Options(
                "a striped set needs a stripe(...) or raid5(...) layout with at least one data unit",
            )),
        };
        let map = agree_on_outcome(comm, path, map)?;
        // One writer per set in a process: a second would make the same next version's
        // unit files anew under the first.
        let claim = agree_on_outcome(
            comm,
            path,
            if writable {
                Claim::take(path).map(Some)
            } else {
                Ok(None)
            },
        )?;
        let state = if writable {
            open_next(comm, path, striping, &map)?
        } else {
            open_current(comm, path)?
        };
        Ok(Draft {
            path: path.to_path_buf(),
            striping: striping.clone(),
            map,
            state: RwLock::new(state),
            _claim: claim,
        })
    }

    fn state(&self) -> std::sync::RwLockReadGuard<'_, State> {
        self.state.read().unwrap_or_else(PoisonError::into_inner)
    }

    /// Whether the set is open for writing.
    pub fn writable(&self) -> bool {
        matches!(*self.state(), State::Next(_))
    }

    /// Writes `data` at stream offset `off`.
    ///
    /// # Errors
    /// [`FileError::Options`] for a set opened read-only or committed for the last time;
    /// the file system's error.
    pub fn write_at(&self, data: &[u8], off: u64) -> Result<(), FileError> {
        match &*self.state() {
            State::Next(n) => n.write_at(&self.map, data, off),
            _ => Err(FileError::Options(NOT_WRITABLE)),
        }
    }

    /// Reads up to `out.len()` bytes at stream offset `off`; fewer where the stream
    /// ends. Returns the bytes read.
    ///
    /// # Errors
    /// A block damaged beyond parity (read-only), the file system's error.
    pub fn read_at(&self, out: &mut [u8], off: u64) -> Result<usize, FileError> {
        match &*self.state() {
            State::Next(n) => n.read_at(&self.map, out, off),
            State::Current(c) => c.read_at(out, off),
            State::Plain(f) => read_full(f, &self.path, out, off),
            State::Done => Err(FileError::Options(NOT_WRITABLE)),
        }
    }

    /// The stream's length.
    ///
    /// # Errors
    /// The file system's error.
    pub fn len(&self) -> Result<u64, FileError> {
        match &*self.state() {
            State::Next(n) => n.len(&self.map),
            State::Current(c) => Ok(c.geo.size),
            State::Plain(f) => Ok(f
                .metadata()
                .map_err(|e| FileError::io("look at", &self.path, e))?
                .len()),
            State::Done => Ok(0),
        }
    }

    /// Whether the stream is empty.
    ///
    /// # Errors
    /// As [`Draft::len`].
    pub fn is_empty(&self) -> Result<bool, FileError> {
        self.len().map(|n| n == 0)
    }

    /// Cuts or extends the stream to `size` bytes (one rank calls it for the group).
    ///
    /// # Errors
    /// As [`Draft::write_at`].
    pub fn set_len(&self, size: u64) -> Result<(), FileError> {
        match &*self.state() {
            State::Next(n) => n.set_len(&self.map, size),
            _ => Err(FileError::Options(NOT_WRITABLE)),
        }
    }

    /// Makes this rank's writes so far reach the unit files' storage (the version
    /// becomes durable as a whole at [`Draft::commit`]).
    ///
    /// # Errors
    /// The file system's error.
    pub fn sync_data(&self) -> Result<(), FileError> {
        match &*self.state() {
            State::Next(n) => n
                .files
                .iter()
                .zip(&n.paths)
                .try_for_each(|(f, p)| sys::sync(f, p)),
            _ => Ok(()),
        }
    }

    /// A descriptor for the advisory lock of MPI's atomic mode (one file that every rank
    /// of the group holds open), `None` once committed for the last time.
    pub fn lock_fd(&self) -> Option<RawFd> {
        match &*self.state() {
            State::Next(n) => n.files.first().map(AsRawFd::as_raw_fd),
            State::Current(c) => Some(c.lock.as_raw_fd()),
            State::Plain(f) => Some(f.as_raw_fd()),
            State::Done => None,
        }
    }

    /// Commits what the group wrote as the set's next version (collective over the
    /// group that opened it; every rank's accesses are finished once all have called):
    /// parity and block checksums computed by each rank for its share of the rows, the
    /// unit files made durable, then the manifest replaced by rank 0. A stream of no
    /// bytes leaves an empty plain file at the path instead (a set holds at least one).
    /// With `reopen`, the set stays open for writing, on the version after. Returns the
    /// version committed.
    ///
    /// # Errors
    /// On every rank: [`FileError::Options`] for a set not open for writing, the file
    /// system's errors (a full disk), a failed peer. The previous version stays whole.
    pub fn commit(&self, comm: &Communicator, reopen: bool) -> Result<u64, FileError> {
        let path = self.path.as_path();
        let mut state = self.state.write().unwrap_or_else(PoisonError::into_inner);
        let next = match &*state {
            State::Next(n) => Ok(n),
            _ => Err(FileError::Options(NOT_WRITABLE)),
        };
        let next = agree_on_outcome(comm, path, next)?;
        // Once every rank is here, every write is in the unit files: the stream ends
        // where the furthest rank's look at them says.
        let mine = agree_on_outcome(comm, path, next.len(&self.map))?;
        let mut size = [0u64];
        comm.allreduce(&[mine], &mut size, &Op::Max)?;
        let size = size[0];
        let version = next.version;
        let done = if size == 0 {
            let done = if comm.rank() == 0 {
                commit::empty_file(path, next)
            } else {
                Ok(())
            };
            agree_on_outcome(comm, path, done).map(|()| 0)
        } else {
            commit::rows(comm, path, &self.striping.layout, next, size).map(|()| version)
        };
        let committed = match done {
            Ok(v) => v,
            Err(e) => {
                // Failed before the manifest named the new version: its unit files stay
                // this handle's to write and commit again. Failed after (the directory's
                // sync), or in an empty commit that removed them: no more writes here.
                // Rank 0's look decides for every rank (each rank's own where the group
                // can no longer talk), so that all stay open for writing or none.
                let named = std::fs::read(path)
                    .ok()
                    .and_then(|t| Manifest::parse(path, &t).ok())
                    .is_some_and(|m| m.version == version);
                let named = comm
                    .bcast_bytes(0, &[u8::from(named)])
                    .map_or(named, |b| b.first() == Some(&1));
                if size == 0 {
                    next.discard();
                }
                if size == 0 || named {
                    *state = State::Done;
                }
                return Err(e);
            }
        };
        // The committed unit files are never written again through this handle, whatever
        // becomes of the reopen.
        *state = State::Done;
        if reopen {
            let mut n = Next::create(comm, path, &self.striping, committed + 1)?;
            let copied = if committed == 0 {
                Ok(None)
            } else {
                commit::copy_units(comm, &self.path, &n).map(Some)
            };
            match agree_on_outcome(comm, path, copied) {
                Ok(base) => n.base = base,
                Err(e) => {
                    n.discard();
                    return Err(e);
                }
            }
            *state = State::Next(n);
        }
        Ok(committed)
    }

    /// Removes the unit files of the version being written (a file deleted on close);
    /// not collective.
    pub fn discard(&self) {
        if let State::Next(n) = &*self.state() {
            n.discard();
        }
    }
}
