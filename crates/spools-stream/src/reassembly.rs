//! The receiver's side of one logical connection, sans-IO: SU frames arriving on K links in
//! any interleaving become whole ADUs, handed out in order per stream, after the stream
//! they are sequenced behind, and in lock step within a synchronisation group.

use std::collections::btree_map::Entry;
use std::collections::{BTreeMap, HashSet, VecDeque};
use std::sync::Arc;

use spools_proto::stream::{su_range, Close, Frame, Hello, Open, Su, NOT_SEQUENCED, VARIABLE};

use crate::adubuf::{AduBuf, Claim};
use crate::error::ReassemblyError;
use crate::recycler::Recycler;
use crate::share::Share;

mod shared;

/// What a receiver accepts before it refuses a stream.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Limits {
    /// Bytes of the largest ADU.
    pub max_adu: u64,
    /// Bytes of ADUs held at once (received in part, or whole but not handed out yet).
    pub max_buffered: u64,
}

impl Default for Limits {
    /// ADUs of up to 1 GiB, 4 GiB held at once.
    fn default() -> Limits {
        Limits {
            max_adu: 1 << 30,
            max_buffered: 4 << 30,
        }
    }
}

/// What the reassembly hands out.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Event {
    /// A whole ADU, as its canonical byte stream.
    Adu {
        /// The stream.
        stream: u32,
        /// The ADU's number.
        adu: u64,
        /// Its bytes.
        data: Vec<u8>,
    },
    /// An ADU that will never be whole: a link was lost, or the stream closed without it.
    Incomplete {
        /// The stream.
        stream: u32,
        /// The ADU's number.
        adu: u64,
        /// Bytes received.
        have: u64,
        /// Bytes of the whole ADU.
        size: u64,
    },
    /// ADUs `from..to` of a stream of which nothing arrived before it closed.
    Missing {
        /// The stream.
        stream: u32,
        /// The first missing ADU.
        from: u64,
        /// One past the last.
        to: u64,
    },
    /// A stream ended: closed on every link with every ADU handed out (`complete`), or cut
    /// short by a lost link.
    Ended {
        /// The stream.
        stream: u32,
        /// ADUs the stream had: as many as the sender announced when it closed the stream,
        /// else up to the last one of which anything arrived.
        adus: u64,
        /// Whether the sender closed it and every ADU arrived whole.
        complete: bool,
    },
}

/// An ADU being received.
struct Partial {
    size: u64,
    /// Bytes this receiver holds of it: `size`, or its share's piece.
    want: u64,
    data: Arc<AduBuf>,
    /// Bytes of the SUs received whole (their CRC checked).
    have: u64,
    /// (TU, SU) pairs claimed (received, or being received).
    got: HashSet<(u64, u16)>,
}

/// An SU accepted by [`Reassembler::place`]: where its payload goes. Hand it back to
/// [`Reassembler::complete`] with the payload's CRC32C once it is written.
pub(crate) struct Placed {
    link: u16,
    su: Su,
    len: u64,
    claim: Claim,
}

impl Placed {
    /// Where the payload goes (its length is the frame's).
    pub(crate) fn dest(&mut self) -> &mut [u8] {
        self.claim.dest()
    }
}

impl Partial {
    fn whole(&self) -> bool {
        self.have == self.want && !self.got.is_empty()
    }
}

struct StreamState {
    open: Open,
    adus: BTreeMap<u64, Partial>,
    /// The next ADU to hand out.
    next: u64,
    /// Links this stream was closed on, and the ADU count they announced.
    closed: HashSet<u16>,
    /// Links lost before they closed this stream.
    lost: HashSet<u16>,
    sent: Option<u64>,
    ended: bool,
    /// Whether an ADU of it was reported incomplete or missing.
    lossy: bool,
    /// A share's pieces handed out and not yet taken ([`Reassembler::taken`]), with the
    /// size of their ADU.
    out: BTreeMap<u64, u64>,
}

