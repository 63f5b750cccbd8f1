//! A blocking receive in two steps: post it, then poll it or wait for it. A language
//! binding polls a few times while it holds its interpreter's lock and releases the
//! lock only for a real wait (releasing costs more than a message that is already
//! there takes).

use crate::comm_core::CommCore;
use crate::communicator::Communicator;
use crate::error::MsgError;
use crate::op_guard::OpGuard;
use crate::status::{Source, Status, Tag};

/// A posted receive into a borrowed buffer ([`Communicator::start_recv`]). Dropping it
/// removes the receive from the engine (the buffer is never written after that); it
/// must be dropped or waited, never leaked (see [`Communicator::start_recv`]'s safety
/// contract).
pub struct PendingRecv<'a> {
    core: &'a CommCore,
    guard: OpGuard<'a>,
}

impl std::fmt::Debug for PendingRecv<'_> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("PendingRecv")
            .field("id", &self.guard.id)
            .finish()
    }
}

impl Communicator {
    /// Posts a receive into `buf` as [`Communicator::recv`] does, without waiting:
    /// [`PendingRecv::poll`] drives progress once and says whether it completed,
    /// [`PendingRecv::wait`] waits and gives the status.
    ///
    /// ```
    /// let world = spools::init().unwrap();
    /// world.send(&[5u8; 4], 0, 2).unwrap();
    /// let mut buf = [0u8; 4];
    /// // SAFETY: `p` is waited below (never leaked).
    /// let p = unsafe { world.start_recv(&mut buf, 0, 2) }.unwrap();
    /// assert!(p.poll().unwrap());
    /// assert_eq!(p.wait().unwrap().len, 4);
    /// assert_eq!(buf, [5; 4]);
    /// ```
    ///
    /// Calling it outside `unsafe` does not compile (the contract below is the caller's):
    ///
    /// ```compile_fail,E0133
    /// let world = spools::init().unwrap();
    /// let mut buf = [0u8; 4];
    /// let p = world.start_recv(&mut buf, 0, 2).unwrap();
    /// std::mem::forget(p);
    /// ```
    ///
    /// # Safety
    /// The returned [`PendingRecv`] must be dropped or waited (its `Drop` or
    /// [`PendingRecv::wait`] removes the receive from the engine), never leaked
    /// (`std::mem::forget`, a reference cycle, `ManuallyDrop`): leaking it ends the
    /// borrow of `buf` while the engine still holds the receive, which would later
    /// write a matching message into memory that may have been freed or reused.
    ///
    /// # Errors
    /// [`MsgError::BadRank`], [`MsgError::BadTag`].
    pub unsafe fn start_recv<'a>(
        &'a self,
        buf: &'a mut [u8],
        src: impl Into<Source>,
        tag: impl Into<Tag>,
    ) -> Result<PendingRecv<'a>, MsgError> {
        let guard = self
            .core
            .post_bytes(self.core.ctx, src.into(), tag.into(), buf)?;
        Ok(PendingRecv {
            core: &self.core,
            guard,
        })
    }
}

impl PendingRecv<'_> {
    /// Whether the receive completed, after one round of progress if it had not (never
    /// waits).
    ///
    /// # Errors
    /// Transport failures.
    pub fn poll(&self) -> Result<bool, MsgError> {
        if self.guard.is_complete() {
            return Ok(true);
        }
        self.core.engine.worker.progress()?;
        Ok(self.guard.is_complete())
    }

    /// Waits until the receive completes (at once if [`PendingRecv::poll`] said so).
    ///
    /// # Errors
    /// As [`Communicator::recv`].
    pub fn wait(self) -> Result<Status, MsgError> {
        self.core.finish_bytes(self.guard)
    }
}
