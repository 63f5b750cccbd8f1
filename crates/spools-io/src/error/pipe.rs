//! Why a parallel-pipe operation failed ([`PipeError`]): the step whose system call
//! failed ([`PipeStep`]) or what the other program did wrong ([`PipeViolation`]).

use std::path::PathBuf;

use spools_map::{LayoutError, PlanError};
use spools_msg::MsgError;

use crate::error::ExchangeError;

/// Why a parallel-pipe operation failed.
#[derive(Debug, thiserror::Error)]
pub enum PipeError {
    /// Moving data between this program's own ranks failed.
    #[error(transparent)]
    Exchange(#[from] ExchangeError),
    /// Messaging inside this program failed.
    #[error(transparent)]
    Msg(#[from] MsgError),
    /// The two layouts cannot be planned against each other.
    #[error(transparent)]
    Plan(#[from] PlanError),
    /// A layout could not describe a unit.
    #[error(transparent)]
    Layout(#[from] LayoutError),
    /// A pipe name that is not `pipe:NAME`, `tcp:HOST:PORT`, `stdout` or `stdin`.
    #[error("bad pipe name {0:?}: expected pipe:NAME, tcp:HOST:PORT, stdout or stdin")]
    BadName(String),
    /// Setting up the meeting point or a connection failed. The system's error is the
    /// `source()`, not repeated in the message.
    #[error("{step}")]
    Io {
        /// What was being done.
        step: PipeStep,
        /// The system's error.
        #[source]
        source: std::io::Error,
    },
    /// The other program did not turn up in time.
    #[error("no {side} turned up at {name} within {secs} s")]
    Timeout {
        /// "producer" or "consumer".
        side: &'static str,
        /// The pipe.
        name: String,
        /// Seconds waited.
        secs: u64,
    },
    /// `SPOOLS_PIPE_SECRET` names a file that cannot be read or holds no secret.
    #[error("SPOOLS_PIPE_SECRET={}: {reason} (the file holds 32 hex digits, as `spools secret` prints them)", path.display())]
    Secret {
        /// The file named.
        path: std::path::PathBuf,
        /// Why it holds no secret.
        reason: String,
    },
    /// The consumer at a `tcp:` meeting did not prove the pipe secret this producer was
    /// given: it has none, or another one (it closed the connection unanswered), or it
    /// answered with a wrong proof.
    #[error("the consumer at tcp:{addr} did not prove the pipe secret (SPOOLS_PIPE_SECRET): give both programs the same secret")]
    Unproven {
        /// The meeting address.
        addr: String,
    },
    /// The consumer at a `tcp:` meeting closed the connection without answering this
    /// producer's description: it requires a pipe secret this producer was not given,
    /// or it refused the description.
    #[error("the consumer at tcp:{addr} closed the meeting unanswered: it requires a pipe secret (SPOOLS_PIPE_SECRET) this producer was not given, or refused its description")]
    Refused {
        /// The meeting address.
        addr: String,
    },
    /// The two programs describe different datasets.
    #[error(
        "the producer's layout {producer} and the consumer's {consumer} hold different datasets"
    )]
    Mismatch {
        /// The producer's layout.
        producer: String,
        /// The consumer's layout.
        consumer: String,
    },
    /// The other program's layout has more units than that program has ranks, so part
    /// of every record would never be sent or received.
    #[error("the {side}'s layout {layout} has {units} units but the {side} has {ranks} ranks")]
    PeerTooManyUnits {
        /// "producer" or "consumer".
        side: &'static str,
        /// Its layout.
        layout: String,
        /// Units in the layout.
        units: u64,
        /// Its ranks.
        ranks: u32,
    },
    /// A rank of the other program went away (died, or closed its end) mid-stream.
    #[error("{side} rank {rank} went away {when}")]
    PeerGone {
        /// "producer" or "consumer".
        side: &'static str,
        /// Its rank.
        rank: u32,
        /// Where in the stream (e.g. "in record 3").
        when: String,
    },
    /// Bytes from the other program that do not follow the pipe protocol.
    #[error("protocol error from {side} rank {rank}: {violation}")]
    Protocol {
        /// "producer" or "consumer".
        side: &'static str,
        /// Its rank.
        rank: u32,
        /// What is wrong.
        violation: PipeViolation,
    },
    /// A record arrived with a checksum that does not match.
    #[error("record {record} from producer rank {rank} failed its CRC32C check")]
    Checksum {
        /// The producer rank.
        rank: u32,
        /// The record.
        record: u64,
    },
    /// The record buffer does not hold this rank's share.
    #[error("record buffer holds {got} bytes but this rank's share is {need}")]
    BufferSize {
        /// Bytes needed.
        need: u64,
        /// Bytes given.
        got: u64,
    },
    /// This rank declined its part (a binding's own check of its arguments failed:
    /// [`PipeWriter::open_declined`](crate::pipe::PipeWriter::open_declined),
    /// [`PipeWriter::decline_write`](crate::pipe::PipeWriter::decline_write) and the
    /// reader's): the call failed on every rank with this cause.
    #[error("{0}")]
    Declined(crate::Cause),
    /// Another rank of this program failed its part.
    #[error("rank {rank} of this program failed its part of the pipe operation: {cause}")]
    Remote {
        /// The first rank that failed.
        rank: u32,
        /// Its error's kind and message.
        cause: crate::Cause,
    },
}

impl PipeError {
    /// The rank this error names as the one at fault (see
    /// [`ExchangeError::remote_rank`](crate::ExchangeError::remote_rank)).
    pub fn remote_rank(&self) -> Option<u32> {
        match self {
            PipeError::Remote { rank, .. } => Some(*rank),
            PipeError::Exchange(x) => x.remote_rank(),
            _ => None,
        }
    }

    /// What kind of failure this is (see [`ErrorKind`](crate::ErrorKind)); a remote
    /// failure is of its cause's kind.
    pub fn kind(&self) -> crate::ErrorKind {
        use crate::ErrorKind as K;
        match self {
            PipeError::Exchange(x) => x.kind(),
            PipeError::Msg(_) => K::Transfer,
            PipeError::Plan(_)
            | PipeError::Layout(_)
            | PipeError::Mismatch { .. }
            | PipeError::PeerTooManyUnits { .. } => K::Mismatch,
            PipeError::PeerGone { .. } => K::PeerGone,
            PipeError::Checksum { .. } => K::Damaged,
            PipeError::BadName(_) | PipeError::BufferSize { .. } => K::BadArgument,
            PipeError::Remote { cause, .. } | PipeError::Declined(cause) => cause.kind,
            PipeError::Io { .. }
            | PipeError::Timeout { .. }
            | PipeError::Secret { .. }
            | PipeError::Unproven { .. }
            | PipeError::Refused { .. }
            | PipeError::Protocol { .. } => K::Transport,
        }
    }

    pub(crate) fn io(step: PipeStep, source: std::io::Error) -> Self {
        PipeError::Io { step, source }
    }
}

/// What a pipe end was doing when a system call failed.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum PipeStep {
    /// Creating the meeting directory.
    #[error("create {}", path.display())]
    CreateDir {
        /// The directory.
        path: PathBuf,
    },
    /// Checking the meeting directory.
    #[error("stat {}", path.display())]
    StatDir {
        /// The directory.
        path: PathBuf,
    },
    /// The meeting directory belongs to another user or is not a directory.
    #[error("{} is not a directory of this user (set SPOOLS_PIPE_DIR)", path.display())]
    ForeignDir {
        /// The directory.
        path: PathBuf,
    },
    /// Encoding this side's description.
    #[error("encode description")]
    EncodeDescription,
    /// Writing this side's meeting file.
    #[error("write {}", path.display())]
    WriteMeetingFile {
        /// The temporary file.
        path: PathBuf,
    },
    /// Publishing this side's meeting file.
    #[error("publish {}", path.display())]
    PublishMeetingFile {
        /// The meeting file.
        path: PathBuf,
    },
    /// Listening for connections.
    #[error("listen{}", on.as_ref().map(|a| format!(" on {a}")).unwrap_or_default())]
    Listen {
        /// The address, when one was asked for.
        on: Option<String>,
    },
    /// Accepting a connection.
    #[error("accept{}", on.as_ref().map(|a| format!(" on {a}")).unwrap_or_default())]
    Accept {
        /// The listening address, when known.
        on: Option<String>,
    },
    /// Setting up a connected socket.
    #[error("socket")]
    Socket,
    /// Connecting to the consumer.
    #[error("connect to consumer at {addr}")]
    Connect {
        /// The consumer's address.
        addr: String,
    },
    /// Sending the hello to a consumer rank.
    #[error("hello to consumer rank {rank}")]
    Hello {
        /// The consumer rank.
        rank: u32,
    },
    /// Drawing the meeting's random token.
    #[error("random token")]
    RandomToken,
    /// Waiting for data on the producers' connections.
    #[error("poll")]
    Poll,
    /// Sending this side's description.
    #[error("send description")]
    SendDescription,
    /// Receiving the other side's description.
    #[error("receive description")]
    ReceiveDescription,
}

/// What the other program did against the pipe protocol.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum PipeViolation {
    /// Bytes that are not a hello or frame.
    #[error(transparent)]
    Frame(#[from] FrameError),
    /// A description longer than 1 MiB.
    #[error("description of {len} bytes")]
    DescriptionTooLong {
        /// Its announced length.
        len: u32,
    },
    /// A description that is not valid JSON of the right shape.
    #[error("description is not valid: {reason}")]
    BadDescription {
        /// The JSON parser's words.
        reason: String,
    },
    /// A layout spec in the description that does not parse.
    #[error("layout {spec:?}")]
    BadLayout {
        /// The spec as sent.
        spec: String,
    },
    /// A token that is not 32 hex digits.
    #[error("bad token")]
    BadToken,
    /// Producer ranks disagree on their number.
    #[error("says {said} ranks, others {others}")]
    RanksDisagree {
        /// What this rank's hello said.
        said: u32,
        /// What the others said.
        others: u32,
    },
    /// A rank connected twice, or one outside its job.
    #[error("connected twice, or a rank outside its job")]
    DuplicateRank,
    /// The wrong number of connections.
    #[error("{got} connections for {ranks} ranks")]
    Connections {
        /// Connections made.
        got: usize,
        /// Ranks of the other program.
        ranks: u32,
    },
    /// The stream ended inside a record.
    #[error("end of stream in the middle of record {record}")]
    EndMidRecord {
        /// The record.
        record: u64,
    },
    /// A frame for another record or of another size than expected.
    #[error(
        "frame of record {got_record} with {got_len} bytes, expected record {record} with {len}"
    )]
    UnexpectedFrame {
        /// Record received.
        got_record: u64,
        /// Bytes received.
        got_len: u32,
        /// Record expected.
        record: u64,
        /// Bytes expected.
        len: u64,
    },
    /// Only some producers ended the stream.
    #[error("only {ended} of {ranks} producer ranks ended the stream at record {record}")]
    PartialEnd {
        /// Producers that ended.
        ended: usize,
        /// Producers.
        ranks: usize,
        /// The record.
        record: u64,
    },
}

