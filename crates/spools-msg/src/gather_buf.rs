//! A send's source that is not one run of memory: what
//! [`crate::Communicator::isend_gather`] takes.

/// Where a sent message's bytes come from when they are not one run of memory (MPI's
/// send of a non-contiguous datatype): the engine asks it for the message's bytes piece
/// by piece, each with its offset in the message, as they leave, so that a message that
/// streams is never packed whole first (one that leaves at once, short or eager, is
/// packed whole, into a buffer of the engine's of its size).
///
/// The engine calls [`GatherBuf::read_at`] under its lock, on any thread of the rank
/// (the progress thread too), and drops the value when the operation is released:
/// neither may call into Spools nor wait for another thread that does. The memory it
/// reads must not change until then (as with MPI, a pending send's buffer is the
/// operation's).
pub trait GatherBuf: Send + 'static {
    /// The message's length in bytes.
    fn len(&self) -> usize;
    /// Whether the message is empty.
    fn is_empty(&self) -> bool {
        self.len() == 0
    }
    /// Fills `out` with the message's bytes from `offset` on (`offset + out.len()` is at
    /// most [`GatherBuf::len`]).
    fn read_at(&mut self, offset: usize, out: &mut [u8]);
}
