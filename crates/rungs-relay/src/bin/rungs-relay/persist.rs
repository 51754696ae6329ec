//! `serve --state DIR` and `export`: the relay's matches on disk
//! ([`super::store`]), hooked into the serving loop, and a match's turn
//! log written out for replays.

use std::collections::HashSet;
use std::path::{Path, PathBuf};
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use rungs_core::relay::{Relay, RelayEvent, TurnLog};

use super::journal::Clock;
use super::store::{read_journal, Store, DEFAULT_SYNC_MS};
use super::Args;

/// The wall clock, µs since the Unix epoch.
fn unix_us() -> i64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| d.as_micros() as i64)
}

/// The serving loop's persistence: the store, when `--state` names one.
pub struct Persistence {
    store: Option<Store>,
    /// Match ids the setup file has added (a match removed after it ended
    /// is not added again when the file changes).
    from_setup_file: HashSet<u64>,
}

impl Persistence {
    /// Read `--state`, `--state-sync-ms`, `--keep-turn-logs`; open the
    /// store and resume every match it holds in `relay` (which must have
    /// been made with `RelayConfig::persistent` when a state directory is
    /// named: `wanted`). Log lines go to `log`.
    pub fn open(
        args: &Args,
        relay: &mut Relay,
        now_us: u64,
        log: impl Fn(&str),
    ) -> Result<Persistence, String> {
        let Some(dir) = state_dir(args) else {
            log("no --state: a restart of this relay loses every match it holds (docs/relay.md, \"Surviving a restart\")");
            return Ok(Persistence {
                store: None,
                from_setup_file: HashSet::new(),
            });
        };
        let sync_ms: u64 = args.number(
            "state-sync-ms",
            Some("RUNGS_RELAY_STATE_SYNC_MS"),
            Some(DEFAULT_SYNC_MS),
        )?;
        if sync_ms == 0 {
            return Err("--state-sync-ms must be at least 1".into());
        }
        let keep = match args
            .get("keep-turn-logs", Some("RUNGS_RELAY_KEEP_TURN_LOGS"))
            .as_deref()
        {
            None | Some("no") | Some("0") => false,
            Some("yes") | Some("1") => true,
            Some(other) => return Err(format!("--keep-turn-logs: `{other}` is not yes or no")),
        };
        let clock = Clock {
            now_us,
            unix_us: unix_us(),
        };
        let opened = Store::open(&dir, clock, Duration::from_millis(sync_ms), keep)?;
        for note in &opened.notes {
            log(note);
        }
        let mut store = opened.store;
        for (id, state) in &opened.matches {
            match relay.restore_match(state, now_us) {
                Ok(()) => log(&match state.over {
                    None => format!(
                        "match {id} resumed from its journal: {} entries, ticks below {} kept",
                        state.entries.len(),
                        state.end_tick()
                    ),
                    Some((tick, reason)) => {
                        format!("match {id} resumed as ended at tick {tick} ({reason:?})")
                    }
                }),
                Err(e) => log(&format!("match {id}: cannot resume it: {e}")),
            }
        }
        log(&format!(
            "state in {}: journal synced every {sync_ms} ms{}",
            dir.display(),
            if keep { ", turn logs kept" } else { "" }
        ));
        store.flush();
        Ok(Persistence {
            store: Some(store),
            from_setup_file: HashSet::new(),
        })
    }

    /// Whether the setup file may add a match with this id: not one it
    /// added before, nor one the state holds or saw end.
    pub fn may_add(&self, match_id: u64) -> bool {
        !self.from_setup_file.contains(&match_id)
            && !self.store.as_ref().is_some_and(|s| s.knows(match_id))
    }

    /// The setup file added this match.
    pub fn added(&mut self, match_id: u64) {
        self.from_setup_file.insert(match_id);
    }

    /// Write the relay's new records: call after handling datagrams and
    /// timers, before sending anything (write-ahead). A failed write is
    /// logged now and then.
    pub fn write_ahead(&mut self, relay: &mut Relay, log: impl Fn(&str)) {
        let Some(store) = self.store.as_mut() else {
            return;
        };
        store.take(relay);
        if let Some(e) = store.flush() {
            if store.write_errors.is_power_of_two() {
                log(&format!(
                    "cannot write the journal ({} failures so far): {e}; matches go on, but a restart may lose them",
                    store.write_errors
                ));
            }
        }
        store.clean(relay);
    }

    /// An event of the relay: a removed match's records are dead.
    pub fn event(&mut self, event: &RelayEvent) {
        if let (Some(store), RelayEvent::Removed { match_id }) = (self.store.as_mut(), event) {
            store.removed(*match_id);
        }
    }
}

/// The state directory `--state` or `RUNGS_RELAY_STATE` names.
pub fn state_dir(args: &Args) -> Option<PathBuf> {
    args.get("state", Some("RUNGS_RELAY_STATE"))
        .map(PathBuf::from)
}

/// `rungs-relay export --state DIR --match ID --out FILE`: the match's whole
/// turn log (an ended match's from `turn-logs/`, else as far as the
/// journal holds it: a running match's final ticks) in the turn log format.
pub fn export(args: &Args) -> Result<(), String> {
    args.check_known(&["state", "match", "out"])?;
    let dir = state_dir(args).ok_or("--state DIR is required (the relay's state directory)")?;
    let id: u64 = args.number("match", None, None)?;
    let out: PathBuf = args
        .get("out", None)
        .map(PathBuf::from)
        .ok_or("--out FILE is required")?;
    let kept = dir.join("turn-logs").join(format!("{id}.rlog"));
    let log = if kept.exists() {
        let bytes = std::fs::read(&kept).map_err(|e| format!("io:{}: {e}", kept.display()))?;
        TurnLog::decode(&bytes).map_err(|e| format!("{}: {e}", kept.display()))?
    } else {
        let clock = Clock {
            now_us: 0,
            unix_us: unix_us(),
        };
        let (states, notes) = read_journal(&dir, clock)?;
        for note in notes {
            eprintln!("rungs-relay: {note}");
        }
        let state = states.get(&id).ok_or_else(|| {
            format!(
                "match {id} is not in {} (an ended match stays there only until the relay cleans its journal or restarts; `--keep-turn-logs yes` keeps every ended match's turn log)",
                dir.display()
            )
        })?;
        TurnLog::from_state(state)
    };
    write_file(&out, &log.encode())?;
    eprintln!(
        "rungs-relay: match {id}: {} entries, ticks 0 to {}{}, {} checksum rounds -> {}",
        log.entries.len(),
        log.end_tick,
        match log.over {
            Some(reason) => format!(" (ended: {reason:?})"),
            None => " (still running)".to_string(),
        },
        log.checksums.len(),
        out.display()
    );
    Ok(())
}

fn write_file(path: &Path, bytes: &[u8]) -> Result<(), String> {
    std::fs::write(path, bytes).map_err(|e| format!("io:{}: {e}", path.display()))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_setup_file_line_is_played_once() {
        // Without a state directory: a match the file added, which ended and
        // was removed, is not added again when the file changes.
        let mut p = Persistence {
            store: None,
            from_setup_file: HashSet::new(),
        };
        assert!(p.may_add(7));
        p.added(7);
        assert!(!p.may_add(7));
        assert!(p.may_add(8));
    }
}
