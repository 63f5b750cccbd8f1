//! CRC32C computed while the data is copied (iWarp paper, 4.3): the bytes are checksummed
//! in cache-sized steps right after they are copied, so the data is read from memory once;
//! and the word-wide XOR that folds RAID-5 parity into the same steps.

/// Bytes copied before they are checksummed: small enough to stay in the L1/L2 cache.
pub const STEP: usize = 16 * 1024;

/// Appends `src` to `out` and returns the CRC32C of `src` continued from `crc`.
pub(crate) fn extend_crc(out: &mut Vec<u8>, src: &[u8], mut crc: u32) -> u32 {
    for s in src.chunks(STEP) {
        let at = out.len();
        out.extend_from_slice(s);
        crc = crc32c::crc32c_append(crc, &out[at..]);
    }
    crc
}

/// Copies `src` into `dst` (of the same length) and returns the CRC32C of the bytes
/// continued from `crc`.
pub fn copy_crc(dst: &mut [u8], src: &[u8], mut crc: u32) -> u32 {
    for (d, s) in dst.chunks_mut(STEP).zip(src.chunks(STEP)) {
        d.copy_from_slice(s);
        crc = crc32c::crc32c_append(crc, d);
    }
    crc
}

/// Bytes per lane of the word-wide copy and XOR loops.
const LANE: usize = 16;

/// One lane of `b` (exactly [`LANE`] bytes) as a word.
fn lane(b: &[u8]) -> u128 {
    let mut w = [0u8; LANE];
    w.copy_from_slice(b);
    u128::from_ne_bytes(w)
}

/// `acc ^= other` (of the same length), word by word.
pub fn xor_into(acc: &mut [u8], other: &[u8]) {
    debug_assert_eq!(acc.len(), other.len(), "xor_into takes equal lengths");
    let mut a = acc.chunks_exact_mut(LANE);
    let mut o = other.chunks_exact(LANE);
    for (a, o) in (&mut a).zip(&mut o) {
        let q = lane(a) ^ lane(o);
        a.copy_from_slice(&q.to_ne_bytes());
    }
    for (a, o) in a.into_remainder().iter_mut().zip(o.remainder()) {
        *a ^= *o;
    }
}

/// The CRC32C (Castagnoli) of `data`.
///
/// ```
/// assert_eq!(spools_exchange::crc32c(b"123456789"), 0xe306_9283);
/// ```
pub fn crc32c(data: &[u8]) -> u32 {
    crc32c::crc32c(data)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn copying_gives_the_same_checksum_as_reading() {
        let src: Vec<u8> = (0..100_000u32).map(|i| (i * 7 + i / 13) as u8).collect();
        let mut dst = vec![0u8; src.len()];
        let c = copy_crc(&mut dst, &src, 0);
        assert_eq!(dst, src);
        assert_eq!(c, crc32c(&src));
        let mut out = vec![9u8];
        let c2 = extend_crc(&mut out, &src[..40_000], 0);
        let c2 = extend_crc(&mut out, &src[40_000..], c2);
        assert_eq!(c2, crc32c(&src));
        assert_eq!(&out[1..], &src[..]);
    }

    /// The word-wide XOR against a byte-wise one, for lengths around the lane size and
    /// unaligned starts.
    #[test]
    fn word_wide_xor_is_the_bytewise_one() {
        let src: Vec<u8> = (0..600u32).map(|i| (i * 13 + i / 7) as u8).collect();
        for len in [0, 1, 15, 16, 17, 100, 255, 256, 257, 500] {
            for skew in [0, 1, 7] {
                let s = &src[skew..skew + len];
                let p0: Vec<u8> = (0..len + 5).map(|i| (i * 101) as u8).collect();
                let mut want = p0.clone();
                for (a, b) in want.iter_mut().zip(s) {
                    *a ^= *b;
                }
                let mut p = p0.clone();
                xor_into(&mut p[..len], s);
                assert_eq!(p, want, "{len}/{skew}");
            }
        }
    }
}
