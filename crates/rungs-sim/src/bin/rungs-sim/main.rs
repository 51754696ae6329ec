//! `rungs-sim`: whole lockstep games on a simulated network, measured.
//!
//! Runs [`rungs_sim::run_game`] (N machines, each with the real session,
//! timing and transport code, on a seeded virtual network) and reports
//! command latency against the physical floor, stalls, traffic and the
//! timing timeline — as a summary, as JSON, as an SVG picture, or for a
//! whole suite of scenarios and policies. See `docs/rungs-sim.md`.
//!
//! Exit codes: 0 fine; 1 a game failed to run (or a file could not be
//! written); 2 bad input; 3 the machines disagreed (the results are printed
//! all the same).

mod cli;
mod figures;
mod json;
mod soak;
mod suite;
mod summary;
mod svg;
mod sweep;

use std::path::Path;
use std::process::ExitCode;
use std::time::Instant;

use rungs_sim::{run_game, run_game_parallel, GameReport, GameSpec};

use cli::{Command, RunOptions};
use figures::{disagreement, machines_agree, Speed};

/// How a run ended, as the process exit code.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub enum Status {
    Success = 0,
    RunFailed = 1,
    Usage = 2,
    Disagreement = 3,
}

impl From<Status> for ExitCode {
    fn from(status: Status) -> ExitCode {
        ExitCode::from(status as u8)
    }
}

const HELP: &str = "\
rungs-sim: whole lockstep games on a simulated network, measured

USAGE
  rungs-sim [FLAGS]                 run one game and print a summary
  rungs-sim [FLAGS] --json          ... print one JSON object instead
  rungs-sim suite [SUITE FLAGS]     every scenario for every policy (suite --help)
  rungs-sim sweep [SWEEP FLAGS]     every policy on random conditions (sweep --help)
  rungs-sim soak [SOAK FLAGS]       many seeded games under every fault (soak --help)

GAME FLAGS (default in brackets)
  --players N             players, 1 to 16 [4]
  --frames N              frames to play [9000 = 5 min at 30 fps]
  --fps N                 the rate the game speed allows, 1 to 255 [30]
  --rtt MS[,MS...]        base round trip per player in ms; the path between
                          players i and j has a round trip of (rtt_i + rtt_j)/2;
                          the last value applies to the remaining players [60]
  --jitter MS             each datagram's one-way delay gains a uniform 0 to MS ms;
                          so --rtt 50 --jitter 10 gives round trips of 60 +/- 10 [0]
  --loss P                loss probability per datagram, 0 to 1 or a percentage:
                          0.03 or 3% [0]
  --spike MS@S+D[/SEAT]   every path's round trip is MS from second S for D
                          seconds (decimals allowed); /SEAT only that seat's
                          paths (seats count from 0). Repeatable [none]
  --proc-ms MS[,MS...]    a frame's processing time per player, ms, decimals
                          allowed; the slowest caps the frame rate [5]
  --commands-per-minute N commands each player issues a minute, on average [120]
  --depart SEAT@FRAME:quit|crash
                          a player leaves on a frame: quits (a removal command)
                          or crashes (the others drop it after losing the link)
  --diverge SEAT@FRAME    that seat's simulated state goes wrong on that frame
                          (an engine bug): the checksums must report a desync
                          and rungs-sim exits 3
  --dup P                 chance a datagram arrives twice, like --loss [0]
  --reorder P             chance a datagram is held back up to 50 ms, so later
                          ones overtake it, like --loss [0]
  --outage S+D[/SEAT]     nothing gets through from second S for D seconds;
                          /SEAT only that seat's paths. Repeatable [none]

