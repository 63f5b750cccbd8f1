//! Copies of runs with fixed-size loops for the short lengths of element runs (4 to
//! 64 bytes), where a call to `memcpy` with a variable length costs more than the move:
//! one run at a time, or a whole progression of equally spaced runs ([`Strided`]) in one
//! tight loop.
//!
//! [`Strided`]: spools_map::Strided

/// Appends `from` to `out`.
#[inline]
pub(super) fn append_run(out: &mut Vec<u8>, from: &[u8]) {
    match from.len() {
        4 => append_fixed::<4>(out, from),
        8 => append_fixed::<8>(out, from),
        16 => append_fixed::<16>(out, from),
        32 => append_fixed::<32>(out, from),
        64 => append_fixed::<64>(out, from),
        _ => out.extend_from_slice(from),
    }
}

/// Copies `from` into `to` (of the same length).
#[inline]
pub(super) fn copy_run(to: &mut [u8], from: &[u8]) {
    match (to.len(), from.len()) {
        (4, 4) => copy_fixed::<4>(to, from),
        (8, 8) => copy_fixed::<8>(to, from),
        (16, 16) => copy_fixed::<16>(to, from),
        (32, 32) => copy_fixed::<32>(to, from),
        (64, 64) => copy_fixed::<64>(to, from),
        _ => to.copy_from_slice(from),
    }
}

#[inline(always)]
fn append_fixed<const N: usize>(out: &mut Vec<u8>, from: &[u8]) {
    if let Ok(a) = <&[u8; N]>::try_from(from) {
        out.extend_from_slice(a);
    }
}

#[inline(always)]
fn copy_fixed<const N: usize>(to: &mut [u8], from: &[u8]) {
    if let (Ok(t), Ok(f)) = (<&mut [u8; N]>::try_from(to), <&[u8; N]>::try_from(from)) {
        *t = *f;
    }
}

/// Bytes from the first run's start to the last run's end of `count` runs of `len`
/// bytes, `stride` apart (0 for no run).
pub(crate) fn span(len: u64, count: u64, stride: u64) -> u64 {
    count.checked_sub(1).map_or(0, |last| last * stride + len)
}

/// Calls `$f::<N>` with `N` the run length where it is one of the short lengths, else
/// `$f::<0>` (the length given at run time).
macro_rules! by_len {
    ($f:ident, $len:expr, $($arg:expr),*) => {
        match $len {
            4 => $f::<4>($($arg),*),
            8 => $f::<8>($($arg),*),
            16 => $f::<16>($($arg),*),
            _ => $f::<0>($($arg),*),
        }
    };
}

/// Appends `count` runs of `len` bytes to `out`, run `i` at `span[i * stride..]`.
pub(crate) fn gather(out: &mut Vec<u8>, span: &[u8], stride: usize, len: usize, count: usize) {
    if stride == len {
        // The runs are one after the other at the source: one copy.
        out.extend_from_slice(span);
        return;
    }
    out.reserve(len * count);
    by_len!(gather_n, len, out, span, stride, len, count)
}

/// Copies `from` (runs of `len` bytes, one after the other) to `span`, run `i` at
/// `span[i * stride..]`.
pub(crate) fn scatter(span: &mut [u8], stride: usize, from: &[u8], len: usize) {
    if stride == len && span.len() == from.len() {
        // The runs are one after the other at the destination: one copy.
        span.copy_from_slice(from);
        return;
    }
    by_len!(scatter_n, len, span, stride, from, len)
}

/// Copies `count` runs of `len` bytes from `from`, run `i` at `from[i * from_stride..]`,
/// to `to`, run `i` at `to[i * to_stride..]`.
pub(super) fn copy_strided(
    (to, to_stride): (&mut [u8], usize),
    (from, from_stride): (&[u8], usize),
    len: usize,
    count: usize,
) {
    by_len!(copy_n, len, to, to_stride, from, from_stride, len, count)
}

// In the three loops below, `N` is the run length when it is not 0 (a constant, so each
// run's copy is a fixed-size move), else `len`. Spans cover every run (the callers cut
// them with `span`), so no run is skipped.

