//! The session with the launcher's process-management interface ([`Pmi`]), whichever
//! interface it is.

use super::{PmiError, PmiKind};

/// This process's session with the launcher's process-management interface.
pub trait Pmi {
    /// Which interface.
    fn kind(&self) -> PmiKind;
    /// This process's rank, as the launcher knows it.
    fn rank(&self) -> u32;
    /// The job size, as the launcher knows it.
    fn size(&self) -> u32;
    /// Stores `value` under `key` for every rank of the job, visible after the next
    /// [`Pmi::fence`].
    ///
    /// # Errors
    /// [`PmiError`] when the launcher refuses.
    fn put(&mut self, key: &str, value: &str) -> Result<(), PmiError>;
    /// Commits what was put and waits until every rank of the job has reached its fence.
    ///
    /// # Errors
    /// [`PmiError`] when the launcher reports a failure (a timeout among them).
    fn fence(&mut self) -> Result<(), PmiError>;
    /// The value `rank` put under `key` before the fence.
    ///
    /// # Errors
    /// [`PmiError`] when there is none or the launcher fails.
    fn get(&mut self, rank: u32, key: &str) -> Result<String, PmiError>;
    /// Ends the session (the launcher then knows this process initialised and finalised
    /// its interface properly; the job goes on).
    ///
    /// # Errors
    /// [`PmiError`] when the launcher reports a failure.
    fn finalize(&mut self) -> Result<(), PmiError>;
}
