//! HDF5 files as another program (h5py) writes them that Spools must read right or refuse
//! by name (issue 58): an external link (the dataset lives in another file, and reading
//! at its offset in this one would return this file's bytes), a user block before the
//! HDF5 signature (the signature at 512, 1024, 2048, ... bytes, every address after it),
//! a dataset whose data lies in external raw files, and an empty dataset (no storage at
//! all). The fixtures are committed in `tests/data/hdf5/`, made by its
//! `make-fixtures.py`. Each goes through the paths users take: the tools `spools ls` and
//! `spools cat` run ([`tools::describe`], [`tools::open`], [`tools::cat`]) and a job's
//! collective read ([`spools_io::file::read`]). libhdf5 must be installed
//! (scripts/install-hdf5.sh), as for the other HDF5 tests.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use std::path::{Path, PathBuf};

use spools::{Layout, ReadOptions};
use spools_io::file::tools::{self, Opened};
use spools_io::{ErrorKind, FileError};
use spools_testkit::{assert_ok, checked, e, rank_main, Job};

fn data(file: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests/data/hdf5")
        .join(file)
}

/// `FILE:/NAME` of a fixture.
fn named(file: &str, name: &str) -> PathBuf {
    PathBuf::from(format!("{}:{name}", data(file).display()))
}

/// What `spools cat` prints of `path`.
fn cat(path: &Path) -> Result<Vec<u8>, FileError> {
    let mut out = Vec::new();
    tools::cat(path, &mut out, &mut |_, _| {})?;
    Ok(out)
}

fn le<T: Copy, const N: usize>(v: &[T], f: impl Fn(T) -> [u8; N]) -> Vec<u8> {
    v.iter().flat_map(|&x| f(x)).collect()
}

/// `userblock512.h5`'s `/d`: `arange(10) * 7 - 20` as `<i4`.
fn userblock512_d() -> Vec<u8> {
    let v: Vec<i32> = (0..10).map(|i| i * 7 - 20).collect();
    le(&v, i32::to_le_bytes)
}

/// `userblock2048.h5`'s `/g/d`: `arange(12) * 0.5` as `<f8`, shape (3, 4).
fn userblock2048_gd() -> Vec<u8> {
    let v: Vec<f64> = (0..12).map(|i| f64::from(i) * 0.5).collect();
    le(&v, f64::to_le_bytes)
}

/// `link.h5`'s own dataset `/own`: `arange(64) + 1000` as `<i2`.
fn link_own() -> Vec<u8> {
    let v: Vec<i16> = (0..64).map(|i| i + 1000).collect();
    le(&v, i16::to_le_bytes)
}

/// Checks that `r` failed with an error of kind Unsupported whose message holds every
/// one of `needles`.
fn refused<T: std::fmt::Debug>(r: Result<T, FileError>, what: &str, needles: &[&str]) {
    let err = match r {
        Ok(v) => panic!("{what}: succeeded with {v:?}, expected a refusal"),
        Err(err) => err,
    };
    let msg = err.to_string();
    assert_eq!(err.kind(), ErrorKind::Unsupported, "{what}: {msg}");
    for n in needles {
        assert!(msg.contains(n), "{what}: {msg:?} does not say {n:?}");
    }
}

