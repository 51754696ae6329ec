//! The relay's log lines: one per event worth knowing, but never a flood.
//!
//! Every kind of event has a budget of lines per second (rejected Hellos
//! 20, connection churn 50, match lifecycle 200, refused orders 20); beyond
//! it events are only
//! counted, and the next second starts with one line summing what was left
//! out, by kind. Counters that have no event of their own (cookies sent,
//! Hellos dropped by the rate limits, address moves refused) are summed in
//! one line every [`COUNTER_SUMMARY_SECONDS`] while they change. So a Hello
//! storm of any size writes a few dozen lines a second, and what it was
//! still shows.

use std::collections::BTreeMap;

use rungs_core::relay::{MatchEvent, RelayCounters, RelayEvent};

/// Seconds between summaries of the counters that have no event.
pub const COUNTER_SUMMARY_SECONDS: u64 = 10;

/// The kinds of event with a budget of their own.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
enum Kind {
    /// A Hello was refused.
    Rejected,
    /// Connections opening, moving, closing; seats resuming, disconnecting.
    Connection,
    /// Matches starting, seats leaving, desyncs, matches over and removed.
    Lifecycle,
    /// Orders a match refused (a client flooding its queue).
    Refusal,
}

impl Kind {
    fn of(event: &RelayEvent) -> Kind {
        match event {
            RelayEvent::Rejected { .. } => Kind::Rejected,
            RelayEvent::Opened { .. } | RelayEvent::Rebound { .. } | RelayEvent::Closed { .. } => {
                Kind::Connection
            }
            RelayEvent::Match { event, .. } => match event {
                MatchEvent::Connected { .. } | MatchEvent::Disconnected { .. } => Kind::Connection,
                MatchEvent::OrderRefused { .. } => Kind::Refusal,
                _ => Kind::Lifecycle,
            },
            RelayEvent::Removed { .. } => Kind::Lifecycle,
        }
    }

    fn lines_per_second(self) -> u32 {
        match self {
            Kind::Rejected => 20,
            Kind::Connection => 50,
            Kind::Lifecycle => 200,
            Kind::Refusal => 20,
        }
    }

    fn noun(self) -> &'static str {
        match self {
            Kind::Rejected => "rejected Hellos",
            Kind::Connection => "connection events",
            Kind::Lifecycle => "match events",
            Kind::Refusal => "refused orders",
        }
    }
}

/// The short name a left-out event is summed under.
fn detail(event: &RelayEvent) -> String {
    match event {
        RelayEvent::Rejected { reason, .. } => format!("{reason:?}"),
        RelayEvent::Opened { .. } => "connected".into(),
        RelayEvent::Rebound { .. } => "moved".into(),
        RelayEvent::Closed { lost: true, .. } => "lost".into(),
        RelayEvent::Closed { lost: false, .. } => "closed".into(),
        RelayEvent::Removed { .. } => "removed".into(),
        RelayEvent::Match { event, .. } => match event {
            MatchEvent::Started { .. } => "started".into(),
            MatchEvent::Connected { .. } => "resumed".into(),
            MatchEvent::Disconnected { .. } => "disconnected".into(),
            MatchEvent::SeatLeft { .. } => "seat left".into(),
            MatchEvent::Desync(_) => "desync".into(),
            MatchEvent::Over { .. } => "over".into(),
            MatchEvent::OrderRefused { reason, .. } => format!("refused {reason:?}"),
        },
    }
}

