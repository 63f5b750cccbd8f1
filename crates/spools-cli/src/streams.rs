//! `spools recv` and `spools send`: streams to and from a destination outside a job,
//! usable from any program that speaks the stream protocol (`spools_proto::stream`).

use std::fs::File;
use std::io::Write;
use std::path::PathBuf;
use std::time::Instant;

use anyhow::{bail, Context};
use clap::Args;
use spools_proto::auth::Secret;
use spools_proto::stream::{Open, NOT_SEQUENCED, VARIABLE};
use spools_stream::{Admission, Delivery, Event, Limits, Receiver, Sender};

/// `spools recv` arguments.
#[derive(Args, Debug)]
pub(crate) struct RecvArgs {
    /// Where to listen: tcp:HOST:PORT (port 0: any; the address is printed on stderr).
    pub(crate) at: String,
    /// Where the ADUs go: `-` (stdout, appended in order), a directory (one file per ADU,
    /// `s<STREAM>-a<ADU>`), or a file (appended in order).
    #[arg(long)]
    pub(crate) out: String,
    /// Logical connections to serve (at least 1): they are served concurrently, and
    /// `spools recv` ends once this many have ended (links of others still open are then
    /// cut).
    #[arg(long, default_value_t = 1)]
    pub(crate) connections: usize,
    /// Require every sender to prove it knows the job secret in FILE (as `spools secret`
    /// prints it): the others are refused.
    #[arg(long, value_name = "FILE")]
    pub(crate) secret: Option<PathBuf>,
    #[command(flatten)]
    pub(crate) admission: AdmissionArgs,
}

/// How many links a receiver (`spools recv`, `spools view`) holds at once, and how long a
/// link has to say its hello.
#[derive(Args, Debug)]
pub(crate) struct AdmissionArgs {
    /// Seconds a link has, from its accept, to say its hello (and prove the secret, with
    /// --secret); a link still silent then is closed.
    #[arg(long, value_name = "SECS", default_value_t = spools_stream::HELLO_TIMEOUT.as_secs())]
    pub(crate) hello_timeout: u64,
    /// Links held at once that have not said their hello yet; one more closes the oldest.
    #[arg(long, value_name = "N", default_value_t = spools_stream::MAX_PENDING)]
    pub(crate) max_pending: usize,
    /// Links held at once, silent or served (at most the open-file limit less a reserve);
    /// past it a new link is refused.
    #[arg(long, value_name = "N", default_value_t = spools_stream::MAX_OPEN_LINKS)]
    pub(crate) max_links: usize,
}

impl AdmissionArgs {
    /// The receiver's bounds these flags give.
    pub(crate) fn admission(&self) -> anyhow::Result<Admission> {
        if self.hello_timeout == 0 {
            bail!("--hello-timeout: at least 1 second");
        }
        if self.max_pending == 0 || self.max_links == 0 {
            bail!("--max-pending and --max-links: at least 1");
        }
        Ok(Admission {
            max_pending: self.max_pending,
            max_links: self.max_links,
            hello_timeout: std::time::Duration::from_secs(self.hello_timeout),
        })
    }
}

/// `spools send` arguments.
#[derive(Args, Debug)]
pub(crate) struct SendArgs {
    /// Files to send (each one ADU of a stream of its own, in order), then tcp:HOST:PORT.
    #[arg(required = true, num_args = 2..)]
    pub(crate) args: Vec<String>,
    /// TCP links (connections) to stripe over.
    #[arg(long, default_value_t = 1)]
    pub(crate) links: u16,
    /// Transfer Unit: bytes sent as one unit over the links (a size: 96KiB, 1MiB, ...).
    #[arg(long, default_value = "1MiB")]
    pub(crate) tu: String,
    /// Cut each file into ADUs of this size (the last one shorter), each sent as one TU;
    /// without it, each file is one ADU cut into TUs of `--tu`.
    #[arg(long)]
    pub(crate) adu: Option<String>,
    /// ADUs of a stream in flight beyond those the receiver acknowledged (0: no bound;
    /// with `--adu`).
    #[arg(long, default_value_t = 0)]
    pub(crate) window: u32,
    /// The job secret in FILE (as `spools secret` prints it), proved to a receiver that
    /// requires it.
    #[arg(long, value_name = "FILE")]
    pub(crate) secret: Option<PathBuf>,
    /// Seconds a link waits on a receiver that takes nothing (no byte written, no ack
    /// while the window is full, not its end at the finish) before the send fails; 0: no
    /// bound.
    #[arg(long, value_name = "SECS", default_value_t = spools_stream::STALL_TIMEOUT.as_secs())]
    pub(crate) stall_timeout: u64,
}

