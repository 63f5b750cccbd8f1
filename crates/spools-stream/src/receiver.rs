//! A receiver of streams that is not a Spools job: it accepts links on a TCP port, groups
//! them into logical connections by their hello, reassembles each connection's streams
//! and hands out whole ADUs, and serves other senders when one misbehaves.

use std::collections::HashMap;
use std::io::Write;
use std::net::{Shutdown, SocketAddr, TcpListener, TcpStream, ToSocketAddrs};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::mpsc::{channel, Sender as Tx};
use std::sync::Arc;
use std::time::Duration;

use spools_proto::auth::Secret;
use spools_proto::handshake::{Server, CLIENT_AUTH_LEN, CLIENT_HELLO_LEN};
use spools_proto::stream::{
    Close, Frame, Hello, Open, Su, Welcome, HELLO_CAN_PROVE, VERSION, WELCOME_ACKS, WELCOME_PROVEN,
    WELCOME_REQUIRE_PROOF,
};

use crate::acks::AckBoard;
use crate::link::{FrameReader, LinkError, Read1};
use crate::reassembly::{Event, Limits, Reassembler};

/// An event of one logical connection.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Delivery {
    /// The connection's id (from its hellos).
    pub conn: u64,
    /// What happened.
    pub event: Event,
}

/// What a [`Receiver::serve`] saw.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Summary {
    /// Logical connections that ended (every link closed).
    pub connections: usize,
    /// Whole ADUs handed out.
    pub adus: u64,
    /// Their bytes.
    pub bytes: u64,
    /// Clients refused before they said hello (garbage, another protocol or version):
    /// nothing of theirs was a stream.
    pub refused: Vec<String>,
    /// Connections or links dropped after their hello (frames that do not fit their
    /// streams, a link that broke mid-frame): data of theirs may be lost.
    pub broken: Vec<String>,
}

/// Why serving stopped.
#[derive(Debug, thiserror::Error)]
pub enum RecvError {
    /// Accepting a connection failed.
    #[error("accepting a connection: {0}")]
    Accept(std::io::Error),
    /// The sink refused a delivery (writing the output failed).
    #[error("writing what was received: {0}")]
    Output(std::io::Error),
}

/// Time a sender has for the secret handshake once it said hello.
pub const HANDSHAKE_TIMEOUT: Duration = Duration::from_secs(30);

/// A TCP port receiving streams. Every whole ADU handed to the sink is acknowledged to the
/// sender (`ack`, on every link of its connection), so that a sender with a window
/// ([`crate::Sender::with_window`]) is held while the sink is slow.
///
/// ```
/// use spools_stream::{Receiver, Limits};
/// let r = Receiver::bind("127.0.0.1:0", Limits::default())?;
/// assert!(r.local_addr()?.port() > 0);
/// # Ok::<(), std::io::Error>(())
/// ```
pub struct Receiver {
    listener: TcpListener,
    limits: Limits,
    secret: Option<Secret>,
}

/// A frame a link delivered, owned (it crosses threads).
enum Owned {
    Open(Open),
    Su(Su, Vec<u8>),
    Close(Close),
    Other(&'static str),
}

enum Msg {
    Hello(usize, Hello, Arc<AckBoard>),
    Frame(usize, Owned),
    End(usize, Option<String>),
    Refused(String),
    AcceptFailed(std::io::Error),
}

impl Receiver {
    /// Listens at `addr` (port 0: any free port, see [`Receiver::local_addr`]).
    ///
    /// # Errors
    /// The operating system's, binding the port.
    pub fn bind(addr: impl ToSocketAddrs, limits: Limits) -> std::io::Result<Receiver> {
        Ok(Receiver {
            listener: TcpListener::bind(addr)?,
            limits,
            secret: None,
        })
    }

