//! `spools demo heat`: the README's main job. A 2-D heat-diffusion simulation on a
//! block-distributed grid (halo exchange with the four neighbours), writing a snapshot
//! every k steps to a parallel file; then a second job with another number of ranks and
//! another distribution reads every snapshot back and checks it, bit for bit, against a
//! one-process computation. Both jobs print what they moved and how fast. With
//! `--stream tcp:HOST:PORT`, every snapshot is also sent, as one ADU of a stream, to a
//! destination outside the job (`spools recv`, for example). With `--view`, every step's
//! temperature field is sent as a frame (the framebuffer protocol, through the inferno
//! colour map from 0 to 100) to a viewer this process starts (or to `spools view` at
//! `--stream`), paced at `--fps`, and the page's URL is printed.

use std::net::{SocketAddr, ToSocketAddrs};
use std::path::{Path, PathBuf};
use std::time::Instant;

use anyhow::{bail, Context, Result};
use clap::Args;
use spools::{
    ColorMap, Format, FrameStyle, Layout, ReadOptions, StreamFormat, StreamWriter, Striping, World,
    WriteOptions,
};
use spools_launch::{launch, LaunchSpec};

/// Options of `spools demo heat`.
#[derive(Args, Debug)]
pub(crate) struct HeatArgs {
    /// Grid points per side.
    #[arg(long, default_value_t = 768)]
    n: u64,
    /// Time steps (default 200; 3000 with --view).
    #[arg(long)]
    steps: Option<u64>,
    /// Write a snapshot every this many steps (default 50; 500 with --view).
    #[arg(long)]
    every: Option<u64>,
    /// Ranks of the simulation (a near-square grid of blocks).
    #[arg(long, default_value_t = 4)]
    ranks: u32,
    /// Ranks of the checking job (rows cyclic(8)).
    #[arg(long, default_value_t = 3)]
    readers: u32,
    /// Directory of the snapshot files.
    #[arg(long, default_value = "target/heat")]
    dir: PathBuf,
    /// Also stream every snapshot (the grid, an ADU in the canonical order of the .npy
    /// data) to tcp:HOST:PORT, e.g. a `spools recv`.
    #[arg(long, value_name = "tcp:HOST:PORT")]
    stream: Option<String>,
    /// Links (TCP connections) of the stream, owned by simulation ranks 0..K.
    #[arg(long, default_value_t = 1)]
    links: u16,
    /// Watch it live: every step's temperature is sent as a frame to a viewer started in
    /// this process (or to the `spools view` at --stream), and the page's URL is printed.
    #[arg(long)]
    view: bool,
    /// With --view: steps per second to pace the simulation at (0: as fast as it goes).
    #[arg(long, default_value_t = 30.0)]
    fps: f64,
    /// With --view: where the started viewer serves its page.
    #[arg(long, default_value = "127.0.0.1:8080")]
    http: std::net::SocketAddr,
    /// With --view: keep the started viewer up this many seconds after the demo (default:
    /// until Ctrl-C).
    #[arg(long)]
    view_for: Option<u64>,
    /// Internal: which job this process is part of.
    #[arg(long, hide = true)]
    role: Option<String>,
}

const ALPHA: f64 = 0.2;

impl HeatArgs {
    fn steps(&self) -> u64 {
        self.steps.unwrap_or(if self.view { 3000 } else { 200 })
    }

    fn every(&self) -> u64 {
        self.every.unwrap_or(if self.view { 500 } else { 50 })
    }
}

/// The initial temperature at (i, j): a hot square and a warm stripe, edges at 0.
fn initial(n: u64, i: u64, j: u64) -> f64 {
    if i == 0 || j == 0 || i == n - 1 || j == n - 1 {
        return 0.0;
    }
    let (a, b) = (n / 3, 2 * n / 3);
    if (a..b).contains(&i) && (a..b).contains(&j) {
        100.0
    } else if j % 64 < 4 {
        25.0
    } else {
        0.0
    }
}

/// One explicit step for the interior point with neighbours; the same expression (and so
/// the same rounding) in the distributed and the one-process computation.
#[inline]
fn update(c: f64, up: f64, down: f64, left: f64, right: f64) -> f64 {
    c + ALPHA * (((up + down) + (left + right)) - 4.0 * c)
}

fn snapshot_path(dir: &Path, step: u64) -> PathBuf {
    dir.join(format!("heat-{step:05}.npy"))
}

fn final_path(dir: &Path) -> PathBuf {
    dir.join("heat-final.raid5")
}

