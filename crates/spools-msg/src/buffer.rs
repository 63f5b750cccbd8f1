//! Caller buffers the protocol writes into and reads from without copying them first.

/// A caller's buffer: address and length, and the vector that owns it when the engine
/// keeps it (non-blocking calls). A borrowed buffer (blocking calls) stays valid because
/// the call removes its operation from the engine, under the engine's lock, before it
/// returns; every access happens under that lock.
pub(crate) struct Buf {
    ptr: *mut u8,
    len: usize,
    owner: Option<Owner>,
}

/// What keeps an engine-held buffer's memory alive.
enum Owner {
    /// A vector given to `isend`/`irecv` (given back by `wait`).
    Vec(Vec<u8>),
    /// A caller's memory kept alive by its owner (see [`crate::PinnedBuf`]); dropped
    /// when the operation is released (held only to keep the memory alive).
    Pinned(#[allow(dead_code)] Box<dyn crate::PinnedBuf>),
    /// A caller's memory that is not one run: its bytes are packed piece by piece into
    /// `scratch` as they are read (see [`crate::GatherBuf`]).
    Gather(Box<Gathered>),
}

/// A gathered buffer's source and the piece of it packed last.
struct Gathered {
    src: Box<dyn crate::GatherBuf>,
    scratch: Vec<u8>,
    /// The offset and length `scratch` holds.
    held: Option<(usize, usize)>,
}

// SAFETY: the pointer is either into `owner` (moved with it; a Vec's heap block does not
// move, nor does a `PinnedBuf`'s memory, by that trait's contract) or into a buffer borrowed by a blocking call that outlives the operation (see
// above); it is dereferenced only under the engine's lock.
unsafe impl Send for Buf {}

impl Buf {
    /// A buffer the operation owns (given back when it finishes).
    pub(crate) fn owned(mut v: Vec<u8>) -> Buf {
        Buf {
            ptr: v.as_mut_ptr(),
            len: v.len(),
            owner: Some(Owner::Vec(v)),
        }
    }

    /// A buffer over a caller's pinned memory, which the operation keeps alive.
    pub(crate) fn pinned(mut b: Box<dyn crate::PinnedBuf>) -> Buf {
        Buf {
            ptr: b.as_mut_ptr(),
            len: b.len(),
            owner: Some(Owner::Pinned(b)),
        }
    }

    /// A buffer over a caller's memory that is not one run (a send of a non-contiguous
    /// datatype), packed piece by piece as it is read: no packed copy of the whole
    /// message is made for a message that streams.
    pub(crate) fn gathered(src: Box<dyn crate::GatherBuf>) -> Buf {
        Buf {
            ptr: std::ptr::null_mut(),
            len: src.len(),
            owner: Some(Owner::Gather(Box::new(Gathered {
                src,
                scratch: Vec::new(),
                held: None,
            }))),
        }
    }

    /// Whether the bytes are packed as they are read ([`Buf::gathered`]): they are
    /// not in memory for anyone to take whole.
    pub(crate) fn is_gathered(&self) -> bool {
        matches!(self.owner, Some(Owner::Gather(_)))
    }

    /// # Safety
    /// The caller keeps `s` borrowed until the operation is removed from the engine.
    pub(crate) unsafe fn borrowed(s: &mut [u8]) -> Buf {
        Buf {
            ptr: s.as_mut_ptr(),
            len: s.len(),
            owner: None,
        }
    }

    /// # Safety
    /// As [`Buf::borrowed`]; the engine only reads through it.
    pub(crate) unsafe fn borrowed_ro(s: &[u8]) -> Buf {
        Buf {
            ptr: s.as_ptr().cast_mut(),
            len: s.len(),
            owner: None,
        }
    }

    /// The buffer's length in bytes.
    pub(crate) fn len(&self) -> usize {
        self.len
    }

