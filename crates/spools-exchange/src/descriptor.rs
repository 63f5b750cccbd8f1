//! The wire format of the single-copy protocol: the source's description of its buffers
//! ([`Descriptor`]) and the destination's answer ([`Reply`]).
//!
//! A descriptor is, little-endian: the magic `SPXD`, a version byte (1), a mode byte (0:
//! the stream follows in transfer units, no buffers listed; 1: pull the runs from the
//! buffers listed), two zero bytes, the sender's process id (u32), the number of
//! buffers (u32), then per buffer: its unit (u64), its length (u64), a kind byte (1: in
//! the sender's process memory, followed by seven zero bytes and its address (u64); 2: in
//! the shared heap, followed by seven zero bytes and the wire form of its
//! [`HeapRef`]). A reply is one byte (0: done, 1: send through the rings, 2: failed),
//! followed after "done" by the bytes copied (u64).

use spools_heap::HeapRef;

use crate::error::ExchangeError;

const MAGIC: &[u8; 4] = b"SPXD";
const VERSION: u8 = 1;
const HEAD: usize = 32;
const KIND_PROCESS: u8 = 1;
const KIND_HEAP: u8 = 2;

/// Where one source buffer lies.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) enum Place {
    /// At this address in the source's process memory.
    Process(u64),
    /// In the source's shared heap.
    Heap(HeapRef),
}

/// One source buffer as the destination can reach it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) struct Area {
    /// The source unit it holds.
    pub(super) unit: u64,
    /// Its length in bytes.
    pub(super) len: u64,
    /// Where it is.
    pub(super) place: Place,
}

/// A random value at a fixed address of the source process: the destination reads it
/// before anything else, so that it never copies out of another process that happens to
/// have the id (another pid namespace, a recycled pid).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) struct Cookie {
    /// Its address in the source process.
    pub(super) addr: u64,
    /// Its value.
    pub(super) value: u64,
}

/// How the source moves one stream, and from where the destination pulls it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(super) struct Descriptor {
    /// The source's process id.
    pub(super) pid: u32,
    /// The source process's cookie.
    pub(super) cookie: Cookie,
    /// `None`: the stream follows in transfer units; else its buffers, one per source
    /// unit of the stream.
    pub(super) areas: Option<Vec<Area>>,
}

/// Reads little-endian fields off the front of a message.
struct Reader<'a> {
    rest: &'a [u8],
}

impl<'a> Reader<'a> {
    fn take(&mut self, n: usize) -> Option<&'a [u8]> {
        let (a, b) = self.rest.split_at_checked(n)?;
        self.rest = b;
        Some(a)
    }

    fn u64(&mut self) -> Option<u64> {
        let mut b = [0u8; 8];
        b.copy_from_slice(self.take(8)?);
        Some(u64::from_le_bytes(b))
    }
}

impl Descriptor {
    /// The message.
    pub(super) fn encode(&self) -> Vec<u8> {
        let areas = self.areas.as_deref().unwrap_or_default();
        let mut out = Vec::with_capacity(HEAD + 48 * areas.len());
        out.extend_from_slice(MAGIC);
        out.extend_from_slice(&[VERSION, u8::from(self.areas.is_some()), 0, 0]);
        out.extend_from_slice(&self.pid.to_le_bytes());
        out.extend_from_slice(&(areas.len() as u32).to_le_bytes());
        out.extend_from_slice(&self.cookie.addr.to_le_bytes());
        out.extend_from_slice(&self.cookie.value.to_le_bytes());
        for a in areas {
            out.extend_from_slice(&a.unit.to_le_bytes());
            out.extend_from_slice(&a.len.to_le_bytes());
            match a.place {
                Place::Process(addr) => {
                    out.extend_from_slice(&[KIND_PROCESS, 0, 0, 0, 0, 0, 0, 0]);
                    out.extend_from_slice(&addr.to_le_bytes());
                }
                Place::Heap(r) => {
                    out.extend_from_slice(&[KIND_HEAP, 0, 0, 0, 0, 0, 0, 0]);
                    out.extend_from_slice(&r.to_bytes());
                }
            }
        }
        out
    }

    /// Bytes of the largest descriptor listing `units` buffers.
    pub(super) fn capacity(units: usize) -> usize {
        HEAD + units * (24 + HeapRef::WIRE_BYTES.max(8))
    }

