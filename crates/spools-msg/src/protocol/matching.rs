//! MPI matching, sans-IO: posted receives (per context, per source and for any source)
//! and unexpected messages (per context), matched in order of posting and of arrival. Messages of one sender arrive in the order it sent
//! them (the active-message layer's channels are FIFO), so first-match in both queues gives MPI's
//! non-overtaking rule.

use std::collections::VecDeque;

use crate::idhash::IdMap;

/// Who sent a message and how it is labelled.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Envelope {
    /// Communicator context.
    pub(crate) ctx: u32,
    /// Sender (job rank).
    pub(crate) src: u32,
    /// Tag.
    pub(crate) tag: u32,
}

/// What a receive accepts: a context, and a source and tag or any.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Pattern {
    pub(crate) ctx: u32,
    pub(crate) src: Option<u32>,
    pub(crate) tag: Option<u32>,
}

impl Pattern {
    pub(crate) fn matches(&self, e: &Envelope) -> bool {
        self.ctx == e.ctx
            && self.src.is_none_or(|s| s == e.src)
            && self.tag.is_none_or(|t| t == e.tag)
    }
}

/// A posted receive: its posting number (receives are matched in posting order), id and
/// tag (or any).
#[derive(Clone, Copy)]
struct Posted {
    seq: u64,
    id: u64,
    tag: Option<u32>,
}

impl Posted {
    fn takes(&self, tag: u32) -> bool {
        self.tag.is_none_or(|t| t == tag)
    }
}

/// The queues of one context.
struct CtxQueues<P> {
    ctx: u32,
    /// Receives posted for one source, indexed by the source's job rank (grown when a
    /// receive names a higher rank), each in posting order.
    by_src: Vec<VecDeque<Posted>>,
    /// Receives posted for any source, in posting order.
    any_src: VecDeque<Posted>,
    /// Messages that arrived before a receive matched them, in arrival order.
    unexpected: VecDeque<(Envelope, P)>,
    /// Tag ranges whose messages nobody will receive ([`Matcher::drain`]): one that
    /// matches no posted receive is dropped instead of queued.
    drained: Vec<std::ops::Range<u32>>,
}

impl<P> CtxQueues<P> {
    fn new(ctx: u32) -> Self {
        CtxQueues {
            ctx,
            by_src: Vec::new(),
            any_src: VecDeque::new(),
            unexpected: VecDeque::new(),
            drained: Vec::new(),
        }
    }
}

/// Posted receives and unexpected messages (with payload `P`), per context.
///
/// An arriving message looks at two short queues only: the receives posted for its
/// source and those posted for any source; the earlier-posted of the first match in each
/// wins, which is exactly the first match in one queue in posting order (MPI's rule), and
/// no hash lookup is done on the way while messages keep to one context (the context's
/// queues are found through a one-entry cache, else a map). The unexpected queue is
/// touched only when no receive matches. Each context keeps one (small) queue slot per
/// source rank it was asked about, up to the highest: memory per context grows with the
/// job size, not with traffic.
pub(crate) struct Matcher<P> {
    ctxs: Vec<CtxQueues<P>>,
    /// Index in `ctxs` of each context (looked up only when the cache below misses).
    index: IdMap<u32, usize>,
    /// Index in `ctxs` of the context used last.
    last: usize,
    /// The next posting number.
    seq: u64,
}

impl<P> Default for Matcher<P> {
    fn default() -> Self {
        Matcher {
            ctxs: Vec::new(),
            index: IdMap::default(),
            last: 0,
            seq: 0,
        }
    }
}

/// Removes the element at `i` (the head in the common case: `pop_front` is much cheaper
/// than the general `remove`).
fn take_at<T>(q: &mut VecDeque<T>, i: usize) -> Option<T> {
    if i == 0 {
        q.pop_front()
    } else {
        q.remove(i)
    }
}

/// Position of the first receive in `q` that takes `tag`, and its posting number.
fn first_taking(q: &VecDeque<Posted>, tag: u32) -> Option<(usize, u64)> {
    q.iter()
        .enumerate()
        .find(|(_, p)| p.takes(tag))
        .map(|(i, p)| (i, p.seq))
}

impl<P> Matcher<P> {
    /// Index of context `ctx`'s queues, if it has any.
    fn find(&self, ctx: u32) -> Option<usize> {
        match self.ctxs.get(self.last) {
            Some(q) if q.ctx == ctx => Some(self.last),
            _ => self.index.get(&ctx).copied(),
        }
    }

