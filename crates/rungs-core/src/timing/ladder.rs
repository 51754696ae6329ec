//! The timing ladder (S2) and the player-facing names of its rungs (S6).
//!
//! Pure integer functions: every machine must compute exactly the same
//! values, so nothing here touches floating point (S1).

use std::cmp::Ordering;
use std::fmt;

use crate::error::{Error, Result};

/// Number of rungs on the ladder.
pub const RUNG_COUNT: u8 = 10;
/// Longest send period (S1).
pub const MAX_SEND_PERIOD: u8 = 10;
/// Longest look-ahead (S1).
pub const MAX_LOOK_AHEAD: u8 = 250;

/// A timing `send_period/look_ahead` (S1), written `2/6`.
///
/// Ordered lexicographically by (send period, look-ahead): "needs a higher
/// rung, or a longer look-ahead on the same rung" is `>` (S1). Every value of
/// this type satisfies the S1 invariant; construct through [`Timing::new`].
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct Timing {
    send_period: u8,
    look_ahead: u8,
}

impl Timing {
    /// The game's starting timing and the master's first target (S4.3).
    pub const START: Timing = Timing {
        send_period: 2,
        look_ahead: 6,
    };
    /// The widest timing, forced by a silent player (S3).
    pub const WIDEST: Timing = Timing {
        send_period: 10,
        look_ahead: 250,
    };
    /// Calibration's fallback when reports are still incomplete at 128 (S4.3).
    pub const FALLBACK: Timing = Timing {
        send_period: 3,
        look_ahead: 9,
    };

    /// A timing, checked against S1: `1 <= send_period <= 10`,
    /// `send_period <= look_ahead <= 250`, `look_ahead % send_period == 0`.
    pub fn new(send_period: u8, look_ahead: u8) -> Result<Timing> {
        if send_period == 0 || send_period > MAX_SEND_PERIOD {
            return Err(Error::invalid_value("send period", send_period, "1 to 10"));
        }
        if look_ahead < send_period || look_ahead > MAX_LOOK_AHEAD {
            return Err(Error::invalid_value(
                "look-ahead",
                look_ahead,
                format!("from the send period, {send_period}, to 250"),
            ));
        }
        if look_ahead % send_period != 0 {
            return Err(Error::invalid_value(
                "look-ahead",
                look_ahead,
                format!("a multiple of the send period, {send_period}"),
            ));
        }
        Ok(Timing {
            send_period,
            look_ahead,
        })
    }

    /// The timing of rung `rung` (1–10): `N/3N`, except rung 1, `1/4` (S2).
    pub fn of_rung(rung: u8) -> Result<Timing> {
        match rung {
            1 => Ok(Timing {
                send_period: 1,
                look_ahead: 4,
            }),
            2..=RUNG_COUNT => Ok(Timing {
                send_period: rung,
                look_ahead: 3 * rung,
            }),
            _ => Err(Error::invalid_value("rung", rung, "1 to 10")),
        }
    }

    /// Frames per packet.
    pub fn send_period(self) -> u8 {
        self.send_period
    }

    /// Frames between issuing a command on a send frame and executing it.
    pub fn look_ahead(self) -> u8 {
        self.look_ahead
    }

    /// The rung this timing sits on: its send period (S6).
    pub fn rung(self) -> u8 {
        self.send_period
    }

    /// The look-ahead the rung normally uses: `3N`, or 4 for rung 1 (S6).
    pub fn rung_look_ahead(self) -> u8 {
        if self.send_period == 1 {
            4
        } else {
            3 * self.send_period
        }
    }

    /// `10/L` with `L > 30` (S2).
    pub fn is_extended(self) -> bool {
        self.send_period == MAX_SEND_PERIOD && self.look_ahead > 3 * MAX_SEND_PERIOD
    }

    /// The tier a player is shown (S6): by rung, and **Bad** whenever the
    /// look-ahead is longer than the rung's normal one.
    pub fn tier(self) -> Tier {
        if self.look_ahead > self.rung_look_ahead() {
            return Tier::Bad;
        }
        rung_tier(self.send_period)
    }

    /// The look-ahead as a duration at `fps` frames per second, ms rounded
    /// down (`fps` 0 counts as 1).
    pub fn look_ahead_ms(self, fps: u8) -> u32 {
        u32::from(self.look_ahead) * 1000 / u32::from(fps.max(1))
    }

