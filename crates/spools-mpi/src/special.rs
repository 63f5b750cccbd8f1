//! Arithmetic Rust has no type for: `long double` (x86-64's 80-bit extended format, in
//! 16 bytes) through the x87 unit, exactly as C computes it, and the complex types
//! (pairs of float, double or long double), for the reduction operators MPI defines on
//! them (SUM and PROD; MIN and MAX for `long double`).

use crate::abi::*;

/// `b = a op b` on one `long double` at each pointer (op: 0 add, 1 mul, 2 sub as
/// `b = a - b`).
///
/// # Safety
/// Both point to 10 readable bytes; `b` is writable.
#[cfg(target_arch = "x86_64")]
unsafe fn f80(a: *const u8, b: *mut u8, op: u8) {
    // SAFETY: loads and stores 10 bytes at each pointer (the caller's contract); the
    // x87 stack is left as found (two loads, one pop and one store-and-pop).
    unsafe {
        match op {
            0 => std::arch::asm!(
                "fld tbyte ptr [{a}]", "fld tbyte ptr [{b}]", "faddp st(1), st", "fstp tbyte ptr [{b}]",
                a = in(reg) a, b = in(reg) b, out("st(0)") _, out("st(1)") _,
            ),
            1 => std::arch::asm!(
                "fld tbyte ptr [{a}]", "fld tbyte ptr [{b}]", "fmulp st(1), st", "fstp tbyte ptr [{b}]",
                a = in(reg) a, b = in(reg) b, out("st(0)") _, out("st(1)") _,
            ),
            _ => std::arch::asm!(
                "fld tbyte ptr [{a}]", "fld tbyte ptr [{b}]", "fsubp st(1), st", "fstp tbyte ptr [{b}]",
                a = in(reg) a, b = in(reg) b, out("st(0)") _, out("st(1)") _,
            ),
        }
    }
}

/// Whether the 80-bit value is negative and not zero (its sign bit, and some bit of its
/// exponent or significand set).
fn f80_negative(x: &[u8]) -> bool {
    x[9] & 0x80 != 0
        && x[..9]
            .iter()
            .chain(std::iter::once(&(x[9] & 0x7f)))
            .any(|&b| b != 0)
}

/// Whether the 80-bit value is zero (of either sign).
fn f80_zero(x: &[u8]) -> bool {
    x[..9].iter().all(|&b| b == 0) && x[9] & 0x7f == 0
}

/// How two `long double`s (16-byte elements, 10 bytes used) compare, as C's `<` would
/// say: through `a - b` on the x87 unit; `None` when either is not a number.
pub(crate) fn f80_cmp(a: &[u8], b: &[u8]) -> Option<std::cmp::Ordering> {
    let nan = |x: &[u8]| {
        x[8] == 0xff && x[9] & 0x7f == 0x7f && (x[7] & 0x7f != 0 || x[..7].iter().any(|&v| v != 0))
    };
    if a.len() < 10 || b.len() < 10 || nan(a) || nan(b) {
        return None;
    }
    // The same value (an infinity among them, whose difference is no number).
    if a[..10] == b[..10] {
        return Some(std::cmp::Ordering::Equal);
    }
    let mut d = [0u8; 16];
    d[..10].copy_from_slice(&b[..10]);
    let mut x = [0u8; 16];
    x[..10].copy_from_slice(&a[..10]);
    // SAFETY: two local 16-byte buffers, 10 bytes used.
    unsafe { f80(x.as_ptr(), d.as_mut_ptr(), 2) };
    Some(if f80_zero(&d) {
        std::cmp::Ordering::Equal
    } else if f80_negative(&d) {
        std::cmp::Ordering::Less
    } else {
        std::cmp::Ordering::Greater
    })
}

