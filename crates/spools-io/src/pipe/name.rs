//! Pipe names and the meeting of the two programs' rank 0s.

use crate::error::Told;
use std::io::{Read, Write};
use std::net::{TcpListener, TcpStream};
use std::os::unix::fs::OpenOptionsExt;
use std::path::PathBuf;
use std::time::{Duration, Instant};

use serde::{Deserialize, Serialize};
use spools_boot::keepalive::Keepalive;
use spools_map::Layout;
use spools_msg::Communicator;

use super::wait::{only_waited, Check, CHECK_EVERY};
use crate::error::{PipeError, PipeStep, PipeViolation};

/// Where the two programs of a parallel pipe meet.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub enum PipeName {
    /// `pipe:NAME`: files in the rendezvous directory (`SPOOLS_PIPE_DIR`, default
    /// `/tmp/spools-pipes-UID`).
    Dir(String),
    /// `tcp:HOST:PORT`: the consumer's rank 0 listens there for the producer's rank 0.
    Tcp(String),
    /// `stdout`: no Spools consumer; the producer writes the canonical byte stream of every
    /// record to standard output (rank 0's).
    Stdout,
    /// `stdin`: no Spools producer; the consumer reads the canonical byte stream of every
    /// record from standard input (rank 0's).
    Stdin,
}

impl std::str::FromStr for PipeName {
    type Err = PipeError;

    fn from_str(s: &str) -> Result<Self, PipeError> {
        let ok_name = |n: &str| {
            !n.is_empty()
                && n.len() <= 100
                && n.bytes()
                    .all(|c| c.is_ascii_alphanumeric() || b"._-".contains(&c))
                && !n.starts_with('.')
        };
        match s {
            "stdout" => Ok(PipeName::Stdout),
            "stdin" => Ok(PipeName::Stdin),
            _ => match s.split_once(':') {
                Some(("pipe", n)) if ok_name(n) => Ok(PipeName::Dir(n.to_string())),
                Some(("tcp", a))
                    if a.rsplit_once(':')
                        .is_some_and(|(h, p)| !h.is_empty() && p.parse::<u16>().is_ok()) =>
                {
                    Ok(PipeName::Tcp(a.to_string()))
                }
                _ => Err(PipeError::BadName(s.to_string())),
            },
        }
    }
}

impl std::fmt::Display for PipeName {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            PipeName::Dir(n) => write!(f, "pipe:{n}"),
            PipeName::Tcp(a) => write!(f, "tcp:{a}"),
            PipeName::Stdout => f.write_str("stdout"),
            PipeName::Stdin => f.write_str("stdin"),
        }
    }
}

impl PipeName {
    /// The pipe a launcher chose for this program's output (`SPOOLS_PIPE_OUT`), else
    /// `stdout`.
    ///
    /// # Errors
    /// [`PipeError::BadName`] for a malformed variable.
    pub fn output_from_env() -> Result<PipeName, PipeError> {
        std::env::var("SPOOLS_PIPE_OUT").map_or(Ok(PipeName::Stdout), |v| v.parse())
    }

    /// The pipe a launcher chose for this program's input (`SPOOLS_PIPE_IN`), else
    /// `stdin`.
    ///
    /// # Errors
    /// [`PipeError::BadName`] for a malformed variable.
    pub fn input_from_env() -> Result<PipeName, PipeError> {
        std::env::var("SPOOLS_PIPE_IN").map_or(Ok(PipeName::Stdin), |v| v.parse())
    }
}

/// Where the rendezvous directory of `pipe:` names is (`SPOOLS_PIPE_DIR`, default
/// `/tmp/spools-pipes-UID`).
pub fn pipe_dir_path() -> PathBuf {
    match std::env::var_os("SPOOLS_PIPE_DIR") {
        Some(d) => PathBuf::from(d),
        None => std::env::temp_dir().join(format!(
            "spools-pipes-{}",
            rustix::process::getuid().as_raw()
        )),
    }
}

