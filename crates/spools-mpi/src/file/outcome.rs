//! How a file operation fails: the MPI class and error of an I/O failure
//! ([`io_class`], [`io_error`]), and every rank's outcome of a collective step: blocking
//! ([`agree_on`]) or in one non-blocking collective ([`Told`], for the non-blocking
//! collective accesses). The failing rank tells the others the MPI class it decided,
//! so every rank reports the same class; the I/O layer's own errors are classed by
//! their kind ([`class_of_kind`]).

use std::ffi::c_int;

use spools::{Communicator, Op};
use spools_io::ErrorKind;

use crate::abi::*;
use crate::env::error::MpiError;

/// The most message bytes a failing rank tells the others in [`agree_on`] (a longer
/// message is cut at a character boundary).
pub(crate) const MAX_MESSAGE: usize = 4096;

/// Every rank's outcome of a collective step on `comm`: an error on any rank is an error
/// on every rank. One small allreduce finds the first failing rank; only on a failure,
/// that rank broadcasts its error's MPI class and message ([`Told`]), which the ranks
/// that succeeded report, in that class. A rank that failed keeps its own error.
///
/// # Errors
/// This rank's error (it wins even when the agreement fails too); else the first
/// failing rank's, in its class; else the messaging error of a failed agreement.
pub(crate) fn agree_on<T>(
    comm: &Communicator,
    r: Result<T, MpiError>,
    call: &'static str,
) -> Result<T, MpiError> {
    agree_on_min(comm, r, 0, call).map(|(v, _)| v)
}

/// [`agree_on`], with one more number folded into the same allreduce: the least `word`
/// of every rank, returned with the outcome (a call that needs a group-wide minimum or
/// "any rank" besides the outcome takes no second step for it).
///
/// # Errors
/// As [`agree_on`].
pub(crate) fn agree_on_min<T>(
    comm: &Communicator,
    r: Result<T, MpiError>,
    word: u32,
    call: &'static str,
) -> Result<(T, u32), MpiError> {
    agree_on_words(comm, r, [word], call).map(|(v, [w])| (v, w))
}

/// [`agree_on`], with the least and the greatest `word` of every rank found in the same
/// allreduce: where they differ, the ranks passed different words (an argument MPI asks
/// to be the same everywhere), which every rank then knows.
///
/// # Errors
/// As [`agree_on`].
pub(crate) fn agree_on_range<T>(
    comm: &Communicator,
    r: Result<T, MpiError>,
    word: u32,
    call: &'static str,
) -> Result<(T, [u32; 2]), MpiError> {
    agree_on_words(comm, r, [word, !word], call).map(|(v, [lo, not_hi])| (v, [lo, !not_hi]))
}

/// [`agree_on`] with the least of each of `words` over every rank, in the same allreduce.
fn agree_on_words<T, const N: usize>(
    comm: &Communicator,
    r: Result<T, MpiError>,
    words: [u32; N],
    call: &'static str,
) -> Result<(T, [u32; N]), MpiError> {
    let mut flag = [0u32; 4];
    flag[0] = match &r {
        Ok(_) => u32::MAX,
        Err(_) => comm.rank(),
    };
    flag[1..=N].copy_from_slice(&words);
    let mut first = [0u32; 4];
    let agreed = comm.allreduce(&flag[..=N], &mut first[..=N], &Op::Min);
    let (r, first) = match (r, agreed) {
        (Err(e), Err(_)) => return Err(e),
        (Ok(_), Err(e)) => return Err(e.into()),
        (Ok(v), Ok(())) if first[0] == u32::MAX => {
            let mut least = [0u32; N];
            least.copy_from_slice(&first[1..=N]);
            return Ok((v, least));
        }
        (r, Ok(())) => (r, first[0]),
    };
    // The first failing rank tells the others its class and message.
    let told = match &r {
        Err(e) if comm.rank() == first => Told::of(e).encode(MAX_MESSAGE),
        _ => Vec::new(),
    };
    let heard = comm.bcast_bytes(first, &told);
    match (r, heard) {
        (Err(e), _) => Err(e),
        (Ok(_), Ok(bytes)) => Err(Told::decode(&bytes).error(first, call)),
        (Ok(_), Err(e)) => Err(e.into()),
    }
}

