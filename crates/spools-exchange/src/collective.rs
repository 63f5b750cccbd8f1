//! Steps every collective I/O operation shares across its ranks: agreeing on the outcome of a local
//! step (and that every rank passed the same arguments), checking that a layout's units fit
//! the ranks, and a rank's share of a layout.

use crate::digest::Digest;
use crate::error::{Cause, ExchangeError, Side, Told};

/// The collective end of a step every rank of `comm` takes: every rank learns whether any
/// failed, and why. Ranks that succeeded learn the first failing rank's [`Cause`] (its
/// error's kind and message, told by that rank alone) as `remote(rank, cause)`; a rank
/// that failed keeps its own error. On success it costs one small allreduce.
///
/// The bindings (Python, C, the MPI ABI) call it for their own collective steps, so that
/// every rank maps one error to its class.
///
/// ```
/// use spools_exchange::{agree_on_outcome, ExchangeError, Told};
/// let world = spools::init()?;
/// let comm = world.communicator();
/// let local: Result<u32, ExchangeError> = Ok(7);
/// let v = agree_on_outcome(comm, local, Told::cause, |rank, cause| {
///     ExchangeError::Remote { rank, cause }
/// })?;
/// assert_eq!(v, 7);
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
///
/// A rank whose agreement itself fails (an interrupt, a dead peer) returns at once; on
/// a failure the others then wait in the broadcast of the cause as in any collective a
/// rank left: the job's watchdog ends a dead rank's job, and an interrupted collective
/// leaves its communicator unusable, as every interrupted collective does.
///
/// # Errors
/// This rank's own error (it wins even when the agreement fails too: a peer that failed
/// first may have ended the job already, and this rank's error is the cause it knows);
/// else `remote` naming the first failing rank and its cause; else the messaging error
/// of a failed agreement.
pub fn agree_on_outcome<T, E: From<spools_msg::MsgError>>(
    comm: &spools_msg::Communicator,
    local: Result<T, E>,
    cause: impl FnOnce(&E) -> Cause,
    remote: impl FnOnce(u32, Cause) -> E,
) -> Result<T, E> {
    let flag = [match &local {
        Ok(_) => u32::MAX,
        Err(_) => comm.rank(),
    }];
    let mut first = [0u32];
    let agreed = comm.allreduce(&flag, &mut first, &spools_msg::Op::Min);
    let first = match (local, agreed) {
        (Err(e), Err(_)) => return Err(e),
        (Ok(_), Err(e)) => return Err(e.into()),
        (Ok(v), Ok(())) if first[0] == u32::MAX => return Ok(v),
        (local, Ok(())) => (local, first[0]),
    };
    let (local, first) = first;
    // The first failing rank tells the others why.
    tell_cause(comm, local, first, cause, remote)
}

/// [`agree_on_outcome`] that also checks that every rank passed the same arguments to the
/// call: `digest` is this rank's [`Digest`] of them (its layouts, format, owners), or
/// `None` for a rank that takes no part in the comparison (a binding declined its part
/// before it had arguments to digest), and `what` names them in the error. In the same
/// one allreduce (of three words instead of one), the ranks learn the smallest and the
/// largest digest; only when they differ do they gather every digest to name the ranks
/// whose arguments differ from the first digesting rank's. Arguments that differ are the
/// error every rank reports, before any rank's own error: a rank that failed its checks
/// because it was given another layout fails for that reason alone.
///
/// ```
/// use spools_exchange::{agree_on_call, Digest, ExchangeError, Told};
/// let world = spools::init()?;
/// let comm = world.communicator();
/// let layout: spools_map::Layout = "f64[100,100] block,* on 1x1".parse()?;
/// let local: Result<(), ExchangeError> = Ok(());
/// let args = Some(Digest::of(&layout));
/// agree_on_call(comm, local, args, "layouts", Told::cause, |rank, cause| {
///     ExchangeError::Remote { rank, cause }
/// })?;
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
///
/// # Errors
/// [`ExchangeError::ArgumentsDiffer`] (converted into `E`) on every rank alike, naming the
/// same ranks, when the digests differ; else as [`agree_on_outcome`].
pub fn agree_on_call<T, E>(
    comm: &spools_msg::Communicator,
    local: Result<T, E>,
    digest: Option<Digest>,
    what: &'static str,
    cause: impl FnOnce(&E) -> Cause,
    remote: impl FnOnce(u32, Cause) -> E,
) -> Result<T, E>
where
    E: From<spools_msg::MsgError> + From<ExchangeError>,
{
    let flag = match &local {
        Ok(_) => u64::MAX,
        Err(_) => u64::from(comm.rank()),
    };
    // The minimum of the digest and of its complement: the smallest and largest digest
    // (a rank without one gives the largest word twice, which neither minimum takes).
    let [d, not_d] = digest.map_or([u64::MAX; 2], |d| [d.0, !d.0]);
    let mut got = [0u64; 3];
    let agreed = comm.allreduce(&[flag, d, not_d], &mut got, &spools_msg::Op::Min);
    let local = match (local, agreed) {
        (Err(e), Err(_)) => return Err(e),
        (Ok(_), Err(e)) => return Err(e.into()),
        (local, Ok(())) => local,
    };
    let none = got[1] == u64::MAX && got[2] == u64::MAX;
    if !none && got[1] != !got[2] {
        // Some rank passed other arguments: every rank learns which, from every digest.
        let mut all = vec![[0u64; 2]; comm.size() as usize];
        let mut flat = vec![0u64; 2 * all.len()];
        comm.allgather(&[d, not_d], &mut flat)?;
        for (a, f) in all.iter_mut().zip(flat.chunks_exact(2)) {
            a.copy_from_slice(f);
        }
        let (first, ranks) = differing_of(&all);
        return Err(ExchangeError::ArgumentsDiffer { ranks, first, what }.into());
    }
    if got[0] != u64::MAX {
        return tell_cause(comm, local, got[0] as u32, cause, remote);
    }
    local
}

