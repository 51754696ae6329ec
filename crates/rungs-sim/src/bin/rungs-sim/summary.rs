//! The readable summary of one run (without `--json`).

use std::fmt::Write;

use rungs_sim::{GameReport, GameSpec};

use crate::cli::policy_name;
use crate::figures::{describe_conditions, ratio_to_floor, stall_percent, Speed};

/// Timelines longer than this show their first and last entries only.
const TIMELINE_LINES: usize = 16;

fn yes_no(value: bool) -> &'static str {
    if value {
        "yes"
    } else {
        "NO"
    }
}

/// The summary, ending with the simulation speed (the one wall-clock figure).
pub fn render(
    scenario: Option<&str>,
    spec: &GameSpec,
    report: &GameReport,
    speed: &Speed,
) -> String {
    let mut out = String::new();
    let w = &mut out;
    let _ = writeln!(
        w,
        "rungs-sim: {}policy {}, {}, {} frames at {} fps, seed {}",
        scenario.map_or(String::new(), |s| format!("scenario {s}, ")),
        policy_name(spec.policy),
        crate::figures::players_text(spec.players),
        spec.frames,
        spec.fps,
        spec.seed
    );
    let _ = writeln!(w, "  network    {}", describe_conditions(spec));
    let _ = writeln!(
        w,
        "  latency    mean {:.1} ms, p95 {:.1} ms, max {:.1} ms (issue to execution on every machine)",
        report.latency_mean_ms, report.latency_p95_ms, report.latency_max_ms
    );
    let ratio = ratio_to_floor(report).map_or("n/a".to_owned(), |r| format!("{r:.2}"));
    let _ = writeln!(
        w,
        "  floor      mean {:.1} ms (earliest arrival everywhere, a frame after its turn); latency / floor {ratio}",
        report.floor_mean_ms
    );
    let _ = writeln!(
        w,
        "  stalls     {} frames ({:.2} % of {}), {:.1} ms in all (worst machine)",
        report.stall_frames,
        stall_percent(report),
        report.frames,
        report.stall_ms
    );
    let _ = writeln!(
        w,
        "  commands   {} issued, {} executed",
        report.commands_issued, report.commands_executed
    );
    let _ = writeln!(
        w,
        "  traffic    {} packets, {} bytes ({:.1} KiB/s for the whole game; {:.0} packets per machine per 1000 frames)",
        report.packets,
        report.bytes,
        report.bytes as f64 / 1024.0 / (report.duration_ms / 1000.0).max(1e-3),
        report.packets_per_machine_per_1000_frames(spec.players)
    );
    let _ = writeln!(
        w,
        "  checks     logs identical {}, commands in order {}, desyncs {}, links lost {}",
        yes_no(report.logs_identical),
        yes_no(report.commands_in_order),
        report.desyncs,
        report.links_lost
    );
    let _ = writeln!(w, "  game time  {:.1} s", report.duration_ms / 1000.0);
    timeline(w, report);
    let _ = writeln!(
        w,
        "  speed      {:.0} frames/s, {:.0}× real time (wall clock; not in the JSON)",
        speed.frames_per_second, speed.times_real_time
    );
    out
}

fn timeline(w: &mut String, report: &GameReport) {
    let entries: Vec<String> = report
        .timeline
        .iter()
        .zip(&report.timeline_at_ms)
        .map(|((frame, sp, la, fps), at)| {
            format!(
                "frame {frame:>6} ({:>7.1} s)  {sp}/{la} at {fps} fps = {:.0} ms look-ahead",
                at / 1000.0,
                f64::from(*la) * 1000.0 / f64::from((*fps).max(1))
            )
        })
        .collect();
    let shown: Vec<&str> = if entries.len() <= TIMELINE_LINES {
        entries.iter().map(String::as_str).collect()
    } else {
        let head = TIMELINE_LINES / 2;
        let tail = TIMELINE_LINES - head - 1;
        let mut lines: Vec<&str> = entries[..head].iter().map(String::as_str).collect();
        lines.push("...");
        lines.extend(entries[entries.len() - tail..].iter().map(String::as_str));
        lines
    };
    let _ = writeln!(w, "  timeline   {} change(s)", entries.len());
    for line in shown {
        let _ = writeln!(w, "             {line}");
    }
}
