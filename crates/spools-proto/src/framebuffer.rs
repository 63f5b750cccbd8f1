//! The framebuffer protocol (sans-IO): one frame of a 2-D image or scalar field as one ADU
//! of a stream ([`crate::stream`]), after the iWarp paper's framebuffer protocol. The ADU
//! is a fixed header of [`HEADER_LEN`] bytes followed by the pixels in row-major order
//! (the canonical byte stream of a `[height, width]` or `[height, width, 3]` array).
//! Integers and floats are little-endian:
//!
//! ```text
//! frame := "SPFB" version:u16 format:u8 colormap:u8 width:u32 height:u32
//!          frame:u64 time_us:u64 group:u32 members:u16 title_len:u16
//!          lo:f64 hi:f64 reserved:u64 title[64]                     (128 bytes)
//!          pixels[width * height * bytes_per_pixel(format)]
//! ```
//!
//! - `format`: [`PixelFormat`] (1 grey u8, 2 RGB u8, 3 f32 field, 4 f64 field).
//! - `version`: [`FRAME_VERSION`] (1); a decoder refuses any other.
//! - `colormap`: [`ColorMap`]; 0 for grey and RGB frames, 1 to 3 for a field, whose value
//!   `v` is shown as the colour at about `(v - lo) / (hi - lo)` of the map, clamped to
//!   `[0, 1]` (NaN as 0): a viewer quantises it to one of 256 palette entries
//!   (`spools_view::palette`; the exact rule and the stops are in docs/view.md, whose test
//!   vectors `tests/framebuffer_doc.rs` checks). `lo < hi`, both finite, for a field; 0 otherwise.
//! - `reserved`: written 0, not read. Bytes of `title` past `title_len`: written 0, not read.
//! - `frame`: the frame's number; `time_us`: when it was made, microseconds since the Unix
//!   epoch, by the sender's clock.
//! - `group`, `members`: a synchronisation group (0: none) and how many streams it has.
//!   A viewer shows frame n of every member together, never frames of different numbers.
//! - `title`: `title_len` (at most 64) bytes of UTF-8, zero-padded to 64.
//!
//! ```
//! use spools_proto::framebuffer::{ColorMap, FrameHeader, PixelFormat};
//! let h = FrameHeader::field(PixelFormat::F32, 4, 2, ColorMap::Inferno, 0.0, 100.0)
//!     .with_title("heat");
//! let mut adu = h.encode().to_vec();
//! adu.extend_from_slice(&[0u8; 4 * 2 * 4]);
//! let (back, pixels) = FrameHeader::decode(&adu)?;
//! assert_eq!((back, pixels.len()), (h, 32));
//! # Ok::<(), spools_proto::WireError>(())
//! ```

use crate::codec::Reader;
use crate::WireError;

/// Bytes of a frame header.
pub const HEADER_LEN: usize = 128;
/// The framebuffer protocol version this build speaks.
pub const FRAME_VERSION: u16 = 1;
/// The longest title, in bytes of UTF-8.
pub const MAX_TITLE: usize = 64;
/// The largest width or height.
pub const MAX_SIDE: u32 = 1 << 16;
const MAGIC: &[u8; 4] = b"SPFB";

/// How a frame's pixels are stored.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum PixelFormat {
    /// One byte per pixel, 0 black to 255 white.
    Grey8,
    /// Three bytes per pixel: red, green, blue.
    Rgb8,
    /// A scalar field of `f32`, shown through a colour map.
    F32,
    /// A scalar field of `f64`, shown through a colour map.
    F64,
}

impl PixelFormat {
    /// Bytes of one pixel.
    pub fn bytes_per_pixel(self) -> u64 {
        match self {
            PixelFormat::Grey8 => 1,
            PixelFormat::Rgb8 => 3,
            PixelFormat::F32 => 4,
            PixelFormat::F64 => 8,
        }
    }

