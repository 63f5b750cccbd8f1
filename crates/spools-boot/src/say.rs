//! Messages to standard error as whole lines: one `write` per line, so that the lines of
//! ranks and launcher sharing a terminal or a pipe never interleave mid-line (`eprintln!`
//! may write a line in several pieces).

use std::io::Write;

/// Writes `args` and a newline to standard error in one write.
///
/// ```
/// spools_boot::say::line(format_args!("spools run: rank {} ended the job", 3));
/// ```
pub fn line(args: std::fmt::Arguments<'_>) {
    let mut text = args.to_string();
    text.push('\n');
    let _ = std::io::stderr().lock().write_all(text.as_bytes());
}
