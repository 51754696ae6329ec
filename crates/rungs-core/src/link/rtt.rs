//! Round-trip estimation (S8): RFC 6298's smoothed RTT and variance in
//! integer microseconds, the retransmission timeout with exponential backoff,
//! and the worst recent round trip that reports carry (S3).

/// Lower clamp of the retransmission timeout.
pub(crate) const MIN_RTO_US: u64 = 100_000;
/// Upper clamp of the retransmission timeout, backed off or not.
pub(crate) const MAX_RTO_US: u64 = 2_000_000;
/// Timeout before the first sample (RFC 6298 section 2.1: one second).
pub(crate) const INITIAL_RTO_US: u64 = 1_000_000;
/// Clock granularity G of RFC 6298: the variance term is at least this.
pub(crate) const GRANULARITY_US: u64 = 1_000;
/// Length of one bucket of the worst-recent window.
pub(crate) const WORST_BUCKET_US: u64 = 1_000_000;
/// Buckets in the worst-recent window: the window spans this many seconds,
/// more than two report intervals at 30 fps (S3: one every 128 frames).
pub(crate) const WORST_BUCKETS: usize = 10;
/// `us` in whole milliseconds, rounded up (saturating): how reports (S3)
/// and the links that feed them state a round trip or a wait.
pub(crate) fn ms_rounded_up(us: u64) -> u32 {
    u32::try_from(us.div_ceil(1000)).unwrap_or(u32::MAX)
}

/// Most backoff doublings counted (beyond this the RTO is at its ceiling anyway).
const MAX_BACKOFF: u32 = 16;
/// The largest round trip a sample may claim: anything longer is a clock
/// jump, not a path (every sum below stays far from overflow).
pub(crate) const MAX_SAMPLE_US: u64 = 3_600_000_000;

/// The RFC 6298 estimator of one link, in whole microseconds.
///
/// Samples must follow Karn's rule (S8); that is the caller's job
/// ([`Link`](super::Link) takes them only from packets that carried a first
/// transmission or were keep-alives).
#[derive(Debug, Clone)]
pub struct RttEstimator {
    srtt_us: u64,
    rttvar_us: u64,
    latest_us: u64,
    min_us: u64,
    max_us: u64,
    samples: u64,
    backoff: u32,
    worst: [WorstBucket; WORST_BUCKETS],
    /// Most the peer holds an acknowledgement: the RTO allows for it.
    max_ack_delay_us: u64,
}

#[derive(Debug, Clone, Copy, Default)]
struct WorstBucket {
    /// `now / WORST_BUCKET_US` of the samples in it; `None` when empty.
    index: Option<u64>,
    max_us: u64,
}

impl Default for RttEstimator {
    fn default() -> Self {
        Self::new()
    }
}

impl RttEstimator {
    /// An estimator with no sample yet.
    pub fn new() -> RttEstimator {
        RttEstimator {
            srtt_us: 0,
            rttvar_us: 0,
            latest_us: 0,
            min_us: 0,
            max_us: 0,
            samples: 0,
            backoff: 0,
            worst: [WorstBucket::default(); WORST_BUCKETS],
            max_ack_delay_us: 0,
        }
    }

    /// An estimator for a peer that holds acknowledgements up to
    /// `max_ack_delay_us` (RFC 9002): its RTO allows for the hold.
    pub fn with_max_ack_delay(max_ack_delay_us: u64) -> RttEstimator {
        RttEstimator {
            max_ack_delay_us,
            ..RttEstimator::new()
        }
    }

    /// Feed a round trip measured at `now_us` whose acknowledgement the
    /// peer says it held `ack_delay_us` (the caller caps that at the most it
    /// may hold). The hold is taken off (RFC 9002 5.3), but never below the
    /// smallest round trip seen, this one included: a peer that overstates
    /// its holds cannot push the estimate below what the path has shown.
    /// The first sample has nothing to compare with and takes the hold off
    /// whole.
    pub fn on_delayed_sample(&mut self, now_us: u64, rtt_us: u64, ack_delay_us: u64) {
        let rtt_us = rtt_us.min(MAX_SAMPLE_US);
        let floor = if self.samples == 0 {
            0
        } else {
            self.min_us.min(rtt_us)
        };
        self.on_sample(now_us, rtt_us.saturating_sub(ack_delay_us).max(floor));
    }

