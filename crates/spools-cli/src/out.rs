//! Buffered stdout that treats a closed pipe (`| head`) as a normal end.

use std::io::{self, BufWriter, StdoutLock, Write};

/// Buffered, locked stdout.
pub(crate) fn stdout() -> BufWriter<StdoutLock<'static>> {
    BufWriter::with_capacity(1 << 16, io::stdout().lock())
}

/// True when the error is a write to a closed pipe.
pub(crate) fn is_broken_pipe(e: &anyhow::Error) -> bool {
    e.chain()
        .filter_map(|c| c.downcast_ref::<io::Error>())
        .any(|io| io.kind() == io::ErrorKind::BrokenPipe)
}

/// Writes `[a,b,c]` triples separated by commas.
pub(crate) fn triples(
    w: &mut impl Write,
    items: impl Iterator<Item = (u64, u64, u64)>,
) -> io::Result<()> {
    for (i, (a, b, c)) in items.enumerate() {
        if i > 0 {
            w.write_all(b",")?;
        }
        write!(w, "[{a},{b},{c}]")?;
    }
    Ok(())
}
