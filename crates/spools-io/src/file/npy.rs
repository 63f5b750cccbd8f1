//! The `.npy` header (NumPy format version 1.0), so that `numpy.load` reads a canonical
//! parallel file.

use spools_map::{DType, Layout, Order};

use crate::error::{FileError, FormatDefect, NpyError};
use crate::file::one_file::{OneFileFormat, Prepared, StreamAt};

/// The magic bytes every `.npy` file starts with.
pub(crate) const MAGIC: &[u8] = b"\x93NUMPY";

/// The dtype string, shape and order NumPy needs for this layout's dataset (a byte-stream
/// layout is a 1-D array of bytes).
fn describe(layout: &Layout, total: u64) -> (String, Vec<u64>, bool) {
    match layout {
        Layout::Array(a) => {
            let d = match a.dtype() {
                DType::U8 => "|u1".to_string(),
                DType::I8 => "|i1".to_string(),
                DType::U16 => "<u2".to_string(),
                DType::I16 => "<i2".to_string(),
                DType::U32 => "<u4".to_string(),
                DType::I32 => "<i4".to_string(),
                DType::U64 => "<u8".to_string(),
                DType::I64 => "<i8".to_string(),
                DType::F32 => "<f4".to_string(),
                DType::F64 => "<f8".to_string(),
                DType::C64 => "<c8".to_string(),
                DType::C128 => "<c16".to_string(),
                DType::Bytes(n) => format!("|V{n}"),
            };
            (d, a.shape().to_vec(), a.order() == Order::F)
        }
        _ => ("|u1".to_string(), vec![total], false),
    }
}

/// The complete header (magic, version, length, dictionary, padding to 64 bytes).
pub(crate) fn header(layout: &Layout, total: u64) -> Vec<u8> {
    let (descr, shape, fortran) = describe(layout, total);
    let shape = match shape.as_slice() {
        [n] => format!("({n},)"),
        s => format!(
            "({})",
            s.iter().map(u64::to_string).collect::<Vec<_>>().join(", ")
        ),
    };
    let dict = format!(
        "{{'descr': '{descr}', 'fortran_order': {}, 'shape': {shape}, }}",
        if fortran { "True" } else { "False" }
    );
    let unpadded = MAGIC.len() + 2 + 2 + dict.len() + 1;
    let pad = unpadded.div_ceil(64) * 64 - unpadded;
    let hlen = dict.len() + pad + 1;
    let mut h = Vec::with_capacity(unpadded + pad);
    h.extend_from_slice(MAGIC);
    h.extend_from_slice(&[1, 0]);
    h.extend_from_slice(&(hlen as u16).to_le_bytes());
    h.extend_from_slice(dict.as_bytes());
    h.extend(std::iter::repeat_n(b' ', pad));
    h.push(b'\n');
    h
}

/// What a `.npy` header records about its dataset.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct Header {
    /// Byte offset of the data.
    pub(crate) offset: u64,
    /// Bytes of data.
    pub(crate) bytes: u64,
    /// The dtype string, e.g. `<f8`.
    pub(crate) descr: String,
    /// The shape.
    pub(crate) shape: Vec<u64>,
    /// Whether the data is in Fortran (column-major) order.
    pub(crate) fortran: bool,
}

/// The element type and shape `layout` gives a reader, as they would be recorded in a
/// header, or `None` for a byte-stream layout (which reads any file as bytes).
pub(crate) fn expected(layout: &Layout) -> Option<(String, Vec<u64>)> {
    match layout {
        Layout::Array(_) => {
            let (d, shape, _) = describe(layout, 0);
            Some((d, shape))
        }
        _ => None,
    }
}

/// A dtype string with the byte-order mark of one-byte types dropped (`|u1`, `<u1` and
/// `=u1` are the same type), and native order (`=`) written as little-endian (Spools
/// runs on little-endian machines).
pub(crate) fn normal_descr(d: &str) -> String {
    let one_byte = d.len() == 3 && d.ends_with('1');
    match d.chars().next() {
        Some('|' | '<' | '=' | '>') if one_byte => format!("|{}", &d[1..]),
        Some('=') => format!("<{}", &d[1..]),
        _ => d.to_string(),
    }
}

