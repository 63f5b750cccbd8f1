//! `.npy` files written by another program (numpy, through `scripts/make-fixtures.py`;
//! committed in `tests/data/`) read through Spools, with one rank and distributed over
//! several, every element checked against the closed-form values the script used; and
//! files Spools writes compared with numpy's byte for byte (the data, and the header's
//! dictionary; numpy pads its header further, leaving room for the shape to grow).

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

mod model;

use std::path::{Path, PathBuf};

use spools::{Format, Layout, ReadOptions, WriteOptions};
use spools_testkit::{assert_ok, checked, e, rank_main, tempdir, Job};

/// A fixture: file, Spools element type, shape, Fortran order.
#[derive(Clone, Copy)]
struct Fixture {
    file: &'static str,
    dtype: &'static str,
    shape: &'static [u64],
    fortran: bool,
}

const FIXTURES: &[Fixture] = &[
    Fixture {
        file: "u8_1d.npy",
        dtype: "u8",
        shape: &[37],
        fortran: false,
    },
    Fixture {
        file: "i16_2d_c.npy",
        dtype: "i16",
        shape: &[5, 7],
        fortran: false,
    },
    Fixture {
        file: "f64_2d_f.npy",
        dtype: "f64",
        shape: &[6, 4],
        fortran: true,
    },
    Fixture {
        file: "u32_3d_c.npy",
        dtype: "u32",
        shape: &[3, 4, 5],
        fortran: false,
    },
    Fixture {
        file: "f32_3d_f.npy",
        dtype: "f32",
        shape: &[4, 3, 2],
        fortran: true,
    },
    Fixture {
        file: "i64_1d.npy",
        dtype: "i64",
        shape: &[11],
        fortran: false,
    },
    Fixture {
        file: "c128_2d_f.npy",
        dtype: "c128",
        shape: &[3, 5],
        fortran: true,
    },
    Fixture {
        file: "i32_2d_c.npy",
        dtype: "i32",
        shape: &[12, 10],
        fortran: false,
    },
];

/// The little-endian bytes of the element at multi-index `i` of fixture `file`: the
/// script's values, written out again.
fn value(file: &str, i: &[u64]) -> Vec<u8> {
    let s = |k: usize| i[k] as i64;
    let f = |k: usize| i[k] as f64;
    match file {
        "u8_1d.npy" => vec![((7 * i[0] + 3) % 256) as u8],
        "i16_2d_c.npy" => ((100 * s(0) + s(1) - 300) as i16).to_le_bytes().to_vec(),
        "f64_2d_f.npy" => (0.5 * f(0) - 0.25 * f(1)).to_le_bytes().to_vec(),
        "u32_3d_c.npy" => ((10000 * i[0] + 100 * i[1] + i[2] + 7) as u32)
            .to_le_bytes()
            .to_vec(),
        "f32_3d_f.npy" => ((f(0) - 2.0 * f(1) + 0.125 * f(2)) as f32)
            .to_le_bytes()
            .to_vec(),
        "i64_1d.npy" => (-(s(0).pow(3)) * 1_000_003).to_le_bytes().to_vec(),
        "c128_2d_f.npy" => [f(0).to_le_bytes(), ((-s(1)) as f64).to_le_bytes()].concat(),
        "i32_2d_c.npy" => ((1000 * i[0] + i[1]) as i32).to_le_bytes().to_vec(),
        _ => panic!("no values for {file}"),
    }
}

/// The multi-index of element `e` (in the array's order) of `shape`.
fn multi_index(shape: &[u64], fortran: bool, mut e: u64) -> Vec<u64> {
    let mut i = vec![0; shape.len()];
    let dims: Vec<usize> = if fortran {
        (0..shape.len()).collect()
    } else {
        (0..shape.len()).rev().collect()
    };
    for k in dims {
        i[k] = e % shape[k];
        e /= shape[k];
    }
    i
}

