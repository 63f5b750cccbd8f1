//! One logical connection from the job to a destination: K links owned by the ranks (round
//! the hosts, then round each host's ranks: on one host, link `s` by rank `s % P`),
//! carrying any number of streams. Each ADU is reshuffled by the exchange engine into the
//! links' stripes ([`super::distribution`]) and handed to the owners' sending threads
//! ([`super::link`]).

use std::collections::BTreeMap;
use std::net::SocketAddr;
use std::sync::Arc;

use spools_map::{Layout, Plan};
use spools_msg::Communicator;
use spools_proto::auth::Secret;
use spools_proto::stream::{Close, Open, MAX_LINKS, MAX_SU, NOT_SEQUENCED, VARIABLE};
use spools_stream::{LinkSender, SendError};

use super::distribution::{concatenated, link_owners, owned_by, stripes, stripes_after};
use super::link::{stripe_crcs, Item, LinkThread, Refused};
use super::{StreamId, StreamOptions};
use crate::error::{ExchangeError, StreamError};
use spools_exchange::collective::{agree as agree_on_outcome, rank_bytes};
use spools_exchange::{agree_on_call, Digest};
use spools_exchange::{exchange, ExchangeOptions, Owners};

/// Plans kept per stream (one per layout its ADUs were sent with).
const PLANS: usize = 8;

/// A stream open on the connection.
struct Stream {
    opts: StreamOptions,
    /// The size of every ADU (a fixed-size stream, once its first ADU is sent).
    size: Option<u64>,
    /// Whether its `open` was queued on the links (with its first ADU, or its close).
    announced: bool,
    /// ADUs sent.
    adus: u64,
    /// The plans from the layouts its ADUs came in (behind a prefix of so many bytes) to
    /// the links' stripes, latest first.
    plans: Vec<(Layout, u64, Arc<Plan>)>,
}

/// A logical connection from the job to one destination outside it (`spools recv`, or any
/// program speaking [`spools_proto::stream`]): `links` TCP links, owned round the hosts,
/// then round each host's ranks (on one host, link `s` by rank `s % P` of the
/// communicator's `P` ranks), and any number of streams on them. Every method is
/// collective (every rank calls it, with the same arguments but its own data) and an error
/// on any rank fails the call on every rank. A connection dropped without
/// [`close`](StreamConnection::close) (after an error) is abandoned: its links stop at once
/// and the receiver sees its open streams end incomplete.
/// So is a connection whose call failed part-way: a wait that the process's interrupt
/// check ended (room in a link's window, the links' last sends, a collective step), a
/// rank or link failing once an ADU was being queued; every later call then fails at
/// once, without communication, with [`StreamError::Link`] saying so.
///
/// ```no_run
/// use spools_io::stream::{StreamConnection, StreamOptions};
/// let world = spools::init()?;
/// let half: spools_map::Layout = "u8[1080,1920,3] block,*,* on 4x1x1".parse()?;
/// let mine = vec![0u8; half.local_bytes(u64::from(world.rank()))? as usize];
/// let mut c = StreamConnection::open(world.communicator(), "127.0.0.1:5000".parse()?, 4)?;
/// // A stereo pair: two streams in lock step.
/// let eye = StreamOptions { group: 1, ..Default::default() };
/// let (left, right) = (c.open_stream(eye)?, c.open_stream(eye)?);
/// for _ in 0..10 {
///     c.send_group(1, &[(left, &mine, &half), (right, &mine, &half)])?;
/// }
/// c.close()?;
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
pub struct StreamConnection {
    comm: Communicator,
    links: u16,
    /// The sending threads of the links this rank owns, in increasing link order.
    owned: Vec<LinkThread>,
    /// Which rank holds each link's stripe.
    link_owners: Owners,
    /// The same, as a list.
    owners: Vec<u32>,
    /// Open streams.
    streams: BTreeMap<u32, Stream>,
    /// The next stream's id.
    next: u32,
    /// Whether a call failed part-way (see [`StreamConnection::abandon`]): every later
    /// call fails.
    abandoned: bool,
}

/// What every call on an abandoned connection fails with.
const ABANDONED: &str = "the connection was abandoned: an earlier call failed part-way \
                         (interrupted, or a rank or link failed), and it sends no more";

