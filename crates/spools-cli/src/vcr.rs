//! `spools demo vcr`: the iWarp paper's "digital VCR" — several cameras' moving images sent
//! from a job as synchronised frame streams (one lock-step group), shown side by side by
//! `spools view`. Cameras 0.. are RGB images (a gradient, a moving bar, and the frame
//! number in the top-left 32x32 block: red = n mod 256, green = n / 256 mod 256, blue =
//! 60 x camera), laid out in bands of rows (`block,*,*`), in blocks (`block,block,*`) and
//! in cyclic rows (`cyclic(4),*,*`), camera by camera (`--layout rows`: all in bands); the
//! last camera is an f32 field (the same picture in values from 0 to 1, the block holding
//! (n mod 256) / 255) laid out cyclic(8),block and shown through the viridis colour map.

use std::net::SocketAddr;
use std::time::{Duration, Instant};

use anyhow::{bail, Context, Result};
use clap::Args;
use spools::{ColorMap, FrameStyle, Layout, StreamOptions, World};
use spools_launch::{launch, LaunchSpec};

/// Options of `spools demo vcr`.
#[derive(Args, Debug)]
pub(crate) struct VcrArgs {
    /// Ranks of the job.
    #[arg(long, default_value_t = 8)]
    ranks: u32,
    /// Cameras: synchronised streams (the last one a scalar field).
    #[arg(long, default_value_t = 4)]
    cameras: u32,
    /// Frames per camera.
    #[arg(long, default_value_t = 600)]
    frames: u64,
    /// Frames per second to pace the cameras at (0: as fast as they go).
    #[arg(long, default_value_t = 30.0)]
    fps: f64,
    /// Frame size, WIDTHxHEIGHT.
    #[arg(long, default_value = "640x360")]
    size: String,
    /// Links (TCP connections) of the stream connection.
    #[arg(long, default_value_t = 4)]
    links: u16,
    /// Send the frames to a viewer at tcp:HOST:PORT (`spools view`).
    #[arg(long, value_name = "tcp:HOST:PORT")]
    stream: Option<String>,
    /// Start a viewer in this process and send the frames to it (prints the page's URL).
    #[arg(long, conflicts_with = "stream")]
    view: bool,
    /// Where the started viewer serves its page.
    #[arg(long, default_value = "127.0.0.1:8080", requires = "view")]
    http: SocketAddr,
    /// Keep the started viewer up this many seconds after the job (default: until Ctrl-C).
    #[arg(long, requires = "view")]
    view_for: Option<u64>,
    /// Every camera RGB (no field camera).
    #[arg(long)]
    rgb_only: bool,
    /// How the RGB cameras' frames are laid out over the ranks: `mixed` (bands of rows,
    /// blocks and cyclic rows, camera by camera) or `rows` (all in bands of rows).
    #[arg(long, default_value = "mixed")]
    layout: String,
    /// Make the frames but send none (the job's time without a viewer).
    #[arg(long, conflicts_with_all = ["stream", "view"])]
    no_stream: bool,
    /// Internal: this process is a rank of the job.
    #[arg(long, hide = true)]
    rank: bool,
}

/// The frame size of `--size`.
fn size(s: &str) -> Result<(u64, u64)> {
    let (w, h) = s.split_once('x').context("--size: WIDTHxHEIGHT")?;
    let (w, h): (u64, u64) = (w.parse()?, h.parse()?);
    if !(32..=8192).contains(&w) || !(32..=8192).contains(&h) {
        bail!("--size {s}: 32 to 8192 pixels a side");
    }
    Ok((w, h))
}

pub(crate) fn vcr(a: &VcrArgs) -> Result<()> {
    let (w, h) = size(&a.size)?;
    if a.cameras == 0 || a.cameras > 16 || a.links == 0 {
        bail!("--cameras 1 to 16, --links at least 1");
    }
    if a.layout != "mixed" && a.layout != "rows" {
        bail!("--layout {:?}: mixed or rows", a.layout);
    }
    if a.rank {
        return crate::demo::rank(|world| cam_rank(world, a, w, h));
    }
    let viewer = if a.view {
        Some(crate::view::host(a.http, spools_view::Encoding::Raw)?)
    } else {
        None
    };
    let dest = match (&viewer, &a.stream) {
        (Some(v), _) => Some(format!("tcp:{}", v.frames_addr())),
        (None, Some(s)) => Some(s.clone()),
        (None, None) if a.no_stream => None,
        (None, None) => bail!("--view, --stream tcp:HOST:PORT or --no-stream"),
    };
    let exe = std::env::current_exe().context("finding this program")?;
    let mut args: Vec<String> = vec![
        "demo".into(),
        "vcr".into(),
        "--rank".into(),
        "--cameras".into(),
        a.cameras.to_string(),
        "--frames".into(),
        a.frames.to_string(),
        "--fps".into(),
        a.fps.to_string(),
        "--size".into(),
        a.size.clone(),
        "--links".into(),
        a.links.to_string(),
        "--ranks".into(),
        a.ranks.to_string(),
    ];
    if a.rgb_only {
        args.push("--rgb-only".into());
    }
    args.extend(["--layout".into(), a.layout.clone()]);
    match dest {
        Some(d) => args.extend(["--stream".into(), d]),
        None => args.push("--no-stream".into()),
    }
    let r = launch(&LaunchSpec {
        ranks: a.ranks,
        program: exe.into(),
        args: args.into_iter().map(Into::into).collect(),
        tag_output: false,
        timeout: None,
        grace: spools_launch::GRACE,
        liveness: None,
        secret: None,
        hosts: None,
        keepalive: crate::run::job_keepalive(),
        bind: spools_launch::cpus::Bind::None,
    })?;
    if r.exit_code != 0 {
        bail!("the camera job failed (exit status {})", r.exit_code);
    }
    if let Some(v) = &viewer {
        crate::view::linger(v, a.view_for);
    }
    Ok(())
}

