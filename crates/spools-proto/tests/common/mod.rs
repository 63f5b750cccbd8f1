//! Shared by the tests of this crate: property-test settings, the fuzz seeds' check.

#![allow(dead_code)]

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

/// A fuzz seed kept in the repository: with `SPOOLS_WRITE_FUZZ_SEEDS` set, `bytes` is
/// written to `path`; otherwise the file must hold exactly `bytes` (a stale seed fails).
#[allow(clippy::unwrap_used, clippy::panic)]
pub(crate) fn keep_seed(path: &std::path::Path, bytes: &[u8]) {
    if std::env::var_os("SPOOLS_WRITE_FUZZ_SEEDS").is_some() {
        std::fs::create_dir_all(path.parent().unwrap()).unwrap();
        std::fs::write(path, bytes).unwrap();
        return;
    }
    let on_disk = std::fs::read(path).unwrap_or_else(|e| {
        panic!(
            "{}: {e}; write the seeds with SPOOLS_WRITE_FUZZ_SEEDS=1",
            path.display()
        )
    });
    assert!(
        on_disk == bytes,
        "{} is stale; rewrite the seeds with SPOOLS_WRITE_FUZZ_SEEDS=1",
        path.display()
    );
}
