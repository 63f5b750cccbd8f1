//! MPI matching, sans-IO: posted receives and unexpected messages per context, matched in
//! order of posting and of arrival. Messages of one sender arrive in the order it sent
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

/// Posted receives (by request id) and unexpected messages (with payload `P`).
pub(crate) struct Matcher<P> {
    posted: IdMap<u32, VecDeque<(u64, Pattern)>>,
    unexpected: IdMap<u32, VecDeque<(Envelope, P)>>,
}

impl<P> Default for Matcher<P> {
    fn default() -> Self {
        Matcher {
            posted: IdMap::default(),
            unexpected: IdMap::default(),
        }
    }
}

impl<P> Matcher<P> {
    /// A message arrives: the id of the first posted receive it matches (removed), or
    /// `None`, after which the caller queues it with [`Matcher::queue`].
    pub(crate) fn arrive(&mut self, e: &Envelope) -> Option<u64> {
        let q = self.posted.get_mut(&e.ctx)?;
        let i = q.iter().position(|(_, p)| p.matches(e))?;
        q.remove(i).map(|(id, _)| id)
    }

    /// Queues an unexpected message.
    pub(crate) fn queue(&mut self, e: Envelope, payload: P) {
        self.unexpected
            .entry(e.ctx)
            .or_default()
            .push_back((e, payload));
    }

    /// A receive is posted: the first unexpected message it matches (removed), or `None`
    /// after queueing it.
    pub(crate) fn post(&mut self, id: u64, p: Pattern) -> Option<(Envelope, P)> {
        if let Some(q) = self.unexpected.get_mut(&p.ctx) {
            if let Some(i) = q.iter().position(|(e, _)| p.matches(e)) {
                return q.remove(i);
            }
        }
        self.posted.entry(p.ctx).or_default().push_back((id, p));
        None
    }

    /// Removes a posted receive that has not matched; false if it is not posted.
    pub(crate) fn cancel(&mut self, id: u64, ctx: u32) -> bool {
        if let Some(q) = self.posted.get_mut(&ctx) {
            if let Some(i) = q.iter().position(|(x, _)| *x == id) {
                q.remove(i);
                return true;
            }
        }
        false
    }

    /// The first unexpected message `p` matches, left in place.
    pub(crate) fn probe(&self, p: &Pattern) -> Option<&(Envelope, P)> {
        self.unexpected
            .get(&p.ctx)
            .and_then(|q| q.iter().find(|(e, _)| p.matches(e)))
    }

    /// Number of unexpected messages queued.
    #[cfg(test)]
    pub(crate) fn unexpected_len(&self) -> usize {
        self.unexpected.values().map(VecDeque::len).sum()
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
        assert!(m.cancel(1, 0));
        assert!(!m.cancel(1, 0));
        assert_eq!(arrive(&mut m, env(0, 0), ()), None);
    }
}
