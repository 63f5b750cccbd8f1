//! Collective accesses whose view is an array distribution: a filetype made by
//! `MPI_Type_create_darray` is a Spools array layout (`spools_map::ArrayLayout`: the same
//! HPF BLOCK / CYCLIC / NONE dimensions on the same row-major process grid), and a
//! collective access of one whole instance of it is one collective write (read) of that
//! layout's dataset through `spools_io`'s exchange engine ([`spools_io::file::write_into`]):
//! the plan M1⁻¹∘M2 from the ranks' distribution to the aggregators' domains is computed
//! from the two layouts, never from lists of runs, and the file is covered in rounds of
//! at most `cb_buffer_size` per aggregator.
//!
//! The group takes this path only when every rank accesses the same array at the same
//! place ([`Whole::key`], agreed in the first step of the collective call); otherwise the
//! runs of the views go through [`twophase`](super::twophase).

use std::ffi::c_int;

use spools_io::file::{ReadOptions, Reshuffle, WriteOptions};
use spools_io::FileError;
use spools_map::{ArrayLayout, DType, Dist, Layout, Order};

use crate::abi::*;
use crate::error::MpiError;
use crate::file::twophase::Part;
use crate::file::{io_class, FileObj, View};

/// The array a collective access is one part of.
#[derive(Debug, Clone)]
pub(crate) enum Shape {
    /// A darray's layout, whole in every rank's view.
    Array(Layout),
    /// A 1-D array of `elem`-byte elements dealt cyclic(`block`) over the group: each
    /// rank's filetype one block of `block` elements in an extent of `ranks` blocks, its
    /// displacement `base + rank * block * elem` (the classic strided view). Its length
    /// is what the group accesses, known once every rank said how much
    /// ([`Whole::layout`]).
    Cyclic { elem: u64, block: u64, ranks: u32 },
}

/// One rank's part of a collective access that is a whole array: the array and where
/// its byte stream starts in the file.
#[derive(Debug, Clone)]
pub(crate) struct Whole {
    pub(crate) shape: Shape,
    pub(crate) base: u64,
    /// A read's length of the file (in the key, so that the ranks agree on it).
    pub(crate) file_len: Option<u64>,
}

impl Whole {
    /// The access of `bytes` bytes from byte `from` of `view`'s data stream by rank `rank`
    /// of `size`, when it is one part of a whole array ([`Shape`]): exactly one
    /// instance of a darray filetype made for this rank of this group, over a contiguous
    /// element type, or a cyclic view from the start of one of its instances. For a read,
    /// `file_len` is the file's length.
    pub(crate) fn of(
        view: &View,
        from: u64,
        bytes: u64,
        (rank, size): (u32, u32),
        file_len: Option<u64>,
    ) -> Option<Whole> {
        let (shape, base) = match darray(view, from, bytes, (rank, size)) {
            Some(found) => found,
            None => cyclic(view, from, (rank, size))?,
        };
        Some(Whole {
            shape,
            base,
            file_len,
        })
    }

    /// A fingerprint of the group's access (never 0): the array's description, the
    /// region's place and a read's file length, FNV-1a. Every rank of a group accessing
    /// one array computes the same, so equal keys are the group's agreement to take
    /// this path.
    pub(crate) fn key(&self) -> u64 {
        let shape = match &self.shape {
            Shape::Array(l) => l.to_string(),
            Shape::Cyclic { elem, block, ranks } => format!("cyclic {elem} {block} {ranks}"),
        };
        let text = format!("{shape}@{} {:?}", self.base, self.file_len);
        let h = text.bytes().fold(0xcbf2_9ce4_8422_2325u64, |h, b| {
            (h ^ u64::from(b)).wrapping_mul(0x0100_0000_01b3)
        });
        h.max(1)
    }

