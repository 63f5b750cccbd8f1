//! One entry point for every decoder of untrusted bytes in the I/O layer (fuzzing).

use crate::{file, pipe};

/// Feeds untrusted bytes to every decoder of the I/O layer (pipe hellos and frames, `.npy`
/// headers, manifests, checksum sidecars, single-copy descriptors, Zarr metadata, shards
/// and chunks, a failing rank's cause) and returns how many
/// accepted them. For fuzzing and garbage tests: it must never panic, hang, or allocate
/// beyond the input's size.
#[doc(hidden)]
pub fn decode_untrusted(data: &[u8]) -> usize {
    let mut ok = 0;
    ok += usize::from(pipe::decode_any(data).is_ok());
    ok += usize::from(file::parse_npy_header(data).is_ok());
    ok += usize::from(file::Manifest::parse(std::path::Path::new("fuzz"), data).is_ok());
    ok += usize::from(file::Sums::parse(std::path::Path::new("fuzz"), data).is_ok());
    ok += file::decode_zarr(data);
    ok += spools_exchange::decode_any(data);
    ok += usize::from(crate::error::Cause::decode(data).kind != crate::ErrorKind::Remote);
    ok
}
