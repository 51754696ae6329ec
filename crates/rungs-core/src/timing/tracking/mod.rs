//! The `tracking` policy (`docs/tracking.md`): send period 1 and the shortest
//! look-ahead the reported round trips and frame work need, read from the
//! round-trip *distribution* of the detailed reports (not their worst
//! sample), plus a margin earned only by stalls the round trips do not
//! explain and that a slow CPU did not cause (a game starts with one frame
//! of it, and a lone near miss now and then earns none), shed when the
//! look-ahead the frames needed vouches for less (`evidence.rs`); reports of
//! its own every [`TRACKING_REPORT_PERIOD`] frames; no hysteresis on the way
//! down but where the frames' needs just showed a decrease too short.
//! Design: `docs/tracking.md`; the measurements behind each rule:
//! `docs/experiments.md`.
//!
//! Like every policy it reads only executed reports (S3) and integer
//! arithmetic, on the same frames on every machine, so every machine holds
//! the same target; only the master's machine sends the timing events —
//! and, ahead of its own report's evaluation, the raise that report will
//! make ([`TrackingPolicy::raise_for_own_stall`], which changes no state).

mod cadence;
mod evidence;
mod stalls_ask;

#[cfg(test)]
pub(crate) use cadence::is_report_frame;
pub(crate) use cadence::{is_report_frame_of_game, report_due, TRACKING_REPORT_PERIOD};

use super::ladder::{Timing, MAX_LOOK_AHEAD};
use super::policy::rate_within;
use super::TimingEvent;
use crate::report::record::MAX_SEATS;
use crate::report::{Record, Report};
use evidence::Evidence;
use stalls_ask::StallsAsk;

/// The look-ahead before the first reports, as a duration: it covers the
/// widest round trips players meet (600 ms) so the opening does not stall,
/// and the first reports (frame 16) bring it down within a second.
pub(crate) const START_LOOK_AHEAD_MS: u32 = 300;
/// At most this much stall margin, ms (in frames at the rate, rounded up).
pub(crate) const MAX_STALL_MARGIN_MS: u32 = 300;
/// Frames without a stall the margin does not explain before a quarter of
/// the margin (at least a frame) goes.
pub(crate) const CALM_FRAMES_TO_SHED_MARGIN: u32 = 512;
/// The calm before a shed doubles, up to this many frames, each time a
/// shed has to be earned back within it (decision 53). A longer most kept
/// lossy paths' margins in five-minute games long past what their stalls
/// needed.
pub(crate) const MOST_CALM_FRAMES_TO_SHED_MARGIN: u32 = 2 * CALM_FRAMES_TO_SHED_MARGIN;
/// The margin a game starts with, frames: as if it had been earned and a
/// shed of it had failed once, so it goes after twice the calm (decision
/// 53). Nearly every internet path loses a packet now and then, and
/// learning that from stalls spent a short game's whole stall budget.
pub(crate) const PRIOR_MARGIN_FRAMES: u8 = 1;
/// The most one raise for stalls the round trips do not explain adds to
/// the margin, frames (decision 102). Such a stall is mostly a lost turn,
/// and it lasts the retransmission: asked for whole, its length held a
/// round trip of margin for a loss now and then; a frame at a time, the
/// frames' needs (rule 10) say whether more is needed.
pub(crate) const MOST_MARGIN_RAISE_FRAMES: u32 = 1;
/// A lone near miss — one frame that waited less than a frame, which the
/// round trips do not show — raises no margin if none was let pass in
/// this many frames before (decision 54): at most one stalled frame in
/// 1024, a fifth of the 0.5 % budget.
pub(crate) const NEAR_MISS_PASSES_EVERY_FRAMES: u32 = 2 * CALM_FRAMES_TO_SHED_MARGIN;
/// A margin raise the round trips explain within this many frames (a
/// spike's samples come back a spike's round trip after its first stall)
/// is taken back: by as much as the look-ahead they need rose, if it rose
/// by a quarter and two frames at least (a spike, not jitter's wobble).
pub(crate) const RAISE_EXPLAINED_WITHIN_FRAMES: u32 = 128;
/// Frames a spike's rise is held above what it asks for, until it has
/// reached the turns and two more reports have come (decision 59): the
/// machines come out of a spike's first stalls at different times, and
/// until the pacing has brought them back in phase the turns of the
/// one that resumed last reach the others up to a frame later than the
/// round trips say.
pub(crate) const SPIKE_PHASE_FRAMES: u8 = 1;
/// A decrease of at least this many frames (and a third of the look-ahead)
/// is a spike's end: not held back by what the frames needed during the
/// spike, which is forgotten (rule 10). Smaller ones are the round trips'
/// wobble, which the frames' needs check.
pub(crate) const SPIKE_FALL_FRAMES: u8 = 4;
/// The share of a frame (per mille) the rate leaves free on the slowest
/// machine.
pub(crate) const CPU_HEADROOM_PERMILLE: u32 = 50;
/// A seat whose frame work takes at least this share (per mille) of a frame
/// at the current rate is CPU-bound: waiting for it is the slow CPU, which
/// the frame rate answers (S4.2), not the network.
pub(crate) const CPU_BOUND_PERMILLE: u32 = 900;

/// Whether a rise of the look-ahead from `before` to `after` is as large
/// as a spike's end is taken to be ([`SPIKE_FALL_FRAMES`] and a third at
/// least): beyond what jitter's wobble moves the round trips' need by.
fn is_spike_sized(before: u32, after: u32) -> bool {
    let rise = after.saturating_sub(before);
    rise >= u32::from(SPIKE_FALL_FRAMES) && rise * 3 >= before
}

/// Whether a look-ahead going from `before` to `after` frames is a spike's
/// rise, not the wobble jitter gives the distribution: by a quarter and by
/// two frames at least.
fn is_spike_rise(before: u32, after: u32) -> bool {
    let rise = after.saturating_sub(before);
    rise >= 2 && rise * 4 >= before
}

/// The `tracking` policy's state; every machine holds the same.
#[derive(Debug, Clone)]
pub(crate) struct TrackingPolicy {
    speed_fps: u8,
    target: Timing,
    rate: u8,
    /// Extra frames of look-ahead, earned by stalls players reported.
    margin: u8,
    /// A stall reported before this frame does not raise the margin again
    /// by itself: the last raise had not reached the turns it was sent in
    /// yet. It raises only to what it shows the look-ahead before the
    /// raise lacked, when that is more than the raise gave.
    raise_blocked_until: u32,
    /// The look-ahead before the last raise: what stalls reported before
    /// `raise_blocked_until` waited under.
    look_ahead_before_raise: u32,
    /// The last frame an unexplained stall was reported (or the margin shed).
    last_unexplained_stall: u32,
    /// Calm frames before the margin sheds: twice
    /// [`CALM_FRAMES_TO_SHED_MARGIN`] for the prior margin, doubled each
    /// time a shed is earned back within it, halved back (not below
    /// [`CALM_FRAMES_TO_SHED_MARGIN`]) each time one holds (decision 53).
    calm_to_shed: u32,
    /// The frame the margin was last shed, until a raise or the next shed
    /// says whether that shed held.
    last_shed: Option<u32>,
    /// The last near miss let pass without a raise.
    tolerated: Option<u32>,
    /// The latest report frame already taken in, per seat (so one report's
    /// stall counts once, and evaluations happen on new reports only).
    seen: [Option<u32>; MAX_SEATS],
    /// The last margin raise not yet explained: its frame, the frames of it
    /// left, and the look-ahead the round trips needed then.
    unexplained_raise: Option<(u32, u8, u32)>,
    /// The frame the last event was issued on, and the look-ahead in force
    /// then (it executes within it).
    issued: Option<(u32, u8)>,
    /// A look-ahead a spike's first stalls asked for, held until the frame
    /// given, when its round trips are back whole and the look-ahead
    /// follows them (decision 51).
    spike_hold: Option<(u32, u32)>,
    /// The look-ahead the round trips needed at the last evaluation.
    for_round_trips: u32,
    /// The round trips' jitter at the last evaluation: the largest spread
    /// (90th percentile less median) a report showed, ms.
    jitter_ms: u32,
    /// Every seat's recent reports of the look-ahead its frames needed
    /// (rule 10): what the margin sheds by, and what stops a decrease.
    /// Boxed: 8 KB, made once with the policy.
    evidence: Box<Evidence>,
    /// A spike's rise the reports asked for and that was not answered
    /// yet: the evaluation that first asked for it, and the look-ahead in
    /// force then (its reports' frames ran under it). Answered once a
    /// report taken after that one says the frames still lack look-ahead
    /// (decision 75).
    spike_seen: Option<(u32, u8)>,
}

/// The part of the policy's state an evaluation's stalls and round trips
/// change, kept to undo a spike's rise not answered yet (decision 75).
#[derive(Debug, Clone, Copy)]
struct Asks {
    margin: u8,
    last_unexplained_stall: u32,
    calm_to_shed: u32,
    last_shed: Option<u32>,
    tolerated: Option<u32>,
    unexplained_raise: Option<(u32, u8, u32)>,
    spike_hold: Option<(u32, u32)>,
}

/// The schedule where the policy's events execute (S5), as the timing
/// machine has it on the frame it evaluates.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct InForce {
    /// The timing in force.
    pub timing: Timing,
    /// A staged decrease's target, until it has finished.
    pub staged: Option<Timing>,
}

