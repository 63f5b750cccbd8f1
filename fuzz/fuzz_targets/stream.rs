//! Fuzzes the stream frame decoder (and the framebuffer protocol's frame header): any input must give a frame, a request for more bytes
//! or a `WireError`, never a panic; a decoded frame re-encodes to exactly the bytes it used,
//! and frames are decoded one after another through the whole input, as a receiver does.
//! After a `welcome` that requires the secret's proof, the bytes that follow are the
//! receiver's handshake reply, as a sender reads it.
#![no_main]

use libfuzzer_sys::fuzz_target;
use spools_proto::auth::Secret;
use spools_proto::framebuffer::FrameHeader;
use spools_proto::handshake::{Client, Identity, Purpose, SERVER_HELLO_LEN};
use spools_proto::stream::{decode, Frame, WELCOME_REQUIRE_PROOF};

fuzz_target!(|data: &[u8]| {
    // The framebuffer protocol's header, as a viewer decodes every ADU: a frame re-encodes
    // to its header's bytes (the reserved bytes and title padding aside, which are zero).
    if let Ok((h, pixels)) = FrameHeader::decode(data) {
        assert_eq!(pixels.len() as u64, h.pixel_bytes());
        let again = h.encode();
        assert_eq!(
            FrameHeader::decode(&[&again[..], pixels].concat()).map(|x| x.0),
            Ok(h)
        );
    }
    let mut rest = data;
    while let Ok(Some((frame, used))) = decode(rest) {
        assert!(used > 0 && used <= rest.len(), "{frame:?} used {used}");
        let mut again = Vec::new();
        frame.encode(&mut again);
        assert_eq!(&again[..], &rest[..used], "{frame:?}: re-encoded");
        rest = &rest[used..];
        if let Frame::Welcome(w) = frame {
            if w.flags & WELCOME_REQUIRE_PROOF != 0 && rest.len() >= SERVER_HELLO_LEN {
                let id = Identity {
                    rank: 0,
                    lane: 0,
                    priority: 0,
                };
                let c = Client::new(
                    Secret::from_bytes([0x5a; 16]),
                    [0x3c; 16],
                    Purpose::Data,
                    id,
                );
                let _ = c.on_server_hello(&rest[..SERVER_HELLO_LEN]);
                rest = &rest[SERVER_HELLO_LEN..];
            }
        }
    }
});
