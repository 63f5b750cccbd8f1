//! HDF5 files as parallel files: rank 0 creates the file and a contiguous dataset through
//! the HDF5 C library (Debian's libhdf5, through the `hdf5-metno` crate), allocated at
//! once and never filled, and learns the dataset's offset in the file; every rank then
//! writes its part of the canonical byte stream straight into the file at that offset,
//! as for a canonical file (no MPI, no parallel HDF5). A read finds a contiguous
//! dataset's offset the same way and reads it as a canonical file. The library is only
//! called by rank 0 (or a tool), never on the data path.
//!
//! Built with the `hdf5` cargo feature; without it, HDF5 files are refused with
//! [`Hdf5Error::NotBuilt`].

use std::path::{Path, PathBuf};

use spools_map::{DType, Layout};

use crate::error::{FileError, FormatDefect, Hdf5Error};

/// The signature an HDF5 file starts with (at offset 0, or after a user block).
pub(crate) const MAGIC: &[u8] = b"\x89HDF\r\n\x1a\n";

/// The dataset Spools writes when none is named.
pub(crate) const DEFAULT_DATASET: &str = "data";

/// What a contiguous dataset of an HDF5 file holds, and where.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Hdf5Dataset {
    /// The dataset's path in the file, e.g. `/data`.
    pub name: String,
    /// The element type.
    pub dtype: DType,
    /// The shape.
    pub shape: Vec<u64>,
    /// Byte offset of the data in the file.
    pub offset: u64,
    /// Bytes of data.
    pub bytes: u64,
    /// The layout Spools wrote it from (its `spools_layout` attribute), if any.
    pub written_from: Option<String>,
}

/// Whether `head` (a file's first bytes) is an HDF5 file.
pub(crate) fn is_hdf5(head: &[u8]) -> bool {
    head.starts_with(MAGIC)
}

/// Splits `FILE:/NAME` into the file and the dataset when `path` itself does not exist.
pub(crate) fn split(path: &Path) -> (PathBuf, Option<String>) {
    if path.exists() {
        return (path.to_path_buf(), None);
    }
    let s = path.to_string_lossy();
    match s.rfind(":/") {
        Some(at) if at > 0 => (PathBuf::from(&s[..at]), Some(s[at + 1..].to_string())),
        _ => (path.to_path_buf(), None),
    }
}

/// Parses the arguments of `hdf5(NAME)` or `hdf5(dataset=NAME)`.
///
/// # Errors
/// [`Hdf5Error::Spec`].
pub(crate) fn parse_spec(args: &str) -> Result<String, Hdf5Error> {
    let name = args.trim();
    let name = name.strip_prefix("dataset=").unwrap_or(name).trim();
    if name.is_empty() || name.contains(['(', ')', ',']) {
        return Err(Hdf5Error::Spec(args.to_string()));
    }
    Ok(name.to_string())
}

fn defect(path: &Path, e: Hdf5Error) -> FileError {
    FileError::Format {
        path: path.to_path_buf(),
        defect: FormatDefect::Hdf5(e),
    }
}

/// Checks that the dataset holds the dataset `layout` describes (element type and shape;
/// the order does not matter for a one-dimensional array).
///
/// # Errors
/// [`FileError::DatasetMismatch`].
pub(crate) fn check(path: &Path, d: &Hdf5Dataset, layout: &Layout) -> Result<(), FileError> {
    match layout {
        Layout::Array(a) => {
            let ordered = a.shape().iter().filter(|&&n| n > 1).count() > 1;
            let f = a.order() == spools_map::Order::F && ordered;
            if a.dtype() != d.dtype || a.shape() != d.shape.as_slice() || f {
                return Err(FileError::DatasetMismatch {
                    path: path.to_path_buf(),
                    file: format!("dataset {} {}{:?} in C order", d.name, d.dtype, d.shape),
                    layout: format!(
                        "{}{:?}{}",
                        a.dtype(),
                        a.shape(),
                        if f { " in Fortran order" } else { "" }
                    ),
                });
            }
            Ok(())
        }
        _ => Ok(()),
    }
}

#[cfg(feature = "hdf5")]
mod lib {
    use super::*;
    use hdf5::types::{CompoundField, CompoundType, FloatSize, IntSize, TypeDescriptor as TD};