impl TrackingPolicy {
    /// The policy at the game's start for a game speed of `speed_fps`
    /// frames a second (0 counts as 1): [`start`](Self::start) at that
    /// rate, [`PRIOR_MARGIN_FRAMES`] of margin.
    pub(crate) fn new(speed_fps: u8) -> TrackingPolicy {
        let speed_fps = speed_fps.max(1);
        TrackingPolicy {
            speed_fps,
            target: Self::start(speed_fps),
            rate: speed_fps,
            margin: PRIOR_MARGIN_FRAMES,
            raise_blocked_until: 0,
            look_ahead_before_raise: 0,
            last_unexplained_stall: 0,
            calm_to_shed: MOST_CALM_FRAMES_TO_SHED_MARGIN,
            last_shed: None,
            tolerated: None,
            seen: [None; MAX_SEATS],
            unexplained_raise: None,
            issued: None,
            spike_hold: None,
            for_round_trips: 0,
            jitter_ms: 0,
            evidence: Box::new(Evidence::new()),
            spike_seen: None,
        }
    }

    /// `1/L` with `L` frames of [`START_LOOK_AHEAD_MS`] at `speed_fps`
    /// (9 at 30 fps, 18 at 60) until the first reports.
    pub(crate) fn start(speed_fps: u8) -> Timing {
        let frames = (START_LOOK_AHEAD_MS * u32::from(speed_fps.max(1))).div_ceil(1000);
        let look_ahead = frames.clamp(1, u32::from(MAX_LOOK_AHEAD)) as u8;
        Timing::new(1, look_ahead).unwrap_or(Timing::START)
    }

    /// The timing the policy holds (every machine holds the same).
    pub(crate) fn target(&self) -> Timing {
        self.target
    }

    /// The frame rate the policy holds, frames a second.
    pub(crate) fn rate(&self) -> u8 {
        self.rate
    }

    /// The stall margin in the target's look-ahead, frames (earned by
    /// stalls the round trips do not explain).
    #[cfg(test)]
    pub(crate) fn margin(&self) -> u8 {
        self.margin
    }

    /// The game speed changed to `speed_fps` frames a second (0 counts as
    /// 1): the top rate of later evaluations.
    pub(crate) fn set_speed_fps(&mut self, speed_fps: u8) {
        self.speed_fps = speed_fps.max(1);
    }

    /// The most margin at `rate`: [`MAX_STALL_MARGIN_MS`] in frames.
    fn most_margin(rate: u8) -> u8 {
        (MAX_STALL_MARGIN_MS * u32::from(rate))
            .div_ceil(1000)
            .min(u32::from(MAX_LOOK_AHEAD)) as u8
    }

    /// The look-ahead a turn needs at `fps`: the lockstep session sends a
    /// frame's turn as the frame starts, and the turn must arrive before
    /// the frame it is for starts, one way (`rtt_ms / 2`) — in whole frames,
    /// rounded up, at least 1. An engine that sends after its frame's work
    /// is late by that work; its stalls then earn the margin.
    pub(crate) fn look_ahead_for(rtt_ms: u32, fps: u8) -> u32 {
        let frames = (u64::from(rtt_ms) * 500 * u64::from(fps)).div_ceil(1_000_000);
        frames.clamp(1, u64::from(MAX_LOOK_AHEAD)) as u32
    }

    /// The round trip a report says turns need now, ms:
    /// - the 90th percentile plus its distance above the median, which
    ///   covers jitter up to about the worst sample of a steady link;
    /// - but no more than the latest sample (or the median, whichever is
    ///   higher) plus twice that spread: a short spike (under a tenth of
    ///   the interval, so the percentile does not show it) that is already
    ///   over when the report is taken is not answered, and a longer one
    ///   that is over is answered until the next report, 16 frames later;
    /// - never more than the worst sample.
    ///
    /// A report without the detail (compact or extended layout) gives its
    /// worst sample, as before.
    pub(crate) fn needed_rtt_ms(report: &Report) -> Option<u32> {
        let worst = report.worst_rtt_ms?;
        let Some(detail) = report.detail else {
            return Some(worst);
        };
        let (Some(median), Some(p90), Some(latest)) = (
            detail.median_rtt_ms,
            detail.p90_rtt_ms,
            detail.latest_rtt_ms,
        ) else {
            return Some(worst);
        };
        let spread = p90.saturating_sub(median);
        let steady = p90.saturating_add(spread);
        let now = latest.max(median).saturating_add(spread.saturating_mul(2));
        Some(steady.min(now).min(worst))
    }

    /// A report's round-trip spread: its 90th percentile less its median,
    /// ms (`None` without the detail's distribution).
    fn spread_ms(report: &Report) -> Option<u32> {
        let detail = report.detail?;
        Some(detail.p90_rtt_ms?.saturating_sub(detail.median_rtt_ms?))
    }

    /// On a frame where new reports have executed and every player has a
    /// fresh one (every machine executes the same reports on the same
    /// frames, so every machine evaluates on the same frames).
    /// `schedule` is where the events execute (the timing machine's), if
    /// the caller keeps one: a decrease on its way there is not replaced by
    /// another ([`InForce`]).
    pub(crate) fn evaluate(
        &mut self,
        record: &Record,
        frame: u32,
        schedule: Option<InForce>,
    ) -> Option<TimingEvent> {
        // Every player's round trip is needed: one missing would let the
        // nearer players' bring the look-ahead down.
        if !record.all_fresh(frame) || record.any_missing(frame) || !self.any_new_report(record) {
            return None;
        }
        let needed_rtt = record
            .fresh_reports(frame)
            .filter_map(Self::needed_rtt_ms)
            .max()?;
        let rate = Self::rate_with_headroom(record, frame, self.speed_fps, self.rate);
        let (in_force, blocked) = self.stalled_under(frame);
        let mut asked = self.take_in_reports(record, rate, in_force, blocked);
        self.join_held_spike(&mut asked, frame);
        let for_round_trips = Self::look_ahead_for(needed_rtt, rate);
        let answered_round_trips = self.for_round_trips;
        self.for_round_trips = for_round_trips;
        if asked.unexplained == 0 && !blocked {
            // Calm reports only: a spike's reports mix its samples with
            // those before it, and their spread is the spike.
            self.jitter_ms = record
                .fresh_reports(frame)
                .filter_map(Self::spread_ms)
                .max()
                .unwrap_or(0);
        }
        let before = self.asks();
        self.take_back_explained_raise(for_round_trips, frame);
        let margin_before = self.margin;
        let by_evidence = self.evidence.covers(record.seats());
        let raised = self.update_margin(&asked, for_round_trips, rate, frame, by_evidence);
        if !raised && asked.unexplained == 0 {
            self.shed_by_evidence(record, for_round_trips, frame);
        }
        if raised {
            self.unexplained_raise = Some((frame, self.margin - margin_before, for_round_trips));
        }
        let held = self.hold_spike(&asked, for_round_trips, rate, frame);
        let asked_for = Self::look_ahead_of(for_round_trips, self.margin, held);
        let phased = self.hold_phase_frame(asked_for, frame);
        let mut look_ahead = self.guard_decrease(record, phased);
        let mut raised = raised;
        let current = self.target.look_ahead();
        // A spike's first stall asks for its hold; while it has not been
        // seen to go on, its round trips (they come back after it) are its
        // too.
        let spike = asked.spike > 0
            || (self.spike_seen.is_some() && is_spike_sized(answered_round_trips, for_round_trips));
        if spike && !self.spike_goes_on(current, look_ahead, in_force, asked.lacking, frame) {
            // A spike's rise not (yet) seen to go on: nothing of it is
            // answered, neither its stalls' asks nor its round trips.
            self.restore(before);
            self.for_round_trips = answered_round_trips;
            look_ahead = current;
            raised = false;
        } else if !spike {
            self.spike_seen = None;
        }
        if raised || is_spike_rise(u32::from(current), u32::from(look_ahead)) {
            if frame >= self.raise_blocked_until {
                self.look_ahead_before_raise = u32::from(self.target.look_ahead());
            }
            // Stalls reported before a raise reached the turns (its own
            // look-ahead, then a whole report interval) say nothing new,
            // whether the margin or a spike in the round trips raised it: a
            // stall of the look-ahead before is no shortfall of the one
            // after. (Not for jitter's one-frame wobble, which would keep
            // loss from ever earning its margin.)
            self.raise_blocked_until = self
                .raise_blocked_until
                .max(frame + u32::from(look_ahead) + 2 * TRACKING_REPORT_PERIOD);
        }
        let target = Timing::new(1, look_ahead).unwrap_or(self.target);
        if (target, rate) == (self.target, self.rate) {
            return None;
        }
        if let Some(now) = schedule {
            // A spike's fall below a decrease on its way replaces it
            // (decision 103): the small step the end of a spike's samples
            // asked for would otherwise hold the fall back for its whole
            // staging, two look-aheads at the spike's height.
            if rate == self.rate
                && self.decrease_on_its_way(now, frame)
                && target.look_ahead() <= self.target.look_ahead()
                && !is_spike_sized(
                    u32::from(target.look_ahead()),
                    u32::from(self.target.look_ahead()),
                )
            {
                return None;
            }
        }
        self.target = target;
        self.rate = rate;
        self.issued = Some((frame, schedule.map_or(0, |now| now.timing.look_ahead())));
        Some(TimingEvent { target, fps: rate })
    }