    /// Context `ctx`'s queues (made on first use), remembered as the last used.
    fn queues(&mut self, ctx: u32) -> &mut CtxQueues<P> {
        let i = match self.find(ctx) {
            Some(i) => i,
            None => {
                self.ctxs.push(CtxQueues::new(ctx));
                self.index.insert(ctx, self.ctxs.len() - 1);
                self.ctxs.len() - 1
            }
        };
        self.last = i;
        &mut self.ctxs[i]
    }

    /// A message arrives: the id of the first posted receive it matches (removed), or
    /// `None`, after which the caller queues it with [`Matcher::queue`].
    pub(crate) fn arrive(&mut self, e: &Envelope) -> Option<u64> {
        let i = self.find(e.ctx)?;
        self.last = i;
        let q = &mut self.ctxs[i];
        let specific = q
            .by_src
            .get(e.src as usize)
            .and_then(|s| first_taking(s, e.tag));
        let any = first_taking(&q.any_src, e.tag);
        let hit = match (specific, any) {
            (Some((i, a)), Some((_, b))) if a < b => take_at(&mut q.by_src[e.src as usize], i),
            (Some((i, _)), None) => take_at(&mut q.by_src[e.src as usize], i),
            (_, Some((j, _))) => take_at(&mut q.any_src, j),
            (None, None) => None,
        };
        hit.map(|p| p.id)
    }

    /// Queues an unexpected message.
    pub(crate) fn queue(&mut self, e: Envelope, payload: P) {
        self.queues(e.ctx).unexpected.push_back((e, payload));
    }

    /// A receive is posted: the first unexpected message it matches (removed), or `None`
    /// after queueing it.
    pub(crate) fn post(&mut self, id: u64, p: Pattern) -> Option<(Envelope, P)> {
        let seq = self.seq;
        let q = self.queues(p.ctx);
        if !q.unexpected.is_empty() {
            if let Some(i) = q.unexpected.iter().position(|(e, _)| p.matches(e)) {
                return take_at(&mut q.unexpected, i);
            }
        }
        let posted = Posted {
            seq,
            id,
            tag: p.tag,
        };
        match p.src {
            Some(src) => {
                let src = src as usize;
                if q.by_src.len() <= src {
                    q.by_src.resize_with(src + 1, VecDeque::new);
                }
                q.by_src[src].push_back(posted);
            }
            None => q.any_src.push_back(posted),
        }
        self.seq += 1;
        None
    }

    /// Removes posted receive `id` (posted with pattern `p`) that has not matched; false
    /// if it is not posted.
    pub(crate) fn cancel(&mut self, id: u64, p: &Pattern) -> bool {
        let Some(i) = self.find(p.ctx) else {
            return false;
        };
        let q = &mut self.ctxs[i];
        let list = match p.src {
            Some(src) => match q.by_src.get_mut(src as usize) {
                Some(l) => l,
                None => return false,
            },
            None => &mut q.any_src,
        };
        match list.iter().position(|x| x.id == id) {
            Some(k) => take_at(list, k).is_some(),
            None => false,
        }
    }

    /// The first unexpected message `p` matches, left in place.
    pub(crate) fn probe(&self, p: &Pattern) -> Option<&(Envelope, P)> {
        let i = self.find(p.ctx)?;
        self.ctxs[i].unexpected.iter().find(|(e, _)| p.matches(e))
    }

    /// The first unexpected message of context `ctx` from job rank `src` with a tag in
    /// `tags`, left in place.
    pub(crate) fn probe_tags(
        &self,
        ctx: u32,
        src: u32,
        tags: std::ops::Range<u32>,
    ) -> Option<&(Envelope, P)> {
        let i = self.find(ctx)?;
        self.ctxs[i]
            .unexpected
            .iter()
            .find(|(e, _)| e.src == src && tags.contains(&e.tag))
    }

    /// From now on nobody receives context `ctx`'s messages with a tag in `tags` unless a
    /// receive is already posted for them: returns the unexpected ones queued (removed),
    /// and [`Matcher::is_drained`] says so of later ones.
    pub(crate) fn drain(&mut self, ctx: u32, tags: std::ops::Range<u32>) -> Vec<(Envelope, P)> {
        let q = self.queues(ctx);
        let mut gone = Vec::new();
        let mut kept = VecDeque::with_capacity(q.unexpected.len());
        for (e, p) in q.unexpected.drain(..) {
            if tags.contains(&e.tag) {
                gone.push((e, p));
            } else {
                kept.push_back((e, p));
            }
        }
        q.unexpected = kept;
        if !q.drained.contains(&tags) {
            q.drained.push(tags);
        }
        gone
    }

