//! Gives the shared library the standard ABI's soname, `libmpi_abi.so.1`: programs built
//! by any `mpicc_abi` need exactly that name.

fn main() {
    println!("cargo:rustc-cdylib-link-arg=-Wl,-soname,libmpi_abi.so.1");
    println!("cargo:rerun-if-changed=build.rs");
}