impl StreamConnection {
    /// Opens a connection of `links` links to `dest`: rank `r` opens links `r, r + P, ...`.
    /// Collective. The links prove no secret: a destination that requires the job
    /// secret's proof refuses them (see [`StreamConnection::open_proving`]).
    ///
    /// # Errors
    /// [`StreamError::Format`] for 0 or more than 1024 links; [`StreamError::Unreachable`],
    /// [`StreamError::Refused`] or [`StreamError::Unproven`] on the ranks whose link could
    /// not be opened, and [`StreamError::Remote`] on the others.
    pub fn open(
        comm: &Communicator,
        dest: SocketAddr,
        links: u16,
    ) -> Result<StreamConnection, StreamError> {
        Self::connect(comm, dest, links, None)
    }

    /// [`StreamConnection::open`], each link proving that the job knows `secret` (the
    /// job's secret) if the destination asks for it (`spools recv --secret FILE`, a
    /// [`spools_stream::Receiver::require_proof`]); to a destination that does not, the
    /// links are the same as [`StreamConnection::open`]'s. `World::stream_connect` of the
    /// `spools` crate opens its connections this way, with the job's own secret.
    ///
    /// # Errors
    /// As [`StreamConnection::open`]; [`StreamError::Unproven`] on every rank owning a
    /// link when the destination requires another secret.
    pub fn open_proving(
        comm: &Communicator,
        dest: SocketAddr,
        links: u16,
        secret: &Secret,
    ) -> Result<StreamConnection, StreamError> {
        Self::connect(comm, dest, links, Some(secret))
    }

    /// Opens the connection, proving `secret` if given and asked for.
    pub(crate) fn connect(
        comm: &Communicator,
        dest: SocketAddr,
        links: u16,
        secret: Option<&Secret>,
    ) -> Result<StreamConnection, StreamError> {
        check_links(links)?;
        // One connection id for the job's links, from rank 0.
        let id = if comm.rank() == 0 {
            spools_boot::random::random::<8>().map_err(StreamError::Random)
        } else {
            Ok([0; 8])
        };
        let id = agree_on_outcome(comm, id, |rank, cause| StreamError::Remote { rank, cause })?;
        let id = comm.bcast_bytes(0, &id)?;
        let conn = u64::from_le_bytes(
            id.get(..8)
                .and_then(|b| b.try_into().ok())
                .unwrap_or([0; 8]),
        );
        let owners = link_owners(links, &comm.hosts());
        let local = owned_by(&owners, comm.rank())
            .into_iter()
            .map(|s| {
                match secret {
                    Some(secret) => LinkSender::connect_proving(dest, links, s, conn, secret),
                    None => LinkSender::connect(dest, links, s, conn),
                }
                .map_err(|e| StreamError::of_link(s, None, e))
                .and_then(|l| LinkThread::start(l, links).map_err(StreamError::Thread))
            })
            .collect::<Result<Vec<_>, _>>();
        let owned = agree_on_outcome(comm, local, |rank, cause| StreamError::Remote {
            rank,
            cause,
        })?;
        Ok(StreamConnection {
            comm: comm.clone(),
            links,
            owned,
            link_owners: Owners::List(owners.clone()),
            owners,
            streams: BTreeMap::new(),
            next: 1,
            abandoned: false,
        })
    }

    /// Links of the connection.
    pub fn links(&self) -> u16 {
        self.links
    }

    /// The rank that owns each link, by link: round the hosts, then round each host's
    /// ranks (on one host, link `s` on rank `s % P`).
    pub fn link_owners(&self) -> &[u32] {
        &self.owners
    }

    /// ADUs stream `id` has sent (0 for a stream that is not open).
    pub fn adus(&self, id: StreamId) -> u64 {
        self.streams.get(&id.0).map_or(0, |s| s.adus)
    }

    /// Opens a stream on the connection; streams are told apart by their ids, in the order
    /// they were opened. Its `open` frame goes on the links with its first ADU (a
    /// fixed-size stream's ADU size is its first ADU's). Collective, without
    /// communication: every rank gets the same id or error.
    ///
    /// # Errors
    /// [`StreamError::Format`]: a TU of 0, or (not `variable`) not a multiple of the links,
    /// or SUs over 64 MiB; a window of 0. [`StreamError::UnknownStream`]: `after` names no
    /// stream opened on this connection. [`StreamError::Link`] once the connection is
    /// abandoned.
    pub fn open_stream(&mut self, opts: StreamOptions) -> Result<StreamId, StreamError> {
        self.usable()?;
        check_options(self.links, &opts)?;
        if let Some(StreamId(a)) = opts.after {
            if a == 0 || a >= self.next {
                return Err(StreamError::UnknownStream { stream: a });
            }
        }
        if self.next == NOT_SEQUENCED {
            return Err(StreamError::Format("too many streams on one connection"));
        }
        let id = self.next;
        self.next += 1;
        self.streams.insert(
            id,
            Stream {
                opts,
                size: None,
                announced: false,
                adus: 0,
                plans: Vec::new(),
            },
        );
        Ok(StreamId(id))
    }

