//! What the viewer shows (sans-IO): one panel per stream of every connection, the latest
//! frame of each, and lock step for synchronised groups. Frames of a group are published
//! together once every member has frame n, so a page never shows frames of different
//! numbers from one group. Arrival counts and rates are kept per panel.

use std::collections::{BTreeMap, VecDeque};
use std::sync::{Arc, Mutex, PoisonError};
use std::time::Instant;

use spools_proto::framebuffer::{FrameHeader, HEADER_LEN};
use spools_stream::Recycler;

/// Frame numbers of a group held while waiting for the rest of the group.
const PENDING: usize = 8;
/// Arrivals a panel's rate is measured over.
const RATE_WINDOW: usize = 30;
/// Panels shown at most; the oldest closed ones go first.
pub(crate) const MAX_PANELS: usize = 64;

/// Encodings of a frame, by (encoding key, scale).
type Encodings = Vec<((u8, u32), Arc<crate::render::Image>)>;
/// Frames of a group waiting for the rest: frame number -> (stream, frame).
type Waiting = BTreeMap<u64, Vec<(u32, Arc<Shown>)>>;

/// One frame as received: its header and the ADU's bytes (header included).
pub(crate) struct Shown {
    /// The frame's header.
    pub(crate) header: FrameHeader,
    /// The whole ADU; the pixels are `data[HEADER_LEN..]`.
    data: Vec<u8>,
    /// Publication order on the board (every published frame has a new one).
    pub(crate) seq: u64,
    /// Encodings made of it, by (encoding, scale): made once, for the first page asking.
    pub(crate) encoded: Mutex<Encodings>,
    recycle: Option<Recycler>,
}

impl Shown {
    /// The frame's pixels.
    pub(crate) fn pixels(&self) -> &[u8] {
        &self.data[HEADER_LEN..]
    }

    /// The encoding of this frame as `key`, made by `make` the first time.
    pub(crate) fn encoding(
        &self,
        key: (u8, u32),
        make: impl FnOnce() -> crate::render::Image,
    ) -> Arc<crate::render::Image> {
        let mut e = self.encoded.lock().unwrap_or_else(PoisonError::into_inner);
        if let Some((_, img)) = e.iter().find(|(k, _)| *k == key) {
            return Arc::clone(img);
        }
        let img = Arc::new(make());
        e.push((key, Arc::clone(&img)));
        img
    }
}

impl Drop for Shown {
    fn drop(&mut self) {
        if let Some(r) = &self.recycle {
            r.give(std::mem::take(&mut self.data));
        }
    }
}

/// How a panel's stream stands.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) enum State {
    /// Frames may come.
    Live,
    /// The stream ended with every frame sent.
    Closed,
    /// The stream ended otherwise, or sent something that is no frame: why.
    Failed(String),
}

/// One stream's panel.
pub(crate) struct Panel {
    /// Stable id on this board.
    pub(crate) id: u64,
    /// The logical connection and the stream.
    pub(crate) conn: u64,
    pub(crate) stream: u32,
    /// Its group (0: none), from its latest frame.
    pub(crate) group: u32,
    /// The frame to show.
    pub(crate) latest: Option<Arc<Shown>>,
    /// Frames received whole.
    pub(crate) received: u64,
    pub(crate) state: State,
    arrivals: VecDeque<Instant>,
}

impl Panel {
    /// Frames per second over the latest arrivals.
    pub(crate) fn rate(&self) -> f64 {
        match (self.arrivals.front(), self.arrivals.back()) {
            (Some(a), Some(b)) if self.arrivals.len() > 1 => {
                let s = b.duration_since(*a).as_secs_f64();
                if s > 0.0 {
                    (self.arrivals.len() - 1) as f64 / s
                } else {
                    0.0
                }
            }
            _ => 0.0,
        }
    }
}

/// Every panel, and the frames of groups waiting for their other members.
#[derive(Default)]
pub(crate) struct Board {
    pub(crate) panels: Vec<Panel>,
    /// (connection, group) -> frame number -> members' frames so far.
    pending: BTreeMap<(u64, u32), Waiting>,
    /// Changes with every change a page shows.
    pub(crate) version: u64,
    next_seq: u64,
    next_id: u64,
    /// Frames received whole, of every panel.
    pub(crate) received: u64,
    /// ADUs that were no frame.
    pub(crate) refused: u64,
    /// Streams of connections that ended.
    pub(crate) connections: u64,
}

impl Board {
    /// The panel of `(conn, stream)`, made on first sight.
    fn panel(&mut self, conn: u64, stream: u32) -> &mut Panel {
        if let Some(i) = self
            .panels
            .iter()
            .position(|p| p.conn == conn && p.stream == stream)
        {
            return &mut self.panels[i];
        }
        // A new connection: panels of connections whose streams all ended make way.
        if !self.panels.iter().any(|p| p.conn == conn) {
            self.connections += 1;
            let ended: Vec<u64> = self
                .panels
                .iter()
                .map(|p| p.conn)
                .filter(|&c| {
                    self.panels
                        .iter()
                        .all(|p| p.conn != c || p.state != State::Live)
                })
                .collect();
            self.panels.retain(|p| !ended.contains(&p.conn));
            self.pending.retain(|(c, _), _| !ended.contains(c));
        }
        if self.panels.len() >= MAX_PANELS {
            let i = self
                .panels
                .iter()
                .position(|p| p.state != State::Live)
                .unwrap_or(0);
            let gone = self.panels.remove(i);
            if !self.panels.iter().any(|p| p.conn == gone.conn) {
                self.pending.retain(|(c, _), _| *c != gone.conn);
            }
        }
        self.next_id += 1;
        self.panels.push(Panel {
            id: self.next_id,
            conn,
            stream,
            group: 0,
            latest: None,
            received: 0,
            state: State::Live,
            arrivals: VecDeque::new(),
        });
        self.panels.sort_by_key(|p| (p.conn, p.stream));
        let i = self
            .panels
            .iter()
            .position(|p| p.conn == conn && p.stream == stream)
            .unwrap_or(0);
        &mut self.panels[i]
    }