    /// Requires every link to prove it knows `secret` (a job's secret, see `spools
    /// secret`) before anything of it is taken: the receiver answers `hello` with
    /// `WELCOME_REQUIRE_PROOF` and runs the job's secret handshake on the link. A link that
    /// cannot or does not prove it is named in [`Summary::refused`] and dropped; the
    /// others are served.
    ///
    /// ```
    /// use spools_proto::auth::Secret;
    /// use spools_stream::{Limits, Receiver};
    /// let r = Receiver::bind("127.0.0.1:0", Limits::default())?
    ///     .require_proof(Secret::from_bytes([7; 16]));
    /// # Ok::<(), std::io::Error>(())
    /// ```
    #[must_use]
    pub fn require_proof(self, secret: Secret) -> Receiver {
        Receiver {
            secret: Some(secret),
            ..self
        }
    }

    /// Where senders connect.
    ///
    /// # Errors
    /// The operating system's.
    pub fn local_addr(&self) -> std::io::Result<SocketAddr> {
        self.listener.local_addr()
    }

    /// Serves until `connections` logical connections have ended, handing every event to
    /// `sink` in the order the streams' constraints allow. A link that sends garbage, or a
    /// connection whose frames do not fit its streams, is dropped and named in
    /// [`Summary::refused`]; the others go on.
    ///
    /// # Errors
    /// [`RecvError`] when accepting fails or `sink` returns an error.
    pub fn serve(
        self,
        connections: usize,
        mut sink: impl FnMut(Delivery) -> std::io::Result<()>,
    ) -> Result<Summary, RecvError> {
        let (tx, rx) = channel::<Msg>();
        let stop = Arc::new(AtomicBool::new(false));
        let addr = self.listener.local_addr().map_err(RecvError::Accept)?;
        let acceptor = {
            let (tx, stop, secret) = (tx.clone(), stop.clone(), self.secret);
            let listener = self.listener;
            std::thread::spawn(move || accept_loop(&listener, &tx, &stop, secret.as_ref()))
        };
        drop(tx);
        let mut summary = Summary::default();
        // Link id -> (connection, link index); connection -> state.
        let mut links: HashMap<usize, (u64, u16)> = HashMap::new();
        let mut conns: HashMap<u64, Conn> = HashMap::new();
        let result = loop {
            if summary.connections >= connections {
                break Ok(());
            }
            let Ok(msg) = rx.recv() else {
                break Ok(());
            };
            match msg {
                Msg::AcceptFailed(e) => break Err(RecvError::Accept(e)),
                Msg::Refused(why) => summary.refused.push(why),
                Msg::Hello(id, h, acks) => {
                    let added = match conns.get_mut(&h.conn) {
                        Some(c) => c.r.as_mut().map_or(Ok(()), |r| r.add_link(&h)),
                        None => Reassembler::new(&h, self.limits).map(|r| {
                            conns.insert(h.conn, Conn::new(r, h.links));
                        }),
                    };
                    match added {
                        Ok(()) => {
                            links.insert(id, (h.conn, h.link));
                            if let Some(c) = conns.get_mut(&h.conn) {
                                c.acks.push(acks);
                            }
                        }
                        Err(e) => summary
                            .broken
                            .push(format!("connection {:016x}: {e}", h.conn)),
                    }
                }
                Msg::Frame(id, f) => {
                    let Some(&(conn, link)) = links.get(&id) else {
                        continue;
                    };
                    let Some(c) = conns.get_mut(&conn) else {
                        continue;
                    };
                    let Some(r) = c.r.as_mut() else { continue };
                    let frame = match &f {
                        Owned::Open(o) => Frame::Open(*o),
                        Owned::Su(s, p) => Frame::Su(*s, p),
                        Owned::Close(cl) => Frame::Close(*cl),
                        Owned::Other(what) => {
                            summary.broken.push(format!(
                                "connection {conn:016x}, link {link}: unexpected {what}"
                            ));
                            c.r = None;
                            continue;
                        }
                    };
                    if let Err(e) = r.on_frame(link, &frame) {
                        summary.broken.push(format!("connection {conn:016x}: {e}"));
                        c.r = None;
                        continue;
                    }
                    if let Err(e) = drain(conn, r, &c.acks, &mut sink, &mut summary) {
                        break Err(e);
                    }
                }
                Msg::End(id, error) => {
                    let Some((conn, link)) = links.remove(&id) else {
                        if let Some(e) = error {
                            summary.broken.push(e);
                        }
                        continue;
                    };
                    if let Some(e) = error {
                        summary
                            .broken
                            .push(format!("connection {conn:016x}, link {link}: {e}"));
                    }
                    let Some(c) = conns.get_mut(&conn) else {
                        continue;
                    };
                    c.ended += 1;
                    if let Some(r) = c.r.as_mut() {
                        r.link_lost(link);
                        if let Err(e) = drain(conn, r, &c.acks, &mut sink, &mut summary) {
                            break Err(e);
                        }
                    }
                    if c.ended == usize::from(c.links) {
                        summary.connections += 1;
                        conns.remove(&conn);
                    }
                }
            }
        };
        // Wake the acceptor so that it sees the stop and ends.
        stop.store(true, Ordering::SeqCst);
        let _ = TcpStream::connect(addr);
        let _ = acceptor.join();
        result.map(|()| summary)
    }
}

struct Conn {
    /// `None` once the connection was refused (its links are drained, not reassembled).
    r: Option<Reassembler>,
    links: u16,
    ended: usize,
    /// Its links' acks.
    acks: Vec<Arc<AckBoard>>,
}

impl Conn {
    fn new(r: Reassembler, links: u16) -> Conn {
        Conn {
            r: Some(r),
            links,
            ended: 0,
            acks: Vec::new(),
        }
    }
}

/// Hands what is ready to the sink, and acknowledges every whole ADU the sink took on
/// every link of the connection.
fn drain(
    conn: u64,
    r: &mut Reassembler,
    acks: &[Arc<AckBoard>],
    sink: &mut impl FnMut(Delivery) -> std::io::Result<()>,
    summary: &mut Summary,
) -> Result<(), RecvError> {
    while let Some(event) = r.next_event() {
        let ack = match &event {
            Event::Adu { stream, adu, data } => {
                summary.adus += 1;
                summary.bytes += data.len() as u64;
                Some((*stream, *adu))
            }
            _ => None,
        };
        sink(Delivery { conn, event }).map_err(RecvError::Output)?;
        if let Some((stream, adu)) = ack {
            acks.iter().for_each(|a| a.post(stream, adu));
        }
    }
    Ok(())
}

fn accept_loop(listener: &TcpListener, tx: &Tx<Msg>, stop: &AtomicBool, secret: Option<&Secret>) {
    let mut next_id = 0usize;
    loop {
        let accepted = listener.accept();
        if stop.load(Ordering::SeqCst) {
            return;
        }
        match accepted {
            Ok((sock, peer)) => {
                let (tx, id, secret) = (tx.clone(), next_id, secret.cloned());
                next_id += 1;
                std::thread::spawn(move || read_link(sock, peer, id, &tx, secret.as_ref()));
            }
            Err(e) => {
                let _ = tx.send(Msg::AcceptFailed(e));
                return;
            }
        }
    }
}

/// One link: its hello (answered with a welcome, and the secret handshake when the
/// receiver requires it), then its frames, then its end; its acks go out from a writer
/// thread of its own.
fn read_link(sock: TcpStream, peer: SocketAddr, id: usize, tx: &Tx<Msg>, secret: Option<&Secret>) {
    let Ok(mut out) = sock.try_clone() else {
        return;
    };
    let mut frames = FrameReader::new(sock);
    let h = match frames.next() {
        Ok(Read1::Frame(Frame::Hello(h))) if h.version == VERSION => h,
        Ok(Read1::Frame(Frame::Hello(h))) => {
            let _ = tx.send(Msg::Refused(format!(
                "{peer}: stream protocol version {} (this receiver speaks {VERSION})",
                h.version
            )));
            return;
        }
        Ok(Read1::Frame(_)) => {
            let _ = tx.send(Msg::Refused(format!("{peer}: no hello first")));
            return;
        }
        Ok(Read1::End) => return,
        Err(e) => {
            let _ = tx.send(Msg::Refused(format!("{peer}: {e}")));
            return;
        }
    };
    let proof = if secret.is_some() {
        WELCOME_REQUIRE_PROOF
    } else {
        0
    };
    if welcome(&mut out, WELCOME_ACKS | proof).is_err() {
        return;
    }
    if let Some(secret) = secret {
        if let Err(why) = prove(&mut frames, &mut out, secret, &h) {
            let _ = tx.send(Msg::Refused(format!(
                "{peer}: link {} of connection {:016x}: {why}",
                h.link, h.conn
            )));
            return;
        }
        if welcome(&mut out, WELCOME_ACKS | WELCOME_PROVEN).is_err() {
            return;
        }
    }
    let acks = Arc::new(AckBoard::default());
    let writer = {
        let acks = acks.clone();
        std::thread::spawn(move || acks.write_to(out))
    };
    if tx.send(Msg::Hello(id, h, acks.clone())).is_ok() {
        let error = forward_frames(&mut frames, id, tx);
        let _ = tx.send(Msg::End(id, error));
    }
    // The link ended: its writer stops (a write blocked on a sender that does not read
    // acks is woken by the shutdown), and the sender sees the end of the connection.
    acks.close();
    let _ = frames.get_ref().shutdown(Shutdown::Both);
    let _ = writer.join();
}

/// A link's frames after its hello, to the central thread, until the link ends (`Some`
/// with what went wrong when it did not end cleanly).
fn forward_frames(frames: &mut FrameReader<TcpStream>, id: usize, tx: &Tx<Msg>) -> Option<String> {
    loop {
        let owned = match frames.next() {
            Ok(Read1::End) => return None,
            Err(e) => return Some(link_error(&e)),
            Ok(Read1::Frame(f)) => match f {
                Frame::Open(o) => Owned::Open(o),
                Frame::Su(s, p) => Owned::Su(s, p.to_vec()),
                Frame::Close(c) => Owned::Close(c),
                Frame::Hello(_) => Owned::Other("second hello"),
                Frame::Welcome(_) | Frame::Ack(_) => Owned::Other("receiver's frame"),
            },
        };
        if tx.send(Msg::Frame(id, owned)).is_err() {
            return None;
        }
    }
}

fn welcome(out: &mut TcpStream, flags: u16) -> std::io::Result<()> {
    let mut w = Vec::new();
    Frame::Welcome(Welcome {
        version: VERSION,
        flags,
    })
    .encode(&mut w);
    out.write_all(&w)
}

/// The receiver's side of the secret handshake on a link: `Err` says why the sender is
/// refused.
fn prove(
    frames: &mut FrameReader<TcpStream>,
    out: &mut TcpStream,
    secret: &Secret,
    h: &Hello,
) -> Result<(), String> {
    if h.flags & HELLO_CAN_PROVE == 0 {
        return Err(
            "this receiver requires the job secret's proof, and the sender cannot give it".into(),
        );
    }
    let refused = |e: &dyn std::fmt::Display| format!("did not prove the job secret: {e}");
    let nonce = crate::random::nonce().map_err(|e| refused(&e))?;
    out.set_read_timeout(Some(HANDSHAKE_TIMEOUT))
        .map_err(|e| refused(&e))?;
    let mut hello = [0u8; CLIENT_HELLO_LEN];
    frames.read_raw(&mut hello).map_err(|e| refused(&e))?;
    let (server, reply) = Server::new(secret.clone(), nonce)
        .on_hello(&hello)
        .map_err(|e| refused(&e))?;
    out.write_all(&reply).map_err(|e| refused(&e))?;
    let mut auth = [0u8; CLIENT_AUTH_LEN];
    frames.read_raw(&mut auth).map_err(|e| refused(&e))?;
    server.on_auth(&auth).map_err(|e| refused(&e))?;
    out.set_read_timeout(None).map_err(|e| refused(&e))?;
    Ok(())
}

fn link_error(e: &LinkError) -> String {
    e.to_string()
}
