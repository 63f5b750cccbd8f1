//! The producer's end of a parallel pipe.

use std::io::{Read, Write};
use std::net::{Shutdown, TcpStream};
use std::os::fd::{AsFd, AsRawFd, BorrowedFd};
use std::time::Instant;

use rustix::event::{PollFd, PollFlags};

use spools_map::{Layout, Plan};
use spools_msg::Communicator;

use super::frame::{Header, Hello, Kind, HEADER_LEN, MAX_PAYLOAD};
use super::name::{meet_all, meet_timeout, token_from_hex, Description, PipeName};
use super::wait::{interrupt_of, only_waited, stopped, Check, CHECK_EVERY, POLL_TIMEOUT};
use super::{
    agree_on_outcome, agree_on_record, check_both_units, on_rank0, open_declined, open_end,
};
use crate::error::{PipeError, PipeStep, PipeViolation};
use spools_exchange::crc::crc32c;
use spools_exchange::cursor::RunCursor;
use spools_exchange::redistribute_plan;
use spools_exchange::ExchangeOptions;

/// The producer's end of a parallel pipe; [`PipeWriter::write`] sends one record.
///
/// ```no_run
/// let world = spools::init()?;
/// let l: spools_map::Layout = "u8[1024,1024] block,* on 4x1".parse()?;
/// let name: spools_io::pipe::PipeName = "pipe:frames".parse()?;
/// let mut out = spools_io::pipe::PipeWriter::open(world.io_communicator()?, &name, &l)?;
/// let mine = vec![7u8; 256 * 1024];
/// out.write(&mine)?;
/// out.close()?;
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
pub struct PipeWriter {
    comm: Communicator,
    layout: Layout,
    record: u64,
    /// The record in which a write failed (or was interrupted) part-way: the connections
    /// are closed and every later call fails.
    broken: Option<u64>,
    mode: Mode,
}

enum Mode {
    Net {
        plan: Plan,
        socks: Vec<TcpStream>,
        bytes: Vec<u64>,
    },
    Stdout {
        plan: Plan,
    },
}

impl std::fmt::Debug for PipeWriter {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("PipeWriter")
            .field("layout", &self.layout.to_string())
            .field("record", &self.record)
            .finish_non_exhaustive()
    }
}

/// Connects to a consumer rank at `addr`, trying again until `deadline`, asking `check`
/// between tries.
fn connect(addr: &str, deadline: Instant, check: Check<'_>) -> Result<TcpStream, PipeError> {
    loop {
        match TcpStream::connect(addr) {
            Ok(s) => return Ok(s),
            Err(e) if Instant::now() > deadline => {
                return Err(PipeError::io(
                    PipeStep::Connect {
                        addr: addr.to_string(),
                    },
                    e,
                ))
            }
            Err(_) => {
                check()?;
                std::thread::sleep(std::time::Duration::from_millis(10));
            }
        }
    }
}

/// Writes all of `buf` to `s` (whose writes time out every [`CHECK_EVERY`]), asking
/// `check` whenever a write only waited (the consumer does not read: back-pressure);
/// `gone(the system's error)` when the connection fails.
fn write_full(
    s: &mut TcpStream,
    buf: &[u8],
    check: Check<'_>,
    gone: impl Fn(std::io::Error) -> PipeError,
) -> Result<(), PipeError> {
    let mut at = 0;
    while at < buf.len() {
        match s.write(&buf[at..]) {
            Ok(0) => return Err(gone(std::io::ErrorKind::WriteZero.into())),
            Ok(n) => at += n,
            Err(e) if only_waited(&e) => check()?,
            Err(e) => return Err(gone(e)),
        }
    }
    Ok(())
}

/// Bytes a write to a pipe takes at once when `poll` says there is room (POSIX's
/// `PIPE_BUF`, Linux's page).
const PIPE_BUF: usize = 4096;

