//! Cuts cbindgen's single output into items and writes the C API as tiered
//! headers, each in topic order (docs/c-api.md, "Which header").
//!
//! cbindgen groups what it writes by kind (constants, then types, then
//! functions), so `RUNGS_LOCKSTEP_RAN` would sit thousands of lines above
//! `rungs_lockstep_update`. Here every item (its doc comment and its
//! declaration) is mapped by name to a topic of one header in `TOPICS`, and
//! each header is written topic by topic, so a family's constants and structs
//! sit beside the functions that use them. An exported item that no topic
//! names stops the build: a new function cannot be left out of the headers.

use std::collections::{BTreeMap, BTreeSet};

/// One of the headers under `include/rungs/`.
#[derive(Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Debug)]
pub enum Header {
    Common,
    Lockstep,
    Report,
    Session,
    Pieces,
}

impl Header {
    pub const ALL: [Header; 5] = [
        Header::Common,
        Header::Lockstep,
        Header::Report,
        Header::Session,
        Header::Pieces,
    ];

    pub fn file_name(self) -> &'static str {
        match self {
            Header::Common => "common.h",
            Header::Lockstep => "lockstep.h",
            Header::Report => "report.h",
            Header::Session => "session.h",
            Header::Pieces => "pieces.h",
        }
    }

    fn guard(self) -> &'static str {
        match self {
            Header::Common => "RUNGS_COMMON_H",
            Header::Lockstep => "RUNGS_LOCKSTEP_H",
            Header::Report => "RUNGS_REPORT_H",
            Header::Session => "RUNGS_SESSION_H",
            Header::Pieces => "RUNGS_PIECES_H",
        }
    }

    /// The headers this one includes; what it declares may use their items.
    fn includes(self) -> &'static [Header] {
        match self {
            Header::Common => &[],
            Header::Lockstep | Header::Report => &[Header::Common],
            // Both build on the reports: the engine session lends its
            // measurements and queues the payloads; the timing machine
            // executes the reports and timing events.
            Header::Session | Header::Pieces => &[Header::Common, Header::Report],
        }
    }

    fn reaches(self, other: Header) -> bool {
        self == other || self.includes().iter().any(|h| h.reaches(other))
    }

    fn summary(self) -> &'static str {
        match self {
            Header::Common => {
                "what every tier shares: the version, result codes and error\n \
                 * calls, the calling-convention and import macros, and the timing\n \
                 * vocabulary (a timing pair, its tier and label, the adaptation\n \
                 * policy, the status snapshot)."
            }
            Header::Lockstep => {
                "the all-in-one lockstep session: rungs runs the game's network\n \
                 * loop (sockets, turns, drops, checksums, adaptive timing), peer to\n \
                 * peer or through a relay. With rungs/common.h, which it includes,\n \
                 * this is the whole API a game adopting rungs this way needs."
            }
            Header::Report => {
                "reports and event payloads, what the engine session and the\n \
                 * pieces share: the measurements a machine takes its reports from,\n \
                 * the one report struct with its optional sections, and the\n \
                 * TIMING and NETWORK_REPORT payload codecs."
            }
            Header::Session => {
                "the engine-session path: an engine that keeps its own lockstep\n \
                 * loop and packets asks rungs for the frames to send on and the\n \
                 * payloads to put in them, and measures its frames and waits on the\n \
                 * measurements the session lends it (rungs/report.h)."
            }
            Header::Pieces => {
                "the pieces the two sessions are built from, each usable alone: the\n \
                 * timing ladder, the timing machine, measurements, the endpoint\n \
                 * (authenticated transport), clock and pacer, and the relay host."
            }
        }
    }
}

/// A topic: a run of one header, under a short comment. `names` are item
/// names (case-insensitive); one ending in `*` is a prefix. An item belongs
/// to the topic naming it most precisely: exactly, else by longest prefix.
pub struct Topic {
    pub header: Header,
    pub title: &'static str,
    pub names: &'static [&'static str],
}

use Header::{Common, Lockstep, Pieces, Report, Session};

