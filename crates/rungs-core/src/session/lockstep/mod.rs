//! A lockstep session over rungs' own transport (S5, S8, S9, S10): rungs
//! carries the engine's commands, runs the adaptive timing, and paces the
//! frames.
//!
//! One [`LockstepSession`] per machine, sans-IO: the caller feeds datagrams
//! and its local clock (µs), sends what [`LockstepSession::poll_transmit`]
//! writes, and calls [`LockstepSession::advance`] whenever the next frame may
//! be due (`rungs-net`'s `LockstepDriver` does all of that over a UDP socket). The engine
//! submits commands between frames and applies the commands each executed
//! frame hands back; every machine executes the same commands on the same
//! frames. The call protocol is written on [`LockstepSession`].
//!
//! Two session types stand behind that one API, chosen by [`Topology`]
//! (private modules of this one, named by file):
//! - `peer.rs`: links to every other human seat; turns, drops, clock and
//!   checks agreed between the machines. Its sub-states, one concern each
//!   and each owning its data: `turns.rs`, `drops.rs` (with the public
//!   [`agreement`]), `control.rs`, `checksums.rs`, `pings.rs`, `stalls.rs`,
//!   `arrivals.rs`;
//! - `relay/`: one link to a relay that sequences every order and owns the
//!   clock (S10), with its AI orders and replays.
//!
//! `update.rs` is the update loop every caller shares (the `rungs-net`
//! crate wraps it around a socket).

pub mod agreement;
mod arrivals;
mod checksums;
mod control;
mod drops;
mod peer;
mod pings;
mod relay;
mod stalls;
mod turns;
mod update;

use std::net::SocketAddr;

use crate::error::{Error, Result};
use crate::link::{Endpoint, LinkConfig, Transmit};
use crate::report::Measurements;
use crate::timing::{MachineConfig, Output, TimingMachine};
use crate::wire::packet::SessionKey;
#[cfg(any(test, feature = "testing"))]
use crate::wire::turn::Item;

use peer::PeerSession;
use relay::RelaySession;
pub use relay::{OrderKind, OrderReceipt, RelaySettings, DEFAULT_JITTER_TICKS};
pub use update::Wake;

/// How to set up a lockstep session.
#[derive(Debug, Clone)]
pub struct LockstepConfig {
    /// Speed, seats, this machine's seat (required), timing policy.
    pub machine: MachineConfig,
    /// The game's session id, the same on every machine (S8): packets of
    /// another game are refused.
    pub session_id: u32,
    /// The game's key, the same on every machine (S8): it authenticates
    /// every packet of a link without a key of its own in `link_keys`.
    pub key: SessionKey,
    /// Per-pair link keys: `(peer seat, key)` for the link between this
    /// machine and that peer, used instead of `key` (S8). Game setup gives
    /// both ends of each pair the same key and nobody else; then no player
    /// can sign a packet as another, which the single game key (known to
    /// every player) cannot prevent.
    pub link_keys: Vec<(u8, SessionKey)>,
    /// This run's connection epoch (S8, never 0): a machine that restarts
    /// must use a newer one (serial order), e.g. milliseconds of wall-clock
    /// time modulo 2^32.
    pub epoch: u32,
    /// Link tunables.
    pub link: LinkConfig,
    /// Frames between state checksums; 0 for none.
    pub checksum_interval: u32,
    /// Peer-to-peer links, or a relay (S10).
    pub topology: Topology,
    /// `false` (the default): a player whose link is lost for the liveness
    /// timeout (`link.liveness_timeout_us`) or whose machine restarted is
    /// dropped at once (S4.7). `true`: the engine decides, calling
    /// [`LockstepSession::drop_player`] (the survivors still join a drop
    /// another machine started once they lose that player too).
    pub manual_drops: bool,
}

impl LockstepConfig {
    /// A relay-topology session (S10) for `machine` (speed, seats, this
    /// machine's seat: the ticket's), reporting checksums every
    /// `checksum_interval` frames: the fields only peer-to-peer uses are
    /// left at neutral values.
    pub fn relay(
        machine: MachineConfig,
        checksum_interval: u32,
        settings: RelaySettings,
    ) -> LockstepConfig {
        LockstepConfig {
            machine,
            session_id: 0,
            key: SessionKey([0; 16]),
            link_keys: Vec::new(),
            epoch: 1,
            link: LinkConfig::default(),
            checksum_interval,
            topology: Topology::Relay(settings),
            manual_drops: false,
        }
    }
}

