//! The timeline picture (`--svg FILE`), hand-written SVG.
//!
//! Top panel: the look-ahead in force, in ms (`look_ahead × 1000 / fps`), as
//! a step line over game time with the timing written at each change; the
//! physical floor of each command as dots; the mean command latency as a
//! dashed line; spikes shaded. Bottom strip: each stalled frame as a bar of
//! its stall in ms (the worst machine's, as the report counts them).

use std::fmt::Write;

use rungs_sim::{GameReport, GameSpec};

use crate::figures::{ratio_to_floor, stall_percent};

const WIDTH: f64 = 1000.0;
const HEIGHT: f64 = 580.0;
const LEFT: f64 = 72.0;
const RIGHT: f64 = 24.0;
const MAIN_TOP: f64 = 102.0;
const MAIN_HEIGHT: f64 = 306.0;
const STRIP_TOP: f64 = 440.0;
const STRIP_HEIGHT: f64 = 80.0;
/// Leave at least this much room between two timing labels on the step line.
const LABEL_SPACING_PX: f64 = 34.0;

const LOOK_AHEAD_COLOUR: &str = "#1f5fa8";
const FLOOR_COLOUR: &str = "#2b9348";
const LATENCY_COLOUR: &str = "#e07b00";
const STALL_COLOUR: &str = "#c1121f";
const SPIKE_COLOUR: &str = "#7b2cbf";

/// Text made safe for SVG content and attribute values.
pub fn escape(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    for c in text.chars() {
        match c {
            '&' => out.push_str("&amp;"),
            '<' => out.push_str("&lt;"),
            '>' => out.push_str("&gt;"),
            '"' => out.push_str("&quot;"),
            '\'' => out.push_str("&apos;"),
            // XML 1.0 forbids most control characters even escaped.
            c if u32::from(c) < 0x20 && !matches!(c, '\t' | '\n' | '\r') => out.push(' '),
            c => out.push(c),
        }
    }
    out
}

/// A tick step of 1, 2 or 5 × 10^k giving about `ticks` ticks over `range`.
fn nice_step(range: f64, ticks: f64) -> f64 {
    let raw = (range / ticks).max(1e-9);
    let magnitude = 10f64.powf(raw.log10().floor());
    let normalised = raw / magnitude;
    let factor = if normalised <= 1.0 {
        1.0
    } else if normalised <= 2.0 {
        2.0
    } else if normalised <= 5.0 {
        5.0
    } else {
        10.0
    };
    factor * magnitude
}

/// A linear axis from 0 to a round maximum at or above `max`.
struct Axis {
    max: f64,
    step: f64,
}

impl Axis {
    fn covering(max: f64, ticks: f64) -> Axis {
        let max = if max > 0.0 { max } else { 1.0 };
        let step = nice_step(max, ticks);
        Axis {
            max: (max / step).ceil() * step,
            step,
        }
    }

    /// An axis that ends exactly at `max` (game time: the plot ends with the
    /// game), ticked at round steps below it.
    fn ending_at(max: f64, ticks: f64) -> Axis {
        let max = if max > 0.0 { max } else { 1.0 };
        Axis {
            max,
            step: nice_step(max, ticks),
        }
    }

    fn ticks(&self) -> impl Iterator<Item = f64> + '_ {
        // The small margin keeps a tick that lands on the end despite rounding.
        let count = (self.max / self.step + 1e-9).floor() as u32;
        (0..=count).map(move |i| f64::from(i) * self.step)
    }

    fn label(&self, value: f64) -> String {
        if self.step >= 1.0 {
            format!("{value:.0}")
        } else {
            format!("{value:.1}")
        }
    }
}

/// One plot area over game time with its own value axis (ms).
struct Panel {
    axis: Axis,
    top: f64,
    height: f64,
    title: &'static str,
}

impl Panel {
    fn y(&self, ms: f64) -> f64 {
        self.top + self.height - ms.clamp(0.0, self.axis.max) / self.axis.max * self.height
    }

