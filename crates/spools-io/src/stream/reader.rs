//! Streams into the job: a sender outside the job (`spools send`, a
//! [`spools_stream::Sender`], any program speaking [`spools_proto::stream`]) connects its K
//! links to rank 0, which moves link `s` to rank `s % P` when the sender can move (its
//! hello says `HELLO_CAN_MOVE`) and keeps every link otherwise. Each rank reassembles its
//! links' pieces of each ADU; rank 0 names the next ADU, and one exchange moves it from
//! the links (M1: `stripe(unit=SU, count=K)`, link `s` on rank `s % P`; or the whole ADU
//! on rank 0) into every rank's share of the application's layout (M2).

use std::net::{IpAddr, Ipv4Addr, Ipv6Addr, SocketAddr};

use spools_map::{Layout, Plan};
use spools_msg::Communicator;
use spools_proto::auth::Secret;
pub use spools_stream::Limits;

mod inbox;
mod links;
mod next;
mod stash;

use inbox::{Bound, Inbox, Role};
pub use next::AduInfo;
use next::{Head, Next};

use crate::error::{Side, StreamRecvError};
use spools_exchange::collective::{agree as agree_on_outcome, fit_ranks, rank_bytes};
use spools_exchange::Digest;
use spools_exchange::{exchange, ExchangeOptions, Owners};

/// What the other ranks learn when rank 0's wait for the next ADU was interrupted.
const RANK0_INTERRUPTED: &str =
    "rank 0 was interrupted while it waited for the next ADU; the stream is closed";

/// What every call fails with once a call failed part-way.
const STOPPED: &str = "an earlier call failed part-way (interrupted, or a rank failed); \
                       the stream is closed";

/// A stream into the job, open on every rank of a communicator: one logical connection
/// from one sender, whose ADUs (of one or more streams, in the order the receiver hands
/// them out) the job receives one by one, collectively.
///
/// Rank 0 listens where the sender connects. A sender that can move its links (every
/// `spools_stream` sender, `spools send`) has link `s` moved to rank `s % P`, which
/// listens on its host's address; every rank then receives its links' SUs straight into
/// its piece of each ADU, and one exchange moves the ADU from the links into the layout.
/// A sender that cannot move has every link on rank 0, which holds each ADU whole. Each
/// ADU is acknowledged on the links once the job received it, so a sender's window
/// (`spools send --window`) holds it to what the job consumed; while the job computes, at
/// most a few ADUs wait on each rank, and a sender without a window is held back by TCP.
///
/// ```no_run
/// use spools_io::stream::StreamReader;
/// use spools_io::stream::Limits;
/// let world = spools::init()?;
/// let frame: spools_map::Layout = "u8[1080,1920,3] block,*,* on 4x1x1".parse()?;
/// let mut mine = vec![0u8; frame.local_bytes(u64::from(world.rank()))? as usize];
/// let mut r = StreamReader::listen(world.communicator(), "0.0.0.0:7000".parse()?, Limits::default())?;
/// while let Some(adu) = r.recv_adu(&mut mine, &frame)? {
///     // ... this rank's share of ADU `adu.adu` is in `mine` ...
/// }
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
pub struct StreamReader {
    comm: Communicator,
    addr: SocketAddr,
    /// This rank's receiver (rank 0's is the lead).
    inbox: Option<Inbox>,
    /// The next ADU, once peeked (on every rank), and this rank's piece of it.
    next: Option<Head>,
    /// The last ADU peeked (where the connection's links are).
    last: Option<Head>,
    held: Vec<u8>,
    /// How the stream ended, once it did: every later call returns it again.
    ended: Option<Next>,
    /// The last plan, for the ADU's source and the layout it was made for.
    plan: Option<(Layout, Layout, Plan)>,
}

