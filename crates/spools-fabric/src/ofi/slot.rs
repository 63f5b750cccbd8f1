//! The state of a one-sided operation's registered buffer, kept per buffer by the
//! endpoint and advanced by its completions.

/// The state of one one-sided operation's buffer.
#[derive(Debug, Clone, Default)]
pub(super) struct Slot {
    /// The operation completed (successfully unless `err`).
    pub(super) done: bool,
    /// The provider's error, if it failed: (code, text).
    pub(super) err: Option<(i64, String)>,
    /// Its caller gave up waiting (its peer failed): free the buffer at completion.
    pub(super) abandoned: bool,
}