    fn library(op: &'static str) -> impl Fn(hdf5::Error) -> Hdf5Error {
        move |e| Hdf5Error::Library {
            op,
            message: e.to_string(),
        }
    }

    fn descriptor(d: DType) -> Result<TD, Hdf5Error> {
        let complex = |f: FloatSize, part: usize| {
            TD::Compound(CompoundType {
                fields: vec![
                    CompoundField {
                        name: "r".into(),
                        ty: TD::Float(f),
                        offset: 0,
                        index: 0,
                    },
                    CompoundField {
                        name: "i".into(),
                        ty: TD::Float(f),
                        offset: part,
                        index: 1,
                    },
                ],
                size: 2 * part,
            })
        };
        Ok(match d {
            DType::U8 => TD::Unsigned(IntSize::U1),
            DType::I8 => TD::Integer(IntSize::U1),
            DType::U16 => TD::Unsigned(IntSize::U2),
            DType::I16 => TD::Integer(IntSize::U2),
            DType::U32 => TD::Unsigned(IntSize::U4),
            DType::I32 => TD::Integer(IntSize::U4),
            DType::U64 => TD::Unsigned(IntSize::U8),
            DType::I64 => TD::Integer(IntSize::U8),
            DType::F32 => TD::Float(FloatSize::U4),
            DType::F64 => TD::Float(FloatSize::U8),
            DType::C64 => complex(FloatSize::U4, 4),
            DType::C128 => complex(FloatSize::U8, 8),
            DType::Bytes(_) => return Err(Hdf5Error::Unwritable(d.to_string())),
        })
    }

    fn dtype_of(t: &TD) -> Option<DType> {
        Some(match t {
            TD::Unsigned(IntSize::U1) | TD::Boolean => DType::U8,
            TD::Integer(IntSize::U1) => DType::I8,
            TD::Unsigned(IntSize::U2) => DType::U16,
            TD::Integer(IntSize::U2) => DType::I16,
            TD::Unsigned(IntSize::U4) => DType::U32,
            TD::Integer(IntSize::U4) => DType::I32,
            TD::Unsigned(IntSize::U8) => DType::U64,
            TD::Integer(IntSize::U8) => DType::I64,
            TD::Float(FloatSize::U4) => DType::F32,
            TD::Float(FloatSize::U8) => DType::F64,
            TD::Compound(c) => match c.fields.as_slice() {
                [re, im]
                    if re.offset == 0
                        && re.ty == im.ty
                        && matches!(
                            (re.name.as_str(), im.name.as_str()),
                            ("r", "i") | ("real", "imag")
                        ) =>
                {
                    match (&re.ty, im.offset, c.size) {
                        (TD::Float(FloatSize::U4), 4, 8) => DType::C64,
                        (TD::Float(FloatSize::U8), 8, 16) => DType::C128,
                        _ => return None,
                    }
                }
                _ => return None,
            },
            _ => return None,
        })
    }

    /// Creates `tmp` as an HDF5 file holding the contiguous dataset `name` of `layout`'s
    /// element type and shape (allocated at once, never filled), with the attributes
    /// `spools_layout` and `spools_version`. Returns the data's offset in the file.
    pub(crate) fn create(tmp: &Path, name: &str, layout: &Layout) -> Result<u64, FileError> {
        let Layout::Array(a) = layout else {
            return Err(FileError::Options(
                "an HDF5 dataset is written from an array layout (dtype[shape] ...), not a byte stream",
            ));
        };
        if a.order() == spools_map::Order::F && a.shape().iter().filter(|&&n| n > 1).count() > 1 {
            return Err(FileError::Options(
                "an HDF5 dataset is stored in C order: write it from a layout in C order (order=F would store it transposed)",
            ));
        }
        let made = (|| -> Result<u64, Hdf5Error> {
            let td = descriptor(a.dtype())?;
            let f = hdf5::File::create_excl(tmp).map_err(library("create file"))?;
            let shape: Vec<usize> = a.shape().iter().map(|&n| n as usize).collect();
            let ds = f
                .new_dataset_builder()
                .no_chunk()
                .alloc_time(Some(hdf5::plist::dataset_create::AllocTime::Early))
                .fill_time(hdf5::plist::dataset_create::FillTime::Never)
                .empty_as(&td)
                .shape(shape)
                .create(name)
                .map_err(library("create dataset"))?;
            for (key, value) in [
                ("spools_layout", layout.to_string()),
                ("spools_version", env!("CARGO_PKG_VERSION").to_string()),
            ] {
                let v: hdf5::types::VarLenUnicode =
                    value.parse().map_err(|_| Hdf5Error::Library {
                        op: "make attribute",
                        message: format!("{key} is not valid text"),
                    })?;
                ds.new_attr::<hdf5::types::VarLenUnicode>()
                    .create(key)
                    .and_then(|at| at.write_scalar(&v))
                    .map_err(library("write attribute"))?;
            }
            let offset = ds.offset().ok_or(Hdf5Error::Unallocated(ds.name()))?;
            drop(ds);
            f.close().map_err(library("close file"))?;
            Ok(offset)
        })();
        made.map_err(|e| defect(tmp, e))
    }

