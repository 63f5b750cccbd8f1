//! The rank side of a test: which role this process plays, and running a rank's body.

use crate::env::{LAUNCH_VAR, ROLE_VAR};
use crate::job::run_launcher;

/// The role this process plays when it was started as a rank by a test.
pub fn role() -> Option<String> {
    std::env::var(ROLE_VAR).ok()
}

/// Runs `body` as a rank and exits with its result (0 on success, the error printed and
/// 1 otherwise), so the test harness never runs the parent test's body in a rank. In the
/// process that plays a [`Job`](crate::Job)'s launcher, runs the launcher and exits with its status.
/// In the test harness's own process (no role), returns at once.
pub fn rank_main(body: impl FnOnce(&str) -> Result<(), String>) {
    if let Some(spec) = std::env::var_os(LAUNCH_VAR) {
        // The ranks must not launch again.
        std::env::remove_var(LAUNCH_VAR);
        std::process::exit(run_launcher(&spec.to_string_lossy()));
    }
    if let Some(r) = role() {
        let code = match body(&r) {
            Ok(()) => 0,
            Err(e) => {
                eprintln!("rank error: {e}");
                1
            }
        };
        std::process::exit(code);
    }
}

/// Runs a rank's checks on an initialised runtime; on failure prints the error and exits
/// at once, without finalising, so that the launcher stops the job (dropping the runtime
/// would wait for ranks that may be waiting for this one).
pub fn checked<W>(w: &W, body: impl FnOnce(&W) -> Result<(), String>) {
    if let Err(e) = body(w) {
        eprintln!("rank error: {e}");
        std::process::exit(1);
    }
}

/// Turns any displayable error into the rank body's error.
///
/// # Errors
/// `r`'s error, as text.
pub fn e<T, E: std::fmt::Display>(r: Result<T, E>) -> Result<T, String> {
    r.map_err(|e| e.to_string())
}
