//! `rungs-sim sweep`: seeded random conditions, every policy on each,
//! against the oracle and the floor ([`rungs_sim::sweep`]).

use std::sync::atomic::{AtomicU32, Ordering};
use std::sync::Mutex;
use std::time::Instant;

use rungs_core::timing::PolicyKind;
use rungs_sim::sweep::{run_condition, stall_percent, sweep_policies, SweepResult};

use crate::cli::{policy_name, SweepOptions};
use crate::json::{number, Object};
use crate::{emit, emit_line, Status};

pub const HELP: &str = "\
rungs-sim sweep: every policy on seeded random network conditions

USAGE
  rungs-sim sweep [--count N] [--frames N] [--seed S] [--jobs J] [--json]
                  [--conditions] [--only I]

  --count N     conditions [200]
  --frames N    frames per game [1800]
  --seed S      the sweep's seed; condition i is drawn from (S, i) [1]
  --jobs J      conditions run at once [the number of cores]
  --json        one JSON object instead of the table
  --conditions  also one line per condition (a `conditions` array in the
                JSON): the rungs-sim flags that replay it, the oracle, each
                policy's mean latency and stalls, and whether - or why
                not - the first policy met the target
  --only I      play condition I alone (as it is drawn in the full sweep)

Each condition draws 2-8 players, a round trip per player of 2-400 ms,
jitter 0-80 ms, loss 0-8 %, in half of them a 0.5-10 s spike, 30 or 60 fps,
and in a quarter a slow CPU (20-50 ms a frame). Every policy plays it, and
the oracle - the fixed timing with the lowest mean latency among those
stalling on at most 0.5 % of the frames - is searched for (src/sim/oracle.rs).
Per policy: latency / oracle and latency / floor (median, p90, worst), stall
percent (median, p90, worst), how often it wins (the lowest latency among
the policies stalling <= 0.5 %) and how often it meets the target (latency
strictly below every baseline - ra, protocol0, protocol0-ts, lobby,
fixed:2/6, fixed:3/9 - stalling < 1 %, stalls <= max(the fewest among the
baselines, 0.5 %)).

EXIT CODES
  0 done; 1 a game failed
";

/// Median, 90th percentile and worst of `values` (sorted here).
fn spread(values: &mut [f64]) -> (f64, f64, f64) {
    if values.is_empty() {
        return (f64::NAN, f64::NAN, f64::NAN);
    }
    values.sort_by(|a, b| a.total_cmp(b));
    let at = |p: usize| values[((values.len() - 1) * p) / 100];
    (at(50), at(90), values[values.len() - 1])
}

struct Row {
    policy: PolicyKind,
    to_oracle: (f64, f64, f64),
    to_floor: (f64, f64, f64),
    stalls: (f64, f64, f64),
    wins: usize,
    targets_met: usize,
    below_oracle: usize,
}

fn rows(results: &[SweepResult]) -> Vec<Row> {
    sweep_policies()
        .into_iter()
        .enumerate()
        .map(|(at, policy)| {
            let mut to_oracle = Vec::new();
            let mut to_floor = Vec::new();
            let mut stalls = Vec::new();
            let mut below_oracle = 0;
            for result in results {
                let report = &result.reports[at].1;
                if let Some(oracle) = &result.oracle {
                    let ratio = report.latency_mean_ms / oracle.report.latency_mean_ms;
                    to_oracle.push(ratio);
                    below_oracle += usize::from(ratio < 1.0);
                }
                if report.floor_mean_ms > 0.0 {
                    to_floor.push(report.latency_mean_ms / report.floor_mean_ms);
                }
                stalls.push(stall_percent(report));
            }
            Row {
                policy,
                to_oracle: spread(&mut to_oracle),
                to_floor: spread(&mut to_floor),
                stalls: spread(&mut stalls),
                wins: results
                    .iter()
                    .filter(|r| r.winners().contains(&policy))
                    .count(),
                targets_met: results.iter().filter(|r| r.meets_target(policy)).count(),
                below_oracle,
            }
        })
        .collect()
}

