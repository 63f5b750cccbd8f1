//! A datatype's type map: the primitives of one element, each at its offset, in the
//! order `MPI_Pack` lays them out (predefined types, and derived ones through the
//! constructor each was made with).

use crate::abi::*;
use crate::datatype::{Basic, TypeObj};
use crate::env::error::MpiError;

use super::prim::Prim;

/// The primitives of predefined type `h` (`t`), at their offsets.
fn named(h: MPI_Datatype, t: &TypeObj, base: isize, map: &mut Vec<(isize, Prim)>, split: bool) {
    let one = |size: usize| {
        if size == 1 {
            Prim::Byte
        } else {
            Prim::Swap(size as u8)
        }
    };
    let pair: Option<(Prim, isize, Prim)> = match h {
        MPI_FLOAT_INT => Some((Prim::Swap(4), 4, Prim::Swap(4))),
        MPI_DOUBLE_INT => Some((Prim::Swap(8), 8, Prim::Swap(4))),
        MPI_LONG_INT => Some((Prim::Narrow8 { signed: true }, 8, Prim::Swap(4))),
        MPI_2INT | MPI_2REAL | MPI_2INTEGER => Some((Prim::Swap(4), 4, Prim::Swap(4))),
        MPI_SHORT_INT => Some((Prim::Swap(2), 4, Prim::Swap(4))),
        MPI_LONG_DOUBLE_INT => Some((Prim::Quad, 16, Prim::Swap(4))),
        MPI_2DOUBLE_PRECISION => Some((Prim::Swap(8), 8, Prim::Swap(8))),
        _ => None,
    };
    if let Some((a, off, b)) = pair {
        map.push((base, a));
        map.push((base + off, b));
        return;
    }
    let prim = match (h, t.basic) {
        (MPI_LONG, _) => Prim::Narrow8 { signed: true },
        (MPI_UNSIGNED_LONG, _) => Prim::Narrow8 { signed: false },
        (MPI_WCHAR, _) => Prim::Wchar,
        (MPI_LONG_DOUBLE, _) => Prim::Quad,
        (MPI_COMPLEX4, _) | (_, Some(Basic::Complex)) if !split => Prim::Swap(t.size as u8),
        (MPI_COMPLEX4, _) | (_, Some(Basic::Complex)) => {
            let half = t.size / 2;
            let p = match h {
                MPI_C_LONG_DOUBLE_COMPLEX | MPI_CXX_LONG_DOUBLE_COMPLEX => Prim::Quad,
                _ => one(half),
            };
            map.push((base, p));
            map.push((base + half as isize, p));
            return;
        }
        _ => one(t.size),
    };
    if t.size > 0 {
        map.push((base, prim));
    }
}

/// The integer and address arguments of a derived type's constructor, in one list
/// (`MPI_Type_get_contents`' integers, then its addresses; or its large counts).
fn args(t: &TypeObj) -> Vec<i64> {
    let e = &t.envelope;
    if e.counts.is_empty() {
        e.ints
            .iter()
            .map(|&i| i64::from(i))
            .chain(e.aints.iter().map(|&a| a as i64))
            .collect()
    } else {
        e.counts.clone()
    }
}

fn at(a: &[i64], i: usize) -> Result<i64, MpiError> {
    a.get(i).copied().ok_or_else(|| {
        MpiError::invalid(
            MPI_ERR_INTERN,
            "external32: a datatype's constructor is incomplete",
        )
    })
}

/// Appends `n` copies of the map of `old` from `base` on, `stride` bytes apart.
fn repeat(
    old: &TypeObj,
    base: isize,
    n: i64,
    stride: isize,
    map: &mut Vec<(isize, Prim)>,
    split: bool,
) -> Result<(), MpiError> {
    for i in 0..n.max(0) as isize {
        walk(old, base + i * stride, map, split)?;
    }
    Ok(())
}

/// Appends the primitives of one element of `t`, at their offsets from `base`, in the
/// order of the type map (which is the order `MPI_Pack` writes them).
///
/// # Errors
/// `MPI_ERR_TYPE` for a subarray or distributed array of more than one primitive type.
pub(crate) fn typemap(
    t: &TypeObj,
    base: isize,
    map: &mut Vec<(isize, Prim)>,
) -> Result<(), MpiError> {
    walk(t, base, map, true)
}

/// The native sizes of the basic elements of one element of `t`, in type-map order, as
/// `MPI_Get_elements` counts them (a complex number is one, a pair type two).
///
/// # Errors
/// As [`typemap`].
pub(crate) fn basic_sizes(t: &TypeObj) -> Result<Vec<usize>, MpiError> {
    let mut map = Vec::new();
    walk(t, 0, &mut map, false)?;
    Ok(map.into_iter().map(|(_, p)| p.native()).collect())
}

/// The offsets of the basic elements of one element of `t`, in type-map order (a pair
/// type gives its value's and then its index's).
///
/// # Errors
/// As [`typemap`].
pub(crate) fn offsets(t: &TypeObj) -> Result<Vec<isize>, MpiError> {
    let mut map = Vec::new();
    walk(t, 0, &mut map, false)?;
    Ok(map.into_iter().map(|(o, _)| o).collect())
}

