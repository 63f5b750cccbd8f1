//! One link of a [`crate::Receiver`], on a thread of its own: its hello (answered with a
//! welcome, and the secret handshake when the receiver requires it), then its frames: an
//! SU's header is checked against its stream under the connection's lock, its payload is
//! read straight into the ADU's buffer and its CRC32C computed there without the lock;
//! then its end. Its acks go out from a writer thread of its own.
//!
//! A link stops reading its socket while the whole ADUs its connection made ready and the
//! serving thread has not taken yet exceed [`crate::Limits::max_buffered`]: TCP then holds
//! the sender back, with a window or without. Only whole ADUs count, so that the links can
//! always complete the partial ones (one link never waits for another).

use std::io::{Read, Write};
use std::net::{Shutdown, SocketAddr, TcpStream};
use std::sync::mpsc::{channel, Sender as Tx};
use std::sync::Arc;

use spools_proto::auth::Secret;
use spools_proto::handshake::{Server, CLIENT_AUTH_LEN, CLIENT_HELLO_LEN};
use spools_proto::stream::{
    Frame, Hello, Move, Welcome, HELLO_CAN_MOVE, HELLO_CAN_PROVE, VERSION, WELCOME_ACKS,
    WELCOME_MOVE, WELCOME_PROVEN, WELCOME_REQUIRE_PROOF,
};

use crate::acks::AckBoard;
use crate::admission::{Gate, Slot};
use crate::connection::{OnHold, Shared};
use crate::control::{Admit, AdmitFn, OnOpen};
use crate::error::ReassemblyError;
use crate::link::{FrameReader, LinkError, Read1Head};
use crate::reassembly::Event;
use crate::reassembly::Reassembler;
use crate::share::Share;
use crate::timeouts::HANDSHAKE_TIMEOUT;

/// How every link of a receiver is taken: the secret it requires, who is told when links
/// stop reading, which links it serves, moves or refuses, who is told of streams.
#[derive(Default)]
pub(crate) struct Policy {
    pub(crate) secret: Option<Secret>,
    pub(crate) on_hold: Option<OnHold>,
    pub(crate) admit: Option<AdmitFn>,
    pub(crate) on_open: Option<OnOpen>,
}

/// What the link threads tell the serving thread.
pub(crate) enum Msg {
    /// A link said hello (and proved the secret, if asked): the serving thread answers with
    /// its connection's reassembly, or `None` when it refuses the link.
    Hello {
        id: usize,
        hello: Hello,
        /// The share of its connection, when its first link decides one.
        share: Option<Share>,
        acks: Arc<AckBoard>,
        reply: Tx<Option<Arc<Shared>>>,
    },
    /// A connection has events ready.
    Ready(u64),
    /// A connection was dropped: why, and the events it had made ready before.
    Broken {
        conn: u64,
        why: String,
        /// The reassembly's refusal, when that was the cause.
        fault: Option<ReassemblyError>,
        events: Vec<Event>,
    },
    /// A link ended (with what went wrong, if it did not end cleanly).
    End(usize, Option<String>),
    /// A client refused before its hello was taken.
    Refused(String),
    /// Accepting failed.
    AcceptFailed(std::io::Error),
    /// The receiver was stopped ([`crate::Stopper`]).
    Stopped,
}

/// A link's socket, shared by its reading thread, its acks' writer and the receiver's
/// acceptor (which closes it when the link takes too long to say its hello): one file
/// descriptor per link.
pub(crate) struct Sock(pub(crate) Arc<TcpStream>);

impl Read for Sock {
    fn read(&mut self, buf: &mut [u8]) -> std::io::Result<usize> {
        (&*self.0).read(buf)
    }
}

/// What a link's hello decided, once it was taken.
struct Admitted {
    hello: Hello,
    /// The share of its connection, when its first link decides one.
    share: Option<Share>,
    /// Where it is moved, if it is.
    to: Option<SocketAddr>,
    /// Its place among the links the receiver serves.
    _slot: Slot,
}

