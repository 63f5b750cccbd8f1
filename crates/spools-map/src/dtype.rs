//! Element types of array datasets.

use std::fmt;

/// The type of one element of an array dataset; only its size matters for data movement.
///
/// ```
/// use spools_map::DType;
/// assert_eq!(DType::F64.size(), 8);
/// assert_eq!(DType::Bytes(12).to_string(), "bytes(12)");
/// ```
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum DType {
    /// Unsigned 8-bit integer.
    U8,
    /// Signed 8-bit integer.
    I8,
    /// Unsigned 16-bit integer.
    U16,
    /// Signed 16-bit integer.
    I16,
    /// Unsigned 32-bit integer.
    U32,
    /// Signed 32-bit integer.
    I32,
    /// Unsigned 64-bit integer.
    U64,
    /// Signed 64-bit integer.
    I64,
    /// IEEE 754 binary32.
    F32,
    /// IEEE 754 binary64.
    F64,
    /// Complex number of two binary32 values.
    C64,
    /// Complex number of two binary64 values.
    C128,
    /// An opaque record of the given number of bytes (at least 1).
    Bytes(u64),
}

/// Names of the fixed-size types, as written in specs.
pub(crate) const NAMED: [(&str, DType); 12] = [
    ("u8", DType::U8),
    ("i8", DType::I8),
    ("u16", DType::U16),
    ("i16", DType::I16),
    ("u32", DType::U32),
    ("i32", DType::I32),
    ("u64", DType::U64),
    ("i64", DType::I64),
    ("f32", DType::F32),
    ("f64", DType::F64),
    ("c64", DType::C64),
    ("c128", DType::C128),
];

/// Long names of the fixed-size types, as numpy and Zarr spell them.
const LONG: [(&str, DType); 12] = [
    ("uint8", DType::U8),
    ("int8", DType::I8),
    ("uint16", DType::U16),
    ("int16", DType::I16),
    ("uint32", DType::U32),
    ("int32", DType::I32),
    ("uint64", DType::U64),
    ("int64", DType::I64),
    ("float32", DType::F32),
    ("float64", DType::F64),
    ("complex64", DType::C64),
    ("complex128", DType::C128),
];

impl DType {
    /// The name numpy and Zarr give a fixed-size type (`None` for [`DType::Bytes`], which
    /// each spells its own way: numpy `V12`, Zarr `r96`).
    ///
    /// ```
    /// use spools_map::DType;
    /// assert_eq!(DType::F32.long_name(), Some("float32"));
    /// assert_eq!(DType::from_long_name("complex128"), Some(DType::C128));
    /// assert_eq!(DType::Bytes(3).long_name(), None);
    /// ```
    pub fn long_name(self) -> Option<&'static str> {
        LONG.iter().find(|(_, t)| *t == self).map(|(n, _)| *n)
    }

    /// The fixed-size type numpy and Zarr call `name`, if any.
    pub fn from_long_name(name: &str) -> Option<DType> {
        LONG.iter().find(|(n, _)| *n == name).map(|(_, t)| *t)
    }

    /// Size of one element in bytes.
    pub fn size(self) -> u64 {
        match self {
            DType::U8 | DType::I8 => 1,
            DType::U16 | DType::I16 => 2,
            DType::U32 | DType::I32 | DType::F32 => 4,
            DType::U64 | DType::I64 | DType::F64 | DType::C64 => 8,
            DType::C128 => 16,
            DType::Bytes(n) => n,
        }
    }
}

impl fmt::Display for DType {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if let DType::Bytes(n) = self {
            return write!(f, "bytes({n})");
        }
        let name = NAMED
            .iter()
            .find(|(_, t)| t == self)
            .map_or("?", |(name, _)| name);
        f.write_str(name)
    }
}
