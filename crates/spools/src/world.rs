//! `init` and the `World`.

use std::sync::Arc;
use std::time::Instant;

use spools_am::{Endpoint, Route, Worker};
use spools_boot::client::{Bootstrap, Connected};
use spools_boot::config::{Config, TransportChoice};
use spools_boot::identity::{JobEnv, LauncherKind};
use spools_boot::BootError;
use spools_fabric::ofi::OfiTransport;
use spools_fabric::shm::ShmTransport;
use spools_fabric::tcp::{Listener, TcpTransport};
use spools_fabric::{Caps, FabricError, Transport};
use spools_msg::{Communicator, MsgError};
use spools_proto::boot::Endpoint as Addresses;
use thiserror::Error;

/// Why `init` failed.
#[derive(Debug, Error)]
pub enum InitError {
    /// Configuration, identity or rendezvous.
    #[error(transparent)]
    Boot(#[from] BootError),
    /// A transport could not start.
    #[error(transparent)]
    Fabric(#[from] FabricError),
    /// The ranks disagree on a setting that must be the same everywhere.
    #[error("rank {rank} runs with {theirs} but this rank with {ours}: every rank needs the same SPOOLS_TRANSPORT, SPOOLS_LANES and SPOOLS_BULK_LIMIT")]
    Mismatch {
        /// The other rank.
        rank: u32,
        /// Its setting.
        theirs: String,
        /// Ours.
        ours: String,
    },
    /// `SPOOLS_TRANSPORT=shm` while some ranks are on other hosts.
    #[error("SPOOLS_TRANSPORT=shm but rank {0} is on another host")]
    ShmAcrossHosts(u32),
    /// The active-message layer or messaging could not start.
    #[error(transparent)]
    Msg(#[from] MsgError),
}

/// This process's place in a job: rank, size, hosts, the active-message layer, and the job's first
/// [`Communicator`] (all ranks), whose methods (tagged messages, collectives, RPC, `split`
/// and `dup`) it offers directly.
pub struct World {
    boot: Arc<Bootstrap>,
    worker: Worker,
    msg: Communicator,
    pub(crate) io: std::sync::OnceLock<Communicator>,
    endpoint: std::sync::Mutex<Endpoint>,
    shm: Option<Arc<ShmTransport>>,
    tcp: Option<Arc<TcpTransport>>,
    ofi: Option<Arc<OfiTransport>>,
    init_time: std::time::Duration,
    finalized: std::sync::atomic::AtomicBool,
}

impl std::fmt::Debug for World {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("World")
            .field("rank", &self.rank())
            .field("size", &self.size())
            .finish_non_exhaustive()
    }
}

/// Starts this rank with the configuration from the environment (`SPOOLS_*`,
/// `SPOOLS_CONFIG`). Collective: every rank of the job calls it. The runtime's warnings
/// go to the program's logger if it set one up (before or after `init`), else to standard
/// error (level from `SPOOLS_LOG`; see `spools_boot::logger`).
///
/// # Errors
/// [`InitError`]: bad configuration or environment, a rendezvous that cannot be reached
/// or refuses the secret, a rank that dies during start-up, shared memory that cannot be
/// created.
pub fn init() -> Result<World, InitError> {
    let cfg = Config::load().map_err(BootError::from)?;
    let env = JobEnv::from_env().map_err(BootError::from)?;
    init_with(cfg, env)
}

/// [`init`] with an explicit configuration and job description.
///
/// # Errors
/// As [`init`].
pub fn init_with(cfg: Config, env: JobEnv) -> Result<World, InitError> {
    let t0 = Instant::now();
    let conn = Connected::connect(env, &cfg)?;
    let conn_ip = conn.local_ip();
    let listener = Listener::bind(conn_ip)?;
    let addrs = Addresses {
        host: spools_boot::host::host_identity(),
        pid: std::process::id(),
        shm: String::new(),
        tcp: listener.addr().to_string(),
    };
    let boot = Arc::new(conn.join(addrs)?);
    // Every rank must agree on the settings that shape the job (the transport decides the
    // set-up collectives; lanes the ring layout; the bulk limit what receivers accept).
    let choice = agreed_settings(&cfg);
    let all = boot.allgather(choice.as_bytes())?;
    for (r, c) in all.iter().enumerate() {
        if c.as_slice() != choice.as_bytes() {
            return Err(InitError::Mismatch {
                rank: r as u32,
                theirs: String::from_utf8_lossy(c).into_owned(),
                ours: choice,
            });
        }
    }
    let me = boot.rank();
    let my_host = boot.endpoints()[me as usize].host.clone();
    if cfg.transport == TransportChoice::Shm {
        if let Some(r) = boot.endpoints().iter().position(|e| e.host != my_host) {
            return Err(InitError::ShmAcrossHosts(r as u32));
        }
    }
    let shm = if !matches!(cfg.transport, TransportChoice::Tcp | TransportChoice::Ofi) {
        let s = Arc::new(ShmTransport::setup(&boot, &cfg)?);
        boot.state().add_waker(s.waker());
        Some(s)
    } else {
        None
    };
    let several_hosts = boot.endpoints().iter().any(|e| e.host != my_host);
    let ofi = match ofi_provider(&boot, &cfg, several_hosts)? {
        Some(p) => Some(Arc::new(OfiTransport::setup(
            &boot,
            &cfg,
            p.as_deref(),
            Some(conn_ip),
        )?)),
        None => None,
    };
    let (tcp, net): (Option<Arc<TcpTransport>>, Arc<dyn Transport>) = match &ofi {
        Some(o) => (None, o.clone() as Arc<dyn Transport>),
        None => {
            let t = Arc::new(TcpTransport::new(listener, &boot, &cfg)?);
            (Some(t.clone()), t as Arc<dyn Transport>)
        }
    };
    {
        let t = net.clone();
        boot.state().add_waker(Arc::new(move || t.wake()));
    }
    let routes: Vec<Route> = (0..boot.size())
        .map(|r| {
            if r == me {
                Route::Local
            } else if shm.as_ref().is_some_and(|s| s.reaches(r)) {
                Route::Shm
            } else {
                Route::Net
            }
        })
        .collect();
    let local_ranks = boot
        .endpoints()
        .iter()
        .filter(|e| e.host == my_host)
        .count();
    let worker = Worker::new(
        boot.clone(),
        cfg,
        shm.clone().map(|s| s as Arc<dyn Transport>),
        Some(net),
        routes,
        local_ranks,
    )
    .map_err(MsgError::from)?;
    let endpoint = worker.endpoint().map_err(MsgError::from)?;
    let msg_endpoint = worker.endpoint().map_err(MsgError::from)?;
    let mut host_names: Vec<&str> = Vec::new();
    let hosts = boot
        .endpoints()
        .iter()
        .map(|e| match host_names.iter().position(|h| *h == e.host) {
            Some(i) => i as u32,
            None => {
                host_names.push(&e.host);
                (host_names.len() - 1) as u32
            }
        })
        .collect();
    // Messaging's handler exchange runs before the bootstrap's waits serve the fabric:
    // no traffic is due yet, and a rank still starting must not consume messages that
    // peers already running send to it outside the active-message layer.
    let msg = spools_msg::start(&worker, msg_endpoint, hosts)?;
    let (progress, sleep) = worker.bootstrap_hooks();
    boot.set_hooks(
        progress,
        sleep,
        std::time::Duration::from_micros(worker.config().spin_us),
    );
    Ok(World {
        boot,
        msg,
        io: std::sync::OnceLock::new(),
        worker,
        endpoint: std::sync::Mutex::new(endpoint),
        shm,
        tcp,
        ofi,
        init_time: t0.elapsed(),
        finalized: std::sync::atomic::AtomicBool::new(false),
    })
}

/// The settings every rank of a job must share, as [`init`] compares them between ranks
/// (the transport and libfabric provider decide the set-up collectives, lanes the ring
/// layout, the bulk limit what receivers accept).
///
/// ```
/// let s = spools::agreed_settings(&spools::Config::default());
/// assert!(s.starts_with("transport=auto lanes=3 "));
/// ```
pub fn agreed_settings(cfg: &Config) -> String {
    format!(
        "transport={} lanes={} bulk_limit={} ofi_provider={}",
        cfg.transport,
        cfg.lanes,
        cfg.bulk_limit,
        cfg.ofi_provider.as_deref().unwrap_or("")
    )
}

/// Whether libfabric carries this job's network traffic, and with which provider
/// (`Some(None)`: libfabric's first choice). `ofi` always; `auto` between hosts when
/// `ofi_provider` names one or this host has a high-speed provider, and every rank's
/// host agrees (else TCP, said once by rank 0). Collective when `auto` spans hosts.
fn ofi_provider(
    boot: &Bootstrap,
    cfg: &Config,
    several_hosts: bool,
) -> Result<Option<Option<String>>, InitError> {
    match cfg.transport {
        TransportChoice::Ofi => return Ok(Some(cfg.ofi_provider.clone())),
        TransportChoice::Auto if several_hosts => {}
        _ => return Ok(None),
    }
    let mine = match &cfg.ofi_provider {
        Some(p) => p.clone(),
        None => spools_fabric::ofi::providers()
            .ok()
            .and_then(|(_, ps)| ps.into_iter().find(|p| p.high_speed))
            .map(|p| p.name)
            .unwrap_or_default(),
    };
    let all = boot.allgather(mine.as_bytes())?;
    if mine.is_empty() {
        return Ok(None);
    }
    if let Some(r) = all.iter().position(|p| p.as_slice() != mine.as_bytes()) {
        if boot.rank() == 0 {
            spools_boot::logger::warn(format_args!(
                "libfabric provider {mine} is not on every host (rank {r} has {:?}): TCP carries the traffic between hosts",
                String::from_utf8_lossy(&all[r])
            ));
        }
        return Ok(None);
    }
    Ok(Some(Some(mine)))
}

impl World {
    /// This rank, from 0.
    pub fn rank(&self) -> u32 {
        self.boot.rank()
    }

    /// Number of ranks.
    pub fn size(&self) -> u32 {
        self.boot.size()
    }

    /// Whether `rank` runs on this host (and so is reached through shared memory).
    pub fn same_host(&self, rank: u32) -> bool {
        let eps = self.boot.endpoints();
        eps.get(rank as usize)
            .is_some_and(|e| e.host == eps[self.rank() as usize].host)
    }

    /// The job id (the same on every rank).
    pub fn job(&self) -> u64 {
        self.boot.job()
    }

    /// The job's secret (every rank's is the same): streams prove it to a destination
    /// that requires it. A binding that opens streams on communicators of its own
    /// (`spools_io::stream::StreamWriter::open_proving`) takes it from here; it never
    /// crosses the wire, and its `Debug` form does not reveal it.
    pub fn secret(&self) -> &spools_proto::auth::Secret {
        self.boot.secret()
    }

    /// Who launched this job.
    pub fn launcher(&self) -> LauncherKind {
        self.boot.launcher()
    }

    /// How the ranks met, in words: `spools run`, `SPOOLS_BOOTSTRAP=...`, `PMIx (the
    /// launcher's)`, `PMI2 (the launcher's)` or `none (one rank)`.
    pub fn bootstrap(&self) -> String {
        self.boot.rendezvous().describe(self.boot.launcher())
    }

    /// Asks the launcher (`spools run`) to start `procs` where the job's ranks run, as it
    /// starts ranks: their output is forwarded, one that exits with a failure ends the
    /// job, and `exits` hears of each one's end (index, success, how; called on the
    /// watchdog thread, it must not block). Returns once all are started. MPI's
    /// `MPI_Comm_spawn` starts its children through this.
    ///
    /// # Errors
    /// [`LaunchRefused::NoLauncher`](crate::LaunchRefused::NoLauncher) for a job no
    /// launcher hosts (rank 0 hosts its rendezvous); [`LaunchRefused::Failed`](crate::LaunchRefused::Failed)
    /// when the launcher started none of them, and why.
    pub fn launch(
        &self,
        procs: Vec<crate::SpawnProc>,
        exits: crate::Exits,
    ) -> Result<(), crate::LaunchRefused> {
        self.boot.launch(procs, exits)
    }

    /// How long `init` took on this rank.
    pub fn init_time(&self) -> std::time::Duration {
        self.init_time
    }

    /// The active-message layer.
    pub fn worker(&self) -> &Worker {
        &self.worker
    }

    /// A barrier through the job's rendezvous rather than the fabric, which does not
    /// poll the transports while it waits: for code that drives the transports itself
    /// (conformance tests, diagnostics), whose messages the active-message layer would otherwise
    /// consume.
    ///
    /// # Errors
    /// [`BootError::PeerDied`] if a rank died.
    pub fn runtime_barrier(&self) -> Result<(), BootError> {
        self.boot.barrier_quiet()
    }

    /// The job's first communicator (all ranks); `World` derefs to it.
    pub fn communicator(&self) -> &Communicator {
        &self.msg
    }

    /// The default endpoint (sending lane) of this rank's main thread.
    pub fn endpoint(&mut self) -> &mut Endpoint {
        self.endpoint
            .get_mut()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
    }

    /// The default endpoint for a caller that shares the `World` between threads (a
    /// language binding): the lock makes their sends go out one at a time. A rank has few
    /// lanes (`SPOOLS_LANES`), so sharing this one beats opening an endpoint per thread.
    ///
    /// ```
    /// let world = spools::init().unwrap();
    /// world.lock_endpoint().flush().unwrap();
    /// ```
    pub fn lock_endpoint(&self) -> std::sync::MutexGuard<'_, Endpoint> {
        self.endpoint
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
    }

    /// Capabilities of the shared-memory transport, if this job uses it.
    pub fn shm_caps(&self) -> Option<&Caps> {
        self.shm.as_ref().map(|s| s.caps())
    }

    /// Capabilities of the TCP transport, if this job uses it.
    pub fn tcp_caps(&self) -> Option<&Caps> {
        self.tcp.as_ref().map(|t| t.caps())
    }

    /// Capabilities of the libfabric transport, if this job uses it.
    pub fn ofi_caps(&self) -> Option<&Caps> {
        self.ofi.as_ref().map(|t| t.caps())
    }

    /// The shared-memory transport, if any (diagnostics, conformance tests).
    pub fn shm(&self) -> Option<&Arc<ShmTransport>> {
        self.shm.as_ref()
    }

    /// The TCP transport, unless libfabric carries the network traffic (diagnostics,
    /// conformance tests).
    pub fn tcp(&self) -> Option<&Arc<TcpTransport>> {
        self.tcp.as_ref()
    }

    /// The libfabric transport, when it carries the network traffic
    /// (`SPOOLS_TRANSPORT=ofi`, or `auto` between hosts with a high-speed provider).
    pub fn ofi(&self) -> Option<&Arc<OfiTransport>> {
        self.ofi.as_ref()
    }

    /// Ends this rank's part: flushes batched messages and waits until every rank has
    /// finalised, serving peers meanwhile.
    ///
    /// How a rank leaves the job, whatever it does:
    /// - `finalize()`: the clean end, here and now.
    /// - The `World` is dropped (the end of `main`, or an early `return Err(..)` / `?`):
    ///   the rank stays in the job until its process exits. With exit status 0 it then
    ///   announces that it finalises and waits for every rank, still serving its peers;
    ///   with any other status (the error that `main` returned, `std::process::exit(n)`)
    ///   it ends the job at once.
    /// - The thread panics while it holds the `World`: the job ends at once.
    /// - The process dies (a signal, an exit without dropping the `World`): the watchdog
    ///   ends the job.
    ///
    /// When the job ends because of a rank, the others' pending and later operations fail
    /// with an error naming that rank and how it left, and `spools run` stops the job
    /// within its grace period (0.5 s), printing that rank's exit status once.
    ///
    /// A rank that finalises (either way) while others wait in a collective it never
    /// started also ends the job: their collective fails with
    /// [`MsgError::PeerFinalized`](spools_msg::MsgError::PeerFinalized), naming it. A
    /// receive from a rank that finalised fails with
    /// [`MsgError::SourceFinalized`](spools_msg::MsgError::SourceFinalized), naming it,
    /// once every message it sent this rank has arrived and none matches (end of data:
    /// the finalising rank tells the others how many it sent each). Use [`World::abort`]
    /// for failures.
    ///
    /// # Errors
    /// [`BootError::PeerDied`] if a rank died first.
    pub fn finalize(mut self) -> Result<(), BootError> {
        self.finish()
    }

    /// Leaves the job without waiting for the other ranks: announces that this rank
    /// finalises (the others see it as finalised, as after [`World::finalize`]) and
    /// returns at once. For a process that leaves a job it joined beside its own (MPI's
    /// `MPI_Comm_disconnect` of a spawned job) and must not wait for members that go on
    /// working; everything it sent must have been received first (a barrier with them).
    /// Dropping the `World` afterwards does nothing more.
    ///
    /// # Errors
    /// [`BootError`] when the announcement cannot be written (the rendezvous is gone).
    pub fn depart(&self) -> Result<(), BootError> {
        if self
            .finalized
            .swap(true, std::sync::atomic::Ordering::SeqCst)
        {
            return Ok(());
        }
        let _ = self.lock_endpoint().flush();
        spools_io::file::release_shared_windows(self.boot.job());
        self.boot
            .announce_finalize(self.msg.collectives_started(), self.msg.messages_sent())
    }

    /// Ends the whole job because of a failure on this rank: every other rank's pending
    /// and later operations fail with an error naming this rank and `cause`, and
    /// `spools run` stops the job. This rank's own operations fail from now on; the
    /// process should exit (with a non-zero status) soon after.
    ///
    /// ```
    /// let world = spools::init()?;
    /// let input = std::path::Path::new("/nonexistent/input.bin");
    /// if !input.exists() {
    ///     // Under `spools run -n 4`, the other ranks' pending operations now fail with
    ///     // "rank R died (input.bin is missing)" and the job ends.
    ///     world.abort("input.bin is missing");
    ///     // A real program would now `std::process::exit(2)`.
    /// }
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn abort(self, cause: &str) {
        self.abort_here(cause);
    }

    /// [`World::abort`] through a shared reference (a `World` that front doors share,
    /// see [`crate::shared`]): the job ends, and dropping the `World` later does nothing.
    pub(crate) fn abort_here(&self, cause: &str) {
        self.finalized
            .store(true, std::sync::atomic::Ordering::SeqCst);
        self.boot.abort(cause);
    }

    fn finish(&mut self) -> Result<(), BootError> {
        if self
            .finalized
            .swap(true, std::sync::atomic::Ordering::SeqCst)
        {
            return Ok(());
        }
        let _ = self.endpoint().flush();
        spools_io::file::release_shared_windows(self.boot.job());
        self.boot
            .announce_finalize(self.msg.collectives_started(), self.msg.messages_sent())?;
        self.boot.wait_finalized()
    }

    /// Allocates `n` zeroed elements in the shared heap: memory that the ranks of this
    /// host can map, so that transfers between such buffers take a single copy. The
    /// [`SharedBuf`](crate::SharedBuf) derefs to a slice and goes wherever one goes;
    /// dropping it frees it (see its contract for peers still copying from it).
    ///
    /// ```
    /// let world = spools::init()?;
    /// let mut a = world.alloc::<f64>(1000)?;
    /// assert!(a.iter().all(|&x| x == 0.0));
    /// a[7] = 1.5;
    /// let part = &a[4..8];
    /// let at = spools_heap::lookup(part.as_ptr().cast(), 32).expect("in the heap");
    /// assert_eq!((at.name, at.offset), (a.heap_ref().name, 32));
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    ///
    /// # Errors
    /// [`HeapError::TooLarge`](crate::HeapError::TooLarge) if the size overflows,
    /// [`HeapError::Create`](crate::HeapError::Create) if the shared memory cannot be
    /// created (`/dev/shm` full, limits).
    pub fn alloc<T: spools_msg::Element>(
        &self,
        n: usize,
    ) -> Result<crate::SharedBuf<T>, crate::HeapError> {
        crate::SharedBuf::create(self.job(), self.rank(), self.secret(), n)
    }

    /// Maps `len` bytes of a shared-heap buffer that a rank of this host allocated (its
    /// [`SharedBuf::heap_ref`](crate::SharedBuf::heap_ref), sent here), for raw copies
    /// into and out of it and atomic words inside it: what one-sided windows are made of.
    /// The mapping lives as long as the [`PeerBytes`](crate::PeerBytes); if the owner
    /// frees the buffer meanwhile, the bytes stay mapped (stale, never a fault).
    ///
    /// ```
    /// let world = spools::init()?;
    /// let mut a = world.alloc::<u8>(64)?;
    /// a[3] = 7;
    /// let b = world.map_shared(&a.heap_ref(), 64)?;
    /// let mut x = [0u8; 1];
    /// b.copy_to(3, &mut x)?;
    /// assert_eq!(x[0], 7);
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    ///
    /// # Errors
    /// [`HeapError::Freed`](crate::HeapError::Freed) if the owner freed it,
    /// [`HeapError::OutOfRange`](crate::HeapError::OutOfRange) if the bytes lie outside
    /// it, [`HeapError::Open`](crate::HeapError::Open) if it cannot be mapped (another
    /// host's, or gone), [`HeapError::ForeignJob`](crate::HeapError::ForeignJob) if it is
    /// another job's.
    pub fn map_shared(
        &self,
        at: &crate::HeapRef,
        len: usize,
    ) -> Result<crate::PeerBytes, crate::HeapError> {
        self.worker.heaps().bytes(at, len)
    }
}

impl std::ops::Deref for World {
    type Target = Communicator;

    fn deref(&self) -> &Communicator {
        &self.msg
    }
}

impl Drop for World {
    /// Leaves the job (see [`World::finalize`] for the contract): a panicking thread ends
    /// the job at once; otherwise, when the process exits, this rank finalises and waits
    /// for the other ranks (exit status 0) or ends the job (any other status).
    fn drop(&mut self) {
        if self
            .finalized
            .swap(true, std::sync::atomic::Ordering::SeqCst)
        {
            return;
        }
        if std::thread::panicking() {
            crate::leave::on_panic(&self.boot);
            return;
        }
        let _ = self.endpoint().flush();
        spools_io::file::release_shared_windows(self.boot.job());
        let communicators = std::iter::once(self.msg.clone())
            .chain(self.io.get().cloned())
            .collect();
        crate::leave::on_drop(
            self.boot.clone(),
            (self.msg.collectives_started(), self.msg.messages_sent()),
            (self.worker.clone(), communicators),
        );
    }
}
