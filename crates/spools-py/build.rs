//! Gives the extension the MPI standard ABI's soname, `libmpi_abi.so.1`: the extension
//! carries Spools' MPI library (crates/spools-mpi), and once Python has loaded it, a later
//! `libmpi_abi.so.1` that mpi4py needs is this very file (the dynamic loader matches the
//! name against the sonames of the objects already loaded), so mpi4py and `spools` share
//! one runtime.

fn main() {
    println!("cargo:rustc-cdylib-link-arg=-Wl,-soname,libmpi_abi.so.1");
    println!("cargo:rerun-if-changed=build.rs");
}
