//! A rank's output, forwarded as whole lines: each rank's standard output and error come
//! to the launcher through pipes of their own, and one thread per pipe writes whole lines
//! (each prefixed by `[rank] ` with `--tag-output`, `[S,I] ` for the I-th process of the
//! job's S-th spawn) to the launcher's own stream, every line within one write (the
//! lines of one read go out in one write), so that concurrent ranks' lines never mix
//! inside a line, whatever pieces the ranks wrote them in. A last
//! line without a newline goes out when the rank closes the stream (at its exit). A line
//! longer than [`MAX_LINE`] goes out in pieces of that size (so a rank's line never makes
//! the launcher hold more): another rank's line may then come between two pieces. So does
//! the start of a line that waits ([`IDLE`]) while the rank (with everything it started)
//! is not running, as a prompt waiting for an answer does: it goes out as it is (a rank
//! preempted in the middle of a line is running, and its line stays whole). For a rank
//! started on another host through an agent that does not exec it (ssh), the launcher
//! sees only the agent, which is never running: there, a line that waits more than
//! [`IDLE`] in the middle goes out in two pieces.
//!
//! The splitting is [`LineSplitter`], which only sees bytes ([`LineSplitter::feed`],
//! [`LineSplitter::flush`]) and hands out [`Piece`]s; [`forward`] does the I/O.

use std::io::{Read, Write};
use std::os::fd::{AsFd, AsRawFd};
use std::sync::atomic::{AtomicU64, Ordering};
use std::thread::JoinHandle;
use std::time::Duration;

use crate::procfs::is_busy;

/// The longest line forwarded whole; longer ones go out in pieces of this many bytes.
pub(crate) const MAX_LINE: usize = 64 * 1024;

/// How long the start of a line waits for its end before the rank is looked at: when
/// nothing of it runs, the start goes out as it is (a prompt).
pub(crate) const IDLE: Duration = Duration::from_secs(1);

/// A part of a rank's output to write in one go: whole lines (with their newlines), or a
/// piece of a line (of a long line, the start of a line waiting for its end, or a last
/// line without a newline).
#[derive(Debug, PartialEq, Eq, Clone, Copy)]
pub(crate) struct Piece<'a> {
    /// The bytes, as the rank wrote them.
    pub(crate) bytes: &'a [u8],
    /// Whether they begin a line (where a tag goes; every newline but the last is
    /// followed by the start of a line).
    pub(crate) starts_line: bool,
    /// Whether they end with a line's newline.
    pub(crate) ends_line: bool,
}

/// Splits a byte stream, fed in chunks of any size, into whole lines of at most `max`
/// bytes and pieces of longer lines (sans-IO: no reading, no writing).
#[derive(Debug)]
pub(crate) struct LineSplitter {
    /// The start of a line not yet ended (never more than `max` bytes).
    held: Vec<u8>,
    /// The longest line handed out whole.
    max: usize,
    /// Whether the next byte begins a line.
    at_start: bool,
}

impl LineSplitter {
    /// A splitter that hands out lines of up to `max` bytes (at least 1) whole.
    pub(crate) fn new(max: usize) -> LineSplitter {
        LineSplitter {
            held: Vec::new(),
            max: max.max(1),
            at_start: true,
        }
    }