impl StreamReader {
    /// Listens at `addr` (port 0: any free port, see [`StreamReader::local_addr`]) on rank
    /// 0 for one logical connection, with `limits` on the ADUs each rank holds. The other
    /// ranks listen for the links rank 0 moves to them: on `addr`'s address when it is a
    /// loopback address, else on every address of their host, named to the sender by the
    /// address the job reaches the rank at (docs/streams.md, "Into a job"). Collective.
    ///
    /// # Errors
    /// [`StreamRecvError::Bind`] on a rank that cannot listen (rank 0 at `addr`; the other
    /// ranks get [`StreamRecvError::Remote`]).
    pub fn listen(
        comm: &Communicator,
        addr: SocketAddr,
        limits: Limits,
    ) -> Result<StreamReader, StreamRecvError> {
        Self::open(comm, addr, limits, None)
    }

    /// [`StreamReader::listen`], requiring every link to prove it knows `secret` (the job
    /// secret handshake, see `spools_stream::Receiver::require_proof`) on every rank: at
    /// rank 0, and again at the rank a link is moved to. A sender that does not prove it is
    /// refused (it sees its link closed) and the job goes on waiting for one that does.
    ///
    /// # Errors
    /// As [`StreamReader::listen`].
    pub fn listen_requiring(
        comm: &Communicator,
        addr: SocketAddr,
        limits: Limits,
        secret: &Secret,
    ) -> Result<StreamReader, StreamRecvError> {
        Self::open(comm, addr, limits, Some(secret))
    }

    fn open(
        comm: &Communicator,
        addr: SocketAddr,
        limits: Limits,
        secret: Option<&Secret>,
    ) -> Result<StreamReader, StreamRecvError> {
        let (me, ranks) = (comm.rank(), comm.size());
        let at = if me == 0 { addr } else { member_addr(addr) };
        let bound = agree_on_outcome(comm, Bound::bind(at, limits, secret), |rank, cause| {
            StreamRecvError::Remote { rank, cause }
        })?;
        // Where each rank is reached: its listener, at the job's address for the rank
        // when it listens on every address.
        let mut named = bound.addr();
        if named.ip().is_unspecified() && me != 0 {
            let loopback = match named.ip() {
                IpAddr::V4(_) => IpAddr::V4(Ipv4Addr::LOCALHOST),
                IpAddr::V6(_) => IpAddr::V6(Ipv6Addr::LOCALHOST),
            };
            named.set_ip(comm.endpoint_ip().unwrap_or(loopback));
        }
        let all: Vec<SocketAddr> = comm
            .allgather_bytes(named.to_string().as_bytes())?
            .iter()
            .map(|a| String::from_utf8_lossy(a).parse().unwrap_or(named))
            .collect();
        let role = match me {
            0 => Role::Lead {
                ranks,
                members: all.clone(),
            },
            rank => Role::Member { rank, ranks },
        };
        let inbox = agree_on_outcome(comm, bound.start(role), |rank, cause| {
            StreamRecvError::Remote { rank, cause }
        })?;
        Ok(StreamReader {
            comm: comm.clone(),
            addr: all.first().copied().unwrap_or(addr),
            inbox: Some(inbox),
            next: None,
            last: None,
            held: Vec::new(),
            ended: None,
            plan: None,
        })
    }

    /// Where the sender connects (the same on every rank).
    pub fn local_addr(&self) -> SocketAddr {
        self.addr
    }

    /// The links of the connection this rank receives, as the last ADU peeked showed them
    /// (empty before any): link `s` on rank `s % P` when the sender moved its links, every
    /// link on rank 0 when it could not.
    pub fn links_here(&self) -> Vec<u16> {
        let Some(h) = self.last else {
            return Vec::new();
        };
        let (me, ranks) = (self.comm.rank(), self.comm.size());
        (0..h.links)
            .filter(|&s| match h.spread {
                true => u32::from(s) % ranks == me,
                false => me == 0,
            })
            .collect()
    }

