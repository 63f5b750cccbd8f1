//! A datatype's blocks as strided progressions (runs of equal length at equal distances),
//! and the packing and unpacking loops over them: one loop per progression, with a
//! fixed-width load and store per block where the length is 1, 2, 4, 8 or 16 bytes,
//! instead of a `memcpy` call per block. A vector of 2²⁰ doubles is one progression.

/// `n` blocks of `len` bytes, block `k` at byte offset `off + k * stride`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Prog {
    pub(crate) off: isize,
    pub(crate) len: usize,
    pub(crate) stride: isize,
    pub(crate) n: usize,
}

/// The progressions of one element's `blocks`, in their order (the packed order).
pub(crate) fn progressions(blocks: &[(isize, usize)]) -> Vec<Prog> {
    let mut out: Vec<Prog> = Vec::new();
    for &(off, len) in blocks {
        if let Some(p) = out.last_mut() {
            if p.len == len {
                if p.n == 1 {
                    p.stride = off.wrapping_sub(p.off);
                    p.n = 2;
                    continue;
                }
                let next = (p.n as isize)
                    .checked_mul(p.stride)
                    .and_then(|d| p.off.checked_add(d));
                if next == Some(off) {
                    p.n += 1;
                    continue;
                }
            }
        }
        out.push(Prog {
            off,
            len,
            stride: len as isize,
            n: 1,
        });
    }
    out
}

/// The progressions of `count` elements `extent` apart, when they are one: a single
/// progression per element whose next block would be the next element's first.
pub(crate) fn across(progs: &[Prog], count: usize, extent: isize) -> Option<Prog> {
    let [p] = progs else { return None };
    if p.n == 1 {
        return Some(Prog {
            off: p.off,
            len: p.len,
            stride: extent,
            n: p.n.checked_mul(count)?,
        });
    }
    if (p.n as isize).checked_mul(p.stride) == Some(extent) {
        return Some(Prog {
            n: p.n.checked_mul(count)?,
            ..*p
        });
    }
    None
}

/// Copies the blocks of `p` at `base` (strided) to `out` (contiguous, `p.n * p.len`
/// bytes); returns the end of what it wrote.
///
/// # Safety
/// The blocks of `p` at `base` are readable (`base` may be null with absolute offsets:
/// the addresses are formed with wrapping arithmetic); `out` has room; the two do not
/// overlap.
pub(crate) unsafe fn gather(base: *const u8, p: &Prog, out: *mut u8) -> *mut u8 {
    let from = base.wrapping_offset(p.off);
    // SAFETY: the caller's contract, passed on.
    unsafe {
        match p.len {
            1 => gather_n::<1>(from, p.stride, p.n, out),
            2 => gather_n::<2>(from, p.stride, p.n, out),
            4 => gather_n::<4>(from, p.stride, p.n, out),
            8 => gather_n::<8>(from, p.stride, p.n, out),
            16 => gather_n::<16>(from, p.stride, p.n, out),
            len => {
                for k in 0..p.n {
                    std::ptr::copy_nonoverlapping(
                        from.wrapping_offset(k as isize * p.stride),
                        out.add(k * len),
                        len,
                    );
                }
            }
        }
        out.add(p.n * p.len)
    }
}

/// Copies `p.n * p.len` contiguous bytes at `data` out to the blocks of `p` at `base`;
/// returns the end of what it read.
///
/// # Safety
/// As [`gather`], the other way: `data` readable, the blocks at `base` writable.
pub(crate) unsafe fn scatter(data: *const u8, p: &Prog, base: *mut u8) -> *const u8 {
    let to = base.wrapping_offset(p.off);
    // SAFETY: the caller's contract, passed on.
    unsafe {
        match p.len {
            1 => scatter_n::<1>(data, to, p.stride, p.n),
            2 => scatter_n::<2>(data, to, p.stride, p.n),
            4 => scatter_n::<4>(data, to, p.stride, p.n),
            8 => scatter_n::<8>(data, to, p.stride, p.n),
            16 => scatter_n::<16>(data, to, p.stride, p.n),
            len => {
                for k in 0..p.n {
                    std::ptr::copy_nonoverlapping(
                        data.add(k * len),
                        to.wrapping_offset(k as isize * p.stride),
                        len,
                    );
                }
            }
        }
        data.add(p.n * p.len)
    }
}

/// Which way [`copy_at`] copies.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Way {
    /// From the packed bytes out to the elements (unpacking).
    Unpack,
    /// From the elements into the packed bytes (packing).
    Pack,
}