/// Bytes a write to `fd`, which `poll` said has room, takes without waiting: a pipe's
/// free space (its capacity less what is queued, in whole pages), at least [`PIPE_BUF`]
/// (what `poll` promises); [`PIPE_BUF`] for what is not a pipe.
fn room(fd: BorrowedFd<'_>) -> usize {
    let mut queued: libc::c_int = 0;
    // SAFETY: FIONREAD writes one int through the pointer, which points to `queued`, a
    // live int; on a descriptor that does not support it, it fails and writes nothing.
    let asked = unsafe { libc::ioctl(fd.as_raw_fd(), libc::FIONREAD, &mut queued) };
    // SAFETY: F_GETPIPE_SZ takes no argument and only reads the descriptor's pipe; it
    // fails on what is not a pipe.
    let capacity = unsafe { libc::fcntl(fd.as_raw_fd(), libc::F_GETPIPE_SZ) };
    match (usize::try_from(capacity), usize::try_from(queued)) {
        (Ok(c), Ok(q)) if asked == 0 => (c.saturating_sub(q) / PIPE_BUF * PIPE_BUF).max(PIPE_BUF),
        _ => PIPE_BUF,
    }
}

/// Writes `whole` to standard output (rank 0's): at once to a regular file; to a pipe, a
/// socket or a terminal, once `poll` says there is room, as much as it takes without
/// waiting ([`room`]), so that a consumer that does not read holds this rank in `poll`,
/// where it asks `check` every [`CHECK_EVERY`]. `gone()` when the output fails or is
/// closed.
fn write_stdout(
    whole: &[u8],
    check: Check<'_>,
    gone: impl Fn() -> PipeError,
) -> Result<(), PipeError> {
    let mut out = std::io::stdout().lock();
    // What this process buffered before goes first.
    out.flush().map_err(|_| gone())?;
    let fd = out.as_fd();
    let regular = fd
        .try_clone_to_owned()
        .map(std::fs::File::from)
        .and_then(|f| f.metadata())
        .is_ok_and(|m| m.file_type().is_file());
    if regular {
        return out.write_all(whole).map_err(|_| gone());
    }
    let mut at = 0;
    while at < whole.len() {
        let mut fds = [PollFd::new(&fd, PollFlags::OUT)];
        match rustix::event::poll(&mut fds, Some(&POLL_TIMEOUT)) {
            Ok(0) | Err(rustix::io::Errno::INTR) => {
                check()?;
                continue;
            }
            // Ready, or not pollable: written as it goes.
            Ok(_) | Err(_) => {}
        }
        let end = (at + room(fd)).min(whole.len());
        match rustix::io::write(fd, &whole[at..end]) {
            Ok(0) => return Err(gone()),
            Ok(n) => at += n,
            Err(rustix::io::Errno::INTR | rustix::io::Errno::AGAIN) => check()?,
            Err(_) => return Err(gone()),
        }
    }
    Ok(())
}

impl PipeWriter {
    /// Opens the pipe `name` for writing records distributed as `layout` (rank `r` holds
    /// unit `r`). Collective over `comm`; waits (up to `SPOOLS_PIPE_TIMEOUT`, 60 s) for
    /// the consumer.
    ///
    /// # Errors
    /// [`PipeError`]: no consumer in time, layouts of different datasets, connections
    /// that fail; an error on any rank fails the call on every rank.
    pub fn open(comm: &Communicator, name: &PipeName, layout: &Layout) -> Result<Self, PipeError> {
        let local = match name {
            PipeName::Stdin => Err(PipeError::BadName("stdin (a producer writes)".into())),
            _ => Ok(()),
        };
        let total = open_end(comm, name, layout, crate::Side::Source, local)?;
        let me = comm.rank();
        let mode = match name {
            PipeName::Stdout => Mode::Stdout {
                plan: Plan::new(layout, &on_rank0(total)?)?,
            },
            PipeName::Stdin => return Err(PipeError::BadName("stdin (a producer writes)".into())),
            _ => {
                let mine = Description {
                    layout: layout.to_string(),
                    ranks: comm.size(),
                    addrs: Vec::new(),
                    token: String::new(),
                    pid: std::process::id(),
                };
                let (theirs, cl) = meet_all(comm, name, true, &mine, layout)?;
                check_both_units(comm, layout, crate::Side::Source, &cl, theirs.ranks)?;
                let plan = Plan::new(layout, &cl)?;
                let token = token_from_hex(&theirs.token).ok_or(PipeError::Protocol {
                    side: "consumer",
                    rank: 0,
                    violation: PipeViolation::BadToken,
                })?;
                let deadline = Instant::now() + meet_timeout();
                let check = interrupt_of(comm);
                let conn = (|| -> Result<(Vec<TcpStream>, Vec<u64>), PipeError> {
                    let mut socks = Vec::new();
                    let mut bytes = Vec::new();
                    for (c, addr) in theirs.addrs.iter().enumerate() {
                        let mut s = connect(addr, deadline, &check)?;
                        // A write waits at most CHECK_EVERY before the interrupt check.
                        s.set_nodelay(true)
                            .and_then(|()| s.set_write_timeout(Some(CHECK_EVERY)))
                            .map_err(|e| PipeError::io(PipeStep::Socket, e))?;
                        let hello = Hello {
                            token,
                            rank: me,
                            ranks: comm.size(),
                        };
                        write_full(&mut s, &hello.encode(), &check, |e| {
                            PipeError::io(PipeStep::Hello { rank: c as u32 }, e)
                        })?;
                        socks.push(s);
                        let c = c as u64;
                        bytes.push(if u64::from(me) < layout.units() && c < cl.units() {
                            plan.runs(u64::from(me), c)?.map(|r| r.len).sum()
                        } else {
                            0
                        });
                    }
                    Ok((socks, bytes))
                })();
                let (socks, bytes) = agree_on_outcome(comm, conn)?;
                Mode::Net { plan, socks, bytes }
            }
        };
        Ok(PipeWriter {
            comm: comm.clone(),
            layout: layout.clone(),
            record: 0,
            broken: None,
            mode,
        })
    }

