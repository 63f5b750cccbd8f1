//! The viewer: a stream receiver taking frames from any number of connections, and a page
//! served over HTTP with a WebSocket per open page.

use std::io::{Read, Write};
use std::net::{SocketAddr, TcpListener, TcpStream};
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use spools_proto::auth::Secret;
use spools_stream::{Admission, Delivery, Event, Limits, Receiver};

use crate::board::Board;
use crate::error::ViewError;
use crate::http::{head_end, response, route, upgrade, Route, MAX_HEAD};
use crate::render::Encoding;
use crate::shared::Shared;

/// The page, self-contained: nothing is fetched from anywhere else.
const PAGE: &str = include_str!("page.html");
/// HTTP connections served at once; more are answered 503.
const MAX_HTTP: usize = 64;
/// How long a client has to send its request head.
const HEAD_TIMEOUT: Duration = Duration::from_secs(5);
/// The longest the page's port waits after accepting failed before it tries again (from
/// 1 ms, doubling).
const MAX_BACKOFF: Duration = Duration::from_millis(250);

/// Where the viewer listens and how it sends frames to pages.
#[derive(Clone, Debug)]
pub struct ViewOptions {
    /// Where frame streams arrive, `HOST:PORT` (port 0: any free port).
    pub frames: String,
    /// Where the page is served (port 0: any free port).
    pub http: SocketAddr,
    /// Serve the page on an interface other than loopback; the page then needs the token
    /// the viewer prints in its URL.
    pub allow_remote: bool,
    /// How frames travel to pages unless a page asks otherwise.
    pub encoding: Encoding,
    /// The job secret whose proof the streams' links must give (`None`: any sender).
    pub secret: Option<Secret>,
    /// The largest frames and the most held at once.
    pub limits: Limits,
    /// The most links of frame streams held at once, pending and served, and the time a
    /// link has to say its hello (see [`Admission`]).
    pub admission: Admission,
}

impl Default for ViewOptions {
    /// Frames on 127.0.0.1, any port; the page on 127.0.0.1:8080; raw RGBA (faster into a
    /// page on the same machine than JPEG, see docs/view.md); no secret; frames of up to
    /// 256 MiB, 1 GiB held; the receiver's default [`Admission`].
    fn default() -> Self {
        ViewOptions {
            frames: "127.0.0.1:0".into(),
            http: SocketAddr::from(([127, 0, 0, 1], 8080)),
            allow_remote: false,
            encoding: Encoding::Raw,
            secret: None,
            limits: Limits {
                max_adu: 256 << 20,
                max_buffered: 1 << 30,
            },
            admission: Admission::default(),
        }
    }
}

/// A live view of frame streams: bound, not yet serving ([`Viewer::run`], [`Viewer::start`]).
///
/// ```no_run
/// use spools_view::{ViewOptions, Viewer};
/// let v = Viewer::bind(ViewOptions { frames: "127.0.0.1:7000".into(), ..Default::default() })?;
/// println!("open {}", v.url());
/// v.run()?; // until the process ends
/// # Ok::<(), spools_view::ViewError>(())
/// ```
pub struct Viewer {
    receiver: Receiver,
    http: TcpListener,
    shared: Arc<Shared>,
    frames_addr: SocketAddr,
    http_addr: SocketAddr,
}

/// A viewer serving in the background ([`Viewer::start`]).
pub struct Running {
    shared: Arc<Shared>,
    frames_addr: SocketAddr,
    url: String,
}

/// What a viewer has seen so far.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ViewStats {
    /// Frames received whole.
    pub received: u64,
    /// ADUs that were no frame.
    pub refused: u64,
    /// Connections that sent frames.
    pub connections: u64,
    /// Pages open now.
    pub pages: usize,
}

