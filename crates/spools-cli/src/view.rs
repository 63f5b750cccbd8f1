//! `spools view`: receives frame streams (the framebuffer protocol) and shows them live in
//! a browser (`spools_view`).

use std::net::SocketAddr;
use std::path::PathBuf;

use anyhow::{bail, Context};
use clap::Args;
use spools_view::{Encoding, ViewOptions, Viewer};

use crate::streams::{read_secret, tcp_addr, AdmissionArgs};

/// `spools view` arguments.
#[derive(Args, Debug)]
pub(crate) struct ViewArgs {
    /// Where frame streams arrive: tcp:HOST:PORT (port 0: any; the address is printed).
    pub(crate) at: String,
    /// Where the page is served, HOST:PORT (port 0: any).
    #[arg(long, default_value = "127.0.0.1:8080")]
    pub(crate) http: SocketAddr,
    /// Serve the page on an interface other than loopback; its URL then carries a token.
    #[arg(long)]
    pub(crate) allow_remote: bool,
    /// How frames travel to the page: raw (exact RGBA pixels; the faster into a page on
    /// this machine) or jpeg (about a tenth of the bytes, for a page across a network).
    #[arg(long, default_value = "raw")]
    pub(crate) encoding: String,
    /// Require every stream's links to prove the job secret in FILE.
    #[arg(long, value_name = "FILE")]
    pub(crate) secret: Option<PathBuf>,
    #[command(flatten)]
    pub(crate) admission: AdmissionArgs,
}

/// The encoding named `s`.
pub(crate) fn encoding(s: &str) -> anyhow::Result<Encoding> {
    match s {
        "jpeg" => Ok(Encoding::Jpeg(85)),
        "raw" => Ok(Encoding::Raw),
        _ => bail!("--encoding {s:?}: jpeg or raw"),
    }
}

pub(crate) fn run(a: &ViewArgs) -> anyhow::Result<()> {
    let frames = tcp_addr(&a.at)?;
    let secret = a.secret.as_deref().map(read_secret).transpose()?;
    let v = Viewer::bind(ViewOptions {
        frames,
        http: a.http,
        allow_remote: a.allow_remote,
        encoding: encoding(&a.encoding)?,
        secret,
        admission: a.admission.admission()?,
        ..ViewOptions::default()
    })
    .context("spools view")?;
    eprintln!("spools view: frames to tcp:{}", v.frames_addr());
    eprintln!("spools view: open {}", v.url());
    v.run().context("spools view")
}

/// Starts a viewer in this process for a demo's frames: frames on a free loopback port,
/// the page at `http` (or, when that port is taken, at any free one). Prints the URL.
pub(crate) fn host(http: SocketAddr, encoding: Encoding) -> anyhow::Result<spools_view::Running> {
    let bind = |http| {
        Viewer::bind(ViewOptions {
            http,
            encoding,
            ..ViewOptions::default()
        })
    };
    let v = match bind(http) {
        Err(spools_view::ViewError::BindHttp { .. }) if http.port() != 0 => {
            bind(SocketAddr::new(http.ip(), 0)).context("starting the viewer")?
        }
        other => other.context("starting the viewer")?,
    };
    let running = v.start().context("starting the viewer")?;
    eprintln!("spools view: watch it at {}", running.url());
    Ok(running)
}

/// Keeps a demo's viewer up once the demo is done: `secs` seconds, or until interrupted.
pub(crate) fn linger(running: &spools_view::Running, secs: Option<u64>) {
    let s = running.stats();
    match secs {
        Some(0) => {}
        Some(n) => {
            eprintln!(
                "spools view: {} frames received; the page stays up {n} s more",
                s.received
            );
            std::thread::sleep(std::time::Duration::from_secs(n));
        }
        None => {
            eprintln!(
                "spools view: {} frames received; the page stays up at {} (Ctrl-C to stop)",
                s.received,
                running.url()
            );
            loop {
                std::thread::park();
            }
        }
    }
}