    /// Records written so far.
    pub fn records(&self) -> u64 {
        self.record
    }

    /// Sends one record: this rank's share of it is `data`. Collective: the ranks first
    /// agree that every rank's buffer holds its share (one small allreduce: a wrong
    /// buffer on any rank fails the record on every rank, nothing is sent and the pipe
    /// stays usable); then, in the byte-stream mode, they gather the record on rank 0;
    /// otherwise each rank sends its own part and returns when the consumer ranks have
    /// taken it into their socket buffers (back-pressure).
    ///
    /// Its waits ask the process's interrupt check (`spools_am::Worker::set_interrupt`)
    /// every 50 ms: a wait it ends fails with [`PipeError::Msg`] holding the interruption.
    /// A write that fails part-way (anything but a wrong buffer) leaves the writer stopped:
    /// its connections are closed (the consumer sees it gone, never half a record) and
    /// every later call fails.
    ///
    /// # Errors
    /// [`PipeError::PeerGone`] when a consumer rank went away, [`PipeError::BufferSize`]
    /// (on its rank; [`PipeError::Remote`] with its cause on the others);
    /// [`PipeError::Msg`] when interrupted; [`PipeError::Io`] once stopped.
    pub fn write(&mut self, data: &[u8]) -> Result<(), PipeError> {
        let ready = match self.broken {
            Some(r) => Err(stopped("writer", PipeStep::Socket, r)),
            None => Ok(()),
        };
        // Every rank's buffer checked before any rank sends (a wrong buffer fails the
        // record on every rank and leaves the pipe usable).
        agree_on_record(&self.comm, &self.layout, data.len(), ready)?;
        let me = self.comm.rank();
        let record = self.record;
        if let Err(e) = self.send(data, me, record) {
            self.broken = Some(record);
            if let Mode::Net { socks, .. } = &mut self.mode {
                socks.clear();
            }
            return Err(e);
        }
        self.record += 1;
        Ok(())
    }

    /// Takes this rank's part in the record the other ranks write only to fail it,
    /// because a binding's own check of this rank's arguments failed with `cause`:
    /// nothing is sent, every rank's write fails (this one with
    /// [`PipeError::Declined`], the others with [`PipeError::Remote`] carrying `cause`)
    /// and the pipe stays usable. Collective.
    pub fn decline_write(&mut self, cause: crate::Cause) -> PipeError {
        let declined = PipeError::Declined(cause.clone());
        match agree_on_record(&self.comm, &self.layout, 0, Err(declined)) {
            Err(e) => e,
            // Not reached: this rank's own error wins the agreement.
            Ok(()) => PipeError::Declined(cause),
        }
    }

    /// Takes this rank's part in the opening the other ranks make with
    /// [`PipeWriter::open`] only to fail it, because a binding's own check of this rank's
    /// arguments (its layout, the pipe's name) failed with `cause`: every rank's opening
    /// fails before any meets the other program (this one with [`PipeError::Declined`],
    /// the others with [`PipeError::Remote`] carrying `cause`). Collective.
    pub fn open_declined(comm: &Communicator, cause: crate::Cause) -> PipeError {
        open_declined(comm, cause, crate::Side::Source)
    }