    /// Whether a message that matched no posted receive is one nobody will receive
    /// ([`Matcher::drain`]).
    pub(crate) fn is_drained(&self, e: &Envelope) -> bool {
        self.find(e.ctx)
            .is_some_and(|i| self.ctxs[i].drained.iter().any(|t| t.contains(&e.tag)))
    }

    /// Number of unexpected messages queued.
    #[cfg(test)]
    pub(crate) fn unexpected_len(&self) -> usize {
        self.ctxs.iter().map(|q| q.unexpected.len()).sum()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn env(src: u32, tag: u32) -> Envelope {
        Envelope { ctx: 0, src, tag }
    }

    fn arrive<P>(m: &mut Matcher<P>, e: Envelope, p: P) -> Option<u64> {
        let hit = m.arrive(&e);
        if hit.is_none() {
            m.queue(e, p);
        }
        hit
    }

    fn pat(src: Option<u32>, tag: Option<u32>) -> Pattern {
        Pattern { ctx: 0, src, tag }
    }

    #[test]
    fn unexpected_messages_match_in_arrival_order() {
        let mut m = Matcher::default();
        assert_eq!(arrive(&mut m, env(1, 5), "a"), None);
        assert_eq!(arrive(&mut m, env(1, 5), "b"), None);
        assert_eq!(arrive(&mut m, env(2, 6), "c"), None);
        assert_eq!(m.post(1, pat(None, Some(6))).map(|x| x.1), Some("c"));
        assert_eq!(m.post(2, pat(Some(1), None)).map(|x| x.1), Some("a"));
        assert_eq!(m.post(3, pat(None, None)).map(|x| x.1), Some("b"));
        assert_eq!(m.unexpected_len(), 0);
        assert_eq!(m.post(4, pat(None, None)), None);
    }

    #[test]
    fn probe_tags_finds_the_first_message_of_a_source_within_the_tags() {
        let mut m = Matcher::default();
        assert_eq!(arrive(&mut m, env(1, 300), "other collective"), None);
        assert_eq!(arrive(&mut m, env(2, 9), "other source"), None);
        assert_eq!(arrive(&mut m, env(1, 9), "first"), None);
        assert_eq!(arrive(&mut m, env(1, 8), "second"), None);
        let hit = m.probe_tags(0, 1, 0..256).map(|x| (x.0.tag, x.1));
        assert_eq!(hit, Some((9, "first")));
        assert!(m.probe_tags(0, 3, 0..256).is_none());
        assert!(m.probe_tags(1, 1, 0..256).is_none());
        assert_eq!(
            m.probe_tags(0, 1, 256..512).map(|x| x.1),
            Some("other collective")
        );
        // Left in place.
        assert_eq!(m.unexpected_len(), 4);
    }

    #[test]
    fn arrivals_match_the_first_fitting_posted_receive() {
        let mut m: Matcher<()> = Matcher::default();
        assert!(m.post(1, pat(Some(3), Some(1))).is_none());
        assert!(m.post(2, pat(None, None)).is_none());
        assert!(m.post(3, pat(Some(3), None)).is_none());
        assert_eq!(arrive(&mut m, env(4, 1), ()), Some(2));
        assert_eq!(arrive(&mut m, env(3, 9), ()), Some(3));
        assert_eq!(arrive(&mut m, env(3, 1), ()), Some(1));
        assert_eq!(arrive(&mut m, env(3, 1), ()), None);
        assert_eq!(m.unexpected_len(), 1);
    }

    #[test]
    fn contexts_never_match_each_other() {
        let mut m = Matcher::default();
        let other = Envelope {
            ctx: 2,
            src: 0,
            tag: 0,
        };
        assert_eq!(arrive(&mut m, other, 1), None);
        assert!(m.post(1, pat(None, None)).is_none());
        assert!(m.probe(&pat(None, None)).is_none());
        let p = Pattern {
            ctx: 2,
            src: None,
            tag: None,
        };
        assert_eq!(m.probe(&p).map(|x| x.1), Some(1));
        assert_eq!(arrive(&mut m, env(0, 0), 7), Some(1));
    }

    #[test]
    fn cancel_removes_only_posted_receives() {
        let mut m: Matcher<()> = Matcher::default();
        assert!(m.post(1, pat(None, None)).is_none());
        assert!(m.cancel(1, &pat(None, None)));
        assert!(!m.cancel(1, &pat(None, None)));
        assert_eq!(arrive(&mut m, env(0, 0), ()), None);
    }

    #[test]
    fn wildcards_and_specific_receives_match_in_posting_order() {
        let mut m: Matcher<()> = Matcher::default();
        assert!(m.post(1, pat(None, Some(1))).is_none());
        assert!(m.post(2, pat(Some(3), None)).is_none());
        assert!(m.post(3, pat(None, None)).is_none());
        assert!(m.post(4, pat(Some(3), Some(1))).is_none());
        assert!(m.post(5, pat(Some(2), Some(9))).is_none());
        // Each arrival takes the earliest-posted receive that fits, whichever queue it
        // is in.
        assert_eq!(arrive(&mut m, env(3, 1), ()), Some(1));
        assert_eq!(arrive(&mut m, env(3, 1), ()), Some(2));
        assert_eq!(arrive(&mut m, env(3, 1), ()), Some(3));
        assert_eq!(arrive(&mut m, env(2, 9), ()), Some(5));
        assert_eq!(arrive(&mut m, env(3, 1), ()), Some(4));
        assert_eq!(arrive(&mut m, env(3, 1), ()), None);
        assert_eq!(m.unexpected_len(), 1);
    }

    #[test]
    fn cancel_finds_receives_of_either_kind() {
        let mut m: Matcher<()> = Matcher::default();
        assert!(m.post(1, pat(Some(7), Some(1))).is_none());
        assert!(m.post(2, pat(None, Some(1))).is_none());
        assert!(!m.cancel(1, &pat(None, Some(1))));
        assert!(!m.cancel(1, &pat(Some(9), Some(1))));
        assert!(m.cancel(1, &pat(Some(7), Some(1))));
        assert!(m.cancel(2, &pat(None, Some(1))));
        assert_eq!(arrive(&mut m, env(7, 1), ()), None);
    }

    /// The obvious matcher: one list of posted receives per rank, scanned in order.
    #[derive(Default)]
    struct Reference {
        posted: Vec<(u64, Pattern)>,
        unexpected: Vec<(Envelope, u32)>,
    }

    /// Random posts, arrivals and cancels over two contexts, three sources and three
    /// tags (wildcards a third of the time), checked step by step against
    /// [`Reference`]. The generator is seeded: the test is deterministic.
    #[test]
    fn agrees_with_a_linear_reference() {
        let mut m: Matcher<u32> = Matcher::default();
        let mut r = Reference::default();
        let mut state = 0x2545_F491_4F6C_DD1Du64;
        let mut next = |n: u64| {
            state ^= state << 13;
            state ^= state >> 7;
            state ^= state << 17;
            state % n
        };
        let mut id = 0;
        for step in 0..20_000u32 {
            let ctx = next(2) as u32 * 2;
            match next(5) {
                0 | 1 => {
                    id += 1;
                    let p = Pattern {
                        ctx,
                        src: (next(3) != 0).then(|| next(3) as u32),
                        tag: (next(3) != 0).then(|| next(3) as u32),
                    };
                    let got = m.post(id, p);
                    let want = r
                        .unexpected
                        .iter()
                        .position(|(e, _)| p.matches(e))
                        .map(|i| r.unexpected.remove(i));
                    if want.is_none() {
                        r.posted.push((id, p));
                    }
                    assert_eq!(got, want, "step {step}: post {p:?}");
                }
                2 | 3 => {
                    let e = Envelope {
                        ctx,
                        src: next(3) as u32,
                        tag: next(3) as u32,
                    };
                    let got = m.arrive(&e);
                    if got.is_none() {
                        m.queue(e, step);
                    }
                    let want = r
                        .posted
                        .iter()
                        .position(|(_, p)| p.matches(&e))
                        .map(|i| r.posted.remove(i).0);
                    if want.is_none() {
                        r.unexpected.push((e, step));
                    }
                    assert_eq!(got, want, "step {step}: arrival {e:?}");
                }
                _ => {
                    if r.posted.is_empty() {
                        continue;
                    }
                    let (cid, p) = r.posted.remove(next(r.posted.len() as u64) as usize);
                    assert!(m.cancel(cid, &p), "step {step}: cancel {cid}");
                    assert!(!m.cancel(cid, &p));
                }
            }
        }
        assert_eq!(m.unexpected_len(), r.unexpected.len());
    }
}
