//! The runtime's log. Library code logs through the [`log`] crate (`log::warn!` and so
//! on) and never writes to standard error itself; [`install`] sets the logger that the
//! `spools` CLI installs at start, and that [`spools::init`] installs when the program has
//! none. It writes whole lines to standard error, one `write` per line, so that the lines
//! of ranks and launcher sharing a terminal or a pipe never interleave mid-line.
//!
//! The level comes from `SPOOLS_LOG`: `off`, `error`, `warn`, `info` (the default: the
//! launcher's reports and the runtime's warnings), `debug` or `trace`.
//!
//! ```
//! spools_boot::logger::install();
//! log::info!("spools run: rank {} ended the job", 3);
//! ```
//!
//! [`spools::init`]: https://docs.rs/spools

use std::io::Write;

use log::{Level, LevelFilter, Log, Metadata, Record};

/// The variable that sets the level.
pub const LEVEL_VAR: &str = "SPOOLS_LOG";

/// The level `SPOOLS_LOG` asks for (`info` when unset or not a level).
pub fn level() -> LevelFilter {
    std::env::var(LEVEL_VAR)
        .ok()
        .and_then(|v| v.trim().parse().ok())
        .unwrap_or(LevelFilter::Info)
}

/// Installs the line logger at the level of `SPOOLS_LOG`, unless the program installed
/// a logger of its own; returns whether this one is now in place.
pub fn install() -> bool {
    static LOGGER: LineLogger = LineLogger;
    let installed = log::set_logger(&LOGGER).is_ok();
    if installed {
        log::set_max_level(level());
    }
    installed
}

/// Whole lines on standard error: the message as it is up to `info` (the messages name
/// their source, as `spools run: ...` or `spools: ...`), with level and target below.
struct LineLogger;

impl Log for LineLogger {
    fn enabled(&self, metadata: &Metadata<'_>) -> bool {
        metadata.level() <= log::max_level()
    }

    fn log(&self, record: &Record<'_>) {
        if !self.enabled(record.metadata()) {
            return;
        }
        let text = match record.level() {
            Level::Error | Level::Warn | Level::Info => format!("{}\n", record.args()),
            l => format!("spools [{l} {}] {}\n", record.target(), record.args()),
        };
        // Standard error gone (a closed pipe) leaves nowhere to report to.
        let _ = std::io::stderr().lock().write_all(text.as_bytes());
    }

    fn flush(&self) {}
}
