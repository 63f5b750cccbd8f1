//! Garbage into every decoder of the I/O layer: random bytes, and every truncation and
//! single-byte corruption of valid inputs, must give an error or a value, never a panic.

use spools_io::decode_untrusted;
use spools_testkit::Rng;

#[test]
fn random_bytes_and_mutations_never_panic() {
    let mut r = Rng(0x1234_5678_9abc_def1);
    for _ in 0..20_000 {
        let n = (r.next() % 200) as usize;
        let v: Vec<u8> = (0..n).map(|_| r.next() as u8).collect();
        decode_untrusted(&v);
    }
    let npy =
        b"\x93NUMPY\x01\x00\x3c\x00{'descr': '<f8', 'fortran_order': False, 'shape': (3, 4), }\n"
            .to_vec();
    let manifest = br#"{"format":"spools-parallel-file","version":2,"slot":0,"size":10,"layout":"raid5(unit=4B,count=3)","dataset":"u8[10] block on 1","node_local":false,"units":[{"path":"f.u0.s0","bytes":4,"crc32c":"00000000"},{"path":"d/f.u1.s0","bytes":6,"crc32c":"0000000000000000"},{"path":"f.u2.s0","bytes":6,"crc32c":"0000000000000000"}]}"#.to_vec();
    let mut frame = b"SPPH".to_vec();
    frame.extend_from_slice(&[7; 16]);
    frame.extend_from_slice(&1u32.to_le_bytes());
    frame.extend_from_slice(&2u32.to_le_bytes());
    frame.extend_from_slice(b"SPPF\0\0\0\0");
    frame.extend_from_slice(&5u64.to_le_bytes());
    frame.extend_from_slice(&3u32.to_le_bytes());
    frame.extend_from_slice(&0u32.to_le_bytes());
    frame.extend_from_slice(b"abc");
    let sums = br#"{"format":"spools-sums","block":4,"offset":128,"bytes":9,"crc32c":"0123abcd89ABCDEF00000000"}"#.to_vec();
    // A single-copy descriptor: one buffer in process memory, one in the shared heap.
    let mut desc = b"SPXD\x01\x01\0\0".to_vec();
    desc.extend_from_slice(&4242u32.to_le_bytes());
    desc.extend_from_slice(&2u32.to_le_bytes());
    desc.extend_from_slice(&0x5555_0000_0040u64.to_le_bytes());
    desc.extend_from_slice(&0x0123_4567_89ab_cdefu64.to_le_bytes());
    for (unit, len) in [(3u64, 4096u64), (5, 64)] {
        desc.extend_from_slice(&unit.to_le_bytes());
        desc.extend_from_slice(&len.to_le_bytes());
        if unit == 3 {
            desc.extend_from_slice(&[1, 0, 0, 0, 0, 0, 0, 0]);
            desc.extend_from_slice(&0x7f00_0000_1000u64.to_le_bytes());
        } else {
            desc.extend_from_slice(&[2, 0, 0, 0, 0, 0, 0, 0]);
            desc.extend_from_slice(
                &spools::HeapRef {
                    name: spools_heap::HeapName::new(1, 2, 3),
                    offset: 64,
                }
                .to_bytes(),
            );
        }
    }
    for valid in [&npy, &manifest, &frame, &sums, &desc] {
        assert_eq!(
            decode_untrusted(valid),
            1,
            "{}",
            String::from_utf8_lossy(valid)
        );
        for cut in 0..valid.len() {
            decode_untrusted(&valid[..cut]);
        }
        for i in 0..valid.len() {
            for x in [0x01u8, 0x80, 0xff] {
                let mut b = valid.clone();
                b[i] ^= x;
                decode_untrusted(&b);
            }
        }
    }
}