    /// Sends the next ADU of stream `id`: `data` is this rank's share (unit `rank`) of
    /// `layout`, which may differ from one ADU to the next (plans are kept per layout).
    /// Returns once the ADU is reshuffled and queued on the link owners' sending threads;
    /// a link's failure is reported by a later call. Collective.
    ///
    /// # Errors
    /// [`StreamError::BufferSize`] (`data` is not this rank's share),
    /// [`StreamError::AduSize`] (a layout of another size than the stream's ADUs),
    /// [`StreamError::LockStep`] (the stream would run ahead of its group),
    /// [`StreamError::UnknownStream`], a failed link, a dead rank; on every rank.
    pub fn send_adu(
        &mut self,
        id: StreamId,
        data: &[u8],
        layout: &Layout,
    ) -> Result<(), StreamError> {
        self.send_checked(id, Ok(&[]), data, layout, false)
    }

    /// Sends the next ADU of stream `id` as `prefix` followed by the canonical bytes of
    /// `layout` (of which `data` is this rank's share): a header in front of a distributed
    /// dataset, as the framebuffer protocol ([`spools_proto::framebuffer`]) puts one in front of
    /// each frame. Rank 0's prefix is the one sent; every rank gives one of the same
    /// length, at most one SU (`tu / links` bytes). Collective.
    ///
    /// ```no_run
    /// use spools_io::stream::{StreamConnection, StreamOptions};
    /// let world = spools::init()?;
    /// let rows: spools_map::Layout = "f64[512,512] block,* on 4x1".parse()?;
    /// let mine = vec![0u8; rows.local_bytes(u64::from(world.rank()))? as usize];
    /// let mut c = StreamConnection::open(world.communicator(), "127.0.0.1:5000".parse()?, 2)?;
    /// let s = c.open_stream(StreamOptions::default())?;
    /// c.send_adu_prefixed(s, b"step 1", &mine, &rows)?;
    /// c.close()?;
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    ///
    /// # Errors
    /// As [`StreamConnection::send_adu`]; [`StreamError::Format`] for a prefix longer than
    /// an SU or on a stream opened `variable`, or prefixes of different lengths.
    pub fn send_adu_prefixed(
        &mut self,
        id: StreamId,
        prefix: &[u8],
        data: &[u8],
        layout: &Layout,
    ) -> Result<(), StreamError> {
        self.send_checked(id, Ok(prefix), data, layout, true)
    }

    /// Sends the next ADU of stream `id` behind `prefix`, or fails on every rank when
    /// `prefix` is an error on any (a header this rank could not make). With `agree_len`,
    /// the ranks also check that their prefixes have one length (a caller's prefixes may
    /// not; the framebuffer protocol's headers always do). Collective.
    pub(super) fn send_checked(
        &mut self,
        id: StreamId,
        prefix: Result<&[u8], StreamError>,
        data: &[u8],
        layout: &Layout,
        agree_len: bool,
    ) -> Result<(), StreamError> {
        self.usable()?;
        let r = self.send_prefixed(id, prefix, data, layout, agree_len);
        self.guard(r)
    }

    /// Takes this rank's part in the send the other ranks make (any send call: every one,
    /// a group's too, starts with an agreement on its local checks) only to fail, because a
    /// binding's own check of this rank's arguments failed with `cause`. Nothing is sent
    /// anywhere; every rank's send fails, this one with the returned
    /// [`StreamError::Declined`], the others with [`StreamError::Remote`] carrying `cause`.
    /// Collective.
    pub fn decline_send(&mut self, cause: crate::Cause) -> StreamError {
        if let Err(e) = self.usable() {
            return e;
        }
        // A declined part has no arguments to compare.
        let r = self.agree_call::<()>(Err(StreamError::Declined(cause)), None);
        match self.guard(r) {
            Err(e) => e,
            // Not reached: this rank's own error wins the agreement.
            Ok(()) => StreamError::Format("a declined send succeeded"),
        }
    }