    /// Waits for the next whole ADU and says what it is, without receiving it: its
    /// stream, number and size (so that an ADU of varying size can be received with a
    /// layout of its size). `None` once the connection ended with every stream complete.
    /// Collective; calling it again returns the same ADU until it is received. Every rank
    /// that holds links of the connection has its piece of the ADU when it returns.
    ///
    /// # Errors
    /// [`StreamRecvError`], the same on every rank: an ADU that did not arrive whole
    /// (`Incomplete`, `Missing`, `Cut`: the sender died or lost a link; `Incomplete`
    /// counts the bytes that arrived on the links of the rank that reports it, rank 0 or
    /// else the first rank whose piece is incomplete), frames refused (`Checksum`,
    /// `Refused`), the receiver failed; `Msg` when a rank failed. The stream's end, error
    /// or not, is returned again by every later call.
    ///
    /// Every rank's wait (rank 0's for the next ADU, the others' for their piece) asks the
    /// process's interrupt check (`spools_am::Worker::set_interrupt`) every 50 ms, as the
    /// other ranks' wait in the broadcast does: a wait it ends fails with `Msg` holding the
    /// interruption on its rank, and with `Receiver` on the others; the reader is then
    /// unusable: every rank stops listening (the sender sees its links closed) and every
    /// later call fails with `Receiver`. So is it after a broadcast or an exchange that
    /// fails.
    ///
    /// The end (`None`) comes out on a rank only once the sender ended the links that rank
    /// holds (rank 0's, on rank 0, tell that the connection ended): a rank never closes a
    /// link the sender is still sending on. That wait asks the interrupt check too; ended
    /// by it, it fails with `Msg` on that rank alone (the others have the end).
    pub fn next_adu(&mut self) -> Result<Option<AduInfo>, StreamRecvError> {
        if let Some(h) = self.next {
            return Ok(Some(h.info));
        }
        if let Some(n) = &self.ended {
            return n.outcome();
        }
        let comm = self.comm.clone();
        let check = || comm.check_interrupt();
        let mut interrupted = None;
        let mut piece = Vec::new();
        let mine = match self.inbox.as_mut().filter(|_| comm.rank() == 0) {
            Some(inbox) => match inbox.next(&check) {
                Ok((next, data)) => {
                    piece = data;
                    next.encode()
                }
                Err(e) => {
                    interrupted = Some(e);
                    Next::Receiver(RANK0_INTERRUPTED.into()).encode()
                }
            },
            None => Vec::new(),
        };
        let told = self.comm.bcast_bytes(0, &mine);
        if let Some(e) = interrupted {
            return Err(self.stop(StreamRecvError::Msg(e)));
        }
        let next = Next::decode(&told.map_err(|e| self.stop(e.into()))?);
        let Next::Adu(head) = next else {
            if let Next::End { spread } = next {
                // Rank 0's links ended; a rank holding links of a spread connection reports
                // the end only once the sender ended its own links too: closed now, they
                // would cut the sender's last frames and the acks it waits for there.
                let (me, ranks) = (comm.rank(), comm.size());
                let holds = (0..spread).any(|s| u32::from(s) % ranks.max(1) == me);
                if me != 0 && holds {
                    if let Some(inbox) = self.inbox.as_mut() {
                        if let Err(e) = inbox.wait_served(&check) {
                            return Err(self.stop(StreamRecvError::Msg(e)));
                        }
                    }
                }
            }
            if next.is_final() {
                self.ended = Some(next.clone());
            }
            return next.outcome();
        };
        // Every rank's piece, or the first rank's reason why it will not come.
        let (me, ranks) = (comm.rank(), comm.size());
        let mut failed = None;
        if me != 0 && links::piece_bytes(&head, me, ranks) > 0 {
            match self.inbox.as_mut().map(|i| i.piece(&head, &check)) {
                Some(Ok(Ok(p))) => piece = p,
                Some(Ok(Err(why))) => failed = Some(why),
                Some(Err(e)) => {
                    interrupted = Some(e);
                    failed = Some(Next::Receiver(format!(
                        "rank {me} was interrupted while it waited for its piece of the ADU"
                    )));
                }
                None => failed = Some(Next::Receiver(STOPPED.into())),
            }
        }
        if head.spread {
            let status = failed.as_ref().map_or_else(Vec::new, Next::encode);
            let all = comm
                .allgather_bytes(&status)
                .map_err(|e| self.stop(e.into()))?;
            failed = all.iter().find(|b| !b.is_empty()).map(|b| Next::decode(b));
        }
        if let Some(e) = interrupted {
            return Err(self.stop(StreamRecvError::Msg(e)));
        }
        if let Some(why) = failed {
            // Every rank's receiver is dropped: the sender sees its links closed.
            self.inbox = None;
            self.ended = Some(why.clone());
            return why.outcome();
        }
        self.next = Some(head);
        self.last = Some(head);
        self.held = piece;
        Ok(Some(head.info))
    }

