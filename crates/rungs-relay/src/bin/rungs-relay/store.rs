//! The relay's state on disk (`rungs-relay serve --state DIR`): what lets
//! every live match survive a restart of the relay (`docs/relay.md`,
//! "Surviving a restart").
//!
//! * **The journal**: every match's durable records
//!   ([`rungs_core::relay::DurableRecord`], framed by [`super::journal`]) appended to
//!   segment files `journal-NNNNNNNN.rlog`, one `write` per loop iteration
//!   and before anything that iteration caused is sent (write-ahead: a
//!   `kill -9` loses nothing a client saw). A thread of its own calls
//!   `fdatasync` on the current segment every sync interval (`--state-sync-ms`,
//!   1000 by default): a power loss or an OS crash loses at most that much.
//! * **Cleaning**: a segment that grew past [`SEGMENT_BYTES`] is closed and
//!   a new one opened. The oldest segment is deleted once no live match
//!   has records in it; a live match that pins it while newer segments pile
//!   up is copied whole into the current segment first (its state, as
//!   records: idempotent, so the copy and the original fold to the same).
//!   At start the store reads every segment, writes every match it found
//!   into a fresh segment, syncs it and deletes the old ones.
//! * **Finished matches**: `finished`, one line per ended match (`ID
//!   FINAL_TICK REASON`), kept for good so a setup file's line for a match
//!   that ended is never played again; with `--keep-turn-logs`, each ended
//!   match's whole turn log in `turn-logs/ID.rlog` ([`rungs_core::relay::TurnLog`],
//!   what `rungs-relay export` writes), for replays.

use std::collections::{BTreeMap, HashMap, HashSet};
use std::fs::{File, OpenOptions};
use std::io::Write;
use std::path::{Path, PathBuf};
use std::sync::mpsc::{channel, RecvTimeoutError, Sender};
use std::thread::JoinHandle;
use std::time::Duration;

use rungs_core::relay::{DurableRecord, MatchState, Relay, TurnLog};

use super::journal::{decode, encode, Clock, Read};

/// A segment is closed when it grows past this size.
pub const SEGMENT_BYTES: u64 = 64 << 20;
/// Segments kept behind the current one before the oldest one's live
/// matches are copied forward so it can go.
const SEGMENTS_BEHIND: usize = 2;
/// The default interval between two `fdatasync`s of the journal.
pub const DEFAULT_SYNC_MS: u64 = 1000;

fn segment_path(dir: &Path, number: u64) -> PathBuf {
    dir.join(format!("journal-{number:08}.rlog"))
}

/// The segment numbers in `dir`, oldest first.
fn segments(dir: &Path) -> Result<Vec<u64>, String> {
    let mut numbers = Vec::new();
    let entries =
        std::fs::read_dir(dir).map_err(|e| format!("io:--state {}: {e}", dir.display()))?;
    for entry in entries.flatten() {
        let name = entry.file_name();
        let name = name.to_string_lossy();
        if let Some(n) = name
            .strip_prefix("journal-")
            .and_then(|rest| rest.strip_suffix(".rlog"))
            .and_then(|n| n.parse().ok())
        {
            numbers.push(n);
        }
    }
    numbers.sort_unstable();
    Ok(numbers)
}

/// Every match the journal in `dir` holds, folded, and what the reading
/// noticed (damaged records; `None`-safe: a missing directory holds none).
pub fn read_journal(
    dir: &Path,
    clock: Clock,
) -> Result<(BTreeMap<u64, MatchState>, Vec<String>), String> {
    let mut states: BTreeMap<u64, MatchState> = BTreeMap::new();
    let mut notes = Vec::new();
    if !dir.exists() {
        return Ok((states, notes));
    }
    for number in segments(dir)? {
        let path = segment_path(dir, number);
        let bytes = std::fs::read(&path).map_err(|e| format!("io:{}: {e}", path.display()))?;
        let mut at = 0;
        loop {
            match decode(&bytes[at..], clock) {
                Read::Record(id, record, used) => {
                    at += used;
                    if let Some(state) = states.get_mut(&id) {
                        state.apply(&record);
                    } else if let Some(state) = MatchState::from_created(&record) {
                        states.insert(id, state);
                    } else {
                        notes.push(format!(
                            "{}: a record of match {id} before its creation (ignored)",
                            path.display()
                        ));
                    }
                }
                Read::End => break,
                Read::Damaged(what) => {
                    notes.push(format!(
                        "{}: {what} at byte {at} of {}; the rest of this segment is not read",
                        path.display(),
                        bytes.len()
                    ));
                    break;
                }
            }
        }
    }
    Ok((states, notes))
}

