//! The reassembly of a receiver's share of a connection spread over several receivers
//! ([`Share`]): construction, what the consumer took, the pieces handed out.

use spools_proto::stream::Hello;

use super::{AduBuf, Event, Limits, Reassembler};
use crate::error::ReassemblyError;
use crate::share::Share;

impl Reassembler {
    /// A receiver's part of a connection spread over several receivers: only the links of
    /// `share` say hello here, and each ADU handed out ([`Event::Adu`]) is this share's
    /// piece (see [`Share`]). The lead orders the ADUs as [`Reassembler::new`] does; the
    /// others hand each piece out as soon as it is whole, report the pieces their links
    /// lost ([`Event::Incomplete`], never [`Event::Missing`]: a share need not see every
    /// ADU), and refuse SUs of ADUs the consumer said it took ([`Reassembler::taken`]).
    ///
    /// # Errors
    /// [`ReassemblyError::Links`] for a hello that names no valid link or a link not held.
    pub fn new_shared(
        first: &Hello,
        limits: Limits,
        share: Share,
    ) -> Result<Reassembler, ReassemblyError> {
        if !share.holds(first.link) || share.lead() != share.holds(0) {
            return Err(ReassemblyError::Links {
                link: first.link,
                what: "not a link of this receiver's share (or a lead without link 0)",
            });
        }
        let mut r = Reassembler::new(first, limits)?;
        r.share = Some(share);
        Ok(r)
    }

    /// The consumer took ADU `adu` of `stream` (and every one before it): a share that is
    /// not the lead refuses SUs for them from now on. Nothing for other receivers.
    pub fn taken(&mut self, stream: u32, adu: u64) {
        let lead = self.ordered();
        if let Some(st) = self.streams.get_mut(&stream) {
            if !lead {
                st.next = st.next.max(adu.saturating_add(1));
            }
            st.out = st.out.split_off(&adu.saturating_add(1));
        }
    }

    /// The size of ADU `adu` of `stream`, whose piece a share handed out and the consumer
    /// did not take yet (a piece is not the whole ADU, so its length does not say).
    pub fn piece_of(&self, stream: u32, adu: u64) -> Option<u64> {
        self.streams.get(&stream)?.out.get(&adu).copied()
    }

    /// Links held here: all, or the share's.
    pub(super) fn held(&self) -> usize {
        self.share
            .as_ref()
            .map_or_else(|| usize::from(self.links), |s| s.links().len())
    }

    /// Whether this receiver orders the ADUs (not a share's non-lead part).
    pub(super) fn ordered(&self) -> bool {
        self.share.as_ref().is_none_or(Share::lead)
    }

    /// Bytes held here of an ADU of `size` bytes in TUs of `tu`.
    pub(super) fn want(&self, size: u64, tu: u64) -> u64 {
        self.share
            .as_ref()
            .map_or(size, |s| s.piece_bytes(size, tu, self.links))
    }

    /// A share's part that does not order ADUs: every whole piece goes out at once; once
    /// the stream closed or was lost on every link held, the pieces not whole are reported
    /// and the stream ends (complete when nothing was lost here).
    pub(super) fn release_pieces(&mut self, id: u32) -> bool {
        let held = self.held();
        let Some(st) = self.streams.get_mut(&id) else {
            return false;
        };
        if st.ended {
            return false;
        }
        let whole: Vec<u64> = st
            .adus
            .iter()
            .filter(|(_, p)| p.whole())
            .map(|(&n, _)| n)
            .collect();
        let mut progressed = false;
        for n in whole {
            let Some(p) = st.adus.remove(&n) else {
                continue;
            };
            let data = AduBuf::into_vec(p.data);
            self.buffered -= data.len() as u64;
            self.ready += data.len() as u64;
            self.max_ready = self.max_ready.max(self.ready);
            st.out.insert(n, p.size);
            self.events.push_back(Event::Adu {
                stream: id,
                adu: n,
                data,
            });
            progressed = true;
        }
        if st.closed.len() + st.lost.len() < held {
            return progressed;
        }
        for (adu, p) in std::mem::take(&mut st.adus) {
            st.lossy = true;
            self.buffered -= p.want;
            self.events.push_back(Event::Incomplete {
                stream: id,
                adu,
                have: p.have,
                size: p.size,
            });
        }
        st.ended = true;
        let adus = st.sent.unwrap_or_else(|| {
            st.out
                .last_key_value()
                .map_or(st.next, |(&n, _)| n + 1)
                .max(st.next)
        });
        self.events.push_back(Event::Ended {
            stream: id,
            adus,
            complete: !st.lossy && st.lost.is_empty(),
        });
        true
    }
}