    /// Takes the next `data` of the stream and hands every line it completes (and every
    /// `max` bytes of a longer line) to `emit`, in order; keeps the rest.
    ///
    /// # Errors
    /// The first error of `emit` (the rest of `data` is then dropped).
    pub(crate) fn feed<E>(
        &mut self,
        mut data: &[u8],
        emit: &mut impl FnMut(Piece<'_>) -> Result<(), E>,
    ) -> Result<(), E> {
        while !data.is_empty() {
            let newline = data.iter().position(|&b| b == b'\n');
            let take = newline.map_or(data.len(), |i| i + 1);
            if self.held.len() + take > self.max {
                // A long line: its next `max` bytes go out as a piece.
                let room = self.max - self.held.len();
                self.held.extend_from_slice(&data[..room]);
                data = &data[room..];
                self.emit_held(false, emit)?;
                continue;
            }
            if newline.is_some() && self.held.is_empty() {
                // Whole lines: all that follow in `data`, up to a long or unended one,
                // go out together (one write for many lines).
                let run = take + whole_lines(&data[take..], self.max);
                let (lines, rest) = data.split_at(run);
                data = rest;
                let at_start = std::mem::replace(&mut self.at_start, true);
                emit(Piece {
                    bytes: lines,
                    starts_line: at_start,
                    ends_line: true,
                })?;
                continue;
            }
            let (part, rest) = data.split_at(take);
            data = rest;
            if newline.is_none() {
                self.held.extend_from_slice(part);
                if self.held.len() == self.max {
                    self.emit_held(false, emit)?;
                }
            } else {
                self.held.extend_from_slice(part);
                self.emit_held(true, emit)?;
            }
        }
        Ok(())
    }

    /// Whether the start of a line is held, waiting for its end.
    pub(crate) fn holds(&self) -> bool {
        !self.held.is_empty()
    }

    /// Hands out the start of a line held (at the end of the stream: a last line that has
    /// no newline), if any; the rest of the line will follow it untagged.
    ///
    /// # Errors
    /// The error of `emit`.
    pub(crate) fn flush<E>(
        &mut self,
        emit: &mut impl FnMut(Piece<'_>) -> Result<(), E>,
    ) -> Result<(), E> {
        if self.held.is_empty() {
            Ok(())
        } else {
            self.emit_held(false, emit)
        }
    }

    /// Hands out what is held (ending a line or not) and forgets it.
    fn emit_held<E>(
        &mut self,
        ends_line: bool,
        emit: &mut impl FnMut(Piece<'_>) -> Result<(), E>,
    ) -> Result<(), E> {
        let starts_line = std::mem::replace(&mut self.at_start, ends_line);
        let res = emit(Piece {
            bytes: &self.held,
            starts_line,
            ends_line,
        });
        self.held.clear();
        res
    }
}

/// How many bytes of `data` are whole lines of at most `max` bytes, from its start.
fn whole_lines(data: &[u8], max: usize) -> usize {
    if data.len() <= max {
        // Every line in it is short enough: up to the last newline (found from the end).
        return data.iter().rposition(|&b| b == b'\n').map_or(0, |i| i + 1);
    }
    let mut end = 0;
    while let Some(i) = data[end..].iter().take(max).position(|&b| b == b'\n') {
        end += i + 1;
    }
    end
}

/// Which of the launcher's standard outputs a rank's output goes to.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum OutputFd {
    /// Standard output.
    Stdout,
    /// Standard error.
    Stderr,
}

/// `piece` with `prefix` at the start of each of its lines (the first only if the piece
/// begins it), ended by a newline when it is the `last` of a stream and does not end a
/// line (so that the next rank's tag begins a line).
fn tagged(prefix: &[u8], piece: Piece<'_>, last: bool) -> Vec<u8> {
    let mut out = Vec::with_capacity(piece.bytes.len() + 64 * prefix.len());
    let mut starts_line = piece.starts_line;
    for line in piece.bytes.split_inclusive(|&b| b == b'\n') {
        if starts_line {
            out.extend_from_slice(prefix);
        }
        out.extend_from_slice(line);
        starts_line = true;
    }
    if last && !piece.ends_line {
        out.push(b'\n');
    }
    out
}

/// Writes `piece` to `to` in one write on the locked stream, [`tagged`] with `[TAG] `
/// when `tag` is given (`last`: the end of the rank's stream).
fn write_piece(
    to: OutputFd,
    tag: Option<&str>,
    piece: Piece<'_>,
    last: bool,
) -> std::io::Result<()> {
    let with_tag;
    let bytes = match tag {
        None => piece.bytes,
        Some(tag) => {
            with_tag = tagged(format!("[{tag}] ").as_bytes(), piece, last);
            &with_tag
        }
    };
    // Flushed at once: the standard streams' own buffers would otherwise hold a piece
    // without a newline (and split a line between two writes).
    match to {
        OutputFd::Stdout => {
            let mut o = std::io::stdout().lock();
            o.write_all(bytes).and_then(|()| o.flush())
        }
        OutputFd::Stderr => {
            let mut e = std::io::stderr().lock();
            e.write_all(bytes).and_then(|()| e.flush())
        }
    }
}

/// Whether `fd` has something to read (or its end) within `limit`; an error of `poll`
/// (other than a signal, which waits again) says yes, so that the read that follows
/// meets it.
fn readable_within(fd: &impl AsFd, limit: Duration) -> bool {
    let mut pfd = libc::pollfd {
        fd: fd.as_fd().as_raw_fd(),
        events: libc::POLLIN,
        revents: 0,
    };
    let ms = libc::c_int::try_from(limit.as_millis()).unwrap_or(libc::c_int::MAX);
    loop {
        // SAFETY: `pfd` is one valid, initialised pollfd that lives across the call, and
        // the count given is 1; `fd` is open (borrowed for the call).
        let n = unsafe { libc::poll(&mut pfd, 1, ms) };
        if n >= 0 || std::io::Error::last_os_error().kind() != std::io::ErrorKind::Interrupted {
            return n != 0;
        }
    }
}

/// Forwards everything `from` (the stream of rank `pid`) gives to the launcher's stream
/// `to`, whole lines at a time, tagged with `tag`, until the rank closes it, on a thread of
/// its own. When `to` is closed (`| head`), `from` is closed too, so that the rank meets
/// the closed pipe as if it wrote to it itself (an error or SIGPIPE, never a block).
///
/// # Errors
/// The thread could not be started.
pub(crate) fn forward(
    mut from: impl Read + AsFd + Send + 'static,
    to: OutputFd,
    tag: Option<String>,
    pid: u32,
) -> std::io::Result<JoinHandle<()>> {
    std::thread::Builder::new()
        .name("spools-run-output".into())
        // Two per rank, thousands of ranks: the line buffer is on the heap, the stack
        // need not be the default 2 MiB.
        .stack_size(FORWARDER_STACK)
        .spawn(move || {
            let mut split = LineSplitter::new(MAX_LINE);
            let mut buf = vec![0u8; MAX_LINE];
            let mut emit = |p: Piece<'_>| write_piece(to, tag.as_deref(), p, false);
            loop {
                if split.holds() && !readable_within(&from, IDLE) {
                    // A prompt, or a rank waiting in the middle of a line; a busy rank
                    // is looked at again after the next wait.
                    if !is_busy(pid) && split.flush(&mut emit).is_err() {
                        return;
                    }
                    continue;
                }
                let n = match from.read(&mut buf) {
                    Ok(0) => break,
                    Ok(n) => {
                        FORWARDED.fetch_add(n as u64, Ordering::Relaxed);
                        n
                    }
                    Err(e) if e.kind() == std::io::ErrorKind::Interrupted => continue,
                    Err(_) => break,
                };
                if split.feed(&buf[..n], &mut emit).is_err() {
                    // Dropping `from` closes the pipe: the rank learns what we learnt.
                    return;
                }
            }
            let _ = split.flush(&mut |p| write_piece(to, tag.as_deref(), p, true));
        })
}

/// Forwards `child`'s standard output and error (both piped) with `tag`, adding each
/// forwarder to `forwarders`. A forwarder that cannot start kills the child (its output
/// would otherwise kill it with SIGPIPE, and nobody would say why) and gives the error.
///
/// # Errors
/// A forwarder's thread could not be started.
pub(crate) fn forward_child(
    child: &mut std::process::Child,
    tag: Option<String>,
    forwarders: &mut Vec<JoinHandle<()>>,
) -> std::io::Result<()> {
    let pid = child.id();
    let streams = [
        child
            .stdout
            .take()
            .map(|o| forward(o, OutputFd::Stdout, tag.clone(), pid)),
        child
            .stderr
            .take()
            .map(|e| forward(e, OutputFd::Stderr, tag.clone(), pid)),
    ];
    for f in streams.into_iter().flatten() {
        match f {
            Ok(h) => forwarders.push(h),
            Err(e) => {
                let _ = child.kill();
                let _ = child.wait();
                return Err(e);
            }
        }
    }
    Ok(())
}

/// Stack of a forwarder thread.
const FORWARDER_STACK: usize = 128 * 1024;

/// Bytes read from the ranks so far, by every forwarder of this process: the launcher
/// waits for its forwarders to finish as long as this grows.
static FORWARDED: AtomicU64 = AtomicU64::new(0);

/// How many bytes the forwarders have read so far.
pub(crate) fn forwarded() -> u64 {
    FORWARDED.load(Ordering::Relaxed)
}

#[cfg(test)]
mod tests {
    use super::{tagged, LineSplitter, Piece};

    /// What a splitter with `max` hands out for `chunks`, then at the end: (bytes,
    /// starts_line, ends_line) per piece.
    fn split(max: usize, chunks: &[&[u8]]) -> Vec<(Vec<u8>, bool, bool)> {
        let mut out = Vec::new();
        let mut s = LineSplitter::new(max);
        let mut emit = |p: Piece<'_>| -> Result<(), ()> {
            out.push((p.bytes.to_vec(), p.starts_line, p.ends_line));
            Ok(())
        };
        for c in chunks {
            assert_eq!(s.feed(c, &mut emit), Ok(()));
        }
        assert_eq!(s.flush(&mut emit), Ok(()));
        out
    }

    /// The pieces as `--tag-output` writes them (tag `[t] `), one write per piece,
    /// separated by `|`.
    fn render(pieces: &[(Vec<u8>, bool, bool)]) -> String {
        let n = pieces.len();
        let writes: Vec<String> = pieces
            .iter()
            .enumerate()
            .map(|(i, (b, s, e))| {
                let p = Piece {
                    bytes: b,
                    starts_line: *s,
                    ends_line: *e,
                };
                String::from_utf8_lossy(&tagged(b"[t] ", p, i + 1 == n)).into_owned()
            })
            .collect();
        writes.join("|")
    }

    #[test]
    fn whole_lines_in_one_chunk_go_out_in_one_write_each_tagged() {
        let out = split(100, &[b"a\nbb\nccc\n"]);
        assert_eq!(out, [(b"a\nbb\nccc\n".to_vec(), true, true)]);
        assert_eq!(render(&out), "[t] a\n[t] bb\n[t] ccc\n");
    }

    #[test]
    fn a_line_in_three_pieces_goes_out_whole() {
        let out = split(100, &[b"one ", b"two ", b"three\nfo", b"ur\n"]);
        assert_eq!(render(&out), "[t] one two three\n|[t] four\n");
    }

    #[test]
    fn a_last_line_without_newline_goes_out_at_the_end() {
        let out = split(100, &[b"x\nta", b"il"]);
        assert_eq!(
            out,
            [
                (b"x\n".to_vec(), true, true),
                (b"tail".to_vec(), true, false)
            ]
        );
        // Tagged, it is ended for the next rank's tag.
        assert_eq!(render(&out), "[t] x\n|[t] tail\n");
        assert_eq!(split(100, &[]), []);
        assert_eq!(split(100, &[b"", b""]), []);
    }

    #[test]
    fn nothing_goes_out_before_a_line_ends() {
        let mut s = LineSplitter::new(100);
        let n = std::cell::Cell::new(0);
        let mut emit = |_: Piece<'_>| -> Result<(), ()> {
            n.set(n.get() + 1);
            Ok(())
        };
        assert_eq!(s.feed(b"no newline yet", &mut emit), Ok(()));
        assert_eq!(s.feed(b" still none", &mut emit), Ok(()));
        assert_eq!(n.get(), 0);
        assert_eq!(s.feed(b"\n", &mut emit), Ok(()));
        assert_eq!(n.get(), 1);
    }

