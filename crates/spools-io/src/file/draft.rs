//! A striped set (RAID-0 / RAID-5) open for direct access by every rank of a parallel
//! program, as MPI-IO's `spools_layout` hint keeps a file: reads and writes go straight
//! to unit files, with no working copy of the file.
//!
//! A set opened for writing gets the unit files of its next version (the slot the
//! manifest does not name), filled from the current version in parallel (each rank its
//! share of the stripe rows, every block verified and a damaged one rebuilt from parity
//! as it is copied). The program's writes land in those unit files, in data blocks only;
//! the stream's length is what the unit files' lengths say ([`Map::end_from`]), so every
//! rank sees every rank's writes and extensions as on a plain file. A commit computes
//! parity and block checksums row by row (each rank its share of the rows, one batch of
//! rows in memory at a time), makes the units durable and replaces the manifest last: a
//! crash before that leaves the previous version whole, since its slot is never written.
//! After a commit that keeps the set open, the next version's unit files start as a
//! kernel copy (`copy_file_range`) of the version just committed.
//!
//! A set opened read-only is read from its current version, every block verified as it
//! is read and a damaged one rebuilt from parity.

use std::fs::File;
use std::os::fd::{AsRawFd, RawFd};
use std::os::unix::fs::FileExt;
use std::path::{Path, PathBuf};
use std::sync::{PoisonError, RwLock};

use spools_exchange::crc::xor_into;
use spools_map::Layout;
use spools_msg::{Communicator, Op};

use super::manifest::{hex, Manifest, UnitEntry, MANIFEST_FORMAT};
use super::options::Striping;
use super::rows::{Block, Chunk, Geometry, Raid};
use super::steps::agree_on_outcome;
use super::striped::{split_rows, unit_paths};
use super::sys;
use super::tools::{self, Opened};
use crate::error::{FileError, FormatDefect};

/// Bytes of stripe rows one rank holds at once while it fills or commits a version.
const BATCH: u64 = 4 << 20;

/// The environment variable that makes rank 0 abort at a named point of a commit, for the
/// tests that kill a commit half-way (`before-manifest`: every unit file of the new
/// version written and durable, the manifest not yet replaced).
pub const CRASH_AT: &str = "SPOOLS_TEST_CRASH_AT";

/// Where the bytes of a striped stream lie, whatever the stream's length.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
struct Map {
    raid: Raid,
    unit: u64,
    count: u64,
}

impl Map {
    fn of(layout: &Layout) -> Option<Map> {
        let (raid, unit, count) = match layout {
            Layout::Stripe(s) => (Raid::Raid0, s.unit(), s.count()),
            Layout::Raid5(s) => (Raid::Raid5, s.unit(), s.count()),
            _ => return None,
        };
        let m = Map { raid, unit, count };
        (unit > 0 && m.data_units() > 0).then_some(m)
    }

    fn data_units(&self) -> u64 {
        match self.raid {
            Raid::Raid0 => self.count,
            Raid::Raid5 => self.count.saturating_sub(1),
        }
    }

    fn row_bytes(&self) -> u64 {
        self.unit * self.data_units()
    }

    /// Which data block of row `r` unit `u` holds (`None`: the row's parity).
    fn index(&self, r: u64, u: u64) -> Option<u64> {
        match self.raid {
            Raid::Raid0 => Some(u),
            Raid::Raid5 => {
                let pu = self.count - 1 - r % self.count;
                (u != pu).then(|| (u + self.count - pu - 1) % self.count)
            }
        }
    }

    /// The unit holding stream byte `off`, the byte's offset in it, and the bytes of its
    /// block from there on.
    fn locate(&self, off: u64) -> (u64, u64, u64) {
        let rb = self.row_bytes();
        let (r, in_row) = (off / rb, off % rb);
        let (idx, w) = (in_row / self.unit, in_row % self.unit);
        let u = match self.raid {
            Raid::Raid0 => idx,
            Raid::Raid5 => (self.count - r % self.count + idx) % self.count,
        };
        (u, r * self.unit + w, self.unit - w)
    }

    /// One past the last stream byte that a file of `len` bytes for unit `u` holds (0
    /// for none): parity blocks are stepped over.
    fn end_from(&self, u: u64, len: u64) -> u64 {
        let mut x = len;
        while x > 0 {
            let r = (x - 1) / self.unit;
            match self.index(r, u) {
                Some(i) => return r * self.row_bytes() + i * self.unit + (x - 1) % self.unit + 1,
                None => x = r * self.unit,
            }
        }
        0
    }

