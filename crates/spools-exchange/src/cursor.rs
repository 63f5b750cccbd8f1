//! A pipe's runs packed into frames and scattered out of them by progressions: the runs
//! of a plan between two units, as equally spaced groups (the engine's `Pieces`), cut at frame
//! boundaries anywhere, each group copied in one strided loop (a `cyclic` record's
//! single-element runs cost a few nanoseconds each, not a call per run). Sans-IO.

use spools_map::Runs;

use crate::pieces::Pieces;
use crate::short_copy::{gather, scatter, span};

/// The rest of a pair's runs, handed out a frame at a time.
///
/// ```
/// use spools_exchange::cursor::RunCursor;
/// use spools_map::{Layout, Plan};
/// let a: Layout = "u8[8] block on 1".parse()?;
/// let b: Layout = "u8[8] cyclic on 2".parse()?;
/// let plan = Plan::new(&a, &b)?;
/// let mut c = RunCursor::new(plan.runs(0, 1)?);
/// let src: Vec<u8> = (0..8).collect();
/// let mut frame = Vec::new();
/// c.pack(&src, 3, &mut frame)?;
/// assert_eq!(frame, [1, 3, 5]);
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
#[derive(Clone, Debug)]
pub struct RunCursor {
    pieces: Pieces,
}

/// A run that falls outside a buffer: the bytes the buffer would need, and its length.
#[derive(Clone, Copy, Debug, PartialEq, Eq, thiserror::Error)]
#[error("a run needs {need} bytes of a buffer of {got}")]
pub struct Outside {
    /// The bytes the buffer would need.
    pub need: u64,
    /// Its length.
    pub got: u64,
}

/// `buf[at .. at + span]` of `count` runs of `len` bytes `stride` apart, or where it falls
/// outside.
fn range(
    len: u64,
    count: u64,
    stride: u64,
    at: u64,
    buf: usize,
) -> Result<(usize, usize), Outside> {
    let end = at.saturating_add(span(len, count, stride));
    match (usize::try_from(at), usize::try_from(end)) {
        (Ok(a), Ok(b)) if b <= buf => Ok((a, b)),
        _ => Err(Outside {
            need: end,
            got: buf as u64,
        }),
    }
}

impl RunCursor {
    /// A cursor at the start of `runs`.
    pub fn new(runs: Runs) -> Self {
        RunCursor {
            pieces: Pieces::new(runs.strided()),
        }
    }

    /// Appends to `out` the next at most `limit` bytes of the runs, gathered from their
    /// source offsets in `src`; returns the bytes appended (fewer than `limit` only at the
    /// end of the runs).
    ///
    /// # Errors
    /// [`Outside`] when a run lies beyond `src` (nothing of that run is appended).
    pub fn pack(&mut self, src: &[u8], limit: u64, out: &mut Vec<u8>) -> Result<u64, Outside> {
        let mut got = 0;
        while got < limit {
            let Some(p) = self.pieces.take(limit - got) else {
                break;
            };
            let (a, b) = range(p.len, p.count, p.src_stride, p.src, src.len())?;
            gather(
                out,
                &src[a..b],
                p.src_stride as usize,
                p.len as usize,
                p.count as usize,
            );
            got += p.bytes();
        }
        Ok(got)
    }

    /// Scatters `from`, the next `from.len()` bytes of the runs, to their destination
    /// offsets in `dst`; returns the bytes placed (fewer than `from.len()` only when the
    /// runs end first).
    ///
    /// # Errors
    /// [`Outside`] when a run lies beyond `dst`.
    pub fn unpack(&mut self, from: &[u8], dst: &mut [u8]) -> Result<u64, Outside> {
        let mut at = 0usize;
        while at < from.len() {
            let Some(p) = self.pieces.take((from.len() - at) as u64) else {
                break;
            };
            let (a, b) = range(p.len, p.count, p.dst_stride, p.dst, dst.len())?;
            let n = p.bytes() as usize;
            scatter(
                &mut dst[a..b],
                p.dst_stride as usize,
                &from[at..at + n],
                p.len as usize,
            );
            at += n;
        }
        Ok(at as u64)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use spools_map::{Layout, Plan};

    /// Packing in frames of any size and scattering them again moves every byte of the
    /// plan where the run-by-run model puts it.
    #[test]
    fn frames_of_any_size_carry_the_runs_in_order() {
        for (from, to) in [
            ("i64[1000] block on 2", "i64[1000] cyclic on 3"),
            ("i32[999] block on 3", "i32[999] cyclic on 2"),
            ("f64[20,30] block,* on 2x1", "f64[20,30] *,cyclic on 1x3"),
            ("u8[500] cyclic(7) on 3", "u8[500] block on 2"),
        ] {
            let (from, to): (Layout, Layout) = (from.parse().unwrap(), to.parse().unwrap());
            let plan = Plan::new(&from, &to).unwrap();
            for s in 0..from.units() {
                let src: Vec<u8> = (0..from.local_bytes(s).unwrap())
                    .map(|i| (i * 7 + s * 13 + i / 251) as u8)
                    .collect();
                for d in 0..to.units() {
                    let n = to.local_bytes(d).unwrap() as usize;
                    let mut want = vec![0u8; n];
                    let mut stream = Vec::new();
                    for r in plan.runs(s, d).unwrap() {
                        let (a, b) = (r.src as usize, (r.src + r.len) as usize);
                        want[r.dst as usize..r.dst as usize + (b - a)].copy_from_slice(&src[a..b]);
                        stream.extend_from_slice(&src[a..b]);
                    }
                    for limit in [1u64, 3, 8, 20, 4096, 1 << 20] {
                        let mut packer = RunCursor::new(plan.runs(s, d).unwrap());
                        let mut frames = Vec::new();
                        loop {
                            let mut f = Vec::new();
                            let got = packer.pack(&src, limit, &mut f).unwrap();
                            assert_eq!(got as usize, f.len());
                            assert!(got <= limit);
                            if got == 0 {
                                break;
                            }
                            frames.push(f);
                        }
                        assert_eq!(frames.concat(), stream, "pack {s}->{d} limit {limit}");
                        let mut unpacker = RunCursor::new(plan.runs(s, d).unwrap());
                        let mut got = vec![0u8; n];
                        for f in &frames {
                            assert_eq!(unpacker.unpack(f, &mut got).unwrap(), f.len() as u64);
                        }
                        assert_eq!(got, want, "unpack {s}->{d} limit {limit}");
                    }
                }
            }
        }
    }

    /// Buffers too short for the runs are reported, never indexed out of bounds.
    #[test]
    fn runs_beyond_a_buffer_are_errors() {
        let from: Layout = "i64[100] block on 1".parse().unwrap();
        let to: Layout = "i64[100] cyclic on 2".parse().unwrap();
        let plan = Plan::new(&from, &to).unwrap();
        let mut c = RunCursor::new(plan.runs(0, 1).unwrap());
        let mut out = Vec::new();
        assert!(c.pack(&[0u8; 100], 1 << 20, &mut out).is_err());
        let mut c = RunCursor::new(plan.runs(0, 1).unwrap());
        assert!(c.unpack(&[0u8; 400], &mut [0u8; 100]).is_err());
    }
}
