//! The requests for processes a rank sent its launcher ([`Bootstrap::launch`](super::Bootstrap::launch)),
//! shared with the rank's watchdog thread, which reads the launcher's answers and the
//! processes' ends and hands them over here.

use std::collections::HashMap;
use std::sync::atomic::{AtomicU32, Ordering};
use std::sync::mpsc::{channel, Receiver, Sender};
use std::sync::{Arc, Mutex, PoisonError};

/// Called when a launched process ends: its index in the request, whether it exited with
/// status 0, and how it ended in words.
pub type Exits = Arc<dyn Fn(u32, bool, &str) + Send + Sync>;

/// A request waiting for its answer, and whom to tell of its processes' ends.
struct Pending {
    answer: Option<Sender<Option<String>>>,
    exits: Exits,
    /// Processes whose end is still to come (the entry goes with the last).
    running: usize,
}

/// The requests of one rank.
#[derive(Default)]
pub(crate) struct Requests {
    next: AtomicU32,
    by_id: Mutex<HashMap<u32, Pending>>,
}

impl Requests {
    /// A new request of `procs` processes: its number, and where its answer comes
    /// (`None`: all started).
    pub(crate) fn register(&self, exits: Exits, procs: usize) -> (u32, Receiver<Option<String>>) {
        let id = self.next.fetch_add(1, Ordering::Relaxed);
        let (tx, rx) = channel();
        self.by_id
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .insert(
                id,
                Pending {
                    answer: Some(tx),
                    exits,
                    running: procs,
                },
            );
        (id, rx)
    }

    /// Forgets request `id` (its answer never came, or the job ended).
    pub(crate) fn forget(&self, id: u32) {
        self.by_id
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .remove(&id);
    }

    /// The launcher's answer to request `id` (`None`: all started).
    pub(crate) fn answered(&self, id: u32, refused: Option<String>) {
        let mut by_id = self.by_id.lock().unwrap_or_else(PoisonError::into_inner);
        let Some(p) = by_id.get_mut(&id) else { return };
        if let Some(tx) = p.answer.take() {
            let _ = tx.send(refused.clone());
        }
        // A refused request has no processes to hear of.
        if refused.is_some() {
            by_id.remove(&id);
        }
    }

    /// Process `index` of request `id` ended.
    pub(crate) fn ended(&self, id: u32, index: u32, success: bool, how: &str) {
        let exits = {
            let mut by_id = self.by_id.lock().unwrap_or_else(PoisonError::into_inner);
            let Some(p) = by_id.get_mut(&id) else { return };
            let f = p.exits.clone();
            p.running = p.running.saturating_sub(1);
            if p.running == 0 {
                by_id.remove(&id);
            }
            f
        };
        exits(index, success, how);
    }
}
