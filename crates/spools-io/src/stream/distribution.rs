//! The I/O distribution of a stream: an ADU's canonical byte stream striped over the K
//! links as SUs, `stripe(unit=SU, count=K)`, with link `s` (stripe unit `s`) held by a
//! rank chosen round the hosts ([`link_owners`]; on one host, rank `s % P`); and the
//! source layout of a variable-size ADU (every rank's bytes back to back, in rank order).

use spools_map::{IrregularLayout, Layout, StripeLayout};
use spools_proto::stream::{su_range, tus};

use crate::error::StreamError;

/// The rank that owns each link of a connection of `links` links from ranks on `hosts` (a
/// host index per rank, equal indices sharing a host): the links go round the hosts, in
/// the order of their lowest ranks, and round each host's ranks, so that every host sends
/// from links of its own and no host's network carries more than its share. On one host,
/// link `s` is owned by rank `s % P`.
pub(crate) fn link_owners(links: u16, hosts: &[u32]) -> Vec<u32> {
    let mut groups: Vec<(u32, Vec<u32>)> = Vec::new();
    for (r, &h) in hosts.iter().enumerate() {
        match groups.iter_mut().find(|(g, _)| *g == h) {
            Some((_, ranks)) => ranks.push(r as u32),
            None => groups.push((h, vec![r as u32])),
        }
    }
    if groups.is_empty() {
        return vec![0; usize::from(links)];
    }
    (0..usize::from(links))
        .map(|s| {
            let ranks = &groups[s % groups.len()].1;
            ranks[(s / groups.len()) % ranks.len()]
        })
        .collect()
}

/// The links `owners` gives rank `me`, in increasing order.
pub(crate) fn owned_by(owners: &[u32], me: u32) -> Vec<u16> {
    (0..owners.len())
        .filter(|&s| owners[s] == me)
        .map(|s| s as u16)
        .collect()
}

/// The layout of an ADU of `size` (> 0) bytes on the links: SUs of `su` bytes, SU `s` of
/// every TU on link `s`. A TU of `su * links` bytes makes it exactly the SUs of the wire
/// format ([`spools_proto::stream::su_range`]); so does a single TU of `size` bytes with
/// `su = ceil(size / links)` (a variable-size ADU).
pub(crate) fn stripes(size: u64, su: u64, links: u16) -> Result<Layout, StreamError> {
    StripeLayout::new(su, u64::from(links), Some(size))
        .map(Layout::Stripe)
        .map_err(StreamError::from)
}

/// The layout, in the coordinates of a dataset of `size - prefix` bytes, of an ADU of
/// `size` bytes whose first `prefix` bytes (a header, at most one SU: `prefix <= su`) are
/// not the dataset's: link `s` holds the dataset bytes its SUs cover, in ADU order. The
/// owner of link 0 puts the prefix in front of its share.
pub(crate) fn stripes_after(
    size: u64,
    tu: u64,
    links: u16,
    prefix: u64,
) -> Result<Layout, StreamError> {
    let data = size - prefix;
    let mut units = vec![Vec::new(); usize::from(links)];
    for t in 0..tus(size, tu) {
        for (s, unit) in units.iter_mut().enumerate() {
            let Some((off, len)) = su_range(size, tu, links, t, s as u16) else {
                continue;
            };
            let (from, to) = (off.max(prefix), off + len);
            if from < to {
                unit.push((from - prefix, to - from));
            }
        }
    }
    IrregularLayout::new(1, data, units)
        .map(Layout::Irregular)
        .map_err(StreamError::from)
}

/// The source layout of a variable-size ADU: rank `r` holds `counts[r]` bytes, the ADU is
/// every rank's bytes in rank order. `counts` sum to more than 0.
pub(crate) fn concatenated(counts: &[u64]) -> Result<Layout, StreamError> {
    let mut at = 0u64;
    let units = counts
        .iter()
        .map(|&c| {
            let e = if c == 0 { Vec::new() } else { vec![(at, c)] };
            at += c;
            e
        })
        .collect();
    IrregularLayout::new(1, at, units)
        .map(Layout::Irregular)
        .map_err(StreamError::from)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn links_go_round_the_hosts_then_their_ranks() {
        // One host: link s on rank s % P.
        let one = link_owners(8, &[0, 0, 0, 0]);
        assert_eq!(one, vec![0, 1, 2, 3, 0, 1, 2, 3]);
        assert_eq!(owned_by(&one, 1), vec![1, 5]);
        assert_eq!(owned_by(&link_owners(3, &[0; 4]), 3), Vec::<u16>::new());
        // Two hosts of 4 ranks: 4 links, two on each host (s % P would put all four on
        // the first).
        assert_eq!(link_owners(4, &[0, 0, 0, 0, 1, 1, 1, 1]), vec![0, 4, 1, 5]);
        // Hosts interleaved by rank, of unequal sizes; a host index is only a label.
        assert_eq!(link_owners(5, &[7, 3, 7, 7, 3]), vec![0, 1, 2, 4, 3]);
        // Fewer links than hosts: one host each, in the order of their lowest ranks.
        assert_eq!(link_owners(2, &[5, 6, 7]), vec![0, 1]);
        assert_eq!(link_owners(2, &[]), vec![0, 0]);
    }

    #[test]
    fn the_stripes_are_the_wire_formats_sus() {
        // Fixed: TU of 12 over 3 links, an ADU of 31 bytes (a short last TU).
        let l = stripes(31, 4, 3).unwrap();
        for t in 0..3 {
            for s in 0..3u16 {
                if let Some((off, len)) = su_range(31, 12, 3, t, s) {
                    let at = l.locate(off).unwrap();
                    assert_eq!(at.unit, u64::from(s));
                    assert!(at.len >= len, "TU {t} SU {s}");
                }
            }
        }
        // Variable: one TU of 10 bytes over 4 links, SUs of 3 (the last of 1).
        let l = stripes(10, 3, 4).unwrap();
        for s in 0..4u16 {
            let (off, len) = su_range(10, 10, 4, 0, s).unwrap();
            assert_eq!(l.locate(off).map(|x| x.unit), Some(u64::from(s)));
            assert_eq!(l.local_bytes(u64::from(s)).unwrap(), len);
        }
    }

    #[test]
    fn a_prefix_shifts_the_dataset_behind_it() {
        // An ADU of 30 bytes: a header of 4, then 26 bytes of data; TUs of 12 over 3 links.
        let l = stripes_after(30, 12, 3, 4).unwrap();
        assert_eq!(l.total_bytes(), Some(26));
        // Link 0: SUs [0,4) (all header), [12,16), [24,28) -> data [8,12), [20,24).
        assert_eq!(l.local_bytes(0).unwrap(), 8);
        assert_eq!(l.locate(8).map(|x| x.unit), Some(0));
        // Link 1: [4,8), [16,20), [28,30) -> data [0,4), [12,16), [24,26).
        assert_eq!(l.local_bytes(1).unwrap(), 10);
        assert_eq!(l.locate(0).map(|x| x.unit), Some(1));
        assert_eq!(l.local_bytes(2).unwrap(), 8);
    }

    #[test]
    fn a_variable_adu_is_the_ranks_bytes_in_order() {
        let l = concatenated(&[3, 0, 2]).unwrap();
        assert_eq!(l.total_bytes(), Some(5));
        assert_eq!(l.local_bytes(1).unwrap(), 0);
        assert_eq!(l.locate(3).map(|x| x.unit), Some(2));
    }
}