/// One logical connection's reassembly: feed it each link's [`Hello`], then every frame
/// that link delivers ([`Reassembler::on_frame`]) and a lost link when a connection ends
/// without its streams' `close` ([`Reassembler::link_lost`]); take what is ready with
/// [`Reassembler::next_event`].
///
/// ```
/// use spools_proto::stream::{Frame, Hello, Open, Su, Close, NOT_SEQUENCED, VERSION};
/// use spools_stream::{Event, Limits, Reassembler};
/// let hello = |link| Hello { version: VERSION, flags: 0, links: 2, link, conn: 7 };
/// let mut r = Reassembler::new(&hello(0), Limits::default())?;
/// r.add_link(&hello(1))?;
/// let open = Open { stream: 1, group: 0, after: NOT_SEQUENCED, flags: 0, tu: 4, adu: 4 };
/// for link in 0..2 {
///     r.on_frame(link, &Frame::Open(open))?;
/// }
/// // "abcd" as one TU of two SUs: "ab" on link 0, "cd" on link 1 (link 1's first).
/// let su = |s: u16, off| Su { stream: 1, su: s, link: s, adu: 0, tu: 0, offset: off, size: 4,
///     crc: crc32c::crc32c(if s == 0 { b"ab" } else { b"cd" }) };
/// r.on_frame(1, &Frame::Su(su(1, 2), b"cd"))?;
/// assert_eq!(r.next_event(), None);
/// r.on_frame(0, &Frame::Su(su(0, 0), b"ab"))?;
/// assert_eq!(r.next_event(), Some(Event::Adu { stream: 1, adu: 0, data: b"abcd".to_vec() }));
/// # Ok::<(), spools_stream::ReassemblyError>(())
/// ```
pub struct Reassembler {
    links: u16,
    conn: u64,
    hello: Vec<bool>,
    lost: Vec<bool>,
    limits: Limits,
    buffered: u64,
    streams: BTreeMap<u32, StreamState>,
    events: VecDeque<Event>,
    /// Bytes of the whole ADUs among `events`, and the most they were.
    ready: u64,
    max_ready: u64,
    /// Buffers handed back by the consumer (the receiver's).
    recycler: Option<Recycler>,
    /// The links held, when the connection is spread over several receivers.
    share: Option<Share>,
}

impl Reassembler {
    /// A connection announced by the hello of one of its links.
    ///
    /// # Errors
    /// [`ReassemblyError::Links`] for a hello that names no valid link.
    pub fn new(first: &Hello, limits: Limits) -> Result<Reassembler, ReassemblyError> {
        let mut r = Reassembler {
            links: first.links,
            conn: first.conn,
            hello: vec![false; usize::from(first.links)],
            lost: vec![false; usize::from(first.links)],
            limits,
            buffered: 0,
            streams: BTreeMap::new(),
            events: VecDeque::new(),
            ready: 0,
            max_ready: 0,
            recycler: None,
            share: None,
        };
        r.add_link(first)?;
        Ok(r)
    }

    /// The connection's id (the same in the hellos of its links).
    pub fn conn(&self) -> u64 {
        self.conn
    }

    /// Links of the connection.
    pub fn links(&self) -> u16 {
        self.links
    }

    /// Whether every link has said hello.
    pub fn all_links(&self) -> bool {
        self.hello.iter().all(|&h| h)
    }

    /// Another link of this connection.
    ///
    /// # Errors
    /// [`ReassemblyError::Links`] when it disagrees on the connection or the link count,
    /// or its link said hello before.
    pub fn add_link(&mut self, h: &Hello) -> Result<(), ReassemblyError> {
        let link = h.link;
        if self.share.as_ref().is_some_and(|s| !s.holds(link)) {
            return Err(ReassemblyError::Links {
                link,
                what: "not a link of this receiver's share",
            });
        }
        if h.conn != self.conn || h.links != self.links {
            return Err(ReassemblyError::Links {
                link,
                what: "its hello names another connection or link count",
            });
        }
        match self.hello.get_mut(usize::from(link)) {
            Some(seen) if !*seen => {
                *seen = true;
                Ok(())
            }
            Some(_) => Err(ReassemblyError::Links {
                link,
                what: "a second connection for this link",
            }),
            None => Err(ReassemblyError::Links {
                link,
                what: "no such link",
            }),
        }
    }

    /// The next ADU or stream event ready, in the order the streams' constraints allow.
    pub fn next_event(&mut self) -> Option<Event> {
        let e = self.events.pop_front();
        if let Some(Event::Adu { data, .. }) = &e {
            self.ready -= data.len() as u64;
        }
        e
    }

    /// Bytes of the whole ADUs ready for [`Reassembler::next_event`] (not yet taken).
    pub fn ready_bytes(&self) -> u64 {
        self.ready
    }

    /// The most [`Reassembler::ready_bytes`] ever were.
    pub fn max_ready_bytes(&self) -> u64 {
        self.max_ready
    }

