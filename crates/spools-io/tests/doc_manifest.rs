//! The RAID-5 manifest example of docs/parallel-io.md, read from the page itself: it parses
//! with the implementation's reader, its fields are the ones the page explains, its unit
//! files are what a write of the example's dataset makes (data, parity, rotation), and its
//! checksums are those files' blocks'. The page's rules for placing blocks are checked
//! against the implementation on larger geometries too, so the page cannot drift.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use std::path::Path;

use spools_io::crc32c;
use spools_io::file::{stripe_chunks, Manifest, MANIFEST_FORMAT};
use spools_map::Layout;

const DOC: &str = include_str!("../../../docs/parallel-io.md");

/// The fenced block (opened by `fence`) that follows `marker` in the page.
fn block(marker: &str, fence: &str) -> &'static str {
    let at = DOC
        .find(marker)
        .unwrap_or_else(|| panic!("{marker} not in docs/parallel-io.md"))
        + marker.len();
    let rest = &DOC[at..];
    let start = rest.find(fence).expect("a fenced block after the marker") + fence.len();
    let len = rest[start..].find("```").expect("the block's end");
    &rest[start..start + len]
}

fn unhex(s: &str) -> Vec<u8> {
    (0..s.len())
        .step_by(2)
        .map(|i| u8::from_str_radix(&s[i..i + 2], 16).unwrap())
        .collect()
}

/// The unit files as the page's rules place the blocks: `(unit files, per-unit block
/// CRC32C)`.
fn by_the_page(raid5: bool, unit: u64, count: u64, stream: &[u8]) -> (Vec<Vec<u8>>, Vec<Vec<u32>>) {
    let size = stream.len() as u64;
    let d = if raid5 { count - 1 } else { count };
    let rows = size.div_ceil(unit * d);
    let mut files = vec![Vec::new(); count as usize];
    let mut crcs = vec![Vec::new(); count as usize];
    let mut put = |u: u64, r: u64, b: Vec<u8>| {
        assert_eq!(
            files[u as usize].len() as u64,
            r * unit,
            "block at r * unit"
        );
        crcs[u as usize].push(crc32c(&b));
        files[u as usize].extend_from_slice(&b);
    };
    let data = |start: u64| -> Option<Vec<u8>> {
        (start < size).then(|| stream[start as usize..size.min(start + unit) as usize].to_vec())
    };
    for r in 0..rows {
        if !raid5 {
            for u in 0..count {
                if let Some(b) = data((r * d + u) * unit) {
                    put(u, r, b);
                }
            }
            continue;
        }
        let p = count - 1 - r % count;
        let plen = unit.min(size - r * unit * d) as usize;
        let mut parity = vec![0u8; plen];
        for k in 0..d {
            if let Some(b) = data((r * d + k) * unit) {
                for (x, y) in parity.iter_mut().zip(&b) {
                    *x ^= y;
                }
                put((p + 1 + k) % count, r, b);
            }
        }
        put(p, r, parity);
    }
    (files, crcs)
}

#[test]
fn crc32c_is_castagnoli() {
    assert_eq!(crc32c(b"123456789"), 0xe306_9283);
}

#[test]
fn the_docs_manifest_parses_and_names_its_units() {
    let text = block("<!-- vector: raid5 manifest -->", "```json\n");
    let m = Manifest::parse(Path::new("m.raid5"), text.as_bytes()).unwrap();
    assert_eq!(m.format, MANIFEST_FORMAT);
    assert_eq!((m.version, m.slot, m.size), (5, 1, 20));
    assert_eq!(m.layout, "raid5(unit=4B,count=3)");
    assert_eq!(m.dataset, "i32[5] block on 1");
    assert!(!m.node_local);
    let paths: Vec<&str> = m.units.iter().map(|u| u.path.as_str()).collect();
    assert_eq!(paths, ["m.raid5.u0.s1", "m.raid5.u1.s1", "m.raid5.u2.s1"]);
    assert!(m.units.iter().all(|u| u.host.is_none()));
    // The page shows the manifest as a write prints it.
    assert_eq!(serde_json::to_string_pretty(&m).unwrap(), text.trim_end());

    // The unit files of the page are what a write of 0, 1, 2, 3, 4 makes, and the
    // manifest's checksums are theirs, block by block.
    let files: Vec<(&str, Vec<u8>)> = block("<!-- vector: raid5 units -->", "```text\n")
        .lines()
        .filter(|l| !l.trim().is_empty())
        .map(|l| {
            let (name, hex) = l.split_once(char::is_whitespace).unwrap();
            (name, unhex(hex.trim()))
        })
        .collect();
    let stream: Vec<u8> = (0i32..5).flat_map(i32::to_le_bytes).collect();
    let layout: Layout = m.layout.parse().unwrap();
    let (chunks, crcs) = stripe_chunks(&layout.with_size(m.size).unwrap(), &stream).unwrap();
    assert_eq!(
        by_the_page(true, 4, 3, &stream),
        (chunks.clone(), crcs.clone())
    );
    assert_eq!(files.len(), 3);
    for (u, ((name, bytes), e)) in files.iter().zip(&m.units).enumerate() {
        assert_eq!(*name, e.path);
        assert_eq!(bytes, &chunks[u], "unit {u}");
        assert_eq!(bytes.len() as u64, e.bytes);
        let sums: String = bytes
            .chunks(4)
            .map(|b| format!("{:08x}", crc32c(b)))
            .collect();
        assert_eq!(sums, e.crc32c, "unit {u}");
        let hex: String = crcs[u].iter().map(|c| format!("{c:08x}")).collect();
        assert_eq!(hex, e.crc32c, "unit {u}");
    }
    // A manifest of another slot's names, or of a wrong size, is refused.
    let other = text.replace("\"slot\": 1", "\"slot\": 0");
    assert!(Manifest::parse(Path::new("m.raid5"), other.as_bytes()).is_err());
    let short = text.replacen("\"bytes\": 8", "\"bytes\": 7", 1);
    assert!(Manifest::parse(Path::new("m.raid5"), short.as_bytes()).is_err());
}

#[test]
fn the_docs_placement_rules_are_the_writers() {
    let stream: Vec<u8> = (0u32..997).map(|i| (i * 31 + 7) as u8).collect();
    for raid5 in [true, false] {
        for count in 2u64..7 {
            for unit in [1u64, 3, 8, 64] {
                for size in [1usize, 7, 64, 100, 997] {
                    let kind = if raid5 { "raid5" } else { "stripe" };
                    let spec = format!("{kind}(unit={unit}B,count={count})");
                    // RAID-5 needs three units at least, if the parser says so.
                    let Ok(l) = spec.parse::<Layout>() else {
                        assert!(raid5 && count < 3, "{spec}");
                        continue;
                    };
                    let l = l.with_size(size as u64).unwrap();
                    let got = stripe_chunks(&l, &stream[..size]).unwrap();
                    assert_eq!(
                        by_the_page(raid5, unit, count, &stream[..size]),
                        got,
                        "{spec}, {size} bytes"
                    );
                }
            }
        }
    }
}
