//! The consumer's end of a parallel pipe.

use std::io::Read;
use std::net::{TcpListener, TcpStream};
use std::os::fd::AsFd;
use std::time::{Duration, Instant};

use rustix::event::{PollFd, PollFlags};
use spools_map::{Layout, Plan};
use spools_msg::Communicator;

use super::frame::{Header, Hello, Kind, HEADER_LEN, HELLO_LEN, MAX_PAYLOAD};
use super::name::{forget, meet_all, meet_timeout, token_hex, Description, PipeName};
use super::wait::{interrupt_of, only_waited, stopped, Check, CHECK_EVERY, POLL_TIMEOUT};
use super::{
    agree_on_outcome, agree_on_record, check_both_units, on_rank0, open_declined, open_end,
};
use crate::error::{PipeError, PipeStep, PipeViolation};
use spools_exchange::crc::crc32c;
use spools_exchange::cursor::RunCursor;
use spools_exchange::redistribute_plan;
use spools_exchange::ExchangeOptions;

/// The consumer's end of a parallel pipe; [`PipeReader::read`] receives one record.
///
/// ```no_run
/// let world = spools::init()?;
/// let l: spools_map::Layout = "u8[1024,1024] *,block on 1x3".parse()?;
/// let name: spools_io::pipe::PipeName = "pipe:frames".parse()?;
/// let mut input = spools_io::pipe::PipeReader::open(world.io_communicator()?, &name, &l)?;
/// let mut mine = vec![0u8; l.local_bytes(u64::from(world.rank()))? as usize];
/// while input.read(&mut mine)? {
///     // one record of this rank's columns
/// }
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
pub struct PipeReader {
    comm: Communicator,
    layout: Layout,
    record: u64,
    ended: bool,
    /// The record in which a read failed (or was interrupted) part-way: the connections
    /// are closed and every later read fails.
    broken: Option<u64>,
    mode: Mode,
}

impl std::fmt::Debug for PipeReader {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("PipeReader")
            .field("layout", &self.layout.to_string())
            .field("record", &self.record)
            .finish_non_exhaustive()
    }
}

enum Mode {
    Net {
        plan: Plan,
        socks: Vec<TcpStream>,
        bytes: Vec<u64>,
    },
    Stdin {
        plan: Plan,
    },
}

/// Most connections whose hello is awaited at once; a newer one cuts off the oldest.
const MAX_PENDING_HELLOS: usize = 64;
/// Time a connection gets to send its hello.
const HELLO_TIMEOUT: Duration = Duration::from_secs(3);

/// A connection accepted but not yet proven.
struct Pending {
    stream: TcpStream,
    hello: [u8; HELLO_LEN],
    got: usize,
    since: Instant,
}