/// What a rank that failed a collective step tells the others: the MPI class it
/// decided and its error's message. On the wire: the class (4 bytes, little-endian),
/// the message's length (2 bytes) and the message; spoken only between ranks of one
/// job, decoded from untrusted bytes (every input decodes to some error).
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Told {
    /// The failing rank's MPI error class.
    pub(crate) class: c_int,
    /// Its error's message.
    pub(crate) message: String,
}

impl Told {
    /// What a rank that failed with `e` tells.
    pub(crate) fn of(e: &MpiError) -> Told {
        Told {
            class: e.class(),
            message: e.to_string(),
        }
    }

    /// The bytes of this error, the message cut to `max` bytes (at most `u16::MAX`) at
    /// a character boundary.
    pub(crate) fn encode(&self, max: usize) -> Vec<u8> {
        let mut end = self.message.len().min(max).min(usize::from(u16::MAX));
        while !self.message.is_char_boundary(end) {
            end -= 1;
        }
        let msg = &self.message.as_bytes()[..end];
        let mut b = Vec::with_capacity(6 + msg.len());
        b.extend_from_slice(&self.class.to_le_bytes());
        b.extend_from_slice(&(msg.len() as u16).to_le_bytes());
        b.extend_from_slice(msg);
        b
    }

    /// The error `bytes` describe. Untrusted: a class that is no error class is
    /// `MPI_ERR_IO`, a message past the bytes is cut, one that is not UTF-8 shown lossily.
    pub(crate) fn decode(bytes: &[u8]) -> Told {
        let class = bytes
            .get(..4)
            .and_then(|b| b.try_into().ok())
            .map(c_int::from_le_bytes)
            .filter(|c| (1..=MPI_ERR_LASTCODE).contains(c))
            .unwrap_or(MPI_ERR_IO);
        let len = bytes
            .get(4..6)
            .and_then(|b| b.try_into().ok())
            .map_or(0, |b| usize::from(u16::from_le_bytes(b)));
        let msg = bytes.get(6..).unwrap_or_default();
        Told {
            class,
            message: String::from_utf8_lossy(&msg[..len.min(msg.len())]).into_owned(),
        }
    }

    /// The error a rank that only heard of rank `rank`'s failure in `call` reports: in
    /// that rank's class.
    pub(crate) fn error(self, rank: u32, call: &'static str) -> MpiError {
        MpiError::invalid(
            self.class,
            // The message names the call already.
            format!(
                "rank {rank} of the file's group failed in {call}: {}",
                self.message
            ),
        )
    }
}

/// An outcome as one word for a non-blocking agreement (an allreduce of the minimum,
/// `deferred.rs`): `u64::MAX` for success, else this rank (high half) and its error's
/// MPI class (low half), so that the minimum is the first failing rank with its class.
pub(crate) fn outcome_word<T>(rank: u32, r: &Result<T, MpiError>) -> u64 {
    match r {
        Ok(_) => u64::MAX,
        Err(e) => u64::from(rank) << 32 | u64::from(e.class() as u32),
    }
}

/// The error a rank that succeeded reports when the minimum of the group's
/// [`outcome_word`]s is `word`: `None` when every rank succeeded; else the first failing
/// rank's, in its class (a class that is no error class, from untrusted bits, is
/// `MPI_ERR_IO`).
pub(crate) fn heard(word: u64, call: &'static str) -> Option<MpiError> {
    if word == u64::MAX {
        return None;
    }
    let rank = (word >> 32) as u32;
    let class = Some(word as u32 as c_int)
        .filter(|c| (1..=MPI_ERR_LASTCODE).contains(c))
        .unwrap_or(MPI_ERR_IO);
    let name = crate::env::error::class_name(class).unwrap_or("an error");
    Some(MpiError::invalid(
        class,
        format!("rank {rank} of the file's group failed in {call} ({name})"),
    ))
}

