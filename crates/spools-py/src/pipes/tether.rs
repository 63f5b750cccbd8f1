//! A value that borrows a communicator, kept together with that communicator: the
//! pipe and stream ends of `spools_io` borrow the communicator they run on
//! (`PipeWriter<'c>`), while a Python object must own everything it uses.

use std::sync::Arc;

use spools::Communicator;

/// `T` (made from a `&'static Communicator` that really borrows `comm`) with `comm`.
///
/// Invariant: the reference given to `open` points into `comm`'s heap allocation, which
/// lives as long as `self`; `value` is dropped before `comm` (see `Drop`), and no method
/// lets `T` (or the reference) out of `self` except [`Tethered::finish`], which consumes
/// it while `comm` is still alive.
pub(crate) struct Tethered<T> {
    value: Option<T>,
    /// Kept only to outlive `value`, which borrows it.
    _comm: Arc<Communicator>,
}

impl<T> Tethered<T> {
    /// Makes the value from a reference to `comm`.
    ///
    /// # Errors
    /// `open`'s.
    pub(crate) fn new<E>(
        comm: Communicator,
        open: impl FnOnce(&'static Communicator) -> Result<T, E>,
    ) -> Result<Self, E> {
        let comm = Arc::new(comm);
        // SAFETY: the `Communicator` sits in the `Arc`'s heap allocation, which does not
        // move when the `Arc` moves and is freed only after `value` is dropped (the
        // type's invariant); the `'static` reference never leaves `Tethered` (`open`
        // gets it only to build `value`, and `finish` consumes `value` before `comm`
        // can go), so it is never used after the communicator is gone.
        let r: &'static Communicator = unsafe { &*Arc::as_ptr(&comm) };
        let value = open(r)?;
        Ok(Tethered {
            value: Some(value),
            _comm: comm,
        })
    }

    /// The value (`None` once finished).
    pub(crate) fn get_mut(&mut self) -> Option<&mut T> {
        self.value.as_mut()
    }

    /// Runs `f` on the value, consuming it (a `close(self)`), while the communicator is
    /// still alive; `None` if it was already finished.
    pub(crate) fn finish<R>(&mut self, f: impl FnOnce(T) -> R) -> Option<R> {
        self.value.take().map(f)
    }
}

impl<T> Drop for Tethered<T> {
    fn drop(&mut self) {
        // The value first: it borrows the communicator.
        self.value.take();
    }
}