/// The rendezvous directory of `pipe:` names, created private to this user.
///
/// # Errors
/// [`PipeError::Io`] when it cannot be created.
pub fn pipe_dir() -> Result<PathBuf, PipeError> {
    use std::os::unix::fs::{MetadataExt, PermissionsExt};
    let d = pipe_dir_path();
    std::fs::create_dir_all(&d)
        .map_err(|e| PipeError::io(PipeStep::CreateDir { path: d.clone() }, e))?;
    // In a shared /tmp the directory may have been made by someone else (or be a symlink
    // to a directory of theirs): then meeting files could be read, replaced or redirected.
    let md = std::fs::metadata(&d)
        .map_err(|e| PipeError::io(PipeStep::StatDir { path: d.clone() }, e))?;
    let uid = rustix::process::getuid().as_raw();
    if !md.is_dir() || md.uid() != uid {
        return Err(PipeError::io(
            PipeStep::ForeignDir { path: d },
            std::io::Error::from(std::io::ErrorKind::PermissionDenied),
        ));
    }
    let _ = std::fs::set_permissions(&d, std::fs::Permissions::from_mode(0o700));
    Ok(d)
}

/// What each side tells the other.
#[derive(Clone, Debug, Serialize, Deserialize, PartialEq, Eq)]
pub(crate) struct Description {
    /// The side's dataset layout.
    pub(crate) layout: String,
    /// Its number of ranks.
    pub(crate) ranks: u32,
    /// Consumer ranks' listening addresses (empty for the producer).
    pub(crate) addrs: Vec<String>,
    /// The consumer's connection token, hex (empty for the producer).
    pub(crate) token: String,
    /// The process id of the side's rank 0 (to ignore files left by a dead run).
    pub(crate) pid: u32,
}

/// How long to wait for the other program (`SPOOLS_PIPE_TIMEOUT` seconds, default 60).
pub fn meet_timeout() -> Duration {
    let s = std::env::var("SPOOLS_PIPE_TIMEOUT")
        .ok()
        .and_then(|v| v.parse::<f64>().ok())
        .filter(|s| *s > 0.0)
        .unwrap_or(60.0);
    Duration::from_secs_f64(s)
}

fn alive(pid: u32) -> bool {
    i32::try_from(pid)
        .ok()
        .and_then(rustix::process::Pid::from_raw)
        .is_some_and(|p| rustix::process::test_kill_process(p).is_ok())
}

