//! Work an upper layer adds to every progress round ([`Poller`]), in a file of its own
//! so that the rank's state and the progress state can both name it.

use std::sync::Arc;

use crate::error::AmError;

/// Work an upper layer adds to every progress round; returns how much it did. It runs on
/// the thread that progresses, under the progress lock: it must not block.
pub type Poller = Arc<dyn Fn() -> Result<usize, AmError> + Send + Sync>;
