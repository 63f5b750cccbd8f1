//! The manifest of a striped parallel file: a small JSON document naming the unit files,
//! the layout, the dataset, the version and every block's CRC32C. It is replaced
//! atomically (written to a temporary name, synced, renamed) to commit a new version.

use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};
use spools_map::Layout;

use crate::error::{FileError, FormatDefect};
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
    /// Path of the unit file, relative to the manifest's directory: plain names only (no
    /// absolute path, no `..`), so that a manifest can only name files inside its own
    /// directory tree.
    pub path: String,
    /// Bytes in the file.
    pub bytes: u64,
    /// CRC32C of each block of `unit` bytes, as 8 hex digits each.
    pub crc32c: String,
    /// The host that stores the unit (node-local files; absent in older manifests).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub host: Option<String>,
}

impl Manifest {
    /// Parses and checks a manifest read from `path`.
    ///
    /// # Errors
    /// [`FileError::Format`] when it is not a consistent manifest.
    pub fn parse(path: &Path, text: &[u8]) -> Result<Manifest, FileError> {
        let bad = |defect: FormatDefect| FileError::Format {
            path: path.to_path_buf(),
            defect,
        };
        let m: Manifest = serde_json::from_slice(text).map_err(|e| {
            bad(FormatDefect::NotManifest {
                reason: e.to_string(),
            })
        })?;
        if m.format != MANIFEST_FORMAT {
            return Err(bad(FormatDefect::ManifestFormat {
                found: m.format,
                expected: MANIFEST_FORMAT,
            }));
        }
        let g = m.geometry(path)?;
        if m.units.len() as u64 != g.count {
            return Err(bad(FormatDefect::UnitCount {
                files: m.units.len(),
                units: g.count,
            }));
        }
        for (u, e) in m.units.iter().enumerate() {
            if e.bytes != g.unit_len(u as u64) {
                return Err(bad(FormatDefect::UnitSize {
                    unit: u,
                    expected: g.unit_len(u as u64),
                    found: e.bytes,
                }));
            }
            if e.crc32c.len() as u64 != 8 * g.unit_blocks(u as u64)
                || e.crc32c.bytes().any(|c| !c.is_ascii_hexdigit())
            {
                return Err(bad(FormatDefect::Checksums { unit: u }));
            }
        }
        for (u, e) in m.units.iter().enumerate() {
            let refuse = |why| FileError::UnsafePath {
                path: path.to_path_buf(),
                unit: u as u64,
                unit_path: e.path.clone(),
                why,
            };
            check_unit_path(&e.path).map_err(refuse)?;
            // Only files named like this version's unit files (NAME.uU.sS, as writers
            // name them) can be touched: not the manifest, not a neighbouring file.
            let suffix = format!(".u{u}.s{}", m.slot);
            let named = Path::new(&e.path)
                .file_name()
                .and_then(|n| n.to_str())
                .is_some_and(|n| n.len() > suffix.len() && n.ends_with(&suffix));
            if !named {
                return Err(refuse("a unit file's name must end with .uUNIT.sSLOT"));
            }
        }
        let dataset: Layout = m.dataset.parse().map_err(|e| {
            bad(FormatDefect::Dataset {
                spec: m.dataset.clone(),
                source: e,
            })
        })?;
        if dataset.total_bytes().is_some_and(|t| t != m.size) {
            return Err(bad(FormatDefect::DatasetSize {
                spec: m.dataset,
                size: m.size,
            }));
        }
        if m.slot != m.version % 2 {
            return Err(bad(FormatDefect::Slot {
                slot: m.slot,
                version: m.version,
            }));
        }
        Ok(m)
    }

    /// The row geometry of the file.
    ///
    /// # Errors
    /// [`FileError::Format`] when the layout is not a striped byte-stream layout.
    pub(crate) fn geometry(&self, path: &Path) -> Result<Geometry, FileError> {
        let bad = |defect: FormatDefect| FileError::Format {
            path: path.to_path_buf(),
            defect,
        };
        let l: Layout = self.layout.parse().map_err(|e| {
            bad(FormatDefect::Layout {
                spec: self.layout.clone(),
                source: e,
            })
        })?;
        let l = l.with_size(self.size).map_err(|e| {
            bad(FormatDefect::LayoutSize {
                size: self.size,
                source: e,
            })
        })?;
        Geometry::new(&l).ok_or_else(|| {
            bad(FormatDefect::NotStriped {
                spec: self.layout.clone(),
            })
        })
    }

