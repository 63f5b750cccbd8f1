//! Gives the shared library its soname, `libspools.so.MAJOR`: programs linked against it
//! load any later library of the same major version (see ABI rules in include/spools.h).

fn main() {
    let major = std::env::var("CARGO_PKG_VERSION_MAJOR").unwrap_or_else(|_| "0".into());
    println!("cargo:rustc-cdylib-link-arg=-Wl,-soname,libspools.so.{major}");
    println!("cargo:rerun-if-changed=build.rs");
}
