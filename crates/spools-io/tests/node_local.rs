//! Node-local units (`node_local: true`): unit `u` is touched only by rank `u % N`. Each
//! rank here sees the file through a directory of its own (as ranks on different nodes
//! see their own local disks), so a unit file that any other rank created, wrote or read
//! would be a stray file in, or missing from, that rank's directory.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use std::path::{Path, PathBuf};

use spools::{Format, Layout, ReadOptions, Striping, WriteOptions};
use spools_testkit::{assert_ok, checked, e, rank_main, tempdir, Job};

const RANKS: u64 = 3;
const UNITS: u64 = 5;
const DATA: &str = "u16[40,33] block,* on 3x1";

/// Rank `r`'s view: its own directory holding "the" file.
fn view(base: &Path, r: u64) -> PathBuf {
    base.join(format!("node{r}"))
}

/// The unit files (names) in rank `r`'s view, sorted.
fn units_in(base: &Path, r: u64) -> Vec<String> {
    let mut v: Vec<String> = std::fs::read_dir(view(base, r).join("units"))
        .map(|d| {
            d.flatten()
                .map(|x| x.file_name().to_string_lossy().into_owned())
                .collect()
        })
        .unwrap_or_default();
    v.sort();
    v
}

fn body(w: &spools::World, node_local: bool) -> Result<(), String> {
    let base = PathBuf::from(std::env::var("SPOOLS_TEST_DIR").unwrap());
    let me = u64::from(w.rank());
    let path = view(&base, me).join("f");
    e(std::fs::create_dir_all(view(&base, me)))?;
    let l: Layout = e(DATA.parse())?;
    let mine = e(l.local_bytes(me))? as usize / 2;
    let part: Vec<u16> = (0..mine)
        .map(|i| (i as u64 * 7 + me * 1000) as u16)
        .collect();
    let opts = WriteOptions {
        format: Format::Striped(Striping {
            layout: e(format!("raid5(unit=256B,count={UNITS})").parse())?,
            dirs: vec![PathBuf::from("units")],
            node_local,
        }),
        ..Default::default()
    };
    e(w.write_file(&path, &part, &l, &opts))?;
    // Read back (with another distribution), each rank again through its own view.
    let r: Layout = e("u16[40,33] *,cyclic(4) on 1x3".parse())?;
    let mut back = vec![0u16; e(r.local_bytes(me))? as usize / 2];
    e(w.read_file(&path, &mut back, &r, &ReadOptions::default()))?;
    // The same elements as written: gather both as (global element, value) lists.
    let pairs = |lay: &Layout, vals: &[u16]| -> Result<Vec<u8>, String> {
        let mut out = Vec::new();
        for x in e(lay.extents(me))? {
            for k in 0..x.len / 2 {
                out.extend_from_slice(&((x.global / 2 + k) as u32).to_le_bytes());
                out.extend_from_slice(&vals[(x.local / 2 + k) as usize].to_le_bytes());
            }
        }
        Ok(out)
    };
    let sorted = |all: Vec<Vec<u8>>| {
        let mut v: Vec<[u8; 6]> = all
            .concat()
            .chunks_exact(6)
            .map(|c| c.try_into().unwrap())
            .collect();
        v.sort_unstable();
        v
    };
    let wrote = sorted(e(w.allgather_bytes(&pairs(&l, &part)?))?);
    let read = sorted(e(w.allgather_bytes(&pairs(&r, &back)?))?);
    if wrote != read {
        return Err("the data read back differs from the data written".into());
    }
    Ok(())
}

#[test]
fn node_local_unit_files_are_touched_only_by_their_owner_rank() {
    rank_main(|role| {
        let w = e(spools::init())?;
        checked(&w, |w| body(w, role == "node-local"));
        e(w.finalize())
    });
    let test = "node_local_unit_files_are_touched_only_by_their_owner_rank";
    let d = tempdir("nodelocal");
    assert_ok(
        &Job::new(RANKS as u32, test)
            .role("node-local")
            .env("SPOOLS_TEST_DIR", d.path())
            .run(),
    );
    // Each view holds exactly its rank's units (u % N == r), in the slot just written.
    for r in 0..RANKS {
        let want: Vec<String> = (0..UNITS)
            .filter(|u| u % RANKS == r)
            .map(|u| format!("f.u{u}.s1"))
            .collect();
        assert_eq!(units_in(&d, r), want, "rank {r}'s directory");
    }
    // The manifest is rank 0's alone.
    assert!(view(&d, 0).join("f").exists());
    assert!(!view(&d, 1).join("f").exists() && !view(&d, 2).join("f").exists());

    // The control: shared storage (any aggregator writes any unit) cannot work this way.
    let d = tempdir("shared");
    let o = Job::new(RANKS as u32, test)
        .role("shared")
        .env("SPOOLS_TEST_DIR", d.path())
        .run();
    let strays = (0..RANKS).any(|r| {
        units_in(&d, r)
            .iter()
            .any(|n| !(0..UNITS).any(|u| u % RANKS == r && *n == format!("f.u{u}.s1")))
    });
    assert!(
        !o.status.success() || strays,
        "shared storage through per-rank views went unnoticed: {o:?}"
    );
}
