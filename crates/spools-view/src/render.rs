//! Frames into pixels a page draws (sans-IO): fields through their colour map (256 levels),
//! every format to RGBA for a canvas or to JPEG, at full size or decimated by a whole
//! factor for a page whose panels are smaller than the frame.

use spools_proto::framebuffer::{ColorMap, FrameHeader, PixelFormat};

/// How frames travel to a page.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Encoding {
    /// RGBA pixels, drawn on a canvas as they are: exact colours, 4 bytes a pixel.
    Raw,
    /// JPEG of the given quality (1 to 100): about a tenth of the bytes, decoded by the
    /// browser, colours within a few levels.
    Jpeg(u8),
}

impl Encoding {
    /// Its name on the page and on the command line (`raw`, `jpeg`).
    pub fn name(self) -> &'static str {
        match self {
            Encoding::Raw => "raw",
            Encoding::Jpeg(_) => "jpeg",
        }
    }

    pub(crate) fn key(self) -> u8 {
        match self {
            Encoding::Raw => 0,
            Encoding::Jpeg(q) => q.max(1),
        }
    }
}

/// A frame ready for a page.
pub(crate) struct Image {
    pub(crate) width: u32,
    pub(crate) height: u32,
    /// RGBA pixels, or a JPEG file.
    pub(crate) bytes: Vec<u8>,
}

/// The 256 colours a field's values are shown with: value `v` is colour
/// `round(255 * (v - lo) / (hi - lo))`, clamped (NaN is 0).
pub fn palette(map: ColorMap) -> [[u8; 3]; 256] {
    let mut p = [[0u8; 3]; 256];
    for (i, c) in p.iter_mut().enumerate() {
        *c = map.at(i as f64 / 255.0);
    }
    p
}

/// The palette index of value `v` of a field from `lo` to `hi`.
#[inline]
fn level(v: f64, lo: f64, k: f64) -> usize {
    let x = ((v - lo) * k).round();
    if x >= 255.0 {
        255
    } else if x > 0.0 {
        x as usize
    } else {
        0 // below lo, and NaN
    }
}

/// The frame's pixels as `channels` (3: RGB, 4: RGBA) bytes per pixel, every `scale`-th
/// pixel of every `scale`-th row (`scale >= 1`): (width, height, bytes).
pub(crate) fn pixels(
    h: &FrameHeader,
    px: &[u8],
    scale: u32,
    channels: usize,
) -> (u32, u32, Vec<u8>) {
    let scale = scale.max(1) as usize;
    let (w, hgt) = (h.width as usize, h.height as usize);
    let (ow, oh) = (w.div_ceil(scale), hgt.div_ceil(scale));
    let mut out = vec![255u8; ow * oh * channels];
    let pal = palette(h.colormap);
    let k = if h.format.is_field() {
        255.0 / (h.hi - h.lo)
    } else {
        0.0
    };
    let bpp = h.format.bytes_per_pixel() as usize;
    for (oy, row_out) in out.chunks_exact_mut(ow * channels).enumerate() {
        let row = &px[oy * scale * w * bpp..][..w * bpp];
        for (ox, o) in row_out.chunks_exact_mut(channels).enumerate() {
            let p = &row[ox * scale * bpp..][..bpp];
            let rgb = match h.format {
                PixelFormat::Grey8 => [p[0]; 3],
                PixelFormat::Rgb8 => [p[0], p[1], p[2]],
                PixelFormat::F32 => {
                    let v = f32::from_le_bytes([p[0], p[1], p[2], p[3]]);
                    pal[level(f64::from(v), h.lo, k)]
                }
                PixelFormat::F64 => {
                    let mut b = [0u8; 8];
                    b.copy_from_slice(p);
                    pal[level(f64::from_le_bytes(b), h.lo, k)]
                }
            };
            o[..3].copy_from_slice(&rgb);
        }
    }
    (ow as u32, oh as u32, out)
}

/// The frame encoded for a page.
pub(crate) fn encode(h: &FrameHeader, px: &[u8], scale: u32, enc: Encoding) -> Image {
    match enc {
        Encoding::Raw => {
            let (width, height, bytes) = pixels(h, px, scale, 4);
            Image {
                width,
                height,
                bytes,
            }
        }
        Encoding::Jpeg(q) => {
            let (width, height, rgb) = pixels(h, px, scale, 3);
            let mut bytes = Vec::with_capacity(rgb.len() / 8);
            let e = jpeg_encoder::Encoder::new(&mut bytes, q.clamp(1, 100));
            // Sides are at most 65536 (the frame header's limit): JPEG's u16 fits all but
            // exactly 65536, which is then refused as an empty image.
            let (w16, h16) = (u16::try_from(width), u16::try_from(height));
            match (w16, h16) {
                (Ok(w16), Ok(h16))
                    if e.encode(&rgb, w16, h16, jpeg_encoder::ColorType::Rgb)
                        .is_ok() => {}
                _ => bytes.clear(),
            }
            Image {
                width,
                height,
                bytes,
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn fields_go_through_their_palette_and_images_as_they_are() {
        let h = FrameHeader::field(PixelFormat::F64, 3, 1, ColorMap::Grey, 10.0, 20.0);
        let px: Vec<u8> = [10.0f64, 15.0, f64::NAN]
            .iter()
            .flat_map(|v| v.to_le_bytes())
            .collect();
        let (w, hh, out) = pixels(&h, &px, 1, 4);
        assert_eq!((w, hh), (3, 1));
        assert_eq!(out, vec![0, 0, 0, 255, 128, 128, 128, 255, 0, 0, 0, 255]);
        let h = FrameHeader::image(PixelFormat::Rgb8, 3, 3);
        let px: Vec<u8> = (0..27).collect();
        // Every second pixel of every second row: (0,0), (0,2), (2,0), (2,2).
        let (w, hh, out) = pixels(&h, &px, 2, 3);
        assert_eq!((w, hh), (2, 2));
        assert_eq!(out, vec![0, 1, 2, 6, 7, 8, 18, 19, 20, 24, 25, 26]);
    }

    #[test]
    fn a_jpeg_is_a_jpeg() {
        let h = FrameHeader::image(PixelFormat::Grey8, 16, 8);
        let img = encode(&h, &[200u8; 128], 1, Encoding::Jpeg(80));
        assert_eq!(&img.bytes[..2], &[0xff, 0xd8]);
        assert_eq!((img.width, img.height), (16, 8));
    }
}
