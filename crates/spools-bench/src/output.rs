//! Printing a benchmark's JSON document.

use serde::Serialize;

use crate::error::BenchError;

/// Prints `doc` as one line of JSON on stdout.
pub(crate) fn print_json(doc: &impl Serialize) -> Result<(), BenchError> {
    println!("{}", serde_json::to_string(doc)?);
    Ok(())
}

/// Prints `doc` as one line of JSON on stderr (for benchmarks whose stdout carries data).
pub(crate) fn eprint_json(doc: &impl Serialize) -> Result<(), BenchError> {
    eprintln!("{}", serde_json::to_string(doc)?);
    Ok(())
}
