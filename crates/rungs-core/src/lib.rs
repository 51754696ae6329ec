//! # rungs-core — the sans-IO core of rungs
//!
//! A lockstep game executes every command on the same frame on every machine.
//! How far ahead commands are scheduled (the *look-ahead*) and how often packets
//! go out (the *send period*) decide input lag and stalls. rungs measures each
//! player's round trips, processing time and waits, and one player (the master)
//! moves the whole game up and down a ladder of ten timing rungs,
//! deterministically, with the frame rate to match.
//!
//! This crate holds every state machine of rungs and nothing else: no
//! sockets, threads, clocks or simulator. Each machine takes `now` and its
//! inputs and returns outputs; the caller owns time and I/O. The socket
//! drivers are the `rungs-net` crate, which serves any [`io::Datagrams`]
//! machine; the C library is the `rungs` crate.
//!
//! ## Quick start
//!
//! Two players of a peer-to-peer lockstep game, their datagrams carried by
//! hand (a game hands them to a socket, or to `rungs-net`'s
//! `LockstepDriver`, which owns one). Each machine calls
//! [`update`](session::LockstepSession::update) from its frame loop with
//! its own clock, hands each received datagram to
//! [`handle_datagram`](session::LockstepSession::handle_datagram) and sends
//! what [`poll_transmit`](session::LockstepSession::poll_transmit) writes.
//! A command submitted on one machine executes on the same frame on both.
//!
//! ```
//! use std::net::SocketAddr;
//!
//! use rungs_core::link::LinkConfig;
//! use rungs_core::session::{LockstepConfig, LockstepSession, Topology};
//! use rungs_core::timing::MachineConfig;
//! use rungs_core::wire::{SessionKey, MAX_PACKET_BYTES};
//!
//! fn address(seat: usize) -> SocketAddr {
//!     SocketAddr::from(([10, 0, 0, seat as u8 + 1], 4000))
//! }
//!
//! # fn main() -> rungs_core::Result<()> {
//! let mut machines = Vec::new();
//! for seat in 0..2u8 {
//!     let config = LockstepConfig {
//!         // 30 frames a second, two human seats, this machine's seat.
//!         machine: MachineConfig::adaptive(30, vec![true, true], Some(seat)),
//!         // The lobby hands every player the session id and key.
//!         session_id: 0x5EED,
//!         key: SessionKey([7; 16]),
//!         link_keys: Vec::new(),
//!         epoch: 1,
//!         link: LinkConfig::default(),
//!         checksum_interval: 64,
//!         topology: Topology::PeerToPeer,
//!         manual_drops: false,
//!     };
//!     let mut session = LockstepSession::new(&config, 0)?;
//!     let other = 1 - usize::from(seat);
//!     session.add_peer(other as u8, address(other), 0)?;
//!     machines.push(session);
//! }
//!
//! machines[0].submit_command(b"move tank 7 to 12,40")?;
//!
//! let mut executed: [Vec<(u32, Vec<u8>)>; 2] = Default::default();
//! let mut buf = [0u8; MAX_PACKET_BYTES];
//! let mut now_us = 0;
//! while executed[1].is_empty() {
//!     now_us += 1_000; // a millisecond of each machine's clock
//!     assert!(now_us < 10_000_000, "the command executes within seconds");
//!     for seat in 0..2 {
//!         let log = &mut executed[seat];
//!         machines[seat].update(now_us, |frame, command| {
//!             log.push((frame, command.bytes.clone()));
//!         })?;
//!         while let Some(datagram) = machines[seat].poll_transmit(now_us, &mut buf) {
//!             machines[1 - seat].handle_datagram(now_us, address(seat), &buf[..datagram.len]);
//!         }
//!     }
//! }
//! // The same command on the same frame on both machines.
//! assert_eq!(executed[0], executed[1]);
//! assert_eq!(executed[0][0].1, b"move tank 7 to 12,40");
//! # Ok(())
//! # }
//! ```
//!
//! ## Where things are
//!
//! Each module is one concept; its names are re-exported at its own level
//! (`rungs_core::wire::SessionKey`, not the file it lives in).
//!
//! - [`session`]: what a game runs. [`LockstepSession`](session::LockstepSession)
//!   (with [`LockstepConfig`](session::LockstepConfig) and
//!   [`Topology`](session::Topology)) carries commands over rungs' own
//!   links, peer to peer or through a relay;
//!   [`EngineSession`](session::EngineSession) serves an engine that keeps
//!   its own command queue and transport.
//! - [`timing`]: the ladder of rungs ([`Timing`](timing::Timing)), the
//!   master's policies ([`PolicyKind`](timing::PolicyKind)) and the
//!   [`TimingMachine`](timing::TimingMachine) composing them on one machine
//!   (configured by [`MachineConfig`](timing::MachineConfig)).
//! - [`report`]: what each machine measures
//!   ([`Measurements`](report::Measurements)) and reports
//!   ([`Report`](report::Report)), and the shared [`Record`](report::Record).
//! - [`link`]: one authenticated, acknowledged link per peer
//!   ([`Link`](link::Link), [`LinkConfig`](link::LinkConfig)) and the
//!   [`Endpoint`](link::Endpoint) holding a machine's links.
//! - [`clock`]: clock offset and frame pacing ([`ClockSync`](clock::ClockSync),
//!   [`FramePacer`](clock::FramePacer)).
//! - [`relay`]: relay-sequenced lockstep: the server ([`Relay`](relay::Relay)),
//!   a player's client ([`RelayClient`](relay::RelayClient)) and the
//!   lobby's tickets ([`relay::ticket`]).
//! - [`wire`]: byte layouts: the session key and packet bounds
//!   ([`SessionKey`](wire::SessionKey),
//!   [`MAX_PACKET_BYTES`](wire::MAX_PACKET_BYTES)), the event payloads
//!   ([`TimingLayout`](wire::TimingLayout),
//!   [`ReportLayout`](wire::ReportLayout)) and the codecs themselves
//!   ([`wire::packet`], [`wire::turn`], [`wire::relay`]).
//! - [`io`]: the seam every driver calls, [`Datagrams`](io::Datagrams).
//! - [`rng`]: [`SplitMix64`](rng::SplitMix64), the seeded generator.
//! - [`error`]: [`Error`] and [`Result`], and [`InvalidArgument`] with its
//!   [`Got`] (what a refused argument was), also at the root.
//!
//! **Section numbers.** Comments and docs throughout cite `S0`–`S10` (and
//! `S4.1`–`S4.7`): they are the sections of `docs/model.md` in the
//! repository, the model rungs implements in its own words. Points the model
//! leaves open are decided in `docs/decisions.md`.

#![deny(unsafe_op_in_unsafe_fn)]
#![warn(missing_docs, unreachable_pub)]

pub mod error;

pub mod clock;
pub mod io;
pub mod link;
pub mod relay;
pub mod report;
pub mod rng;
pub mod session;
pub mod timing;
pub mod wire;

pub use error::{Error, Got, InvalidArgument, Result};
pub use wire::{protocol_versions, ProtocolVersions};