    /// A frame that link `link` delivered (after its hello).
    ///
    /// # Errors
    /// [`ReassemblyError`] when the frame does not fit: the connection should be dropped.
    pub fn on_frame(&mut self, link: u16, frame: &Frame<'_>) -> Result<(), ReassemblyError> {
        if !self.hello.get(usize::from(link)).copied().unwrap_or(false) {
            return Err(ReassemblyError::Links {
                link,
                what: "a frame before the link's hello",
            });
        }
        match frame {
            Frame::Hello(_) => Err(ReassemblyError::OutOfOrder {
                link,
                expected: "a stream frame",
                got: "a second hello",
            }),
            Frame::Welcome(_) | Frame::Ack(_) | Frame::Move(_) => {
                Err(ReassemblyError::OutOfOrder {
                    link,
                    expected: "a sender's frame",
                    got: "a receiver's frame",
                })
            }
            Frame::Open(o) => self.open(o),
            Frame::Su(s, payload) => {
                let mut p = self.place(link, s, payload.len() as u64)?;
                p.dest().copy_from_slice(payload);
                self.complete(p, crc32c::crc32c(payload))
            }
            Frame::Close(c) => {
                self.close(link, c)?;
                self.release();
                Ok(())
            }
        }
    }

    /// Link `link` ended without closing its streams (the sender died, the network
    /// failed). Once every link of a stream has closed it or was lost, the ADUs that are
    /// not whole are reported ([`Event::Incomplete`], [`Event::Missing`]) and the stream
    /// ends, not complete.
    pub fn link_lost(&mut self, link: u16) {
        if let Some(l) = self.lost.get_mut(usize::from(link)) {
            *l = true;
        }
        for st in self.streams.values_mut() {
            if !st.closed.contains(&link) {
                st.lost.insert(link);
            }
        }
        self.release();
    }

    fn open(&mut self, o: &Open) -> Result<(), ReassemblyError> {
        if o.after != NOT_SEQUENCED && o.after == o.stream {
            return Err(ReassemblyError::Stream {
                stream: o.stream,
                what: "sequenced after itself",
            });
        }
        match self.streams.get(&o.stream) {
            Some(st) if st.open == *o => Ok(()),
            Some(_) => Err(ReassemblyError::Stream {
                stream: o.stream,
                what: "opened again with another format",
            }),
            None => {
                if o.adu != VARIABLE && o.adu > self.limits.max_adu {
                    return Err(ReassemblyError::TooLarge {
                        stream: o.stream,
                        what: "an ADU",
                        bytes: o.adu,
                        limit: self.limits.max_adu,
                    });
                }
                self.streams.insert(
                    o.stream,
                    StreamState {
                        open: *o,
                        adus: BTreeMap::new(),
                        next: 0,
                        closed: HashSet::new(),
                        lost: (0..self.links)
                            .filter(|&l| self.lost[usize::from(l)])
                            .collect(),
                        sent: None,
                        ended: false,
                        lossy: false,
                        out: BTreeMap::new(),
                    },
                );
                Ok(())
            }
        }
    }

    /// Checks an SU's header (of a payload of `len` bytes) against its stream and claims
    /// its place in its ADU: everything but its CRC, which [`Reassembler::complete`]
    /// checks once the payload is in.
    /// Fills ADU buffers handed back to `r` before allocating new ones.
    pub(crate) fn recycle_from(&mut self, r: Recycler) {
        self.recycler = Some(r);
    }

    /// Whether an SU should wait before [`Reassembler::place`]: it would start an ADU that
    /// takes the bytes held past [`Limits::max_buffered`] while ADUs received in part are
    /// held (they complete as the other links catch up, or end with their links), so that
    /// a link ahead of the others waits for them instead of failing the connection.
    pub(crate) fn must_wait(&self, s: &Su) -> bool {
        let Some(st) = self.streams.get(&s.stream) else {
            return false;
        };
        let tu = if st.open.adu == VARIABLE {
            s.size.max(1)
        } else {
            st.open.tu
        };
        !st.adus.contains_key(&s.adu)
            && self.buffered.saturating_add(self.want(s.size, tu)) > self.limits.max_buffered
            && self
                .streams
                .values()
                .any(|t| t.adus.values().any(|p| !p.whole()))
    }