    /// The rung whose normal look-ahead, at the 30 fps the ladder was made
    /// for, is the shortest that lasts at least this timing's look-ahead at
    /// `fps`: rung 1 up to 133 ms (`1/4`), rung N up to N × 100 ms (`N/3N`),
    /// rung 10 beyond. For timings off the ladder (`tracking`'s `1/L`,
    /// docs/tracking.md), where the send period says nothing about the
    /// wait players feel.
    pub fn equivalent_rung(self, fps: u8) -> u8 {
        let ms = self.look_ahead_ms(fps);
        if ms <= 133 {
            1
        } else {
            ms.div_ceil(100).min(u32::from(RUNG_COUNT)) as u8
        }
    }

    /// The tier by look-ahead duration (S6's tiers for timings off the
    /// ladder): the tier of the [`equivalent rung`](Self::equivalent_rung) —
    /// **Fast** up to 200 ms, **Normal** up to 500, **Poor** up to 800,
    /// **Bad** beyond. On a ladder timing at 30 fps it is S6's tier.
    pub fn tier_by_duration(self, fps: u8) -> Tier {
        rung_tier(self.equivalent_rung(fps))
    }

    /// The slider position by look-ahead duration: `11 -` the equivalent rung.
    pub fn slider_position_by_duration(self, fps: u8) -> u8 {
        RUNG_COUNT + 1 - self.equivalent_rung(fps)
    }

    /// The disabled Connection slider's position, mirrored: `11 - rung` on a
    /// 1–10 scale, so rung 1 sits at the right end (S6).
    pub fn slider_position(self) -> u8 {
        RUNG_COUNT + 1 - self.send_period
    }

    /// The slider's label, e.g. `Fast (rung 2)` (S6).
    pub fn label(self) -> Label {
        Label::new(self)
    }
}

/// S6's tier of a rung.
fn rung_tier(rung: u8) -> Tier {
    match rung {
        1..=2 => Tier::Fast,
        3..=5 => Tier::Normal,
        6..=8 => Tier::Poor,
        _ => Tier::Bad,
    }
}

impl Ord for Timing {
    fn cmp(&self, other: &Self) -> Ordering {
        (self.send_period, self.look_ahead).cmp(&(other.send_period, other.look_ahead))
    }
}

impl PartialOrd for Timing {
    fn partial_cmp(&self, other: &Self) -> Option<Ordering> {
        Some(self.cmp(other))
    }
}

impl fmt::Display for Timing {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}/{}", self.send_period, self.look_ahead)
    }
}

/// The four tiers a player is shown (S6). The discriminants are the values
/// the C API uses (`RUNGS_TIER_*`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
#[repr(u8)]
pub enum Tier {
    /// Rungs 1–2 (`RUNGS_TIER_FAST`).
    Fast = 0,
    /// Rungs 3–5 (`RUNGS_TIER_NORMAL`).
    Normal = 1,
    /// Rungs 6–8 (`RUNGS_TIER_POOR`).
    Poor = 2,
    /// Rungs 9–10 (`RUNGS_TIER_BAD`).
    Bad = 3,
}

impl Tier {
    /// The tier's name as players read it.
    pub fn name(self) -> &'static str {
        match self {
            Tier::Fast => "Fast",
            Tier::Normal => "Normal",
            Tier::Poor => "Poor",
            Tier::Bad => "Bad",
        }
    }

    /// The tier for a C-side integer, refusing values outside 0..=3.
    pub fn from_u8(value: u8) -> Option<Tier> {
        match value {
            0 => Some(Tier::Fast),
            1 => Some(Tier::Normal),
            2 => Some(Tier::Poor),
            3 => Some(Tier::Bad),
            _ => None,
        }
    }
}

impl fmt::Display for Tier {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

/// Slider label text without allocation (`Normal (rung 10)` is the longest, 16 bytes).
#[derive(Clone, Copy)]
pub struct Label {
    bytes: [u8; Label::CAPACITY],
    len: u8,
}

impl Label {
    /// Longest label in bytes (without a terminator).
    pub const CAPACITY: usize = 16;

    fn new(timing: Timing) -> Label {
        let mut label = Label {
            bytes: [0; Label::CAPACITY],
            len: 0,
        };
        label.push(timing.tier().name().as_bytes());
        label.push(b" (rung ");
        let rung = timing.rung();
        if rung >= 10 {
            label.push(&[b'0' + rung / 10]);
        }
        label.push(&[b'0' + rung % 10, b')']);
        label
    }

