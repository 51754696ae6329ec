//! The `rungs-relay` binary run as an operator runs it: over UDP, its admin
//! socket, restarts from its journal, lockstep sessions playing through it.
//!
//! One test binary for many files: each file is a module, the helpers
//! they share are modules here too.

mod relay_process;

mod lockstep_relay_udp;
mod relay_admin;
mod relay_operations;
mod relay_restart_udp;
mod relay_udp;
