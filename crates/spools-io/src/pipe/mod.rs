//! Parallel pipes: two programs launched separately, with M and N ranks and their own
//! distributions of the same dataset shape, connected by a name. The producer writes a
//! sequence of records (each a whole distributed dataset, an ADU); the consumer reads them
//! in order. Data goes straight from each producer rank to the consumer ranks that need
//! it, over one TCP connection per pair of ranks, following the plan from the producer's
//! layout to the consumer's; TCP's flow control is the back-pressure. Every frame carries
//! the record number and a CRC32C; a rank of either program that goes away is reported on
//! the other side as [`PipeError::PeerGone`], never a hang.
//!
//! With [`PipeName::Stdout`] (no Spools consumer: `| head`, `> out.bin`) the producer
//! writes each record's canonical byte stream to rank 0's standard output instead, and
//! with [`PipeName::Stdin`] a consumer reads such a stream; so the bytes are the same
//! either way. `spools run` chooses for you when two launchers are joined by a Unix pipe
//! (`SPOOLS_PIPE_OUT`, `SPOOLS_PIPE_IN`).

mod frame;
mod meet_auth;
mod name;
mod reader;
mod wait;
mod writer;

pub use frame::decode_any;
pub use meet_auth::{pipe_secret, SECRET_VAR};
pub use name::{meet_timeout, pipe_dir, pipe_dir_path, PipeName};
pub use reader::PipeReader;
pub use writer::PipeWriter;

use spools_map::{Layout, StripeLayout};
use spools_msg::Communicator;

use crate::error::PipeError;

/// The layout holding a whole record on rank 0 (for the byte-stream fallbacks).
fn on_rank0(total: u64) -> Result<Layout, PipeError> {
    Ok(Layout::Stripe(StripeLayout::new(
        total.max(1),
        1,
        Some(total.max(1)),
    )?))
}

/// Every rank learns whether any failed; this rank's own error wins.
fn agree_on_outcome<T>(comm: &Communicator, local: Result<T, PipeError>) -> Result<T, PipeError> {
    spools_exchange::collective::agree(comm, local, |rank, cause| PipeError::Remote { rank, cause })
}

/// The opening of a pipe's end: every rank's own checks of its arguments (`local`) and
/// that every rank passed the same name and layout, agreed on before the meeting, so that
/// no rank meets or connects alone. Returns the layout's size. The layout's units are
/// checked against the ranks here only for the byte-stream ends (`stdin`, `stdout`): a
/// Spools end checks both programs' layouts once they met (`check_both_units`), so
/// that the other program fails too instead of waiting for an end that never comes.
fn open_end(
    comm: &Communicator,
    name: &PipeName,
    layout: &Layout,
    side: crate::Side,
    local: Result<(), PipeError>,
) -> Result<u64, PipeError> {
    // A declined part has no name or layout to compare.
    let digest = match &local {
        Err(PipeError::Declined(_)) => None,
        _ => Some(spools_exchange::Digest::of(&(name, layout))),
    };
    let checked = local.and_then(|()| {
        let total = layout
            .total_bytes()
            .ok_or_else(|| PipeError::BadName("an unsized layout".into()))?;
        if matches!(name, PipeName::Stdin | PipeName::Stdout) {
            check_own_units(comm, layout, side)?;
        }
        Ok(total)
    });
    spools_exchange::agree_on_call(
        comm,
        checked,
        digest,
        "pipe names or layouts",
        spools_exchange::Told::cause,
        |rank, cause| PipeError::Remote { rank, cause },
    )
}

/// The opening of a pipe's end by a rank that declines its part with `cause` (see
/// [`PipeWriter::open_declined`](crate::pipe::PipeWriter::open_declined)): the first
/// agreement of [`open_end`], failed.
fn open_declined(comm: &Communicator, cause: crate::Cause, side: crate::Side) -> PipeError {
    let declined = PipeError::Declined(cause.clone());
    let layout = match on_rank0(1) {
        Ok(l) => l,
        Err(e) => return e,
    };
    match open_end(comm, &PipeName::Stdout, &layout, side, Err(declined)) {
        Err(e) => e,
        // Not reached: this rank's own error wins the agreement.
        Ok(_) => PipeError::Declined(cause),
    }
}

/// The first step of every record written or read: every rank of this program learns
/// whether any rank's buffer (or a binding's check of it) failed, or any rank's end is
/// stopped, before a byte of the record moves, so that no rank sends or takes part of a
/// record alone (which would leave the other program's ranks out of step) or waits in a
/// byte-stream end's exchange for a rank that left. One small allreduce per record.
fn agree_on_record(
    comm: &Communicator,
    layout: &Layout,
    len: usize,
    ready: Result<(), PipeError>,
) -> Result<(), PipeError> {
    let local = ready.and_then(|()| {
        let need = spools_exchange::collective::rank_bytes(layout, comm.rank())?;
        if (len as u64) < need {
            return Err(PipeError::BufferSize {
                need,
                got: len as u64,
            });
        }
        Ok(())
    });
    agree_on_outcome(comm, local)
}

/// Checks that this program's `layout` has no more units than its `comm` has ranks.
fn check_own_units(
    comm: &Communicator,
    layout: &Layout,
    side: crate::Side,
) -> Result<(), PipeError> {
    Ok(spools_exchange::collective::fit_ranks(
        layout,
        comm.size(),
        side,
    )?)
}

/// Checks, after the meeting, both programs' layouts against their rank counts, so that
/// both sides fail at once with the same diagnosis instead of moving partial records.
fn check_both_units(
    comm: &Communicator,
    layout: &Layout,
    mine: crate::Side,
    other: &Layout,
    other_ranks: u32,
) -> Result<(), PipeError> {
    check_own_units(comm, layout, mine)?;
    if other.units() > u64::from(other_ranks) {
        return Err(PipeError::PeerTooManyUnits {
            side: match mine {
                crate::Side::Source => "consumer",
                crate::Side::Destination => "producer",
            },
            layout: other.to_string(),
            units: other.units(),
            ranks: other_ranks,
        });
    }
    Ok(())
}
