//! Where a host's ranks run: each rank's socket and L3 group, and how far apart two ranks
//! are for a cache line.

/// Where one rank runs: its socket and its L3 group (numbered across the host).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct Place {
    /// The socket (package).
    pub socket: u16,
    /// The L3 group (cores that share a last-level cache), numbered across the host.
    pub l3: u16,
}

/// How far a cache line travels between two ranks.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub enum Distance {
    /// The same core (a rank's own line).
    Same,
    /// Cores sharing an L3 cache.
    SameL3,
    /// Cores of one socket in different L3 groups.
    SameSocket,
    /// Cores of different sockets.
    CrossSocket,
}

/// The places of a host's ranks, rank `r` at `places()[r]`.
///
/// ```
/// use spools_coll::{Distance, Topology};
/// let t = Topology::l3_groups(64, 8, 2);
/// assert_eq!(t.ranks(), 64);
/// assert_eq!(t.distance(0, 7), Distance::SameL3);
/// assert_eq!(t.distance(0, 8), Distance::SameSocket);
/// assert_eq!(t.distance(0, 32), Distance::CrossSocket);
/// ```
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Topology {
    places: Vec<Place>,
}

impl Topology {
    /// Ranks at the given places (rank `r` at `places[r]`).
    pub fn new(places: Vec<Place>) -> Topology {
        Topology { places }
    }

    /// `ranks` ranks sharing one L3 cache on one socket.
    pub fn flat(ranks: usize) -> Topology {
        Topology::l3_groups(ranks, ranks.max(1), 1)
    }

    /// `ranks` ranks over `sockets` sockets in consecutive blocks, one L3 group each.
    pub fn sockets(ranks: usize, sockets: usize) -> Topology {
        let per = ranks.div_ceil(sockets.max(1)).max(1);
        Topology::l3_groups(ranks, per, 1)
    }

    /// `ranks` ranks in consecutive L3 groups of `group` ranks, `per_socket` groups to a
    /// socket.
    pub fn l3_groups(ranks: usize, group: usize, per_socket: usize) -> Topology {
        let (group, per_socket) = (group.max(1), per_socket.max(1));
        let places = (0..ranks)
            .map(|r| {
                let l3 = r / group;
                Place {
                    socket: u16::try_from(l3 / per_socket).unwrap_or(u16::MAX),
                    l3: u16::try_from(l3).unwrap_or(u16::MAX),
                }
            })
            .collect();
        Topology { places }
    }

    /// The number of ranks.
    pub fn ranks(&self) -> usize {
        self.places.len()
    }

    /// Every rank's place.
    pub fn places(&self) -> &[Place] {
        &self.places
    }

    /// How far apart ranks `a` and `b` are (ranks past the end count as another socket).
    pub fn distance(&self, a: usize, b: usize) -> Distance {
        if a == b {
            return Distance::Same;
        }
        match (self.places.get(a), self.places.get(b)) {
            (Some(x), Some(y)) if x.l3 == y.l3 => Distance::SameL3,
            (Some(x), Some(y)) if x.socket == y.socket => Distance::SameSocket,
            _ => Distance::CrossSocket,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sockets_split_ranks_in_blocks() {
        let t = Topology::sockets(10, 2);
        assert_eq!(t.distance(0, 4), Distance::SameL3);
        assert_eq!(t.distance(4, 5), Distance::CrossSocket);
        assert_eq!(t.distance(3, 3), Distance::Same);
        assert_eq!(Topology::flat(5).distance(0, 4), Distance::SameL3);
    }
}
