//! `rungs-drop-model`: model-check rungs' drop agreement (S4.7).
//!
//!     cargo run --release -p rungs-drop-model -- quick    # 3 and 4 seats, every variant
//!     cargo run --release -p rungs-drop-model -- full     # every variant at 3 and 4 seats, the base case at 5 (make model-check)
//!     cargo run --release -p rungs-drop-model -- --seats 5 --late --quitters 1
//!
//! Prints one row per configuration: the states explored, the properties
//! and whether each held. Exits 1 when a property fails (with the path that
//! breaks it) or when the old rule (`votes-only`) is not caught.

use std::process::ExitCode;
use std::time::Instant;

use rungs_drop_model::{DropModel, Protocol};
use stateright::{Checker, Model};

fn usage() -> ExitCode {
    eprintln!(
        "usage: rungs-drop-model quick | full | [--seats 3..5] [--turns N] [--lossy] [--late] \
         [--quitters MASK] [--votes-only] [--threads N]"
    );
    ExitCode::from(2)
}

/// The configurations of a run: every variant for 3 and 4 seats; the base
/// case for 5. At 5 seats the holdings are none or turn 0 (at 4, none, 0 or
/// 1): two values already tell cuts apart, and a third multiplies the
/// states by about ten. The variants at 5 seats hold too many states for
/// an ordinary machine (the lossy one passed 18 GB unfinished): run them one
/// at a time with the flags where the memory is.
fn table(seats: &[u8]) -> Vec<DropModel> {
    let mut out = Vec::new();
    for &n in seats {
        let base = DropModel {
            turns: if n >= 5 { 1 } else { 2 },
            ..DropModel::new(n)
        };
        out.push(base);
        if n >= 5 {
            continue;
        }
        out.push(DropModel {
            late_turns: true,
            ..base
        });
        out.push(DropModel {
            quitters: 0b1,
            ..base
        });
        out.push(DropModel {
            quitters: 0b10,
            ..base
        });
        out.push(DropModel {
            lossy: true,
            ..base
        });
        // Splitting the old rule takes three participants: one vote heard
        // by one and not the other, then its voter gone.
        if n >= 4 {
            out.push(DropModel {
                protocol: Protocol::VotesOnly,
                ..base
            });
        }
    }
    out
}

fn describe(m: &DropModel) -> String {
    let mut parts = vec![format!("{} seats, holdings none..{}", m.seats, m.turns - 1)];
    if m.late_turns {
        parts.push("late turns".into());
    }
    if m.quitters != 0 {
        parts.push(format!("quitters {:#b}", m.quitters));
    }
    if m.lossy {
        parts.push("any loss".into());
    }
    if m.protocol == Protocol::VotesOnly {
        parts.push("old rule (votes only)".into());
    }
    parts.join(", ")
}

/// Check one configuration; whether it came out as expected.
fn check(model: DropModel, threads: usize) -> bool {
    let started = Instant::now();
    let names: Vec<&'static str> = model.properties().iter().map(|p| p.name).collect();
    let checker = model.checker().threads(threads).spawn_bfs().join();
    let seconds = started.elapsed().as_secs_f64();
    let discoveries = checker.discoveries();
    let expect_failure = model.protocol == Protocol::VotesOnly;
    let verdicts: Vec<String> = names
        .iter()
        .map(|name| match discoveries.contains_key(name) {
            true => format!("{name}: BROKEN"),
            false => format!("{name}: holds"),
        })
        .collect();
    println!(
        "| {} | {} | {} | {} | {:.1} s |",
        describe(&model),
        checker.unique_state_count(),
        checker.max_depth(),
        verdicts.join(", "),
        seconds
    );
    if expect_failure {
        let caught = discoveries.contains_key("agreement");
        if !caught {
            eprintln!("the old rule was not caught: the model proves nothing");
        }
        return caught;
    }
    for (name, path) in &discoveries {
        eprintln!("{name} is broken by:\n{path:#?}");
    }
    discoveries.is_empty()
}

fn main() -> ExitCode {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let mut threads = std::thread::available_parallelism().map_or(1, |n| n.get());
    let models = match args.first().map(String::as_str) {
        Some("quick") => table(&[3, 4]),
        Some("full") => table(&[3, 4, 5]),
        _ => {
            let mut model = DropModel::new(3);
            let mut it = args.iter();
            while let Some(arg) = it.next() {
                let mut value = || it.next().and_then(|v| v.parse::<u32>().ok());
                match arg.as_str() {
                    "--seats" => match value() {
                        Some(n @ 3..=5) => model.seats = n as u8,
                        _ => return usage(),
                    },
                    "--turns" => match value() {
                        Some(n @ 1..=4) => model.turns = n,
                        _ => return usage(),
                    },
                    "--quitters" => match value() {
                        Some(mask) => model.quitters = mask,
                        None => return usage(),
                    },
                    "--threads" => match value() {
                        Some(n @ 1..=256) => threads = n as usize,
                        _ => return usage(),
                    },
                    "--lossy" => model.lossy = true,
                    "--late" => model.late_turns = true,
                    "--votes-only" => model.protocol = Protocol::VotesOnly,
                    _ => return usage(),
                }
            }
            vec![model]
        }
    };
    println!("| configuration | states | depth | properties | time |");
    println!("|---|---:|---:|---|---:|");
    let mut ok = true;
    for model in models {
        ok &= check(model, threads);
    }
    if ok {
        ExitCode::SUCCESS
    } else {
        ExitCode::FAILURE
    }
}
