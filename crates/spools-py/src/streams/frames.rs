//! Frames out of the job (the framebuffer protocol, `spools_io::stream::frames`):
//! `spools.FrameStyle`, how a stream's frames are shown, and the argument helpers of
//! `send_frame` / `send_frames`. The header itself is built by the Rust code
//! (`frame_header`, behind `StreamConnection::send_frame`), never here.

use pyo3::prelude::*;
use pyo3::types::PyModule;
use spools::{ColorMap, FrameStyle};

use crate::errors;

/// How a stream's frames are shown (`FrameStyle(title="", colormap="inferno", lo=0.0,
/// hi=1.0)`): a title (at most 64 bytes are sent), and for a scalar field (`f32` or
/// `f64` frames) the colour map (`"grey"`, `"inferno"` or `"viridis"`) and the values
/// shown as its first and last colours. Images (`u8` grey or RGB) ignore the map.
#[pyclass(frozen, module = "spools", name = "FrameStyle")]
pub(crate) struct PyFrameStyle {
    pub(crate) style: FrameStyle,
}

#[pymethods]
impl PyFrameStyle {
    #[new]
    #[pyo3(signature = (title = "", colormap = "inferno", lo = 0.0, hi = 1.0))]
    fn new(title: &str, colormap: &str, lo: f64, hi: f64) -> PyResult<Self> {
        let colormap = ColorMap::from_name(colormap).ok_or_else(|| {
            errors::value_error(format!(
                "colormap must be \"grey\", \"inferno\" or \"viridis\", got {colormap:?}"
            ))
        })?;
        Ok(PyFrameStyle {
            style: FrameStyle {
                title: title.to_owned(),
                colormap,
                lo,
                hi,
            },
        })
    }

    /// The title shown above the frame.
    #[getter]
    fn title(&self) -> &str {
        &self.style.title
    }

    /// The colour map's name.
    #[getter]
    fn colormap(&self) -> &'static str {
        self.style.colormap.name()
    }

    /// The value shown as the map's first colour.
    #[getter]
    fn lo(&self) -> f64 {
        self.style.lo
    }

    /// The value shown as the map's last colour.
    #[getter]
    fn hi(&self) -> f64 {
        self.style.hi
    }

    fn __repr__(&self) -> String {
        format!(
            "spools.FrameStyle(title={:?}, colormap={:?}, lo={:?}, hi={:?})",
            self.style.title,
            self.style.colormap.name(),
            self.style.lo,
            self.style.hi
        )
    }
}

/// The style argument of `send_frame` / `send_frames`: a `spools.FrameStyle`, or `None`
/// for the default (no title; a field through inferno from 0 to 1).
///
/// # Errors
/// `TypeError` for anything else.
pub(crate) fn style_arg(obj: Option<&Bound<'_, PyAny>>) -> PyResult<FrameStyle> {
    match obj {
        None => Ok(FrameStyle::default()),
        Some(o) if o.is_none() => Ok(FrameStyle::default()),
        Some(o) => o
            .cast::<PyFrameStyle>()
            .map(|s| s.get().style.clone())
            .map_err(|_| {
                errors::type_error(format!(
                    "style must be a spools.FrameStyle or None, got {}",
                    crate::buffer::type_name(o)
                ))
            }),
    }
}

pub(crate) fn register(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add_class::<PyFrameStyle>()
}
