//! Command-line parsing: flags to a [`GameSpec`] and the tool's options.
//!
//! Numbers with decimals (`--proc-ms 4.5`, `--loss 0.03`, spike seconds) are
//! parsed as exact decimals into the spec's integer units (µs, ppm, ms), never
//! through floating point, so a flag means exactly one spec on every machine.

use std::fmt;
use std::path::{Path, PathBuf};

use rungs_core::timing::PolicyKind;
use rungs_sim::{
    Attack, Departure, Fault, GameSpec, OutageSpec, RelayPlacement, Spike, TimedFault, TimedKind,
};

/// Seats a game can have (the record's capacity).
pub const MAX_PLAYERS: u8 = 16;
/// The defaults `--help` documents.
pub const DEFAULT_PLAYERS: u8 = 4;
pub const DEFAULT_FRAMES: u32 = 9000;
pub const DEFAULT_FPS: u8 = 30;
pub const DEFAULT_RTT_MS: u32 = 60;
pub const DEFAULT_PROC_US: u32 = 5000;
pub const DEFAULT_SEED: u64 = 1;
pub const DEFAULT_COMMANDS_PER_MINUTE: u32 = 120;
/// Longest round trip a flag may ask for: a minute is already absurd.
const MAX_RTT_MS: u32 = 60_000;
/// Longest processing time per frame a flag may ask for.
const MAX_PROC_US: u32 = 10_000_000;

/// Bad input: the message says what and why; the tool exits 2.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct UsageError(pub String);

impl fmt::Display for UsageError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

fn usage<T>(message: impl Into<String>) -> Result<T, UsageError> {
    Err(UsageError(message.into()))
}

/// One game to run and what to print.
#[derive(Debug, Clone)]
pub struct RunOptions {
    pub spec: GameSpec,
    pub json: bool,
    pub svg: Option<PathBuf>,
    /// The scenario the flags came from (`--scenario`), for titles.
    pub scenario: Option<String>,
    /// `--policy oracle`: search the best fixed timing and show its game.
    pub oracle: bool,
    /// `--topology relay`: play through a relay placed so; `None`: peer-to-peer.
    pub relay: Option<RelayPlacement>,
    /// `--threads`: 2 plays a peer-to-peer game on two threads where it can
    /// (the same report), 1 in order on one.
    pub threads: usize,
}

/// The whole suite: every scenario file for every policy.
#[derive(Debug, Clone)]
pub struct SuiteOptions {
    pub dir: PathBuf,
    pub frames: Option<u32>,
    pub seed: Option<u64>,
    pub json: bool,
    pub svg_dir: Option<PathBuf>,
}

/// The soak: many seeded games under every fault at once.
#[derive(Debug, Clone)]
pub struct SoakOptions {
    pub games: u32,
    pub seed: u64,
    pub jobs: usize,
}

#[derive(Debug, Clone)]
pub enum Command {
    Help,
    SuiteHelp,
    SoakHelp,
    Run(Box<RunOptions>),
    Suite(SuiteOptions),
    Soak(SoakOptions),
    SweepHelp,
    Sweep(SweepOptions),
}

/// `rungs-sim sweep`: seeded random conditions, every policy on each.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SweepOptions {
    pub count: u32,
    pub frames: u32,
    pub seed: u64,
    pub jobs: usize,
    pub json: bool,
    /// Also a line (an object in the JSON) per condition.
    pub conditions: bool,
    /// Play only this condition.
    pub only: Option<u32>,
}

/// The spec every run starts from before its flags apply.
pub fn default_spec() -> GameSpec {
    let mut spec = GameSpec::new(DEFAULT_PLAYERS, DEFAULT_FRAMES, DEFAULT_FPS, DEFAULT_RTT_MS);
    spec.proc_us = vec![DEFAULT_PROC_US];
    spec.seed = DEFAULT_SEED;
    spec.commands_per_minute = DEFAULT_COMMANDS_PER_MINUTE;
    spec.policy = PolicyKind::Adaptive;
    spec
}

