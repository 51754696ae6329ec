//! A lockstep game on an instant, in-memory network, for measuring what one
//! frame costs: N real [`LockstepSession`]s whose datagrams go straight from
//! one session's `poll_transmit` into the addressee's `handle_datagram`
//! through one reused buffer. No delay, no loss, one shared clock: nothing
//! but the sessions' own work (turns, acks, clock pings, reports, timing,
//! packets built, tagged, validated and delivered) is measured, and the
//! harness itself allocates nothing once built (`tests/lockstep_no_alloc.rs`,
//! `benches/lockstep_frame.rs`).

use std::net::SocketAddr;

use rungs_core::error::{Error, Result};
use rungs_core::link::LinkConfig;
use rungs_core::report::MAX_SEATS;
use rungs_core::session::{Advance, LockstepConfig, LockstepSession, Topology};
use rungs_core::timing::{MachineConfig, PolicyKind};
use rungs_core::wire::{SessionKey, MAX_PACKET_BYTES};

/// N lockstep machines on an instant network, stepped a frame at a time.
pub struct InstantGame {
    sessions: Vec<LockstepSession>,
    now_us: u64,
    frame_us: u64,
    buf: Box<[u8; MAX_PACKET_BYTES]>,
    packets: u64,
    frames: u64,
}

fn address(seat: u8) -> SocketAddr {
    SocketAddr::from(([10, 0, 0, seat + 1], 4000))
}

fn seat_of(address: SocketAddr) -> Option<usize> {
    match address {
        SocketAddr::V4(v4) => usize::from(v4.ip().octets()[3]).checked_sub(1),
        SocketAddr::V6(_) => None,
    }
}

impl InstantGame {
    /// A game of `players` (2 to 16) at `fps` under `policy`, every seat human.
    pub fn new(players: u8, fps: u8, policy: PolicyKind) -> Result<InstantGame> {
        if !(2..=MAX_SEATS as u8).contains(&players) || fps == 0 {
            return Err(Error::invalid(
                "an instant game's players and frame rate",
                "2 to 16 players and a frame rate",
            ));
        }
        let mut sessions = Vec::with_capacity(usize::from(players));
        for seat in 0..players {
            let config = LockstepConfig {
                machine: MachineConfig {
                    speed_fps: fps,
                    human_seats: vec![true; usize::from(players)],
                    local_seat: Some(seat),
                    policy,
                },
                session_id: 0x1257_0001,
                key: SessionKey([0x5A; 16]),
                link_keys: Vec::new(),
                epoch: 1,
                link: LinkConfig::default(),
                checksum_interval: 64,
                topology: Topology::PeerToPeer,
                manual_drops: false,
            };
            let mut session = LockstepSession::new(&config, 0)?;
            for peer in (0..players).filter(|p| *p != seat) {
                session.add_peer(peer, address(peer), 0)?;
            }
            sessions.push(session);
        }
        Ok(InstantGame {
            sessions,
            now_us: 0,
            frame_us: 1_000_000 / u64::from(fps),
            buf: Box::new([0; MAX_PACKET_BYTES]),
            packets: 0,
            frames: 0,
        })
    }

    /// Let one frame time pass: every machine fires its due timers and
    /// runs its frame when due, then every datagram is delivered (and every
    /// answer to it) until the network is quiet. Returns how many machines
    /// ran a frame.
    pub fn step(&mut self) -> Result<usize> {
        self.now_us += self.frame_us;
        let now = self.now_us;
        let mut ran = 0;
        for session in &mut self.sessions {
            if session.poll_timeout().is_some_and(|due| due <= now) {
                session.handle_timeout(now);
            }
            if let Advance::Ran { .. } = session.advance(now)? {
                ran += 1;
            }
        }
        self.frames += ran as u64;
        self.deliver_all();
        Ok(ran)
    }

    /// Carry datagrams until no machine has any left to send.
    fn deliver_all(&mut self) {
        let now = self.now_us;
        loop {
            let mut moved = false;
            for from in 0..self.sessions.len() {
                while let Some(transmit) = self.sessions[from].poll_transmit(now, &mut self.buf[..])
                {
                    self.packets += 1;
                    moved = true;
                    let Some(to) = seat_of(transmit.destination) else {
                        continue;
                    };
                    if let Some(session) = self.sessions.get_mut(to) {
                        session.handle_datagram(
                            now,
                            address(from as u8),
                            &self.buf[..transmit.len],
                        );
                    }
                }
            }
            if !moved {
                break;
            }
        }
    }

    /// The sessions, seat order.
    pub fn sessions(&self) -> &[LockstepSession] {
        &self.sessions
    }

    /// Datagrams sent so far by all machines.
    pub fn packets(&self) -> u64 {
        self.packets
    }

    /// Frames run so far, summed over the machines.
    pub fn frames(&self) -> u64 {
        self.frames
    }
}