/// How a session's commands travel: the same session API either way.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub enum Topology {
    /// A link to every other human seat ([`LockstepSession::add_peer`]),
    /// turns and timing agreed between the machines (this module).
    #[default]
    PeerToPeer,
    /// One link to a relay that sequences every order and owns the clock
    /// (this module's `relay/`); `session_id`, `key`, `link_keys`,
    /// `epoch`, `link` and the timing policy are unused (the relay link has
    /// its own settings, [`crate::relay::relay_link_config`]), there are no
    /// peers to add, and a frame is one relay tick: the relay's tick rate is
    /// the game's frame rate.
    Relay(RelaySettings),
}

/// What the engine should hear about.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SessionEvent {
    /// The timing machine's notices: timing in force changed (also on frame
    /// 0), frame rate changed, a player message (S6), a new master (S4.6).
    Timing(Output),
    /// `seat` left or was dropped; its removal executed on `frame`.
    PlayerRemoved {
        /// The frame its removal executed on.
        frame: u32,
        /// The player's seat.
        seat: u8,
    },
    /// State checksums for `frame` differ: bit `i` of `seats` set for each
    /// seat whose value differs from the lowest reporting seat's.
    Desync {
        /// The frame whose checksums differ.
        frame: u32,
        /// The seats that differ from the lowest reporting seat, a bit mask.
        seats: u32,
    },
    /// Nothing heard from `seat` for the liveness timeout (S8): rungs drops
    /// it (unless [`LockstepConfig::manual_drops`]: then the engine decides).
    LinkLost {
        /// The silent peer's seat.
        seat: u8,
    },
    /// `seat` is heard again.
    LinkRecovered {
        /// The peer's seat.
        seat: u8,
    },
    /// `seat`'s machine restarted (a new connection, S8): its link was
    /// reset, and what it had sent or was owed is gone; a restarted machine
    /// cannot rejoin a running game, so rungs drops it (unless
    /// [`LockstepConfig::manual_drops`]: then the engine does).
    PeerRestarted {
        /// The restarted peer's seat.
        seat: u8,
    },
    /// Peer-to-peer: `mismatch.seat`'s machine speaks another protocol
    /// version than this build (`mismatch` names both; its `Display` reads
    /// `seat 2 speaks wire protocol 5; this build speaks 4`): datagrams from
    /// its address carry rungs' magic but another transport version, or its
    /// authenticated messages another turn layout version. They are dropped
    /// and counted, as any refused input; the game cannot go on with that
    /// player, and the lobby's check ([`crate::ProtocolVersions`]) is what
    /// prevents it. Raised once per seat and version, however many
    /// datagrams come. With `link_lost` it comes right before the
    /// [`LinkLost`](Self::LinkLost) of that seat, when the other transport
    /// version is the latest thing heard from it: the silence is that
    /// mismatch, not a plain timeout.
    ///
    /// The transport version byte is not authenticated: anyone able to
    /// send from that seat's address can raise this event (once per
    /// version), and nothing else — no state changes, nobody is dropped for
    /// it.
    ProtocolMismatch {
        /// Who, which protocol, their version and ours.
        mismatch: crate::link::ProtocolMismatch,
        /// The link to that seat was just lost, and this explains it.
        link_lost: bool,
    },
    /// Behind a relay: the relay refused the order with this id
    /// ([`LockstepSession::submit_order`]); it never runs, and the orders
    /// after it go on. A refused quit leaves the player in the game.
    CommandRefused {
        /// The order's id, from its [`OrderReceipt`].
        id: u64,
        /// Why the relay refused it.
        reason: crate::wire::relay::RefusalReason,
    },
}

/// What [`LockstepSession::advance`] did.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Advance {
    /// Frame `frame` ran; its commands are in [`LockstepSession::executed`].
    Ran {
        /// The frame that ran.
        frame: u32,
    },
    /// The next frame is due at local time `at_us`.
    NotDue {
        /// When the next frame is due, µs on the caller's clock (`now_us`).
        at_us: u64,
    },
    /// The next frame is due but waits for peers' turns, for room on a
    /// link (backpressure) or, before frame 0, for the first clock sample.
    Waiting,
    /// This machine's player has left the game.
    Left,
}