/// Checks that a header records the dataset `layout` describes (element type and shape);
/// otherwise `(what the file holds, what the layout describes)`.
pub(crate) fn check(h: &Header, layout: &Layout) -> Result<(), (String, String)> {
    let Some((descr, shape)) = expected(layout) else {
        return Ok(());
    };
    let fortran = matches!(layout, Layout::Array(a) if a.order() == Order::F);
    // The order matters only when more than one dimension has more than one index.
    let ordered = |s: &[u64]| s.iter().filter(|&&n| n > 1).count() > 1;
    let order_differs = ordered(&shape) && h.fortran != fortran;
    if normal_descr(&h.descr) == normal_descr(&descr) && h.shape == shape && !order_differs {
        return Ok(());
    }
    let show = |d: &str, s: &[u64], f: bool| {
        let order = match (order_differs, f) {
            (false, _) => "",
            (true, true) => " in Fortran order",
            (true, false) => " in C order",
        };
        format!("dtype {d} with shape {s:?}{order}")
    };
    Err((
        show(&h.descr, &h.shape, h.fortran),
        show(&descr, &shape, fortran),
    ))
}

/// Parses a header at the start of `head`: (data offset, dataset bytes).
///
/// # Errors
/// [`NpyError`]: what is wrong.
pub(crate) fn parse(head: &[u8]) -> Result<(u64, u64), NpyError> {
    parse_full(head).map(|h| (h.offset, h.bytes))
}

/// A value of the header's dictionary.
enum Val {
    Str(String),
    Bool(bool),
    Tuple(Vec<u64>),
    Other,
}

/// A strict reader of the dictionary literal NumPy writes: `{'key': value, ...}` with
/// string, `True`/`False` and tuple-of-integers values, then padding.
struct Lit<'a> {
    s: &'a [u8],
    at: usize,
}

impl Lit<'_> {
    fn err(&self, what: &'static str) -> NpyError {
        NpyError::Syntax { what, at: self.at }
    }

    fn ws(&mut self) {
        while self.at < self.s.len() && self.s[self.at].is_ascii_whitespace() {
            self.at += 1;
        }
    }

    fn eat(&mut self, c: u8) -> bool {
        self.ws();
        if self.s.get(self.at) == Some(&c) {
            self.at += 1;
            true
        } else {
            false
        }
    }

    fn string(&mut self) -> Result<String, NpyError> {
        self.ws();
        let q = match self.s.get(self.at) {
            Some(&q @ (b'\'' | b'"')) => q,
            _ => return Err(self.err("a quoted string expected")),
        };
        let start = self.at + 1;
        let end = self.s[start..]
            .iter()
            .position(|&c| c == q || c == b'\\')
            .map(|p| start + p)
            .filter(|&e| self.s[e] == q)
            .ok_or_else(|| self.err("an unterminated or escaped string"))?;
        self.at = end + 1;
        Ok(String::from_utf8_lossy(&self.s[start..end]).into_owned())
    }

    fn int(&mut self) -> Result<u64, NpyError> {
        self.ws();
        let start = self.at;
        while self.at < self.s.len() && self.s[self.at].is_ascii_digit() {
            self.at += 1;
        }
        let t = std::str::from_utf8(&self.s[start..self.at]).unwrap_or("");
        // NumPy writes plain integers; a Python 2 long (`3L`) is accepted too.
        if self.s.get(self.at) == Some(&b'L') {
            self.at += 1;
        }
        t.parse().map_err(|_| {
            NpyError::ShapeEntry(
                String::from_utf8_lossy(&self.s[start..self.at.max(start + 1).min(self.s.len())])
                    .into_owned(),
            )
        })
    }

    fn value(&mut self) -> Result<Val, NpyError> {
        self.ws();
        match self.s.get(self.at) {
            Some(b'\'' | b'"') => Ok(Val::Str(self.string()?)),
            Some(b'(') => {
                self.at += 1;
                let mut dims = Vec::new();
                loop {
                    if self.eat(b')') {
                        break;
                    }
                    dims.push(self.int()?);
                    if self.eat(b')') {
                        break;
                    }
                    if !self.eat(b',') {
                        return Err(self.err("',' or ')' expected in the shape"));
                    }
                }
                Ok(Val::Tuple(dims))
            }
            _ if self.s[self.at..].starts_with(b"True") => {
                self.at += 4;
                Ok(Val::Bool(true))
            }
            _ if self.s[self.at..].starts_with(b"False") => {
                self.at += 5;
                Ok(Val::Bool(false))
            }
            Some(b'[') => Ok(Val::Other),
            _ => Err(self.err("a value expected")),
        }
    }
}