/// Rank 0's meeting: publishes `mine` and returns the other side's description. Every
/// wait asks `check` (the process's interrupt check) at least every
/// [`CHECK_EVERY`]. A consumer meeting at `tcp:` sets `keepalive` (the job's) on the
/// producer's connection.
pub(crate) fn meet(
    name: &PipeName,
    producer: bool,
    mine: &Description,
    keepalive: Option<Keepalive>,
    check: Check<'_>,
) -> Result<Description, PipeError> {
    let (me, other) = if producer {
        ("producer", "consumer")
    } else {
        ("consumer", "producer")
    };
    let text = serde_json::to_vec(mine)
        .map_err(|e| PipeError::io(PipeStep::EncodeDescription, std::io::Error::other(e)))?;
    let deadline = Instant::now() + meet_timeout();
    let timed_out = || PipeError::Timeout {
        side: other,
        name: name.to_string(),
        secs: meet_timeout().as_secs(),
    };
    match name {
        PipeName::Tcp(addr) => {
            let secret = super::meet_auth::pipe_secret()?;
            let m = Meeting {
                addr,
                other,
                deadline,
                check,
            };
            meet_tcp(&m, producer, &text, secret.as_ref(), keepalive, timed_out)
        }
        PipeName::Dir(n) => {
            let dir = pipe_dir()?;
            let path = dir.join(format!("{n}.{me}"));
            let tmp = dir.join(format!(".{n}.{me}.{}", std::process::id()));
            let published = std::time::SystemTime::now() - Duration::from_millis(100);
            // Created exclusively (a stale file or a planted symlink is removed first, never
            // written through).
            let _ = std::fs::remove_file(&tmp);
            std::fs::OpenOptions::new()
                .write(true)
                .create_new(true)
                .custom_flags(libc::O_NOFOLLOW)
                .open(&tmp)
                .and_then(|mut f| f.write_all(&text))
                .map_err(|e| PipeError::io(PipeStep::WriteMeetingFile { path: tmp.clone() }, e))?;
            std::fs::rename(&tmp, &path).map_err(|e| {
                PipeError::io(PipeStep::PublishMeetingFile { path: path.clone() }, e)
            })?;
            let theirs = dir.join(format!("{n}.{other}"));
            loop {
                // A file older than ours whose writer is dead is left from an earlier run.
                let fresh = std::fs::metadata(&theirs)
                    .and_then(|m| m.modified())
                    .is_ok_and(|t| t >= published);
                if let Ok(t) = std::fs::read(&theirs) {
                    if let Ok(d) = serde_json::from_slice::<Description>(&t) {
                        if fresh || alive(d.pid) {
                            return Ok(d);
                        }
                    }
                }
                if Instant::now() > deadline {
                    let _ = std::fs::remove_file(&path);
                    return Err(timed_out());
                }
                if let Err(e) = check() {
                    let _ = std::fs::remove_file(&path);
                    return Err(e);
                }
                std::thread::sleep(Duration::from_millis(5));
            }
        }
        PipeName::Stdout | PipeName::Stdin => Err(PipeError::BadName(name.to_string())),
    }
}

/// Where and until when a `tcp:` meeting waits, for whom, and the interrupt check its
/// waits ask.
struct Meeting<'a> {
    addr: &'a str,
    other: &'static str,
    deadline: Instant,
    check: Check<'a>,
}