/// The secret in `path`: hexadecimal, as `spools secret` prints it.
pub(crate) fn read_secret(path: &std::path::Path) -> anyhow::Result<Secret> {
    let text =
        std::fs::read_to_string(path).with_context(|| format!("--secret {}", path.display()))?;
    Secret::from_hex(text.trim()).with_context(|| format!("--secret {}", path.display()))
}

pub(crate) fn tcp_addr(s: &str) -> anyhow::Result<String> {
    match s.strip_prefix("tcp:") {
        Some(a) if !a.is_empty() => Ok(a.to_string()),
        _ => bail!("{s:?}: expected tcp:HOST:PORT"),
    }
}

enum Out {
    Stdout(std::io::Stdout),
    File(File),
    Dir(PathBuf),
}

pub(crate) fn recv(a: &RecvArgs) -> anyhow::Result<()> {
    let addr = tcp_addr(&a.at)?;
    if a.connections == 0 {
        bail!("--connections: at least 1");
    }
    let mut out = if a.out == "-" {
        Out::Stdout(std::io::stdout())
    } else if std::path::Path::new(&a.out).is_dir() || a.out.ends_with('/') {
        std::fs::create_dir_all(&a.out).with_context(|| a.out.clone())?;
        Out::Dir(PathBuf::from(&a.out))
    } else {
        Out::File(File::create(&a.out).with_context(|| a.out.clone())?)
    };
    let admission = a.admission.admission()?;
    let mut r = Receiver::bind(addr.as_str(), Limits::default())
        .with_context(|| addr.clone())?
        .admission(admission);
    if let Some(path) = &a.secret {
        r = r.require_proof(read_secret(path)?);
    }
    eprintln!("spools recv: listening on {}", r.local_addr()?);
    let bin = r.recycler();
    let mut lost = Vec::new();
    let summary = r.serve(a.connections, |d: Delivery| {
        match d.event {
            Event::Adu { stream, adu, data } => {
                match &mut out {
                    Out::Stdout(s) => s.lock().write_all(&data)?,
                    Out::File(f) => f.write_all(&data)?,
                    Out::Dir(dir) => {
                        std::fs::write(dir.join(format!("s{stream}-a{adu}")), &data)?;
                    }
                }
                bin.give(data);
            }
            Event::Incomplete { stream, adu, have, size } => lost.push(format!(
                "connection {:016x}, stream {stream}: ADU {adu} incomplete ({have} of {size} bytes); not written",
                d.conn
            )),
            Event::Missing { stream, from, to } => lost.push(format!(
                "connection {:016x}, stream {stream}: ADUs {from}..{to} never arrived",
                d.conn
            )),
            Event::Ended { stream, adus, complete: false } => lost.push(format!(
                "connection {:016x}, stream {stream} ended before it was complete ({adus} ADUs)",
                d.conn
            )),
            Event::Ended { .. } => {}
        }
        Ok(())
    })?;
    if let Out::File(f) = &out {
        // Durable once reported (a device such as /dev/null has nothing to sync).
        if f.metadata()?.is_file() {
            f.sync_all()?;
        }
    }
    // From the first hello.
    let secs = summary.started.map_or(0.0, |t| t.elapsed().as_secs_f64());
    eprintln!(
        "spools recv: {} ADUs, {} bytes in {secs:.3} s ({:.1} MB/s) from {} connection(s)",
        summary.adus,
        summary.bytes,
        summary.bytes as f64 / secs.max(1e-9) / 1e6,
        summary.connections
    );
    for r in &summary.refused {
        eprintln!("spools recv: refused a client: {r}");
    }
    if summary.refused_more > 0 {
        eprintln!(
            "spools recv: refused {} more client(s)",
            summary.refused_more
        );
    }
    for r in summary.broken.iter().chain(&lost) {
        eprintln!("spools recv: {r}");
    }
    if summary.broken_more > 0 {
        eprintln!(
            "spools recv: {} more connection(s) or link(s) dropped",
            summary.broken_more
        );
    }
    if !summary.broken.is_empty() || !lost.is_empty() {
        bail!("some data did not arrive whole (see above)");
    }
    Ok(())
}