    /// Receives the next ADU into `buf`, this rank's share of `layout` (rank `r` holds
    /// unit `r`), and says which ADU it was; `None` once the connection ended with every
    /// stream complete. Collective. One exchange moves the ADU from the ranks that hold
    /// its links' pieces into the layout; the ADU is then acknowledged to the sender.
    ///
    /// # Errors
    /// Those of [`StreamReader::next_adu`]; and, on every rank, a layout whose size is not
    /// the ADU's (`AduSize`, `Unsized`: the ADU stays the next one; an ADU of 0 bytes is
    /// taken by [`StreamReader::skip_adu`]), a buffer of the wrong size (`BufferSize` on
    /// its rank, `Remote` on the others), a failed exchange.
    pub fn recv_adu(
        &mut self,
        buf: &mut [u8],
        layout: &Layout,
    ) -> Result<Option<AduInfo>, StreamRecvError> {
        let Some(info) = self.next_adu()? else {
            return Ok(None);
        };
        let local = self.check(buf, layout, info);
        self.agree_call(local, Some(Digest::of(layout)))
            .map_err(|e| self.stop_on_msg(e))?;
        let scattered = self.scatter(buf, layout.units());
        agree_on_outcome(&self.comm, scattered, |rank, cause| {
            StreamRecvError::Remote { rank, cause }
        })
        // The ranks may have left the exchange at different steps.
        .map_err(|e| self.stop(e))?;
        self.taken(info);
        Ok(Some(info))
    }

    /// The first agreement of a receive (and of a declined one): whether every rank's
    /// checks passed, and that every rank passed the same layout (`args`; `None` for a
    /// declined part).
    fn agree_call<T>(
        &self,
        local: Result<T, StreamRecvError>,
        args: Option<Digest>,
    ) -> Result<T, StreamRecvError> {
        spools_exchange::agree_on_call(
            &self.comm,
            local,
            args,
            "layouts",
            spools_exchange::Told::cause,
            |rank, cause| StreamRecvError::Remote { rank, cause },
        )
    }

    /// Takes this rank's part in the receive (or skip) the other ranks make with
    /// [`StreamReader::recv_adu`] (or [`StreamReader::skip_adu`]) only to fail, because a
    /// binding's own check of this rank's arguments failed with `cause`. Nothing is
    /// received: every rank's receive fails (the ADU stays the next one), this one with
    /// the returned [`StreamRecvError::Declined`], the others with
    /// [`StreamRecvError::Remote`] carrying `cause`; at the end of the connection, this
    /// rank's only. Collective.
    pub fn decline_recv(&mut self, cause: crate::Cause) -> StreamRecvError {
        let declined = StreamRecvError::Declined(cause);
        match self.next_adu() {
            Err(e) => e,
            Ok(None) => declined,
            // The first agreement of `recv_adu`: every rank fails it.
            Ok(Some(_)) => {
                // A declined part has no arguments to compare.
                let agreed = self.agree_call(Err::<(), _>(declined), None);
                match agreed {
                    Err(e) => self.stop_on_msg(e),
                    // Not reached: this rank's own error wins the agreement.
                    Ok(()) => StreamRecvError::Unsized,
                }
            }
        }
    }

    /// The job consumed ADU `info`: acknowledged on this rank's links, its piece's buffer
    /// handed back to the receiver.
    fn taken(&mut self, info: AduInfo) {
        self.next = None;
        let piece = std::mem::take(&mut self.held);
        if let Some(i) = &self.inbox {
            i.consumed(info.stream, info.adu, piece);
        }
    }

    /// Makes the reader unusable after a call that failed part-way (`e`, which it
    /// returns): this rank stops listening, and every later call fails with
    /// [`StreamRecvError::Receiver`].
    fn stop(&mut self, e: StreamRecvError) -> StreamRecvError {
        self.inbox = None;
        self.next = None;
        self.held = Vec::new();
        self.ended = Some(Next::Receiver(STOPPED.into()));
        e
    }

