//! Fuzzes the table in front of a package of blocks (`spools-coll`'s `table.rs`), which a
//! member of a v collective reads out of a peer's post in shared memory: from any bytes,
//! any member count and any member, `locate` gives a block inside the package, says the
//! blocks go by messages, or refuses the package; it never reads past the package or
//! panics. And what `pack_into` packs, `locate` finds again.
#![no_main]

use libfuzzer_sys::fuzz_target;
use spools_coll::table::{locate, pack_into, Block};

fuzz_target!(|data: &[u8]| {
    let Some((&[n, i], p)) = data.split_first_chunk::<2>() else {
        return;
    };
    let (n, i) = (usize::from(n), usize::from(i));
    let read = |at: usize, dst: &mut [u8]| {
        assert!(at + dst.len() <= p.len(), "read past the package");
        dst.copy_from_slice(&p[at..at + dst.len()]);
    };
    if let Block::At { at, len } = locate(p.len(), n, i, read) {
        assert!(at + len <= p.len(), "a block outside the package");
    }
    // Counts from the bytes: pack them, find each block again.
    let counts: Vec<usize> = p.iter().take(n).map(|&b| usize::from(b % 8)).collect();
    let total: usize = counts.iter().sum();
    let blocks: Vec<u8> = (0..total).map(|k| k as u8).collect();
    let mut out = Vec::new();
    if pack_into(&mut out, &blocks, &counts, 4096) {
        let mut from = 0;
        for (j, &k) in counts.iter().enumerate() {
            let read = |at: usize, dst: &mut [u8]| dst.copy_from_slice(&out[at..at + dst.len()]);
            assert_eq!(
                locate(out.len(), counts.len(), j, read),
                Block::At {
                    at: out.len() - total + from,
                    len: k
                }
            );
            from += k;
        }
    }
});
