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

    /// The `len` bytes at offset `off`; the caller checks `off + len <= len()`.
    pub(crate) fn read(&self, off: usize, len: usize) -> &[u8] {
        assert!(off.checked_add(len).is_some_and(|end| end <= self.len));
        if len == 0 {
            return &[];
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
