//! A rank's output, forwarded as whole lines: each rank's standard output and error come
//! to the launcher through pipes of their own, and one thread per pipe writes each whole
//! line (prefixed by `[rank] ` with `--tag-output`) to the launcher's own stream in one
//! write, so that concurrent ranks' lines never mix inside a line, whatever pieces the
//! ranks wrote them in. A last line without a newline goes out when the rank closes the
//! stream (at its exit). A line longer than [`MAX_LINE`] goes out in pieces of that size
//! (so a rank's line never makes the launcher hold more): another rank's line may then
//! come between two pieces. So does the start of a line that waits ([`IDLE`]) while the
//! rank (with everything it started) is not running, as a prompt waiting for an answer
//! does: it goes out as it is (a rank preempted in the middle of a line is running, and
//! its line stays whole).
//!
//! The splitting is [`LineSplitter`], which only sees bytes ([`LineSplitter::feed`],
//! [`LineSplitter::flush`]) and hands out [`Piece`]s; [`forward`] does the I/O.

use std::io::{Read, Write};
use std::os::fd::{AsFd, AsRawFd};
use std::thread::JoinHandle;
use std::time::Duration;

use crate::launcher::process::is_busy;

/// The longest line forwarded whole; longer ones go out in pieces of this many bytes.
pub(crate) const MAX_LINE: usize = 64 * 1024;

/// How long the start of a line waits for its end before the rank is looked at: when
/// nothing of it runs, the start goes out as it is (a prompt).
pub(crate) const IDLE: Duration = Duration::from_secs(1);

/// A part of a rank's output to write in one go: a whole line (with its newline), or a
/// piece of a line (of a long line, or a last line without a newline).
#[derive(Debug, PartialEq, Eq, Clone, Copy)]
pub(crate) struct Piece<'a> {
    /// The bytes, as the rank wrote them.
    pub(crate) bytes: &'a [u8],
    /// Whether they begin a line (where a tag goes).
    pub(crate) starts_line: bool,
    /// Whether they end with the line's newline.
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
            let (part, rest) = data.split_at(take);
            data = rest;
            if newline.is_none() {
                self.held.extend_from_slice(part);
                if self.held.len() == self.max {
                    self.emit_held(false, emit)?;
                }
            } else if self.held.is_empty() {
                let at_start = std::mem::replace(&mut self.at_start, true);
                emit(Piece {
                    bytes: part,
                    starts_line: at_start,
                    ends_line: true,
                })?;
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

/// Which of the launcher's streams a rank's stream goes to.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Stream {
    /// Standard output.
    Stdout,
    /// Standard error.
    Stderr,
}

