//! Medians and rounding of measured values.

use serde::Serializer;

/// Median of a non-empty sample (0 for an empty one).
pub(crate) fn median(v: &mut [f64]) -> f64 {
    if v.is_empty() {
        return 0.0;
    }
    v.sort_by(f64::total_cmp);
    let n = v.len();
    if n % 2 == 1 {
        v[n / 2]
    } else {
        (v[n / 2 - 1] + v[n / 2]) / 2.0
    }
}

/// `x` rounded to `digits` decimal places.
pub(crate) fn round(x: f64, digits: i32) -> f64 {
    let p = 10f64.powi(digits);
    (x * p).round() / p
}

/// Serialises a value rounded to `D` decimal places (`#[serde(serialize_with =
/// "rounded::<D, _>")]`): reports keep full precision, documents the digits that mean
/// something.
pub(crate) fn rounded<const D: i32, S: Serializer>(x: &f64, s: S) -> Result<S::Ok, S::Error> {
    s.serialize_f64(round(*x, D))
}
