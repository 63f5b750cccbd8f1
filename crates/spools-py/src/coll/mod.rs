//! (area: coll) Collectives on numpy arrays, as methods of `Comm`: broadcast, reductions
//! (`"sum"`, `"prod"`, `"min"`, `"max"` or a Python callable on whole arrays), gathers,
//! scatters, all-to-all, scans, their non-blocking forms returning a [`nonblocking`]
//! request, and the object forms for picklable objects. As in mpi4py, the array forms
//! have capitalised names (`Bcast`, `Allreduce`, `Reduce_scatter`, `Iallreduce`, ...)
//! and the object forms lower-case ones (`bcast`, `allreduce`, ...).
//!
//! Conventions: arrays are used in place ([`crate::buffer::view`]); a collective that
//! produces an array returns a new one unless `out=` is given (then it fills `out` and
//! returns it); the reductions are in place with `out=a`. Every call releases the GIL
//! while it waits. The v-forms and the scatters first agree on the arguments (a small
//! exchange of every rank's dtype and shape), so a mismatch is the same `ValueError` on
//! every rank instead of a hang.
//!
//! Files: [`carrier`] (the element type that carries a dtype), [`ops`] (the operators and
//! the Python callable as a slice operator), [`shapes`] (result arrays, argument
//! agreement), [`reduce`], [`moves`], [`vmoves`], [`objects`], [`nonblocking`] and its
//! [`request`].

mod carrier;
mod moves;
mod nonblocking;
mod objects;
mod ops;
mod reduce;
mod request;
mod shapes;
mod vmoves;

use pyo3::prelude::*;

pub(crate) fn register(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add_class::<request::CollRequest>()?;
    m.add_class::<ops::Op>()?;
    m.add("SUM", "sum")?;
    m.add("PROD", "prod")?;
    m.add("MIN", "min")?;
    m.add("MAX", "max")?;
    Ok(())
}