/// Bytes that do not follow the pipe's wire format.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
pub enum FrameError {
    /// A frame that does not start with `SPPF`.
    #[error("bad frame magic {0:02x?}")]
    FrameMagic([u8; 4]),
    /// A frame kind other than data (0) or end (1).
    #[error("unknown frame kind {0}")]
    Kind(u8),
    /// Reserved header bytes that are not zero.
    #[error("reserved frame bytes are not zero")]
    Reserved,
    /// A payload longer than a frame may carry.
    #[error("frame of {len} bytes exceeds {max}")]
    TooLong {
        /// The announced length.
        len: u32,
        /// The most a frame carries.
        max: u32,
    },
    /// An end-of-stream frame that carries bytes.
    #[error("end frame with a payload")]
    EndWithPayload,
    /// A connection that does not start with `SPPH`.
    #[error("not a Spools pipe hello")]
    HelloMagic,
    /// A hello whose rank is not in its job.
    #[error("rank {rank} of {ranks} ranks")]
    HelloRank {
        /// The rank it claims.
        rank: u32,
        /// Its job's ranks.
        ranks: u32,
    },
    /// Bytes that end inside a hello, header or payload.
    #[error("bytes cut short")]
    Short,
}

impl crate::error::Told for PipeError {
    fn kind(&self) -> crate::ErrorKind {
        PipeError::kind(self)
    }
}