/// Copies the packed bytes `offset..offset + len` of elements of a type (one element's
/// progressions `progs`, `size` bytes of data, `extent` apart, at `base`) from or to
/// `packed`, as `way` says. The start is found by whole progressions, not block by
/// block, so a message that moves in pieces costs no more than one that moves whole.
///
/// # Safety
/// The elements of the type at `base` that those packed bytes belong to are readable
/// (packing) or writable (unpacking; the addresses are formed with wrapping
/// arithmetic); `packed` holds `len` bytes, writable when packing, and does not overlap
/// them; `size` is the sum of the progressions' bytes.
#[allow(clippy::too_many_arguments)]
pub(crate) unsafe fn copy_at(
    way: Way,
    progs: &[Prog],
    size: usize,
    extent: isize,
    base: *mut u8,
    offset: usize,
    packed: *mut u8,
    len: usize,
) {
    if size == 0 {
        return;
    }
    // Whole blocks of `p` at element `at`, from packed position `from`; `n` bytes of
    // one block at `block` from packed position `from`.
    let blocks = |p: &Prog, at: *mut u8, from: *mut u8| {
        // SAFETY: the caller's contract, for the blocks the caller names.
        unsafe {
            match way {
                Way::Unpack => {
                    scatter(from, p, at);
                }
                Way::Pack => {
                    gather(at, p, from);
                }
            }
        }
    };
    let part = |block: *mut u8, from: *mut u8, n: usize| {
        // SAFETY: as above.
        unsafe {
            match way {
                Way::Unpack => std::ptr::copy_nonoverlapping(from, block, n),
                Way::Pack => std::ptr::copy_nonoverlapping(block, from, n),
            }
        }
    };
    let mut elem = offset / size;
    let mut skip = offset % size;
    let mut done = 0usize;
    while done < len {
        let left = len - done;
        let at = base.wrapping_offset((elem as isize).wrapping_mul(extent));
        if skip == 0 {
            let whole = left / size;
            if let Some(p) = across(progs, whole, extent).filter(|_| whole > 0) {
                blocks(&p, at, packed.wrapping_add(done));
                done += whole * size;
                elem += whole;
                continue;
            }
        }
        for p in progs {
            let bytes = p.n * p.len;
            if skip >= bytes {
                skip -= bytes;
                continue;
            }
            let mut k = skip / p.len;
            let within = skip % p.len;
            skip = 0;
            let block = |k: usize| {
                at.wrapping_offset(p.off.wrapping_add((k as isize).wrapping_mul(p.stride)))
            };
            if within > 0 {
                let n = (p.len - within).min(len - done);
                part(block(k).wrapping_add(within), packed.wrapping_add(done), n);
                done += n;
                k += 1;
            }
            let m = (p.n - k).min((len - done) / p.len);
            if m > 0 {
                let q = Prog {
                    off: p.off.wrapping_add((k as isize).wrapping_mul(p.stride)),
                    n: m,
                    ..*p
                };
                blocks(&q, at, packed.wrapping_add(done));
                done += m * p.len;
                k += m;
            }
            if k < p.n && done < len {
                // Less than a block left: the start of block `k`.
                part(block(k), packed.wrapping_add(done), len - done);
                return;
            }
            if done == len {
                return;
            }
        }
        elem += 1;
    }
}

/// # Safety
/// As [`gather`], for blocks of `N` bytes.
#[inline(always)]
unsafe fn gather_n<const N: usize>(from: *const u8, stride: isize, n: usize, out: *mut u8) {
    for k in 0..n {
        // SAFETY: block `k` is readable and slot `k` of `out` writable (the caller's
        // contract); unaligned accesses of `[u8; N]`.
        unsafe {
            let v = std::ptr::read_unaligned(
                from.wrapping_offset(k as isize * stride).cast::<[u8; N]>(),
            );
            std::ptr::write_unaligned(out.add(k * N).cast::<[u8; N]>(), v);
        }
    }
}