    /// Whether a rise from `current` to `look_ahead` that a spike asks for
    /// (its stalls' held ask, or the round trips rising by a spike's rise
    /// over those last answered) may go (decision 75): any rise short of a
    /// spike's ([`is_spike_rise`]) goes; a spike's
    /// rise goes only once a report taken after the one that first asked
    /// for it says the frames still lack look-ahead — a stall, or a frame
    /// that needed more than it ran under, by a spike's rise over
    /// `in_force` (`lacking` frames). The first ask is a spike already
    /// over as often as one going on: a spike shorter than its one-way
    /// trip stalls the game once, and its round trips come back after
    /// it; answered, a 0.8 s spike that had ended held a 60 fps game at
    /// 767 ms of look-ahead for 3.7 s. One going on stalls again a
    /// one-way trip later, and that stall is answered: a spike costs one
    /// stall more, on a metric that counts frames, and no latency for one
    /// that is over.
    fn spike_goes_on(
        &mut self,
        current: u8,
        look_ahead: u8,
        in_force: u32,
        lacking: u32,
        frame: u32,
    ) -> bool {
        if !is_spike_sized(u32::from(current), u32::from(look_ahead)) {
            self.spike_seen = None;
            return true;
        }
        match self.spike_seen {
            None => {
                self.spike_seen = Some((frame, in_force.min(u32::from(MAX_LOOK_AHEAD)) as u8));
                false
            }
            // Reports taken before the first ask executed: the same stall.
            Some((seen, under)) if frame <= seen + u32::from(under) => false,
            Some(_) if is_spike_sized(in_force, in_force + lacking) => {
                self.spike_seen = None;
                true
            }
            Some(_) => false,
        }
    }

    /// Whether the master's own stall may raise at once (decision 50): a
    /// spike's rise only once an evaluation has seen the spike ask before
    /// and this report, taken now, still lacks look-ahead.
    fn spike_answered_now(&self, look_ahead: u8, lacking: u32, in_force: u32, frame: u32) -> bool {
        if !is_spike_sized(u32::from(self.target.look_ahead()), u32::from(look_ahead)) {
            return true;
        }
        // The master's report is taken now, after the evaluation that saw
        // the spike ask.
        self.spike_seen
            .is_some_and(|(seen, _)| frame > seen && is_spike_sized(in_force, in_force + lacking))
    }

    fn asks(&self) -> Asks {
        Asks {
            margin: self.margin,
            last_unexplained_stall: self.last_unexplained_stall,
            calm_to_shed: self.calm_to_shed,
            last_shed: self.last_shed,
            tolerated: self.tolerated,
            unexplained_raise: self.unexplained_raise,
            spike_hold: self.spike_hold,
        }
    }

    fn restore(&mut self, asks: Asks) {
        self.margin = asks.margin;
        self.last_unexplained_stall = asks.last_unexplained_stall;
        self.calm_to_shed = asks.calm_to_shed;
        self.last_shed = asks.last_shed;
        self.tolerated = asks.tolerated;
        self.unexplained_raise = asks.unexplained_raise;
        self.spike_hold = asks.spike_hold;
    }

    /// The look-ahead the policy asks for: what the round trips need plus
    /// the margin, or a spike's held look-ahead if more, up to
    /// [`MAX_LOOK_AHEAD`]. The evaluation and the master's fast raise
    /// ([`Self::raise_for_own_stall`]) both read it here, so they agree.
    fn look_ahead_of(for_round_trips: u32, margin: u8, held: u32) -> u8 {
        (for_round_trips + u32::from(margin))
            .max(held)
            .min(u32::from(MAX_LOOK_AHEAD)) as u8
    }

    /// `look_ahead` and, when it is a spike's rise over the target
    /// ([`is_spike_rise`]), [`SPIKE_PHASE_FRAMES`] more (up to
    /// [`MAX_LOOK_AHEAD`]). The evaluation and the master's fast raise
    /// ([`Self::raise_for_own_stall`]) both read it here, so they agree.
    fn with_phase_frame(&self, look_ahead: u8) -> u8 {
        if is_spike_rise(u32::from(self.target.look_ahead()), u32::from(look_ahead)) {
            look_ahead
                .saturating_add(SPIKE_PHASE_FRAMES)
                .min(MAX_LOOK_AHEAD)
        } else {
            look_ahead
        }
    }

    /// [`Self::with_phase_frame`], and a rise's phase frame held with it
    /// as a spike's ask is ([`Self::hold_spike`]): until it has reached the
    /// turns and two more reports have come.
    fn hold_phase_frame(&mut self, look_ahead: u8, frame: u32) -> u8 {
        let phased = self.with_phase_frame(look_ahead);
        if phased > look_ahead {
            self.start_hold(u32::from(phased), frame);
        }
        phased
    }

    /// The look-ahead stalls reported on `frame` waited under — the one
    /// before the last raise while that raise has not reached the turns
    /// (then `true`: blocked), else the target's.
    fn stalled_under(&self, frame: u32) -> (u32, bool) {
        if frame < self.raise_blocked_until {
            (self.look_ahead_before_raise, true)
        } else {
            (u32::from(self.target.look_ahead()), false)
        }
    }

    /// Whether the last event is a decrease still on its way: in flight
    /// (it executes within the look-ahead it was sent under, and a frame),
    /// or staged (S5: it waits until every command scheduled under the old
    /// look-ahead has come due, then steps down a frame at a time). Another
    /// decrease now would replace it and start that wait again: after a
    /// spike the round trips' one-frame wobble from report to report kept
    /// a 68-frame look-ahead up for 8 s after a 2.5 s spike, one new event
    /// every 16 frames. A further decrease waits for the one on its way,
    /// unless it falls a spike's size below it (the caller's rule); a
    /// smaller one (a stall's margin, the round trips up again) or an
    /// increase (or a new rate) goes at once.
    fn decrease_on_its_way(&self, now: InForce, frame: u32) -> bool {
        if self.target.look_ahead() >= now.timing.look_ahead() {
            return false;
        }
        self.event_in_flight(frame) || now.staged == Some(self.target)
    }

    /// Whether the last event issued may not have executed yet: it
    /// executes within the look-ahead it was sent under, and a frame.
    fn event_in_flight(&self, frame: u32) -> bool {
        self.issued
            .is_some_and(|(on, over)| frame <= on + u32::from(over) + 1)
    }

    /// A spike's first stalls come before its round trips do (those come
    /// back a spike's round trip later), so they raise the margin as if
    /// they were loss; when the round trips then need more look-ahead, that
    /// much of the recent raise was the spike, which the round trips now
    /// follow, and it leaves the margin, so the look-ahead comes down with
    /// the spike's end instead of a quarter every 512 calm frames.
    fn take_back_explained_raise(&mut self, for_round_trips: u32, frame: u32) {
        let Some((raised_on, left, needed_then)) = self.unexplained_raise else {
            return;
        };
        if frame > raised_on + RAISE_EXPLAINED_WITHIN_FRAMES {
            self.unexplained_raise = None;
            return;
        }
        if !is_spike_rise(needed_then, for_round_trips) {
            return;
        }
        let rise = for_round_trips - needed_then;
        let explained = rise.min(u32::from(left)).min(u32::from(self.margin)) as u8;
        if explained > 0 {
            self.margin -= explained;
            self.unexplained_raise = Some((raised_on, left - explained, for_round_trips));
        }
    }

    /// S4.2's rate, but leaving the slowest machine [`CPU_HEADROOM_PERMILLE`]
    /// of each frame free: at exactly its frame work, the least delay (a
    /// late datagram, a frame begun a little late) puts it behind the
    /// schedule for good, and the others wait for its turns frame after
    /// frame.
    fn rate_with_headroom(record: &Record, frame: u32, speed_fps: u8, current: u8) -> u8 {
        let budget_us = (1000 - CPU_HEADROOM_PERMILLE) * 1000;
        rate_within(record, frame, speed_fps, current, budget_us)
    }

    fn any_new_report(&self, record: &Record) -> bool {
        record.seats().any(|seat| {
            let executed = record.latest(seat).map(|(_, executed)| executed);
            self.seen.get(usize::from(seat)) != Some(&executed)
        })
    }

    /// Mark the new reports seen and read what their stalls ask of the
    /// look-ahead ([`StallsAsk`]): a stall while waiting for a CPU-bound
    /// seat is the slow CPU, which the frame rate answers; a stall whose
    /// report's worst round trip needs as much look-ahead as the stall says
    /// was lacking is the network's, which the look-ahead follows; any
    /// other is unexplained.
    fn take_in_reports(
        &mut self,
        record: &Record,
        rate: u8,
        in_force: u32,
        blocked: bool,
    ) -> StallsAsk {
        let mut asked = StallsAsk::default();
        for seat in record.seats() {
            let Some((report, executed)) = record.latest(seat) else {
                continue;
            };
            let Some(seen) = self.seen.get_mut(usize::from(seat)) else {
                continue;
            };
            if *seen == Some(executed) {
                continue;
            }
            *seen = Some(executed);
            if let Some(detail) = report.detail {
                self.evidence.take_in(seat, detail.frames, detail.needs);
            }
            let mut one =
                Self::ask_of_report(record, &report, rate, in_force, blocked, self.jitter_ms);
            if let Some(needs) = report.detail.and_then(|d| d.needs) {
                let beyond = needs.most.saturating_sub(needs.reference);
                one.lacking = one.lacking.max(u32::from(beyond));
            }
            asked.join(&one);
        }
        asked
    }