pub const TOPICS: &[Topic] = &[
    // common.h
    Topic {
        header: Common,
        title: "Version: compare what you compiled against with what you loaded",
        names: &["rungs_abi_version", "rungs_version"],
    },
    Topic {
        header: Common,
        title: "Results and errors",
        names: &["rungs_result*", "rungs_ok", "rungs_err_*", "rungs_last_error_message"],
    },
    Topic {
        header: Common,
        title: "Protocol versions: what a lobby compares before players meet",
        names: &[
            "rungs_protocol",
            "rungs_protocol_wire",
            "rungs_protocol_turn",
            "rungs_protocol_relay",
            "rungs_protocol_versions",
            "rungs_read_protocol_versions",
            // Told by a lockstep session and by an endpoint.
            "rungs_protocol_mismatch_fn",
        ],
    },
    Topic {
        header: Common,
        title: "Timing vocabulary shared by every tier: a timing, its tier and label, the policy",
        names: &[
            "rungs_timing",
            "rungs_tier*",
            "rungs_timing_label",
            "rungs_label_capacity",
            "rungs_policy*",
            "rungs_no_seat",
            "rungs_socket",
            // The endpoint's handle: an engine session samples an endpoint's links.
            "rungs_endpoint",
        ],
    },
    Topic {
        header: Common,
        title: "The timing status snapshot (rungs_*_status of either session)",
        names: &["rungs_timing_status", "rungs_verdict*"],
    },
    Topic {
        header: Common,
        title: "Callbacks shared by the sessions and pieces: timing, frame rate, messages, seats, links",
        names: &[
            "rungs_timing_changed_fn",
            "rungs_frame_rate_changed_fn",
            "rungs_player_message_fn",
            "rungs_seat_event_fn",
            "rungs_link_event*",
        ],
    },
    // lockstep.h
    Topic {
        header: Lockstep,
        title: "Callbacks: what the session tells the game",
        names: &[
            "rungs_lockstep_callbacks",
            "rungs_command_fn",
            "rungs_desync_fn",
            "rungs_relay_seat",
        ],
    },
    Topic {
        header: Lockstep,
        title: "Create and configure a session",
        names: &[
            "rungs_lockstep",
            "rungs_lockstep_config*",
            "rungs_topology*",
            "rungs_relay_default_jitter_ticks",
            "rungs_link_key",
            "rungs_lockstep_new",
            "rungs_lockstep_replay_new",
            "rungs_lockstep_set_user",
            "rungs_lockstep_set_protocol_mismatch",
            "rungs_lockstep_local_port",
            "rungs_lockstep_socket",
        ],
    },
    Topic {
        header: Lockstep,
        title: "Relay topology: tickets, credentials and the relay's callbacks",
        names: &[
            "rungs_relay_ticket_*",
            "rungs_relay_secret_bytes",
            "rungs_relay_credentials_*",
            "rungs_relay_callbacks",
            "rungs_order_refused_fn",
            "rungs_order_refus*",
            "rungs_lockstep_set_relay_callbacks",
        ],
    },
    Topic {
        header: Lockstep,
        title: "Peers",
        names: &["rungs_lockstep_add_peer"],
    },
    Topic {
        header: Lockstep,
        title: "The frame loop",
        names: &[
            "rungs_lockstep_update*",
            "rungs_lockstep_outcome",
            "rungs_lockstep_ran",
            "rungs_lockstep_not_due",
            "rungs_lockstep_waiting",
            "rungs_lockstep_left",
            "rungs_lockstep_add_frame_work_us",
        ],
    },
    Topic {
        header: Lockstep,
        title: "Commands, orders and AI orders",
        names: &[
            "rungs_lockstep_submit_command",
            "rungs_lockstep_submit_order",
            "rungs_order_kind",
            "rungs_order_command",
            "rungs_order_quit",
            "rungs_order_ephemeral",
            "rungs_lockstep_submit_ai_order*",
            "rungs_lockstep_ai_decision_*",
        ],
    },
    Topic {
        header: Lockstep,
        title: "Leaving and drops",
        names: &["rungs_lockstep_leave", "rungs_lockstep_drop_player"],
    },
    Topic {
        header: Lockstep,
        title: "Checksums",
        names: &[
            "rungs_lockstep_submit_checksum",
            "rungs_lockstep_is_checksum_frame",
            "rungs_lockstep_submit_initial_checksum",
        ],
    },
    Topic {
        header: Lockstep,
        title: "Status and statistics",
        names: &["rungs_lockstep_status", "rungs_lockstep_stats", "rungs_lockstep_read_stats"],
    },
    Topic {
        header: Lockstep,
        title: "Teardown",
        names: &["rungs_lockstep_free"],
    },
    // report.h
    Topic {
        header: Report,
        title: "The report: one struct, optional detail and needs sections",
        names: &[
            "rungs_report",
            "rungs_report_init",
            "rungs_report_sections",
            "rungs_report_detail",
            "rungs_report_needs",
            "rungs_look_ahead_needs",
            "rungs_need_levels",
        ],
    },
    Topic {
        header: Report,
        title: "Measurements: what a machine measures for its reports",
        names: &["rungs_measurements*", "rungs_needed_look_ahead", "rungs_is_report_frame"],
    },
    Topic {
        header: Report,
        title: "Payloads: the TIMING and NETWORK_REPORT bytes of the engine's events",
        names: &[
            "rungs_report_layout*",
            "rungs_report_payload_*",
            "rungs_report_extended_payload_len",
            "rungs_report_detailed_payload_len",
            "rungs_report_needs_payload_len",
            "rungs_ts_fog_bias",
            "rungs_timing_event",
            "rungs_timing_payload_*",
            "rungs_ra_timing_payload_*",
        ],
    },
    // session.h
    Topic {
        header: Session,
        title: "Create and configure an engine session",
        names: &[
            "rungs_session",
            "rungs_session_config*",
            "rungs_session_callbacks",
            "rungs_queue_event_fn",
            "rungs_send_frame_fn",
            "rungs_log*",
            "rungs_send_order",
            "rungs_send_*",
            "rungs_no_event_id",
            "rungs_session_new",
            "rungs_session_set_user",
            "rungs_session_set_speed",
        ],
    },
    Topic {
        header: Session,
        title: "The frame loop",
        names: &[
            "rungs_session_frame_*",
            "rungs_session_required_send_frame",
            "rungs_session_event_executed",
            "rungs_session_submit_command",
            "rungs_session_player_removed",
            "rungs_no_frame",
        ],
    },
    Topic {
        header: Session,
        title: "Packets: tags, watermarks and peer cuts",
        names: &[
            "rungs_session_packet_*",
            "rungs_session_peers_ready",
            "rungs_session_due_tags",
            "rungs_session_peer_cut",
            "rungs_session_cut_tag",
            "rungs_no_packet",
        ],
    },
    Topic {
        header: Session,
        title: "Measurements: the session lends its own; round trips it takes itself",
        names: &[
            "rungs_session_measurements",
            "rungs_session_rtt_*",
            "rungs_session_sample_links",
        ],
    },
    Topic {
        header: Session,
        title: "Status and teardown",
        names: &["rungs_session_status", "rungs_session_free"],
    },
    // pieces.h
    Topic {
        header: Pieces,
        title: "The timing ladder: timings from round-trip times and back",
        names: &[
            "rungs_rung_timing",
            "rungs_one_way_frames*",
            "rungs_required_timing",
            "rungs_timing_validate",
            "rungs_timing_compare",
            "rungs_timing_slider_position",
            "rungs_timing_tier",
        ],
    },
    Topic {
        header: Pieces,
        title: "The timing machine: the session's timing without its network",
        names: &["rungs_timing_machine*", "rungs_timing_callbacks"],
    },
    Topic {
        header: Pieces,
        title: "The endpoint: authenticated datagrams between seats",
        names: &[
            "rungs_endpoint*",
            "rungs_received",
            "rungs_link_stats",
            "rungs_link_clean_measurement",
            "rungs_link_retransmitting",
            "rungs_link_lost",
            "rungs_max_message_bytes",
            "rungs_max_packet_bytes",
            "rungs_keepalive_off",
            "rungs_rtt_none",
            "rungs_never_heard",
            "rungs_drop_*",
        ],
    },
    Topic {
        header: Pieces,
        title: "Clock and pacer: a shared timeline and frame starts on it",
        names: &["rungs_clock*", "rungs_offset_estimate", "rungs_pacer*"],
    },
    Topic {
        header: Pieces,
        title: "The relay host: a relay inside a game or tool",
        names: &["rungs_relay_host*", "rungs_seat_presence", "rungs_seat_*"],
    },
];