    /// Copies `data` to offset `off`; the caller checks `off + data.len() <= len()`.
    pub(crate) fn write(&mut self, off: usize, data: &[u8]) {
        assert!(off
            .checked_add(data.len())
            .is_some_and(|end| end <= self.len));
        if !data.is_empty() {
            // SAFETY: in bounds (asserted above); the memory is valid (see the type's
            // contract) and does not overlap `data` (a transport or queued buffer).
            unsafe { std::ptr::copy_nonoverlapping(data.as_ptr(), self.ptr.add(off), data.len()) }
        }
    }

    /// The `len` bytes at offset `off`, to write into; the caller checks
    /// `off + len <= len()`.
    pub(crate) fn slice_mut(&mut self, off: usize, len: usize) -> &mut [u8] {
        assert!(off.checked_add(len).is_some_and(|end| end <= self.len));
        if len == 0 {
            return &mut [];
        }
        // SAFETY: as for `write`; `&mut self` makes the view exclusive.
        unsafe { std::slice::from_raw_parts_mut(self.ptr.add(off), len) }
    }

    /// The `len` bytes at offset `off` (packed into the buffer's scratch first when it
    /// is gathered); the caller checks `off + len <= len()`.
    pub(crate) fn read(&mut self, off: usize, len: usize) -> &[u8] {
        assert!(off.checked_add(len).is_some_and(|end| end <= self.len));
        if len == 0 {
            return &[];
        }
        if let Some(Owner::Gather(g)) = &mut self.owner {
            if g.held != Some((off, len)) {
                if g.scratch.len() < len {
                    g.scratch.resize(len, 0);
                }
                g.src.read_at(off, &mut g.scratch[..len]);
                g.held = Some((off, len));
            }
            return &g.scratch[..len];
        }
        // SAFETY: as for `write`.
        unsafe { std::slice::from_raw_parts(self.ptr.add(off), len) }
    }

    /// The owned vector back (empty for a borrowed buffer; a pinned buffer's owner is
    /// dropped).
    pub(crate) fn take(self) -> Vec<u8> {
        match self.owner {
            Some(Owner::Vec(v)) => v,
            _ => Vec::new(),
        }
    }
}

/// A receive's buffer: fixed (a longer message is truncated) or allocated to the
/// message's size.
pub(crate) enum RecvBuf {
    /// The caller's buffer of a fixed size.
    Fixed(Buf),
    /// A vector the protocol sizes to the message.
    Alloc(Vec<u8>),
    /// The caller's scattered memory, written piece by piece (never pulled whole).
    Scatter(Box<dyn crate::ScatterBuf>),
}

impl RecvBuf {
    /// The buffer back to the caller.
    pub(crate) fn take(self) -> Vec<u8> {
        match self {
            RecvBuf::Fixed(b) => b.take(),
            RecvBuf::Alloc(v) => v,
            RecvBuf::Scatter(_) => Vec::new(),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Bytes `offset + i` of a message of 1000, counting its reads.
    struct Counting(std::sync::Arc<std::sync::atomic::AtomicUsize>);

    impl crate::GatherBuf for Counting {
        fn len(&self) -> usize {
            1000
        }
        fn read_at(&mut self, offset: usize, out: &mut [u8]) {
            self.0.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
            for (i, b) in out.iter_mut().enumerate() {
                *b = (offset + i) as u8;
            }
        }
    }

    #[test]
    fn a_gathered_buffer_packs_each_piece_once_as_it_is_read() {
        let reads = std::sync::Arc::new(std::sync::atomic::AtomicUsize::new(0));
        let mut b = Buf::gathered(Box::new(Counting(reads.clone())));
        assert!(b.is_gathered());
        assert_eq!(b.len(), 1000);
        assert_eq!(b.read(0, 3), [0, 1, 2]);
        // The same piece again (a chunk the transport had no room for): no new read.
        assert_eq!(b.read(0, 3), [0, 1, 2]);
        assert_eq!(reads.load(std::sync::atomic::Ordering::Relaxed), 1);
        let last = b.read(990, 10).to_vec();
        assert_eq!(last, (990..1000).map(|v| v as u8).collect::<Vec<_>>());
        assert_eq!(b.read(0, 0), [0u8; 0]);
        assert_eq!(reads.load(std::sync::atomic::Ordering::Relaxed), 2);
        assert!(b.take().is_empty());
    }
}
