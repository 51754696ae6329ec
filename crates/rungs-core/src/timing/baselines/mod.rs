//! The timing rules players use today, for comparison with rungs' policies
//! (`rungs-sim --policy`), as pure functions of what the original engines
//! measure. Where each fact comes from, what the simulator does with it and
//! what still differs is in `docs/baselines.md`.
//!
//! - [`red_alert`]: Red Alert's rule (EA's GPL source: `QUEUE.CPP`,
//!   `CONNECT.CPP`, `COMBUF.CPP`, `IPXMGR.CPP`, `NETDLG.CPP`).
//! - [`protocol0`]: CnCNet's spawner, protocol 0, with the Red Alert 2 /
//!   Yuri's Revenge latency table and the newer Tiberian Sun one.
//! - [`lobby`]: the fixed timing a careful host sets from the lobby's pings.
//! - [`RedAlertPolicy`], [`Protocol0Policy`]: the Red Alert and protocol 0
//!   rules applied to rungs' reports (S3), which a relay can run as a
//!   match's master; not the baselines (those need the games' own engines:
//!   `sim::classic`).
//!
//! Both games time their connections with the connection manager's
//! *response time* ([`ResponseTime`]): the mean delay, in 60 Hz ticks, from
//! a command-carrying packet's first send to its acknowledgement.

pub mod lobby;
pub mod protocol0;
pub mod red_alert;
mod reported;

pub use protocol0::{LatencyLevels, Protocol0Table};
pub use reported::{Protocol0Policy, RedAlertPolicy};

use super::ladder::Timing;

/// Which rule chooses the timing.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum PolicyKind {
    /// rungs' adaptive ladder (S4).
    Adaptive,
    /// Send period 1 and the shortest look-ahead the reports need
    /// (`tracking`, `docs/tracking.md`).
    Tracking,
    /// A fixed `SP/LA` for the whole game, as players set it by hand.
    Fixed(Timing),
    /// Red Alert's rule (`ra`).
    RedAlert,
    /// CnCNet's spawner, protocol 0, with the Red Alert 2 / Yuri's Revenge
    /// latency table (`protocol0`).
    Protocol0,
    /// Protocol 0 with the newer Tiberian Sun table (`protocol0-ts`).
    Protocol0Ts,
    /// The fixed timing a careful host sets from the lobby's pings
    /// (`lobby`, [`lobby::lobby_timing`]); a simulated game resolves it
    /// into [`PolicyKind::Fixed`] before it starts.
    Lobby,
}

impl PolicyKind {
    /// The policy a name spells: `adaptive`, `tracking`, `ra`, `protocol0`,
    /// `protocol0-ts`, `lobby` or `fixed:SP/LA`; `None` for anything else.
    /// A fixed timing must keep the rule S1 (`Timing::new`); its error says
    /// why not.
    pub fn from_name(value: &str) -> Option<crate::error::Result<PolicyKind>> {
        match value {
            "adaptive" => Some(Ok(PolicyKind::Adaptive)),
            "tracking" => Some(Ok(PolicyKind::Tracking)),
            "ra" => Some(Ok(PolicyKind::RedAlert)),
            "protocol0" => Some(Ok(PolicyKind::Protocol0)),
            "protocol0-ts" => Some(Ok(PolicyKind::Protocol0Ts)),
            "lobby" => Some(Ok(PolicyKind::Lobby)),
            _ => {
                let (sp, la) = value.strip_prefix("fixed:")?.split_once('/')?;
                let (sp, la) = (sp.parse().ok()?, la.parse().ok()?);
                Some(Timing::new(sp, la).map(PolicyKind::Fixed))
            }
        }
    }

    /// The name [`from_name`](Self::from_name) reads: `fixed:2/6`, `ra`, ...
    pub fn name(self) -> String {
        match self {
            PolicyKind::Adaptive => "adaptive".to_owned(),
            PolicyKind::Tracking => "tracking".to_owned(),
            PolicyKind::Fixed(timing) => format!("fixed:{timing}"),
            PolicyKind::RedAlert => "ra".to_owned(),
            PolicyKind::Protocol0 => "protocol0".to_owned(),
            PolicyKind::Protocol0Ts => "protocol0-ts".to_owned(),
            PolicyKind::Lobby => "lobby".to_owned(),
        }
    }

    /// The original game whose engine plays this baseline, for the ones a
    /// simulator must model with the game's own queue, connections and
    /// pacing (`sim::classic`): `ra`, `protocol0`, `protocol0-ts`.
    pub fn original_game(self) -> Option<OriginalGame> {
        match self {
            PolicyKind::RedAlert => Some(OriginalGame::RedAlert),
            PolicyKind::Protocol0 => Some(OriginalGame::Protocol0(Protocol0Table::YurisRevenge)),
            PolicyKind::Protocol0Ts => Some(OriginalGame::Protocol0(Protocol0Table::TiberianSun)),
            _ => None,
        }
    }
}

/// An original game's engine, as a baseline plays it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum OriginalGame {
    /// Red Alert (protocol 2, a LAN game as CnCNet plays it).
    RedAlert,
    /// Tiberian Sun / Red Alert 2 under CnCNet's protocol 0.
    Protocol0(Protocol0Table),
}

