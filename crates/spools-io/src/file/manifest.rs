//! The manifest of a striped parallel file: a small JSON document naming the unit files,
//! the layout, the dataset, the version and every block's CRC32C. It is replaced
//! atomically (written to a temporary name, synced, renamed) to commit a new version.

use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};
use spools_map::Layout;

use crate::error::FileError;
use crate::file::rows::Geometry;

/// The `format` field of every manifest.
pub const MANIFEST_FORMAT: &str = "spools-parallel-file";

/// The manifest of a striped file, as stored.
#[derive(Clone, Debug, Serialize, Deserialize, PartialEq, Eq)]
pub struct Manifest {
    /// Always [`MANIFEST_FORMAT`].
    pub format: String,
    /// Version of the contents; each committed write adds one.
    pub version: u64,
    /// Which of the two unit-file slots holds this version (`version % 2`).
    pub slot: u64,
    /// Bytes in the logical stream.
    pub size: u64,
    /// The byte-stream layout, e.g. `raid5(unit=64KiB,count=5)`.
    pub layout: String,
    /// The layout the dataset was written from (for information).
    pub dataset: String,
    /// Whether each unit is reached only through its owner rank (node-local storage).
    pub node_local: bool,
    /// The unit files, in unit order.
    pub units: Vec<UnitEntry>,
}

/// One unit file.
#[derive(Clone, Debug, Serialize, Deserialize, PartialEq, Eq)]
pub struct UnitEntry {
    /// Path of the unit file (relative paths are relative to the manifest's directory).
    pub path: String,
    /// Bytes in the file.
    pub bytes: u64,
    /// CRC32C of each block of `unit` bytes, as 8 hex digits each.
    pub crc32c: String,
}

impl Manifest {
    /// Parses and checks a manifest read from `path`.
    ///
    /// # Errors
    /// [`FileError::Format`] when it is not a consistent manifest.
    pub fn parse(path: &Path, text: &[u8]) -> Result<Manifest, FileError> {
        let bad = |what: String| FileError::Format {
            path: path.to_path_buf(),
            what,
        };
        let m: Manifest =
            serde_json::from_slice(text).map_err(|e| bad(format!("not a manifest: {e}")))?;
        if m.format != MANIFEST_FORMAT {
            return Err(bad(format!(
                "format is {:?}, not {MANIFEST_FORMAT:?}",
                m.format
            )));
        }
        let g = m.geometry(path)?;
        if m.units.len() as u64 != g.count {
            return Err(bad(format!(
                "{} unit files for {} units",
                m.units.len(),
                g.count
            )));
        }
        for (u, e) in m.units.iter().enumerate() {
            if e.bytes != g.unit_len(u as u64) {
                return Err(bad(format!(
                    "unit {u} should hold {} bytes, says {}",
                    g.unit_len(u as u64),
                    e.bytes
                )));
            }
            if e.crc32c.len() as u64 != 8 * g.unit_blocks(u as u64)
                || e.crc32c.bytes().any(|c| !c.is_ascii_hexdigit())
            {
                return Err(bad(format!(
                    "unit {u}: checksum list does not have one per block"
                )));
            }
        }
        if m.slot != m.version % 2 {
            return Err(bad(format!(
                "slot {} does not match version {}",
                m.slot, m.version
            )));
        }
        Ok(m)
    }

    /// The row geometry of the file.
    ///
    /// # Errors
    /// [`FileError::Format`] when the layout is not a striped byte-stream layout.
    pub(crate) fn geometry(&self, path: &Path) -> Result<Geometry, FileError> {
        let bad = |what: String| FileError::Format {
            path: path.to_path_buf(),
            what,
        };
        let l: Layout = self
            .layout
            .parse()
            .map_err(|e| bad(format!("layout: {e}")))?;
        let l = l
            .with_size(self.size)
            .map_err(|e| bad(format!("layout: {e}")))?;
        Geometry::new(&l)
            .ok_or_else(|| bad(format!("{} is not a stripe or raid5 layout", self.layout)))
    }

    /// Block checksums per unit.
    pub(crate) fn crcs(&self) -> Vec<Vec<u32>> {
        self.units
            .iter()
            .map(|e| {
                e.crc32c
                    .as_bytes()
                    .chunks(8)
                    .map(|h| {
                        std::str::from_utf8(h)
                            .ok()
                            .and_then(|s| u32::from_str_radix(s, 16).ok())
                            .unwrap_or(0)
                    })
                    .collect()
            })
            .collect()
    }

    /// Unit file paths, resolved against the manifest's directory.
    pub fn unit_paths(&self, manifest: &Path) -> Vec<PathBuf> {
        let dir = manifest.parent().unwrap_or(Path::new("."));
        self.units.iter().map(|e| dir.join(&e.path)).collect()
    }
}

/// Hex form of a checksum list.
pub(crate) fn hex(crcs: &[u32]) -> String {
    crcs.iter().map(|c| format!("{c:08x}")).collect()
}

/// Whether the first bytes of a file look like a manifest.
pub(crate) fn looks_like_manifest(head: &[u8]) -> bool {
    head.iter().find(|b| !b.is_ascii_whitespace()) == Some(&b'{')
}