/// A command executed on a frame.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ExecutedCommand {
    /// Who issued it.
    pub seat: u8,
    /// The frame it was tagged for (it executed on the first send frame at or after).
    pub tag: u32,
    /// The engine's bytes.
    pub bytes: Vec<u8>,
}

/// Counters for tools and diagnostics.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct LockstepStats {
    /// Frames that had to wait for peers' turns.
    pub stalled_frames: u64,
    /// Total time spent waiting, µs.
    pub stall_us: u64,
    /// Turn messages sent (one per peer per send frame, more if split).
    pub turn_messages: u64,
    /// Messages from peers that did not decode (never acted on).
    pub malformed_messages: u64,
    /// Desyncs detected.
    pub desyncs: u64,
    /// Items refused by the authority checks (S4.7), identically on every
    /// machine: a removal of another seat outside a drop, a timing event
    /// from a seat that was not the master.
    pub refused_items: u64,
    /// Messages refused on receipt: a turn outside the schedule or beyond
    /// the bounds (S8), a relay from a machine this one did not ask or
    /// outside a drop it joined, a relay request to a machine that is not
    /// in that drop.
    pub refused_messages: u64,
    /// Frames that waited because a link could not take the next turn.
    pub backpressure_waits: u64,
}

/// Check `config.link_keys` against the seats of `machine`: each names
/// another human seat and is not all zero. Both topologies refuse a bad one
/// (a relay session uses none, but a wrong one is still a caller's error).
fn check_link_keys(config: &LockstepConfig, machine: &TimingMachine, local_seat: u8) -> Result<()> {
    for (seat, key) in &config.link_keys {
        let valid = machine.seats().is_human(*seat) && *seat != local_seat;
        if !valid {
            return Err(Error::invalid_value(
                "a link_keys entry's seat",
                *seat,
                "another human seat",
            ));
        }
        if key.is_zero() {
            return Err(Error::invalid_value(
                "a link_keys entry's key",
                "all zero",
                "a secret key",
            ));
        }
    }
    Ok(())
}

/// One machine's lockstep session: the peer-to-peer session or the relay
/// session behind one API ([`Topology`] chooses at [`new`](Self::new)).
///
/// Sans-IO: it never reads a clock, a socket or a thread. The caller owns
/// the socket and the clock and passes `now_us`, its local monotonic clock
/// in µs, into every call that needs the time.
///
/// # The call protocol
///
/// The methods come in five kinds:
///
/// - **Setup**, before the first `advance`: [`add_peer`](Self::add_peer)
///   for every other human seat (peer-to-peer; a relay session has none),
///   [`peers_without_address`](Self::peers_without_address) to check.
/// - **Inputs from the network and the clock**, named `handle_*`:
///   [`handle_datagram`](Self::handle_datagram) for every datagram the
///   socket received, [`handle_timeout`](Self::handle_timeout) when the
///   time [`poll_timeout`](Self::poll_timeout) gave has come.
/// - **Inputs from the engine**: [`submit_command`](Self::submit_command),
///   [`submit_order`](Self::submit_order),
///   [`submit_checksum`](Self::submit_checksum), [`leave`](Self::leave),
///   [`drop_player`](Self::drop_player), the AI calls behind a relay. They
///   take effect at once or fail with nothing changed.
/// - **The frame step**: [`advance`](Self::advance) runs the next frame if
///   it is due and ready ([`Advance`] says which), and its commands are
///   then in [`executed`](Self::executed) (and, behind a relay,
///   [`ephemeral`](Self::ephemeral)) until the next frame runs.
/// - **Outputs**, named `poll_*`: [`poll_transmit`](Self::poll_transmit)
///   writes the next datagram to send, [`poll_event`](Self::poll_event)
///   hands out the next [`SessionEvent`], and
///   [`poll_timeout`](Self::poll_timeout) says when to call again.
///   Getters (`&self`) read state and never change it.
///
/// One turn of the engine's loop is: feed every datagram received, call
/// `handle_timeout`, `advance` (apply `executed` when a frame ran), then
/// drain `poll_transmit` until it returns `None` and send each datagram,
/// drain `poll_event` until `None`, and sleep until `poll_timeout` or the
/// next datagram. [`update`](Self::update) does the middle of it, and
/// `rungs-net`'s `LockstepDriver` the whole loop over a UDP socket. Outputs accumulate
/// until polled: a caller that does not drain them after every input
/// sends late, and events wait in a queue.
///
/// **Time.** `now_us` is the caller's local monotonic clock, the same clock
/// for every call of one session, and never behind a value already passed
/// to it: pacing, stalls and the link timers measure intervals between
/// calls, so a clock that steps back (wall-clock time) misreads them. It
/// need not agree with any other machine's clock: the session derives the
/// shared schedule from clock samples (S9). Call again no later than
/// [`poll_timeout`](Self::poll_timeout) says; earlier is harmless.
///
/// **Ownership.** The session owns what it was given: a submitted command's
/// bytes are copied in. What it hands out it lends: `executed`,
/// `ephemeral` and the getters borrow the session until the next call that
/// changes it; a datagram is written into the caller's buffer; an event is
/// the caller's once polled. Errors are values ([`Error`]): a failed call
/// changes nothing, and a frame that starts runs whole.
pub struct LockstepSession {
    kind: Kind,
}

