//! The libfabric transport: between hosts over whatever interconnect libfabric reaches
//! (InfiniBand and RoCE through `verbs`, Slingshot through `cxi`, EFA, Omni-Path, or
//! plain `tcp` and `udp`), or on one host with `SPOOLS_TRANSPORT=ofi`.
//!
//! `libfabric.so.1` is opened at run time (`ffi.rs`); a binary built without it runs
//! where it is absent and says so when asked for it. Each rank opens one reliable
//! datagram endpoint (`FI_EP_RDM`) of the provider chosen (`provider.rs`), publishes its
//! name through the bootstrap, and inserts every rank's name in a table address vector,
//! so that a rank's libfabric address is its rank.
//!
//! Messages travel as untagged sends (`FI_MSG`) of a 16-byte header (sender, lane,
//! priority, a sequence number per (sender, lane, priority)) and the payload:
//! - **Sends** copy into a registered buffer of a fixed pool: a small one when the
//!   message fits the provider's inject size, else a large one; a full pool or an
//!   endpoint that answers `-FI_EAGAIN` is back-pressure (`Ok(false)`). The last buffers
//!   of each pool are kept for high-priority messages, so that they never wait behind
//!   low ones. Every send asks for a completion (none goes by `fi_inject`, which gives
//!   none): a provider may hold a send it accepted until its sender's progress moves it
//!   (`tcp;ofi_rxm` queues sends behind a full socket), so a buffer is free again, and
//!   [`Transport::flush`] says nothing is queued, only once the provider completed it.
//! - **Receives** land in a pool of registered buffers, all posted. A provider may
//!   complete them out of order (a large message sent by rendezvous completes after a
//!   small one sent behind it): the sequence numbers restore each stream's order, and
//!   a batch of completions is served high priority first.
//! - **Waits** sleep in `poll(2)` on the completion queues' descriptors (`FI_WAIT_FD`,
//!   after `fi_trywait`), this transport's wake-up descriptor and, when given, the
//!   shared-memory bell; a provider without descriptors naps for 1 ms at a time.
//! - **Progress**: every call that touches the endpoint reads the completion queues, so
//!   providers with manual progress advance whenever the rank polls or sends.
//!
//! All libfabric calls of a rank are serialised by one lock (`FI_THREAD_DOMAIN`).

mod error;
mod ffi;
mod pool;
mod provider;
mod rma;
mod slot;

use std::collections::HashMap;
use std::ffi::{c_int, c_void};
use std::net::IpAddr;
use std::os::fd::{AsRawFd, BorrowedFd, FromRawFd, OwnedFd};
use std::sync::Arc;
use std::time::Duration;

use spools_boot::client::Bootstrap;
use spools_boot::config::Config;
use spools_boot::health::{Failure, JobHealth};

use crate::caps::{Caps, Priority, SingleCopy};
use crate::error::{Defect, FabricError};
use crate::lock::TryLock;
use crate::transport::{check_send, Incoming, Transport};
pub use error::OfiError;
use ffi::{fi_cq_err_entry, fi_cq_msg_entry, Lib};
use pool::Pool;
pub use provider::{is_high_speed, providers, ProviderInfo, HIGH_SPEED};

/// Bytes of the header before every message: sender (u32), lane (u16), priority (u8),
/// a reserved byte, and the sequence number of the (sender, lane, priority) stream (u64).
pub const HEADER: usize = 16;

/// Largest message: a pool buffer less the header.
pub const MAX_MESSAGE: usize = (256 << 10) - HEADER;

/// Largest message through the RxM and RxD utility layers (`tcp;ofi_rxm`,
/// `verbs;ofi_rxm`, `udp;ofi_rxd`): RxM's eager size. Larger messages, which RxM sends
/// by segmentation or rendezvous, were seen to complete at the sender and never at the
/// receiver (libfabric 1.17, five ranks sending 256 KiB messages among others): the
/// upper layers fragment at this size instead.
pub const MAX_MESSAGE_LAYERED: usize = (16 << 10) - HEADER;

/// The largest message over provider `prov`.
fn max_message_for(prov: &str) -> usize {
    if prov.contains("ofi_rxm") || prov.contains("ofi_rxd") {
        MAX_MESSAGE_LAYERED
    } else {
        MAX_MESSAGE
    }
}

/// Receive buffers posted at all times.
const RX_BUFFERS: usize = 64;

/// Core providers that move data with the CPU, over sockets or shared memory (the part
/// of a provider's name before any `;ofi_rx*` layer): only their reads may land straight
/// in the caller's memory (`OfiTransport::direct_reads`).
const SOFTWARE_CORES: [&str; 5] = ["tcp", "shm", "udp", "sockets", "net"];

/// Receive buffers posted on the high-priority endpoint (after the low endpoint's).
const RX_HIGH: usize = 16;

/// Send buffers; the last [`HIGH_RESERVE`] are for high-priority messages only.
const TX_BUFFERS: usize = 64;
const HIGH_RESERVE: usize = 8;

/// Small send buffers (of [`INJECT_MAX`] bytes, for messages that fit the provider's
/// inject size); the last [`SMALL_HIGH_RESERVE`] are for high-priority messages only.
const SMALL_BUFFERS: usize = 256;
const SMALL_HIGH_RESERVE: usize = 32;

/// The reserved header byte of a connection hello (see `OfiTransport::greet`), which is
/// never delivered.
const HELLO: u8 = 1;

/// Completions read in one call.
const BATCH: usize = 32;

/// Largest send from a small buffer (header included), whatever inject size the
/// provider states.
const INJECT_MAX: usize = 256;

/// Registered buffers one-sided operations copy through, and how many of them may be in
/// flight at once.
const RMA_SLOTS: usize = 16;

/// Bytes of one one-sided operation (a larger write or read is cut into these).
const RMA_CHUNK: usize = 128 << 10;

/// The libfabric objects of one rank.
struct Handles {
    fabric: *mut ffi::fid_fabric,
    domain: *mut ffi::fid_domain,
    /// The endpoints: low priority (also every one-sided operation), then high.
    eps: [*mut ffi::fid_ep; 2],
    av: *mut ffi::fid_av,
    tx_cq: *mut ffi::fid_cq,
    rx_cq: *mut ffi::fid_cq,
}