#[inline(always)]
fn gather_n<const N: usize>(
    out: &mut Vec<u8>,
    span: &[u8],
    stride: usize,
    len: usize,
    count: usize,
) {
    let n = if N == 0 { len } else { N };
    debug_assert!(
        count == 0 || span.len() >= (count - 1) * stride + n,
        "span too short"
    );
    let (Some(total), Some(need)) = (
        n.checked_mul(count),
        count
            .checked_sub(1)
            .and_then(|c| c.checked_mul(stride))
            .and_then(|x| x.checked_add(n)),
    ) else {
        return;
    };
    if n == 0 || span.len() < need {
        for i in 0..count {
            if let Some(run) = span.get(i * stride..i * stride + n) {
                out.extend_from_slice(run);
            }
        }
        return;
    }
    out.reserve(total);
    let at = out.len();
    let spare = &mut out.spare_capacity_mut()[..total];
    for (i, to) in spare.chunks_exact_mut(n).enumerate() {
        let from = &span[i * stride..i * stride + n];
        // SAFETY: `from` and `to` are `n` bytes each (a run of `span`, checked to hold
        // every run above, and a chunk of the spare capacity), and a shared borrow of
        // `span` cannot overlap `out`'s exclusively borrowed spare capacity.
        unsafe {
            std::ptr::copy_nonoverlapping(from.as_ptr(), to.as_mut_ptr().cast::<u8>(), n);
        }
    }
    // SAFETY: the loop wrote all `total` bytes after the old length (`count` chunks of
    // `n`), within the capacity reserved for them.
    unsafe { out.set_len(at + total) };
}

#[inline(always)]
fn scatter_n<const N: usize>(span: &mut [u8], stride: usize, from: &[u8], len: usize) {
    let n = if N == 0 { len } else { N };
    if n == 0 {
        return;
    }
    let count = from.len() / n;
    debug_assert!(
        count == 0 || span.len() >= (count - 1) * stride + n,
        "span too short"
    );
    for (i, run) in from.chunks_exact(n).enumerate() {
        if let Some(to) = span.get_mut(i * stride..i * stride + n) {
            to.copy_from_slice(run);
        }
    }
}

#[inline(always)]
fn copy_n<const N: usize>(
    to: &mut [u8],
    to_stride: usize,
    from: &[u8],
    from_stride: usize,
    len: usize,
    count: usize,
) {
    let n = if N == 0 { len } else { N };
    debug_assert!(
        count == 0
            || (to.len() >= (count - 1) * to_stride + n
                && from.len() >= (count - 1) * from_stride + n),
        "span too short"
    );
    for i in 0..count {
        let (t, f) = (i * to_stride, i * from_stride);
        if let (Some(to), Some(from)) = (to.get_mut(t..t + n), from.get(f..f + n)) {
            to.copy_from_slice(from);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_length_copies_the_same_bytes() {
        for n in 0..80usize {
            let from: Vec<u8> = (0..n as u8).map(|b| b.wrapping_mul(7) ^ 0x5a).collect();
            let mut out = vec![1u8];
            append_run(&mut out, &from);
            assert_eq!(out[1..], from[..], "append {n}");
            let mut to = vec![0u8; n];
            copy_run(&mut to, &from);
            assert_eq!(to, from, "copy {n}");
        }
    }

    #[test]
    fn strided_loops_move_every_run_of_every_length() {
        let src: Vec<u8> = (0..4096u32).map(|b| (b * 7 + b / 255) as u8).collect();
        for len in [1usize, 3, 4, 8, 12, 16, 24, 64] {
            for (stride, to_stride, count) in
                [(len, len, 5), (4 * len, len, 9), (len + 5, 3 * len, 7)]
            {
                let runs = |s: usize| (0..count).map(move |i| i * s);
                let want: Vec<u8> = runs(stride)
                    .flat_map(|a| src[a..a + len].to_vec())
                    .collect();
                let from = &src[..span(len as u64, count as u64, stride as u64) as usize];
                let mut out = vec![9u8];
                gather(&mut out, from, stride, len, count);
                assert_eq!(out[1..], want[..], "gather {len} {stride}");
                let mut to = vec![0u8; span(len as u64, count as u64, to_stride as u64) as usize];
                scatter(&mut to, to_stride, &want, len);
                let back: Vec<u8> = runs(to_stride)
                    .flat_map(|a| to[a..a + len].to_vec())
                    .collect();
                assert_eq!(back, want, "scatter {len} {to_stride}");
                let mut to2 = vec![0u8; to.len()];
                copy_strided((&mut to2, to_stride), (from, stride), len, count);
                assert_eq!(to2, to, "copy {len} {stride} {to_stride}");
            }
        }
        assert_eq!(span(8, 0, 32), 0);
    }
}
