//! The bootstrap protocol between ranks and the rendezvous server.
//!
//! After the [handshake](crate::handshake), a rank and the server exchange length-prefixed
//! frames (`u32` little-endian length, then a one-byte tag and the body):
//!
//! - the rank sends [`ToServer::Join`] with its endpoint addresses and receives
//!   [`ToRank::Table`], everyone's addresses;
//! - the runtime's own collectives (barrier, broadcast, allgather) are
//!   [`ToServer::Collective`] / [`ToRank::Collective`] pairs numbered by a sequence;
//! - [`ToServer::Finalize`] ends a rank's part in the job; the server tells the others
//!   ([`ToRank::Finalizing`]), and [`ToRank::Finalized`] answers once every rank has
//!   finalised;
//! - [`ToServer::Abort`] ends the job on behalf of a failing rank;
//! - [`ToRank::Abort`] tells a rank that another rank died or gave up, and why (the
//!   watchdog);
//! - [`ToServer::Spawn`] asks the launcher (`spools run`) to start processes
//!   ([`SpawnProc`]: MPI's `MPI_Comm_spawn`); [`ToRank::Spawned`] answers once they are
//!   started (or why not), and [`ToRank::SpawnExit`] tells the asking rank when each ends.
//!
//! ```
//! use spools_proto::boot::{decode_frame, Endpoint, Frame, ToServer};
//! let msg = ToServer::Join {
//!     rank: 1,
//!     size: 2,
//!     endpoint: Endpoint { host: "h".into(), pid: 42, shm: "/s".into(), tcp: "127.0.0.1:9".into() },
//! };
//! let bytes = msg.encode();
//! let (back, used) = decode_frame::<ToServer>(&bytes).unwrap().unwrap();
//! assert_eq!((back, used), (msg, bytes.len()));
//! ```

use crate::codec::{put_bytes, put_u32, put_u64, Reader};
pub use crate::spawn::{SpawnProc, MAX_SPAWN_PROCS, MAX_SPAWN_TEXT, MAX_SPAWN_WORDS};
use crate::WireError;

/// Largest bootstrap frame accepted (the runtime's allgather carries small tables).
pub const MAX_FRAME: usize = 64 << 20;
/// Longest text field.
pub const MAX_TEXT: usize = 4096;
/// [`ToRank::Spawned`]'s refusal from a rendezvous server that no launcher hosts (rank
/// 0's under a foreign launcher, or a spawned job's own): the asking rank starts the
/// processes some other way.
pub const NOT_A_LAUNCHER: &str = "this job's rendezvous has no launcher to start processes";
/// Most ranks a job may have.
pub const MAX_RANKS: u32 = 1 << 20;

/// How a rank can be reached.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct Endpoint {
    /// Host identity (ranks with equal host identities share memory).
    pub host: String,
    /// Process id on that host.
    pub pid: u32,
    /// Name of the rank's shared-memory segment, empty if it has none.
    pub shm: String,
    /// `ip:port` of the rank's TCP listener, empty if it has none.
    pub tcp: String,
}

/// The runtime's own collective operations.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum CollOp {
    /// Every rank waits for all.
    Barrier,
    /// The root's bytes go to everyone.
    Broadcast {
        /// Rank whose bytes are broadcast.
        root: u32,
    },
    /// Everyone's bytes go to everyone, in rank order.
    Allgather,
}