/// Flags as `(name, value)` pairs: `--name value` and `--name=value` alike;
/// `switches` take no value.
fn flags<'a>(
    args: &'a [String],
    switches: &[&str],
) -> Result<Vec<(&'a str, Option<&'a str>)>, UsageError> {
    let mut out = Vec::new();
    let mut rest = args.iter();
    while let Some(arg) = rest.next() {
        if !arg.starts_with("--") && arg != "-h" {
            return usage(format!("unexpected argument '{arg}' (flags start with --)"));
        }
        if let Some((name, value)) = arg.split_once('=') {
            if switches.contains(&name) {
                return usage(format!("{name} takes no value"));
            }
            out.push((name, Some(value)));
        } else if switches.contains(&arg.as_str()) {
            out.push((arg.as_str(), None));
        } else {
            match rest.next() {
                Some(value) => out.push((arg.as_str(), Some(value.as_str()))),
                None => return usage(format!("{arg} needs a value")),
            }
        }
    }
    Ok(out)
}

/// Parse the command line after the program name.
pub fn parse(args: &[String]) -> Result<Command, UsageError> {
    if args.first().map(String::as_str) == Some("suite") {
        return parse_suite(&args[1..]);
    }
    if args.first().map(String::as_str) == Some("soak") {
        return parse_soak(&args[1..]);
    }
    if args.first().map(String::as_str) == Some("sweep") {
        return parse_sweep(&args[1..]);
    }
    let mut options = RunOptions {
        spec: default_spec(),
        json: false,
        svg: None,
        scenario: None,
        oracle: false,
        relay: None,
        threads: default_jobs().min(2),
    };
    let mut relay_ms: Option<Vec<u32>> = None;
    for (name, value) in flags(args, &["--json", "--help", "-h"])? {
        let value = value.unwrap_or("");
        match name {
            "--help" | "-h" => return Ok(Command::Help),
            "--json" => options.json = true,
            "--topology" => {
                options.relay = match value {
                    "p2p" => None,
                    "relay" => Some(RelayPlacement::default()),
                    _ => return usage(format!("--topology wants p2p or relay, not '{value}'")),
                }
            }
            "--threads" => {
                options.threads = match value {
                    "1" => 1,
                    "2" => 2,
                    _ => return usage(format!("--threads wants 1 or 2, not '{value}'")),
                }
            }
            "--relay-ms" => relay_ms = Some(parse_list(name, value, |v| parse_number(name, v))?),
            "--svg" => options.svg = Some(PathBuf::from(value)),
            "--scenario" => {
                let path = scenario_path(value);
                apply_scenario(&mut options.spec, &path)?;
                options.scenario = Some(scenario_name(&path));
            }
            "--policy" if value == "oracle" => options.oracle = true,
            "--policy" => options.spec.policy = parse_policy(value)?,
            _ => apply_game_flag(&mut options.spec, name, value)?,
        }
    }
    check_spec(&options.spec)?;
    match (&mut options.relay, relay_ms) {
        (Some(placement), Some(ms)) => placement.one_way_ms = ms,
        (None, Some(_)) => return usage("--relay-ms needs --topology relay"),
        _ => {}
    }
    Ok(Command::Run(Box::new(options)))
}

fn parse_suite(args: &[String]) -> Result<Command, UsageError> {
    let mut options = SuiteOptions {
        dir: default_scenario_dir(),
        frames: None,
        seed: None,
        json: false,
        svg_dir: None,
    };
    for (name, value) in flags(args, &["--json", "--help", "-h"])? {
        let value = value.unwrap_or("");
        match name {
            "--help" | "-h" => return Ok(Command::SuiteHelp),
            "--json" => options.json = true,
            "--dir" => options.dir = PathBuf::from(value),
            "--svg-dir" => options.svg_dir = Some(PathBuf::from(value)),
            "--frames" => options.frames = Some(parse_frames(value)?),
            "--seed" => options.seed = Some(parse_number(name, value)?),
            _ => {
                return usage(format!(
                    "unknown suite flag {name} (see rungs-sim suite --help)"
                ))
            }
        }
    }
    Ok(Command::Suite(options))
}

