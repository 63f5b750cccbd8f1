//! One page's WebSocket: the viewer sends it the panels and their newest frames, one
//! message at a time; the page acknowledges each once drawn, and only then gets the next.
//! A page that draws slowly therefore skips frames (it always gets the newest), and
//! nothing queues: neither here nor in the job, whose stream the receiver keeps reading.

use std::collections::HashMap;
use std::net::TcpStream;
use std::sync::atomic::Ordering;
use std::sync::{Arc, PoisonError};
use std::time::{Duration, Instant};

use serde_json::{json, Value};
use tungstenite::protocol::{Role, WebSocketConfig};
use tungstenite::{Message, WebSocket};

use crate::board::{Shown, State};
use crate::render::{encode, Encoding, Image};
use crate::viewer::Shared;

/// How long a page's socket may refuse a message's bytes before the page is dropped.
const WRITE_TIMEOUT: Duration = Duration::from_secs(10);
/// How long a page may take to acknowledge a message before it is dropped (it reconnects
/// by itself; a background tab's timers may run once a minute).
const ACK_TIMEOUT: Duration = Duration::from_secs(120);
/// How often the page hears about the panels when no frame changes.
const STATS_EVERY: Duration = Duration::from_millis(500);
/// The nice value of a page's thread.
const PAGE_NICE: i32 = 10;
/// How often the socket is polled for the page's acknowledgements.
const POLL: Duration = Duration::from_millis(5);

/// What this page was last sent.
struct Page {
    /// Panel id -> sequence number of the frame sent.
    sent: HashMap<u64, u64>,
    version: u64,
    at: Instant,
    waiting: bool,
    /// Largest width of a panel on the page, in pixels (0: frames at full size).
    fit: u32,
    encoding: Encoding,
}

/// Serves one page's WebSocket until it closes, fails, or the viewer stops.
pub(crate) fn serve(stream: TcpStream, early: Vec<u8>, shared: &Arc<Shared>) {
    // A page's thread (encoding its frames) yields the CPU to everything else: on a
    // machine shared with the job, the job goes first. Linux nice values are per thread;
    // failing to lower it only costs that.
    let _ = rustix::process::setpriority_process(None, PAGE_NICE);
    if stream.set_read_timeout(Some(POLL)).is_err()
        || stream.set_write_timeout(Some(WRITE_TIMEOUT)).is_err()
    {
        return;
    }
    let config = WebSocketConfig::default()
        .max_message_size(Some(4 << 10))
        .max_frame_size(Some(4 << 10));
    let mut ws = WebSocket::from_partially_read(stream, early, Role::Server, Some(config));
    let mut page = Page {
        sent: HashMap::new(),
        version: u64::MAX,
        at: Instant::now(),
        waiting: false,
        fit: 0,
        encoding: shared.encoding,
    };
    shared.pages.fetch_add(1, Ordering::Relaxed);
    loop {
        if shared.stop.load(Ordering::Relaxed) {
            let _ = ws.close(None);
            let _ = ws.flush();
            break;
        }
        match ws.read() {
            Ok(Message::Text(t)) => on_text(&mut page, t.as_str()),
            Ok(Message::Close(_)) => break,
            Ok(_) => {}
            Err(tungstenite::Error::Io(e))
                if matches!(
                    e.kind(),
                    std::io::ErrorKind::WouldBlock | std::io::ErrorKind::TimedOut
                ) => {}
            Err(_) => break,
        }
        if page.waiting {
            if page.at.elapsed() > ACK_TIMEOUT {
                break;
            }
            continue;
        }
        let version = shared.board().version;
        if version == page.version && page.at.elapsed() < STATS_EVERY {
            continue;
        }
        let msg = message(shared, &mut page);
        page.version = version;
        page.at = Instant::now();
        page.waiting = true;
        if ws.send(Message::Binary(msg.into())).is_err() {
            break;
        }
    }
    shared.pages.fetch_sub(1, Ordering::Relaxed);
}

