//! The supervision state of a running job: which ranks exited, the first failure, and
//! when to kill the rest.

use std::process::ExitStatus;
use std::time::{Duration, Instant};

use crate::children::{Request, Spawned};
use crate::process::{code_of, describe, kill_rank, Event};
use crate::procfs::is_stopped;
use crate::spec::LaunchSpec;
use spools_boot::server::RendezvousServer;
use spools_proto::boot::{SpawnProc, ToRank};

pub(crate) struct Supervisor {
    pub(crate) grace: Duration,
    /// Since when each rank has been seen stopped.
    pub(crate) stopped_since: Vec<Option<Instant>>,
    /// A rank that ended the job and whose exit status becomes the job's.
    pub(crate) aborter: Option<u32>,
    pub(crate) pids: Vec<Option<u32>>,
    pub(crate) exited: Vec<bool>,
    pub(crate) failure: Option<(u32, String)>,
    pub(crate) exit_code: i32,
    pub(crate) kill_at: Option<Instant>,
    pub(crate) lost: Vec<(u32, Instant)>,
    pub(crate) server: RendezvousServer,
    /// Per rank, `" on host NAME"` in a multi-host job (for messages), else empty.
    pub(crate) places: Vec<String>,
    /// The processes ranks asked for (`children.rs`), by slot.
    pub(crate) children: Vec<Spawned>,
    /// How many requests for processes came.
    pub(crate) requests: u32,
}

impl Supervisor {
    pub(crate) fn on_exit(&mut self, rank: u32, status: ExitStatus) {
        self.exited[rank as usize] = true;
        if self.failure.is_none() {
            // A rank that gave up is told to the others first: their exits (with the
            // errors it caused) can reach us before the server's event does.
            if let Some((r, cause)) = self.server.abort_record() {
                self.on_abort(r, &cause);
            }
        }
        if self.aborter == Some(rank) && !status.success() {
            self.exit_code = code_of(status);
        }
        if self.failure.is_some() {
            return;
        }
        if !status.success() {
            let mut cause = describe(status);
            if !self.place(rank).is_empty() && !self.server.joined(rank) {
                cause.push_str(" before joining the job (the agent could not start it there, or it could not reach the launcher)");
            }
            self.fail(rank, cause, code_of(status));
        } else if self.server.joined(rank) && !self.server.finalized(rank) {
            self.fail(
                rank,
                "exited with status 0 without finalising (the job object was not dropped or finalised)".into(),
                1,
            );
        } else if self.server.joined(rank) && !self.server.job_finalized() {
            self.fail(
                rank,
                "exited after finalising but before every rank had (it left the job early)".into(),
                1,
            );
        } else if !self.server.joined(rank) && self.server.mark_gone(rank) {
            self.fail(rank, "exited before joining the job".into(), 1);
        }
    }

    /// Whether every rank and every process they asked for has exited.
    pub(crate) fn all_ended(&self) -> bool {
        self.exited.iter().all(|e| *e) && self.children.iter().all(|c| c.exited)
    }

    /// Rank `rank` asks for processes (request `id`): starts them, and answers it.
    pub(crate) fn on_spawn(
        &mut self,
        spec: &LaunchSpec,
        (rank, id, procs): (u32, u32, Vec<SpawnProc>),
        tx: &std::sync::mpsc::Sender<Event>,
        forwarders: &mut Vec<std::thread::JoinHandle<()>>,
    ) {
        let refused = if self.failure.is_some() {
            Some("the job is ending".to_string())
        } else {
            self.requests += 1;
            let req = Request {
                requester: rank,
                id,
                number: self.requests,
                procs,
            };
            let (started, error) =
                crate::children::start(spec, &req, self.children.len(), tx, forwarders);
            let failed = error.is_some();
            for mut c in started {
                if failed {
                    // None of a request runs unless all do.
                    c.abandoned = true;
                    kill_rank(usize::MAX, c.pid, libc::SIGKILL);
                }
                self.children.push(c);
            }
            error
        };
        self.server.tell(rank, &ToRank::Spawned { id, refused });
    }

    /// A process a rank asked for ended: the rank is told; one that failed ends the job
    /// in that rank's name, as a rank that fails does.
    pub(crate) fn on_child_exit(&mut self, slot: usize, status: ExitStatus) {
        let Some(c) = self.children.get_mut(slot) else {
            return;
        };
        c.exited = true;
        if c.abandoned {
            return;
        }
        let how = describe(status);
        let (rank, index) = (c.requester, c.index);
        let what = format!("spawned process {index} ({}){}", c.program, c.place);
        self.server.tell(
            rank,
            &ToRank::SpawnExit {
                id: c.id,
                index,
                success: status.success(),
                how: how.clone(),
            },
        );
        if self.failure.is_none() {
            if let Some((r, cause)) = self.server.abort_record() {
                self.on_abort(r, &cause);
            }
        }
        if self.failure.is_some() || status.success() {
            return;
        }
        self.fail_for_child(rank, &what, &how, code_of(status));
    }