impl Viewer {
    /// Binds the frames' port and the page's.
    ///
    /// # Errors
    /// [`ViewError::NotLoopback`] for a page on another interface without
    /// `allow_remote`; [`ViewError::BindFrames`], [`ViewError::BindHttp`],
    /// [`ViewError::Random`].
    pub fn bind(opts: ViewOptions) -> Result<Viewer, ViewError> {
        if !opts.http.ip().is_loopback() && !opts.allow_remote {
            return Err(ViewError::NotLoopback(opts.http));
        }
        let token = if opts.http.ip().is_loopback() {
            None
        } else {
            let mut b = [0u8; 16];
            getrandom::fill(&mut b).map_err(|e| ViewError::Random(e.into()))?;
            Some(b.iter().map(|x| format!("{x:02x}")).collect())
        };
        let mut receiver = Receiver::bind(opts.frames.as_str(), opts.limits)
            .map_err(|source| ViewError::BindFrames {
                addr: opts.frames.clone(),
                source,
            })?
            .admission(opts.admission);
        if let Some(s) = opts.secret {
            receiver = receiver.require_proof(s);
        }
        let frames_addr = receiver
            .local_addr()
            .map_err(|source| ViewError::BindFrames {
                addr: opts.frames.clone(),
                source,
            })?;
        let http = TcpListener::bind(opts.http).map_err(|source| ViewError::BindHttp {
            addr: opts.http,
            source,
        })?;
        let http_addr = http.local_addr().map_err(|source| ViewError::BindHttp {
            addr: opts.http,
            source,
        })?;
        Ok(Viewer {
            receiver,
            http,
            shared: Arc::new(Shared {
                board: Mutex::new(Board::default()),
                stop: AtomicBool::new(false),
                encoding: opts.encoding,
                pages: AtomicUsize::new(0),
                token,
                http: AtomicUsize::new(0),
            }),
            frames_addr,
            http_addr,
        })
    }

    /// Where senders stream frames to.
    pub fn frames_addr(&self) -> SocketAddr {
        self.frames_addr
    }

    /// The page's address (with its token when it is served beyond loopback).
    pub fn url(&self) -> String {
        url(self.http_addr, self.shared.token.as_deref())
    }

    /// Serves pages and receives frames until the process ends.
    ///
    /// # Errors
    /// [`ViewError::Thread`], or [`ViewError::Receive`] when the frames' port fails.
    pub fn run(self) -> Result<(), ViewError> {
        let Viewer {
            receiver,
            http,
            shared,
            ..
        } = self;
        spawn_http(http, &shared)?;
        receive(receiver, &shared)
    }

    /// Serves pages and receives frames on threads of their own, until the process ends.
    ///
    /// # Errors
    /// [`ViewError::Thread`].
    pub fn start(self) -> Result<Running, ViewError> {
        let url = self.url();
        let Viewer {
            receiver,
            http,
            shared,
            frames_addr,
            ..
        } = self;
        spawn_http(http, &shared)?;
        let s = Arc::clone(&shared);
        std::thread::Builder::new()
            .name("spools-view-frames".into())
            .spawn(move || {
                if let Err(e) = receive(receiver, &s) {
                    eprintln!("spools view: {e}");
                }
            })
            .map_err(ViewError::Thread)?;
        Ok(Running {
            shared,
            frames_addr,
            url,
        })
    }
}

impl Running {
    /// Where senders stream frames to.
    pub fn frames_addr(&self) -> SocketAddr {
        self.frames_addr
    }

    /// The page's address.
    pub fn url(&self) -> &str {
        &self.url
    }

    /// What the viewer has seen so far.
    pub fn stats(&self) -> ViewStats {
        let b = self.shared.board();
        ViewStats {
            received: b.received,
            refused: b.refused,
            connections: b.connections,
            pages: self.shared.pages.load(Ordering::Relaxed),
        }
    }
}

fn url(addr: SocketAddr, token: Option<&str>) -> String {
    match token {
        Some(t) => format!("http://{addr}/?token={t}"),
        None => format!("http://{addr}/"),
    }
}

/// Receives frames into the board; never waits for a page.
fn receive(receiver: Receiver, shared: &Arc<Shared>) -> Result<(), ViewError> {
    let bin = receiver.recycler();
    receiver.serve(usize::MAX, |d: Delivery| {
        let mut b = shared.board();
        match d.event {
            Event::Adu { stream, data, .. } => {
                b.on_adu(d.conn, stream, data, Instant::now(), Some(bin.clone()));
            }
            Event::Ended {
                stream,
                complete: true,
                ..
            } => b.on_end(d.conn, stream, Ok(())),
            Event::Ended { stream, adus, .. } => b.on_end(
                d.conn,
                stream,
                Err(format!("stream cut after {adus} frames")),
            ),
            Event::Incomplete {
                stream,
                adu,
                have,
                size,
            } => b.on_end(
                d.conn,
                stream,
                Err(format!("frame {adu} incomplete ({have} of {size} bytes)")),
            ),
            Event::Missing { stream, from, to } => {
                b.on_end(
                    d.conn,
                    stream,
                    Err(format!("frames {from}..{to} never arrived")),
                );
            }
        }
        Ok(())
    })?;
    Ok(())
}