/// A near-square grid of `p` blocks.
pub(crate) fn grid(p: u32) -> (u64, u64) {
    let mut a = (f64::from(p).sqrt()) as u32;
    while a > 1 && p % a != 0 {
        a -= 1;
    }
    (u64::from(a.max(1)), u64::from(p / a.max(1)))
}

pub(crate) fn heat(a: &HeatArgs) -> Result<()> {
    if a.n < 3 || a.every() == 0 {
        bail!("--n must be at least 3 and --every at least 1");
    }
    if a.links == 0 || u32::from(a.links) > a.ranks {
        bail!("--links must be 1 to --ranks ({})", a.ranks);
    }
    if let Some(s) = &a.stream {
        stream_dest(s)?;
    }
    match a.role.as_deref() {
        Some("sim") => return simulate(a),
        Some("check") => return check(a),
        Some(r) => bail!("unknown role {r}"),
        None => {}
    }
    std::fs::create_dir_all(&a.dir).with_context(|| format!("creating {}", a.dir.display()))?;
    let viewer = if a.view && a.stream.is_none() {
        Some(crate::view::host(a.http, spools_view::Encoding::Raw)?)
    } else {
        None
    };
    let dest = match &viewer {
        Some(v) => Some(format!("tcp:{}", v.frames_addr())),
        None => a.stream.clone(),
    };
    let exe = std::env::current_exe().context("finding this program")?;
    for (ranks, role) in [(a.ranks, "sim"), (a.readers, "check")] {
        let mut stream = match (&dest, role) {
            (Some(s), "sim") => vec![
                "--stream".to_string(),
                s.clone(),
                "--links".into(),
                a.links.to_string(),
                "--fps".into(),
                a.fps.to_string(),
            ],
            _ => Vec::new(),
        };
        if a.view && role == "sim" {
            stream.push("--view".into());
        }
        let spec = LaunchSpec {
            ranks,
            program: exe.clone().into(),
            args: [
                "demo",
                "heat",
                "--n",
                &a.n.to_string(),
                "--steps",
                &a.steps().to_string(),
                "--every",
                &a.every().to_string(),
                "--ranks",
                &a.ranks.to_string(),
                "--readers",
                &a.readers.to_string(),
                "--dir",
                &a.dir.to_string_lossy(),
                "--role",
                role,
            ]
            .iter()
            .map(|s| (*s).to_string())
            .chain(stream)
            .map(Into::into)
            .collect(),
            tag_output: false,
            timeout: Some(std::time::Duration::from_secs(600)),
            grace: spools_launch::GRACE,
            liveness: None,
            secret: None,
            hosts: None,
            keepalive: crate::run::job_keepalive(),
            bind: spools_launch::cpus::Bind::None,
        };
        let r = launch(&spec)?;
        if r.exit_code != 0 {
            bail!("the {role} job failed (exit status {})", r.exit_code);
        }
    }
    if let Some(v) = &viewer {
        crate::view::linger(v, a.view_for);
    }
    Ok(())
}

/// The address of `tcp:HOST:PORT`.
pub(crate) fn stream_dest(s: &str) -> Result<SocketAddr> {
    let Some(hp) = s.strip_prefix("tcp:") else {
        bail!("--stream {s:?}: expected tcp:HOST:PORT");
    };
    hp.to_socket_addrs()
        .with_context(|| format!("--stream {s}"))?
        .next()
        .with_context(|| format!("--stream {s}: no address"))
}

/// The simulation's frames as a stream: the demo's only use of the stream API.
struct Frames {
    out: StreamWriter,
    layout: Layout,
    /// Frames for a viewer (a header each, every step), or bare snapshots.
    view: Option<FrameStyle>,
    dest: SocketAddr,
    links: u16,
    secs: f64,
}

impl Frames {
    /// Opens the stream on every rank; TUs of 256 KiB per link.
    fn open(
        w: &World,
        dest: SocketAddr,
        layout: &Layout,
        links: u16,
        view: bool,
    ) -> Result<Frames> {
        let tu = u64::from(links) << 18;
        let out = w
            .stream_open(
                dest,
                StreamFormat {
                    links,
                    tu,
                    ..StreamFormat::default()
                },
            )
            .with_context(|| format!("opening a stream to {dest}"))?;
        Ok(Frames {
            out,
            layout: layout.clone(),
            view: view.then(|| FrameStyle {
                title: String::new(),
                colormap: ColorMap::Inferno,
                lo: 0.0,
                hi: 100.0,
            }),
            dest,
            links,
            secs: 0.0,
        })
    }

