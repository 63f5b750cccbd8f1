//! Fuzzes the stream frame decoder: any input must give a frame, a request for more bytes
//! or a `WireError`, never a panic; a decoded frame re-encodes to exactly the bytes it used,
//! and frames are decoded one after another through the whole input, as a receiver does.
#![no_main]

use libfuzzer_sys::fuzz_target;
use spools_proto::stream::decode;

fuzz_target!(|data: &[u8]| {
    let mut rest = data;
    while let Ok(Some((frame, used))) = decode(rest) {
        assert!(used > 0 && used <= rest.len(), "{frame:?} used {used}");
        let mut again = Vec::new();
        frame.encode(&mut again);
        assert_eq!(&again[..], &rest[..used], "{frame:?}: re-encoded");
        rest = &rest[used..];
    }
});
