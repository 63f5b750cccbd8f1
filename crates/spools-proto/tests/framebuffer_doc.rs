//! The framebuffer protocol's test vectors in docs/view.md, read from the page itself, so
//! that the specification cannot drift from the code: the frame's bytes decode to the
//! header the page describes and encode back to the same bytes, and the colour stops and
//! palette entries the page lists are `ColorMap`'s.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use spools_proto::framebuffer::{ColorMap, FrameHeader, PixelFormat, FRAME_VERSION, HEADER_LEN};

const DOC: &str = include_str!("../../../docs/view.md");

/// The text of the fenced block that follows `marker` in the page.
fn block(marker: &str) -> &'static str {
    let at = DOC
        .find(marker)
        .unwrap_or_else(|| panic!("{marker} not in docs/view.md"));
    let rest = &DOC[at + marker.len()..];
    let start = rest
        .find("```text\n")
        .expect("a fenced block after the marker")
        + 8;
    let len = rest[start..].find("```").expect("the block's end");
    &rest[start..start + len]
}

/// The bytes of a block of hex digits (white space ignored).
fn hex_block(marker: &str) -> Vec<u8> {
    let digits: Vec<u8> = block(marker)
        .bytes()
        .filter(|b| !b.is_ascii_whitespace())
        .collect();
    assert_eq!(digits.len() % 2, 0, "{marker}: odd number of hex digits");
    digits
        .chunks(2)
        .map(|d| u8::from_str_radix(std::str::from_utf8(d).unwrap(), 16).unwrap())
        .collect()
}

/// The rows of a table block, its heading left out: (map, index, [r, g, b]).
fn rows(marker: &str) -> Vec<(ColorMap, usize, [u8; 3])> {
    block(marker)
        .lines()
        .skip(1)
        .filter(|l| !l.trim().is_empty())
        .map(|l| {
            let w: Vec<&str> = l.split_whitespace().collect();
            assert_eq!(w.len(), 5, "{marker}: {l:?}");
            let map = ColorMap::from_name(w[0]).unwrap();
            let n = |s: &str| s.parse::<u8>().unwrap();
            (map, w[1].parse().unwrap(), [n(w[2]), n(w[3]), n(w[4])])
        })
        .collect()
}

#[test]
fn the_docs_frame_decodes_and_encodes_back() {
    let adu = hex_block("<!-- vector: frame -->");
    assert_eq!(adu.len(), 144);
    let (h, px) = FrameHeader::decode(&adu).unwrap();
    let want = FrameHeader {
        frame: 7,
        time_us: 1_700_000_000_000_000,
        ..FrameHeader::field(PixelFormat::F32, 2, 2, ColorMap::Viridis, 0.0, 1.0)
    }
    .with_title("doc");
    assert_eq!(h, want);
    assert_eq!(FRAME_VERSION, 1);
    assert_eq!(&adu[4..6], &[1, 0], "the version the page gives");
    assert_eq!(want.encode()[..], adu[..HEADER_LEN]);
    let values: Vec<f32> = px
        .chunks_exact(4)
        .map(|b| f32::from_le_bytes(b.try_into().unwrap()))
        .collect();
    assert_eq!(&values[..2], &[0.25, 0.5]);
    assert!(values[2].is_nan());
    assert_eq!(values[3], 2.0);
}

#[test]
fn the_docs_colour_stops_are_the_maps() {
    let rows = rows("<!-- vector: stops -->");
    for map in [ColorMap::Grey, ColorMap::Inferno, ColorMap::Viridis] {
        let listed: Vec<[u8; 3]> = rows
            .iter()
            .filter(|(m, _, _)| *m == map)
            .enumerate()
            .map(|(i, (_, stop, c))| {
                assert_eq!(i, *stop, "{map:?}: stops in order");
                *c
            })
            .collect();
        assert_eq!(listed, map.stops(), "{map:?}");
    }
}

#[test]
fn the_docs_palette_entries_are_the_maps() {
    let rows = rows("<!-- vector: palette -->");
    assert!(rows.len() > 10);
    for (map, entry, colour) in rows {
        assert!(entry <= 255);
        assert_eq!(
            map.at(entry as f64 / 255.0),
            colour,
            "{map:?} entry {entry}"
        );
    }
}
