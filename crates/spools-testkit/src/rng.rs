//! A small deterministic generator for test data (xorshift64): the same sequence on every
//! rank and every run for one seed.

/// Xorshift64 from the given seed (a seed of 0, which xorshift cannot leave, is replaced by
/// a fixed non-zero one).
///
/// ```
/// let mut r = spools_testkit::Rng(7);
/// assert_ne!(r.next(), r.next());
/// assert!(r.below(10) < 10);
/// ```
#[derive(Debug, Clone)]
pub struct Rng(pub u64);

impl Rng {
    /// The next value.
    #[allow(clippy::should_implement_trait)]
    pub fn next(&mut self) -> u64 {
        if self.0 == 0 {
            self.0 = 0x9e37_79b9_7f4a_7c15;
        }
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        self.0
    }

    /// A value below `n` (0 when `n` is 0).
    pub fn below(&mut self, n: u64) -> u64 {
        self.next() % n.max(1)
    }
}