/// The first digesting rank, and the ranks whose digest differs from its, over every
/// rank's `[digest, !digest]` words, where `[MAX, MAX]` is a rank without one (never
/// named).
pub fn differing_of(all: &[[u64; 2]]) -> (u32, Vec<u32>) {
    let digests: Vec<Option<u64>> = all
        .iter()
        .map(|&[d, n]| (d != u64::MAX || n != u64::MAX).then_some(d))
        .collect();
    let first = digests.iter().position(Option::is_some).unwrap_or(0);
    let theirs = digests.get(first).copied().flatten();
    let ranks = (0u32..)
        .zip(&digests)
        .filter(|&(_, d)| d.is_some() && *d != theirs)
        .map(|(r, _)| r)
        .collect();
    (first as u32, ranks)
}

/// Ranks as the errors name them: "1, 2 and 5", the first eight of a longer list and how
/// many there are.
pub fn rank_list(ranks: &[u32]) -> String {
    const SHOWN: usize = 8;
    let names: Vec<String> = ranks.iter().take(SHOWN).map(u32::to_string).collect();
    match (ranks.len(), names.split_last()) {
        (_, None) => String::from("(none)"),
        (1, Some((last, _))) => last.clone(),
        (n, Some(_)) if n > SHOWN => format!("{}, ... ({n} ranks)", names.join(", ")),
        (_, Some((last, rest))) => format!("{} and {last}", rest.join(", ")),
    }
}

/// The failing rank `first` tells the others its cause (`local` is this rank's outcome).
fn tell_cause<T, E: From<spools_msg::MsgError>>(
    comm: &spools_msg::Communicator,
    local: Result<T, E>,
    first: u32,
    cause: impl FnOnce(&E) -> Cause,
    remote: impl FnOnce(u32, Cause) -> E,
) -> Result<T, E> {
    let told = match &local {
        Err(e) if comm.rank() == first => cause(e).encode(),
        _ => Vec::new(),
    };
    let heard = comm.bcast_bytes(first, &told);
    match (local, heard) {
        (Err(e), _) => Err(e),
        (Ok(_), Ok(bytes)) => Err(remote(first, Cause::decode(&bytes))),
        (Ok(_), Err(e)) => Err(e.into()),
    }
}

/// [`agree_on_outcome`] for errors that tell their own kind and message ([`Told`]): the
/// I/O layer's.
///
/// # Errors
/// As [`agree_on_outcome`].
pub fn agree<T, E>(
    comm: &spools_msg::Communicator,
    local: Result<T, E>,
    remote: impl FnOnce(u32, Cause) -> E,
) -> Result<T, E>
where
    E: From<spools_msg::MsgError> + Told,
{
    agree_on_outcome(comm, local, Told::cause, remote)
}

/// Checks that `layout` has no more units than `ranks` (rank `r` holds unit `r`: a unit
/// beyond the ranks would never be sent or received).
///
/// # Errors
/// [`ExchangeError::TooManyUnits`].
pub fn fit_ranks(layout: &spools_map::Layout, ranks: u32, side: Side) -> Result<(), ExchangeError> {
    let units = layout.units();
    if units > u64::from(ranks) {
        return Err(ExchangeError::TooManyUnits { side, units, ranks });
    }
    Ok(())
}

/// Bytes of rank `rank`'s share of `layout` (rank `r` holds unit `r`; none beyond the
/// layout's units).
///
/// # Errors
/// The layout's, for a layout whose share cannot be computed.
pub fn rank_bytes(layout: &spools_map::Layout, rank: u32) -> Result<u64, spools_map::LayoutError> {
    if u64::from(rank) < layout.units() {
        layout.local_bytes(u64::from(rank))
    } else {
        Ok(0)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_ranks_that_differ_are_named_in_rank_order() {
        let d = |x: u64| [x, !x];
        assert_eq!(
            differing_of(&[d(7), d(7), d(8), d(7), d(9)]),
            (0, vec![2, 4])
        );
        let none = [u64::MAX; 2];
        assert_eq!(differing_of(&[none, d(5), d(6), none]), (1, vec![2]));
        assert!(differing_of(&[d(3), d(3), none]).1.is_empty());
        assert_eq!(rank_list(&[1]), "1");
        assert_eq!(rank_list(&[1, 2, 5]), "1, 2 and 5");
        assert_eq!(
            rank_list(&(1..=12).collect::<Vec<_>>()),
            "1, 2, 3, 4, 5, 6, 7, 8, ... (12 ranks)"
        );
    }
}
