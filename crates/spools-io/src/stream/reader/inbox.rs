//! Rank 0's side of a stream into the job: a [`Receiver`] serving one logical connection
//! on a thread of its own, whose events wait in a bounded queue (a job slower than the
//! sender slows the sender down), and what the job learns of each: [`Next`], broadcast
//! from rank 0 to every rank as a few bytes.

use std::net::{IpAddr, Ipv4Addr, Ipv6Addr, SocketAddr};
use std::sync::mpsc::{sync_channel, Receiver as Rx, RecvTimeoutError, SyncSender};

use spools_msg::MsgError;
use spools_stream::{Event, Limits, ReassemblyError, Receiver, RecvError, Sender, Summary};

use crate::stream::CHECK_EVERY;

use crate::error::StreamRecvError;

/// Events queued between the receiving thread and the job (whole ADUs among them): a few,
/// so that a slow job holds the sender back instead of buffering the stream.
const QUEUED_EVENTS: usize = 4;

/// One whole ADU, the next one the job receives.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct AduInfo {
    /// The stream it belongs to (the sender's stream id).
    pub stream: u32,
    /// Its number in the stream.
    pub adu: u64,
    /// Its size in bytes.
    pub size: u64,
}

/// What comes next in the stream, as every rank learns it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) enum Next {
    /// A whole ADU (its bytes are on rank 0).
    Adu(AduInfo),
    /// The connection ended and every stream of it ended complete.
    End,
    /// See [`StreamRecvError::Incomplete`].
    Incomplete {
        stream: u32,
        adu: u64,
        have: u64,
        size: u64,
    },
    /// See [`StreamRecvError::Missing`].
    Missing { stream: u32, from: u64, to: u64 },
    /// See [`StreamRecvError::Cut`].
    Cut { stream: u32, adus: u64 },
    /// See [`StreamRecvError::Checksum`].
    Checksum {
        stream: u32,
        adu: u64,
        tu: u64,
        su: u16,
        link: u16,
    },
    /// See [`StreamRecvError::Refused`].
    Refused(String),
    /// See [`StreamRecvError::Receiver`].
    Receiver(String),
}

impl Next {
    /// Whether nothing can come after it.
    pub(crate) fn is_final(&self) -> bool {
        !matches!(self, Next::Adu(_))
    }

    /// What a collective call returns for it.
    pub(crate) fn outcome(&self) -> Result<Option<AduInfo>, StreamRecvError> {
        match self.clone() {
            Next::Adu(i) => Ok(Some(i)),
            Next::End => Ok(None),
            Next::Incomplete {
                stream,
                adu,
                have,
                size,
            } => Err(StreamRecvError::Incomplete {
                stream,
                adu,
                have,
                size,
            }),
            Next::Missing { stream, from, to } => {
                Err(StreamRecvError::Missing { stream, from, to })
            }
            Next::Cut { stream, adus } => Err(StreamRecvError::Cut { stream, adus }),
            Next::Checksum {
                stream,
                adu,
                tu,
                su,
                link,
            } => Err(StreamRecvError::Checksum {
                stream,
                adu,
                tu,
                su,
                link,
            }),
            Next::Refused(reason) => Err(StreamRecvError::Refused { reason }),
            Next::Receiver(what) => Err(StreamRecvError::Receiver { what }),
        }
    }

    /// Its bytes for the broadcast: a kind byte, then little-endian fields (or text).
    pub(crate) fn encode(&self) -> Vec<u8> {
        let mut b = Vec::with_capacity(32);
        let words = |b: &mut Vec<u8>, kind: u8, s: u32, x: &[u64]| {
            b.push(kind);
            b.extend_from_slice(&s.to_le_bytes());
            x.iter().for_each(|v| b.extend_from_slice(&v.to_le_bytes()));
        };
        match self {
            Next::Adu(i) => words(&mut b, 0, i.stream, &[i.adu, i.size]),
            Next::End => b.push(1),
            Next::Incomplete {
                stream,
                adu,
                have,
                size,
            } => words(&mut b, 2, *stream, &[*adu, *have, *size]),
            Next::Missing { stream, from, to } => words(&mut b, 3, *stream, &[*from, *to]),
            Next::Cut { stream, adus } => words(&mut b, 4, *stream, &[*adus]),
            Next::Checksum {
                stream,
                adu,
                tu,
                su,
                link,
            } => words(
                &mut b,
                7,
                *stream,
                &[*adu, *tu, u64::from(*su), u64::from(*link)],
            ),
            Next::Refused(t) | Next::Receiver(t) => {
                b.push(if matches!(self, Next::Refused(_)) {
                    5
                } else {
                    6
                });
                b.extend_from_slice(t.as_bytes());
            }
        }
        b
    }

