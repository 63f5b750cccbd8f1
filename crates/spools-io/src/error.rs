//! Errors of the exchange engine, parallel files and parallel pipes.

use std::path::PathBuf;

use spools_map::{LayoutError, PlanError, SpecError};
use spools_msg::MsgError;

/// Which side of a transfer an error is about.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Side {
    /// The source layout and buffers.
    Source,
    /// The destination layout and buffers.
    Destination,
}

impl std::fmt::Display for Side {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            Side::Source => "source",
            Side::Destination => "destination",
        })
    }
}

/// Why an exchange (a plan executed between the ranks' buffers) failed.
#[derive(Debug, thiserror::Error)]
pub enum ExchangeError {
    /// Messaging failed: a peer died, a transport broke.
    #[error(transparent)]
    Msg(#[from] MsgError),
    /// The two layouts cannot be planned against each other.
    #[error(transparent)]
    Plan(#[from] PlanError),
    /// A layout could not describe a unit.
    #[error(transparent)]
    Layout(#[from] LayoutError),
    /// The owner list does not have one rank per unit of the layout.
    #[error("{side} owners list has {got} entries for a layout of {expected} units")]
    Owners {
        /// Which side.
        side: Side,
        /// Units in the layout.
        expected: u64,
        /// Entries given.
        got: usize,
    },
    /// A layout has more units than the communicator has ranks.
    #[error("{side} layout has {units} units but the communicator has {ranks} ranks")]
    TooManyUnits {
        /// Which side.
        side: Side,
        /// Units in the layout.
        units: u64,
        /// Ranks in the communicator.
        ranks: u32,
    },
    /// A unit's owner is not a rank of the communicator.
    #[error("{side} unit {unit} is owned by rank {rank}, beyond the communicator's {size} ranks")]
    OwnerOutOfRange {
        /// Which side.
        side: Side,
        /// The unit.
        unit: u64,
        /// The owner given.
        rank: u32,
        /// Ranks in the communicator.
        size: u32,
    },
    /// This rank owns a unit but gave no buffer for it, or gave one for a unit it does
    /// not own.
    #[error("{side} unit {unit}: {what}")]
    Buffers {
        /// Which side.
        side: Side,
        /// The unit.
        unit: u64,
        /// What is wrong.
        what: &'static str,
    },
    /// A buffer is smaller than its unit's share of the dataset.
    #[error("{side} buffer of unit {unit} holds {got} bytes but the layout puts {need} there")]
    BufferSize {
        /// Which side.
        side: Side,
        /// The unit.
        unit: u64,
        /// Bytes the layout stores on the unit.
        need: u64,
        /// Bytes in the buffer.
        got: u64,
    },
    /// The buffer length is not a whole number of elements.
    #[error("buffer element size {elem} bytes does not match the layout's {layout} bytes")]
    ElementSize {
        /// Size of the buffer's element type.
        elem: u64,
        /// Element size of the layout.
        layout: u64,
    },
    /// A transfer unit arrived with a checksum that does not match its data.
    #[error("transfer unit {index} from rank {from} failed its CRC32C check (sent {sent:#010x}, got {got:#010x})")]
    Checksum {
        /// The sending rank.
        from: u32,
        /// The transfer unit's index in the stream from that rank.
        index: u64,
        /// The checksum the sender computed.
        sent: u32,
        /// The checksum of what arrived.
        got: u32,
    },
    /// Another rank found a problem with its part (its own error says which); nothing
    /// was moved.
    #[error("rank {rank} could not take part in the exchange (see its error)")]
    Remote {
        /// The first rank that failed.
        rank: u32,
    },
    /// A transfer unit arrived with an unexpected length.
    #[error("transfer unit {index} from rank {from} has {got} bytes, expected {expected}")]
    Length {
        /// The sending rank.
        from: u32,
        /// Its index in the stream.
        index: u64,
        /// The expected length.
        expected: usize,
        /// The length that arrived.
        got: usize,
    },
}

/// Why a parallel-file operation failed.
#[derive(Debug, thiserror::Error)]
pub enum FileError {
    /// Moving the data between ranks failed.
    #[error(transparent)]
    Exchange(#[from] ExchangeError),
    /// Messaging failed (agreeing on the file, gathering checksums).
    #[error(transparent)]
    Msg(#[from] MsgError),
    /// A layout is unusable for this file.
    #[error(transparent)]
    Layout(#[from] LayoutError),
    /// The dataset cannot be planned against the file's layout.
    #[error(transparent)]
    Plan(#[from] PlanError),
    /// A system call on a file failed. The system's error is the [`source`]
    /// (`std::error::Error::source`), not repeated in the message, so that error-chain
    /// printers show it once.
    ///
    /// [`source`]: std::error::Error::source
    #[error("{op} {path}")]
    Io {
        /// What was being done.
        op: &'static str,
        /// The file.
        path: PathBuf,
        /// The system's error.
        #[source]
        source: std::io::Error,
    },
    /// A striped file's manifest names a unit file outside the file's directory (an
    /// absolute path, `..`, or anything but a plain relative path), or the unit directories
    /// given to a write are not inside the manifest's directory. Manifests are input: such
    /// a path is never opened.
    #[error("{path}: unit {unit} path {unit_path:?} is refused: {why}")]
    UnsafePath {
        /// The manifest.
        path: PathBuf,
        /// The unit.
        unit: u64,
        /// The unit path as given.
        unit_path: String,
        /// Why it is refused.
        why: &'static str,
    },
    /// The file records a dataset (element type, shape) other than the one the reader's
    /// layout describes.
    #[error("{path} holds {file} but the layout describes {layout}")]
    DatasetMismatch {
        /// The file.
        path: PathBuf,
        /// The dataset the file records (element type and shape).
        file: String,
        /// The dataset of the reader's layout (element type and shape).
        layout: String,
    },
    /// A striped layout gives a size that is not the dataset's.
    #[error("{layout} gives size={size} bytes but the dataset holds {dataset} bytes (size= is the dataset's size in bytes; leave it out to take the dataset's)")]
    StripeSize {
        /// The striped layout.
        layout: String,
        /// The size it gives.
        size: u64,
        /// Bytes in the dataset.
        dataset: u64,
    },
    /// A manifest or header could not be parsed or is inconsistent.
    #[error("{path}: {defect}")]
    Format {
        /// The file.
        path: PathBuf,
        /// What is wrong.
        defect: FormatDefect,
    },
    /// The file holds a different dataset than the layout describes.
    #[error("{path} holds {file} bytes but the layout describes {layout}")]
    SizeMismatch {
        /// The file.
        path: PathBuf,
        /// Dataset bytes in the file.
        file: u64,
        /// Bytes in the layout.
        layout: u64,
    },
    /// A unit file is missing or short, and there is no parity to rebuild it from.
    #[error("unit {unit} ({path}) is missing or short at offset {offset}")]
    MissingUnit {
        /// The unit.
        unit: u64,
        /// Its file.
        path: PathBuf,
        /// The first local offset that could not be read.
        offset: u64,
    },
    /// A block failed its checksum and there is no parity to rebuild it from.
    #[error("unit {unit} ({path}): block at offset {offset} failed its CRC32C check")]
    Corrupt {
        /// The unit.
        unit: u64,
        /// Its file.
        path: PathBuf,
        /// Local offset of the block.
        offset: u64,
    },
    /// More blocks of one RAID-5 row are lost than parity can rebuild.
    #[error("stripe row {row}: units {units:?} are lost; RAID-5 rebuilds at most one")]
    Unrecoverable {
        /// The row.
        row: u64,
        /// The units lost in it.
        units: Vec<u64>,
    },
    /// Another rank failed its part of the collective operation (its own error says why).
    #[error("rank {rank} failed its part of the operation on {path}")]
    Remote {
        /// The first rank that failed.
        rank: u32,
        /// The file.
        path: PathBuf,
    },
    /// Options that cannot go together.
    #[error("{0}")]
    Options(&'static str),
}

impl FileError {
    pub(crate) fn io(op: &'static str, path: impl Into<PathBuf>, source: std::io::Error) -> Self {
        FileError::Io {
            op,
            path: path.into(),
            source,
        }
    }
}

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
    /// Another rank of this program failed (its own error says why).
    #[error("rank {rank} of this program failed its part of the pipe operation")]
    Remote {
        /// The first rank that failed.
        rank: u32,
    },
}

impl PipeError {
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
    Frame(#[from] crate::pipe::FrameError),
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

/// What is wrong with a parallel file's manifest or `.npy` header.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum FormatDefect {
    /// Not JSON of a manifest's shape.
    #[error("not a manifest: {reason}")]
    NotManifest {
        /// The JSON parser's words.
        reason: String,
    },
    /// Another manifest format.
    #[error("format is {found:?}, not {:?}", crate::file::MANIFEST_FORMAT)]
    ManifestFormat {
        /// The format it names.
        found: String,
    },
    /// A unit list of the wrong length.
    #[error("{files} unit files for {units} units")]
    UnitCount {
        /// Files listed.
        files: usize,
        /// Units of the layout.
        units: u64,
    },
    /// A unit of the wrong size.
    #[error("unit {unit} should hold {expected} bytes, says {found}")]
    UnitSize {
        /// The unit.
        unit: usize,
        /// Bytes it must hold.
        expected: u64,
        /// Bytes the manifest says.
        found: u64,
    },
    /// A checksum list that does not hold one CRC per block.
    #[error("unit {unit}: checksum list does not have one per block")]
    Checksums {
        /// The unit.
        unit: usize,
    },
    /// A dataset spec that does not parse.
    #[error("dataset {spec:?}: {source}")]
    Dataset {
        /// The spec.
        spec: String,
        /// Why.
        source: SpecError,
    },
    /// A dataset of another size than the file.
    #[error("dataset {spec} does not hold the file's {size} bytes")]
    DatasetSize {
        /// The spec.
        spec: String,
        /// The file's bytes.
        size: u64,
    },
    /// A slot that does not match the version's parity.
    #[error("slot {slot} does not match version {version}")]
    Slot {
        /// The slot.
        slot: u64,
        /// The version.
        version: u64,
    },
    /// A striping layout spec that does not parse.
    #[error("layout {spec:?}: {source}")]
    Layout {
        /// The spec.
        spec: String,
        /// Why.
        source: SpecError,
    },
    /// A striping layout that cannot hold the file's size.
    #[error("layout of {size} bytes: {source}")]
    LayoutSize {
        /// The file's bytes.
        size: u64,
        /// Why.
        source: LayoutError,
    },
    /// A layout that is not `stripe(...)` or `raid5(...)`.
    #[error("{spec} is not a stripe or raid5 layout")]
    NotStriped {
        /// The spec.
        spec: String,
    },
    /// A bad `.npy` header.
    #[error(transparent)]
    Npy(#[from] crate::file::NpyError),
    /// A `.npy` header whose dataset is not what follows it.
    #[error(".npy header describes {header} bytes but {follow} follow it")]
    NpyLength {
        /// Bytes the header describes.
        header: u64,
        /// Bytes after the header.
        follow: u64,
    },
    /// A manifest that cannot be encoded.
    #[error("manifest: {reason}")]
    Encode {
        /// The encoder's words.
        reason: String,
    },
}
