//! The `zarrs` peer of `bench/io/run.py --only formats`: writes (or reads) an `f32[n,n,n]`
//! array as Zarr v3 with the `zarrs` crate from one process (zarrs encodes shards in
//! parallel on its own threads), in shards of `shard^3` holding chunks of `chunk^3`, raw or
//! zstd, every element its global index; prints `{"seconds": S}` for the timed part (the
//! whole write, or the whole read).
//!
//! ```text
//! cargo run --release -p spools-io --example zarrs_peer -- write|read PATH N SHARD CHUNK none|zstd
//! ```

use std::num::NonZeroU64;
use std::sync::Arc;
use std::time::Instant;

use zarrs::array::codec::{Crc32cCodec, ShardingCodecBuilder, ZstdCodec};
use zarrs::array::{data_type, Array, ArrayBuilder};

type Result<T> = std::result::Result<T, Box<dyn std::error::Error>>;

fn shape(n: u64, what: &str) -> Result<Vec<NonZeroU64>> {
    let n = NonZeroU64::new(n).ok_or_else(|| format!("{what} must be positive"))?;
    Ok(vec![n; 3])
}

fn main() -> Result<()> {
    let a: Vec<String> = std::env::args().collect();
    let [_, mode, path, n, shard, chunk, codec] = a.as_slice() else {
        return Err("usage: zarrs_peer write|read PATH N SHARD CHUNK none|zstd".into());
    };
    let (n, shard, chunk): (u64, u64, u64) = (n.parse()?, shard.parse()?, chunk.parse()?);
    let store = Arc::new(zarrs::filesystem::FilesystemStore::new(path)?);
    let t = Instant::now();
    if mode == "write" {
        let values: Vec<f32> = (0..n * n * n).map(|i| i as f32).collect();
        let t = Instant::now();
        let mut inner: Vec<Arc<dyn zarrs::array::BytesToBytesCodecTraits>> = Vec::new();
        if codec == "zstd" {
            inner.push(Arc::new(ZstdCodec::new(1, false)));
        }
        inner.push(Arc::new(Crc32cCodec::new()));
        let sharding = ShardingCodecBuilder::new(shape(chunk, "CHUNK")?, &data_type::float32())
            .bytes_to_bytes_codecs(inner)
            .build();
        let array = ArrayBuilder::new(vec![n; 3], vec![shard; 3], data_type::float32(), 0.0f32)
            .array_to_bytes_codec(Arc::new(sharding))
            .build(store, "/")?;
        array.store_metadata()?;
        array.store_array_subset(&array.subset_all(), values.as_slice())?;
        println!("{{\"seconds\": {}}}", t.elapsed().as_secs_f64());
    } else {
        let array = Array::open(store, "/")?;
        let v = array.retrieve_array_subset::<Vec<f32>>(&array.subset_all())?;
        let secs = t.elapsed().as_secs_f64();
        if v.len() as u64 != n * n * n || v.iter().enumerate().any(|(i, &x)| x != i as f32) {
            return Err("zarrs read other values than the index".into());
        }
        println!("{{\"seconds\": {secs}}}");
    }
    Ok(())
}
