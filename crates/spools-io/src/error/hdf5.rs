//! What is wrong with, or unsupported in, an HDF5 file ([`Hdf5Error`]).

/// Why an HDF5 file cannot be written or read as a parallel file.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum Hdf5Error {
    /// The HDF5 C library (libhdf5, 1.10 or newer), which Spools opens at run time, could
    /// not be loaded: none of the names tried could be opened, or the library found is
    /// too old or lacks a function Spools calls. A missing library, like a missing build
    /// feature: installing it (or naming it in `SPOOLS_HDF5_LIB`) is the fix.
    #[error("HDF5 files need the HDF5 C library (libhdf5 1.10 or newer), loaded at run time, which could not be loaded: {why} (tried {}); install it (Debian and Ubuntu: apt-get install libhdf5-103-1, or libhdf5-103-1t64 on Ubuntu 24.04, or libhdf5-dev; Fedora: dnf install hdf5; or scripts/install-hdf5.sh) or set SPOOLS_HDF5_LIB to its path", tried.join(", "))]
    LibraryMissing {
        /// The library names and paths tried, in order (`SPOOLS_HDF5_LIB` alone when set).
        tried: Vec<String>,
        /// Why the last one failed (the loader's message, or what the library lacks).
        why: String,
    },
    /// The HDF5 library refused an operation.
    #[error("HDF5 {op}: {message}")]
    Library {
        /// What was being done.
        op: &'static str,
        /// The library's message.
        message: String,
    },
    /// No dataset was named and the file does not hold exactly one.
    #[error("name the dataset as FILE:/NAME; the file holds {0:?}")]
    WhichDataset(Vec<String>),
    /// The dataset is stored in chunks (possibly filtered): Spools reads only contiguous
    /// datasets, at their file offset.
    #[error("dataset {dataset} is stored {layout}{}: Spools reads contiguous datasets only (h5repack -l {dataset}:CONTI makes one)", if filters.is_empty() { String::new() } else { format!(" with filters {filters:?}") })]
    NotContiguous {
        /// The dataset.
        dataset: String,
        /// Its storage layout.
        layout: &'static str,
        /// Its filters (compression and others).
        filters: Vec<String>,
    },
    /// The dataset has no storage allocated (it was never written).
    #[error("dataset {0} has no storage allocated (never written)")]
    Unallocated(String),
    /// An element type Spools has no element type for (or big-endian, which is refused,
    /// not converted).
    #[error("dataset {dataset} has element type {found}, which Spools does not read (supported: little-endian integers and floats, bool, complex as a compound of two floats)")]
    DataType {
        /// The dataset.
        dataset: String,
        /// The element type found.
        found: String,
    },
    /// An element type Spools cannot write as HDF5.
    #[error("HDF5 files hold numeric element types; {0} has no HDF5 type here")]
    Unwritable(String),
    /// A format spec that does not parse.
    #[error("hdf5 format spec {0:?}: expected hdf5, hdf5(NAME) or hdf5(dataset=NAME)")]
    Spec(String),
}
