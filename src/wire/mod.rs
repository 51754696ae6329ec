//! Byte layouts on the wire: event payloads (S7) and transport packets (S8).
//! Every decoder validates its input and never panics.

/// (Rust-side payload codecs; the C header gets `RUNGS_`-prefixed names from `ffi::payload`.)
pub mod events;