    /// An ADU of stream `stream` of connection `conn` arrived at `now`: a frame to show
    /// (at once, or with the rest of its group), or something else to report.
    pub(crate) fn on_adu(
        &mut self,
        conn: u64,
        stream: u32,
        data: Vec<u8>,
        now: Instant,
        recycle: Option<Recycler>,
    ) {
        let header = match FrameHeader::decode(&data) {
            Ok((h, _)) => h,
            Err(e) => {
                self.refused += 1;
                self.panel(conn, stream).state = State::Failed(format!("not a frame: {e}"));
                self.version += 1;
                return;
            }
        };
        self.received += 1;
        self.next_seq += 1;
        let (group, members, frame) = (header.group, header.members, header.frame);
        let shown = Arc::new(Shown {
            header,
            data,
            seq: self.next_seq,
            encoded: Mutex::new(Vec::new()),
            recycle,
        });
        let p = self.panel(conn, stream);
        p.received += 1;
        p.group = group;
        p.arrivals.push_back(now);
        if p.arrivals.len() > RATE_WINDOW {
            p.arrivals.pop_front();
        }
        if group == 0 {
            p.latest = Some(shown);
            self.version += 1;
            return;
        }
        let waiting = self.pending.entry((conn, group)).or_default();
        let set = waiting.entry(frame).or_default();
        set.retain(|(s, _)| *s != stream);
        set.push((stream, shown));
        if set.len() >= usize::from(members) {
            let set = waiting.remove(&frame).unwrap_or_default();
            // Older frame numbers of the group can no longer be shown in step.
            waiting.retain(|&n, _| n > frame);
            for (s, f) in set {
                if let Some(p) = self
                    .panels
                    .iter_mut()
                    .find(|p| p.conn == conn && p.stream == s)
                {
                    p.latest = Some(f);
                }
            }
            self.version += 1;
        } else {
            // The receiver hands a group's ADU n out together (lock step), so frames wait
            // here only until the rest of their set arrives; a bound all the same.
            while waiting.len() > PENDING {
                waiting.pop_first();
            }
        }
    }

    /// Stream `stream` of connection `conn` ended: `complete`, or why not.
    pub(crate) fn on_end(&mut self, conn: u64, stream: u32, outcome: Result<(), String>) {
        let p = self.panel(conn, stream);
        // A stream that already failed (it sent something that is no frame) stays failed.
        if !matches!(p.state, State::Failed(_)) {
            p.state = match outcome {
                Ok(()) => State::Closed,
                Err(why) => State::Failed(why),
            };
        }
        self.version += 1;
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use spools_proto::framebuffer::PixelFormat;

    fn frame(n: u64, group: u32, members: u16) -> Vec<u8> {
        let h = FrameHeader {
            frame: n,
            group,
            members,
            ..FrameHeader::image(PixelFormat::Grey8, 2, 1)
        };
        let mut d = h.encode().to_vec();
        d.extend_from_slice(&[n as u8, 0]);
        d
    }

    fn shown(b: &Board) -> Vec<Option<u64>> {
        b.panels
            .iter()
            .map(|p| p.latest.as_ref().map(|f| f.header.frame))
            .collect()
    }

    #[test]
    fn a_group_is_shown_in_lock_step() {
        let mut b = Board::default();
        let t = Instant::now();
        b.on_adu(1, 1, frame(0, 3, 2), t, None);
        assert_eq!(shown(&b), vec![None]);
        b.on_adu(1, 2, frame(0, 3, 2), t, None);
        assert_eq!(shown(&b), vec![Some(0), Some(0)]);
        b.on_adu(1, 2, frame(1, 3, 2), t, None);
        assert_eq!(shown(&b), vec![Some(0), Some(0)]);
        b.on_adu(1, 1, frame(1, 3, 2), t, None);
        assert_eq!(shown(&b), vec![Some(1), Some(1)]);
        // A stream alone is shown at once.
        b.on_adu(1, 3, frame(5, 0, 0), t, None);
        assert_eq!(shown(&b), vec![Some(1), Some(1), Some(5)]);
        assert_eq!(b.received, 5);
    }

    #[test]
    fn garbage_and_ends_are_reported_on_the_panel() {
        let mut b = Board::default();
        b.on_adu(7, 1, b"not a frame".to_vec(), Instant::now(), None);
        assert!(matches!(&b.panels[0].state, State::Failed(w) if w.contains("not a frame")));
        b.on_end(7, 1, Ok(()));
        assert!(matches!(&b.panels[0].state, State::Failed(_)));
        b.on_end(7, 2, Ok(()));
        assert_eq!(b.panels[1].state, State::Closed);
        // A new connection: the old one's ended panels make way.
        b.on_adu(8, 1, frame(0, 0, 0), Instant::now(), None);
        assert_eq!(b.panels.len(), 1);
        assert_eq!(b.connections, 2);
    }
}