/// What the background thread does for the store.
enum Job {
    /// Sync this file every interval from now on (the new current segment).
    Track(File),
    /// Sync the current segment, then delete this file and sync the directory.
    Delete(PathBuf),
    /// Write (and sync) a whole file.
    WriteFile(PathBuf, Vec<u8>),
}

/// The thread that syncs the journal every interval and does the slow
/// file work, so the relay's loop never waits for a disk.
struct Syncer {
    jobs: Option<Sender<Job>>,
    thread: Option<JoinHandle<()>>,
}

impl Syncer {
    fn start(dir: PathBuf, interval: Duration, finished: File) -> Result<Syncer, String> {
        let (jobs, receive) = channel::<Job>();
        let thread = std::thread::Builder::new()
            .name("rungs-relay-sync".into())
            .spawn(move || {
                let mut current: Option<File> = None;
                let sync_dir = || {
                    if let Ok(d) = File::open(&dir) {
                        let _ = d.sync_all();
                    }
                };
                loop {
                    let job = receive.recv_timeout(interval);
                    if let Some(file) = &current {
                        let _ = file.sync_data();
                    }
                    let _ = finished.sync_data();
                    match job {
                        Ok(Job::Track(file)) => {
                            current = Some(file);
                            sync_dir();
                        }
                        Ok(Job::Delete(path)) => {
                            let _ = std::fs::remove_file(path);
                            sync_dir();
                        }
                        Ok(Job::WriteFile(path, bytes)) => {
                            let written = File::create(&path)
                                .and_then(|mut f| f.write_all(&bytes).and_then(|_| f.sync_data()));
                            if let Err(e) = written {
                                eprintln!("rungs-relay: cannot write {}: {e}", path.display());
                            }
                        }
                        Err(RecvTimeoutError::Timeout) => {}
                        Err(RecvTimeoutError::Disconnected) => return,
                    }
                }
            })
            .map_err(|e| format!("io:cannot start the journal's sync thread: {e}"))?;
        Ok(Syncer {
            jobs: Some(jobs),
            thread: Some(thread),
        })
    }

    fn send(&self, job: Job) {
        if let Some(jobs) = &self.jobs {
            let _ = jobs.send(job);
        }
    }
}

impl Drop for Syncer {
    fn drop(&mut self) {
        // The thread syncs once more and ends when the channel closes.
        self.jobs = None;
        if let Some(thread) = self.thread.take() {
            let _ = thread.join();
        }
    }
}

/// The relay's state directory, open for writing. See the module docs.
pub struct Store {
    dir: PathBuf,
    clock: Clock,
    segment: File,
    segment_number: u64,
    segment_bytes: u64,
    /// Segments before the current one that still exist, oldest first.
    older: Vec<u64>,
    /// Records of this loop iteration, framed.
    pending: Vec<u8>,
    /// Lines for `finished`, this iteration.
    pending_finished: String,
    finished_file: File,
    /// Live matches: the oldest segment holding their records.
    first_segment: HashMap<u64, u64>,
    /// Matches that ended (from `finished` and this run).
    finished: HashSet<u64>,
    keep_turn_logs: bool,
    syncer: Syncer,
    /// Writes that failed (the relay goes on; persistence is degraded).
    pub write_errors: u64,
}

