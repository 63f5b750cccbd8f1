//! The committed header, include/spools.h, is exactly what cbindgen generates from the
//! crate: a change to the C interface that did not regenerate it fails here. Regenerate
//! with `SPOOLS_BLESS=1 cargo test -p spools-c --test header`.

use std::path::Path;

#[test]
fn committed_header_is_what_cbindgen_generates() {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR"));
    let config = cbindgen::Config::from_file(dir.join("cbindgen.toml")).expect("cbindgen.toml");
    let bindings = cbindgen::Builder::new()
        .with_crate(dir)
        .with_config(config)
        .generate()
        .expect("cbindgen generates the header");
    let mut generated = Vec::new();
    bindings.write(&mut generated);
    let path = dir.join("include/spools.h");
    if std::env::var_os("SPOOLS_BLESS").is_some_and(|v| v == "1") {
        std::fs::write(&path, &generated).expect("write include/spools.h");
    }
    let committed = std::fs::read(&path).unwrap_or_default();
    assert!(
        committed == generated,
        "include/spools.h differs from what cbindgen generates from crates/spools-c/src; \
         regenerate it with `SPOOLS_BLESS=1 cargo test -p spools-c --test header` and \
         commit it"
    );
}
