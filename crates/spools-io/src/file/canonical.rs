//! Canonical parallel files: one ordinary file holding the canonical byte stream,
//! optionally behind a `.npy` header.

use std::path::Path;

use spools_map::{Layout, Plan, StripeLayout};
use spools_msg::Communicator;

use super::{
    agree, check_share, decide, integrity, npy, sys, FileStats, ReadOptions, WriteOptions,
};
use crate::error::FileError;
use crate::file::manifest::looks_like_manifest;
use crate::redistribute::redistribute_plan;
use crate::share;

/// File domains of aggregators are multiples of this many bytes (file-system friendly).
const DOMAIN_ALIGN: u64 = 1 << 20;

/// What a parallel file's path holds, as found by rank 0.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(super) enum Kind {
    /// A striped file's manifest, with its text.
    Manifest(Vec<u8>),
    /// A plain file: the stream starts at `offset` and holds `bytes`.
    Plain { offset: u64, bytes: u64 },
}

impl Kind {
    pub(super) fn encode(&self) -> Vec<u8> {
        match self {
            Kind::Manifest(t) => {
                let mut v = vec![b'M'];
                v.extend_from_slice(t);
                v
            }
            Kind::Plain { offset, bytes } => {
                let mut v = vec![b'P'];
                v.extend_from_slice(&offset.to_le_bytes());
                v.extend_from_slice(&bytes.to_le_bytes());
                v
            }
        }
    }

    pub(super) fn decode(b: &[u8]) -> Option<Kind> {
        match b.split_first()? {
            (b'M', t) => Some(Kind::Manifest(t.to_vec())),
            (b'P', t) if t.len() == 16 => Some(Kind::Plain {
                offset: u64::from_le_bytes(t[..8].try_into().ok()?),
                bytes: u64::from_le_bytes(t[8..].try_into().ok()?),
            }),
            _ => None,
        }
    }
}

/// Looks at a file: a manifest, a `.npy` file or raw bytes.
pub(super) fn inspect(path: &Path) -> Result<Kind, FileError> {
    let f = sys::open_read(path)?;
    let len = f
        .metadata()
        .map_err(|e| FileError::io("stat", path, e))?
        .len();
    let head = sys::read_upto(&f, path, 64 * 1024, 0)?;
    if head.starts_with(npy::MAGIC) {
        let (offset, bytes) = npy::parse(&head).map_err(|what| FileError::Format {
            path: path.to_path_buf(),
            what,
        })?;
        if offset + bytes != len {
            return Err(FileError::Format {
                path: path.to_path_buf(),
                what: format!(
                    ".npy header describes {bytes} bytes but {} follow it",
                    len.saturating_sub(offset)
                ),
            });
        }
        return Ok(Kind::Plain { offset, bytes });
    }
    if looks_like_manifest(&head) && len < 256 << 20 {
        let text = std::fs::read(path).map_err(|e| FileError::io("read", path, e))?;
        return Ok(Kind::Manifest(text));
    }
    Ok(Kind::Plain {
        offset: 0,
        bytes: len,
    })
}

/// The I/O distribution of a `total`-byte stream over at most `ranks` aggregators:
/// contiguous domains, multiples of `align` bytes. Returns the layout, the domain size and
/// the number of aggregators.
pub(super) fn io_layout(
    total: u64,
    align: u64,
    ranks: u32,
) -> Result<(Layout, u64, u32), FileError> {
    let per = total.div_ceil(u64::from(ranks.max(1)));
    let domain = per.div_ceil(align).max(1) * align;
    let count = total.div_ceil(domain).max(1);
    let l = Layout::Stripe(StripeLayout::new(domain, count, Some(total.max(1)))?);
    Ok((l, domain, count as u32))
}