/// What senders share, under the endpoint's lock.
struct EpState {
    /// Send buffers free.
    tx_free: Vec<u32>,
    /// The peer each send buffer in flight goes to.
    tx_peer: Vec<u32>,
    /// Small send buffers free.
    small_free: Vec<u32>,
    /// The peer each small send buffer in flight goes to.
    small_peer: Vec<u32>,
    /// Next sequence number per (peer, lane, priority).
    seq: Vec<u64>,
    /// Receive buffers served but not yet posted again (the endpoint said `EAGAIN`).
    repost: Vec<u32>,
    /// A send that failed, reported by the next send or poll.
    failed: Option<FabricError>,
    /// The one-sided operations' buffers free.
    rma_free: Vec<u32>,
    /// The state of each one-sided operation's buffer.
    rma: Vec<slot::Slot>,
    /// Memory exposed to peers: id to its registration.
    exposed: HashMap<u32, *mut ffi::fid_mr>,
    /// Reads straight into a caller's memory were abandoned in flight (their peer, or
    /// another rank, failed): the provider is never called again, since any call could
    /// still land their bytes in memory the caller has since reused; every operation
    /// fails with this, and the libfabric objects are kept, not closed.
    fenced: Option<Failure>,
}

impl EpState {
    /// The free list of the small (`true`) or large send buffers.
    fn free_list(&mut self, small: bool) -> &mut Vec<u32> {
        if small {
            &mut self.small_free
        } else {
            &mut self.tx_free
        }
    }

    /// Messages sent whose completion the provider has not given yet: the provider may
    /// still hold them, and move them only when this rank calls it.
    fn sends_in_flight(&self) -> usize {
        (TX_BUFFERS - self.tx_free.len()) + (SMALL_BUFFERS - self.small_free.len())
    }

    /// `Ok` unless the provider may no longer be called ([`EpState::fenced`]).
    fn usable(&self) -> Result<(), FabricError> {
        match &self.fenced {
            Some(f) => Err(FabricError::PeerFailed(f.clone())),
            None => Ok(()),
        }
    }
}

/// What the polling thread keeps.
struct RxState {
    /// Next sequence number expected per (sender, lane, priority).
    expected: Vec<u64>,
    /// Messages that came ahead of their turn: (sender, lane, priority, seq) to
    /// (buffer, length).
    stash: HashMap<(u32, u16, u8, u64), (u32, usize)>,
    /// Completions read and not yet served: (buffer, length).
    batch: Vec<(u32, usize)>,
}

/// The libfabric transport.
pub struct OfiTransport {
    me: u32,
    size: u32,
    lanes: usize,
    lib: &'static Lib,
    h: Handles,
    tx: Pool,
    /// The small send buffers (messages up to [`OfiTransport::inject`] bytes).
    small: Pool,
    rx: Pool,
    /// The buffers one-sided operations copy through.
    rma_pool: Pool,
    /// The registration descriptors of the pools (null when the provider needs none),
    /// per endpoint for the send and receive pools (registrations are bound to one
    /// endpoint under `FI_MR_ENDPOINT`).
    tx_desc: [*mut c_void; 2],
    small_desc: [*mut c_void; 2],
    rx_desc: [*mut c_void; 2],
    rma_desc: *mut c_void,
    /// The provider's registration mode (`FI_MR_*`).
    mr_mode: c_int,
    /// Whether the provider offers one-sided operations (`FI_RMA`).
    rma_on: bool,
    /// Reads land straight in the caller's memory: the provider is a software one over
    /// sockets or shared memory ([`SOFTWARE_CORES`]: a NIC lands read data by DMA,
    /// whatever progress model it states), needs no local registration (`FI_MR_LOCAL`)
    /// and moves data only inside calls made to it (`FI_PROGRESS_MANUAL`), so a read
    /// abandoned in flight can be stopped from landing by never calling it again
    /// (`EpState::fenced`). Otherwise reads go through [`OfiTransport::rma_pool`].
    direct_reads: bool,
    /// Bytes written and read one-sidedly.
    rma_moved: [std::sync::atomic::AtomicU64; 2],
    /// Memory registrations, closed before the domain.
    mrs: Vec<*mut ffi::fid_mr>,
    /// Largest send (header included) from a small buffer: the provider's inject size,
    /// at most [`INJECT_MAX`].
    inject: usize,
    ep: TryLock<EpState>,
    rxs: TryLock<RxState>,
    /// Per-lane placeholders for the common send checks.
    lane_ids: Vec<()>,
    state: Arc<JobHealth>,
    hosts: Vec<String>,
    /// The completion queues' descriptors (`FI_WAIT_FD`), when the provider has them.
    cq_fds: Option<[c_int; 2]>,
    /// Written by [`Transport::wake`]; a sleeper polls it.
    wake_fd: OwnedFd,
    provider: String,
    domain_name: String,
    caps: Caps,
}

// SAFETY: the raw pointers are libfabric objects and the pools' memory, used only under
// the endpoint's lock (`ep`) or by the one polling thread (`rxs`); libfabric objects of
// an FI_THREAD_DOMAIN domain may be used from any thread as long as calls are serialised.
unsafe impl Send for OfiTransport {}
// SAFETY: as above.
unsafe impl Sync for OfiTransport {}

impl std::fmt::Debug for OfiTransport {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("OfiTransport")
            .field("me", &self.me)
            .field("provider", &self.provider)
            .field("domain", &self.domain_name)
            .finish_non_exhaustive()
    }
}

fn call(lib: &Lib, name: &'static str, rc: isize) -> Result<(), OfiError> {
    if rc == 0 {
        return Ok(());
    }
    Err(OfiError::Call {
        call: name,
        code: rc as i64,
        text: lib.strerror(rc),
    })
}

/// `fi_close`.
///
/// # Safety
/// `f` is a live libfabric object, closed once.
unsafe fn close(f: *mut ffi::fid) {
    if !f.is_null() {
        // SAFETY: the caller's promise; every object carries its ops table.
        unsafe { ((*(*f).ops).close)(f) };
    }
}