/// Accepts one connection from every producer rank, each proving the token. Hellos are
/// read without blocking, at most [`MAX_PENDING_HELLOS`] at a time, each within
/// [`HELLO_TIMEOUT`]: a flood of idle or garbage connections neither stalls nor keeps out
/// the producer's ranks. The wait asks `check` every [`CHECK_EVERY`].
fn accept_all(
    l: &TcpListener,
    token: &[u8; 16],
    deadline: Instant,
    check: Check<'_>,
) -> Result<Vec<TcpStream>, PipeError> {
    l.set_nonblocking(true)
        .map_err(|e| PipeError::io(PipeStep::Listen { on: None }, e))?;
    let mut asked = Instant::now();
    let mut slots: Vec<Option<TcpStream>> = Vec::new();
    let mut expected: Option<u32> = None;
    let mut pending: Vec<Pending> = Vec::new();
    while expected.is_none_or(|n| slots.iter().filter(|s| s.is_some()).count() < n as usize) {
        // Checked on every turn: a flood keeps the loop busy, never past the deadline.
        if Instant::now() > deadline {
            return Err(PipeError::Timeout {
                side: "producer",
                name: "this pipe".into(),
                secs: meet_timeout().as_secs(),
            });
        }
        let mut busy = false;
        match l.accept() {
            Ok((s, _)) => {
                busy = true;
                s.set_nonblocking(true)
                    .map_err(|e| PipeError::io(PipeStep::Socket, e))?;
                if pending.len() >= MAX_PENDING_HELLOS {
                    pending.remove(0);
                }
                pending.push(Pending {
                    stream: s,
                    hello: [0; HELLO_LEN],
                    got: 0,
                    since: Instant::now(),
                });
            }
            Err(e) if e.kind() == std::io::ErrorKind::WouldBlock => {}
            Err(e) => return Err(PipeError::io(PipeStep::Accept { on: None }, e)),
        }
        let mut i = 0;
        while i < pending.len() {
            let p = &mut pending[i];
            match p.stream.read(&mut p.hello[p.got..]) {
                Ok(0) => {
                    pending.swap_remove(i);
                    continue;
                }
                Ok(n) => {
                    busy = true;
                    p.got += n;
                }
                Err(e) if e.kind() == std::io::ErrorKind::WouldBlock => {}
                Err(_) => {
                    pending.swap_remove(i);
                    continue;
                }
            }
            if p.got < HELLO_LEN {
                if p.since.elapsed() > HELLO_TIMEOUT {
                    pending.swap_remove(i);
                } else {
                    i += 1;
                }
                continue;
            }
            let p = pending.swap_remove(i);
            // A connection that does not prove the token is dropped, not trusted.
            let Ok(hello) = Hello::decode(&p.hello) else {
                continue;
            };
            if &hello.token != token {
                continue;
            }
            let n = *expected.get_or_insert(hello.ranks);
            if hello.ranks != n {
                return Err(PipeError::Protocol {
                    side: "producer",
                    rank: hello.rank,
                    violation: PipeViolation::RanksDisagree {
                        said: hello.ranks,
                        others: n,
                    },
                });
            }
            slots.resize_with(n as usize, || None);
            if hello.rank >= n || slots[hello.rank as usize].is_some() {
                return Err(PipeError::Protocol {
                    side: "producer",
                    rank: hello.rank,
                    violation: PipeViolation::DuplicateRank,
                });
            }
            let s = p.stream;
            // Blocking, but a read waits at most CHECK_EVERY before the interrupt check.
            s.set_nonblocking(false)
                .and_then(|()| s.set_read_timeout(Some(CHECK_EVERY)))
                .map_err(|e| PipeError::io(PipeStep::Socket, e))?;
            let _ = s.set_nodelay(true);
            slots[hello.rank as usize] = Some(s);
        }
        if !busy {
            if asked.elapsed() >= CHECK_EVERY {
                check()?;
                asked = Instant::now();
            }
            std::thread::sleep(Duration::from_millis(2));
        }
    }
    Ok(slots.into_iter().flatten().collect())
}