pub fn run(options: &SweepOptions) -> Status {
    let started = Instant::now();
    let (first, end) = match options.only {
        Some(index) => (index, index.saturating_add(1)),
        None => (0, options.count),
    };
    let next = AtomicU32::new(first);
    let results: Mutex<Vec<(u32, Result<SweepResult, String>)>> = Mutex::new(Vec::new());
    std::thread::scope(|scope| {
        for _ in 0..options.jobs.min((end - first).max(1) as usize) {
            scope.spawn(|| loop {
                let index = next.fetch_add(1, Ordering::Relaxed);
                if index >= end {
                    break;
                }
                let result =
                    run_condition(options.seed, index, options.frames).map_err(|e| e.to_string());
                let mut all = results.lock().unwrap_or_else(|e| e.into_inner());
                all.push((index, result));
                if all.len() % 20 == 0 {
                    eprintln!(
                        "rungs-sim sweep: {}/{} conditions, {:.0} s",
                        all.len(),
                        end - first,
                        started.elapsed().as_secs_f64()
                    );
                }
            });
        }
    });
    let mut all = results.into_inner().unwrap_or_else(|e| e.into_inner());
    all.sort_by_key(|(index, _)| *index);
    let mut done = Vec::new();
    let mut indices = Vec::new();
    for (index, result) in all {
        match result {
            Ok(result) => {
                done.push(result);
                indices.push(index);
            }
            Err(error) => {
                eprintln!("rungs-sim sweep: condition {index} failed: {error}");
                return Status::RunFailed;
            }
        }
    }
    let without_oracle = done.iter().filter(|r| r.oracle.is_none()).count();
    let rows = rows(&done);
    if options.json {
        let triple = |t: (f64, f64, f64)| {
            Object::inline()
                .raw("median", number(t.0, 3))
                .raw("p90", number(t.1, 3))
                .raw("worst", number(t.2, 3))
                .render()
        };
        let policies: Vec<String> = rows
            .iter()
            .map(|row| {
                Object::inline()
                    .text("policy", &policy_name(row.policy))
                    .raw("latency_over_oracle", triple(row.to_oracle))
                    .raw("latency_over_floor", triple(row.to_floor))
                    .raw("stall_percent", triple(row.stalls))
                    .uint("wins", row.wins as u64)
                    .uint("targets_met", row.targets_met as u64)
                    .uint("below_oracle", row.below_oracle as u64)
                    .render()
            })
            .collect();
        let mut out = Object::pretty()
            .uint("count", done.len() as u64)
            .uint("frames", options.frames)
            .uint("seed", options.seed)
            .uint("without_oracle", without_oracle as u64)
            .raw("policies", format!("[{}]", policies.join(",")));
        if options.conditions {
            let conditions: Vec<String> = indices
                .iter()
                .zip(&done)
                .map(|(index, result)| condition_json(*index, result))
                .collect();
            out = out.raw("conditions", format!("[{}]", conditions.join(",")));
        }
        emit_line(&out.render());
    } else {
        emit_line(&format!(
            "rungs-sim sweep: {} conditions of {} frames, seed {} ({} without an oracle)",
            done.len(),
            options.frames,
            options.seed,
            without_oracle
        ));
        emit_line(&format!(
            "{:<10} {:>22} {:>22} {:>22} {:>6} {:>8} {:>8}",
            "policy",
            "÷oracle med/p90/max",
            "÷floor med/p90/max",
            "stall% med/p90/max",
            "wins",
            "target",
            "<oracle"
        ));
        for row in &rows {
            let t = |t: (f64, f64, f64)| format!("{:.2}/{:.2}/{:.2}", t.0, t.1, t.2);
            emit(&format!(
                "{:<10} {:>22} {:>22} {:>22} {:>6} {:>8} {:>8}\n",
                policy_name(row.policy),
                t(row.to_oracle),
                t(row.to_floor),
                t(row.stalls),
                row.wins,
                row.targets_met,
                row.below_oracle
            ));
        }
        if options.conditions {
            for (index, result) in indices.iter().zip(&done) {
                emit_line(&condition_line(*index, result));
            }
        }
        emit_line(&format!(
            "  {:.1} s wall clock",
            started.elapsed().as_secs_f64()
        ));
    }
    Status::Success
}