/// Messages from a rank to the rendezvous server.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ToServer {
    /// Join the job.
    Join {
        /// Rank of the sender.
        rank: u32,
        /// Job size the sender believes in.
        size: u32,
        /// The sender's addresses.
        endpoint: Endpoint,
    },
    /// Contribute to collective number `seq`.
    Collective {
        /// Sequence number (every rank calls collectives in the same order).
        seq: u64,
        /// The operation.
        op: CollOp,
        /// This rank's contribution.
        data: Vec<u8>,
    },
    /// This rank is done with the job: it takes part in nothing more. `collectives` says,
    /// for each communicator context it holds, how many collectives it started there, so
    /// that ranks waiting in a later collective of that context can fail instead of hang.
    Finalize {
        /// (collective context, collectives started), per communicator.
        collectives: Vec<(u32, u32)>,
        /// (job rank, messages sent to it): the tagged messages this rank sent to each
        /// peer (peers sent nothing are left out), so that a peer waiting to receive
        /// from this rank learns when every one of them has arrived (end of data).
        sent: Vec<(u32, u64)>,
    },
    /// This rank found that another one left the job broken (it finalised without
    /// starting a collective this rank waits in): the server ends the job in that rank's
    /// name.
    Blame {
        /// The rank at fault.
        rank: u32,
        /// What it did, in words.
        cause: String,
    },
    /// This rank gives up and ends the job: it failed (an error it returned, a panic, an
    /// explicit abort) while other ranks may still need it. The server tells every other
    /// rank, whose pending operations then fail naming this rank.
    Abort {
        /// Why, in words, for the other ranks' errors.
        cause: String,
    },
    /// Start these processes (the launcher answers with [`ToRank::Spawned`]; a server
    /// that is not a launcher's refuses).
    Spawn {
        /// The request's number, chosen by the rank, repeated in the answers.
        id: u32,
        /// The processes.
        procs: Vec<SpawnProc>,
    },
}

/// Messages from the rendezvous server to a rank.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ToRank {
    /// Everyone's addresses, by rank, once all have joined.
    Table {
        /// Job identifier (unique per run).
        job: u64,
        /// Addresses, indexed by rank.
        endpoints: Vec<Endpoint>,
    },
    /// Result of collective number `seq`: the root's bytes (broadcast), every rank's
    /// (allgather) or nothing (barrier).
    Collective {
        /// Sequence number.
        seq: u64,
        /// Result parts.
        parts: Vec<Vec<u8>>,
    },
    /// Every rank has finalised.
    Finalized,
    /// Another rank has finalised (as [`ToServer::Finalize`] said): it takes part in
    /// nothing more.
    Finalizing {
        /// Which.
        rank: u32,
        /// (collective context, collectives started), per communicator it held.
        collectives: Vec<(u32, u32)>,
        /// How many tagged messages it sent to the rank told: once that many have
        /// arrived from it, nothing more will (end of data).
        sent_to_you: u64,
    },
    /// Another rank died; the job is over.
    Abort {
        /// The rank that died.
        rank: u32,
        /// How it died.
        cause: String,
    },
    /// The server refused this rank's join.
    Refused {
        /// Why.
        reason: String,
    },
    /// The answer to [`ToServer::Spawn`]: every process started, or none (why not).
    Spawned {
        /// The request's number.
        id: u32,
        /// Why none was started; `None`: all were.
        refused: Option<String>,
    },
    /// A process this rank asked for ([`ToServer::Spawn`]) ended.
    SpawnExit {
        /// The request's number.
        id: u32,
        /// Which of its processes.
        index: u32,
        /// Whether it exited with status 0.
        success: bool,
        /// How it ended, in words.
        how: String,
    },
}

/// Whether `procs` fit a spawn request (the decoder's bounds, and one frame of at most
/// [`MAX_FRAME`] bytes); `Err` says which part does not, for the caller's
/// error, so that a request the server could not read is never sent.
///
/// ```
/// use spools_proto::boot::{check_spawn, SpawnProc};
/// let p = SpawnProc { program: "prog".into(), ..SpawnProc::default() };
/// assert!(check_spawn(&[p.clone()]).is_ok());
/// let long = SpawnProc { args: vec!["x".repeat(1 << 17)], ..p };
/// assert!(check_spawn(&[long]).unwrap_err().contains("argument"));
/// ```
///
/// # Errors
/// What exceeds which bound, in words.
pub fn check_spawn(procs: &[SpawnProc]) -> Result<(), String> {
    if procs.len() > MAX_SPAWN_PROCS as usize {
        return Err(format!(
            "{} processes in one spawn; at most {MAX_SPAWN_PROCS}",
            procs.len()
        ));
    }
    let text = |what: &str, s: &str| {
        if s.len() > MAX_SPAWN_TEXT {
            Err(format!(
                "a {what} of {} bytes; at most {MAX_SPAWN_TEXT}",
                s.len()
            ))
        } else {
            Ok(4 + s.len())
        }
    };
    let mut total = 9usize;
    for p in procs {
        if p.args.len() > MAX_SPAWN_WORDS as usize || p.env.len() > MAX_SPAWN_WORDS as usize {
            return Err(format!(
                "{} arguments and {} variables for {:?}; at most {MAX_SPAWN_WORDS} of each",
                p.args.len(),
                p.env.len(),
                p.program
            ));
        }
        total += 8 + text("program name", &p.program)?;
        for a in &p.args {
            total += text("argument", a)?;
        }
        for (k, v) in &p.env {
            total += text("variable name", k)? + text("variable value", v)?;
        }
        total += text("working directory", &p.wdir)? + text("host name", &p.host)?;
    }
    if total > MAX_FRAME {
        return Err(format!(
            "a spawn request of {total} bytes; at most {}",
            MAX_FRAME
        ));
    }
    Ok(())
}