/// One link, from its hello to its end.
pub(crate) fn read_link(
    sock: Arc<TcpStream>,
    peer: SocketAddr,
    id: usize,
    tx: &Tx<Msg>,
    policy: &Policy,
    gate: &Arc<Gate>,
) {
    let on_hold = policy.on_hold.as_ref();
    let mut frames = FrameReader::new(Sock(sock.clone()));
    let a = match admit(&mut frames, &sock, peer, id, policy, gate) {
        Ok(a) => a,
        Err(why) => {
            // Named here unless the acceptor evicted it or its time ran out (named there).
            if gate.leave(id) {
                if let Some(why) = why {
                    let _ = tx.send(Msg::Refused(why));
                }
            }
            let _ = sock.shutdown(Shutdown::Both);
            return;
        }
    };
    let h = a.hello;
    if let Some(addr) = a.to {
        return move_link(&sock, &mut frames, addr);
    }
    let acks = Arc::new(AckBoard::default());
    let writer = {
        let (acks, out) = (acks.clone(), sock.clone());
        std::thread::spawn(move || acks.write_to(&out))
    };
    let (reply, answer) = channel();
    let hello = Msg::Hello {
        id,
        hello: h,
        share: a.share,
        acks: acks.clone(),
        reply,
    };
    if tx.send(hello).is_ok() {
        if let Ok(Some(shared)) = answer.recv() {
            let link = Link {
                conn: h.conn,
                link: h.link,
                links: h.links,
                shared: &shared,
                tx,
                on_hold,
                on_open: policy.on_open.as_ref(),
            };
            let error = link.receive(&mut frames);
            shared.with(|r| r.link_lost(h.link));
            shared.changed();
            let _ = tx.send(Msg::End(id, error));
        }
    }
    // The link ended: its writer stops (a write blocked on a sender that does not read
    // acks is woken by the shutdown), and the sender sees the end of the connection.
    acks.close();
    let _ = sock.shutdown(Shutdown::Both);
    let _ = writer.join();
}

/// A pending link's hello, welcome and (when the receiver requires it) proof: `Err` with
/// why it is refused (`None`: without a word, it hung up or was closed).
fn admit(
    frames: &mut FrameReader<Sock>,
    out: &TcpStream,
    peer: SocketAddr,
    id: usize,
    policy: &Policy,
    gate: &Arc<Gate>,
) -> Result<Admitted, Option<String>> {
    // Only a frame without payload is read here: a peer that has not said hello can make
    // the link hold no more than the reader's first buffer.
    let h = match frames.next_head() {
        Ok(Read1Head::Frame(Frame::Hello(h))) if h.version == VERSION => h,
        Ok(Read1Head::Frame(Frame::Hello(h))) => {
            return Err(Some(format!(
                "{peer}: stream protocol version {} (this receiver speaks {VERSION})",
                h.version
            )))
        }
        Ok(Read1Head::Frame(_) | Read1Head::Su(..)) => {
            return Err(Some(format!("{peer}: no hello first")))
        }
        Ok(Read1Head::End) => return Err(None),
        Err(e) => return Err(Some(format!("{peer}: {e}"))),
    };
    let refuse = |why: &dyn std::fmt::Display| {
        Some(format!(
            "{peer}: link {} of connection {:016x}: {why}",
            h.link, h.conn
        ))
    };
    let admit = policy.admit.as_ref().map_or(Admit::Serve(None), |f| f(&h));
    let (share, to) = match admit {
        Admit::Refuse(why) => return Err(refuse(&why)),
        Admit::Move(_) if h.flags & HELLO_CAN_MOVE == 0 => {
            return Err(refuse(
                &"this link is served by another receiver, and the sender cannot move it",
            ))
        }
        Admit::Move(to) => (None, Some(to)),
        Admit::Serve(share) => (share, None),
    };
    // A moved link has no acks here; the last welcome says where it goes.
    let (acks_flag, moving) = match to {
        Some(_) => (0, WELCOME_MOVE),
        None => (WELCOME_ACKS, 0),
    };
    let slot = match &policy.secret {
        None => gate.promote(id).ok_or(None)?,
        Some(secret) => {
            welcome(out, acks_flag | WELCOME_REQUIRE_PROOF).map_err(|_| None)?;
            prove(frames, out, secret, &h).map_err(|why| refuse(&why))?;
            gate.promote(id).ok_or(None)?
        }
    };
    let last = match policy.secret {
        Some(_) => acks_flag | WELCOME_PROVEN | moving,
        None => acks_flag | moving,
    };
    // Served from here: a failure is its end, not a refusal.
    if welcome(out, last).is_err() {
        return Err(None);
    }
    Ok(Admitted {
        hello: h,
        share,
        to,
        _slot: slot,
    })
}

/// A link taken into its connection.
struct Link<'a> {
    conn: u64,
    link: u16,
    links: u16,
    shared: &'a Shared,
    tx: &'a Tx<Msg>,
    on_hold: Option<&'a OnHold>,
    on_open: Option<&'a OnOpen>,
}