    /// Feed one round-trip sample measured at `now_us`.
    pub fn on_sample(&mut self, now_us: u64, rtt_us: u64) {
        let rtt_us = rtt_us.min(MAX_SAMPLE_US);
        if self.samples == 0 {
            // RFC 6298 2.2: SRTT <- R, RTTVAR <- R/2.
            self.srtt_us = rtt_us;
            self.rttvar_us = rtt_us / 2;
            self.min_us = rtt_us;
        } else {
            // RFC 6298 2.3, RTTVAR first (it uses the old SRTT):
            // RTTVAR <- 3/4 RTTVAR + 1/4 |SRTT - R|;  SRTT <- 7/8 SRTT + 1/8 R.
            let error = self.srtt_us.abs_diff(rtt_us);
            self.rttvar_us = (3 * self.rttvar_us + error) / 4;
            self.srtt_us = (7 * self.srtt_us + rtt_us) / 8;
            self.min_us = self.min_us.min(rtt_us);
        }
        self.latest_us = rtt_us;
        self.max_us = self.max_us.max(rtt_us);
        self.samples = self.samples.saturating_add(1);
        // A fresh sample means the path answers again: stop backing off (RFC 6298 5.7).
        self.backoff = 0;

        let index = now_us / WORST_BUCKET_US;
        let bucket = &mut self.worst[(index % WORST_BUCKETS as u64) as usize];
        if bucket.index == Some(index) {
            bucket.max_us = bucket.max_us.max(rtt_us);
        } else {
            *bucket = WorstBucket {
                index: Some(index),
                max_us: rtt_us,
            };
        }
    }

    /// Whether at least one sample was taken: the link's *clean measurement* (S8).
    pub fn has_sample(&self) -> bool {
        self.samples > 0
    }

    /// Number of samples taken.
    pub fn samples(&self) -> u64 {
        self.samples
    }

    /// Smoothed RTT, once sampled.
    pub fn srtt_us(&self) -> Option<u64> {
        self.has_sample().then_some(self.srtt_us)
    }

    /// RTT variance, once sampled.
    pub fn rttvar_us(&self) -> Option<u64> {
        self.has_sample().then_some(self.rttvar_us)
    }

    /// The latest sample.
    pub fn latest_us(&self) -> Option<u64> {
        self.has_sample().then_some(self.latest_us)
    }

    /// The smallest sample ever.
    pub fn min_us(&self) -> Option<u64> {
        self.has_sample().then_some(self.min_us)
    }

    /// The largest sample ever.
    pub fn max_us(&self) -> Option<u64> {
        self.has_sample().then_some(self.max_us)
    }

    /// The largest sample of the last 10 seconds (`WORST_BUCKETS`); when that
    /// window is empty (a link that stopped answering) the latest sample, so a
    /// retransmitting link keeps reporting its last measured round trip (S3, S8).
    pub fn worst_recent_us(&self, now_us: u64) -> Option<u64> {
        if !self.has_sample() {
            return None;
        }
        let now_index = now_us / WORST_BUCKET_US;
        let recent = self
            .worst
            .iter()
            .filter_map(|b| {
                let index = b.index?;
                (now_index.saturating_sub(index) < WORST_BUCKETS as u64).then_some(b.max_us)
            })
            .max();
        Some(recent.unwrap_or(self.latest_us))
    }

    /// RTO = SRTT + max(G, 4·RTTVAR) + the peer's max ack delay (RFC 9002's
    /// PTO), clamped to 100–2000 ms; one second before the first sample.
    /// Without backoff.
    pub fn rto_us(&self) -> u64 {
        if !self.has_sample() {
            return INITIAL_RTO_US;
        }
        let rto = self
            .srtt_us
            .saturating_add(GRANULARITY_US.max(self.rttvar_us.saturating_mul(4)))
            .saturating_add(self.max_ack_delay_us);
        rto.clamp(MIN_RTO_US, MAX_RTO_US)
    }

    /// The RTO doubled once per expiry since the last sample or new ack,
    /// still at most 2 seconds (`MAX_RTO_US`).
    pub fn backed_off_rto_us(&self) -> u64 {
        // rto <= 2^21 and backoff <= 16: the shift cannot overflow a u64.
        (self.rto_us() << self.backoff).min(MAX_RTO_US)
    }

    /// An RTO expired: double the timeout (RFC 6298 5.5).
    pub fn on_rto_expired(&mut self) {
        self.backoff = (self.backoff + 1).min(MAX_BACKOFF);
    }

    /// New data was acknowledged: the path works, drop the backoff.
    pub fn reset_backoff(&mut self) {
        self.backoff = 0;
    }