/// The fixture's whole dataset in its order (what the file's data holds).
fn dataset(x: &Fixture) -> Vec<u8> {
    let n: u64 = x.shape.iter().product();
    (0..n)
        .flat_map(|e| value(x.file, &multi_index(x.shape, x.fortran, e)))
        .collect()
}

fn data_dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/data")
}

/// The layout of fixture `x` distributed as `dists` over `grid`.
fn layout(x: &Fixture, dists: &str, grid: &str) -> Result<Layout, String> {
    let shape: Vec<String> = x.shape.iter().map(u64::to_string).collect();
    let order = if x.fortran { " order=F" } else { "" };
    let spec = format!("{}[{}] {dists} on {grid}{order}", x.dtype, shape.join(","));
    spec.parse().map_err(|err| format!("{spec}: {err}"))
}

/// A `.npy` file's header dictionary (padding dropped) and data.
fn split(npy: &[u8]) -> (String, &[u8]) {
    assert!(npy.starts_with(b"\x93NUMPY\x01\x00"));
    let hl = u16::from_le_bytes([npy[8], npy[9]]) as usize;
    let dict = std::str::from_utf8(&npy[10..10 + hl]).unwrap();
    assert!(dict.ends_with('\n') && (10 + hl) % 64 == 0, "{dict:?}");
    (dict.trim_end().to_string(), &npy[10 + hl..])
}

/// The data of a numpy file is the fixture's values, element by element (the oracle
/// itself is checked against numpy's bytes).
#[test]
fn the_committed_numpy_files_hold_the_closed_form_values() {
    for x in FIXTURES {
        let npy = std::fs::read(data_dir().join(x.file)).unwrap();
        let (dict, data) = split(&npy);
        assert_eq!(data, &dataset(x)[..], "{}", x.file);
        let order = if x.fortran { "True" } else { "False" };
        assert!(
            dict.contains(&format!("'fortran_order': {order}")),
            "{dict}"
        );
    }
}

/// One rank: every fixture read whole; written back, the same bytes as numpy's.
fn single(w: &spools::World) -> Result<(), String> {
    let out = PathBuf::from(std::env::var("SPOOLS_TEST_DIR").map_err(|x| x.to_string())?);
    let comm = e(w.io_communicator())?;
    for x in FIXTURES {
        let dims = vec!["*"; x.shape.len()].join(",");
        let grid = vec!["1"; x.shape.len()].join("x");
        let l = layout(x, &dims, &grid)?;
        let path = data_dir().join(x.file);
        let mut got = vec![0u8; e(l.local_bytes(0))? as usize];
        e(spools_io::file::read(
            comm,
            &path,
            &mut got,
            &l,
            &ReadOptions::default(),
        ))?;
        let n: u64 = x.shape.iter().product();
        let es = got.len() as u64 / n;
        for el in 0..n {
            let i = multi_index(x.shape, x.fortran, el);
            let at = (el * es) as usize;
            if got[at..at + es as usize] != value(x.file, &i)[..] {
                return Err(format!(
                    "{}: element {i:?} is {:?}",
                    x.file,
                    &got[at..at + es as usize]
                ));
            }
        }
        // Read in the other order, a file of more than one dimension is refused (its
        // elements would land transposed).
        if x.shape.iter().filter(|&&n| n > 1).count() > 1 {
            let other = Fixture {
                fortran: !x.fortran,
                ..*x
            };
            let l2 = layout(&other, &dims, &grid)?;
            match spools_io::file::read(comm, &path, &mut got, &l2, &ReadOptions::default()) {
                Err(spools_io::FileError::DatasetMismatch { .. }) => {}
                r => return Err(format!("{} read as {l2}: {r:?}", x.file)),
            }
        }
        // Written by Spools from the closed-form values: numpy's file.
        let mine = out.join(x.file);
        let opts = WriteOptions {
            format: Format::Npy,
            ..Default::default()
        };
        e(spools_io::file::write(comm, &mine, &dataset(x), &l, &opts))?;
    }
    Ok(())
}

