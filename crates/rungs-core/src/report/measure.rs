//! What one machine measures for its reports (S3), and when it reports.
//!
//! The engine feeds [`Measurements`] as it runs; on each report frame
//! ([`is_report_frame`]) it calls [`Measurements::take_report`], queues the
//! [`Report`] as a NETWORK_REPORT event, and a new report interval begins.
//! Everything is integer arithmetic on local inputs; the values enter shared
//! state only through the executed report event (docs/model.md S1, determinism).
//!
//! The rules, each from S3:
//! - **Processing time**: the average per frame since the previous report
//!   (over all frames so far for the first). The engine either brackets each
//!   frame's work ([`frame_work_begin`](Measurements::frame_work_begin) /
//!   [`frame_work_end`](Measurements::frame_work_end)) or passes a measured
//!   duration ([`add_frame_work_us`](Measurements::add_frame_work_us)). The
//!   average is rounded *up*, so a slow machine is never reported faster.
//!   An interval without any frame repeats the previous average: it has no
//!   new evidence, and 0 would claim a machine that allows any frame rate.
//! - **Waits**: the longest single wait for the other players over the last
//!   two report intervals, in whole milliseconds rounded up. A wait that is
//!   still open when a report is taken counts in the interval in which it ends.
//! - **Round trips**: per peer, the worst *clean* sample of this interval, or
//!   the last clean sample when this interval has none. The report carries the
//!   worst over all peers; none while any peer has no clean sample yet; 0 for
//!   a player alone. A sample that is not clean (its packet was retransmitted,
//!   S8) never replaces a measured value — which is exactly how a
//!   retransmitting link keeps contributing its last measured round trip.
//!
//! The detail (NETWORK_REPORT version 2, [`ReportDetail`], for the
//! `tracking` policy, docs/tracking.md) adds, per interval:
//! - **Round-trip distribution**: per peer the median and 90th percentile
//!   (nearest rank) of the interval's last [`RTT_SAMPLES_KEPT`] clean
//!   samples (the last clean sample when there were none), and the latest
//!   clean sample; each the largest over peers, `None` exactly when the worst
//!   round trip is.
//! - **Stalls**: the frames run, how many of them waited, the total wait,
//!   and the seat waited for longest — the engine names it when it starts
//!   waiting ([`wait_begin_for`](Measurements::wait_begin_for),
//!   [`add_wait_for_us`](Measurements::add_wait_for_us)); a wait for no
//!   known seat counts as a stall of nobody. Unlike the longest wait, these
//!   cover this interval only, so one stall is reported once.
//!
//! The needs layout (NETWORK_REPORT version 3) adds the look-ahead each of
//! the interval's frames needed ([`LookAheadNeeds`], `report::needs`): the
//! engine passes it per frame ([`add_frame_need`](Measurements::add_frame_need),
//! computed with [`needed_look_ahead`](crate::report::needed_look_ahead));
//! an interval without one carries none.

use crate::error::{Error, Result};
use crate::link::rtt::ms_rounded_up;
use crate::link::SeatIndex;
use crate::report::needs::NeedTally;
use crate::report::record::MAX_SEATS;
use crate::report::{LookAheadNeeds, Report, ReportDetail};
use crate::timing::ladder::MAX_LOOK_AHEAD;
use crate::timing::TickTimer;

/// The first report goes out on this frame (S3).
pub(crate) const FIRST_REPORT_FRAME: u32 = 32;
/// The second report (S3).
pub(crate) const SECOND_REPORT_FRAME: u32 = 64;
/// After the second, a report every this many frames: 192, 320, 448, ... (S3).
pub(crate) const REPORT_PERIOD: u32 = 128;
/// Round-trip samples kept per peer and interval for the distribution (the
/// last ones; a report interval is 128 frames, one sample a frame).
pub(crate) const RTT_SAMPLES_KEPT: usize = 128;

/// Whether `frame` is one on which each player sends a report (S3):
/// 32, 64, then every 128 frames (192, 320, 448, ...).
pub fn is_report_frame(frame: u32) -> bool {
    frame == FIRST_REPORT_FRAME
        || (frame >= SECOND_REPORT_FRAME && (frame - SECOND_REPORT_FRAME) % REPORT_PERIOD == 0)
}

