//! Fuzzes the message protocol's own wire format (`spools-msg`'s `protocol/wire.rs`):
//! request-to-send payloads and argument words from untrusted bytes must give a value or
//! nothing, never a panic.
#![no_main]

use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let _ = spools_msg::decode_untrusted(data);
});
