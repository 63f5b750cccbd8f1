//! Blocking framed I/O and the secret handshake over TCP (bootstrap connections).

use std::io::{Read, Write};
use std::net::{SocketAddr, TcpStream, ToSocketAddrs};
use std::time::Duration;

use spools_proto::auth::Secret;
use spools_proto::boot::{frame_len, Frame};
use spools_proto::handshake::{
    Client, Identity, Purpose, Server, CLIENT_AUTH_LEN, CLIENT_HELLO_LEN, SERVER_HELLO_LEN,
};

use crate::error::{BootError, BootStep, RandomFor};
use crate::keepalive::Keepalive;
use crate::random::random;

/// Time allowed for a handshake once connected.
pub const HANDSHAKE_TIMEOUT: Duration = Duration::from_secs(10);

/// Resolves `host:port`.
///
/// # Errors
/// [`BootError::Io`] if it does not resolve.
pub fn resolve(addr: &str) -> Result<SocketAddr, BootError> {
    addr.to_socket_addrs()
        .map_err(BootError::io(BootStep::Resolve {
            addr: addr.to_owned(),
        }))?
        .next()
        .ok_or_else(|| BootError::Io {
            step: BootStep::Resolve {
                addr: addr.to_owned(),
            },
            source: std::io::Error::new(std::io::ErrorKind::NotFound, "no address"),
        })
}

/// Connects to `addr` and proves the secret (client side of the handshake).
///
/// # Errors
/// [`BootError::Io`] if the connection fails, [`BootError::Handshake`] if either side
/// fails to prove the secret.
pub fn connect(
    addr: SocketAddr,
    secret: &Secret,
    keepalive: Option<Keepalive>,
    purpose: Purpose,
    identity: Identity,
    timeout: Duration,
) -> Result<TcpStream, BootError> {
    connect_or_give_up(addr, secret, keepalive, purpose, identity, timeout, &|| {
        false
    })
}

/// Reads exactly `buf.len()` bytes within [`HANDSHAKE_TIMEOUT`], in slices of
/// [`CONNECT_SLICE`], failing (`TimedOut`) as soon as `give_up()` says so.
fn read_handshake(
    s: &mut TcpStream,
    buf: &mut [u8],
    give_up: &dyn Fn() -> bool,
) -> std::io::Result<()> {
    use std::io::ErrorKind::{Interrupted, TimedOut, UnexpectedEof, WouldBlock};
    let until = std::time::Instant::now() + HANDSHAKE_TIMEOUT;
    s.set_read_timeout(Some(CONNECT_SLICE))?;
    let mut at = 0;
    while at < buf.len() {
        match s.read(&mut buf[at..]) {
            Ok(0) => return Err(UnexpectedEof.into()),
            Ok(n) => at += n,
            Err(e) if e.kind() == Interrupted => {}
            Err(e) if matches!(e.kind(), WouldBlock | TimedOut) => {
                if give_up() || std::time::Instant::now() >= until {
                    return Err(std::io::Error::new(TimedOut, "no answer to the handshake"));
                }
            }
            Err(e) => return Err(e),
        }
    }
    Ok(())
}

