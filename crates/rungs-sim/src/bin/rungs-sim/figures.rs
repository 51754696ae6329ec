//! Figures derived from a [`GameReport`], shared by the summary, the JSON,
//! the SVG and the suite so that they all say the same thing.

use rungs_sim::{Departure, GameReport, GameSpec};

/// Mean command latency over the mean physical floor; `None` when no command
/// executed (there is no floor to compare with).
pub fn ratio_to_floor(report: &GameReport) -> Option<f64> {
    (report.floor_mean_ms > 0.0).then(|| report.latency_mean_ms / report.floor_mean_ms)
}

/// Stalled frames as a percentage of the game's frames.
pub fn stall_percent(report: &GameReport) -> f64 {
    report.stall_frames as f64 * 100.0 / f64::from(report.frames.max(1))
}

/// The tool's own check: every machine executed the same commands
/// on the same frames, each once and in issue order, and no checksum differed.
pub fn machines_agree(report: &GameReport) -> bool {
    report.logs_identical && report.commands_in_order && report.desyncs == 0
}

/// What disagreed, in words, for the error message.
pub fn disagreement(report: &GameReport) -> String {
    let mut problems = Vec::new();
    if !report.logs_identical {
        problems.push("executed command logs differ between machines".to_owned());
    }
    if !report.commands_in_order {
        problems.push("a command was lost, executed twice or out of issue order".to_owned());
    }
    if report.desyncs > 0 {
        problems.push(format!("{} desync(s) reported", report.desyncs));
    }
    problems.join("; ")
}

/// Simulated game time per wall-clock time, and frames per wall second.
pub struct Speed {
    pub frames_per_second: f64,
    pub times_real_time: f64,
}

impl Speed {
    pub fn new(frames: u64, game_ms: f64, wall: std::time::Duration) -> Speed {
        let wall_s = wall.as_secs_f64().max(1e-9);
        Speed {
            frames_per_second: frames as f64 / wall_s,
            times_real_time: game_ms / 1000.0 / wall_s,
        }
    }
}

/// `0.030000` for 30,000 ppm: exact, no float rounding.
pub fn loss_probability(loss_ppm: u32) -> String {
    format!("{}.{:06}", loss_ppm / 1_000_000, loss_ppm % 1_000_000)
}

/// `4.500` for 4,500 µs: exact.
pub fn micros_as_ms(us: u32) -> String {
    format!("{}.{:03}", us / 1000, us % 1000)
}

/// `120.000` for 120,000 ms: exact.
pub fn millis_as_s(ms: u64) -> String {
    format!("{}.{:03}", ms / 1000, ms % 1000)
}

pub fn departure_name(departure: Departure) -> &'static str {
    match departure {
        Departure::Quit => "quit",
        Departure::Crash => "crash",
    }
}

/// `quits` or `crashes`, for sentences.
pub fn departure_verb(departure: Departure) -> &'static str {
    match departure {
        Departure::Quit => "quits",
        Departure::Crash => "crashes",
    }
}

/// `1 player`, `4 players`.
pub fn players_text(players: u8) -> String {
    match players {
        1 => "1 player".to_owned(),
        n => format!("{n} players"),
    }
}

/// The network and machines in one line, as the flags say them.
pub fn describe_conditions(spec: &GameSpec) -> String {
    let list = |values: Vec<String>| values.join(",");
    let jitter = if spec.jitter_ms == 0 {
        "no jitter".to_owned()
    } else {
        format!("jitter 0..{} ms a way", spec.jitter_ms)
    };
    let loss = if spec.loss_ppm == 0 {
        "no loss".to_owned()
    } else {
        let percent = format!("{}.{:04}", spec.loss_ppm / 10_000, spec.loss_ppm % 10_000);
        format!("loss {} %", trim_decimals(&percent))
    };
    let proc_ms: Vec<String> = spec
        .proc_us
        .iter()
        .map(|us| trim_decimals(&micros_as_ms(*us)))
        .collect();
    let mut text = format!(
        "rtt {} ms, {jitter}, {loss}, proc {} ms/frame",
        list(spec.rtt_ms.iter().map(u32::to_string).collect()),
        list(proc_ms),
    );
    for spike in &spec.spikes {
        text.push_str(&format!(
            ", spike {} ms at {} s for {} s",
            spike.rtt_ms,
            trim_decimals(&millis_as_s(spike.start_ms)),
            trim_decimals(&millis_as_s(spike.duration_ms)),
        ));
        if let Some(seat) = spike.player {
            text.push_str(&format!(" (seat {seat})"));
        }
    }
    if let Some((seat, frame, how)) = spec.departure {
        let verb = departure_verb(how);
        text.push_str(&format!(", seat {seat} {verb} at frame {frame}"));
    }
    text
}

/// `4.500` → `4.5`, `5.000` → `5`.
fn trim_decimals(text: &str) -> String {
    if text.contains('.') {
        text.trim_end_matches('0').trim_end_matches('.').to_owned()
    } else {
        text.to_owned()
    }
}