/// The MPI class of an error of the I/O layer's kind `kind`, as a rank that only heard of
/// another rank's failure reports it.
pub(crate) fn class_of_kind(kind: ErrorKind) -> c_int {
    match kind {
        ErrorKind::NotFound => MPI_ERR_NO_SUCH_FILE,
        ErrorKind::Exists => MPI_ERR_FILE_EXISTS,
        ErrorKind::Unsupported => MPI_ERR_UNSUPPORTED_OPERATION,
        ErrorKind::WrongType => MPI_ERR_TYPE,
        ErrorKind::BadArgument | ErrorKind::Mismatch => MPI_ERR_ARG,
        ErrorKind::Damaged
        | ErrorKind::Unavailable
        | ErrorKind::Io
        | ErrorKind::Transport
        | ErrorKind::PeerGone
        | ErrorKind::Transfer
        | ErrorKind::Remote => MPI_ERR_IO,
    }
}

/// The MPI error class of an error of the I/O layer: a failed system call's by the
/// system's error (this rank's, or the one another rank told with its failure:
/// `MPI_ERR_NO_SPACE`, `MPI_ERR_ACCESS`, ... are the same on every rank), the rest by its
/// kind ([`class_of_kind`]; a failure another rank told this one has that rank's kind).
pub(crate) fn file_class(e: &spools_io::FileError) -> c_int {
    use spools_io::{ExchangeError, FileError};
    let os_error = match e {
        FileError::Io { source, .. } => return io_class(source),
        FileError::Remote { cause, .. }
        | FileError::Declined(cause)
        | FileError::Exchange(ExchangeError::Remote { cause, .. }) => cause.os_error,
        _ => os_error_of(e),
    };
    let by_kind = class_of_kind(e.kind());
    match os_error.map(|n| io_class(&std::io::Error::from_raw_os_error(n))) {
        Some(c) if c != MPI_ERR_IO => c,
        _ => by_kind,
    }
}

/// The system's error number of `e` or of the first of its sources that is a failed
/// system call.
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

/// The MPI error class of a failed file operation.
pub(crate) fn io_class(e: &std::io::Error) -> c_int {
    use std::io::ErrorKind as K;
    match e.raw_os_error() {
        Some(libc::ENOSPC) => return MPI_ERR_NO_SPACE,
        Some(libc::EDQUOT) => return MPI_ERR_QUOTA,
        Some(libc::EROFS) => return MPI_ERR_READ_ONLY,
        Some(libc::ENAMETOOLONG) | Some(libc::ENOTDIR) => return MPI_ERR_BAD_FILE,
        Some(libc::EBUSY) | Some(libc::ETXTBSY) => return MPI_ERR_FILE_IN_USE,
        _ => {}
    }
    match e.kind() {
        K::NotFound => MPI_ERR_NO_SUCH_FILE,
        K::AlreadyExists => MPI_ERR_FILE_EXISTS,
        K::PermissionDenied => MPI_ERR_ACCESS,
        _ => MPI_ERR_IO,
    }
}

