//! Collective accesses whose view is an array distribution: a filetype made by
//! `MPI_Type_create_darray`, or the ranks' `MPI_Type_create_subarray` filetypes when
//! their boxes are the blocks of a grid, is a Spools array layout (`spools_map::ArrayLayout`: the same
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
use crate::env::error::MpiError;
use crate::file::outcome::file_class;
use crate::file::twophase::{Part, MAX_BOX};
use crate::file::{FileObj, View};

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
    /// An array of `elem`-byte elements of which each rank's filetype is one subarray
    /// (`MPI_Type_create_subarray`): a Spools array layout when the group's boxes are
    /// the blocks of a `block(b)` distribution on a grid whose units are the ranks in
    /// order ([`Whole::layout`], from every rank's box).
    Subarray {
        elem: u64,
        sizes: Vec<u64>,
        order: Order,
    },
}

/// One rank's part of a collective access that is a whole array: the array and where
/// its byte stream starts in the file.
#[derive(Debug, Clone)]
pub(crate) struct Whole {
    pub(crate) shape: Shape,
    pub(crate) base: u64,
    /// A read's length of the file (in the key, so that the ranks agree on it).
    pub(crate) file_len: Option<u64>,
    /// This rank's box of a [`Shape::Subarray`]: each dimension's start and size.
    pub(crate) boxed: Vec<u64>,
}