fn parse_sweep(args: &[String]) -> Result<Command, UsageError> {
    let mut options = SweepOptions {
        count: 200,
        frames: 1800,
        seed: 1,
        jobs: default_jobs(),
        json: false,
        conditions: false,
        only: None,
    };
    for (name, value) in flags(args, &["--json", "--conditions", "--help", "-h"])? {
        let value = value.unwrap_or("");
        match name {
            "--help" | "-h" => return Ok(Command::SweepHelp),
            "--json" => options.json = true,
            "--conditions" => options.conditions = true,
            "--only" => options.only = Some(parse_number(name, value)?),
            "--count" => options.count = parse_number(name, value)?,
            "--frames" => options.frames = parse_frames(value)?,
            "--seed" => options.seed = parse_number(name, value)?,
            "--jobs" => options.jobs = parse_jobs(value)?,
            _ => {
                return usage(format!(
                    "unknown sweep flag {name} (see rungs-sim sweep --help)"
                ))
            }
        }
    }
    Ok(Command::Sweep(options))
}

/// Worker threads for a batch of games: one per core unless `--jobs` says.
fn default_jobs() -> usize {
    std::thread::available_parallelism().map_or(1, |n| n.get())
}

/// `--jobs N`, at least 1.
fn parse_jobs(value: &str) -> Result<usize, UsageError> {
    let jobs = parse_number("--jobs", value)?;
    if jobs == 0 {
        return usage("--jobs must be at least 1");
    }
    Ok(jobs)
}

fn parse_soak(args: &[String]) -> Result<Command, UsageError> {
    let mut options = SoakOptions {
        games: 1000,
        seed: 1,
        jobs: default_jobs(),
    };
    for (name, value) in flags(args, &["--help", "-h"])? {
        let value = value.unwrap_or("");
        match name {
            "--help" | "-h" => return Ok(Command::SoakHelp),
            "--games" => options.games = parse_number(name, value)?,
            "--seed" => options.seed = parse_number(name, value)?,
            "--jobs" => options.jobs = parse_jobs(value)?,
            _ => {
                return usage(format!(
                    "unknown soak flag {name} (see rungs-sim soak --help)"
                ))
            }
        }
    }
    Ok(Command::Soak(options))
}

/// `crates/rungs-sim/scenarios` (or `scenarios` when run inside the crate)
/// from the working directory, else the one this binary was built from.
fn default_scenario_dir() -> PathBuf {
    ["crates/rungs-sim/scenarios", "scenarios"]
        .iter()
        .map(PathBuf::from)
        .find(|local| local.is_dir())
        .unwrap_or_else(|| Path::new(env!("CARGO_MANIFEST_DIR")).join("scenarios"))
}

/// `--scenario spike` names a file of the default directory; anything with
/// a slash or an extension is a path.
fn scenario_path(value: &str) -> PathBuf {
    if value.contains('/') || value.ends_with(".args") {
        PathBuf::from(value)
    } else {
        default_scenario_dir().join(format!("{value}.args"))
    }
}

/// A scenario's name: its file name without `.args`.
pub fn scenario_name(path: &Path) -> String {
    path.file_stem().map_or_else(
        || path.display().to_string(),
        |s| s.to_string_lossy().into_owned(),
    )
}

/// The flags in a scenario file: whitespace-separated, `#` to the end of a
/// line is a comment. Only game flags belong there (no policy, no output).
fn read_scenario(path: &Path) -> Result<Vec<(String, String)>, UsageError> {
    let text = std::fs::read_to_string(path)
        .map_err(|e| UsageError(format!("cannot read scenario {}: {e}", path.display())))?;
    let words: Vec<String> = text
        .lines()
        .map(|line| line.split('#').next().unwrap_or(""))
        .flat_map(str::split_whitespace)
        .map(str::to_owned)
        .collect();
    let pairs = flags(&words, &[]).map_err(|e| UsageError(format!("{}: {e}", path.display())))?;
    let mut out = Vec::new();
    for (name, value) in pairs {
        if matches!(name, "--policy" | "--json" | "--svg" | "--scenario") {
            return usage(format!(
                "{}: {name} does not belong in a scenario file (scenarios describe the game; the policy and output are chosen when it runs)",
                path.display()
            ));
        }
        out.push((name.to_owned(), value.unwrap_or("").to_owned()));
    }
    Ok(out)
}

/// Apply a scenario file's flags to `spec`; errors name the file.
pub fn apply_scenario(spec: &mut GameSpec, path: &Path) -> Result<(), UsageError> {
    for (name, value) in read_scenario(path)? {
        apply_game_flag(spec, &name, &value)
            .map_err(|e| UsageError(format!("{}: {e}", path.display())))?;
    }
    Ok(())
}