/// One machine's measurements for its next report (S3). See the module docs
/// for the rules.
#[derive(Debug, Clone)]
pub struct Measurements {
    frame_work: Bracket,
    work_us_this_interval: u64,
    frames_this_interval: u64,
    previous_process_us: u32,
    wait: Bracket,
    longest_wait_us_this_interval: u64,
    longest_wait_us_previous_interval: u64,
    /// The seat the open wait is for, if the engine said.
    waiting_for: Option<u8>,
    stalled_frames_this_interval: u32,
    stall_us_this_interval: u64,
    wait_us_by_seat: [u64; MAX_SEATS],
    peers: Vec<PeerRoundTrip>,
    /// Each peer's place in `peers`: a session looks its peer up on nearly
    /// every datagram.
    peer_at: SeatIndex,
    needs: NeedTally,
}

/// What one peer link contributes to the worst round trip.
#[derive(Debug, Clone, Copy)]
struct PeerRoundTrip {
    peer: u8,
    last_clean_ms: Option<u32>,
    worst_clean_ms_this_interval: Option<u32>,
    /// The interval's clean samples, a ring of the last [`RTT_SAMPLES_KEPT`].
    samples: [u32; RTT_SAMPLES_KEPT],
    samples_this_interval: u32,
}

impl PeerRoundTrip {
    fn new(peer: u8) -> PeerRoundTrip {
        PeerRoundTrip {
            peer,
            last_clean_ms: None,
            worst_clean_ms_this_interval: None,
            samples: [0; RTT_SAMPLES_KEPT],
            samples_this_interval: 0,
        }
    }

    fn reported_ms(&self) -> Option<u32> {
        self.worst_clean_ms_this_interval.or(self.last_clean_ms)
    }

    fn add_clean(&mut self, rtt_ms: u32) {
        self.last_clean_ms = Some(rtt_ms);
        self.worst_clean_ms_this_interval = Some(
            self.worst_clean_ms_this_interval
                .map_or(rtt_ms, |worst| worst.max(rtt_ms)),
        );
        let at = self.samples_this_interval as usize % RTT_SAMPLES_KEPT;
        self.samples[at] = rtt_ms;
        self.samples_this_interval = self.samples_this_interval.saturating_add(1);
    }

    /// Median and 90th percentile (nearest rank) of the kept samples, or
    /// the last clean sample for both when the interval had none.
    fn percentiles_ms(&self) -> Option<(u32, u32)> {
        let kept = (self.samples_this_interval as usize).min(RTT_SAMPLES_KEPT);
        if kept == 0 {
            return self.last_clean_ms.map(|ms| (ms, ms));
        }
        let mut sorted = self.samples;
        let sorted = &mut sorted[..kept];
        sorted.sort_unstable();
        let rank = |percent: usize| sorted[(percent * kept).div_ceil(100).max(1) - 1];
        Some((rank(50), rank(90)))
    }
}

impl Default for Measurements {
    fn default() -> Self {
        Measurements::new()
    }
}

impl Measurements {
    /// Measurements of a machine with no peers yet, at the start of its first
    /// report interval.
    pub fn new() -> Measurements {
        Measurements {
            frame_work: Bracket::new(
                "a frame's work is already open (begun, not yet ended)",
                "no frame's work is open (begin it first)",
                "the frame's begin",
            ),
            work_us_this_interval: 0,
            frames_this_interval: 0,
            previous_process_us: 0,
            wait: Bracket::new(
                "a wait is already open (begun, not yet ended)",
                "no wait is open (begin it first)",
                "the wait's begin",
            ),
            longest_wait_us_this_interval: 0,
            longest_wait_us_previous_interval: 0,
            waiting_for: None,
            stalled_frames_this_interval: 0,
            stall_us_this_interval: 0,
            wait_us_by_seat: [0; MAX_SEATS],
            peers: Vec::new(),
            peer_at: SeatIndex::new(),
            needs: NeedTally::new(),
        }
    }

    /// A frame's work starts at `now_us` (any monotonic microsecond clock).
    /// `State` if a frame's work is already open.
    pub fn frame_work_begin(&mut self, now_us: u64) -> Result<()> {
        self.frame_work.begin(now_us)
    }

