//! The wire format of the single-copy protocol: the source's description of its buffers
//! ([`Descriptor`]) and the destination's answer ([`Reply`]).
//!
//! A descriptor is, little-endian: the magic `SPXD`, a version byte (1), a kind byte
//! (1: the buffers are in the sender's process memory, read with `process_vm_readv`),
//! two zero bytes, the sender's process id (u32), the number of buffers (u32), then per
//! buffer its unit, address and length (three u64). A reply is one byte.

use crate::error::ExchangeError;

const MAGIC: &[u8; 4] = b"SPXD";
const VERSION: u8 = 1;
const KIND_PROCESS: u8 = 1;
const HEAD: usize = 16;
const ENTRY: usize = 24;

/// One source buffer as the destination can reach it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) struct Area {
    /// The source unit it holds.
    pub(super) unit: u64,
    /// Its address in the source's process.
    pub(super) addr: u64,
    /// Its length in bytes.
    pub(super) len: u64,
}

/// Where the source buffers of one stream are.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(super) struct Descriptor {
    /// The source's process id.
    pub(super) pid: u32,
    /// Its buffers, one per source unit of the stream.
    pub(super) areas: Vec<Area>,
}

impl Descriptor {
    /// The message.
    pub(super) fn encode(&self) -> Vec<u8> {
        let mut out = Vec::with_capacity(HEAD + ENTRY * self.areas.len());
        out.extend_from_slice(MAGIC);
        out.extend_from_slice(&[VERSION, KIND_PROCESS, 0, 0]);
        out.extend_from_slice(&self.pid.to_le_bytes());
        out.extend_from_slice(&(self.areas.len() as u32).to_le_bytes());
        for a in &self.areas {
            for x in [a.unit, a.addr, a.len] {
                out.extend_from_slice(&x.to_le_bytes());
            }
        }
        out
    }

    /// Reads a descriptor sent by rank `from`.
    ///
    /// # Errors
    /// [`ExchangeError::Descriptor`] for anything but a well-formed descriptor.
    pub(super) fn decode(from: u32, msg: &[u8]) -> Result<Descriptor, ExchangeError> {
        let bad = |what| ExchangeError::Descriptor { from, what };
        let (head, rest) = msg.split_first_chunk::<HEAD>().ok_or(bad("shorter than its header"))?;
        if &head[..4] != MAGIC {
            return Err(bad("wrong magic"));
        }
        if head[4] != VERSION {
            return Err(bad("unknown version"));
        }
        if head[5] != KIND_PROCESS {
            return Err(bad("unknown kind of memory"));
        }
        if head[6..8] != [0, 0] {
            return Err(bad("reserved bytes are not zero"));
        }
        let word = |i: usize| u32::from_le_bytes([head[i], head[i + 1], head[i + 2], head[i + 3]]);
        let (pid, count) = (word(8), word(12) as usize);
        if pid == 0 || pid > i32::MAX as u32 {
            return Err(bad("not a process id"));
        }
        if rest.len() != count.saturating_mul(ENTRY) {
            return Err(bad("length does not match its count of buffers"));
        }
        let mut areas = Vec::with_capacity(count);
        for e in rest.chunks_exact(ENTRY) {
            let x = |i: usize| {
                let mut b = [0u8; 8];
                b.copy_from_slice(&e[i * 8..i * 8 + 8]);
                u64::from_le_bytes(b)
            };
            let a = Area {
                unit: x(0),
                addr: x(1),
                len: x(2),
            };
            if a.addr.checked_add(a.len).is_none() {
                return Err(bad("a buffer wraps around the address space"));
            }
            if areas.iter().any(|b: &Area| b.unit == a.unit) {
                return Err(bad("two buffers for one unit"));
            }
            areas.push(a);
        }
        Ok(Descriptor { pid, areas })
    }

