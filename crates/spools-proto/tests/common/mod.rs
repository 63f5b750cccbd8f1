//! Shared by the property tests of this crate.

use proptest::test_runner::Config as ProptestConfig;

/// Property-test cases: 256, or `SPOOLS_PROPTEST_CASES` for a longer soak.
pub(crate) fn config() -> ProptestConfig {
    let cases = std::env::var("SPOOLS_PROPTEST_CASES")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(256);
    ProptestConfig {
        cases,
        ..ProptestConfig::default()
    }
}