/// What opening the store found.
pub struct Opened {
    pub store: Store,
    /// The matches to resume, by id.
    pub matches: BTreeMap<u64, MatchState>,
    /// Log lines: damaged records, how much was read.
    pub notes: Vec<String>,
}

impl Store {
    /// Open (or create, mode 0700) the state directory, read everything it
    /// holds, and start a fresh segment holding every match found.
    pub fn open(
        dir: &Path,
        clock: Clock,
        sync_interval: Duration,
        keep_turn_logs: bool,
    ) -> Result<Opened, String> {
        create_private_dir(dir)?;
        if keep_turn_logs {
            create_private_dir(&dir.join("turn-logs"))?;
        }
        let finished_path = dir.join("finished");
        let mut finished = HashSet::new();
        if let Ok(text) = std::fs::read_to_string(&finished_path) {
            // A torn last line (a crash mid-write) does not parse: skipped.
            finished.extend(
                text.lines()
                    .filter_map(|l| l.split_whitespace().next()?.parse::<u64>().ok()),
            );
        }
        let (matches, mut notes) = read_journal(dir, clock)?;
        let old = segments(dir)?;
        let segment_number = old.last().map_or(1, |n| n + 1);
        let path = segment_path(dir, segment_number);
        let mut segment = OpenOptions::new()
            .create_new(true)
            .append(true)
            .open(&path)
            .map_err(|e| format!("io:{}: {e}", path.display()))?;
        let finished_file = OpenOptions::new()
            .create(true)
            .append(true)
            .open(&finished_path)
            .map_err(|e| format!("io:{}: {e}", finished_path.display()))?;
        // Everything found, into the fresh segment, synced before the old
        // segments go.
        let mut bytes = Vec::new();
        let mut first_segment = HashMap::new();
        let mut lines = String::new();
        for (id, state) in &matches {
            for record in state.records() {
                encode(*id, &record, clock, &mut bytes);
            }
            match state.over {
                None => {
                    first_segment.insert(*id, segment_number);
                }
                Some((final_tick, reason)) => {
                    if finished.insert(*id) {
                        lines.push_str(&format!("{id} {final_tick} {reason:?}\n"));
                    }
                }
            }
        }
        segment
            .write_all(&bytes)
            .and_then(|_| segment.sync_data())
            .map_err(|e| format!("io:{}: {e}", path.display()))?;
        (&finished_file)
            .write_all(lines.as_bytes())
            .and_then(|_| finished_file.sync_data())
            .map_err(|e| format!("io:{}: {e}", finished_path.display()))?;
        if let Ok(d) = File::open(dir) {
            let _ = d.sync_all();
        }
        for n in &old {
            let _ = std::fs::remove_file(segment_path(dir, *n));
        }
        let live = matches.values().filter(|s| s.over.is_none()).count();
        notes.push(format!(
            "state {}: {} matches to resume ({} live, {} ended), {} finished before; {} old segment(s) read, {} bytes rewritten",
            dir.display(),
            matches.len(),
            live,
            matches.len() - live,
            finished.len(),
            old.len(),
            bytes.len()
        ));
        let syncer = Syncer::start(
            dir.to_path_buf(),
            sync_interval,
            finished_file
                .try_clone()
                .map_err(|e| format!("io:{}: {e}", finished_path.display()))?,
        )?;
        syncer.send(Job::Track(
            segment
                .try_clone()
                .map_err(|e| format!("io:{}: {e}", path.display()))?,
        ));
        Ok(Opened {
            store: Store {
                dir: dir.to_path_buf(),
                clock,
                segment,
                segment_number,
                segment_bytes: bytes.len() as u64,
                older: Vec::new(),
                pending: Vec::with_capacity(1 << 16),
                pending_finished: String::new(),
                finished_file,
                first_segment,
                finished,
                keep_turn_logs,
                syncer,
                write_errors: 0,
            },
            matches,
            notes,
        })
    }