    /// Finds the contiguous dataset `name` (or the file's only dataset) of the HDF5
    /// file `path`: its element type, shape and offset.
    pub(crate) fn inspect(path: &Path, name: Option<&str>) -> Result<Hdf5Dataset, FileError> {
        let found = (|| -> Result<Hdf5Dataset, Hdf5Error> {
            let f = hdf5::File::open(path).map_err(library("open file"))?;
            let ds = match name {
                Some(n) => f.dataset(n).map_err(library("open dataset"))?,
                None => {
                    let mut all = f.datasets().map_err(library("list datasets"))?;
                    if all.len() != 1 {
                        return Err(Hdf5Error::WhichDataset(
                            all.iter().map(|d| d.name()).collect(),
                        ));
                    }
                    all.remove(0)
                }
            };
            let dname = ds.name();
            use hdf5::plist::dataset_create::Layout as L;
            let layout = match ds.layout() {
                L::Contiguous => None,
                L::Compact => Some("compact"),
                L::Chunked => Some("in chunks"),
                #[allow(unreachable_patterns)]
                _ => Some("as a virtual dataset"),
            };
            if let Some(layout) = layout {
                return Err(Hdf5Error::NotContiguous {
                    dataset: dname,
                    layout,
                    filters: ds.filters().iter().map(|x| format!("{x:?}")).collect(),
                });
            }
            let t = ds.dtype().map_err(library("read element type"))?;
            let desc = t.to_descriptor().map_err(library("read element type"));
            let big = matches!(t.byte_order(), hdf5::datatype::ByteOrder::BigEndian);
            let dtype = match desc {
                Ok(d) if !big => dtype_of(&d),
                _ => None,
            }
            .ok_or_else(|| Hdf5Error::DataType {
                dataset: dname.clone(),
                found: match (t.to_descriptor(), big) {
                    (Ok(d), true) => format!("{d} (big-endian)"),
                    (Ok(d), false) => d.to_string(),
                    (Err(e), _) => e.to_string(),
                },
            })?;
            let shape: Vec<u64> = ds.shape().iter().map(|&n| n as u64).collect();
            let bytes = shape.iter().product::<u64>() * dtype.size();
            let offset = match ds.offset() {
                Some(o) => o,
                None if bytes == 0 => 0,
                None => return Err(Hdf5Error::Unallocated(dname)),
            };
            let written_from = ds
                .attr("spools_layout")
                .and_then(|a| a.read_scalar::<hdf5::types::VarLenUnicode>())
                .ok()
                .map(|s| s.as_str().to_string());
            Ok(Hdf5Dataset {
                name: dname,
                dtype,
                shape,
                offset,
                bytes,
                written_from,
            })
        })();
        found.map_err(|e| defect(path, e))
    }
}

#[cfg(not(feature = "hdf5"))]
mod lib {
    use super::*;

    pub(crate) fn create(tmp: &Path, _name: &str, _layout: &Layout) -> Result<u64, FileError> {
        Err(defect(tmp, Hdf5Error::NotBuilt))
    }

    pub(crate) fn inspect(path: &Path, _name: Option<&str>) -> Result<Hdf5Dataset, FileError> {
        Err(defect(path, Hdf5Error::NotBuilt))
    }
}

pub(crate) use lib::{create, inspect};
