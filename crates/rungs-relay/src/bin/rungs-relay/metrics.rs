//! The relay's figures for an operator's monitoring: what `--metrics` serves
//! at `/metrics` in the OpenMetrics text format, and the state `/health`
//! reports (`http.rs` serves both; docs/relay-operations.md lists every
//! metric).
//!
//! Threads: the serving loop owns a [`Metrics`]: it counts what the relay's
//! own counters do not hold (matches started and ended, datagrams sent,
//! socket errors, latency histograms) in a [`Tally`], and every
//! [`PUBLISH_INTERVAL`] copies that, the relay's counters and the gauges
//! (matches by state, seats by presence, connections) into one [`Snapshot`]
//! behind a mutex it only ever *tries* to lock: while a scrape holds it the
//! loop skips that publish and tries again on its next iteration, so a
//! scrape never makes the relay wait. A scrape copies the snapshot, lets go
//! of the lock and encodes the copy. The drain state and the loop's
//! heartbeat are atomics of their own, so `/health` reads them directly.

use std::fmt;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use prometheus_client::collector::Collector;
use prometheus_client::encoding::{DescriptorEncoder, EncodeMetric, NoLabelSet};
use prometheus_client::metrics::counter::ConstCounter;
use prometheus_client::metrics::gauge::ConstGauge;
use prometheus_client::metrics::MetricType;
use prometheus_client::registry::{Registry, Unit};
use rungs_core::link::DropReason;
use rungs_core::relay::{MatchEvent, Relay, RelayCounters, RelayEvent};
use rungs_core::wire::relay::{MatchOverReason, RejectReason, SeatPresence};

/// How often the serving loop publishes a snapshot: what a scrape may lag
/// behind the relay.
pub const PUBLISH_INTERVAL: Duration = Duration::from_millis(100);

/// `/health` says the relay has stalled when its loop has not run for this
/// long. The loop runs at least every 50 ms when idle; only a wedged
/// process (or a disk that holds a journal sync this long) misses it.
pub const STALLED_AFTER: Duration = Duration::from_secs(5);

/// The content type of `/metrics`.
pub const CONTENT_TYPE: &str = "application/openmetrics-text; version=1.0.0; charset=utf-8";

/// Upper bounds of the latency histograms' buckets, µs; one more bucket
/// (+Inf) holds the rest. What the relay may add is a couple of
/// milliseconds (`rungs-relay-load` judges a 2 ms p99): fine steps below
/// that, coarse above.
const BUCKET_BOUNDS_US: [u64; 11] = [
    50, 100, 250, 500, 1_000, 2_000, 5_000, 10_000, 25_000, 50_000, 100_000,
];

/// A cumulative latency histogram (never reset: Prometheus takes rates).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct LatencyBuckets {
    /// Samples per bucket (not cumulative), the last one +Inf.
    counts: [u64; BUCKET_BOUNDS_US.len() + 1],
    sum_us: u64,
}

impl LatencyBuckets {
    /// Count one sample of `us` microseconds.
    pub fn record(&mut self, us: u64) {
        let bucket = BUCKET_BOUNDS_US
            .iter()
            .position(|bound| us <= *bound)
            .unwrap_or(BUCKET_BOUNDS_US.len());
        self.counts[bucket] += 1;
        self.sum_us = self.sum_us.saturating_add(us);
    }

    /// Samples counted.
    pub fn count(&self) -> u64 {
        self.counts.iter().sum()
    }
}

/// How a match ended, as the `reason` label of
/// `rungs_relay_matches_ended_total` says it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Ending {
    /// Every human seat left (the game was played out).
    AllLeft,
    /// It reached its `max_ticks`.
    TickLimit,
    /// The admin socket's `end`.
    Operator,
    /// The relay ended it when its drain ran out of time.
    DrainDeadline,
}

impl Ending {
    const ALL: [Ending; 4] = [
        Ending::AllLeft,
        Ending::TickLimit,
        Ending::Operator,
        Ending::DrainDeadline,
    ];

    fn label(self) -> &'static str {
        match self {
            Ending::AllLeft => "all_left",
            Ending::TickLimit => "tick_limit",
            Ending::Operator => "operator",
            Ending::DrainDeadline => "drain_deadline",
        }
    }
}