    /// Whether a match with this id is live here or ended (a setup file's
    /// line for it is not played again).
    pub fn knows(&self, match_id: u64) -> bool {
        self.first_segment.contains_key(&match_id) || self.finished.contains(&match_id)
    }

    /// Take the relay's new records (write them with [`flush`](Self::flush)
    /// before sending anything); an ended match's turn log goes to
    /// `turn-logs/` with `--keep-turn-logs`.
    pub fn take(&mut self, relay: &mut Relay) {
        while let Some((id, record)) = relay.poll_durable() {
            encode(id, &record, self.clock, &mut self.pending);
            match &record {
                DurableRecord::Created { .. } => {
                    self.first_segment.entry(id).or_insert(self.segment_number);
                }
                DurableRecord::Over { final_tick, reason } => {
                    if self.finished.insert(id) {
                        self.pending_finished
                            .push_str(&format!("{id} {final_tick} {reason:?}\n"));
                    }
                    if self.keep_turn_logs {
                        if let Some(state) = relay.match_state(id) {
                            let log = TurnLog::from_state(&state).encode();
                            let path = self.dir.join("turn-logs").join(format!("{id}.rlog"));
                            self.syncer.send(Job::WriteFile(path, log));
                        }
                    }
                }
                _ => {}
            }
        }
    }

    /// Write what [`take`](Self::take) collected: one `write` to the
    /// current segment (and one to `finished`). Whether anything failed
    /// (counted; the relay goes on).
    pub fn flush(&mut self) -> Option<std::io::Error> {
        let mut failed = None;
        if !self.pending.is_empty() {
            match self.segment.write_all(&self.pending) {
                Ok(()) => self.segment_bytes += self.pending.len() as u64,
                Err(e) => failed = Some(e),
            }
            self.pending.clear();
        }
        if !self.pending_finished.is_empty() {
            if let Err(e) = self
                .finished_file
                .write_all(self.pending_finished.as_bytes())
            {
                failed = Some(e);
            }
            self.pending_finished.clear();
        }
        if failed.is_some() {
            self.write_errors += 1;
        }
        if self.segment_bytes >= SEGMENT_BYTES {
            failed = failed.or(self.rotate().err());
        }
        failed
    }

    fn rotate(&mut self) -> std::io::Result<()> {
        let next = self.segment_number + 1;
        let segment = OpenOptions::new()
            .create_new(true)
            .append(true)
            .open(segment_path(&self.dir, next))?;
        self.syncer.send(Job::Track(segment.try_clone()?));
        // The old one is synced by the thread before it takes the new one.
        self.older.push(self.segment_number);
        self.segment = segment;
        self.segment_number = next;
        self.segment_bytes = 0;
        Ok(())
    }

    /// A match is gone from the relay: its records are dead.
    pub fn removed(&mut self, match_id: u64) {
        self.first_segment.remove(&match_id);
    }

    /// One step of cleaning, between loop iterations: delete the oldest
    /// segment when no live match has records there; when one pins it and
    /// segments pile up behind it, copy that match forward (one per call).
    pub fn clean(&mut self, relay: &Relay) {
        let Some(&oldest) = self.older.first() else {
            return;
        };
        let pinning = self
            .first_segment
            .iter()
            .find(|(_, first)| **first <= oldest)
            .map(|(id, _)| *id);
        match pinning {
            None => {
                self.older.remove(0);
                self.syncer
                    .send(Job::Delete(segment_path(&self.dir, oldest)));
            }
            Some(id) if self.older.len() > SEGMENTS_BEHIND => {
                match relay.match_state(id) {
                    Some(state) => {
                        for record in state.records() {
                            encode(id, &record, self.clock, &mut self.pending);
                        }
                        self.first_segment.insert(id, self.segment_number);
                    }
                    // Gone without a Removed event: nothing to keep.
                    None => {
                        self.first_segment.remove(&id);
                    }
                }
            }
            Some(_) => {}
        }
    }

    /// Segments on disk now (the current one included).
    #[cfg(test)]
    pub fn segment_count(&self) -> usize {
        self.older.len() + 1
    }
}

