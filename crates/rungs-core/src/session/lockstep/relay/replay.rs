//! Replays: a [`LockstepSession`](crate::session::LockstepSession) fed a match's turn log
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

use super::{RelaySession, RelaySettings};
use crate::error::{Error, Result};
use crate::relay::checksums::DecidedRound;
use crate::relay::ticket::{issue, LobbySecret, TicketFields};
use crate::relay::TurnLog;
use crate::session::{LockstepConfig, Topology};

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

impl RelaySession {
    /// A session that replays `log` at local time `now_us` (see
    /// [`LockstepSession::replay`](crate::session::LockstepSession::replay)).
    pub(in crate::session::lockstep) fn replay(
        config: &LockstepConfig,
        log: &TurnLog,
        now_us: u64,
    ) -> Result<RelaySession> {
        let seat = config.machine.local_seat.ok_or(Error::invalid_value(
            "machine.local_seat",
            "none",
            "a seat (whose view the engine takes)",
        ))?;
        let humans = &config.machine.human_seats;
        let mask = humans
            .iter()
            .enumerate()
            .filter(|(_, h)| **h)
            .fold(0u16, |m, (s, _)| m | 1 << s);
        if humans.len() != usize::from(log.seat_count) || mask != log.human_mask {
            return Err(Error::invalid_value(
                "machine.human_seats",
                format!("{} seats, human mask {mask:#06x}", humans.len()),
                format!(
                    "the turn log's match: {} seats, human mask {:#06x}",
                    log.seat_count, log.human_mask
                ),
            ));
        }
        if config.checksum_interval != u32::from(log.checksum_interval) {
            return Err(Error::invalid_value(
                "checksum_interval",
                config.checksum_interval,
                format!("the turn log's match's, {}", log.checksum_interval),
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
        let settings = RelaySettings::new(unused, credentials, 1);
        let relay_config = LockstepConfig {
            topology: Topology::Relay(settings),
            ..config.clone()
        };
        let mut session = RelaySession::new(&relay_config, &settings, seat, now_us)?;
        session.start_replay(log)?;
        Ok(session)
    }

    fn start_replay(&mut self, log: &TurnLog) -> Result<()> {
        self.client.load_turn_log(log)?;
        self.replay = Some(Replay {
            checksums: log.checksums.iter().map(|r| (r.tick, *r)).collect(),
        });
        self.collect_client_events();
        Ok(())
    }
}
