//! Spec arguments: parsed with an error that points at the column at fault.

use anyhow::{anyhow, Result};
use spools_map::Layout;

/// Parses the spec given for `what` (an option name, for the message).
pub(crate) fn parse(what: &str, text: &str) -> Result<Layout> {
    text.parse().map_err(|e: spools_map::SpecError| {
        let column = text[..e.position().min(text.len())].chars().count();
        anyhow!(
            "invalid {what} spec: {e}\n  {text}\n  {}^",
            " ".repeat(column)
        )
    })
}