    /// Sends one frame of step `step`: `block` is this rank's part of the grid.
    fn send(&mut self, block: &[f64], step: u64) -> Result<()> {
        let t = Instant::now();
        match self.view.as_mut() {
            Some(style) => {
                style.title = format!("heat: step {step}");
                self.out
                    .send_frame(style, spools::as_bytes(block), &self.layout)?;
            }
            None => self.out.send_adu(spools::as_bytes(block), &self.layout)?,
        }
        self.secs += t.elapsed().as_secs_f64();
        Ok(())
    }

    /// Ends the stream; the ADUs sent and the seconds spent sending them.
    fn close(self) -> Result<(u64, f64)> {
        let (adus, t) = (self.out.adus(), Instant::now());
        self.out.close()?;
        Ok((adus, self.secs + t.elapsed().as_secs_f64()))
    }
}

fn rate(bytes: u64, secs: f64) -> String {
    if secs <= 0.0 {
        return "-".into();
    }
    format!("{:.0} MB/s", bytes as f64 / secs / 1e6)
}

/// Runs a rank's part; on an error, reports it and exits at once without finalising, so
/// the launcher stops the job instead of the other ranks waiting for this one.
pub(crate) fn rank(body: impl FnOnce(&World) -> Result<()>) -> Result<()> {
    let w = spools::init().context("starting the runtime")?;
    if let Err(e) = body(&w) {
        eprintln!("spools demo: rank {}: {e:#}", w.rank());
        std::process::exit(1);
    }
    w.finalize()?;
    Ok(())
}

fn simulate(a: &HeatArgs) -> Result<()> {
    rank(|w| simulate_rank(w, a))
}

fn check(a: &HeatArgs) -> Result<()> {
    rank(|w| check_rank(w, a))
}