    /// The inverse of [`Next::encode`] (bytes rank 0 of this job encoded).
    pub(crate) fn decode(b: &[u8]) -> Next {
        let stream = b
            .get(1..5)
            .and_then(|s| s.try_into().ok())
            .map_or(0, u32::from_le_bytes);
        let w = |k: usize| {
            b.get(5 + 8 * k..13 + 8 * k)
                .and_then(|s| s.try_into().ok())
                .map(u64::from_le_bytes)
        };
        let text = || String::from_utf8_lossy(b.get(1..).unwrap_or_default()).into_owned();
        let decoded = match b.first() {
            Some(0) => w(0)
                .zip(w(1))
                .map(|(adu, size)| Next::Adu(AduInfo { stream, adu, size })),
            Some(1) => Some(Next::End),
            Some(2) => w(0)
                .zip(w(1))
                .zip(w(2))
                .map(|((adu, have), size)| Next::Incomplete {
                    stream,
                    adu,
                    have,
                    size,
                }),
            Some(3) => w(0)
                .zip(w(1))
                .map(|(from, to)| Next::Missing { stream, from, to }),
            Some(4) => w(0).map(|adus| Next::Cut { stream, adus }),
            Some(5) => Some(Next::Refused(text())),
            Some(6) => Some(Next::Receiver(text())),
            Some(7) => w(0)
                .zip(w(1))
                .zip(w(2))
                .zip(w(3))
                .and_then(|(((adu, tu), su), link)| {
                    Some(Next::Checksum {
                        stream,
                        adu,
                        tu,
                        su: u16::try_from(su).ok()?,
                        link: u16::try_from(link).ok()?,
                    })
                }),
            _ => None,
        };
        decoded
            .unwrap_or_else(|| Next::Receiver("rank 0 broadcast a malformed stream event".into()))
    }
}

/// What the receiving thread queues.
enum Item {
    Event(Event),
    Served(Result<Summary, RecvError>),
}

/// Rank 0's receiver of the stream's one logical connection.
pub(crate) struct Inbox {
    rx: Option<Rx<Item>>,
    addr: SocketAddr,
    served: bool,
}

impl Inbox {
    /// Listens at `addr` and serves one connection on a thread of its own.
    pub(crate) fn start(addr: SocketAddr, limits: Limits) -> Result<Inbox, StreamRecvError> {
        let r = Receiver::bind(addr, limits)
            .map_err(|source| StreamRecvError::Bind { addr, source })?;
        let bound = r
            .local_addr()
            .map_err(|source| StreamRecvError::Bind { addr, source })?;
        let (tx, rx) = sync_channel(QUEUED_EVENTS);
        std::thread::Builder::new()
            .name("spools-stream-in".into())
            .spawn(move || serve(r, &tx))
            .map_err(StreamRecvError::Thread)?;
        Ok(Inbox {
            rx: Some(rx),
            addr: bound,
            served: false,
        })
    }

    /// Where senders connect.
    pub(crate) fn addr(&self) -> SocketAddr {
        self.addr
    }