impl OfiTransport {
    /// Opens this rank's endpoint on the provider named `provider` (or libfabric's
    /// first choice), on the interface of `ip` for network providers, and connects it to
    /// every rank's (a collective: every rank calls it).
    ///
    /// # Errors
    /// [`OfiError`] (in [`FabricError::Ofi`]) when libfabric is missing, no provider
    /// qualifies, the ranks chose different providers, or a call fails;
    /// [`FabricError::Boot`] when the exchange of names fails.
    pub fn setup(
        boot: &Bootstrap,
        cfg: &Config,
        provider: Option<&str>,
        ip: Option<IpAddr>,
    ) -> Result<OfiTransport, FabricError> {
        let lib = ffi::lib().map_err(OfiError::Library)?;
        // One-sided operations when the provider has them; messages alone otherwise.
        let (list, rma_on) = match provider::find(lib, provider, ip, ffi::FI_MSG | ffi::FI_RMA) {
            Ok(list) => (list, true),
            Err(_) => (provider::find(lib, provider, ip, ffi::FI_MSG)?, false),
        };
        let info = list.head;
        // SAFETY: `find` returned a non-empty list; its first entry is used as is.
        let i = unsafe { &*info };
        let prov = provider::prov_name(i);
        let domain_name = provider::domain_name(i);
        // Every rank must speak the same provider, with the same capabilities.
        let spoken = if rma_on {
            format!("{prov} (with one-sided operations)")
        } else {
            prov.clone()
        };
        let all = boot.allgather(spoken.as_bytes())?;
        if let Some((r, theirs)) = all
            .iter()
            .enumerate()
            .find(|(_, p)| p.as_slice() != spoken.as_bytes())
        {
            return Err(OfiError::ProviderMismatch {
                rank: r as u32,
                theirs: String::from_utf8_lossy(theirs).into_owned(),
                ours: spoken,
            }
            .into());
        }
        // SAFETY: the attribute structures of an entry from fi_getinfo are all present.
        let (mr_mode, data_progress, inject, max_msg) = unsafe {
            (
                (*i.domain_attr).mr_mode,
                (*i.domain_attr).data_progress,
                (*i.tx_attr).inject_size,
                (*i.ep_attr).max_msg_size,
            )
        };
        let max_message = max_message_for(&prov);
        if max_msg < max_message + HEADER {
            return Err(OfiError::NoProvider {
                wanted: format!("'{prov}'"),
                why: format!(
                    "its largest message is {max_msg} bytes, Spools sends up to {}",
                    max_message + HEADER
                ),
            }
            .into());
        }
        let mut t = OfiTransport {
            me: boot.rank(),
            size: boot.size(),
            lanes: usize::from(cfg.lanes),
            lib,
            h: Handles {
                fabric: std::ptr::null_mut(),
                domain: std::ptr::null_mut(),
                eps: [std::ptr::null_mut(); 2],
                av: std::ptr::null_mut(),
                tx_cq: std::ptr::null_mut(),
                rx_cq: std::ptr::null_mut(),
            },
            tx: Pool::new(TX_BUFFERS, max_message + HEADER),
            small: Pool::new(SMALL_BUFFERS, INJECT_MAX),
            rx: Pool::new(RX_BUFFERS + RX_HIGH, max_message + HEADER),
            rma_pool: Pool::new(if rma_on { RMA_SLOTS } else { 1 }, RMA_CHUNK.min(max_msg)),
            tx_desc: [std::ptr::null_mut(); 2],
            small_desc: [std::ptr::null_mut(); 2],
            rx_desc: [std::ptr::null_mut(); 2],
            rma_desc: std::ptr::null_mut(),
            mr_mode,
            rma_on,
            direct_reads: rma_on
                && SOFTWARE_CORES.contains(&prov.split(';').next().unwrap_or_default())
                && mr_mode & ffi::FI_MR_LOCAL == 0
                && data_progress == ffi::FI_PROGRESS_MANUAL,
            rma_moved: Default::default(),
            mrs: Vec::new(),
            inject: inject.min(INJECT_MAX),
            ep: TryLock::new(
                EpState {
                    tx_free: (0..TX_BUFFERS as u32).rev().collect(),
                    tx_peer: vec![u32::MAX; TX_BUFFERS],
                    small_free: (0..SMALL_BUFFERS as u32).rev().collect(),
                    small_peer: vec![u32::MAX; SMALL_BUFFERS],
                    seq: vec![0; boot.size() as usize * usize::from(cfg.lanes) * 2],
                    repost: Vec::new(),
                    failed: None,
                    rma_free: if rma_on {
                        (0..RMA_SLOTS as u32).rev().collect()
                    } else {
                        Vec::new()
                    },
                    rma: vec![slot::Slot::default(); RMA_SLOTS],
                    exposed: HashMap::new(),
                    fenced: None,
                },
                cfg.thread_level_in_effect(),
            ),
            rxs: TryLock::new(
                RxState {
                    expected: vec![0; boot.size() as usize * usize::from(cfg.lanes) * 2],
                    stash: HashMap::new(),
                    batch: Vec::with_capacity(BATCH),
                },
                cfg.thread_level_in_effect(),
            ),
            lane_ids: vec![(); usize::from(cfg.lanes)],
            state: boot.state().clone(),
            hosts: boot
                .endpoints()
                .iter()
                .map(|e| e.host.split('/').next().unwrap_or_default().to_string())
                .collect(),
            cq_fds: None,
            wake_fd: eventfd()?,
            provider: prov.clone(),
            domain_name: domain_name.clone(),
            caps: Caps {
                name: "ofi",
                max_message,
                max_inline: inject.min(INJECT_MAX).saturating_sub(HEADER),
                ordered: true,
                lanes: usize::from(cfg.lanes),
                single_copy: SingleCopy::None,
                single_copy_reason: format!(
                    "libfabric provider {prov} on {domain_name}: sends copy into registered buffers, receives copy out"
                ),
            },
        };
        t.open(info)?;
        drop(list);
        t.connect(boot, cfg.bootstrap_timeout_s.max(1))?;
        Ok(t)
    }