    /// The length of unit `u`'s file that holds exactly its data of a stream of `size`
    /// bytes (a parity block after its last data block is not kept).
    fn unit_end(&self, u: u64, size: u64) -> u64 {
        if size == 0 {
            return 0;
        }
        let last = (size - 1) / self.row_bytes();
        // The last row holds data of `u`, or the row before does, or (RAID-5, `u` the
        // parity of that one) the row before that: all rows before the last are full.
        for r in (0..=last).rev().take(3) {
            if let Some(i) = self.index(r, u) {
                let start = r * self.row_bytes() + i * self.unit;
                if start < size {
                    return r * self.unit + (size - start).min(self.unit);
                }
            }
        }
        0
    }
}

/// What a set's path held when it was opened (rank 0's look, the same on every rank).
enum Source {
    /// Nothing.
    Nothing,
    /// A plain file: its bytes are the stream.
    Plain,
    /// A striped set's current version.
    Set(Box<Manifest>),
}

impl Source {
    /// What `path` holds, encoded for the group.
    fn look(path: &Path) -> Result<Vec<u8>, FileError> {
        match path.symlink_metadata() {
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(vec![0]),
            Err(e) => return Err(FileError::io("look at", path, e)),
            Ok(_) => {}
        }
        match tools::open(path)? {
            Opened::Plain { .. } => Ok(vec![1]),
            Opened::Striped(m) => {
                let mut v = vec![2];
                v.extend(serde_json::to_vec(&m).map_err(|e| FileError::Format {
                    path: path.to_path_buf(),
                    defect: FormatDefect::Encode {
                        reason: e.to_string(),
                    },
                })?);
                Ok(v)
            }
            Opened::Zarr(_) => Err(FileError::Options(
                "a Zarr array, not a file a program opens as a byte stream",
            )),
        }
    }

    fn decode(path: &Path, bytes: &[u8]) -> Result<Source, FileError> {
        match bytes.split_first() {
            Some((1, _)) => Ok(Source::Plain),
            Some((2, text)) => Ok(Source::Set(Box::new(Manifest::parse(path, text)?))),
            _ => Ok(Source::Nothing),
        }
    }
}

/// The unit files of the version being written.
#[derive(Debug)]
struct Next {
    version: u64,
    names: Vec<String>,
    paths: Vec<PathBuf>,
    files: Vec<File>,
}

impl Next {
    /// Makes (rank 0, emptied) and opens (every rank) the unit files of `version`.
    /// Collective.
    fn create(
        comm: &Communicator,
        path: &Path,
        striping: &Striping,
        version: u64,
    ) -> Result<Next, FileError> {
        let names = agree_on_outcome(comm, path, unit_paths(path, striping, version % 2))?;
        let dir = path.parent().unwrap_or_else(|| Path::new(""));
        let paths: Vec<PathBuf> = names.iter().map(|n| dir.join(n)).collect();
        let made = if comm.rank() == 0 {
            paths
                .iter()
                .try_for_each(|p| sys::create_unit(p, 0).map(drop))
        } else {
            Ok(())
        };
        agree_on_outcome(comm, path, made)?;
        let files = paths
            .iter()
            .map(|p| sys::open_unit_read_write(p))
            .collect::<Result<Vec<_>, _>>();
        let files = agree_on_outcome(comm, path, files)?;
        Ok(Next {
            version,
            names,
            paths,
            files,
        })
    }

    /// The stream's length as the unit files tell it.
    fn len(&self, map: &Map) -> Result<u64, FileError> {
        let mut end = 0;
        for (u, (f, p)) in self.files.iter().zip(&self.paths).enumerate() {
            let len = f
                .metadata()
                .map_err(|e| FileError::io("look at", p, e))?
                .len();
            end = end.max(map.end_from(u as u64, len));
        }
        Ok(end)
    }

    fn write_at(&self, map: &Map, data: &[u8], off: u64) -> Result<(), FileError> {
        let mut at = 0usize;
        while at < data.len() {
            let (u, local, room) = map.locate(off + at as u64);
            let n = room.min((data.len() - at) as u64) as usize;
            let u = u as usize;
            sys::write_at(&self.files[u], &self.paths[u], &data[at..at + n], local)?;
            at += n;
        }
        Ok(())
    }

