//! What is wrong with, or unsupported in, an HDF5 file ([`Hdf5Error`]).

/// Why an HDF5 file cannot be written or read as a parallel file.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum Hdf5Error {
    /// This build of Spools has no HDF5 support (the `hdf5` cargo feature, which links
    /// Debian's libhdf5).
    #[error("this build has no HDF5 support: build with the `hdf5` feature (cargo build --features hdf5; needs libhdf5-dev)")]
    NotBuilt,
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