    /// Opens the fabric, domain, completion queues, address vector and endpoint, and
    /// registers the pools.
    fn open(&mut self, info: *mut ffi::fi_info) -> Result<(), OfiError> {
        let lib = self.lib;
        // SAFETY: `info` is a live fi_info entry; every object opened is stored in
        // `self.h` and closed once, in reverse order, by Drop (also when a later step
        // fails); the attribute structures passed are fully initialised.
        unsafe {
            call(
                lib,
                "fi_fabric",
                (lib.fabric)(
                    (*info).fabric_attr,
                    &mut self.h.fabric,
                    std::ptr::null_mut(),
                ) as isize,
            )?;
            let fab = self.h.fabric;
            call(
                lib,
                "fi_domain",
                ((*(*fab).ops).domain)(fab, info, &mut self.h.domain, std::ptr::null_mut())
                    as isize,
            )?;
            let dom = self.h.domain;
            // Completion queues with descriptors to sleep on, where the provider has
            // them; without, waits nap.
            let mut fds = [0 as c_int; 2];
            let mut with_fd = true;
            for (k, cq) in [&mut self.h.tx_cq, &mut self.h.rx_cq]
                .into_iter()
                .enumerate()
            {
                let mut attr = ffi::fi_cq_attr {
                    size: 0,
                    flags: 0,
                    format: ffi::FI_CQ_FORMAT_MSG,
                    wait_obj: if with_fd {
                        ffi::FI_WAIT_FD
                    } else {
                        ffi::FI_WAIT_NONE
                    },
                    signaling_vector: 0,
                    wait_cond: 0,
                    wait_set: std::ptr::null_mut(),
                };
                let mut rc = ((*(*dom).ops).cq_open)(dom, &mut attr, cq, std::ptr::null_mut());
                if rc != 0 && with_fd {
                    with_fd = false;
                    attr.wait_obj = ffi::FI_WAIT_NONE;
                    rc = ((*(*dom).ops).cq_open)(dom, &mut attr, cq, std::ptr::null_mut());
                }
                call(lib, "fi_cq_open", rc as isize)?;
                if with_fd {
                    let f = &mut (**cq).fid as *mut ffi::fid;
                    let rc = ((*(*f).ops).control)(
                        f,
                        ffi::FI_GETWAIT,
                        (&mut fds[k]) as *mut c_int as *mut c_void,
                    );
                    if rc != 0 {
                        with_fd = false;
                    }
                }
            }
            if with_fd {
                self.cq_fds = Some(fds);
            }
            let mut av_attr = ffi::fi_av_attr {
                av_type: ffi::FI_AV_TABLE,
                rx_ctx_bits: 0,
                count: 2 * self.size as usize,
                ep_per_node: 0,
                name: std::ptr::null(),
                map_addr: std::ptr::null_mut(),
                flags: 0,
            };
            call(
                lib,
                "fi_av_open",
                ((*(*dom).ops).av_open)(dom, &mut av_attr, &mut self.h.av, std::ptr::null_mut())
                    as isize,
            )?;
            // Two endpoints on the same queues and address vector, so that a
            // high-priority message never waits behind low-priority ones the provider
            // queued (each endpoint has its own connections and queues).
            for k in 0..2 {
                call(
                    lib,
                    "fi_endpoint",
                    ((*(*dom).ops).endpoint)(dom, info, &mut self.h.eps[k], std::ptr::null_mut())
                        as isize,
                )?;
                let ep = &mut (*self.h.eps[k]).fid as *mut ffi::fid;
                let bind =
                    |f: *mut ffi::fid, flags: u64| ((*(*ep).ops).bind)(ep, f, flags) as isize;
                call(lib, "fi_ep_bind (av)", bind(&mut (*self.h.av).fid, 0))?;
                call(
                    lib,
                    "fi_ep_bind (send cq)",
                    bind(&mut (*self.h.tx_cq).fid, ffi::FI_TRANSMIT),
                )?;
                call(
                    lib,
                    "fi_ep_bind (receive cq)",
                    bind(&mut (*self.h.rx_cq).fid, ffi::FI_RECV),
                )?;
                call(
                    lib,
                    "fi_enable",
                    ((*(*ep).ops).control)(ep, ffi::FI_ENABLE, std::ptr::null_mut()) as isize,
                )?;
            }
            // The pools, registered when the provider needs local registration.
            // Once for both endpoints, or once per endpoint when registrations are
            // bound to one (`FI_MR_ENDPOINT`).
            if self.mr_mode & ffi::FI_MR_LOCAL != 0 {
                let per_endpoint = self.mr_mode & ffi::FI_MR_ENDPOINT != 0;
                for k in 0..2 {
                    if k == 1 && !per_endpoint {
                        self.tx_desc[1] = self.tx_desc[0];
                        self.small_desc[1] = self.small_desc[0];
                        self.rx_desc[1] = self.rx_desc[0];
                        break;
                    }
                    self.tx_desc[k] =
                        self.register(self.tx.base(), self.tx.bytes(), ffi::FI_SEND, k)?;
                    self.small_desc[k] =
                        self.register(self.small.base(), self.small.bytes(), ffi::FI_SEND, k)?;
                    self.rx_desc[k] =
                        self.register(self.rx.base(), self.rx.bytes(), ffi::FI_RECV, k)?;
                }
                if self.rma_on {
                    self.rma_desc = self.register(
                        self.rma_pool.base(),
                        self.rma_pool.bytes(),
                        ffi::FI_WRITE | ffi::FI_READ,
                        0,
                    )?;
                }
            }
        }
        Ok(())
    }

    /// Registers a pool's `len` bytes at `base` for `access` (bound to endpoint `ep`
    /// where the provider binds registrations); returns the descriptor to pass with
    /// operations on them. The registration is closed in Drop.
    fn register(
        &mut self,
        base: *mut u8,
        len: usize,
        access: u64,
        ep: usize,
    ) -> Result<*mut c_void, OfiError> {
        // SAFETY: the memory is a pool's, alive as long as the transport (Drop closes
        // the registration before the pools are freed).
        let mr = unsafe { self.reg(base, len, access, self.mrs.len() as u64 + 1, ep)? };
        self.mrs.push(mr);
        // SAFETY: a live registration.
        Ok(unsafe { (*mr).mem_desc })
    }

    /// Registers `len` bytes at `base` for `access` under `key` (where the provider
    /// lets Spools choose keys), bound to endpoint `ep` when the provider asks.
    ///
    /// # Safety
    /// The memory stays allocated until the registration returned is closed.
    unsafe fn reg(
        &self,
        base: *mut u8,
        len: usize,
        access: u64,
        key: u64,
        ep: usize,
    ) -> Result<*mut ffi::fid_mr, OfiError> {
        let lib = self.lib;
        let mut mr: *mut ffi::fid_mr = std::ptr::null_mut();
        // SAFETY: the domain and endpoint are open; the memory is the caller's promise.
        unsafe {
            let dom = self.h.domain;
            let rc = ((*(*dom).mr).reg)(
                &mut (*dom).fid,
                base as *const c_void,
                len,
                access,
                0,
                key,
                0,
                &mut mr,
                std::ptr::null_mut(),
            );
            call(lib, "fi_mr_reg", rc as isize)?;
            if self.mr_mode & ffi::FI_MR_ENDPOINT != 0 {
                let m = &mut (*mr).fid as *mut ffi::fid;
                let ep = &mut (*self.h.eps[ep]).fid as *mut ffi::fid;
                let bound = call(lib, "fi_mr_bind", ((*(*m).ops).bind)(m, ep, 0) as isize)
                    .and_then(|()| {
                        call(
                            lib,
                            "fi_mr_enable",
                            ((*(*m).ops).control)(m, ffi::FI_ENABLE, std::ptr::null_mut()) as isize,
                        )
                    });
                if let Err(e) = bound {
                    close(m);
                    return Err(e);
                }
            }
            Ok(mr)
        }
    }

