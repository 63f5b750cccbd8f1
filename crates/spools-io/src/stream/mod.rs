//! Streams out of the job (the iWarp paper's streams device): each ADU, distributed over
//! the ranks by any layout, is reshuffled by the exchange engine into the *I/O
//! distribution* — `stripe(unit=TU/K, count=K)` of its byte stream, unit `s` on rank `s` —
//! and rank `s` sends its SUs over link `s` of the logical connection. The plan is
//! M1⁻¹∘M2, as for every device; the wire format is [`spools_proto::stream`].

use std::net::SocketAddr;

use spools_map::{Layout, Plan};
use spools_msg::Communicator;
use spools_proto::stream::{Frame, Open, NOT_SEQUENCED};
use spools_stream::LinkSender;

mod link;
mod reader;

use link::LinkThread;
pub use reader::{AduInfo, Limits, StreamReader};

use crate::collective::{agree_on_outcome, rank_bytes};
use crate::error::StreamError;
use crate::exchange::{exchange, ExchangeOptions, Owners};

/// How a stream is cut and striped.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct StreamFormat {
    /// Links (TCP connections) to stripe over; link `s` is owned by rank `s`.
    pub links: u16,
    /// Bytes of a Transfer Unit; a multiple of `links` (each SU is `tu / links` bytes).
    pub tu: u64,
}

/// A stream from this job to one destination, open on every rank of a communicator.
///
/// ```no_run
/// use spools_io::stream::{StreamFormat, StreamWriter};
/// let world = spools::init()?;
/// let frame: spools_map::Layout = "u8[1080,1920,3] block,*,* on 4x1x1".parse()?;
/// let mine = vec![0u8; frame.local_bytes(u64::from(world.rank()))? as usize];
/// let dest = "127.0.0.1:5000".parse()?;
/// let fmt = StreamFormat { links: 2, tu: 1 << 20 };
/// let mut s = StreamWriter::open(world.communicator(), dest, &frame, fmt)?;
/// s.write(&mine)?; // one ADU: the whole frame
/// s.close()?;
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
pub struct StreamWriter<'c> {
    comm: &'c Communicator,
    link: Option<LinkThread>,
    layout: Layout,
    plan: Plan,
    size: u64,
    adus: u64,
}

