//! Fuzzes the I/O layer's decoders of untrusted bytes: parallel-pipe hellos and frames,
//! `.npy` headers, striped-file manifests, and Zarr metadata, shards and chunks. Any input must give a value or an error,
//! never a panic.
#![no_main]

use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let _ = spools_io::decode_untrusted(data);
});