    /// The open frame's work ends at `now_us`; the frame counts with its
    /// duration. `State` without an open frame, `Invalid` if `now_us`
    /// is before the begin (the frame stays open).
    pub fn frame_work_end(&mut self, now_us: u64) -> Result<()> {
        let duration = self.frame_work.end(now_us)?;
        self.add_frame_work_us(duration);
        Ok(())
    }

    /// One frame took `duration_us` of processing (for engines that measure
    /// it themselves instead of bracketing).
    pub fn add_frame_work_us(&mut self, duration_us: u64) {
        self.work_us_this_interval = self.work_us_this_interval.saturating_add(duration_us);
        self.frames_this_interval += 1;
    }

    /// One frame's work spanned `ticks` whole ticks of the engine's `timer`,
    /// as a tick-counting engine measures it (most frames 0 or 1 tick at 60
    /// Hz; the average over an interval is what the report carries).
    pub fn add_frame_ticks(&mut self, ticks: u32, timer: TickTimer) {
        self.add_frame_work_us(timer.ticks_to_us(ticks));
    }

    /// A round trip to `peer` of `ticks` whole ticks of `timer`, timed from
    /// its packet's first send to the acknowledgement; `resent` when the
    /// packet went out more than once, which makes it unclean (S8): ignored
    /// here, so the link keeps its last measured value (S3).
    pub fn add_rtt_ticks(
        &mut self,
        peer: u8,
        ticks: u32,
        timer: TickTimer,
        resent: bool,
    ) -> Result<()> {
        self.add_rtt_sample(peer, timer.ticks_to_ms(ticks), !resent)
    }

    /// The machine starts waiting for the other players at `now_us`.
    /// `State` if a wait is already open.
    pub fn wait_begin(&mut self, now_us: u64) -> Result<()> {
        self.wait_begin_for(now_us, None)
    }

    /// The machine starts waiting at `now_us` for `seat`'s turn (`None`:
    /// for no known seat, e.g. for room to send). `State` if a wait is
    /// already open.
    pub fn wait_begin_for(&mut self, now_us: u64, seat: Option<u8>) -> Result<()> {
        self.wait.begin(now_us)?;
        self.waiting_for = seat;
        Ok(())
    }

    /// The open wait ends at `now_us`. `State` without an open wait,
    /// `Invalid` if `now_us` is before the begin (the wait stays open).
    pub fn wait_end(&mut self, now_us: u64) -> Result<()> {
        let duration = self.wait.end(now_us)?;
        let seat = self.waiting_for.take();
        self.add_wait_for_us(duration, seat);
        Ok(())
    }

    /// One wait for the other players lasted `duration_us`.
    pub fn add_wait_us(&mut self, duration_us: u64) {
        self.add_wait_for_us(duration_us, None);
    }

    /// One wait, for `seat`'s turn (`None`: no known seat), lasted
    /// `duration_us`: a stalled frame.
    pub fn add_wait_for_us(&mut self, duration_us: u64, seat: Option<u8>) {
        self.longest_wait_us_this_interval = self.longest_wait_us_this_interval.max(duration_us);
        self.stalled_frames_this_interval = self.stalled_frames_this_interval.saturating_add(1);
        self.stall_us_this_interval = self.stall_us_this_interval.saturating_add(duration_us);
        if let Some(total) = seat.and_then(|s| self.wait_us_by_seat.get_mut(usize::from(s))) {
            *total = total.saturating_add(duration_us);
        }
    }

    /// A frame ran with its turns sent `look_ahead` frames before it and
    /// needed `needed` frames of look-ahead
    /// ([`needed_look_ahead`](crate::report::needed_look_ahead)). Both must
    /// be 1–250 (`Invalid`, nothing counted).
    pub fn add_frame_need(&mut self, look_ahead: u8, needed: u8) -> Result<()> {
        let valid = 1..=MAX_LOOK_AHEAD;
        if !valid.contains(&look_ahead) || !valid.contains(&needed) {
            return Err(Error::invalid_value(
                if valid.contains(&look_ahead) {
                    "needed"
                } else {
                    "look_ahead"
                },
                if valid.contains(&look_ahead) {
                    needed
                } else {
                    look_ahead
                },
                "1 to 250",
            ));
        }
        self.needs.add(look_ahead, needed);
        Ok(())
    }

