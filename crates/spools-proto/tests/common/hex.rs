//! Bytes from hexadecimal text, for known-answer tests of wire formats (also included by
//! `crates/spools-io/tests/wire_vectors.rs`).

/// Bytes from hexadecimal text; whitespace and `_` are ignored, `'text'` is ASCII.
#[allow(clippy::unwrap_used, clippy::panic)]
pub(crate) fn hx(s: &str) -> Vec<u8> {
    let mut out = Vec::new();
    let mut parts = s.split('\'');
    while let Some(hex) = parts.next() {
        let digits: Vec<u8> = hex
            .bytes()
            .filter(|c| !c.is_ascii_whitespace() && *c != b'_')
            .collect();
        assert!(digits.len() % 2 == 0, "odd hex digits in {hex:?}");
        for pair in digits.chunks(2) {
            let t = std::str::from_utf8(pair).unwrap();
            out.push(u8::from_str_radix(t, 16).unwrap_or_else(|_| panic!("bad hex {t:?}")));
        }
        if let Some(text) = parts.next() {
            out.extend_from_slice(text.as_bytes());
        }
    }
    out
}