    /// Exchanges endpoint names, fills the address vector (rank `r`'s low-priority
    /// endpoint at index `r`, its high-priority one at `size + r`), posts the receive
    /// buffers and greets every peer.
    fn connect(&mut self, boot: &Bootstrap, boot_timeout: u64) -> Result<(), FabricError> {
        let lib = self.lib;
        // Each rank's two names, each after its length (u16).
        let mut mine = Vec::new();
        let mut own_names = Vec::new();
        for k in 0..2 {
            let mut name = vec![0u8; 256];
            let mut len = name.len();
            // SAFETY: the endpoint is enabled; `name` has `len` bytes.
            let rc = unsafe {
                let ep = self.h.eps[k];
                ((*(*ep).cm).getname)(&mut (*ep).fid, name.as_mut_ptr() as *mut c_void, &mut len)
            };
            call(lib, "fi_getname", rc as isize)?;
            name.truncate(len);
            mine.extend_from_slice(&(len as u16).to_le_bytes());
            mine.extend_from_slice(&name);
            own_names.push(name);
        }
        let all = boot.allgather(&mine)?;
        let size = all.len();
        let mut names: [Vec<&[u8]>; 2] = [Vec::with_capacity(size), Vec::with_capacity(size)];
        for (r, bytes) in all.iter().enumerate() {
            let mut rest = bytes.as_slice();
            for list in names.iter_mut() {
                let n = rest
                    .get(..2)
                    .map(|l| usize::from(u16::from_le_bytes([l[0], l[1]])))
                    .filter(|&n| rest.len() >= 2 + n)
                    .ok_or_else(|| OfiError::BadAddress {
                        rank: r as u32,
                        why: format!("its endpoint names are cut short ({} bytes)", bytes.len()),
                    })?;
                list.push(&rest[2..2 + n]);
                rest = &rest[2 + n..];
            }
        }
        for (k, list) in names.iter().enumerate() {
            for (r, n) in list.iter().enumerate() {
                let want = (k * size + r) as u64;
                let mut addr = 0u64;
                // SAFETY: the AV is open; one name of the provider's format, one address
                // out.
                let rc = unsafe {
                    let av = self.h.av;
                    ((*(*av).ops).insert)(
                        av,
                        n.as_ptr() as *const c_void,
                        1,
                        &mut addr,
                        0,
                        std::ptr::null_mut(),
                    )
                };
                if rc != 1 || addr != want {
                    return Err(OfiError::BadAddress {
                        rank: r as u32,
                        why: if rc == 1 {
                            format!(
                                "the address vector put it at {addr}, not {want} (a table was asked for)"
                            )
                        } else {
                            lib.strerror(rc as isize)
                        },
                    }
                    .into());
                }
            }
        }
        let mut st = self.ep.lock();
        for b in 0..(RX_BUFFERS + RX_HIGH) as u32 {
            st.repost.push(b);
        }
        self.post_receives(&mut st)?;
        drop(st);
        self.greet(Duration::from_secs(boot_timeout))?;
        for name in &own_names {
            self.unlink_shm_name(name);
        }
        Ok(())
    }

    /// With the `shm` provider, removes this endpoint's name (`/dev/shm/<pid>:<n>:<n>`,
    /// 16 MiB) once every peer has sent to it, so has mapped it (`greet` heard from all):
    /// as for Spools' own segments, a rank that dies later leaves nothing in `/dev/shm`,
    /// and a later process with the same pid cannot find the name taken (`fi_enable`
    /// then fails with `EBUSY`).
    fn unlink_shm_name(&self, name: &[u8]) {
        if self.provider != "shm" {
            return;
        }
        let name = name.split(|&b| b == 0).next().unwrap_or_default();
        let name = String::from_utf8_lossy(name);
        let file = name.rsplit("://").next().unwrap_or_default();
        if !file.is_empty() && !file.contains('/') {
            // Best effort: the provider unlinks it at close otherwise.
            let _ = std::fs::remove_file(std::path::Path::new("/dev/shm").join(file));
        }
    }

    /// The provider in use and its domain (`tcp;ofi_rxm`, `eth0`).
    pub fn provider(&self) -> (&str, &str) {
        (&self.provider, &self.domain_name)
    }

    /// Posts the receive buffers waiting in `st.repost`, as far as the endpoints take
    /// them: the first [`RX_BUFFERS`] on the low-priority endpoint, the rest on the
    /// high-priority one.
    fn post_receives(&self, st: &mut EpState) -> Result<(), OfiError> {
        while let Some(&b) = st.repost.last() {
            let k = usize::from(b as usize >= RX_BUFFERS);
            // SAFETY: buffer `b` is the pool's and not posted (it is in `repost`); its
            // context is stable memory of the pool; the endpoint is enabled.
            let rc = unsafe {
                let ep = self.h.eps[k];
                ((*(*ep).msg).recv)(
                    ep,
                    self.rx.slot(b) as *mut c_void,
                    self.rx.slot_len(),
                    self.rx_desc[k],
                    ffi::FI_ADDR_UNSPEC,
                    self.rx.context(b),
                )
            };
            if rc == -ffi::FI_EAGAIN {
                break;
            }
            call(self.lib, "fi_recv", rc)?;
            st.repost.pop();
        }
        Ok(())
    }

    /// Reads the send queue's completions (which also drives a provider with manual
    /// progress): frees their buffers; a failed send is kept in `st.failed`.
    fn reap_sends(&self, st: &mut EpState) {
        let mut entries = [fi_cq_msg_entry {
            op_context: std::ptr::null_mut(),
            flags: 0,
            len: 0,
        }; BATCH];
        loop {
            // SAFETY: the queue is open; `entries` holds BATCH entries of its format.
            let n = unsafe {
                let cq = self.h.tx_cq;
                ((*(*cq).ops).read)(cq, entries.as_mut_ptr() as *mut c_void, BATCH)
            };
            if n > 0 {
                for e in &entries[..n as usize] {
                    if let Some(b) = self.small.index_of(e.op_context) {
                        st.small_free.push(b);
                    } else if let Some(b) = self.tx.index_of(e.op_context) {
                        st.tx_free.push(b);
                    } else if let Some(b) = self.rma_pool.index_of(e.op_context) {
                        self.rma_done(st, b, None);
                    }
                }
                continue;
            }
            if n == -ffi::FI_EAVAIL {
                let (ctx, err) = self.read_error(self.h.tx_cq);
                if let Some(b) = self.rma_pool.index_of(ctx) {
                    self.rma_done(st, b, Some(err));
                    continue;
                }
                let peer = if let Some(b) = self.small.index_of(ctx) {
                    st.small_free.push(b);
                    st.small_peer[b as usize]
                } else if let Some(b) = self.tx.index_of(ctx) {
                    st.tx_free.push(b);
                    st.tx_peer[b as usize]
                } else {
                    u32::MAX
                };
                if st.failed.is_none() {
                    st.failed = Some(self.failure(peer, "send", err));
                }
                continue;
            }
            return;
        }
    }

