//! The source of the exchange that moves a received ADU into the job's layout: where its
//! bytes are when it arrives, and which rank holds them.
//!
//! A spread connection's ADU is on its K links, link `s`'s SUs (in TU order) on rank
//! `s % P`: the layout `stripe(unit=SU, count=K)` of the ADU when every TU is K whole SUs
//! (the links divide the TU, or the ADU is one TU), else the same units as explicit extents
//! (the last SU of each TU is short). A connection served whole by rank 0 has the ADU
//! there, as unit 0 of a byte stream.

use spools_map::{IrregularLayout, Layout, StripeLayout};
use spools_proto::stream::{su_range, tus};
use spools_stream::link_bytes;

use super::next::Head;
use crate::error::StreamRecvError;
use spools_exchange::Owners;

/// Where an ADU's bytes are when it arrives, and the ranks that hold them (of `ranks`).
pub(crate) fn source(h: &Head, ranks: u32) -> Result<(Layout, Owners), StreamRecvError> {
    let size = h.info.size;
    if !h.spread {
        let whole = StripeLayout::new(size, 1, Some(size))?;
        return Ok((Layout::Stripe(whole), Owners::List(vec![0])));
    }
    let k = h.links;
    let owners = Owners::List((0..k).map(|s| u32::from(s) % ranks.max(1)).collect());
    let su = h.tu.div_ceil(u64::from(k));
    if h.tu % u64::from(k) == 0 || size <= h.tu {
        let l = StripeLayout::new(su, u64::from(k), Some(size))?;
        return Ok((Layout::Stripe(l), owners));
    }
    let mut units = vec![Vec::new(); usize::from(k)];
    for t in 0..tus(size, h.tu) {
        for (s, unit) in units.iter_mut().enumerate() {
            if let Some(extent) = su_range(size, h.tu, k, t, s as u16) {
                unit.push(extent);
            }
        }
    }
    Ok((
        Layout::Irregular(IrregularLayout::new(1, size, units)?),
        owners,
    ))
}

/// This rank's piece of the ADU cut into its links' units, for the exchange: (link, bytes),
/// the links of rank `me` of `ranks` in increasing order (the order of the piece).
pub(crate) fn units<'a>(h: &Head, me: u32, ranks: u32, piece: &'a [u8]) -> Vec<(u64, &'a [u8])> {
    if !h.spread {
        return if me == 0 {
            vec![(0, piece)]
        } else {
            Vec::new()
        };
    }
    let mut at = 0usize;
    let mut out = Vec::new();
    for s in (0..h.links).filter(|&s| u32::from(s) % ranks.max(1) == me) {
        let len = link_bytes(h.info.size, h.tu, h.links, s) as usize;
        if let Some(b) = piece.get(at..at + len) {
            out.push((u64::from(s), b));
        }
        at += len;
    }
    out
}

/// Bytes of rank `me`'s piece of the ADU (of `ranks`).
pub(crate) fn piece_bytes(h: &Head, me: u32, ranks: u32) -> u64 {
    if !h.spread {
        return if me == 0 { h.info.size } else { 0 };
    }
    (0..h.links)
        .filter(|&s| u32::from(s) % ranks.max(1) == me)
        .map(|s| link_bytes(h.info.size, h.tu, h.links, s))
        .sum()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::stream::AduInfo;

    fn head(size: u64, tu: u64, links: u16) -> Head {
        Head {
            info: AduInfo {
                stream: 1,
                adu: 0,
                size,
            },
            tu,
            links,
            spread: true,
        }
    }

    /// Every SU of the wire format is on its link's unit, at the place the piece has it.
    #[test]
    fn the_source_is_the_wire_formats_sus() {
        for (size, tu, k) in [
            (4200, 1000, 2),
            (4200, 999, 3),
            (10, 8, 4),
            (7, 100, 5),
            (31, 12, 3),
        ] {
            let h = head(size, tu, k);
            let (l, _) = source(&h, 4).unwrap();
            assert_eq!(l.total_bytes(), Some(size));
            for s in 0..k {
                assert_eq!(
                    l.local_bytes(u64::from(s)).unwrap(),
                    link_bytes(size, tu, k, s),
                    "{size}/{tu}/{k} link {s}"
                );
            }
            for t in 0..tus(size, tu) {
                for s in 0..k {
                    if let Some((off, len)) = su_range(size, tu, k, t, s) {
                        let at = l.locate(off).unwrap();
                        assert_eq!(at.unit, u64::from(s), "{size}/{tu}/{k} TU {t} SU {s}");
                        assert!(at.len >= len);
                    }
                }
            }
        }
    }
}
