//! The mutual challenge-response that opens every Spools TCP connection.
//!
//! ```text
//! client -> server  ClientHello  magic, version, purpose, client nonce         (24 bytes)
//! server -> client  ServerHello  magic, version, server nonce, server proof    (56 bytes)
//! client -> server  ClientAuth   identity, client proof                        (40 bytes)
//! ```
//!
//! Each proof is keyed by the job secret and covers both nonces, the purpose and the
//! identity the client claims (see [`crate::auth`]). A server that does not know the secret
//! is detected by the client at the second message; a client that does not know it is
//! detected by the server at the third, before any other byte from it is read.
//!
//! ```
//! use spools_proto::auth::Secret;
//! use spools_proto::handshake::{Client, Identity, Purpose, Server};
//! let secret = Secret::from_bytes([9; 16]);
//! let id = Identity { rank: 3, lane: 1, priority: 0 };
//! let client = Client::new(secret.clone(), [1; 16], Purpose::Data, id);
//! let server = Server::new(secret, [2; 16]);
//! let hello = client.hello();
//! let (server, reply) = server.on_hello(&hello).unwrap();
//! let auth = client.on_server_hello(&reply).unwrap();
//! let (purpose, who) = server.on_auth(&auth).unwrap();
//! assert_eq!((purpose, who), (Purpose::Data, id));
//! ```

use thiserror::Error;

use crate::auth::{Proof, Role, Secret, NONCE_LEN, PROOF_LEN};
use crate::codec::{put_u16, put_u32, Reader};
use crate::WireError;

/// Magic number opening a handshake ("SPLS").
pub const MAGIC: u32 = 0x534c_5053;
/// Protocol version of this build.
pub const VERSION: u16 = 1;
/// Length of [`Client::hello`].
pub const CLIENT_HELLO_LEN: usize = 24;
/// Length of the server's reply.
pub const SERVER_HELLO_LEN: usize = 8 + NONCE_LEN + PROOF_LEN;
/// Length of the client's proof message.
pub const CLIENT_AUTH_LEN: usize = 8 + PROOF_LEN;

/// What a connection is for.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Purpose {
    /// A rank joining the job's rendezvous.
    Bootstrap,
    /// A data connection of the tcp transport.
    Data,
    /// The meeting of two parallel programs at a `tcp:HOST:PORT` pipe name, proving
    /// the secret both were given (`SPOOLS_PIPE_SECRET`).
    Pipe,
    /// The meeting of two MPI programs at a port (`MPI_Comm_accept`/`connect`),
    /// proving the secret that the port's name carries.
    Port,
}

impl Purpose {
    fn code(self) -> u8 {
        match self {
            Purpose::Bootstrap => 1,
            Purpose::Data => 2,
            Purpose::Pipe => 3,
            Purpose::Port => 4,
        }
    }

    fn from_code(c: u8) -> Result<Self, WireError> {
        match c {
            1 => Ok(Purpose::Bootstrap),
            2 => Ok(Purpose::Data),
            3 => Ok(Purpose::Pipe),
            4 => Ok(Purpose::Port),
            other => Err(WireError::Invalid {
                what: "connection purpose",
                value: u64::from(other),
            }),
        }
    }
}

/// Who the client says it is: its rank and, for data connections, the lane and priority
/// the connection carries.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Identity {
    /// Rank of the connecting process.
    pub rank: u32,
    /// Sending lane (endpoint) of the connection.
    pub lane: u16,
    /// Priority class (0 low, 1 high).
    pub priority: u8,
}

impl Identity {
    fn to_bytes(self) -> [u8; 8] {
        let mut b = [0u8; 8];
        b[..4].copy_from_slice(&self.rank.to_le_bytes());
        b[4..6].copy_from_slice(&self.lane.to_le_bytes());
        b[6] = self.priority;
        b
    }
}

/// Why a handshake failed.
#[derive(Debug, Clone, PartialEq, Eq, Error)]
pub enum HandshakeError {
    /// The bytes were not a handshake message.
    #[error("malformed handshake: {0}")]
    Wire(#[from] WireError),
    /// The peer does not know the job secret (or belongs to another job).
    #[error("the peer could not prove it knows this job's secret")]
    BadProof,
}

/// The client side of a handshake.
#[derive(Debug, Clone)]
pub struct Client {
    secret: Secret,
    nonce: [u8; NONCE_LEN],
    purpose: Purpose,
    identity: Identity,
}

impl Client {
    /// Starts a handshake with a fresh random nonce.
    pub fn new(
        secret: Secret,
        nonce: [u8; NONCE_LEN],
        purpose: Purpose,
        identity: Identity,
    ) -> Self {
        Client {
            secret,
            nonce,
            purpose,
            identity,
        }
    }

    /// The first message.
    pub fn hello(&self) -> [u8; CLIENT_HELLO_LEN] {
        let mut v = Vec::with_capacity(CLIENT_HELLO_LEN);
        put_u32(&mut v, MAGIC);
        put_u16(&mut v, VERSION);
        v.push(self.purpose.code());
        v.push(0);
        v.extend_from_slice(&self.nonce);
        let mut out = [0u8; CLIENT_HELLO_LEN];
        out.copy_from_slice(&v);
        out
    }