impl Link<'_> {
    /// The link's frames after its hello, until it ends (`Some` with what went wrong when
    /// it did not end cleanly).
    fn receive(&self, frames: &mut FrameReader<Sock>) -> Option<String> {
        loop {
            self.shared.wait_room(self.on_hold);
            let step = match frames.next_head() {
                Ok(Read1Head::End) => return None,
                // Bytes that are not a frame (an SU header whose offset and length
                // overflow, ...): the sender's frames are refused, as a misplaced SU's
                // are, not taken for a link lost between ADUs.
                Err(e @ LinkError::Wire(_)) => {
                    self.drop_connection(&format!("link {}: {e}", self.link), None);
                    return None;
                }
                Err(e) => return Some(e.to_string()),
                Ok(Read1Head::Frame(f)) => {
                    self.on_frame(&f);
                    Ok(())
                }
                Ok(Read1Head::Su(s, len)) => {
                    let placed = self.shared.place(self.link, &s, len.into());
                    match placed {
                        None => frames.skip_payload(len),
                        Some(Err(e)) => {
                            self.drop_connection(&e.to_string(), Some(e));
                            frames.skip_payload(len)
                        }
                        Some(Ok(mut p)) => frames.read_payload(p.dest()).map(|crc| {
                            self.update(|r| r.complete(p, crc));
                        }),
                    }
                }
            };
            if let Err(e) = step {
                return Some(e.to_string());
            }
        }
    }

    fn on_frame(&self, f: &Frame<'_>) {
        let unexpected = match f {
            Frame::Hello(_) => Some("second hello"),
            Frame::Welcome(_) | Frame::Ack(_) | Frame::Move(_) => Some("receiver's frame"),
            Frame::Open(_) | Frame::Close(_) | Frame::Su(..) => None,
        };
        match unexpected {
            Some(what) => {
                self.drop_connection(&format!("link {}: unexpected {what}", self.link), None);
            }
            None => {
                if let (Frame::Open(o), Some(tell)) = (f, self.on_open) {
                    tell(self.links, o);
                }
                self.update(|r| r.on_frame(self.link, f));
            }
        }
    }

    /// `f` on the reassembly; the serving thread is told of the events it made ready, or the
    /// connection is dropped when it failed.
    fn update(&self, f: impl FnOnce(&mut Reassembler) -> Result<(), ReassemblyError>) {
        let mut g = self.shared.lock();
        let Some(r) = g.as_mut() else { return };
        match f(r) {
            Ok(()) => {
                let ready = r.has_events();
                drop(g);
                self.shared.changed();
                if ready {
                    let _ = self.tx.send(Msg::Ready(self.conn));
                }
            }
            Err(e) => {
                drop(g);
                self.drop_connection(&e.to_string(), Some(e));
            }
        }
    }

    fn drop_connection(&self, why: &str, fault: Option<ReassemblyError>) {
        // Events made ready before still go out.
        let events = self.shared.drop_reassembly();
        let _ = self.tx.send(Msg::Broken {
            conn: self.conn,
            why: format!("connection {:016x}: {why}", self.conn),
            fault,
            events,
        });
    }
}

/// Ends a link moved to `addr`: the `move` frame, then the link's end once the sender hung
/// up (it reads the frame first; within the handshake's time).
fn move_link(out: &TcpStream, frames: &mut FrameReader<Sock>, addr: SocketAddr) {
    let mut b = Vec::new();
    Frame::Move(Move { addr }).encode(&mut b);
    if (&*out).write_all(&b).is_err() {
        return;
    }
    let _ = out.shutdown(Shutdown::Write);
    let _ = out.set_read_timeout(Some(HANDSHAKE_TIMEOUT));
    let mut rest = [0u8; 256];
    for _ in 0..64 {
        if frames.read_raw(&mut rest).is_err() {
            return;
        }
    }
}

fn welcome(out: &TcpStream, flags: u16) -> std::io::Result<()> {
    let mut w = Vec::new();
    Frame::Welcome(Welcome {
        version: VERSION,
        flags,
    })
    .encode(&mut w);
    (&*out).write_all(&w)
}

/// The receiver's side of the secret handshake on a link: `Err` says why the sender is
/// refused.
fn prove(
    frames: &mut FrameReader<Sock>,
    out: &TcpStream,
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
    (&*out).write_all(&reply).map_err(|e| refused(&e))?;
    let mut auth = [0u8; CLIENT_AUTH_LEN];
    frames.read_raw(&mut auth).map_err(|e| refused(&e))?;
    server.on_auth(&auth).map_err(|e| refused(&e))?;
    out.set_read_timeout(None).map_err(|e| refused(&e))?;
    Ok(())
}
