//! `file::RangeReader`: one process reads byte ranges of canonical, `.npy`, RAID-0 and RAID-5
//! files written by the collective write, and RAID-5 damage is rebuilt (or reported).

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use std::path::{Path, PathBuf};

use spools::{Format, Layout, Striping, WriteOptions};
use spools_io::file::{RangeReader, Stored};
use spools_io::FileError;

const DATA: &str = "u16[50,37] block,* on 1x1";

fn write(w: &spools::World, path: &Path, data: &[u16], format: Format) {
    let l: Layout = DATA.parse().unwrap();
    let opts = WriteOptions {
        format,
        ..Default::default()
    };
    w.write_file(path, data, &l, &opts).unwrap();
}

fn striped(spec: &str) -> Format {
    Format::Striped(Striping {
        layout: spec.parse().unwrap(),
        dirs: vec![PathBuf::from("u")],
        node_local: false,
    })
}

/// Every range of a few sizes and offsets reads the stream's bytes.
fn check_ranges(r: &RangeReader, stream: &[u8]) {
    assert_eq!(r.len(), stream.len() as u64);
    for (off, len) in [(0, stream.len()), (0, 1), (7, 300), (1000, 2000), (3699, 1)] {
        let mut buf = vec![0u8; len];
        r.read_at(off as u64, &mut buf).unwrap();
        assert_eq!(buf, stream[off..off + len], "range {off}+{len}");
    }
    let mut past = [0u8; 2];
    assert!(matches!(
        r.read_at(stream.len() as u64 - 1, &mut past),
        Err(FileError::SizeMismatch { .. })
    ));
}

#[test]
fn one_process_reads_ranges_of_every_format_and_rebuilds_raid5() {
    let w = spools::init().unwrap();
    let dir = spools_testkit::tempdir("file-reader");
    let data: Vec<u16> = (0..50 * 37).map(|i| (i * 31 % 65521) as u16).collect();
    let stream: Vec<u8> = data.iter().flat_map(|x| x.to_le_bytes()).collect();

    let p = dir.join("a.bin");
    write(&w, &p, &data, Format::Canonical);
    let r = RangeReader::open(&p).unwrap();
    assert_eq!(r.stored(), &Stored::Canonical { bytes: 3700 });
    check_ranges(&r, &stream);

    let p = dir.join("a.npy");
    write(&w, &p, &data, Format::Npy);
    let r = RangeReader::open(&p).unwrap();
    match r.stored() {
        Stored::Npy { descr, shape, .. } => {
            assert_eq!(descr, "<u2");
            assert_eq!(shape, &[50, 37]);
        }
        s => panic!("not npy: {s:?}"),
    }
    check_ranges(&r, &stream);

    let p = dir.join("r0");
    write(&w, &p, &data, striped("stripe(unit=256B,count=3)"));
    let r = RangeReader::open(&p).unwrap();
    assert!(matches!(r.stored(), Stored::Striped { dataset, .. } if dataset == DATA));
    check_ranges(&r, &stream);

    let p = dir.join("r5");
    write(&w, &p, &data, striped("raid5(unit=256B,count=4)"));
    let r = RangeReader::open(&p).unwrap();
    check_ranges(&r, &stream);
    // A lost unit is rebuilt from parity.
    let units: Vec<PathBuf> = std::fs::read_dir(dir.join("u"))
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.to_string_lossy().contains("r5"))
        .collect();
    assert!(!units.is_empty());
    let victim = units[0].clone();
    let saved = std::fs::read(&victim).unwrap();
    std::fs::remove_file(&victim).unwrap();
    let mut all = vec![0u8; stream.len()];
    assert!(r.read_at(0, &mut all).unwrap() > 0);
    assert_eq!(all, stream);
    // Two damaged blocks in one row are beyond parity: reported, never wrong data.
    for u in &units[1..2] {
        let mut b = std::fs::read(u).unwrap();
        b[0] ^= 0xff;
        std::fs::write(u, b).unwrap();
    }
    let err = r.read_at(0, &mut all).unwrap_err();
    assert!(matches!(err, FileError::Unrecoverable { .. }), "{err}");
    std::fs::write(&victim, saved).unwrap();
    w.finalize().unwrap();
}