/// The meeting at `tcp:ADDR`: the producer connects (proving `secret` first when given
/// one) and speaks first; the consumer listens.
fn meet_tcp(
    m: &Meeting<'_>,
    producer: bool,
    text: &[u8],
    secret: Option<&spools_proto::auth::Secret>,
    keepalive: Option<Keepalive>,
    timed_out: impl Fn() -> PipeError,
) -> Result<Description, PipeError> {
    let (addr, other, deadline, check) = (m.addr, m.other, m.deadline, m.check);
    // The producer speaks first; the consumer answers only a connection that sent
    // a valid description in time (after proving the secret, when both have one), so
    // that stray or garbage connections to its port (a scan, a flood) neither end the
    // meeting nor learn its token.
    if producer {
        let mut s = loop {
            match TcpStream::connect(addr) {
                Ok(s) => break s,
                Err(_) if Instant::now() < deadline => {
                    check()?;
                    std::thread::sleep(Duration::from_millis(20))
                }
                Err(_) => return Err(timed_out()),
            }
        };
        s.set_read_timeout(Some(meet_timeout()))
            .map_err(|e| PipeError::io(PipeStep::Socket, e))?;
        if let Some(secret) = secret {
            super::meet_auth::prove(&mut s, secret, addr)?;
        }
        send_description(&mut s, text)?;
        // The consumer answers once its program reached the meeting: waited for in
        // short reads, asking the interrupt check between them.
        s.set_read_timeout(Some(CHECK_EVERY))
            .map_err(|e| PipeError::io(PipeStep::Socket, e))?;
        return match read_description(&mut s, other, deadline, check) {
            Err(PipeError::Io { source, .. })
                if source.kind() == std::io::ErrorKind::UnexpectedEof
                    || source.kind() == std::io::ErrorKind::ConnectionReset =>
            {
                Err(PipeError::Refused {
                    addr: addr.to_string(),
                })
            }
            r => r,
        };
    }
    let l = TcpListener::bind(addr).map_err(|e| {
        PipeError::io(
            PipeStep::Listen {
                on: Some(addr.to_string()),
            },
            e,
        )
    })?;
    l.set_nonblocking(true)
        .map_err(|e| PipeError::io(PipeStep::Listen { on: None }, e))?;
    loop {
        match l.accept() {
            Ok((mut s, _)) => {
                let ready = s
                    .set_nonblocking(false)
                    .and_then(|()| s.set_read_timeout(Some(MEET_HELLO_TIMEOUT)))
                    .map_err(|e| PipeError::io(PipeStep::Socket, e));
                // With a secret, only a producer that proves it is read at all.
                let proven = secret.is_none_or(|k| super::meet_auth::verify(&mut s, k, keepalive));
                let theirs = ready.and_then(|()| {
                    if proven {
                        s.set_read_timeout(Some(CHECK_EVERY))
                            .map_err(|e| PipeError::io(PipeStep::Socket, e))?;
                        let until = Instant::now() + MEET_HELLO_TIMEOUT;
                        read_description(&mut s, other, until, check)
                    } else {
                        Err(PipeError::Unproven {
                            addr: addr.to_string(),
                        })
                    }
                });
                match theirs {
                    // Anything but a producer's description is dropped unanswered.
                    Ok(d) if d.token.is_empty() => {
                        send_description(&mut s, text)?;
                        return Ok(d);
                    }
                    // An interrupt while reading it ends the meeting.
                    Err(e @ PipeError::Msg(_)) => return Err(e),
                    Ok(_) | Err(_) => {}
                }
                // A stream of connections that are not the producer holds the meeting no
                // longer than its deadline, and lets an interrupt through.
                if Instant::now() > deadline {
                    return Err(timed_out());
                }
                check()?;
            }
            Err(e) if e.kind() == std::io::ErrorKind::WouldBlock => {
                if Instant::now() > deadline {
                    return Err(timed_out());
                }
                check()?;
                std::thread::sleep(Duration::from_millis(5));
            }
            Err(e) => {
                return Err(PipeError::io(
                    PipeStep::Accept {
                        on: Some(addr.to_string()),
                    },
                    e,
                ))
            }
        }
    }
}

/// Time a connection to a consumer's meeting port gets to send its description.
const MEET_HELLO_TIMEOUT: Duration = Duration::from_secs(3);

/// Sends a description: its length (`u32`, little-endian), then its JSON.
fn send_description(s: &mut TcpStream, text: &[u8]) -> Result<(), PipeError> {
    s.write_all(&(text.len() as u32).to_le_bytes())
        .and_then(|()| s.write_all(text))
        .map_err(|e| PipeError::io(PipeStep::SendDescription, e))
}

/// Reads exactly `buf.len()` bytes from `s` (whose reads time out every
/// [`CHECK_EVERY`]) by `until`, asking `check` whenever a read only waited.
fn read_exact_checked(
    s: &mut TcpStream,
    buf: &mut [u8],
    until: Instant,
    check: Check<'_>,
) -> Result<(), PipeError> {
    let mut at = 0;
    while at < buf.len() {
        match s.read(&mut buf[at..]) {
            Ok(0) => {
                return Err(PipeError::io(
                    PipeStep::ReceiveDescription,
                    std::io::ErrorKind::UnexpectedEof.into(),
                ))
            }
            Ok(n) => at += n,
            Err(e) if only_waited(&e) && Instant::now() < until => check()?,
            Err(e) => return Err(PipeError::io(PipeStep::ReceiveDescription, e)),
        }
    }
    Ok(())
}