/// An external link (to a dataset, to a group on the dataset's path, or behind a soft
/// link) is refused by `spools ls` and `spools cat`, naming the link and its target;
/// never read at the target's offset in the file that holds the link, which would be
/// the bytes of `link.h5`'s own dataset there. The file's own dataset reads.
#[test]
fn an_external_link_is_refused_by_name_never_read_from_the_wrong_file() {
    for (name, link, target) in [
        ("/d", "/d", "target.h5:/d"),
        ("/g/e", "/g", "target.h5:/grp"),
    ] {
        let p = named("link.h5", name);
        let what = format!("link.h5:{name}");
        let needles = ["external link", link, target];
        refused(tools::describe(&p), &format!("ls {what}"), &needles);
        refused(tools::open(&p), &format!("open {what}"), &needles);
        refused(cat(&p), &format!("cat {what}"), &needles);
    }
    // Behind a soft link (absolute, or relative to its group): the external link it
    // leads to is named.
    for (name, link) in [("/s", "/d"), ("/h/r", "/h/x")] {
        let p = named("link.h5", name);
        let needles = ["external link", name, link, "target.h5:/d"];
        refused(tools::describe(&p), &format!("ls link.h5:{name}"), &needles);
        refused(cat(&p), &format!("cat link.h5:{name}"), &needles);
    }
    // The file's own dataset, named or as its only dataset (links are not datasets of
    // the file).
    assert_eq!(cat(&named("link.h5", "/own")).unwrap(), link_own());
    assert_eq!(cat(&data("link.h5")).unwrap(), link_own());
    // The target itself reads (what h5py reads through the link).
    assert_eq!(
        cat(&named("target.h5", "/d")).unwrap(),
        le(&[0i64, 1, 2, 3], i64::to_le_bytes)
    );
}

/// A file with a user block (h5py `userblock_size=512`, `2048`) is an HDF5 file: its
/// datasets are found, by `FILE:/NAME` too, and read at their offsets (which count the
/// user block); never taken for a canonical file.
#[test]
fn a_file_with_a_user_block_is_read_at_its_dataset() {
    for p in [data("userblock512.h5"), named("userblock512.h5", "/d")] {
        match tools::open(&p).unwrap() {
            Opened::Plain { offset, bytes } => {
                assert!(offset > 512, "{}: offset {offset}", p.display());
                assert_eq!(bytes, 40, "{}", p.display());
            }
            o => panic!("{}: {o:?}", p.display()),
        }
        assert_eq!(cat(&p).unwrap(), userblock512_d(), "{}", p.display());
    }
    let p = named("userblock2048.h5", "/g/d");
    assert_eq!(cat(&p).unwrap(), userblock2048_gd());
    // Two datasets: the file alone names neither.
    let r = tools::open(&data("userblock2048.h5"));
    let err = r.expect_err("userblock2048.h5 holds two datasets");
    assert!(err.to_string().contains("/g/d"), "{err}");
}

/// `spools ls` of a file with a user block describes its dataset.
#[test]
fn ls_of_a_file_with_a_user_block_describes_its_dataset() {
    let d = tools::describe(&data("userblock512.h5")).unwrap();
    assert!(d.contains("HDF5 file, dataset /d"), "{d}");
    assert!(d.contains("shape [10]"), "{d}");
    let d = tools::describe(&named("userblock2048.h5", "/g/d")).unwrap();
    assert!(d.contains("HDF5 file, dataset /g/d"), "{d}");
    assert!(d.contains("shape [3, 4]"), "{d}");
}

/// A dataset whose data lies in external raw files (h5py `external=`) is refused, saying
/// so and naming the file: not "never written".
#[test]
fn a_dataset_in_external_raw_files_is_refused_by_name() {
    let needles = ["/d", "external files", "ext_raw.bin"];
    for p in [data("external_raw.h5"), named("external_raw.h5", "/d")] {
        let what = p.display().to_string();
        refused(tools::describe(&p), &format!("ls {what}"), &needles);
        refused(cat(&p), &format!("cat {what}"), &needles);
        let msg = tools::open(&p).unwrap_err().to_string();
        assert!(!msg.contains("never written"), "{msg}");
    }
}