    fn read_at(&self, map: &Map, out: &mut [u8], off: u64) -> Result<usize, FileError> {
        let mut at = 0usize;
        let mut size = None;
        while at < out.len() {
            let (u, local, room) = map.locate(off + at as u64);
            let n = room.min((out.len() - at) as u64) as usize;
            let u = u as usize;
            let got = read_full(&self.files[u], &self.paths[u], &mut out[at..at + n], local)?;
            if got < n {
                // Past the end of this unit file: a hole within the stream (zeros) or
                // the stream's end.
                let end = match size {
                    Some(s) => s,
                    None => *size.insert(self.len(map)?),
                };
                let here = off + (at + got) as u64;
                if here >= end {
                    return Ok(at + got);
                }
                let zeros = (end - here).min((n - got) as u64) as usize;
                out[at + got..at + got + zeros].fill(0);
                if got + zeros < n {
                    return Ok(at + got + zeros);
                }
            }
            at += n;
        }
        Ok(at)
    }

    fn set_len(&self, map: &Map, size: u64) -> Result<(), FileError> {
        for (u, (f, p)) in self.files.iter().zip(&self.paths).enumerate() {
            let len = f
                .metadata()
                .map_err(|e| FileError::io("look at", p, e))?
                .len();
            let want = map.unit_end(u as u64, size);
            if len > want {
                sys::resize(f, p, want)?;
            }
        }
        if size > 0 {
            let (u, local, _) = map.locate(size - 1);
            let (f, p) = (&self.files[u as usize], &self.paths[u as usize]);
            let len = f
                .metadata()
                .map_err(|e| FileError::io("look at", p, e))?
                .len();
            if len <= local {
                sys::resize(f, p, local + 1)?;
            }
        }
        Ok(())
    }

    /// Removes the unit files (nothing names them).
    fn discard(&self) {
        for p in &self.paths {
            let _ = std::fs::remove_file(p);
        }
    }
}

/// A set opened read-only: its current version, verified as it is read.
#[derive(Debug)]
struct Current {
    geo: Geometry,
    paths: Vec<PathBuf>,
    crcs: Vec<Vec<u32>>,
    files: Vec<Option<File>>,
    /// The manifest, held for the advisory lock of atomic mode.
    lock: File,
}

impl Current {
    /// Reads the rows `[r0, r1)` verified (a damaged block rebuilt from parity) into
    /// `out` (their stream bytes). Returns the blocks rebuilt.
    fn rows(&self, r0: u64, r1: u64, out: &mut [u8]) -> Result<usize, FileError> {
        let chunks: Vec<Chunk> = (0..self.geo.count)
            .map(|u| {
                let (lo, hi) = self.geo.chunk_range(u, r0, r1);
                let f = self.files[u as usize].as_ref()?;
                sys::read_upto(f, &self.paths[u as usize], (hi - lo) as usize, lo).ok()
            })
            .collect();
        let rebuilt = self
            .geo
            .assemble((r0, r1), &chunks, &self.crcs, &self.paths, out, false)?;
        Ok(rebuilt.len())
    }