/// What the serving loop counts for the metrics beyond the relay's own
/// counters.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Tally {
    pub matches_started: u64,
    matches_ended: [u64; Ending::ALL.len()],
    pub datagrams_sent: u64,
    pub receive_errors: u64,
    pub send_errors: u64,
    /// Kernel receive timestamp to everything the datagram caused sent.
    pub datagram: LatencyBuckets,
    /// `recv` returned to the same end: the relay's own work.
    pub processing: LatencyBuckets,
    /// How late timers ran (bundles at tick starts).
    pub timer: LatencyBuckets,
}

impl Tally {
    /// Count a match starting or ending. `drain_deadline_passed`: the
    /// relay has ended the matches still going at its drain deadline, so
    /// an `Ended` match is one of those, already counted by
    /// [`ended_by_drain`](Self::ended_by_drain) (their events may come
    /// later than the process exits: a match's events surface when its
    /// timers run).
    pub fn event(&mut self, event: &RelayEvent, drain_deadline_passed: bool) {
        let RelayEvent::Match { event, .. } = event else {
            return;
        };
        match event {
            MatchEvent::Started { .. } => self.matches_started += 1,
            MatchEvent::Over { reason, .. } => {
                let ending = match reason {
                    MatchOverReason::AllLeft => Ending::AllLeft,
                    MatchOverReason::TickLimit => Ending::TickLimit,
                    MatchOverReason::Ended if drain_deadline_passed => return,
                    MatchOverReason::Ended => Ending::Operator,
                };
                self.matches_ended[ending as usize] += 1;
            }
            _ => {}
        }
    }

    /// The drain's deadline ended `matches` still going.
    pub fn ended_by_drain(&mut self, matches: usize) {
        self.matches_ended[Ending::DrainDeadline as usize] += matches as u64;
    }
}

/// The figures read off the relay's matches when a snapshot is published.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
struct Gauges {
    loading: u64,
    running: u64,
    over: u64,
    /// Seats of the matches held, by presence ([`PRESENCES`] order).
    seats: [u64; PRESENCES.len()],
    connections: u64,
}

const PRESENCES: [(SeatPresence, &str); 5] = [
    (SeatPresence::Connected, "connected"),
    (SeatPresence::Reconnecting, "reconnecting"),
    (SeatPresence::Loading, "loading"),
    (SeatPresence::Left, "left"),
    (SeatPresence::Ai, "ai"),
];

impl Gauges {
    fn of(relay: &Relay) -> Gauges {
        let mut g = Gauges {
            connections: relay.connection_count() as u64,
            ..Gauges::default()
        };
        for id in relay.match_ids() {
            let Some(s) = relay.sequencer(id) else {
                continue;
            };
            if s.is_over() {
                g.over += 1;
            } else if s.has_started() {
                g.running += 1;
            } else {
                g.loading += 1;
            }
            let seats = usize::from(s.setup().seat_count);
            for presence in &s.presence()[..seats] {
                if let Some(i) = PRESENCES.iter().position(|(p, _)| p == presence) {
                    g.seats[i] += 1;
                }
            }
        }
        g
    }
}

/// Everything a scrape encodes, as of one moment of the serving loop.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Snapshot {
    tally: Tally,
    relay: RelayCounters,
    gauges: Gauges,
    draining: bool,
}

/// What `/health` answers.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Health {
    /// Taking new matches.
    Serving,
    /// Draining (SIGTERM or SIGINT): no new matches.
    Draining,
    /// The serving loop has not run for [`STALLED_AFTER`].
    Stalled,
}

/// What the serving loop and the HTTP threads share.
#[derive(Debug)]
pub struct Shared {
    snapshot: Mutex<Snapshot>,
    draining: AtomicBool,
    /// Milliseconds from `started` to the loop's latest iteration.
    heartbeat_ms: AtomicU64,
    started: Instant,
}

impl Shared {
    pub fn new() -> Shared {
        Shared {
            snapshot: Mutex::new(Snapshot::default()),
            draining: AtomicBool::new(false),
            heartbeat_ms: AtomicU64::new(0),
            started: Instant::now(),
        }
    }

