//! Compile-time layout check of the C API's structs (docs/windows.md).
//!
//! `build.rs` reads every struct of `include/rungs.h`, has the target's C
//! compiler lay them out (sizeof, _Alignof, offsetof of every field, read
//! back from its assembly), and writes one `const` assertion per number
//! against `size_of`, `align_of` and `offset_of!` of the Rust struct in
//! `src/ffi`. Checking this crate for a target
//! (`cargo check -p rungs-layout-check --target i686-pc-windows-gnu`)
//! therefore fails to compile when C and Rust disagree on that target.
#![no_std]

include!(concat!(env!("OUT_DIR"), "/layout_asserts.rs"));
