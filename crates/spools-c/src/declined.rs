//! A rank whose own arguments of a collective call are wrong still takes part, only to
//! fail, telling the others why: the Rust call's `declined` option (files,
//! redistribution) or its `decline_*` method (streams). Every rank then fails with this
//! rank's status and message, through the call's own agreement (no exchange of its own).

use spools_io::{Cause, ErrorKind};

use crate::status::{spools_status_t as S, Failure};

/// What this rank tells the others of its own argument failure `f`: the kind that
/// `errmap.rs` maps back to `f`'s status, and `f`'s message.
pub(crate) fn cause_of(f: &Failure) -> Cause {
    let kind = match f.status {
        S::SPOOLS_ERR_INVALID_ARG => ErrorKind::BadArgument,
        S::SPOOLS_ERR_LAYOUT => ErrorKind::Mismatch,
        S::SPOOLS_ERR_NOT_FOUND => ErrorKind::NotFound,
        S::SPOOLS_ERR_IO => ErrorKind::Io,
        S::SPOOLS_ERR_DAMAGED => ErrorKind::Damaged,
        S::SPOOLS_ERR_UNSUPPORTED => ErrorKind::Unsupported,
        S::SPOOLS_ERR_UNAVAILABLE => ErrorKind::Unavailable,
        S::SPOOLS_ERR_PEER_GONE => ErrorKind::PeerGone,
        S::SPOOLS_ERR_TRANSPORT => ErrorKind::Transport,
        _ => ErrorKind::Remote,
    };
    Cause::new(kind, f.message.clone())
}

/// Takes this rank's part in a call it must fail (`take_part`, given the cause), and
/// returns its own failure `f` (what the call returned here is the same failure, or a
/// later one of the job's: `f` is the cause this rank knows).
pub(crate) fn decline<E>(f: Failure, take_part: impl FnOnce(Cause) -> E) -> Failure {
    let _ = take_part(cause_of(&f));
    f
}

/// The outcome of a collective call on this rank: `problem` is this rank's own argument
/// failure (it declined its part), `r` the call's result (the same failure on every rank).
pub(crate) fn settle<T, E>(problem: Option<Failure>, r: Result<T, E>) -> Result<T, Failure>
where
    Failure: From<E>,
{
    match (problem, r) {
        (Some(p), _) => Err(p),
        (None, r) => r.map_err(Failure::from),
    }
}

/// The layout a rank that declines its part passes when it has none of its own (a NULL
/// or destroyed layout handle): one byte on one unit. A declined part is never compared
/// with the others' (`spools_exchange::agree_on_call`), and nothing is sent, read or
/// written for it.
pub(crate) fn placeholder() -> Result<spools_map::Layout, Failure> {
    Ok(spools_map::Layout::Stripe(spools_map::StripeLayout::new(
        1,
        1,
        Some(1),
    )?))
}
