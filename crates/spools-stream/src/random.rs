//! Random nonces for the secret handshake, from the operating system.

use spools_proto::auth::NONCE_LEN;

/// A fresh nonce.
pub(crate) fn nonce() -> std::io::Result<[u8; NONCE_LEN]> {
    let mut b = [0u8; NONCE_LEN];
    getrandom::fill(&mut b).map_err(|e| std::io::Error::other(e.to_string()))?;
    Ok(b)
}
