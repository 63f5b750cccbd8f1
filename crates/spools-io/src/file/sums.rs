//! Checksums of canonical (and `.npy`) files: the CRC32C of every fixed-size block of the
//! byte stream, in a sidecar `NAME.spools-sums` next to the file.
//!
//! The sidecar is a small JSON document (the manifest's conventions):
//!
//! ```json
//! {"format":"spools-sums","block":1048576,"offset":128,"bytes":3000000,
//!  "crc32c":"8 hex digits per block ..."}
//! ```
//!
//! `offset` is where the stream starts in the file (the `.npy` header's length, or 0),
//! `bytes` the stream's length, and block `i` covers stream bytes `[i * block, (i + 1) *
//! block)` (the last one shorter). Writers compute the sums of what they write, in pieces
//! cut at block boundaries ([`Pieces`]); rank 0 gathers the pieces, combines them into one
//! CRC per block ([`crc32c::crc32c_combine`]) and commits the sidecar.
//!
//! **The commit rule**: the sidecar is replaced (temporary file, synced, renamed) *before*
//! the data file is renamed into place, and a write without checksums removes an old
//! sidecar before its rename. So a committed data file never has stale sums: after a crash
//! between the two renames, the sidecar describes the data that was not committed, and a
//! verified read or `spools fsck` reports mismatches; it never passes stale data as
//! verified.

use std::fs::File;
use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};
use spools_msg::Communicator;

use crate::error::{FileError, FormatDefect, SumsDefect};
use crate::file::sys;

/// The `format` field of every sidecar.
pub const SUMS_FORMAT: &str = "spools-sums";

/// Stream bytes per checksummed block of the sidecars written.
pub const SUMS_BLOCK: u64 = 1 << 20;

/// Bytes of a sidecar read at most (8 per block: a 32 TiB file).
pub const SIDECAR_MAX: usize = 256 << 20;

/// Largest block a sidecar may have: a reader holds one block (of up to this many bytes)
/// to check it before handing any of it out, so a larger one is refused.
pub(crate) const SUMS_BLOCK_MAX: u64 = 64 << 20;

/// Suffix of a sidecar's name (`NAME.spools-sums`).
const SUFFIX: &str = ".spools-sums";

/// The sidecar of the data file `path`.
pub fn sidecar_path(path: &Path) -> PathBuf {
    let mut s = path.as_os_str().to_owned();
    s.push(SUFFIX);
    PathBuf::from(s)
}

/// A checksum sidecar, as stored.
#[derive(Clone, Debug, Serialize, Deserialize, PartialEq, Eq)]
pub struct Sums {
    /// Always [`SUMS_FORMAT`].
    pub format: String,
    /// Stream bytes per block.
    pub block: u64,
    /// Byte offset of the stream in the data file.
    pub offset: u64,
    /// Bytes in the stream.
    pub bytes: u64,
    /// The CRC32C of each block, as 8 hex digits each.
    pub crc32c: String,
}

impl Sums {
    /// Parses and checks a sidecar's text (`path` names it in errors).
    ///
    /// # Errors
    /// [`FileError::Format`] with a [`SumsDefect`] when it is not a consistent sidecar.
    pub fn parse(path: &Path, text: &[u8]) -> Result<Sums, FileError> {
        let bad = |d: SumsDefect| FileError::Format {
            path: path.to_path_buf(),
            defect: FormatDefect::Sums(d),
        };
        let s: Sums = serde_json::from_slice(text).map_err(|e| {
            bad(SumsDefect::NotSums {
                reason: e.to_string(),
            })
        })?;
        if s.format != SUMS_FORMAT {
            return Err(bad(SumsDefect::Format {
                found: s.format,
                expected: SUMS_FORMAT,
            }));
        }
        if s.block == 0 {
            return Err(bad(SumsDefect::BlockSize));
        }
        if s.block > SUMS_BLOCK_MAX {
            return Err(bad(SumsDefect::NotSums {
                reason: format!(
                    "a block of {} bytes is more than the {SUMS_BLOCK_MAX} a block may have",
                    s.block
                ),
            }));
        }
        let blocks = s.blocks();
        if blocks.checked_mul(8) != Some(s.crc32c.len() as u64)
            || s.crc32c.bytes().any(|c| !c.is_ascii_hexdigit())
        {
            return Err(bad(SumsDefect::Checksums {
                blocks,
                found: s.crc32c.len(),
            }));
        }
        Ok(s)
    }