    /// Reads one error entry of `cq`: its context and (code, provider text).
    fn read_error(&self, cq: *mut ffi::fid_cq) -> (*mut c_void, (i64, String)) {
        // SAFETY: an all-zero error entry is valid input (no error data buffer).
        let mut e: fi_cq_err_entry = unsafe { std::mem::zeroed() };
        // SAFETY: the queue is open and reported an error entry.
        let rc = unsafe { ((*(*cq).ops).readerr)(cq, &mut e, 0) };
        if rc < 0 {
            return (std::ptr::null_mut(), (rc as i64, self.lib.strerror(rc)));
        }
        (
            e.op_context,
            (i64::from(e.err), self.lib.strerror(e.err as isize)),
        )
    }

    /// The error for a failed operation with `peer`: the watchdog's verdict when it
    /// learns one soon (a peer that died breaks its connections before the launcher
    /// says so), else libfabric's.
    fn failure(&self, peer: u32, what: &'static str, (code, text): (i64, String)) -> FabricError {
        if peer < self.size {
            if let Some(f) = self.state.verdict_on(peer, crate::transport::VERDICT_WAIT) {
                return FabricError::PeerFailed(f);
            }
        }
        let text = match self.hosts.get(peer as usize) {
            Some(h) => format!("{text} (host {h})"),
            None => text,
        };
        OfiError::Completion {
            what,
            peer,
            code,
            text,
        }
        .into()
    }

    /// Index of the (peer, lane, priority) stream.
    fn stream(&self, peer: u32, lane: usize, prio: Priority) -> usize {
        (peer as usize * self.lanes + lane) * 2 + prio.index()
    }

    /// Reads up to [`BATCH`] receive completions into `rx.batch`.
    fn read_receives(&self, rx: &mut RxState) -> Result<(), FabricError> {
        let mut entries = [fi_cq_msg_entry {
            op_context: std::ptr::null_mut(),
            flags: 0,
            len: 0,
        }; BATCH];
        let mut st = self.ep.lock();
        st.usable()?;
        self.reap_sends(&mut st);
        // SAFETY: the queue is open; `entries` holds BATCH entries of its format.
        let n = unsafe {
            let cq = self.h.rx_cq;
            ((*(*cq).ops).read)(cq, entries.as_mut_ptr() as *mut c_void, BATCH)
        };
        if n > 0 {
            for e in &entries[..n as usize] {
                if let Some(b) = self.rx.index_of(e.op_context) {
                    rx.batch.push((b, e.len));
                }
            }
        } else if n == -ffi::FI_EAVAIL {
            let (ctx, err) = self.read_error(self.h.rx_cq);
            if let Some(b) = self.rx.index_of(ctx) {
                st.repost.push(b);
            }
            self.post_receives(&mut st)?;
            // A receive that failed: the sender is unknown (a truncated message is a
            // sender that broke the format).
            return Err(self.failure(u32::MAX, "receive", err));
        }
        self.post_receives(&mut st)?;
        Ok(())
    }
}

/// Copies `header` then `parts` into `dst` (exactly their length).
fn gather(dst: &mut [u8], header: &[u8; HEADER], parts: &[&[u8]]) {
    dst[..HEADER].copy_from_slice(header);
    let mut at = HEADER;
    for p in parts {
        dst[at..at + p.len()].copy_from_slice(p);
        at += p.len();
    }
}

/// A non-blocking eventfd.
fn eventfd() -> Result<OwnedFd, FabricError> {
    // SAFETY: eventfd has no memory arguments; the descriptor returned is owned here.
    let fd = unsafe { libc::eventfd(0, libc::EFD_NONBLOCK | libc::EFD_CLOEXEC) };
    if fd < 0 {
        return Err(FabricError::Io {
            step: crate::error::IoStep::Waker,
            source: std::io::Error::last_os_error(),
        });
    }
    // SAFETY: a fresh descriptor, owned by no one else.
    Ok(unsafe { OwnedFd::from_raw_fd(fd) })
}

impl Drop for OfiTransport {
    fn drop(&mut self) {
        if self.ep.lock().fenced.is_some() {
            // Reads abandoned in flight target memory that is no longer theirs: closing
            // the endpoint could still progress them. Keep everything the provider may
            // touch for the life of the process.
            self.tx.leak();
            self.small.leak();
            self.rx.leak();
            self.rma_pool.leak();
            return;
        }
        // SAFETY: each object is closed once, endpoint first, domain and fabric last,
        // registrations before the pools' memory is freed (the pools drop after this).
        unsafe {
            for ep in self.h.eps.into_iter().rev() {
                if !ep.is_null() {
                    close(&mut (*ep).fid);
                }
            }
            for (_, m) in self.ep.lock().exposed.drain() {
                close(&mut (*m).fid);
            }
            for &m in &self.mrs {
                close(&mut (*m).fid);
            }
            if !self.h.av.is_null() {
                close(&mut (*self.h.av).fid);
            }
            for cq in [self.h.tx_cq, self.h.rx_cq] {
                if !cq.is_null() {
                    close(&mut (*cq).fid);
                }
            }
            if !self.h.domain.is_null() {
                close(&mut (*self.h.domain).fid);
            }
            if !self.h.fabric.is_null() {
                close(&mut (*self.h.fabric).fid);
            }
        }
    }
}

impl Transport for OfiTransport {
    fn caps(&self) -> &Caps {
        &self.caps
    }

    fn reaches(&self, peer: u32) -> bool {
        peer < self.size && peer != self.me
    }

