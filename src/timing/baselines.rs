//! The timing rules players use today, for comparison with rungs' adaptive
//! policy (issue 5, `rungs-sim --policy`). The facts come from the original
//! games' public sources (EA's GPL release of Red Alert, CnCNet's protocol 0).
//!
//! Where each rule comes from, and every remaining difference from its
//! source, is in `docs/baselines.md`.
//!
//! Each baseline only chooses targets; the targets are applied by the same
//! schedule (S5) as rungs' own, so no baseline can make a command due before
//! one sent earlier. (The original games apply a new MaxAhead at once, which
//! is exactly the hazard S5's staged decreases remove.) All of them read the
//! same shared record of reports (S3), so they stay deterministic.

use super::ladder::Timing;
use super::TimingEvent;
use crate::report::record::MAX_SEATS;
use crate::report::Record;

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
    /// CnCNet's Tiberian Sun spawner, protocol 0 (`protocol0`).
    Protocol0,
}

impl PolicyKind {
    /// The policy a name spells: `adaptive`, `tracking`, `ra`, `protocol0`
    /// or `fixed:SP/LA`; `None` for anything else. A fixed timing must keep
    /// the rule S1 (`Timing::new`); its error says why not.
    pub fn from_name(value: &str) -> Option<crate::error::Result<PolicyKind>> {
        match value {
            "adaptive" => Some(Ok(PolicyKind::Adaptive)),
            "tracking" => Some(Ok(PolicyKind::Tracking)),
            "ra" => Some(Ok(PolicyKind::RedAlert)),
            "protocol0" => Some(Ok(PolicyKind::Protocol0)),
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
        }
    }
}

/// Red Alert recomputes its timing every this many frames.
pub const RED_ALERT_PERIOD: u32 = 128;
/// Red Alert's default FrameSendRate.
pub const RED_ALERT_SEND_PERIOD: u8 = 3;
/// Protocol 0 re-reads the response times every this many frames (the
/// spawner's players send theirs every 30 frames; ours arrive with the
/// reports, so reading more often than every 32 frames sees nothing new).
pub const PROTOCOL0_PERIOD: u32 = 32;

/// How many reports the averaged response time spans. The original engines
/// average up to 256 round-trip samples per connection, about one per packet,
/// and send a packet every FrameSendRate (3) frames: 768 frames, six of our
/// 128-frame report intervals.
pub const AVERAGED_REPORTS: usize = 6;

/// The engines' *response time*: per player, the mean of the round trips of
/// its last [`AVERAGED_REPORTS`] executed reports; the game uses the worst
/// player's. Deterministic: it reads only executed reports, and every
/// machine evaluates on the same frames.
#[derive(Debug, Clone)]
pub struct ResponseTime {
    /// Per seat: the last reports' round trips, oldest first, and the frame
    /// the latest executed on.
    samples: [([u32; AVERAGED_REPORTS], usize, Option<u32>); MAX_SEATS],
}

impl Default for ResponseTime {
    fn default() -> Self {
        ResponseTime::new()
    }
}

impl ResponseTime {
    pub fn new() -> ResponseTime {
        ResponseTime {
            samples: [([0; AVERAGED_REPORTS], 0, None); MAX_SEATS],
        }
    }

    /// Take in the reports executed since the last call.
    pub fn update(&mut self, record: &Record) {
        for seat in record.seats() {
            let Some((report, executed)) = record.latest(seat) else {
                continue;
            };
            let Some(slot) = self.samples.get_mut(usize::from(seat)) else {
                continue;
            };
            if slot.2 == Some(executed) {
                continue;
            }
            slot.2 = Some(executed);
            if let Some(rtt) = report.worst_rtt_ms {
                if slot.1 == AVERAGED_REPORTS {
                    slot.0.rotate_left(1);
                    slot.1 -= 1;
                }
                slot.0[slot.1] = rtt;
                slot.1 += 1;
            }
        }
    }

    /// The worst present player's averaged round trip, ms; `None` before any
    /// round trip was reported.
    pub fn worst_ms(&self, record: &Record) -> Option<u32> {
        record
            .seats()
            .filter_map(|seat| {
                let (values, count, _) = self.samples.get(usize::from(seat))?;
                let count = *count;
                (count > 0).then(|| {
                    let sum: u64 = values[..count].iter().map(|v| u64::from(*v)).sum();
                    (sum / count as u64) as u32
                })
            })
            .max()
    }
}

/// A round trip in the engines' 60 Hz timer ticks (whole ticks, as the
/// timer counts them).
pub fn rtt_ticks(rtt_ms: u32) -> u32 {
    (u64::from(rtt_ms) * 60 / 1000).min(u64::from(u32::MAX)) as u32
}

/// Red Alert (`ra`): send period 3; every 128 frames the master sends
/// `MaxAhead = resp_ticks * DesiredFrameRate / 120` (one-way frames, integer
/// division), rounded up to the send period and at least three send
/// periods, from the worst connection's averaged response time; and
/// `DesiredFrameRate = min(60 / slowest AverageTicks, game speed)`.
#[derive(Debug, Clone)]
pub struct RedAlertPolicy {
    speed_fps: u8,
    target: Timing,
    rate: u8,
    response: ResponseTime,
}

