//! One status on every rank for a failed collective I/O call (redistribution, files,
//! opening a pipe or a stream). The Rust call fails on every rank, but only the rank at
//! fault knows why: the others learn "rank R failed its part". The ranks then exchange
//! their failures, and each rank that only heard of one returns the faulty rank's status
//! with its message, prefixed by its rank, so that every rank takes the same branch.

use spools::Communicator;

use crate::status::{spools_status_t as S, Failure};

fn encode(f: &Failure) -> Vec<u8> {
    let mut b = (f.status as u32).to_le_bytes().to_vec();
    b.extend_from_slice(f.message.as_bytes());
    b
}

fn decode(b: &[u8], rank: u32) -> Option<Failure> {
    let code = u32::from_le_bytes(b.get(..4)?.try_into().ok()?);
    let status = S::from_code(code)?;
    Some(Failure::new(
        status,
        format!(
            "rank {rank} failed its part of the operation: {}",
            String::from_utf8_lossy(&b[4..])
        ),
    ))
}

/// After a collective call failed on every rank: `mine` is this rank's failure and
/// `remote` the rank its error names as the faulty one (`None` when this rank's own
/// error says why). Returns `mine`, or the faulty rank's status and message. A dead peer
/// (or an interrupt, or a finalised runtime) ends the exchange: then `mine` is returned.
pub(crate) fn agree(comm: &Communicator, mine: Failure, remote: Option<u32>) -> Failure {
    if matches!(
        mine.status,
        S::SPOOLS_ERR_PEER_GONE | S::SPOOLS_ERR_FINALIZED | S::SPOOLS_ERR_INTERRUPTED
    ) {
        return mine;
    }
    let data = if remote.is_some() {
        Vec::new()
    } else {
        encode(&mine)
    };
    let Ok(all) = comm.allgather_bytes(&data) else {
        return mine;
    };
    let Some(r) = remote else {
        return mine;
    };
    // The named rank's failure, else the first rank that knew why.
    all.get(r as usize)
        .filter(|b| !b.is_empty())
        .map(|b| (r, b))
        .or_else(|| {
            all.iter()
                .enumerate()
                .find(|(_, b)| !b.is_empty())
                .map(|(i, b)| (i as u32, b))
        })
        .and_then(|(r, b)| decode(b, r))
        .unwrap_or(mine)
}

/// The outcome of a collective call on this rank: `problem` is this rank's own argument
/// error (it took part with nothing, so that the call failed on every rank), `r` the
/// call's result, `remote` the faulty rank its error names.
pub(crate) fn settle<E>(
    comm: &Communicator,
    problem: Option<Failure>,
    r: Result<(), E>,
    remote: impl FnOnce(&E) -> Option<u32>,
    agreed: impl FnOnce(&E) -> bool,
) -> Result<(), Failure>
where
    Failure: From<E>,
{
    match (problem, r) {
        (Some(p), Err(_)) => Err(agree(comm, p, None)),
        (Some(p), Ok(())) => Err(p),
        (None, Err(e)) if agreed(&e) => {
            let who = remote(&e);
            Err(agree(comm, e.into(), who))
        }
        (None, Err(e)) => Err(e.into()),
        (None, Ok(())) => Ok(()),
    }
}