    fn try_send(
        &self,
        lane: usize,
        priority: Priority,
        peer: u32,
        parts: &[&[u8]],
    ) -> Result<bool, FabricError> {
        let (len, _) = check_send(&self.caps, &self.state, &self.lane_ids, lane, peer, parts)?;
        if !self.reaches(peer) {
            return Err(FabricError::Unreachable(peer));
        }
        let mut st = self.ep.lock();
        st.usable()?;
        if let Some(e) = st.failed.take() {
            return Err(e);
        }
        let s = self.stream(peer, lane, priority);
        let mut header = [0u8; HEADER];
        header[..4].copy_from_slice(&self.me.to_le_bytes());
        header[4..6].copy_from_slice(&(lane as u16).to_le_bytes());
        header[6] = priority as u8;
        header[8..].copy_from_slice(&st.seq[s].to_le_bytes());
        let sent = self.post(&mut st, peer, priority, &header, parts, len)?;
        if sent {
            st.seq[s] += 1;
        }
        Ok(sent)
    }

    fn flush(&self, _lane: usize) -> Result<bool, FabricError> {
        // Spools queues nothing itself, but the provider may hold sends it accepted
        // until this rank's calls move them (with manual progress, `tcp;ofi_rxm` keeps
        // what a full socket did not take): they are queued until it completes them.
        // Reading the completions also drives the provider's progress.
        let mut st = self.ep.lock();
        st.usable()?;
        self.reap_sends(&mut st);
        match st.failed.take() {
            Some(e) => Err(e),
            None => Ok(st.sends_in_flight() > 0),
        }
    }

    fn poll(&self, f: &mut dyn FnMut(Incoming<'_>)) -> Result<usize, FabricError> {
        let Some(mut rx) = self.rxs.try_lock() else {
            return Ok(0);
        };
        let rx = &mut *rx;
        self.read_receives(rx)?;
        if rx.batch.is_empty() {
            return Ok(0);
        }
        let mut served = Vec::with_capacity(rx.batch.len());
        let mut n = 0;
        let batch = std::mem::take(&mut rx.batch);
        // High priority first, then low; within each, in completion order.
        for want in Priority::SERVE_ORDER {
            for &(b, len) in &batch {
                // SAFETY: buffer `b` completed and is not posted again until it is
                // served (below): nothing else writes it meanwhile.
                let bytes = unsafe { std::slice::from_raw_parts(self.rx.slot(b), len) };
                if bytes.len() >= HEADER && bytes[7] == HELLO {
                    // A hello that came after set-up (never delivered): served once.
                    if want == Priority::Low {
                        served.push(b);
                    }
                    continue;
                }
                let (from, lane, prio, seq) = self.parse(bytes)?;
                if prio != want {
                    continue;
                }
                let s = self.stream(from, usize::from(lane), prio);
                if seq != rx.expected[s] {
                    rx.stash.insert((from, lane, prio as u8, seq), (b, len));
                    continue;
                }
                // This message, then those of its stream that came ahead of it.
                let mut next = Some((b, len));
                while let Some((b, len)) = next {
                    // SAFETY: as above (this buffer, or one kept in the stash).
                    let bytes = unsafe { std::slice::from_raw_parts(self.rx.slot(b), len) };
                    f(Incoming {
                        from,
                        lane,
                        priority: prio,
                        bytes: &bytes[HEADER..],
                    });
                    n += 1;
                    served.push(b);
                    rx.expected[s] += 1;
                    next = if rx.stash.is_empty() {
                        None
                    } else {
                        rx.stash.remove(&(from, lane, prio as u8, rx.expected[s]))
                    };
                }
            }
        }
        rx.batch = batch;
        rx.batch.clear();
        let mut st = self.ep.lock();
        st.usable()?;
        st.repost.extend(served);
        self.post_receives(&mut st)?;
        Ok(n)
    }

    fn wait(&self, timeout: Duration) {
        self.sleep(None, timeout);
    }

    fn wait_with(&self, bell: BorrowedFd<'_>, timeout: Duration) {
        self.sleep(Some(bell), timeout);
    }

    fn rma(&self) -> Option<&dyn crate::Rma> {
        if self.rma_on {
            Some(self)
        } else {
            None
        }
    }

    fn wake(&self) {
        let one = 1u64.to_ne_bytes();
        // SAFETY: writing 8 bytes to our own eventfd.
        unsafe { libc::write(self.wake_fd.as_raw_fd(), one.as_ptr() as *const c_void, 8) };
    }
}

impl OfiTransport {
    /// Sends `header` then `parts` (`len` bytes) to `peer` from a send buffer: a small
    /// one when it fits the provider's inject size, else a large one; `Ok(false)` when
    /// the pool (but for the reserve of high-priority messages) or the endpoint is full.
    /// The buffer is free again when the provider completes the send ([`reap_sends`]).
    ///
    /// [`reap_sends`]: OfiTransport::reap_sends
    fn post(
        &self,
        st: &mut EpState,
        peer: u32,
        priority: Priority,
        header: &[u8; HEADER],
        parts: &[&[u8]],
        len: usize,
    ) -> Result<bool, FabricError> {
        let total = HEADER + len;
        // Each priority has its endpoint; a peer's high-priority one is at `size + peer`.
        let k = priority.index();
        let ep = self.h.eps[k];
        let addr = u64::from(peer) + k as u64 * u64::from(self.size);
        let small = total <= self.inject;
        let (pool, desc, reserve) = if small {
            (&self.small, self.small_desc[k], SMALL_HIGH_RESERVE)
        } else {
            (&self.tx, self.tx_desc[k], HIGH_RESERVE)
        };
        if st.free_list(small).len() <= reserve && priority == Priority::Low {
            self.reap_sends(st);
            if st.free_list(small).len() <= reserve {
                return Ok(false);
            }
        }
        let Some(b) = st.free_list(small).pop().or_else(|| {
            self.reap_sends(st);
            st.free_list(small).pop()
        }) else {
            return Ok(false);
        };
        // SAFETY: buffer `b` is free (not in flight): this thread, under the lock, is
        // its only user until its completion; `total` fits its pool's buffers (the
        // small ones hold INJECT_MAX >= `self.inject` bytes, the large ones the
        // largest message and its header).
        let slot = unsafe { std::slice::from_raw_parts_mut(pool.slot(b), total) };
        gather(slot, header, parts);
        // SAFETY: as above; the buffer and its context stay untouched until the send
        // completes (reap_sends frees it).
        let rc = unsafe {
            ((*(*ep).msg).send)(
                ep,
                slot.as_ptr() as *const c_void,
                total,
                desc,
                addr,
                pool.context(b),
            )
        };
        if rc == -ffi::FI_EAGAIN {
            st.free_list(small).push(b);
            self.reap_sends(st);
            return Ok(false);
        }
        if rc != 0 {
            st.free_list(small).push(b);
            return Err(OfiError::Call {
                call: "fi_send",
                code: rc as i64,
                text: self.lib.strerror(rc),
            }
            .into());
        }
        if small {
            st.small_peer[b as usize] = peer;
        } else {
            st.tx_peer[b as usize] = peer;
        }
        Ok(true)
    }