    /// Whether it is a scalar field (shown through a colour map).
    pub fn is_field(self) -> bool {
        matches!(self, PixelFormat::F32 | PixelFormat::F64)
    }

    fn code(self) -> u8 {
        match self {
            PixelFormat::Grey8 => 1,
            PixelFormat::Rgb8 => 2,
            PixelFormat::F32 => 3,
            PixelFormat::F64 => 4,
        }
    }

    fn from_code(c: u8) -> Option<PixelFormat> {
        Some(match c {
            1 => PixelFormat::Grey8,
            2 => PixelFormat::Rgb8,
            3 => PixelFormat::F32,
            4 => PixelFormat::F64,
            _ => return None,
        })
    }
}

/// The colour map of a scalar field: a few colour stops at even spacing, linearly
/// interpolated ([`ColorMap::stops`]).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum ColorMap {
    /// No map (grey and RGB frames).
    None,
    /// Black to white.
    Grey,
    /// Black through purple, red and orange to pale yellow (after matplotlib's inferno).
    Inferno,
    /// Dark blue through teal to yellow (after matplotlib's viridis).
    Viridis,
}

const GREY: &[[u8; 3]] = &[[0, 0, 0], [255, 255, 255]];
const INFERNO: &[[u8; 3]] = &[
    [0, 0, 4],
    [40, 11, 84],
    [101, 21, 110],
    [159, 42, 99],
    [212, 72, 66],
    [245, 125, 21],
    [250, 193, 39],
    [252, 255, 164],
];
const VIRIDIS: &[[u8; 3]] = &[
    [68, 1, 84],
    [70, 50, 127],
    [54, 92, 141],
    [39, 127, 142],
    [31, 161, 135],
    [74, 194, 109],
    [159, 218, 58],
    [253, 231, 37],
];

impl ColorMap {
    /// The map's colour stops, evenly spaced from 0 to 1 (empty for [`ColorMap::None`]).
    pub fn stops(self) -> &'static [[u8; 3]] {
        match self {
            ColorMap::None => &[],
            ColorMap::Grey => GREY,
            ColorMap::Inferno => INFERNO,
            ColorMap::Viridis => VIRIDIS,
        }
    }

    /// The colour at `t` in `[0, 1]` (clamped; NaN is 0): the stops linearly interpolated,
    /// rounded to the nearest integer. Black for [`ColorMap::None`].
    pub fn at(self, t: f64) -> [u8; 3] {
        let stops = self.stops();
        if stops.len() < 2 {
            return [0; 3];
        }
        let t = if t.is_nan() { 0.0 } else { t.clamp(0.0, 1.0) };
        let x = t * (stops.len() - 1) as f64;
        let i = (x.floor() as usize).min(stops.len() - 2);
        let f = x - i as f64;
        let (a, b) = (stops[i], stops[i + 1]);
        let mix = |a: u8, b: u8| (f64::from(a) + (f64::from(b) - f64::from(a)) * f).round() as u8;
        [mix(a[0], b[0]), mix(a[1], b[1]), mix(a[2], b[2])]
    }

    /// The map's name as `spools view` and the options take it.
    pub fn name(self) -> &'static str {
        match self {
            ColorMap::None => "none",
            ColorMap::Grey => "grey",
            ColorMap::Inferno => "inferno",
            ColorMap::Viridis => "viridis",
        }
    }

    /// The map of a name ([`ColorMap::name`]).
    pub fn from_name(s: &str) -> Option<ColorMap> {
        [
            ColorMap::None,
            ColorMap::Grey,
            ColorMap::Inferno,
            ColorMap::Viridis,
        ]
        .into_iter()
        .find(|m| m.name() == s)
    }

    fn code(self) -> u8 {
        match self {
            ColorMap::None => 0,
            ColorMap::Grey => 1,
            ColorMap::Inferno => 2,
            ColorMap::Viridis => 3,
        }
    }

    fn from_code(c: u8) -> Option<ColorMap> {
        Some(match c {
            0 => ColorMap::None,
            1 => ColorMap::Grey,
            2 => ColorMap::Inferno,
            3 => ColorMap::Viridis,
            _ => return None,
        })
    }
}

