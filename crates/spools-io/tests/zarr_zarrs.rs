//! Zarr arrays written by a three-rank Spools job from block-cyclic distributions (sharded
//! and not, compressed with zstd and gzip and not, shapes the shards do not divide) are
//! opened by the `zarrs` crate, an independent Zarr v3 implementation, and every element
//! is compared with the value the ranks wrote: the element's global index in its type.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use std::path::{Path, PathBuf};
use std::sync::Arc;

use spools::{Format, Layout, WriteOptions};
use spools_io::file::Compressor;
use spools_testkit::{assert_ok, checked, e, rank_main, tempdir, Job};

/// name, layout spec, chunks, shards, compressor
type Case = (
    &'static str,
    &'static str,
    &'static [u64],
    Option<&'static [u64]>,
    Compressor,
);

const CASES: &[Case] = &[
    (
        "u16",
        "u16[37,23] cyclic(3),block on 3x1",
        &[8, 5],
        Some(&[16, 10]),
        Compressor::Zstd(3),
    ),
    (
        "f64",
        "f64[20,9,5] block,*,cyclic on 1x1x3",
        &[4, 9, 2],
        None,
        Compressor::None,
    ),
    (
        "i32",
        "i32[50,40] block,block on 3x1",
        &[7, 8],
        Some(&[14, 40]),
        Compressor::Gzip(1),
    ),
    (
        "f32",
        "f32[64] cyclic(5) on 3",
        &[16],
        Some(&[32]),
        Compressor::None,
    ),
];

/// The bytes of element `i` (its global index) in the layout's type.
fn value(dtype: spools_map::DType, i: u64) -> Vec<u8> {
    use spools_map::DType;
    match dtype {
        DType::U16 => (i as u16).to_le_bytes().to_vec(),
        DType::I32 => (i as i32).to_le_bytes().to_vec(),
        DType::F32 => (i as f32).to_le_bytes().to_vec(),
        DType::F64 => (i as f64).to_le_bytes().to_vec(),
        d => unreachable!("{d}"),
    }
}

/// This rank's local share of `l`: every element holds its global index.
fn share(l: &Layout, me: u64) -> Vec<u8> {
    let Layout::Array(a) = l else { unreachable!() };
    let es = a.dtype().size();
    let n = l.local_bytes(me).unwrap();
    let mut out = vec![0u8; n as usize];
    for g in 0..l.total_bytes().unwrap() / es {
        let loc = l.locate(g * es).unwrap();
        if loc.unit == me {
            let at = loc.local as usize;
            out[at..at + es as usize].copy_from_slice(&value(a.dtype(), g));
        }
    }
    out
}

fn write_all(w: &spools::World) -> Result<(), String> {
    let out = PathBuf::from(std::env::var("SPOOLS_TEST_DIR").map_err(|x| x.to_string())?);
    let comm = e(w.io_communicator())?;
    let me = u64::from(w.rank());
    for (name, spec, chunks, shards, compressor) in CASES {
        let l: Layout = e(spec.parse())?;
        let opts = WriteOptions {
            format: Format::Zarr {
                chunks: chunks.to_vec(),
                shards: shards.map(<[u64]>::to_vec),
                compressor: *compressor,
            },
            ..Default::default()
        };
        e(spools_io::file::write(
            comm,
            &out.join(name),
            &share(&l, me),
            &l,
            &opts,
        ))?;
    }
    Ok(())
}

fn check_with_zarrs(dir: &Path, name: &str, spec: &str) {
    let l: Layout = spec.parse().unwrap();
    let Layout::Array(a) = &l else { unreachable!() };
    let store = Arc::new(zarrs::filesystem::FilesystemStore::new(dir.join(name)).unwrap());
    let array = zarrs::array::Array::open(store, "/").unwrap();
    assert_eq!(array.shape(), a.shape(), "{name}");
    let all = array.subset_all();
    let n = a.shape().iter().product::<u64>();
    let bytes: Vec<u8> = match a.dtype() {
        spools_map::DType::U16 => array
            .retrieve_array_subset::<Vec<u16>>(&all)
            .unwrap()
            .iter()
            .flat_map(|v| v.to_le_bytes())
            .collect(),
        spools_map::DType::I32 => array
            .retrieve_array_subset::<Vec<i32>>(&all)
            .unwrap()
            .iter()
            .flat_map(|v| v.to_le_bytes())
            .collect(),
        spools_map::DType::F32 => array
            .retrieve_array_subset::<Vec<f32>>(&all)
            .unwrap()
            .iter()
            .flat_map(|v| v.to_le_bytes())
            .collect(),
        spools_map::DType::F64 => array
            .retrieve_array_subset::<Vec<f64>>(&all)
            .unwrap()
            .iter()
            .flat_map(|v| v.to_le_bytes())
            .collect(),
        d => unreachable!("{d}"),
    };
    let want: Vec<u8> = (0..n).flat_map(|i| value(a.dtype(), i)).collect();
    assert!(
        bytes == want,
        "{name}: zarrs reads other values than Spools wrote"
    );
}

#[test]
fn zarr_arrays_spools_writes_are_read_by_zarrs() {
    rank_main(|_role| {
        let w = e(spools::init())?;
        checked(&w, write_all);
        e(w.finalize())
    });
    let d = tempdir("zarrs");
    let o = Job::new(3, "zarr_arrays_spools_writes_are_read_by_zarrs")
        .env("SPOOLS_TEST_DIR", d.path())
        .run();
    assert_ok(&o);
    for (name, spec, ..) in CASES {
        check_with_zarrs(d.path(), name, spec);
    }
}