/// The line for one event.
pub fn line(event: &RelayEvent) -> String {
    match *event {
        RelayEvent::Rejected { source, reason } => {
            format!("rejected Hello from {source}: {reason:?}")
        }
        RelayEvent::Opened {
            match_id,
            seat,
            source,
            replaced,
        } => format!(
            "match {match_id} seat {seat} connected from {source}{}",
            if replaced {
                " (replacing its connection)"
            } else {
                ""
            }
        ),
        RelayEvent::Rebound {
            match_id,
            seat,
            source,
        } => format!("match {match_id} seat {seat} moved to {source}"),
        RelayEvent::Closed {
            match_id,
            seat,
            lost,
        } => format!(
            "match {match_id} seat {seat} {}",
            if lost { "connection lost" } else { "closed" }
        ),
        RelayEvent::Removed { match_id } => format!("match {match_id} removed"),
        RelayEvent::Match { match_id, event } => match event {
            MatchEvent::Started { all_present } => format!(
                "match {match_id} started ({})",
                if all_present {
                    "everyone joined"
                } else {
                    "load wait over"
                }
            ),
            MatchEvent::Connected {
                seat,
                resume_from_tick,
            } => format!("match {match_id} seat {seat} resumes from tick {resume_from_tick}"),
            MatchEvent::Disconnected { seat } => {
                format!("match {match_id} seat {seat} disconnected; grace running")
            }
            MatchEvent::SeatLeft { seat, tick, kind } => {
                format!("match {match_id} seat {seat} left at tick {tick} ({kind:?})")
            }
            MatchEvent::Desync(d) => format!(
                "match {match_id} DESYNC at tick {}: seats {:#06x} disagree (reported {:#06x})",
                d.tick, d.disagreeing_mask, d.reported_mask
            ),
            MatchEvent::Over { final_tick, reason } => {
                format!("match {match_id} over at tick {final_tick}: {reason:?}")
            }
            MatchEvent::OrderRefused {
                seat,
                sequence,
                reason,
            } => format!("match {match_id} seat {seat} order {sequence} refused: {reason:?}"),
        },
    }
}

