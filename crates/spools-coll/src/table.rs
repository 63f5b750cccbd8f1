//! The table in front of a package of blocks: a scatterv root's publication and an
//! alltoallv member's post in `spools-msg`'s shared-memory engine (`coll/sm/varied.rs`).
//! It says where each member's block lies in what follows, so that a reader that knows
//! only its own count finds its block. Pure: packing and looking up, every offset checked
//! against the bytes there, since a reader trusts nothing it did not write (fuzzed:
//! `fuzz/fuzz_targets/coll_table.rs`).
//!
//! ```
//! use spools_coll::table::{locate, pack_into, Block};
//! let mut p = Vec::new();
//! // Blocks of 2, 0 and 3 bytes for members 0, 1 and 2.
//! assert!(pack_into(&mut p, b"abcde", &[2, 0, 3], 64));
//! let read = |at: usize, dst: &mut [u8]| dst.copy_from_slice(&p[at..at + dst.len()]);
//! let Block::At { at, len } = locate(p.len(), 3, 2, read) else { panic!() };
//! assert_eq!(&p[at..at + len], b"cde");
//! ```

/// Bytes of one offset in the table.
const WORD: usize = 4;

/// A table's first word when the blocks do not follow (they go by messages).
const BY_MESSAGES: u32 = u32::MAX;

/// The bytes of a table for `n` members: `n + 1` offsets.
#[must_use]
pub fn table_bytes(n: usize) -> usize {
    WORD * (n + 1)
}

/// Packs `data`, cut into blocks of `counts` bytes one after the other, into `out` (emptied
/// first): the table (the offset of each block in the data, then the data's length), then
/// the data. `false`, leaving `out` empty, when the package would exceed `cap` bytes (or
/// offsets of 32 bits): the blocks go by messages (a scatterv root publishes
/// [`by_messages`] instead; an alltoallv member posts only the package's length).
pub fn pack_into(out: &mut Vec<u8>, data: &[u8], counts: &[usize], cap: usize) -> bool {
    out.clear();
    let head = table_bytes(counts.len());
    if head + data.len() > cap || data.len() >= BY_MESSAGES as usize {
        return false;
    }
    out.reserve(head + data.len());
    let mut at = 0u32;
    for &k in counts {
        out.extend_from_slice(&at.to_le_bytes());
        at += k as u32;
    }
    out.extend_from_slice(&at.to_le_bytes());
    out.extend_from_slice(data);
    true
}

/// What a package whose blocks go by messages says: the one word `u32::MAX`, which no
/// table starts with (a table's first offset is 0).
#[must_use]
pub fn by_messages() -> [u8; WORD] {
    BY_MESSAGES.to_le_bytes()
}

/// Where a reader finds its block in a package.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Block {
    /// `len` bytes from byte `at` of the package.
    At {
        /// Where the block starts in the package.
        at: usize,
        /// The block's bytes.
        len: usize,
    },
    /// The blocks go by messages.
    ByMessages,
    /// The package is too short for its table, or the table points outside it: the
    /// writer disagrees about the collective.
    Bad,
}

/// Member `i`'s block in a package of `total` bytes for `n` members, reading the package's
/// bytes through `read(at, dst)` (its first word, then member `i`'s two offsets, never
/// past `total`). A block it gives lies within the package.
pub fn locate(total: usize, n: usize, i: usize, mut read: impl FnMut(usize, &mut [u8])) -> Block {
    if total < WORD {
        return Block::Bad;
    }
    let mut first = [0u8; WORD];
    read(0, &mut first);
    if u32::from_le_bytes(first) == BY_MESSAGES {
        return Block::ByMessages;
    }
    let head = table_bytes(n);
    if i >= n || total < head {
        return Block::Bad;
    }
    let mut pair = [0u8; 2 * WORD];
    read(WORD * i, &mut pair);
    let [a0, a1, a2, a3, b0, b1, b2, b3] = pair;
    let (a, b) = (
        u32::from_le_bytes([a0, a1, a2, a3]) as usize,
        u32::from_le_bytes([b0, b1, b2, b3]) as usize,
    );
    if a > b || b > total - head {
        return Block::Bad;
    }
    Block::At {
        at: head + a,
        len: b - a,
    }
}

#[cfg(test)]
#[allow(clippy::panic)]
mod tests {
    use super::*;

    fn reader(p: &[u8]) -> impl FnMut(usize, &mut [u8]) + '_ {
        |at, dst: &mut [u8]| dst.copy_from_slice(&p[at..at + dst.len()])
    }

    #[test]
    fn every_member_finds_its_block_zero_counts_included() {
        let counts = [3, 0, 5, 1];
        let data: Vec<u8> = (0..9).collect();
        let mut p = Vec::new();
        assert!(pack_into(&mut p, &data, &counts, 1024));
        assert_eq!(p.len(), table_bytes(4) + 9);
        let mut from = 0;
        for (i, &k) in counts.iter().enumerate() {
            let b = locate(p.len(), 4, i, reader(&p));
            let Block::At { at, len } = b else {
                panic!("member {i}: {b:?}")
            };
            assert_eq!(len, k);
            assert_eq!(&p[at..at + len], &data[from..from + k]);
            from += k;
        }
    }

    #[test]
    fn a_package_over_the_cap_goes_by_messages() {
        let mut p = vec![1];
        assert!(!pack_into(&mut p, &[0; 10], &[5, 5], table_bytes(2) + 9));
        assert!(p.is_empty());
        assert!(pack_into(&mut p, &[0; 10], &[5, 5], table_bytes(2) + 10));
        let m = by_messages();
        assert_eq!(locate(m.len(), 2, 1, reader(&m)), Block::ByMessages);
    }

    #[test]
    fn tables_that_point_outside_the_package_are_refused() {
        let mut p = Vec::new();
        assert!(pack_into(&mut p, &[1, 2, 3], &[1, 2], 64));
        // Too short for its table, a member past the table, offsets out of order or past
        // the end: never a block.
        assert_eq!(locate(2, 2, 0, reader(&p)), Block::Bad);
        assert_eq!(
            locate(p.len() - 4, 2, 0, |at, d| d
                .copy_from_slice(&p[at..at + d.len()])),
            Block::Bad
        );
        assert_eq!(locate(p.len(), 2, 2, reader(&p)), Block::Bad);
        let mut q = p.clone();
        q[4..8].copy_from_slice(&9u32.to_le_bytes());
        assert_eq!(locate(q.len(), 2, 0, reader(&q)), Block::Bad);
        assert_eq!(locate(q.len(), 2, 1, reader(&q)), Block::Bad);
    }

    #[test]
    fn garbage_never_gives_a_block_outside_the_package() {
        // A fixed stream of pseudo-random packages, member counts and members (the fuzz
        // target `coll_table` goes further).
        let mut x = 0x9e37_79b9_7f4a_7c15u64;
        let mut next = || {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            x
        };
        for _ in 0..20_000 {
            let len = (next() % 80) as usize;
            let p: Vec<u8> = (0..len).map(|_| next() as u8 % 24).collect();
            let (n, i) = ((next() % 12) as usize, (next() % 12) as usize);
            let read = |at: usize, dst: &mut [u8]| {
                assert!(at + dst.len() <= p.len(), "read past the package");
                dst.copy_from_slice(&p[at..at + dst.len()]);
            };
            if let Block::At { at, len } = locate(p.len(), n, i, read) {
                assert!(at + len <= p.len());
            }
        }
    }
}
