//! The proof of a shared secret at a `tcp:HOST:PORT` pipe meeting: when both programs
//! are given one (`SPOOLS_PIPE_SECRET=FILE`), the producer's rank 0 opens the meeting
//! connection with the handshake every Spools connection uses
//! ([`spools_proto::handshake`], purpose [`Purpose::Pipe`]) before it sends its
//! description, and the consumer answers only a producer that proved it. Without a
//! secret the meeting is unauthenticated: whoever reaches the port first as a producer
//! learns the consumer's connection token.

use std::io::{Read, Write};
use std::net::TcpStream;
use std::path::PathBuf;

use spools_proto::auth::Secret;
use spools_proto::handshake::{Client, Identity, Purpose, SERVER_HELLO_LEN};

use crate::error::{PipeError, PipeStep};

/// The environment variable naming the file that holds the pipe secret (hexadecimal, as
/// `spools secret` prints it).
pub const SECRET_VAR: &str = "SPOOLS_PIPE_SECRET";

/// The pipe secret this program was given, if any.
///
/// # Errors
/// [`PipeError::Secret`] if the file cannot be read or holds no secret.
pub fn pipe_secret() -> Result<Option<Secret>, PipeError> {
    let Some(path) = std::env::var_os(SECRET_VAR).map(PathBuf::from) else {
        return Ok(None);
    };
    let bad = |reason: String| PipeError::Secret {
        path: path.clone(),
        reason,
    };
    let text = std::fs::read_to_string(&path).map_err(|e| bad(e.to_string()))?;
    Secret::from_hex(text.trim())
        .map(Some)
        .map_err(|e| bad(e.to_string()))
}

/// The producer's side: proves `secret` on `s` and checks the consumer's proof.
///
/// # Errors
/// [`PipeError::Unproven`] when the consumer closes the connection (it has no secret,
/// or another one) or cannot prove it knows this one; [`PipeError::Io`] otherwise.
pub(crate) fn prove(s: &mut TcpStream, secret: &Secret, addr: &str) -> Result<(), PipeError> {
    let nonce =
        spools_boot::random::random().map_err(|e| PipeError::io(PipeStep::RandomToken, e))?;
    let client = Client::new(
        secret.clone(),
        nonce,
        Purpose::Pipe,
        Identity {
            rank: 0,
            lane: 0,
            priority: 0,
        },
    );
    let unproven = || PipeError::Unproven {
        addr: addr.to_string(),
    };
    s.write_all(&client.hello())
        .map_err(|e| PipeError::io(PipeStep::SendDescription, e))?;
    let mut reply = [0u8; SERVER_HELLO_LEN];
    match s.read_exact(&mut reply) {
        Ok(()) => {}
        // A consumer without the secret drops the connection unanswered.
        Err(e) if e.kind() == std::io::ErrorKind::UnexpectedEof => return Err(unproven()),
        Err(e) if e.kind() == std::io::ErrorKind::ConnectionReset => return Err(unproven()),
        Err(e) => return Err(PipeError::io(PipeStep::ReceiveDescription, e)),
    }
    let auth = client.on_server_hello(&reply).map_err(|_| unproven())?;
    s.write_all(&auth)
        .map_err(|e| PipeError::io(PipeStep::SendDescription, e))?;
    // The consumer acknowledges the proof with one byte (as every Spools listener does).
    let mut ack = [0u8; 1];
    match s.read_exact(&mut ack) {
        Ok(()) if ack[0] == spools_boot::net::ACCEPTED => Ok(()),
        Ok(()) => Err(unproven()),
        Err(e) if e.kind() == std::io::ErrorKind::UnexpectedEof => Err(unproven()),
        Err(e) => Err(PipeError::io(PipeStep::ReceiveDescription, e)),
    }
}

/// The consumer's side: whether the connecting producer proved `secret` (anything else
/// is dropped unanswered, as a stray connection is). A proven producer is acknowledged
/// with the byte [`spools_boot::net::ACCEPTED`].
pub(crate) fn verify(
    s: &mut TcpStream,
    secret: &Secret,
    keepalive: Option<spools_boot::keepalive::Keepalive>,
) -> bool {
    matches!(
        spools_boot::net::accept(s, secret, keepalive),
        Ok((Purpose::Pipe, _))
    )
}
