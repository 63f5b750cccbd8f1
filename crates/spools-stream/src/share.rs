//! The part of a logical connection one receiver holds when the connection's links are
//! spread over several receivers (a job's ranks, link `s` on rank `s % P`), sans-IO: which
//! links it holds, and where their SUs go in the *piece* of each ADU it hands out (the
//! bytes of its links, link after link in increasing order, each link's SUs in TU order:
//! that link's part of the `stripe(unit=SU, count=K)` layout of the ADU).

use spools_proto::stream::{su_range, tus};

/// The links one receiver holds of a connection spread over several receivers.
///
/// The *lead* holds link 0, which carries a piece of every ADU (an ADU's first SU, or an
/// empty ADU's only SU): it hands the ADUs out in the streams' order (sequencing, lock
/// step, missing ADUs), as a receiver of every link does. The others hand each piece out
/// as soon as their links' SUs of it are in, in any order; their consumer takes the piece
/// of the ADU the lead named.
///
/// Each receiver serves its links until the sender ended them, whatever the lead saw: the
/// lead learns that the connection ended from its own links, and the sender may still be
/// sending on the others (its `close` frames, ADUs waiting for their window's acks). A
/// consumer told by the lead that the connection ended lets its own receiver's
/// [`crate::Receiver::serve`] return before it stops it, or exits (docs/streams.md,
/// "Ending a connection").
///
/// ```
/// use spools_stream::Share;
/// // Links 1 and 3 of 4; an ADU of 10 bytes, TUs of 8: SUs of 2 bytes, [2,4) and [6,8)
/// // from TU 0, nothing from TU 1 (its 2 bytes are SU 0's).
/// let s = Share::new(vec![3, 1], false);
/// assert_eq!(s.links(), &[1, 3]);
/// assert_eq!(s.piece_bytes(10, 8, 4), 4);
/// assert_eq!(s.piece_offset(10, 8, 4, 0, 3), Some(2));
/// assert_eq!(s.piece_offset(10, 8, 4, 0, 0), None);
/// ```
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Share {
    links: Vec<u16>,
    lead: bool,
}

impl Share {
    /// Links `links` (any order, duplicates ignored); `lead` for the receiver that holds
    /// link 0 and orders the ADUs.
    pub fn new(mut links: Vec<u16>, lead: bool) -> Share {
        links.sort_unstable();
        links.dedup();
        Share { links, lead }
    }

    /// The links held, in increasing order.
    pub fn links(&self) -> &[u16] {
        &self.links
    }

    /// Whether this is the lead (it orders the ADUs).
    pub fn lead(&self) -> bool {
        self.lead
    }

    /// Whether link `s` is held.
    pub fn holds(&self, s: u16) -> bool {
        self.links.binary_search(&s).is_ok()
    }

    /// Bytes of this share's piece of an ADU of `size` bytes in TUs of `tu` (for a
    /// variable-size ADU, its size) over `k` links.
    pub fn piece_bytes(&self, size: u64, tu: u64, k: u16) -> u64 {
        self.links.iter().map(|&s| link_bytes(size, tu, k, s)).sum()
    }

    /// Where SU `s` of TU `t` goes in the piece (`None` when link `s` is not held or the
    /// SU has no bytes).
    pub fn piece_offset(&self, size: u64, tu: u64, k: u16, t: u64, s: u16) -> Option<u64> {
        if !self.holds(s) {
            return None;
        }
        su_range(size, tu, k, t, s)?;
        let before: u64 = self
            .links
            .iter()
            .take_while(|&&l| l < s)
            .map(|&l| link_bytes(size, tu, k, l))
            .sum();
        Some(before + t * full_su(tu, k, s))
    }
}

/// Bytes link `s` carries of an ADU of `size` bytes in TUs of `tu` over `k` links: its SUs
/// of every TU (0 when it carries none).
pub fn link_bytes(size: u64, tu: u64, k: u16, s: u16) -> u64 {
    let n = tus(size, tu);
    if n == 0 {
        return 0;
    }
    let last = su_range(size, tu, k, n - 1, s).map_or(0, |(_, len)| len);
    (n - 1) * full_su(tu, k, s) + last
}

/// Bytes of SU `s` of a whole TU of `tu` bytes over `k` links.
fn full_su(tu: u64, k: u16, s: u16) -> u64 {
    su_range(tu, tu, k, 0, s).map_or(0, |(_, len)| len)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The pieces of every share of a partition of the links tile each piece exactly, and
    /// every SU lands in its link's place, in TU order.
    #[test]
    fn pieces_tile_the_adu() {
        for k in 1..=5u16 {
            for p in 1..=4u16 {
                for (size, tu) in [(0, 4), (1, 1), (10, 8), (31, 12), (4200, 999), (7, 100)] {
                    let mut total = 0;
                    for r in 0..p {
                        let share = Share::new((0..k).filter(|s| s % p == r).collect(), r == 0);
                        let piece = share.piece_bytes(size, tu, k);
                        total += piece;
                        let mut covered = vec![false; piece as usize];
                        for t in 0..tus(size, tu) {
                            for s in 0..k {
                                let (Some(at), Some((_, len))) = (
                                    share.piece_offset(size, tu, k, t, s),
                                    su_range(size, tu, k, t, s),
                                ) else {
                                    continue;
                                };
                                for b in at..at + len {
                                    assert!(!covered[b as usize], "k {k} p {p} {size}/{tu}");
                                    covered[b as usize] = true;
                                }
                            }
                        }
                        assert!(covered.iter().all(|&c| c), "k {k} p {p} {size}/{tu}");
                    }
                    assert_eq!(total, size, "k {k} p {p} {size}/{tu}");
                }
            }
        }
    }
}
