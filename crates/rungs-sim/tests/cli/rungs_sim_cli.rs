//! The `rungs-sim` command line, run as a user runs it: JSON that
//! is deterministic and complete, bad input refused with exit code 2, a
//! well-formed SVG, and the suite over a small scenario directory.
//!
//! Games here are small (3 players, a few hundred frames) so that the file
//! runs in seconds in a debug build.

use std::ffi::OsStr;
use std::fmt::Debug;
use std::path::{Path, PathBuf};
use std::process::{Command, Output};

const SMALL_GAME: &[&str] = &[
    "--players",
    "3",
    "--frames",
    "900",
    "--rtt",
    "80",
    "--jitter",
    "20",
    "--loss",
    "0.05",
];

fn rungs_sim<S: AsRef<OsStr>>(args: &[S]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_rungs-sim"))
        .args(args)
        .output()
        .expect("rungs-sim runs")
}

fn stdout(output: &Output) -> String {
    String::from_utf8(output.stdout.clone()).expect("stdout is UTF-8")
}

fn stderr(output: &Output) -> String {
    String::from_utf8(output.stderr.clone()).expect("stderr is UTF-8")
}

/// Run and insist on exit code 0.
fn run_ok<S: AsRef<OsStr> + Debug>(args: &[S]) -> String {
    let output = rungs_sim(args);
    assert_eq!(
        output.status.code(),
        Some(0),
        "rungs-sim {args:?} failed: {}",
        stderr(&output)
    );
    stdout(&output)
}

/// The small game's flags followed by `extra`.
fn small_game_with(extra: &[&str]) -> Vec<String> {
    SMALL_GAME
        .iter()
        .chain(extra)
        .map(|s| s.to_string())
        .collect()
}

/// A directory of its own under the system's temporary directory.
struct TempDir(PathBuf);

