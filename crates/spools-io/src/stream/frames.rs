//! Frames out of the job: the framebuffer protocol ([`spools_proto::framebuffer`]) on a stream.
//! Each frame is one ADU, a [`FrameHeader`] in front of the canonical bytes of a
//! distributed 2-D image or field; the reshuffle into the links' stripes does the
//! gathering, from any layout.

use std::time::{SystemTime, UNIX_EPOCH};

use spools_map::{DType, Layout, Order};
use spools_proto::framebuffer::{ColorMap, FrameHeader, PixelFormat};

use super::{StreamConnection, StreamId};
use crate::error::StreamError;

/// How a stream's frames are shown: a title, and for a scalar field the colour map and the
/// values at its two ends.
#[derive(Clone, Debug, PartialEq)]
pub struct FrameStyle {
    /// Shown above the frame (at most 64 bytes are sent).
    pub title: String,
    /// The colour map of a field (`f32` or `f64`); ignored for `u8` images.
    pub colormap: ColorMap,
    /// The value shown as the map's first colour.
    pub lo: f64,
    /// The value shown as the map's last colour.
    pub hi: f64,
}

impl Default for FrameStyle {
    /// No title; a field through [`ColorMap::Inferno`] from 0 to 1.
    fn default() -> Self {
        FrameStyle {
            title: String::new(),
            colormap: ColorMap::Inferno,
            lo: 0.0,
            hi: 1.0,
        }
    }
}

/// The header of a frame of `layout` shown as `style`: `u8[H,W]` is grey, `u8[H,W,3]`
/// RGB, `f32[H,W]` and `f64[H,W]` fields (all in C order). Frame number 0, no group, the
/// time now.
///
/// ```
/// use spools_io::stream::{frame_header, FrameStyle};
/// use spools_proto::framebuffer::PixelFormat;
/// let h = frame_header(&"u8[1080,1920,3] block,*,* on 4x1x1".parse()?, &FrameStyle::default())?;
/// assert_eq!((h.format, h.width, h.height), (PixelFormat::Rgb8, 1920, 1080));
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
///
/// # Errors
/// [`StreamError::Format`] for a layout that is no frame, [`StreamError::Frame`] for a
/// bad style (no colour map, `lo >= hi`, a side over 65536).
pub fn frame_header(layout: &Layout, style: &FrameStyle) -> Result<FrameHeader, StreamError> {
    const NOT_A_FRAME: StreamError = StreamError::Format(
        "a frame is u8[H,W] (grey), u8[H,W,3] (RGB), f32[H,W] or f64[H,W] (fields), in C order",
    );
    let Layout::Array(a) = layout else {
        return Err(NOT_A_FRAME);
    };
    let format = match (a.dtype(), a.shape()) {
        (DType::U8, [_, _]) => PixelFormat::Grey8,
        (DType::U8, [_, _, 3]) => PixelFormat::Rgb8,
        (DType::F32, [_, _]) => PixelFormat::F32,
        (DType::F64, [_, _]) => PixelFormat::F64,
        _ => return Err(NOT_A_FRAME),
    };
    if a.order() != Order::C {
        return Err(NOT_A_FRAME);
    }
    let side = |v: u64| u32::try_from(v).unwrap_or(u32::MAX);
    let (height, width) = (side(a.shape()[0]), side(a.shape()[1]));
    let h = if format.is_field() {
        FrameHeader::field(format, width, height, style.colormap, style.lo, style.hi)
    } else {
        FrameHeader::image(format, width, height)
    };
    let h = FrameHeader {
        time_us: SystemTime::now()
            .duration_since(UNIX_EPOCH)
            .map_or(0, |d| d.as_micros() as u64),
        ..h.with_title(&style.title)
    };
    h.validate().map_err(StreamError::Frame)?;
    Ok(h)
}