    /// The group's array, from every rank's part (the same answer on every rank, when the
    /// keys agreed): `None` when the parts do not make it (a cyclic view whose ranks'
    /// amounts are not the cyclic deal of their sum) or a read's file does not hold it.
    pub(crate) fn layout(&self, parts: &[Part]) -> Option<Layout> {
        let layout = match &self.shape {
            Shape::Array(l) => l.clone(),
            &Shape::Cyclic { elem, block, ranks } => {
                let total: u64 = parts.iter().map(|p| p.bytes).sum();
                if total == 0 || total % elem != 0 || parts.len() != ranks as usize {
                    return None;
                }
                let l = Layout::Array(
                    ArrayLayout::new(
                        DType::Bytes(elem),
                        vec![total / elem],
                        vec![Dist::Cyclic(block)],
                        vec![u64::from(ranks)],
                        Order::C,
                    )
                    .ok()?,
                );
                let fits = parts
                    .iter()
                    .enumerate()
                    .all(|(r, p)| l.local_bytes(r as u64).ok() == Some(p.bytes));
                fits.then_some(l)?
            }
        };
        let end = self.base.checked_add(layout.total_bytes()?)?;
        match self.file_len {
            Some(len) if len < end => None,
            _ => Some(layout),
        }
    }
}

/// A darray filetype's layout and the region's start, for an access of exactly one
/// instance of it (from the start of an instance) by the rank it was made for.
fn darray(view: &View, from: u64, bytes: u64, (rank, size): (u32, u32)) -> Option<(Shape, u64)> {
    let ft = &view.filetype;
    let env = &ft.envelope;
    if env.combiner != MPI_COMBINER_DARRAY || ft.lb != 0 || bytes != ft.size as u64 {
        return None;
    }
    let old = env.keep.first()?;
    if !old.contiguous() || old.size == 0 {
        return None;
    }
    let ints = &env.ints;
    let nd = usize::try_from(*ints.get(2)?).ok()?;
    // The int form carries the global sizes among the ints, the large one in counts.
    let (gsizes, rest): (Vec<u64>, &[c_int]) = if ints.len() == 4 + 4 * nd {
        let g = ints[3..3 + nd].iter().map(|&g| u64::try_from(g).ok());
        (g.collect::<Option<_>>()?, &ints[3 + nd..])
    } else if ints.len() == 4 + 3 * nd && env.counts.len() == nd {
        let g = env.counts.iter().map(|&g| u64::try_from(g).ok());
        (g.collect::<Option<_>>()?, &ints[3..])
    } else {
        return None;
    };
    if i64::from(ints[0]) != i64::from(size) || i64::from(ints[1]) != i64::from(rank) {
        return None;
    }
    let (distribs, dargs, psizes) = (&rest[..nd], &rest[nd..2 * nd], &rest[2 * nd..3 * nd]);
    let order = match rest[3 * nd] {
        MPI_ORDER_C => Order::C,
        MPI_ORDER_FORTRAN => Order::F,
        _ => return None,
    };
    let dists = distribs
        .iter()
        .zip(dargs)
        .map(|(&d, &a)| {
            let arg = if a == MPI_DISTRIBUTE_DFLT_DARG {
                None
            } else {
                Some(u64::try_from(a).ok().filter(|&a| a > 0)?)
            };
            match d {
                MPI_DISTRIBUTE_BLOCK => Some(Dist::Block(arg)),
                MPI_DISTRIBUTE_CYCLIC => Some(Dist::Cyclic(arg.unwrap_or(1))),
                MPI_DISTRIBUTE_NONE => Some(Dist::Whole),
                _ => None,
            }
        })
        .collect::<Option<Vec<_>>>()?;
    let grid = psizes
        .iter()
        .map(|&p| u64::try_from(p).ok())
        .collect::<Option<Vec<_>>>()?;
    let a = ArrayLayout::new(DType::Bytes(old.size as u64), gsizes, dists, grid, order).ok()?;
    let extent = u64::try_from(ft.extent).ok()?;
    if a.total_bytes() != extent || from % bytes != 0 {
        return None;
    }
    let base = (from / bytes).checked_mul(extent)?.checked_add(view.disp)?;
    Some((Shape::Array(Layout::Array(a)), base))
}