impl PipeReader {
    /// Opens the pipe `name` for reading records distributed as `layout` (rank `r` holds
    /// unit `r`). Collective over `comm`; waits (up to `SPOOLS_PIPE_TIMEOUT`, 60 s) for
    /// the producer.
    ///
    /// # Errors
    /// [`PipeError`]: no producer in time, layouts of different datasets, connections
    /// that fail; an error on any rank fails the call on every rank.
    pub fn open(comm: &Communicator, name: &PipeName, layout: &Layout) -> Result<Self, PipeError> {
        let local = match name {
            PipeName::Stdout => Err(PipeError::BadName("stdout (a consumer reads)".into())),
            _ => Ok(()),
        };
        let total = open_end(comm, name, layout, crate::Side::Destination, local)?;
        let me = comm.rank();
        let mode = match name {
            PipeName::Stdin => Mode::Stdin {
                plan: Plan::new(&on_rank0(total)?, layout)?,
            },
            PipeName::Stdout => return Err(PipeError::BadName("stdout (a consumer reads)".into())),
            _ => {
                // The address other hosts reach this rank at, unless told otherwise.
                let host = std::env::var("SPOOLS_PIPE_HOST").unwrap_or_else(|_| {
                    comm.endpoint_ip()
                        .map_or_else(|| "127.0.0.1".into(), |ip| ip.to_string())
                });
                let listener = TcpListener::bind((host.as_str(), 0)).map_err(|e| {
                    PipeError::io(
                        PipeStep::Listen {
                            on: Some(host.clone()),
                        },
                        e,
                    )
                });
                let addr = listener
                    .as_ref()
                    .ok()
                    .and_then(|l| l.local_addr().ok())
                    .map(|a| a.to_string())
                    .unwrap_or_default();
                let listener = agree_on_outcome(comm, listener)?;
                let addrs: Vec<String> = comm
                    .allgather_bytes(addr.as_bytes())?
                    .into_iter()
                    .map(|a| String::from_utf8_lossy(&a).into_owned())
                    .collect();
                // Rank 0 draws the token every consumer rank checks connections against.
                let mut token = [0u8; 16];
                if me == 0 {
                    token = spools_boot::random::random()
                        .map_err(|e| PipeError::io(PipeStep::RandomToken, e))?;
                }
                comm.bcast(&mut token, 0)?;
                let mine = Description {
                    layout: layout.to_string(),
                    ranks: comm.size(),
                    addrs,
                    token: token_hex(&token),
                    pid: std::process::id(),
                };
                let (theirs, pl) = meet_all(comm, name, false, &mine, layout)?;
                // (The meeting files stay: the producer may not have read ours yet.)
                check_both_units(comm, layout, crate::Side::Destination, &pl, theirs.ranks)?;
                let plan = Plan::new(&pl, layout)?;
                let conn = (|| -> Result<(Vec<TcpStream>, Vec<u64>), PipeError> {
                    let deadline = Instant::now() + meet_timeout();
                    let socks = accept_all(&listener, &token, deadline, &interrupt_of(comm))?;
                    if socks.len() as u32 != theirs.ranks {
                        return Err(PipeError::Protocol {
                            side: "producer",
                            rank: 0,
                            violation: PipeViolation::Connections {
                                got: socks.len(),
                                ranks: theirs.ranks,
                            },
                        });
                    }
                    let mut bytes = Vec::new();
                    for p in 0..u64::from(theirs.ranks) {
                        bytes.push(if p < pl.units() && u64::from(me) < layout.units() {
                            plan.runs(p, u64::from(me))?.map(|r| r.len).sum()
                        } else {
                            0
                        });
                    }
                    Ok((socks, bytes))
                })();
                let conn = agree_on_outcome(comm, conn)?;
                if me == 0 {
                    forget(name);
                }
                Mode::Net {
                    plan,
                    socks: conn.0,
                    bytes: conn.1,
                }
            }
        };
        Ok(PipeReader {
            comm: comm.clone(),
            layout: layout.clone(),
            record: 0,
            ended: false,
            broken: None,
            mode,
        })
    }

    /// Records read so far.
    pub fn records(&self) -> u64 {
        self.record
    }

    /// Takes this rank's part in the read the other ranks make only to fail it, because a
    /// binding's own check of this rank's arguments failed with `cause`: nothing is read
    /// (the record stays the next one), every rank's read fails (this one with
    /// [`PipeError::Declined`], the others with [`PipeError::Remote`] carrying `cause`).
    /// At the end of the stream, or once stopped, as [`PipeReader::read`] would be: no
    /// collective step. Collective.
    pub fn decline_read(&mut self, cause: crate::Cause) -> PipeError {
        if let Some(r) = self.broken {
            return stopped("reader", PipeStep::Poll, r);
        }
        let declined = PipeError::Declined(cause.clone());
        if self.ended {
            return declined;
        }
        match agree_on_record(&self.comm, &self.layout, 0, Err(declined)) {
            Err(e) => e,
            // Not reached: this rank's own error wins the agreement.
            Ok(()) => PipeError::Declined(cause),
        }
    }

