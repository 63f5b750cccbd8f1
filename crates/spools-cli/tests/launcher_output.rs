//! `spools run` forwards whole lines, as mpirun and srun do: 4 ranks each print 400
//! lines of 300+ bytes, every line in three separate writes, on standard output and on
//! standard error; every line comes out whole, on its own stream, with and without
//! `--tag-output`. A last line without a newline comes out when the rank exits; a 1 MiB
//! line comes out entire.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

mod common;

use std::collections::HashSet;
use std::io::{BufRead, BufReader, Write};
use std::process::Stdio;
use std::time::Duration;

use common::{grouped, rank_main, spools, without_ambient_spools_env, Job, Output, Spawned};

const RANKS: u32 = 4;
const LINES: u32 = 400;
const LINE_BYTES: usize = 320;
const LONG: usize = 1 << 20;

/// Line `i` of `rank` on `stream` (`out` or `err`), without its newline: 320 bytes that
/// say whose they are.
fn text(stream: &str, rank: u32, i: u32) -> String {
    let mut t = format!("{stream} rank {rank} line {i} ");
    let fill =
        (0..LINE_BYTES - t.len()).map(|k| (b'a' + ((rank * 7 + i + k as u32) % 26) as u8) as char);
    t.extend(fill);
    t
}

/// Writes `line` in three writes, each flushed (a write(2) of its own; stderr is not
/// buffered, stdout's buffer is flushed).
fn in_three(w: &mut impl Write, line: &[u8]) -> Result<(), String> {
    let third = line.len() / 3;
    for piece in [&line[..third], &line[third..2 * third], &line[2 * third..]] {
        w.write_all(piece).map_err(|e| e.to_string())?;
        w.flush().map_err(|e| e.to_string())?;
    }
    Ok(())
}

fn rank_body(role: &str) -> Result<(), String> {
    let rank: u32 = std::env::var("SPOOLS_RANK")
        .map_err(|e| e.to_string())?
        .parse()
        .map_err(|e| format!("SPOOLS_RANK: {e}"))?;
    let (mut out, mut err) = (std::io::stdout(), std::io::stderr());
    match role {
        "lines" => {
            for i in 0..LINES {
                in_three(&mut out, format!("{}\n", text("out", rank, i)).as_bytes())?;
                in_three(&mut err, format!("{}\n", text("err", rank, i)).as_bytes())?;
            }
            Ok(())
        }
        "tail" => {
            in_three(&mut out, format!("out tail of rank {rank}").as_bytes())?;
            in_three(&mut err, format!("err tail of rank {rank}").as_bytes())
        }
        "prompt" if rank == 0 => {
            out.write_all(b"name? ").map_err(|e| e.to_string())?;
            out.flush().map_err(|e| e.to_string())?;
            let mut name = String::new();
            std::io::stdin()
                .read_line(&mut name)
                .map_err(|e| e.to_string())?;
            writeln!(out, "hello {}", name.trim()).map_err(|e| e.to_string())
        }
        "prompt" => Ok(()),
        "long" => {
            let mut line = vec![b'a' + rank as u8; LONG];
            line.push(b'\n');
            in_three(&mut out, &line)
        }
        other => Err(format!("unknown role {other}")),
    }
}

fn job(test: &str, role: &str, tagged: bool, ranks: u32) -> Output {
    let mut j = Job::new(ranks, test).role(role).via_cli(spools());
    if tagged {
        j = j.cli_args(&["--tag-output"]);
    }
    let o = j.run();
    assert!(
        o.status.success(),
        "{role} tagged {tagged}: {:?}, stderr ends {:?}",
        o.status,
        &o.stderr[o.stderr.len().saturating_sub(2000)..]
    );
    o
}

/// The test harness's own lines (each rank is this test executable: `running 1 test`).
fn harness_noise(body: &str) -> bool {
    body.is_empty() || body.starts_with("running ")
}