fn simulate_rank(w: &World, a: &HeatArgs) -> Result<()> {
    let (px, py) = grid(w.size());
    let n = a.n;
    let layout: Layout = format!("f64[{n},{n}] block,block on {px}x{py}").parse()?;
    let Layout::Array(arr) = &layout else {
        bail!("not an array layout")
    };
    let me = u64::from(w.rank());
    let shape = arr.local_shape(me)?;
    let c = arr.coords(me)?;
    let (rows, cols) = (shape[0] as usize, shape[1] as usize);
    let (b0, b1) = (n.div_ceil(px), n.div_ceil(py));
    let (i0, j0) = (c[0] * b0, c[1] * b1);
    // Local block with a ghost ring: (rows + 2) x (cols + 2).
    let wd = cols + 2;
    let mut u = vec![0.0f64; (rows + 2) * wd];
    for i in 0..rows {
        for j in 0..cols {
            u[(i + 1) * wd + j + 1] = initial(n, i0 + i as u64, j0 + j as u64);
        }
    }
    let mut next = u.clone();
    let rank_at = |x: u64, y: u64| (x * py + y) as u32;
    let up = (c[0] > 0).then(|| rank_at(c[0] - 1, c[1]));
    let down = (c[0] + 1 < px).then(|| rank_at(c[0] + 1, c[1]));
    let left = (c[1] > 0).then(|| rank_at(c[0], c[1] - 1));
    let right = (c[1] + 1 < py).then(|| rank_at(c[0], c[1] + 1));
    let (mut halo_bytes, mut halo_s, mut file_bytes, mut file_s, mut snaps) =
        (0u64, 0.0f64, 0u64, 0.0f64, 0u64);
    let mut block = vec![0.0f64; rows * cols];
    let dir = a.dir.clone();
    // This rank's block without its ghost ring.
    let inner = |u: &[f64], block: &mut Vec<f64>| {
        for i in 0..rows {
            block[i * cols..(i + 1) * cols]
                .copy_from_slice(&u[(i + 1) * wd + 1..(i + 1) * wd + 1 + cols]);
        }
    };
    let write = |w: &World,
                 u: &[f64],
                 block: &mut Vec<f64>,
                 path: &Path,
                 opts: &WriteOptions|
     -> Result<f64> {
        inner(u, block);
        let t = Instant::now();
        w.write_file(path, block, &layout, opts)?;
        Ok(t.elapsed().as_secs_f64())
    };
    let npy = WriteOptions {
        format: Format::Npy,
        ..Default::default()
    };
    let mut frames = match &a.stream {
        Some(s) => Some(Frames::open(w, stream_dest(s)?, &layout, a.links, a.view)?),
        None => None,
    };
    w.barrier()?;
    let t_all = Instant::now();
    let (steps, every) = (a.steps(), a.every());
    for step in 1..=steps {
        if a.view && a.fps > 0.0 {
            let due = t_all + std::time::Duration::from_secs_f64((step - 1) as f64 / a.fps);
            if let Some(wait) = due.checked_duration_since(Instant::now()) {
                std::thread::sleep(wait);
            }
        }
        // Halo exchange: rows go as they are, columns are packed.
        let t = Instant::now();
        let mut reqs = Vec::new();
        let col = |u: &[f64], j: usize| -> Vec<u8> {
            (1..=rows)
                .flat_map(|i| u[i * wd + j].to_le_bytes())
                .collect()
        };
        let row = |u: &[f64], i: usize| -> Vec<u8> {
            u[i * wd + 1..i * wd + 1 + cols]
                .iter()
                .flat_map(|x| x.to_le_bytes())
                .collect()
        };
        let mut posted = Vec::new();
        for (nb, tag, len) in [
            (up, 1, cols),
            (down, 0, cols),
            (left, 3, rows),
            (right, 2, rows),
        ] {
            if let Some(r) = nb {
                posted.push((tag, w.irecv(vec![0u8; len * 8], r, tag)?));
            }
        }
        for (nb, tag, data) in [
            (up, 0, row(&u, 1)),
            (down, 1, row(&u, rows)),
            (left, 2, col(&u, 1)),
            (right, 3, col(&u, cols)),
        ] {
            if let Some(r) = nb {
                halo_bytes += data.len() as u64;
                reqs.push(w.isend(data, r, tag)?);
            }
        }
        for (tag, r) in posted {
            let got = r.wait()?.buf;
            let vals = got
                .chunks_exact(8)
                .map(|b| f64::from_le_bytes(b.try_into().unwrap_or([0; 8])));
            match tag {
                1 => u[1..=cols].iter_mut().zip(vals).for_each(|(d, v)| *d = v),
                0 => u[(rows + 1) * wd + 1..(rows + 1) * wd + 1 + cols]
                    .iter_mut()
                    .zip(vals)
                    .for_each(|(d, v)| *d = v),
                3 => vals.enumerate().for_each(|(i, v)| u[(i + 1) * wd] = v),
                _ => vals
                    .enumerate()
                    .for_each(|(i, v)| u[(i + 1) * wd + cols + 1] = v),
            }
        }
        spools::wait_all(reqs)?;
        halo_s += t.elapsed().as_secs_f64();
        for i in 1..=rows {
            let gi = i0 + i as u64 - 1;
            for j in 1..=cols {
                let gj = j0 + j as u64 - 1;
                let k = i * wd + j;
                next[k] = if gi == 0 || gj == 0 || gi == n - 1 || gj == n - 1 {
                    0.0
                } else {
                    update(u[k], u[k - wd], u[k + wd], u[k - 1], u[k + 1])
                };
            }
        }
        std::mem::swap(&mut u, &mut next);
        let snapshot = step % every == 0 || step == steps;
        if snapshot {
            file_s += write(w, &u, &mut block, &snapshot_path(&dir, step), &npy)?;
            file_bytes += n * n * 8;
            snaps += 1;
        }
        // The block just written is the frame; a viewer gets every step.
        if let Some(f) = frames.as_mut() {
            if a.view {
                if !snapshot {
                    inner(&u, &mut block);
                }
                f.send(&block, step)?;
            } else if snapshot {
                f.send(&block, step)?;
            }
        }
    }
    // The final state also goes to a RAID-5 file striped over three directories.
    let raid = WriteOptions {
        format: Format::Striped(Striping {
            layout: "raid5(unit=64KiB,count=3)".parse()?,
            dirs: vec!["d0".into(), "d1".into(), "d2".into()],
            node_local: false,
        }),
        sync: true,
        ..Default::default()
    };
    let raid_s = write(w, &u, &mut block, &final_path(&dir), &raid)?;
    let streamed = match frames {
        Some(f) => {
            let (dest, links) = (f.dest, f.links);
            Some((dest, links, f.close()?))
        }
        None => None,
    };
    let total_s = t_all.elapsed().as_secs_f64();
    let mut sums = [0u64; 1];
    w.allreduce(&[halo_bytes], &mut sums, &spools::Op::Sum)?;
    if w.rank() == 0 {
        println!(
            "heat: {n}x{n} f64, {} steps, {} ranks as {px}x{py} blocks, snapshot every {} steps",
            steps,
            w.size(),
            every
        );
        println!(
            "  {:<34} {:>12} {:>9} {:>11}",
            "moved", "bytes", "seconds", "rate"
        );
        println!(
            "  {:<34} {:>12} {:>9.3} {:>11}",
            "halo exchange (all ranks)",
            sums[0],
            halo_s,
            rate(sums[0], halo_s)
        );
        println!(
            "  {:<34} {:>12} {:>9.3} {:>11}",
            format!("{snaps} snapshots to .npy files"),
            file_bytes,
            file_s,
            rate(file_bytes, file_s)
        );
        println!(
            "  {:<34} {:>12} {:>9.3} {:>11}",
            "final state to RAID-5, synced",
            n * n * 8,
            raid_s,
            rate(n * n * 8, raid_s)
        );
        if let Some((dest, links, (adus, secs))) = streamed {
            let bytes = adus * n * n * 8;
            println!(
                "  {:<34} {:>12} {:>9.3} {:>11}",
                format!("{adus} frames streamed ({links} links)"),
                bytes,
                secs,
                rate(bytes, secs)
            );
            println!("  {:<34} {dest}", "  to");
        }
        println!("  {:<34} {:>12} {:>9.3}", "whole run", "", total_s);
    }
    Ok(())
}