    /// Takes this rank's part in the opening the other ranks make with
    /// [`PipeReader::open`] only to fail it (as
    /// [`PipeWriter::open_declined`](crate::pipe::PipeWriter::open_declined)).
    /// Collective.
    pub fn open_declined(comm: &Communicator, cause: crate::Cause) -> PipeError {
        open_declined(comm, cause, crate::Side::Destination)
    }

    /// Receives the next record into this rank's share `data`; `false` at the end of the
    /// stream (the producer closed the pipe). Collective: the ranks first agree that every
    /// rank's buffer holds its share (a wrong buffer on any rank fails the read on every
    /// rank, before a byte is taken: the record stays the next one).
    ///
    /// Its waits ask the process's interrupt check (`spools_am::Worker::set_interrupt`)
    /// every 50 ms: a wait it ends fails with [`PipeError::Msg`] holding the interruption.
    /// A read that fails part-way (anything but a wrong buffer), or whose agreement is
    /// interrupted, leaves the reader stopped: its connections are closed (the producer
    /// sees it gone) and every later read fails, on every rank (a stopped rank takes part
    /// in the agreement with its error, so no rank waits in it for a stopped one).
    ///
    /// # Errors
    /// [`PipeError::PeerGone`] when a producer rank went away before closing the pipe,
    /// [`PipeError::Checksum`], [`PipeError::Protocol`], [`PipeError::BufferSize`];
    /// [`PipeError::Msg`] when interrupted; [`PipeError::Io`] once stopped.
    pub fn read(&mut self, data: &mut [u8]) -> Result<bool, PipeError> {
        if self.ended && self.broken.is_none() {
            return Ok(false);
        }
        // Every rank's buffer checked before any rank takes a byte of the record (a wrong
        // buffer fails the read on every rank and leaves the stream in step). A stopped
        // reader takes part too, with its error: a rank whose earlier read was interrupted
        // in this agreement (the others went on into the record) is not stopped, and
        // would wait here for the others forever.
        let ready = match self.broken {
            Some(r) => Err(stopped("reader", PipeStep::Poll, r)),
            None => Ok(()),
        };
        if let Err(e) = agree_on_record(&self.comm, &self.layout, data.len(), ready) {
            // The agreement itself failed (interrupted, a rank gone): the ranks may be out
            // of step, as after a record taken part-way.
            if matches!(e, PipeError::Msg(_)) && self.broken.is_none() {
                self.broken = Some(self.record);
                if let Mode::Net { socks, .. } = &mut self.mode {
                    socks.clear();
                }
            }
            return Err(e);
        }
        let me = self.comm.rank();
        let record = self.record;
        let check = interrupt_of(&self.comm);
        let more = match &mut self.mode {
            Mode::Stdin { plan } => read_stdin(&self.comm, plan, data, record, &check),
            Mode::Net { plan, socks, bytes } => {
                read_net(plan, socks, bytes, me, data, record, &check)
            }
        };
        let more = match more {
            Ok(m) => m,
            Err(e) => {
                // Part of the record may have been taken: the stream is out of step.
                self.broken = Some(record);
                if let Mode::Net { socks, .. } = &mut self.mode {
                    socks.clear();
                }
                return Err(e);
            }
        };
        if more {
            self.record += 1;
        } else {
            self.ended = true;
            if let Mode::Net { socks, .. } = &mut self.mode {
                socks.clear();
            }
        }
        Ok(more)
    }
}

