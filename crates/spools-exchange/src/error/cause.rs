//! What a rank that failed a collective step tells the others ([`Cause`]), and its bytes
//! on the wire (sent by [`agree_on_outcome`](crate::agree_on_outcome) and the I/O layer's
//! decisions of rank 0; spoken only between ranks of one job, decoded from untrusted
//! bytes: every input decodes to some cause).

use super::ErrorKind;

/// The most message bytes a cause carries (a longer message is cut at a character
/// boundary).
pub(crate) const MAX_MESSAGE: usize = 4096;

/// Why a rank failed its part of a collective operation, as the other ranks learn it: the
/// error's [`ErrorKind`], its message, and the system's error number when a system call
/// failed. The `Remote` variants of the crate's errors carry it, so an interface maps the
/// same failure to the same class on every rank (MPI's `MPI_ERR_NO_SPACE`,
/// `MPI_ERR_ACCESS`, ... are told by the number).
///
/// ```
/// use spools_exchange::{Cause, ErrorKind};
/// let c = Cause::new(ErrorKind::NotFound, "open /data/x: no such file");
/// assert_eq!(c.kind, ErrorKind::NotFound);
/// assert_eq!(c.to_string(), "open /data/x: no such file");
/// assert_eq!(c.os_error, None);
/// let full = std::io::Error::from_raw_os_error(28);
/// assert_eq!(Cause::of(ErrorKind::Io, &full).os_error, Some(28));
/// ```
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Cause {
    /// The kind of the failing rank's error (a messaging failure is told as
    /// [`ErrorKind::Transport`]: the others cannot look into it).
    pub kind: ErrorKind,
    /// The failing rank's message (with its sources).
    pub message: String,
    /// The system's error number (`errno`) of the failed system call the error or one of
    /// its sources is, if any.
    pub os_error: Option<i32>,
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
        Cause {
            kind,
            message,
            os_error: None,
        }
    }

    /// The cause of `e`: its kind, its message followed by its sources'
    /// ([`message_chain`]), and the system's error number of the first of them that is a
    /// failed system call.
    pub fn of(kind: ErrorKind, e: &(dyn std::error::Error + 'static)) -> Cause {
        Cause {
            os_error: os_error_of(e),
            ..Cause::new(kind, message_chain(e))
        }
    }

    /// The bytes of this cause: the kind's code, the system's error number (4 bytes,
    /// little-endian; 0 for none), then the message.
    pub fn encode(&self) -> Vec<u8> {
        let mut b = Vec::with_capacity(5 + self.message.len());
        b.push(code(self.kind));
        b.extend_from_slice(&self.os_error.unwrap_or(0).to_le_bytes());
        b.extend_from_slice(self.message.as_bytes());
        b
    }

    /// The cause `bytes` describe. Untrusted: an unknown kind is [`ErrorKind::Remote`], a
    /// message that is not UTF-8 is shown lossily, an over-long one is cut, a number that
    /// is no system error number (not positive) is none; nothing fails.
    pub fn decode(bytes: &[u8]) -> Cause {
        let Some((&k, rest)) = bytes.split_first() else {
            return Cause::new(ErrorKind::Remote, "(no cause was told)");
        };
        let (os_error, msg) = match rest.split_first_chunk::<4>() {
            Some((n, msg)) => (Some(i32::from_le_bytes(*n)).filter(|&n| n > 0), msg),
            None => (None, &[][..]),
        };
        Cause {
            os_error,
            ..Cause::new(
                kind_of(k).unwrap_or(ErrorKind::Remote),
                String::from_utf8_lossy(&msg[..msg.len().min(MAX_MESSAGE)]),
            )
        }
    }
}

/// The system's error number of `e` or of the first of its sources that is a failed
/// system call ([`std::io::Error::raw_os_error`]).
fn os_error_of(e: &(dyn std::error::Error + 'static)) -> Option<i32> {
    let mut at = Some(e);
    while let Some(x) = at {
        if let Some(n) = x
            .downcast_ref::<std::io::Error>()
            .and_then(std::io::Error::raw_os_error)
        {
            return Some(n);
        }
        at = x.source();
    }
    None
}

/// An error a rank tells the others when it fails a collective step: its kind and its
/// message ([`agree`](crate::collective::agree)). The I/O layer's errors implement it.
///
/// ```
/// use spools_exchange::{ErrorKind, ExchangeError, Told};
/// let e = ExchangeError::MixedSingleCopy;
/// assert_eq!(Told::cause(&e).kind, ErrorKind::Transport);
/// ```
pub trait Told: std::error::Error + Sized + 'static {
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
            let with = Cause {
                os_error: Some(libc_enospc()),
                ..c
            };
            assert_eq!(Cause::decode(&with.encode()), with);
        }
    }

    /// ENOSPC on Linux.
    fn libc_enospc() -> i32 {
        28
    }

    #[test]
    fn the_system_error_is_found_among_the_sources() {
        #[derive(Debug, thiserror::Error)]
        #[error("writing the file")]
        struct Outer(#[source] std::io::Error);
        let e = Outer(std::io::Error::from_raw_os_error(libc_enospc()));
        let c = Cause::of(ErrorKind::Io, &e);
        assert_eq!(c.os_error, Some(libc_enospc()));
        assert!(c.message.starts_with("writing the file: "), "{}", c.message);
        assert_eq!(
            Cause::of(ErrorKind::Io, &std::io::Error::other("x")).os_error,
            None
        );
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
        let c = Cause::decode(&[5, 0, 0, 0, 0, 0xff, 0xfe, b'a']);
        assert_eq!(c.kind, ErrorKind::NotFound);
        assert!(c.message.ends_with('a'));
        // A negative number is none.
        assert_eq!(Cause::decode(&[7, 0xff, 0xff, 0xff, 0xff]).os_error, None);
        let long = [&[2u8, 0, 0, 0, 0][..], &vec![b'y'; 3 * MAX_MESSAGE]].concat();
        assert_eq!(Cause::decode(&long).message.len(), MAX_MESSAGE);
        // A cut inside a character stays valid text.
        let c = Cause::new(ErrorKind::Io, "é".repeat(MAX_MESSAGE));
        assert!(c.message.len() <= MAX_MESSAGE);
    }
}
