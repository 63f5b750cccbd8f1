//! The processes beside the job in `spools bench stream`, all started by rank 0 and never
//! outliving it: the receiver (`spools recv`, this very program) and iperf3, the physical
//! limit of the same loopback.

use std::io::{BufRead, BufReader};
use std::net::{SocketAddr, TcpListener};
use std::process::{Child, Command, Stdio};
use std::sync::mpsc::{channel, Receiver};
use std::time::{Duration, Instant};

use serde::Serialize;

use crate::error::{bail, BenchError};

/// The longest any peer is waited for (a failure bound, not a timing).
const LIMIT: Duration = Duration::from_secs(120);

/// A child process that is stopped and reaped if it is dropped still running.
struct Peer {
    child: Child,
    what: &'static str,
}

impl Peer {
    fn spawn(mut c: Command, what: &'static str) -> Result<Peer, BenchError> {
        let child = c
            .stdin(Stdio::null())
            .spawn()
            .map_err(BenchError::io(format!("starting {what}")))?;
        Ok(Peer { child, what })
    }

    /// Waits for the process to end (at most [`LIMIT`]), true when it succeeded.
    fn wait(&mut self) -> Result<bool, BenchError> {
        let t = Instant::now();
        loop {
            let st = self
                .child
                .try_wait()
                .map_err(BenchError::io(format!("waiting for {}", self.what)))?;
            if let Some(st) = st {
                return Ok(st.success());
            }
            if t.elapsed() > LIMIT {
                bail!("{} did not end within {} s", self.what, LIMIT.as_secs());
            }
            std::thread::sleep(Duration::from_millis(2));
        }
    }
}

impl Drop for Peer {
    fn drop(&mut self) {
        if let Ok(None) = self.child.try_wait() {
            let _ = self.child.kill();
        }
        let _ = self.child.wait();
    }
}

/// The lines a child writes to one pipe, read by a thread so that it never blocks on a
/// full pipe: each line as it comes.
fn lines(pipe: impl std::io::Read + Send + 'static) -> Receiver<String> {
    let (tx, rx) = channel();
    std::thread::spawn(move || {
        for l in BufReader::new(pipe).lines().map_while(Result::ok) {
            if tx.send(l).is_err() {
                break;
            }
        }
    });
    rx
}

/// The first line of `rx` satisfying `want`, waited for at most [`LIMIT`].
fn first_line(
    rx: &Receiver<String>,
    what: &str,
    mut want: impl FnMut(&str) -> bool,
) -> Result<String, BenchError> {
    let t = Instant::now();
    loop {
        let left = LIMIT.saturating_sub(t.elapsed());
        match rx.recv_timeout(left) {
            Ok(l) if want(&l) => return Ok(l),
            Ok(_) => {}
            Err(_) => bail!("{what} did not say it was ready"),
        }
    }
}

/// The remaining lines of a child that has ended: up to the end of its pipe (the reading
/// thread may still hold the last lines), waited for at most [`LIMIT`].
fn rest(rx: &Receiver<String>) -> Vec<String> {
    let t = Instant::now();
    let mut v = Vec::new();
    while let Ok(l) = rx.recv_timeout(LIMIT.saturating_sub(t.elapsed())) {
        v.push(l);
    }
    v
}

/// What `spools recv` reported once it ended.
#[derive(Debug, Clone, Copy, Default, Serialize)]
pub(crate) struct Received {
    /// ADUs it handed out whole.
    pub(crate) adus: u64,
    /// Their bytes.
    pub(crate) bytes: u64,
}

/// A `spools recv` serving one logical connection, writing to /dev/null.
pub(crate) struct SpoolsRecv {
    peer: Peer,
    stderr: Receiver<String>,
    /// Where it listens.
    pub(crate) addr: SocketAddr,
}

impl SpoolsRecv {
    /// Starts `spools recv tcp:127.0.0.1:0 --out /dev/null --connections 1` with this
    /// program, and learns its port.
    pub(crate) fn start() -> Result<SpoolsRecv, BenchError> {
        let exe = std::env::current_exe().map_err(BenchError::io("finding this program"))?;
        let mut c = Command::new(exe);
        c.args([
            "recv",
            "tcp:127.0.0.1:0",
            "--out",
            "/dev/null",
            "--connections",
            "1",
        ])
        .stdout(Stdio::null())
        .stderr(Stdio::piped());
        let mut peer = Peer::spawn(c, "spools recv")?;
        let Some(err) = peer.child.stderr.take() else {
            bail!("spools recv has no stderr");
        };
        let stderr = lines(err);
        let l = first_line(&stderr, "spools recv", |l| l.contains("listening on "))?;
        let addr = l.rsplit(' ').next().unwrap_or_default();
        let Ok(addr) = addr.parse() else {
            bail!("spools recv said {l:?}, not where it listens");
        };
        Ok(SpoolsRecv { peer, stderr, addr })
    }

