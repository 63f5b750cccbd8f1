//! Gather, scatter, allgather and alltoall, with variable counts.

use std::borrow::Cow;

use super::args::{
    block, blocks_mut, byte_counts, bytes, bytes_mut, check, check_alltoallv, check_rooted, displs,
    with_even_counts, EVEN_SPLIT, ONE_COUNT_PER_RANK, RECV_AS_SEND, ROOT_HOLDS_ALL,
};
use super::group::{exchange_during, finish_exact, recv_any_poll, send, send_all, Group, Poisoned};
use super::ring::ring_allgather;
use crate::comm_core::CommCore;
use crate::communicator::Communicator;
use crate::element::Element;
use crate::error::MsgError;
use crate::op_guard::OpGuard;
use crate::status::{Source, Tag};

/// Alltoall blocks up to this size are all posted at once.
const ALL_AT_ONCE_MAX: usize = 256;

/// Direct gather to member `root`: the root posts every receive, then copies its own.
pub(crate) fn gatherv_in<T: Element>(
    c: &CommCore,
    g: &Group,
    root: usize,
    tag: u32,
    send_buf: &[T],
    counts: &[usize],
    out: &mut [T],
) -> Result<(), MsgError> {
    if g.me != root {
        return send(c, g, root, tag, bytes(send_buf));
    }
    let mut blocks = blocks_mut(out, counts);
    let mut guards = Vec::with_capacity(g.n());
    let mut want = Vec::with_capacity(g.n());
    for (i, b) in blocks.iter_mut().enumerate() {
        if i == root {
            b.copy_from_slice(send_buf);
            continue;
        }
        want.push((std::mem::size_of_val(*b), g.members[i]));
        let from = Source::Rank(g.members[i]);
        let mut guard = c.post_bytes(c.coll_ctx(), from, Tag::Is(tag as i32), bytes_mut(b))?;
        // The root waits for one member while the others' messages (rendezvous requests
        // among them) come in: every poll a whole progress round, not mostly that
        // member's messages.
        guard.source = None;
        guards.push(guard);
    }
    for (guard, (want, from)) in guards.into_iter().zip(want) {
        // Watching the segment, where this rank took the messages but others may not.
        finish_exact(c, guard, (tag, from), want, "gather")?;
    }
    Ok(())
}

/// Direct scatter from member `root`.
pub(crate) fn scatterv_in<T: Element>(
    c: &CommCore,
    g: &Group,
    root: usize,
    tag: u32,
    send_buf: &[T],
    counts: &[usize],
    out: &mut [T],
) -> Result<(), MsgError> {
    if g.me != root {
        return recv_any_poll(c, g, root, tag, bytes_mut(out));
    }
    let d = displs(counts);
    let block = |i: usize| &send_buf[d[i]..d[i] + counts[i]];
    out.copy_from_slice(block(root));
    let sends: Vec<(usize, &[u8])> = (0..g.n())
        .filter(|&i| i != root)
        .map(|i| (i, bytes(block(i))))
        .collect();
    send_all(c, g, tag, &sends)
}

/// Allgathers of more than two members, up to this many, whose blocks are all at most
/// [`ALL_AT_ONCE_MAX`] bytes, go all at once.
const ALL_AT_ONCE_MEMBERS: usize = 16;

/// Allgather through the messages: `out` receives every member's block; this member's
/// is `own`. Small blocks among up to [`ALL_AT_ONCE_MEMBERS`] members go all at once
/// (one step: every member sends its block to every other), where a ring takes `n - 1`
/// steps one after the other (a 96-byte allgather of 4 ranks: three message latencies,
/// each a context switch where the ranks share cores); the others round a ring (sent
/// from `own`, and copied into place meanwhile). Every member takes the same path: the
/// counts are the same on every member.
pub(crate) fn allgatherv_in<T: Element>(
    c: &CommCore,
    g: &Group,
    tag: u32,
    (out, counts): (&mut [T], &[usize]),
    own: &[T],
) -> Result<(), MsgError> {
    let size = std::mem::size_of::<T>();
    let largest = counts.iter().copied().max().unwrap_or(0) * size;
    if (3..=ALL_AT_ONCE_MEMBERS).contains(&g.n()) && largest <= ALL_AT_ONCE_MAX {
        return allgather_at_once(c, g, tag, (out, counts), own);
    }
    let mut poisoned = Poisoned::default();
    ring_allgather(c, g, tag, (out, counts, Some(own)), &mut poisoned)?;
    poisoned.end()
}