/// A cyclic view's array and the region's start: the filetype one block of whole etypes
/// at its lower bound 0, its extent `size` blocks, this rank's displacement `rank`
/// blocks past the region's start, the access from the start of an instance.
fn cyclic(view: &View, from: u64, (rank, size): (u32, u32)) -> Option<(Shape, u64)> {
    let ft = &view.filetype;
    let elem = view.etype.size as u64;
    let len = ft.size as u64;
    if ft.lb != 0 || ft.blocks.as_slice() != [(0, ft.size)] || len % elem != 0 {
        return None;
    }
    let extent = u64::try_from(ft.extent).ok()?;
    if Some(extent) != len.checked_mul(u64::from(size)) || from % len != 0 {
        return None;
    }
    let start = view.disp.checked_sub(u64::from(rank) * len)?;
    let base = (from / len).checked_mul(extent)?.checked_add(start)?;
    let shape = Shape::Cyclic {
        elem,
        block: len / elem,
        ranks: size,
    };
    Some((shape, base))
}

/// Whether the group agreed to move a whole array: every rank's key is the same and set.
pub(crate) fn agreed(parts: &[Part]) -> bool {
    parts
        .first()
        .is_some_and(|p| p.key != 0 && parts.iter().all(|q| q.key == p.key))
}

/// Rank 0's `romio_cb_*` hint as the exchange engine's choice.
fn reshuffle(parts: &[Part]) -> Reshuffle {
    match parts.first().map(|p| p.cb) {
        Some(1) => Reshuffle::Always,
        Some(2) => Reshuffle::Never,
        _ => Reshuffle::Auto,
    }
}

/// This rank's `cb_buffer_size` hint (the smallest over the ranks is used).
fn buffer(f: &FileObj) -> Option<usize> {
    super::twophase::hint(f, "cb_buffer_size").and_then(|v| v.parse::<usize>().ok())
}

/// An error of the exchange engine as MPI's: a failed system call by its class, the rest
/// (a peer that failed, a dead rank) `MPI_ERR_IO`.
fn mpi_error(e: FileError, call: &'static str) -> MpiError {
    let class = match &e {
        FileError::Io { source, .. } => io_class(source),
        _ => MPI_ERR_IO,
    };
    MpiError::invalid(class, format!("{call}: {e}"))
}

/// Writes this rank's `data` (its local array, in order) as its part of the group's
/// array `w`, laid out as `layout` ([`Whole::layout`]).
///
/// # Errors
/// The engine's error on every rank (this rank's own, or `MPI_ERR_IO` naming the rank
/// that failed).
pub(crate) fn write(
    f: &FileObj,
    w: &Whole,
    layout: &Layout,
    parts: &[Part],
    data: &[u8],
    call: &'static str,
) -> Result<(), MpiError> {
    let opts = WriteOptions {
        reshuffle: reshuffle(parts),
        coll_buffer: buffer(f),
        ..WriteOptions::default()
    };
    spools_io::file::write_into(&f.comm, &f.file, &f.path, w.base, data, layout, &opts)
        .map(|_| ())
        .map_err(|e| mpi_error(e, call))
}

/// Reads this rank's part of the group's array `w` into `out`.
///
/// # Errors
/// As [`write`].
pub(crate) fn read(
    f: &FileObj,
    w: &Whole,
    layout: &Layout,
    parts: &[Part],
    out: &mut [u8],
    call: &'static str,
) -> Result<(), MpiError> {
    let opts = ReadOptions {
        reshuffle: reshuffle(parts),
        coll_buffer: buffer(f),
        ..ReadOptions::default()
    };
    spools_io::file::read_from(&f.comm, &f.file, &f.path, w.base, out, layout, &opts)
        .map(|_| ())
        .map_err(|e| mpi_error(e, call))
}
