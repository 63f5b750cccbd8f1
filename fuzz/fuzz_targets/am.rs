//! Fuzzes the active-message header decoder: any input must give a header or a `WireError`,
//! never a panic; what decodes is a fixed-size header followed by the rest of the input as
//! its payload, and the header re-encodes to a message that decodes to the same header and
//! payload.
#![no_main]

use libfuzzer_sys::fuzz_target;
use spools_proto::am::{AmHeader, Short, SHORT_LEN};

fuzz_target!(|data: &[u8]| {
    if let Ok(s) = Short::read(data) {
        let mut w = [0u8; SHORT_LEN];
        s.write(&mut w);
        assert_eq!(&w[..], &data[..SHORT_LEN], "short message round trip");
    }
    let (header, payload) = match AmHeader::decode(data) {
        Ok(ok) => ok,
        Err(e) => {
            let _ = e.to_string();
            return;
        }
    };
    let hl = header.encoded_len();
    assert_eq!(
        hl + payload.len(),
        data.len(),
        "{header:?}: header + payload = input"
    );
    assert!(data.ends_with(payload));

    let mut again = Vec::with_capacity(data.len());
    header.encode(&mut again);
    assert_eq!(again.len(), hl, "{header:?}: encoded header length");
    again.extend_from_slice(payload);
    let (back, back_payload) = AmHeader::decode(&again).expect("a re-encoded header decodes");
    assert_eq!(back, header);
    assert_eq!(back_payload, payload);

    match header {
        AmHeader::Batch { count } => {
            assert_eq!(payload.len(), usize::from(count) * SHORT_LEN);
            for chunk in payload.chunks_exact(SHORT_LEN) {
                let _ = Short::read(chunk);
            }
        }
        AmHeader::Bulk(b) => {
            assert!(u64::from(b.offset) + payload.len() as u64 <= u64::from(b.total));
        }
        AmHeader::Put(p) => {
            assert!(p
                .chunk
                .checked_add(payload.len() as u64)
                .is_some_and(|e| e <= p.total));
        }
        AmHeader::Short(_)
        | AmHeader::Get(_)
        | AmHeader::Status(_)
        | AmHeader::GetData(_)
        | AmHeader::RmaAsk(_)
        | AmHeader::RmaKey(_)
        | AmHeader::RmaDone(_) => {}
    }
});