/// The header of one frame.
#[derive(Clone, Debug, PartialEq)]
pub struct FrameHeader {
    /// How the pixels are stored.
    pub format: PixelFormat,
    /// The colour map of a field ([`ColorMap::None`] for grey and RGB).
    pub colormap: ColorMap,
    /// Pixels per row.
    pub width: u32,
    /// Rows.
    pub height: u32,
    /// The frame's number.
    pub frame: u64,
    /// When it was made: microseconds since the Unix epoch, by the sender's clock.
    pub time_us: u64,
    /// Its synchronisation group (0: none).
    pub group: u32,
    /// Streams in its group (0 without one).
    pub members: u16,
    /// The value shown as the map's first colour (a field; 0 otherwise).
    pub lo: f64,
    /// The value shown as the map's last colour (a field; 0 otherwise).
    pub hi: f64,
    /// At most [`MAX_TITLE`] bytes.
    pub title: String,
}

impl FrameHeader {
    /// The header of a grey or RGB frame (frame 0, no group, no title).
    pub fn image(format: PixelFormat, width: u32, height: u32) -> FrameHeader {
        FrameHeader {
            format,
            colormap: ColorMap::None,
            width,
            height,
            frame: 0,
            time_us: 0,
            group: 0,
            members: 0,
            lo: 0.0,
            hi: 0.0,
            title: String::new(),
        }
    }

    /// The header of a scalar field shown through `colormap` from `lo` to `hi`.
    pub fn field(
        format: PixelFormat,
        width: u32,
        height: u32,
        colormap: ColorMap,
        lo: f64,
        hi: f64,
    ) -> FrameHeader {
        FrameHeader {
            colormap,
            lo,
            hi,
            ..FrameHeader::image(format, width, height)
        }
    }

    /// The same header with a title, cut to [`MAX_TITLE`] bytes at a character boundary.
    pub fn with_title(mut self, title: &str) -> FrameHeader {
        let mut end = title.len().min(MAX_TITLE);
        while !title.is_char_boundary(end) {
            end -= 1;
        }
        self.title = title[..end].to_string();
        self
    }

    /// Bytes of the pixels that follow the header.
    pub fn pixel_bytes(&self) -> u64 {
        u64::from(self.width) * u64::from(self.height) * self.format.bytes_per_pixel()
    }

    /// Checks what [`FrameHeader::decode`] checks, for a header about to be sent.
    ///
    /// # Errors
    /// [`WireError::Invalid`] naming the field, [`WireError::TooLong`] for a long title.
    pub fn validate(&self) -> Result<(), WireError> {
        let bad = |what, value| Err(WireError::Invalid { what, value });
        for (what, v) in [("width", self.width), ("height", self.height)] {
            if v == 0 || v > MAX_SIDE {
                return bad(what, u64::from(v));
            }
        }
        if self.title.len() > MAX_TITLE {
            return Err(WireError::TooLong {
                what: "frame title",
                len: self.title.len() as u64,
                max: MAX_TITLE as u64,
            });
        }
        if (self.group == 0) != (self.members == 0) {
            return bad("group members", u64::from(self.members));
        }
        if self.format.is_field() {
            if self.colormap == ColorMap::None {
                return bad("colour map of a field", 0);
            }
            if !(self.lo.is_finite() && self.hi.is_finite() && self.lo < self.hi) {
                return bad(
                    "value range of a field (lo < hi, finite)",
                    self.lo.to_bits(),
                );
            }
        } else if self.colormap != ColorMap::None || self.lo != 0.0 || self.hi != 0.0 {
            return bad("colour map of an image", u64::from(self.colormap.code()));
        }
        Ok(())
    }

