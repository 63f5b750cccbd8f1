//! A digest of what one rank passed to a collective call ([`Digest`]), so that the ranks
//! can check in the agreement they already make that they all passed the same
//! ([`agree_on_call`](crate::collective::agree_on_call)).

use std::hash::{Hash, Hasher};

/// A 64-bit digest of a collective call's arguments on one rank: FNV-1a over the
/// arguments' [`Hash`] (layouts, formats, owners). Equal arguments give equal digests on
/// every rank of a job (the same types, the same hashing); different arguments differ
/// with overwhelming likelihood. It is a check against mistakes, not against an
/// adversary: the ranks of a job trust one another.
///
/// ```
/// use spools_exchange::Digest;
/// let a: spools_map::Layout = "f64[100,100] block,* on 2x1".parse()?;
/// let b: spools_map::Layout = "f64[101,100] block,* on 2x1".parse()?;
/// assert_eq!(Digest::of(&a), Digest::of(&a.clone()));
/// assert_ne!(Digest::of(&a), Digest::of(&b));
/// # Ok::<(), spools_map::SpecError>(())
/// ```
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct Digest(pub u64);

impl Digest {
    /// The digest of `value` (a tuple digests several arguments at once).
    pub fn of<T: Hash + ?Sized>(value: &T) -> Digest {
        let mut h = Fnv1a(FNV_OFFSET);
        value.hash(&mut h);
        Digest(h.finish())
    }
}

const FNV_OFFSET: u64 = 0xcbf2_9ce4_8422_2325;
const FNV_PRIME: u64 = 0x0000_0100_0000_01b3;

/// FNV-1a, 64 bits: the same on every platform and every run (std's default hasher is
/// keyed per process only by accident of its API).
struct Fnv1a(u64);

impl Hasher for Fnv1a {
    fn finish(&self) -> u64 {
        self.0
    }

    fn write(&mut self, bytes: &[u8]) {
        for &b in bytes {
            self.0 = (self.0 ^ u64::from(b)).wrapping_mul(FNV_PRIME);
        }
    }

    // Fixed widths, so that 32- and 64-bit ranks of one job digest alike.
    fn write_usize(&mut self, n: usize) {
        self.write(&(n as u64).to_le_bytes());
    }

    fn write_isize(&mut self, n: isize) {
        self.write(&(n as i64).to_le_bytes());
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_digest_is_fnv1a_and_tells_arguments_apart() {
        // FNV-1a's published vector for "a" (str's Hash adds a 0xff terminator).
        let mut h = Fnv1a(FNV_OFFSET);
        h.write(b"a");
        assert_eq!(h.finish(), 0xaf63_dc4c_8601_ec8c);
        let l: spools_map::Layout = "u8[4] block on 2".parse().unwrap();
        let m: spools_map::Layout = "u8[4] cyclic on 2".parse().unwrap();
        assert_ne!(Digest::of(&l), Digest::of(&m));
        assert_ne!(Digest::of(&(&l, "npy")), Digest::of(&(&l, "canonical")));
        assert_eq!(Digest::of(&(&l, 3u8)), Digest::of(&(&l.clone(), 3u8)));
    }
}
