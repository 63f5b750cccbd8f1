//! Trees over a host's ranks: k-nomial within each level of the topology (L3 groups inside
//! sockets inside the host), so that ranks sharing a cache talk to each other and one
//! rank per group crosses to the next level.

use std::collections::BTreeMap;

use crate::topology::Topology;

/// A tree over ranks `0..n`: each rank's parent and children, children in the order a
/// parent serves them (the largest subtree, the farthest, first).
///
/// ```
/// use spools_coll::{Topology, Tree};
/// let t = Tree::knomial(8, 0, 2);
/// assert_eq!(t.children(0), &[4, 2, 1]);
/// assert_eq!(t.parent(6), Some(4));
/// assert_eq!(t.depth(), 3);
/// // On 2 sockets, one rank of the far socket is the root's child.
/// let h = Tree::hierarchical(&Topology::sockets(16, 2), 0, 2);
/// assert_eq!(h.children(0)[0], 8);
/// ```
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Tree {
    root: usize,
    parent: Vec<Option<usize>>,
    children: Vec<Vec<usize>>,
}

impl Tree {
    /// The flat tree: every other rank a child of `root`.
    pub fn flat(n: usize, root: usize) -> Tree {
        let mut t = Tree::empty(n, root);
        for r in (0..n).filter(|&r| r != root) {
            t.link(root, r);
        }
        t
    }

    /// The k-nomial tree of radix `radix` (at least 2) over ranks `0..n` rooted at `root`
    /// (ranks renumbered so that `root` is 0).
    pub fn knomial(n: usize, root: usize, radix: usize) -> Tree {
        let members: Vec<usize> = (0..n).map(|i| (i + root) % n.max(1)).collect();
        let mut t = Tree::empty(n, root);
        knomial_over(&mut t, &members, radix);
        t
    }

    /// A tree by levels of `topo`: a k-nomial tree of radix `radix` over one leader per
    /// socket (the root for its own), under each of them over one leader per L3 group of
    /// the socket, and under each of those over the group's ranks. A rank serves the
    /// children of its highest level first.
    pub fn hierarchical(topo: &Topology, root: usize, radix: usize) -> Tree {
        let n = topo.ranks();
        let mut t = Tree::empty(n, root);
        if n == 0 {
            return t;
        }
        let places = topo.places();
        // Socket -> L3 group -> ranks, each list led by the root where it is a member,
        // else by its lowest rank.
        let mut sockets: BTreeMap<u16, BTreeMap<u16, Vec<usize>>> = BTreeMap::new();
        for (r, p) in places.iter().enumerate() {
            sockets
                .entry(p.socket)
                .or_default()
                .entry(p.l3)
                .or_default()
                .push(r);
        }
        let lead = |v: &mut Vec<usize>| {
            if let Some(i) = v.iter().position(|&r| r == root) {
                v.swap(0, i);
                v[1..].sort_unstable();
            }
        };
        let mut socket_leaders = Vec::new();
        let mut l3_levels = Vec::new();
        let mut groups = Vec::new();
        for l3s in sockets.values_mut() {
            let mut l3_leaders = Vec::new();
            for members in l3s.values_mut() {
                lead(members);
                l3_leaders.push(members[0]);
                groups.push(members.clone());
            }
            lead(&mut l3_leaders);
            socket_leaders.push(l3_leaders[0]);
            l3_levels.push(l3_leaders);
        }
        lead(&mut socket_leaders);
        knomial_over(&mut t, &socket_leaders, radix);
        for l in &l3_levels {
            knomial_over(&mut t, l, radix);
        }
        for g in &groups {
            knomial_over(&mut t, g, radix);
        }
        t
    }

    fn empty(n: usize, root: usize) -> Tree {
        Tree {
            root,
            parent: vec![None; n],
            children: vec![Vec::new(); n],
        }
    }

    fn link(&mut self, parent: usize, child: usize) {
        self.parent[child] = Some(parent);
        self.children[parent].push(child);
    }

    /// The root.
    pub fn root(&self) -> usize {
        self.root
    }

    /// The number of ranks.
    pub fn ranks(&self) -> usize {
        self.parent.len()
    }

    /// Rank `r`'s parent (`None` for the root).
    pub fn parent(&self, r: usize) -> Option<usize> {
        self.parent.get(r).copied().flatten()
    }

    /// Rank `r`'s children, in the order it serves them.
    pub fn children(&self, r: usize) -> &[usize] {
        self.children.get(r).map_or(&[], Vec::as_slice)
    }

    /// The most edges from the root to a rank.
    pub fn depth(&self) -> usize {
        (0..self.ranks())
            .map(|mut r| {
                let mut d = 0;
                while let Some(p) = self.parent(r) {
                    r = p;
                    d += 1;
                }
                d
            })
            .max()
            .unwrap_or(0)
    }
}

/// Links the k-nomial tree of `radix` over `members` (rooted at `members[0]`) into `t`;
/// a member's children at this level come after those it already has (from a higher
/// level).
fn knomial_over(t: &mut Tree, members: &[usize], radix: usize) {
    let (n, k) = (members.len(), radix.max(2));
    for (i, &m) in members.iter().enumerate() {
        // The span of i's subtree: k^(trailing zero digits of i in base k), or past n for 0.
        let mut span = 1;
        while span < n && i % (span * k) == 0 {
            span *= k;
        }
        // Children from the largest subtree down.
        let mut step = span / k;
        while step >= 1 {
            for j in 1..k {
                let c = i + j * step;
                if c < n && c > i {
                    t.link(m, members[c]);
                }
            }
            step /= k;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn covers(t: &Tree) {
        for r in 0..t.ranks() {
            if r == t.root() {
                assert_eq!(t.parent(r), None);
            } else {
                let p = t.parent(r).unwrap_or(usize::MAX);
                assert!(t.children(p).contains(&r), "{r} not a child of {p}");
            }
        }
        let edges: usize = (0..t.ranks()).map(|r| t.children(r).len()).sum();
        assert_eq!(edges, t.ranks().saturating_sub(1));
    }

    #[test]
    fn knomial_trees_cover_every_rank_once() {
        for n in 1..70usize {
            for k in 2..6 {
                for root in [0, n / 2, n.saturating_sub(1)] {
                    let t = Tree::knomial(n, root, k);
                    covers(&t);
                    assert!(t.depth() <= (n as f64).log(k as f64).ceil() as usize * (k - 1) + 1);
                }
            }
        }
    }

    #[test]
    fn hierarchical_trees_cover_every_rank_and_cross_once_per_group() {
        for topo in [
            Topology::flat(9),
            Topology::sockets(64, 2),
            Topology::l3_groups(64, 8, 4),
            Topology::l3_groups(13, 4, 2),
        ] {
            for root in [0, 5] {
                let t = Tree::hierarchical(&topo, root, 2);
                covers(&t);
                // One edge into every socket but the root's.
                let crossing = (0..topo.ranks())
                    .filter(|&r| {
                        t.parent(r)
                            .is_some_and(|p| topo.places()[p].socket != topo.places()[r].socket)
                    })
                    .count();
                let sockets: std::collections::BTreeSet<_> =
                    topo.places().iter().map(|p| p.socket).collect();
                assert_eq!(crossing, sockets.len() - 1);
            }
        }
    }
}