    /// Reads the sidecar of the data file `path`, `None` when there is none.
    ///
    /// # Errors
    /// [`FileError::Io`] when it cannot be read, [`FileError::Format`] when it is not a
    /// sidecar (one larger than [`SIDECAR_MAX`] bytes is cut there and so refused).
    pub fn read(path: &Path) -> Result<Option<Sums>, FileError> {
        let side = sidecar_path(path);
        let f = match sys::open_read(&side) {
            Ok(f) => f,
            Err(FileError::Io { source, .. }) if source.kind() == std::io::ErrorKind::NotFound => {
                return Ok(None)
            }
            Err(e) => return Err(e),
        };
        let len = f
            .metadata()
            .map_err(|e| FileError::io("stat", &side, e))?
            .len();
        let text = sys::read_upto(&f, &side, len.min(SIDECAR_MAX as u64) as usize, 0)?;
        Sums::parse(&side, &text).map(Some)
    }

    /// Reads the sidecar of the data file `path`, which must describe `bytes` stream
    /// bytes at `offset`.
    ///
    /// # Errors
    /// [`FileError::Io`] when it cannot be read or is missing, [`FileError::Format`] when
    /// it is not a sidecar of this file.
    pub fn load(path: &Path, offset: u64, bytes: u64) -> Result<Sums, FileError> {
        let side = sidecar_path(path);
        let Some(s) = Sums::read(path)? else {
            return Err(FileError::io(
                "open checksums",
                side,
                std::io::ErrorKind::NotFound.into(),
            ));
        };
        if (s.offset, s.bytes) != (offset, bytes) {
            return Err(FileError::Format {
                path: side,
                defect: FormatDefect::Sums(SumsDefect::Describes {
                    offset: s.offset,
                    bytes: s.bytes,
                    file_offset: offset,
                    file_bytes: bytes,
                }),
            });
        }
        Ok(s)
    }

    /// Checks that this sidecar covers the `bytes` stream bytes at `offset` of the data
    /// file `path` (exactly, as Spools writes it, or as part of the larger stream it
    /// records, as a whole-file sidecar of MPI-IO's `spools_checksums` hint does).
    ///
    /// # Errors
    /// [`FileError::Format`] with [`SumsDefect::Describes`] when it does not.
    pub fn check_covers(&self, path: &Path, offset: u64, bytes: u64) -> Result<(), FileError> {
        let end = offset.checked_add(bytes);
        let covers = offset >= self.offset
            && end.is_some_and(|e| e <= self.offset.saturating_add(self.bytes));
        if covers {
            return Ok(());
        }
        Err(FileError::Format {
            path: sidecar_path(path),
            defect: FormatDefect::Sums(SumsDefect::Describes {
                offset: self.offset,
                bytes: self.bytes,
                file_offset: offset,
                file_bytes: bytes,
            }),
        })
    }

    /// Reads the bytes `[from, to)` of the data file `path` (opened as `f`; a range this
    /// sidecar covers, see [`Sums::check_covers`]) and checks every block they touch,
    /// reading those blocks whole: the bytes only when every block passes. Holds the range
    /// and at most two blocks more (of at most 64 MiB each).
    ///
    /// # Errors
    /// [`FileError::Corrupt`] naming the first bad block's byte offset in the file;
    /// [`FileError::MissingUnit`] (unit 0) at the first block the file is too short to
    /// hold; [`FileError::Format`] for a range the sidecar does not cover;
    /// [`FileError::Io`].
    pub fn read_verified(
        &self,
        f: &File,
        path: &Path,
        from: u64,
        to: u64,
    ) -> Result<Vec<u8>, FileError> {
        if from >= to {
            return Ok(Vec::new());
        }
        self.check_covers(path, from, to - from)?;
        let (x0, x1) = (from - self.offset, to - self.offset);
        let (b0, b1) = (x0 / self.block, x1.div_ceil(self.block));
        let (a, _) = self.block_range(b0);
        let (_, e) = self.block_range(b1.saturating_sub(1));
        let mut buf = sys::read_upto(f, path, (e - a) as usize, self.offset + a)?;
        for i in b0..b1 {
            let (p, q) = self.block_range(i);
            let Some(block) = buf.get((p - a) as usize..(q - a) as usize) else {
                return Err(FileError::MissingUnit {
                    unit: 0,
                    path: path.to_path_buf(),
                    offset: self.offset + p,
                });
            };
            self.check_block(path, i, block)?;
        }
        buf.truncate((x1 - a) as usize);
        buf.drain(..(x0 - a) as usize);
        Ok(buf)
    }

