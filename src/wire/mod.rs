//! Byte layouts on the wire: event payloads (S7) and transport packets (S8).
//! Every decoder validates its input and never panics.

pub mod events;
pub mod packet;
pub mod turn;
