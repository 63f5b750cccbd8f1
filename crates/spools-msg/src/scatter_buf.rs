//! A receive's destination that is not one run of memory: what
//! [`crate::Communicator::irecv_scatter`] takes.

/// Where a received message's bytes go when they do not go to one run of memory (MPI's
/// receive into a non-contiguous datatype): the engine hands it the message's bytes as
/// they arrive, each piece with its offset in the message, and the value puts them in
/// place, so that no packed copy of the whole message is made first. Pieces arrive in
/// any order, each byte once; a message longer than [`ScatterBuf::capacity`] is
/// truncated (nothing is written and the receive fails with
/// [`crate::MsgError::Truncated`]).
///
/// The engine calls [`ScatterBuf::write_at`] under its lock, on any thread of the rank
/// (the progress thread too), and drops the value when the operation is released: neither
/// may call into Spools nor wait for another thread that does.
pub trait ScatterBuf: Send + 'static {
    /// The most bytes the receive takes.
    fn capacity(&self) -> usize;
    /// Puts `data`, the message's bytes from `offset` on, in place (`offset +
    /// data.len()` is at most [`ScatterBuf::capacity`]).
    fn write_at(&mut self, offset: usize, data: &[u8]);
}