    /// A stall the round trips do not explain raises the margin: by what
    /// the stalls ask on top of the round trips (at least a frame), or to
    /// the look-ahead a stall under the look-ahead before a raise asks for,
    /// up to [`MAX_STALL_MARGIN_MS`] (a spike's half-back round trips ask
    /// for a look-ahead held apart, [`Self::hold_spike`]). Once per raise
    /// that has had time to act: stalls reported before a raise reached the
    /// turns waited under the look-ahead before it, and raise only to a
    /// look-ahead beyond what the raise gave ([`Self::take_in_reports`]).
    /// The budget of 0.5 % of frames is too small to spend on learning (a
    /// 900-frame game may stall on 4), so every such stall counts, but a
    /// lone near miss now and then ([`Self::tolerates`]). Calm sheds a
    /// quarter of the margin (at least a frame) every `calm_to_shed`
    /// frames, a period that doubles when a shed has to be earned back
    /// within it: each failed shed is a few stalled frames, and at every
    /// 512 frames a path that keeps losing packets spent the budget on
    /// them alone (decision 53). Whether the margin rose.
    fn update_margin(
        &mut self,
        asked: &StallsAsk,
        for_round_trips: u32,
        rate: u8,
        frame: u32,
        by_evidence: bool,
    ) -> bool {
        let margin = u32::from(self.margin);
        if asked.unexplained > 0 {
            self.last_unexplained_stall = frame;
            if self.tolerates(asked, frame) {
                self.tolerated = Some(frame);
                return false;
            }
            if let Some(raised) = Self::raised_margin(asked, for_round_trips, margin, rate) {
                self.margin = raised;
                if let Some(shed) = self.last_shed.take() {
                    if frame.saturating_sub(shed) < self.calm_to_shed {
                        self.calm_to_shed = self
                            .calm_to_shed
                            .saturating_mul(2)
                            .min(MOST_CALM_FRAMES_TO_SHED_MARGIN);
                    }
                }
                return true;
            }
        } else {
            if self
                .last_shed
                .is_some_and(|shed| frame.saturating_sub(shed) >= self.calm_to_shed)
            {
                // The last shed held a whole calm period (also when it
                // left no margin to shed next).
                self.calm_to_shed = (self.calm_to_shed / 2).max(CALM_FRAMES_TO_SHED_MARGIN);
                self.last_shed = None;
            }
            if self.margin > 0
                && !by_evidence
                && frame.saturating_sub(self.last_unexplained_stall) >= self.calm_to_shed
            {
                self.margin -= (self.margin / 4).max(1);
                self.last_unexplained_stall = frame;
                self.last_shed = Some(frame);
            }
        }
        false
    }

    /// The margin sheds down to what the frames' needs vouch for (rule 10,
    /// decision 61): the lowest look-ahead every seat's last
    /// [`EVIDENCE_REPORTS`](evidence::EVIDENCE_REPORTS) reports would have
    /// held, once they cover half the calm period (`calm_to_shed`, which a
    /// failed shed doubles, as for the calm shed it replaces). A shed counts
    /// as one for that backoff.
    fn shed_by_evidence(&mut self, record: &Record, for_round_trips: u32, frame: u32) {
        let Some(floor) =
            self.evidence
                .floor(record, evidence::EVIDENCE_REPORTS, self.calm_to_shed / 2)
        else {
            return;
        };
        let vouched = floor.saturating_sub(for_round_trips);
        if vouched < u32::from(self.margin) {
            self.margin = vouched as u8;
            self.last_unexplained_stall = frame;
            self.last_shed = Some(frame);
        }
    }

    /// A decrease to `look_ahead` goes no lower than the frames of every
    /// seat's last [`GUARD_REPORTS`](evidence::GUARD_REPORTS) reports held
    /// (rule 10, decision 62): jitter's wobble in the round trips asks now
    /// and then for a look-ahead those frames just showed too short. A
    /// spike's end — a fall of four frames and a third at least — goes as
    /// asked, and what the frames needed during the spike is forgotten.
    fn guard_decrease(&mut self, record: &Record, look_ahead: u8) -> u8 {
        let current = self.target.look_ahead();
        if look_ahead >= current {
            return look_ahead;
        }
        let fall = current - look_ahead;
        if fall >= SPIKE_FALL_FRAMES && u32::from(fall) * 3 >= u32::from(current) {
            self.evidence.forget();
            return look_ahead;
        }
        match self.evidence.floor(record, evidence::GUARD_REPORTS, 1) {
            Some(floor) => look_ahead.max(floor.min(u32::from(current)) as u8),
            None => look_ahead,
        }
    }

    /// Whether `asked` is a lone near miss let pass: one every
    /// [`NEAR_MISS_PASSES_EVERY_FRAMES`] (decision 54). A margin frame costs
    /// every command a frame for at least 512 frames; a near miss costs
    /// one frame under a frame's wait, and the 0.5 % budget has room for a
    /// few. Raised at every one, a lossy 130 ms game sat on two frames of
    /// margin for most of its five minutes with 0.04 % of its frames
    /// stalled.
    fn tolerates(&self, asked: &StallsAsk, frame: u32) -> bool {
        asked.lone_near_miss()
            && self.tolerated.map_or(true, |at| {
                frame.saturating_sub(at) >= NEAR_MISS_PASSES_EVERY_FRAMES
            })
    }

    /// The look-ahead a spike's first stalls hold up (0 when none): one
    /// newly asked for beyond what the round trips and margin give, held
    /// until it has reached the turns and two more reports have brought
    /// the spike's round trips back whole; then the look-ahead follows
    /// them. Kept as margin, a short spike's ask outlived it by 512 frames
    /// a quarter (decision 51).
    fn hold_spike(&mut self, asked: &StallsAsk, for_round_trips: u32, rate: u8, frame: u32) -> u32 {
        let held = self.held_spike(frame);
        let spike = Self::spike_look_ahead(asked, for_round_trips, rate);
        if spike > held.max(for_round_trips + u32::from(self.margin)) {
            self.start_hold(spike, frame);
            return spike;
        }
        held
    }

    /// Hold `look_ahead` from `frame` until it has reached the turns and
    /// two more reports have come: a spike's ask ([`Self::hold_spike`]) and
    /// a rise's phase frame ([`Self::hold_phase_frame`]) alike.
    fn start_hold(&mut self, look_ahead: u32, frame: u32) {
        let until = frame + look_ahead + 2 * TRACKING_REPORT_PERIOD;
        self.spike_hold = Some((until, look_ahead));
    }

    /// The look-ahead a spike's stalls ask for: up to the margin's most on
    /// top of the round trips, as when it was margin (a report whose every
    /// frame waited under a long look-ahead reads as that look-ahead times
    /// the frames' wait).
    fn spike_look_ahead(asked: &StallsAsk, for_round_trips: u32, rate: u8) -> u32 {
        asked
            .spike
            .min(for_round_trips + u32::from(Self::most_margin(rate)))
    }

    /// A stall that waited under the look-ahead before a raise still on its
    /// way asks to reach a look-ahead (rule 5); while a spike's ask is held
    /// it is that spike's stall, and joins the hold instead of the margin
    /// (decision 55). Its report can be taken after the spike's round
    /// trips have passed, so they do not show it: read as margin, a 1.1 s
    /// spike's stall kept 17 frames of margin for 17 s after it.
    fn join_held_spike(&self, asked: &mut StallsAsk, frame: u32) {
        if self.held_spike(frame) > 0 && asked.look_ahead > 0 {
            asked.spike = asked.spike.max(asked.look_ahead);
            asked.look_ahead = 0;
        }
    }

    /// The look-ahead held for a spike on `frame`, 0 when none.
    fn held_spike(&self, frame: u32) -> u32 {
        self.spike_hold
            .filter(|(until, _)| frame < *until)
            .map_or(0, |(_, look_ahead)| look_ahead)
    }

    /// The margin after unexplained stalls asked `asked` of it, if they
    /// raise it: by what they ask on top of the round trips, or to the
    /// look-ahead they ask to reach (which asks nothing when the round
    /// trips already ask for as much, or a raise since the stall gave it),
    /// up to [`MAX_STALL_MARGIN_MS`], and by at most
    /// [`MOST_MARGIN_RAISE_FRAMES`] a raise.
    fn raised_margin(asked: &StallsAsk, for_round_trips: u32, margin: u32, rate: u8) -> Option<u8> {
        let most = u32::from(Self::most_margin(rate));
        let to_reach = asked.look_ahead.saturating_sub(for_round_trips + margin);
        let raise = asked.margin.max(to_reach).min(MOST_MARGIN_RAISE_FRAMES);
        (raise > 0 && margin < most).then(|| (margin + raise).min(most) as u8)
    }