/// The whole simulation in one process, keeping the snapshots.
fn reference(n: u64, steps: u64, every: u64) -> Vec<(u64, Vec<f64>)> {
    let nu = n as usize;
    let mut u: Vec<f64> = (0..n * n).map(|k| initial(n, k / n, k % n)).collect();
    let mut next = u.clone();
    let mut out = Vec::new();
    for step in 1..=steps {
        for i in 1..nu - 1 {
            for j in 1..nu - 1 {
                let k = i * nu + j;
                next[k] = update(u[k], u[k - nu], u[k + nu], u[k - 1], u[k + 1]);
            }
        }
        std::mem::swap(&mut u, &mut next);
        if step % every == 0 || step == steps {
            out.push((step, u.clone()));
        }
    }
    out
}

fn check_rank(w: &World, a: &HeatArgs) -> Result<()> {
    let n = a.n;
    let layout: Layout = format!("f64[{n},{n}] cyclic(8),* on {}x1", w.size()).parse()?;
    let me = u64::from(w.rank());
    let mut mine = vec![0.0f64; (layout.local_bytes(me)? / 8) as usize];
    let t = Instant::now();
    let refs = reference(n, a.steps(), a.every());
    let ref_s = t.elapsed().as_secs_f64();
    let (mut bytes, mut secs, mut bad, mut maxdiff) = (0u64, 0.0f64, 0u64, 0.0f64);
    let mut check_one = |path: &Path, want: &[f64], mine: &mut Vec<f64>| -> Result<()> {
        let t = Instant::now();
        w.read_file(path, mine, &layout, &ReadOptions::default())?;
        secs += t.elapsed().as_secs_f64();
        bytes += n * n * 8;
        for x in layout.extents(me)? {
            for k in 0..x.len / 8 {
                let got = mine[(x.local / 8 + k) as usize];
                let exp = want[(x.global / 8 + k) as usize];
                if got.to_bits() != exp.to_bits() {
                    bad += 1;
                    maxdiff = maxdiff.max((got - exp).abs());
                }
            }
        }
        Ok(())
    };
    for (step, want) in &refs {
        check_one(&snapshot_path(&a.dir, *step), want, &mut mine)?;
    }
    if let Some((_, last)) = refs.last() {
        check_one(&final_path(&a.dir), last, &mut mine)?;
    }
    let mut tot = [0u64];
    w.allreduce(&[bad], &mut tot, &spools::Op::Sum)?;
    if w.rank() == 0 {
        println!("check: {} ranks read every file as {layout}", w.size());
        println!(
            "  {:<34} {:>12} {:>9.3} {:>11}",
            format!("{} files read back", refs.len() + 1),
            bytes,
            secs,
            rate(bytes, secs)
        );
        println!(
            "  {:<34} {:>12} {:>9.3}",
            "one-process reference computation", "", ref_s
        );
        if tot[0] == 0 {
            println!("  every value is bit-identical to the one-process computation");
        }
    }
    if tot[0] != 0 {
        bail!(
            "{} values differ from the one-process computation (max |diff| on this rank {maxdiff})",
            tot[0]
        );
    }
    Ok(())
}