/// The two session types. Each public method dispatches once, here.
enum Kind {
    PeerToPeer(Box<PeerSession>),
    Relay(Box<RelaySession>),
}

/// `$body` with `$s` bound to whichever session `$kind` holds: for the
/// calls both session types answer the same way.
macro_rules! each {
    ($kind:expr, $s:ident => $body:expr) => {
        match $kind {
            Kind::PeerToPeer($s) => $body,
            Kind::Relay($s) => $body,
        }
    };
}

impl LockstepSession {
    /// A session on the eve of frame 0, at local time `now_us`. Add every
    /// other human seat's address with [`add_peer`](Self::add_peer) before
    /// the first [`advance`](Self::advance).
    pub fn new(config: &LockstepConfig, now_us: u64) -> Result<LockstepSession> {
        let local_seat = config.machine.local_seat.ok_or(Error::invalid_value(
            "machine.local_seat",
            "none",
            "this machine's seat (a lockstep session plays one)",
        ))?;
        let kind = match &config.topology {
            Topology::PeerToPeer => {
                Kind::PeerToPeer(Box::new(PeerSession::new(config, local_seat, now_us)?))
            }
            Topology::Relay(settings) => Kind::Relay(Box::new(RelaySession::new(
                config, settings, local_seat, now_us,
            )?)),
        };
        Ok(LockstepSession { kind })
    }

    /// A session that replays `log` at local time `now_us`: `config` as for
    /// a relay-topology session of that match (its seats, the local seat — a
    /// human seat of the match, whose view the engine takes — and its
    /// checksum interval must be the log's; the relay settings and links are
    /// not used). `Invalid` when they differ from the log's.
    pub fn replay(
        config: &LockstepConfig,
        log: &crate::relay::TurnLog,
        now_us: u64,
    ) -> Result<LockstepSession> {
        Ok(LockstepSession {
            kind: Kind::Relay(Box::new(RelaySession::replay(config, log, now_us)?)),
        })
    }

    /// Bind the human `seat` to `address` (before frame 0).
    pub fn add_peer(&mut self, seat: u8, address: SocketAddr, now_us: u64) -> Result<()> {
        match &mut self.kind {
            Kind::PeerToPeer(s) => s.add_peer(seat, address, now_us),
            Kind::Relay(_) => Err(Error::State(
                "a relay-topology session has no peers to add: the relay connects the seats",
            )),
        }
    }

    /// The human seats other than this one that have no address yet: what a
    /// forgotten [`add_peer`](Self::add_peer) leaves (none behind a relay).
    pub fn peers_without_address(&self) -> u32 {
        match &self.kind {
            Kind::PeerToPeer(s) => s.peers_without_address(),
            Kind::Relay(_) => 0,
        }
    }

    /// The largest command [`submit_command`](Self::submit_command) takes:
    /// what one turn carries beside its headers peer-to-peer, one relay
    /// order behind a relay.
    pub fn max_command_bytes(&self) -> usize {
        match &self.kind {
            Kind::PeerToPeer(s) => s.max_command_bytes(),
            Kind::Relay(_) => crate::wire::relay::MAX_ORDER_BYTES,
        }
    }

    /// Issue a command (the engine's bytes) now: it goes out with this
    /// machine's next turn. Returns the frame it is forecast to execute on or
    /// after (S5). Nothing changes when it fails: `Error::Full` when this
    /// machine's next turn cannot take it (S8 backpressure: run a frame, or
    /// send fewer or smaller commands).
    pub fn submit_command(&mut self, bytes: &[u8]) -> Result<u32> {
        each!(&mut self.kind, s => s.submit_command(bytes))
    }

