//! Copies of one run with fixed-size loops for the short lengths of element runs (4 to
//! 64 bytes), where a call to `memcpy` with a variable length costs more than the move.

/// Appends `from` to `out`.
#[inline]
pub(super) fn append_run(out: &mut Vec<u8>, from: &[u8]) {
    match from.len() {
        4 => append_fixed::<4>(out, from),
        8 => append_fixed::<8>(out, from),
        16 => append_fixed::<16>(out, from),
        32 => append_fixed::<32>(out, from),
        64 => append_fixed::<64>(out, from),
        _ => out.extend_from_slice(from),
    }
}

/// Copies `from` into `to` (of the same length).
#[inline]
pub(super) fn copy_run(to: &mut [u8], from: &[u8]) {
    match (to.len(), from.len()) {
        (4, 4) => copy_fixed::<4>(to, from),
        (8, 8) => copy_fixed::<8>(to, from),
        (16, 16) => copy_fixed::<16>(to, from),
        (32, 32) => copy_fixed::<32>(to, from),
        (64, 64) => copy_fixed::<64>(to, from),
        _ => to.copy_from_slice(from),
    }
}

#[inline(always)]
fn append_fixed<const N: usize>(out: &mut Vec<u8>, from: &[u8]) {
    if let Ok(a) = <&[u8; N]>::try_from(from) {
        out.extend_from_slice(a);
    }
}

#[inline(always)]
fn copy_fixed<const N: usize>(to: &mut [u8], from: &[u8]) {
    if let (Ok(t), Ok(f)) = (<&mut [u8; N]>::try_from(to), <&[u8; N]>::try_from(from)) {
        *t = *f;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_length_copies_the_same_bytes() {
        for n in 0..80usize {
            let from: Vec<u8> = (0..n as u8).map(|b| b.wrapping_mul(7) ^ 0x5a).collect();
            let mut out = vec![1u8];
            append_run(&mut out, &from);
            assert_eq!(out[1..], from[..], "append {n}");
            let mut to = vec![0u8; n];
            copy_run(&mut to, &from);
            assert_eq!(to, from, "copy {n}");
        }
    }
}