    /// Connects to every peer while every rank is in this collective set-up (libfabric
    /// providers with manual progress set connections up only while both sides call
    /// into them, and a rank that sends to one that does not poll yet would wait): a
    /// hello to each peer on each endpoint, then until every peer's two hellos are in.
    /// Messages that come meanwhile (peers that finished first) wait for the first poll.
    fn greet(&self, timeout: Duration) -> Result<(), FabricError> {
        let start = std::time::Instant::now();
        let mut to_send: Vec<(u32, Priority)> = (0..self.size)
            .filter(|&p| p != self.me)
            .flat_map(|p| Priority::SERVE_ORDER.map(|prio| (p, prio)))
            .collect();
        // Per rank, the priorities (bit `index`) whose hello came.
        let mut heard = vec![0u8; self.size as usize];
        heard[self.me as usize] = 3;
        let mut rx = self.rxs.lock();
        loop {
            {
                let mut st = self.ep.lock();
                let mut still = Vec::new();
                for &(p, prio) in &to_send {
                    let mut header = [0u8; HEADER];
                    header[..4].copy_from_slice(&self.me.to_le_bytes());
                    header[6] = prio as u8;
                    header[7] = HELLO;
                    if !self.post(&mut st, p, prio, &header, &[], 0)? {
                        still.push((p, prio));
                    }
                }
                to_send = still;
            }
            let before = rx.batch.len();
            self.read_receives(&mut rx)?;
            let mut kept = Vec::new();
            let mut hellos = Vec::new();
            for &(b, len) in &rx.batch[before..] {
                // SAFETY: a completed buffer, not posted again until served.
                let bytes = unsafe { std::slice::from_raw_parts(self.rx.slot(b), len) };
                if bytes.len() >= HEADER && bytes[7] == HELLO {
                    let from = u32::from_le_bytes([bytes[0], bytes[1], bytes[2], bytes[3]]);
                    if let Some(h) = heard.get_mut(from as usize) {
                        *h |= 1 << (bytes[6] & 1);
                    }
                    hellos.push(b);
                } else {
                    kept.push((b, len));
                }
            }
            rx.batch.truncate(before);
            rx.batch.extend(kept);
            if !hellos.is_empty() {
                let mut st = self.ep.lock();
                st.repost.extend(hellos);
                self.post_receives(&mut st)?;
            }
            if to_send.is_empty() && heard.iter().all(|&h| h == 3) {
                return Ok(());
            }
            if start.elapsed() > timeout {
                let missing: Vec<usize> = (0..heard.len()).filter(|&r| heard[r] != 3).collect();
                return Err(OfiError::Call {
                    call: "connecting to every rank",
                    code: -(libc::ETIMEDOUT as i64),
                    text: format!(
                        "no hello from ranks {missing:?} and none sent to {to_send:?} within {timeout:?}"
                    ),
                }
                .into());
            }
            self.sleep(None, Duration::from_millis(1));
        }
    }

    /// The header of a received message: sender, lane, priority, sequence number.
    fn parse(&self, bytes: &[u8]) -> Result<(u32, u16, Priority, u64), FabricError> {
        let bad = |from: u32, lane: u16, priority: u8| FabricError::Corrupt {
            rank: from,
            defect: Defect::BadOfiHeader {
                len: bytes.len(),
                from,
                lane,
                priority,
            },
        };
        if bytes.len() < HEADER {
            return Err(bad(u32::MAX, 0, 0));
        }
        let from = u32::from_le_bytes([bytes[0], bytes[1], bytes[2], bytes[3]]);
        let lane = u16::from_le_bytes([bytes[4], bytes[5]]);
        let prio = match bytes[6] {
            0 => Priority::Low,
            1 => Priority::High,
            p => return Err(bad(from, lane, p)),
        };
        if from >= self.size || usize::from(lane) >= self.lanes {
            return Err(bad(from, lane, bytes[6]));
        }
        let mut seq = [0u8; 8];
        seq.copy_from_slice(&bytes[8..16]);
        Ok((from, lane, prio, u64::from_le_bytes(seq)))
    }

    /// Sleeps until a completion may be there, [`Transport::wake`] or `bell` fires, or
    /// `timeout` passes.
    fn sleep(&self, bell: Option<BorrowedFd<'_>>, timeout: Duration) {
        let Some(fds) = self.cq_fds else {
            std::thread::sleep(timeout.min(Duration::from_millis(1)));
            return;
        };
        if self.state.troubled() {
            return;
        }
        {
            let st = self.ep.lock();
            if st.fenced.is_some() {
                return;
            }
            let mut fids = [
                // SAFETY: the queues are open (taking their fid's address only).
                unsafe { &mut (*self.h.tx_cq).fid as *mut ffi::fid },
                // SAFETY: as above.
                unsafe { &mut (*self.h.rx_cq).fid as *mut ffi::fid },
            ];
            // SAFETY: the fabric is open; `fids` are two of its queues.
            let rc = unsafe {
                let fab = self.h.fabric;
                ((*(*fab).ops).trywait)(fab, fids.as_mut_ptr(), 2)
            };
            if rc != 0 {
                // Completions are there already (or the provider cannot say): no sleep.
                return;
            }
        }
        let mut pfds = [
            libc::pollfd {
                fd: fds[0],
                events: libc::POLLIN,
                revents: 0,
            },
            libc::pollfd {
                fd: fds[1],
                events: libc::POLLIN,
                revents: 0,
            },
            libc::pollfd {
                fd: self.wake_fd.as_raw_fd(),
                events: libc::POLLIN,
                revents: 0,
            },
            libc::pollfd {
                fd: bell.map_or(-1, |b| b.as_raw_fd()),
                events: libc::POLLIN,
                revents: 0,
            },
        ];
        let ms = timeout.as_millis().clamp(0, i32::MAX as u128) as c_int;
        // SAFETY: four initialised pollfds (a negative fd is ignored).
        unsafe { libc::poll(pfds.as_mut_ptr(), 4, ms) };
        if pfds[2].revents != 0 {
            let mut b = [0u8; 8];
            // SAFETY: reading 8 bytes from our own non-blocking eventfd.
            unsafe { libc::read(self.wake_fd.as_raw_fd(), b.as_mut_ptr() as *mut c_void, 8) };
        }
    }
}
