//! How frames are shown (the framebuffer protocol's style: title, colour map, range):
//! `spools_frame_style_t`, read into `spools_io::stream::FrameStyle`. The frames' header
//! is built by `spools_io` from the layout and this style; the sends are in `stream.rs`
//! (a single stream) and `stream_conn.rs` (a connection of several streams).

use std::ffi::c_char;

use spools::{ColorMap, FrameStyle};

use crate::args::string;
use crate::status::Failure;

/// `spools_frame_style_t.colormap`: no map (grey and RGB images; a field without a map
/// is refused).
pub const SPOOLS_COLORMAP_NONE: i32 = 0;
/// `spools_frame_style_t.colormap`: black to white.
pub const SPOOLS_COLORMAP_GREY: i32 = 1;
/// `spools_frame_style_t.colormap`: black through purple, red and orange to pale yellow
/// (after matplotlib's inferno; the default).
pub const SPOOLS_COLORMAP_INFERNO: i32 = 2;
/// `spools_frame_style_t.colormap`: dark blue through teal to yellow (after matplotlib's
/// viridis).
pub const SPOOLS_COLORMAP_VIRIDIS: i32 = 3;

/// `spools_frame_style_t.field_mask` bit: `title` is set.
pub const SPOOLS_FRAME_FIELD_TITLE: u64 = 1;
/// `spools_frame_style_t.field_mask` bit: `colormap` is set.
pub const SPOOLS_FRAME_FIELD_COLORMAP: u64 = 2;
/// `spools_frame_style_t.field_mask` bit: `lo` is set.
pub const SPOOLS_FRAME_FIELD_LO: u64 = 4;
/// `spools_frame_style_t.field_mask` bit: `hi` is set.
pub const SPOOLS_FRAME_FIELD_HI: u64 = 8;

/// How a stream's frames are shown (`spools view`): only the fields whose bit is set in
/// `field_mask` are read; the others keep their defaults (no title; a field through
/// `SPOOLS_COLORMAP_INFERNO` from 0 to 1). Images (`u8[H,W]` grey, `u8[H,W,3]` RGB)
/// ignore the colour map and the range.
#[repr(C)]
#[derive(Debug, Clone, Copy)]
pub struct spools_frame_style_t {
    /// Which fields are set (`SPOOLS_FRAME_FIELD_*` bits).
    pub field_mask: u64,
    /// Shown above the frame: a NUL-terminated UTF-8 string (at most 64 bytes are sent),
    /// or NULL for none.
    pub title: *const c_char,
    /// The colour map of a field (`f32[H,W]`, `f64[H,W]`): `SPOOLS_COLORMAP_*`.
    pub colormap: i32,
    /// The field's value shown as the map's first colour.
    pub lo: f64,
    /// The field's value shown as the map's last colour (more than `lo`).
    pub hi: f64,
}

/// The style `p` gives (NULL: the defaults).
///
/// # Safety
/// `p` is NULL or points to a valid `spools_frame_style_t` whose `title` (when its bit
/// is set) is NULL or a NUL-terminated string.
pub(crate) unsafe fn style_of(p: *const spools_frame_style_t) -> Result<FrameStyle, Failure> {
    let mut style = FrameStyle::default();
    if p.is_null() {
        return Ok(style);
    }
    // SAFETY: non-NULL and valid (the caller's contract).
    let p = unsafe { &*p };
    let has = |bit: u64| p.field_mask & bit != 0;
    if has(SPOOLS_FRAME_FIELD_TITLE) && !p.title.is_null() {
        // SAFETY: a NUL-terminated string (the caller's contract).
        style.title = unsafe { string(p.title, "style->title") }?.to_owned();
    }
    if has(SPOOLS_FRAME_FIELD_COLORMAP) {
        style.colormap = match p.colormap {
            SPOOLS_COLORMAP_NONE => ColorMap::None,
            SPOOLS_COLORMAP_GREY => ColorMap::Grey,
            SPOOLS_COLORMAP_INFERNO => ColorMap::Inferno,
            SPOOLS_COLORMAP_VIRIDIS => ColorMap::Viridis,
            other => {
                return Err(Failure::arg(format!(
                    "style->colormap is {other}, not a SPOOLS_COLORMAP_* value (0 to 3)"
                )))
            }
        };
    }
    if has(SPOOLS_FRAME_FIELD_LO) {
        style.lo = p.lo;
    }
    if has(SPOOLS_FRAME_FIELD_HI) {
        style.hi = p.hi;
    }
    Ok(style)
}