/// # Safety
/// As [`scatter`], for blocks of `N` bytes.
#[inline(always)]
unsafe fn scatter_n<const N: usize>(data: *const u8, to: *mut u8, stride: isize, n: usize) {
    for k in 0..n {
        // SAFETY: slot `k` of `data` is readable and block `k` writable (the caller's
        // contract); unaligned accesses of `[u8; N]`.
        unsafe {
            let v = std::ptr::read_unaligned(data.add(k * N).cast::<[u8; N]>());
            std::ptr::write_unaligned(to.wrapping_offset(k as isize * stride).cast::<[u8; N]>(), v);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_vector_is_one_progression() {
        let blocks: Vec<(isize, usize)> = (0..5).map(|k| (k * 16, 8)).collect();
        let p = progressions(&blocks);
        assert_eq!(
            p,
            [Prog {
                off: 0,
                len: 8,
                stride: 16,
                n: 5
            }]
        );
        // Elements 80 bytes apart continue it; 96 apart do not.
        assert_eq!(across(&p, 3, 80).map(|q| q.n), Some(15));
        assert_eq!(across(&p, 3, 96), None);
    }

    #[test]
    fn lengths_and_gaps_that_change_start_new_progressions() {
        let blocks = [
            (0, 4),
            (8, 4),
            (16, 4),
            (20, 4),
            (100, 2),
            (96, 2),
            (92, 2),
            (0, 3),
        ];
        let p = progressions(&blocks);
        let lens: Vec<_> = p.iter().map(|q| (q.off, q.len, q.stride, q.n)).collect();
        assert_eq!(
            lens,
            [(0, 4, 8, 3), (20, 4, 4, 1), (100, 2, -4, 3), (0, 3, 3, 1)]
        );
        // Gathering and scattering back give the blocks' bytes in order.
        let src: Vec<u8> = (0..=255).collect();
        let mut packed = vec![0u8; blocks.iter().map(|b| b.1).sum()];
        let mut at = packed.as_mut_ptr();
        for q in &p {
            // SAFETY: every block lies within `src`; `packed` holds them all.
            at = unsafe { gather(src.as_ptr(), q, at) };
        }
        let want: Vec<u8> = blocks
            .iter()
            .flat_map(|&(o, l)| src[o as usize..o as usize + l].to_vec())
            .collect();
        assert_eq!(packed, want);
        let mut back = vec![0u8; 256];
        let mut from = packed.as_ptr();
        for q in &p {
            // SAFETY: as above, the other way.
            from = unsafe { scatter(from, q, back.as_mut_ptr()) };
        }
        for &(o, l) in &blocks {
            assert_eq!(
                back[o as usize..o as usize + l],
                src[o as usize..o as usize + l]
            );
        }
    }

    #[test]
    fn pieces_at_any_offset_land_where_the_whole_would() {
        // Two progressions per element (3 x 8 bytes 16 apart, then 5 bytes), extent 64,
        // 4 elements: 29 bytes of data each.
        let blocks = [(0, 8), (16, 8), (32, 8), (50, 5)];
        let p = progressions(&blocks);
        let (size, extent, count) = (29usize, 64isize, 4usize);
        let packed: Vec<u8> = (1..=(size * count) as u8).collect();
        let want = {
            let mut m = vec![0u8; 256];
            let mut at = 0;
            for e in 0..count {
                for &(o, l) in &blocks {
                    let to = e * extent as usize + o as usize;
                    m[to..to + l].copy_from_slice(&packed[at..at + l]);
                    at += l;
                }
            }
            m
        };
        // Copies all of `packed` one way, `piece` bytes at a time.
        let in_pieces = |way: Way, m: &mut [u8], packed: &mut [u8], piece: usize| {
            let mut off = 0;
            while off < packed.len() {
                let end = (off + piece).min(packed.len());
                // SAFETY: every element lies within `m`; `packed[off..end]` is ours.
                unsafe {
                    copy_at(
                        way,
                        &p,
                        size,
                        extent,
                        m.as_mut_ptr(),
                        off,
                        packed[off..].as_mut_ptr(),
                        end - off,
                    )
                };
                off = end;
            }
        };
        for piece in [1, 3, 7, 8, 29, 30, 58, 116] {
            let mut m = vec![0u8; 256];
            in_pieces(Way::Unpack, &mut m, &mut packed.clone(), piece);
            assert_eq!(m, want, "pieces of {piece}");
            // Packed back in the same pieces: the packed bytes.
            let mut back = vec![0u8; packed.len()];
            in_pieces(Way::Pack, &mut m, &mut back, piece);
            assert_eq!(back, packed, "packed in pieces of {piece}");
        }
        // A vector's pieces continue across elements in one progression.
        let v = progressions(&[(0, 4), (8, 4)]);
        let data: Vec<u8> = (1..=24).collect();
        let mut m = vec![0u8; 48];
        // SAFETY: three elements of extent 16 lie within `m`.
        unsafe {
            copy_at(
                Way::Unpack,
                &v,
                8,
                16,
                m.as_mut_ptr(),
                0,
                data.as_ptr().cast_mut(),
                24,
            )
        };
        assert_eq!(&m[16..28], &[9, 10, 11, 12, 0, 0, 0, 0, 13, 14, 15, 16]);
    }
}