pub(super) fn write(
    comm: &Communicator,
    path: &Path,
    data: &[u8],
    layout: &Layout,
    opts: &WriteOptions,
    with_header: bool,
) -> Result<FileStats, FileError> {
    let total = layout.total_bytes().unwrap_or(0);
    agree(comm, path, check_share(comm, layout, data.len()))?;
    let header = if with_header {
        npy::header(layout, total)
    } else {
        Vec::new()
    };
    let off = header.len() as u64;
    let prepared = if comm.rank() == 0 {
        sys::set_len(path, off + total).and_then(|f| {
            if header.is_empty() {
                Ok(())
            } else {
                sys::write_at(&f, path, &header, 0).and_then(|()| {
                    if opts.sync {
                        sys::sync(&f, path)
                    } else {
                        Ok(())
                    }
                })
            }
        })
    } else {
        Ok(())
    };
    agree(comm, path, prepared)?;
    let reshuffle = decide(comm, layout, opts.reshuffle)?;
    let me = comm.rank();
    let mut stats = FileStats {
        bytes: total,
        reshuffled: reshuffle,
        ..FileStats::default()
    };
    let res = if reshuffle {
        let (io, domain, aggs) = io_layout(total, DOMAIN_ALIGN, comm.size())?;
        stats.aggregators = aggs;
        let plan = Plan::new(layout, &io)?;
        let mine = u64::from(me) < io.units();
        let mut buf = vec![0u8; share(&io, me)? as usize];
        stats.exchange =
            redistribute_plan(comm, &plan, data, &mut buf, &integrity(opts.integrity))?;
        if mine && !buf.is_empty() {
            sys::open_write(path).and_then(|f| {
                sys::write_at(&f, path, &buf, off + u64::from(me) * domain)?;
                if opts.sync {
                    sys::sync(&f, path)?;
                }
                Ok(())
            })
        } else {
            Ok(())
        }
    } else {
        stats.aggregators = layout.units().min(u64::from(comm.size())) as u32;
        write_own(path, layout, me, data, off, opts.sync)
    };
    agree(comm, path, res)?;
    Ok(stats)
}

/// Each rank writes its own runs where they belong.
fn write_own(
    path: &Path,
    layout: &Layout,
    me: u32,
    data: &[u8],
    off: u64,
    sync: bool,
) -> Result<(), FileError> {
    if u64::from(me) >= layout.units() || layout.local_bytes(u64::from(me))? == 0 {
        return Ok(());
    }
    let f = sys::open_write(path)?;
    for e in layout.extents(u64::from(me))? {
        let part = &data[e.local as usize..(e.local + e.len) as usize];
        sys::write_at(&f, path, part, off + e.global)?;
    }
    if sync {
        sys::sync(&f, path)?;
    }
    Ok(())
}

/// Each rank reads its own runs.
fn read_own(
    path: &Path,
    layout: &Layout,
    me: u32,
    data: &mut [u8],
    off: u64,
) -> Result<(), FileError> {
    if u64::from(me) >= layout.units() || layout.local_bytes(u64::from(me))? == 0 {
        return Ok(());
    }
    let f = sys::open_read(path)?;
    for e in layout.extents(u64::from(me))? {
        let part = &mut data[e.local as usize..(e.local + e.len) as usize];
        sys::read_at(&f, path, part, off + e.global)?;
    }
    Ok(())
}

pub(super) fn read(
    comm: &Communicator,
    path: &Path,
    data: &mut [u8],
    layout: &Layout,
    opts: &ReadOptions,
    offset: u64,
    bytes: u64,
) -> Result<FileStats, FileError> {
    let total = layout.total_bytes().unwrap_or(0);
    if bytes != total {
        return Err(FileError::SizeMismatch {
            path: path.to_path_buf(),
            file: bytes,
            layout: total,
        });
    }
    agree(comm, path, check_share(comm, layout, data.len()))?;
    let reshuffle = decide(comm, layout, opts.reshuffle)?;
    let me = comm.rank();
    let mut stats = FileStats {
        bytes: total,
        reshuffled: reshuffle,
        ..FileStats::default()
    };
    let res = if reshuffle {
        let (io, domain, aggs) = io_layout(total, DOMAIN_ALIGN, comm.size())?;
        stats.aggregators = aggs;
        let plan = Plan::new(&io, layout)?;
        let mine = u64::from(me) < io.units();
        let mut buf = vec![0u8; share(&io, me)? as usize];
        // A failed read still takes part in the exchange (with zeros), so that no rank
        // waits for it; the agreement below then fails the call everywhere.
        let got = if mine && !buf.is_empty() {
            sys::open_read(path)
                .and_then(|f| sys::read_at(&f, path, &mut buf, offset + u64::from(me) * domain))
        } else {
            Ok(())
        };
        stats.exchange = redistribute_plan(comm, &plan, &buf, data, &integrity(opts.integrity))?;
        got
    } else {
        stats.aggregators = layout.units().min(u64::from(comm.size())) as u32;
        read_own(path, layout, me, data, offset)
    };
    agree(comm, path, res)?;
    Ok(stats)
}