FAULTS (repeatable; FRAME is the frame after which it happens)
  --crash SEAT@FRAME[:mid]  the machine vanishes; with :mid, while sending that
                          frame's turn (peers get different parts of it); the
                          others drop it once its link is lost
  --crash SEAT@Ts         the machine vanishes T seconds into the game (e.g.
                          3@6.8s), whatever it is doing: also while a frame
                          waits, in the middle of another player's drop
  --quit SEAT@FRAME       the player quits (its removal is a command)
  --quit SEAT@Ts          the player quits T seconds into the game
  --liveness MS           a player unheard for MS ms is dropped [rungs'
                          default, clamp(8 x round trip + 250 ms, 2 s, 30 s)]
  --burst SEAT@FRAME:NxB  the player issues N commands of B bytes at once;
                          those the session refuses (backpressure) are counted
  --restart SEAT@FRAME    the machine restarts (new connection epoch); the
                          others see the restart and drop it
  --move SEAT@FRAME       the machine's address changes (NAT rebinding)
  --attack SEAT@FRAME:A   the machine is a modified client and tries attack A:
                          remove (another player), relay (a forged turn),
                          timing (TIMING from a non-master), flood (endless
                          turn parts), future (far-future turns), replay

  --seed N                the seed of everything random: network, clocks,
                          commands; the same seed gives the same game [1]
  --scenario NAME|FILE    read game flags from a scenario file (crates/
                          rungs-sim/scenarios/NAME.args); later flags override

POLICY AND OUTPUT
  --policy P              adaptive   rungs' ladder (S4) [default]
                          ra         Red Alert's own engine (a LAN game): 3/6 from
                                     the lobby, then the master's TIMING every 128
                                     frames from its own connections' response
                                     time; its wait, resends and pacing
                          protocol0  CnCNet's RA2/YR spawner on the original
                                     engine: 2/12, then levels 1/4 ... 9/36 by
                                     the players' response times, rising only
                          protocol0-ts  the same with Vinifera's newer Tiberian
                                     Sun table (1/4 ... 9/27)
                          lobby      a fixed timing a careful host sets from
                                     the lobby's pings (docs/baselines.md)
                          tracking   send period 1, the look-ahead the reported
                                     round-trip distribution needs, a margin
                                     earned by stalls it does not explain;
                                     reports every 16 frames (docs/tracking.md)
                          oracle     the best fixed timing in hindsight: played
                                     over the candidates (src/sim/oracle.rs)
                          fixed:SP/LA  one timing for the whole game, e.g.
                                     fixed:2/6 (must satisfy S1: LA a multiple
                                     of SP, SP 1 to 10, SP <= LA <= 250)
  --json                  print one JSON object (deterministic: the same seed and
                          flags give the same bytes) instead of the summary
  --topology p2p|relay    play peer-to-peer, or through a relay (S10): every
                          command goes to the relay, which gives it its frame
                          (one frame per relay tick); the relay is the master
                          and runs --policy on the clients' reports (bundle
                          interval = send period, jitter buffer = look-ahead);
                          restarts and attacks are not modelled there [p2p]
  --threads 1|2           play a peer-to-peer game on two threads where it can
                          (the same report, byte for byte; faults, LANs and the
                          last frames are played in order) or on one [2 when
                          the machine has two cores]
  --relay-ms MS[,MS...]   with --topology relay: one-way delay from each player
                          to the relay, ms (the last value applies to the
                          remaining players) [rtt/4 per player: a relay in the
                          middle, as far through it as the direct path]
  --svg FILE              also draw the timeline: look-ahead in ms, the physical
                          floor, the mean latency and the stalls over game time
  --help, -h              this text

MEASURES (defined in src/sim/game/mod.rs)
  latency   a command's issue to its execution on the last machine
  floor     per command, the larger of the earliest it can reach every
            machine that ran it and the wait for the issuer's next frame
  stalls    frames that were due while a peer's turn had not arrived, on the
            worst machine, and the total time they waited

EXIT CODES
  0 fine; 1 a game failed (or a file could not be written); 2 bad input;
  3 the machines disagreed: executed logs differ, a command was lost, doubled
  or out of order, or a desync was reported (results are printed anyway)
";

fn main() -> ExitCode {
    let mut args = Vec::new();
    for arg in std::env::args_os().skip(1) {
        match arg.into_string() {
            Ok(arg) => args.push(arg),
            Err(arg) => {
                eprintln!("rungs-sim: argument {arg:?} is not valid UTF-8");
                return Status::Usage.into();
            }
        }
    }
    let command = match cli::parse(&args) {
        Ok(command) => command,
        Err(error) => {
            eprintln!("rungs-sim: {error}");
            eprintln!("Try 'rungs-sim --help'.");
            return Status::Usage.into();
        }
    };
    let status = match command {
        Command::Help => {
            emit(HELP);
            Status::Success
        }
        Command::SuiteHelp => {
            emit(suite::HELP);
            Status::Success
        }
        Command::SoakHelp => {
            emit(soak::HELP);
            Status::Success
        }
        Command::Soak(options) => soak::run(&options),
        Command::Run(options) => run_one(&options),
        Command::Suite(options) => suite::run(&options),
        Command::SweepHelp => {
            emit(sweep::HELP);
            Status::Success
        }
        Command::Sweep(options) => sweep::run(&options),
    };
    status.into()
}

