//! Memory at a fixed address that the engine may hold: the contract [`crate::buffer`]
//! keeps alive and [`crate::Communicator::isend_pinned`] takes.

/// Memory at a fixed address, owned by the value: what [`crate::Communicator::isend_pinned`]
/// and [`crate::Communicator::irecv_pinned`] take. The engine asks for the address once, when
/// the operation is posted, and drops the value when the operation is released (by
/// [`crate::Request::wait`], or, for a dropped request, when the operation completes or is
/// cancelled).
///
/// The drop may happen on any thread of the rank (the progress thread too) and under
/// the engine's lock: it must not call into Spools nor wait for another thread that
/// does (a binding defers the release of a foreign object instead).
///
/// # Safety
/// The first [`PinnedBuf::as_mut_ptr`] and [`PinnedBuf::len`] give `len` bytes that stay
/// valid, at that address, for as long as the value lives (moving the value does not
/// move them); valid for reads, and for writes when the value is given to a receive; and
/// nothing else reads or writes them while the engine holds the value (as with MPI, the
/// memory of a pending operation is the operation's).
pub unsafe trait PinnedBuf: Send + 'static {
    /// The start of the memory.
    fn as_mut_ptr(&mut self) -> *mut u8;
    /// Its length in bytes.
    fn len(&self) -> usize;
    /// Whether it is empty.
    fn is_empty(&self) -> bool {
        self.len() == 0
    }
}

// SAFETY: a vector's heap block does not move when the vector moves, and nobody else
// can reach it while the engine owns the vector.
unsafe impl PinnedBuf for Vec<u8> {
    fn as_mut_ptr(&mut self) -> *mut u8 {
        self.as_mut_slice().as_mut_ptr()
    }
    fn len(&self) -> usize {
        Vec::len(self)
    }
}

// SAFETY: as for `Vec<u8>`.
unsafe impl PinnedBuf for Box<[u8]> {
    fn as_mut_ptr(&mut self) -> *mut u8 {
        <[u8]>::as_mut_ptr(self)
    }
    fn len(&self) -> usize {
        <[u8]>::len(self)
    }
}