    /// Replaces the manifest at `path` with this one, atomically and durably (the commit
    /// of a striped file's new version).
    ///
    /// # Errors
    /// [`FileError::Format`] when it cannot be encoded; the file system's errors.
    pub(crate) fn save(&self, path: &Path) -> Result<(), FileError> {
        let text = serde_json::to_vec_pretty(self).map_err(|e| FileError::Format {
            path: path.to_path_buf(),
            defect: crate::error::FormatDefect::Encode {
                reason: e.to_string(),
            },
        })?;
        super::sys::replace(path, &text)
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
        let dir = manifest.parent().unwrap_or_else(|| Path::new("."));
        self.units.iter().map(|e| dir.join(&e.path)).collect()
    }
}

/// The unit entries of a manifest: unit `u` at `names[u]`, as long as `geo` makes it,
/// with the block checksums `crcs[u]` and the host `host(u)` holds it on.
pub(crate) fn unit_entries(
    names: &[String],
    crcs: &[Vec<u32>],
    geo: &super::rows::Geometry,
    host: impl Fn(u64) -> Option<String>,
) -> Vec<UnitEntry> {
    names
        .iter()
        .zip(crcs)
        .enumerate()
        .map(|(u, (n, c))| UnitEntry {
            path: n.clone(),
            bytes: geo.unit_len(u as u64),
            crc32c: hex(c),
            host: host(u as u64),
        })
        .collect()
}

/// Whether `p` is a plain relative path (only normal components: no root, no `..`, no
/// `.`), i.e. one that stays inside the directory it is resolved against. Otherwise why
/// not.
pub(crate) fn check_unit_path(p: &str) -> Result<(), &'static str> {
    use std::path::Component;
    if p.is_empty() {
        return Err("it is empty");
    }
    if p.contains('\0') {
        return Err("it contains a NUL byte");
    }
    for c in Path::new(p).components() {
        match c {
            Component::Normal(_) => {}
            Component::RootDir | Component::Prefix(_) => {
                return Err("an absolute path may lead out of the file set")
            }
            Component::ParentDir => return Err("`..` may lead out of the file set"),
            Component::CurDir => return Err("only plain relative paths are allowed"),
        }
    }
    Ok(())
}

/// Hex form of a checksum list.
pub(crate) fn hex(crcs: &[u32]) -> String {
    crcs.iter().map(|c| format!("{c:08x}")).collect()
}

/// Whether the first bytes of a file look like a manifest.
pub(crate) fn looks_like_manifest(head: &[u8]) -> bool {
    head.iter().find(|b| !b.is_ascii_whitespace()) == Some(&b'{')
}

#[cfg(test)]
mod tests {
    use super::*;

    fn manifest(paths: [&str; 3], dataset: &str) -> Vec<u8> {
        format!(
            r#"{{"format":"spools-parallel-file","version":1,"slot":1,"size":10,"layout":"raid5(unit=4B,count=3)","dataset":"{dataset}","node_local":false,"units":[{{"path":"{}","bytes":4,"crc32c":"00000000"}},{{"path":"{}","bytes":6,"crc32c":"0000000000000000"}},{{"path":"{}","bytes":6,"crc32c":"0000000000000000"}}]}}"#,
            paths[0], paths[1], paths[2]
        )
        .into_bytes()
    }

    #[test]
    fn unit_paths_must_stay_inside_the_set() {
        let p = Path::new("m");
        let ok3 = ["m.u0.s1", "d/m.u1.s1", "m.u2.s1"];
        let good = Manifest::parse(p, &manifest(ok3, "u8[10] block on 1"));
        assert!(good.is_ok(), "{good:?}");
        for bad in [
            "/etc/m.u1.s1",
            "../m.u1.s1",
            "d/../../m.u1.s1",
            "./m.u1.s1",
            "",
            "d/../b/..",
            "m",
            "m.u1.s0",
            "m.u2.s1",
            ".u1.s1",
        ] {
            let r = Manifest::parse(p, &manifest([ok3[0], bad, ok3[2]], "u8[10] block on 1"));
            assert!(
                matches!(r, Err(FileError::UnsafePath { unit: 1, .. })),
                "{bad:?}: {r:?}"
            );
        }
        let other = Manifest::parse(p, &manifest(ok3, "u8[11] block on 1"));
        assert!(matches!(other, Err(FileError::Format { .. })), "{other:?}");
    }
}
