//! Where each byte of a unit's local storage comes from, written straight from the
//! definitions of the distributions (HPF/MPI darray block and block-cyclic, RAID-0, md
//! left-symmetric RAID-5), element by element, sharing no code with `Layout::extents` or
//! the plans: an oracle for tests of the I/O paths that use them.

#![allow(dead_code, clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use spools::Layout;
use spools_map::{Dist, Order};

/// Block size and grid extent of one dimension of `n` indices over `p` coordinates.
fn block_of(d: Dist, n: u64, p: u64) -> u64 {
    match d {
        Dist::Block(None) => n.div_ceil(p).max(1),
        Dist::Block(Some(b)) | Dist::Cyclic(b) => b,
        Dist::Whole => n.max(1),
    }
}

/// Calls `f(local byte, global byte, len)` for every run of unit `me`'s local storage that
/// holds data (parity and unused bytes are skipped): one element at a time for arrays,
/// one block at a time for byte streams.
pub(crate) fn for_each_local(l: &Layout, me: u64, mut f: impl FnMut(u64, u64, u64)) {
    match l {
        Layout::Array(a) => {
            let es = a.dtype().size();
            let shape = a.shape();
            let grid = a.grid();
            let d = shape.len();
            if me >= grid.iter().product::<u64>() {
                return;
            }
            // Units are numbered over the grid row-major (last grid dimension fastest).
            let mut coord = vec![0u64; d];
            let mut rest = me;
            for k in (0..d).rev() {
                coord[k] = rest % grid[k];
                rest /= grid[k];
            }
            let blocks: Vec<u64> = (0..d)
                .map(|k| block_of(a.dists()[k], shape[k], grid[k]))
                .collect();
            // Indices of dimension k held at coordinate coord[k]: i with (i / b) % p == c.
            let owned: Vec<Vec<u64>> = (0..d)
                .map(|k| {
                    (0..shape[k])
                        .filter(|&i| (i / blocks[k]) % grid[k] == coord[k])
                        .collect()
                })
                .collect();
            let count: u64 = owned.iter().map(|o| o.len() as u64).product();
            // Dimensions from the fastest-varying to the slowest, in the array's order
            // (globally and locally alike).
            let fast_to_slow: Vec<usize> = match a.order() {
                Order::C => (0..d).rev().collect(),
                Order::F => (0..d).collect(),
            };
            // Local elements in storage order: an odometer over the owned indices.
            let mut lidx = vec![0usize; d];
            for local in 0..count {
                let mut global = 0u64;
                let mut stride = 1u64;
                for &k in &fast_to_slow {
                    global += owned[k][lidx[k]] * stride;
                    stride *= shape[k];
                }
                f(local * es, global * es, es);
                for &k in &fast_to_slow {
                    lidx[k] += 1;
                    if lidx[k] < owned[k].len() {
                        break;
                    }
                    lidx[k] = 0;
                }
            }
        }
        Layout::Stripe(s) => {
            let (unit, count, size) = (s.unit(), s.count(), s.size().unwrap());
            // Block j of the stream is on unit j mod count, the (j div count)-th there.
            for j in 0.. {
                let g = (j * count + me) * unit;
                if g >= size {
                    break;
                }
                f(j * unit, g, unit.min(size - g));
            }
        }
        Layout::Raid5(r) => {
            let (unit, k, size) = (r.unit(), r.count(), r.size().unwrap());
            // Row `row` holds data blocks row*(k-1) .. (row+1)*(k-1); its parity is on unit
            // k-1 - row mod k, its i-th data block on the i-th unit after the parity.
            for row in 0.. {
                if row * (k - 1) * unit >= size {
                    break;
                }
                let parity = k - 1 - row % k;
                for i in 0..k - 1 {
                    if (parity + 1 + i) % k == me {
                        let g = (row * (k - 1) + i) * unit;
                        if g < size {
                            f(row * unit, g, unit.min(size - g));
                        }
                    }
                }
            }
        }
        other => panic!("no model for {other}"),
    }
}

/// Unit `me`'s local storage under `l` (as long as `local_bytes`), each data byte taken
/// from `byte(global offset)`, the rest 0; with the number of data bytes.
pub(crate) fn local_storage(
    l: &Layout,
    me: u64,
    len: usize,
    byte: impl Fn(u64) -> u8,
) -> (Vec<u8>, u64) {
    let mut b = vec![0u8; len];
    let mut count = 0;
    for_each_local(l, me, |local, global, n| {
        for x in 0..n {
            b[(local + x) as usize] = byte(global + x);
        }
        count += n;
    });
    (b, count)
}