/// The page's messages: `ack` (the last message is drawn), `fit N` (panels are at most N
/// pixels wide), `encoding raw|jpeg`, `resume` (after a pause, in which the page drew
/// nothing). All but `ack` have every panel's newest frame sent again.
fn on_text(page: &mut Page, t: &str) {
    let mut w = t.split_whitespace();
    match (w.next(), w.next()) {
        (Some("ack"), _) => {
            page.waiting = false;
            return;
        }
        (Some("fit"), Some(n)) => page.fit = n.parse().unwrap_or(0),
        (Some("encoding"), Some("raw")) => page.encoding = Encoding::Raw,
        (Some("encoding"), Some("jpeg")) => page.encoding = Encoding::Jpeg(85),
        (Some("resume"), _) => {}
        _ => return,
    }
    page.sent.clear();
    page.version = u64::MAX;
}

fn state(s: &State) -> Value {
    match s {
        State::Live => json!("live"),
        State::Closed => json!("stream closed"),
        State::Failed(w) => json!(w),
    }
}

/// A panel's description, and its frame if the page has not had it.
type PanelNow = (Value, Option<Arc<Shown>>);

/// The next message for the page: a little-endian u32 length, a JSON description of every
/// panel, then the bytes of every frame the page has not had yet.
fn message(shared: &Shared, page: &mut Page) -> Vec<u8> {
    // Under the lock: only what is needed to build the message.
    let (panels, totals): (Vec<PanelNow>, Value) = {
        let b = shared.board();
        let panels = b
            .panels
            .iter()
            .map(|p| {
                let meta = json!({
                    "id": p.id,
                    "conn": format!("{:016x}", p.conn),
                    "stream": p.stream,
                    "group": p.group,
                    "received": p.received,
                    "rate": (p.rate() * 10.0).round() / 10.0,
                    "state": state(&p.state),
                });
                let new = p
                    .latest
                    .as_ref()
                    .filter(|f| page.sent.get(&p.id) != Some(&f.seq))
                    .map(Arc::clone);
                (meta, new)
            })
            .collect();
        let totals = json!({
            "received": b.received,
            "refused": b.refused,
            "connections": b.connections,
        });
        (panels, totals)
    };
    let mut blobs: Vec<Arc<Image>> = Vec::new();
    let mut off = 0usize;
    let mut out = Vec::new();
    for (mut meta, new) in panels {
        if let Some(f) = new {
            let h = &f.header;
            let scale = if page.fit == 0 {
                1
            } else {
                h.width.div_ceil(page.fit).max(1)
            };
            let enc = page.encoding;
            let img = f.encoding((enc.key(), scale), || encode(h, f.pixels(), scale, enc));
            if let Some(o) = meta.as_object_mut() {
                o.insert(
                    "frame".into(),
                    json!({
                        "n": h.frame,
                        "time_us": h.time_us,
                        "title": h.title,
                        "width": h.width,
                        "height": h.height,
                        "format": format!("{:?}", h.format),
                        "colormap": h.colormap.name(),
                        "lo": h.lo,
                        "hi": h.hi,
                        "members": h.members,
                        "encoding": enc.name(),
                        "iw": img.width,
                        "ih": img.height,
                        "off": off,
                        "len": img.bytes.len(),
                    }),
                );
            }
            if let Some(id) = meta.get("id").and_then(Value::as_u64) {
                page.sent.insert(id, f.seq);
            }
            off += img.bytes.len();
            blobs.push(img);
        }
        out.push(meta);
    }
    let text = json!({ "panels": out, "totals": totals }).to_string();
    let mut msg = Vec::with_capacity(4 + text.len() + off);
    msg.extend_from_slice(&(text.len() as u32).to_le_bytes());
    msg.extend_from_slice(text.as_bytes());
    for b in blobs {
        msg.extend_from_slice(&b.bytes);
    }
    msg
}

impl Shared {
    pub(crate) fn board(&self) -> std::sync::MutexGuard<'_, crate::board::Board> {
        self.board.lock().unwrap_or_else(PoisonError::into_inner)
    }
}