    /// Blocks in the stream.
    pub fn blocks(&self) -> u64 {
        self.bytes.div_ceil(self.block.max(1))
    }

    /// The stream bytes of block `i`: `(start, end)`.
    pub fn block_range(&self, i: u64) -> (u64, u64) {
        let a = i.saturating_mul(self.block).min(self.bytes);
        (a, a.saturating_add(self.block).min(self.bytes))
    }

    /// The recorded CRC32C of block `i`.
    pub fn crc(&self, i: u64) -> Option<u32> {
        let at = usize::try_from(i.checked_mul(8)?).ok()?;
        let hex = self.crc32c.get(at..at + 8)?;
        u32::from_str_radix(hex, 16).ok()
    }

    /// Checks block `i` against its bytes: `Err` with the block's byte offset in the data
    /// file `path` when they differ.
    fn check_block(&self, path: &Path, i: u64, bytes: &[u8]) -> Result<(), FileError> {
        if self.crc(i) == Some(spools_exchange::crc32c(bytes)) {
            Ok(())
        } else {
            Err(FileError::Corrupt {
                unit: 0,
                path: path.to_path_buf(),
                offset: self.offset + self.block_range(i).0,
            })
        }
    }

    /// The blocks `[b0, b1)` of the data file `path` (opened as `f`) that are bad: their
    /// byte offsets in the file and what is wrong (`"checksum mismatch"`, or `"missing"`
    /// for a block the file is too short to hold).
    ///
    /// # Errors
    /// [`FileError::Io`] when the file cannot be read.
    pub fn bad_blocks(
        &self,
        f: &File,
        path: &Path,
        (b0, b1): (u64, u64),
    ) -> Result<Vec<(u64, &'static str)>, FileError> {
        let mut bad = Vec::new();
        for i in b0..b1.min(self.blocks()) {
            let (a, b) = self.block_range(i);
            let buf = sys::read_upto(f, path, (b - a) as usize, self.offset + a)?;
            let offset = self.offset + a;
            if buf.len() as u64 != b - a {
                bad.push((offset, "missing"));
            } else if self.check_block(path, i, &buf).is_err() {
                bad.push((offset, "checksum mismatch"));
            }
        }
        Ok(bad)
    }
}

/// Checksums of pieces of the stream one rank wrote, cut at block boundaries: `(stream
/// offset, length, CRC32C)` each. Disabled, it records nothing.
#[derive(Debug, Default)]
pub(crate) struct Pieces {
    on: bool,
    list: Vec<(u64, u64, u32)>,
}

impl Pieces {
    /// Pieces that record when `on`.
    pub(crate) fn new(on: bool) -> Pieces {
        Pieces {
            on,
            list: Vec::new(),
        }
    }

    /// Records the checksums of `bytes`, written at stream offset `at`.
    pub(crate) fn add(&mut self, at: u64, bytes: &[u8]) {
        if !self.on {
            return;
        }
        let mut done = 0usize;
        while done < bytes.len() {
            let pos = at + done as u64;
            let room = (SUMS_BLOCK - pos % SUMS_BLOCK) as usize;
            let n = room.min(bytes.len() - done);
            let crc = spools_exchange::crc32c(&bytes[done..done + n]);
            self.list.push((pos, n as u64, crc));
            done += n;
        }
    }

    /// The pieces as bytes: a flag (on or off), then 20 bytes a piece.
    fn encode(&self) -> Vec<u8> {
        let mut v = vec![u8::from(self.on)];
        for &(a, n, c) in &self.list {
            v.extend_from_slice(&a.to_le_bytes());
            v.extend_from_slice(&n.to_le_bytes());
            v.extend_from_slice(&c.to_le_bytes());
        }
        v
    }
}

