//! The element-wise loop every reduction's combining step runs ([`zip_with`]), compiled
//! twice on x86-64: for the baseline (SSE2, 16-byte vectors) and for AVX2 (32-byte
//! vectors), the latter chosen at run time where the CPU has it. Other targets get the
//! one loop their baseline vectorises.

/// `acc[i] = f(acc[i], other[i])` for every `i` of the shorter slice, vectorised for the
/// CPU it runs on (on x86-64 with AVX2, where the CPU has it; `f` is inlined into the
/// loop, so it must be a closure or function item, not a function pointer, to
/// vectorise).
///
/// ```
/// let mut acc = [1u32, 2, 3];
/// spools_msg::zip_with(&mut acc, &[4, 5, 6], |a, b| a ^ b);
/// assert_eq!(acc, [5, 7, 5]);
/// ```
#[inline]
pub fn zip_with<T: Copy, F: Fn(T, T) -> T>(acc: &mut [T], other: &[T], f: F) {
    #[cfg(target_arch = "x86_64")]
    if std::arch::is_x86_feature_detected!("avx2") {
        // SAFETY: the CPU has AVX2 (checked just above), the only feature `avx2` enables.
        unsafe { avx2(acc, other, f) };
        return;
    }
    each(acc, other, f);
}

/// [`zip_with`]'s loop compiled for AVX2.
///
/// # Safety
/// The CPU has AVX2.
#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx2")]
unsafe fn avx2<T: Copy, F: Fn(T, T) -> T>(acc: &mut [T], other: &[T], f: F) {
    each(acc, other, f);
}

/// The loop, inlined into each of its callers so that each compiles it for its own
/// target features.
#[inline(always)]
fn each<T: Copy, F: Fn(T, T) -> T>(acc: &mut [T], other: &[T], f: F) {
    for (a, b) in acc.iter_mut().zip(other) {
        *a = f(*a, *b);
    }
}

#[cfg(test)]
mod tests {
    use super::{each, zip_with};

    /// The dispatched loop gives what the plain one gives, for every length around the
    /// vector widths and for unaligned starts, on integers and floats.
    #[test]
    fn dispatched_loop_matches_the_plain_one() {
        for len in (0..70).chain([1000, 4099]) {
            for skip in 0..3usize {
                let a: Vec<i32> = (0..len + skip)
                    .map(|i| (i as i32).wrapping_mul(7919))
                    .collect();
                let b: Vec<i32> = (0..len + skip).map(|i| (i as i32) ^ 0x5a5a).collect();
                let (mut x, mut y) = (a.clone(), a.clone());
                zip_with(&mut x[skip..], &b[skip..], |p, q| {
                    p.wrapping_add(q) ^ (p & q)
                });
                each(&mut y[skip..], &b[skip..], |p, q| {
                    p.wrapping_add(q) ^ (p & q)
                });
                assert_eq!(x, y, "len {len} skip {skip}");
                let f: Vec<f64> = a.iter().map(|&v| f64::from(v) * 0.5).collect();
                let g: Vec<f64> = b.iter().map(|&v| f64::from(v) - 3.0).collect();
                let (mut u, mut w) = (f.clone(), f.clone());
                zip_with(&mut u[skip..], &g[skip..], |p, q| if q < p { q } else { p });
                each(&mut w[skip..], &g[skip..], |p, q| if q < p { q } else { p });
                assert_eq!(u, w, "len {len} skip {skip}");
            }
        }
    }
}
