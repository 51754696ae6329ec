//! Hand-written JSON (the crate takes no serialisation dependency).
//!
//! The output must be byte-for-byte identical for the same seed and flags:
//! keys come in a fixed order, floats are printed with a fixed number of
//! decimals, and nothing measured by a wall clock goes in.

use rungs_sim::{GameReport, GameSpec};

use crate::cli::policy_name;
use crate::figures::{
    departure_name, loss_probability, micros_as_ms, ratio_to_floor, stall_percent,
};

/// Decimals of every millisecond figure: microsecond resolution, the
/// simulator's clock.
const MS_DECIMALS: usize = 3;

/// A JSON string literal with every character that needs it escaped.
pub fn string(text: &str) -> String {
    let mut out = String::with_capacity(text.len() + 2);
    out.push('"');
    for c in text.chars() {
        match c {
            '"' => out.push_str("\\\""),
            '\\' => out.push_str("\\\\"),
            '\n' => out.push_str("\\n"),
            '\r' => out.push_str("\\r"),
            '\t' => out.push_str("\\t"),
            '\u{8}' => out.push_str("\\b"),
            '\u{c}' => out.push_str("\\f"),
            c if u32::from(c) < 0x20 => out.push_str(&format!("\\u{:04x}", u32::from(c))),
            c => out.push(c),
        }
    }
    out.push('"');
    out
}

/// A number with `decimals` decimals; `null` for what JSON cannot hold.
pub fn number(value: f64, decimals: usize) -> String {
    if !value.is_finite() {
        return "null".to_owned();
    }
    let text = format!("{value:.decimals$}");
    // `-0.000` and `0.000` are the same figure; print it one way.
    if text.starts_with('-') && text[1..].bytes().all(|b| b == b'0' || b == b'.') {
        text[1..].to_owned()
    } else {
        text
    }
}

fn ms(value: f64) -> String {
    number(value, MS_DECIMALS)
}

fn array<T>(items: impl IntoIterator<Item = T>, render: impl Fn(T) -> String) -> String {
    let items: Vec<String> = items.into_iter().map(render).collect();
    format!("[{}]", items.join(","))
}

/// An object written key by key, in order. `pretty` puts each key on its
/// own line (the top level); otherwise it is one line (nested values).
pub struct Object {
    fields: Vec<(String, String)>,
    pretty: bool,
}

impl Object {
    pub fn pretty() -> Object {
        Object {
            fields: Vec::new(),
            pretty: true,
        }
    }

    pub fn inline() -> Object {
        Object {
            fields: Vec::new(),
            pretty: false,
        }
    }

    /// Add `key` with an already-rendered JSON value.
    pub fn raw(mut self, key: &str, value: impl Into<String>) -> Object {
        self.fields.push((string(key), value.into()));
        self
    }

    pub fn text(self, key: &str, value: &str) -> Object {
        self.raw(key, string(value))
    }

    pub fn uint(self, key: &str, value: impl Into<u64>) -> Object {
        self.raw(key, value.into().to_string())
    }

    pub fn boolean(self, key: &str, value: bool) -> Object {
        self.raw(key, value.to_string())
    }

    pub fn render(&self) -> String {
        if self.fields.is_empty() {
            return "{}".to_owned();
        }
        let (open, separator, close) = if self.pretty {
            ("{\n  ", ",\n  ", "\n}")
        } else {
            ("{", ",", "}")
        };
        let fields: Vec<String> = self
            .fields
            .iter()
            .map(|(key, value)| format!("{key}:{value}"))
            .collect();
        format!("{open}{}{close}", fields.join(separator))
    }
}