    fn bottom(&self) -> f64 {
        self.top + self.height
    }
}

/// Maps game time and values to pixels: the look-ahead panel above the
/// stall strip, sharing the time axis.
struct Frame {
    time: Axis,
    main: Panel,
    strip: Panel,
}

impl Frame {
    fn x(&self, ms: f64) -> f64 {
        LEFT + ms.clamp(0.0, self.time.max * 1000.0) / (self.time.max * 1000.0)
            * (WIDTH - LEFT - RIGHT)
    }

    fn panels(&self) -> [&Panel; 2] {
        [&self.main, &self.strip]
    }
}

/// The look-ahead in ms of each timeline entry, with its game time.
fn look_ahead_steps(report: &GameReport) -> Vec<(f64, f64, String)> {
    report
        .timeline
        .iter()
        .zip(&report.timeline_at_ms)
        .map(|((_, sp, la, fps), at)| {
            let ms = f64::from(*la) * 1000.0 / f64::from((*fps).max(1));
            (*at, ms, format!("{sp}/{la}"))
        })
        .collect()
}

/// Game time at which `frame` ran, from the timeline's rate changes (stalls
/// ignored: good enough to place a marker).
fn approximate_time_of_frame(spec: &GameSpec, report: &GameReport, frame: u32) -> f64 {
    let mut base = (0u32, 0.0, spec.fps);
    for ((at_frame, _, _, fps), at_ms) in report.timeline.iter().zip(&report.timeline_at_ms) {
        if *at_frame <= frame {
            base = (*at_frame, *at_ms, *fps);
        }
    }
    base.1 + f64::from(frame - base.0) * 1000.0 / f64::from(base.2.max(1))
}