/// Gathers every rank's [`Pieces`] on rank 0 (collective; the other ranks get an empty
/// list): rank 0 then makes the sidecar of the `bytes`-byte stream at `offset`
/// ([`sidecar`]). Only the lengths go to every rank.
///
/// # Errors
/// Messaging failures.
pub(crate) fn gather(comm: &Communicator, pieces: &Pieces) -> Result<Vec<Vec<u8>>, FileError> {
    let mine = pieces.encode();
    let mut lens = vec![0u64; comm.size() as usize];
    comm.allgather(&[mine.len() as u64], &mut lens)?;
    let counts: Vec<usize> = lens.iter().map(|&l| l as usize).collect();
    let root = comm.rank() == 0;
    let mut all = vec![0u8; if root { counts.iter().sum() } else { 0 }];
    comm.gatherv(&mine, &mut all, &counts, 0)?;
    if !root {
        return Ok(Vec::new());
    }
    let mut rest = &all[..];
    Ok(counts
        .iter()
        .map(|&n| {
            let (one, tail) = rest.split_at(n);
            rest = tail;
            one.to_vec()
        })
        .collect())
}

/// The sidecar made of the gathered pieces of every rank, `None` when checksums are off.
///
/// # Errors
/// [`FileError::Format`] with [`SumsDefect::Disagree`] or [`SumsDefect::Coverage`]
/// (`path` names the data file).
pub(crate) fn sidecar(
    path: &Path,
    all: &[Vec<u8>],
    offset: u64,
    bytes: u64,
) -> Result<Option<Sums>, FileError> {
    let bad = |d: SumsDefect| FileError::Format {
        path: path.to_path_buf(),
        defect: FormatDefect::Sums(d),
    };
    let on: Vec<bool> = all.iter().map(|p| p.first() == Some(&1)).collect();
    if on.iter().any(|&x| x != on[0]) {
        return Err(bad(SumsDefect::Disagree));
    }
    if !on.first().copied().unwrap_or(false) {
        return Ok(None);
    }
    let mut list: Vec<(u64, u64, u32)> = all
        .iter()
        .flat_map(|p| p.get(1..).unwrap_or_default().chunks_exact(20))
        .map(|c| {
            let w = |r: std::ops::Range<usize>| {
                c[r].iter()
                    .rev()
                    .fold(0u64, |a, &b| (a << 8) | u64::from(b))
            };
            (w(0..8), w(8..16), w(16..20) as u32)
        })
        .filter(|p| p.1 > 0)
        .collect();
    list.sort_unstable();
    let mut crcs = String::with_capacity(8 * bytes.div_ceil(SUMS_BLOCK) as usize);
    let (mut at, mut crc) = (0u64, 0u32);
    for (a, n, c) in list {
        if a != at || a + n > bytes {
            return Err(bad(SumsDefect::Coverage { at: at.min(a) }));
        }
        crc = if a % SUMS_BLOCK == 0 {
            c
        } else {
            crc32c::crc32c_combine(crc, c, n as usize)
        };
        at = a + n;
        if at % SUMS_BLOCK == 0 || at == bytes {
            crcs.push_str(&format!("{crc:08x}"));
        }
    }
    if at != bytes {
        return Err(bad(SumsDefect::Coverage { at }));
    }
    Ok(Some(Sums {
        format: SUMS_FORMAT.into(),
        block: SUMS_BLOCK,
        offset,
        bytes,
        crc32c: crcs,
    }))
}

/// Commits the sidecar of the data file `path` ahead of the data (see the commit rule
/// above): replaces it with `sums` (durably), or removes an old one when `sums` is `None`.
///
/// # Errors
/// [`FileError::Io`] when it cannot be written or removed.
pub(crate) fn commit(path: &Path, sums: Option<&Sums>) -> Result<(), FileError> {
    let side = sidecar_path(path);
    match sums {
        Some(s) => {
            let text = serde_json::to_vec(s).map_err(|e| FileError::Format {
                path: side.clone(),
                defect: FormatDefect::Encode {
                    reason: e.to_string(),
                },
            })?;
            sys::replace(&side, &text)
        }
        None => remove(path).map(|_| ()),
    }
}