/// Reads the other side's description (at most 1 MiB of JSON) by `until`.
fn read_description(
    s: &mut TcpStream,
    other: &'static str,
    until: Instant,
    check: Check<'_>,
) -> Result<Description, PipeError> {
    let mut len = [0u8; 4];
    read_exact_checked(s, &mut len, until, check)?;
    let len = u32::from_le_bytes(len);
    if len > 1 << 20 {
        return Err(PipeError::Protocol {
            side: other,
            rank: 0,
            violation: PipeViolation::DescriptionTooLong { len },
        });
    }
    let mut t = vec![0u8; len as usize];
    read_exact_checked(s, &mut t, until, check)?;
    serde_json::from_slice(&t).map_err(|e| PipeError::Protocol {
        side: other,
        rank: 0,
        violation: PipeViolation::BadDescription {
            reason: e.to_string(),
        },
    })
}

/// Removes the meeting files of `pipe:NAME` (after both sides connected).
pub(crate) fn forget(name: &PipeName) {
    if let (PipeName::Dir(n), Ok(dir)) = (name, pipe_dir()) {
        let _ = std::fs::remove_file(dir.join(format!("{n}.producer")));
        let _ = std::fs::remove_file(dir.join(format!("{n}.consumer")));
    }
}

/// The collective meeting: rank 0 publishes `mine` (the same on every rank) and learns the
/// other side's description, which every rank receives; then its layout is checked to hold
/// the same dataset as `layout`. Returns the other side's description and layout.
pub(crate) fn meet_all(
    comm: &Communicator,
    name: &PipeName,
    producer: bool,
    mine: &Description,
    layout: &Layout,
) -> Result<(Description, Layout), PipeError> {
    let check = super::wait::interrupt_of(comm);
    let got = (comm.rank() == 0).then(|| {
        meet(
            name,
            producer,
            mine,
            Keepalive::for_timeout(comm.config().net_timeout_s),
            &check,
        )
    });
    let enc = match &got {
        Some(Ok(d)) => serde_json::to_vec(d).unwrap_or_default(),
        // Not JSON: a NUL, then rank 0's cause.
        Some(Err(e)) => [b"\0".as_slice(), &Told::cause(e).encode()].concat(),
        None => Vec::new(),
    };
    let text = comm.bcast_bytes(0, &enc);
    let theirs: Description = match got {
        // Rank 0's own outcome wins, even when the broadcast fails too.
        Some(r) => r?,
        None => {
            let text = text?;
            serde_json::from_slice(&text).map_err(|_| PipeError::Remote {
                rank: 0,
                cause: crate::Cause::decode(text.get(1..).unwrap_or_default()),
            })?
        }
    };
    let side = if producer { "consumer" } else { "producer" };
    let other: Layout = theirs.layout.parse().map_err(|_| PipeError::Protocol {
        side,
        rank: 0,
        violation: PipeViolation::BadLayout {
            spec: theirs.layout.clone(),
        },
    })?;
    let dataset = |l: &Layout| match l {
        Layout::Array(a) => Some((a.dtype(), a.shape().to_vec())),
        _ => None,
    };
    let typed_mismatch = matches!(
        (dataset(&other), dataset(layout)),
        (Some(a), Some(b)) if a != b
    );
    if typed_mismatch || other.total_bytes() != layout.total_bytes() {
        let (p, c) = if producer {
            (layout.to_string(), theirs.layout)
        } else {
            (theirs.layout, layout.to_string())
        };
        return Err(PipeError::Mismatch {
            producer: p,
            consumer: c,
        });
    }
    Ok((theirs, other))
}

/// A connection token as hex.
pub(crate) fn token_hex(t: &[u8; 16]) -> String {
    t.iter().map(|x| format!("{x:02x}")).collect()
}

/// A connection token from hex.
pub(crate) fn token_from_hex(h: &str) -> Option<[u8; 16]> {
    let v: Vec<u8> = (0..16)
        .map(|i| {
            h.get(2 * i..2 * i + 2)
                .and_then(|x| u8::from_str_radix(x, 16).ok())
        })
        .collect::<Option<_>>()?;
    (h.len() == 32).then_some(())?;
    v.try_into().ok()
}
