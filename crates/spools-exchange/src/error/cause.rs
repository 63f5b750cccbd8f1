//! What a rank that failed a collective step tells the others ([`Cause`]), and its bytes
//! on the wire (sent by [`agree_on_outcome`](crate::agree_on_outcome) and the I/O layer's
//! decisions of rank 0; spoken only between ranks of one job, decoded from untrusted
//! bytes: every input decodes to some cause).

use super::ErrorKind;

/// The most message bytes a cause carries (a longer message is cut at a character
/// boundary).
pub(crate) const MAX_MESSAGE: usize = 4096;

/// Why a rank failed its part of a collective operation, as the other ranks learn it: the
/// error's [`ErrorKind`] and its message. The `Remote` variants of the crate's errors
/// carry it, so an interface maps the same kind to the same class on every rank.
///
/// ```
/// use spools_exchange::{Cause, ErrorKind};
/// let c = Cause::new(ErrorKind::NotFound, "open /data/x: no such file");
/// assert_eq!(c.kind, ErrorKind::NotFound);
/// assert_eq!(c.to_string(), "open /data/x: no such file");
/// ```
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Cause {
    /// The kind of the failing rank's error (a messaging failure is told as
    /// [`ErrorKind::Transport`]: the others cannot look into it).
    pub kind: ErrorKind,
    /// The failing rank's message (with its sources).
    pub message: String,
}

impl std::fmt::Display for Cause {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.message)
    }
}

impl Cause {
    /// A cause of `kind` with `message` (cut to `MAX_MESSAGE` (4 KiB) bytes).
    pub fn new(kind: ErrorKind, message: impl Into<String>) -> Cause {
        let mut message = message.into();
        if message.len() > MAX_MESSAGE {
            let mut end = MAX_MESSAGE;
            while !message.is_char_boundary(end) {
                end -= 1;
            }
            message.truncate(end);
        }
        let kind = match kind {
            ErrorKind::Transfer => ErrorKind::Transport,
            k => k,
        };
        Cause { kind, message }
    }

    /// The cause of `e`: its kind and its message followed by its sources'
    /// ([`message_chain`]).
    pub fn of(kind: ErrorKind, e: &dyn std::error::Error) -> Cause {
        Cause::new(kind, message_chain(e))
    }

    /// The bytes of this cause: the kind's code, then the message.
    pub fn encode(&self) -> Vec<u8> {
        let mut b = Vec::with_capacity(1 + self.message.len());
        b.push(code(self.kind));
        b.extend_from_slice(self.message.as_bytes());
        b
    }

    /// The cause `bytes` describe. Untrusted: an unknown kind is [`ErrorKind::Remote`], a
    /// message that is not UTF-8 is shown lossily, an over-long one is cut; nothing fails.
    pub fn decode(bytes: &[u8]) -> Cause {
        match bytes.split_first() {
            Some((&k, msg)) => Cause::new(
                kind_of(k).unwrap_or(ErrorKind::Remote),
                String::from_utf8_lossy(&msg[..msg.len().min(MAX_MESSAGE)]),
            ),
            None => Cause::new(ErrorKind::Remote, "(no cause was told)"),
        }
    }
}

/// An error a rank tells the others when it fails a collective step: its kind and its
/// message ([`agree`](crate::collective::agree)). The I/O layer's errors implement it.
///
/// ```
/// use spools_exchange::{ErrorKind, ExchangeError, Told};
/// let e = ExchangeError::MixedSingleCopy;
/// assert_eq!(Told::cause(&e).kind, ErrorKind::Transport);
/// ```
pub trait Told: std::error::Error + Sized {
    /// The error's kind.
    fn kind(&self) -> ErrorKind;

    /// What this rank tells the others.
    fn cause(&self) -> Cause {
        Cause::of(self.kind(), self)
    }
}

/// An error's message followed by its sources' messages (the system's error of an I/O
/// failure), each once: what a failing rank tells the others, and what the interfaces
/// show.
///
/// ```
/// let e = std::io::Error::other("disk full");
/// assert_eq!(spools_exchange::message_chain(&e), "disk full");
/// ```
pub fn message_chain(e: &dyn std::error::Error) -> String {
    let mut s = e.to_string();
    let mut src = e.source();
    while let Some(x) = src {
        let m = x.to_string();
        if !s.contains(&m) {
            s.push_str(": ");
            s.push_str(&m);
        }
        src = x.source();
    }
    s
}

/// The kinds by their codes on the wire (a kind's code is its place here: append only).
const KINDS: [ErrorKind; 13] = [
    ErrorKind::Damaged,
    ErrorKind::Unsupported,
    ErrorKind::BadArgument,
    ErrorKind::Unavailable,
    ErrorKind::Mismatch,
    ErrorKind::NotFound,
    ErrorKind::Exists,
    ErrorKind::Io,
    ErrorKind::Transfer,
    ErrorKind::Remote,
    ErrorKind::WrongType,
    ErrorKind::Transport,
    ErrorKind::PeerGone,
];

fn code(k: ErrorKind) -> u8 {
    KINDS.iter().position(|&x| x == k).unwrap_or(9) as u8
}

fn kind_of(code: u8) -> Option<ErrorKind> {
    KINDS.get(usize::from(code)).copied()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_kind_round_trips() {
        for &k in &KINDS {
            let c = Cause::new(k, "why: ünïcode");
            assert_eq!(Cause::decode(&c.encode()), c);
        }
    }

    #[test]
    fn transfer_is_told_as_transport() {
        assert_eq!(
            Cause::new(ErrorKind::Transfer, "x").kind,
            ErrorKind::Transport
        );
    }

    #[test]
    fn garbage_decodes_to_some_cause() {
        assert_eq!(Cause::decode(&[]).kind, ErrorKind::Remote);
        assert_eq!(Cause::decode(&[200, b'x']).kind, ErrorKind::Remote);
        let c = Cause::decode(&[5, 0xff, 0xfe, b'a']);
        assert_eq!(c.kind, ErrorKind::NotFound);
        assert!(c.message.ends_with('a'));
        let long = [&[2u8][..], &vec![b'y'; 3 * MAX_MESSAGE]].concat();
        assert_eq!(Cause::decode(&long).message.len(), MAX_MESSAGE);
        // A cut inside a character stays valid text.
        let c = Cause::new(ErrorKind::Io, "é".repeat(MAX_MESSAGE));
        assert!(c.message.len() <= MAX_MESSAGE);
    }
}
