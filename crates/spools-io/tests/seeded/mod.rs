//! A byte dataset that differs by seed, laid out `cyclic(4099)`, for the file tests of
//! canonical files (checksums, in-place writes).

use std::path::PathBuf;

use spools::Layout;
use spools_testkit::e;

/// `bytes` bytes in cyclic runs of 4099 bytes over `n` units.
pub(crate) fn layout(bytes: u64, n: u32) -> Layout {
    format!("u8[{bytes}] cyclic(4099) on {n}")
        .parse()
        .unwrap_or_else(|err| panic!("the test layout: {err}"))
}

/// Byte `i` of the dataset of `seed`.
pub(crate) fn value(i: u64, seed: u64) -> u8 {
    (i.wrapping_mul(2_654_435_761) >> 13).wrapping_add(seed) as u8
}

/// Unit `me`'s part of the dataset of `seed`.
pub(crate) fn part(l: &Layout, me: u64, seed: u64) -> Result<Vec<u8>, String> {
    let mut v = vec![0u8; e(l.local_bytes(me))? as usize];
    for x in e(l.extents(me))? {
        for k in 0..x.len {
            v[(x.local + k) as usize] = value(x.global + k, seed);
        }
    }
    Ok(v)
}

/// Reads `path` with `opts` into this rank's part of `layout(bytes, ranks)` and checks it
/// against the dataset of `seed`.
pub(crate) fn read_back(
    w: &spools::World,
    path: &std::path::Path,
    bytes: u64,
    opts: &spools::ReadOptions,
    seed: u64,
) -> Result<(), spools::FileError> {
    let l = layout(bytes, w.size());
    let me = u64::from(w.rank());
    let mut back = vec![0u8; l.local_bytes(me).unwrap_or(0) as usize];
    w.read_file(path, &mut back, &l, opts)?;
    let want = part(&l, me, seed).unwrap_or_default();
    assert_eq!(back, want, "rank {me}: the data read back of {path:?}");
    Ok(())
}

/// The ranks' side of a test (returns in the test process itself): `body` on this rank
/// with the format its role names (`npy`, else canonical).
pub(crate) fn ranks(body: fn(&spools::World, &spools::Format) -> Result<(), String>) {
    spools_testkit::rank_main(|role| {
        let w = e(spools::init())?;
        let fmt = if role == "npy" {
            spools::Format::Npy
        } else {
            spools::Format::Canonical
        };
        spools_testkit::checked(&w, |w| body(w, &fmt));
        e(w.finalize())
    });
}

/// The test's directory (`SPOOLS_TEST_DIR`), the data file in it for `fmt` and its
/// checksum sidecar.
pub(crate) fn paths(fmt: &spools::Format) -> (PathBuf, PathBuf, PathBuf) {
    let dir = PathBuf::from(std::env::var_os("SPOOLS_TEST_DIR").unwrap_or_default());
    let path = dir.join(if *fmt == spools::Format::Npy {
        "f.npy"
    } else {
        "f"
    });
    let side = spools_io::file::sidecar_path(&path);
    (dir, path, side)
}

/// Where the stream starts in the plain file `path` (the `.npy` header's length) and its
/// length.
pub(crate) fn stream(path: &std::path::Path) -> (u64, u64) {
    match spools_io::file::tools::open(path) {
        Ok(spools_io::file::tools::Opened::Plain { offset, bytes, .. }) => (offset, bytes),
        other => panic!("{path:?} is not a plain file: {other:?}"),
    }
}

/// An error naming the temporary files (`.NAME.spools-tmp.*`) left in `dir`, if any.
pub(crate) fn no_temporaries(dir: &std::path::Path) -> Result<(), String> {
    let temps: Vec<String> = e(std::fs::read_dir(dir))?
        .flatten()
        .map(|x| x.file_name().to_string_lossy().into_owned())
        .filter(|n| n.contains("spools-tmp"))
        .collect();
    if temps.is_empty() {
        Ok(())
    } else {
        Err(format!("temporary files left behind: {temps:?}"))
    }
}
