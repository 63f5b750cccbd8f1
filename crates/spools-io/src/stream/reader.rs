//! Streams into the job: a sender outside the job (`spools send`, a
//! [`spools_stream::Sender`], any program speaking [`spools_proto::stream`]) connects its K
//! links to rank 0, the interface rank, which reassembles the ADUs; each ADU is then
//! scattered by the exchange engine from rank 0 into every rank's share of the
//! application's layout (the plan M1⁻¹∘M2, from the whole ADU on unit 0 to the layout).

use std::net::SocketAddr;

use spools_map::{Layout, Plan, StripeLayout};
use spools_msg::Communicator;
pub use spools_stream::Limits;

mod inbox;

pub use inbox::AduInfo;
use inbox::{Inbox, Next};

use crate::collective::{agree_on_outcome, fit_ranks, rank_bytes};
use crate::error::{Side, StreamRecvError};
use crate::exchange::{exchange, ExchangeOptions, Owners};

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
/// Rank 0 owns every inbound link: it listens, reassembles and holds the next ADU whole,
/// then scatters it. While the job computes, at most a few ADUs wait on rank 0; a sender
/// faster than the job is held back by TCP.
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
pub struct StreamReader<'c> {
    comm: &'c Communicator,
    addr: SocketAddr,
    /// Rank 0's receiver.
    inbox: Option<Inbox>,
    /// The next ADU, once peeked (on every rank), and its bytes (on rank 0).
    next: Option<AduInfo>,
    held: Vec<u8>,
    /// How the stream ended, once it did: every later call returns it again.
    ended: Option<Next>,
    /// The last plan, for the layout (with the ADU size) it was made for.
    plan: Option<(Layout, Plan)>,
}

impl<'c> StreamReader<'c> {
    /// Listens at `addr` (port 0: any free port, see [`StreamReader::local_addr`]) on rank
    /// 0 for one logical connection, with `limits` on the ADUs it accepts. Collective.
    ///
    /// # Errors
    /// [`StreamRecvError::Bind`] on rank 0 when it cannot listen there (the other ranks
    /// get [`StreamRecvError::Remote`]).
    pub fn listen(
        comm: &'c Communicator,
        addr: SocketAddr,
        limits: Limits,
    ) -> Result<StreamReader<'c>, StreamRecvError> {
        let local = if comm.rank() == 0 {
            Inbox::start(addr, limits).map(Some)
        } else {
            Ok(None)
        };
        let inbox = agree_on_outcome(comm, local, |rank| StreamRecvError::Remote { rank })?;
        let bound = inbox
            .as_ref()
            .map(|i| i.addr().to_string())
            .unwrap_or_default();
        let bound = comm.bcast_bytes(0, bound.as_bytes())?;
        let addr = String::from_utf8_lossy(&bound).parse().unwrap_or(addr);
        Ok(StreamReader {
            comm,
            addr,
            inbox,
            next: None,
            held: Vec::new(),
            ended: None,
            plan: None,
        })
    }

    /// Where the sender connects (the same on every rank).
    pub fn local_addr(&self) -> SocketAddr {
        self.addr
    }

    /// Waits for the next whole ADU and says what it is, without receiving it: its
    /// stream, number and size (so that an ADU of varying size can be received with a
    /// layout of its size). `None` once the connection ended with every stream complete.
    /// Collective; calling it again returns the same ADU until it is received.
    ///
    /// # Errors
    /// [`StreamRecvError`], the same on every rank: an ADU that did not arrive whole
    /// (`Incomplete`, `Missing`, `Cut`: the sender died or lost a link), frames refused
    /// (`Refused`: a checksum mismatch, ...), the receiver failed; `Msg` when a rank
    /// failed. The stream's end, error or not, is returned again by every later call.
    ///
    /// Rank 0's wait asks the process's interrupt check (`spools_am::Worker::set_interrupt`)
    /// every 50 ms, as the other ranks' wait in the broadcast does: a wait it ends fails
    /// with `Msg` holding the interruption on rank 0, and with `Receiver` on the others
    /// (rank 0 tells them); the reader is then unusable: rank 0 stops listening (the
    /// sender sees its links closed) and every later call fails with `Receiver`. So is it
    /// after a broadcast or a scatter that fails.
    pub fn next_adu(&mut self) -> Result<Option<AduInfo>, StreamRecvError> {
        if let Some(i) = self.next {
            return Ok(Some(i));
        }
        if let Some(n) = &self.ended {
            return n.outcome();
        }
        let comm = self.comm;
        let mut interrupted = None;
        let mine = match self.inbox.as_mut() {
            Some(inbox) => match inbox.next(&|| comm.check_interrupt()) {
                Ok((next, data)) => {
                    self.held = data;
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
        match &next {
            Next::Adu(i) => self.next = Some(*i),
            n if n.is_final() => self.ended = Some(next.clone()),
            _ => {}
        }
        next.outcome()
    }

    /// Receives the next ADU into `buf`, this rank's share of `layout` (rank `r` holds
    /// unit `r`), and says which ADU it was; `None` once the connection ended with every
    /// stream complete. Collective.
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
        agree_on_outcome(self.comm, local, |rank| StreamRecvError::Remote { rank })
            .map_err(|e| self.stop_on_msg(e))?;
        let scattered = self.scatter(buf, layout.units(), info);
        agree_on_outcome(self.comm, scattered, |rank| StreamRecvError::Remote {
            rank,
        })
        // The ranks may have left the scatter at different steps.
        .map_err(|e| self.stop(e))?;
        self.next = None;
        self.held = Vec::new();
        Ok(Some(info))
    }

    /// Makes the reader unusable after a call that failed part-way (`e`, which it
    /// returns): rank 0 stops listening, and every later call fails with
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
    /// 0 bytes, which no layout holds, is taken.
    ///
    /// # Errors
    /// Those of [`StreamReader::next_adu`].
    pub fn skip_adu(&mut self) -> Result<Option<AduInfo>, StreamRecvError> {
        let info = self.next_adu()?;
        self.next = None;
        self.held = Vec::new();
        Ok(info)
    }

    /// Whether `layout` holds the ADU and `buf` this rank's share; plans the scatter.
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
        let planned = self
            .plan
            .as_ref()
            .is_some_and(|(l, p)| l == layout && p.total_bytes() == size);
        if !planned {
            // The whole ADU as unit 0 of a byte stream, to the layout.
            let whole = Layout::Stripe(StripeLayout::new(size, 1, Some(size))?);
            let plan = Plan::new(&whole, layout).map_err(crate::error::ExchangeError::from)?;
            self.plan = Some((layout.clone(), plan));
        }
        Ok(())
    }

    /// The exchange from rank 0's whole ADU into every rank's share.
    fn scatter(&self, buf: &mut [u8], units: u64, info: AduInfo) -> Result<(), StreamRecvError> {
        let Some((_, plan)) = self.plan.as_ref() else {
            return Err(StreamRecvError::AduSize {
                expected: info.size,
                got: 0,
            });
        };
        let me = self.comm.rank();
        let src: Vec<(u64, &[u8])> = if me == 0 {
            vec![(0, &self.held[..])]
        } else {
            Vec::new()
        };
        let mut dst: Vec<(u64, &mut [u8])> = if u64::from(me) < units {
            vec![(u64::from(me), buf)]
        } else {
            Vec::new()
        };
        exchange(
            self.comm,
            plan,
            &Owners::Identity,
            &Owners::Identity,
            &src,
            &mut dst,
            &ExchangeOptions::default(),
        )?;
        Ok(())
    }
}
