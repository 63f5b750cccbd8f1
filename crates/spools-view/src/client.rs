//! One page's WebSocket: the viewer sends it the panels and their newest frames, one
//! message at a time; the page acknowledges each once drawn, and only then gets the next.
//! A page that draws slowly therefore skips frames (it always gets the newest), and
//! nothing queues: neither here nor in the job, whose stream the receiver keeps reading.

use std::collections::HashMap;
use std::net::TcpStream;
use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::time::{Duration, Instant};

use serde_json::{json, Value};
use tungstenite::protocol::{Role, WebSocketConfig};
use tungstenite::{Message, WebSocket};

use crate::board::{Board, Shown, State};
use crate::render::{encode, Encoding, Image};
use crate::shared::Shared;

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
/// panel, then the bytes of every frame the page has not had yet (docs/view.md, "The page's
/// WebSocket").
fn message(shared: &Shared, page: &mut Page) -> Vec<u8> {
    // Under the lock: only what is needed to build the message.
    let (panels, totals) = snapshot(&shared.board(), page);
    build(panels, totals, page)
}

/// Every panel's description and its frame if the page has not had it, and the totals.
fn snapshot(b: &Board, page: &Page) -> (Vec<PanelNow>, Value) {
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
}

/// The message of a snapshot: its frames encoded (once per frame, encoding and scale) and
/// noted as sent to the page.
fn build(panels: Vec<PanelNow>, totals: Value, page: &mut Page) -> Vec<u8> {
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

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

    use super::*;
    use crate::render::pixels;
    use spools_proto::framebuffer::FrameHeader;

    /// docs/view.md, whose test vectors these tests read.
    const DOC: &str = include_str!("../../../docs/view.md");

    /// The bytes of the block of hex digits that follows `marker` in the page.
    fn hex_block(marker: &str) -> Vec<u8> {
        let at = DOC.find(marker).expect("the marker in docs/view.md") + marker.len();
        let rest = &DOC[at..];
        let start = rest.find("```text\n").expect("a fenced block after it") + 8;
        let len = rest[start..].find("```").expect("the block's end");
        let digits: Vec<u8> = rest[start..start + len]
            .bytes()
            .filter(|b| !b.is_ascii_whitespace())
            .collect();
        digits
            .chunks(2)
            .map(|d| u8::from_str_radix(std::str::from_utf8(d).unwrap(), 16).unwrap())
            .collect()
    }

    /// The next message for page `p`.
    fn next(b: &Board, p: &mut Page) -> Vec<u8> {
        let (panels, totals) = snapshot(b, p);
        build(panels, totals, p)
    }

    fn page(fit: u32, encoding: Encoding) -> Page {
        Page {
            sent: HashMap::new(),
            version: u64::MAX,
            at: Instant::now(),
            waiting: false,
            fit,
            encoding,
        }
    }

    /// The page's view of a message: the JSON and the images after it.
    fn split(msg: &[u8]) -> (Value, &[u8]) {
        let n = u32::from_le_bytes(msg[..4].try_into().unwrap()) as usize;
        (
            serde_json::from_slice(&msg[4..4 + n]).unwrap(),
            &msg[4 + n..],
        )
    }

    #[test]
    fn the_docs_message_is_what_a_new_page_is_sent() {
        let adu = hex_block("<!-- vector: frame -->");
        let want = hex_block("<!-- vector: message -->");
        let mut b = Board::default();
        b.on_adu(0x0123_4567_89ab_cdef, 1, adu.clone(), Instant::now(), None);
        let mut p = page(0, Encoding::Raw);
        let (panels, totals) = snapshot(&b, &p);
        let got = build(panels, totals, &mut p);
        // The same JSON and the same images. The JSON's keys may come in another order
        // (serde_json keeps insertion order or sorts, by the features a build unifies),
        // which the spec leaves open: a page parses the JSON.
        let ((gj, gi), (wj, wi)) = (split(&got), split(&want));
        assert_eq!(gj, wj);
        assert_eq!(gi, wi);
        // Decoded as the page decodes it: the image is the frame through its palette.
        let (json, images) = split(&want);
        let f = &json["panels"][0]["frame"];
        assert_eq!(
            (f["n"].as_u64(), f["encoding"].as_str()),
            (Some(7), Some("raw"))
        );
        let (h, px) = FrameHeader::decode(&adu).unwrap();
        let (iw, ih, rgba) = pixels(&h, px, 1, 4);
        assert_eq!((f["iw"].as_u64(), f["ih"].as_u64()), (Some(2), Some(2)));
        assert_eq!((iw, ih), (2, 2));
        assert_eq!(images, &rgba[..]);
        assert_eq!(
            rgba,
            [58, 82, 138, 255, 35, 144, 138, 255, 68, 1, 84, 255, 253, 231, 37, 255]
        );
        // The next message has no frame: the page has it.
        let msg = next(&b, &mut p);
        let (json, images) = split(&msg);
        assert!(json["panels"][0].get("frame").is_none());
        assert!(images.is_empty());
    }

    #[test]
    fn the_pages_messages_resend_and_decimate() {
        let h = FrameHeader::image(spools_proto::framebuffer::PixelFormat::Grey8, 5, 3);
        let mut adu = h.encode().to_vec();
        adu.extend(0u8..15);
        let mut b = Board::default();
        b.on_adu(9, 2, adu, Instant::now(), None);
        let mut p = page(0, Encoding::Raw);
        next(&b, &mut p);
        p.waiting = true;
        // `fit 2`: every third pixel of every third row (scale = ceil(5 / 2)); the frame is
        // sent again; the ack is still owed.
        on_text(&mut p, "fit 2");
        assert!(p.waiting);
        on_text(&mut p, "ack");
        assert!(!p.waiting);
        let msg = next(&b, &mut p);
        let (json, images) = split(&msg);
        let f = &json["panels"][0]["frame"];
        assert_eq!((f["iw"].as_u64(), f["ih"].as_u64()), (Some(2), Some(1)));
        assert_eq!(images, [0, 0, 0, 255, 3, 3, 3, 255]);
        on_text(&mut p, "encoding jpeg");
        let msg = next(&b, &mut p);
        let (json, images) = split(&msg);
        assert_eq!(json["panels"][0]["frame"]["encoding"], "jpeg");
        assert_eq!(
            (&images[..2], &images[images.len() - 2..]),
            (&[0xff, 0xd8][..], &[0xff, 0xd9][..])
        );
        // Words it does not know change nothing.
        on_text(&mut p, "frobnicate 3");
        let (panels, _) = snapshot(&b, &p);
        assert!(panels.iter().all(|(_, f)| f.is_none()));
    }
}