    /// Waits for the receiver to end, and returns what it received.
    ///
    /// # Errors
    /// The receiver failed (it names what did not arrive whole) or never said what it
    /// received.
    pub(crate) fn finish(mut self) -> Result<Received, BenchError> {
        let ok = self.peer.wait()?;
        let said = rest(&self.stderr);
        if !ok {
            bail!("spools recv failed: {}", said.join(" | "));
        }
        // "spools recv: N ADUs, B bytes in S s (R MB/s) from C connection(s)"
        for l in &said {
            let w: Vec<&str> = l.split_whitespace().collect();
            if let (Some(a), Some(b)) = (w.get(2), w.get(4)) {
                if w.get(3) == Some(&"ADUs,") {
                    let (Ok(adus), Ok(bytes)) = (a.parse(), b.parse()) else {
                        continue;
                    };
                    return Ok(Received { adus, bytes });
                }
            }
        }
        bail!(
            "spools recv did not say what it received: {}",
            said.join(" | ")
        )
    }
}

/// One iperf3 run: what it moved and how fast, as its receiving side counted.
#[derive(Debug, Clone, Copy, Serialize)]
pub(crate) struct IperfRun {
    /// Bytes the client was asked to send (`-n`).
    pub(crate) bytes: u64,
    /// Bytes the client sent.
    pub(crate) sent_bytes: u64,
    /// Bytes the server had received when it measured (iperf3 counts the receiving
    /// side's bytes and seconds at the end of the test, a little short of all).
    pub(crate) received_bytes: u64,
    /// Seconds of the transfer at the receiving side.
    pub(crate) seconds: f64,
    /// `received_bytes` over `seconds`, MB/s: iperf3's receiver rate.
    pub(crate) mb_per_s: f64,
}

/// A free port on 127.0.0.1 (a listener bound to port 0, closed again).
fn free_port() -> Result<u16, BenchError> {
    let l = TcpListener::bind("127.0.0.1:0").map_err(BenchError::io("finding a free port"))?;
    Ok(l.local_addr()
        .map_err(BenchError::io("finding a free port"))?
        .port())
}

/// Runs `iperf3 -s -1` and `iperf3 -c 127.0.0.1 -P streams -n bytes -J` against it.
///
/// # Errors
/// iperf3 is missing (`scripts/install-iperf3.sh` installs it), fails, or its report
/// does not say what it moved.
pub(crate) fn iperf3(streams: u16, bytes: u64) -> Result<IperfRun, BenchError> {
    let port = free_port()?.to_string();
    let mut s = Command::new("iperf3");
    s.args(["-s", "-1", "--forceflush", "-p", &port])
        .stdout(Stdio::piped())
        .stderr(Stdio::null());
    let mut server = Peer::spawn(s, "iperf3 -s (scripts/install-iperf3.sh installs it)")?;
    let Some(out) = server.child.stdout.take() else {
        bail!("iperf3 -s has no stdout");
    };
    let out = lines(out);
    first_line(&out, "iperf3 -s", |l| l.contains("listening"))?;
    let mut c = Command::new("iperf3");
    c.args(["-c", "127.0.0.1", "-p", &port, "-J", "-P"])
        .arg(streams.to_string())
        .arg("-n")
        .arg(bytes.to_string())
        .stdout(Stdio::piped())
        .stderr(Stdio::null());
    let mut client = Peer::spawn(c, "iperf3 -c")?;
    let Some(cout) = client.child.stdout.take() else {
        bail!("iperf3 -c has no stdout");
    };
    let json = std::thread::spawn(move || std::io::read_to_string(cout));
    let ok = client.wait()? & server.wait()?;
    let text = json
        .join()
        .map_err(|_| BenchError::Invalid("reading iperf3's report".into()))?
        .map_err(BenchError::io("reading iperf3's report"))?;
    if !ok {
        bail!("iperf3 -P {streams} failed: {}", text.trim());
    }
    let doc: serde_json::Value = serde_json::from_str(&text)?;
    let (sent, got) = (&doc["end"]["sum_sent"], &doc["end"]["sum_received"]);
    let (Some(sent_bytes), Some(received_bytes), Some(seconds)) = (
        sent["bytes"].as_u64(),
        got["bytes"].as_u64(),
        got["seconds"].as_f64(),
    ) else {
        bail!("iperf3's report has no end.sum_sent or end.sum_received");
    };
    if sent_bytes < bytes || received_bytes == 0 || seconds <= 0.0 {
        bail!("iperf3 -P {streams} sent {sent_bytes} of {bytes} bytes, received {received_bytes}");
    }
    Ok(IperfRun {
        bytes,
        sent_bytes,
        received_bytes,
        seconds,
        mb_per_s: received_bytes as f64 / seconds / 1e6,
    })
}
