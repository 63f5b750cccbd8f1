//! The seam of one-file formats: a dataset's canonical byte stream at an offset of one
//! ordinary file, behind whatever the format keeps around it. The engine (the collective
//! opening, the rounds through an I/O distribution or each rank's own runs, the temporary
//! file renamed over the path, checksum sidecars) is the same for every such format; a
//! format only says what the file holds around the stream, through [`OneFileFormat`]'s
//! three steps:
//!
//! - [`inspect`](OneFileFormat::inspect) (reading, rank 0): is this file mine, and where
//!   does its stream lie?
//! - [`prepare`](OneFileFormat::prepare) (writing, rank 0, before any rank writes): what
//!   goes before the stream, or the new file made by the format itself;
//! - [`commit`](OneFileFormat::commit) (writing, rank 0, after every rank wrote its part,
//!   before the file is renamed into place): what goes after it.
//!
//! Canonical files, `.npy` and HDF5 are the built-in ones; a program adds its own with
//! [`Format::OneFile`](super::Format::OneFile) to write and
//! [`read_with_formats`](super::read_with_formats) to read (see
//! `crates/spools-io/tests/toy_format.rs`: a format in one file, no edit of the engine).

use std::path::Path;
use std::sync::Arc;

use spools_map::Layout;

use crate::error::FileError;

/// Where a one-file format's stream lies in its file.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct StreamAt {
    /// Offset of the stream's first byte.
    pub offset: u64,
    /// Bytes of the stream.
    pub bytes: u64,
}

/// What a format's [`prepare`](OneFileFormat::prepare) step gives the engine.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Prepared {
    /// The bytes before the stream: the engine makes the file (a new temporary one, or the
    /// path itself when writing in place), writes them at its start and the stream after
    /// them.
    Header(Vec<u8>),
    /// The format made the temporary file itself (through a library of its own); the
    /// stream goes at `offset` of it.
    Made {
        /// Offset of the stream's first byte in the file made.
        offset: u64,
    },
}

/// A format of one ordinary file holding the canonical byte stream (see the module).
///
/// ```
/// use std::path::Path;
/// use spools_io::file::{OneFileFormat, Prepared, StreamAt};
/// use spools_io::FileError;
/// use spools_map::Layout;
///
/// /// Four bytes "TINY", then the stream.
/// #[derive(Debug)]
/// struct Tiny;
///
/// impl OneFileFormat for Tiny {
///     fn name(&self) -> &str {
///         "tiny"
///     }
///     fn inspect(&self, _: &Path, head: &[u8], len: u64, _: Option<&Layout>)
///         -> Result<Option<StreamAt>, FileError> {
///         Ok(head.starts_with(b"TINY").then(|| StreamAt { offset: 4, bytes: len - 4 }))
///     }
///     fn prepare(&self, _: &Path, _: &Layout, _: bool) -> Result<Prepared, FileError> {
///         Ok(Prepared::Header(b"TINY".to_vec()))
///     }
/// }
/// let t = Tiny;
/// assert_eq!(t.inspect(Path::new("x"), b"TINY....", 8, None).unwrap(),
///            Some(StreamAt { offset: 4, bytes: 4 }));
/// ```
pub trait OneFileFormat: Send + Sync + std::fmt::Debug {
    /// The format's name, for messages.
    fn name(&self) -> &str;

    /// Reading, on rank 0: whether the file at `path`, `len` bytes long, whose first bytes
    /// are `head` (at most 64 KiB), is of this format, and if so where its stream lies.
    /// `layout` is the reader's, when there is one: a format that records its dataset
    /// checks it here ([`FileError::DatasetMismatch`]).
    ///
    /// # Errors
    /// A file of this format that is damaged or does not fit `layout`.
    fn inspect(
        &self,
        path: &Path,
        head: &[u8],
        len: u64,
        layout: Option<&Layout>,
    ) -> Result<Option<StreamAt>, FileError>;

    /// Writing, on rank 0, before any rank writes: the bytes before the stream, or the
    /// new file `tmp` made by the format. `in_place`: the write goes to the file at the
    /// path itself ([`Commit::InPlace`](super::Commit::InPlace)), where only
    /// [`Prepared::Header`] applies.
    ///
    /// # Errors
    /// A layout the format cannot store, or the file not made.
    fn prepare(&self, tmp: &Path, layout: &Layout, in_place: bool) -> Result<Prepared, FileError>;

    /// Writing, on rank 0, once every rank wrote its part of the stream (`at` in
    /// `file`): what goes after the stream (a trailer, an index). `file` is the temporary
    /// file, renamed over the path after this step, or, written in place, the path's file
    /// itself (whose stream is already the new one). Returns whether it wrote anything
    /// (the engine then syncs the file when the write asked for durability). Nothing by
    /// default.
    ///
    /// # Errors
    /// What the format writes failing; every rank's write then fails, and (unless written
    /// in place) the path keeps the version before.
    fn commit(&self, file: &Path, layout: &Layout, at: StreamAt) -> Result<bool, FileError> {
        let _ = (file, layout, at);
        Ok(false)
    }
}

/// A program's own one-file format in a [`Format`](super::Format): two are equal when
/// they are the same object.
#[derive(Clone, Debug)]
pub struct OneFile(pub Arc<dyn OneFileFormat>);

impl PartialEq for OneFile {
    fn eq(&self, other: &OneFile) -> bool {
        Arc::ptr_eq(&self.0, &other.0)
    }
}

impl Eq for OneFile {}
