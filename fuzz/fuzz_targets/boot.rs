//! Fuzzes the bootstrap framing in both directions: any input must give a message, a request
//! for more bytes or a `WireError`, never a panic or an allocation beyond the input's size;
//! what decodes re-encodes to exactly the bytes it was decoded from (the encoding is
//! canonical), and a stream of frames decodes frame by frame.
#![no_main]

use std::fmt::Debug;

use libfuzzer_sys::fuzz_target;
use spools_proto::boot::{decode_frame, frame_len, Frame, ToRank, ToServer};

fn check<T: Frame + PartialEq + Debug>(data: &[u8]) {
    // The input as a stream of frames.
    let mut at = 0;
    loop {
        let rest = &data[at..];
        match decode_frame::<T>(rest) {
            Ok(Some((msg, used))) => {
                assert!((5..=rest.len()).contains(&used), "{used} of {}", rest.len());
                let bytes = msg.encode();
                assert_eq!(&bytes[..], &rest[..used], "{msg:?}: canonical encoding");
                let (again, used2) = decode_frame::<T>(&bytes)
                    .expect("a re-encoded frame decodes")
                    .expect("a re-encoded frame is whole");
                assert_eq!(again, msg);
                assert_eq!(used2, bytes.len());
                // A cut frame asks for more.
                assert!(matches!(
                    decode_frame::<T>(&bytes[..bytes.len() - 1]),
                    Ok(None)
                ));
                at += used;
            }
            Ok(None) => {
                if rest.len() >= 4 {
                    let len = frame_len(rest[..4].try_into().expect("4 bytes"))
                        .expect("Ok(None) only for an acceptable length");
                    assert!(rest.len() < 4 + len);
                }
                break;
            }
            Err(e) => {
                let _ = e.to_string();
                break;
            }
        }
    }
    // The input as a frame body.
    if let Ok(msg) = T::decode_body(data) {
        assert_eq!(&msg.encode()[4..], data, "{msg:?}: canonical body");
    }
}

fuzz_target!(|data: &[u8]| {
    check::<ToServer>(data);
    check::<ToRank>(data);
});
