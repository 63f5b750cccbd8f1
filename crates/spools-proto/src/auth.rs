//! The job secret and the proofs built from it.
//!
//! Every job has a random 128-bit secret, handed to its ranks by the launcher (or written by
//! rank 0 into a file only the user can read). The secret itself never crosses a wire: each
//! side of a connection proves that it knows it by sending a keyed BLAKE3 hash of both
//! sides' fresh nonces and of the role it plays, so a proof captured on one connection is
//! useless on any other.
//!
//! ```
//! use spools_proto::auth::{Proof, Role, Secret};
//! let s = Secret::from_bytes([7; 16]);
//! let hex = s.to_hex();
//! assert_eq!(Secret::from_hex(&hex).unwrap(), s);
//! let p = Proof::compute(&s, Role::Server, &[1; 16], &[2; 16], b"ctx");
//! assert!(p.verify(&s, Role::Server, &[1; 16], &[2; 16], b"ctx"));
//! assert!(!p.verify(&s, Role::Client, &[1; 16], &[2; 16], b"ctx"));
//! ```

use std::fmt;

use thiserror::Error;

/// Length of a job secret in bytes (128 bits).
pub const SECRET_LEN: usize = 16;
/// Length of a handshake nonce in bytes.
pub const NONCE_LEN: usize = 16;
/// Length of a proof in bytes.
pub const PROOF_LEN: usize = 32;

/// A job's shared secret. Its `Debug` form does not reveal it.
#[derive(Clone, PartialEq, Eq)]
pub struct Secret([u8; SECRET_LEN]);

/// A secret given as text that is not 32 hexadecimal digits.
#[derive(Debug, Clone, PartialEq, Eq, Error)]
#[error("a job secret is 32 hexadecimal digits (128 bits); got {len} characters{detail}")]
pub struct SecretParseError {
    len: usize,
    detail: &'static str,
}

impl Secret {
    /// Wraps raw secret bytes (for instance from the operating system's random source).
    pub fn from_bytes(b: [u8; SECRET_LEN]) -> Self {
        Secret(b)
    }

    /// The raw bytes.
    pub fn as_bytes(&self) -> &[u8; SECRET_LEN] {
        &self.0
    }

    /// Lower-case hexadecimal, 32 digits.
    pub fn to_hex(&self) -> String {
        self.0.iter().map(|b| format!("{b:02x}")).collect()
    }

    /// Parses 32 hexadecimal digits.
    ///
    /// # Errors
    /// [`SecretParseError`] when the text is not exactly 32 hexadecimal digits.
    pub fn from_hex(s: &str) -> Result<Self, SecretParseError> {
        let s = s.trim();
        if !s.bytes().all(|c| c.is_ascii_hexdigit()) && s.len() == 2 * SECRET_LEN {
            return Err(SecretParseError {
                len: s.len(),
                detail: " (not hexadecimal)",
            });
        }
        if s.len() != 2 * SECRET_LEN {
            return Err(SecretParseError {
                len: s.len(),
                detail: "",
            });
        }
        let mut out = [0u8; SECRET_LEN];
        for (i, o) in out.iter_mut().enumerate() {
            let pair = s.get(2 * i..2 * i + 2).ok_or(SecretParseError {
                len: s.len(),
                detail: " (not ASCII)",
            })?;
            *o = u8::from_str_radix(pair, 16).map_err(|_| SecretParseError {
                len: s.len(),
                detail: " (not hexadecimal)",
            })?;
        }
        Ok(Secret(out))
    }

    fn key(&self) -> [u8; 32] {
        blake3::derive_key("spools 2026 job secret proof key", &self.0)
    }

    /// A keyed tag over `data` (used to stamp shared-memory segments with the job).
    pub fn tag(&self, context: &[u8]) -> [u8; PROOF_LEN] {
        *blake3::keyed_hash(&self.key(), context).as_bytes()
    }
}

impl fmt::Debug for Secret {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("Secret(<redacted>)")
    }
}

/// Which side of a connection a proof speaks for; the two sides' proofs differ so that one
/// cannot be reflected back as the other.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Role {
    /// The side that accepted the connection.
    Server,
    /// The side that opened it.
    Client,
}

/// A proof of knowledge of the job secret bound to one connection's nonces.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Proof(pub [u8; PROOF_LEN]);

impl Proof {
    /// Computes the proof of `role` over both nonces and a context (what the connection is
    /// for: the identity the client claims).
    pub fn compute(
        secret: &Secret,
        role: Role,
        client_nonce: &[u8; NONCE_LEN],
        server_nonce: &[u8; NONCE_LEN],
        context: &[u8],
    ) -> Proof {
        let mut h = blake3::Hasher::new_keyed(&secret.key());
        h.update(match role {
            Role::Server => b"server",
            Role::Client => b"client",
        });
        h.update(client_nonce);
        h.update(server_nonce);
        h.update(&(context.len() as u64).to_le_bytes());
        h.update(context);
        Proof(*h.finalize().as_bytes())
    }

    /// Checks a received proof in constant time.
    pub fn verify(
        &self,
        secret: &Secret,
        role: Role,
        client_nonce: &[u8; NONCE_LEN],
        server_nonce: &[u8; NONCE_LEN],
        context: &[u8],
    ) -> bool {
        let want = Self::compute(secret, role, client_nonce, server_nonce, context);
        blake3::Hash::from_bytes(want.0) == blake3::Hash::from_bytes(self.0)
    }
}
