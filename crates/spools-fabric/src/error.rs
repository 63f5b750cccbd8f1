//! Errors of the fabric layer.

use std::net::IpAddr;

use spools_boot::health::Failure;
use thiserror::Error;

/// Errors of the fabric data path.
#[derive(Debug, Error)]
pub enum FabricError {
    /// The peer is not reachable through this transport (another host for shm, itself).
    #[error("rank {0} is not reachable through this transport")]
    Unreachable(u32),
    /// The message is larger than [`Caps::max_message`](crate::Caps::max_message).
    #[error("message of {len} bytes exceeds this transport's limit of {max}")]
    TooLarge {
        /// Its length.
        len: usize,
        /// The limit.
        max: usize,
    },
    /// No such lane.
    #[error("lane {lane} does not exist (this transport has {lanes})")]
    BadLane {
        /// Lane asked for.
        lane: usize,
        /// Lanes available.
        lanes: usize,
    },
    /// The peer died or the job ended.
    #[error("{0}")]
    PeerFailed(Failure),
    /// A peer wrote something that breaks the ring or stream format, or its shared memory
    /// is not this job's.
    #[error("corrupt data from rank {rank}: {defect}")]
    Corrupt {
        /// The sending rank.
        rank: u32,
        /// What is wrong.
        defect: Defect,
    },
    /// The connection to a peer broke, and the watchdog knows no cause.
    #[error("connection to rank {peer} on host {host} failed: {source}")]
    ConnectionLost {
        /// The peer.
        peer: u32,
        /// Its host's name.
        host: String,
        /// The socket's error.
        source: std::io::Error,
    },
    /// A connection to a peer could not be made, and the watchdog knows no cause.
    #[error("cannot connect to rank {peer} on host {host}: {source}")]
    Connect {
        /// The peer.
        peer: u32,
        /// Its host's name.
        host: String,
        /// Why.
        source: Box<spools_boot::BootError>,
    },
    /// `/dev/shm` cannot hold even the smallest rings.
    #[error("/dev/shm has {free} bytes free: not enough for even the smallest rings ({need} bytes per rank)")]
    ShmFull {
        /// Bytes free.
        free: u64,
        /// Bytes the smallest rings need.
        need: u64,
    },
    /// A system call failed.
    #[error("{step}: {source}")]
    Io {
        /// What was being done.
        step: IoStep,
        /// The error.
        source: std::io::Error,
    },
    /// Setting up the transport failed in the bootstrap layer.
    #[error(transparent)]
    Boot(#[from] spools_boot::BootError),
    /// The libfabric backend could not start, or a libfabric call failed.
    #[error(transparent)]
    Ofi(#[from] crate::ofi::OfiError),
}

/// The step of a backend during which a system call failed.
#[derive(Debug, Clone, PartialEq, Eq, Error)]
pub enum IoStep {
    /// Creating this rank's shared-memory segment.
    #[error("creating shared memory /dev/shm{name}")]
    ShmCreate {
        /// The segment's name.
        name: String,
    },
    /// Opening another rank's shared-memory segment.
    #[error("opening rank {owner}'s shared memory /dev/shm{name}")]
    ShmAttach {
        /// The segment's name.
        name: String,
        /// The rank that created it.
        owner: u32,
    },
    /// Binding the TCP listener.
    #[error("binding a TCP listener on {ip}")]
    TcpBind {
        /// The address asked for.
        ip: IpAddr,
    },
    /// Reading the TCP listener's address.
    #[error("reading the TCP listener's address")]
    TcpLocalAddr,
    /// Reading a local peer's memory (`process_vm_readv`, a rendezvous' single copy).
    #[error("reading rank {peer}'s memory (process_vm_readv)")]
    CrossMemory {
        /// The peer.
        peer: u32,
    },
    /// Lending memory to local peers' reads (refused: too long, too many loans, reads
    /// refused to this process, or writes asked for).
    #[error("lending memory to this host's ranks")]
    CrossMemoryLoan,
    /// Creating the TCP event loop.
    #[error("creating the TCP event loop")]
    EventLoop,
    /// Creating the TCP event loop's waker.
    #[error("creating the TCP waker")]
    Waker,
    /// Starting the TCP acceptor thread.
    #[error("starting the TCP acceptor")]
    Acceptor,
    /// Creating this rank's bell (the FIFO local senders ring while it sleeps in the
    /// TCP event loop).
    #[error("creating the bell {path}")]
    BellCreate {
        /// The FIFO's path.
        path: String,
    },
    /// Opening another local rank's bell.
    #[error("opening rank {owner}'s bell {path}")]
    BellOpen {
        /// The FIFO's path.
        path: String,
        /// The rank that created it.
        owner: u32,
    },
}

/// What is wrong with data or shared memory a peer provided.
#[derive(Debug, Clone, PartialEq, Eq, Error)]
pub enum Defect {
    /// The shared-memory object is not a Spools segment (or not ready).
    #[error("shared memory /dev/shm{name} is not a Spools segment")]
    NotASegment {
        /// The segment's name.
        name: String,
    },
    /// The segment's tag does not match the job secret: it belongs to another job.
    #[error("shared memory /dev/shm{name} belongs to another job (its tag does not match the job secret)")]
    ForeignSegment {
        /// The segment's name.
        name: String,
    },
    /// The segment's geometry is inconsistent.
    #[error("shared memory /dev/shm{name} has an inconsistent geometry")]
    BadGeometry {
        /// The segment's name.
        name: String,
    },
    /// The segment was laid out for another job shape.
    #[error("its segment has rings for {their_sources} ranks x {their_lanes} lanes, this rank expects {our_sources} x {our_lanes} (SPOOLS_LANES must be the same on every rank)")]
    JobShape {
        /// Local ranks the peer's rings are for.
        their_sources: u32,
        /// Lanes the peer's rings are for.
        their_lanes: u32,
        /// Local ranks this rank expects.
        our_sources: u32,
        /// Lanes this rank expects.
        our_lanes: u32,
    },
    /// A ring header announces a message that runs past the ring.
    #[error("message of {len} bytes overruns the ring")]
    RingOverrun {
        /// The announced length.
        len: usize,
    },
    /// A libfabric message too short for its header, or naming a sender, lane or
    /// priority that does not exist.
    #[error("libfabric message of {len} bytes with a bad header (sender {from}, lane {lane}, priority {priority})")]
    BadOfiHeader {
        /// Its length.
        len: usize,
        /// The sender it names.
        from: u32,
        /// The lane it names.
        lane: u16,
        /// The priority it names.
        priority: u8,
    },
    /// A TCP frame longer than the transport allows.
    #[error("frame of {len} bytes exceeds {max}")]
    FrameTooLong {
        /// The announced length.
        len: usize,
        /// The limit.
        max: usize,
    },
}