    /// Sends this rank's part of record `record` (see [`PipeWriter::write`]).
    fn send(&mut self, data: &[u8], me: u32, record: u64) -> Result<(), PipeError> {
        let check = interrupt_of(&self.comm);
        match &mut self.mode {
            Mode::Stdout { plan } => {
                let total = plan.total_bytes();
                let mut whole = vec![0u8; if me == 0 { total as usize } else { 0 }];
                redistribute_plan(
                    &self.comm,
                    plan,
                    data,
                    &mut whole,
                    &ExchangeOptions::default(),
                )?;
                let wrote = if me == 0 {
                    write_stdout(&whole, &check, || PipeError::PeerGone {
                        side: "consumer",
                        rank: 0,
                        when: format!("(standard output closed) in record {record}"),
                    })
                } else {
                    Ok(())
                };
                agree_on_outcome(&self.comm, wrote)?;
            }
            Mode::Net { plan, socks, bytes } => {
                let n = socks.len();
                let mut frame = Vec::with_capacity(HEADER_LEN + MAX_PAYLOAD as usize);
                // Start at a different consumer on each rank, to spread the load.
                for k in 0..n {
                    let c = (me as usize + k) % n;
                    let mut left = bytes[c];
                    let mut cur = (left > 0)
                        .then(|| plan.runs(u64::from(me), c as u64))
                        .transpose()?
                        .map(RunCursor::new);
                    loop {
                        let len = left.min(u64::from(MAX_PAYLOAD));
                        frame.clear();
                        frame.extend_from_slice(&[0u8; HEADER_LEN]);
                        // The frame's runs gathered by progressions, then checksummed
                        // while the payload is in cache.
                        let got = match cur.as_mut() {
                            Some(c) => c.pack(data, len, &mut frame).map_err(|o| {
                                PipeError::BufferSize {
                                    need: o.need,
                                    got: o.got,
                                }
                            })?,
                            None => 0,
                        };
                        let crc = crc32c(frame.get(HEADER_LEN..).unwrap_or_default());
                        let h = Header {
                            kind: Kind::Data,
                            record,
                            len: got as u32,
                            crc,
                        };
                        frame[..HEADER_LEN].copy_from_slice(&h.encode());
                        write_full(&mut socks[c], &frame, &check, |_| PipeError::PeerGone {
                            side: "consumer",
                            rank: c as u32,
                            when: format!("in record {record}"),
                        })?;
                        left -= got;
                        if left == 0 {
                            break;
                        }
                    }
                }
            }
        }
        Ok(())
    }

    /// Ends the stream: every consumer rank reads the end after the last record. Returns
    /// when the consumer has closed its end (so every record was read). Its waits ask the
    /// interrupt check as [`PipeWriter::write`]'s do.
    ///
    /// # Errors
    /// [`PipeError::PeerGone`] when a consumer rank went away first; [`PipeError::Msg`]
    /// when interrupted; [`PipeError::Io`] when an earlier write stopped the writer.
    pub fn close(self) -> Result<(), PipeError> {
        if let Some(r) = self.broken {
            return Err(stopped("writer", PipeStep::Socket, r));
        }
        let check = interrupt_of(&self.comm);
        if let Mode::Net { socks, .. } = self.mode {
            let end = Header {
                kind: Kind::End,
                record: self.record,
                len: 0,
                crc: 0,
            }
            .encode();
            for (c, mut s) in socks.into_iter().enumerate() {
                let gone = |_: ()| PipeError::PeerGone {
                    side: "consumer",
                    rank: c as u32,
                    when: "before the end of the stream".into(),
                };
                write_full(&mut s, &end, &check, |_| gone(()))?;
                let _ = s.shutdown(Shutdown::Write);
                s.set_read_timeout(Some(CHECK_EVERY))
                    .map_err(|e| PipeError::io(PipeStep::Socket, e))?;
                let mut sink = [0u8; 64];
                loop {
                    match s.read(&mut sink) {
                        Ok(0) => break,
                        Ok(_) => {}
                        Err(e) if only_waited(&e) => check()?,
                        Err(_) => return Err(gone(())),
                    }
                }
            }
        }
        Ok(())
    }
}