/// Apply one flag that describes the game (not the policy or the output).
/// A later flag overrides an earlier one, except `--spike`, which adds.
pub fn apply_game_flag(spec: &mut GameSpec, name: &str, value: &str) -> Result<(), UsageError> {
    match name {
        "--players" => {
            spec.players = parse_number(name, value)?;
            if !(1..=MAX_PLAYERS).contains(&spec.players) {
                return usage(format!("--players must be 1 to {MAX_PLAYERS}, not {value}"));
            }
        }
        "--frames" => spec.frames = parse_frames(value)?,
        "--fps" => {
            spec.fps = parse_number(name, value)?;
            if spec.fps == 0 {
                return usage("--fps must be 1 to 255");
            }
        }
        "--rtt" => {
            spec.rtt_ms = parse_list(name, value, |v| parse_number(name, v))?;
            if let Some(rtt) = spec.rtt_ms.iter().find(|rtt| **rtt > MAX_RTT_MS) {
                return usage(format!("--rtt {rtt} ms is more than {MAX_RTT_MS} ms"));
            }
        }
        "--jitter" => {
            spec.jitter_ms = parse_number(name, value)?;
            if spec.jitter_ms > MAX_RTT_MS {
                return usage(format!("--jitter must be at most {MAX_RTT_MS} ms"));
            }
        }
        "--loss" => spec.loss_ppm = parse_loss(value)?,
        "--spike" => spec.spikes.push(parse_spike(value)?),
        "--proc-ms" => {
            spec.proc_us = parse_list(name, value, |v| {
                let us = parse_decimal(name, v, 3)?;
                u32::try_from(us)
                    .ok()
                    .filter(|us| *us <= MAX_PROC_US)
                    .ok_or_else(|| UsageError(format!("--proc-ms {v} is more than 10 s a frame")))
            })?;
        }
        "--seed" => spec.seed = parse_number(name, value)?,
        "--depart" => spec.departure = Some(parse_departure(value)?),
        "--commands-per-minute" => spec.commands_per_minute = parse_number(name, value)?,
        "--diverge" => spec.diverge = Some(parse_divergence(value)?),
        "--dup" => spec.duplicate_ppm = parse_probability(name, value)?,
        "--reorder" => spec.reorder_ppm = parse_probability(name, value)?,
        "--outage" => spec.outages.push(parse_outage(value)?),
        "--crash" | "--quit" if value.ends_with('s') => {
            spec.timed_faults.push(parse_timed_fault(name, value)?)
        }
        "--crash" | "--quit" | "--burst" | "--restart" | "--move" | "--attack" => {
            spec.faults.push(parse_fault(name, value)?)
        }
        "--liveness" => {
            let ms: u64 = parse_number(name, value)?;
            if !(1..=600_000).contains(&ms) {
                return usage("--liveness must be 1 to 600000 ms");
            }
            spec.liveness_timeout_ms = Some(ms);
        }
        _ => return usage(format!("unknown flag {name} (see rungs-sim --help)")),
    }
    Ok(())
}

/// What no single flag can check: values that refer to the number of players.
pub fn check_spec(spec: &GameSpec) -> Result<(), UsageError> {
    let players = usize::from(spec.players);
    if spec.rtt_ms.len() > players {
        return usage(format!(
            "--rtt lists {} round trips for {players} players",
            spec.rtt_ms.len()
        ));
    }
    if spec.proc_us.len() > players {
        return usage(format!(
            "--proc-ms lists {} processing times for {players} players",
            spec.proc_us.len()
        ));
    }
    let seats = spec
        .faults
        .iter()
        .map(Fault::seat)
        .chain(spec.timed_faults.iter().map(|f| f.seat));
    for seat in seats {
        if seat >= spec.players {
            return usage(format!(
                "a fault names seat {seat}: seats are 0..{} for {players} players",
                spec.players.saturating_sub(1)
            ));
        }
        if players < 2 {
            return usage("faults need at least two players");
        }
    }
    for outage in &spec.outages {
        if outage.player.is_some_and(|p| p >= spec.players) {
            return usage(format!(
                "--outage .../SEAT: seats are 0..{} for {players} players",
                spec.players.saturating_sub(1)
            ));
        }
    }
    for spike in &spec.spikes {
        if let Some(player) = spike.player {
            if player >= spec.players {
                return usage(format!(
                    "--spike .../{player}: seats are 0..{} for {players} players",
                    spec.players - 1
                ));
            }
        }
    }
    if let Some((seat, _)) = spec.diverge {
        if seat >= spec.players {
            return usage(format!(
                "--diverge {seat}@...: seats are 0..{} for {players} players",
                spec.players - 1
            ));
        }
    }
    if let Some((seat, frame, _)) = spec.departure {
        if spec.players < 2 {
            return usage("--depart needs at least two players (someone has to stay)");
        }
        if seat >= spec.players {
            return usage(format!(
                "--depart {seat}@...: seats are 0..{} for {players} players",
                spec.players - 1
            ));
        }
        if frame >= spec.frames {
            return usage(format!(
                "--depart ...@{frame}: the game has only {} frames",
                spec.frames
            ));
        }
    }
    Ok(())
}