/// The spec as flags would give it back, so a JSON file says how to rerun it.
fn spec_fields(object: Object, spec: &GameSpec) -> Object {
    let spikes = array(&spec.spikes, |spike| {
        Object::inline()
            .uint("rtt_ms", spike.rtt_ms)
            .uint("start_ms", spike.start_ms)
            .uint("duration_ms", spike.duration_ms)
            .raw(
                "player",
                spike.player.map_or("null".to_owned(), |p| p.to_string()),
            )
            .render()
    });
    let departure = spec
        .departure
        .map_or("null".to_owned(), |(seat, frame, how)| {
            Object::inline()
                .uint("seat", seat)
                .uint("frame", frame)
                .text("how", departure_name(how))
                .render()
        });
    object
        .uint("players", spec.players)
        .uint("fps", spec.fps)
        .uint("seed", spec.seed)
        .raw("rtt_ms", array(&spec.rtt_ms, u32::to_string))
        .uint("jitter_ms", spec.jitter_ms)
        .raw("loss", loss_probability(spec.loss_ppm))
        .raw("spikes", spikes)
        .raw("proc_ms", array(&spec.proc_us, |us| micros_as_ms(*us)))
        .raw("departure", departure)
        .uint("commands_per_minute", spec.commands_per_minute)
}

/// One run as a JSON object (without a trailing newline).
pub fn run(scenario: Option<&str>, spec: &GameSpec, report: &GameReport) -> String {
    let latency = Object::inline()
        .raw("mean", ms(report.latency_mean_ms))
        .raw("p95", ms(report.latency_p95_ms))
        .raw("max", ms(report.latency_max_ms))
        .render();
    let floor = Object::inline()
        .raw("mean", ms(report.floor_mean_ms))
        .render();
    let timeline = array(&report.timeline, |(frame, sp, la, fps)| {
        format!("[{frame},{sp},{la},{fps}]")
    });
    let object = Object::pretty()
        .raw("scenario", scenario.map_or("null".to_owned(), string))
        .text("policy", &policy_name(spec.policy))
        .uint("frames", report.frames);
    spec_fields(object, spec)
        .raw("latency_ms", latency)
        .raw("floor_ms", floor)
        .raw(
            "ratio_to_floor",
            ratio_to_floor(report).map_or("null".to_owned(), |r| number(r, 3)),
        )
        .uint("stall_frames", report.stall_frames)
        .raw("stall_percent", number(stall_percent(report), 3))
        .raw("stall_ms", ms(report.stall_ms))
        .raw(
            "stalls",
            array(&report.stall_events, |(at, wait)| {
                format!("[{}, {}]", ms(*at), ms(*wait))
            }),
        )
        .uint("desyncs", report.desyncs)
        .uint("commands_issued", report.commands_issued)
        .uint("commands_executed", report.commands_executed)
        .uint("packets", report.packets)
        .uint("bytes", report.bytes)
        .raw(
            "packets_per_machine_per_1000_frames",
            number(report.packets_per_machine_per_1000_frames(spec.players), 1),
        )
        .raw("duration_ms", ms(report.duration_ms))
        .uint("links_lost", report.links_lost)
        .boolean("logs_identical", report.logs_identical)
        .boolean("commands_in_order", report.commands_in_order)
        .raw("timeline", timeline)
        .raw("timeline_at_ms", array(&report.timeline_at_ms, |t| ms(*t)))
        .render()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn strings_escape_what_json_requires() {
        assert_eq!(string("a\"b\\c"), r#""a\"b\\c""#);
        assert_eq!(string("line\nnext\ttab"), r#""line\nnext\ttab""#);
        assert_eq!(string("\u{1}"), r#""\u0001""#);
        assert_eq!(string("é ✓"), "\"é ✓\"");
    }

    #[test]
    fn numbers_have_fixed_decimals_and_no_negative_zero() {
        assert_eq!(number(1.0 / 3.0, 3), "0.333");
        assert_eq!(number(-0.0001, 3), "0.000");
        assert_eq!(number(-1.5, 1), "-1.5");
        assert_eq!(number(f64::NAN, 3), "null");
        assert_eq!(number(f64::INFINITY, 3), "null");
    }

    #[test]
    fn objects_keep_key_order() {
        let object = Object::inline().uint("b", 2u8).text("a", "x").render();
        assert_eq!(object, r#"{"b":2,"a":"x"}"#);
        assert_eq!(Object::pretty().uint("k", 1u8).render(), "{\n  \"k\":1\n}");
    }
}