/// A condition as `rungs-sim` flags: the command that replays one of its
/// games (add `--policy P`).
fn replay_flags(result: &SweepResult) -> String {
    let spec = &result.spec;
    let list = |values: Vec<String>| values.join(",");
    let mut flags = format!(
        "--players {} --frames {} --fps {} --rtt {} --jitter {} --loss {}% --commands-per-minute {}",
        spec.players,
        spec.frames,
        spec.fps,
        list(spec.rtt_ms.iter().map(u32::to_string).collect()),
        spec.jitter_ms,
        f64::from(spec.loss_ppm) / 10_000.0,
        spec.commands_per_minute
    );
    for spike in &spec.spikes {
        flags += &format!(
            " --spike {}@{}+{}",
            spike.rtt_ms,
            spike.start_ms as f64 / 1000.0,
            spike.duration_ms as f64 / 1000.0
        );
    }
    flags += &format!(
        " --proc-ms {} --seed {}",
        list(
            spec.proc_us
                .iter()
                .map(|us| (f64::from(*us) / 1000.0).to_string())
                .collect()
        ),
        spec.seed
    );
    flags
}

/// The first policy's verdict on a condition: `met`, or what missed.
fn verdict(result: &SweepResult) -> String {
    let Some((policy, _)) = result.reports.first() else {
        return "no game".to_owned();
    };
    match result.target_miss(*policy) {
        None => "met".to_owned(),
        Some(miss) => {
            let mut why = Vec::new();
            if let Some(allowance) = miss.stalls_over {
                why.push(format!("stalls over {allowance:.2} %"));
            }
            if !miss.not_faster_than.is_empty() {
                let names: Vec<String> = miss
                    .not_faster_than
                    .iter()
                    .map(|p| policy_name(*p))
                    .collect();
                why.push(format!("not faster than {}", names.join(", ")));
            }
            format!("missed: {}", why.join("; "))
        }
    }
}

/// One condition as a line of the table output.
fn condition_line(index: u32, result: &SweepResult) -> String {
    let oracle = result.oracle.as_ref().map_or("none".to_owned(), |o| {
        format!("{} {:.1} ms", o.timing, o.report.latency_mean_ms)
    });
    let policies: Vec<String> = result
        .reports
        .iter()
        .map(|(policy, report)| {
            format!(
                "{} {:.1} ms {:.2} %",
                policy_name(*policy),
                report.latency_mean_ms,
                stall_percent(report)
            )
        })
        .collect();
    format!(
        "#{index}: rungs-sim {}; oracle {oracle} | {} | {}",
        replay_flags(result),
        policies.join(" | "),
        verdict(result)
    )
}

/// One condition as an object of the JSON's `conditions`.
fn condition_json(index: u32, result: &SweepResult) -> String {
    let policies: Vec<String> = result
        .reports
        .iter()
        .map(|(policy, report)| {
            Object::inline()
                .text("policy", &policy_name(*policy))
                .raw("latency_mean_ms", number(report.latency_mean_ms, 1))
                .raw("stall_percent", number(stall_percent(report), 3))
                .render()
        })
        .collect();
    let mut object = Object::inline()
        .uint("index", u64::from(index))
        .text("flags", &replay_flags(result));
    object = match &result.oracle {
        Some(oracle) => object.text("oracle", &oracle.timing.to_string()).raw(
            "oracle_latency_mean_ms",
            number(oracle.report.latency_mean_ms, 1),
        ),
        None => object.raw("oracle", "null".to_owned()),
    };
    object
        .raw("policies", format!("[{}]", policies.join(",")))
        .text("verdict", &verdict(result))
        .render()
}
