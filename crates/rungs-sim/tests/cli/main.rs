//! The `rungs-sim` tool run as a user runs it: its flags, outputs, scenarios
//! and relay games.
//!
//! One test binary for many files: each file is a module, the helpers
//! they share are modules here too.

mod rungs_sim_cli;
mod rungs_sim_relay;