impl StreamConnection {
    /// Sends the next frame of stream `id`: this rank's share `data` of `layout` (a 2-D
    /// image or field, see [`frame_header`]), with a header numbering it (the stream's
    /// ADU count) and naming its group. The stream's TU must give SUs of at least 128
    /// bytes. Collective.
    ///
    /// ```no_run
    /// use spools_io::stream::{FrameStyle, StreamConnection, StreamOptions};
    /// let world = spools::init()?;
    /// let field: spools_map::Layout = "f64[512,512] block,block on 2x2".parse()?;
    /// let mine = vec![0u8; field.local_bytes(u64::from(world.rank()))? as usize];
    /// let mut c = StreamConnection::open(world.communicator(), "127.0.0.1:5000".parse()?, 2)?;
    /// let s = c.open_stream(StreamOptions::default())?;
    /// let style = FrameStyle { title: "temperature".into(), lo: 0.0, hi: 100.0, ..Default::default() };
    /// c.send_frame(s, &style, &mine, &field)?;
    /// c.close()?;
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    ///
    /// # Errors
    /// As [`frame_header`] and [`StreamConnection::send_adu_prefixed`].
    pub fn send_frame(
        &mut self,
        id: StreamId,
        style: &FrameStyle,
        data: &[u8],
        layout: &Layout,
    ) -> Result<(), StreamError> {
        // A rank whose header fails (a style it alone got wrong) fails the send on every
        // rank: the outcome is agreed before anything is sent.
        match self.header(id, style, layout) {
            Ok(h) => self.send_checked(id, Ok(&h.encode()), data, layout, false),
            Err(e) => self.send_checked(id, Err(e), data, layout, false),
        }
    }

    /// Sends frame n of every open stream of lock-step group `group`, each `(stream,
    /// style, this rank's share, layout)`: a viewer shows them together. Collective.
    ///
    /// # Errors
    /// As [`StreamConnection::send_group`] and [`StreamConnection::send_frame`].
    pub fn send_frames(
        &mut self,
        group: u32,
        items: &[(StreamId, &FrameStyle, &[u8], &Layout)],
    ) -> Result<(), StreamError> {
        let ids: Vec<StreamId> = items.iter().map(|i| i.0).collect();
        self.agree_group(group, &ids)?;
        for &(id, style, data, layout) in items {
            self.send_frame(id, style, data, layout)?;
        }
        Ok(())
    }

    fn header(
        &self,
        id: StreamId,
        style: &FrameStyle,
        layout: &Layout,
    ) -> Result<FrameHeader, StreamError> {
        let group = self
            .group_of(id)
            .ok_or_else(|| StreamError::UnknownStream { stream: id.get() })?;
        let members = u16::try_from(self.group_size(group)).unwrap_or(u16::MAX);
        Ok(FrameHeader {
            frame: self.adus(id),
            group,
            members,
            ..frame_header(layout, style)?
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn layouts_become_pixel_formats() {
        let s = FrameStyle::default();
        let f = |l: &str| frame_header(&l.parse().unwrap(), &s).map(|h| h.format);
        assert_eq!(f("u8[4,6] block,* on 2x1").unwrap(), PixelFormat::Grey8);
        assert_eq!(
            f("f32[4,6] cyclic,cyclic on 2x2").unwrap(),
            PixelFormat::F32
        );
        assert_eq!(f("f64[4,6] *,block on 1x3").unwrap(), PixelFormat::F64);
        for bad in [
            "u8[4,6,4] block,*,* on 2x1x1",
            "i32[4,6] block,* on 2x1",
            "u8[4] block on 2",
        ] {
            assert!(matches!(f(bad), Err(StreamError::Format(_))), "{bad}");
        }
        let hot = FrameStyle {
            lo: 1.0,
            hi: 1.0,
            ..s
        };
        assert!(matches!(
            frame_header(&"f32[2,2] block,* on 1x1".parse().unwrap(), &hot),
            Err(StreamError::Frame(_))
        ));
    }
}