pub(crate) fn send(a: &SendArgs) -> anyhow::Result<()> {
    let (dest, files) = a.args.split_last().context("FILE... tcp:HOST:PORT")?;
    let addr = tcp_addr(dest)?;
    let size = |what, s: &str| {
        spools_boot::config::parse_size(s).map_err(|r| anyhow::anyhow!("{what}: {r}"))
    };
    let tu = size("--tu", &a.tu)?;
    let adu = a.adu.as_deref().map(|s| size("--adu", s)).transpose()?;
    if adu == Some(0) {
        bail!("--adu: an ADU of at least 1 byte");
    }
    let sock = std::net::ToSocketAddrs::to_socket_addrs(addr.as_str())
        .with_context(|| addr.clone())?
        .next()
        .with_context(|| format!("{addr}: no address"))?;
    let secret = a.secret.as_deref().map(read_secret).transpose()?;
    // The first file is read before connecting: the time reported is the transfer's.
    let read = |f: &String| std::fs::read(f).with_context(|| f.clone());
    let mut first = files.first().map(read).transpose()?;
    let start = Instant::now();
    let s = match &secret {
        Some(secret) => Sender::connect_proving(sock, a.links, secret)?,
        None => Sender::connect(sock, a.links)?,
    };
    let stall = (a.stall_timeout > 0).then(|| std::time::Duration::from_secs(a.stall_timeout));
    let mut s = s.with_window(a.window).with_stall_timeout(stall);
    let mut bytes = 0u64;
    for (i, f) in files.iter().enumerate() {
        let data = match first.take() {
            Some(d) => d,
            None => read(f)?,
        };
        let stream = i as u32 + 1;
        let after = if i == 0 { NOT_SEQUENCED } else { stream - 1 };
        let mut open = Open {
            stream,
            group: 0,
            after,
            flags: 0,
            tu,
            adu: data.len() as u64,
        };
        // With --adu: ADUs of varying size (the last one), each its own TU.
        let adus: Vec<&[u8]> = match adu {
            None => vec![&data],
            Some(n) => {
                open.adu = VARIABLE;
                if data.is_empty() {
                    vec![&data]
                } else {
                    data.chunks(usize::try_from(n).unwrap_or(usize::MAX))
                        .collect()
                }
            }
        };
        s.open(open)?;
        for (n, d) in adus.iter().enumerate() {
            s.send_adu(stream, n as u64, d)?;
        }
        s.close(stream, adus.len() as u64)?;
        bytes += data.len() as u64;
    }
    s.finish()?;
    let secs = start.elapsed().as_secs_f64();
    eprintln!(
        "spools send: {} file(s), {bytes} bytes over {} link(s) in {secs:.3} s ({:.1} MB/s)",
        files.len(),
        a.links,
        bytes as f64 / secs.max(1e-9) / 1e6
    );
    Ok(())
}