    /// Submit an order of `kind`: its id (for [`SessionEvent::CommandRefused`])
    /// and the earliest frame it can run on. Behind a relay a command waits
    /// for the relay's judgement (it may still be refused: the seat's queue
    /// is full, the match's tick limit); a quit is this player's game order
    /// for leaving, run on the frame the seat is removed; an ephemeral order
    /// goes out once, now. Peer-to-peer a command is
    /// [`submit_command`](Self::submit_command) (id 0: refusals there are
    /// immediate errors), a quit a command and [`leave`](Self::leave), and
    /// an ephemeral order is refused (`State`). Errors as `submit_command`.
    pub fn submit_order(&mut self, kind: OrderKind, bytes: &[u8]) -> Result<OrderReceipt> {
        each!(&mut self.kind, s => s.submit_order(kind, bytes))
    }

    /// Behind a relay: an order the engine's AI decided for the AI `seat`
    /// with the state after the last frame run, i.e. at tick `F + 1`. Every
    /// machine computes the same AI, so the order stays local: it executes
    /// with the commands of tick `F + 1 + ai_order_delay` (the match setup's,
    /// 0–8, S10), delivered like a human order with that seat. Returns that
    /// tick. `State` peer-to-peer (the engine runs its AI itself there) and
    /// before the relay's Welcome; `Invalid` for a seat that is not
    /// an AI seat of the match or an order over 512 bytes (as a human
    /// order); `Full` beyond 4096 orders waiting.
    pub fn submit_ai_order(&mut self, seat: u8, bytes: &[u8]) -> Result<u32> {
        self.relay_ai()?.submit_ai_order(seat, bytes)
    }

    /// Behind a relay: an order the engine's AI decided for the AI `seat`
    /// at tick `decided` (with the state before that tick ran). It runs on
    /// tick `decided + ai_order_delay` (returned) on every machine.
    /// `State` "late" when that tick already ran here (begin the decision
    /// first: see [`begin_ai_decision`](Self::begin_ai_decision)), before the
    /// Welcome, or peer-to-peer; `Invalid` for a seat that is not an
    /// AI seat or an order over 512 bytes; `Full` beyond 4096 orders waiting.
    pub fn submit_ai_order_at(&mut self, seat: u8, decided: u32, bytes: &[u8]) -> Result<u32> {
        self.relay_ai()?.submit_ai_order_at(seat, decided, bytes)
    }

    /// Behind a relay: the engine's AI began a decision for `seat` on tick
    /// `decided` (call it from the game loop, before frame `decided` runs,
    /// on every machine). Its due tick, `decided + ai_order_delay`, does not
    /// run here until [`end_ai_decision`](Self::end_ai_decision): the
    /// computation may take as long as it takes, on any thread count, and
    /// its orders still run on the same tick everywhere. Errors as
    /// [`submit_ai_order_at`](Self::submit_ai_order_at); `Full` with 256
    /// decisions open; `State` for a decision begun twice.
    pub fn begin_ai_decision(&mut self, seat: u8, decided: u32) -> Result<u32> {
        self.relay_ai()?.begin_ai_decision(seat, decided)
    }

    /// Behind a relay: the decision of `seat` at `decided` is in (submit its
    /// orders with [`submit_ai_order_at`](Self::submit_ai_order_at) first).
    /// `State` when no such decision was begun.
    pub fn end_ai_decision(&mut self, seat: u8, decided: u32) -> Result<()> {
        self.relay_ai()?.end_ai_decision(seat, decided)
    }

    /// The relay session, for the calls only it answers (AI orders).
    fn relay_ai(&mut self) -> Result<&mut RelaySession> {
        match &mut self.kind {
            Kind::Relay(s) => Ok(s),
            Kind::PeerToPeer(_) => Err(Error::State(
                "AI orders go through the session only behind a relay; peer-to-peer the engine runs its AI itself",
            )),
        }
    }

    /// Whether [`submit_checksum`](Self::submit_checksum) compares the
    /// state after `frame`: peer-to-peer when `frame` is a multiple of the
    /// checksum interval; behind a relay, which compares the state *before*
    /// every interval-th tick, when `frame + 1` is.
    pub fn is_checksum_frame(&self, frame: u32) -> bool {
        each!(&self.kind, s => s.is_checksum_frame(frame))
    }