    /// [`StreamConnection::send_checked`], not guarded.
    fn send_prefixed(
        &mut self,
        id: StreamId,
        prefix: Result<&[u8], StreamError>,
        data: &[u8],
        layout: &Layout,
        agree_len: bool,
    ) -> Result<(), StreamError> {
        let local = prefix.and_then(|p| Ok((self.prepare(id.0, p.len() as u64, data, layout)?, p)));
        let args = Digest::of(&(id.0, layout, agree_len));
        let ((plan, size, tu), prefix) = self.agree_call(local, Some(args))?;
        if agree_len {
            // The plan was agreed from the same layout everywhere; the prefix lengths too.
            let mut lens = vec![0u64; self.comm.size() as usize];
            self.comm.allgather(&[prefix.len() as u64], &mut lens)?;
            if lens.iter().any(|&l| l != prefix.len() as u64) {
                return Err(StreamError::Format(
                    "the ranks gave prefixes of different lengths",
                ));
            }
        }
        self.deliver(id.0, prefix, data, plan.as_deref(), size, tu)
    }

    /// Sends the next ADU of stream `id`, opened `variable`: the ADU is every rank's `data`
    /// in rank order (each rank gives any number of bytes, 0 too). The sizes are agreed
    /// first; on the wire the ADU is one TU, striped over the links in SUs of
    /// `ceil(size / links)` bytes. Collective.
    ///
    /// # Errors
    /// [`StreamError::Format`] for a stream not opened `variable` or an ADU whose SUs
    /// would exceed 64 MiB; [`StreamError::LockStep`], [`StreamError::UnknownStream`], a
    /// failed link, a dead rank; on every rank.
    pub fn send_var(&mut self, id: StreamId, data: &[u8]) -> Result<(), StreamError> {
        self.usable()?;
        let r = self.send_var_unguarded(id, data);
        self.guard(r)
    }

    /// [`StreamConnection::send_var`], not guarded.
    fn send_var_unguarded(&mut self, id: StreamId, data: &[u8]) -> Result<(), StreamError> {
        let local = self.ready(id.0).and_then(|st| {
            if st.opts.variable {
                Ok(())
            } else {
                Err(StreamError::Format(
                    "send_var needs a stream opened variable",
                ))
            }
        });
        self.agree_call(local, Some(Digest::of(&id.0)))?;
        let mut counts = vec![0u64; self.comm.size() as usize];
        self.comm.allgather(&[data.len() as u64], &mut counts)?;
        let size: u64 = counts.iter().sum();
        let su = size.div_ceil(u64::from(self.links));
        if su > u64::from(MAX_SU) {
            return Err(StreamError::Format(
                "a variable-size ADU is one TU: its SUs must be at most 64 MiB",
            ));
        }
        let plan = if size == 0 {
            None
        } else {
            let dst = stripes(size, su, self.links)?;
            Some(Plan::new(&concatenated(&counts)?, &dst).map_err(ExchangeError::from)?)
        };
        self.deliver(id.0, &[], data, plan.as_ref(), size, size.max(1))
    }

    /// Sends ADU n of every open stream of lock-step group `group`, each `(stream, this
    /// rank's share, layout)`, in the order given: the group stays in step by construction.
    /// Collective.
    ///
    /// # Errors
    /// [`StreamError::Group`] unless `items` names every open stream of the group once and
    /// no other; then as [`StreamConnection::send_adu`].
    pub fn send_group(
        &mut self,
        group: u32,
        items: &[(StreamId, &[u8], &Layout)],
    ) -> Result<(), StreamError> {
        let ids: Vec<StreamId> = items.iter().map(|i| i.0).collect();
        self.agree_group(group, &ids)?;
        for &(id, data, layout) in items {
            self.send_adu(id, data, layout)?;
        }
        Ok(())
    }