#[derive(Clone, Copy, PartialEq, Eq)]
enum Kind {
    Constant,
    Type,
    Function,
}

/// One declaration of cbindgen's output with the doc comment above it.
struct Item {
    name: String,
    kind: Kind,
    text: String,
    /// The `rungs_*` names the declaration (not its comments) uses.
    uses: BTreeSet<String>,
}

/// The items of cbindgen's output, in its order. `body` is what follows the
/// preamble (includes and `after_includes`), up to the include guard's end.
fn items(body: &str) -> Vec<Item> {
    let mut items = Vec::new();
    for chunk in body.split("\n\n") {
        let chunk = chunk.trim_matches('\n');
        let lines: Vec<&str> = chunk
            .lines()
            .filter(|l| {
                let t = l.trim();
                !(t == "#ifdef __cplusplus"
                    || t == "extern \"C\" {"
                    || t == "} /* extern \"C\" */"
                    || t == "#endif /* __cplusplus */")
            })
            .collect();
        if lines.is_empty() {
            continue;
        }
        let text = lines.join("\n");
        let mut in_doc = false;
        let mut decl_at = lines.len();
        for (i, line) in lines.iter().enumerate() {
            let t = line.trim_start();
            if i == 0 && t.starts_with("/**") {
                in_doc = true;
            }
            if !in_doc {
                decl_at = i;
                break;
            }
            if t.contains("*/") {
                in_doc = false;
            }
        }
        let declaration = lines[decl_at.min(lines.len())..].join("\n");
        let code = without_comments(&declaration);
        let (kind, name) = if let Some(rest) = code.strip_prefix("#define ") {
            (
                Kind::Constant,
                rest.split_whitespace().next().unwrap_or("").to_string(),
            )
        } else if code.starts_with("RUNGS_API") {
            let at = super::function_name_start(&code)
                .unwrap_or_else(|| panic!("no function name in: {code}"));
            (Kind::Function, identifier_at(&code, at))
        } else if code.starts_with("typedef ") {
            let name = match code.find("(RUNGS_CALL *") {
                Some(at) => identifier_at(&code, at + "(RUNGS_CALL *".len()),
                None => last_identifier(&code),
            };
            (Kind::Type, name)
        } else {
            panic!("build.rs cannot tell what this cbindgen output declares:\n{chunk}");
        };
        assert!(
            !name.is_empty(),
            "no name in cbindgen output item:\n{chunk}"
        );
        let uses = rungs_names(&code)
            .into_iter()
            .filter(|n| *n != name)
            .collect();
        items.push(Item {
            name,
            kind,
            text,
            uses,
        });
    }
    items
}

