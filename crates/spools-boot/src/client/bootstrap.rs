//! A joined rank's [`Bootstrap`]: the runtime's own collectives, finalise and abort,
//! and the hooks that keep the active-message layer progressing while it waits.

use std::net::TcpStream;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::mpsc::{Receiver, RecvTimeoutError, TryRecvError};
use std::sync::{Arc, Mutex, PoisonError, RwLock};
use std::time::{Duration, Instant};

use spools_proto::auth::Secret;
use spools_proto::boot::{CollOp, Endpoint, ToServer};

use crate::error::{BootError, Lost, Violation};
use crate::health::{Failure, JobHealth};
use crate::identity::{LauncherKind, Rendezvous};
use crate::net::write_frame;
use crate::server::RendezvousServer;

/// Drives the rank's message progress while it waits in a bootstrap collective; returns
/// how many messages it handled.
pub type ProgressHook = Arc<dyn Fn() -> usize + Send + Sync>;
/// Sleeps until the rank is woken (a message, or a bootstrap reply) or the time passes.
pub type SleepHook = Arc<dyn Fn(Duration) + Send + Sync>;

#[derive(Clone)]
pub(crate) struct Hooks {
    progress: ProgressHook,
    sleep: SleepHook,
    spin: Duration,
}

pub(crate) enum Reply {
    Coll(u64, Vec<Vec<u8>>),
    Finalized,
    Wake,
}

/// A rank that has joined its job.
pub struct Bootstrap {
    pub(crate) rank: u32,
    pub(crate) size: u32,
    pub(crate) job: u64,
    pub(crate) endpoints: Vec<Endpoint>,
    pub(crate) secret: Secret,
    pub(crate) state: Arc<JobHealth>,
    pub(crate) writer: Mutex<TcpStream>,
    pub(crate) replies: Mutex<(u64, Receiver<Reply>)>,
    pub(crate) finalized: Arc<AtomicBool>,
    /// This rank has told the server it finalises (it takes part in nothing more).
    pub(crate) announced: AtomicBool,
    pub(crate) server: Option<RendezvousServer>,
    pub(crate) launcher: LauncherKind,
    pub(crate) rendezvous: Rendezvous,
    pub(crate) hooks: RwLock<Option<Hooks>>,
    /// Processes this rank asked the launcher to start (`launched.rs`).
    pub(crate) requests: Arc<super::requests::Requests>,
}

impl std::fmt::Debug for Bootstrap {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Bootstrap")
            .field("rank", &self.rank)
            .field("size", &self.size)
            .field("job", &format_args!("{:016x}", self.job))
            .finish_non_exhaustive()
    }
}

pub(crate) fn failure_error(f: Failure) -> BootError {
    match f {
        Failure::Rank { rank, cause } => BootError::PeerDied { rank, cause },
        Failure::ServerLost(why) => BootError::ServerLost(Lost::Watchdog(why)),
    }
}

impl Bootstrap {
    /// This rank.
    pub fn rank(&self) -> u32 {
        self.rank
    }

    /// Number of ranks.
    pub fn size(&self) -> u32 {
        self.size
    }

    /// The job id (same on every rank).
    pub fn job(&self) -> u64 {
        self.job
    }

    /// Everyone's addresses, by rank.
    pub fn endpoints(&self) -> &[Endpoint] {
        &self.endpoints
    }

    /// The job secret.
    pub fn secret(&self) -> &Secret {
        &self.secret
    }

    /// The watchdog's record of the job.
    pub fn state(&self) -> &Arc<JobHealth> {
        &self.state
    }

    /// Who launched this rank.
    pub fn launcher(&self) -> LauncherKind {
        self.launcher
    }

    /// How the ranks met: `spools run`, `SPOOLS_BOOTSTRAP`, or the launcher's PMIx or
    /// PMI2 ([`Rendezvous::describe`] words it).
    pub fn rendezvous(&self) -> &Rendezvous {
        &self.rendezvous
    }

    fn collective(&self, op: CollOp, data: &[u8]) -> Result<Vec<Vec<u8>>, BootError> {
        self.collective_with(op, data, true)
    }