fn create_private_dir(dir: &Path) -> Result<(), String> {
    let mut builder = std::fs::DirBuilder::new();
    builder.recursive(true);
    #[cfg(unix)]
    {
        use std::os::unix::fs::DirBuilderExt;
        builder.mode(0o700);
    }
    builder
        .create(dir)
        .map_err(|e| format!("io:--state {}: {e}", dir.display()))
}

#[cfg(test)]
mod tests {
    use super::*;
    use rungs_core::relay::ticket::LobbySecret;
    use rungs_core::relay::{MatchSetup, RelayConfig};

    fn temp_dir(name: &str) -> PathBuf {
        let dir = std::env::temp_dir().join(format!("rungs-store-{name}-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        dir
    }

    fn relay() -> Relay {
        let mut config = RelayConfig::new(LobbySecret::new([7; 16]).unwrap());
        config.persistent = true;
        Relay::new(config).unwrap()
    }

    const CLOCK: Clock = Clock {
        now_us: 0,
        unix_us: 1_700_000_000_000_000,
    };

    #[test]
    fn matches_come_back_after_a_reopen_and_ended_ones_are_remembered() {
        let dir = temp_dir("reopen");
        let mut r = relay();
        let opened = Store::open(&dir, CLOCK, Duration::from_millis(10), true).unwrap();
        assert!(opened.matches.is_empty());
        let mut store = opened.store;
        r.add_match(MatchSetup::new(1, 2, 0b11), 0).unwrap();
        r.add_match(MatchSetup::new(2, 2, 0b11), 0).unwrap();
        store.take(&mut r);
        assert!(store.flush().is_none());
        r.end_match(2, 1_000).unwrap();
        store.take(&mut r);
        assert!(store.flush().is_none());
        assert!(store.knows(1) && store.knows(2) && !store.knows(3));
        drop(store);
        let opened = Store::open(&dir, CLOCK, Duration::from_millis(10), true).unwrap();
        assert_eq!(opened.matches.len(), 2, "{:?}", opened.notes);
        assert!(opened.matches[&2].over.is_some());
        assert!(opened.store.knows(2));
        assert_eq!(segments(&dir).unwrap().len(), 1, "old segments deleted");
        assert!(dir.join("turn-logs/2.rlog").exists(), "kept for replays");
        let log = TurnLog::decode(&std::fs::read(dir.join("turn-logs/2.rlog")).unwrap()).unwrap();
        assert_eq!(log.match_id, 2);
        drop(opened);
        let _ = std::fs::remove_dir_all(&dir);
    }

    #[test]
    fn cleaning_copies_a_pinning_match_forward_and_deletes_the_old_segment() {
        let dir = temp_dir("clean");
        let mut r = relay();
        let mut store = Store::open(&dir, CLOCK, Duration::from_millis(10), false)
            .unwrap()
            .store;
        r.add_match(MatchSetup::new(1, 2, 0b11), 0).unwrap();
        r.add_match(MatchSetup::new(2, 2, 0b11), 0).unwrap();
        store.take(&mut r);
        store.flush();
        for _ in 0..=SEGMENTS_BEHIND + 1 {
            store.rotate().unwrap();
        }
        assert_eq!(store.segment_count(), SEGMENTS_BEHIND + 3);
        // Match 2 ends and is removed; match 1 still pins the oldest.
        r.end_match(2, 10).unwrap();
        store.take(&mut r);
        store.removed(2);
        for _ in 0..10 {
            store.clean(&r);
            store.flush();
        }
        std::thread::sleep(Duration::from_millis(100));
        assert_eq!(store.segment_count(), 1, "every old segment went");
        drop(store);
        let opened = Store::open(&dir, CLOCK, Duration::from_millis(10), false).unwrap();
        assert!(opened.matches.contains_key(&1), "{:?}", opened.notes);
        assert!(opened.store.knows(2), "ended: remembered");
        drop(opened);
        let _ = std::fs::remove_dir_all(&dir);
    }
}