    /// Start measuring round trips to `peer`. Until it has a clean sample,
    /// reports carry no round trip (S3). `State` if `peer` is already there.
    pub fn add_peer(&mut self, peer: u8) -> Result<()> {
        match self.peers.binary_search_by_key(&peer, |p| p.peer) {
            Ok(_) => Err(Error::State("peer is already measured")),
            Err(at) => {
                self.peers.insert(at, PeerRoundTrip::new(peer));
                self.index_peers();
                Ok(())
            }
        }
    }

    /// Stop measuring `peer` (it left the game); it no longer counts.
    /// `UnknownSeat` if it was not added.
    pub fn remove_peer(&mut self, peer: u8) -> Result<()> {
        let at = self.peer_index(peer)?;
        self.peers.remove(at);
        self.index_peers();
        Ok(())
    }

    /// A round-trip sample to `peer`. `clean` says it came from a packet sent
    /// once (S8); an unclean sample is ignored, so the link keeps its last
    /// measured value (S3). `UnknownSeat` if `peer` was not added.
    pub fn add_rtt_sample(&mut self, peer: u8, rtt_ms: u32, clean: bool) -> Result<()> {
        let at = self.peer_index(peer)?;
        if clean {
            self.peers[at].add_clean(rtt_ms);
        }
        Ok(())
    }

    /// Take `peer`'s round trip from rungs' own transport link (S8 → S3):
    /// its latest sample, once it has a clean measurement (none before: the
    /// report then says none). A retransmitting link keeps contributing its
    /// last measured round trip (S3): the link samples only packets sent once
    /// (Karn), so its latest sample is exactly that — retransmission never
    /// inflates it, and a genuine rise (a spike) still shows. Called every
    /// frame, the interval keeps the worst of what it saw.
    pub fn sample_link(&mut self, peer: u8, link: crate::link::ReportRtt) -> Result<()> {
        self.sample_rtt(peer, link.clean_measurement, link.latest_ms)
    }

    /// [`sample_link`](Self::sample_link) from the two things it uses:
    /// whether the link has a clean measurement, and its latest sample in
    /// ms. A session samples on every new round trip, and working out the
    /// rest of a [`ReportRtt`](crate::link::ReportRtt) (whether the link is
    /// retransmitting) walks the link's unacknowledged messages.
    pub fn sample_rtt(
        &mut self,
        peer: u8,
        clean_measurement: bool,
        latest_ms: Option<u32>,
    ) -> Result<()> {
        match latest_ms {
            Some(rtt_ms) if clean_measurement => self.add_rtt_sample(peer, rtt_ms, true),
            _ => self.peer_index(peer).map(|_| ()),
        }
    }

    /// Stalled frames measured since the last report.
    pub fn unreported_stalls(&self) -> u32 {
        self.stalled_frames_this_interval
    }

    /// The report for this interval (S3); the next interval starts now.
    pub fn take_report(&mut self) -> Report {
        let process_us = if self.frames_this_interval == 0 {
            self.previous_process_us
        } else {
            let average = self
                .work_us_this_interval
                .div_ceil(self.frames_this_interval);
            u32::try_from(average).unwrap_or(u32::MAX)
        };
        let longest_wait_us = self
            .longest_wait_us_this_interval
            .max(self.longest_wait_us_previous_interval);
        let worst_rtt_ms = self.worst_rtt_ms();
        let needs: Option<LookAheadNeeds> = self.needs.take();
        let report = Report {
            process_us,
            max_wait_ms: ms_rounded_up(longest_wait_us),
            worst_rtt_ms,
            detail: Some(ReportDetail {
                needs,
                ..self.detail(worst_rtt_ms.is_some())
            }),
        };

        self.previous_process_us = process_us;
        self.work_us_this_interval = 0;
        self.frames_this_interval = 0;
        self.longest_wait_us_previous_interval = self.longest_wait_us_this_interval;
        self.longest_wait_us_this_interval = 0;
        self.stalled_frames_this_interval = 0;
        self.stall_us_this_interval = 0;
        self.wait_us_by_seat = [0; MAX_SEATS];
        for link in &mut self.peers {
            link.worst_clean_ms_this_interval = None;
            link.samples_this_interval = 0;
        }
        report
    }