    pub(crate) fn place(&mut self, link: u16, s: &Su, len: u64) -> Result<Placed, ReassemblyError> {
        let misplaced = |what| ReassemblyError::Misplaced {
            stream: s.stream,
            adu: s.adu,
            tu: s.tu,
            su: s.su,
            link,
            what,
        };
        let links = self.links;
        let limits = self.limits;
        let share = self.share.clone();
        let Some(st) = self.streams.get_mut(&s.stream) else {
            return Err(ReassemblyError::Stream {
                stream: s.stream,
                what: "an SU of a stream that was not opened",
            });
        };
        if st.ended || st.closed.contains(&link) {
            return Err(misplaced("after the stream ended on this link"));
        }
        if s.link != link || s.su != link {
            return Err(misplaced("SU s must travel on link s"));
        }
        if s.adu < st.next || st.out.contains_key(&s.adu) {
            return Err(misplaced("for an ADU already handed out"));
        }
        if st.open.adu != VARIABLE && s.size != st.open.adu {
            return Err(misplaced("ADU size differs from the stream's"));
        }
        if s.size > limits.max_adu {
            return Err(ReassemblyError::TooLarge {
                stream: s.stream,
                what: "an ADU",
                bytes: s.size,
                limit: limits.max_adu,
            });
        }
        let tu = if st.open.adu == VARIABLE {
            s.size.max(1)
        } else {
            st.open.tu
        };
        let fits = if s.size == 0 {
            s.tu == 0 && s.su == 0 && s.offset == 0 && len == 0
        } else {
            su_range(s.size, tu, links, s.tu, s.su) == Some((s.offset, len))
        };
        if !fits {
            return Err(misplaced(
                "offset or length not where the stream's format puts it",
            ));
        }
        // Where the payload goes: its place in the ADU, or in this share's piece.
        let (want, at) = match &share {
            None => (s.size, Some(s.offset)),
            Some(sh) => (
                sh.piece_bytes(s.size, tu, links),
                if s.size == 0 {
                    Some(0)
                } else {
                    sh.piece_offset(s.size, tu, links, s.tu, s.su)
                },
            ),
        };
        let at = at.ok_or_else(|| misplaced("on a link this receiver does not hold"))?;
        let p = match st.adus.entry(s.adu) {
            Entry::Occupied(e) => e.into_mut(),
            Entry::Vacant(e) => {
                if self.buffered + want > limits.max_buffered {
                    return Err(ReassemblyError::TooLarge {
                        stream: s.stream,
                        what: "the ADUs held",
                        bytes: self.buffered + want,
                        limit: limits.max_buffered,
                    });
                }
                self.buffered += want;
                e.insert(Partial {
                    size: s.size,
                    want,
                    // Within max_adu: checked above.
                    data: AduBuf::new(
                        want as usize,
                        self.recycler.as_ref().and_then(|r| r.take(want as usize)),
                    ),
                    have: 0,
                    got: HashSet::new(),
                })
            }
        };
        if p.size != s.size {
            return Err(misplaced("ADU size differs from its other SUs'"));
        }
        if !p.got.insert((s.tu, s.su)) {
            return Err(misplaced("received twice"));
        }
        // One claim per (TU, SU) of an ADU whose size, TU and links are the stream's: the
        // claims' ranges are disjoint (su_range), and inside the ADU (checked above).
        let claim = Claim::new(p.data.clone(), at as usize, len as usize)
            .ok_or_else(|| misplaced("outside its ADU"))?;
        Ok(Placed {
            link,
            su: *s,
            len,
            claim,
        })
    }

    /// An SU placed by [`Reassembler::place`] whose payload is in, with the payload's
    /// CRC32C: the bytes count once the CRC matches, and what is whole goes out.
    ///
    /// # Errors
    /// [`ReassemblyError::Checksum`] when the CRC is not the frame's.
    pub(crate) fn complete(&mut self, p: Placed, crc: u32) -> Result<(), ReassemblyError> {
        let Placed {
            link,
            su: s,
            len,
            claim,
        } = p;
        drop(claim);
        if crc != s.crc {
            return Err(ReassemblyError::Checksum {
                stream: s.stream,
                adu: s.adu,
                tu: s.tu,
                su: s.su,
                link,
                got: crc,
                want: s.crc,
            });
        }
        if let Some(p) = self
            .streams
            .get_mut(&s.stream)
            .and_then(|st| st.adus.get_mut(&s.adu))
        {
            p.have += len;
        }
        self.release();
        Ok(())
    }

    /// Whether events are waiting for [`Reassembler::next_event`].
    pub(crate) fn has_events(&self) -> bool {
        !self.events.is_empty()
    }