    /// The buffer of source unit `unit`.
    ///
    /// # Errors
    /// [`ExchangeError::Descriptor`] if the descriptor does not list it.
    pub(super) fn area(&self, from: u32, unit: u64) -> Result<Area, ExchangeError> {
        self.areas
            .iter()
            .find(|a| a.unit == unit)
            .copied()
            .ok_or(ExchangeError::Descriptor {
                from,
                what: "a source unit of the stream is missing",
            })
    }
}

/// The destination's answer to a descriptor.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) enum Reply {
    /// Every run was copied: the source buffer is no longer needed.
    Done,
    /// This host refuses the single copy: send the stream through transfer units.
    Ring,
    /// The copy failed (the destination has the error).
    Failed,
}

impl Reply {
    /// The message.
    pub(super) fn encode(self) -> Vec<u8> {
        vec![match self {
            Reply::Done => 0,
            Reply::Ring => 1,
            Reply::Failed => 2,
        }]
    }

    /// Reads a reply sent by rank `from`.
    ///
    /// # Errors
    /// [`ExchangeError::Descriptor`] for anything but one known byte.
    pub(super) fn decode(from: u32, msg: &[u8]) -> Result<Reply, ExchangeError> {
        match msg {
            [0] => Ok(Reply::Done),
            [1] => Ok(Reply::Ring),
            [2] => Ok(Reply::Failed),
            _ => Err(ExchangeError::Descriptor {
                from,
                what: "a reply is not one known byte",
            }),
        }
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;

    fn sample() -> Descriptor {
        Descriptor {
            pid: 4242,
            areas: vec![
                Area {
                    unit: 3,
                    addr: 0x7f00_0000_1000,
                    len: 4096,
                },
                Area {
                    unit: 5,
                    addr: 0x7f00_0010_0000,
                    len: 1,
                },
            ],
        }
    }

    #[test]
    fn a_descriptor_survives_the_wire() {
        let d = sample();
        assert_eq!(Descriptor::decode(1, &d.encode()).unwrap(), d);
        assert_eq!(d.area(1, 5).unwrap().len, 1);
        assert!(d.area(1, 4).is_err());
        for r in [Reply::Done, Reply::Ring, Reply::Failed] {
            assert_eq!(Reply::decode(1, &r.encode()).unwrap(), r);
        }
    }

    #[test]
    fn garbage_is_refused_with_a_reason() {
        let good = sample().encode();
        let mut cases: Vec<(Vec<u8>, &str)> = vec![
            (Vec::new(), "shorter than its header"),
            (good[..good.len() - 1].to_vec(), "length does not match"),
            ([good.clone(), vec![0]].concat(), "length does not match"),
        ];
        let mut patch = |i: usize, b: u8, what: &'static str| {
            let mut m = good.clone();
            m[i] = b;
            cases.push((m, what));
        };
        patch(0, b'X', "wrong magic");
        patch(4, 9, "unknown version");
        patch(5, 7, "unknown kind");
        patch(7, 1, "reserved");
        patch(12, 0xff, "length does not match");
        let mut m = good.clone();
        m[8..12].copy_from_slice(&0u32.to_le_bytes());
        cases.push((m, "not a process id"));
        let mut m = good.clone();
        m[16 + 8..16 + 16].copy_from_slice(&u64::MAX.to_le_bytes());
        cases.push((m, "wraps"));
        let mut m = good.clone();
        m[16 + 24..16 + 32].copy_from_slice(&3u64.to_le_bytes());
        cases.push((m, "two buffers"));
        for (msg, want) in cases {
            match Descriptor::decode(2, &msg) {
                Err(ExchangeError::Descriptor { from: 2, what }) => {
                    assert!(what.contains(want), "{what:?} for {want:?}")
                }
                r => panic!("{want}: {r:?}"),
            }
        }
        for msg in [&[][..], &[3], &[0, 0]] {
            assert!(Reply::decode(2, msg).is_err());
        }
    }
}