    /// [`StreamConnection::send_group`] with a prefix in front of each ADU, as
    /// [`StreamConnection::send_adu_prefixed`]: `(stream, prefix, this rank's share,
    /// layout)`. Collective.
    ///
    /// # Errors
    /// As [`StreamConnection::send_group`] and [`StreamConnection::send_adu_prefixed`].
    pub fn send_group_prefixed(
        &mut self,
        group: u32,
        items: &[(StreamId, &[u8], &[u8], &Layout)],
    ) -> Result<(), StreamError> {
        let ids: Vec<StreamId> = items.iter().map(|i| i.0).collect();
        self.agree_group(group, &ids)?;
        for &(id, prefix, data, layout) in items {
            self.send_adu_prefixed(id, prefix, data, layout)?;
        }
        Ok(())
    }

    /// The open streams of lock-step group `group`.
    pub(crate) fn group_size(&self, group: u32) -> usize {
        self.streams
            .values()
            .filter(|st| group != 0 && st.opts.group == group)
            .count()
    }

    /// The group of stream `id` (0: none), if it is open.
    pub(crate) fn group_of(&self, id: StreamId) -> Option<u32> {
        self.streams.get(&id.0).map(|st| st.opts.group)
    }

    /// The first step of a group send: `items` checked ([`StreamConnection::check_group`])
    /// and the outcome agreed, so that wrong items anywhere, or a rank that declines its
    /// part ([`StreamConnection::decline_send`]), fail the send on every rank before
    /// anything is sent.
    pub(super) fn agree_group(
        &mut self,
        group: u32,
        items: &[StreamId],
    ) -> Result<(), StreamError> {
        self.usable()?;
        let checked = self.check_group(group, items);
        // The streams in the same order on every rank: their ADUs go out in that order.
        let ids: Vec<u32> = items.iter().map(|s| s.0).collect();
        let r = self.agree_call(checked, Some(Digest::of(&(group, ids))));
        self.guard(r)
    }

    /// Checks that `items` names every open stream of group `group` once, and no other.
    pub(super) fn check_group(&self, group: u32, items: &[StreamId]) -> Result<(), StreamError> {
        let bad = |what| StreamError::Group { group, what };
        if group == 0 {
            return Err(bad("group 0 is no group"));
        }
        let mut named: Vec<u32> = Vec::new();
        for StreamId(s) in items {
            if self.streams.get(s).is_none_or(|st| st.opts.group != group) {
                return Err(bad("a stream that is not open in this group"));
            }
            if named.contains(s) {
                return Err(bad("a stream named twice"));
            }
            named.push(*s);
        }
        if self
            .streams
            .iter()
            .any(|(s, st)| st.opts.group == group && !named.contains(s))
        {
            return Err(bad("an open stream of the group is missing"));
        }
        Ok(())
    }

    /// Ends stream `id` (its `close` frame, with its ADU count, goes on every link after its
    /// last ADU). Collective.
    ///
    /// # Errors
    /// [`StreamError::UnknownStream`], a failed link, a dead rank; on every rank.
    pub fn close_stream(&mut self, id: StreamId) -> Result<(), StreamError> {
        self.usable()?;
        let r = self.close_stream_unguarded(id);
        self.guard(r)
    }

    /// [`StreamConnection::close_stream`], not guarded.
    fn close_stream_unguarded(&mut self, id: StreamId) -> Result<(), StreamError> {
        // A stream ahead of its group may end (the group goes on without it).
        let local = self.check_links().and_then(|()| {
            if self.streams.contains_key(&id.0) {
                Ok(())
            } else {
                Err(StreamError::UnknownStream { stream: id.0 })
            }
        });
        self.agree(local)?;
        let st = self
            .streams
            .remove(&id.0)
            .ok_or(StreamError::UnknownStream { stream: id.0 })?;
        let mut items = Vec::new();
        if !st.announced {
            items.push(Item::Open(open_frame(id.0, &st.opts, st.size.unwrap_or(0))));
        }
        items.push(Item::Close(Close {
            stream: id.0,
            adus: st.adus,
        }));
        let queued = self.queue_all(&st.opts, || items.clone());
        let r = self.agree(queued);
        if r.is_err() {
            // Queued on some links, maybe not on others.
            self.abandon();
        }
        r
    }