/// [`connect`] whose handshake stops waiting once `give_up()` says the peer is gone.
fn connect_or_give_up(
    addr: SocketAddr,
    secret: &Secret,
    keepalive: Option<Keepalive>,
    purpose: Purpose,
    identity: Identity,
    timeout: Duration,
    give_up: &dyn Fn() -> bool,
) -> Result<TcpStream, BootError> {
    let what = BootStep::Connect { addr };
    let mut s = TcpStream::connect_timeout(&addr, timeout).map_err(BootError::io(what.clone()))?;
    s.set_nodelay(true).map_err(BootError::io(what.clone()))?;
    crate::keepalive::apply_to(keepalive, &s, purpose == Purpose::Bootstrap);
    s.set_read_timeout(Some(HANDSHAKE_TIMEOUT))
        .map_err(BootError::io(what.clone()))?;
    let client = Client::new(
        secret.clone(),
        random().map_err(BootError::io(BootStep::Random(RandomFor::Nonce)))?,
        purpose,
        identity,
    );
    s.write_all(&client.hello())
        .map_err(BootError::io(what.clone()))?;
    let mut reply = [0u8; SERVER_HELLO_LEN];
    read_handshake(&mut s, &mut reply, give_up).map_err(BootError::io(what.clone()))?;
    let auth = client
        .on_server_hello(&reply)
        .map_err(|source| BootError::Handshake {
            peer: addr.to_string(),
            source,
        })?;
    s.write_all(&auth).map_err(BootError::io(what.clone()))?;
    // The server's word that it took this connection: a connection cut off before (a
    // listener under a flood cuts off its oldest pending handshakes) ends here, as an
    // error [`connect_retrying`] retries, rather than later as a lost rendezvous.
    let mut ack = [0u8; 1];
    read_handshake(&mut s, &mut ack, give_up).map_err(BootError::io(what.clone()))?;
    if ack[0] != ACCEPTED {
        return Err(BootError::Io {
            step: what,
            source: std::io::Error::new(
                std::io::ErrorKind::InvalidData,
                format!("the server answered {:#04x} instead of accepting", ack[0]),
            ),
        });
    }
    s.set_read_timeout(None)
        .map_err(BootError::io(what.clone()))?;
    Ok(s)
}

/// The longest one attempt of [`connect_retrying`] waits for its connection, and how
/// often a handshake waiting for its peer looks whether to give up.
pub const CONNECT_SLICE: Duration = Duration::from_millis(250);

/// The byte a server sends once it has verified a client's proof and taken the
/// connection.
pub const ACCEPTED: u8 = 0xac;

/// [`connect`], retried until `deadline` while the connection is refused (the listener
/// not up yet) or cut off before the handshake completes (a listener under a flood of
/// connections cuts off its oldest pending ones), or an attempt times out (each waits at
/// most [`CONNECT_SLICE`], so that a peer whose host stopped answering is given up as
/// soon as `give_up()` says it is gone; nothing is tried once it does). A failed proof of
/// the secret is never retried.
///
/// # Errors
/// As [`connect`]: the last attempt's error.
pub fn connect_retrying(
    addr: SocketAddr,
    secret: &Secret,
    keepalive: Option<Keepalive>,
    purpose: Purpose,
    identity: Identity,
    deadline: std::time::Instant,
    give_up: impl Fn() -> bool,
) -> Result<TcpStream, BootError> {
    use std::io::ErrorKind::{
        BrokenPipe, ConnectionAborted, ConnectionRefused, ConnectionReset, TimedOut, UnexpectedEof,
        WouldBlock,
    };
    let mut pause = Duration::from_millis(2);
    loop {
        // A peer already given up is not called again (each call may wait a slice).
        if give_up() {
            return Err(BootError::Io {
                step: BootStep::Connect { addr },
                source: std::io::Error::new(ConnectionAborted, "given up: the job is failing"),
            });
        }
        let timeout = deadline
            .saturating_duration_since(std::time::Instant::now())
            .clamp(Duration::from_millis(100), CONNECT_SLICE);
        match connect_or_give_up(
            addr, secret, keepalive, purpose, identity, timeout, &give_up,
        ) {
            Err(BootError::Io { source, .. })
                if matches!(
                    source.kind(),
                    ConnectionRefused
                        | ConnectionReset
                        | ConnectionAborted
                        | BrokenPipe
                        | UnexpectedEof
                        | TimedOut
                        | WouldBlock
                ) && std::time::Instant::now() < deadline =>
            {
                std::thread::sleep(pause);
                pause = (pause * 2).min(Duration::from_millis(200));
            }
            other => return other,
        }
    }
}

