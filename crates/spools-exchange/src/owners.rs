//! Which rank holds each unit of a layout ([`Owners`]), and the check of the buffers a
//! rank gives against it.

use spools_map::Layout;

use crate::error::{ExchangeError, Side};

/// Which rank holds each unit of a layout.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub enum Owners {
    /// Unit `u` is held by rank `u`.
    Identity,
    /// Unit `u` is held by rank `list[u]`.
    List(Vec<u32>),
}

impl Owners {
    pub(super) fn of(&self, u: u64) -> u32 {
        match self {
            Owners::Identity => u as u32,
            Owners::List(l) => l.get(u as usize).copied().unwrap_or(u32::MAX),
        }
    }

    pub(super) fn check(
        &self,
        side: Side,
        layout: &Layout,
        size: u32,
    ) -> Result<(), ExchangeError> {
        let units = layout.units();
        match self {
            Owners::Identity => crate::collective::fit_ranks(layout, size, side),
            Owners::List(l) if l.len() as u64 != units => Err(ExchangeError::Owners {
                side,
                expected: units,
                got: l.len(),
            }),
            Owners::List(l) => match l.iter().position(|&r| r >= size) {
                Some(u) => Err(ExchangeError::OwnerOutOfRange {
                    side,
                    unit: u as u64,
                    rank: l[u],
                    size,
                }),
                None => Ok(()),
            },
        }
    }
}

/// The index of `unit`'s buffer in `lens`.
pub(super) fn position(lens: &[(u64, usize)], unit: u64) -> usize {
    lens.iter().position(|&(u, _)| u == unit).unwrap_or(0)
}

/// Checks the buffers (unit, length) this rank gives on one side against the owners.
pub(super) fn check_buffers(
    side: Side,
    layout: &Layout,
    owners: &Owners,
    me: u32,
    bufs: &[(u64, usize)],
) -> Result<(), ExchangeError> {
    for (i, &(u, len)) in bufs.iter().enumerate() {
        if u >= layout.units() || owners.of(u) != me {
            return Err(ExchangeError::Buffers {
                side,
                unit: u,
                what: "this rank does not own the unit",
            });
        }
        if bufs[..i].iter().any(|&(v, _)| v == u) {
            return Err(ExchangeError::Buffers {
                side,
                unit: u,
                what: "two buffers given for the unit",
            });
        }
        let need = layout.local_bytes(u)?;
        if (len as u64) < need {
            return Err(ExchangeError::BufferSize {
                side,
                unit: u,
                need,
                got: len as u64,
            });
        }
    }
    for u in 0..layout.units() {
        if owners.of(u) == me && layout.local_bytes(u)? > 0 && !bufs.iter().any(|&(v, _)| v == u) {
            return Err(ExchangeError::Buffers {
                side,
                unit: u,
                what: "this rank owns the unit but gave no buffer",
            });
        }
    }
    Ok(())
}
