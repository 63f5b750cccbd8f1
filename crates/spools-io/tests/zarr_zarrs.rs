//! Zarr arrays written by a three-rank Spools job from block-cyclic distributions (sharded
//! and not, compressed with zstd and gzip and not, shapes the shards do not divide) are
//! opened by the `zarrs` crate, an independent Zarr v3 implementation, and every element
//! is compared with the value the ranks wrote: the element's global index in its type.
//! And the reverse: arrays `zarrs` writes (sharded with zstd and partial shards, a missing
//! chunk, unsharded) are read by a three-rank Spools job with block-cyclic distributions
//! and checked element by element.

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

/// Arrays zarrs writes: name, shape, shard (None: unsharded), chunk, zstd, the region left
/// unwritten (fill value 7) as a range of the first dimension.
type Foreign = (
    &'static str,
    [u64; 2],
    Option<[u64; 2]>,
    [u64; 2],
    bool,
    Option<(u64, u64)>,
);

const FOREIGN: &[Foreign] = &[
    ("sharded-zstd", [37, 23], Some([16, 10]), [8, 5], true, None),
    (
        "sharded-hole",
        [30, 20],
        Some([10, 20]),
        [5, 5],
        false,
        Some((10, 20)),
    ),
    ("plain", [11, 13], None, [4, 4], true, None),
];

/// Element (i, j) of a foreign array: its index, or 7 in the unwritten rows.
fn foreign_value(shape: [u64; 2], hole: Option<(u64, u64)>, i: u64, j: u64) -> i32 {
    match hole {
        Some((a, b)) if (a..b).contains(&i) => 7,
        _ => (i * shape[1] + j) as i32,
    }
}

fn write_with_zarrs(dir: &Path) {
    use std::num::NonZeroU64;
    use zarrs::array::codec::{ShardingCodecBuilder, ZstdCodec};
    use zarrs::array::{data_type, ArrayBuilder, ArraySubset};
    for (name, shape, shard, chunk, zstd, hole) in FOREIGN {
        let store = Arc::new(zarrs::filesystem::FilesystemStore::new(dir.join(name)).unwrap());
        let mut b = ArrayBuilder::new(
            shape.to_vec(),
            shard.unwrap_or(*chunk).to_vec(),
            data_type::int32(),
            7i32,
        );
        let compress: Vec<Arc<dyn zarrs::array::BytesToBytesCodecTraits>> = if *zstd {
            vec![Arc::new(ZstdCodec::new(3, false))]
        } else {
            Vec::new()
        };
        if shard.is_some() {
            let inner: Vec<NonZeroU64> =
                chunk.iter().map(|&c| NonZeroU64::new(c).unwrap()).collect();
            let codec = ShardingCodecBuilder::new(inner, &data_type::int32())
                .bytes_to_bytes_codecs(compress)
                .build();
            b.array_to_bytes_codec(Arc::new(codec));
        } else {
            b.bytes_to_bytes_codecs(compress);
        }
        let array = b.build(store, "/").unwrap();
        array.store_metadata().unwrap();
        // Rows outside the hole, written as two subsets (the hole's chunks are never stored).
        let (a, z) = hole.unwrap_or((shape[0], shape[0]));
        for (lo, hi) in [(0, a), (z, shape[0])] {
            if lo < hi {
                let vals: Vec<i32> = (lo..hi)
                    .flat_map(|i| (0..shape[1]).map(move |j| foreign_value(*shape, None, i, j)))
                    .collect();
                let subset = ArraySubset::new_with_ranges(&[lo..hi, 0..shape[1]]);
                array.store_array_subset(&subset, vals.as_slice()).unwrap();
            }
        }
    }
}

fn read_foreign(w: &spools::World) -> Result<(), String> {
    let dir = PathBuf::from(std::env::var("SPOOLS_TEST_DIR").map_err(|x| x.to_string())?);
    let comm = e(w.io_communicator())?;
    let me = u64::from(w.rank());
    for (name, shape, _, _, _, hole) in FOREIGN {
        for dists in [
            "cyclic(3),block on 3x1",
            "*,cyclic on 1x3",
            "block,block on 1x2",
        ] {
            let spec = format!("i32[{},{}] {dists}", shape[0], shape[1]);
            let l: Layout = e(spec.parse())?;
            let mut got = vec![0u8; e(l.local_bytes(me.min(l.units() - 1)))? as usize];
            if me >= l.units() {
                got.clear();
            }
            e(spools_io::file::read(
                comm,
                &dir.join(name),
                &mut got,
                &l,
                &Default::default(),
            ))?;
            for g in 0..shape[0] * shape[1] {
                let loc = l.locate(g * 4).ok_or("locate")?;
                if loc.unit == me {
                    let at = loc.local as usize;
                    let v = i32::from_le_bytes(got[at..at + 4].try_into().map_err(|_| "slice")?);
                    let want = foreign_value(*shape, *hole, g / shape[1], g % shape[1]);
                    if v != want {
                        return Err(format!(
                            "{name} as {spec}: element {g} is {v}, zarrs wrote {want}"
                        ));
                    }
                }
            }
        }
    }
    Ok(())
}

#[test]
fn zarr_arrays_zarrs_writes_are_read_by_spools() {
    rank_main(|_role| {
        let w = e(spools::init())?;
        checked(&w, read_foreign);
        e(w.finalize())
    });
    let d = tempdir("zarrs-in");
    write_with_zarrs(d.path());
    // The hole is really absent: its shard holds no chunk there.
    assert!(!d.path().join("sharded-hole/c/1/0").exists());
    let o = Job::new(3, "zarr_arrays_zarrs_writes_are_read_by_spools")
        .env("SPOOLS_TEST_DIR", d.path())
        .run();
    assert_ok(&o);
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
