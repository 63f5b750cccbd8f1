//! What the job learns of its stream: [`Next`], what comes next (rank 0's view, from
//! which it decides the order; or a rank's failure to provide its piece of an ADU), sent
//! from rank to rank as a few bytes.

use crate::error::StreamRecvError;

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

/// The next ADU, as rank 0 names it to every rank: what the job sees ([`AduInfo`]) and
/// where its pieces are (the stream's TU, the connection's links, whether they are spread
/// over the ranks, link `s` on rank `s % P`, or all on rank 0).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct Head {
    pub(crate) info: AduInfo,
    /// Bytes of a TU (a variable-size ADU's own size, at least 1).
    pub(crate) tu: u64,
    /// Links of the connection.
    pub(crate) links: u16,
    /// Whether link `s` is on rank `s % P` (else every link is on rank 0).
    pub(crate) spread: bool,
}

/// What comes next in the stream, as every rank learns it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) enum Next {
    /// A whole ADU on rank 0's links (its pieces on the others are fetched next).
    Adu(Head),
    /// The connection ended on rank 0's links and every stream of it ended complete.
    /// `spread`: the connection's link count when its links were spread over the ranks
    /// (link `s` on rank `s % P`), 0 when every link was on rank 0. A rank that holds
    /// links of a spread connection waits for their own end before it reports the end
    /// (docs/streams.md, "Ending a connection").
    End {
        /// The connection's links when they were spread over the ranks, else 0.
        spread: u16,
    },
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
            Next::Adu(h) => Ok(Some(h.info)),
            Next::End { .. } => Ok(None),
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
            Next::Adu(h) => words(
                &mut b,
                0,
                h.info.stream,
                &[
                    h.info.adu,
                    h.info.size,
                    h.tu,
                    u64::from(h.links) | u64::from(h.spread) << 16,
                ],
            ),
            Next::End { spread } => {
                b.push(1);
                b.extend_from_slice(&spread.to_le_bytes());
            }
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
                .zip(w(2))
                .zip(w(3))
                .and_then(|(((adu, size), tu), l)| {
                    Some(Next::Adu(Head {
                        info: AduInfo { stream, adu, size },
                        tu,
                        links: u16::try_from(l & 0xffff).ok()?,
                        spread: match l >> 16 {
                            0 => false,
                            1 => true,
                            _ => return None,
                        },
                    }))
                }),
            Some(1) => b
                .get(1..3)
                .and_then(|x| x.try_into().ok())
                .map(|x| Next::End {
                    spread: u16::from_le_bytes(x),
                }),
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
        decoded.unwrap_or_else(|| Next::Receiver("a rank sent a malformed stream event".into()))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Every event rank 0 broadcasts comes out the same on the other ranks; bytes that are
    /// no event are a receiver error, not a panic.
    #[test]
    fn next_round_trips_through_its_bytes() {
        let all = [
            Next::Adu(Head {
                info: AduInfo {
                    stream: 7,
                    adu: u64::MAX - 1,
                    size: 1 << 40,
                },
                tu: 3,
                links: 1024,
                spread: true,
            }),
            Next::Adu(Head {
                info: AduInfo {
                    stream: 0,
                    adu: 0,
                    size: 0,
                },
                tu: 1,
                links: 1,
                spread: false,
            }),
            Next::End { spread: 0 },
            Next::End { spread: 1024 },
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
        for bad in [&[][..], &[0, 1, 2], &[9], &[4, 0, 0, 0, 0, 1], &[1, 0]] {
            assert!(matches!(Next::decode(bad), Next::Receiver(_)), "{bad:?}");
        }
    }
}