    /// Reads `[off, off + out.len())` verified, in batches of rows of at most
    /// [`BATCH`] bytes (one batch in memory at a time).
    fn read_at(&self, out: &mut [u8], off: u64) -> Result<usize, FileError> {
        let end = (off.saturating_add(out.len() as u64)).min(self.geo.size);
        if off >= end {
            return Ok(0);
        }
        let rb = self.geo.row_bytes();
        let step = (BATCH / rb).max(1);
        let mut rows = Vec::new();
        let mut r = off / rb;
        while r * rb < end {
            let r1 = (r + step).min(end.div_ceil(rb));
            let (a, b) = self.geo.stream_range(r, r1);
            rows.resize((b - a) as usize, 0);
            self.rows(r, r1, &mut rows)?;
            let (lo, hi) = (a.max(off), b.min(end));
            out[(lo - off) as usize..(hi - off) as usize]
                .copy_from_slice(&rows[(lo - a) as usize..(hi - a) as usize]);
            r = r1;
        }
        Ok((end - off) as usize)
    }
}

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
        let look = if comm.rank() == 0 {
            Source::look(path)
        } else {
            Ok(Vec::new())
        };
        let look = agree_on_outcome(comm, path, look)?;
        let look = comm.bcast_bytes(0, &look)?;
        let source = agree_on_outcome(comm, path, Source::decode(path, &look))?;
        let state = if writable {
            let version = match &source {
                Source::Set(m) => m.version + 1,
                _ => 1,
            };
            let next = Next::create(comm, path, striping, version)?;
            let filled = fill(comm, path, &map, &next, &source);
            if let Err(e) = agree_on_outcome(comm, path, filled) {
                next.discard();
                return Err(e);
            }
            State::Next(next)
        } else {
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
            agree_on_outcome(comm, path, current)?
        };
        Ok(Draft {
            path: path.to_path_buf(),
            striping: striping.clone(),
            map,
            state: RwLock::new(state),
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
            _ => Err(FileError::Options("the set is not open for writing")),
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
            State::Done => Err(FileError::Options("the set is closed")),
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
            _ => Err(FileError::Options("the set is not open for writing")),
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
            _ => Err(FileError::Options("the set is not open for writing")),
        };
        let next = agree_on_outcome(comm, path, next)?;
        // Once every rank is here, every write is in the unit files: the stream ends
        // where the furthest rank's look at them says.
        let mine = agree_on_outcome(comm, path, next.len(&self.map))?;
        let mut size = [0u64];
        comm.allreduce(&[mine], &mut size, &Op::Max)?;
        let size = size[0];
        let version = next.version;
        let committed = if size == 0 {
            let done = if comm.rank() == 0 {
                empty_file(path, next)
            } else {
                Ok(())
            };
            agree_on_outcome(comm, path, done)?;
            0
        } else {
            self.commit_rows(comm, next, size)?;
            version
        };
        *state = if reopen {
            let n = Next::create(comm, path, &self.striping, committed + 1)?;
            let copied = if committed == 0 {
                Ok(())
            } else {
                copy_units(comm, &self.path, &n)
            };
            agree_on_outcome(comm, path, copied)?;
            State::Next(n)
        } else {
            State::Done
        };
        Ok(committed)
    }

    /// The parity, checksums, durable units and manifest of a commit of `size` bytes.
    fn commit_rows(&self, comm: &Communicator, next: &Next, size: u64) -> Result<(), FileError> {
        let path = self.path.as_path();
        let geo = self
            .striping
            .layout
            .with_size(size)
            .map_err(FileError::from)
            .and_then(|l| {
                Geometry::new(&l).ok_or(FileError::Options(
                    "a striped set needs a stripe(...) or raid5(...) layout",
                ))
            });
        let geo = agree_on_outcome(comm, path, geo)?;
        let (per, aggs) = split_rows(&geo, comm.size());
        let me = u64::from(comm.rank());
        let mut crcs = Vec::new();
        let rows = if me < u64::from(aggs) {
            (me * per).min(geo.rows())..((me + 1) * per).min(geo.rows())
        } else {
            0..0
        };
        let parity = rows
            .clone()
            .try_for_each(|r| row_parity(&geo, next, r, &mut crcs));
        agree_on_outcome(comm, path, parity)?;
        // Each unit cut to its length and made durable by one rank.
        let durable = (0..geo.count)
            .filter(|u| u % u64::from(comm.size()) == me)
            .try_for_each(|u| {
                let (f, p) = (&next.files[u as usize], &next.paths[u as usize]);
                sys::resize(f, p, geo.unit_len(u))?;
                sys::sync(f, p)
            });
        agree_on_outcome(comm, path, durable)?;
        let all = comm.allgather_bytes(&crcs)?;
        if comm.rank() == 0 && std::env::var(CRASH_AT).is_ok_and(|v| v == "before-manifest") {
            std::process::abort();
        }
        let written = if comm.rank() == 0 {
            let mut per_unit: Vec<Vec<u32>> = vec![Vec::new(); geo.count as usize];
            let mut it = all.iter().flat_map(|b| {
                b.chunks_exact(4)
                    .map(|c| u32::from_le_bytes([c[0], c[1], c[2], c[3]]))
            });
            for r in 0..geo.rows() {
                for (u, list) in per_unit.iter_mut().enumerate() {
                    if geo.block(r, u as u64).len() > 0 {
                        list.extend(it.next());
                    }
                }
            }
            let m = Manifest {
                format: MANIFEST_FORMAT.into(),
                version: next.version,
                slot: next.version % 2,
                size,
                layout: self.striping.layout.to_string(),
                dataset: format!("u8[{size}] block on {}", comm.size()),
                node_local: false,
                units: next
                    .names
                    .iter()
                    .zip(&per_unit)
                    .enumerate()
                    .map(|(u, (n, c))| UnitEntry {
                        path: n.clone(),
                        bytes: geo.unit_len(u as u64),
                        crc32c: hex(c),
                        host: None,
                    })
                    .collect(),
            };
            serde_json::to_vec_pretty(&m)
                .map_err(|e| FileError::Format {
                    path: path.to_path_buf(),
                    defect: FormatDefect::Encode {
                        reason: e.to_string(),
                    },
                })
                .and_then(|text| sys::replace(path, &text))
        } else {
            Ok(())
        };
        agree_on_outcome(comm, path, written)
    }

    /// Removes the unit files of the version being written (a file deleted on close);
    /// not collective.
    pub fn discard(&self) {
        if let State::Next(n) = &*self.state() {
            n.discard();
        }
    }
}