/// Writes the checksum sidecar of the whole plain file `path` as it is now (collective:
/// every rank of `comm` sums its share of the blocks, reading them from the file, and
/// rank 0 commits the sidecar). For files written by other means than Spools' own
/// writers, which sum what they write as they go: MPI-IO's `spools_checksums` hint.
/// `spools fsck` and verified reads then check the file against it.
///
/// ```
/// let world = spools::init()?;
/// let dir = std::env::temp_dir().join(format!("sums-{}", std::process::id()));
/// std::fs::create_dir_all(&dir)?;
/// let path = dir.join("data.bin");
/// std::fs::write(&path, vec![7u8; 3_000_000])?;
/// spools_io::file::write_sidecar(world.communicator(), &path)?;
/// let sums = spools_io::file::Sums::read(&path)?.expect("a sidecar");
/// assert_eq!((sums.bytes, sums.blocks()), (3_000_000, 3));
/// std::fs::remove_dir_all(&dir)?;
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
///
/// # Errors
/// [`FileError::Io`] when the file cannot be read or the sidecar written (a rank that
/// cannot read its blocks makes rank 0's sidecar fail to cover the file, with
/// [`SumsDefect::Disagree`]); messaging failures.
pub fn write_sidecar(comm: &Communicator, path: &Path) -> Result<(), FileError> {
    use std::os::unix::fs::FileExt;
    // Rank 0's length is the file's, for every rank.
    let len = if comm.rank() == 0 {
        std::fs::metadata(path).map(|m| m.len()).unwrap_or(0)
    } else {
        0
    };
    let len = comm.bcast_bytes(0, &len.to_le_bytes())?;
    let len = u64::from_le_bytes(len.as_slice().try_into().unwrap_or_default());
    let blocks = len.div_ceil(SUMS_BLOCK);
    let (p, r) = (u64::from(comm.size()), u64::from(comm.rank()));
    let mine = (r * blocks / p)..((r + 1) * blocks / p);
    let read = || -> Result<Pieces, FileError> {
        let f = File::open(path).map_err(|e| FileError::io("open for checksums", path, e))?;
        let mut pieces = Pieces::new(true);
        let mut buf = vec![0u8; SUMS_BLOCK as usize];
        for b in mine.clone() {
            let at = b * SUMS_BLOCK;
            let n = (len - at).min(SUMS_BLOCK) as usize;
            f.read_exact_at(&mut buf[..n], at)
                .map_err(|e| FileError::io("read for checksums", path, e))?;
            pieces.add(at, &buf[..n]);
        }
        Ok(pieces)
    };
    // A rank that cannot read still takes part in the gather (with checksums off, which
    // rank 0 reports as a disagreement), then reports its own error.
    let (pieces, failed) = match read() {
        Ok(p) => (p, None),
        Err(e) => (Pieces::new(false), Some(e)),
    };
    let all = gather(comm, &pieces)?;
    if let Some(e) = failed {
        return Err(e);
    }
    if comm.rank() == 0 {
        commit(path, sidecar(path, &all, 0, len)?.as_ref())?;
    }
    Ok(())
}

/// Removes the sidecar of the data file `path`, if there is one; says whether there was.
///
/// # Errors
/// [`FileError::Io`] when it cannot be removed.
pub(crate) fn remove(path: &Path) -> Result<bool, FileError> {
    let side = sidecar_path(path);
    match std::fs::remove_file(&side) {
        Ok(()) => Ok(true),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(false),
        Err(e) => Err(FileError::io("remove stale checksums", side, e)),
    }
}

/// Verification of what a rank read from a canonical file against its sidecar.
///
/// Parts come in stream order per caller (an aggregator's parts, round after round): a
/// block cut by the end of a part is checksummed on as the next part continues it (its
/// CRC carried across), so every byte is checked as it was delivered and read once. Only
/// a block whose pieces do not follow each other is read whole from the file again, at
/// [`Verify::finish`].
#[derive(Debug)]
pub(crate) struct Verify<'a> {
    on: bool,
    path: &'a Path,
    offset: u64,
    bytes: u64,
    /// The sidecar, loaded at the first part.
    sums: std::cell::OnceCell<Sums>,
    /// A block begun by an earlier part: (block, the stream offset that continues it,
    /// the CRC32C so far).
    open: std::cell::Cell<Option<(u64, u64, u32)>>,
    /// Blocks to read whole from the file at [`Verify::finish`].
    reread: std::cell::RefCell<Vec<u64>>,
}