    /// Closes the streams still open, then the connection: every link sends what it holds
    /// and ends. Collective.
    ///
    /// # Errors
    /// A link that failed, on its owner, and [`StreamError::Remote`] on the other ranks;
    /// [`StreamError::Msg`] when the wait for the links' last sends (a receiver that does
    /// not read) was interrupted (the connection is then abandoned);
    /// [`StreamError::Link`] when it was abandoned before.
    pub fn close(mut self) -> Result<(), StreamError> {
        self.usable()?;
        let open: Vec<u32> = self.streams.keys().copied().collect();
        for id in open {
            self.close_stream(StreamId(id))?;
        }
        // Every link finishes at once; a receiver that does not read holds them in
        // their last sends, and the wait for them asks the interrupt check.
        self.owned.iter().for_each(LinkThread::finish);
        let comm = &self.comm;
        let check = move || comm.check_interrupt();
        let mut local = Ok(());
        for l in &mut self.owned {
            if let Err(e) = l.wait_ended(&check) {
                // The links not waited for are abandoned with the connection.
                local = Err(StreamError::Msg(e));
                break;
            }
            let link = l.link();
            let r = l
                .end()
                .map_err(|f| StreamError::of_link(link, f.at, f.source));
            if local.is_ok() {
                local = r;
            }
        }
        self.agree(local)
    }

    /// Keeps `r`, abandoning the connection first when it is a messaging failure (an
    /// interrupted wait, a dead rank): the ranks may have left the call at different
    /// steps.
    fn guard<T>(&mut self, r: Result<T, StreamError>) -> Result<T, StreamError> {
        if matches!(
            r,
            Err(StreamError::Msg(_) | StreamError::Exchange(ExchangeError::Msg(_)))
        ) {
            self.abandon();
        }
        r
    }

    /// Abandons the connection after a call that failed part-way (an ADU queued on some
    /// links and not others, a wait interrupted, a rank failed in the middle): its links
    /// stop at once, without sending more (the receiver sees its open streams cut short),
    /// and every later call fails with a [`StreamError::Link`] that says so.
    fn abandon(&mut self) {
        self.abandoned = true;
        self.owned.clear();
    }

    fn agree<T>(&self, local: Result<T, StreamError>) -> Result<T, StreamError> {
        agree_on_outcome(&self.comm, local, |rank, cause| StreamError::Remote {
            rank,
            cause,
        })
    }

    /// The first agreement of every send (and of a declined one): whether every rank's
    /// checks passed, and that every rank passed the same arguments (`args`: the stream,
    /// the layout, a group's streams in order; `None` for a declined part), before
    /// anything is queued.
    fn agree_call<T>(
        &self,
        local: Result<T, StreamError>,
        args: Option<Digest>,
    ) -> Result<T, StreamError> {
        agree_on_call(
            &self.comm,
            local,
            args,
            "streams or layouts",
            spools_exchange::Told::cause,
            |rank, cause| StreamError::Remote { rank, cause },
        )
    }

    /// Checks that stream `id` may send its next ADU: it is open, its group is not behind
    /// it, and no link of this rank has failed.
    fn ready(&mut self, id: u32) -> Result<&mut Stream, StreamError> {
        self.check_links()?;
        let st = self
            .streams
            .get(&id)
            .ok_or(StreamError::UnknownStream { stream: id })?;
        let (group, n) = (st.opts.group, st.adus);
        if group != 0 {
            if let Some((&behind, o)) = self
                .streams
                .iter()
                .find(|(&s, o)| s != id && o.opts.group == group && o.adus < n)
            {
                return Err(StreamError::LockStep {
                    stream: id,
                    adu: n,
                    behind,
                    sent: o.adus,
                });
            }
        }
        self.streams
            .get_mut(&id)
            .ok_or(StreamError::UnknownStream { stream: id })
    }

    /// The error of every call once the connection is abandoned (see
    /// [`StreamConnection::abandon`]), at once and without communication: the ranks may
    /// be out of step, and a rank may wait in a call the others left.
    fn usable(&self) -> Result<(), StreamError> {
        if !self.abandoned {
            return Ok(());
        }
        Err(StreamError::Link {
            link: owned_by(&self.owners, self.comm.rank())
                .first()
                .copied()
                .unwrap_or(0),
            source: SendError::Format(ABANDONED),
        })
    }

    /// A link of this rank that stopped: its error.
    fn check_links(&mut self) -> Result<(), StreamError> {
        match self.owned.iter_mut().find(|l| l.failed()) {
            Some(l) => Err(link_error(l)),
            None => Ok(()),
        }
    }

