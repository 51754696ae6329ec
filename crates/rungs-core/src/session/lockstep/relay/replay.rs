//! Replays: a [`LockstepSession`] fed a match's turn log
//! ([`TurnLog`], `rungs-relay export`) instead of a relay. The engine runs
//! its usual loop; every frame is due at once (as fast as the engine runs
//! them), with the commands, removals and quit orders of the match, its AI
//! orders recomputed by the engine as in the match. The engine's state
//! checksums are compared with what every seat reported in the match: a
//! difference is a [`SessionEvent::Desync`](super::super::SessionEvent)
//! naming the seats whose reported state differs from the engine's — how a
//! desync is verified offline (replay with one build, see which seats it
//! agrees with). The session ends ([`Advance::Left`](super::super::Advance))
//! after the log's last tick.

use std::collections::BTreeMap;
use std::net::SocketAddr;

use super::{RelayLockstep, RelaySettings};
use crate::error::{Error, Result};
use crate::relay::checksums::DecidedRound;
use crate::relay::ticket::{issue, LobbySecret, TicketFields};
use crate::relay::TurnLog;
use crate::session::{LockstepConfig, LockstepSession, Topology};

/// What a replay compares the engine's checksums with.
#[derive(Debug, Default)]
pub(super) struct Replay {
    checksums: BTreeMap<u32, DecidedRound>,
}

impl Replay {
    /// The seats whose checksum before `tick` differs from `checksum` (a
    /// bit per seat), when any reported one and it differs.
    pub(super) fn differing(&self, tick: u32, checksum: u64) -> Option<u32> {
        let round = self.checksums.get(&tick)?;
        let seats = (0..16u8)
            .filter(|s| round.reported_mask & (1 << s) != 0)
            .filter(|s| round.values[usize::from(*s)] != checksum)
            .fold(0u32, |mask, s| mask | 1 << s);
        (seats != 0).then_some(seats)
    }
}

impl RelayLockstep {
    fn start_replay(&mut self, log: &TurnLog) -> Result<()> {
        self.client.load_turn_log(log)?;
        self.replay = Some(Replay {
            checksums: log.checksums.iter().map(|r| (r.tick, *r)).collect(),
        });
        self.collect_client_events();
        Ok(())
    }
}

impl LockstepSession {
    /// A session that replays `log` at local time `now_us`: `config` as for
    /// a relay-topology session of that match (its seats, the local seat — a
    /// human seat of the match, whose view the engine takes — and its
    /// checksum interval must be the log's; the relay settings and links are
    /// not used). `InvalidArgument` when they differ from the log's.
    pub fn replay(config: &LockstepConfig, log: &TurnLog, now_us: u64) -> Result<LockstepSession> {
        let seat = config.machine.local_seat.ok_or(Error::InvalidArgument(
            "a replay needs a local seat (whose view the engine takes)",
        ))?;
        let humans = &config.machine.human_seats;
        let mask = humans
            .iter()
            .enumerate()
            .filter(|(_, h)| **h)
            .fold(0u16, |m, (s, _)| m | 1 << s);
        if humans.len() != usize::from(log.seat_count) || mask != log.human_mask {
            return Err(Error::InvalidArgument(
                "the session's seats differ from the turn log's match",
            ));
        }
        if config.checksum_interval != u32::from(log.checksum_interval) {
            return Err(Error::InvalidArgument(
                "the session's checksum_interval differs from the turn log's match",
            ));
        }
        // Credentials only to build the relay topology's client; it never
        // sends a packet.
        let secret = LobbySecret::new(*b"rungs-replay-key")?;
        let credentials = issue(
            &secret,
            &TicketFields {
                match_id: log.match_id,
                seat,
                expires_unix_s: u64::MAX,
                nonce: 1,
            },
        )?;
        let unused = SocketAddr::from(([127, 0, 0, 1], 9));
        let relay_config = LockstepConfig {
            topology: Topology::Relay(RelaySettings::new(unused, credentials, 1)),
            ..config.clone()
        };
        let mut session = LockstepSession::new(&relay_config, now_us)?;
        if let Some(relay) = session.relay.as_deref_mut() {
            relay.start_replay(log)?;
        }
        Ok(session)
    }

    /// Whether this session replays a turn log.
    pub fn is_replay(&self) -> bool {
        self.relay.as_ref().is_some_and(|r| r.replay.is_some())
    }
}