    /// Ends the job in the name of `rank` because a process it asked for (`what`)
    /// failed (`how`).
    fn fail_for_child(&mut self, rank: u32, what: &str, how: &str, code: i32) {
        spools_boot::logger::warn(format_args!(
            "spools run: rank {rank}'s {what} {how}; stopping the job"
        ));
        let cause = format!("its {what} {how}");
        self.server.abort(rank, &cause);
        self.failure = Some((rank, cause));
        self.exit_code = code;
        self.kill_at = Some(Instant::now() + self.grace);
    }

    /// A rank ended the job itself (an error it returned, a panic, an explicit abort):
    /// the job's exit status becomes that rank's, once it has exited.
    pub(crate) fn on_abort(&mut self, rank: u32, cause: &str) {
        if self.failure.is_some() {
            return;
        }
        // The first abort the server recorded wins: a rank that gave up because another
        // did (its operations failed naming it) can be heard here first, its server
        // thread having run ahead of the first one's.
        let (rank, cause) = self
            .server
            .abort_record()
            .unwrap_or_else(|| (rank, cause.to_string()));
        let cause = cause.as_str();
        self.aborter = Some(rank);
        let place = self.place(rank);
        spools_boot::logger::warn(format_args!(
            "spools run: rank {rank}{place} ended the job ({cause}); stopping the job"
        ));
        self.failure = Some((rank, cause.to_string()));
        self.exit_code = 1;
        self.kill_at = Some(Instant::now() + self.grace);
    }

    pub(crate) fn fail(&mut self, rank: u32, cause: String, code: i32) {
        if self.failure.is_some() {
            return;
        }
        let place = self.place(rank);
        spools_boot::logger::warn(format_args!(
            "spools run: rank {rank}{place} {cause}; stopping the job"
        ));
        // The other ranks hear where it ran, too.
        let told = match place.strip_prefix(' ') {
            Some(on_host) => format!("{on_host}: {cause}"),
            None => cause.clone(),
        };
        self.server.abort(rank, &told);
        self.failure = Some((rank, cause));
        self.exit_code = code;
        self.kill_at = Some(Instant::now() + self.grace);
    }

    fn place(&self, rank: u32) -> &str {
        self.places.get(rank as usize).map_or("", String::as_str)
    }

    /// Fails the job when a rank has stayed stopped (state `T` or `t` in
    /// `/proc/PID/stat`: SIGSTOP, SIGTSTP, a debugger) for `limit`.
    pub(crate) fn check_liveness(&mut self, now: Instant, limit: Duration) {
        if self.failure.is_some() {
            return;
        }
        for r in 0..self.pids.len() {
            let stopped = match (self.pids[r], self.exited[r]) {
                (Some(pid), false) => is_stopped(pid),
                _ => false,
            };
            if !stopped {
                self.stopped_since[r] = None;
                continue;
            }
            let since = *self.stopped_since[r].get_or_insert(now);
            if now.duration_since(since) >= limit {
                self.fail(
                    r as u32,
                    format!(
                        "stayed stopped (SIGSTOP or a debugger) for {:.1} s, past the liveness timeout (SPOOLS_LIVENESS_TIMEOUT)",
                        limit.as_secs_f64()
                    ),
                    1,
                );
                return;
            }
        }
        // The processes ranks asked for, likewise, in their requester's name.
        for c in &mut self.children {
            if c.exited || !is_stopped(c.pid) {
                c.stopped_since = None;
                continue;
            }
            let since = *c.stopped_since.get_or_insert(now);
            if now.duration_since(since) >= limit {
                let (rank, what) = (
                    c.requester,
                    format!("spawned process {} ({}){}", c.index, c.program, c.place),
                );
                let how = format!(
                    "stayed stopped (SIGSTOP or a debugger) for {:.1} s, past the liveness timeout (SPOOLS_LIVENESS_TIMEOUT)",
                    limit.as_secs_f64()
                );
                self.fail_for_child(rank, &what, &how, 1);
                return;
            }
        }
    }

    pub(crate) fn stop_all(&mut self) {
        for (r, pid) in self.pids.iter().enumerate() {
            if let (Some(pid), false) = (pid, self.exited[r]) {
                kill_rank(r, *pid, libc::SIGKILL);
            }
        }
        for c in self.children.iter().filter(|c| !c.exited) {
            // Each has a process group of its own (`usize::MAX`: not rank 0).
            kill_rank(usize::MAX, c.pid, libc::SIGKILL);
        }
    }

    pub(crate) fn reap(&mut self, rx: &std::sync::mpsc::Receiver<Event>, held: Vec<Event>) {
        let spawned = self.pids.iter().filter(|p| p.is_some()).count()
            + self.children.iter().filter(|c| !c.exited).count();
        let mut seen = held
            .iter()
            .filter(|e| matches!(e, Event::Exited(..) | Event::ChildExited(..)))
            .count();
        while seen < spawned {
            match rx.recv_timeout(Duration::from_secs(5)) {
                Ok(Event::Exited(..) | Event::ChildExited(..)) => seen += 1,
                Ok(_) => {}
                Err(_) => return,
            }
        }
    }
}
