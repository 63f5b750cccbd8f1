//! What the viewer's threads share ([`Shared`]): the board, the stop flag, the default
//! encoding and the page's token, and counts of open pages and HTTP connections.

use std::sync::atomic::{AtomicBool, AtomicUsize};
use std::sync::{Mutex, PoisonError};

use crate::board::Board;
use crate::render::Encoding;

/// What the viewer's threads share.
pub(crate) struct Shared {
    pub(crate) board: Mutex<Board>,
    pub(crate) stop: AtomicBool,
    pub(crate) encoding: Encoding,
    /// Pages connected now.
    pub(crate) pages: AtomicUsize,
    pub(crate) token: Option<String>,
    pub(crate) http: AtomicUsize,
}

impl Shared {
    pub(crate) fn board(&self) -> std::sync::MutexGuard<'_, crate::board::Board> {
        self.board.lock().unwrap_or_else(PoisonError::into_inner)
    }
}