/// [`allgatherv_in`] in one step: every member's receive posted, this member's block
/// sent to every other, then every receive waited for. Without allocating: the
/// receives are held on the stack (at most [`ALL_AT_ONCE_MEMBERS`] members).
fn allgather_at_once<T: Element>(
    c: &CommCore,
    g: &Group,
    tag: u32,
    (out, counts): (&mut [T], &[usize]),
    own: &[T],
) -> Result<(), MsgError> {
    let (n, me) = (g.n(), g.me);
    let size = std::mem::size_of::<T>();
    let mut posted: [Option<(OpGuard<'_>, usize, u32)>; ALL_AT_ONCE_MEMBERS] =
        std::array::from_fn(|_| None);
    let mut rest: &mut [T] = out;
    for (i, &count) in counts.iter().enumerate().take(n) {
        let (b, r) = std::mem::take(&mut rest).split_at_mut(count);
        rest = r;
        if i == me {
            b.copy_from_slice(own);
            continue;
        }
        let from = g.members[i];
        let guard = c.post_bytes(
            c.coll_ctx(),
            Source::Rank(from),
            Tag::Is(tag as i32),
            bytes_mut(b),
        )?;
        posted[i] = Some((guard, count * size, from));
    }
    for s in 1..n {
        send(c, g, (me + s) % n, tag, bytes(own))?;
    }
    for (guard, want, from) in posted.into_iter().flatten() {
        finish_exact(c, guard, (tag, from), want, "allgather")?;
    }
    Ok(())
}

/// Alltoall with per-pair counts: small blocks all at once, larger by pairwise exchange
/// (step s sends to me+s and receives from me-s).
#[allow(clippy::too_many_arguments)]
pub(crate) fn alltoallv_in<T: Element>(
    c: &CommCore,
    g: &Group,
    tag: u32,
    send_buf: &[T],
    send_counts: &[usize],
    out: &mut [T],
    recv_counts: &[usize],
) -> Result<(), MsgError> {
    let n = g.n();
    let me = g.me;
    let sd = displs(send_counts);
    let largest = send_counts
        .iter()
        .chain(recv_counts)
        .copied()
        .max()
        .unwrap_or(0)
        * std::mem::size_of::<T>();
    let mut blocks = blocks_mut(out, recv_counts);
    let own = &send_buf[sd[me]..sd[me] + send_counts[me]];
    if largest <= ALL_AT_ONCE_MAX || n < 2 {
        blocks[me].copy_from_slice(own);
    }
    if largest <= ALL_AT_ONCE_MAX {
        let mut guards = Vec::with_capacity(n);
        for (i, b) in blocks.iter_mut().enumerate() {
            if i != me {
                let from = Source::Rank(g.members[i]);
                guards.push(c.post_bytes(c.coll_ctx(), from, Tag::Is(tag as i32), bytes_mut(b))?);
            }
        }
        for s in 1..n {
            let to = (me + s) % n;
            send(
                c,
                g,
                to,
                tag,
                bytes(&send_buf[sd[to]..sd[to] + send_counts[to]]),
            )?;
        }
        let want: Vec<(usize, u32)> = (0..n)
            .filter(|&i| i != me)
            .map(|i| (recv_counts[i] * std::mem::size_of::<T>(), g.members[i]))
            .collect();
        for (guard, (want, from)) in guards.into_iter().zip(want) {
            finish_exact(c, guard, (tag, from), want, "alltoallv")?;
        }
        return Ok(());
    }
    let mut poisoned = Poisoned::default();
    // This rank's own block goes into place during the first exchange.
    let mut own_dst = Some(std::mem::take(&mut blocks[me]));
    for s in 1..n {
        let to = (me + s) % n;
        let from = (me + n - s) % n;
        let dst = own_dst.take();
        let r = exchange_during(
            c,
            g,
            (to, from),
            tag,
            (
                poisoned.send(bytes(&send_buf[sd[to]..sd[to] + send_counts[to]])),
                bytes_mut(blocks[from]),
            ),
            || {
                if let Some(d) = dst {
                    d.copy_from_slice(own);
                }
            },
        );
        poisoned.step(r)?;
    }
    poisoned.end()
}

impl Communicator {
    /// Collects every rank's `send` (all of one length) at rank `root`, in rank order, in
    /// `recv` (`size × send.len()` elements at the root; ignored elsewhere).
    ///
    /// ```
    /// let world = spools::init().unwrap();
    /// let (me, n) = (world.rank(), world.size());
    /// let root = n - 1;
    /// // Two elements per rank; the root's buffer holds them in rank order.
    /// let mut all = vec![0u32; if me == root { 2 * n as usize } else { 0 }];
    /// world.gather(&[10 * me + 1, 10 * me + 2], &mut all, root).unwrap();
    /// if me == root {
    ///     let want: Vec<u32> = (0..n).flat_map(|r| [10 * r + 1, 10 * r + 2]).collect();
    ///     assert_eq!(all, want);
    /// }
    /// ```
    ///
    /// # Errors
    /// [`MsgError::BadBuffer`] for a root `recv` of the wrong length,
    /// [`MsgError::Mismatch`] if ranks send different lengths, [`MsgError::BadRank`].
    pub fn gather<T: Element>(
        &self,
        send: &[T],
        recv: &mut [T],
        root: u32,
    ) -> Result<(), MsgError> {
        self.collective(|tag| {
            self.core.job_rank(root)?;
            if self.core.rank == root {
                let whole = send.len().saturating_mul(self.size() as usize);
                check("gather", ROOT_HOLDS_ALL, recv.len(), whole)?;
            }
            // Every rank's part has one length (the call's contract): every rank takes the
            // same path. (Not so for `gatherv`: a rank knows its own count only.)
            let (sb, rb) = (bytes(send), bytes_mut(recv));
            if super::sm::gather(&self.core, root as usize, tag, sb, rb)? {
                return Ok(());
            }
            let counts = vec![send.len(); self.size() as usize];
            let g = Group::all(&self.core);
            gatherv_in(&self.core, &g, root as usize, tag, send, &counts, recv)
        })
    }

    /// Like [`Communicator::gather`] with `counts[i]` elements from rank i, stored one
    /// after the other.
    ///
    /// # Errors
    /// As [`Communicator::gather`].
    pub fn gatherv<T: Element>(
        &self,
        send: &[T],
        recv: &mut [T],
        counts: &[usize],
        root: u32,
    ) -> Result<(), MsgError> {
        self.collective(|tag| {
            self.core.job_rank(root)?;
            check_rooted("gatherv", &self.core, counts, send.len(), recv.len(), root)?;
            // Every rank takes the segment whatever its count; the posts say which parts
            // come by messages.
            let at_root = if self.core.rank == root {
                byte_counts::<T>(counts)
            } else {
                Cow::Borrowed(&[][..])
            };
            let (sb, rb) = (bytes(send), bytes_mut(recv));
            if super::sm::gatherv(&self.core, root as usize, tag, sb, (rb, &at_root))? {
                return Ok(());
            }
            gatherv_in(
                &self.core,
                &Group::all(&self.core),
                root as usize,
                tag,
                send,
                counts,
                recv,
            )
        })
    }

    /// Sends block i of rank `root`'s `send` (`size × recv.len()` elements there) to rank
    /// i's `recv`.
    ///
    /// # Errors
    /// [`MsgError::BadBuffer`] for a root `send` of the wrong length, [`MsgError::BadRank`].
    pub fn scatter<T: Element>(
        &self,
        send: &[T],
        recv: &mut [T],
        root: u32,
    ) -> Result<(), MsgError> {
        self.collective(|tag| {
            self.core.job_rank(root)?;
            with_even_counts(self.size() as usize, recv.len(), |counts| {
                check_rooted("scatter", &self.core, counts, recv.len(), send.len(), root)?;
                // Every rank's part has one length (the call's contract): every rank
                // takes the same path.
                let (sb, rb) = (bytes(send), bytes_mut(recv));
                if super::sm::scatter(&self.core, root as usize, tag, sb, rb)? {
                    return Ok(());
                }
                let g = Group::all(&self.core);
                scatterv_in(&self.core, &g, root as usize, tag, send, counts, recv)
            })
        })
    }

    /// Like [`Communicator::scatter`] with `counts[i]` elements for rank i, taken one
    /// after the other.
    ///
    /// # Errors
    /// As [`Communicator::scatter`].
    pub fn scatterv<T: Element>(
        &self,
        send: &[T],
        counts: &[usize],
        recv: &mut [T],
        root: u32,
    ) -> Result<(), MsgError> {
        self.collective(|tag| {
            self.core.job_rank(root)?;
            check_rooted("scatterv", &self.core, counts, recv.len(), send.len(), root)?;
            // Every rank takes the segment whatever its count; the root's publication
            // says where each block is, or that they come by messages.
            let at_root = if self.core.rank == root {
                byte_counts::<T>(counts)
            } else {
                Cow::Borrowed(&[][..])
            };
            let (sb, rb) = (bytes(send), bytes_mut(recv));
            if super::sm::scatterv(&self.core, root as usize, tag, (sb, &at_root), rb)? {
                return Ok(());
            }
            scatterv_in(
                &self.core,
                &Group::all(&self.core),
                root as usize,
                tag,
                send,
                counts,
                recv,
            )
        })
    }

    /// Gives every rank every rank's `send`, in rank order, in `recv` (`size × send.len()`).
    ///
    /// ```
    /// let world = spools::init().unwrap();
    /// let (me, n) = (u64::from(world.rank()), u64::from(world.size()));
    /// let mut all = vec![0u64; 2 * n as usize];
    /// world.allgather(&[me, me * me + 1], &mut all).unwrap();
    /// let want: Vec<u64> = (0..n).flat_map(|r| [r, r * r + 1]).collect();
    /// assert_eq!(all, want);
    /// ```
    ///
    /// # Errors
    /// [`MsgError::BadBuffer`] for a `recv` of the wrong length, a dead rank.
    pub fn allgather<T: Element>(&self, send: &[T], recv: &mut [T]) -> Result<(), MsgError> {
        with_even_counts(self.size() as usize, send.len(), |counts| {
            self.allgatherv(send, recv, counts)
        })
    }

    /// Like [`Communicator::allgather`] with `counts[i]` elements from rank i.
    ///
    /// # Errors
    /// As [`Communicator::allgather`].
    pub fn allgatherv<T: Element>(
        &self,
        send: &[T],
        recv: &mut [T],
        counts: &[usize],
    ) -> Result<(), MsgError> {
        self.collective(|tag| {
            let n = self.size() as usize;
            let me = self.rank() as usize;
            let total: usize = counts.iter().sum();
            check("allgatherv", ONE_COUNT_PER_RANK, counts.len(), n)?;
            check(
                "allgatherv",
                "send must hold this rank's count",
                send.len(),
                counts[me],
            )?;
            check(
                "allgatherv",
                "recv must hold the sum of the counts",
                recv.len(),
                total,
            )?;
            let size = std::mem::size_of::<T>();
            if super::sm::allgatherv(&self.core, tag, bytes(send), bytes_mut(recv), counts, size)? {
                recv[block(counts, me)].copy_from_slice(send);
                return Ok(());
            }
            // The ring copies this rank's block into place during its first step.
            allgatherv_in(
                &self.core,
                &Group::all(&self.core),
                tag,
                (recv, counts),
                send,
            )
        })
    }

    /// Rank i sends block j of its `send` to rank j, which stores it as block i of its
    /// `recv`; blocks are `send.len() / size` elements.
    ///
    /// ```
    /// let world = spools::init().unwrap();
    /// let (me, n) = (world.rank(), world.size());
    /// // Block j (two elements) of rank i is [1000 i + j, 1]: for rank j from rank i.
    /// let send: Vec<u32> = (0..n).flat_map(|j| [1000 * me + j, 1]).collect();
    /// let mut recv = vec![0u32; send.len()];
    /// world.alltoall(&send, &mut recv).unwrap();
    /// let want: Vec<u32> = (0..n).flat_map(|i| [1000 * i + me, 1]).collect();
    /// assert_eq!(recv, want);
    /// ```
    ///
    /// # Errors
    /// [`MsgError::BadBuffer`] if the lengths are not equal multiples of the size.
    pub fn alltoall<T: Element>(&self, send: &[T], recv: &mut [T]) -> Result<(), MsgError> {
        let n = self.size() as usize;
        check("alltoall", EVEN_SPLIT, send.len() % n, 0)?;
        check("alltoall", RECV_AS_SEND, recv.len(), send.len())?;
        // Every rank's blocks have one length (the call's contract): then every rank
        // takes the same path. (A rank's own `alltoallv` counts, even all equal, say
        // nothing of the other ranks' blocks to each other.)
        with_even_counts(n, send.len() / n, |counts| {
            self.alltoallv_on(send, counts, recv, counts, true)
        })
    }

    /// Like [`Communicator::alltoall`] with `send_counts[j]` elements for rank j and
    /// `recv_counts[i]` from rank i, blocks one after the other.
    ///
    /// # Errors
    /// [`MsgError::BadBuffer`] if the lengths do not fit the counts,
    /// [`MsgError::Mismatch`] if a sender's count differs from the receiver's.
    pub fn alltoallv<T: Element>(
        &self,
        send: &[T],
        send_counts: &[usize],
        recv: &mut [T],
        recv_counts: &[usize],
    ) -> Result<(), MsgError> {
        self.alltoallv_on(send, send_counts, recv, recv_counts, false)
    }

    /// [`Communicator::alltoallv`]; `uniform`: an `alltoall`, whose blocks have one
    /// length on every rank, which may go through the shared segment.
    fn alltoallv_on<T: Element>(
        &self,
        send: &[T],
        send_counts: &[usize],
        recv: &mut [T],
        recv_counts: &[usize],
        uniform: bool,
    ) -> Result<(), MsgError> {
        self.collective(|tag| {
            let (n, me) = (self.size() as usize, self.rank() as usize);
            let counts = (send_counts, recv_counts);
            check_alltoallv("alltoallv", (n, me), send.len(), counts)?;
            check(
                "alltoallv",
                "recv must hold the sum of recv_counts",
                recv.len(),
                recv_counts.iter().sum(),
            )?;
            if uniform {
                if super::sm::alltoall(&self.core, tag, bytes(send), bytes_mut(recv))? {
                    return Ok(());
                }
            } else {
                // Every rank takes the segment whatever its counts; each post says where
                // its blocks are, or that they come by messages.
                let (sb, rb) = (byte_counts::<T>(send_counts), byte_counts::<T>(recv_counts));
                let (s, r) = ((bytes(send), &sb[..]), (bytes_mut(recv), &rb[..]));
                if super::sm::alltoallv(&self.core, tag, s, r)? {
                    return Ok(());
                }
            }
            alltoallv_in(
                &self.core,
                &Group::all(&self.core),
                tag,
                send,
                send_counts,
                recv,
                recv_counts,
            )
        })
    }
}

impl Communicator {
    /// Every rank's `data` (any lengths), by rank.
    ///
    /// ```
    /// let world = spools::init().unwrap();
    /// // Rank r says "rank r" r + 1 times: lengths differ.
    /// let me = world.rank() as usize;
    /// let all = world.allgather_bytes(format!("rank {me}").repeat(me + 1).as_bytes()).unwrap();
    /// assert_eq!(all.len(), world.size() as usize);
    /// for (r, said) in all.iter().enumerate() {
    ///     assert_eq!(*said, format!("rank {r}").repeat(r + 1).into_bytes());
    /// }
    /// ```
    ///
    /// # Errors
    /// A dead rank, transport failures.
    pub fn allgather_bytes(&self, data: &[u8]) -> Result<Vec<Vec<u8>>, MsgError> {
        let n = self.size() as usize;
        let mut lens = vec![0u64; n];
        self.allgather(&[data.len() as u64], &mut lens)?;
        let counts: Vec<usize> = lens.iter().map(|&l| l as usize).collect();
        let mut all = vec![0u8; counts.iter().sum()];
        self.allgatherv(data, &mut all, &counts)?;
        let d = displs(&counts);
        Ok((0..n)
            .map(|i| all[d[i]..d[i] + counts[i]].to_vec())
            .collect())
    }

    /// Rank `root`'s `data` (any length) on every rank (other ranks' `data` is ignored).
    ///
    /// ```
    /// use spools::MsgError;
    /// let world = spools::init().unwrap();
    /// let (me, last) = (world.rank(), world.size() - 1);
    /// // Every rank passes its own greeting; only the root's counts.
    /// let mine = format!("greetings from rank {me}");
    /// let got = world.bcast_bytes(last, mine.as_bytes()).unwrap();
    /// assert_eq!(got, format!("greetings from rank {last}").into_bytes());
    /// assert!(matches!(
    ///     world.bcast_bytes(last + 1, b""),
    ///     Err(MsgError::BadRank { .. })
    /// ));
    /// ```
    ///
    /// # Errors
    /// [`MsgError::BadRank`], a dead rank.
    pub fn bcast_bytes(&self, root: u32, data: &[u8]) -> Result<Vec<u8>, MsgError> {
        let mut len = [data.len() as u64];
        self.bcast(&mut len, root)?;
        let mut buf = if self.rank() == root {
            data.to_vec()
        } else {
            vec![0u8; len[0] as usize]
        };
        self.bcast(&mut buf, root)?;
        Ok(buf)
    }
}