/// An empty dataset (shape (0, 10), no storage) is listed as an HDF5 dataset with its
/// shape, never as a canonical file; it reads as no bytes.
#[test]
fn an_empty_dataset_is_listed_as_hdf5_not_as_a_canonical_file() {
    for p in [data("empty.h5"), named("empty.h5", "/d")] {
        let d = tools::describe(&p).unwrap();
        assert!(!d.contains("canonical"), "{d}");
        assert!(d.contains("HDF5 file, dataset /d"), "{d}");
        assert!(d.contains("shape [0, 10]"), "{d}");
        match tools::open(&p).unwrap() {
            Opened::Plain { offset, bytes } => {
                assert!(offset > 0, "{d}");
                assert_eq!(bytes, 0, "{d}");
            }
            o => panic!("{}: {o:?}", p.display()),
        }
        assert_eq!(cat(&p).unwrap(), Vec::<u8>::new());
    }
}

/// Every rank's part of `all` (the dataset's bytes) under `layout`, checked against what
/// the read gave.
fn read_checked(
    comm: &spools::Communicator,
    me: u64,
    path: &Path,
    spec: &str,
    all: &[u8],
) -> Result<(), String> {
    let l: Layout = spec.parse().map_err(|x| format!("{spec}: {x}"))?;
    let mut got = vec![0u8; e(l.local_bytes(me))? as usize];
    e(spools_io::file::read(
        comm,
        path,
        &mut got,
        &l,
        &ReadOptions::default(),
    ))?;
    // Block-distributed along the first dimension: rank `me` holds a run of the stream.
    let before: u64 = (0..me).map(|r| l.local_bytes(r).unwrap_or(0)).sum();
    let want = &all[before as usize..before as usize + got.len()];
    if got != want {
        return Err(format!(
            "{}: rank {me} read {got:?}, want {want:?}",
            path.display()
        ));
    }
    Ok(())
}

/// Two ranks: the user-block files read through a job (block rows, so each rank's part is
/// a run of the file's dataset); an external link and external raw storage refused on
/// every rank as Unsupported, naming the link or the files.
fn job(w: &spools::World) -> Result<(), String> {
    let comm = e(w.io_communicator())?;
    let me = u64::from(w.rank());
    read_checked(
        comm,
        me,
        &data("userblock512.h5"),
        "i32[10] block on 2",
        &userblock512_d(),
    )?;
    read_checked(
        comm,
        me,
        &named("userblock2048.h5", "/g/d"),
        "f64[4,3] block,* on 2x1",
        &[],
    )
    .err()
    .ok_or("userblock2048.h5:/g/d read as f64[4,3]: accepted")?;
    read_checked(
        comm,
        me,
        &named("userblock2048.h5", "/g/d"),
        "f64[3,4] block,* on 2x1",
        &userblock2048_gd(),
    )?;
    for (path, spec, needles) in [
        (
            named("link.h5", "/d"),
            "i64[4] block on 2",
            &["external link", "/d", "target.h5:/d"][..],
        ),
        (
            data("external_raw.h5"),
            "i32[10] block on 2",
            &["external files", "ext_raw.bin"][..],
        ),
    ] {
        let l: Layout = spec.parse().map_err(|x| format!("{spec}: {x}"))?;
        let mut got = vec![0u8; e(l.local_bytes(me))? as usize];
        match spools_io::file::read(comm, &path, &mut got, &l, &ReadOptions::default()) {
            Ok(_) => return Err(format!("{}: read {got:?}", path.display())),
            Err(err) => {
                let msg = err.to_string();
                if err.kind() != ErrorKind::Unsupported {
                    return Err(format!("{}: {:?}: {msg}", path.display(), err.kind()));
                }
                if let Some(n) = needles.iter().find(|n| !msg.contains(**n)) {
                    return Err(format!("{}: {msg:?} does not say {n:?}", path.display()));
                }
            }
        }
    }
    Ok(())
}

#[test]
fn a_job_reads_user_block_files_and_refuses_external_data() {
    rank_main(|role| {
        let w = e(spools::init())?;
        checked(&w, |w| match role {
            "job" => job(w),
            r => Err(format!("unknown role {r}")),
        });
        e(w.finalize())
    });
    let o = Job::new(2, "a_job_reads_user_block_files_and_refuses_external_data")
        .role("job")
        .run();
    assert_ok(&o);
}