    pub fn health(&self) -> Health {
        let since_start = self.started.elapsed().as_millis() as u64;
        let beat = self.heartbeat_ms.load(Ordering::Relaxed);
        if since_start.saturating_sub(beat) > STALLED_AFTER.as_millis() as u64 {
            Health::Stalled
        } else if self.draining.load(Ordering::Relaxed) {
            Health::Draining
        } else {
            Health::Serving
        }
    }

    /// The latest snapshot in the OpenMetrics text format.
    pub fn encode(&self) -> String {
        // A copy, so the lock is held for a memcpy and never while encoding.
        let snapshot = *self
            .snapshot
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        encode(snapshot)
    }
}

/// `snapshot` in the OpenMetrics text format.
fn encode(snapshot: Snapshot) -> String {
    let mut registry = Registry::default();
    registry.register_collector(Box::new(snapshot));
    let mut text = String::new();
    // Writing to a String cannot fail; an encoder error would be a bug in
    // the names below, which the unit tests encode.
    prometheus_client::encoding::text::encode(&mut text, &registry)
        .expect("the metrics encode as OpenMetrics text");
    text
}

/// The serving loop's side: its tally, and the snapshot it publishes.
pub struct Metrics {
    pub tally: Tally,
    shared: Option<Arc<Shared>>,
    published: Option<Instant>,
    draining: bool,
}

impl Metrics {
    /// Metrics published to `shared` (none without `--metrics`: the tally
    /// is still kept, it costs a few additions).
    pub fn new(shared: Option<Arc<Shared>>) -> Metrics {
        Metrics {
            tally: Tally::default(),
            shared,
            published: None,
            draining: false,
        }
    }

    /// The loop ran: `/health` reads this to tell a wedged relay.
    pub fn heartbeat(&self) {
        if let Some(shared) = &self.shared {
            let ms = shared.started.elapsed().as_millis() as u64;
            shared.heartbeat_ms.store(ms, Ordering::Relaxed);
        }
    }

    /// From now on `/health` says draining (and the next publish, at once,
    /// says so too).
    pub fn set_draining(&mut self) {
        if self.draining {
            return;
        }
        self.draining = true;
        if let Some(shared) = &self.shared {
            shared.draining.store(true, Ordering::Relaxed);
        }
        self.published = None;
    }

    /// Publish a snapshot if [`PUBLISH_INTERVAL`] has passed since the last
    /// (and the HTTP side is not reading one right now: then next time).
    pub fn publish(&mut self, relay: &Relay) {
        let Some(shared) = &self.shared else {
            return;
        };
        if self
            .published
            .is_some_and(|t| t.elapsed() < PUBLISH_INTERVAL)
        {
            return;
        }
        let Ok(mut snapshot) = shared.snapshot.try_lock() else {
            return;
        };
        *snapshot = Snapshot {
            tally: self.tally,
            relay: *relay.counters(),
            gauges: Gauges::of(relay),
            draining: self.draining,
        };
        self.published = Some(Instant::now());
    }
}

/// `BadTicket` → `bad_ticket`.
pub fn snake_case(name: &str) -> String {
    let mut out = String::new();
    for (i, c) in name.chars().enumerate() {
        if c.is_ascii_uppercase() {
            if i > 0 {
                out.push('_');
            }
            out.push(c.to_ascii_lowercase());
        } else {
            out.push(c);
        }
    }
    out
}

fn counter(e: &mut DescriptorEncoder, name: &str, help: &str, value: u64) -> fmt::Result {
    let m = e.encode_descriptor(name, help, None, MetricType::Counter)?;
    ConstCounter::new(value).encode(m)
}

fn gauge(e: &mut DescriptorEncoder, name: &str, help: &str, value: u64) -> fmt::Result {
    let m = e.encode_descriptor(name, help, None, MetricType::Gauge)?;
    ConstGauge::new(value as i64).encode(m)
}

/// One counter per value of `label`.
fn counters_by(
    e: &mut DescriptorEncoder,
    name: &str,
    help: &str,
    label: &str,
    values: &[(String, u64)],
) -> fmt::Result {
    let mut m = e.encode_descriptor(name, help, None, MetricType::Counter)?;
    for (value, count) in values {
        let labels = [(label, value.as_str())];
        ConstCounter::new(*count).encode(m.encode_family(&labels)?)?;
    }
    Ok(())
}