/// `io = inv op io` for packed `long double` elements.
fn long_double(op: MPI_Op, inv: &[u8], io: &mut [u8]) {
    for (a, b) in inv.chunks_exact(16).zip(io.chunks_exact_mut(16)) {
        match op {
            MPI_SUM | MPI_PROD => {
                // SAFETY: 16-byte elements, 10 bytes used.
                unsafe {
                    f80(
                        a.as_ptr(),
                        b.as_mut_ptr(),
                        if op == MPI_SUM { 0 } else { 1 },
                    )
                };
            }
            _ => {
                // a - b: negative when a < b.
                let mut d = [0u8; 16];
                d.copy_from_slice(b);
                // SAFETY: as above, on a local copy.
                unsafe { f80(a.as_ptr(), d.as_mut_ptr(), 2) };
                let take_a = if op == MPI_MIN {
                    f80_negative(&d)
                } else {
                    !f80_negative(&d) && !f80_zero(&d)
                };
                if take_a {
                    b.copy_from_slice(a);
                }
            }
        }
    }
}

fn complex<
    T: Copy + std::ops::Add<Output = T> + std::ops::Sub<Output = T> + std::ops::Mul<Output = T>,
>(
    op: MPI_Op,
    inv: &[u8],
    io: &mut [u8],
    read: fn(&[u8]) -> T,
    write: fn(T, &mut [u8]),
) {
    let w = std::mem::size_of::<T>();
    for (a, b) in inv.chunks_exact(2 * w).zip(io.chunks_exact_mut(2 * w)) {
        let (ar, ai) = (read(&a[..w]), read(&a[w..]));
        let (br, bi) = (read(&b[..w]), read(&b[w..]));
        let (r, i) = if op == MPI_SUM {
            (ar + br, ai + bi)
        } else {
            (ar * br - ai * bi, ar * bi + ai * br)
        };
        write(r, &mut b[..w]);
        write(i, &mut b[w..]);
    }
}

/// `io = inv op io` on long double complex elements (32 bytes: two 16-byte halves).
fn long_double_complex(op: MPI_Op, inv: &[u8], io: &mut [u8]) {
    for (a, b) in inv.chunks_exact(32).zip(io.chunks_exact_mut(32)) {
        if op == MPI_SUM {
            long_double(MPI_SUM, a, b);
            continue;
        }
        // (ar + ai i)(br + bi i) = (ar br - ai bi) + (ar bi + ai br) i
        let (ar, ai) = (&a[..16], &a[16..]);
        let mut rr = [0u8; 16];
        let mut ii = [0u8; 16];
        let mut ri = [0u8; 16];
        let mut ir = [0u8; 16];
        rr.copy_from_slice(&b[..16]);
        ii.copy_from_slice(&b[16..]);
        ri.copy_from_slice(&b[16..]);
        ir.copy_from_slice(&b[..16]);
        long_double(MPI_PROD, ar, &mut rr); // ar br
        long_double(MPI_PROD, ai, &mut ii); // ai bi
        long_double(MPI_PROD, ar, &mut ri); // ar bi
        long_double(MPI_PROD, ai, &mut ir); // ai br
                                            // SAFETY: 16-byte values, 10 bytes used: ii = rr - ii.
        unsafe { f80(rr.as_ptr(), ii.as_mut_ptr(), 2) };
        long_double(MPI_SUM, &ri, &mut ir);
        b[..16].copy_from_slice(&ii);
        b[16..].copy_from_slice(&ir);
    }
}

/// `f(op, in, inout)`: `inout = in op inout` element by element.
pub(crate) type Combine = fn(MPI_Op, &[u8], &mut [u8]);

