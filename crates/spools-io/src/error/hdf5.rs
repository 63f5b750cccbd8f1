//! What is wrong with, or unsupported in, an HDF5 file ([`Hdf5Error`]).

/// [`Hdf5Error::NotContiguous`]'s layout for a dataset whose data lies in external raw
/// files (h5py's `external=`, `H5Pset_external`).
const EXTERNAL_FILES: &str = "in external files";
/// [`Hdf5Error::NotContiguous`]'s layout for a dataset reached through an external link
/// (its data is in another HDF5 file).
const EXTERNAL_LINK: &str = "in another file, through an external link";

/// The message of [`Hdf5Error::NotContiguous`].
fn not_contiguous(
    dataset: &str,
    layout: &str,
    filters: &[String],
    link: &str,
    elsewhere: &[String],
) -> String {
    let target = elsewhere.join(", ");
    if layout == EXTERNAL_LINK {
        let refused = "Spools reads datasets of the file named only and does not follow \
                       external links";
        if link.is_empty() {
            return format!(
                "dataset {dataset} is in another HDF5 file, {target}, reached through an \
                 external link: {refused} (name the dataset in {target} itself)"
            );
        }
        return format!(
            "dataset {dataset} is reached through the external link {link} to {target}, in \
             another HDF5 file: {refused} (name {target} itself)"
        );
    }
    if layout == EXTERNAL_FILES {
        return format!(
            "dataset {dataset} stores its data in external files ({target}), not in the HDF5 \
             file: Spools reads datasets whose data is in the HDF5 file itself only"
        );
    }
    let filters = if filters.is_empty() {
        String::new()
    } else {
        format!(" with filters {filters:?}")
    };
    format!(
        "dataset {dataset} is stored {layout}{filters}: Spools reads contiguous datasets only \
         (h5repack -l {dataset}:CONTI makes one)"
    )
}

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
    /// The dataset's data is not one contiguous run of bytes of the file named, which is
    /// all Spools reads (at its offset): it is stored in chunks (possibly filtered),
    /// compact or as a virtual dataset; or its data lies outside the file, in external raw
    /// files (layout "in external files") or in another HDF5 file, through an external
    /// link on its path (layout "in another file, through an external link"). Refused,
    /// never read at an offset of this file.
    #[error("{}", not_contiguous(dataset, layout, filters, link, elsewhere))]
    NotContiguous {
        /// The dataset (the path it was named by).
        dataset: String,
        /// Its storage layout ("in chunks", "compact", "as a virtual dataset"), or where
        /// its data is instead ("in external files", "in another file, through an
        /// external link").
        layout: &'static str,
        /// Its filters (compression and others).
        filters: Vec<String>,
        /// The external link on the dataset's path (empty when not known, as for one
        /// behind a soft link, and for the other layouts). Boxed, as `elsewhere`, to keep
        /// the error small.
        link: Box<str>,
        /// Where the data is instead: the external raw files, or the external link's
        /// target as `FILE:/PATH` (the file alone when the link is not known); empty for
        /// the other layouts.
        elsewhere: Box<[String]>,
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

impl Hdf5Error {
    /// The dataset `dataset` stores its data in the external raw files `files`.
    pub(crate) fn external_files(dataset: String, files: Vec<String>) -> Hdf5Error {
        Hdf5Error::NotContiguous {
            dataset,
            layout: EXTERNAL_FILES,
            filters: Vec::new(),
            link: Box::default(),
            elsewhere: files.into(),
        }
    }

    /// The dataset `dataset` is reached through the external link `link` (empty: not
    /// known) to `target` (`FILE:/PATH`; the file alone when the link is not known).
    pub(crate) fn external_link(dataset: String, link: String, target: String) -> Hdf5Error {
        Hdf5Error::NotContiguous {
            dataset,
            layout: EXTERNAL_LINK,
            filters: Vec::new(),
            link: link.into(),
            elsewhere: Box::new([target]),
        }
    }
}