/// Parses a header at the start of `head`: the dictionary literal exactly as NumPy writes
/// it (the keys `descr`, `fortran_order` and `shape`, each once, nothing else), padded
/// with spaces to a newline.
///
/// # Errors
/// [`NpyError`]: what is wrong.
pub(crate) fn parse_full(head: &[u8]) -> Result<Header, NpyError> {
    if !head.starts_with(MAGIC) || head.len() < 10 {
        return Err(NpyError::Magic);
    }
    let (hlen, start) = match head[6] {
        1 => (u16::from_le_bytes([head[8], head[9]]) as usize, 10),
        2 | 3 if head.len() >= 12 => (
            u32::from_le_bytes([head[8], head[9], head[10], head[11]]) as usize,
            12,
        ),
        v => return Err(NpyError::Version(v)),
    };
    let dict = head
        .get(start..start + hlen)
        .ok_or(NpyError::Cut { hlen })?;
    if std::str::from_utf8(dict).is_err() {
        return Err(NpyError::NotText);
    }
    let mut p = Lit { s: dict, at: 0 };
    if !p.eat(b'{') {
        return Err(p.err("'{' expected"));
    }
    let (mut descr, mut fortran, mut shape) = (None, None, None);
    loop {
        if p.eat(b'}') {
            break;
        }
        let key = p.string()?;
        if !p.eat(b':') {
            return Err(p.err("':' expected"));
        }
        let v = p.value()?;
        let slot_taken = match key.as_str() {
            "descr" => descr.replace(v).is_some(),
            "fortran_order" => fortran.replace(v).is_some(),
            "shape" => shape.replace(v).is_some(),
            _ => true,
        };
        if slot_taken {
            return Err(NpyError::Key(key));
        }
        if p.eat(b'}') {
            break;
        }
        if !p.eat(b',') {
            return Err(p.err("',' or '}' expected"));
        }
    }
    // Only padding (spaces) and the final newline may follow.
    if dict[p.at..]
        .iter()
        .any(|&c| c != b' ' && c != b'\n' && c != b'\x00')
    {
        return Err(p.err("text after the dictionary"));
    }
    let descr = match descr.ok_or(NpyError::Lacks("descr"))? {
        Val::Str(d) => d,
        _ => return Err(NpyError::Descr),
    };
    let fortran = match fortran.ok_or(NpyError::Lacks("fortran_order"))? {
        Val::Bool(b) => b,
        _ => return Err(NpyError::FortranOrder),
    };
    let dims = match shape.ok_or(NpyError::Lacks("shape"))? {
        Val::Tuple(d) => d,
        _ => return Err(NpyError::ShapeNotTuple),
    };
    let item = item_size(&descr).ok_or_else(|| NpyError::Dtype(descr.clone()))?;
    let total = dims
        .iter()
        .try_fold(item, |t, &n| t.checked_mul(n))
        .ok_or(NpyError::ShapeOverflow)?;
    Ok(Header {
        offset: (start + hlen) as u64,
        bytes: total,
        descr,
        shape: dims,
        fortran,
    })
}

/// The item size of a simple dtype string (`<f8`, `|u1`, `>i4`, `|V12`, `<U3`), or
/// `None` when it is not one.
fn item_size(d: &str) -> Option<u64> {
    let b = d.as_bytes();
    if b.len() < 3 || !matches!(b[0], b'<' | b'>' | b'|' | b'=') {
        return None;
    }
    let n: u64 = d[2..].parse().ok().filter(|&n| n > 0)?;
    match b[1] {
        b'b' if n == 1 => Some(1),
        b'i' | b'u' if matches!(n, 1 | 2 | 4 | 8) => Some(n),
        b'f' if matches!(n, 2 | 4 | 8 | 16) => Some(n),
        b'c' if matches!(n, 8 | 16 | 32) => Some(n),
        b'V' | b'S' => Some(n),
        b'U' => n.checked_mul(4),
        _ => None,
    }
}