/// Reads one record of the canonical byte stream on rank 0's standard input, and
/// scatters it (collective).
fn read_stdin(
    comm: &Communicator,
    plan: &Plan,
    data: &mut [u8],
    record: u64,
    check: Check<'_>,
) -> Result<bool, PipeError> {
    let me = comm.rank();
    let total = plan.total_bytes() as usize;
    let mut whole = vec![0u8; if me == 0 { total } else { 0 }];
    // 0: a record, 1: the end, 2: a stream cut in the middle of a record, 3: rank 0's
    // wait was interrupted (the others fail too, instead of waiting for it).
    let mut interrupted = None;
    let state = if me == 0 {
        match read_whole_stdin(&mut whole, check) {
            Ok(0) => 1u8,
            Ok(g) if g == total => 0,
            Ok(_) => 2,
            Err(e) => {
                interrupted = Some(e);
                3
            }
        }
    } else {
        0
    };
    let mut s = [state];
    let sent = comm.bcast(&mut s, 0);
    if let Some(e) = interrupted {
        return Err(e);
    }
    sent?;
    match s[0] {
        1 => return Ok(false),
        3 => {
            return Err(PipeError::Remote {
                rank: 0,
                cause: crate::Cause::new(
                    crate::ErrorKind::Transport,
                    "rank 0 was interrupted while reading standard input",
                ),
            })
        }
        2 => {
            return Err(PipeError::PeerGone {
                side: "producer",
                rank: 0,
                when: format!("(standard input ended) in the middle of record {record}"),
            })
        }
        _ => {}
    }
    redistribute_plan(comm, plan, &whole, data, &ExchangeOptions::default())?;
    Ok(true)
}

/// Fills `whole` from standard input, up to its end: the bytes read. The read is of the
/// descriptor itself (no buffer of this process holds bytes back from `poll`), each wait
/// at most [`CHECK_EVERY`] before `check`.
fn read_whole_stdin(whole: &mut [u8], check: Check<'_>) -> Result<usize, PipeError> {
    let stdin = std::io::stdin();
    let fd = stdin.as_fd();
    let mut got = 0;
    while got < whole.len() {
        let mut fds = [PollFd::new(&fd, PollFlags::IN)];
        match rustix::event::poll(&mut fds, Some(&POLL_TIMEOUT)) {
            Ok(0) | Err(rustix::io::Errno::INTR) => {
                check()?;
                continue;
            }
            Ok(_) => {}
            // Not pollable (a regular file is always ready): read as it comes.
            Err(_) => {}
        }
        match rustix::io::read(fd, &mut whole[got..]) {
            Ok(0) => break,
            Ok(n) => got += n,
            Err(rustix::io::Errno::INTR | rustix::io::Errno::AGAIN) => check()?,
            Err(_) => break,
        }
    }
    Ok(got)
}

/// Reads exactly `buf.len()` bytes from `s` (whose reads time out every
/// [`CHECK_EVERY`]), asking `check` whenever a read only waited; `gone()` when the
/// connection ends or fails first.
fn read_full(
    s: &mut TcpStream,
    buf: &mut [u8],
    check: Check<'_>,
    gone: impl Fn() -> PipeError,
) -> Result<(), PipeError> {
    let mut at = 0;
    while at < buf.len() {
        match s.read(&mut buf[at..]) {
            Ok(0) => return Err(gone()),
            Ok(n) => at += n,
            Err(e) if only_waited(&e) => check()?,
            Err(_) => return Err(gone()),
        }
    }
    Ok(())
}