/// Reads `out.len()` bytes at `off`, fewer where the file ends.
fn read_full(f: &File, path: &Path, out: &mut [u8], off: u64) -> Result<usize, FileError> {
    let mut got = 0usize;
    while got < out.len() {
        match f.read_at(&mut out[got..], off + got as u64) {
            Ok(0) => break,
            Ok(n) => got += n,
            Err(e) if e.kind() == std::io::ErrorKind::Interrupted => {}
            Err(e) => return Err(FileError::io("read", path, e)),
        }
    }
    Ok(got)
}

/// The parity and block checksums of row `r` (appended to `crcs` in unit order): each
/// data block read back (zeros past its unit file's end), the parity written.
fn row_parity(geo: &Geometry, next: &Next, r: u64, crcs: &mut Vec<u8>) -> Result<(), FileError> {
    let unit = geo.unit as usize;
    let mut parity = vec![0u8; unit];
    let mut block = vec![0u8; unit];
    let mut sums = vec![None; geo.count as usize];
    let mut pu = None;
    for u in 0..geo.count {
        match geo.block(r, u) {
            Block::Data { len, .. } => {
                let len = len as usize;
                let (f, p) = (&next.files[u as usize], &next.paths[u as usize]);
                let got = read_full(f, p, &mut block[..len], r * geo.unit)?;
                block[got..len].fill(0);
                sums[u as usize] = Some(spools_exchange::crc32c(&block[..len]));
                xor_into(&mut parity[..len], &block[..len]);
            }
            Block::Parity { len } => pu = Some((u, len as usize)),
            Block::Absent => {}
        }
    }
    if let Some((u, len)) = pu {
        let (f, p) = (&next.files[u as usize], &next.paths[u as usize]);
        sys::write_at(f, p, &parity[..len], r * geo.unit)?;
        sums[u as usize] = Some(spools_exchange::crc32c(&parity[..len]));
    }
    crcs.extend(sums.into_iter().flatten().flat_map(u32::to_le_bytes));
    Ok(())
}

/// Fills the next version from `source`: this rank's share of the stream (a set's rows,
/// verified, or a plain file's bytes), in batches.
fn fill(
    comm: &Communicator,
    path: &Path,
    map: &Map,
    next: &Next,
    source: &Source,
) -> Result<(), FileError> {
    let (me, ranks) = (u64::from(comm.rank()), u64::from(comm.size()));
    match source {
        Source::Nothing => Ok(()),
        Source::Plain => {
            let f = sys::open_read(path)?;
            let len = f
                .metadata()
                .map_err(|e| FileError::io("look at", path, e))?
                .len();
            let (a, b) = (len * me / ranks, len * (me + 1) / ranks);
            let mut buf = vec![0u8; BATCH.min(b - a) as usize];
            let mut at = a;
            while at < b {
                let n = (b - at).min(BATCH) as usize;
                let got = read_full(&f, path, &mut buf[..n], at)?;
                buf[got..n].fill(0);
                next.write_at(map, &buf[..n], at)?;
                at += n as u64;
            }
            Ok(())
        }
        Source::Set(m) => {
            let geo = m.geometry(path)?;
            let paths = m.unit_paths(path);
            let current = Current {
                files: paths.iter().map(|p| sys::open_unit_read(p).ok()).collect(),
                crcs: m.crcs(),
                paths,
                lock: sys::open_read(path)?,
                geo,
            };
            let geo = &current.geo;
            let (per, aggs) = split_rows(geo, comm.size());
            if me >= u64::from(aggs) {
                return Ok(());
            }
            let (mut r, end) = ((me * per).min(geo.rows()), ((me + 1) * per).min(geo.rows()));
            let step = (BATCH / geo.row_bytes().max(1)).max(1);
            let mut rebuilt = 0;
            while r < end {
                let r1 = (r + step).min(end);
                let (a, b) = geo.stream_range(r, r1);
                let mut out = vec![0u8; (b - a) as usize];
                rebuilt += current.rows(r, r1, &mut out)?;
                next.write_at(map, &out, a)?;
                r = r1;
            }
            if rebuilt > 0 {
                spools_boot::logger::warn(format_args!(
                    "spools: {}: rebuilt {rebuilt} damaged block(s) from parity (run `spools fsck`/`spools repair`)",
                    path.display()
                ));
            }
            Ok(())
        }
    }
}