fn parse_number<T: std::str::FromStr>(name: &str, value: &str) -> Result<T, UsageError> {
    value.trim().parse().map_err(|_| {
        UsageError(format!(
            "{name} wants a whole number in range, not '{value}'"
        ))
    })
}

fn parse_frames(value: &str) -> Result<u32, UsageError> {
    let frames: u32 = parse_number("--frames", value)?;
    if frames == 0 {
        return usage("--frames must be at least 1");
    }
    Ok(frames)
}

/// `a,b,c` to a list of at least one value.
fn parse_list<T>(
    name: &str,
    value: &str,
    parse_one: impl Fn(&str) -> Result<T, UsageError>,
) -> Result<Vec<T>, UsageError> {
    if value.trim().is_empty() {
        return usage(format!("{name} needs at least one value"));
    }
    value.split(',').map(|v| parse_one(v.trim())).collect()
}

/// An exact non-negative decimal, scaled by `10^decimals`: `parse_decimal("4.5", 3)`
/// is 4500. More decimals than the unit holds is an error, not a rounding.
pub fn parse_decimal(name: &str, value: &str, decimals: u32) -> Result<u64, UsageError> {
    let bad = || {
        UsageError(format!(
            "{name} wants a number with at most {decimals} decimals, not '{value}'"
        ))
    };
    let (whole, fraction) = value.split_once('.').unwrap_or((value, ""));
    let digits = |s: &str| s.bytes().all(|b| b.is_ascii_digit());
    if (whole.is_empty() && fraction.is_empty())
        || !digits(whole)
        || !digits(fraction)
        || fraction.len() > decimals as usize
    {
        return Err(bad());
    }
    let scale = 10u64.pow(decimals);
    let whole: u64 = if whole.is_empty() {
        0
    } else {
        whole.parse().map_err(|_| bad())?
    };
    let fraction_scaled: u64 = if fraction.is_empty() {
        0
    } else {
        fraction.parse::<u64>().map_err(|_| bad())? * 10u64.pow(decimals - fraction.len() as u32)
    };
    whole
        .checked_mul(scale)
        .and_then(|w| w.checked_add(fraction_scaled))
        .ok_or_else(bad)
}

/// A probability `0..=1` (`0.03`) or a percentage (`3%`), to parts per million.
fn parse_loss(value: &str) -> Result<u32, UsageError> {
    parse_probability("--loss", value)
}

/// `MS@SECONDS+SECONDS`, optionally `/SEAT` for one player's paths.
fn parse_spike(value: &str) -> Result<Spike, UsageError> {
    let bad = || {
        UsageError(format!(
            "--spike wants MS@START+DURATION (seconds) with an optional /SEAT, e.g. 1500@120+5 or 900@60+10/2; not '{value}'"
        ))
    };
    let (body, player) = match value.split_once('/') {
        Some((body, seat)) => (body, Some(seat.parse::<u8>().map_err(|_| bad())?)),
        None => (value, None),
    };
    let (rtt, window) = body.split_once('@').ok_or_else(bad)?;
    let (start, duration) = window.split_once('+').ok_or_else(bad)?;
    let rtt_ms: u32 = rtt.parse().map_err(|_| bad())?;
    if rtt_ms > MAX_RTT_MS {
        return usage(format!("--spike {rtt_ms} ms is more than {MAX_RTT_MS} ms"));
    }
    let start_ms = parse_decimal("--spike start", start, 3)?;
    let duration_ms = parse_decimal("--spike duration", duration, 3)?;
    if duration_ms == 0 {
        return usage(format!(
            "--spike {value}: the duration must be more than 0 s"
        ));
    }
    Ok(Spike {
        rtt_ms,
        start_ms,
        duration_ms,
        player,
    })
}

