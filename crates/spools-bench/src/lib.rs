//! Spools benchmarks (being moved here from the CLI).