    /// This interval's distribution and stalls (module docs); the round
    /// trips only when the report has a worst one (`has_rtt`).
    fn detail(&self, has_rtt: bool) -> ReportDetail {
        let largest = |pick: &dyn Fn(&PeerRoundTrip) -> Option<u32>| -> Option<u32> {
            if !has_rtt {
                return None;
            }
            Some(self.peers.iter().filter_map(pick).max().unwrap_or(0))
        };
        let frames = u32::try_from(self.frames_this_interval).unwrap_or(u32::MAX);
        let stalled_frames = self.stalled_frames_this_interval;
        let mut waited_for = None;
        let mut longest = 0;
        for (seat, &total) in self.wait_us_by_seat.iter().enumerate() {
            if total > longest {
                longest = total;
                waited_for = u8::try_from(seat).ok();
            }
        }
        ReportDetail {
            median_rtt_ms: largest(&|p| p.percentiles_ms().map(|(median, _)| median)),
            p90_rtt_ms: largest(&|p| p.percentiles_ms().map(|(_, p90)| p90)),
            latest_rtt_ms: largest(&|p| p.last_clean_ms),
            // A wait counted while no frame ran still belongs to a frame.
            frames: frames.max(stalled_frames),
            stalled_frames,
            stall_ms: ms_rounded_up(self.stall_us_this_interval),
            waited_for,
            needs: None,
        }
    }

    /// Worst round trip over all peers: none while any lacks a clean sample,
    /// 0 with no peers (S3).
    fn worst_rtt_ms(&self) -> Option<u32> {
        self.peers
            .iter()
            .try_fold(0, |worst, link| Some(worst.max(link.reported_ms()?)))
    }

    fn peer_index(&self, peer: u8) -> Result<usize> {
        // A match, not `ok_or`: that builds the error, and drops it, on
        // every lookup of the hot path.
        match self.peer_at.get(peer) {
            Some(at) => Ok(at),
            None => Err(Error::UnknownSeat(peer)),
        }
    }

    /// Index `peers` again after it changed (a peer joined or left).
    fn index_peers(&mut self) {
        self.peer_at
            .rebuild(self.peers.iter().map(|measured| measured.peer));
    }
}

/// A begin/end pair around something the engine times, with the messages
/// that name its misuse.
#[derive(Debug, Clone)]
struct Bracket {
    open_since_us: Option<u64>,
    already_open: &'static str,
    not_open: &'static str,
    /// What the begin is called in the message of an end before it.
    begin: &'static str,
}

impl Bracket {
    fn new(already_open: &'static str, not_open: &'static str, begin: &'static str) -> Bracket {
        Bracket {
            open_since_us: None,
            already_open,
            not_open,
            begin,
        }
    }

    fn begin(&mut self, now_us: u64) -> Result<()> {
        if self.open_since_us.is_some() {
            return Err(Error::State(self.already_open));
        }
        self.open_since_us = Some(now_us);
        Ok(())
    }