    /// The master's own stall, read before its report has gone anywhere
    /// (decision 50): the raise the evaluation will make when that report
    /// executes, `report` being the one just taken, as a timing event to
    /// send now, or `None` when it raises nothing (no stall, one the round
    /// trips or a slow CPU explain, or no more than the look-ahead
    /// `in_force` already has).
    ///
    /// A spike's stalls come one per look-ahead of frames (each run of
    /// frames waits on the turns sent after the last run's stall), until a
    /// longer look-ahead is in force; the report and then the event each
    /// take one look-ahead to execute, three runs of stalls in all. Sent
    /// with the report, the event executes with it, and saves one run. It
    /// changes nothing in the policy: every machine evaluates the report
    /// when it executes, as before, and makes the same raise, which the
    /// master sends again (in force already, it changes nothing where it
    /// executes); were the evaluation's raise smaller, its next target
    /// brings the look-ahead down as usual.
    pub(crate) fn raise_for_own_stall(
        &self,
        record: &Record,
        report: &Report,
        frame: u32,
        in_force: InForce,
    ) -> Option<TimingEvent> {
        if record.any_missing(frame) {
            return None;
        }
        let (stalled_under, blocked) = self.stalled_under(frame);
        let mut asked = Self::ask_of_report(
            record,
            report,
            self.rate,
            stalled_under,
            blocked,
            self.jitter_ms,
        );
        self.join_held_spike(&mut asked, frame);
        if asked.unexplained == 0 || self.tolerates(&asked, frame) {
            return None;
        }
        let margin = u32::from(self.margin);
        // What the round trips need once this report has executed: its
        // own, or the others' at the last evaluation.
        let for_round_trips = Self::needed_rtt_ms(report)
            .map_or(0, |rtt| Self::look_ahead_for(rtt, self.rate))
            .max(self.for_round_trips);
        let raised =
            Self::raised_margin(&asked, for_round_trips, margin, self.rate).unwrap_or(self.margin);
        let held =
            Self::spike_look_ahead(&asked, for_round_trips, self.rate).max(self.held_spike(frame));
        let look_ahead = self.with_phase_frame(Self::look_ahead_of(for_round_trips, raised, held));
        if look_ahead <= self.target.look_ahead().max(in_force.timing.look_ahead()) {
            return None;
        }
        let own_round_trips =
            Self::needed_rtt_ms(report).map_or(0, |rtt| Self::look_ahead_for(rtt, self.rate));
        let spike = asked.spike > 0
            || (self.spike_seen.is_some() && is_spike_sized(self.for_round_trips, own_round_trips));
        if spike && !self.spike_answered_now(look_ahead, asked.lacking, stalled_under, frame) {
            return None;
        }
        let target = Timing::new(1, look_ahead).ok()?;
        Some(TimingEvent {
            target,
            fps: self.rate,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::report::ReportDetail;

    fn detail(
        median: u32,
        p90: u32,
        latest: u32,
        stalled: u32,
        waited_for: Option<u8>,
    ) -> ReportDetail {
        ReportDetail {
            median_rtt_ms: Some(median),
            p90_rtt_ms: Some(p90),
            latest_rtt_ms: Some(latest),
            frames: TRACKING_REPORT_PERIOD,
            stalled_frames: stalled,
            stall_ms: stalled * 10,
            waited_for: waited_for.filter(|_| stalled > 0),
            needs: None,
        }
    }

    fn report(worst: u32, process_us: u32, detail: ReportDetail) -> Report {
        Report {
            process_us,
            // The longest wait: here every stall of the interval as long.
            max_wait_ms: detail.stall_ms / detail.stalled_frames.max(1),
            worst_rtt_ms: Some(worst),
            detail: Some(detail),
        }
    }

    /// The first report of a 1500 ms spike on a 120 ms game at 30 fps: its
    /// first stall waits 684 ms (and the next frame 3 ms); the first
    /// samples went out before it and say 810 ms, the old one-way 60 plus
    /// the new 750.
    fn spike_onset() -> Report {
        let mut first = detail(120, 810, 810, 2, Some(1));
        first.frames = 6;
        first.stall_ms = 687;
        let mut onset = report(810, 5000, first);
        onset.max_wait_ms = 684;
        onset
    }

    /// A policy whose prior margin has gone and whose sheds hold: the
    /// rules the tests below show start from no margin.
    fn without_prior(speed_fps: u8) -> TrackingPolicy {
        let mut policy = TrackingPolicy::new(speed_fps);
        policy.margin = 0;
        policy.calm_to_shed = CALM_FRAMES_TO_SHED_MARGIN;
        policy
    }

    /// The target of the event `policy` issues on `frame` (one must come).
    fn issued(policy: &mut TrackingPolicy, record: &Record, frame: u32) -> String {
        policy
            .evaluate(record, frame, None)
            .unwrap()
            .target
            .to_string()
    }

    /// Every seat reports `r` on `executed`.
    fn apply(record: &mut Record, executed: u32, r: Report) {
        let seats: Vec<u8> = record.seats().collect();
        for seat in seats {
            record.apply_report(seat, executed, r).unwrap();
        }
    }

    #[test]
    fn the_start_is_a_duration_and_reports_come_every_16_frames() {
        assert_eq!(TrackingPolicy::start(30).to_string(), "1/9");
        assert_eq!(TrackingPolicy::start(60).to_string(), "1/18");
        let reports: Vec<u32> = (0..=64).filter(|&f| is_report_frame(f)).collect();
        assert_eq!(reports, [16, 32, 48, 64]);
    }

    #[test]
    fn the_look_ahead_covers_half_the_round_trip() {
        // 5 ms on a LAN at 30 fps: 2.5 ms fit in one frame.
        assert_eq!(TrackingPolicy::look_ahead_for(5, 30), 1);
        // 100 ms at 60 fps: 50 ms is exactly 3 frames; 101 ms needs 4.
        assert_eq!(TrackingPolicy::look_ahead_for(100, 60), 3);
        assert_eq!(TrackingPolicy::look_ahead_for(101, 60), 4);
        assert_eq!(TrackingPolicy::look_ahead_for(1_000_000, 60), 250);
    }

    #[test]
    fn the_needed_round_trip_covers_jitter_but_not_a_spike_already_over() {
        // Steady jitter: p90 plus its spread above the median, capped by the worst.
        let jittery = report(200, 0, detail(150, 180, 160, 0, None));
        assert_eq!(TrackingPolicy::needed_rtt_ms(&jittery), Some(200));
        let calm = report(240, 0, detail(150, 170, 150, 0, None));
        assert_eq!(TrackingPolicy::needed_rtt_ms(&calm), Some(190));
        // A 1500 ms spike shorter than a tenth of the interval, over: only
        // the worst sample shows it.
        let over_short = report(1500, 0, detail(120, 125, 120, 0, None));
        assert_eq!(TrackingPolicy::needed_rtt_ms(&over_short), Some(130));
        // One that filled a fifth of it is answered until the next report.
        let over = report(1500, 0, detail(120, 1500, 121, 0, None));
        assert_eq!(TrackingPolicy::needed_rtt_ms(&over), Some(1500));
        // Still going on: answered.
        let ongoing = report(1500, 0, detail(1400, 1500, 1500, 0, None));
        assert_eq!(TrackingPolicy::needed_rtt_ms(&ongoing), Some(1500));
        // Without the detail: the worst sample, as the older layouts say.
        let bare = Report {
            detail: None,
            ..over_short
        };
        assert_eq!(TrackingPolicy::needed_rtt_ms(&bare), Some(1500));
    }

    #[test]
    fn it_follows_the_reports_down_at_once_and_unexplained_stalls_buy_margin() {
        let mut policy = without_prior(30);
        let mut record = Record::new(0, [0, 1]);
        assert_eq!(policy.evaluate(&record, 20, None), None, "no reports yet");
        apply(
            &mut record,
            25,
            report(220, 5000, detail(220, 220, 220, 0, None)),
        );
        let first = policy.evaluate(&record, 25, None).unwrap();
        assert_eq!(first.target.to_string(), "1/4"); // 110 ms: 3.3 frames
        assert_eq!(policy.evaluate(&record, 26, None), None, "nothing new");
        // The round trip falls: the very next report brings it down.
        apply(
            &mut record,
            41,
            report(20, 5000, detail(20, 20, 20, 0, None)),
        );
        assert_eq!(issued(&mut policy, &record, 41), "1/1");
        // A 10 ms stall on a 20 ms network at 1/1 is unexplained: a frame
        // of margin (10 ms is a third of a frame, rounded up). Each player
        // waited for the other's turn: two late turns, no lone near miss.
        for (seat, waited_for) in [(0, 1), (1, 0)] {
            let stalled = report(20, 5000, detail(20, 20, 20, 1, Some(waited_for)));
            record.apply_report(seat, 57, stalled).unwrap();
        }
        assert_eq!(issued(&mut policy, &record, 57), "1/2");
        assert_eq!(policy.margin(), 1);
        // Stalls reported before the raise could act add nothing.
        apply(
            &mut record,
            73,
            report(20, 5000, detail(20, 20, 20, 5, Some(1))),
        );
        assert_eq!(policy.evaluate(&record, 73, None), None);
        assert_eq!(policy.margin(), 1);
        // After it, turns typically 100 ms late (3 stalls, 300 ms): they
        // ask for three frames more, and a raise gives one at most
        // (decision 102); the frames' needs or the next stall ask again.
        let mut late = detail(20, 20, 20, 3, Some(1));
        late.stall_ms = 300;
        apply(&mut record, 121, report(20, 5000, late));
        assert_eq!(issued(&mut policy, &record, 121), "1/3");
        assert_eq!(policy.margin(), 2);
        // Calm reports shed a quarter (at least a frame) every 512 frames.
        let mut frame = 121;
        while frame < 121 + CALM_FRAMES_TO_SHED_MARGIN {
            frame += TRACKING_REPORT_PERIOD;
            apply(
                &mut record,
                frame,
                report(20, 5000, detail(20, 20, 20, 0, None)),
            );
            policy.evaluate(&record, frame, None);
        }
        assert_eq!(policy.margin(), 1);
    }

    #[test]
    fn a_spike_s_first_stalls_leave_the_margin_once_its_round_trips_show_it() {
        let mut policy = without_prior(30);
        let mut record = Record::new(0, [0, 1]);
        apply(
            &mut record,
            25,
            report(200, 5000, detail(200, 200, 200, 0, None)),
        );
        assert_eq!(issued(&mut policy, &record, 25), "1/3");
        // The spike's first stall (150 ms) comes before its round trips:
        // unexplained, it asks for five frames of margin and gets one
        // (decision 102).
        let mut first = detail(200, 200, 200, 1, Some(1));
        first.stall_ms = 150;
        apply(&mut record, 30, report(200, 5000, first));
        assert_eq!(issued(&mut policy, &record, 30), "1/4");
        assert_eq!(policy.margin(), 1);
        // Its round trips come back (500 ms: 8 frames one way): the spike
        // is what the margin was, and the look-ahead follows it alone.
        apply(
            &mut record,
            41,
            report(500, 5000, detail(200, 500, 500, 0, None)),
        );
        policy.evaluate(&record, 41, None);
        assert_eq!(policy.margin(), 0);
        // 8 frames, and the phase frame of a spike's rise (decision 59),
        // held until the rise has reached the turns and two reports
        // followed (41 + 9 + 32 frames).
        assert_eq!(policy.target().to_string(), "1/9");
        // The spike ends: back down once the phase frame's hold is over,
        // no margin left behind.
        let calm = report(200, 5000, detail(200, 200, 200, 0, None));
        for frame in [57, 73] {
            apply(&mut record, frame, calm);
            assert_eq!(policy.evaluate(&record, frame, None), None, "held to 82");
        }
        apply(&mut record, 89, calm);
        assert_eq!(issued(&mut policy, &record, 89), "1/3");
    }

    #[test]
    fn a_spike_s_first_stall_is_read_whole_and_half_back_round_trips_do_not_explain_it() {
        let mut policy = without_prior(30);
        let mut record = Record::new(0, [0, 1]);
        apply(
            &mut record,
            25,
            report(120, 5000, detail(120, 120, 120, 0, None)),
        );
        assert_eq!(issued(&mut policy, &record, 25), "1/2");
        // A 1500 ms spike (`spike_onset`): nothing until the next report
        // says it goes on (decision 75)...
        apply(&mut record, 41, spike_onset());
        assert_eq!(policy.evaluate(&record, 41, None), None);
        // ...which its next stall does: the round trips need 13 frames; the
        // stall says 2 + 21, and the hold gives the 9 frames of its 300 ms
        // most over them, and the phase frame of a spike's rise (decision
        // 59).
        apply(&mut record, 57, spike_onset());
        assert_eq!(issued(&mut policy, &record, 57), "1/23");
        // Its whole round trips come back: the look-ahead they need is the
        // spike's, and the margin goes.
        apply(
            &mut record,
            73,
            report(1500, 5000, detail(1500, 1500, 1500, 0, None)),
        );
        policy.evaluate(&record, 73, None);
        assert_eq!(policy.margin(), 0);
        assert_eq!(policy.target().to_string(), "1/23");
    }

    #[test]
    fn a_spike_over_by_the_next_report_is_not_answered_at_all() {
        let mut policy = without_prior(30);
        let mut record = Record::new(0, [0, 1]);
        let calm = report(120, 5000, detail(100, 120, 110, 0, None));
        apply(&mut record, 25, calm);
        assert_eq!(issued(&mut policy, &record, 25), "1/2");
        // As in the test above, but the spike is over by the next report:
        // its stall and its round trips (they come back after it) ask for
        // 23 frames, and the frames after the stall ran without one
        // (decision 75). Answered, it was held for 23 + 32 frames.
        apply(&mut record, 41, spike_onset());
        assert_eq!(policy.evaluate(&record, 41, None), None);
        let late_round_trips = report(810, 5000, detail(120, 810, 810, 0, None));
        apply(&mut record, 57, late_round_trips);
        assert_eq!(policy.evaluate(&record, 57, None), None);
        for frame in [73, 89] {
            apply(&mut record, frame, calm);
            assert_eq!(policy.evaluate(&record, frame, None), None);
        }
        assert_eq!(
            (policy.target().to_string(), policy.margin()),
            ("1/2".to_owned(), 0)
        );
        // The master's own next stall, taken after the first was seen and
        // still lacking a spike's look-ahead, is answered at once; the
        // first one is not.
        let mut fresh = without_prior(30);
        let mut record = Record::new(0, [0, 1]);
        apply(&mut record, 25, calm);
        fresh.evaluate(&record, 25, None);
        let in_force = InForce {
            timing: Timing::new(1, 2).unwrap(),
            staged: None,
        };
        assert_eq!(
            fresh.raise_for_own_stall(&record, &spike_onset(), 35, in_force),
            None
        );
        apply(&mut record, 41, spike_onset());
        fresh.evaluate(&record, 41, None);
        let raise = fresh.raise_for_own_stall(&record, &spike_onset(), 50, in_force);
        assert_eq!(raise.map(|e| e.target.to_string()), Some("1/23".to_owned()));
    }

    #[test]
    fn a_spike_s_rise_holds_a_frame_for_the_machines_phase_then_lets_it_go() {
        let mut policy = without_prior(30);
        let mut record = Record::new(0, [0, 1]);
        let steady = |rtt| report(rtt, 5000, detail(rtt, rtt, rtt, 0, None));
        apply(&mut record, 25, steady(120));
        assert_eq!(issued(&mut policy, &record, 25), "1/2");
        // A frame more is jitter's wobble, not a spike: no phase frame.
        apply(&mut record, 41, steady(160));
        assert_eq!(issued(&mut policy, &record, 41), "1/3");
        // A spike's round trips: 23 frames, and one for the machines'
        // phase as they come out of its stalls (decision 59)...
        apply(&mut record, 57, steady(1500));
        assert_eq!(issued(&mut policy, &record, 57), "1/24");
        // ...held until it has reached the turns and two reports followed
        // (57 + 24 + 32 = 113)...
        for frame in [73, 89, 105] {
            apply(&mut record, frame, steady(1500));
            assert_eq!(policy.evaluate(&record, frame, None), None);
        }
        // ...then the look-ahead is what the round trips need.
        apply(&mut record, 121, steady(1500));
        assert_eq!(issued(&mut policy, &record, 121), "1/23");
        assert_eq!(policy.margin(), 0);
    }

    #[test]
    fn a_held_spike_s_stall_reported_with_calm_round_trips_joins_the_hold_not_the_margin() {
        let mut policy = without_prior(30);
        let mut record = Record::new(0, [0, 1]);
        let calm = report(120, 5000, detail(100, 120, 110, 0, None));
        apply(&mut record, 25, calm);
        assert_eq!(issued(&mut policy, &record, 25), "1/2");
        apply(&mut record, 41, spike_onset());
        assert_eq!(policy.evaluate(&record, 41, None), None);
        apply(&mut record, 47, spike_onset());
        assert_eq!(issued(&mut policy, &record, 47), "1/23");
        // The next report was taken once the spike's round trips had passed
        // (they say 120 ms), but its frame waited 700 ms under the 1/2
        // before the raise: 21 frames lacking, a look-ahead of 23 asked.
        // It is the held spike's stall: no margin (before decision 55: 9
        // frames, the most, left behind when the hold let go).
        let mut late = detail(100, 120, 110, 1, Some(1));
        late.stall_ms = 700;
        let mut late = report(120, 5000, late);
        late.max_wait_ms = 700;
        apply(&mut record, 57, late);
        assert_eq!(policy.evaluate(&record, 57, None), None);
        assert_eq!(policy.margin(), 0);
        for frame in [73, 89] {
            apply(&mut record, frame, calm);
            assert_eq!(policy.evaluate(&record, frame, None), None);
        }
        apply(&mut record, 105, calm);
        assert_eq!(issued(&mut policy, &record, 105), "1/2");
        assert_eq!(policy.margin(), 0);
    }

    #[test]
    fn when_every_frame_waits_the_look_ahead_lacks_its_frames_times_a_frame_s_wait() {
        // Turns slower than the game: each of 4 frames waits 67 ms under
        // `1/3`, so a run of 3 frames waits 201 ms: 7 frames lacking.
        let chained = report(200, 5000, {
            let mut d = detail(200, 200, 200, 4, Some(1));
            d.frames = 4;
            d.stall_ms = 268;
            d
        });
        assert_eq!(
            TrackingPolicy::lacking_frames(&chained, 4, 4, 268, 30, 3),
            7
        );
        // Stalls here and there: the longest wait alone (67 ms: 3 frames).
        assert_eq!(
            TrackingPolicy::lacking_frames(&chained, 4, 16, 268, 30, 3),
            3
        );
    }

    /// A schedule holding `1/look_ahead`, with `1/staged` staged if any.
    fn at(look_ahead: u8, staged: Option<u8>) -> Option<InForce> {
        Some(InForce {
            timing: Timing::new(1, look_ahead).unwrap(),
            staged: staged.map(|l| Timing::new(1, l).unwrap()),
        })
    }

    /// Every player reports a steady `rtt` (no spread, no stall) executed on
    /// `frame`; the target the evaluation issues, if any, as `SP/LA`.
    fn target_on_steady_report(
        policy: &mut TrackingPolicy,
        record: &mut Record,
        frame: u32,
        rtt: u32,
        now: Option<InForce>,
    ) -> Option<String> {
        apply(
            record,
            frame,
            report(rtt, 5000, detail(rtt, rtt, rtt, 0, None)),
        );
        policy
            .evaluate(record, frame, now)
            .map(|e| e.target.to_string())
    }

    #[test]
    fn a_decrease_on_its_way_is_not_replaced_by_a_further_one() {
        let mut policy = without_prior(30);
        let mut record = Record::new(0, [0, 1]);
        let mut target = |record: &mut Record, frame: u32, rtt: u32, now| {
            target_on_steady_report(&mut policy, record, frame, rtt, now)
        };
        assert_eq!(target(&mut record, 25, 300, at(9, None)).unwrap(), "1/5");
        // In flight (it executes within the 9 frames it was sent under): a
        // further decrease waits; replacing it would restart S5's wait of
        // the old look-ahead.
        assert_eq!(target(&mut record, 30, 200, at(9, None)), None);
        // Staged, not finished: still waits.
        assert_eq!(target(&mut record, 41, 100, at(9, Some(5))), None);
        // A smaller decrease (the round trips up again) goes at once, and
        // so does an increase past the look-ahead in force (11 frames, and
        // the phase frame of a spike's rise, held to frame 73 + 12 + 32).
        assert_eq!(target(&mut record, 57, 400, at(9, Some(5))).unwrap(), "1/6");
        assert_eq!(
            target(&mut record, 73, 700, at(9, Some(6))).unwrap(),
            "1/12"
        );
        // Once nothing is on its way, the next decrease goes.
        assert_eq!(target(&mut record, 121, 100, at(12, None)).unwrap(), "1/2");
    }

    #[test]
    fn a_spike_s_fall_replaces_a_small_decrease_on_its_way() {
        let mut policy = without_prior(30);
        let mut record = Record::new(0, [0, 1]);
        let mut target = |record: &mut Record, frame: u32, rtt: u32, now| {
            target_on_steady_report(&mut policy, record, frame, rtt, now)
        };
        // 21 frames, and the phase frame of a spike's rise (held to frame
        // 25 + 22 + 32).
        assert_eq!(target(&mut record, 25, 1400, at(9, None)).unwrap(), "1/22");
        // The last of a spike's round trips: two frames down, staged.
        assert_eq!(target(&mut record, 89, 1300, at(22, None)).unwrap(), "1/20");
        // Its end shows: the fall goes at once instead of after the step's
        // staging (two look-aheads of 22 frames, 1.5 s at 30 fps).
        assert_eq!(
            target(&mut record, 105, 200, at(22, Some(20))).unwrap(),
            "1/3"
        );
        // A fall short of a spike's size still waits for one on its way.
        assert_eq!(target(&mut record, 121, 100, at(22, Some(3))), None);
    }

    /// Calm reports of a 20 ms network every report period after `from`,
    /// up to `to`, each evaluated; the last frame reported.
    fn calm(policy: &mut TrackingPolicy, record: &mut Record, from: u32, to: u32) -> u32 {
        let mut frame = from;
        while frame + TRACKING_REPORT_PERIOD <= to {
            frame += TRACKING_REPORT_PERIOD;
            apply(record, frame, report(20, 5000, detail(20, 20, 20, 0, None)));
            policy.evaluate(record, frame, None);
        }
        frame
    }

    /// A report of a 20 ms network whose interval lost a turn: two frames
    /// waited 40 ms each (more than a near miss).
    fn lost_turn() -> Report {
        let mut lost = detail(20, 20, 20, 2, Some(1));
        lost.stall_ms = 80;
        report(20, 5000, lost)
    }

    #[test]
    fn a_game_starts_with_a_frame_of_margin_and_a_failed_shed_waits_twice_as_long() {
        let mut policy = TrackingPolicy::new(30);
        let mut record = Record::new(0, [0, 1]);
        apply(
            &mut record,
            25,
            report(20, 5000, detail(20, 20, 20, 0, None)),
        );
        // 20 ms fit in a frame; the prior margin makes it two.
        assert_eq!(issued(&mut policy, &record, 25), "1/2");
        assert_eq!(policy.margin(), PRIOR_MARGIN_FRAMES);
        // It goes after twice the calm period, not once.
        let frame = calm(
            &mut policy,
            &mut record,
            25,
            25 + CALM_FRAMES_TO_SHED_MARGIN + 16,
        );
        assert_eq!(policy.margin(), 1, "still there after 512 calm frames");
        let frame = calm(
            &mut policy,
            &mut record,
            frame,
            2 * CALM_FRAMES_TO_SHED_MARGIN + 16,
        );
        assert_eq!(policy.margin(), 0);
        assert_eq!(policy.target().to_string(), "1/1");
        // That shed held a whole period: the calm period is back to 512.
        let frame = calm(
            &mut policy,
            &mut record,
            frame,
            4 * CALM_FRAMES_TO_SHED_MARGIN + 16,
        );
        assert_eq!(policy.calm_to_shed, CALM_FRAMES_TO_SHED_MARGIN);
        // A lost turn (its frames waited 40 ms, asking for two frames):
        // a frame of margin (decision 102), which goes after 512 calm
        // frames.
        let lost_at = frame + TRACKING_REPORT_PERIOD;
        apply(&mut record, lost_at, lost_turn());
        assert_eq!(issued(&mut policy, &record, lost_at), "1/2");
        assert_eq!(policy.margin(), 1);
        let frame = calm(
            &mut policy,
            &mut record,
            lost_at,
            lost_at + CALM_FRAMES_TO_SHED_MARGIN + 16,
        );
        assert_eq!(policy.margin(), 0);
        // Another lost turn soon after: that shed failed, the margin rises
        // again, and the next shed waits twice as long, 1024 calm frames.
        let lost_at = frame + TRACKING_REPORT_PERIOD;
        apply(&mut record, lost_at, lost_turn());
        policy.evaluate(&record, lost_at, None).unwrap();
        assert_eq!(policy.margin(), 1);
        assert_eq!(policy.calm_to_shed, MOST_CALM_FRAMES_TO_SHED_MARGIN);
        let shed_due = lost_at + MOST_CALM_FRAMES_TO_SHED_MARGIN;
        let frame = calm(&mut policy, &mut record, lost_at, shed_due - 16);
        assert_eq!(policy.margin(), 1, "no shed before 1024 calm frames");
        calm(&mut policy, &mut record, frame, shed_due + 16);
        assert_eq!(policy.margin(), 0);
    }

    /// A calm report whose 16 frames, run under `reference`, needed
    /// `needed` each but `later` for the last `late` of them.
    fn with_needs(rtt: u32, reference: u8, needed: u8, late: usize, later: u8) -> Report {
        let mut tally = crate::report::needs::NeedTally::new();
        for i in 0..16 {
            tally.add(reference, if i >= 16 - late { later } else { needed });
        }
        let mut d = detail(rtt, rtt, rtt, 0, None);
        d.needs = tally.take();
        report(rtt, 5000, d)
    }

    /// Every seat reports `r` every 16 frames from `from` until `to`.
    fn reports_until(
        policy: &mut TrackingPolicy,
        record: &mut Record,
        from: u32,
        to: u32,
        r: Report,
    ) -> u32 {
        let mut frame = from;
        while frame + TRACKING_REPORT_PERIOD <= to {
            frame += TRACKING_REPORT_PERIOD;
            apply(record, frame, r);
            policy.evaluate(record, frame, None);
        }
        frame
    }

    #[test]
    fn the_margin_sheds_to_what_the_frames_needs_vouch_for() {
        // 100 ms at 30 fps: 2 frames for the round trips, 3 with the prior
        // margin; every frame needed 2 at most.
        let mut policy = TrackingPolicy::new(30);
        let mut record = Record::new(0, [0, 1]);
        let clean = with_needs(100, 3, 2, 0, 2);
        apply(&mut record, 16, clean);
        assert_eq!(issued(&mut policy, &record, 16), "1/3");
        // Half the calm period (1024 for the prior margin) of evidence:
        // 512 frames, then it goes at once, not after 1024 calm frames.
        let frame = reports_until(&mut policy, &mut record, 16, 16 + 480, clean);
        assert_eq!(policy.margin(), 1, "not before 512 frames of evidence");
        reports_until(&mut policy, &mut record, frame, frame + 32, clean);
        assert_eq!(policy.margin(), 0);
        assert_eq!(policy.target().to_string(), "1/2");

        // A lossy path: one frame in each report needed the margin's
        // frame. The evidence never vouches for less, the calm shed does
        // not run: the margin stays, and no stall is spent finding out.
        let mut policy = TrackingPolicy::new(30);
        let mut record = Record::new(0, [0, 1]);
        let lossy = with_needs(100, 3, 2, 1, 3);
        let frame = reports_until(&mut policy, &mut record, 0, 2048, lossy);
        assert_eq!(policy.margin(), 1);
        assert_eq!(policy.target().to_string(), "1/3");
        // One seat alone without needs (the detailed layout): the calm shed
        // as before decides.
        let detailed_only = report(100, 5000, detail(100, 100, 100, 0, None));
        let mut mixed = Record::new(0, [0, 1]);
        let mut policy = TrackingPolicy::new(30);
        let mut at = 0;
        while at + 16 <= frame {
            at += 16;
            mixed.apply_report(0, at, lossy).unwrap();
            mixed.apply_report(1, at, detailed_only).unwrap();
            policy.evaluate(&mixed, at, None);
        }
        assert_eq!(policy.margin(), 0, "the calm shed went after 1024 frames");
    }

    #[test]
    fn a_decrease_stops_where_the_frames_needs_say_it_would_stall_but_not_a_spike_s_end() {
        let mut policy = without_prior(30);
        let mut record = Record::new(0, [0, 1]);
        // 160 ms: 3 frames. Frames needed 3 now and then (one in 16).
        let steady = with_needs(160, 3, 2, 1, 3);
        let frame = reports_until(&mut policy, &mut record, 0, 128, steady);
        assert_eq!(policy.target().to_string(), "1/3");
        // The round trips wobble down to 120 ms (2 frames): the frames just
        // showed 2 too short, the decrease does not go.
        let mut wobble = with_needs(120, 3, 2, 1, 3);
        apply(&mut record, frame + 16, wobble);
        assert_eq!(policy.evaluate(&record, frame + 16, None), None);
        assert_eq!(policy.target().to_string(), "1/3");
        // Once the last 8 reports show 2 enough, it goes.
        wobble = with_needs(120, 3, 2, 0, 2);
        let frame = reports_until(
            &mut policy,
            &mut record,
            frame + 16,
            frame + 16 + 112,
            wobble,
        );
        assert_eq!(
            policy.target().to_string(),
            "1/3",
            "seven clean reports are not eight"
        );
        apply(&mut record, frame + 16, wobble);
        assert_eq!(issued(&mut policy, &record, frame + 16), "1/2");

        // A spike's end: from 1/24 to 1/3 at once, whatever the frames
        // needed during the spike, which is then forgotten.
        let mut policy = without_prior(30);
        let mut record = Record::new(0, [0, 1]);
        let spike = with_needs(1500, 24, 23, 4, 24);
        let frame = reports_until(&mut policy, &mut record, 0, 256, spike);
        assert_eq!(policy.target().to_string(), "1/24");
        let after = with_needs(160, 24, 3, 0, 3);
        apply(&mut record, frame + 16, after);
        assert_eq!(issued(&mut policy, &record, frame + 16), "1/3");
        assert_eq!(
            policy.evidence.floor(&record, evidence::GUARD_REPORTS, 1),
            None,
            "the spike's needs are forgotten"
        );
    }

    #[test]
    fn a_lone_near_miss_now_and_then_raises_nothing() {
        let mut policy = without_prior(30);
        let mut record = Record::new(0, [0, 1]);
        apply(
            &mut record,
            25,
            report(20, 5000, detail(20, 20, 20, 0, None)),
        );
        assert_eq!(issued(&mut policy, &record, 25), "1/1");
        // One player's one frame waited 10 ms: a near miss, let pass.
        let near_miss = report(20, 5000, detail(20, 20, 20, 1, Some(1)));
        let calm_report = report(20, 5000, detail(20, 20, 20, 0, None));
        // The master, taking it, does not raise for it.
        let in_force = InForce {
            timing: policy.target(),
            staged: None,
        };
        assert_eq!(
            policy.raise_for_own_stall(&record, &near_miss, 30, in_force),
            None
        );
        // Nor does the evaluation where it executes.
        record.apply_report(0, 41, near_miss).unwrap();
        record.apply_report(1, 41, calm_report).unwrap();
        assert_eq!(policy.evaluate(&record, 41, None), None);
        assert_eq!(policy.margin(), 0);
        // Another within 1024 frames is not let pass: a frame of margin.
        let frame = calm(&mut policy, &mut record, 41, 41 + 512);
        let frame = frame + TRACKING_REPORT_PERIOD;
        record.apply_report(0, frame, near_miss).unwrap();
        record.apply_report(1, frame, calm_report).unwrap();
        assert_eq!(issued(&mut policy, &record, frame), "1/2");
        assert_eq!(policy.margin(), 1);
        // Two players' near misses for two seats' turns are no lone one.
        let mut policy = without_prior(30);
        let frame = calm(&mut policy, &mut record, frame, frame + 32);
        let frame = frame + TRACKING_REPORT_PERIOD;
        let near_miss_for_0 = report(20, 5000, detail(20, 20, 20, 1, Some(0)));
        record.apply_report(0, frame, near_miss).unwrap();
        record.apply_report(1, frame, near_miss_for_0).unwrap();
        policy.evaluate(&record, frame, None);
        assert_eq!(policy.margin(), 1);
        // Several players' near misses for the same seat's turn are one
        // late turn (decision 56): let pass as one, not a second time
        // within 1024 frames.
        let mut policy = without_prior(30);
        let mut three = Record::new(0, [0, 1, 2]);
        let seat_0_late = |record: &mut Record, frame: u32| {
            record.apply_report(0, frame, calm_report).unwrap();
            record.apply_report(1, frame, near_miss_for_0).unwrap();
            record.apply_report(2, frame, near_miss_for_0).unwrap();
        };
        apply(&mut three, 25, calm_report);
        policy.evaluate(&three, 25, None).unwrap();
        let frame = calm(&mut policy, &mut three, 25, 25 + 32);
        let frame = frame + TRACKING_REPORT_PERIOD;
        seat_0_late(&mut three, frame);
        assert_eq!(policy.evaluate(&three, frame, None), None);
        assert_eq!(policy.margin(), 0);
        let frame = calm(&mut policy, &mut three, frame, frame + 512);
        let frame = frame + TRACKING_REPORT_PERIOD;
        seat_0_late(&mut three, frame);
        assert_eq!(issued(&mut policy, &three, frame), "1/2");
        assert_eq!(policy.margin(), 1);
        // Nor is a wait of a whole frame (40 ms at 30 fps), even alone: it
        // raises the margin (by a frame, decision 102).
        let mut policy = without_prior(30);
        let frame = calm(&mut policy, &mut record, frame, frame + 32);
        let frame = frame + TRACKING_REPORT_PERIOD;
        let mut long = detail(20, 20, 20, 1, Some(1));
        long.stall_ms = 40;
        record
            .apply_report(0, frame, report(20, 5000, long))
            .unwrap();
        record.apply_report(1, frame, calm_report).unwrap();
        policy.evaluate(&record, frame, None);
        assert_eq!(policy.margin(), 1);
    }

    #[test]
    fn jitter_s_wobble_does_not_take_back_a_margin_for_loss() {
        let mut policy = without_prior(60);
        let mut record = Record::new(0, [0, 1]);
        apply(
            &mut record,
            25,
            report(400, 5000, detail(390, 400, 390, 0, None)),
        );
        policy.evaluate(&record, 25, None).unwrap(); // 12 frames
        let mut lost = detail(390, 400, 390, 1, Some(1));
        lost.stall_ms = 30;
        apply(&mut record, 41, report(400, 5000, lost));
        policy.evaluate(&record, 41, None).unwrap();
        assert_eq!(policy.margin(), 1);
        // One frame more for the round trips (jitter): a wobble, not a
        // spike; the margin stays.
        apply(
            &mut record,
            57,
            report(430, 5000, detail(400, 430, 400, 0, None)),
        );
        policy.evaluate(&record, 57, None);
        assert_eq!(policy.margin(), 1);
    }

    #[test]
    fn a_player_without_a_round_trip_holds_the_evaluation() {
        let mut policy = without_prior(30);
        let mut record = Record::new(0, [0, 1]);
        record
            .apply_report(0, 25, report(20, 5000, detail(20, 20, 20, 0, None)))
            .unwrap();
        let none = Report {
            worst_rtt_ms: None,
            detail: Some(ReportDetail::from_worst(None)),
            ..report(20, 5000, detail(20, 20, 20, 0, None))
        };
        record.apply_report(1, 25, none).unwrap();
        assert_eq!(
            policy.evaluate(&record, 25, None),
            None,
            "the near player alone must not decide"
        );
        assert_eq!(policy.target(), TrackingPolicy::start(30));
    }

    #[test]
    fn stalls_for_a_cpu_bound_seat_or_explained_by_round_trips_earn_no_margin() {
        let mut policy = without_prior(30);
        let mut record = Record::new(0, [0, 1]);
        apply(
            &mut record,
            25,
            report(60, 5000, detail(60, 60, 60, 0, None)),
        );
        policy.evaluate(&record, 25, None).unwrap();
        // Seat 1 needs 45 ms a frame: the rate drops to 21 (S4.2's 22 would
        // leave it 0.5 ms; 21 leaves it the 5 % headroom); waiting for it is
        // the slow CPU.
        record
            .apply_report(0, 41, report(60, 5000, detail(60, 60, 60, 3, Some(1))))
            .unwrap();
        record
            .apply_report(1, 41, report(60, 45_000, detail(60, 60, 60, 0, None)))
            .unwrap();
        let slow = policy.evaluate(&record, 41, None).unwrap();
        assert_eq!(slow.fps, 21);
        assert_eq!(policy.margin(), 0);
        // A spike still going on: its stalls are the round trip's, which
        // the look-ahead follows (with the phase frame of a spike's rise,
        // decision 59), no margin.
        apply(
            &mut record,
            57,
            report(900, 5000, detail(60, 900, 900, 4, Some(0))),
        );
        let spike = policy.evaluate(&record, 57, None).unwrap();
        assert_eq!(policy.margin(), 0);
        assert_eq!(
            u32::from(spike.target.look_ahead()),
            TrackingPolicy::look_ahead_for(900, spike.fps) + u32::from(SPIKE_PHASE_FRAMES)
        );
    }
}