/// The byte-wise combining function of `op` on the special type of `size`-byte elements
/// (`kind`: 'g' long double, 'c' complex), if MPI defines it.
pub(crate) fn combine(op: MPI_Op, kind: char, size: usize) -> Option<Combine> {
    match (kind, size, op) {
        ('g', 16, MPI_SUM | MPI_PROD | MPI_MIN | MPI_MAX) => Some(long_double),
        ('c', 8, MPI_SUM | MPI_PROD) => Some(|op, a, b| {
            complex::<f32>(
                op,
                a,
                b,
                |x| f32::from_ne_bytes(x.try_into().unwrap_or_default()),
                |v, x| x.copy_from_slice(&v.to_ne_bytes()),
            )
        }),
        ('c', 16, MPI_SUM | MPI_PROD) => Some(|op, a, b| {
            complex::<f64>(
                op,
                a,
                b,
                |x| f64::from_ne_bytes(x.try_into().unwrap_or_default()),
                |v, x| x.copy_from_slice(&v.to_ne_bytes()),
            )
        }),
        ('c', 32, MPI_SUM | MPI_PROD) => Some(long_double_complex),
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ld(x: f64) -> [u8; 16] {
        // f64 -> f80 through the x87 unit.
        let mut out = [0u8; 16];
        // SAFETY: loads 8 bytes, stores 10.
        unsafe {
            std::arch::asm!("fld qword ptr [{x}]", "fstp tbyte ptr [{o}]", x = in(reg) &x, o = in(reg) out.as_mut_ptr(), out("st(0)") _)
        };
        out
    }

    fn back(x: &[u8]) -> f64 {
        let mut v = 0f64;
        // SAFETY: loads 10 bytes, stores 8.
        unsafe {
            std::arch::asm!("fld tbyte ptr [{x}]", "fstp qword ptr [{o}]", x = in(reg) x.as_ptr(), o = in(reg) &mut v, out("st(0)") _)
        };
        v
    }

    #[test]
    fn long_double_ops_are_exact_x87_arithmetic() {
        let (a, b) = (ld(1.5), ld(-2.25));
        let mut s = b;
        long_double(MPI_SUM, &a, &mut s);
        assert_eq!(back(&s), -0.75);
        let mut p = b;
        long_double(MPI_PROD, &a, &mut p);
        assert_eq!(back(&p), -3.375);
        let mut m = b;
        long_double(MPI_MAX, &a, &mut m);
        assert_eq!(back(&m), 1.5);
        let mut m = b;
        long_double(MPI_MIN, &a, &mut m);
        assert_eq!(back(&m), -2.25);
        let mut m = a;
        long_double(MPI_MIN, &b, &mut m);
        assert_eq!(back(&m), -2.25);
    }

    #[test]
    fn long_doubles_compare_as_c_does_infinities_among_them() {
        use std::cmp::Ordering::*;
        let inf = ld(f64::INFINITY);
        let ninf = ld(f64::NEG_INFINITY);
        assert_eq!(f80_cmp(&inf, &inf), Some(Equal));
        assert_eq!(f80_cmp(&ninf, &ninf), Some(Equal));
        assert_eq!(f80_cmp(&inf, &ninf), Some(Greater));
        assert_eq!(f80_cmp(&ld(1.0), &inf), Some(Less));
        assert_eq!(f80_cmp(&ld(-0.0), &ld(0.0)), Some(Equal));
        assert_eq!(f80_cmp(&ld(2.0), &ld(1.0)), Some(Greater));
        assert_eq!(f80_cmp(&ld(f64::NAN), &ld(1.0)), None);
    }

    #[test]
    fn complex_product() {
        let f = combine(MPI_PROD, 'c', 16).unwrap();
        let a: Vec<u8> = [1.0f64, 2.0].iter().flat_map(|v| v.to_ne_bytes()).collect();
        let mut b: Vec<u8> = [3.0f64, -1.0]
            .iter()
            .flat_map(|v| v.to_ne_bytes())
            .collect();
        f(MPI_PROD, &a, &mut b);
        let r = f64::from_ne_bytes(b[..8].try_into().unwrap());
        let i = f64::from_ne_bytes(b[8..].try_into().unwrap());
        assert_eq!((r, i), (5.0, 5.0));
        let f = combine(MPI_PROD, 'c', 32).unwrap();
        let mut x = [ld(1.0), ld(2.0)].concat();
        let y = [ld(3.0), ld(-1.0)].concat();
        f(MPI_PROD, &y, &mut x);
        assert_eq!((back(&x[..16]), back(&x[16..])), (5.0, 5.0));
    }
}
