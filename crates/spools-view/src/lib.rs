//! Spools live view: frames streamed out of a running job, shown in a browser.
//!
//! A job sends frames with the framebuffer protocol ([`spools_proto::framebuffer`]: a header in
//! front of each frame of a 2-D image or field, one ADU of a stream). The [`Viewer`]
//! receives any number of such streams (each over several links, from any number of
//! connections) and serves a self-contained page that shows them live, side by side, each
//! with its frame number and rate; the streams of a synchronised group are shown in lock
//! step. Frames reach a page over a WebSocket, as raw RGBA or JPEG ([`Encoding`]); a page
//! gets the newest frame once it has drawn the last, so a slow browser skips frames and
//! never holds the job back.
//!
//! ```no_run
//! use spools_view::{ViewOptions, Viewer};
//! let v = Viewer::bind(ViewOptions { frames: "127.0.0.1:7000".into(), ..Default::default() })?;
//! eprintln!("frames to tcp:{}, page at {}", v.frames_addr(), v.url());
//! v.run()?;
//! # Ok::<(), spools_view::ViewError>(())
//! ```

mod board;
mod client;
mod error;
mod http;
mod render;
mod shared;
mod viewer;

pub use error::ViewError;
pub use render::{palette, Encoding};
pub use viewer::{Running, ViewOptions, ViewStats, Viewer};
