//! Stopping what a test started, whatever happens: [`Spawned`] (a child process killed
//! with its whole process tree when dropped unless waited for).

use std::process::Child;
use std::time::Duration;

use crate::stop::{signal_pid, stop_tree};
use crate::wait::{wait_bounded, Output};

/// A child process (a job's launcher, a rank, a pipe end) that is stopped with everything
/// it started when dropped, unless it was waited for with [`Spawned::wait`]: a test that
/// panics before waiting leaves nothing running. The child must have been started in a
/// process group of its own ([`grouped`](crate::grouped); [`Job::start`](crate::Job::start),
/// [`foreign_rank`](crate::foreign_rank) and [`pipe_end`](crate::pipe_end) do so).
#[derive(Debug)]
pub struct Spawned(Option<Child>);

impl Spawned {
    /// Guards `child`.
    pub fn new(child: Child) -> Spawned {
        Spawned(Some(child))
    }

    /// The child's process id (also its process group's).
    ///
    /// # Panics
    /// Never: the child is there until waited for, which consumes the guard.
    #[allow(clippy::expect_used)]
    pub fn id(&self) -> u32 {
        self.0.as_ref().expect("a child").id()
    }

    /// The child (to take its output pipes, say).
    ///
    /// # Panics
    /// Never (see [`Spawned::id`]).
    #[allow(clippy::expect_used)]
    pub fn child(&mut self) -> &mut Child {
        self.0.as_mut().expect("a child")
    }

    /// Sends `signal` (a name, like `"-INT"`) to the child alone.
    pub fn signal(&self, signal: &str) {
        signal_pid(self.id(), signal);
    }

    /// Waits for the child at most `limit`, as [`wait_bounded`] does (which stops it with
    /// everything it started at the limit and panics).
    ///
    /// # Panics
    /// At the limit (see [`wait_bounded`]).
    #[allow(clippy::expect_used)]
    pub fn wait(mut self, limit: Duration) -> Output {
        wait_bounded(self.0.take().expect("a child"), limit)
    }
}

impl From<Child> for Spawned {
    fn from(child: Child) -> Spawned {
        Spawned::new(child)
    }
}

impl Drop for Spawned {
    fn drop(&mut self) {
        if let Some(mut c) = self.0.take() {
            stop_tree(&mut c);
        }
    }
}
