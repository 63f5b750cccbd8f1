//! What a set's path held at open, and how the next version is filled from it: each
//! rank its share of the stream (a set's rows verified, or a plain file's bytes).

use std::path::Path;

use spools_map::Layout;
use spools_msg::Communicator;

use super::current::Current;
use super::io::{read_full, BATCH};
use super::map::Map;
use super::next::{Base, Next};
use crate::error::{FileError, FormatDefect};
use crate::file::manifest::Manifest;
use crate::file::striped::split_rows;
use crate::file::sys;
use crate::file::tools::{self, Opened};

/// What a set's path held when it was opened (rank 0's look, the same on every rank).
pub(super) enum Source {
    /// Nothing.
    Nothing,
    /// A plain file: its bytes are the stream.
    Plain,
    /// A striped set's current version.
    Set(Box<Manifest>),
}

impl Source {
    /// What `path` holds, encoded for the group.
    pub(super) fn look(path: &Path) -> Result<Vec<u8>, FileError> {
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

    pub(super) fn decode(path: &Path, bytes: &[u8]) -> Result<Source, FileError> {
        match bytes.split_first() {
            Some((1, _)) => Ok(Source::Plain),
            Some((2, text)) => Ok(Source::Set(Box::new(Manifest::parse(path, text)?))),
            _ => Ok(Source::Nothing),
        }
    }
}

/// Fills the next version from `source`: this rank's share of the stream (a set's rows,
/// verified, or a plain file's bytes), in batches. Gives the [`Base`] of a set of the
/// same layout.
pub(super) fn fill(
    comm: &Communicator,
    path: &Path,
    map: &Map,
    next: &Next,
    source: &Source,
) -> Result<Option<Base>, FileError> {
    let (me, ranks) = (u64::from(comm.rank()), u64::from(comm.size()));
    match source {
        Source::Nothing => Ok(None),
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
            Ok(None)
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
            // The same layout: rows copied whole (parity too) keep their parity and
            // checksums at the commit unless changed.
            let same = m.layout.parse::<Layout>().ok().and_then(|l| Map::of(&l)) == Some(*map);
            let base = same.then(|| Base {
                size: m.size,
                crcs: current.crcs.clone(),
            });
            let (per, aggs) = split_rows(geo, comm.size());
            if me >= u64::from(aggs) {
                return Ok(base);
            }
            let (mut r, end) = ((me * per).min(geo.rows()), ((me + 1) * per).min(geo.rows()));
            let step = (BATCH / geo.row_bytes().max(1)).max(1);
            let mut rebuilt = 0;
            let mut out = Vec::new();
            while r < end {
                let r1 = (r + step).min(end);
                let (a, b) = geo.stream_range(r, r1);
                out.resize((b - a) as usize, 0);
                let chunks = current.chunks(r, r1);
                let fixed = geo
                    .assemble(
                        (r, r1),
                        &chunks,
                        &current.crcs,
                        &current.paths,
                        &mut out,
                        false,
                    )?
                    .len();
                if same && fixed == 0 {
                    for (u, c) in chunks.iter().enumerate() {
                        let c = c.as_deref().unwrap_or_default();
                        let at = geo.chunk_range(u as u64, r, r1).0;
                        sys::write_at(&next.files[u], &next.paths[u], c, at)?;
                    }
                } else {
                    // Rebuilt blocks (or another layout): the verified bytes, rows
                    // changed.
                    next.write_at(map, &out, a)?;
                }
                rebuilt += fixed;
                r = r1;
            }
            if rebuilt > 0 {
                spools_boot::logger::warn(format_args!(
                    "spools: {}: rebuilt {rebuilt} damaged block(s) from parity (run `spools fsck`/`spools repair`)",
                    path.display()
                ));
            }
            Ok(base)
        }
    }
}
