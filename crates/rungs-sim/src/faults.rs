//! Fault injection for simulated games: the faults real games meet —
//! crashes (several at once, in the middle of a turn), quits, command
//! bursts, restarts, address changes — and a *modified client* that tries
//! every attack on the lockstep protocol (S4.7, S8). [`super::run_game`]
//! applies them on the frames they name, or crashes and quits at moments of
//! game time ([`TimedFault`]); the game report says whether the honest
//! machines stayed sound.

use rungs_core::error::{Error, Result};
use rungs_core::session::LockstepSession;
use rungs_core::timing::{Timing, TimingEvent};
use rungs_core::wire::turn::{self, Item, MAX_TURN_PARTS};

/// Byte 0 of every command a modified client forges in another's name: an
/// honest machine that executes one has obeyed a forgery.
pub const FORGED_MARK: u8 = 0xEE;

/// One fault, applied when `seat`'s machine has run frame `frame`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Fault {
    /// The machine vanishes. With `mid_turn`, it vanishes while sending the
    /// turn of `frame` (which must be a send frame for that to bite): the
    /// k-th peer (in seat order) gets only the first k packets of it, so
    /// the peers hold different parts of a split turn.
    Crash {
        seat: u8,
        frame: u32,
        mid_turn: bool,
    },
    /// The player quits (its removal is a command).
    Quit { seat: u8, frame: u32 },
    /// The player issues `commands` commands of `bytes` bytes at once; the
    /// ones the session refuses (backpressure) are not counted as issued.
    Burst {
        seat: u8,
        frame: u32,
        commands: u32,
        bytes: u16,
    },
    /// The machine restarts: a new session (a new run, with the same
    /// connection epoch: only its nonce differs) on the same address. It cannot rejoin the running game; its peers must
    /// see the restart (and drop it) rather than truncate its messages.
    Restart { seat: u8, frame: u32 },
    /// The machine's address changes (NAT rebinding) and stays changed; its
    /// peers follow it on its next authenticated packet.
    Move { seat: u8, frame: u32 },
    /// The machine is a modified client and tries `attack`.
    Attack {
        seat: u8,
        frame: u32,
        attack: Attack,
    },
}

impl Fault {
    /// The machine the fault happens on.
    pub fn seat(&self) -> u8 {
        match *self {
            Fault::Crash { seat, .. }
            | Fault::Quit { seat, .. }
            | Fault::Burst { seat, .. }
            | Fault::Restart { seat, .. }
            | Fault::Move { seat, .. }
            | Fault::Attack { seat, .. } => seat,
        }
    }

    /// The frame it happens after.
    pub fn frame(&self) -> u32 {
        match *self {
            Fault::Crash { frame, .. }
            | Fault::Quit { frame, .. }
            | Fault::Burst { frame, .. }
            | Fault::Restart { frame, .. }
            | Fault::Move { frame, .. }
            | Fault::Attack { frame, .. } => frame,
        }
    }

    /// Whether the machine is gone from the game afterwards.
    pub fn ends_machine(&self) -> bool {
        matches!(self, Fault::Crash { .. } | Fault::Restart { .. })
    }
}

/// A crash or a quit placed in game time rather than after a frame: it
/// happens whatever the machine is doing, also in the middle of a stall
/// (another drop's, say), when no frame runs. [`super::run_game`] applies it
/// at `at_ms` milliseconds after the game starts.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct TimedFault {
    pub seat: u8,
    pub at_ms: u64,
    pub kind: TimedKind,
}

/// What a [`TimedFault`] does.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum TimedKind {
    /// The machine vanishes.
    Crash,
    /// The player quits (its removal is a command; the machine runs on
    /// until it executes).
    Quit,
}

/// What a modified client tries. The victim is the next seat after the
/// attacker (`(attacker + 1) % players`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Attack {
    /// A removal item naming the victim, in the attacker's own turn.
    RemoveOther,
    /// A relay of a turn the victim never sent, to every other machine,
    /// for the victim's next send frame, with a forged command.
    ForgeRelay,
    /// A TIMING item (10/250 at 1 fps) from a seat that is not the master.
    Timing,
    /// Endless parts of a turn that never completes (1,000 parts per attack).
    FloodParts,
    /// Complete turns for send frames far in the future.
    FarFutureTag,
    /// Re-send datagrams captured earlier (the game runner does the
    /// capturing; see [`super::run_game`]).
    Replay,
}

