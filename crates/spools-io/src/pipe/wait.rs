//! How a pipe end waits: the bound of its sleeps, poll and socket timeouts, the process's
//! interrupt check it asks meanwhile, and the error of an end that stopped part-way.

use std::time::Duration;

use spools_msg::Communicator;

use crate::error::{PipeError, PipeStep};

/// How often, at least, a wait of a pipe end asks the process's interrupt check
/// ([`Communicator::check_interrupt`]): the bound of its sleeps, poll timeouts and socket
/// timeouts. A wait the check ends fails with [`PipeError::Msg`] holding the interruption
/// (`AmError::Interrupted`), as a messaging wait does.
pub(super) const CHECK_EVERY: Duration = Duration::from_millis(50);

/// The interrupt check a pipe end's waits ask (see [`CHECK_EVERY`]).
pub(super) type Check<'a> = &'a dyn Fn() -> Result<(), PipeError>;

/// The interrupt check of `comm`'s process, as a pipe error.
pub(super) fn interrupt_of(comm: &Communicator) -> impl Fn() -> Result<(), PipeError> + '_ {
    move || Ok(comm.check_interrupt()?)
}

/// Whether a socket call that failed so only waited: its timeout ran out (the sockets'
/// timeouts are [`CHECK_EVERY`]) or a signal interrupted it. The caller asks the interrupt
/// check and goes on.
pub(super) fn only_waited(e: &std::io::Error) -> bool {
    matches!(
        e.kind(),
        std::io::ErrorKind::WouldBlock
            | std::io::ErrorKind::TimedOut
            | std::io::ErrorKind::Interrupted
    )
}

/// The error of every call on a pipe end after one failed part-way through `record`.
pub(super) fn stopped(end: &str, step: PipeStep, record: u64) -> PipeError {
    PipeError::io(
        step,
        std::io::Error::new(
            std::io::ErrorKind::NotConnected,
            format!(
                "this pipe {end} stopped in record {record}: an earlier call failed there \
                 or was interrupted, and it moves no more records"
            ),
        ),
    )
}

/// [`CHECK_EVERY`] as a poll timeout.
pub(super) const POLL_TIMEOUT: rustix::event::Timespec = rustix::event::Timespec {
    tv_sec: 0,
    tv_nsec: 50_000_000,
};