/// Three ranks: fixtures read block-cyclically (every local element checked against the
/// element model and the closed-form values), and one written distributed.
fn distributed(w: &spools::World) -> Result<(), String> {
    let out = PathBuf::from(std::env::var("SPOOLS_TEST_DIR").map_err(|x| x.to_string())?);
    let comm = e(w.io_communicator())?;
    let me = u64::from(w.rank());
    for (x, dists, grid) in [
        (&FIXTURES[7], "cyclic(2),block", "3x1"),
        (&FIXTURES[7], "*,cyclic(3)", "1x3"),
        (&FIXTURES[2], "cyclic(4),cyclic", "1x3"),
        (&FIXTURES[3], "*,cyclic,block", "1x3x1"),
        (&FIXTURES[4], "block,*,*", "3x1x1"),
    ] {
        let l = layout(x, dists, grid)?;
        let mut got = vec![0u8; e(l.local_bytes(me))? as usize];
        e(spools_io::file::read(
            comm,
            &data_dir().join(x.file),
            &mut got,
            &l,
            &ReadOptions::default(),
        ))?;
        let mut checked_elems = 0u64;
        let mut bad = None;
        model::for_each_local(&l, me, |local, global, es| {
            let i = multi_index(x.shape, x.fortran, global / es);
            let at = local as usize;
            if bad.is_none() && got[at..at + es as usize] != value(x.file, &i)[..] {
                bad = Some(format!("{} as {l}: rank {me} element {i:?}", x.file));
            }
            checked_elems += 1;
        });
        if let Some(b) = bad {
            return Err(b);
        }
        if checked_elems * (got.len() as u64 / checked_elems.max(1)) != got.len() as u64 {
            return Err(format!(
                "{l}: the model covers {checked_elems} elements of {} bytes",
                got.len()
            ));
        }
    }
    // A distributed write of the closed-form values: numpy's file again.
    let x = &FIXTURES[7];
    let l = layout(x, "cyclic(5),cyclic(3)", "3x1")?;
    let all = dataset(x);
    let (mine, _) =
        model::local_storage(&l, me, e(l.local_bytes(me))? as usize, |g| all[g as usize]);
    let opts = WriteOptions {
        format: Format::Npy,
        ..Default::default()
    };
    e(spools_io::file::write(
        comm,
        &out.join(x.file),
        &mine,
        &l,
        &opts,
    ))?;
    Ok(())
}

/// Spools' file `mine` and numpy's `x.file`: the same dictionary and data, byte for byte.
fn same_as_numpy(mine: &Path, x: &Fixture) {
    let theirs = std::fs::read(data_dir().join(x.file)).unwrap();
    let ours = std::fs::read(mine).unwrap();
    let ((d1, b1), (d2, b2)) = (split(&theirs), split(&ours));
    assert_eq!(d2, d1, "{}: header dictionary", x.file);
    assert!(b2 == b1, "{}: the data differs from numpy's", x.file);
}

#[test]
fn numpy_files_read_through_spools_and_spools_files_match_numpy() {
    rank_main(|role| {
        let w = e(spools::init())?;
        checked(&w, |w| match role {
            "single" => single(w),
            "distributed" => distributed(w),
            r => Err(format!("unknown role {r}")),
        });
        e(w.finalize())
    });
    let test = "numpy_files_read_through_spools_and_spools_files_match_numpy";
    let d = tempdir("npy1");
    let o = Job::new(1, test)
        .role("single")
        .env("SPOOLS_TEST_DIR", d.path())
        .run();
    assert_ok(&o);
    for x in FIXTURES {
        same_as_numpy(&d.join(x.file), x);
    }
    let d = tempdir("npy3");
    let o = Job::new(3, test)
        .role("distributed")
        .env("SPOOLS_TEST_DIR", d.path())
        .run();
    assert_ok(&o);
    same_as_numpy(&d.join(FIXTURES[7].file), &FIXTURES[7]);
}
