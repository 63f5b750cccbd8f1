//! The test dataset of the I/O benchmarks (io, pipe, redist): every element holds its own
//! global index plus a seed, in the element type (wrapping for small types), so that any
//! rank can make its part and check what it read.

use spools::Layout;
use spools_map::DType;

use crate::error::BenchError;

/// The bytes of element value `v` in `dtype`, little-endian.
fn value(dtype: DType, v: u64, out: &mut [u8]) {
    match dtype {
        DType::U8 | DType::I8 => out[0] = v as u8,
        DType::U16 | DType::I16 => out.copy_from_slice(&(v as u16).to_le_bytes()),
        DType::U32 | DType::I32 => out.copy_from_slice(&(v as u32).to_le_bytes()),
        DType::U64 | DType::I64 => out.copy_from_slice(&v.to_le_bytes()),
        DType::F32 => out.copy_from_slice(&(v as f32).to_le_bytes()),
        DType::F64 => out.copy_from_slice(&(v as f64).to_le_bytes()),
        DType::C64 => {
            out[..4].copy_from_slice(&(v as f32).to_le_bytes());
            out[4..].fill(0);
        }
        DType::C128 => {
            out[..8].copy_from_slice(&(v as f64).to_le_bytes());
            out[8..].fill(0);
        }
        DType::Bytes(_) => {
            for (i, b) in out.iter_mut().enumerate() {
                *b = (v >> (8 * (i % 8))) as u8;
            }
        }
    }
}

fn dtype_of(l: &Layout) -> DType {
    match l {
        Layout::Array(a) => a.dtype(),
        _ => DType::U8,
    }
}

/// Calls `f(local offset, global element index)` for every element of this rank's part.
fn each_element(l: &Layout, me: u32, mut f: impl FnMut(usize, u64)) -> Result<(), BenchError> {
    if u64::from(me) >= l.units() {
        return Ok(());
    }
    let es = l.elem_size().max(1);
    for e in l.extents(u64::from(me))? {
        for k in 0..e.len / es {
            f((e.local + k * es) as usize, e.global / es + k);
        }
    }
    Ok(())
}

/// Bytes of rank `me`'s share of `l` (rank r holds unit r; none beyond the units).
pub(crate) fn share(l: &Layout, me: u32) -> Result<u64, BenchError> {
    Ok(if u64::from(me) < l.units() {
        l.local_bytes(u64::from(me))?
    } else {
        0
    })
}

/// This rank's part of the dataset, every element holding its index plus `seed`.
pub(crate) fn fill(l: &Layout, me: u32, seed: u64) -> Result<Vec<u8>, BenchError> {
    let mut buf = vec![0u8; share(l, me)? as usize];
    let (d, es) = (dtype_of(l), l.elem_size() as usize);
    each_element(l, me, |at, idx| {
        value(d, idx.wrapping_add(seed), &mut buf[at..at + es])
    })?;
    Ok(buf)
}

/// The first element of this rank's part that does not hold its index plus `seed`.
pub(crate) fn check(
    l: &Layout,
    me: u32,
    buf: &[u8],
    seed: u64,
) -> Result<Option<String>, BenchError> {
    let (d, es) = (dtype_of(l), l.elem_size() as usize);
    let mut want = vec![0u8; es];
    let mut bad = None;
    each_element(l, me, |at, idx| {
        if bad.is_none() {
            value(d, idx.wrapping_add(seed), &mut want);
            if buf[at..at + es] != want[..] {
                bad = Some(format!(
                    "rank {me}: element {idx} (local byte {at}) holds {:02x?}, expected {:02x?}",
                    &buf[at..at + es],
                    want
                ));
            }
        }
    })?;
    Ok(bad)
}

/// Parses a layout given as option `option`.
pub(crate) fn parse_layout(option: &str, spec: &str) -> Result<Layout, BenchError> {
    spec.parse().map_err(BenchError::spec(option, spec))
}
