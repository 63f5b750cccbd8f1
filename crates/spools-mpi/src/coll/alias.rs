//! Aliased arguments of a collective: a send buffer that is the receive buffer is
//! refused before any communication (`MPI_ERR_BUFFER`), on every rank where it counts.

use std::ffi::{c_int, c_void};

use crate::abi::*;
use crate::comm::comm;
use crate::env::error::MpiError;

fn in_place(p: *const c_void) -> bool {
    p as usize == MPI_IN_PLACE
}

/// `MPI_ERR_BUFFER` when a collective's send buffer `send` is its receive buffer `recv`:
/// MPI forbids aliased arguments (2.5.3; `MPI_IN_PLACE` is how a rank shares one
/// buffer), and a rank that went on would read what it overwrites. Checked on the
/// pointers, before any communication, only where the two surely overlap: the callers
/// pass the start of this rank's own block (of a gather's or allgather's receive, a
/// scatter's send) and say `nonempty` only when both sides have bytes there (for
/// alltoallv and alltoallw, as MPICH does, only when both sides share their counts,
/// displacements and types: a program may send from one part of a buffer and receive
/// into another). Only on an intracommunicator, and at the root when `root` is given.
pub(crate) fn unaliased(
    comm_h: MPI_Comm,
    send: *const c_void,
    recv: *const c_void,
    root: Option<c_int>,
    nonempty: bool,
    call: &'static str,
) -> Result<(), MpiError> {
    if !nonempty || send.is_null() || in_place(send) || send != recv {
        return Ok(());
    }
    let Ok(c) = comm(comm_h, call) else {
        return Ok(());
    };
    if c.inter.is_some() || root.is_some_and(|r| i64::from(r) != i64::from(c.comm.rank())) {
        return Ok(());
    }
    Err(MpiError::invalid(
        MPI_ERR_BUFFER,
        format!("{call}: the send and receive buffers are one (MPI_IN_PLACE is how to share one)"),
    ))
}

/// Where this rank's own block lies in an allgather's receive buffer `recv`: `displ`
/// elements of `t` in (`recv` itself when `t` is not a committed type, for the call to
/// report).
pub(crate) fn own_block(recv: *const c_void, t: MPI_Datatype, displ: i64) -> *const c_void {
    match crate::datatype::committed_ref(t, "a collective") {
        Ok(t) => {
            (recv as isize).wrapping_add(t.extent.wrapping_mul(displ as isize)) as *const c_void
        }
        Err(_) => recv,
    }
}