    /// Current number of backoff doublings.
    pub fn backoff(&self) -> u32 {
        self.backoff
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_absurd_clock_jump_saturates_instead_of_overflowing() {
        let mut e = RttEstimator::new();
        e.on_sample(0, 200_000);
        e.on_sample(u64::MAX, u64::MAX);
        e.on_sample(u64::MAX, u64::MAX);
        e.on_sample(u64::MAX, 1);
        assert!(e.srtt_us().unwrap() <= MAX_SAMPLE_US);
        assert!(e.rto_us() <= MAX_RTO_US);
        assert_eq!(e.worst_recent_us(u64::MAX), Some(MAX_SAMPLE_US));
    }

    #[test]
    fn first_sample_then_rfc6298_updates_variance_before_srtt() {
        let mut e = RttEstimator::new();
        assert_eq!(e.rto_us(), INITIAL_RTO_US);
        assert_eq!(e.srtt_us(), None);
        e.on_sample(0, 200_000);
        assert_eq!(e.srtt_us(), Some(200_000));
        assert_eq!(e.rttvar_us(), Some(100_000));
        // 200 + 4*100 = 600 ms.
        assert_eq!(e.rto_us(), 600_000);
        e.on_sample(0, 280_000);
        // RTTVAR uses the old SRTT: 3/4*100 + 1/4*|200-280| = 75 + 20 = 95 ms.
        assert_eq!(e.rttvar_us(), Some(95_000));
        // SRTT: 7/8*200 + 1/8*280 = 175 + 35 = 210 ms.
        assert_eq!(e.srtt_us(), Some(210_000));
        assert_eq!(e.samples(), 2);
    }

    #[test]
    fn rto_is_clamped_and_backs_off_to_the_ceiling() {
        let mut e = RttEstimator::new();
        for _ in 0..50 {
            e.on_sample(0, 10_000);
        }
        assert_eq!(e.rto_us(), MIN_RTO_US);
        e.on_rto_expired();
        assert_eq!(e.backed_off_rto_us(), 2 * MIN_RTO_US);
        for _ in 0..40 {
            e.on_rto_expired();
        }
        assert_eq!(e.backed_off_rto_us(), MAX_RTO_US);
        e.reset_backoff();
        assert_eq!(e.backed_off_rto_us(), MIN_RTO_US);
        let mut slow = RttEstimator::new();
        slow.on_sample(0, 5_000_000);
        assert_eq!(slow.rto_us(), MAX_RTO_US);
    }

    #[test]
    fn an_ack_delay_comes_off_the_sample_but_not_below_the_smallest_seen() {
        let mut e = RttEstimator::with_max_ack_delay(50_000);
        // First sample: the hold comes off whole.
        e.on_delayed_sample(0, 130_000, 30_000);
        assert_eq!(e.latest_us(), Some(100_000));
        assert_eq!(
            e.rto_us(),
            100_000 + 4 * 50_000 + 50_000,
            "RTO allows for the hold"
        );
        e.on_delayed_sample(0, 112_000, 12_000);
        assert_eq!(e.latest_us(), Some(100_000));
        // An overstated hold stops at the smallest round trip seen.
        e.on_delayed_sample(0, 120_000, 50_000);
        assert_eq!(e.latest_us(), Some(100_000));
        // A faster path shows through.
        e.on_delayed_sample(0, 90_000, 0);
        assert_eq!(e.latest_us(), Some(90_000));
        assert_eq!(e.min_us(), Some(90_000));
    }

    #[test]
    fn constant_samples_converge_to_the_sample() {
        let mut e = RttEstimator::new();
        e.on_sample(0, 500_000);
        for _ in 0..200 {
            e.on_sample(0, 100_000);
        }
        let srtt = e.srtt_us().unwrap();
        // Integer flooring leaves SRTT within 8 us of the sample.
        assert!((100_000..100_008).contains(&srtt), "{srtt}");
        assert_eq!(e.min_us(), Some(100_000));
        assert_eq!(e.max_us(), Some(500_000));
    }

    #[test]
    fn worst_recent_forgets_old_spikes_but_keeps_the_last_value() {
        let mut e = RttEstimator::new();
        assert_eq!(e.worst_recent_us(0), None);
        e.on_sample(0, 900_000);
        e.on_sample(1_500_000, 100_000);
        assert_eq!(e.worst_recent_us(2_000_000), Some(900_000));
        // The spike's bucket (second 0) leaves the window after 10 s.
        assert_eq!(e.worst_recent_us(10_500_000), Some(100_000));
        // Nothing recent at all: the latest sample stands.
        assert_eq!(e.worst_recent_us(60_000_000), Some(100_000));
    }
}
