//! Every timing vector in `tests/vectors` replays exactly through the Rust API
//! (docs/model.md S2–S6; the C replays in ffi-tests do the same through the C API).

use std::path::PathBuf;

use rungs_core::timing::replay::{first_difference, replay, Expect, Vector};

fn vectors_dir() -> PathBuf {
    std::env::var_os("RUNGS_VECTORS")
        .map(PathBuf::from)
        .unwrap_or_else(|| PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("tests/vectors"))
}

/// Expected lines in the replay's order: sends, forces, messages.
fn in_replay_order(expects: &[Expect]) -> Vec<Expect> {
    let rank = |e: &Expect| match e {
        Expect::Send { .. } => 0,
        Expect::Force { .. } => 1,
        Expect::Message { .. } => 2,
    };
    let mut sorted = expects.to_vec();
    sorted.sort_by_key(|e| rank(e)); // stable: file order within each kind
    sorted
}

#[test]
fn timing_vectors_replay_exactly() {
    let dir = vectors_dir();
    let mut files: Vec<PathBuf> = std::fs::read_dir(&dir)
        .unwrap_or_else(|e| panic!("cannot read vectors at {}: {e}", dir.display()))
        .map(|entry| entry.unwrap().path())
        .filter(|p| p.extension().is_some_and(|x| x == "vec"))
        .collect();
    files.sort();
    let minimum = if std::env::var_os("RUNGS_VECTORS").is_some() {
        1
    } else {
        13
    };
    assert!(
        files.len() >= minimum,
        "expected at least {minimum} vectors in {}",
        dir.display()
    );
    let mut failures = Vec::new();
    for file in &files {
        let text = std::fs::read_to_string(file).unwrap();
        let vector = Vector::parse(&text).unwrap_or_else(|e| panic!("{}: {e}", file.display()));
        let actual = replay(&vector).unwrap_or_else(|e| panic!("{}: {e}", file.display()));
        if let Some(diff) = first_difference(&in_replay_order(&vector.expects), &actual) {
            failures.push(format!(
                "{}: {diff}",
                file.file_name().unwrap().to_string_lossy()
            ));
        }
    }
    assert!(
        failures.is_empty(),
        "{} of {} vectors failed:\n{}",
        failures.len(),
        files.len(),
        failures.join("\n")
    );
}