impl<'c> StreamWriter<'c> {
    /// Opens a stream of ADUs laid out as `layout` (rank `r` holds unit `r`) to `dest`.
    /// Collective over `comm`: ranks `0..links` each open their link.
    ///
    /// # Errors
    /// [`StreamError`]: a format the job cannot send (more links than ranks, a TU that
    /// the links do not divide), the destination unreachable or refusing; an error on any
    /// rank fails the call on every rank.
    pub fn open(
        comm: &'c Communicator,
        dest: SocketAddr,
        layout: &Layout,
        format: StreamFormat,
    ) -> Result<StreamWriter<'c>, StreamError> {
        let local = Self::prepare(comm, layout, format);
        let prepared = agree_on_outcome(comm, local, |rank| StreamError::Remote { rank })?;
        let (plan, size) = prepared;
        // One connection id for the job's links, from rank 0.
        let id = if comm.rank() == 0 {
            spools_boot::random::random::<8>().map_err(StreamError::Random)
        } else {
            Ok([0; 8])
        };
        let id = agree_on_outcome(comm, id, |rank| StreamError::Remote { rank })?;
        let id = comm.bcast_bytes(0, &id)?;
        let conn = u64::from_le_bytes(
            id.get(..8)
                .and_then(|b| b.try_into().ok())
                .unwrap_or([0; 8]),
        );
        let me = comm.rank();
        let link = if me < u32::from(format.links) {
            let link = me as u16;
            LinkSender::connect(dest, format.links, link, conn)
                .and_then(|mut l| {
                    l.send(&Frame::Open(Open {
                        stream: 1,
                        group: 0,
                        after: NOT_SEQUENCED,
                        flags: 0,
                        tu: format.tu,
                        adu: size,
                    }))?;
                    Ok(l)
                })
                .map_err(|source| StreamError::Link { link, source })
                .and_then(|l| {
                    LinkThread::start(l, format.links, format.tu).map_err(StreamError::Thread)
                })
                .map(Some)
        } else {
            Ok(None)
        };
        let link = agree_on_outcome(comm, link, |rank| StreamError::Remote { rank })?;
        Ok(StreamWriter {
            comm,
            link,
            layout: layout.clone(),
            plan,
            size,
            adus: 0,
        })
    }

    fn prepare(
        comm: &Communicator,
        layout: &Layout,
        f: StreamFormat,
    ) -> Result<(Plan, u64), StreamError> {
        if f.links == 0 || u32::from(f.links) > comm.size() {
            return Err(StreamError::Format("1 to as many links as ranks"));
        }
        if f.tu == 0 || f.tu % u64::from(f.links) != 0 {
            return Err(StreamError::Format(
                "the TU must be a positive multiple of the links",
            ));
        }
        let size = layout
            .total_bytes()
            .ok_or(StreamError::Format("an unsized layout"))?;
        let su = f.tu / u64::from(f.links);
        let stripes: Layout = format!("stripe(unit={su},count={},size={size})", f.links)
            .parse()
            .map_err(|_| StreamError::Format("no stripe layout for this format"))?;
        let plan = Plan::new(layout, &stripes).map_err(crate::error::ExchangeError::from)?;
        Ok((plan, size))
    }

    /// The ADUs sent so far.
    pub fn adus(&self) -> u64 {
        self.adus
    }

    /// Sends one ADU: `data` is this rank's share of the layout. Collective. Returns once
    /// the ADU is reshuffled and handed to the link owners' sending threads (each holds at
    /// most one more ADU while it sends one: the next ADU is computed and reshuffled while
    /// this one is on the wire); a link's failure is reported by a later `write` or
    /// [`close`](StreamWriter::close).
    ///
    /// # Errors
    /// [`StreamError`]: a buffer of the wrong size, a dead rank, a link that fails; an
    /// error on any rank fails the call on every rank.
    pub fn write(&mut self, data: &[u8]) -> Result<(), StreamError> {
        let local = self.send_local(data);
        agree_on_outcome(self.comm, local, |rank| StreamError::Remote { rank })?;
        let handed = self.reshuffle_and_hand_over(data);
        agree_on_outcome(self.comm, handed, |rank| StreamError::Remote { rank })?;
        self.adus += 1;
        Ok(())
    }

    fn send_local(&mut self, data: &[u8]) -> Result<(), StreamError> {
        let me = self.comm.rank();
        let need = rank_bytes(&self.layout, me)?;
        if data.len() as u64 != need {
            return Err(StreamError::BufferSize {
                need,
                got: data.len() as u64,
            });
        }
        // A link that failed sending an earlier ADU fails this one, before the reshuffle.
        if let Some(l) = self.link.as_mut().filter(|l| l.failed()) {
            let link = l.link();
            return Err(match l.end(None) {
                Err(source) => StreamError::Link { link, source },
                Ok(()) => StreamError::Format("the link ended early"),
            });
        }
        Ok(())
    }

    /// The reshuffle into the links' stripes (rank `s` holds stripe unit `s`), then the
    /// stripe to this rank's link thread.
    fn reshuffle_and_hand_over(&mut self, data: &[u8]) -> Result<(), StreamError> {
        let me = self.comm.rank();
        let plan = &self.plan;
        let mine = rank_bytes(plan.dst(), me)?;
        let mut stripe = vec![0u8; mine as usize];
        {
            let src: Vec<(u64, &[u8])> = if u64::from(me) < plan.src().units() {
                vec![(u64::from(me), data)]
            } else {
                Vec::new()
            };
            let mut dst: Vec<(u64, &mut [u8])> = if u64::from(me) < plan.dst().units() {
                vec![(u64::from(me), &mut stripe[..])]
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
        }
        let Some(l) = self.link.as_mut() else {
            return Ok(());
        };
        if l.send(self.adus, self.size, stripe).is_err() {
            let link = l.link();
            return Err(match l.end(None) {
                Err(source) => StreamError::Link { link, source },
                Ok(()) => StreamError::Format("the link ended early"),
            });
        }
        Ok(())
    }

    /// Ends the stream (with the ADUs sent) and the connection. Collective.
    ///
    /// # Errors
    /// [`StreamError`] when a link fails, on every rank.
    pub fn close(mut self) -> Result<(), StreamError> {
        let adus = self.adus;
        let local = match self.link.as_mut() {
            Some(l) => {
                let link = l.link();
                l.end(Some(adus))
                    .map_err(|source| StreamError::Link { link, source })
            }
            None => Ok(()),
        };
        agree_on_outcome(self.comm, local, |rank| StreamError::Remote { rank })
    }
}