/// The Spools element type a little-endian (or byte-order-free) dtype string names, if
/// any.
pub(crate) fn dtype_of(d: &str) -> Option<DType> {
    let n = normal_descr(d);
    Some(match n.as_str() {
        "|u1" => DType::U8,
        "|i1" => DType::I8,
        "<u2" => DType::U16,
        "<i2" => DType::I16,
        "<u4" => DType::U32,
        "<i4" => DType::I32,
        "<u8" => DType::U64,
        "<i8" => DType::I64,
        "<f4" => DType::F32,
        "<f8" => DType::F64,
        "<c8" => DType::C64,
        "<c16" => DType::C128,
        v => DType::Bytes(v.strip_prefix("|V")?.parse().ok()?),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn headers_are_aligned_and_read_back() {
        for spec in [
            "f64[3,4] block,* on 1x1",
            "u8[7] block on 1",
            "c64[2,2,2] *,*,* on 1x1x1 order=F",
            "bytes(3)[5] block on 1",
        ] {
            let l: Layout = spec.parse().unwrap_or_else(|e| unreachable!("{e}"));
            let total = l.total_bytes().unwrap_or(0);
            let h = header(&l, total);
            assert_eq!(h.len() % 64, 0);
            assert_eq!(
                parse(&h),
                Ok((h.len() as u64, total)),
                "{spec}: {}",
                String::from_utf8_lossy(&h)
            );
        }
        assert!(parse(b"\x93NUMPY\x01\x00\xff\x00{").is_err());
        // The recorded element type and shape must be the reader's.
        let l: Layout = "i32[6,5] block,* on 1x1"
            .parse()
            .unwrap_or_else(|e| unreachable!("{e}"));
        let h = parse_full(&header(&l, 120)).unwrap_or_else(|e| unreachable!("{e}"));
        assert_eq!(check(&h, &l), Ok(()));
        for other in [
            "f32[6,5] block,* on 1x1",
            "i32[5,6] block,* on 1x1",
            "u8[120] block on 1",
        ] {
            let o: Layout = other.parse().unwrap_or_else(|e| unreachable!("{e}"));
            assert!(check(&h, &o).is_err(), "{other}");
        }
        // A file in Fortran order is not read as C order (nor the reverse), unless at
        // most one dimension has more than one index.
        let f: Layout = "i32[6,5] block,* on 1x1 order=F"
            .parse()
            .unwrap_or_else(|e| unreachable!("{e}"));
        assert_eq!(
            check(&h, &f),
            Err((
                "dtype <i4 with shape [6, 5] in C order".to_string(),
                "dtype <i4 with shape [6, 5] in Fortran order".to_string()
            ))
        );
        let hf = parse_full(&header(&f, 120)).unwrap_or_else(|e| unreachable!("{e}"));
        assert!(hf.fortran);
        assert_eq!(check(&hf, &f), Ok(()));
        assert!(check(&hf, &l).is_err());
        let flat_f: Layout = "i32[1,30] block,* on 1x1 order=F"
            .parse()
            .unwrap_or_else(|e| unreachable!("{e}"));
        let flat_c: Layout = "i32[1,30] block,* on 1x1"
            .parse()
            .unwrap_or_else(|e| unreachable!("{e}"));
        let hflat = parse_full(&header(&flat_f, 120)).unwrap_or_else(|e| unreachable!("{e}"));
        assert_eq!(check(&hflat, &flat_c), Ok(()));
        let bytes: Layout = "stripe(unit=7B,count=2,size=120B)"
            .parse()
            .unwrap_or_else(|e| unreachable!("{e}"));
        assert_eq!(check(&h, &bytes), Ok(()));
        assert!(parse(b"hello").is_err());
    }
}

/// The `.npy` format as a one-file format: the header Spools writes before the stream,
/// and the one it reads (checked against the reader's dataset).
#[derive(Debug)]
pub(crate) struct NpyFile;

impl OneFileFormat for NpyFile {
    fn name(&self) -> &str {
        "npy"
    }

    fn inspect(
        &self,
        path: &std::path::Path,
        head: &[u8],
        len: u64,
        layout: Option<&Layout>,
    ) -> Result<Option<StreamAt>, FileError> {
        if !head.starts_with(MAGIC) {
            return Ok(None);
        }
        let h = parse_full(head).map_err(|e| FileError::Format {
            path: path.to_path_buf(),
            defect: FormatDefect::Npy(e),
        })?;
        let (offset, bytes) = (h.offset, h.bytes);
        if offset.checked_add(bytes) != Some(len) {
            return Err(FileError::Format {
                path: path.to_path_buf(),
                defect: FormatDefect::NpyLength {
                    header: bytes,
                    follow: len.saturating_sub(offset),
                },
            });
        }
        // (A dataset of another size is reported as such by the read itself.)
        if let Some(l) = layout.filter(|l| l.total_bytes() == Some(bytes)) {
            check(&h, l).map_err(|(file, layout)| FileError::DatasetMismatch {
                path: path.to_path_buf(),
                file,
                layout,
            })?;
        }
        Ok(Some(StreamAt { offset, bytes }))
    }

    fn prepare(
        &self,
        _tmp: &std::path::Path,
        layout: &Layout,
        _in_place: bool,
    ) -> Result<Prepared, FileError> {
        let total = layout.total_bytes().unwrap_or(0);
        Ok(crate::file::one_file::Prepared::Header(header(
            layout, total,
        )))
    }
}