/// An error of a failed file operation, naming the call and the file.
pub(crate) fn io_error(call: &'static str, path: &std::path::Path, e: &std::io::Error) -> MpiError {
    MpiError::invalid(io_class(e), format!("{call}: {}: {e}", path.display()))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_told_error_keeps_its_class_and_message() {
        for class in [
            MPI_ERR_ACCESS,
            MPI_ERR_NO_SPACE,
            MPI_ERR_FILE_EXISTS,
            MPI_ERR_NO_SUCH_FILE,
            MPI_ERR_READ_ONLY,
            MPI_ERR_AMODE,
            MPI_ERR_COUNT,
            MPI_ERR_UNSUPPORTED_DATAREP,
        ] {
            let t = Told {
                class,
                message: "why: ünïcode".into(),
            };
            assert_eq!(Told::decode(&t.encode(MAX_MESSAGE)), t);
            let e = t.error(3, "MPI_File_open");
            assert_eq!(e.class(), class);
            assert!(e
                .to_string()
                .starts_with("rank 3 of the file's group failed in MPI_File_open: why"));
        }
    }

    /// A rank that only heard of another rank's failed system call (told through the
    /// I/O layer's agreement, as the whole-array and redistribution paths do) reports the
    /// failing rank's class, not `MPI_ERR_IO`.
    #[test]
    fn a_remote_system_error_keeps_its_class() {
        use spools_io::{Cause, ErrorKind, ExchangeError, FileError};
        for (errno, class) in [
            (libc::ENOSPC, MPI_ERR_NO_SPACE),
            (libc::EDQUOT, MPI_ERR_QUOTA),
            (libc::EACCES, MPI_ERR_ACCESS),
            (libc::EROFS, MPI_ERR_READ_ONLY),
            (libc::EIO, MPI_ERR_IO),
        ] {
            let failed = FileError::Io {
                op: "writing",
                path: "/x".into(),
                source: std::io::Error::from_raw_os_error(errno),
            };
            assert_eq!(file_class(&failed), class);
            // What the other ranks decode from the failing rank's words.
            let told = Cause::decode(&Cause::of(failed.kind(), &failed).encode());
            let remote = FileError::Remote {
                rank: 1,
                path: "/x".into(),
                cause: told.clone(),
            };
            assert_eq!(file_class(&remote), class, "errno {errno}");
            let x = FileError::Exchange(ExchangeError::Remote {
                rank: 1,
                cause: told,
            });
            assert_eq!(file_class(&x), class, "errno {errno}");
        }
        // Without a system error, the kind decides.
        let plain = FileError::Remote {
            rank: 1,
            path: "/x".into(),
            cause: Cause::new(ErrorKind::NotFound, "gone"),
        };
        assert_eq!(file_class(&plain), MPI_ERR_NO_SUCH_FILE);
    }

    #[test]
    fn a_long_message_is_cut_at_a_character() {
        let t = Told {
            class: MPI_ERR_IO,
            message: "é".repeat(100),
        };
        let d = Told::decode(&t.encode(51));
        assert_eq!(d.message, "é".repeat(25));
    }

    #[test]
    fn an_outcome_word_names_the_first_failing_rank_and_its_class() {
        let ok: Result<(), MpiError> = Ok(());
        let bad = |c| -> Result<(), MpiError> { Err(MpiError::invalid(c, "x")) };
        let words = [
            outcome_word(0, &ok),
            outcome_word(1, &bad(MPI_ERR_READ_ONLY)),
            outcome_word(2, &bad(MPI_ERR_ACCESS)),
        ];
        assert!(heard(outcome_word(0, &ok), "MPI_File_iwrite_all").is_none());
        let e = heard(*words.iter().min().unwrap(), "MPI_File_iwrite_all").unwrap();
        assert_eq!(e.class(), MPI_ERR_READ_ONLY);
        assert!(e
            .to_string()
            .starts_with("rank 1 of the file's group failed in MPI_File_iwrite_all"));
        assert_eq!(heard(7, "c").unwrap().class(), 7);
        assert_eq!(heard(0, "c").unwrap().class(), MPI_ERR_IO);
        assert_eq!(heard(0xffff_ffff, "c").unwrap().class(), MPI_ERR_IO);
    }

    #[test]
    fn garbage_decodes_to_some_error() {
        assert_eq!(Told::decode(&[]).class, MPI_ERR_IO);
        assert_eq!(Told::decode(&[0, 0, 0, 0]).class, MPI_ERR_IO);
        assert_eq!(Told::decode(&(-5i32).to_le_bytes()).class, MPI_ERR_IO);
        let mut b = MPI_ERR_AMODE.to_le_bytes().to_vec();
        b.extend_from_slice(&[200, 0, 0xff, b'x']);
        let d = Told::decode(&b);
        assert_eq!(d.class, MPI_ERR_AMODE);
        assert!(d.message.ends_with('x'));
    }
}