    #[test]
    fn a_long_line_goes_out_in_pieces_of_max_bytes() {
        // 10 bytes and a newline, max 4: 4, 4, then the last 2 with the newline (and
        // the next line); tagged once, at its start.
        let out = split(4, &[b"abcdefghij\nok\n"]);
        assert_eq!(
            out,
            [
                (b"abcd".to_vec(), true, false),
                (b"efgh".to_vec(), false, false),
                (b"ij\nok\n".to_vec(), false, true),
            ]
        );
        assert_eq!(render(&out), "[t] abcd|efgh|ij\n[t] ok\n");
        // Fed a byte at a time: the same long line's pieces.
        let bytes: Vec<&[u8]> = b"abcdefghij\nok\n".chunks(1).collect();
        assert_eq!(render(&split(4, &bytes)), "[t] abcd|efgh|ij\n|[t] ok\n");
    }

    #[test]
    fn a_line_of_exactly_max_bytes_is_whole_and_one_more_byte_is_not() {
        assert_eq!(render(&split(4, &[b"abc\n"])), "[t] abc\n");
        assert_eq!(
            render(&split(4, &[b"abc\nabcd\n"])),
            "[t] abc\n|[t] abcd|\n"
        );
    }

    #[test]
    fn every_byte_comes_out_once_in_order_whatever_the_chunks() {
        // A stream of lines of many lengths, fed in chunks of many sizes: the pieces
        // concatenate to the stream; no piece boundary falls inside a line no longer than
        // max; only whole lines make a piece longer than max.
        let mut stream = Vec::new();
        for i in 0..200usize {
            stream.extend((0..(i * 7) % 23).map(|k| b'a' + (k % 26) as u8));
            stream.push(b'\n');
        }
        stream.extend_from_slice(b"tail");
        for max in [1, 3, 8, 16, 64] {
            for size in [1, 2, 5, 13, 64, 1000] {
                let chunks: Vec<&[u8]> = stream.chunks(size).collect();
                let out = split(max, &chunks);
                let joined: Vec<u8> = out.iter().flat_map(|(b, _, _)| b.clone()).collect();
                assert_eq!(joined, stream, "max {max}, chunks of {size}");
                let mut cuts = Vec::new();
                let mut at = 0;
                for (b, starts, ends) in &out {
                    assert_eq!(*starts, at == 0 || stream[at - 1] == b'\n');
                    assert_eq!(*ends, b.last() == Some(&b'\n'));
                    assert!(
                        *ends || b.len() <= max,
                        "a piece of a line longer than {max}"
                    );
                    at += b.len();
                    cuts.push(at);
                }
                let mut start = 0;
                for l in stream.split_inclusive(|&b| b == b'\n') {
                    let end = start + l.len();
                    if l.len() <= max && l.ends_with(b"\n") {
                        assert!(
                            !cuts.iter().any(|&c| c > start && c < end),
                            "line {l:?} cut (max {max}, chunks of {size})"
                        );
                    }
                    start = end;
                }
            }
        }
    }

    #[test]
    fn a_flushed_start_is_followed_by_the_rest_of_its_line() {
        let mut out = Vec::new();
        let mut s = LineSplitter::new(100);
        let mut emit = |p: Piece<'_>| -> Result<(), ()> {
            out.push((p.bytes.to_vec(), p.starts_line, p.ends_line));
            Ok(())
        };
        assert_eq!(s.feed(b"a\nname? ", &mut emit), Ok(()));
        assert!(s.holds());
        assert_eq!(s.flush(&mut emit), Ok(()));
        assert!(!s.holds());
        assert_eq!(s.flush(&mut emit), Ok(()), "nothing more");
        assert_eq!(s.feed(b"spools\nb\n", &mut emit), Ok(()));
        assert_eq!(render(&out), "[t] a\n|[t] name? |spools\n[t] b\n");
    }

    #[test]
    fn an_error_of_the_writer_is_returned() {
        let mut s = LineSplitter::new(100);
        let mut emit = |_: Piece<'_>| -> Result<(), &str> { Err("closed") };
        assert_eq!(s.feed(b"a\nb\n", &mut emit), Err("closed"));
    }
}