/// Write to stdout. A closed pipe (`rungs-sim ... | head`) is the reader's
/// choice, not a failure: the text is dropped and the run goes on, so that
/// the exit code still reports the games.
pub fn emit(text: &str) {
    use std::io::Write;
    let mut stdout = std::io::stdout().lock();
    let _ = stdout
        .write_all(text.as_bytes())
        .and_then(|()| stdout.flush());
}

/// [`emit`] a line.
pub fn emit_line(text: &str) {
    emit(&format!("{text}\n"));
}

/// The picture's title: scenario (or "custom game") and policy.
pub fn svg_title(scenario: Option<&str>, spec: &GameSpec) -> String {
    format!(
        "rungs-sim: {} with {}",
        scenario.unwrap_or("custom game"),
        cli::policy_name(spec.policy)
    )
}

/// Write the timeline picture of a run to `path`.
pub fn write_svg(
    path: &Path,
    scenario: Option<&str>,
    spec: &GameSpec,
    report: &GameReport,
) -> Result<(), String> {
    let picture = svg::render(&svg_title(scenario, spec), spec, report);
    std::fs::write(path, picture).map_err(|e| format!("cannot write {}: {e}", path.display()))
}

fn run_one(options: &RunOptions) -> Status {
    let scenario = options.scenario.as_deref();
    let started = Instant::now();
    let mut options = options.clone();
    let mut per_seat = Vec::new();
    let played = if let Some(placement) = &options.relay {
        if !options.json {
            emit_line(
                "topology   relay (src/sim/relay_game.rs: the relay runs the policy per seat)",
            );
        }
        rungs_sim::relay_game::play(&options.spec, placement, &[]).map(|(report, check)| {
            per_seat = check.seats;
            report
        })
    } else if options.oracle {
        rungs_sim::find_oracle(&options.spec).and_then(|found| {
            let found = found.ok_or(rungs_core::Error::State(
                "no fixed timing keeps stalls at or below 0.5 % (no oracle)",
            ))?;
            eprintln!(
                "rungs-sim: oracle fixed:{} found in {} games",
                found.timing, found.games_played
            );
            options.spec.policy = rungs_core::timing::PolicyKind::Fixed(found.timing);
            Ok(found.report)
        })
    } else if options.threads > 1 {
        run_game_parallel(&options.spec)
    } else {
        run_game(&options.spec)
    };
    let options = &options;
    let report = match played {
        Ok(report) => report,
        Err(error) => {
            eprintln!("rungs-sim: the game failed: {error}");
            return Status::RunFailed;
        }
    };
    let speed = Speed::new(
        u64::from(report.frames),
        report.duration_ms,
        started.elapsed(),
    );
    if options.json {
        emit_line(&json::run(scenario, &options.spec, &report));
    } else {
        emit(&summary::render(scenario, &options.spec, &report, &speed));
        // Behind a relay each machine has its own jitter buffer: its own figures.
        for seat in &per_seat {
            emit_line(&format!(
                "  seat {:<2}    latency {:.1} / {:.1} ms (mean / p95, own commands), stalled {} frames ({:.0} ms), look-ahead {} (widest {})",
                seat.seat,
                seat.latency_mean_ms,
                seat.latency_p95_ms,
                seat.stall_frames,
                seat.stall_ms,
                seat.look_ahead,
                seat.widest_look_ahead
            ));
        }
    }
    let mut status = Status::Success;
    if let Some(path) = &options.svg {
        match write_svg(path, scenario, &options.spec, &report) {
            Ok(()) if !options.json => emit_line(&format!("  svg        {}", path.display())),
            Ok(()) => {}
            Err(error) => {
                eprintln!("rungs-sim: {error}");
                status = Status::RunFailed;
            }
        }
    }
    if !machines_agree(&report) {
        eprintln!(
            "rungs-sim: the machines disagree: {}",
            disagreement(&report)
        );
        status = Status::Disagreement;
    }
    status
}