    /// Reads a descriptor sent by rank `from`.
    ///
    /// # Errors
    /// [`ExchangeError::Descriptor`] for anything but a well-formed descriptor.
    pub(super) fn decode(from: u32, msg: &[u8]) -> Result<Descriptor, ExchangeError> {
        let bad = |what| ExchangeError::Descriptor { from, what };
        let (head, rest) = msg
            .split_first_chunk::<HEAD>()
            .ok_or_else(|| bad("shorter than its header"))?;
        if &head[..4] != MAGIC {
            return Err(bad("wrong magic"));
        }
        if head[4] != VERSION {
            return Err(bad("unknown version"));
        }
        if head[5] > 1 {
            return Err(bad("unknown mode"));
        }
        if head[6..8] != [0, 0] {
            return Err(bad("reserved bytes are not zero"));
        }
        let word = |i: usize| u32::from_le_bytes([head[i], head[i + 1], head[i + 2], head[i + 3]]);
        let (pid, count) = (word(8), word(12) as usize);
        let dword = |i: usize| u64::from(word(i)) | u64::from(word(i + 4)) << 32;
        let cookie = Cookie {
            addr: dword(16),
            value: dword(24),
        };
        if pid == 0 || pid > i32::MAX as u32 {
            return Err(bad("not a process id"));
        }
        if head[5] == 0 {
            return match (count, rest.is_empty()) {
                (0, true) => Ok(Descriptor {
                    pid,
                    cookie,
                    areas: None,
                }),
                _ => Err(bad("buffers listed for a stream in transfer units")),
            };
        }
        let truncated = || bad("truncated buffer list");
        let mut r = Reader { rest };
        let mut areas: Vec<Area> = Vec::with_capacity(count.min(rest.len() / 32));
        for _ in 0..count {
            let unit = r.u64().ok_or_else(truncated)?;
            let len = r.u64().ok_or_else(truncated)?;
            let kind = r.take(8).ok_or_else(truncated)?;
            if kind[1..] != [0; 7] {
                return Err(bad("reserved bytes are not zero"));
            }
            let place = match kind[0] {
                KIND_PROCESS => {
                    let addr = r.u64().ok_or_else(truncated)?;
                    if addr.checked_add(len).is_none() {
                        return Err(bad("a buffer wraps around the address space"));
                    }
                    Place::Process(addr)
                }
                KIND_HEAP => {
                    let w = r.take(HeapRef::WIRE_BYTES).ok_or_else(truncated)?;
                    Place::Heap(
                        HeapRef::from_bytes(w).map_err(|_| bad("not a shared-heap reference"))?,
                    )
                }
                _ => return Err(bad("unknown kind of buffer")),
            };
            if areas.iter().any(|b| b.unit == unit) {
                return Err(bad("two buffers for one unit"));
            }
            areas.push(Area { unit, len, place });
        }
        if !r.rest.is_empty() {
            return Err(bad("bytes after the buffer list"));
        }
        Ok(Descriptor {
            pid,
            cookie,
            areas: Some(areas),
        })
    }
}

/// The buffer of source unit `unit` in `areas`.
///
/// # Errors
/// [`ExchangeError::Descriptor`] if the list does not have it.
pub(super) fn area(areas: &[Area], from: u32, unit: u64) -> Result<Area, ExchangeError> {
    areas
        .iter()
        .find(|a| a.unit == unit)
        .copied()
        .ok_or(ExchangeError::Descriptor {
            from,
            what: "a source unit of the stream is missing",
        })
}

/// The destination's answer to a descriptor.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) enum Reply {
    /// Every run was copied (this many bytes): the source buffer is no longer needed.
    Done(u64),
    /// This host refuses the single copy: send the stream through transfer units.
    Ring,
    /// The copy failed (the destination has the error).
    Failed,
}

impl Reply {
    /// The message.
    pub(super) fn encode(self) -> Vec<u8> {
        match self {
            Reply::Done(bytes) => [&[0u8][..], &bytes.to_le_bytes()].concat(),
            Reply::Ring => vec![1],
            Reply::Failed => vec![2],
        }
    }