fn is_ident(b: u8) -> bool {
    b.is_ascii_alphanumeric() || b == b'_'
}

fn identifier_at(text: &str, at: usize) -> String {
    text[at..]
        .bytes()
        .take_while(|b| is_ident(*b))
        .map(char::from)
        .collect()
}

/// The name a `typedef ... name;` declares: the last identifier before `;`.
fn last_identifier(code: &str) -> String {
    let end = code.rfind(';').unwrap_or(code.len());
    let bytes = code[..end].trim_end().as_bytes();
    let mut start = bytes.len();
    while start > 0 && is_ident(bytes[start - 1]) {
        start -= 1;
    }
    String::from_utf8_lossy(&bytes[start..]).into_owned()
}

fn without_comments(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    let mut rest = text;
    while let Some(at) = rest.find("/*") {
        out.push_str(&rest[..at]);
        rest = match rest[at..].find("*/") {
            Some(end) => &rest[at + end + 2..],
            None => "",
        };
    }
    out.push_str(rest);
    out.lines()
        .map(|l| l.find("//").map_or(l, |at| &l[..at]))
        .collect::<Vec<_>>()
        .join("\n")
        .trim()
        .to_string()
}

fn rungs_names(code: &str) -> BTreeSet<String> {
    let bytes = code.as_bytes();
    let mut names = BTreeSet::new();
    let mut i = 0;
    while i < bytes.len() {
        if is_ident(bytes[i]) && (i == 0 || !is_ident(bytes[i - 1])) {
            let name = identifier_at(code, i);
            i += name.len();
            if name.starts_with("rungs_") {
                names.insert(name);
            }
        } else {
            i += 1;
        }
    }
    names
}