impl TempDir {
    fn new(name: &str) -> TempDir {
        let dir =
            std::env::temp_dir().join(format!("rungs-sim-test-{}-{name}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).expect("temporary directory");
        TempDir(dir)
    }

    fn path(&self) -> &Path {
        &self.0
    }

    fn file(&self, name: &str) -> String {
        self.0.join(name).to_str().expect("UTF-8 path").to_owned()
    }
}

impl Drop for TempDir {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

// ---------------------------------------------------------------- JSON ----

/// Just enough JSON to check what rungs-sim prints: a strict parser.
#[derive(Debug, Clone, PartialEq)]
enum Json {
    Null,
    Bool(bool),
    Number(f64),
    Text(String),
    Array(Vec<Json>),
    Object(Vec<(String, Json)>),
}

impl Json {
    fn parse(text: &str) -> Json {
        let mut parser = JsonParser {
            bytes: text.as_bytes(),
            at: 0,
        };
        let value = parser.value();
        parser.skip_space();
        assert_eq!(parser.at, text.len(), "trailing text after the JSON value");
        value
    }

    fn get(&self, key: &str) -> &Json {
        match self {
            Json::Object(fields) => fields
                .iter()
                .find(|(k, _)| k == key)
                .map(|(_, v)| v)
                .unwrap_or_else(|| panic!("key {key:?} missing")),
            other => panic!("{other:?} is not an object"),
        }
    }

    fn number(&self) -> f64 {
        match self {
            Json::Number(n) => *n,
            other => panic!("{other:?} is not a number"),
        }
    }

    fn array(&self) -> &[Json] {
        match self {
            Json::Array(items) => items,
            other => panic!("{other:?} is not an array"),
        }
    }
}

struct JsonParser<'a> {
    bytes: &'a [u8],
    at: usize,
}

impl JsonParser<'_> {
    fn skip_space(&mut self) {
        while self
            .bytes
            .get(self.at)
            .is_some_and(|b| b.is_ascii_whitespace())
        {
            self.at += 1;
        }
    }

    fn expect(&mut self, byte: u8) {
        self.skip_space();
        assert_eq!(
            self.bytes.get(self.at),
            Some(&byte),
            "expected {:?} at byte {}",
            byte as char,
            self.at
        );
        self.at += 1;
    }

    fn peek(&mut self) -> u8 {
        self.skip_space();
        *self.bytes.get(self.at).expect("unexpected end of JSON")
    }

    fn literal(&mut self, word: &str, value: Json) -> Json {
        assert!(
            self.bytes[self.at..].starts_with(word.as_bytes()),
            "bad literal at {}",
            self.at
        );
        self.at += word.len();
        value
    }

    fn value(&mut self) -> Json {
        match self.peek() {
            b'{' => {
                self.at += 1;
                let mut fields = Vec::new();
                if self.peek() == b'}' {
                    self.at += 1;
                    return Json::Object(fields);
                }
                loop {
                    let key = match self.value() {
                        Json::Text(key) => key,
                        other => panic!("object key {other:?} is not a string"),
                    };
                    assert!(
                        !fields.iter().any(|(k, _)| *k == key),
                        "duplicate key {key}"
                    );
                    self.expect(b':');
                    fields.push((key, self.value()));
                    match self.peek() {
                        b',' => self.at += 1,
                        b'}' => {
                            self.at += 1;
                            return Json::Object(fields);
                        }
                        other => panic!("unexpected {:?} in object", other as char),
                    }
                }
            }
            b'[' => {
                self.at += 1;
                let mut items = Vec::new();
                if self.peek() == b']' {
                    self.at += 1;
                    return Json::Array(items);
                }
                loop {
                    items.push(self.value());
                    match self.peek() {
                        b',' => self.at += 1,
                        b']' => {
                            self.at += 1;
                            return Json::Array(items);
                        }
                        other => panic!("unexpected {:?} in array", other as char),
                    }
                }
            }
            b'"' => {
                self.at += 1;
                let mut text = String::new();
                loop {
                    let rest = std::str::from_utf8(&self.bytes[self.at..]).expect("UTF-8");
                    let c = rest.chars().next().expect("unterminated string");
                    self.at += c.len_utf8();
                    match c {
                        '"' => return Json::Text(text),
                        '\\' => {
                            let escape = self.bytes[self.at];
                            self.at += 1;
                            match escape {
                                b'"' => text.push('"'),
                                b'\\' => text.push('\\'),
                                b'/' => text.push('/'),
                                b'n' => text.push('\n'),
                                b'r' => text.push('\r'),
                                b't' => text.push('\t'),
                                b'b' => text.push('\u{8}'),
                                b'f' => text.push('\u{c}'),
                                b'u' => {
                                    let hex =
                                        std::str::from_utf8(&self.bytes[self.at..self.at + 4])
                                            .unwrap();
                                    let code = u32::from_str_radix(hex, 16).expect("\\u escape");
                                    text.push(char::from_u32(code).expect("a scalar value"));
                                    self.at += 4;
                                }
                                other => panic!("bad escape \\{}", other as char),
                            }
                        }
                        c if u32::from(c) < 0x20 => panic!("raw control character in a string"),
                        c => text.push(c),
                    }
                }
            }
            b't' => self.literal("true", Json::Bool(true)),
            b'f' => self.literal("false", Json::Bool(false)),
            b'n' => self.literal("null", Json::Null),
            _ => {
                let start = self.at;
                while self.bytes.get(self.at).is_some_and(|b| {
                    b.is_ascii_digit() || matches!(b, b'-' | b'+' | b'.' | b'e' | b'E')
                }) {
                    self.at += 1;
                }
                let text = std::str::from_utf8(&self.bytes[start..self.at]).unwrap();
                Json::Number(
                    text.parse()
                        .unwrap_or_else(|_| panic!("bad number {text:?} at {start}")),
                )
            }
        }
    }
}

// ----------------------------------------------------------------- XML ----

/// Well-formed XML: a prolog, comments, one root element, balanced tags,
/// quoted attributes, and only the predefined or numeric entities.
fn assert_well_formed_xml(text: &str) {
    fn check_entities(text: &str) {
        let mut rest = text;
        while let Some(at) = rest.find('&') {
            let end = rest[at..].find(';').expect("an entity ends with ;") + at;
            let name = &rest[at + 1..end];
            let known = matches!(name, "amp" | "lt" | "gt" | "quot" | "apos")
                || (name.starts_with('#')
                    && name[1..]
                        .trim_start_matches('x')
                        .chars()
                        .all(|c| c.is_ascii_hexdigit()));
            assert!(known, "unknown entity &{name};");
            rest = &rest[end + 1..];
        }
    }
    let body = text.trim_start();
    let mut rest = match body.strip_prefix("<?xml") {
        Some(after) => &after[after.find("?>").expect("prolog ends") + 2..],
        None => body,
    };
    let mut open: Vec<String> = Vec::new();
    let mut roots = 0;
    while let Some(at) = rest.find('<') {
        let between = &rest[..at];
        assert!(
            !open.is_empty() || between.trim().is_empty(),
            "text outside the root: {between:?}"
        );
        check_entities(between);
        rest = &rest[at..];
        if let Some(comment) = rest.strip_prefix("<!--") {
            rest = &comment[comment.find("-->").expect("comment ends") + 3..];
            continue;
        }
        let end = rest.find('>').expect("tag ends");
        let tag = &rest[1..end];
        rest = &rest[end + 1..];
        if let Some(name) = tag.strip_prefix('/') {
            assert_eq!(
                open.pop().as_deref(),
                Some(name.trim()),
                "closing tag matches"
            );
            continue;
        }
        let self_closing = tag.ends_with('/');
        let tag = tag.trim_end_matches('/');
        let name_end = tag.find(char::is_whitespace).unwrap_or(tag.len());
        let name = &tag[..name_end];
        assert!(
            !name.is_empty()
                && name
                    .chars()
                    .all(|c| c.is_ascii_alphanumeric() || c == '-' || c == ':'),
            "element name {name:?}"
        );
        // Attributes: name="value", each value free of < and with valid entities.
        let mut attributes = tag[name_end..].trim();
        let mut names = Vec::new();
        while !attributes.is_empty() {
            let eq = attributes.find('=').expect("attribute has a value");
            let attribute = attributes[..eq].trim();
            assert!(
                !names.contains(&attribute),
                "duplicate attribute {attribute}"
            );
            names.push(attribute);
            let after = attributes[eq + 1..].trim_start();
            let quote = after.chars().next().expect("quoted value");
            assert!(
                quote == '"' || quote == '\'',
                "attribute {attribute} is quoted"
            );
            let close = after[1..].find(quote).expect("value ends") + 1;
            let value = &after[1..close];
            assert!(!value.contains('<'), "< in attribute {attribute}");
            check_entities(value);
            attributes = after[close + 1..].trim_start();
        }
        if open.is_empty() {
            roots += 1;
        }
        if !self_closing {
            open.push(name.to_owned());
        }
    }
    assert!(rest.trim().is_empty(), "text after the root");
    assert!(open.is_empty(), "unclosed elements: {open:?}");
    assert_eq!(roots, 1, "exactly one root element");
}

// --------------------------------------------------------------- tests ----

#[test]
fn the_same_seed_gives_byte_identical_json_and_another_seed_does_not() {
    let args = small_game_with(&["--seed", "7", "--json"]);
    let first = run_ok(&args);
    let second = run_ok(&args);
    assert_eq!(first, second, "byte for byte");
    let other = run_ok(&small_game_with(&["--seed", "8", "--json"]));
    assert_ne!(first, other);
    // Bytes, not packets: with acks riding on turns a lossless game sends
    // one packet per turn and peer whatever the seed; the commands differ.
    assert_ne!(
        Json::parse(&first).get("bytes"),
        Json::parse(&other).get("bytes"),
        "another seed, another game (not just another seed field)"
    );
}

#[test]
fn the_json_has_every_required_key_with_sound_values() {
    let json = Json::parse(&run_ok(&small_game_with(&[
        "--policy",
        "fixed:2/6",
        "--json",
    ])));
    assert_eq!(json.get("policy"), &Json::Text("fixed:2/6".into()));
    assert_eq!(json.get("frames").number(), 900.0);
    assert_eq!(json.get("players").number(), 3.0);
    let latency = json.get("latency_ms");
    let (mean, p95, max) = (
        latency.get("mean").number(),
        latency.get("p95").number(),
        latency.get("max").number(),
    );
    assert!(
        0.0 < mean && mean <= p95 && p95 <= max,
        "{mean} {p95} {max}"
    );
    // 2/6 at 30 fps: at least the 200 ms look-ahead.
    assert!(mean >= 200.0, "{mean}");
    // Every command must reach the others: at least the 40 ms one-way delay.
    let floor = json.get("floor_ms").get("mean").number();
    assert!((40.0..mean).contains(&floor), "{floor}");
    for key in [
        "stall_frames",
        "stall_ms",
        "desyncs",
        "packets",
        "bytes",
        "duration_ms",
        "links_lost",
        "seed",
        "fps",
    ] {
        assert!(json.get(key).number() >= 0.0, "{key}");
    }
    assert_eq!(json.get("desyncs").number(), 0.0);
    assert!(json.get("commands_issued").number() > 0.0);
    assert_eq!(json.get("commands_issued"), json.get("commands_executed"));
    assert_eq!(json.get("logs_identical"), &Json::Bool(true));
    assert_eq!(json.get("commands_in_order"), &Json::Bool(true));
    let ratio = json.get("ratio_to_floor").number();
    let expected = mean / json.get("floor_ms").get("mean").number();
    assert!((ratio - expected).abs() < 0.01, "{ratio} vs {expected}");
    let timeline = json.get("timeline").array();
    assert_eq!(
        timeline.len(),
        1,
        "a fixed timing never changes: {timeline:?}"
    );
    let entry: Vec<f64> = timeline[0].array().iter().map(Json::number).collect();
    assert_eq!(
        entry,
        vec![0.0, 2.0, 6.0, 30.0],
        "[frame, send_period, look_ahead, fps]"
    );
}

#[test]
fn the_json_lists_the_stalls_it_counts() {
    // 1/1 over an 80 ms round trip waits for the turns on most frames.
    let json = Json::parse(&run_ok(&small_game_with(&[
        "--policy",
        "fixed:1/1",
        "--json",
    ])));
    let stalls = json.get("stalls").array();
    let frames = json.get("stall_frames").number();
    assert!(frames > 0.0 && !stalls.is_empty(), "{frames}");
    // A stall noted once may cover frames counted together; never more entries.
    assert!(stalls.len() as f64 <= frames, "{} > {frames}", stalls.len());
    let mut previous = 0.0;
    let mut waited = 0.0;
    for stall in stalls {
        let (at, wait) = (stall.array()[0].number(), stall.array()[1].number());
        assert!(
            at >= previous && wait > 0.0,
            "{at} after {previous}, {wait}"
        );
        previous = at;
        waited += wait;
    }
    let stall_ms = json.get("stall_ms").number();
    assert!(
        (waited - stall_ms).abs() < 0.001 * stalls.len() as f64 + 0.01,
        "{waited} vs {stall_ms}"
    );
}

#[test]
fn the_summary_shows_the_json_figures_and_the_speed() {
    let json = Json::parse(&run_ok(&small_game_with(&["--json"])));
    let summary = run_ok(&small_game_with(&[]));
    let mean = json.get("latency_ms").get("mean").number();
    assert!(summary.contains(&format!("mean {mean:.1} ms")), "{summary}");
    let issued = json.get("commands_issued").number();
    assert!(summary.contains(&format!("{issued} issued")), "{summary}");
    assert!(summary.contains("× real time"), "{summary}");
    assert!(summary.contains("frames/s"), "{summary}");
}

#[test]
fn a_scenario_file_gives_the_flags_and_later_flags_override_it() {
    let dir = TempDir::new("scenario");
    let file = dir.file("hilly.args");
    std::fs::write(
        &file,
        "# a comment\n--players 4 --frames 900 # trailing comment\n--rtt 100 --spike 800@10+2\n",
    )
    .unwrap();
    let json = Json::parse(&run_ok(&["--scenario", &file, "--players", "3", "--json"]));
    assert_eq!(json.get("scenario"), &Json::Text("hilly".into()));
    assert_eq!(json.get("players").number(), 3.0, "the later flag wins");
    assert_eq!(json.get("rtt_ms").array(), &[Json::Number(100.0)]);
    let spike = &json.get("spikes").array()[0];
    assert_eq!(spike.get("start_ms").number(), 10_000.0);
    assert_eq!(spike.get("duration_ms").number(), 2_000.0);
}

#[test]
fn bad_input_exits_2_with_a_message() {
    let cases: &[(&[&str], &str)] = &[
        (&["--policy", "fixed:3/10"], "multiple of the send period"),
        (&["--policy", "fixed:11/33"], "send period"),
        (&["--policy", "turbo"], "--policy"),
        (&["--players", "0"], "--players"),
        (&["--players", "17"], "--players"),
        (&["--loss", "1.5"], "--loss"),
        (&["--loss", "-0.1"], "--loss"),
        (&["--rtt", "fast"], "--rtt"),
        (&["--rtt", "10,20,30,40,50"], "--rtt"),
        (&["--proc-ms", "4.5678"], "--proc-ms"),
        (&["--spike", "1500@120"], "--spike"),
        (&["--spike", "1500@120+5/9"], "--spike"),
        (&["--depart", "1@100:vanish"], "--depart"),
        (&["--depart", "7@100:crash"], "--depart"),
        (&["--depart", "1@5000:quit"], "--depart"),
        (&["--frames"], "needs a value"),
        (&["--frames", "0"], "--frames"),
        (&["--json=yes"], "--json"),
        (&["--warp-speed", "9"], "unknown flag --warp-speed"),
        (&["players", "3"], "unexpected argument"),
        (&["suite", "--policy", "ra"], "unknown suite flag"),
        (
            &["suite", "--dir", "/nonexistent/rungs-sim-scenarios"],
            "cannot read",
        ),
    ];
    for (extra, expected) in cases {
        let mut args = vec!["--players", "4", "--frames", "3000"];
        if extra.first() == Some(&"suite") {
            args.clear();
        }
        args.extend_from_slice(extra);
        let output = rungs_sim(&args);
        assert_eq!(output.status.code(), Some(2), "rungs-sim {args:?}");
        let message = stderr(&output);
        assert!(message.contains(expected), "rungs-sim {args:?}: {message}");
        assert!(stdout(&output).is_empty(), "nothing on stdout for {args:?}");
    }
}

#[test]
fn a_machine_that_hears_nobody_drops_the_others_and_plays_on_alone() {
    // Every datagram lost: to each machine the other vanished (S4.7: any
    // number of crashes up to all but one), so each drops it by default
    // once its link is lost, and runs its frames alone.
    let output = rungs_sim(&["--players", "2", "--frames", "300", "--loss", "1"]);
    assert_eq!(output.status.code(), Some(0), "{}", stderr(&output));
    assert!(
        stdout(&output).contains("links lost 2"),
        "{}",
        stdout(&output)
    );
}

#[test]
fn a_crash_placed_in_seconds_lands_in_game_time() {
    // --crash SEAT@Ts: whatever the machine is doing, also while frames
    // wait for another drop.
    let game = run_ok(&[
        "--players",
        "4",
        "--frames",
        "600",
        "--rtt",
        "40",
        "--crash",
        "1@6.8s",
        "--crash",
        "2@7.3s",
        "--quit",
        "3@8s",
        "--liveness",
        "800",
    ]);
    assert!(game.contains("desyncs 0"), "{game}");
    assert!(game.contains("logs identical yes"), "{game}");
    let bad = rungs_sim(&["--players", "4", "--crash", "1@6.8"]);
    assert_eq!(bad.status.code(), Some(2), "a frame is a whole number");
    let bad = rungs_sim(&["--players", "4", "--crash", "1@x.5s"]);
    assert_eq!(bad.status.code(), Some(2));
    assert!(stderr(&bad).contains("SEAT@SECONDSs"), "{}", stderr(&bad));
}

#[test]
fn machines_that_disagree_exit_3_with_the_results() {
    // Seat 1's simulation goes wrong on frame 300: the checksums catch it.
    let output = rungs_sim(&[
        "--players",
        "3",
        "--frames",
        "900",
        "--diverge",
        "1@300",
        "--json",
    ]);
    assert_eq!(output.status.code(), Some(3), "{}", stderr(&output));
    let json = stdout(&output);
    assert!(
        json.contains("\"desyncs\":"),
        "results are still printed: {json}"
    );
    assert!(!json.contains("\"desyncs\":0"), "{json}");
}

#[test]
fn one_thread_and_two_give_the_same_json() {
    // Long enough (and far enough from a LAN) to be played in windows on
    // two threads for most of it (src/sim/game/parallel.rs).
    let game = [
        "--players",
        "6",
        "--frames",
        "900",
        "--rtt",
        "120",
        "--jitter",
        "20",
        "--loss",
        "2%",
        "--json",
    ];
    let one = run_ok(&[&game[..], &["--threads", "1"]].concat());
    let two = run_ok(&[&game[..], &["--threads", "2"]].concat());
    assert_eq!(one, two, "byte for byte");
    let usage = rungs_sim(&["--threads", "3"]);
    assert_eq!(usage.status.code(), Some(2), "{}", stderr(&usage));
}

#[test]
fn help_lists_every_flag() {
    let help = run_ok(&["--help"]);
    for flag in [
        "--players",
        "--frames",
        "--fps",
        "--rtt",
        "--jitter",
        "--loss",
        "--spike",
        "--proc-ms",
        "--policy",
        "--seed",
        "--json",
        "--svg",
        "--depart",
        "--commands-per-minute",
        "--scenario",
        "--threads",
    ] {
        assert!(help.contains(flag), "{flag} in --help");
    }
    let suite_help = run_ok(&["suite", "--help"]);
    for flag in ["--dir", "--frames", "--seed", "--json", "--svg-dir"] {
        assert!(suite_help.contains(flag), "{flag} in suite --help");
    }
}

#[test]
fn the_svg_is_well_formed_and_draws_the_timeline() {
    let dir = TempDir::new("svg");
    let file = dir.file("spike <&> \"test\".svg");
    let summary = run_ok(&small_game_with(&[
        "--frames",
        "1500",
        "--spike",
        "900@20+5/1",
        "--depart",
        "2@1200:crash",
        "--svg",
        &file,
    ]));
    assert!(summary.contains("svg"), "{summary}");
    let svg = std::fs::read_to_string(&file).expect("the SVG was written");
    assert_well_formed_xml(&svg);
    assert!(svg.contains("<svg xmlns=\"http://www.w3.org/2000/svg\""));
    assert!(
        svg.contains("rungs-sim: custom game with adaptive"),
        "title names the policy"
    );
    assert!(svg.contains("look-ahead (ms)"), "legend");
    assert!(svg.contains("<circle"), "floor samples");
    assert!(svg.contains("seat 2 crashes"), "departure marker");
    assert!(svg.contains("spike"), "spike legend");
    // The checker itself refuses what is not well formed.
    for broken in [
        "<svg><g></svg>",
        "<svg a=\"1\" a=\"2\"/>",
        "<svg>&nbsp;</svg>",
        "<a/><b/>",
    ] {
        assert!(
            std::panic::catch_unwind(|| assert_well_formed_xml(broken)).is_err(),
            "{broken}"
        );
    }
}

#[test]
fn the_suite_runs_every_policy_on_every_scenario_and_judges_the_targets() {
    let dir = TempDir::new("suite");
    std::fs::write(
        dir.path().join("calm.args"),
        "# a quiet LAN\n--players 3 --rtt 5\n",
    )
    .unwrap();
    std::fs::write(
        dir.path().join("rough.args"),
        "--players 3 --rtt 150 --jitter 30 --loss 0.02\n",
    )
    .unwrap();
    std::fs::write(dir.path().join("notes.txt"), "not a scenario\n").unwrap();
    let dir_arg = dir.path().to_str().unwrap();
    let table = run_ok(&["suite", "--dir", dir_arg, "--frames", "600"]);
    let policies = [
        "tracking",
        "adaptive",
        "ra",
        "protocol0",
        "protocol0-ts",
        "lobby",
        "fixed:2/6",
        "fixed:3/9",
    ];
    for scenario in ["calm", "rough"] {
        for policy in policies {
            assert!(
                table.lines().any(|line| {
                    let mut words = line.split_whitespace();
                    words.next() == Some(scenario) && words.next() == Some(policy)
                }),
                "a row for {scenario} {policy}:\n{table}"
            );
        }
    }
    for column in [
        "mean ms", "p95 ms", "×floor", "stalled", "stall %", "stall ms",
    ] {
        assert!(table.contains(column), "column {column}");
    }
    let verdicts = table
        .lines()
        .filter(|l| l.trim_start().starts_with("(a)") || l.trim_start().starts_with("(b)"));
    let verdicts: Vec<&str> = verdicts.collect();
    assert_eq!(
        verdicts.len(),
        8,
        "two targets on each of two scenarios for tracking and adaptive:\n{table}"
    );
    assert!(
        table.contains("targets for tracking (baselines ra, protocol0, protocol0-ts, lobby, fixed:2/6, fixed:3/9)"),
        "{table}"
    );
    assert!(
        table.contains("targets for adaptive (baselines ra, protocol0, fixed:2/6)"),
        "{table}"
    );
    assert!(verdicts
        .iter()
        .all(|l| l.contains("MET") || l.contains("MISSED") || l.contains("NOT JUDGED")));
    assert!(table.contains("suite speed:"), "{table}");

    let json = Json::parse(&run_ok(&[
        "suite", "--dir", dir_arg, "--frames", "600", "--json",
    ]));
    let runs = json.array();
    assert_eq!(runs.len(), 16);
    assert_eq!(runs[0].get("scenario"), &Json::Text("calm".into()));
    assert_eq!(runs[0].get("policy"), &Json::Text("tracking".into()));
    assert_eq!(runs[15].get("policy"), &Json::Text("fixed:3/9".into()));
    assert!(runs.iter().all(|run| run.get("frames").number() == 600.0));
}

#[test]
fn a_scenario_file_may_not_choose_the_policy() {
    let dir = TempDir::new("policy-in-scenario");
    std::fs::write(dir.path().join("bad.args"), "--rtt 50 --policy ra\n").unwrap();
    let output = rungs_sim(&[
        "suite",
        "--dir",
        dir.path().to_str().unwrap(),
        "--frames",
        "300",
    ]);
    assert_eq!(output.status.code(), Some(2));
    assert!(stderr(&output).contains("--policy does not belong in a scenario file"));
}

#[test]
fn the_shipped_scenarios_parse() {
    let dir = concat!(env!("CARGO_MANIFEST_DIR"), "/scenarios");
    for name in [
        "lan",
        "dsl",
        "transatlantic",
        "mobile",
        "spike",
        "mixed",
        "slow_cpu",
    ] {
        let file = format!("{dir}/{name}.args");
        // A short game of each, to check the files, not to measure them.
        let json = Json::parse(&run_ok(&["--scenario", &file, "--frames", "300", "--json"]));
        assert_eq!(json.get("scenario"), &Json::Text(name.into()));
    }
}

#[test]
fn a_sweep_condition_replays_from_its_printed_flags() {
    const CONDITION_5: &[&str] = &[
        "sweep",
        "--only",
        "5",
        "--frames",
        "900",
        "--conditions",
        "--jobs",
        "1",
    ];
    let out = run_ok(CONDITION_5);
    let line = out
        .lines()
        .find(|l| l.starts_with("#5: rungs-sim "))
        .unwrap_or_else(|| panic!("a line for condition 5 alone:\n{out}"));
    assert_eq!(out.lines().filter(|l| l.starts_with('#')).count(), 1);
    let flags = &line["#5: rungs-sim ".len()..line.find("; oracle").expect("the oracle")];
    let verdict = line.rsplit(" | ").next().unwrap();
    assert!(
        verdict == "met" || verdict.starts_with("missed: "),
        "{verdict}"
    );
    // "tracking 123.4 ms 0.56 %": the replay gives the same mean latency.
    let tracking = line
        .split(" | ")
        .find(|part| part.starts_with("tracking "))
        .expect("tracking's figures");
    let mean_ms = tracking.split(' ').nth(1).unwrap();
    let mut args: Vec<&str> = flags.split_whitespace().collect();
    args.extend(["--policy", "tracking"]);
    let replay = run_ok(&args);
    assert!(
        replay.contains(&format!("latency    mean {mean_ms} ms")),
        "{line}\n{replay}"
    );
    // The JSON carries the same condition as an object.
    let json = run_ok(&[CONDITION_5, &["--json"]].concat());
    assert!(json.contains("\"conditions\""), "{json}");
    assert!(json.contains(&format!("\"flags\":\"{flags}\"")), "{json}");
}