    /// The header's [`HEADER_LEN`] bytes.
    pub fn encode(&self) -> [u8; HEADER_LEN] {
        let mut out = Vec::with_capacity(HEADER_LEN);
        out.extend_from_slice(MAGIC);
        out.extend_from_slice(&FRAME_VERSION.to_le_bytes());
        out.push(self.format.code());
        out.push(self.colormap.code());
        out.extend_from_slice(&self.width.to_le_bytes());
        out.extend_from_slice(&self.height.to_le_bytes());
        out.extend_from_slice(&self.frame.to_le_bytes());
        out.extend_from_slice(&self.time_us.to_le_bytes());
        out.extend_from_slice(&self.group.to_le_bytes());
        out.extend_from_slice(&self.members.to_le_bytes());
        let title = &self.title.as_bytes()[..self.title.len().min(MAX_TITLE)];
        out.extend_from_slice(&(title.len() as u16).to_le_bytes());
        out.extend_from_slice(&self.lo.to_le_bytes());
        out.extend_from_slice(&self.hi.to_le_bytes());
        out.extend_from_slice(&0u64.to_le_bytes());
        out.extend_from_slice(title);
        out.resize(HEADER_LEN, 0);
        let mut h = [0u8; HEADER_LEN];
        h.copy_from_slice(&out);
        h
    }

