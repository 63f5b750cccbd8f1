//! The runtime's log. Library code reports through [`warn`] and [`error`] (and the `log`
//! crate for anything finer) and never writes to standard error on its own account:
//!
//! - when the program has set up logging (a logger whose level is above `off`: the `spools`
//!   CLI installs [`install`]'s line logger, a program may install `env_logger` or
//!   `tracing-log`, before or after `spools::init`), the records go to that logger;
//! - otherwise they are written as whole lines on standard error, one `write` per line (so
//!   that lines of ranks and launcher sharing a terminal never interleave mid-line), when
//!   `SPOOLS_LOG` lets their level through.
//!
//! `SPOOLS_LOG` is `off`, `error`, `warn`, `info` (the default: the launcher's reports and
//! the runtime's warnings), `debug` or `trace`.
//!
//! ```
//! spools_boot::logger::warn(format_args!("spools run: rank {} ended the job", 3));
//! ```

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

/// Reports a warning of the runtime (see the module's documentation for where it goes).
pub fn warn(args: std::fmt::Arguments<'_>) {
    emit(Level::Warn, args);
}

/// Reports an error of the runtime (see the module's documentation for where it goes).
pub fn error(args: std::fmt::Arguments<'_>) {
    emit(Level::Error, args);
}

/// Reports `args` at `level`: to the program's logger when it has one, else as a line on
/// standard error if `SPOOLS_LOG` lets `level` through.
pub fn emit(level: Level, args: std::fmt::Arguments<'_>) {
    if log::max_level() != LevelFilter::Off {
        log::log!(target: "spools", level, "{args}");
    } else if level <= self::level() {
        line(args);
    }
}

/// Writes `args` and a newline to standard error in one write, whatever the level (for a
/// program's own fatal messages).
pub fn line(args: std::fmt::Arguments<'_>) {
    let text = format!("{args}\n");
    // Standard error gone (a closed pipe) leaves nowhere to report to.
    let _ = std::io::stderr().lock().write_all(text.as_bytes());
}

/// Installs the line logger at the level of `SPOOLS_LOG`, unless the program installed a
/// logger of its own; returns whether this one is now in place. For binaries (the
/// `spools` CLI); libraries never call it.
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
        match record.level() {
            Level::Error | Level::Warn | Level::Info => line(*record.args()),
            l => line(format_args!(
                "spools [{l} {}] {}",
                record.target(),
                record.args()
            )),
        }
    }

    fn flush(&self) {}
}