    /// Waits for what comes next, with the bytes of a whole ADU (streams that ended
    /// complete are passed over). A sender that dies ends its links, so this ends too.
    /// Asks `check` (the interrupt check) whenever nothing came for [`CHECK_EVERY`].
    ///
    /// # Errors
    /// `check`'s (nothing was taken from the queue).
    pub(crate) fn next(
        &mut self,
        check: &dyn Fn() -> Result<(), MsgError>,
    ) -> Result<(Next, Vec<u8>), MsgError> {
        let Some(rx) = self.rx.as_ref() else {
            return Ok((Next::Receiver("the receiver was shut".into()), Vec::new()));
        };
        loop {
            let got = match rx.recv_timeout(CHECK_EVERY) {
                Ok(item) => Ok(item),
                Err(RecvTimeoutError::Timeout) => {
                    check()?;
                    continue;
                }
                Err(RecvTimeoutError::Disconnected) => Err(()),
            };
            let next = match got {
                Ok(Item::Event(Event::Adu { stream, adu, data })) => {
                    let size = data.len() as u64;
                    return Ok((Next::Adu(AduInfo { stream, adu, size }), data));
                }
                Ok(Item::Event(Event::Ended { complete: true, .. })) => continue,
                Ok(Item::Event(Event::Ended { stream, adus, .. })) => Next::Cut { stream, adus },
                Ok(Item::Event(Event::Incomplete {
                    stream,
                    adu,
                    have,
                    size,
                })) => Next::Incomplete {
                    stream,
                    adu,
                    have,
                    size,
                },
                Ok(Item::Event(Event::Missing { stream, from, to })) => {
                    Next::Missing { stream, from, to }
                }
                Ok(Item::Served(s)) => {
                    self.served = true;
                    match s {
                        Ok(s) => match (s.faults.first(), s.broken.first()) {
                            (
                                Some((
                                    _,
                                    ReassemblyError::Checksum {
                                        stream,
                                        adu,
                                        tu,
                                        su,
                                        link,
                                        ..
                                    },
                                )),
                                _,
                            ) => Next::Checksum {
                                stream: *stream,
                                adu: *adu,
                                tu: *tu,
                                su: *su,
                                link: *link,
                            },
                            (_, Some(b)) => Next::Refused(b.clone()),
                            (_, None) => Next::End,
                        },
                        Err(e) => Next::Receiver(e.to_string()),
                    }
                }
                Err(_) => {
                    self.served = true;
                    Next::Receiver("the receiving thread ended".into())
                }
            };
            return Ok((next, Vec::new()));
        }
    }
}

impl Drop for Inbox {
    /// Ends the receiving thread: with the queue gone its next delivery fails, and when it
    /// still waits for a connection, an empty one (made on a thread of its own, so that
    /// dropping never blocks) ends its wait.
    fn drop(&mut self) {
        drop(self.rx.take());
        if self.served {
            return;
        }
        let mut to = self.addr;
        if to.ip().is_unspecified() {
            to.set_ip(match to.ip() {
                IpAddr::V4(_) => IpAddr::V4(Ipv4Addr::LOCALHOST),
                IpAddr::V6(_) => IpAddr::V6(Ipv6Addr::LOCALHOST),
            });
        }
        let _ = std::thread::Builder::new()
            .name("spools-stream-in-end".into())
            .spawn(move || {
                if let Ok(s) = Sender::connect(to, 1) {
                    let _ = s.finish();
                }
            });
    }
}

/// The receiving thread: serves one connection, queueing its events, then how it ended.
fn serve(r: Receiver, tx: &SyncSender<Item>) {
    let served = r.serve(1, |d| {
        tx.send(Item::Event(d.event))
            .map_err(|_| std::io::Error::other("the stream reader was dropped"))
    });
    let _ = tx.send(Item::Served(served));
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Every event rank 0 broadcasts comes out the same on the other ranks; bytes that are
    /// no event are a receiver error, not a panic.
    #[test]
    fn next_round_trips_through_its_bytes() {
        let all = [
            Next::Adu(AduInfo {
                stream: 7,
                adu: u64::MAX - 1,
                size: 1 << 40,
            }),
            Next::End,
            Next::Incomplete {
                stream: 1,
                adu: 2,
                have: 3,
                size: 4,
            },
            Next::Missing {
                stream: u32::MAX,
                from: 5,
                to: 9,
            },
            Next::Cut { stream: 3, adus: 8 },
            Next::Checksum {
                stream: 1,
                adu: u64::MAX,
                tu: 3,
                su: u16::MAX,
                link: 2,
            },
            Next::Refused("stream 1, ADU 1: an SU out of place".into()),
            Next::Receiver("accepting: too many files".into()),
        ];
        for n in all {
            assert_eq!(Next::decode(&n.encode()), n);
        }
        for bad in [&[][..], &[0, 1, 2], &[9], &[4, 0, 0, 0, 0, 1]] {
            assert!(matches!(Next::decode(bad), Next::Receiver(_)), "{bad:?}");
        }
    }
}