fn gauges_by(
    e: &mut DescriptorEncoder,
    name: &str,
    help: &str,
    label: &str,
    values: &[(&str, u64)],
) -> fmt::Result {
    let mut m = e.encode_descriptor(name, help, None, MetricType::Gauge)?;
    for (value, count) in values {
        let labels = [(label, *value)];
        ConstGauge::new(*count as i64).encode(m.encode_family(&labels)?)?;
    }
    Ok(())
}

fn histogram(e: &mut DescriptorEncoder, name: &str, help: &str, h: &LatencyBuckets) -> fmt::Result {
    let mut m = e.encode_descriptor(name, help, Some(&Unit::Seconds), MetricType::Histogram)?;
    let buckets: Vec<(f64, u64)> = BUCKET_BOUNDS_US
        .iter()
        .map(|us| *us as f64 / 1e6)
        .chain([f64::INFINITY])
        .zip(h.counts)
        .collect();
    m.encode_histogram::<NoLabelSet>(h.sum_us as f64 / 1e6, h.count(), &buckets, None)
}

/// Datagrams the relay dropped without an answer, by reason: its own
/// checks, then the links' ([`DropReason`]).
fn drops(c: &RelayCounters) -> Vec<(String, u64)> {
    let mut out: Vec<(String, u64)> = [
        ("not_relay", c.not_relay),
        ("malformed_hello", c.malformed_hellos),
        ("duplicate_hello", c.duplicate_hellos),
        ("hello_address_rate", c.hellos_limited_by_address),
        ("hello_ticket_rate", c.hellos_limited_by_ticket),
        ("unknown_connection", c.unknown_connection),
    ]
    .into_iter()
    .map(|(n, v)| (n.to_string(), v))
    .collect();
    out.extend(
        DropReason::ALL
            .iter()
            .map(|r| (format!("link_{}", r.name()), c.link_drops_by_reason.get(*r))),
    );
    out
}