/// Rank 0's commit of an empty stream: an empty plain file at `path`, the unit files of
/// the set it held and of `next` removed.
fn empty_file(path: &Path, next: &Next) -> Result<(), FileError> {
    let old = std::fs::read(path)
        .ok()
        .and_then(|t| Manifest::parse(path, &t).ok());
    sys::replace(path, &[])?;
    if let Some(m) = old {
        for p in m.unit_paths(path) {
            let _ = std::fs::remove_file(p);
        }
    }
    next.discard();
    Ok(())
}

/// Copies the version just committed into `next`'s unit files (each rank the units
/// `u % ranks == rank`, in the kernel).
fn copy_units(comm: &Communicator, path: &Path, next: &Next) -> Result<(), FileError> {
    let text = std::fs::read(path).map_err(|e| FileError::io("read", path, e))?;
    let m = Manifest::parse(path, &text)?;
    let (me, ranks) = (u64::from(comm.rank()), u64::from(comm.size()));
    for (u, src) in m.unit_paths(path).iter().enumerate() {
        if u as u64 % ranks != me {
            continue;
        }
        let (Some(mut to), Some(p)) = (
            next.files
                .get(u)
                .map(|f| f.try_clone())
                .transpose()
                .map_err(|e| FileError::io("open unit file for writing", &next.paths[u], e))?,
            next.paths.get(u),
        ) else {
            continue;
        };
        let mut from = sys::open_unit_read(src)?;
        std::io::copy(&mut from, &mut to).map_err(|e| FileError::io("copy into", p, e))?;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn map(spec: &str) -> Map {
        let l: Layout = spec.parse().unwrap_or_else(|e| unreachable!("{e}"));
        Map::of(&l).unwrap_or_else(|| unreachable!())
    }

    /// `locate`, `end_from` and `unit_end` agree with the sized geometry of the striped
    /// writer for every byte of streams of many lengths.
    #[test]
    fn the_map_agrees_with_the_geometry_of_every_length() {
        for spec in [
            "raid5(unit=4B,count=3)",
            "raid5(unit=3B,count=4)",
            "stripe(unit=5B,count=2)",
            "raid5(unit=2B,count=2)",
        ] {
            let m = map(spec);
            for size in 1..80u64 {
                let l: Layout = spec.parse().unwrap_or_else(|e| unreachable!("{e}"));
                let g = Geometry::new(&l.with_size(size).unwrap_or_else(|e| unreachable!("{e}")))
                    .unwrap_or_else(|| unreachable!());
                let mut ends = vec![0u64; m.count as usize];
                for off in 0..size {
                    let (u, local, room) = m.locate(off);
                    let r = local / m.unit;
                    match g.block(r, u) {
                        Block::Data { global, len } => {
                            assert!(global <= off && off < global + len, "{spec} {size} {off}");
                            assert_eq!(off - global, local % m.unit);
                            assert_eq!(room, m.unit - local % m.unit);
                        }
                        b => panic!("{spec} size {size}: byte {off} in {b:?}"),
                    }
                    ends[u as usize] = ends[u as usize].max(local + 1);
                }
                for u in 0..m.count {
                    assert_eq!(
                        m.unit_end(u, size),
                        ends[u as usize],
                        "{spec} {size} unit {u}"
                    );
                    assert!(m.end_from(u, ends[u as usize]) <= size);
                    // A committed unit file (its trailing parity block kept) tells no more.
                    assert!(
                        m.end_from(u, g.unit_len(u)) <= size,
                        "{spec} {size} unit {u}"
                    );
                }
                let (u, local, _) = m.locate(size - 1);
                assert_eq!(m.end_from(u, local + 1), size);
                assert_eq!(
                    (0..m.count).map(|u| m.end_from(u, g.unit_len(u))).max(),
                    Some(size)
                );
            }
        }
    }
}