/// The topic that names `name` most precisely, by index into `TOPICS`.
fn topic_of(name: &str) -> usize {
    let lower = name.to_ascii_lowercase();
    let mut best: Option<(usize, usize)> = None; // (precision, topic)
    for (t, topic) in TOPICS.iter().enumerate() {
        for pattern in topic.names {
            let precision = match pattern.strip_suffix('*') {
                Some(prefix) if lower.starts_with(prefix) => prefix.len(),
                None if lower == *pattern => usize::MAX,
                _ => continue,
            };
            match best {
                Some((p, other)) if p == precision && other != t => panic!(
                    "build.rs: `{name}` is named equally by the topics \"{}\" and \"{}\" \
                     of build/headers.rs; name it in one",
                    TOPICS[other].title, topic.title
                ),
                Some((p, _)) if p >= precision => {}
                _ => best = Some((precision, t)),
            }
        }
    }
    match best {
        Some((_, t)) => t,
        None => panic!(
            "build.rs: the C API item `{name}` is in no topic of build/headers.rs: \
             add it to TOPICS so it lands in a header"
        ),
    }
}

/// The headers' texts by file name: each `include/rungs/*.h`, and
/// `include/rungs.h`, which includes them all. `conventions` opens common.h
/// (cbindgen.toml's `header`); `macros` is its `after_includes`.
pub fn write_headers(
    body: &str,
    conventions: &str,
    macros: &str,
    autogen: &str,
) -> BTreeMap<String, String> {
    let items = items(body);
    let by_name: BTreeMap<&str, usize> = items
        .iter()
        .enumerate()
        .map(|(i, it)| (it.name.as_str(), i))
        .collect();
    let topic: Vec<usize> = items.iter().map(|it| topic_of(&it.name)).collect();

    // Every name an item uses must be declared in its header or one it includes.
    for (i, item) in items.iter().enumerate() {
        let header = TOPICS[topic[i]].header;
        for used in &item.uses {
            if let Some(&j) = by_name.get(used.as_str()) {
                let home = TOPICS[topic[j]].header;
                if !header.reaches(home) {
                    panic!(
                        "build.rs: `{}` ({}) uses `{used}`, which build/headers.rs puts in {}, \
                         a header {} does not include; move one of them",
                        item.name,
                        header.file_name(),
                        home.file_name(),
                        header.file_name()
                    );
                }
            }
        }
    }

    let mut out = BTreeMap::new();
    for header in Header::ALL {
        let mut text = String::new();
        if header == Common {
            text.push_str(conventions.trim_end());
            text.push_str("\n\n/*\n * rungs/common.h: ");
        } else {
            text.push_str(&format!("/*\n * rungs/{}: ", header.file_name()));
        }
        text.push_str(header.summary());
        text.push_str("\n */\n\n");
        text.push_str(&format!(
            "#ifndef {0}\n#define {0}\n\n{autogen}\n\n",
            header.guard()
        ));
        if header == Common {
            text.push_str("#include <stdint.h>\n#include <stddef.h>\n");
            text.push_str(macros.trim_end());
            text.push('\n');
            text.push_str(&version_macros());
        } else {
            for inc in header.includes() {
                text.push_str(&format!("#include \"{}\"\n", inc.file_name()));
            }
        }
        text.push_str("\n#ifdef __cplusplus\nextern \"C\" {\n#endif /* __cplusplus */\n");

        let mut written = vec![false; items.len()];
        for (t, topic_entry) in TOPICS.iter().enumerate() {
            if topic_entry.header != header {
                continue;
            }
            let members: Vec<usize> = (0..items.len()).filter(|&i| topic[i] == t).collect();
            if members.is_empty() {
                panic!(
                    "build.rs: the topic \"{}\" names no item of the C API",
                    topic_entry.title
                );
            }
            text.push_str(&format!("\n/* ==== {} ==== */\n", topic_entry.title));
            for i in members {
                write_item(i, header, &items, &by_name, &topic, &mut written, &mut text);
            }
        }
        text.push_str("\n#ifdef __cplusplus\n} /* extern \"C\" */\n#endif /* __cplusplus */\n\n");
        text.push_str(&format!("#endif /* {} */\n", header.guard()));
        out.insert(format!("rungs/{}", header.file_name()), text);
    }

    let mut all = String::from(
        "/*\n * rungs — adaptive network timing for lockstep games. C API, every tier.\n *\n \
         * Include the header of the way you adopt rungs (docs/c-api.md):\n \
         *   rungs/lockstep.h  the all-in-one lockstep session;\n \
         *   rungs/session.h   the engine-session path (your loop, rungs' timing);\n \
         *   rungs/report.h    reports and payloads (session.h and pieces.h include it);\n \
         *   rungs/pieces.h    the pieces on their own.\n \
         * This header includes them all, so programs written against it keep\n \
         * building unchanged.\n */\n\n#ifndef RUNGS_H\n#define RUNGS_H\n\n",
    );
    all.push_str(autogen);
    all.push_str("\n\n");
    for header in Header::ALL {
        all.push_str(&format!("#include \"rungs/{}\"\n", header.file_name()));
    }
    all.push_str("\n#endif /* RUNGS_H */\n");
    out.insert("rungs.h".to_string(), all);
    out
}