    fn collective_with(
        &self,
        op: CollOp,
        data: &[u8],
        serve: bool,
    ) -> Result<Vec<Vec<u8>>, BootError> {
        if self.finalized.load(Ordering::SeqCst) {
            return Err(BootError::Finalized);
        }
        let mut replies = self.replies.lock().unwrap_or_else(PoisonError::into_inner);
        if let Some(f) = self.state.any_failure() {
            return Err(failure_error(f));
        }
        let seq = replies.0;
        replies.0 += 1;
        write_frame(
            &mut *self.writer.lock().unwrap_or_else(PoisonError::into_inner),
            &ToServer::Collective {
                seq,
                op,
                data: data.to_vec(),
            },
        )?;
        match self.wait_reply(&replies.1, serve)? {
            Reply::Coll(s, parts) if s == seq => Ok(parts),
            Reply::Coll(s, _) => Err(BootError::Protocol(Violation::CollectiveOrder {
                got: s,
                want: seq,
            })),
            _ => Err(BootError::Finalized),
        }
    }

    /// Lets the active-message layer progress while this rank waits in a bootstrap collective or in
    /// `finalize`, so that a rank waiting here still serves peers that need it.
    pub fn set_hooks(&self, progress: ProgressHook, sleep: SleepHook, spin: Duration) {
        *self.hooks.write().unwrap_or_else(PoisonError::into_inner) = Some(Hooks {
            progress,
            sleep,
            spin,
        });
    }

    /// The error once the watchdog thread has stopped: the failure it recorded, if any.
    pub(crate) fn watchdog_gone(&self) -> BootError {
        self.state
            .any_failure()
            .map(failure_error)
            .unwrap_or(BootError::ServerLost(Lost::WatchdogStopped))
    }

    /// Waits for the watchdog thread's next answer (not a wake-up), driving progress.
    fn wait_reply(&self, rx: &Receiver<Reply>, serve: bool) -> Result<Reply, BootError> {
        let hooks = if serve {
            self.hooks
                .read()
                .unwrap_or_else(PoisonError::into_inner)
                .clone()
        } else {
            None
        };
        let mut idle_since = Instant::now();
        loop {
            match rx.try_recv() {
                Ok(Reply::Wake) | Err(TryRecvError::Empty) => {}
                Ok(r) => return Ok(r),
                Err(TryRecvError::Disconnected) => return Err(self.watchdog_gone()),
            }
            if let Some(f) = self.state.any_failure() {
                return Err(failure_error(f));
            }
            match &hooks {
                Some(h) => {
                    if (h.progress)() > 0 {
                        idle_since = Instant::now();
                    } else if idle_since.elapsed() > h.spin {
                        (h.sleep)(Duration::from_millis(50));
                    } else {
                        std::thread::yield_now();
                    }
                }
                None => match rx.recv_timeout(Duration::from_millis(200)) {
                    Ok(Reply::Wake) | Err(RecvTimeoutError::Timeout) => {}
                    Ok(r) => return Ok(r),
                    Err(RecvTimeoutError::Disconnected) => return Err(self.watchdog_gone()),
                },
            }
        }
    }

    /// Waits until every rank has called `barrier`.
    ///
    /// # Errors
    /// [`BootError::PeerDied`] if a rank died, [`BootError::ServerLost`].
    pub fn barrier(&self) -> Result<(), BootError> {
        self.collective(CollOp::Barrier, &[]).map(|_| ())
    }

    /// A barrier that does not serve the active-message layer while it waits (see
    /// [`Bootstrap::set_hooks`]): for code that drives the transports itself and must
    /// not have its messages consumed by the active-message layer meanwhile.
    ///
    /// # Errors
    /// As [`Bootstrap::barrier`].
    pub fn barrier_quiet(&self) -> Result<(), BootError> {
        self.collective_with(CollOp::Barrier, &[], false)
            .map(|_| ())
    }

    /// Returns `root`'s `data` on every rank (other ranks' `data` is ignored).
    ///
    /// # Errors
    /// As [`Bootstrap::barrier`].
    pub fn broadcast(&self, root: u32, data: &[u8]) -> Result<Vec<u8>, BootError> {
        if root >= self.size {
            return Err(BootError::BadRoot {
                root,
                size: self.size,
            });
        }
        let mut parts = self.collective(CollOp::Broadcast { root }, data)?;
        parts
            .pop()
            .ok_or(BootError::Protocol(Violation::Parts { got: 0, want: 1 }))
    }

    /// Returns every rank's `data`, indexed by rank.
    ///
    /// # Errors
    /// As [`Bootstrap::barrier`].
    pub fn allgather(&self, data: &[u8]) -> Result<Vec<Vec<u8>>, BootError> {
        let parts = self.collective(CollOp::Allgather, data)?;
        if parts.len() != self.size as usize {
            return Err(BootError::Protocol(Violation::Parts {
                got: parts.len(),
                want: self.size as usize,
            }));
        }
        Ok(parts)
    }