    /// The local checks of a fixed-layout ADU, and its plan: (plan, ADU size, TU size).
    fn prepare(
        &mut self,
        id: u32,
        prefix: u64,
        data: &[u8],
        layout: &Layout,
    ) -> Result<(Option<Arc<Plan>>, u64, u64), StreamError> {
        let (me, k) = (self.comm.rank(), self.links);
        let size = layout
            .total_bytes()
            .ok_or(StreamError::Format("an unsized layout"))?
            + prefix;
        let need = rank_bytes(layout, me)?;
        if data.len() as u64 != need {
            return Err(StreamError::BufferSize {
                need,
                got: data.len() as u64,
            });
        }
        let st = self.ready(id)?;
        let (tu, su) = if st.opts.variable {
            let su = size.div_ceil(u64::from(k));
            if su > u64::from(MAX_SU) {
                return Err(StreamError::Format(
                    "a variable-size ADU is one TU: its SUs must be at most 64 MiB",
                ));
            }
            (size.max(1), su)
        } else {
            if let Some(want) = st.size.filter(|&w| w != size) {
                return Err(StreamError::AduSize {
                    stream: id,
                    want,
                    got: size,
                });
            }
            (st.opts.tu, st.opts.tu / u64::from(k))
        };
        if prefix > 0 && (st.opts.variable || prefix > su) {
            return Err(StreamError::Format(
                "a prefix goes on a fixed-size stream and fits in one SU",
            ));
        }
        if size == 0 {
            return Ok((None, 0, tu));
        }
        let plan = match st
            .plans
            .iter()
            .position(|(l, p, _)| l == layout && *p == prefix)
        {
            Some(i) => {
                let p = st.plans.remove(i);
                st.plans.insert(0, p);
                Arc::clone(&st.plans[0].2)
            }
            None => {
                let dst = if prefix == 0 {
                    stripes(size, su, k)?
                } else {
                    stripes_after(size, tu, k, prefix)?
                };
                let plan = Arc::new(Plan::new(layout, &dst).map_err(ExchangeError::from)?);
                st.plans.truncate(PLANS - 1);
                st.plans
                    .insert(0, (layout.clone(), prefix, Arc::clone(&plan)));
                plan
            }
        };
        Ok((Some(plan), size, tu))
    }

    /// Reshuffles one ADU of `size` bytes into the links' stripes (`plan`; none for an
    /// empty ADU), queues this rank's stripes on its links (after the stream's `open`, with
    /// its first ADU), and agrees.
    fn deliver(
        &mut self,
        id: u32,
        prefix: &[u8],
        data: &[u8],
        plan: Option<&Plan>,
        size: u64,
        tu: u64,
    ) -> Result<(), StreamError> {
        // A rank with one link computes its SUs' CRCs here, while the link sends the ADU
        // before (its thread only writes); the threads of a rank with several links each
        // compute their own, side by side.
        let (links, here) = (self.links, self.owned.len() == 1);
        let stripes = self.reshuffle(plan, prefix, data).and_then(|stripes| {
            stripes
                .into_iter()
                .zip(&self.owned)
                .map(|(b, l)| {
                    if !here {
                        return Ok((b, Vec::new()));
                    }
                    stripe_crcs(links, l.link(), size, tu, &b)
                        .map(|crcs| (b, crcs))
                        .map_err(|e| StreamError::of_link(l.link(), None, e))
                })
                .collect::<Result<Vec<_>, _>>()
        });
        let st = self
            .streams
            .get_mut(&id)
            .ok_or(StreamError::UnknownStream { stream: id })?;
        let announce = (!st.announced).then(|| open_frame(id, &st.opts, size));
        let (opts, adu) = (st.opts, st.adus);
        let queuing = stripes.is_ok();
        let queued = stripes.and_then(|stripes| {
            let mut stripes = stripes.into_iter();
            self.queue_all(&opts, || {
                let (stripe, crcs) = stripes.next().unwrap_or_default();
                let mut items: Vec<Item> = announce.iter().copied().map(Item::Open).collect();
                items.push(Item::Adu {
                    stream: id,
                    adu,
                    size,
                    tu,
                    stripe,
                    crcs,
                });
                items
            })
        });
        let agreed = self.agree(queued);
        if agreed.is_err() && queuing {
            // This rank queued the ADU on its links (or some of them) and a rank failed:
            // the ADU may be on some links and not others. (A reshuffle refused on
            // every rank, a layout that does not fit, queued nothing: the stream goes on.)
            self.abandon();
        }
        agreed?;
        if let Some(st) = self.streams.get_mut(&id) {
            st.announced = true;
            if !st.opts.variable {
                st.size = Some(size);
            }
            st.adus += 1;
        }
        Ok(())
    }