impl RedAlertPolicy {
    /// Starts at `3/9`, Red Alert's usual MaxAhead with its default FrameSendRate.
    pub fn new(speed_fps: u8) -> RedAlertPolicy {
        RedAlertPolicy {
            speed_fps: speed_fps.max(1),
            target: Self::start(),
            rate: speed_fps.max(1),
            response: ResponseTime::new(),
        }
    }

    /// `3/9`.
    pub fn start() -> Timing {
        Timing::FALLBACK
    }

    /// The look-ahead Red Alert wants for an averaged round trip of `rtt_ms`
    /// at `fps`.
    pub fn look_ahead_for(rtt_ms: u32, fps: u8) -> u8 {
        let sp = u32::from(RED_ALERT_SEND_PERIOD);
        let one_way = (u64::from(rtt_ticks(rtt_ms)) * u64::from(fps) / 120) as u32;
        let rounded = one_way.div_ceil(sp).saturating_mul(sp).max(3 * sp);
        rounded.min(250 - 250 % sp) as u8
    }

    /// Red Alert's DesiredFrameRate: 60 over the slowest machine's whole
    /// ticks per frame, at most the game speed; unchanged until every
    /// player has a fresh report.
    pub fn rate_for(record: &Record, frame: u32, speed_fps: u8, current: u8) -> u8 {
        if !record.all_fresh(frame) {
            return current;
        }
        let ticks = record
            .max_fresh_process_us(frame)
            .map_or(0, |us| u64::from(us) * 60 / 1_000_000);
        if ticks == 0 {
            return speed_fps;
        }
        (60 / ticks).clamp(1, u64::from(speed_fps)) as u8
    }

    pub fn target(&self) -> Timing {
        self.target
    }

    pub fn rate(&self) -> u8 {
        self.rate
    }

    pub fn set_speed_fps(&mut self, speed_fps: u8) {
        self.speed_fps = speed_fps.max(1);
    }

    /// Every 128 frames, from the averaged response times.
    pub fn evaluate(&mut self, record: &Record, frame: u32) -> Option<TimingEvent> {
        self.response.update(record);
        if frame == 0 || frame % RED_ALERT_PERIOD != 0 {
            return None;
        }
        let rate = Self::rate_for(record, frame, self.speed_fps, self.rate);
        let worst = self.response.worst_ms(record)?;
        let look_ahead = Self::look_ahead_for(worst, rate);
        let target = Timing::new(RED_ALERT_SEND_PERIOD, look_ahead).unwrap_or(self.target);
        if (target, rate) == (self.target, self.rate) {
            return None;
        }
        self.target = target;
        self.rate = rate;
        Some(TimingEvent { target, fps: rate })
    }
}

/// CnCNet's spawner, protocol 0 (`protocol0`), as the public RA2/YR spawner
/// does it: the game starts at `2/12`; each player's response time (its
/// averaged round trip in 60 Hz ticks) picks a latency level, the smallest
/// `L` in 1–9 with `ticks <= MaxAhead(L)`; the worst player's level is
/// applied — send period `L`, look-ahead `MaxAhead(L)`, frame rate pinned —
/// and only ever rises.
#[derive(Debug, Clone)]
pub struct Protocol0Policy {
    /// 0 is the initial `2/12`, before any level was applied.
    level: usize,
    rate: u8,
    response: ResponseTime,
}

/// Protocol 0's look-ahead (MaxAhead) by latency level 0–9; level `L` >= 1
/// sends every `L` frames.
pub const PROTOCOL0_MAX_AHEAD: [u8; 10] = [1, 4, 6, 12, 16, 20, 24, 28, 32, 36];
/// The timing before any level is applied: FrameSendRate 2, MaxAhead 6 × 2.
pub const PROTOCOL0_START: (u8, u8) = (2, 12);

impl Protocol0Policy {
    pub fn new(speed_fps: u8) -> Protocol0Policy {
        Protocol0Policy {
            level: 0,
            rate: speed_fps.max(1),
            response: ResponseTime::new(),
        }
    }

    fn timing_of(level: usize) -> Timing {
        let (sp, la) = match level {
            0 => PROTOCOL0_START,
            l => (l as u8, PROTOCOL0_MAX_AHEAD[l.min(9)]),
        };
        Timing::new(sp, la).unwrap_or(Timing::START)
    }

    /// `2/12`.
    pub fn start() -> Timing {
        Self::timing_of(0)
    }

    /// The level (1–9) an averaged round trip of `rtt_ms` asks for.
    pub fn level_for(rtt_ms: u32) -> usize {
        let ticks = rtt_ticks(rtt_ms);
        (1..9)
            .find(|level| ticks <= u32::from(PROTOCOL0_MAX_AHEAD[*level]))
            .unwrap_or(9)
    }

    pub fn target(&self) -> Timing {
        Self::timing_of(self.level)
    }

    pub fn rate(&self) -> u8 {
        self.rate
    }