fn spawn_http(http: TcpListener, shared: &Arc<Shared>) -> Result<(), ViewError> {
    let shared = Arc::clone(shared);
    std::thread::Builder::new()
        .name("spools-view-http".into())
        .spawn(move || {
            let mut backoff = Duration::ZERO;
            for conn in http.incoming() {
                if shared.stop.load(Ordering::Relaxed) {
                    break;
                }
                let conn = match conn {
                    Ok(c) => {
                        backoff = Duration::ZERO;
                        c
                    }
                    Err(_) => {
                        // Out of file descriptors (or another passing failure): wait a
                        // little rather than spin, then accept again.
                        backoff = (backoff * 2).clamp(Duration::from_millis(1), MAX_BACKOFF);
                        std::thread::sleep(backoff);
                        continue;
                    }
                };
                if shared.http.fetch_add(1, Ordering::AcqRel) >= MAX_HTTP {
                    shared.http.fetch_sub(1, Ordering::AcqRel);
                    let _ = (&conn).write_all(&response(
                        503,
                        "Service Unavailable",
                        "text/plain",
                        b"busy\n",
                    ));
                    continue;
                }
                let s = Arc::clone(&shared);
                let spawned = std::thread::Builder::new()
                    .name("spools-view-page".into())
                    .spawn(move || {
                        serve_http(conn, &s);
                        s.http.fetch_sub(1, Ordering::AcqRel);
                    });
                if spawned.is_err() {
                    shared.http.fetch_sub(1, Ordering::AcqRel);
                }
            }
        })
        .map_err(ViewError::Thread)?;
    Ok(())
}

/// One HTTP connection: a request head within its limits and its time, then the page, the
/// frames' WebSocket, or an error status.
fn serve_http(mut conn: TcpStream, shared: &Arc<Shared>) {
    if conn.set_read_timeout(Some(HEAD_TIMEOUT)).is_err()
        || conn.set_write_timeout(Some(HEAD_TIMEOUT)).is_err()
    {
        return;
    }
    let mut buf = Vec::with_capacity(1024);
    let mut chunk = [0u8; 1024];
    let deadline = Instant::now() + HEAD_TIMEOUT;
    let end = loop {
        if let Some(end) = head_end(&buf) {
            break end;
        }
        if buf.len() > MAX_HEAD {
            let _ = conn.write_all(&response(
                431,
                "Request Header Fields Too Large",
                "text/plain",
                b"request head over 8 KiB\n",
            ));
            return;
        }
        let slow = Instant::now() > deadline;
        let got = if slow {
            None
        } else {
            Some(conn.read(&mut chunk))
        };
        match got {
            Some(Ok(0)) => return,
            // Never more than one byte past the limit: the next turn refuses it.
            Some(Ok(n)) => buf.extend_from_slice(&chunk[..n.min(MAX_HEAD + 1 - buf.len())]),
            Some(Err(e))
                if !matches!(
                    e.kind(),
                    std::io::ErrorKind::WouldBlock | std::io::ErrorKind::TimedOut
                ) =>
            {
                return
            }
            None | Some(Err(_)) => {
                let _ = conn.write_all(&response(
                    408,
                    "Request Timeout",
                    "text/plain",
                    b"request head not sent within 5 s\n",
                ));
                return;
            }
        }
    };
    match route(&buf[..end], shared.token.as_deref()) {
        Route::Page => {
            let _ = conn.write_all(&response(
                200,
                "OK",
                "text/html; charset=utf-8",
                PAGE.as_bytes(),
            ));
        }
        Route::NoContent => {
            let _ = conn.write_all(&response(204, "No Content", "text/plain", b""));
        }
        Route::Status(code, why) => {
            let _ = conn.write_all(&response(
                code,
                why,
                "text/plain",
                format!("{code} {why}\n").as_bytes(),
            ));
        }
        Route::Frames { key } => {
            if conn.write_all(&upgrade(&key)).is_ok() {
                crate::client::serve(conn, buf[end..].to_vec(), shared);
            }
        }
    }
}