/// `got` without the harness's lines (see [`harness_noise`]).
fn strip_harness(got: &str) -> String {
    got.replace("running 1 test", "")
}

/// Checks that `got` holds each of the 1600 lines of `stream` exactly once, whole (with
/// its rank's tag when `tagged`), and nothing else but the harness's lines.
fn all_whole(got: &str, stream: &str, tagged: bool) {
    let want: HashSet<String> = (0..RANKS)
        .flat_map(|r| (0..LINES).map(move |i| text(stream, r, i)))
        .collect();
    let mut seen = HashSet::new();
    let mut broken = Vec::new();
    for l in got.lines() {
        let (tag, body) = match tagged {
            true => match l.strip_prefix('[').and_then(|t| t.split_once("] ")) {
                Some((r, body)) => (r.parse::<u32>().ok(), body),
                None => (None, l),
            },
            false => (None, l),
        };
        if harness_noise(body) && (tag.is_some() || !tagged) {
            continue;
        }
        let rank_ok = !tagged || tag.is_some_and(|r| body.contains(&format!(" rank {r} line ")));
        if want.contains(body) && rank_ok && seen.insert(body.to_string()) {
            continue;
        }
        broken.push(l.chars().take(80).collect::<String>());
    }
    assert!(
        broken.is_empty() && seen.len() == want.len(),
        "{stream} (tagged {tagged}): {} of {} lines whole, {} broken or foreign, e.g. {:?}",
        seen.len(),
        want.len(),
        broken.len(),
        &broken[..broken.len().min(3)]
    );
}

fn four_ranks_print_whole_lines(tagged: bool, test: &str) {
    let o = job(test, "lines", tagged, RANKS);
    all_whole(&o.stdout, "out", tagged);
    all_whole(&o.stderr, "err", tagged);
}

#[test]
fn untagged_lines_written_in_pieces_come_out_whole() {
    rank_main(rank_body);
    four_ranks_print_whole_lines(false, "untagged_lines_written_in_pieces_come_out_whole");
}

#[test]
fn tagged_lines_written_in_pieces_come_out_whole() {
    rank_main(rank_body);
    four_ranks_print_whole_lines(true, "tagged_lines_written_in_pieces_come_out_whole");
}

#[test]
fn a_last_line_without_newline_comes_out_at_exit() {
    rank_main(rank_body);
    let test = "a_last_line_without_newline_comes_out_at_exit";
    for tagged in [false, true] {
        let o = job(test, "tail", tagged, RANKS);
        for (got, stream) in [(&o.stdout, "out"), (&o.stderr, "err")] {
            let mut rest = strip_harness(got);
            for r in 0..RANKS {
                let tail = format!("{stream} tail of rank {r}");
                let whole = match tagged {
                    // Tagged: a line of its own, ended for the next rank's tag.
                    true => format!("[{r}] {tail}\n"),
                    false => tail,
                };
                assert_eq!(rest.matches(&whole).count(), 1, "{whole:?} in {got:?}");
                rest = rest.replace(&whole, "");
            }
            // Untagged, the bytes are exactly the ranks' (the tails follow each other).
            let left: String = rest.chars().filter(|c| *c != '\n').collect();
            let left = left.replace(
                |c: char| c == '[' || c == ']' || c.is_ascii_digit() || c == ' ',
                "",
            );
            assert!(left.is_empty(), "{stream} tagged {tagged}: {got:?}");
        }
    }
}

