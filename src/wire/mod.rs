//! Byte layouts on the wire: event payloads (S7) and transport packets (S8).
//! Every decoder validates its input and never panics.

// The constants of the packet layout are Rust API, not C API: keep them out
// of include/rungs.h (the C-facing ones live in `ffi::transport`).
/// cbindgen:ignore
pub mod packet;