/// Whether pixel column `x` of camera `c` of `cams`, frame `n`, is on the moving bar.
fn on_bar(c: u64, cams: u64, n: u64, x: u64, w: u64) -> bool {
    let bar = (n * 4 + c * w / cams) % w;
    (x + w - bar) % w < (w / 32).max(2)
}

/// The RGB of camera `c` of `cams`, frame `n`, at pixel (x, y) of a `w` x `h` frame.
fn pixel(c: u64, cams: u64, n: u64, x: u64, y: u64, w: u64, h: u64) -> [u8; 3] {
    if x < 32 && y < 32 {
        return [
            (n % 256) as u8,
            ((n / 256) % 256) as u8,
            (60 * c % 256) as u8,
        ];
    }
    if on_bar(c, cams, n, x, w) {
        return [255, 255, 255];
    }
    [
        (x * 255 / (w - 1)) as u8,
        (y * 255 / (h - 1)) as u8,
        ((128 + 40 * c) % 256) as u8,
    ]
}

/// The field camera's (the last) value at a pixel: the frame number's block, the bar at 1,
/// a gradient from 0 to 0.9 across.
fn value(cams: u64, n: u64, x: u64, y: u64, w: u64) -> f32 {
    if x < 32 && y < 32 {
        (n % 256) as f32 / 255.0
    } else if on_bar(cams - 1, cams, n, x, w) {
        1.0
    } else {
        x as f32 / (w - 1) as f32 * 0.9
    }
}

/// The columns the bar of camera `c` covers in frame `n`: one span, or two where it wraps;
/// `false`: on every row.
fn bar_spans(c: u64, cams: u64, n: u64, w: u64) -> Vec<(u64, u64, bool)> {
    let (b, len) = ((n * 4 + c * w / cams) % w, (w / 32).max(2));
    if b + len <= w {
        vec![(b, b + len, false)]
    } else {
        vec![(b, w, false), (0, b + len - w, false)]
    }
}

/// A pixel of an RGB camera or of the field camera.
enum Px {
    Rgb([u8; 3]),
    Field(f32),
}

/// Draws the pixels of `dirty` column spans (`(from, to, only the first 32 rows)`) of this
/// rank's share of a frame of `layout` (`w` pixels wide) into `buf`, each from `at(col, row)`.
fn draw(
    buf: &mut [u8],
    layout: &Layout,
    me: u64,
    w: u64,
    dirty: &[(u64, u64, bool)],
    at: impl Fn(u64, u64) -> Px,
) -> Result<()> {
    let Layout::Array(a) = layout else {
        bail!("a frame is an array")
    };
    let bpp = a.dtype().size() * if a.shape().len() == 3 { 3 } else { 1 };
    for x in layout.extents(me)? {
        if x.global % bpp != 0 || x.len % bpp != 0 {
            bail!("an extent that splits a pixel");
        }
        let (g0, g1) = (x.global / bpp, (x.global + x.len) / bpp);
        for row in g0 / w..g1.div_ceil(w) {
            let (a, b) = (g0.max(row * w) - row * w, g1.min((row + 1) * w) - row * w);
            for &(d0, d1, corner) in dirty {
                if corner && row >= 32 {
                    continue;
                }
                for col in d0.max(a)..d1.min(b) {
                    let off = (x.local + (row * w + col - g0) * bpp) as usize;
                    match at(col, row) {
                        Px::Rgb(p) => buf[off..off + 3].copy_from_slice(&p),
                        Px::Field(v) => buf[off..off + 4].copy_from_slice(&v.to_le_bytes()),
                    }
                }
            }
        }
    }
    Ok(())
}