    /// On every report frame: rise to the level the worst averaged response
    /// time needs.
    pub fn evaluate(&mut self, record: &Record, frame: u32) -> Option<TimingEvent> {
        self.response.update(record);
        if frame == 0 || frame % PROTOCOL0_PERIOD != 0 {
            return None;
        }
        let worst = self.response.worst_ms(record)?;
        let level = Self::level_for(worst);
        if level <= self.level {
            return None;
        }
        self.level = level;
        Some(TimingEvent {
            target: self.target(),
            fps: self.rate,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::report::Report;

    /// Both players' reports executed on `executed`.
    fn record_with(rtt: u32, process_us: u32, executed: u32) -> Record {
        let mut record = Record::new(0, [0, 1]);
        for seat in 0..2 {
            record
                .apply_report(
                    seat,
                    executed,
                    Report {
                        process_us,
                        max_wait_ms: 0,
                        worst_rtt_ms: Some(rtt),
                        detail: None,
                    },
                )
                .unwrap();
        }
        record
    }

    #[test]
    fn red_alert_maxahead_is_whole_ticks_times_rate_over_120_rounded_to_three() {
        assert_eq!(RedAlertPolicy::look_ahead_for(20, 30), 9);
        assert_eq!(RedAlertPolicy::look_ahead_for(700, 30), 12); // 42 ticks -> 10 -> 12
        assert_eq!(RedAlertPolicy::look_ahead_for(5000, 30), 75);
        assert_eq!(RedAlertPolicy::look_ahead_for(100_000, 30), 249);
        // 16 ms is 0 ticks: the timer does not see it.
        assert_eq!(rtt_ticks(16), 0);
        assert_eq!(rtt_ticks(17), 1);
    }

    #[test]
    fn red_alert_follows_the_averaged_response_time_every_128_frames() {
        let mut ra = RedAlertPolicy::new(30);
        assert_eq!(
            ra.evaluate(&record_with(700, 8000, 90), 100),
            None,
            "only every 128 frames"
        );
        let event = ra.evaluate(&record_with(700, 8000, 120), 128).unwrap();
        assert_eq!(event.target.to_string(), "3/12");
        // One short round trip moves the average (700, 700, 100 -> 500 ms:
        // 30 ticks, 7 frames) back to the minimum, 3/9.
        assert_eq!(
            ra.evaluate(&record_with(100, 8000, 250), 256)
                .unwrap()
                .target
                .to_string(),
            "3/9"
        );
        // A single spike sample is averaged with the others: six reports of
        // 100 ms and one of 2000 ms average 371 ms, still 3/9.
        let mut calm = RedAlertPolicy::new(30);
        for n in 1..=5u32 {
            calm.evaluate(&record_with(100, 8000, n * 128 - 1), n * 128);
        }
        assert_eq!(calm.evaluate(&record_with(2000, 8000, 767), 768), None);
        assert_eq!(calm.target().to_string(), "3/9");
        // The slowest machine's whole ticks per frame set the rate: 45 ms is
        // 2 ticks, 30 fps; 51 ms is 3 ticks, 20 fps.
        assert_eq!(
            RedAlertPolicy::rate_for(&record_with(20, 45_000, 1), 2, 30, 30),
            30
        );
        assert_eq!(
            RedAlertPolicy::rate_for(&record_with(20, 51_000, 1), 2, 30, 30),
            20
        );
    }

    #[test]
    fn protocol0_starts_at_2_12_and_its_levels_only_rise() {
        assert_eq!(Protocol0Policy::start().to_string(), "2/12");
        assert_eq!(Protocol0Policy::level_for(50), 1); // 3 ticks: 1/4
        assert_eq!(Protocol0Policy::level_for(83), 1); // 4 ticks
        assert_eq!(Protocol0Policy::level_for(100), 2); // 6 ticks: 2/6
        assert_eq!(Protocol0Policy::level_for(200), 3); // 12 ticks: 3/12
        assert_eq!(Protocol0Policy::level_for(530), 8); // 31 ticks: 7/28 < 31 <= 8/32
        assert_eq!(Protocol0Policy::level_for(550), 9); // 33 ticks
        assert_eq!(Protocol0Policy::level_for(5000), 9);
        let mut p0 = Protocol0Policy::new(30);
        assert_eq!(
            p0.evaluate(&record_with(60, 8000, 31), 31),
            None,
            "every 32 frames"
        );
        assert_eq!(
            p0.evaluate(&record_with(60, 8000, 31), 32)
                .unwrap()
                .target
                .to_string(),
            "1/4"
        );
        // (60, 180) average 120 ms, 7 ticks: level 3.
        assert_eq!(
            p0.evaluate(&record_with(180, 8000, 63), 64)
                .unwrap()
                .target
                .to_string(),
            "3/12"
        );
        assert_eq!(
            p0.evaluate(&record_with(20, 8000, 191), 192),
            None,
            "never comes back down"
        );
        assert_eq!(p0.target().to_string(), "3/12");
        assert_eq!(p0.rate(), 30, "the frame rate is pinned");
    }
}