/// A message with a framed encoding.
pub trait Frame: Sized {
    /// Encodes with the length prefix.
    fn encode(&self) -> Vec<u8>;
    /// Decodes one frame body (without the length prefix).
    ///
    /// # Errors
    /// [`WireError`] if the body is not a valid message.
    fn decode_body(body: &[u8]) -> Result<Self, WireError>;
}

/// Decodes the first frame of `buf`: `Ok(None)` if more bytes are needed, else the message
/// and the number of bytes it took.
///
/// # Errors
/// [`WireError`] for an oversized or malformed frame.
pub fn decode_frame<T: Frame>(buf: &[u8]) -> Result<Option<(T, usize)>, WireError> {
    if buf.len() < 4 {
        return Ok(None);
    }
    let len = frame_len(buf[..4].try_into().unwrap_or([0; 4]))?;
    if buf.len() < 4 + len {
        return Ok(None);
    }
    Ok(Some((T::decode_body(&buf[4..4 + len])?, 4 + len)))
}

/// The body length announced by a frame's 4-byte prefix.
///
/// # Errors
/// [`WireError::TooLong`] above [`MAX_FRAME`].
pub fn frame_len(prefix: [u8; 4]) -> Result<usize, WireError> {
    let len = u32::from_le_bytes(prefix) as usize;
    if len > MAX_FRAME {
        return Err(WireError::TooLong {
            what: "bootstrap frame",
            len: len as u64,
            max: MAX_FRAME as u64,
        });
    }
    Ok(len)
}

fn framed(tag: u8, body: impl FnOnce(&mut Vec<u8>)) -> Vec<u8> {
    let mut v = vec![0, 0, 0, 0, tag];
    body(&mut v);
    let len = u32::try_from(v.len() - 4).unwrap_or(u32::MAX);
    v[..4].copy_from_slice(&len.to_le_bytes());
    v
}

/// Puts a message in words (a cause, a reason), cut at [`MAX_TEXT`] bytes on a character
/// boundary: what the decoder accepts, however long the text a caller made (a program
/// name, a list of hosts).
fn put_text(v: &mut Vec<u8>, s: &str) {
    let mut end = s.len().min(MAX_TEXT);
    while !s.is_char_boundary(end) {
        end -= 1;
    }
    put_bytes(v, &s.as_bytes()[..end]);
}

fn put_endpoint(v: &mut Vec<u8>, e: &Endpoint) {
    put_bytes(v, e.host.as_bytes());
    put_u32(v, e.pid);
    put_bytes(v, e.shm.as_bytes());
    put_bytes(v, e.tcp.as_bytes());
}

fn endpoint(r: &mut Reader<'_>) -> Result<Endpoint, WireError> {
    Ok(Endpoint {
        host: r.string("host identity", MAX_TEXT)?,
        pid: r.u32()?,
        shm: r.string("shared-memory name", MAX_TEXT)?,
        tcp: r.string("tcp address", MAX_TEXT)?,
    })
}

/// Most communicators a finalising rank reports.
pub const MAX_COMMUNICATORS: u32 = 1 << 16;

fn put_counts(v: &mut Vec<u8>, counts: &[(u32, u32)]) {
    put_u32(v, u32::try_from(counts.len()).unwrap_or(u32::MAX));
    for (ctx, n) in counts {
        put_u32(v, *ctx);
        put_u32(v, *n);
    }
}