/// `SEAT@FRAME:quit` or `SEAT@FRAME:crash`.
fn parse_departure(value: &str) -> Result<(u8, u32, Departure), UsageError> {
    let bad = || {
        UsageError(format!(
            "--depart wants SEAT@FRAME:quit or SEAT@FRAME:crash, e.g. 0@3000:crash; not '{value}'"
        ))
    };
    let (seat, rest) = value.split_once('@').ok_or_else(bad)?;
    let (frame, how) = rest.split_once(':').ok_or_else(bad)?;
    let departure = match how {
        "quit" => Departure::Quit,
        "crash" => Departure::Crash,
        _ => return Err(bad()),
    };
    Ok((
        seat.parse().map_err(|_| bad())?,
        frame.parse().map_err(|_| bad())?,
        departure,
    ))
}

/// A probability as for `--loss`, in parts per million.
fn parse_probability(name: &str, value: &str) -> Result<u32, UsageError> {
    let ppm = match value.strip_suffix('%') {
        Some(percent) => parse_decimal(name, percent, 4)?,
        None => parse_decimal(name, value, 6)?,
    };
    if ppm > 1_000_000 {
        return usage(format!(
            "{name} is a probability 0 to 1 (or 0% to 100%), not {value}"
        ));
    }
    Ok(ppm as u32)
}

/// `START+DURATION` in seconds, optionally `/SEAT`.
fn parse_outage(value: &str) -> Result<OutageSpec, UsageError> {
    let bad = || {
        UsageError(format!(
            "--outage wants START+DURATION (seconds) with an optional /SEAT, e.g. 30+5/2; not '{value}'"
        ))
    };
    let (body, player) = match value.split_once('/') {
        Some((body, seat)) => (body, Some(seat.parse::<u8>().map_err(|_| bad())?)),
        None => (value, None),
    };
    let (start, duration) = body.split_once('+').ok_or_else(bad)?;
    Ok(OutageSpec {
        start_ms: parse_decimal("--outage start", start, 3)?,
        duration_ms: parse_decimal("--outage duration", duration, 3)?,
        player,
    })
}

/// `--crash SEAT@SECONDSs` / `--quit SEAT@SECONDSs`: at that moment of game
/// time, whatever the machine is doing.
fn parse_timed_fault(name: &str, value: &str) -> Result<TimedFault, UsageError> {
    let bad = || {
        UsageError(format!(
            "{name} wants SEAT@FRAME or SEAT@SECONDSs (seconds of game time, e.g. 3@6.8s); \
             not '{value}'"
        ))
    };
    let (seat, at) = value.split_once('@').ok_or_else(bad)?;
    let seconds = at.strip_suffix('s').ok_or_else(bad)?;
    Ok(TimedFault {
        seat: seat.parse().map_err(|_| bad())?,
        at_ms: parse_decimal(name, seconds, 3).map_err(|_| bad())?,
        kind: if name == "--crash" {
            TimedKind::Crash
        } else {
            TimedKind::Quit
        },
    })
}

/// The fault flags: `SEAT@FRAME` and what follows a colon.
fn parse_fault(name: &str, value: &str) -> Result<Fault, UsageError> {
    let forms = match name {
        "--crash" => "SEAT@FRAME or SEAT@FRAME:mid (in the middle of its turn)",
        "--burst" => "SEAT@FRAME:COUNTxBYTES, e.g. 1@600:1100x1000",
        "--attack" => "SEAT@FRAME:remove|relay|timing|flood|future|replay",
        _ => "SEAT@FRAME",
    };
    let bad = || UsageError(format!("{name} wants {forms}; not '{value}'"));
    let (seat, rest) = value.split_once('@').ok_or_else(bad)?;
    let (frame, extra) = match rest.split_once(':') {
        Some((frame, extra)) => (frame, Some(extra)),
        None => (rest, None),
    };
    let seat: u8 = seat.parse().map_err(|_| bad())?;
    let frame: u32 = frame.parse().map_err(|_| bad())?;
    Ok(match (name, extra) {
        ("--crash", None) => Fault::Crash {
            seat,
            frame,
            mid_turn: false,
        },
        ("--crash", Some("mid")) => Fault::Crash {
            seat,
            frame,
            mid_turn: true,
        },
        ("--quit", None) => Fault::Quit { seat, frame },
        ("--restart", None) => Fault::Restart { seat, frame },
        ("--move", None) => Fault::Move { seat, frame },
        ("--burst", Some(extra)) => {
            let (count, bytes) = extra.split_once('x').ok_or_else(bad)?;
            let bytes: u16 = bytes.parse().map_err(|_| bad())?;
            if !(5..=1000).contains(&bytes) {
                return usage(format!("{name}: commands are 5 to 1000 bytes, not {bytes}"));
            }
            Fault::Burst {
                seat,
                frame,
                commands: count.parse().map_err(|_| bad())?,
                bytes,
            }
        }
        ("--attack", Some(attack)) => Fault::Attack {
            seat,
            frame,
            attack: Attack::from_name(attack).ok_or_else(bad)?,
        },
        _ => return Err(bad()),
    })
}