impl Attack {
    /// Every attack, for soaks and tests.
    pub const ALL: [Attack; 6] = [
        Attack::RemoveOther,
        Attack::ForgeRelay,
        Attack::Timing,
        Attack::FloodParts,
        Attack::FarFutureTag,
        Attack::Replay,
    ];

    /// Its name on the command line.
    pub fn name(self) -> &'static str {
        match self {
            Attack::RemoveOther => "remove",
            Attack::ForgeRelay => "relay",
            Attack::Timing => "timing",
            Attack::FloodParts => "flood",
            Attack::FarFutureTag => "future",
            Attack::Replay => "replay",
        }
    }

    /// The attack named `name`.
    pub fn from_name(name: &str) -> Option<Attack> {
        Attack::ALL.iter().copied().find(|a| a.name() == name)
    }
}

/// A command forged in `victim`'s name.
fn forged_command(victim: u8) -> Vec<u8> {
    vec![FORGED_MARK, victim, 0, 0, 0]
}

/// Carry out `attack` from `session` (seat `attacker`) against the game's
/// other `players`. [`Attack::Replay`] needs the network and is done by the
/// runner.
pub fn attack(
    session: &mut LockstepSession,
    attacker: u8,
    players: u8,
    attack: Attack,
) -> Result<()> {
    let victim = (attacker + 1) % players;
    let others: Vec<u8> = (0..players).filter(|p| *p != attacker).collect();
    let (last_send, last_tag) = session
        .tamper()
        .last_turn()
        .ok_or(Error::State("an attack needs a turn sent first"))?;
    let period = u32::from(session.machine().timing().send_period());
    let max = session.tamper().max_message_bytes();
    let mut tamper = session.tamper();
    match attack {
        Attack::RemoveOther => tamper.queue_item(Item::Removal(victim)),
        Attack::Timing => tamper.queue_item(Item::Timing(TimingEvent {
            target: Timing::new(10, 250)?,
            fps: 1,
        })),
        Attack::ForgeRelay => {
            let send_frame = last_send + period;
            let parts = turn::encode_turn(
                send_frame,
                last_tag + period,
                &[Item::Command(forged_command(victim))],
                &[],
                max - turn::RELAY_HEADER_BYTES,
            )?;
            for peer in others.iter().copied().filter(|p| *p != victim) {
                for part in &parts {
                    let _ = tamper.send(peer, &turn::encode_relay(victim, part));
                }
            }
        }
        Attack::FloodParts => {
            // Parts of one turn that never completes (index 0..31 of 32,
            // over and over), 1 KB each, for a send frame far ahead. (Parts
            // for the attacker's *own next* turns would only stall the game
            // on the attacker itself, as withholding turns does; the engine
            // drops such a player.)
            let filler = Item::Command(vec![FORGED_MARK; max - turn::TURN_HEADER_BYTES - 3]);
            let frame = last_send + 10_000 * period;
            let mut part =
                turn::encode_turn(frame, frame + (last_tag - last_send), &[filler], &[], max)?
                    .remove(0);
            part[11] = MAX_TURN_PARTS;
            for n in 0..1000u32 {
                part[10] = (n % u32::from(MAX_TURN_PARTS - 1)) as u8;
                for peer in &others {
                    let _ = tamper.send(*peer, &part);
                }
            }
        }
        Attack::FarFutureTag => {
            for n in 0..200u32 {
                let frame = last_send + 100_000 + n * period;
                let parts = turn::encode_turn(
                    frame,
                    frame + 5,
                    &[Item::Command(vec![FORGED_MARK; 1000])],
                    &[],
                    max,
                )?;
                for peer in &others {
                    for part in &parts {
                        let _ = tamper.send(*peer, part);
                    }
                }
            }
        }
        Attack::Replay => {}
    }
    Ok(())
}