fn counts(r: &mut Reader<'_>) -> Result<Vec<(u32, u32)>, WireError> {
    let n = r.u32()?;
    if n > MAX_COMMUNICATORS {
        return Err(WireError::TooLong {
            what: "collective counts",
            len: u64::from(n),
            max: u64::from(MAX_COMMUNICATORS),
        });
    }
    // Each entry takes 8 bytes: a short buffer fails here, before any allocation.
    if r.remaining() < 8 * n as usize {
        return Err(WireError::Truncated {
            need: 8 * n as usize,
            have: r.remaining(),
        });
    }
    (0..n).map(|_| Ok((r.u32()?, r.u32()?))).collect()
}

/// The (job rank, messages sent) pairs of [`ToServer::Finalize`]: at most
/// [`MAX_RANKS`], 12 bytes each.
fn sent_counts(r: &mut Reader<'_>) -> Result<Vec<(u32, u64)>, WireError> {
    let n = r.u32()?;
    if n > MAX_RANKS {
        return Err(WireError::TooLong {
            what: "message counts",
            len: u64::from(n),
            max: u64::from(MAX_RANKS),
        });
    }
    // A short buffer fails here, before any allocation.
    if r.remaining() < 12 * n as usize {
        return Err(WireError::Truncated {
            need: 12 * n as usize,
            have: r.remaining(),
        });
    }
    (0..n).map(|_| Ok((r.u32()?, r.u64()?))).collect()
}

fn rank_count(r: &mut Reader<'_>, what: &'static str) -> Result<u32, WireError> {
    let n = r.u32()?;
    if n > MAX_RANKS {
        return Err(WireError::TooLong {
            what,
            len: u64::from(n),
            max: u64::from(MAX_RANKS),
        });
    }
    Ok(n)
}

impl Frame for ToServer {
    fn encode(&self) -> Vec<u8> {
        match self {
            ToServer::Join {
                rank,
                size,
                endpoint,
            } => framed(1, |v| {
                put_u32(v, *rank);
                put_u32(v, *size);
                put_endpoint(v, endpoint);
            }),
            ToServer::Collective { seq, op, data } => framed(2, |v| {
                put_u64(v, *seq);
                match op {
                    CollOp::Barrier => v.push(0),
                    CollOp::Broadcast { root } => {
                        v.push(1);
                        put_u32(v, *root);
                    }
                    CollOp::Allgather => v.push(2),
                }
                put_bytes(v, data);
            }),
            ToServer::Finalize { collectives, sent } => framed(3, |v| {
                put_counts(v, collectives);
                put_u32(v, u32::try_from(sent.len()).unwrap_or(u32::MAX));
                for (rank, n) in sent {
                    put_u32(v, *rank);
                    put_u64(v, *n);
                }
            }),
            ToServer::Abort { cause } => framed(4, |v| put_text(v, cause)),
            ToServer::Blame { rank, cause } => framed(5, |v| {
                put_u32(v, *rank);
                put_text(v, cause);
            }),
            ToServer::Spawn { id, procs } => framed(6, |v| {
                put_u32(v, *id);
                crate::spawn::put_procs(v, procs);
            }),
        }
    }

    fn decode_body(body: &[u8]) -> Result<Self, WireError> {
        let mut r = Reader::new(body);
        let msg = match r.u8()? {
            1 => ToServer::Join {
                rank: r.u32()?,
                size: rank_count(&mut r, "job size")?,
                endpoint: endpoint(&mut r)?,
            },
            2 => {
                let seq = r.u64()?;
                let op = match r.u8()? {
                    0 => CollOp::Barrier,
                    1 => CollOp::Broadcast { root: r.u32()? },
                    2 => CollOp::Allgather,
                    k => {
                        return Err(WireError::Invalid {
                            what: "collective operation",
                            value: u64::from(k),
                        })
                    }
                };
                let data = r.bytes("collective data", MAX_FRAME)?.to_vec();
                ToServer::Collective { seq, op, data }
            }
            3 => ToServer::Finalize {
                collectives: counts(&mut r)?,
                sent: sent_counts(&mut r)?,
            },
            4 => ToServer::Abort {
                cause: r.string("abort cause", MAX_TEXT)?,
            },
            5 => ToServer::Blame {
                rank: r.u32()?,
                cause: r.string("blame cause", MAX_TEXT)?,
            },
            6 => ToServer::Spawn {
                id: r.u32()?,
                procs: crate::spawn::procs(&mut r)?,
            },
            k => return Err(WireError::UnknownKind(k)),
        };
        r.finish()?;
        Ok(msg)
    }
}