/// `SEAT@FRAME`: that seat's simulated state goes wrong on that frame.
fn parse_divergence(value: &str) -> Result<(u8, u32), UsageError> {
    let bad = || {
        UsageError(format!(
            "--diverge wants SEAT@FRAME, e.g. 1@2000; not '{value}'"
        ))
    };
    let (seat, frame) = value.split_once('@').ok_or_else(bad)?;
    Ok((
        seat.parse().map_err(|_| bad())?,
        frame.parse().map_err(|_| bad())?,
    ))
}

/// `adaptive`, `tracking`, `ra`, `protocol0`, `protocol0-ts`, `lobby` or
/// `fixed:SP/LA` (checked
/// against S1): [`PolicyKind::from_name`].
pub fn parse_policy(value: &str) -> Result<PolicyKind, UsageError> {
    match PolicyKind::from_name(value) {
        Some(Ok(policy)) => Ok(policy),
        Some(Err(e)) => Err(UsageError(format!(
            "--policy {value} breaks the timing rule S1: {e}"
        ))),
        None => Err(UsageError(format!(
            "--policy wants adaptive, tracking, ra, protocol0, protocol0-ts, lobby or fixed:SP/LA (e.g. fixed:2/6), not '{value}'"
        ))),
    }
}

/// The policy as the flag spells it: `fixed:2/6`, `ra`, ...
pub fn policy_name(policy: PolicyKind) -> String {
    policy.name()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn decimals_are_exact_and_bounded() {
        assert_eq!(parse_decimal("x", "4.5", 3), Ok(4500));
        assert_eq!(parse_decimal("x", "45", 3), Ok(45_000));
        assert_eq!(parse_decimal("x", ".25", 3), Ok(250));
        assert!(parse_decimal("x", "1.2345", 3).is_err());
        assert!(parse_decimal("x", "-1", 3).is_err());
        assert!(parse_decimal("x", ".", 3).is_err());
        assert_eq!(parse_loss("0.03"), Ok(30_000));
        assert_eq!(parse_loss("3%"), Ok(30_000));
        assert!(parse_loss("1.5").is_err());
    }

    #[test]
    fn spikes_and_departures_parse() {
        let spike = parse_spike("1500@120+5").unwrap();
        assert_eq!(
            (
                spike.rtt_ms,
                spike.start_ms,
                spike.duration_ms,
                spike.player
            ),
            (1500, 120_000, 5000, None)
        );
        assert_eq!(parse_spike("900@1.5+0.5/2").unwrap().player, Some(2));
        assert!(parse_spike("900@10").is_err());
        assert!(parse_spike("900@10+0").is_err());
        assert_eq!(
            parse_departure("0@3000:crash"),
            Ok((0, 3000, Departure::Crash))
        );
        assert!(parse_departure("0@3000:vanish").is_err());
    }

    #[test]
    fn policies_round_trip_through_their_names() {
        for name in [
            "adaptive",
            "ra",
            "protocol0",
            "fixed:2/6",
            "fixed:1/4",
            "fixed:10/250",
        ] {
            assert_eq!(policy_name(parse_policy(name).unwrap()), name);
        }
        assert!(parse_policy("fixed:3/10").is_err());
        assert!(parse_policy("fixed:0/0").is_err());
        assert!(parse_policy("fast").is_err());
    }
}