impl Collector for Snapshot {
    fn encode(&self, mut e: DescriptorEncoder) -> fmt::Result {
        let (t, c, g) = (&self.tally, &self.relay, &self.gauges);
        let e = &mut e;
        gauges_by(
            e,
            "rungs_relay_matches",
            "Matches the relay holds, by state (over: ended, kept 30 s for late Hellos)",
            "state",
            &[
                ("loading", g.loading),
                ("running", g.running),
                ("over", g.over),
            ],
        )?;
        counter(
            e,
            "rungs_relay_matches_started",
            "Matches that started in this process",
            t.matches_started,
        )?;
        let ended: Vec<(String, u64)> = Ending::ALL
            .iter()
            .map(|k| (k.label().to_string(), t.matches_ended[*k as usize]))
            .collect();
        counters_by(
            e,
            "rungs_relay_matches_ended",
            "Matches that ended in this process, by how",
            "reason",
            &ended,
        )?;
        let seats: Vec<(&str, u64)> = PRESENCES
            .iter()
            .zip(g.seats)
            .map(|((_, name), n)| (*name, n))
            .collect();
        gauges_by(
            e,
            "rungs_relay_seats",
            "Seats of the matches held, by presence",
            "presence",
            &seats,
        )?;
        gauge(
            e,
            "rungs_relay_connections",
            "Live client connections (links), at most --max-connections",
            g.connections,
        )?;
        counter(
            e,
            "rungs_relay_connections_opened",
            "Client connections opened (a reconnect opens one)",
            c.connections_opened,
        )?;
        counter(
            e,
            "rungs_relay_datagrams_received",
            "UDP datagrams received",
            c.datagrams,
        )?;
        counter(
            e,
            "rungs_relay_datagrams_sent",
            "UDP datagrams the kernel took to send",
            t.datagrams_sent,
        )?;
        counters_by(
            e,
            "rungs_relay_datagrams_dropped",
            "Datagrams dropped without an answer, by reason",
            "reason",
            &drops(c),
        )?;
        let refused: Vec<(String, u64)> = RejectReason::ALL
            .iter()
            .map(|r| (snake_case(&format!("{r:?}")), c.rejected[*r as usize - 1]))
            .collect();
        counters_by(
            e,
            "rungs_relay_tickets_refused",
            "Hellos refused with a Reject, by the reason the client is told",
            "reason",
            &refused,
        )?;
        counter(
            e,
            "rungs_relay_cookies_sent",
            "Cookie challenges sent to Hellos from unverified addresses",
            c.cookies_sent,
        )?;
        counter(
            e,
            "rungs_relay_bad_messages",
            "Link messages from clients that are not valid client messages",
            c.bad_messages,
        )?;
        counters_by(
            e,
            "rungs_relay_socket_errors",
            "Receive and send errors of the UDP socket",
            "direction",
            &[
                ("receive".to_string(), t.receive_errors),
                ("send".to_string(), t.send_errors),
            ],
        )?;
        histogram(
            e,
            "rungs_relay_datagram_latency",
            "Kernel receive timestamp of a datagram to everything it caused handed to the kernel",
            &t.datagram,
        )?;
        histogram(
            e,
            "rungs_relay_processing_latency",
            "recv returning a datagram to everything it caused handed to the kernel",
            &t.processing,
        )?;
        histogram(
            e,
            "rungs_relay_timer_lateness",
            "How late the relay's timers ran (bundles at tick starts), to what they sent handed to the kernel",
            &t.timer,
        )?;
        gauge(
            e,
            "rungs_relay_draining",
            "1 while draining (SIGTERM or SIGINT): no new matches",
            u64::from(self.draining),
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn latency_buckets_count_each_sample_once_at_its_upper_bound() {
        let mut h = LatencyBuckets::default();
        for us in [0, 50, 51, 999, 1_000, 100_000, 100_001, 7_000_000] {
            h.record(us);
        }
        assert_eq!(h.count(), 8);
        assert_eq!(h.counts[0], 2, "0 and 50 µs: le 50 µs");
        assert_eq!(h.counts[1], 1, "51 µs");
        assert_eq!(h.counts[4], 2, "999 and 1000 µs: le 1 ms");
        assert_eq!(h.counts[10], 1, "100 ms");
        assert_eq!(h.counts[11], 2, "above 100 ms: +Inf");
    }

    #[test]
    fn a_snapshot_encodes_every_family_in_openmetrics_text() {
        let mut snapshot = Snapshot::default();
        snapshot.tally.matches_started = 3;
        snapshot.tally.matches_ended[Ending::DrainDeadline as usize] = 2;
        snapshot.tally.datagrams_sent = 40;
        snapshot.tally.processing.record(120);
        snapshot.tally.processing.record(3_000);
        snapshot.relay.datagrams = 41;
        snapshot.relay.rejected[RejectReason::UnknownMatch as usize - 1] = 5;
        snapshot
            .relay
            .link_drops_by_reason
            .count(DropReason::BadTag);
        snapshot.gauges.running = 1;
        snapshot.gauges.seats[0] = 2;
        snapshot.draining = true;
        let text = encode(snapshot);
        for line in [
            "# TYPE rungs_relay_matches gauge",
            "rungs_relay_matches{state=\"running\"} 1",
            "rungs_relay_matches_started_total 3",
            "rungs_relay_matches_ended_total{reason=\"drain_deadline\"} 2",
            "rungs_relay_matches_ended_total{reason=\"all_left\"} 0",
            "rungs_relay_seats{presence=\"connected\"} 2",
            "rungs_relay_datagrams_received_total 41",
            "rungs_relay_datagrams_sent_total 40",
            "rungs_relay_datagrams_dropped_total{reason=\"link_bad_tag\"} 1",
            "rungs_relay_datagrams_dropped_total{reason=\"not_relay\"} 0",
            "rungs_relay_tickets_refused_total{reason=\"unknown_match\"} 5",
            "rungs_relay_tickets_refused_total{reason=\"log_lost\"} 0",
            "# TYPE rungs_relay_processing_latency_seconds histogram",
            "# UNIT rungs_relay_processing_latency_seconds seconds",
            "rungs_relay_processing_latency_seconds_count 2",
            "rungs_relay_processing_latency_seconds_bucket{le=\"0.00025\"} 1",
            "rungs_relay_processing_latency_seconds_bucket{le=\"0.005\"} 2",
            "rungs_relay_processing_latency_seconds_bucket{le=\"+Inf\"} 2",
            "rungs_relay_datagram_latency_seconds_count 0",
            "rungs_relay_draining 1",
            "# EOF",
        ] {
            assert!(
                text.lines().any(|l| l == line),
                "missing `{line}` in:\n{text}"
            );
        }
    }

    /// Every family as its samples are named (counters end in `_total`,
    /// histograms in `_seconds`, with `_bucket`, `_sum`, `_count`).
    const FAMILIES: [&str; 19] = [
        "rungs_relay_matches",
        "rungs_relay_matches_started_total",
        "rungs_relay_matches_ended_total",
        "rungs_relay_seats",
        "rungs_relay_connections",
        "rungs_relay_connections_opened_total",
        "rungs_relay_datagrams_received_total",
        "rungs_relay_datagrams_sent_total",
        "rungs_relay_datagrams_dropped_total",
        "rungs_relay_tickets_refused_total",
        "rungs_relay_cookies_sent_total",
        "rungs_relay_bad_messages_total",
        "rungs_relay_socket_errors_total",
        "rungs_relay_datagram_latency_seconds",
        "rungs_relay_processing_latency_seconds",
        "rungs_relay_timer_lateness_seconds",
        "rungs_relay_draining",
        // A histogram's samples, as the doc's example shows them.
        "rungs_relay_processing_latency_seconds_bucket",
        "rungs_relay_processing_latency_seconds_sum",
    ];

    #[test]
    fn every_family_is_in_the_operations_doc() {
        let doc = include_str!("../../../../../docs/relay-operations.md");
        let text = encode(Snapshot::default());
        let mut encoded: Vec<String> = text
            .lines()
            .filter_map(|l| l.strip_prefix("# TYPE "))
            .map(|l| {
                let (name, kind) = l.split_once(' ').unwrap();
                match kind {
                    "counter" => format!("{name}_total"),
                    _ => name.to_string(),
                }
            })
            .collect();
        encoded.sort();
        let mut listed: Vec<String> = FAMILIES[..17].iter().map(|f| f.to_string()).collect();
        listed.sort();
        assert_eq!(encoded, listed, "FAMILIES lists every family");
        for family in FAMILIES {
            assert!(
                doc.contains(family),
                "docs/relay-operations.md names `{family}`"
            );
        }
    }

    #[test]
    fn matches_are_tallied_by_how_they_ended() {
        let over = |reason| RelayEvent::Match {
            match_id: 1,
            event: MatchEvent::Over {
                final_tick: 9,
                reason,
            },
        };
        let mut t = Tally::default();
        t.event(
            &RelayEvent::Match {
                match_id: 1,
                event: MatchEvent::Started { all_present: true },
            },
            false,
        );
        t.event(&over(MatchOverReason::AllLeft), false);
        t.event(&over(MatchOverReason::Ended), false);
        t.ended_by_drain(2);
        // The events of the two the drain ended: counted already.
        t.event(&over(MatchOverReason::Ended), true);
        t.event(&over(MatchOverReason::Ended), true);
        t.event(&over(MatchOverReason::TickLimit), true);
        t.event(&RelayEvent::Removed { match_id: 1 }, true);
        assert_eq!(t.matches_started, 1);
        assert_eq!(t.matches_ended, [1, 1, 1, 2]);
    }

    #[test]
    fn health_follows_the_drain_and_the_heartbeat() {
        let shared = Arc::new(Shared::new());
        let mut m = Metrics::new(Some(shared.clone()));
        m.heartbeat();
        assert_eq!(shared.health(), Health::Serving);
        m.set_draining();
        assert_eq!(shared.health(), Health::Draining);
        // A loop whose last beat is older than STALLED_AFTER.
        if let Some(started) = Instant::now().checked_sub(STALLED_AFTER * 2) {
            let stalled = Shared {
                started,
                ..Shared::new()
            };
            assert_eq!(stalled.health(), Health::Stalled);
        }
    }
}