    /// How many events are waiting for [`Reassembler::next_event`].
    pub(crate) fn events_waiting(&self) -> usize {
        self.events.len()
    }

    fn close(&mut self, link: u16, c: &Close) -> Result<(), ReassemblyError> {
        let Some(st) = self.streams.get_mut(&c.stream) else {
            return Err(ReassemblyError::Stream {
                stream: c.stream,
                what: "closed but never opened",
            });
        };
        if !st.closed.insert(link) {
            return Err(ReassemblyError::Stream {
                stream: c.stream,
                what: "closed twice on one link",
            });
        }
        if *st.sent.get_or_insert(c.adus) != c.adus {
            return Err(ReassemblyError::Stream {
                stream: c.stream,
                what: "its links announce different ADU counts",
            });
        }
        Ok(())
    }

    /// Hands out what the streams' order allows, until nothing more can go.
    fn release(&mut self) {
        loop {
            let mut progressed = false;
            let ids: Vec<u32> = self.streams.keys().copied().collect();
            for id in ids {
                progressed |= self.release_stream(id);
            }
            if !progressed {
                return;
            }
        }
    }

    /// Whether stream `id` may hand out anything yet (the stream it is sequenced after has
    /// ended).
    fn may_start(&self, id: u32) -> bool {
        match self.streams.get(&id).map(|s| s.open.after) {
            Some(NOT_SEQUENCED) | None => true,
            Some(after) => self.streams.get(&after).is_some_and(|a| a.ended),
        }
    }

    /// Whether ADU `n` of every other live stream of group `group` is whole (or the member
    /// has ended), so the group's ADU `n` can go out together.
    fn group_ready(&self, group: u32, n: u64) -> bool {
        group == 0
            || self.streams.values().all(|s| {
                s.open.group != group
                    || s.ended
                    || s.next > n
                    || s.adus.get(&n).is_some_and(Partial::whole)
            })
    }

    fn release_stream(&mut self, id: u32) -> bool {
        if !self.ordered() {
            return self.release_pieces(id);
        }
        if !self.may_start(id) {
            return false;
        }
        let Some(st) = self.streams.get(&id) else {
            return false;
        };
        if st.ended {
            return false;
        }
        let (n, group) = (st.next, st.open.group);
        if st.adus.get(&n).is_some_and(Partial::whole) {
            // A whole ADU goes out with its group's, even after its stream closed on every
            // link: it waits until every other member has its ADU `n` whole, has gone past
            // it or has ended, which each does once its own links closed or were lost.
            if !self.group_ready(group, n) {
                return false;
            }
            let Some(st) = self.streams.get_mut(&id) else {
                return false;
            };
            let (data, size) = st
                .adus
                .remove(&n)
                .map(|p| (AduBuf::into_vec(p.data), p.size))
                .unwrap_or_default();
            if self.share.is_some() {
                st.out.insert(n, size);
            }
            self.buffered -= data.len() as u64;
            self.ready += data.len() as u64;
            self.max_ready = self.max_ready.max(self.ready);
            st.next += 1;
            self.events.push_back(Event::Adu {
                stream: id,
                adu: n,
                data,
            });
            return true;
        }
        let links = self.held();
        let Some(st) = self.streams.get_mut(&id) else {
            return false;
        };
        if st.closed.len() + st.lost.len() < links {
            return false;
        }
        // Closed or lost on every link: every SU that will come has come, and what is not
        // whole never will be. Without a close, the stream had as many ADUs as arrived.
        let sent = st
            .sent
            .unwrap_or_else(|| st.adus.keys().next_back().map_or(n, |&k| k + 1));
        if n < sent {
            st.lossy = true;
            if let Some(p) = st.adus.remove(&n) {
                self.buffered -= p.want;
                self.events.push_back(Event::Incomplete {
                    stream: id,
                    adu: n,
                    have: p.have,
                    size: p.size,
                });
                st.next += 1;
            } else {
                // ADUs of which nothing arrived, up to the next one something came for.
                let to = st
                    .adus
                    .range(n..)
                    .next()
                    .map_or(sent, |(&k, _)| k.min(sent));
                self.events.push_back(Event::Missing {
                    stream: id,
                    from: n,
                    to,
                });
                st.next = to;
            }
            return true;
        }
        // SUs of ADUs past the count the sender announced are reported, then the end.
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
        let complete = !st.lossy && st.lost.is_empty();
        self.events.push_back(Event::Ended {
            stream: id,
            adus: sent,
            complete,
        });
        true
    }
}
