//! The name of one heap segment: what a peer needs to open it, and its wire form.

use thiserror::Error;

/// First byte of a name's wire form.
const MARKER: u8 = b'H';
/// Wire-format version.
const VERSION: u8 = 1;
/// Set in the number of a region's segment.
const REGION_BIT: u64 = 1 << 63;

/// The name of one shared-heap segment: the job, the rank that allocated it and a number
/// unique within that rank. Its shared-memory name is `/spools-<job>-heap-<rank>-<seq>`,
/// under the job's prefix, so the launcher's clean-up removes what a killed rank leaves.
///
/// ```
/// use spools_heap::HeapName;
/// let n = HeapName::new(0x2a, 3, 7);
/// assert_eq!(n.shm_name(), "/spools-000000000000002a-heap-3-7");
/// assert_eq!(HeapName::from_bytes(&n.to_bytes()), Ok(n));
/// assert!(HeapName::from_bytes(b"garbage").is_err());
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct HeapName {
    job: u64,
    rank: u32,
    seq: u64,
}

/// A heap name or reference that came off the wire is not one.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Error)]
pub enum HeapNameError {
    /// The bytes are not as long as the wire form.
    #[error("a heap reference is {want} bytes, got {got}")]
    Length {
        /// Bytes expected.
        want: usize,
        /// Bytes received.
        got: usize,
    },
    /// The bytes do not start with the marker and version of a heap name.
    #[error("not a heap name (starts with {0:#04x} {1:#04x})")]
    Marker(u8, u8),
}

impl HeapName {
    /// Bytes of the wire form.
    pub const WIRE_BYTES: usize = 2 + 8 + 4 + 8;

    /// The name of segment `seq` of `rank` in `job`.
    pub fn new(job: u64, rank: u32, seq: u64) -> HeapName {
        HeapName { job, rank, seq }
    }

    /// The name of the segment of active-message region `key` of `rank` in `job` (a
    /// region in the shared heap has this name, so a peer that knows the key can map it
    /// without asking). Apart from the names [`HeapName::new`] gives for the numbers
    /// buffers take (which stay below 2^63).
    ///
    /// ```
    /// use spools_heap::HeapName;
    /// let r = HeapName::region(1, 2, 3);
    /// assert_ne!(r, HeapName::new(1, 2, 3));
    /// assert_eq!(r.region_key(), Some(3));
    /// assert_eq!(HeapName::new(1, 2, 3).region_key(), None);
    /// ```
    pub fn region(job: u64, rank: u32, key: u32) -> HeapName {
        HeapName {
            job,
            rank,
            seq: REGION_BIT | u64::from(key),
        }
    }

    /// The region key, if this names a region's segment.
    pub fn region_key(&self) -> Option<u32> {
        (self.seq & REGION_BIT != 0).then_some(self.seq as u32)
    }

    /// The job.
    pub fn job(&self) -> u64 {
        self.job
    }

    /// The rank that allocated the segment.
    pub fn rank(&self) -> u32 {
        self.rank
    }

    /// The segment's number within its rank.
    pub fn seq(&self) -> u64 {
        self.seq
    }

    /// The POSIX shared-memory name.
    pub fn shm_name(&self) -> String {
        format!("/spools-{:016x}-heap-{}-{}", self.job, self.rank, self.seq)
    }

    /// The wire form.
    pub fn to_bytes(&self) -> [u8; Self::WIRE_BYTES] {
        let mut b = [0u8; Self::WIRE_BYTES];
        b[0] = MARKER;
        b[1] = VERSION;
        b[2..10].copy_from_slice(&self.job.to_le_bytes());
        b[10..14].copy_from_slice(&self.rank.to_le_bytes());
        b[14..22].copy_from_slice(&self.seq.to_le_bytes());
        b
    }

    /// Parses the wire form.
    ///
    /// # Errors
    /// [`HeapNameError`] if `b` is not exactly a name's wire form.
    pub fn from_bytes(b: &[u8]) -> Result<HeapName, HeapNameError> {
        let b: &[u8; Self::WIRE_BYTES] = b.try_into().map_err(|_| HeapNameError::Length {
            want: Self::WIRE_BYTES,
            got: b.len(),
        })?;
        if b[0] != MARKER || b[1] != VERSION {
            return Err(HeapNameError::Marker(b[0], b[1]));
        }
        let mut job = [0u8; 8];
        job.copy_from_slice(&b[2..10]);
        let mut rank = [0u8; 4];
        rank.copy_from_slice(&b[10..14]);
        let mut seq = [0u8; 8];
        seq.copy_from_slice(&b[14..22]);
        Ok(HeapName {
            job: u64::from_le_bytes(job),
            rank: u32::from_le_bytes(rank),
            seq: u64::from_le_bytes(seq),
        })
    }
}

impl std::fmt::Display for HeapName {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.shm_name())
    }
}

/// Where a byte range of this process lies in the shared heap.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct HeapRef {
    /// The segment.
    pub name: HeapName,
    /// Offset of the range's first byte in the segment's user bytes.
    pub offset: u64,
}

impl HeapRef {
    /// Bytes of the wire form.
    pub const WIRE_BYTES: usize = HeapName::WIRE_BYTES + 8;

    /// The wire form (what a rendezvous request carries).
    ///
    /// ```
    /// use spools_heap::{HeapName, HeapRef};
    /// let r = HeapRef { name: HeapName::new(1, 2, 3), offset: 4096 };
    /// assert_eq!(HeapRef::from_bytes(&r.to_bytes()), Ok(r));
    /// assert!(HeapRef::from_bytes(&[0u8; HeapRef::WIRE_BYTES]).is_err());
    /// ```
    pub fn to_bytes(&self) -> [u8; Self::WIRE_BYTES] {
        let mut b = [0u8; Self::WIRE_BYTES];
        b[..HeapName::WIRE_BYTES].copy_from_slice(&self.name.to_bytes());
        b[HeapName::WIRE_BYTES..].copy_from_slice(&self.offset.to_le_bytes());
        b
    }

    /// Parses the wire form.
    ///
    /// # Errors
    /// [`HeapNameError`] if `b` is not exactly a reference's wire form.
    pub fn from_bytes(b: &[u8]) -> Result<HeapRef, HeapNameError> {
        if b.len() != Self::WIRE_BYTES {
            return Err(HeapNameError::Length {
                want: Self::WIRE_BYTES,
                got: b.len(),
            });
        }
        let (n, o) = b.split_at(HeapName::WIRE_BYTES);
        let name = HeapName::from_bytes(n)?;
        let mut off = [0u8; 8];
        off.copy_from_slice(o);
        Ok(HeapRef {
            name,
            offset: u64::from_le_bytes(off),
        })
    }
}