    /// Ends this rank's part in the job: waits until every rank has finalised, so that no
    /// rank leaves while another may still need it. Same as [`Bootstrap::announce_finalize`]
    /// followed by [`Bootstrap::wait_finalized`].
    ///
    /// # Errors
    /// [`BootError::PeerDied`] if a rank died first.
    pub fn finalize(&self) -> Result<(), BootError> {
        self.announce_finalize(Vec::new(), Vec::new())?;
        self.wait_finalized()
    }

    /// Tells the server that this rank takes part in nothing more, without waiting for the
    /// other ranks (a dropped `World` does this and waits at process exit). `collectives`
    /// lists, per communicator context this rank holds, how many collectives it started
    /// there: ranks that wait in a later one fail (see [`JobHealth::collective_blocker`]).
    /// `sent` lists, per peer this rank sent tagged messages to, how many: a peer's
    /// receive from this rank fails once that many have arrived and none matches it
    /// (see [`JobHealth::end_of_data`]). Once is enough: later calls do nothing.
    ///
    /// # Errors
    /// [`BootError::Io`] if the rendezvous cannot be written to.
    pub fn announce_finalize(
        &self,
        collectives: Vec<(u32, u32)>,
        sent: Vec<(u32, u64)>,
    ) -> Result<(), BootError> {
        if self.finalized.load(Ordering::SeqCst) || self.announced.swap(true, Ordering::SeqCst) {
            return Ok(());
        }
        write_frame(
            &mut *self.writer.lock().unwrap_or_else(PoisonError::into_inner),
            &ToServer::Finalize { collectives, sent },
        )
    }

    /// Whether this rank has announced that it finalises.
    pub fn announced(&self) -> bool {
        self.announced.load(Ordering::SeqCst)
    }

    /// Waits, serving peers, until every rank has finalised (after
    /// [`Bootstrap::announce_finalize`]).
    ///
    /// # Errors
    /// [`BootError::PeerDied`] if a rank died or gave up first.
    pub fn wait_finalized(&self) -> Result<(), BootError> {
        if self.finalized.load(Ordering::SeqCst) {
            return Ok(());
        }
        let replies = self.replies.lock().unwrap_or_else(PoisonError::into_inner);
        loop {
            match self.wait_reply(&replies.1, true) {
                Ok(Reply::Finalized) => break,
                Ok(_) => {}
                Err(_) if self.finalized.load(Ordering::SeqCst) => break,
                Err(e) => return Err(e),
            }
        }
        if let Some(server) = &self.server {
            server.wait_final_sent(Duration::from_secs(10));
        }
        Ok(())
    }

    /// Ends the whole job in the name of `rank`, which this rank found at fault (it
    /// finalised without starting a collective this rank waits in): every rank's pending
    /// operations fail naming it, and `spools run` reports it. Returns once the server
    /// has ended the job (its abort reached this rank too), so that whatever this rank
    /// does next (report an error, exit) comes after; best effort, bounded.
    pub fn blame(&self, rank: u32, cause: &str) {
        let sent = write_frame(
            &mut *self.writer.lock().unwrap_or_else(PoisonError::into_inner),
            &ToServer::Blame {
                rank,
                cause: cause.to_string(),
            },
        );
        if sent.is_ok() {
            let _ = self.state.verdict_on(rank, Duration::from_secs(2));
        }
    }

    /// Ends the whole job on behalf of this rank: the server tells every other rank that
    /// this one gave up because of `cause`, and their pending operations fail naming it.
    /// Best effort (a lost rendezvous is already a failure everyone sees); this rank's own
    /// waits fail from now on too.
    pub fn abort(&self, cause: &str) {
        if self.finalized.load(Ordering::SeqCst) {
            return;
        }
        let sent = write_frame(
            &mut *self.writer.lock().unwrap_or_else(PoisonError::into_inner),
            &ToServer::Abort {
                cause: cause.to_string(),
            },
        );
        if sent.is_ok() {
            // The server's abort comes back to this rank too: once it has, the job ends in
            // this rank's words, whatever this process does next (it usually exits).
            let _ = self.state.verdict_on(self.rank, Duration::from_secs(2));
        }
        self.state.mark_dead(self.rank, cause);
        if let Some(server) = &self.server {
            // Rank 0 hosts the server: give it the chance to tell the others before this
            // process, and the server with it, goes away.
            server.wait_abort_sent(Duration::from_secs(2));
        }
    }
}