/// Runs the server side of the handshake on an accepted connection.
///
/// # Errors
/// [`BootError::Handshake`] if the client does not know the secret.
pub fn accept(
    s: &mut TcpStream,
    secret: &Secret,
    keepalive: Option<Keepalive>,
) -> Result<(Purpose, Identity), BootError> {
    accept_admitted(s, secret, keepalive, || true)
}

/// [`accept`] for a connection holding an admission slot: once the client's proof is
/// verified, `take()` claims the connection (false: the listener cut it off meanwhile,
/// and the handshake fails) before the client is told it was accepted.
///
/// # Errors
/// As [`accept`]; [`BootError::Io`] for a connection cut off.
pub fn accept_admitted(
    s: &mut TcpStream,
    secret: &Secret,
    keepalive: Option<Keepalive>,
    take: impl FnOnce() -> bool,
) -> Result<(Purpose, Identity), BootError> {
    let peer = s
        .peer_addr()
        .map(|a| a.to_string())
        .unwrap_or_else(|_| "?".into());
    let what = BootStep::Accept { peer: peer.clone() };
    s.set_nodelay(true).map_err(BootError::io(what.clone()))?;
    crate::keepalive::apply_to(keepalive, &*s, false);
    s.set_read_timeout(Some(crate::admission::ACCEPT_TIMEOUT))
        .map_err(BootError::io(what.clone()))?;
    let mut hello = [0u8; CLIENT_HELLO_LEN];
    s.read_exact(&mut hello)
        .map_err(BootError::io(what.clone()))?;
    let server = Server::new(
        secret.clone(),
        random().map_err(BootError::io(BootStep::Random(RandomFor::Nonce)))?,
    );
    let hs = |source| BootError::Handshake {
        peer: peer.clone(),
        source,
    };
    let (server, reply) = server.on_hello(&hello).map_err(hs)?;
    s.write_all(&reply).map_err(BootError::io(what.clone()))?;
    let mut auth = [0u8; CLIENT_AUTH_LEN];
    s.read_exact(&mut auth)
        .map_err(BootError::io(what.clone()))?;
    let out = server.on_auth(&auth).map_err(hs)?;
    if out.0 == Purpose::Bootstrap {
        if let Some(k) = keepalive {
            let _ = k.apply_user_timeout(&*s);
        }
    }
    if !take() {
        return Err(BootError::Io {
            step: what,
            source: std::io::Error::new(
                std::io::ErrorKind::ConnectionAborted,
                "cut off by a flood of connections",
            ),
        });
    }
    s.write_all(&[ACCEPTED])
        .map_err(BootError::io(what.clone()))?;
    s.set_read_timeout(None)
        .map_err(BootError::io(what.clone()))?;
    Ok(out)
}

/// Reads one frame; `Ok(None)` at a clean end of stream.
///
/// # Errors
/// [`BootError::Io`] or [`BootError::Wire`].
pub fn read_frame<T: Frame>(s: &mut impl Read) -> Result<Option<T>, BootError> {
    let mut prefix = [0u8; 4];
    match s.read_exact(&mut prefix) {
        Ok(()) => {}
        Err(e) if e.kind() == std::io::ErrorKind::UnexpectedEof => return Ok(None),
        Err(e) => return Err(BootError::io(BootStep::ReadFrame)(e)),
    }
    let len = frame_len(prefix)?;
    let mut body = vec![0u8; len];
    s.read_exact(&mut body)
        .map_err(BootError::io(BootStep::ReadFrame))?;
    Ok(Some(T::decode_body(&body)?))
}

/// Writes one frame.
///
/// # Errors
/// [`BootError::Io`].
pub fn write_frame<T: Frame>(s: &mut impl Write, msg: &T) -> Result<(), BootError> {
    s.write_all(&msg.encode())
        .map_err(BootError::io(BootStep::WriteFrame))
}