    fn context(&self) -> [u8; 9] {
        let mut c = [0u8; 9];
        c[0] = self.purpose.code();
        c[1..].copy_from_slice(&self.identity.to_bytes());
        c
    }

    /// Checks the server's reply and returns the last message.
    ///
    /// # Errors
    /// [`HandshakeError::BadProof`] if the server does not know the secret;
    /// [`HandshakeError::Wire`] if the reply is malformed.
    pub fn on_server_hello(&self, msg: &[u8]) -> Result<[u8; CLIENT_AUTH_LEN], HandshakeError> {
        let mut r = Reader::new(msg);
        check_magic(&mut r)?;
        reserved(r.u16()?.into())?;
        let server_nonce: [u8; NONCE_LEN] = r.array()?;
        let proof = Proof(r.array()?);
        r.finish()?;
        let purpose = [self.purpose.code()];
        if !proof.verify(
            &self.secret,
            Role::Server,
            &self.nonce,
            &server_nonce,
            &purpose,
        ) {
            return Err(HandshakeError::BadProof);
        }
        let ctx = self.context();
        let mine = Proof::compute(&self.secret, Role::Client, &self.nonce, &server_nonce, &ctx);
        let mut out = [0u8; CLIENT_AUTH_LEN];
        out[..8].copy_from_slice(&self.identity.to_bytes());
        out[8..].copy_from_slice(&mine.0);
        Ok(out)
    }
}

/// Reserved fields must be zero, so that no byte of a handshake can change unnoticed.
fn reserved(v: u64) -> Result<(), WireError> {
    if v != 0 {
        return Err(WireError::Invalid {
            what: "reserved handshake field",
            value: v,
        });
    }
    Ok(())
}

fn check_magic(r: &mut Reader<'_>) -> Result<(), WireError> {
    let magic = r.u32()?;
    if magic != MAGIC {
        return Err(WireError::BadMagic(magic));
    }
    let version = r.u16()?;
    if version != VERSION {
        return Err(WireError::Version {
            got: version,
            want: VERSION,
        });
    }
    Ok(())
}

/// The server side of a handshake, before the client's hello.
#[derive(Debug, Clone)]
pub struct Server {
    secret: Secret,
    nonce: [u8; NONCE_LEN],
}

/// The server side after the client's hello, waiting for its proof.
#[derive(Debug, Clone)]
pub struct ServerAwaitingAuth {
    secret: Secret,
    nonce: [u8; NONCE_LEN],
    client_nonce: [u8; NONCE_LEN],
    purpose: Purpose,
}

impl Server {
    /// Starts the server side with a fresh random nonce.
    pub fn new(secret: Secret, nonce: [u8; NONCE_LEN]) -> Self {
        Server { secret, nonce }
    }

    /// Reads the client's hello and answers it.
    ///
    /// The server's proof must cover the identity the client will claim, which it has not
    /// sent yet; so the server proves over the purpose alone and the client's identity is
    /// bound by the client's proof.
    ///
    /// # Errors
    /// [`HandshakeError::Wire`] if the hello is malformed.
    pub fn on_hello(
        self,
        msg: &[u8],
    ) -> Result<(ServerAwaitingAuth, [u8; SERVER_HELLO_LEN]), HandshakeError> {
        let mut r = Reader::new(msg);
        check_magic(&mut r)?;
        let purpose = Purpose::from_code(r.u8()?)?;
        reserved(r.u8()?.into())?;
        let client_nonce: [u8; NONCE_LEN] = r.array()?;
        r.finish()?;
        let proof = Proof::compute(
            &self.secret,
            Role::Server,
            &client_nonce,
            &self.nonce,
            &[purpose.code()],
        );
        let mut v = Vec::with_capacity(SERVER_HELLO_LEN);
        put_u32(&mut v, MAGIC);
        put_u16(&mut v, VERSION);
        put_u16(&mut v, 0);
        v.extend_from_slice(&self.nonce);
        v.extend_from_slice(&proof.0);
        let mut out = [0u8; SERVER_HELLO_LEN];
        out.copy_from_slice(&v);
        Ok((
            ServerAwaitingAuth {
                secret: self.secret,
                nonce: self.nonce,
                client_nonce,
                purpose,
            },
            out,
        ))
    }
}

impl ServerAwaitingAuth {
    /// Checks the client's proof; on success returns what the connection is for and who the
    /// client is.
    ///
    /// # Errors
    /// [`HandshakeError::BadProof`] if the client does not know the secret.
    pub fn on_auth(&self, msg: &[u8]) -> Result<(Purpose, Identity), HandshakeError> {
        let mut r = Reader::new(msg);
        let id_bytes: [u8; 8] = r.array()?;
        let proof = Proof(r.array()?);
        r.finish()?;
        let mut ctx = [0u8; 9];
        ctx[0] = self.purpose.code();
        ctx[1..].copy_from_slice(&id_bytes);
        if !proof.verify(
            &self.secret,
            Role::Client,
            &self.client_nonce,
            &self.nonce,
            &ctx,
        ) {
            return Err(HandshakeError::BadProof);
        }
        let mut ir = Reader::new(&id_bytes);
        let identity = Identity {
            rank: ir.u32()?,
            lane: ir.u16()?,
            priority: ir.u8()?,
        };
        Ok((self.purpose, identity))
    }
}