    /// [`StreamReader::stop`] when `e` is a messaging failure (an interrupted wait, a
    /// dead rank): the ranks may have left the call at different steps. Other errors of
    /// the agreement (a wrong layout or buffer on some rank) leave the ADU the next one.
    fn stop_on_msg(&mut self, e: StreamRecvError) -> StreamRecvError {
        if matches!(e, StreamRecvError::Msg(_)) {
            self.stop(e)
        } else {
            e
        }
    }

    /// Passes over the next ADU without receiving it, and says which it was (`None` once
    /// the connection ended with every stream complete). Collective. This is how an ADU of
    /// 0 bytes, which no layout holds, is taken; it is acknowledged as a received one.
    ///
    /// # Errors
    /// Those of [`StreamReader::next_adu`]; and, on every rank, a part another rank
    /// declined ([`StreamReader::decline_recv`]: the ADU stays the next one).
    pub fn skip_adu(&mut self) -> Result<Option<AduInfo>, StreamRecvError> {
        let Some(info) = self.next_adu()? else {
            return Ok(None);
        };
        // One agreement, so that a rank whose binding declined the call (a NULL out
        // argument) fails every rank's skip instead of leaving the ranks at different ADUs.
        self.agree_call(Ok(()), None)
            .map_err(|e| self.stop_on_msg(e))?;
        self.taken(info);
        Ok(Some(info))
    }

    /// Whether `layout` holds the ADU and `buf` this rank's share; plans the exchange.
    fn check(&mut self, buf: &[u8], layout: &Layout, info: AduInfo) -> Result<(), StreamRecvError> {
        let size = layout.total_bytes().ok_or(StreamRecvError::Unsized)?;
        if size != info.size {
            return Err(StreamRecvError::AduSize {
                expected: info.size,
                got: size,
            });
        }
        fit_ranks(layout, self.comm.size(), Side::Destination)?;
        let need = rank_bytes(layout, self.comm.rank())?;
        if buf.len() as u64 != need {
            return Err(StreamRecvError::BufferSize {
                need,
                got: buf.len() as u64,
            });
        }
        let Some(head) = self.next else {
            return Err(StreamRecvError::Receiver {
                what: STOPPED.into(),
            });
        };
        let (from, _) = links::source(&head, self.comm.size())?;
        let planned = self
            .plan
            .as_ref()
            .is_some_and(|(f, l, _)| *f == from && l == layout);
        if !planned {
            let plan = Plan::new(&from, layout).map_err(crate::error::ExchangeError::from)?;
            self.plan = Some((from, layout.clone(), plan));
        }
        Ok(())
    }

    /// The exchange from the ranks' pieces of the ADU into every rank's share.
    fn scatter(&self, buf: &mut [u8], units: u64) -> Result<(), StreamRecvError> {
        let (Some((_, _, plan)), Some(head)) = (self.plan.as_ref(), self.next) else {
            return Err(StreamRecvError::Receiver {
                what: STOPPED.into(),
            });
        };
        let (me, ranks) = (self.comm.rank(), self.comm.size());
        let (_, owners) = links::source(&head, ranks)?;
        let src = links::units(&head, me, ranks, &self.held);
        let mut dst: Vec<(u64, &mut [u8])> = if u64::from(me) < units {
            vec![(u64::from(me), buf)]
        } else {
            Vec::new()
        };
        exchange(
            &self.comm,
            plan,
            &owners,
            &Owners::Identity,
            &src,
            &mut dst,
            &ExchangeOptions::default(),
        )?;
        Ok(())
    }
}

/// Where a rank other than 0 listens when rank 0 listens at `addr`: the same loopback
/// address (a job on one host), else every address of its host (any port).
fn member_addr(addr: SocketAddr) -> SocketAddr {
    let ip = match addr.ip() {
        ip if ip.is_loopback() => ip,
        IpAddr::V4(_) => IpAddr::V4(Ipv4Addr::UNSPECIFIED),
        IpAddr::V6(_) => IpAddr::V6(Ipv6Addr::UNSPECIFIED),
    };
    SocketAddr::new(ip, 0)
}