    /// The engine's state checksum after `frame` executed. Only frames that
    /// are checksum frames ([`is_checksum_frame`](Self::is_checksum_frame))
    /// are compared; others are refused (`Invalid`).
    pub fn submit_checksum(&mut self, frame: u32, checksum: u64) -> Result<()> {
        each!(&mut self.kind, s => s.submit_checksum(frame, checksum))
    }

    /// Behind a relay: the state checksum before frame 0 (the initial
    /// state), compared like the others. `State` peer-to-peer (the
    /// machines compare states after frames there); `Invalid` with
    /// checksums off.
    pub fn submit_initial_checksum(&mut self, checksum: u64) -> Result<()> {
        match &mut self.kind {
            Kind::Relay(s) => s.submit_initial_checksum(checksum),
            Kind::PeerToPeer(_) => Err(Error::State(
                "peer-to-peer the machines compare the state after frames, not the initial state",
            )),
        }
    }

    /// Leave the game: the removal of this seat is a command like any other;
    /// keep calling `advance` until it returns [`Advance::Left`].
    pub fn leave(&mut self) -> Result<()> {
        each!(&mut self.kind, s => s.leave())
    }

    /// Drop `seat`, whose machine no longer answers (see the peer-to-peer
    /// session's drops); rungs does it by itself unless
    /// [`LockstepConfig::manual_drops`]. Every remaining machine follows
    /// once it loses that player too. Dropping a seat already being dropped
    /// changes nothing. `State` behind a relay (the relay drops a seat).
    pub fn drop_player(&mut self, seat: u8) -> Result<()> {
        match &mut self.kind {
            Kind::PeerToPeer(s) => s.drop_player(seat),
            Kind::Relay(_) => Err(Error::State(
                "a relay-topology session drops no one: the relay drops a seat after its reconnect grace",
            )),
        }
    }

    /// Validate and act on one datagram from `source` at local time `now_us`.
    pub fn handle_datagram(&mut self, now_us: u64, source: SocketAddr, datagram: &[u8]) {
        each!(&mut self.kind, s => s.handle_datagram(now_us, source, datagram))
    }

    /// Fire transport timers and send clock pings that are due.
    pub fn handle_timeout(&mut self, now_us: u64) {
        each!(&mut self.kind, s => s.handle_timeout(now_us))
    }

    /// The earliest local time at which something is due: a transport timer,
    /// a clock ping, or the next frame (unless it is waiting for turns: then
    /// an arriving datagram is what can release it). After leaving only the
    /// transport's timers remain (its last acks), never a time in the past.
    pub fn poll_timeout(&mut self) -> Option<u64> {
        each!(&mut self.kind, s => s.poll_timeout())
    }

    /// Write the next datagram to send into `buf`.
    pub fn poll_transmit(&mut self, now_us: u64, buf: &mut [u8]) -> Option<Transmit> {
        each!(&mut self.kind, s => s.poll_transmit(now_us, buf))
    }

    /// The next event for the engine.
    pub fn poll_event(&mut self) -> Option<SessionEvent> {
        each!(&mut self.kind, s => s.poll_event())
    }

    /// Commands executed by the latest frame [`advance`](Self::advance) ran,
    /// in execution order.
    pub fn executed(&self) -> &[ExecutedCommand] {
        each!(&self.kind, s => s.executed())
    }

    /// The ephemeral orders that came with the frame that just ran (relay
    /// topology): (seat, bytes) as commands tagged with the frame. Not game
    /// state: a machine catching up never sees them.
    pub fn ephemeral(&self) -> &[ExecutedCommand] {
        match &self.kind {
            Kind::Relay(s) => s.ephemeral(),
            Kind::PeerToPeer(_) => &[],
        }
    }

    /// The seats the next frame is waiting for (their turns have not all
    /// arrived), as a bit mask: what a "waiting for players" screen shows.
    pub fn waiting_for(&self) -> u32 {
        each!(&self.kind, s => s.waiting_for())
    }

    /// Run the next frame if it is due at local time `now_us` and ready.
    /// Once a frame starts it runs whole: an error leaves no frame half run.
    pub fn advance(&mut self, now_us: u64) -> Result<Advance> {
        each!(&mut self.kind, s => s.advance(now_us))
    }