/// The engines' timer: 60 ticks a second.
pub const TICKS_PER_SECOND: u64 = 60;

/// Whole 60 Hz ticks a clock reading of `us` microseconds has counted.
pub fn ticks_at(us: u64) -> u64 {
    us.saturating_mul(TICKS_PER_SECOND) / 1_000_000
}

/// When the timer reaches tick `tick`, µs (the first microsecond at which
/// [`ticks_at`] reads it).
pub fn tick_edge_us(tick: u64) -> u64 {
    tick.saturating_mul(1_000_000).div_ceil(TICKS_PER_SECOND)
}

/// A round trip in the engines' 60 Hz ticks (whole ticks, as the timer
/// counts them).
pub(crate) fn rtt_ticks(rtt_ms: u32) -> u32 {
    (u64::from(rtt_ms) * TICKS_PER_SECOND / 1000).min(u64::from(u32::MAX)) as u32
}

/// How many delays the connection manager's mean counts before it turns
/// into a moving average.
pub(crate) const RESPONSE_SAMPLES: u32 = 256;

/// One connection's response time (`CommBufferClass::Add_Delay`): each
/// acknowledged command-carrying packet adds its delay from the first send
/// to the acknowledgement, in whole ticks (a resend does not restart it, so
/// loss inflates the mean). The first 256 delays give a cumulative mean
/// (integer division); after them each delay replaces the mean's share of
/// the sum, `sum = sum - mean + delay`, and the mean is `sum / 256`
/// rounded: a moving average with weight 1/256. Nothing resets it during a
/// game.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct ResponseTime {
    count: u32,
    sum: u64,
    mean: u32,
}

impl ResponseTime {
    /// A connection with no delay counted yet (mean 0).
    pub fn new() -> ResponseTime {
        ResponseTime::default()
    }

    /// A packet's acknowledgement came `delay_ticks` after its first send.
    pub fn add_delay(&mut self, delay_ticks: u32) {
        let delay = u64::from(delay_ticks);
        if self.count == RESPONSE_SAMPLES {
            self.sum = self.sum.saturating_sub(u64::from(self.mean)) + delay;
            let rounded = u64::from(self.sum & 0xff > 127);
            self.mean = ((self.sum >> 8) + rounded).min(u64::from(u32::MAX)) as u32;
        } else {
            self.count += 1;
            self.sum += delay;
            self.mean = (self.sum / u64::from(self.count)) as u32;
        }
    }

    /// The mean, whole ticks (0 before the first delay).
    pub fn mean_ticks(&self) -> u32 {
        self.mean
    }

    /// How many delays it has counted (at most 256).
    pub fn samples(&self) -> u32 {
        self.count
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_round_trip_and_fixed_timings_keep_s1() {
        for name in [
            "adaptive",
            "tracking",
            "ra",
            "protocol0",
            "protocol0-ts",
            "lobby",
            "fixed:3/9",
        ] {
            let kind = PolicyKind::from_name(name).unwrap().unwrap();
            assert_eq!(kind.name(), name);
        }
        assert!(PolicyKind::from_name("fixed:3/10").unwrap().is_err());
        assert!(PolicyKind::from_name("protocol1").is_none());
        assert_eq!(
            PolicyKind::Protocol0Ts.original_game(),
            Some(OriginalGame::Protocol0(Protocol0Table::TiberianSun))
        );
        assert_eq!(PolicyKind::Lobby.original_game(), None);
    }

    #[test]
    fn ticks_are_whole_sixtieths_of_a_second() {
        assert_eq!(ticks_at(16_666), 0);
        assert_eq!(ticks_at(16_667), 1);
        assert_eq!(tick_edge_us(1), 16_667);
        assert_eq!(tick_edge_us(60), 1_000_000);
        assert_eq!(ticks_at(tick_edge_us(7)), 7);
        assert_eq!(ticks_at(tick_edge_us(7) - 1), 6);
        assert_eq!(rtt_ticks(16), 0);
        assert_eq!(rtt_ticks(17), 1);
        assert_eq!(rtt_ticks(150), 9);
    }

    #[test]
    fn the_response_time_is_a_cumulative_mean_then_a_256th_moving_average() {
        let mut r = ResponseTime::new();
        assert_eq!(r.mean_ticks(), 0);
        r.add_delay(9);
        r.add_delay(10);
        assert_eq!(r.mean_ticks(), 9, "19 / 2, integer division");
        for _ in 2..256 {
            r.add_delay(9);
        }
        assert_eq!((r.samples(), r.mean_ticks()), (256, 9));
        // One spike of 300 ticks moves the average by about a tick.
        r.add_delay(300);
        assert_eq!(r.mean_ticks(), 10);
        // A long spike takes hundreds of packets to show fully: after 100
        // delays of 60 ticks the mean is still well under 30.
        for _ in 0..100 {
            r.add_delay(60);
        }
        assert!((20..30).contains(&r.mean_ticks()), "{}", r.mean_ticks());
        // ... and as long to forget it: never reset.
        for _ in 0..100 {
            r.add_delay(9);
        }
        assert!(r.mean_ticks() > 15, "{}", r.mean_ticks());
    }
}