impl Whole {
    /// The access of `bytes` bytes from byte `from` of `view`'s data stream by rank `rank`
    /// of `size`, when it is one part of a whole array ([`Shape`]): exactly one
    /// instance of a darray filetype made for this rank of this group, over a contiguous
    /// element type, or a cyclic view from the start of one of its instances. Its
    /// `file_len` is the caller's to set for a read.
    pub(crate) fn of(
        view: &View,
        from: u64,
        bytes: u64,
        (rank, size): (u32, u32),
    ) -> Option<Whole> {
        let (shape, base, boxed) = match darray(view, from, bytes, (rank, size)) {
            Some((shape, base)) => (shape, base, Vec::new()),
            None => match subarray(view, from, bytes) {
                Some(found) => found,
                None => {
                    let (shape, base) = cyclic(view, from, (rank, size))?;
                    (shape, base, Vec::new())
                }
            },
        };
        Some(Whole {
            shape,
            base,
            file_len: None,
            boxed,
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
            Shape::Subarray { elem, sizes, order } => {
                format!("subarray {elem} {sizes:?} {order:?}")
            }
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
            Shape::Subarray { elem, sizes, order } => boxes_layout(*elem, sizes, *order, parts)?,
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

/// A subarray filetype's array, the region's start and this rank's box (each
/// dimension's start and size), for an access of exactly one instance of it (from the
/// start of an instance).
fn subarray(view: &View, from: u64, bytes: u64) -> Option<(Shape, u64, Vec<u64>)> {
    let ft = &view.filetype;
    let env = &ft.envelope;
    if env.combiner != MPI_COMBINER_SUBARRAY || ft.lb != 0 || bytes != ft.size as u64 {
        return None;
    }
    let old = env.keep.first()?;
    if !old.contiguous() || old.size == 0 || bytes == 0 {
        return None;
    }
    let ints = &env.ints;
    let nd = usize::try_from(*ints.first()?).ok()?;
    if nd == 0 || 2 * nd > MAX_BOX {
        return None;
    }
    // The int form carries the sizes, subsizes and starts among the ints, the large one
    // in counts.
    let (numbers, order): (Vec<u64>, c_int) = if ints.len() == 3 * nd + 2 {
        let n = ints[1..=3 * nd].iter().map(|&x| u64::try_from(x).ok());
        (n.collect::<Option<_>>()?, ints[3 * nd + 1])
    } else if ints.len() == 2 && env.counts.len() == 3 * nd {
        let n = env.counts.iter().map(|&x| u64::try_from(x).ok());
        (n.collect::<Option<_>>()?, ints[1])
    } else {
        return None;
    };
    let (sizes, rest) = numbers.split_at(nd);
    let (subsizes, starts) = rest.split_at(nd);
    let order = match order {
        MPI_ORDER_C => Order::C,
        MPI_ORDER_FORTRAN => Order::F,
        _ => return None,
    };
    let elem = old.size as u64;
    let total = sizes.iter().try_fold(elem, |acc, &n| acc.checked_mul(n))?;
    if u64::try_from(ft.extent).ok()? != total || from % bytes != 0 {
        return None;
    }
    let base = (from / bytes).checked_mul(total)?.checked_add(view.disp)?;
    let boxed = starts
        .iter()
        .zip(subsizes)
        .flat_map(|(&s, &n)| [s, n])
        .collect();
    let shape = Shape::Subarray {
        elem,
        sizes: sizes.to_vec(),
        order,
    };
    Some((shape, base, boxed))
}

/// The array layout the group's subarray boxes make (`parts[r].boxed` rank `r`'s): in
/// every dimension the boxes' starts are `0, b, 2b, ...` and each box is `b` long (the
/// last what remains), so the array is distributed `block(b)` on a grid of as many
/// blocks; and rank `r` holds the grid's unit `r`. `None` when they do not.
fn boxes_layout(elem: u64, sizes: &[u64], order: Order, parts: &[Part]) -> Option<Layout> {
    let nd = sizes.len();
    if parts.iter().any(|p| p.boxed.len() != 2 * nd) {
        return None;
    }
    let mut dists = Vec::with_capacity(nd);
    let mut grid = Vec::with_capacity(nd);
    for (d, &n) in sizes.iter().enumerate() {
        let dim = |p: &Part| (p.boxed[2 * d], p.boxed[2 * d + 1]);
        let b = parts.iter().map(dim).find(|&(s, _)| s == 0)?.1;
        if b == 0 {
            return None;
        }
        let blocks = n.div_ceil(b);
        let fits = parts
            .iter()
            .map(dim)
            .all(|(s, len)| s % b == 0 && s < n && len == b.min(n - s));
        if !fits {
            return None;
        }
        dists.push(Dist::Block(Some(b)));
        grid.push(blocks);
    }
    if grid.iter().try_fold(1u64, |acc, &g| acc.checked_mul(g))? != parts.len() as u64 {
        return None;
    }
    let a = ArrayLayout::new(DType::Bytes(elem), sizes.to_vec(), dists, grid, order).ok()?;
    let l = Layout::Array(a);
    // Rank r holds unit r: its first element is the unit's first, its size the unit's.
    let strides = element_strides(sizes, order);
    let holds = parts.iter().enumerate().all(|(r, p)| {
        let first: u64 = (0..nd).map(|d| p.boxed[2 * d] * strides[d]).sum::<u64>() * elem;
        let len: u64 = (0..nd).map(|d| p.boxed[2 * d + 1]).product::<u64>() * elem;
        let unit = r as u64;
        l.local_bytes(unit).ok() == Some(len)
            && l.extents(unit)
                .ok()
                .and_then(|mut e| e.next())
                .map(|x| x.global)
                == Some(first)
    });
    holds.then_some(l)
}

/// Each dimension's stride in elements, in `order`.
fn element_strides(sizes: &[u64], order: Order) -> Vec<u64> {
    let mut strides = vec![1u64; sizes.len()];
    let dims: Vec<usize> = match order {
        Order::C => (0..sizes.len()).rev().collect(),
        Order::F => (0..sizes.len()).collect(),
    };
    let mut acc = 1u64;
    for d in dims {
        strides[d] = acc;
        acc = acc.saturating_mul(sizes[d]);
    }
    strides
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

/// An error of the exchange engine as MPI's, in its class ([`file_class`]).
fn mpi_error(e: FileError, call: &'static str) -> MpiError {
    MpiError::invalid(file_class(&e), format!("{call}: {e}"))
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
    let file = f.file.plain().ok_or_else(|| one_file_only(call))?;
    spools_io::file::write_into(&f.comm, file, &f.path, w.base, data, layout, &opts)
        .map(|_| ())
        .map_err(|e| mpi_error(e, call))
}

/// The error of a whole-array access to a file that is no one plain file (transfer.rs
/// sends a striped set's accesses by their runs instead).
fn one_file_only(call: &'static str) -> MpiError {
    MpiError::invalid(
        MPI_ERR_INTERN,
        format!("{call}: a whole-array access of a file that is not one plain file"),
    )
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
    let file = f.file.plain().ok_or_else(|| one_file_only(call))?;
    spools_io::file::read_from(&f.comm, file, &f.path, w.base, out, layout, &opts)
        .map(|_| ())
        .map_err(|e| mpi_error(e, call))
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The parts of ranks holding `boxes` (start, size per dimension).
    fn parts(boxes: &[&[u64]]) -> Vec<Part> {
        boxes
            .iter()
            .map(|b| Part {
                boxed: b.to_vec(),
                ..Part::default()
            })
            .collect()
    }

    #[test]
    fn subarrays_that_are_a_grids_blocks_make_an_array_layout() {
        // 10 x 7 on 2 x 2: rows block(5), columns block(4) (the last 3 long).
        let ps = parts(&[&[0, 5, 0, 4], &[0, 5, 4, 3], &[5, 5, 0, 4], &[5, 5, 4, 3]]);
        let l = boxes_layout(4, &[10, 7], Order::C, &ps).expect("a layout");
        assert_eq!(l.to_string(), "bytes(4)[10,7] block(5),block(4) on 2x2");
        // In Fortran order too (the first element of rank 1's box, (0, 4), is element
        // 40 of the column-major array).
        let f = boxes_layout(4, &[10, 7], Order::F, &ps).expect("a layout");
        let first = f.extents(1).unwrap().next().unwrap().global;
        assert_eq!(first, 4 * 40);
        // One rank with the whole array.
        let one = boxes_layout(8, &[3, 4, 5], Order::C, &parts(&[&[0, 3, 0, 4, 0, 5]]));
        assert_eq!(one.expect("a layout").total_bytes(), Some(8 * 60));
    }

    #[test]
    fn other_tilings_are_left_to_the_runs_path() {
        let none = |boxes: &[&[u64]]| boxes_layout(4, &[10, 7], Order::C, &parts(boxes));
        // Ranks in column-major order of the grid: rank 1 holds unit 2's box.
        assert!(none(&[&[0, 5, 0, 4], &[5, 5, 0, 4], &[0, 5, 4, 3], &[5, 5, 4, 3]]).is_none());
        // Uneven splits (4, 3, 3 rows) are no block(b).
        let uneven = boxes_layout(4, &[10], Order::C, &parts(&[&[0, 4], &[4, 3], &[7, 3]]));
        assert!(uneven.is_none());
        // A box missing (3 ranks of a 2 x 2 grid), or one twice.
        assert!(none(&[&[0, 5, 0, 4], &[0, 5, 4, 3], &[5, 5, 0, 4]]).is_none());
        assert!(none(&[&[0, 5, 0, 4], &[0, 5, 4, 3], &[5, 5, 0, 4], &[5, 5, 0, 4]]).is_none());
        // Boxes of another dimension count, or past the array.
        assert!(none(&[&[0, 10]]).is_none());
        assert!(none(&[&[0, 10, 0, 7], &[10, 1, 0, 7]]).is_none());
        // A box shorter than its block.
        assert!(none(&[&[0, 5, 0, 7], &[5, 4, 0, 7]]).is_none());
    }
}