/// Reads one record from every producer rank, taking frames from whichever connection has
/// one (a producer's frames of the next record wait in its connection: back-pressure).
/// Asks `check` whenever no frame came for [`CHECK_EVERY`].
fn read_net(
    plan: &Plan,
    socks: &mut [TcpStream],
    bytes: &[u64],
    me: u32,
    data: &mut [u8],
    record: u64,
    check: Check<'_>,
) -> Result<bool, PipeError> {
    let n = socks.len();
    let mut left: Vec<Option<u64>> = bytes.iter().map(|&b| Some(b)).collect();
    let mut first = vec![true; n];
    let mut ended = 0;
    let mut cursors: Vec<Option<RunCursor>> = (0..n).map(|_| None).collect();
    let mut payload = vec![0u8; MAX_PAYLOAD as usize];
    loop {
        let waiting: Vec<usize> = (0..n).filter(|&p| left[p].is_some()).collect();
        if waiting.is_empty() {
            break;
        }
        let ready: Vec<bool> = {
            let mut fds: Vec<PollFd<'_>> = waiting
                .iter()
                .map(|&p| PollFd::new(&socks[p], PollFlags::IN))
                .collect();
            match rustix::event::poll(&mut fds, Some(&POLL_TIMEOUT)) {
                Ok(0) | Err(rustix::io::Errno::INTR) => {
                    check()?;
                    continue;
                }
                Ok(_) => {}
                Err(e) => return Err(PipeError::io(PipeStep::Poll, e.into())),
            }
            fds.iter().map(|f| !f.revents().is_empty()).collect()
        };
        for (i, &p) in waiting.iter().enumerate() {
            if !ready[i] {
                continue;
            }
            let gone = || PipeError::PeerGone {
                side: "producer",
                rank: p as u32,
                when: format!("in record {record}"),
            };
            let mut hb = [0u8; HEADER_LEN];
            read_full(&mut socks[p], &mut hb, check, gone)?;
            let h = Header::decode(&hb).map_err(|e| PipeError::Protocol {
                side: "producer",
                rank: p as u32,
                violation: e.into(),
            })?;
            if h.kind == Kind::End {
                if !first[p] || h.record != record {
                    return Err(PipeError::Protocol {
                        side: "producer",
                        rank: p as u32,
                        violation: PipeViolation::EndMidRecord { record },
                    });
                }
                left[p] = None;
                ended += 1;
                continue;
            }
            let rest = left[p].unwrap_or(0);
            let expect = rest.min(u64::from(MAX_PAYLOAD));
            if h.record != record || u64::from(h.len) != expect {
                return Err(PipeError::Protocol {
                    side: "producer",
                    rank: p as u32,
                    violation: PipeViolation::UnexpectedFrame {
                        got_record: h.record,
                        got_len: h.len,
                        record,
                        len: expect,
                    },
                });
            }
            let body = &mut payload[..h.len as usize];
            read_full(&mut socks[p], body, check, gone)?;
            if first[p] && rest > 0 {
                cursors[p] = Some(RunCursor::new(plan.runs(p as u64, u64::from(me))?));
            }
            first[p] = false;
            // Checked before a byte of it is placed; then scattered by progressions.
            if crc32c(body) != h.crc {
                return Err(PipeError::Checksum {
                    rank: p as u32,
                    record,
                });
            }
            if let Some(c) = cursors[p].as_mut() {
                c.unpack(body, data).map_err(|o| PipeError::BufferSize {
                    need: o.need,
                    got: o.got,
                })?;
            }
            let rest = rest - expect;
            left[p] = (rest > 0).then_some(rest);
        }
    }
    match ended {
        0 => Ok(true),
        e if e == n => Ok(false),
        _ => Err(PipeError::Protocol {
            side: "producer",
            rank: 0,
            violation: PipeViolation::PartialEnd {
                ended,
                ranks: n,
                record,
            },
        }),
    }
}

/// The consumer's side of the frames, against a hand-made producer on a real TCP
/// connection: a record arrives; a frame whose CRC32C does not match, or that carries
/// another record's number, is an error naming the producer rank and the record, never
/// data.
#[cfg(test)]
mod frames {
    use std::io::Write;

    use super::*;

    /// A frame as a producer sends it (the CRC32C of "123456789" is the standard check
    /// value 0xe3069283).
    fn frame(kind: Kind, record: u64, payload: &[u8], crc: u32) -> Vec<u8> {
        let h = Header {
            kind,
            record,
            len: payload.len() as u32,
            crc,
        };
        [&h.encode()[..], payload].concat()
    }

    const NINE: &[u8] = b"123456789";
    const NINE_CRC: u32 = 0xe306_9283;

    /// An interrupt check that never interrupts.
    fn never() -> Result<(), PipeError> {
        Ok(())
    }