    /// The timing machine (read-only): timing in force, target, status.
    /// Behind a relay it stays idle: see [`timing_status`](Self::timing_status).
    pub fn machine(&self) -> &TimingMachine {
        each!(&self.kind, s => s.machine())
    }

    /// The timing in force and its target, for a UI or a log, and whether
    /// this machine is the master. Peer-to-peer: the timing machine's
    /// status. Behind a relay: the relay's timing plan (in force at the
    /// next frame, and the latest announced as the target); the relay is
    /// the master (`master` is `None`: no seat), and the policy's own state
    /// (calibration, count, descent) is the relay's, not shown here.
    pub fn timing_status(&self) -> (crate::timing::Status, bool) {
        each!(&self.kind, s => s.timing_status())
    }

    /// The endpoint (read-only): per-link round trips and diagnostics.
    /// Behind a relay it has no links (the relay link is the
    /// [`relay_client`](Self::relay_client)'s).
    pub fn endpoint(&self) -> &Endpoint {
        each!(&self.kind, s => s.endpoint())
    }

    /// Re-bind `seat` to `address` (Rust callers that learn of a move out
    /// of band; a move is also followed on an authenticated packet, S8).
    pub fn set_peer_address(&mut self, seat: u8, address: SocketAddr) -> Result<()> {
        match &mut self.kind {
            Kind::PeerToPeer(s) => s.set_peer_address(seat, address),
            Kind::Relay(_) => Err(Error::State("a relay-topology session has no peers")),
        }
    }

    /// The relay client, in the relay topology (connection, horizon,
    /// counters); `None` peer-to-peer.
    pub fn relay_client(&self) -> Option<&crate::relay::RelayClient> {
        match &self.kind {
            Kind::Relay(s) => Some(s.client()),
            Kind::PeerToPeer(_) => None,
        }
    }

    /// Whether this session replays a turn log.
    pub fn is_replay(&self) -> bool {
        match &self.kind {
            Kind::Relay(s) => s.is_replay(),
            Kind::PeerToPeer(_) => false,
        }
    }

    /// This machine's measurements: the engine adds its frame work here.
    pub fn measurements(&mut self) -> &mut Measurements {
        each!(&mut self.kind, s => s.measurements())
    }

    /// The latest frame run, if any.
    pub fn frame(&self) -> Option<u32> {
        each!(&self.kind, s => s.frame())
    }

    /// Counters.
    pub fn stats(&self) -> LockstepStats {
        each!(&self.kind, s => s.stats())
    }

    /// Whether this player has left (its removal executed).
    pub fn has_left(&self) -> bool {
        each!(&self.kind, s => s.has_left())
    }

    /// The clock offset applied to reach reference time, µs.
    pub fn clock_offset_us(&self) -> i64 {
        each!(&self.kind, s => s.clock_offset_us())
    }

    /// Bytes this session holds on behalf of remote input and the engine:
    /// queued items, turns being assembled or held ahead, turns kept for
    /// relaying, the outbox, waiting control messages. S8 requires it
    /// bounded whatever peers send.
    pub fn held_bytes(&self) -> usize {
        each!(&self.kind, s => s.held_bytes())
    }

    /// What a *modified client* can do with its own key: put any item in
    /// its own turns and send any message on its own links. The simulator's
    /// fault injection drives attacks through this; an honest game never
    /// calls it. Every other machine must refuse what it should not obey
    /// (S4.7) and stay bounded (S8). Built only with the `testing` cargo
    /// feature (never in what ships). Behind a relay there are no turns nor
    /// peer links to abuse: the relay's own attack tool covers that side.
    #[cfg(any(test, feature = "testing"))]
    pub fn tamper(&mut self) -> Tamper<'_> {
        Tamper {
            session: match &mut self.kind {
                Kind::PeerToPeer(s) => Some(s),
                Kind::Relay(_) => None,
            },
        }
    }
}

impl std::fmt::Debug for LockstepSession {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let topology = match &self.kind {
            Kind::PeerToPeer(_) => "peer-to-peer",
            Kind::Relay(_) => "relay",
        };
        f.debug_struct("LockstepSession")
            .field("topology", &topology)
            .field("local_seat", &each!(&self.kind, s => s.local_seat()))
            .field("frame", &self.frame())
            .finish_non_exhaustive()
    }
}

/// See [`LockstepSession::tamper`].
#[cfg(any(test, feature = "testing"))]
pub struct Tamper<'a> {
    /// `None` behind a relay.
    session: Option<&'a mut PeerSession>,
}