#[test]
fn a_line_of_one_mebibyte_comes_out_entire() {
    rank_main(rank_body);
    let test = "a_line_of_one_mebibyte_comes_out_entire";
    for tagged in [false, true] {
        let o = job(test, "long", tagged, 2);
        let stdout = strip_harness(&o.stdout);
        for r in 0..2u8 {
            let c = (b'a' + r) as char;
            assert_eq!(
                stdout.matches(c).count(),
                LONG,
                "rank {r}'s bytes, tagged {tagged}"
            );
            if tagged {
                // One tag per rank, at the start of its line (a piece of the other
                // rank's line may come between two pieces of a line this long).
                assert_eq!(stdout.matches(&format!("[{r}] {c}")).count(), 1);
            }
        }
        // Nothing else but the harness's lines and the tags.
        let rest = stdout.replace("[0] ", "").replace("[1] ", "");
        assert!(rest.chars().all(|c| c == 'a' || c == 'b' || c == '\n'));
        assert_eq!(rest.chars().filter(|c| *c != '\n').count(), 2 * LONG);
    }
}

/// `spools run ... | head`: once the reader has gone, ranks that keep writing meet the
/// closed pipe (SIGPIPE, as without the launcher between them), so the job ends instead of
/// running on with its output thrown away.
#[test]
fn ranks_writing_to_a_closed_output_meet_the_closed_pipe() {
    for tagged in [false, true] {
        let mut cmd = grouped(spools());
        without_ambient_spools_env(&mut cmd).args(["run", "-n", "2"]);
        if tagged {
            cmd.arg("--tag-output");
        }
        cmd.args(["--", "yes", "spools"])
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped());
        let mut job = Spawned::new(cmd.spawn().unwrap());
        let out = BufReader::new(job.child().stdout.take().unwrap());
        for l in out.lines().take(100) {
            let l = l.unwrap();
            let whole = match tagged {
                true => l == "[0] spools" || l == "[1] spools",
                false => l == "spools",
            };
            assert!(whole, "tagged {tagged}: {l:?}");
        }
        // The reader is gone here, like `head`.
        let o = job.wait(Duration::from_secs(60));
        assert_eq!(o.code(), Some(128 + 13), "tagged {tagged}: {o:?}");
        assert!(o.stderr.contains("SIGPIPE"), "tagged {tagged}: {o:?}");
    }
}

/// A prompt (the start of a line, and rank 0 waits for its standard input) reaches the
/// user before the answer: the launcher lets the start of a line go when the rank waits.
/// One rank: another rank's lines could come between the prompt and the answer.
#[test]
fn a_prompt_reaches_the_user_before_the_answer() {
    rank_main(rank_body);
    let test = "a_prompt_reaches_the_user_before_the_answer";
    for tagged in [false, true] {
        let mut j = Job::new(1, test).role("prompt").via_cli(spools());
        if tagged {
            j = j.cli_args(&["--tag-output"]);
        }
        let mut cmd = j.command();
        cmd.stdin(Stdio::piped());
        let mut job = Spawned::new(cmd.spawn().unwrap());
        let mut input = job.child().stdin.take().unwrap();
        let mut out = job.child().stdout.take().unwrap();
        let (tx, rx) = std::sync::mpsc::channel();
        let reader = std::thread::spawn(move || {
            let mut seen = Vec::new();
            let mut buf = [0u8; 4096];
            while let Ok(n @ 1..) = std::io::Read::read(&mut out, &mut buf) {
                seen.extend_from_slice(&buf[..n]);
                let _ = tx.send(String::from_utf8_lossy(&seen).into_owned());
            }
            String::from_utf8_lossy(&seen).into_owned()
        });
        let mut so_far = String::new();
        while !so_far.contains("name? ") {
            so_far = rx
                .recv_timeout(Duration::from_secs(60))
                .unwrap_or_else(|e| panic!("no prompt (tagged {tagged}): {e}; {so_far:?}"));
        }
        input.write_all(b"spools\n").unwrap();
        drop(input);
        let o = job.wait(Duration::from_secs(60));
        let stdout = strip_harness(&reader.join().unwrap());
        assert!(o.status.success(), "tagged {tagged}: {o:?}");
        let want = if tagged {
            "[0] name? hello spools\n"
        } else {
            "name? hello spools\n"
        };
        assert!(stdout.contains(want), "tagged {tagged}: {stdout:?}");
    }
}