/// Writes `piece` to `to` in one write on the locked stream: with `tag`, prefixed by
/// `[rank] ` when it begins a line, and (`last`: the end of the rank's stream) ended by a
/// newline when it does not end one, so that the next rank's tag begins a line.
fn write_piece(to: Stream, tag: Option<u32>, piece: Piece<'_>, last: bool) -> std::io::Result<()> {
    let tagged;
    let bytes = match tag {
        None => piece.bytes,
        Some(rank) => {
            let mut out = Vec::with_capacity(piece.bytes.len() + 16);
            if piece.starts_line {
                out.extend_from_slice(format!("[{rank}] ").as_bytes());
            }
            out.extend_from_slice(piece.bytes);
            if last && !piece.ends_line {
                out.push(b'\n');
            }
            tagged = out;
            &tagged
        }
    };
    // Flushed at once: the standard streams' own buffers would otherwise hold a piece
    // without a newline (and split a line between two writes).
    match to {
        Stream::Stdout => {
            let mut o = std::io::stdout().lock();
            o.write_all(bytes).and_then(|()| o.flush())
        }
        Stream::Stderr => {
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
/// its own (`None` if the thread could not be started). When `to` is closed (`| head`),
/// `from` is closed too, so that the rank meets the closed pipe as if it wrote to it
/// itself (an error or SIGPIPE, never a block).
pub(crate) fn forward(
    mut from: impl Read + AsFd + Send + 'static,
    to: Stream,
    tag: Option<u32>,
    pid: u32,
) -> Option<JoinHandle<()>> {
    std::thread::Builder::new()
        .name("spools-run-output".into())
        .spawn(move || {
            let mut split = LineSplitter::new(MAX_LINE);
            let mut buf = vec![0u8; MAX_LINE];
            let mut emit = |p: Piece<'_>| write_piece(to, tag, p, false);
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
                    Ok(n) => n,
                    Err(e) if e.kind() == std::io::ErrorKind::Interrupted => continue,
                    Err(_) => break,
                };
                if split.feed(&buf[..n], &mut emit).is_err() {
                    // Dropping `from` closes the pipe: the rank learns what we learnt.
                    return;
                }
            }
            let _ = split.flush(&mut |p| write_piece(to, tag, p, true));
        })
        .ok()
}

#[cfg(test)]
mod tests {
    use super::{LineSplitter, Piece};

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

    fn line(b: &[u8]) -> (Vec<u8>, bool, bool) {
        (b.to_vec(), true, true)
    }

    #[test]
    fn whole_lines_in_one_chunk_go_out_one_by_one() {
        assert_eq!(
            split(100, &[b"a\nbb\nccc\n"]),
            [line(b"a\n"), line(b"bb\n"), line(b"ccc\n")]
        );
    }

    #[test]
    fn a_line_in_three_pieces_goes_out_whole() {
        assert_eq!(
            split(100, &[b"one ", b"two ", b"three\nfo", b"ur\n"]),
            [line(b"one two three\n"), line(b"four\n")]
        );
    }

    #[test]
    fn a_last_line_without_newline_goes_out_at_the_end() {
        assert_eq!(
            split(100, &[b"x\nta", b"il"]),
            [line(b"x\n"), (b"tail".to_vec(), true, false)]
        );
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
        // 10 bytes and a newline, max 4: 4, 4, then the last 2 with the newline.
        let out = split(4, &[b"abcdefghij\nok\n"]);
        assert_eq!(
            out,
            [
                (b"abcd".to_vec(), true, false),
                (b"efgh".to_vec(), false, false),
                (b"ij\n".to_vec(), false, true),
                line(b"ok\n"),
            ]
        );
        // Fed a byte at a time: the same pieces; the splitter never holds more than max.
        let bytes: Vec<&[u8]> = b"abcdefghij\nok\n".chunks(1).collect();
        assert_eq!(split(4, &bytes), out);
    }

    #[test]
    fn a_line_of_exactly_max_bytes_is_whole_and_one_more_byte_is_not() {
        assert_eq!(split(4, &[b"abc\n"]), [line(b"abc\n")]);
        assert_eq!(
            split(4, &[b"abcd\n"]),
            [
                (b"abcd".to_vec(), true, false),
                (b"\n".to_vec(), false, true)
            ]
        );
    }

    #[test]
    fn every_byte_comes_out_once_in_order_whatever_the_chunks() {
        // A stream of lines of many lengths, fed in chunks of many sizes: the pieces
        // concatenate to the stream; every line no longer than max is one piece.
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
                let mut at_start = true;
                for (b, starts, ends) in &out {
                    assert!(b.len() <= max, "a piece longer than {max}");
                    assert_eq!(*starts, at_start, "max {max}, chunks of {size}");
                    assert_eq!(*ends, b.last() == Some(&b'\n'));
                    at_start = *ends;
                }
                for l in stream.split_inclusive(|&b| b == b'\n') {
                    if l.len() <= max && l.ends_with(b"\n") {
                        assert!(
                            out.iter().any(|(b, s, _)| b == l && *s),
                            "line {l:?} not whole (max {max}, chunks of {size})"
                        );
                    }
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
        assert_eq!(
            out,
            [
                line(b"a\n"),
                (b"name? ".to_vec(), true, false),
                (b"spools\n".to_vec(), false, true),
                line(b"b\n"),
            ]
        );
    }

    #[test]
    fn an_error_of_the_writer_is_returned() {
        let mut s = LineSplitter::new(100);
        let mut emit = |_: Piece<'_>| -> Result<(), &str> { Err("closed") };
        assert_eq!(s.feed(b"a\nb\n", &mut emit), Err("closed"));
    }
}