#[cfg(any(test, feature = "testing"))]
impl Tamper<'_> {
    /// Put `item` into this machine's next turn, unchecked (behind a relay
    /// there is no turn: nothing happens).
    pub fn queue_item(&mut self, item: Item) {
        if let Some(session) = self.session.as_deref_mut() {
            session.tamper_queue_item(item);
        }
    }

    /// Send raw `message` on the link to `seat` (`State` behind a relay).
    pub fn send(&mut self, seat: u8, message: &[u8]) -> Result<()> {
        match self.session.as_deref_mut() {
            Some(session) => session.tamper_send(seat, message),
            None => Err(Error::State("a relay-topology session has no peer links")),
        }
    }

    /// This machine's latest send frame and its tag (`None` behind a relay).
    pub fn last_turn(&self) -> Option<(u32, u32)> {
        self.session.as_deref()?.last_turn()
    }

    /// Largest link message.
    pub fn max_message_bytes(&self) -> usize {
        match self.session.as_deref() {
            Some(session) => session.endpoint().config().link.max_message_bytes(),
            None => 0,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::link::{Protocol, ProtocolMismatch};
    use crate::wire::packet::MAX_PACKET_BYTES;
    use crate::wire::turn::{MSG_PING, TURN_LAYOUT_VERSION};

    fn address(seat: u8) -> SocketAddr {
        SocketAddr::from(([10, 0, 0, seat + 1], 4000))
    }

    /// Play both machines for `ms` milliseconds from `*now_us`, carrying
    /// their datagrams; seat 0's events are returned.
    fn play(machines: &mut [LockstepSession; 2], now_us: &mut u64, ms: u64) -> Vec<SessionEvent> {
        let mut buf = [0u8; MAX_PACKET_BYTES];
        let mut events = Vec::new();
        for _ in 0..ms {
            *now_us += 1_000;
            for seat in 0..2 {
                machines[seat].update(*now_us, |_, _| {}).unwrap();
                while let Some(t) = machines[seat].poll_transmit(*now_us, &mut buf) {
                    let from = address(seat as u8);
                    machines[1 - seat].handle_datagram(*now_us, from, &buf[..t.len]);
                }
            }
            while let Some(event) = machines[0].poll_event() {
                events.push(event);
            }
        }
        events
    }

    #[test]
    fn messages_of_another_turn_layout_are_reported_once_per_version() {
        let mut machines = [0u8, 1].map(|seat| {
            let config = LockstepConfig {
                machine: MachineConfig::adaptive(30, vec![true, true], Some(seat)),
                session_id: 9,
                key: SessionKey([3; 16]),
                link_keys: Vec::new(),
                epoch: 1,
                link: LinkConfig::default(),
                checksum_interval: 0,
                topology: Topology::PeerToPeer,
                manual_drops: false,
            };
            let mut session = LockstepSession::new(&config, 0).unwrap();
            session.add_peer(1 - seat, address(1 - seat), 0).unwrap();
            session
        });
        let mut now_us = 0;
        play(&mut machines, &mut now_us, 500);
        let malformed_before = machines[0].stats().malformed_messages;
        // Seat 1's machine speaks turn layout 5 (its authenticated link
        // messages say so), three times, then 6 once.
        let ping_of = |version: u8| [&[MSG_PING, version][..], &[0; 8]].concat();
        for version in [5, 5, 5, 6] {
            machines[1].tamper().send(0, &ping_of(version)).unwrap();
        }
        let events = play(&mut machines, &mut now_us, 200);
        let reported: Vec<_> = events
            .iter()
            .filter_map(|e| match e {
                SessionEvent::ProtocolMismatch { mismatch, .. } => Some(*mismatch),
                _ => None,
            })
            .collect();
        let mismatch = |theirs| ProtocolMismatch {
            seat: 1,
            protocol: Protocol::Turn,
            theirs,
            ours: TURN_LAYOUT_VERSION,
        };
        assert_eq!(reported, vec![mismatch(5), mismatch(6)]);
        assert_eq!(
            mismatch(5).to_string(),
            "seat 1 speaks turn protocol 5; this build speaks 4"
        );
        assert_eq!(machines[0].stats().malformed_messages, malformed_before + 4);
        assert!(!events
            .iter()
            .any(|e| matches!(e, SessionEvent::LinkLost { .. })));
    }
}