fn cam_rank(world: &World, a: &VcrArgs, w: u64, h: u64) -> Result<()> {
    let cams = u64::from(a.cameras);
    let (p0, p1) = crate::demo::grid(world.size());
    let p = world.size();
    let rgb: [Layout; 3] = [
        format!("u8[{h},{w},3] block,*,* on {p}x1x1").parse()?,
        format!("u8[{h},{w},3] block,block,* on {p0}x{p1}x1").parse()?,
        format!("u8[{h},{w},3] cyclic(4),*,* on {p}x1x1").parse()?,
    ];
    let rows = a.layout == "rows";
    let field: Layout = format!("f32[{h},{w}] cyclic(8),block on {p0}x{p1}").parse()?;
    let me = u64::from(world.rank());
    let is_field = |c: u64| !a.rgb_only && c + 1 == cams;
    let layout_of = |c: u64| {
        if is_field(c) {
            &field
        } else if rows {
            &rgb[0]
        } else {
            &rgb[(c % 3) as usize]
        }
    };
    let mut bufs: Vec<Vec<u8>> = (0..cams)
        .map(|c| Ok(vec![0u8; layout_of(c).local_bytes(me)? as usize]))
        .collect::<Result<_>>()?;
    let styles: Vec<FrameStyle> = (0..cams)
        .map(|c| FrameStyle {
            title: format!("camera {c}"),
            colormap: ColorMap::Viridis,
            lo: 0.0,
            hi: 1.0,
        })
        .collect();
    let dest: Option<SocketAddr> = match &a.stream {
        Some(s) => Some(crate::demo::stream_dest(s)?),
        None => None,
    };
    let mut conn = match dest {
        Some(d) => Some(
            world
                .stream_connect(d, a.links)
                .with_context(|| format!("connecting to {d}"))?,
        ),
        None => None,
    };
    let tu = u64::from(a.links) << 18;
    let ids = match conn.as_mut() {
        Some(c) => (0..cams)
            .map(|_| {
                c.open_stream(StreamOptions {
                    tu,
                    group: 1,
                    ..Default::default()
                })
            })
            .collect::<Result<Vec<_>, _>>()?,
        None => Vec::new(),
    };
    world.barrier()?;
    let t0 = Instant::now();
    let (mut make_s, mut send_s) = (0.0f64, 0.0f64);
    for n in 0..a.frames {
        if a.fps > 0.0 {
            let due = t0 + Duration::from_secs_f64(n as f64 / a.fps);
            if let Some(wait) = due.checked_duration_since(Instant::now()) {
                std::thread::sleep(wait);
            }
        }
        let t = Instant::now();
        for (c, buf) in bufs.iter_mut().enumerate() {
            let c = c as u64;
            // Only what changed since the last frame is drawn again: the corner block,
            // and the columns of the bar's old and new places (everything at frame 0).
            let dirty: Vec<(u64, u64, bool)> = if n == 0 {
                vec![(0, w, false)]
            } else {
                let mut d = bar_spans(c, cams, n - 1, w);
                d.extend(bar_spans(c, cams, n, w));
                d.push((0, 32, true));
                d
            };
            draw(buf, layout_of(c), me, w, &dirty, |col, row| {
                if is_field(c) {
                    Px::Field(value(cams, n, col, row, w))
                } else {
                    Px::Rgb(pixel(c, cams, n, col, row, w, h))
                }
            })?;
        }
        make_s += t.elapsed().as_secs_f64();
        if let Some(conn) = conn.as_mut() {
            let t = Instant::now();
            let items: Vec<_> = ids
                .iter()
                .zip(&styles)
                .zip(&bufs)
                .enumerate()
                .map(|(c, ((&id, s), b))| (id, s, &b[..], layout_of(c as u64)))
                .collect();
            conn.send_frames(1, &items)?;
            send_s += t.elapsed().as_secs_f64();
        }
    }
    if let Some(c) = conn {
        c.close()?;
    }
    let secs = t0.elapsed().as_secs_f64();
    if world.rank() == 0 {
        println!(
            "vcr: {} cameras x {} frames of {w}x{h} from {} ranks in {secs:.3} s ({:.1} frames/s per camera; making {make_s:.3} s, sending {send_s:.3} s on rank 0)",
            cams,
            a.frames,
            world.size(),
            a.frames as f64 / secs.max(1e-9)
        );
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_frame_number_is_in_the_corner() {
        assert_eq!(pixel(2, 4, 300, 5, 5, 640, 360), [44, 1, 120]);
        assert_eq!(value(4, 51, 0, 31, 640), 0.2);
        assert_eq!(value(4, 0, 480, 100, 640), 1.0);
        assert!(value(4, 0, 600, 100, 640) < 0.9);
    }
}