    /// One producer rank and one consumer rank over `u8[9]`; `bytes` written by the
    /// producer, then its end closed; what `read_net` makes of record `record`.
    fn consume(bytes: &[u8], record: u64) -> (Result<bool, PipeError>, Vec<u8>) {
        let l: Layout = "u8[9] block on 1"
            .parse()
            .unwrap_or_else(|e| unreachable!("{e}"));
        let plan = Plan::new(&l, &l).unwrap_or_else(|e| unreachable!("{e}"));
        // The listener stays bound while the test connects: no port is reserved and
        // released.
        let listener = TcpListener::bind("127.0.0.1:0").unwrap_or_else(|e| unreachable!("{e}"));
        let addr = listener
            .local_addr()
            .unwrap_or_else(|e| unreachable!("{e}"));
        let mut producer = TcpStream::connect(addr).unwrap_or_else(|e| unreachable!("{e}"));
        let (consumer, _) = listener.accept().unwrap_or_else(|e| unreachable!("{e}"));
        producer
            .write_all(bytes)
            .unwrap_or_else(|e| unreachable!("{e}"));
        drop(producer);
        let mut data = vec![0u8; 9];
        let r = read_net(&plan, &mut [consumer], &[9], 0, &mut data, record, &never);
        (r, data)
    }

    #[test]
    fn a_good_record_arrives_and_the_end_ends_the_stream() {
        let (r, data) = consume(&frame(Kind::Data, 0, NINE, NINE_CRC), 0);
        assert!(matches!(r, Ok(true)), "{r:?}");
        assert_eq!(data, NINE);
        let (r, _) = consume(&frame(Kind::End, 5, &[], 0), 5);
        assert!(matches!(r, Ok(false)), "{r:?}");
    }

    #[test]
    fn a_frame_failing_its_crc_is_an_error_naming_rank_and_record() {
        let (r, _) = consume(&frame(Kind::Data, 7, NINE, NINE_CRC ^ 1), 7);
        assert!(
            matches!(r, Err(PipeError::Checksum { rank: 0, record: 7 })),
            "{r:?}"
        );
        // A flipped payload bit under the right checksum of the original.
        let mut f = frame(Kind::Data, 7, NINE, NINE_CRC);
        f[HEADER_LEN + 4] ^= 0x20;
        let (r, _) = consume(&f, 7);
        assert!(
            matches!(r, Err(PipeError::Checksum { rank: 0, record: 7 })),
            "{r:?}"
        );
    }

    #[test]
    fn a_frame_of_another_record_or_length_is_a_protocol_error() {
        for (got, len) in [(8u64, 9usize), (6, 9), (7, 8)] {
            let (r, _) = consume(&frame(Kind::Data, got, &NINE[..len], NINE_CRC), 7);
            assert!(
                matches!(
                    r,
                    Err(PipeError::Protocol {
                        side: "producer",
                        rank: 0,
                        violation: PipeViolation::UnexpectedFrame {
                            got_record,
                            got_len,
                            record: 7,
                            len: 9,
                        },
                    }) if got_record == got && got_len as usize == len
                ),
                "record {got}, {len} bytes: {r:?}"
            );
        }
        // The end in the middle of a record, or of another record.
        let (r, _) = consume(&frame(Kind::End, 6, &[], 0), 7);
        assert!(
            matches!(
                r,
                Err(PipeError::Protocol {
                    violation: PipeViolation::EndMidRecord { record: 7 },
                    ..
                })
            ),
            "{r:?}"
        );
    }

    #[test]
    fn a_producer_gone_mid_record_is_an_error() {
        let f = frame(Kind::Data, 2, NINE, NINE_CRC);
        let (r, _) = consume(&f[..HEADER_LEN + 4], 2);
        assert!(
            matches!(
                r,
                Err(PipeError::PeerGone {
                    side: "producer",
                    rank: 0,
                    ..
                })
            ),
            "{r:?}"
        );
        let (r, _) = consume(&[], 2);
        assert!(matches!(r, Err(PipeError::PeerGone { .. })), "{r:?}");
    }
}
