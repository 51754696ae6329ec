//! `rungs-sim suite`: every scenario file for every policy, a table, and the
//! targets judged against the baselines (`docs/rungs-sim.md`, "Scenarios
//! and the suite": `tracking` against every baseline, `adaptive` against
//! `ra`, `protocol0` and `fixed:2/6`).
//!
//! A missed target is a measurement and is reported as MISSED; only a game
//! that fails or machines that disagree make the suite exit non-zero.

use std::path::{Path, PathBuf};
use std::time::Instant;

use rungs_sim::{run_game, GameReport, GameSpec};

use crate::cli::{
    apply_scenario, check_spec, default_spec, parse_policy, scenario_name, SuiteOptions, UsageError,
};
use crate::figures::{disagreement, machines_agree, ratio_to_floor, stall_percent, Speed};
use crate::{emit, emit_line, json, write_svg, Status};

pub const HELP: &str = "\
rungs-sim suite: every scenario for every policy, a table and the targets

USAGE
  rungs-sim suite [--dir DIR] [--frames N] [--seed N] [--json] [--svg-dir DIR]

  --dir DIR       the scenario files, DIR/*.args [crates/rungs-sim/scenarios]
  --frames N      play N frames in every scenario (overrides the files)
  --seed N        use this seed in every scenario (overrides the files)
  --json          print a JSON array of the runs (the speed goes to stderr)
  --svg-dir DIR   also draw every run's timeline as DIR/SCENARIO-POLICY.svg

A scenario file holds game flags (see rungs-sim --help), whitespace-separated,
with # comments; not --policy: the suite runs each scenario with tracking,
adaptive, ra, protocol0, protocol0-ts, lobby, fixed:2/6 and fixed:3/9.

TARGETS, judged on every scenario, for each policy against its baselines:
  adaptive against ra, protocol0 and fixed:2/6;
  tracking against ra, protocol0, protocol0-ts, lobby, fixed:2/6 and
  fixed:3/9:
  (a) stalled frames <= max(the fewest of the baselines, 0.5 % of the frames)
  (b) mean latency strictly below each baseline on every scenario where that
      baseline stalls on less than 1 % of the frames
A missed target is printed as MISSED and does not change the exit code;
a game that fails exits 1, machines that disagree exit 3.
";

/// The policies every scenario runs with, in table order: the two judged,
/// then the baselines players use today.
pub const POLICIES: [&str; 8] = [
    "tracking",
    "adaptive",
    "ra",
    "protocol0",
    "protocol0-ts",
    "lobby",
    "fixed:2/6",
    "fixed:3/9",
];
/// The judged policies and the baselines each is compared with: `tracking`
/// against every baseline; `adaptive` against the first ones it was built
/// to beat (`fixed:3/9` is shown beside it for reference only).
pub const JUDGED: [(&str, &[&str]); 2] = [
    ("tracking", POLICIES.split_at(2).1),
    ("adaptive", &["ra", "protocol0", "fixed:2/6"]),
];
/// Target (a): stalls allowed whatever the baselines do, % of frames.
const STALL_ALLOWANCE_PERCENT: f64 = 0.5;
/// Target (b) compares latency only with baselines stalling less than this, %.
const BASELINE_STALL_LIMIT_PERCENT: f64 = 1.0;

/// A scenario file read into a spec (the policy is set per run).
pub struct Scenario {
    pub name: String,
    pub spec: GameSpec,
}

/// One scenario with one policy.
pub struct Run {
    pub scenario: String,
    pub policy: &'static str,
    pub spec: GameSpec,
    pub outcome: Result<GameReport, String>,
}

/// Every `*.args` file of `dir`, by name.
pub fn load_scenarios(
    dir: &Path,
    frames: Option<u32>,
    seed: Option<u64>,
) -> Result<Vec<Scenario>, UsageError> {
    let entries = std::fs::read_dir(dir).map_err(|e| {
        UsageError(format!(
            "cannot read the scenario directory {}: {e}",
            dir.display()
        ))
    })?;
    let mut paths: Vec<PathBuf> = entries
        .filter_map(|entry| entry.ok().map(|e| e.path()))
        .filter(|path| path.extension().is_some_and(|ext| ext == "args"))
        .collect();
    paths.sort();
    if paths.is_empty() {
        return Err(UsageError(format!(
            "no scenario files (*.args) in {}",
            dir.display()
        )));
    }
    let mut scenarios = Vec::new();
    for path in paths {
        let mut spec = default_spec();
        apply_scenario(&mut spec, &path)?;
        if let Some(frames) = frames {
            spec.frames = frames;
        }
        if let Some(seed) = seed {
            spec.seed = seed;
        }
        check_spec(&spec).map_err(|e| UsageError(format!("{}: {e}", path.display())))?;
        scenarios.push(Scenario {
            name: scenario_name(&path),
            spec,
        });
    }
    Ok(scenarios)
}

/// Run the suite as the command line asks; the status is the exit code.
pub fn run(options: &SuiteOptions) -> Status {
    let scenarios = match load_scenarios(&options.dir, options.frames, options.seed) {
        Ok(scenarios) => scenarios,
        Err(error) => {
            eprintln!("rungs-sim suite: {error}");
            return Status::Usage;
        }
    };
    if let Some(dir) = &options.svg_dir {
        if let Err(e) = std::fs::create_dir_all(dir) {
            eprintln!("rungs-sim suite: cannot create {}: {e}", dir.display());
            return Status::RunFailed;
        }
    }
    let table = !options.json;
    if table {
        emit_line(&table_header());
    }
    let started = Instant::now();
    let mut runs = Vec::new();
    let mut status = Status::Success;
    for scenario in &scenarios {
        for policy in POLICIES {
            let mut spec = scenario.spec.clone();
            spec.policy = parse_policy(policy).expect("the suite's policies parse");
            let outcome = run_game(&spec).map_err(|e| e.to_string());
            let run = Run {
                scenario: scenario.name.clone(),
                policy,
                spec,
                outcome,
            };
            if table {
                emit_line(&table_row(&run));
            }
            status = status.max(check_run(&run));
            if let (Some(dir), Ok(report)) = (&options.svg_dir, &run.outcome) {
                let file = format!("{}-{}.svg", run.scenario, policy.replace([':', '/'], "_"));
                if let Err(error) =
                    write_svg(&dir.join(file), Some(&run.scenario), &run.spec, report)
                {
                    eprintln!("rungs-sim suite: {error}");
                    status = status.max(Status::RunFailed);
                }
            }
            runs.push(run);
        }
    }
    let wall = started.elapsed();
    let reports = runs.iter().filter_map(|run| run.outcome.as_ref().ok());
    let (frames, game_ms) = reports.fold((0u64, 0.0), |(frames, ms), report| {
        (frames + u64::from(report.frames), ms + report.duration_ms)
    });
    let speed = Speed::new(frames, game_ms, wall);
    let speed_line = format!(
        "suite speed: {} runs, {frames} frames ({:.1} game-hours) in {:.1} s of wall time: {:.0} frames/s, {:.0}× real time (one thread)",
        runs.len(),
        game_ms / 3_600_000.0,
        wall.as_secs_f64(),
        speed.frames_per_second,
        speed.times_real_time
    );
    if options.json {
        emit_line(&runs_json(&runs));
        eprintln!("{speed_line}");
    } else {
        emit(&format!(
            "\n{}\n{speed_line}\n",
            verdicts(&scenarios, &runs)
        ));
    }
    status
}

/// Say what is wrong with a run, on stderr; its exit status.
fn check_run(run: &Run) -> Status {
    match &run.outcome {
        Err(error) => {
            eprintln!(
                "rungs-sim suite: {} with {} failed: {error}",
                run.scenario, run.policy
            );
            Status::RunFailed
        }
        Ok(report) if !machines_agree(report) => {
            eprintln!(
                "rungs-sim suite: {} with {}: the machines disagree: {}",
                run.scenario,
                run.policy,
                disagreement(report)
            );
            Status::Disagreement
        }
        Ok(_) => Status::Success,
    }
}

fn runs_json(runs: &[Run]) -> String {
    let objects: Vec<String> = runs
        .iter()
        .map(|run| match &run.outcome {
            Ok(report) => json::run(Some(&run.scenario), &run.spec, report),
            Err(error) => json::Object::pretty()
                .text("scenario", &run.scenario)
                .text("policy", run.policy)
                .text("error", error)
                .render(),
        })
        .collect();
    format!("[\n{}\n]", objects.join(",\n"))
}

fn table_header() -> String {
    format!(
        "{:<14} {:<10} {:>9} {:>9} {:>9} {:>7} {:>8} {:>7} {:>9}\n{}",
        "scenario",
        "policy",
        "mean ms",
        "p95 ms",
        "floor ms",
        "×floor",
        "stalled",
        "stall %",
        "stall ms",
        "-".repeat(14 + 10 + 9 + 9 + 9 + 7 + 8 + 7 + 9 + 8)
    )
}

fn table_row(run: &Run) -> String {
    match &run.outcome {
        Ok(report) => format!(
            "{:<14} {:<10} {:>9.1} {:>9.1} {:>9.1} {:>7} {:>8} {:>7.2} {:>9.0}{}",
            run.scenario,
            run.policy,
            report.latency_mean_ms,
            report.latency_p95_ms,
            report.floor_mean_ms,
            ratio_to_floor(report).map_or("n/a".to_owned(), |r| format!("{r:.2}")),
            report.stall_frames,
            stall_percent(report),
            report.stall_ms,
            if machines_agree(report) {
                ""
            } else {
                "  MACHINES DISAGREE"
            }
        ),
        Err(error) => format!("{:<14} {:<10} FAILED: {error}", run.scenario, run.policy),
    }
}

/// The baselines a target compares a policy with, by policy name.
pub type Baselines<'a> = [(&'a str, &'a GameReport)];

/// How one target came out on one scenario.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Outcome {
    Met,
    Missed,
    /// Nothing to judge: a run failed, or no baseline qualified.
    NotJudged,
}

impl Outcome {
    fn word(self) -> &'static str {
        match self {
            Outcome::Met => "MET",
            Outcome::Missed => "MISSED",
            Outcome::NotJudged => "NOT JUDGED",
        }
    }
}

/// A target's outcome with the numbers behind it.
#[derive(Debug, Clone, PartialEq)]
pub struct Judgement {
    pub outcome: Outcome,
    pub detail: String,
}

/// Target (a): the `judged` policy stalls no more than the larger of the
/// best baseline's stalled frames and 0.5 % of the frames.
pub fn judge_stalls(judged: &str, own: &GameReport, baselines: &Baselines) -> Judgement {
    let allowance = STALL_ALLOWANCE_PERCENT / 100.0 * f64::from(own.frames);
    let best = baselines
        .iter()
        .min_by_key(|(_, report)| report.stall_frames);
    let Some((best_name, best_report)) = best else {
        return Judgement {
            outcome: Outcome::NotJudged,
            detail: "no baseline ran".to_owned(),
        };
    };
    let limit = (best_report.stall_frames as f64).max(allowance);
    let met = own.stall_frames as f64 <= limit;
    Judgement {
        outcome: if met { Outcome::Met } else { Outcome::Missed },
        detail: format!(
            "{judged} {} stalled frames {} {limit:.0} = max(best baseline {best_name} {}, {STALL_ALLOWANCE_PERCENT} % of {} frames = {allowance:.0})",
            own.stall_frames,
            if met { "<=" } else { ">" },
            best_report.stall_frames,
            own.frames,
        ),
    }
}

/// Target (b): the policy's mean latency strictly below each baseline that
/// stalls on less than 1 % of the frames.
pub fn judge_latency(own: &GameReport, baselines: &Baselines) -> Judgement {
    let mut parts = Vec::new();
    let mut judged = 0;
    let mut missed = 0;
    for (name, report) in baselines {
        let stalls = stall_percent(report);
        if stalls >= BASELINE_STALL_LIMIT_PERCENT {
            parts.push(format!(
                "{name} not judged (stalls {stalls:.2} % >= {BASELINE_STALL_LIMIT_PERCENT} %)"
            ));
            continue;
        }
        judged += 1;
        let below = own.latency_mean_ms < report.latency_mean_ms;
        if !below {
            missed += 1;
        }
        parts.push(format!(
            "{:.1} {} {name} {:.1}",
            own.latency_mean_ms,
            if below { "<" } else { "NOT <" },
            report.latency_mean_ms
        ));
    }
    let outcome = match (judged, missed) {
        (0, _) => Outcome::NotJudged,
        (_, 0) => Outcome::Met,
        _ => Outcome::Missed,
    };
    Judgement {
        outcome,
        detail: format!("mean ms: {}", parts.join("; ")),
    }
}

/// The targets for every judged policy on every scenario, and a count at
/// the end of each.
fn verdicts(scenarios: &[Scenario], runs: &[Run]) -> String {
    let mut out = String::new();
    for (judged, judged_baselines) in JUDGED {
        out.push_str(&policy_verdicts(judged, judged_baselines, scenarios, runs));
    }
    out
}

fn policy_verdicts(
    judged: &str,
    judged_baselines: &[&str],
    scenarios: &[Scenario],
    runs: &[Run],
) -> String {
    let mut out = format!(
        "targets for {judged} (baselines {})\n",
        judged_baselines.join(", ")
    );
    let mut counts = [0usize; 3];
    for scenario in scenarios {
        let report_of = |policy: &str| {
            runs.iter()
                .find(|run| run.scenario == scenario.name && run.policy == policy)
                .and_then(|run| run.outcome.as_ref().ok())
        };
        out.push_str(&format!("{}\n", scenario.name));
        let Some(own) = report_of(judged) else {
            out.push_str(&format!("  not judged: the {judged} run failed\n"));
            counts[2] += 2;
            continue;
        };
        let baselines: Vec<(&str, &GameReport)> = judged_baselines
            .iter()
            .filter_map(|name| report_of(name).map(|report| (*name, report)))
            .collect();
        let missing: Vec<&str> = judged_baselines
            .iter()
            .filter(|name| report_of(name).is_none())
            .copied()
            .collect();
        if !missing.is_empty() {
            out.push_str(&format!(
                "  (failed baselines left out: {})\n",
                missing.join(", ")
            ));
        }
        for (label, judgement) in [
            ("(a) stalls ", judge_stalls(judged, own, &baselines)),
            ("(b) latency", judge_latency(own, &baselines)),
        ] {
            counts[judgement.outcome as usize] += 1;
            out.push_str(&format!(
                "  {label}  {:<10}  {}\n",
                judgement.outcome.word(),
                judgement.detail
            ));
        }
    }
    out.push_str(&format!(
        "targets for {judged}: {} met, {} missed, {} not judged\n\n",
        counts[Outcome::Met as usize],
        counts[Outcome::Missed as usize],
        counts[Outcome::NotJudged as usize]
    ));
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn report(frames: u32, stall_frames: u64, latency_mean_ms: f64) -> GameReport {
        GameReport {
            frames,
            latency_mean_ms,
            latency_p95_ms: latency_mean_ms,
            latency_max_ms: latency_mean_ms,
            floor_mean_ms: 50.0,
            commands_below_floor: 0,
            stall_frames,
            stall_ms: stall_frames as f64 * 10.0,
            desyncs: 0,
            commands_issued: 10,
            commands_executed: 10,
            packets: 0,
            bytes: 0,
            timeline: Vec::new(),
            timeline_at_ms: Vec::new(),
            stall_events: Vec::new(),
            floor_samples: Vec::new(),
            duration_ms: 1000.0,
            logs_identical: true,
            commands_in_order: true,
            links_lost: 0,
            refused_items: 0,
            refused_messages: 0,
            forged_executed: 0,
            unexpected_removals: 0,
            max_held_bytes: 0,
            commands_refused: 0,
            vanished_dropped: true,
            commands_lost: 0,
        }
    }

    #[test]
    fn stalls_are_allowed_up_to_the_best_baseline_or_half_a_percent() {
        let ra = report(10_000, 200, 300.0);
        let p0 = report(10_000, 80, 300.0);
        let quiet = report(10_000, 0, 300.0);
        let stalling_baselines = [("ra", &ra), ("protocol0", &p0)];
        let quiet_baselines = [("ra", &quiet)];
        // (baselines, adaptive's stalled frames, outcome): the best
        // baseline's 80 frames, else 0.5 % of 10,000 frames = 50.
        let cases: [(&Baselines, u64, Outcome); 4] = [
            (&stalling_baselines, 80, Outcome::Met),
            (&stalling_baselines, 81, Outcome::Missed),
            (&quiet_baselines, 50, Outcome::Met),
            (&quiet_baselines, 51, Outcome::Missed),
        ];
        for (baselines, stalls, outcome) in cases {
            let judged = judge_stalls("tracking", &report(10_000, stalls, 0.0), baselines);
            assert_eq!(judged.outcome, outcome, "{stalls}: {}", judged.detail);
        }
    }

    #[test]
    fn latency_is_compared_only_with_baselines_that_hardly_stall() {
        let smooth = report(10_000, 99, 200.0); // 0.99 % stalls: judged
        let stalling = report(10_000, 100, 100.0); // 1 %: not judged
        let both = [("ra", &smooth), ("fixed:2/6", &stalling)];
        let only_stalling = [("fixed:2/6", &stalling)];
        // (baselines, adaptive's mean latency, outcome); strictly below.
        let cases: [(&Baselines, f64, Outcome); 3] = [
            (&both, 199.9, Outcome::Met),
            (&both, 200.0, Outcome::Missed),
            (&only_stalling, 500.0, Outcome::NotJudged),
        ];
        for (baselines, latency, outcome) in cases {
            let judged = judge_latency(&report(10_000, 0, latency), baselines);
            assert_eq!(judged.outcome, outcome, "{latency}: {}", judged.detail);
        }
    }
}