/// The whole picture. `title` names the scenario and policy.
pub fn render(title: &str, spec: &GameSpec, report: &GameReport) -> String {
    let steps = look_ahead_steps(report);
    let game_ms = report
        .duration_ms
        .max(steps.last().map_or(0.0, |s| s.0))
        .max(1.0);
    let highest = steps
        .iter()
        .map(|s| s.1)
        .chain(report.floor_samples.iter().map(|f| f.1))
        .chain(std::iter::once(report.latency_mean_ms))
        .fold(0.0, f64::max);
    let worst_stall = report.stall_events.iter().map(|s| s.1).fold(0.0, f64::max);
    let frame = Frame {
        time: Axis::ending_at(game_ms / 1000.0, 10.0),
        main: Panel {
            axis: Axis::covering(highest * 1.05, 8.0),
            top: MAIN_TOP,
            height: MAIN_HEIGHT,
            title: "look-ahead, floor, latency (ms)",
        },
        strip: Panel {
            axis: Axis::covering(worst_stall, 3.0),
            top: STRIP_TOP,
            height: STRIP_HEIGHT,
            title: "stall (ms)",
        },
    };
    let mut svg = String::new();
    let w = &mut svg;
    let _ = writeln!(w, r#"<?xml version="1.0" encoding="UTF-8"?>"#);
    let _ = writeln!(
        w,
        r#"<svg xmlns="http://www.w3.org/2000/svg" width="{WIDTH}" height="{HEIGHT}" viewBox="0 0 {WIDTH} {HEIGHT}" font-family="sans-serif" font-size="12">"#
    );
    let _ = writeln!(w, "<title>{}</title>", escape(title));
    let _ = writeln!(w, r#"<rect width="100%" height="100%" fill="white"/>"#);
    let _ = writeln!(
        w,
        r#"<text x="{LEFT}" y="24" font-size="16" font-weight="bold">{}</text>"#,
        escape(title)
    );
    let ratio = ratio_to_floor(report).map_or("n/a".to_owned(), |r| format!("{r:.2}×"));
    let conditions = format!(
        "{}, {} frames at {} fps, {}, seed {}",
        crate::figures::players_text(spec.players),
        spec.frames,
        spec.fps,
        crate::figures::describe_conditions(spec),
        spec.seed,
    );
    let results = format!(
        "command latency mean {:.1} ms, p95 {:.1} ms · physical floor {:.1} ms (latency {ratio} the floor) · {} stalled frames ({:.2} %), {:.0} ms in all",
        report.latency_mean_ms,
        report.latency_p95_ms,
        report.floor_mean_ms,
        report.stall_frames,
        stall_percent(report),
        report.stall_ms,
    );
    for (y, line) in [(44, conditions), (60, results)] {
        let _ = writeln!(
            w,
            r##"<text x="{LEFT}" y="{y}" font-size="11" fill="#444">{}</text>"##,
            escape(&line)
        );
    }
    legend(w, spec);
    spikes(w, &frame, spec);
    grid(w, &frame);
    floor_dots(w, &frame, report);
    latency_line(w, &frame, report);
    step_line(w, &frame, &steps, game_ms);
    stall_bars(w, &frame, report);
    if let Some((seat, at_frame, how)) = spec.departure {
        let x = frame.x(approximate_time_of_frame(spec, report, at_frame));
        let verb = crate::figures::departure_verb(how);
        let _ = writeln!(
            w,
            r##"<line x1="{x:.1}" y1="{}" x2="{x:.1}" y2="{:.1}" stroke="#555" stroke-dasharray="3 3"/><text x="{:.1}" y="{:.1}" font-size="10" fill="#555">seat {seat} {verb}</text>"##,
            frame.main.top,
            frame.strip.bottom(),
            x + 3.0,
            frame.main.top + 12.0,
        );
    }
    let _ = writeln!(w, "</svg>");
    svg
}

fn legend(w: &mut String, spec: &GameSpec) {
    let mut entries = vec![
        (
            format!(
                r#"<line x1="0" y1="0" x2="18" y2="0" stroke="{LOOK_AHEAD_COLOUR}" stroke-width="2.5"/>"#
            ),
            "look-ahead (ms)",
        ),
        (
            format!(r#"<circle cx="9" cy="0" r="2.5" fill="{FLOOR_COLOUR}"/>"#),
            "physical floor per command",
        ),
        (
            format!(
                r#"<line x1="0" y1="0" x2="18" y2="0" stroke="{LATENCY_COLOUR}" stroke-width="2" stroke-dasharray="6 4"/>"#
            ),
            "mean latency",
        ),
        (
            format!(r#"<rect x="7" y="-6" width="4" height="12" fill="{STALL_COLOUR}"/>"#),
            "stall per stalled frame (ms)",
        ),
    ];
    if !spec.spikes.is_empty() {
        entries.push((
            format!(r#"<rect x="0" y="-6" width="18" height="12" fill="{SPIKE_COLOUR}" fill-opacity="0.15"/>"#),
            "spike",
        ));
    }
    let mut x = LEFT;
    for (swatch, label) in entries {
        let _ = writeln!(
            w,
            r#"<g transform="translate({x:.1},84)">{swatch}<text x="24" y="4">{}</text></g>"#,
            escape(label)
        );
        // About 6.6 px per character of a 12 px sans-serif.
        x += 40.0 + label.len() as f64 * 6.6;
    }
}

fn spikes(w: &mut String, frame: &Frame, spec: &GameSpec) {
    for spike in &spec.spikes {
        let x1 = frame.x(spike.start_ms as f64);
        let x2 = frame.x((spike.start_ms + spike.duration_ms) as f64);
        if x2 <= x1 {
            continue;
        }
        for panel in frame.panels() {
            let _ = writeln!(
                w,
                r#"<rect x="{x1:.1}" y="{}" width="{:.1}" height="{}" fill="{SPIKE_COLOUR}" fill-opacity="0.15"/>"#,
                panel.top,
                (x2 - x1).max(1.0),
                panel.height
            );
        }
    }
}

fn grid(w: &mut String, frame: &Frame) {
    let right = WIDTH - RIGHT;
    let bottom = frame.strip.bottom();
    let _ = writeln!(w, r##"<g stroke="#e3e3e3" stroke-width="1">"##);
    for panel in frame.panels() {
        for s in frame.time.ticks() {
            let x = frame.x(s * 1000.0);
            let _ = writeln!(
                w,
                r#"<line x1="{x:.1}" y1="{}" x2="{x:.1}" y2="{:.1}"/>"#,
                panel.top,
                panel.bottom()
            );
        }
        for ms in panel.axis.ticks() {
            let y = panel.y(ms);
            let _ = writeln!(
                w,
                r#"<line x1="{LEFT}" y1="{y:.1}" x2="{right}" y2="{y:.1}"/>"#
            );
        }
    }
    let _ = writeln!(w, "</g>");
    // Frames, tick labels and titles.
    let _ = writeln!(w, r##"<g stroke="#333" stroke-width="1" fill="none">"##);
    for panel in frame.panels() {
        let _ = writeln!(
            w,
            r#"<rect x="{LEFT}" y="{}" width="{:.1}" height="{}"/>"#,
            panel.top,
            right - LEFT,
            panel.height
        );
    }
    let _ = writeln!(w, "</g>");
    let _ = writeln!(w, r##"<g font-size="11" fill="#333">"##);
    for s in frame.time.ticks() {
        let _ = writeln!(
            w,
            r#"<text x="{:.1}" y="{:.1}" text-anchor="middle">{}</text>"#,
            frame.x(s * 1000.0),
            bottom + 15.0,
            frame.time.label(s)
        );
    }
    let _ = writeln!(
        w,
        r#"<text x="{:.1}" y="{:.1}" text-anchor="middle" font-size="12">game time (s)</text>"#,
        (LEFT + right) / 2.0,
        bottom + 36.0
    );
    for panel in frame.panels() {
        for ms in panel.axis.ticks() {
            let _ = writeln!(
                w,
                r#"<text x="{:.1}" y="{:.1}" text-anchor="end">{}</text>"#,
                LEFT - 6.0,
                panel.y(ms) + 4.0,
                panel.axis.label(ms)
            );
        }
        let _ = writeln!(
            w,
            r#"<text transform="translate(18,{:.1}) rotate(-90)" text-anchor="middle" font-size="12">{}</text>"#,
            panel.top + panel.height / 2.0,
            escape(panel.title)
        );
    }
    let _ = writeln!(w, "</g>");
}

fn floor_dots(w: &mut String, frame: &Frame, report: &GameReport) {
    let _ = writeln!(w, r#"<g fill="{FLOOR_COLOUR}" fill-opacity="0.55">"#);
    let mut samples = report.floor_samples.clone();
    samples.sort_by(|a, b| a.0.total_cmp(&b.0).then(a.1.total_cmp(&b.1)));
    // One dot per pixel and value is all the eye can see.
    samples.dedup_by(|a, b| {
        (frame.x(a.0) - frame.x(b.0)).abs() < 0.5
            && (frame.main.y(a.1) - frame.main.y(b.1)).abs() < 0.5
    });
    for (at, floor) in samples {
        let _ = writeln!(
            w,
            r#"<circle cx="{:.1}" cy="{:.1}" r="1.6"/>"#,
            frame.x(at),
            frame.main.y(floor)
        );
    }
    let _ = writeln!(w, "</g>");
}

fn latency_line(w: &mut String, frame: &Frame, report: &GameReport) {
    let y = frame.main.y(report.latency_mean_ms);
    let _ = writeln!(
        w,
        r#"<line x1="{LEFT}" y1="{y:.1}" x2="{:.1}" y2="{y:.1}" stroke="{LATENCY_COLOUR}" stroke-width="2" stroke-dasharray="6 4"/>"#,
        WIDTH - RIGHT
    );
    let _ = writeln!(
        w,
        r#"<text x="{:.1}" y="{:.1}" text-anchor="end" font-size="11" fill="{LATENCY_COLOUR}">mean latency {:.0} ms</text>"#,
        WIDTH - RIGHT - 4.0,
        y - 5.0,
        report.latency_mean_ms
    );
}

fn step_line(w: &mut String, frame: &Frame, steps: &[(f64, f64, String)], game_ms: f64) {
    let Some(first) = steps.first() else {
        return;
    };
    let mut path = format!("M{:.1} {:.1}", frame.x(first.0), frame.main.y(first.1));
    for (at, ms, _) in &steps[1..] {
        let _ = write!(path, "H{:.1}V{:.1}", frame.x(*at), frame.main.y(*ms));
    }
    let _ = write!(path, "H{:.1}", frame.x(game_ms));
    let _ = writeln!(
        w,
        r#"<path d="{path}" fill="none" stroke="{LOOK_AHEAD_COLOUR}" stroke-width="2.5" stroke-linejoin="round"/>"#
    );
    let _ = writeln!(w, r#"<g font-size="10" fill="{LOOK_AHEAD_COLOUR}">"#);
    let mut last_label_x = f64::NEG_INFINITY;
    for (at, ms, timing) in steps {
        let x = frame.x(*at);
        if x - last_label_x >= LABEL_SPACING_PX {
            let _ = writeln!(
                w,
                r#"<text x="{:.1}" y="{:.1}">{}</text>"#,
                x + 3.0,
                frame.main.y(*ms) - 5.0,
                escape(timing)
            );
            last_label_x = x;
        }
    }
    let _ = writeln!(w, "</g>");
}

fn stall_bars(w: &mut String, frame: &Frame, report: &GameReport) {
    let bottom = frame.strip.bottom();
    if report.stall_events.is_empty() {
        let _ = writeln!(
            w,
            r##"<text x="{:.1}" y="{:.1}" fill="#666" font-size="11">no stalls</text>"##,
            LEFT + 8.0,
            frame.strip.top + 16.0
        );
        return;
    }
    let mut path = String::new();
    for (at, ms) in &report.stall_events {
        let x = frame.x(*at);
        let _ = write!(
            path,
            "M{x:.1} {bottom:.1}V{:.1}",
            frame.strip.y(*ms).min(bottom - 1.0)
        );
    }
    let _ = writeln!(
        w,
        r#"<path d="{path}" stroke="{STALL_COLOUR}" stroke-width="1.5" fill="none"/>"#
    );
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ticks_are_round() {
        assert_eq!(nice_step(300.0, 10.0), 50.0);
        assert_eq!(nice_step(7.0, 10.0), 1.0);
        assert_eq!(nice_step(0.6, 3.0), 0.2);
        // 433 / 8 is 54: the step rounds up to 100, the end to 500.
        let axis = Axis::covering(433.0, 8.0);
        assert_eq!((axis.max, axis.step), (500.0, 100.0));
        // Game time ends where the game ends; the ticks stop below it.
        let time = Axis::ending_at(304.3, 10.0);
        assert_eq!(time.max, 304.3);
        let ticks: Vec<f64> = time.ticks().collect();
        assert_eq!(ticks, vec![0.0, 50.0, 100.0, 150.0, 200.0, 250.0, 300.0]);
        let exact: Vec<f64> = Axis::ending_at(20.0, 10.0).ticks().collect();
        assert_eq!(exact.last(), Some(&20.0), "a tick on the end itself");
    }

    #[test]
    fn text_is_escaped() {
        assert_eq!(
            escape(r#"<a & 'b' "c">"#),
            "&lt;a &amp; &apos;b&apos; &quot;c&quot;&gt;"
        );
        assert_eq!(escape("a\u{1}b"), "a b");
    }
}