    /// This rank's stripes of one ADU (one per link it owns, in link order); link 0's
    /// starts with `prefix`.
    fn reshuffle(
        &self,
        plan: Option<&Plan>,
        prefix: &[u8],
        data: &[u8],
    ) -> Result<Vec<Vec<u8>>, StreamError> {
        let me = self.comm.rank();
        let mine: Vec<u64> = self.owned.iter().map(|l| u64::from(l.link())).collect();
        let Some(plan) = plan else {
            return Ok(vec![Vec::new(); mine.len()]);
        };
        let head = |s: u64| if s == 0 { prefix.len() } else { 0 };
        // Each link's stripe in a buffer it sent before (every byte is written below).
        let mut bufs = mine
            .iter()
            .zip(&self.owned)
            .map(|(&s, l)| {
                plan.dst().local_bytes(s).map(|n| {
                    let mut b = l.stripe(head(s) + n as usize);
                    b[..head(s)].copy_from_slice(&prefix[..head(s)]);
                    b
                })
            })
            .collect::<Result<Vec<_>, _>>()?;
        let src: Vec<(u64, &[u8])> = if u64::from(me) < plan.src().units() {
            vec![(u64::from(me), data)]
        } else {
            Vec::new()
        };
        let mut dst: Vec<(u64, &mut [u8])> = mine
            .iter()
            .zip(bufs.iter_mut())
            .map(|(&s, b)| (s, &mut b[head(s)..]))
            .collect();
        exchange(
            &self.comm,
            plan,
            &Owners::Identity,
            &self.link_owners,
            &src,
            &mut dst,
            &ExchangeOptions::default(),
        )?;
        Ok(bufs)
    }

    /// Queues `items()` on each link this rank owns (called once per link, in link order).
    /// A wait for room in a link's window asks the interrupt check.
    fn queue_all(
        &mut self,
        opts: &StreamOptions,
        mut items: impl FnMut() -> Vec<Item>,
    ) -> Result<(), StreamError> {
        let comm = &self.comm;
        let check = move || comm.check_interrupt();
        for l in &mut self.owned {
            for item in items() {
                match l.queue(opts.priority, opts.window, item, &check) {
                    Ok(()) => {}
                    Err(Refused::Stopped) => return Err(link_error(l)),
                    Err(Refused::Interrupted(e)) => return Err(StreamError::Msg(e)),
                }
            }
        }
        Ok(())
    }
}

/// Checks a connection's link count.
fn check_links(links: u16) -> Result<(), StreamError> {
    if links == 0 || links > MAX_LINKS {
        return Err(StreamError::Format("1 to 1024 links"));
    }
    Ok(())
}

/// Checks a stream's options on a connection of `links` links (what
/// [`StreamConnection::open_stream`] checks before it looks at the connection's streams).
pub(super) fn check_options(links: u16, opts: &StreamOptions) -> Result<(), StreamError> {
    check_links(links)?;
    let k = u64::from(links);
    if opts.tu == 0 {
        return Err(StreamError::Format("the TU must be at least 1 byte"));
    }
    if !opts.variable && opts.tu % k != 0 {
        return Err(StreamError::Format(
            "the TU must be a multiple of the links",
        ));
    }
    if !opts.variable && opts.tu / k > u64::from(MAX_SU) {
        return Err(StreamError::Format(
            "SUs (TU / links) must be at most 64 MiB",
        ));
    }
    if opts.window == 0 {
        return Err(StreamError::Format("the window must be at least 1 ADU"));
    }
    Ok(())
}

/// The `open` frame of stream `id` (ADUs of `size` bytes unless variable).
fn open_frame(id: u32, opts: &StreamOptions, size: u64) -> Open {
    Open {
        stream: id,
        group: opts.group,
        after: opts.after.map_or(NOT_SEQUENCED, |a| a.0),
        flags: 0,
        tu: opts.tu,
        adu: if opts.variable { VARIABLE } else { size },
    }
}

/// The error of a link thread that stopped.
fn link_error(l: &mut LinkThread) -> StreamError {
    let link = l.link();
    match l.end() {
        Err(f) => StreamError::of_link(link, f.at, f.source),
        Ok(()) => StreamError::Link {
            link,
            source: SendError::Format("the link's sending thread ended early"),
        },
    }
}
