//! The `.npy` header (NumPy format version 1.0), so that `numpy.load` reads a canonical
//! parallel file.

use spools_map::{DType, Layout, Order};

use crate::error::NpyError;

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
/// `=u1` are the same type).
pub(crate) fn normal_descr(d: &str) -> String {
    let one_byte = d.len() == 3 && d.ends_with('1');
    match d.chars().next() {
        Some('|' | '<' | '=' | '>') if one_byte => format!("|{}", &d[1..]),
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

/// Parses a header at the start of `head`.
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
    let dict = std::str::from_utf8(dict).map_err(|_| NpyError::NotText)?;
    let field = |key: &'static str| -> Result<&str, NpyError> {
        let at = dict
            .find(&format!("'{key}':"))
            .ok_or(NpyError::Lacks(key))?;
        Ok(dict[at + key.len() + 3..].trim_start())
    };
    let descr = field("descr")?;
    let descr = descr
        .strip_prefix('\'')
        .and_then(|d| d.split('\'').next())
        .ok_or(NpyError::Descr)?;
    let item: u64 = descr
        .get(2..)
        .and_then(|n| n.parse().ok())
        .filter(|&n: &u64| n > 0)
        .ok_or_else(|| NpyError::Dtype(descr.to_owned()))?;
    let shape = field("shape")?;
    let shape = shape
        .strip_prefix('(')
        .and_then(|s| s.split(')').next())
        .ok_or(NpyError::ShapeNotTuple)?;
    let mut total = item;
    let mut dims = Vec::new();
    for d in shape.split(',').map(str::trim).filter(|d| !d.is_empty()) {
        let n: u64 = d.parse().map_err(|_| NpyError::ShapeEntry(d.to_owned()))?;
        total = total.checked_mul(n).ok_or(NpyError::ShapeOverflow)?;
        dims.push(n);
    }
    let fortran = field("fortran_order").is_ok_and(|f| f.starts_with("True"));
    Ok(Header {
        offset: (start + hlen) as u64,
        bytes: total,
        descr: descr.to_string(),
        shape: dims,
        fortran,
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