/// The most primitives a type map of one element holds: a larger one (a huge struct of
/// several types) is refused rather than built; types of one primitive take no map
/// ([`distinct`]).
const MAP_MAX: usize = 1 << 22;

/// The distinct primitives `t` is made of (from its constructor's types, without
/// expanding counts: cheap for any size).
///
/// # Errors
/// A derived type whose parts are missing (`MPI_ERR_INTERN`).
pub(crate) fn distinct(t: &TypeObj) -> Result<Vec<Prim>, MpiError> {
    fn go(t: &TypeObj, out: &mut Vec<Prim>) -> Result<(), MpiError> {
        if let Some(h) = t.named {
            let mut m = Vec::new();
            named(h, t, 0, &mut m, true);
            for (_, p) in m {
                if !out.contains(&p) {
                    out.push(p);
                }
            }
            return Ok(());
        }
        if t.envelope.keep.is_empty() && t.size > 0 {
            return Err(MpiError::invalid(
                MPI_ERR_INTERN,
                "external32: a datatype's parts are missing",
            ));
        }
        t.envelope.keep.iter().try_for_each(|k| go(k, out))
    }
    let mut out = Vec::new();
    go(t, &mut out)?;
    Ok(out)
}

/// [`typemap`], with complex numbers as two primitives (`split`) or one.
fn walk(
    t: &TypeObj,
    base: isize,
    map: &mut Vec<(isize, Prim)>,
    split: bool,
) -> Result<(), MpiError> {
    if map.len() > MAP_MAX {
        return Err(MpiError::invalid(
            MPI_ERR_TYPE,
            format!("external32: the type map of one element has more than {MAP_MAX} primitives of several types"),
        ));
    }
    if let Some(h) = t.named {
        named(h, t, base, map, split);
        return Ok(());
    }
    let e = &t.envelope;
    let a = args(t);
    let old = |i: usize| {
        e.keep.get(i).ok_or_else(|| {
            MpiError::invalid(MPI_ERR_INTERN, "external32: a datatype's parts are missing")
        })
    };
    match e.combiner {
        MPI_COMBINER_DUP | MPI_COMBINER_RESIZED => walk(old(0)?, base, map, split)?,
        MPI_COMBINER_CONTIGUOUS => {
            let o = old(0)?;
            repeat(o, base, at(&a, 0)?, o.extent, map, split)?;
        }
        MPI_COMBINER_VECTOR | MPI_COMBINER_HVECTOR => {
            let o = old(0)?;
            let (n, bl, stride) = (at(&a, 0)?, at(&a, 1)?, at(&a, 2)? as isize);
            let stride = if e.combiner == MPI_COMBINER_VECTOR {
                stride * o.extent
            } else {
                stride
            };
            for i in 0..n.max(0) as isize {
                repeat(o, base + i * stride, bl, o.extent, map, split)?;
            }
        }
        MPI_COMBINER_INDEXED | MPI_COMBINER_HINDEXED => {
            let o = old(0)?;
            let n = at(&a, 0)?.max(0) as usize;
            for i in 0..n {
                let (bl, d) = (at(&a, 1 + i)?, at(&a, 1 + n + i)? as isize);
                let d = if e.combiner == MPI_COMBINER_INDEXED {
                    d * o.extent
                } else {
                    d
                };
                repeat(o, base + d, bl, o.extent, map, split)?;
            }
        }
        MPI_COMBINER_INDEXED_BLOCK | MPI_COMBINER_HINDEXED_BLOCK => {
            let o = old(0)?;
            let (n, bl) = (at(&a, 0)?.max(0) as usize, at(&a, 1)?);
            for i in 0..n {
                let d = at(&a, 2 + i)? as isize;
                let d = if e.combiner == MPI_COMBINER_INDEXED_BLOCK {
                    d * o.extent
                } else {
                    d
                };
                repeat(o, base + d, bl, o.extent, map, split)?;
            }
        }
        MPI_COMBINER_STRUCT => {
            let n = at(&a, 0)?.max(0) as usize;
            for i in 0..n {
                let (bl, d) = (at(&a, 1 + i)?, at(&a, 1 + n + i)? as isize);
                let o = old(i)?;
                repeat(o, base + d, bl, o.extent, map, split)?;
            }
        }
        // A subarray or distributed array: its bytes (`blocks`, in order) cut into its
        // one primitive.
        _ => {
            let mut inner = Vec::new();
            walk(old(0)?, 0, &mut inner, split)?;
            let p = match inner.first() {
                Some(&(_, p)) if inner.iter().all(|&(_, q)| q == p) => p,
                None => return Ok(()),
                Some(_) => {
                    return Err(MpiError::invalid(
                        MPI_ERR_TYPE,
                        "external32: a subarray or distributed array of a type of several \
                         primitive types is not supported",
                    ))
                }
            };
            for &(off, len) in &t.blocks {
                for k in 0..len / p.native() {
                    map.push((base + off + (k * p.native()) as isize, p));
                }
            }
        }
    }
    Ok(())
}
