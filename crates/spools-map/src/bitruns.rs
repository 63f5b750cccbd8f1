//! Runs between two bit-permutation layouts, straight from the composite permutation.

use crate::bits::BitPerm;
use crate::product::RawRun;

/// The composite `M1^-1 o M2` of two bit layouts, ready to enumerate runs.
///
/// A source word `s << Ls | l` maps to the destination word `C(s << Ls | l)`. The low `k`
/// bits that `C` leaves in place (and that are local on both sides) give runs of `2^k`
/// bytes. Destination unit bits fed by source unit bits are fixed for a given source unit;
/// those fed by source local bits select which chunks go to which destination.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct BitComposite {
    comp: BitPerm,
    lb_src: u32,
    lb_dst: u32,
    k: u32,
}

impl BitComposite {
    pub(crate) fn new(comp: BitPerm, lb_src: u32, lb_dst: u32) -> Self {
        let k = comp.fixed_low_bits().min(lb_src).min(lb_dst);
        BitComposite {
            comp,
            lb_src,
            lb_dst,
            k,
        }
    }

    /// `(source local bit, destination unit bit index)` for dst unit bits fed by local bits,
    /// and the dst unit bits that source unit `s` fixes.
    fn unit_feed(&self, s: u64) -> (Vec<(u32, u32)>, u64) {
        let mut free = Vec::new();
        let mut fixed = 0u64;
        for j in self.lb_dst..self.comp.width() {
            let src_bit = self.comp.map()[j as usize];
            let i = j - self.lb_dst;
            if src_bit >= self.lb_src {
                fixed |= ((s >> (src_bit - self.lb_src)) & 1) << i;
            } else {
                free.push((src_bit, i));
            }
        }
        (free, fixed)
    }

    /// Destination units that source unit `s` sends to, in increasing order.
    pub(crate) fn peers(&self, s: u64) -> Vec<u64> {
        let (free, fixed) = self.unit_feed(s);
        let mut out: Vec<u64> = (0..1u64 << free.len())
            .map(|c| {
                free.iter()
                    .enumerate()
                    .fold(fixed, |d, (t, &(_, i))| d | ((c >> t) & 1) << i)
            })
            .collect();
        out.sort_unstable();
        out
    }

    /// Runs from source unit `s` to destination unit `d`, in source order.
    pub(crate) fn runs(&self, s: u64, d: u64) -> BitRuns {
        let (free, fixed) = self.unit_feed(s);
        let mut required = 0u64;
        let mut constrained = 0u64;
        for &(src_bit, i) in &free {
            constrained |= 1 << src_bit;
            required |= ((d >> i) & 1) << src_bit;
        }
        let free_mask = free.iter().fold(0u64, |acc, &(_, i)| acc | 1 << i);
        let matches = d & !free_mask == fixed;
        let positions: Vec<u32> = (self.k..self.lb_src)
            .filter(|b| constrained & (1 << b) == 0)
            .collect();
        BitRuns {
            comp: self.clone(),
            s,
            required,
            count: if matches { 1u64 << positions.len() } else { 0 },
            positions,
            next: 0,
        }
    }
}

/// Lazy runs of one pair of units; see [`BitComposite::runs`].
#[derive(Clone, Debug)]
pub(crate) struct BitRuns {
    comp: BitComposite,
    s: u64,
    required: u64,
    positions: Vec<u32>,
    count: u64,
    next: u64,
}

impl Iterator for BitRuns {
    type Item = RawRun;

    fn next(&mut self) -> Option<RawRun> {
        if self.next >= self.count {
            return None;
        }
        let c = self.next;
        self.next += 1;
        let l = self
            .positions
            .iter()
            .enumerate()
            .fold(self.required, |acc, (t, &p)| acc | ((c >> t) & 1) << p);
        let w = self.comp.comp.apply(self.s << self.comp.lb_src | l);
        let mask = (1u64 << self.comp.lb_dst) - 1;
        Some((l, w & mask, 1 << self.comp.k))
    }
}