    /// The duration of the open bracket; it stays open on error.
    fn end(&mut self, now_us: u64) -> Result<u64> {
        let began = self.open_since_us.ok_or(Error::State(self.not_open))?;
        let duration = now_us.checked_sub(began).ok_or_else(|| {
            Error::invalid_value(
                "now_us",
                now_us,
                format!("{began} ({}) or later", self.begin),
            )
        })?;
        self.open_since_us = None;
        Ok(duration)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn s3_report_frames_are_32_64_then_every_128() {
        let reports: Vec<u32> = (0..=1000).filter(|&f| is_report_frame(f)).collect();
        assert_eq!(reports, [32, 64, 192, 320, 448, 576, 704, 832, 960]);
        assert!(is_report_frame(64 + 128 * 33_000_000));
        assert!(!is_report_frame(u32::MAX));
        assert!(
            !is_report_frame(128),
            "128 is an evaluation frame (S4.1), not a report frame"
        );
    }

    #[test]
    fn s3_first_report_averages_all_frames_so_far_rounding_up() {
        let mut m = Measurements::new();
        m.add_frame_work_us(10_000);
        m.frame_work_begin(1_000).unwrap();
        m.frame_work_end(21_001).unwrap(); // 20_001 µs
                                           // (10_000 + 20_001) / 2 = 15_000.5 -> 15_001: never under-reported.
        assert_eq!(m.take_report().process_us, 15_001);
    }

    #[test]
    fn s3_later_reports_average_only_their_own_interval() {
        let mut m = Measurements::new();
        for _ in 0..32 {
            m.add_frame_work_us(40_000);
        }
        assert_eq!(m.take_report().process_us, 40_000);
        for _ in 0..32 {
            m.add_frame_work_us(5_000);
        }
        assert_eq!(
            m.take_report().process_us,
            5_000,
            "the slow interval is forgotten"
        );
        // An interval without frames repeats the last average rather than claim 0.
        assert_eq!(m.take_report().process_us, 5_000);
    }

    #[test]
    fn s3_no_frames_at_all_reports_zero_processing() {
        assert_eq!(Measurements::new().take_report().process_us, 0);
    }

    #[test]
    fn s3_longest_wait_covers_the_last_two_intervals() {
        let mut m = Measurements::new();
        m.add_wait_us(30_000);
        m.wait_begin(0).unwrap();
        m.wait_end(120_000).unwrap();
        m.add_wait_us(50_000);
        assert_eq!(
            m.take_report().max_wait_ms,
            120,
            "the longest single wait, not a sum"
        );
        m.add_wait_us(10_000);
        assert_eq!(
            m.take_report().max_wait_ms,
            120,
            "still within the last two intervals"
        );
        m.add_wait_us(7_000);
        assert_eq!(
            m.take_report().max_wait_ms,
            10,
            "three intervals back is forgotten"
        );
        assert_eq!(m.take_report().max_wait_ms, 7);
        assert_eq!(m.take_report().max_wait_ms, 0);
    }

    #[test]
    fn s3_waits_round_up_to_whole_milliseconds() {
        let mut m = Measurements::new();
        m.add_wait_us(99_001);
        assert_eq!(
            m.take_report().max_wait_ms,
            100,
            "a wait just over 99 ms blocks an improvement (S4.4b)"
        );
    }

    #[test]
    fn a_wait_open_at_report_time_counts_when_it_ends() {
        let mut m = Measurements::new();
        m.wait_begin(1_000_000).unwrap();
        assert_eq!(m.take_report().max_wait_ms, 0);
        m.wait_end(1_200_000).unwrap();
        assert_eq!(m.take_report().max_wait_ms, 200);
    }

    #[test]
    fn s3_player_alone_reports_zero_round_trip() {
        assert_eq!(Measurements::new().take_report().worst_rtt_ms, Some(0));
    }

    #[test]
    fn s3_no_round_trip_while_any_link_lacks_a_clean_measurement() {
        let mut m = Measurements::new();
        m.add_peer(1).unwrap();
        m.add_peer(2).unwrap();
        m.add_rtt_sample(1, 80, true).unwrap();
        m.add_rtt_sample(2, 90, false).unwrap();
        assert_eq!(
            m.take_report().worst_rtt_ms,
            None,
            "peer 2 has no clean sample"
        );
        m.add_rtt_sample(2, 120, true).unwrap();
        assert_eq!(m.take_report().worst_rtt_ms, Some(120));
    }

    #[test]
    fn s3_worst_round_trip_is_the_worst_clean_sample_over_all_links() {
        let mut m = Measurements::new();
        for peer in [3, 1, 2] {
            m.add_peer(peer).unwrap();
        }
        for (peer, rtt) in [(1, 50), (2, 140), (3, 90), (2, 60), (1, 70)] {
            m.add_rtt_sample(peer, rtt, true).unwrap();
        }
        assert_eq!(m.take_report().worst_rtt_ms, Some(140));
        // Next interval: peer 2 measures only 60 now; the 140 was last interval's.
        m.add_rtt_sample(2, 60, true).unwrap();
        assert_eq!(m.take_report().worst_rtt_ms, Some(90));
    }

    #[test]
    fn s3_retransmitting_link_keeps_its_last_measured_round_trip() {
        let mut m = Measurements::new();
        m.add_peer(1).unwrap();
        m.add_rtt_sample(1, 100, true).unwrap();
        assert_eq!(m.take_report().worst_rtt_ms, Some(100));
        // The link retransmits: only inflated, unclean samples arrive (S8, Karn).
        m.add_rtt_sample(1, 900, false).unwrap();
        m.add_rtt_sample(1, 1_500, false).unwrap();
        assert_eq!(m.take_report().worst_rtt_ms, Some(100));
        // And with no sample at all for a whole interval.
        assert_eq!(m.take_report().worst_rtt_ms, Some(100));
    }

    #[test]
    fn peers_can_leave_and_join() {
        let mut m = Measurements::new();
        m.add_peer(1).unwrap();
        m.add_peer(2).unwrap();
        m.add_rtt_sample(1, 300, true).unwrap();
        assert_eq!(m.add_peer(1), Err(Error::State("peer is already measured")));
        m.remove_peer(2).unwrap();
        assert_eq!(
            m.take_report().worst_rtt_ms,
            Some(300),
            "peer 2 no longer holds it back"
        );
        m.remove_peer(1).unwrap();
        assert_eq!(m.take_report().worst_rtt_ms, Some(0), "alone again");
        assert_eq!(m.remove_peer(1), Err(Error::UnknownSeat(1)));
        assert_eq!(m.add_rtt_sample(9, 10, true), Err(Error::UnknownSeat(9)));
        // A peer that rejoins starts unmeasured.
        m.add_peer(1).unwrap();
        assert_eq!(m.take_report().worst_rtt_ms, None);
    }

    #[test]
    fn bracket_misuse_is_refused_without_effect() {
        let mut m = Measurements::new();
        assert!(matches!(m.frame_work_end(5), Err(Error::State(_))));
        m.frame_work_begin(100).unwrap();
        assert!(matches!(m.frame_work_begin(150), Err(Error::State(_))));
        assert!(matches!(
            m.frame_work_end(99).unwrap_err().kind(),
            Error::Invalid(_)
        ));
        m.frame_work_end(400).unwrap(); // still open from 100
        assert_eq!(m.take_report().process_us, 300);

        assert!(matches!(m.wait_end(5), Err(Error::State(_))));
        m.wait_begin(10_000).unwrap();
        assert!(matches!(m.wait_begin(10_500), Err(Error::State(_))));
        let early = m.wait_end(9_999).unwrap_err();
        assert!(matches!(early.kind(), Error::Invalid(_)));
        assert_eq!(
            early.to_string(),
            "now_us is 9999; expected 10000 (the wait's begin) or later"
        );
        m.wait_end(15_000).unwrap();
        assert_eq!(m.take_report().max_wait_ms, 5);
    }

    #[test]
    fn the_detail_has_the_round_trip_distribution_per_peer_largest_over_peers() {
        let mut m = Measurements::new();
        m.add_peer(1).unwrap();
        m.add_peer(2).unwrap();
        // Peer 1: 1..=100 ms; peer 2: 60 ms steady, one 500 ms outlier.
        for rtt in 1..=100 {
            m.add_rtt_sample(1, rtt, true).unwrap();
            m.add_rtt_sample(2, if rtt == 50 { 500 } else { 60 }, true)
                .unwrap();
        }
        m.add_rtt_sample(1, 999, false).unwrap(); // unclean: not a sample
        let report = m.take_report();
        let detail = report.detail.unwrap();
        assert_eq!(report.worst_rtt_ms, Some(500));
        assert_eq!(
            detail.median_rtt_ms,
            Some(60),
            "peer 2's median beats peer 1's 50"
        );
        assert_eq!(
            detail.p90_rtt_ms,
            Some(90),
            "peer 1's p90 beats peer 2's 60"
        );
        assert_eq!(detail.latest_rtt_ms, Some(100));
        // An interval without samples: every figure is the last clean sample.
        let detail = m.take_report().detail.unwrap();
        assert_eq!(
            (
                detail.median_rtt_ms,
                detail.p90_rtt_ms,
                detail.latest_rtt_ms
            ),
            (Some(100), Some(100), Some(100))
        );
    }

    #[test]
    fn the_distribution_keeps_the_last_samples_of_a_long_interval() {
        let mut m = Measurements::new();
        m.add_peer(1).unwrap();
        for _ in 0..RTT_SAMPLES_KEPT {
            m.add_rtt_sample(1, 400, true).unwrap();
        }
        for _ in 0..RTT_SAMPLES_KEPT {
            m.add_rtt_sample(1, 40, true).unwrap();
        }
        let report = m.take_report();
        assert_eq!(report.worst_rtt_ms, Some(400));
        assert_eq!(report.detail.unwrap().p90_rtt_ms, Some(40));
    }

    #[test]
    fn the_detail_counts_this_intervals_stalls_and_whom_they_waited_for() {
        let mut m = Measurements::new();
        for _ in 0..128 {
            m.add_frame_work_us(1_000);
        }
        m.wait_begin_for(0, Some(3)).unwrap();
        m.wait_end(30_000).unwrap();
        m.add_wait_for_us(20_000, Some(5));
        m.add_wait_for_us(15_000, Some(5));
        m.add_wait_us(1_500); // for nobody known
        let detail = m.take_report().detail.unwrap();
        assert_eq!(detail.frames, 128);
        assert_eq!(detail.stalled_frames, 4);
        assert_eq!(detail.stall_ms, 67, "66.5 ms rounded up");
        assert_eq!(
            detail.waited_for,
            Some(5),
            "35 ms for seat 5 beats 30 for seat 3"
        );
        // The next interval starts clean, unlike the longest wait (two intervals).
        let report = m.take_report();
        assert_eq!(report.max_wait_ms, 30);
        let detail = report.detail.unwrap();
        assert_eq!(
            (detail.stalled_frames, detail.stall_ms, detail.waited_for),
            (0, 0, None)
        );
        // A seat out of range still counts as a stall, of nobody.
        m.add_wait_for_us(1_000, Some(200));
        let detail = m.take_report().detail.unwrap();
        assert_eq!((detail.stalled_frames, detail.waited_for), (1, None));
        assert_eq!(detail.frames, 1, "a stall belongs to a frame");
    }

    #[test]
    fn every_detail_measured_encodes_in_the_detailed_layout() {
        use crate::wire::events::ReportLayout;
        let mut m = Measurements::new();
        m.add_peer(1).unwrap();
        let mut buf = [0; 64];
        // No clean sample yet: no round trips at all.
        let report = m.take_report();
        assert_eq!(report.detail.unwrap().median_rtt_ms, None);
        ReportLayout::Detailed.encode(&report, &mut buf).unwrap();
        m.add_rtt_sample(1, 70_000, true).unwrap();
        m.add_wait_for_us(u64::MAX, Some(1));
        let report = m.take_report();
        let len = ReportLayout::Detailed.encode(&report, &mut buf).unwrap();
        assert!(ReportLayout::Detailed.decode(&buf[..len]).is_ok());
    }

    #[test]
    fn huge_durations_saturate() {
        let mut m = Measurements::new();
        m.add_frame_work_us(u64::MAX);
        m.add_frame_work_us(u64::MAX);
        m.add_wait_us(u64::MAX);
        let report = m.take_report();
        assert_eq!(report.process_us, u32::MAX);
        assert_eq!(report.max_wait_ms, u32::MAX);
    }

    #[test]
    fn each_frame_s_need_goes_into_its_interval_s_report_once() {
        let mut m = Measurements::new();
        assert_eq!(
            m.take_report().detail.unwrap().needs,
            None,
            "nothing measured"
        );
        for needed in [2, 3, 3, 5] {
            m.add_frame_need(4, needed).unwrap();
        }
        // Out of range: refused, nothing counted.
        assert!(matches!(m.add_frame_need(0, 3), Err(Error::Invalid(_))));
        assert!(matches!(m.add_frame_need(4, 251), Err(Error::Invalid(_))));
        let needs = m.take_report().detail.unwrap().needs.unwrap();
        assert_eq!(
            needs,
            LookAheadNeeds {
                reference: 4,
                most: 5,
                above: [1, 1, 3, 4],
            }
        );
        assert_eq!(
            m.take_report().detail.unwrap().needs,
            None,
            "a new interval"
        );
        // The reference is the look-ahead of the interval's last frame.
        m.add_frame_need(9, 9).unwrap();
        m.add_frame_need(8, 6).unwrap();
        let needs = m.take_report().detail.unwrap().needs.unwrap();
        assert_eq!(
            (needs.reference, needs.most, needs.above),
            (8, 9, [1, 1, 1, 2])
        );
        // Every report that carries needs keeps the layout's rules.
        use crate::wire::events::ReportLayout;
        let mut buf = [0; crate::wire::events::REPORT_NEEDS_LEN];
        m.add_frame_need(250, 250).unwrap();
        let report = m.take_report();
        let len = ReportLayout::Needs.encode(&report, &mut buf).unwrap();
        assert_eq!(ReportLayout::Needs.decode(&buf[..len]), Ok(report));
    }
}
