//! What the multi-process tests of spools-msg share: test data, the non-commutative
//! operator, the check that turns a condition into a rank's error, and the launch of a
//! test's ranks whose every rank must report success.

#![allow(dead_code)]

use spools_testkit::{assert_ok, launch};

/// An associative, non-commutative operator: composition of affine maps x -> m·x + c
/// (mod 2^32), packed as (c << 32) | m. `affine(a, b)` applies a, then b.
pub(crate) fn affine(a: u64, b: u64) -> u64 {
    let (m1, c1) = (a as u32, (a >> 32) as u32);
    let (m2, c2) = (b as u32, (b >> 32) as u32);
    (u64::from(m2.wrapping_mul(c1).wrapping_add(c2)) << 32) | u64::from(m2.wrapping_mul(m1))
}

/// Rank `r`'s `len` affine maps (none the identity).
pub(crate) fn affine_input(r: u32, len: usize) -> Vec<u64> {
    (0..len)
        .map(|i| (u64::from(r * 31 + i as u32 + 1) << 32) | u64::from(2 * (r + i as u32) + 3))
        .collect()
}

/// `Ok` if `ok`, else the error `what` says.
pub(crate) fn check(ok: bool, what: impl FnOnce() -> String) -> Result<(), String> {
    if ok {
        Ok(())
    } else {
        Err(what())
    }
}

/// Element-wise reduction over ranks `0..upto` of `f(r)` with `op`, in rank order.
pub(crate) fn fold<T: Copy>(
    upto: u32,
    f: impl Fn(u32) -> Vec<T>,
    op: impl Fn(T, T) -> T,
) -> Vec<T> {
    let mut acc = f(0);
    for r in 1..upto {
        for (a, b) in acc.iter_mut().zip(f(r)) {
            *a = op(*a, b);
        }
    }
    acc
}

/// Runs test `test` as a job of `n` ranks with `env`; the job must succeed and every
/// rank print `marker`.
pub(crate) fn run_ranks(test: &str, marker: &str, n: u32, env: &[(&str, &str)]) {
    let o = launch(n, test, "x", env);
    assert_ok(&o);
    assert_eq!(
        o.stdout.matches(marker).count(),
        n as usize,
        "{n} {env:?}: {}",
        o.stdout
    );
}

/// A verdict that says this rank failed when it is `bad`, and keeps what the ranks
/// agreed.
pub(crate) struct Says {
    pub(crate) bad: bool,
    pub(crate) agreed: std::sync::Mutex<Option<Vec<u32>>>,
}

impl spools::Verdict for Says {
    fn failed(&self) -> bool {
        self.bad
    }

    fn agreed(&self, failed: &[u32]) {
        *self
            .agreed
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner) = Some(failed.to_vec());
    }
}