    /// Reads a reply sent by rank `from`.
    ///
    /// # Errors
    /// [`ExchangeError::Descriptor`] for anything but a known reply.
    pub(super) fn decode(from: u32, msg: &[u8]) -> Result<Reply, ExchangeError> {
        match msg {
            [0, bytes @ ..] => <[u8; 8]>::try_from(bytes)
                .map(|b| Reply::Done(u64::from_le_bytes(b)))
                .map_err(|_| ExchangeError::Descriptor {
                    from,
                    what: "a \"done\" reply without its count of bytes",
                }),
            [1] => Ok(Reply::Ring),
            [2] => Ok(Reply::Failed),
            _ => Err(ExchangeError::Descriptor {
                from,
                what: "a reply is not a known one",
            }),
        }
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, clippy::panic)]
    use spools_heap::HeapName;

    use super::*;

    fn sample() -> Descriptor {
        Descriptor {
            pid: 4242,
            cookie: Cookie {
                addr: 0x5555_0000_0040,
                value: 0x0123_4567_89ab_cdef,
            },
            areas: Some(vec![
                Area {
                    unit: 3,
                    len: 4096,
                    place: Place::Process(0x7f00_0000_1000),
                },
                Area {
                    unit: 5,
                    len: 1,
                    place: Place::Heap(HeapRef {
                        name: HeapName::new(1, 2, 3),
                        offset: 64,
                    }),
                },
            ]),
        }
    }

    #[test]
    fn a_descriptor_survives_the_wire() {
        let d = sample();
        let m = d.encode();
        assert!(m.len() <= Descriptor::capacity(2));
        assert_eq!(Descriptor::decode(1, &m).unwrap(), d);
        let ring = Descriptor {
            pid: 7,
            cookie: Cookie { addr: 8, value: 9 },
            areas: None,
        };
        assert_eq!(Descriptor::decode(1, &ring.encode()).unwrap(), ring);
        let areas = d.areas.unwrap();
        assert_eq!(area(&areas, 1, 5).unwrap().len, 1);
        assert!(area(&areas, 1, 4).is_err());
        for r in [
            Reply::Done(0),
            Reply::Done(1 << 40),
            Reply::Ring,
            Reply::Failed,
        ] {
            assert_eq!(Reply::decode(1, &r.encode()).unwrap(), r);
        }
    }

    #[test]
    fn garbage_is_refused_with_a_reason() {
        let good = sample().encode();
        let mut cases: Vec<(Vec<u8>, &str)> = vec![
            (Vec::new(), "shorter than its header"),
            (good[..good.len() - 1].to_vec(), "truncated"),
            ([good.clone(), vec![0]].concat(), "bytes after"),
        ];
        let mut patch = |i: usize, b: u8, what: &'static str| {
            let mut m = good.clone();
            m[i] = b;
            cases.push((m, what));
        };
        patch(0, b'X', "wrong magic");
        patch(4, 9, "unknown version");
        patch(5, 7, "unknown mode");
        patch(5, 0, "buffers listed");
        patch(7, 1, "reserved");
        patch(12, 0xff, "truncated");
        patch(HEAD + 16, 9, "unknown kind");
        patch(HEAD + 17, 1, "reserved");
        let mut m = good.clone();
        m[8..12].copy_from_slice(&0u32.to_le_bytes());
        cases.push((m, "not a process id"));
        let mut m = good.clone();
        m[HEAD + 24..HEAD + 32].copy_from_slice(&u64::MAX.to_le_bytes());
        cases.push((m, "wraps"));
        let mut m = good.clone();
        m[HEAD + 32..HEAD + 40].copy_from_slice(&3u64.to_le_bytes());
        cases.push((m, "two buffers"));
        let mut m = good.clone();
        let heap = HEAD + 32 + 24;
        m[heap..heap + 2].copy_from_slice(&[0xee, 0xee]);
        cases.push((m, "shared-heap reference"));
        for (msg, want) in cases {
            match Descriptor::decode(2, &msg) {
                Err(ExchangeError::Descriptor { from: 2, what }) => {
                    assert!(what.contains(want), "{what:?} for {want:?}")
                }
                r => panic!("{want}: {r:?}"),
            }
        }
        for msg in [&[][..], &[3], &[0], &[0, 0], &[1, 0], &[0; 10]] {
            assert!(Reply::decode(2, msg).is_err());
        }
    }
}
