//! Generates `include/rungs.h` from the Rust sources with cbindgen.
//!
//! The header is committed; the test command checks that a fresh build leaves
//! it unchanged (`git diff --exit-code include/`). It is rewritten only when
//! its text changes, so builds do not churn its timestamp.

use std::path::PathBuf;

fn main() {
    let crate_dir =
        PathBuf::from(std::env::var("CARGO_MANIFEST_DIR").expect("cargo sets CARGO_MANIFEST_DIR"));
    println!("cargo:rerun-if-changed=src");
    println!("cargo:rerun-if-changed=cbindgen.toml");
    println!("cargo:rerun-if-changed=build.rs");

    let config = cbindgen::Config::from_file(crate_dir.join("cbindgen.toml"))
        .expect("cbindgen.toml must parse");
    // Only the C API's own files, starting at src/ffi/mod.rs and following
    // its `mod` lines: constants elsewhere in the crate (ladder limits,
    // policy thresholds) are Rust API, not C API.
    let builder = cbindgen::Builder::new()
        .with_config(config)
        .with_src(crate_dir.join("src").join("ffi").join("mod.rs"));
    let bindings = match builder.generate() {
        Ok(bindings) => bindings,
        Err(e) => panic!("cbindgen could not generate include/rungs.h: {e}"),
    };
    let mut text = Vec::new();
    bindings.write(&mut text);
    let header = crate_dir.join("include").join("rungs.h");
    let current = std::fs::read(&header).unwrap_or_default();
    if current != text {
        std::fs::create_dir_all(crate_dir.join("include")).expect("create include/");
        std::fs::write(&header, &text).expect("write include/rungs.h");
    }
}
