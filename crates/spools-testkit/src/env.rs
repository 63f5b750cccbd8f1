//! The environment variables a test job sets for its processes.

/// The environment variable naming the role a rank plays (set for every rank of a
/// [`Job`](crate::Job) and of a [`foreign_rank`](crate::foreign_rank)).
pub const ROLE_VAR: &str = "SPOOLS_TEST_ROLE";

/// Set (to `RANKS TIMEOUT_MS GRACE_MS`) in the process that plays the launcher of a
/// [`Job`](crate::Job); removed before the ranks start.
pub(crate) const LAUNCH_VAR: &str = "SPOOLS_TESTKIT_LAUNCH";