/// The counters summed in the periodic line: (name, value).
fn quiet_counters(c: &RelayCounters) -> [(&'static str, u64); 5] {
    [
        ("cookies sent", c.cookies_sent),
        (
            "Hellos dropped by the address limit",
            c.hellos_limited_by_address,
        ),
        (
            "Hellos dropped by the ticket limit",
            c.hellos_limited_by_ticket,
        ),
        ("moves refused (not the newest packet)", c.moves_refused),
        ("malformed Hellos", c.malformed_hellos),
    ]
}

/// Turns relay events and counters into rate-limited log lines.
#[derive(Debug, Default)]
pub struct EventLog {
    second: u64,
    written: BTreeMap<Kind, u32>,
    /// Left out this second: kind → detail → count.
    left_out: BTreeMap<Kind, BTreeMap<String, u64>>,
    summary_at: Option<u64>,
    summarised: [u64; 5],
}

impl EventLog {
    /// A log that has written nothing.
    pub fn new() -> EventLog {
        EventLog::default()
    }

    /// The lines for `event` at Unix second `now_s` (none when its kind's
    /// budget for the second is spent).
    pub fn event(&mut self, now_s: u64, event: &RelayEvent, out: &mut Vec<String>) {
        self.roll(now_s, out);
        let kind = Kind::of(event);
        let written = self.written.entry(kind).or_default();
        if *written < kind.lines_per_second() {
            *written += 1;
            out.push(line(event));
        } else {
            *self
                .left_out
                .entry(kind)
                .or_default()
                .entry(detail(event))
                .or_default() += 1;
        }
    }

    /// Call now and then (every loop of the relay): closes the second and,
    /// every [`COUNTER_SUMMARY_SECONDS`], sums the quiet counters that moved.
    pub fn tick(&mut self, now_s: u64, counters: &RelayCounters, out: &mut Vec<String>) {
        self.roll(now_s, out);
        let since = *self.summary_at.get_or_insert(now_s);
        if now_s < since + COUNTER_SUMMARY_SECONDS {
            return;
        }
        self.summary_at = Some(now_s);
        let values = quiet_counters(counters);
        let moved: Vec<String> = values
            .iter()
            .zip(self.summarised)
            .filter(|((_, now), before)| now > before)
            .map(|((name, now), before)| format!("{} {name}", now - before))
            .collect();
        self.summarised = values.map(|(_, v)| v);
        if !moved.is_empty() {
            out.push(format!("last {} s: {}", now_s - since, moved.join(", ")));
        }
    }

    /// On a new second: one line per kind summing what was left out.
    fn roll(&mut self, now_s: u64, out: &mut Vec<String>) {
        if now_s == self.second {
            return;
        }
        for (kind, details) in std::mem::take(&mut self.left_out) {
            let total: u64 = details.values().sum();
            let mut by: Vec<(String, u64)> = details.into_iter().collect();
            by.sort_by(|a, b| b.1.cmp(&a.1).then(a.0.cmp(&b.0)));
            let parts: Vec<String> = by.iter().map(|(d, n)| format!("{d} {n}")).collect();
            out.push(format!(
                "{total} more {} in second {} not logged ({})",
                kind.noun(),
                self.second,
                parts.join(", ")
            ));
        }
        self.second = now_s;
        self.written.clear();
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use rungs_core::wire::relay::RejectReason;

    fn rejected(i: u32, reason: RejectReason) -> RelayEvent {
        RelayEvent::Rejected {
            source: std::net::SocketAddr::from(([10, 0, (i >> 8) as u8, i as u8], 1)),
            reason,
        }
    }

    #[test]
    fn a_flood_writes_its_budget_and_one_summary_line_a_second() {
        let mut log = EventLog::new();
        let mut out = Vec::new();
        for i in 0..100_000u32 {
            let reason = if i % 4 == 0 {
                RejectReason::Expired
            } else {
                RejectReason::BadTicket
            };
            log.event(1000 + u64::from(i / 50_000), &rejected(i, reason), &mut out);
        }
        // Churn in the same seconds has a budget of its own.
        for seat in 0..200u8 {
            let e = RelayEvent::Opened {
                match_id: 7,
                seat: seat % 16,
                source: "10.9.9.9:9".parse().unwrap(),
                replaced: true,
            };
            log.event(1001, &e, &mut out);
        }
        log.tick(1002, &RelayCounters::default(), &mut out);
        let rejected_lines = out
            .iter()
            .filter(|l| l.starts_with("rejected Hello"))
            .count();
        assert_eq!(rejected_lines, 40, "20 a second");
        let connected = out
            .iter()
            .filter(|l| l.contains(" connected from "))
            .count();
        assert_eq!(connected, 50);
        let summaries: Vec<&String> = out.iter().filter(|l| l.contains("not logged")).collect();
        assert_eq!(summaries.len(), 3, "{summaries:?}");
        assert_eq!(
            summaries[0],
            "49980 more rejected Hellos in second 1000 not logged (BadTicket 37485, Expired 12495)"
        );
        assert_eq!(
            summaries[2],
            "150 more connection events in second 1001 not logged (connected 150)"
        );
        assert_eq!(out.len(), 40 + 50 + 3);
    }

    #[test]
    fn quiet_counters_are_summed_while_they_move() {
        let mut log = EventLog::new();
        let mut out = Vec::new();
        let mut c = RelayCounters::default();
        log.tick(100, &c, &mut out);
        c.cookies_sent = 5;
        c.hellos_limited_by_address = 70_000;
        log.tick(105, &c, &mut out);
        assert!(out.is_empty(), "not before ten seconds");
        log.tick(110, &c, &mut out);
        assert_eq!(
            out,
            ["last 10 s: 5 cookies sent, 70000 Hellos dropped by the address limit"]
        );
        out.clear();
        log.tick(120, &c, &mut out);
        assert!(out.is_empty(), "nothing moved: nothing written");
        c.moves_refused = 2;
        log.tick(131, &c, &mut out);
        assert_eq!(out, ["last 11 s: 2 moves refused (not the newest packet)"]);
    }

    #[test]
    fn every_event_has_a_line() {
        let e = RelayEvent::Match {
            match_id: 3,
            event: MatchEvent::Started { all_present: true },
        };
        assert_eq!(line(&e), "match 3 started (everyone joined)");
        let e = rejected(1, RejectReason::Replayed);
        assert_eq!(line(&e), "rejected Hello from 10.0.0.1:1: Replayed");
    }
}