impl Frame for ToRank {
    fn encode(&self) -> Vec<u8> {
        match self {
            ToRank::Table { job, endpoints } => framed(1, |v| {
                put_u64(v, *job);
                put_u32(v, u32::try_from(endpoints.len()).unwrap_or(u32::MAX));
                for e in endpoints {
                    put_endpoint(v, e);
                }
            }),
            ToRank::Collective { seq, parts } => framed(2, |v| {
                put_u64(v, *seq);
                put_u32(v, u32::try_from(parts.len()).unwrap_or(u32::MAX));
                for p in parts {
                    put_bytes(v, p);
                }
            }),
            ToRank::Finalized => framed(3, |_| {}),
            ToRank::Abort { rank, cause } => framed(4, |v| {
                put_u32(v, *rank);
                put_text(v, cause);
            }),
            ToRank::Refused { reason } => framed(5, |v| put_text(v, reason)),
            ToRank::Finalizing {
                rank,
                collectives,
                sent_to_you,
            } => framed(6, |v| {
                put_u32(v, *rank);
                put_counts(v, collectives);
                put_u64(v, *sent_to_you);
            }),
            ToRank::Spawned { id, refused } => framed(7, |v| {
                put_u32(v, *id);
                match refused {
                    None => v.push(0),
                    Some(why) => {
                        v.push(1);
                        put_text(v, why);
                    }
                }
            }),
            ToRank::SpawnExit {
                id,
                index,
                success,
                how,
            } => framed(8, |v| {
                put_u32(v, *id);
                put_u32(v, *index);
                v.push(u8::from(*success));
                put_text(v, how);
            }),
        }
    }

    fn decode_body(body: &[u8]) -> Result<Self, WireError> {
        let mut r = Reader::new(body);
        let msg = match r.u8()? {
            1 => {
                let job = r.u64()?;
                let n = rank_count(&mut r, "endpoint table")?;
                let mut endpoints = Vec::new();
                for _ in 0..n {
                    // Each endpoint takes at least 16 bytes: a short buffer fails here
                    // rather than after a large allocation.
                    if r.remaining() < 16 {
                        return Err(WireError::Truncated {
                            need: 16,
                            have: r.remaining(),
                        });
                    }
                    endpoints.push(endpoint(&mut r)?);
                }
                ToRank::Table { job, endpoints }
            }
            2 => {
                let seq = r.u64()?;
                let n = rank_count(&mut r, "collective parts")?;
                let mut parts = Vec::new();
                for _ in 0..n {
                    parts.push(r.bytes("collective part", MAX_FRAME)?.to_vec());
                }
                ToRank::Collective { seq, parts }
            }
            3 => ToRank::Finalized,
            4 => ToRank::Abort {
                rank: r.u32()?,
                cause: r.string("abort cause", MAX_TEXT)?,
            },
            5 => ToRank::Refused {
                reason: r.string("refusal reason", MAX_TEXT)?,
            },
            6 => ToRank::Finalizing {
                rank: r.u32()?,
                collectives: counts(&mut r)?,
                sent_to_you: r.u64()?,
            },
            7 => ToRank::Spawned {
                id: r.u32()?,
                refused: match r.u8()? {
                    0 => None,
                    1 => Some(r.string("spawn refusal", MAX_TEXT)?),
                    k => {
                        return Err(WireError::Invalid {
                            what: "spawn answer",
                            value: u64::from(k),
                        })
                    }
                },
            },
            8 => ToRank::SpawnExit {
                id: r.u32()?,
                index: r.u32()?,
                success: match r.u8()? {
                    0 => false,
                    1 => true,
                    k => {
                        return Err(WireError::Invalid {
                            what: "spawned process's exit",
                            value: u64::from(k),
                        })
                    }
                },
                how: r.string("spawned process's end", MAX_TEXT)?,
            },
            k => return Err(WireError::UnknownKind(k)),
        };
        r.finish()?;
        Ok(msg)
    }
}