    /// Parses a whole frame (header and pixels): the header, and the pixels' bytes.
    ///
    /// # Errors
    /// [`WireError::Truncated`] when the bytes end before the header or the pixels do,
    /// [`WireError::Trailing`] when bytes follow them, [`WireError::BadMagic`],
    /// [`WireError::Version`], [`WireError::Invalid`] naming a bad field,
    /// [`WireError::TooLong`] / [`WireError::NotUtf8`] for the title.
    pub fn decode(adu: &[u8]) -> Result<(FrameHeader, &[u8]), WireError> {
        let mut r = Reader::new(adu);
        let magic = r.array::<4>()?;
        if &magic != MAGIC {
            return Err(WireError::BadMagic(u32::from_be_bytes(magic)));
        }
        let version = r.u16()?;
        if version != FRAME_VERSION {
            return Err(WireError::Version {
                got: version,
                want: FRAME_VERSION,
            });
        }
        let f = r.u8()?;
        let format = PixelFormat::from_code(f).ok_or_else(|| WireError::Invalid {
            what: "pixel format",
            value: u64::from(f),
        })?;
        let m = r.u8()?;
        let colormap = ColorMap::from_code(m).ok_or_else(|| WireError::Invalid {
            what: "colour map",
            value: u64::from(m),
        })?;
        let (width, height) = (r.u32()?, r.u32()?);
        let (frame, time_us) = (r.u64()?, r.u64()?);
        let (group, members) = (r.u32()?, r.u16()?);
        let title_len = usize::from(r.u16()?);
        let lo = f64::from_bits(r.u64()?);
        let hi = f64::from_bits(r.u64()?);
        let _reserved = r.u64()?;
        let title_field = r.take(MAX_TITLE)?;
        if title_len > MAX_TITLE {
            return Err(WireError::TooLong {
                what: "frame title",
                len: title_len as u64,
                max: MAX_TITLE as u64,
            });
        }
        let title = std::str::from_utf8(&title_field[..title_len])
            .map_err(|_| WireError::NotUtf8("frame title"))?
            .to_string();
        let h = FrameHeader {
            format,
            colormap,
            width,
            height,
            frame,
            time_us,
            group,
            members,
            lo,
            hi,
            title,
        };
        h.validate()?;
        let need = h.pixel_bytes();
        let pixels = r.rest();
        if (pixels.len() as u64) < need {
            return Err(WireError::Truncated {
                need: HEADER_LEN.saturating_add(usize::try_from(need).unwrap_or(usize::MAX)),
                have: adu.len(),
            });
        }
        if pixels.len() as u64 > need {
            return Err(WireError::Trailing(pixels.len() - need as usize));
        }
        Ok((h, pixels))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn field() -> FrameHeader {
        FrameHeader {
            frame: 7,
            time_us: 1_700_000_000_000_000,
            group: 2,
            members: 4,
            ..FrameHeader::field(PixelFormat::F64, 3, 2, ColorMap::Viridis, -1.0, 1.0)
        }
        .with_title("cam é")
    }

    #[test]
    fn a_frame_round_trips() {
        let h = field();
        let mut adu = h.encode().to_vec();
        assert_eq!(&adu[..4], b"SPFB");
        adu.extend_from_slice(&[1u8; 48]);
        let (back, px) = FrameHeader::decode(&adu).unwrap();
        assert_eq!(back, h);
        assert_eq!(px, &[1u8; 48][..]);
    }

    #[test]
    fn pixels_must_fill_the_frame_exactly() {
        let mut adu = field().encode().to_vec();
        adu.extend_from_slice(&[0u8; 47]);
        assert!(matches!(
            FrameHeader::decode(&adu),
            Err(WireError::Truncated { need: 176, .. })
        ));
        adu.extend_from_slice(&[0u8; 2]);
        assert_eq!(FrameHeader::decode(&adu), Err(WireError::Trailing(1)));
    }

    #[test]
    fn bad_fields_are_named() {
        let enc = |h: &FrameHeader| {
            let mut a = h.encode().to_vec();
            a.resize(HEADER_LEN + h.pixel_bytes() as usize, 0);
            a
        };
        let mut h = field();
        h.lo = 2.0;
        assert!(matches!(
            FrameHeader::decode(&enc(&h)),
            Err(WireError::Invalid { what, .. }) if what.starts_with("value range")
        ));
        let mut h = FrameHeader::image(PixelFormat::Rgb8, 2, 2);
        h.colormap = ColorMap::Inferno;
        assert!(FrameHeader::decode(&enc(&h)).is_err());
        let mut a = enc(&FrameHeader::image(PixelFormat::Grey8, 2, 2));
        a[6] = 9;
        assert_eq!(
            FrameHeader::decode(&a),
            Err(WireError::Invalid {
                what: "pixel format",
                value: 9
            })
        );
        a[6] = 1;
        a[38] = 65; // title_len
        assert!(matches!(
            FrameHeader::decode(&a),
            Err(WireError::TooLong { .. })
        ));
        a[38] = 1;
        a[64] = 0xff;
        assert_eq!(
            FrameHeader::decode(&a),
            Err(WireError::NotUtf8("frame title"))
        );
        assert!(matches!(
            FrameHeader::decode(b"SPFX"),
            Err(WireError::BadMagic(_))
        ));
        let mut h = FrameHeader::image(PixelFormat::Grey8, 0, 2);
        h.width = 0;
        assert!(h.validate().is_err());
    }

    #[test]
    fn colour_maps_interpolate_their_stops() {
        assert_eq!(ColorMap::Grey.at(0.5), [128, 128, 128]);
        assert_eq!(ColorMap::Inferno.at(0.0), INFERNO[0]);
        assert_eq!(ColorMap::Inferno.at(1.0), INFERNO[7]);
        assert_eq!(ColorMap::Viridis.at(3.0 / 7.0), VIRIDIS[3]);
        assert_eq!(ColorMap::Viridis.at(f64::NAN), VIRIDIS[0]);
        assert_eq!(ColorMap::Viridis.at(9.0), VIRIDIS[7]);
        assert_eq!(ColorMap::from_name("inferno"), Some(ColorMap::Inferno));
    }

    #[test]
    fn titles_are_cut_at_a_character() {
        let h = FrameHeader::image(PixelFormat::Grey8, 1, 1).with_title(&"é".repeat(40));
        assert_eq!(h.title.len(), 64);
    }
}
