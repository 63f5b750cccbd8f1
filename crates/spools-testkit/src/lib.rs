//! Spools test kit (dev-only: use it from `[dev-dependencies]` only).
//!
//! Multi-process tests run real jobs: the test executable re-runs itself as the ranks of a
//! job, each rank playing the role named by [`ROLE_VAR`]. A test starts with
//! [`rank_main`], which runs the rank's body (and exits) when this process is a rank, and
//! returns at once in the test harness's own process:
//!
//! ```no_run
//! use spools_testkit::{assert_ok, e, rank_main, Job};
//!
//! #[test]
//! fn two_ranks_meet() {
//!     rank_main(|_role| {
//!         // ... spools::init(), the rank's checks ...
//!         Ok(())
//!     });
//!     let o = Job::new(2, "two_ranks_meet").env("SPOOLS_TRANSPORT", "tcp").run();
//!     assert_ok(&o);
//! }
//! ```
//!
//! A [`Job`] is launched by the real launcher, [`spools_launch::launch`]: the test
//! executable is first re-run as the launcher (in a process group of its own), which then
//! starts the ranks; so the job's standard output and error are captured as `spools run`
//! would forward them. Tests of the command line launch through the `spools` binary
//! instead ([`Job::via_cli`]). Every wait is bounded ([`wait_bounded`]): at its limit the
//! whole process group is stopped (SIGTERM, so that the launcher stops its ranks, then
//! SIGKILL to whatever is left, ranks included) and the test fails with what the job
//! printed. A child a test starts and waits for later is guarded by a [`Spawned`] (from
//! [`Job::start`], or around a [`foreign_rank`] or [`pipe_end`]), which stops it with
//! everything it started if the test panics first. Jobs, foreign ranks and pipe ends
//! start without the caller's `SPOOLS_*` variables ([`without_ambient_spools_env`]). Temporary directories
//! ([`tempdir`]) are removed when dropped, also when the test fails.
//!
//! Verdicts must come from events the test controls (a file a rank writes, a message
//! received), never from the clock: the clock only bounds waits, as a safety net.

mod env;
mod fixtures;
mod guard;
mod job;
mod netns;
mod ofi;
mod rank;
mod rng;
mod stop;
mod tmpfs;
mod wait;

pub use env::ROLE_VAR;
pub use fixtures::{
    assert_ok, assert_ok_as, foreign_rank, free_port, pipe_end, pipe_end_placed, shm_leftovers,
    tempdir, TempDir,
};
pub use guard::Spawned;
pub use job::{
    current_exe, grouped, launch, self_args, without_ambient_spools_env, Job, JOB_GRACE,
    JOB_TIMEOUT, JOB_WAIT, TEST_THREAD_LEVEL_VAR,
};
pub use netns::{Hosts, NetHost, MAX_NET_HOSTS};
pub use ofi::{networks_between_hosts, ofi_between_hosts, ofi_providers, OFI_TEST_PROVIDERS};
pub use rank::{checked, e, rank_main, role};
pub use rng::Rng;
pub use stop::STOP_GRACE;
pub use tmpfs::{listing, Tmpfs};
pub use wait::{
    compute_until, kill_when_signalled, signal_file, wait_bounded, wait_for_file, Output,
};