impl<'a> Verify<'a> {
    /// Verification (when `on`) of reads of the `bytes`-byte stream at `offset` of `path`.
    pub(crate) fn new(on: bool, path: &'a Path, offset: u64, bytes: u64) -> Verify<'a> {
        Verify {
            on,
            path,
            offset,
            bytes,
            sums: std::cell::OnceCell::new(),
            open: std::cell::Cell::new(None),
            reread: std::cell::RefCell::new(Vec::new()),
        }
    }

    fn sums(&self) -> Result<&Sums, FileError> {
        if let Some(s) = self.sums.get() {
            return Ok(s);
        }
        let loaded = Sums::load(self.path, self.offset, self.bytes)?;
        Ok(self.sums.get_or_init(|| loaded))
    }

    /// Checks stream bytes read, as `(stream offset, bytes)` parts: blocks a part covers
    /// whole are checked from its bytes; a block cut by a part's end is carried on into
    /// the part that continues it (see the type's docs).
    ///
    /// # Errors
    /// [`FileError::Corrupt`] naming the first bad block's byte offset in the file (unit
    /// 0); errors of [`Sums::load`].
    pub(crate) fn check<'b>(
        &self,
        parts: impl IntoIterator<Item = (u64, &'b [u8])>,
    ) -> Result<(), FileError> {
        if !self.on {
            return Ok(());
        }
        for (at, b) in parts.into_iter().filter(|p| !p.1.is_empty()) {
            let s = self.sums()?;
            let end = at + b.len() as u64;
            for i in at / s.block..end.div_ceil(s.block) {
                let (x, y) = s.block_range(i);
                let (lo, hi) = (x.max(at), y.min(end));
                let piece = &b[(lo - at) as usize..(hi - at) as usize];
                let crc = if lo == x {
                    self.close_open();
                    spools_exchange::crc32c(piece)
                } else {
                    match self.open.take() {
                        Some((j, next, crc)) if j == i && next == lo => {
                            crc32c::crc32c_append(crc, piece)
                        }
                        other => {
                            // The block's start came in a part that was not this one's
                            // predecessor: read it whole at the end.
                            if let Some((j, _, _)) = other {
                                self.reread.borrow_mut().push(j);
                            }
                            self.reread.borrow_mut().push(i);
                            continue;
                        }
                    }
                };
                if hi == y {
                    if s.crc(i) != Some(crc) {
                        return Err(self.corrupt(s, i));
                    }
                } else {
                    self.open.set(Some((i, hi, crc)));
                }
            }
        }
        Ok(())
    }

    /// A block left open by a part that no later part continued goes to the re-read list.
    fn close_open(&self) {
        if let Some((j, _, _)) = self.open.take() {
            self.reread.borrow_mut().push(j);
        }
    }

    /// Ends the verification: blocks whose pieces did not follow each other are read whole
    /// from the file and checked.
    ///
    /// # Errors
    /// [`FileError::Corrupt`] naming a bad block; [`FileError::Io`] reading one.
    pub(crate) fn finish(&self) -> Result<(), FileError> {
        if !self.on {
            return Ok(());
        }
        self.close_open();
        let mut blocks = std::mem::take(&mut *self.reread.borrow_mut());
        if blocks.is_empty() {
            return Ok(());
        }
        blocks.sort_unstable();
        blocks.dedup();
        let s = self.sums()?;
        let f = sys::open_read(self.path)?;
        for i in blocks {
            if let Some(&(offset, _)) = s.bad_blocks(&f, self.path, (i, i + 1))?.first() {
                return Err(FileError::Corrupt {
                    unit: 0,
                    path: self.path.to_path_buf(),
                    offset,
                });
            }
        }
        Ok(())
    }

    fn corrupt(&self, s: &Sums, i: u64) -> FileError {
        FileError::Corrupt {
            unit: 0,
            path: self.path.to_path_buf(),
            offset: s.offset + s.block_range(i).0,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn gathered(on: bool, pieces: &[(u64, &[u8])]) -> Vec<u8> {
        let mut p = Pieces::new(on);
        for &(a, b) in pieces {
            p.add(a, b);
        }
        p.encode()
    }

    /// Pieces written by several ranks in any order and cut anywhere combine into the
    /// checksums of whole blocks; gaps, overlaps and disagreement are refused.
    #[test]
    fn pieces_combine_into_block_checksums() {
        let n = 2 * SUMS_BLOCK as usize + 12_345;
        let data: Vec<u8> = (0..n).map(|i| (i * 7 + i / 999) as u8).collect();
        let cut = [0, 17, 1 << 20, (1 << 20) + 5, 1_500_000, n];
        let mut ranks: Vec<Vec<u8>> = cut
            .windows(2)
            .map(|w| gathered(true, &[(w[0] as u64, &data[w[0]..w[1]])]))
            .collect();
        ranks.reverse();
        let p = Path::new("f");
        let s = sidecar(p, &ranks, 128, n as u64)
            .ok()
            .flatten()
            .unwrap_or_else(|| unreachable!());
        assert_eq!(s.blocks(), 3);
        for i in 0..3 {
            let (a, b) = s.block_range(i);
            assert_eq!(
                s.crc(i),
                Some(spools_exchange::crc32c(&data[a as usize..b as usize]))
            );
        }
        let text = serde_json::to_vec(&s).unwrap_or_default();
        assert_eq!(Sums::parse(p, &text).ok(), Some(s));
        // A gap, an overlap, a disagreement.
        let gap = vec![gathered(true, &[(0, &data[..10]), (11, &data[11..n])])];
        assert!(sidecar(p, &gap, 0, n as u64).is_err());
        let twice = vec![
            gathered(true, &[(0, &data[..])]),
            gathered(true, &[(5, &data[5..9])]),
        ];
        assert!(sidecar(p, &twice, 0, n as u64).is_err());
        let mixed = vec![gathered(true, &[(0, &data[..])]), gathered(false, &[])];
        assert!(matches!(
            sidecar(p, &mixed, 0, n as u64),
            Err(FileError::Format {
                defect: FormatDefect::Sums(SumsDefect::Disagree),
                ..
            })
        ));
        let off = vec![gathered(false, &[(0, &data[..])]), gathered(false, &[])];
        assert!(matches!(sidecar(p, &off, 0, n as u64), Ok(None)));
        // An empty stream has no blocks.
        let empty = sidecar(p, &[gathered(true, &[])], 0, 0).ok().flatten();
        assert_eq!(empty.map(|s| s.blocks()), Some(0));
    }

    /// Truncated or altered sidecars are refused with the defect, never a panic.
    #[test]
    fn bad_sidecars_are_refused() {
        let p = Path::new("f.spools-sums");
        let good = br#"{"format":"spools-sums","block":4,"offset":0,"bytes":9,"crc32c":"000000000000000000000000"}"#;
        assert!(Sums::parse(p, good).is_ok());
        for cut in 0..good.len() {
            assert!(Sums::parse(p, &good[..cut]).is_err(), "cut at {cut}");
        }
        let defect = |t: &str| match Sums::parse(p, t.as_bytes()) {
            Err(FileError::Format {
                defect: FormatDefect::Sums(d),
                ..
            }) => Some(d),
            _ => None,
        };
        let t = std::str::from_utf8(good).unwrap_or_default();
        assert!(matches!(
            defect(&t.replace("\"spools-sums\"", "\"x\"")),
            Some(SumsDefect::Format { .. })
        ));
        assert_eq!(
            defect(&t.replace("\"block\":4", "\"block\":0")),
            Some(SumsDefect::BlockSize)
        );
        assert!(matches!(
            defect(&t.replace("\"bytes\":9", "\"bytes\":13")),
            Some(SumsDefect::Checksums {
                blocks: 4,
                found: 24
            })
        ));
        assert!(matches!(
            defect(&t.replace("00000000\"", "0000000g\"")),
            Some(SumsDefect::Checksums { .. })
        ));
        assert!(matches!(
            defect(&t.replace("\"block\":4", "\"block\":1")),
            Some(SumsDefect::Checksums { .. })
        ));
        let huge = t.replace("\"bytes\":9", &format!("\"bytes\":{}", u64::MAX));
        assert!(defect(&huge).is_some());
    }
}
