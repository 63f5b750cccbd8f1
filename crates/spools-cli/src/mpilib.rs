//! Spools' `libmpi_abi.so.1` (the MPI standard ABI, crates/spools-mpi) for the ranks of
//! `spools run`: found beside the `spools` executable (a build's target/<profile>/, where
//! `make -C crates/spools-mpi` puts it) or in `../lib` (an installation), or named by
//! `SPOOLS_MPI_LIB` (a directory), and put first on the ranks' `LD_LIBRARY_PATH`, so
//! that a program built by any `mpicc_abi` runs on Spools with nothing else set.

use std::path::PathBuf;

/// The library's file name: the standard ABI's soname.
const SONAME: &str = "libmpi_abi.so.1";

/// The directory holding Spools' `libmpi_abi.so.1`, if there is one.
pub(crate) fn dir() -> Option<PathBuf> {
    let mut candidates = Vec::new();
    if let Some(d) = std::env::var_os("SPOOLS_MPI_LIB") {
        candidates.push(PathBuf::from(d));
    }
    if let Some(bin) = std::env::current_exe()
        .ok()
        .and_then(|e| e.parent().map(PathBuf::from))
    {
        candidates.push(bin.join("../lib"));
        candidates.push(bin);
    }
    candidates
        .into_iter()
        .find(|d| d.join(SONAME).is_file())
        .and_then(|d| d.canonicalize().ok())
}

/// Puts the library's directory first on `LD_LIBRARY_PATH` (inherited by the ranks this
/// process starts), when the library is found.
pub(crate) fn put_first() {
    let Some(d) = dir() else { return };
    let mut paths = vec![d];
    if let Some(old) = std::env::var_os("LD_LIBRARY_PATH") {
        paths.extend(std::env::split_paths(&old));
    }
    if let Ok(joined) = std::env::join_paths(paths) {
        std::env::set_var("LD_LIBRARY_PATH", joined);
    }
}

/// What `spools info` says about it.
pub(crate) fn describe() -> String {
    match dir() {
        Some(d) => format!("{}", d.join(SONAME).display()),
        None => "not found (make -C crates/spools-mpi, or SPOOLS_MPI_LIB=DIR)".into(),
    }
}