/// Write item `i` into `header`'s text, after any item of the same header it
/// uses that is not written yet (C declares before use).
fn write_item(
    i: usize,
    header: Header,
    items: &[Item],
    by_name: &BTreeMap<&str, usize>,
    topic: &[usize],
    written: &mut [bool],
    text: &mut String,
) {
    if written[i] {
        return;
    }
    written[i] = true;
    for used in &items[i].uses {
        if let Some(&j) = by_name.get(used.as_str()) {
            if TOPICS[topic[j]].header == header && items[j].kind != Kind::Function {
                write_item(j, header, items, by_name, topic, written, text);
            }
        }
    }
    text.push('\n');
    text.push_str(&items[i].text);
    text.push('\n');
}

/// The library version this header came with (Cargo.toml's), for tests at
/// compile time; `rungs_version()` returns the same string at run time.
fn version_macros() -> String {
    let part = |name: &str, value: &str| -> u32 {
        let n = value
            .parse()
            .unwrap_or_else(|_| panic!("{name} {value} is not a number"));
        assert!(
            n < 100 || name == "major",
            "RUNGS_VERSION_NUMBER needs a {name} below 100"
        );
        n
    };
    let major = part("major", env!("CARGO_PKG_VERSION_MAJOR"));
    let minor = part("minor", env!("CARGO_PKG_VERSION_MINOR"));
    let patch = part("patch", env!("CARGO_PKG_VERSION_PATCH"));
    format!(
        "\n/*\n * The version of the library this header came with. rungs_version()\n \
         * returns the loaded library's RUNGS_VERSION_STRING; RUNGS_ABI_VERSION\n \
         * below says whether the two are compatible.\n \
         * RUNGS_VERSION_NUMBER is MAJOR * 10000 + MINOR * 100 + PATCH.\n */\n\
         #define RUNGS_VERSION_MAJOR {major}\n\
         #define RUNGS_VERSION_MINOR {minor}\n\
         #define RUNGS_VERSION_PATCH {patch}\n\
         #define RUNGS_VERSION_STRING \"{}\"\n\
         #define RUNGS_VERSION_NUMBER {}\n",
        env!("CARGO_PKG_VERSION"),
        major * 10000 + minor * 100 + patch
    )
}