    fn push(&mut self, part: &[u8]) {
        let start = usize::from(self.len);
        self.bytes[start..start + part.len()].copy_from_slice(part);
        self.len += part.len() as u8;
    }

    /// The label text.
    pub fn as_str(&self) -> &str {
        // Only ASCII is ever pushed.
        std::str::from_utf8(&self.bytes[..usize::from(self.len)]).unwrap_or("")
    }
}

impl fmt::Display for Label {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

impl fmt::Debug for Label {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{:?}", self.as_str())
    }
}

/// Half a round trip in frames at `fps`, rounded up (S2):
/// `ceil(rtt_ms * fps / 2000)`.
pub fn one_way_frames(rtt_ms: u32, fps: u8) -> u32 {
    div_ceil(u64::from(rtt_ms) * u64::from(fps), 2000)
}

/// The round trip raised by a quarter, then converted, with one rounding (S2):
/// `ceil(rtt_ms * 5 * fps / 8000)`.
pub fn one_way_frames_headroom(rtt_ms: u32, fps: u8) -> u32 {
    div_ceil(u64::from(rtt_ms) * 5 * u64::from(fps), 8000)
}

fn div_ceil(numerator: u64, denominator: u64) -> u32 {
    // rtt_ms <= u32::MAX and fps <= 255 keep the quotient below 2^32.
    numerator.div_ceil(denominator) as u32
}

/// The lowest rung whose look-ahead covers `owt` one-way frames plus one send
/// period (S2); beyond rung 10, `10/L` with `L` the smallest multiple of 10 at
/// least `owt + 10`, capped at 250.
pub fn required(owt: u32) -> Timing {
    if owt <= 3 {
        return Timing {
            send_period: 1,
            look_ahead: 4,
        };
    }
    if owt <= 2 * u32::from(MAX_SEND_PERIOD) {
        let rung = owt.div_ceil(2).max(2) as u8;
        return Timing {
            send_period: rung,
            look_ahead: 3 * rung,
        };
    }
    let look_ahead = owt
        .saturating_add(10)
        .div_ceil(10)
        .saturating_mul(10)
        .min(u32::from(MAX_LOOK_AHEAD));
    Timing {
        send_period: MAX_SEND_PERIOD,
        look_ahead: look_ahead as u8,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    #[test]
    fn rungs_are_n_over_3n_except_rung_one() {
        assert_eq!(Timing::of_rung(1).unwrap().to_string(), "1/4");
        for rung in 2..=10u8 {
            let t = Timing::of_rung(rung).unwrap();
            assert_eq!((t.send_period(), t.look_ahead()), (rung, 3 * rung));
        }
        assert!(Timing::of_rung(0).is_err());
        assert!(Timing::of_rung(11).is_err());
    }

    #[test]
    fn spec_s2_worked_examples() {
        // S2: 30 fps, RTT 200 -> owt 3 -> 1/4; with headroom it counts as 250 -> owt 4 -> 2/6.
        assert_eq!(one_way_frames(200, 30), 3);
        assert_eq!(required(3).to_string(), "1/4");
        assert_eq!(one_way_frames_headroom(200, 30), 4);
        assert_eq!(required(4).to_string(), "2/6");
        // RTT 1400 -> owt 21 -> 10/40.
        assert_eq!(one_way_frames(1400, 30), 21);
        assert_eq!(required(21).to_string(), "10/40");
        assert_eq!(required(240).to_string(), "10/250");
        assert_eq!(required(241).to_string(), "10/250");
        assert_eq!(required(u32::MAX).to_string(), "10/250");
    }

    #[test]
    fn required_covers_each_rung_boundary() {
        // Rung N covers up to 2N one-way frames (S2).
        for owt in 0..=3 {
            assert_eq!(required(owt), Timing::of_rung(1).unwrap());
        }
        assert_eq!(required(4), Timing::of_rung(2).unwrap());
        for rung in 3..=10u32 {
            assert_eq!(required(2 * rung - 1), Timing::of_rung(rung as u8).unwrap());
            assert_eq!(required(2 * rung), Timing::of_rung(rung as u8).unwrap());
        }
        assert_eq!(required(30).to_string(), "10/40");
        assert_eq!(required(31).to_string(), "10/50");
    }

    #[test]
    fn ordering_is_lexicographic() {
        let t = |s, l| Timing::new(s, l).unwrap();
        assert!(t(2, 6) > t(1, 4));
        assert!(t(10, 40) > t(10, 30));
        assert!(t(3, 9) > t(2, 250));
    }

    #[test]
    fn tiers_by_duration_for_timings_off_the_ladder() {
        let t = |s, l| Timing::new(s, l).unwrap();
        // On the ladder at 30 fps, the duration gives S6's tier and slider.
        for rung in 1..=RUNG_COUNT {
            let timing = Timing::of_rung(rung).unwrap();
            assert_eq!(timing.equivalent_rung(30), rung);
            assert_eq!(timing.tier_by_duration(30), timing.tier());
            assert_eq!(
                timing.slider_position_by_duration(30),
                timing.slider_position()
            );
        }
        // 1/8 at 60 fps is a 133 ms look-ahead: Fast, rung 1 (by rung: Bad).
        assert_eq!(t(1, 8).tier(), Tier::Bad);
        assert_eq!(t(1, 8).look_ahead_ms(60), 133);
        assert_eq!(t(1, 8).tier_by_duration(60), Tier::Fast);
        assert_eq!(t(1, 8).slider_position_by_duration(60), 10);
        // 1/9 at 30 fps: 300 ms, like 3/9: Normal.
        assert_eq!(t(1, 9).tier_by_duration(30), Tier::Normal);
        assert_eq!(t(1, 15).tier_by_duration(30), Tier::Normal);
        assert_eq!(t(1, 16).tier_by_duration(30), Tier::Poor);
        assert_eq!(t(1, 24).tier_by_duration(30), Tier::Poor);
        assert_eq!(t(1, 25).tier_by_duration(30), Tier::Bad);
        assert_eq!(t(1, 250).equivalent_rung(1), RUNG_COUNT);
        assert_eq!(t(1, 1).tier_by_duration(0), Tier::Bad, "fps 0 counts as 1");
    }

    #[test]
    fn tiers_sliders_and_labels() {
        let t = |s, l| Timing::new(s, l).unwrap();
        assert_eq!(t(1, 4).tier(), Tier::Fast);
        assert_eq!(t(2, 6).tier(), Tier::Fast);
        assert_eq!(t(3, 9).tier(), Tier::Normal);
        assert_eq!(t(5, 15).tier(), Tier::Normal);
        assert_eq!(t(6, 18).tier(), Tier::Poor);
        assert_eq!(t(8, 24).tier(), Tier::Poor);
        assert_eq!(t(9, 27).tier(), Tier::Bad);
        assert_eq!(t(9, 36).tier(), Tier::Bad);
        assert_eq!(
            t(3, 12).tier(),
            Tier::Bad,
            "a look-ahead longer than the rung's reads Bad"
        );
        assert_eq!(t(2, 6).label().as_str(), "Fast (rung 2)");
        assert_eq!(t(10, 250).label().as_str(), "Bad (rung 10)");
        assert_eq!(t(1, 4).slider_position(), 10);
        assert_eq!(t(10, 30).slider_position(), 1);
    }

    #[test]
    fn new_enforces_s1() {
        assert!(Timing::new(0, 4).is_err());
        assert!(Timing::new(11, 33).is_err());
        assert!(Timing::new(3, 10).is_err());
        assert!(Timing::new(10, 255).is_err());
        assert!(Timing::new(4, 2).is_err());
        assert!(Timing::new(10, 250).is_ok());
    }

    proptest! {
        #[test]
        fn required_always_satisfies_s1_and_covers(owt in 0u32..400) {
            let t = required(owt);
            prop_assert!(Timing::new(t.send_period(), t.look_ahead()).is_ok());
            if owt <= 240 {
                prop_assert!(u32::from(t.look_ahead()) >= owt + u32::from(t.send_period()));
            }
        }

        #[test]
        fn required_is_monotone(a in 0u32..400, b in 0u32..400) {
            if a <= b { prop_assert!(required(a) <= required(b)); }
        }

        #[test]
        fn headroom_never_below_raw(rtt in 0u32..100_000, fps in 1u8..=255) {
            prop_assert!(one_way_frames_headroom(rtt, fps) >= one_way_frames(rtt, fps));
        }
    }
}
