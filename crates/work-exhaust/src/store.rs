//! How a journal is kept on disk: a snapshot plus an append-only log, so that committing a
//! round costs what the round added, not what the journal holds.
//!
//! - `work-exhaust-<task>.json` — the snapshot: the whole [`Journal`] (the master object),
//!   pretty JSON. Written at the start of a run, at its stop, and whenever the log has grown
//!   as large as the snapshot (so snapshots cost at most twice the log: amortised O(1) per
//!   item); while the journal is small (under [`SMALL_JOURNAL`]) it is rewritten every round.
//! - `work-exhaust-<task>.jsonl` — the log: a header line `{"journalLog": 1, "base":
//!   "<sha256 of the snapshot's bytes>"}`, then one record a commit (`seq` 1, 2, …) holding
//!   what the commit appended to the journal's growing lists and the current value of its
//!   small fields. A log whose `base` is not the snapshot's digest is stale (a crash between a
//!   snapshot and the log's reset, or a snapshot someone replaced) and is ignored; a record that
//!   does not parse (a torn tail) or breaks the `seq` sequence ends the replay.
//!
//! Loading reads the snapshot, then replays the log's records onto it. A finished journal's
//! header also carries its [`Head`] and the snapshot's [`Stamp`]: a rerun of the finished task
//! reads the header alone ([`Store::finished`]).

use crate::head::{Head, Stamp};
use crate::item::Item;
use crate::items::Rejected;
use crate::journal::{Journal, RoundRecord};
use serde::{Deserialize, Serialize};
use serde_json::Value;
use std::collections::BTreeMap;
use std::io;
use std::path::{Path, PathBuf};
use work_runtime::budget::Spent;
use work_runtime::fsx::sha256_hex;
use work_runtime::run::RunContext;

/// The log format version (the header's `journalLog`).
pub const LOG_VERSION: u32 = 1;
/// Below this snapshot size every commit rewrites the snapshot (cheap, and the file a person
/// opens is always current).
pub const SMALL_JOURNAL: u64 = 64 * 1024;

/// The lengths of the journal's growing lists at the last commit.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
struct Marks {
    rounds: usize,
    seen: usize,
    items: usize,
    rejected: usize,
    angles_used: usize,
    given_up: usize,
    seeded: usize,
    final_oracles_run: usize,
    completeness_gaps: usize,
}

impl Marks {
    fn of(j: &Journal) -> Self {
        Marks {
            rounds: j.rounds.len(),
            seen: j.seen.len(),
            items: j.items.len(),
            rejected: j.rejected.len(),
            angles_used: j.angles_used.len(),
            given_up: j.given_up.len(),
            seeded: j.seeded.len(),
            final_oracles_run: j.final_oracles_run.len(),
            completeness_gaps: j.completeness_gaps.len(),
        }
    }

    /// True when every list is at least as long as it was (only appended to).
    fn grown_from(&self, old: &Marks) -> bool {
        self.rounds >= old.rounds
            && self.seen >= old.seen
            && self.items >= old.items
            && self.rejected >= old.rejected
            && self.angles_used >= old.angles_used
            && self.given_up >= old.given_up
            && self.seeded >= old.seeded
            && self.final_oracles_run >= old.final_oracles_run
            && self.completeness_gaps >= old.completeness_gaps
    }
}

/// One commit: the tails of the growing lists, the small fields whole.
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", default)]
struct Record {
    seq: u64,
    rounds: Vec<RoundRecord>,
    seen: Vec<String>,
    items: Vec<Item>,
    rejected: Vec<Rejected>,
    angles_used: Vec<String>,
    given_up: Vec<String>,
    seeded: Vec<String>,
    final_oracles_run: Vec<String>,
    completeness_gaps: Vec<String>,
    k: u32,
    dry_counter: u32,
    cursor: usize,
    retry_queue: Vec<String>,
    angle_failures: BTreeMap<String, u32>,
    stopped_reason: Option<String>,
    dropped_due_to_budget: Vec<String>,
    budget_notes: Vec<String>,
    completeness: Option<String>,
    seed_done: bool,
    spent: Spent,
    spent_by_role: BTreeMap<String, Spent>,
}

fn tail<T: Clone>(v: &[T], from: usize) -> Vec<T> {
    v.get(from..).unwrap_or_default().to_vec()
}

impl Record {
    fn of(j: &Journal, seq: u64, m: &Marks) -> Self {
        Record {
            seq,
            rounds: tail(&j.rounds, m.rounds),
            seen: tail(&j.seen, m.seen),
            items: tail(&j.items, m.items),
            rejected: tail(&j.rejected, m.rejected),
            angles_used: tail(&j.angles_used, m.angles_used),
            given_up: tail(&j.given_up, m.given_up),
            seeded: tail(&j.seeded, m.seeded),
            final_oracles_run: tail(&j.final_oracles_run, m.final_oracles_run),
            completeness_gaps: tail(&j.completeness_gaps, m.completeness_gaps),
            k: j.k,
            dry_counter: j.dry_counter,
            cursor: j.cursor,
            retry_queue: j.retry_queue.clone(),
            angle_failures: j.angle_failures.clone(),
            stopped_reason: j.stopped_reason.clone(),
            dropped_due_to_budget: j.dropped_due_to_budget.clone(),
            budget_notes: j.budget_notes.clone(),
            completeness: j.completeness.clone(),
            seed_done: j.seed_done,
            spent: j.spent,
            spent_by_role: j.spent_by_role.clone(),
        }
    }

    fn apply(self, j: &mut Journal) {
        j.rounds.extend(self.rounds);
        j.seen.extend(self.seen);
        j.items.extend(self.items);
        j.rejected.extend(self.rejected);
        j.angles_used.extend(self.angles_used);
        j.given_up.extend(self.given_up);
        j.seeded.extend(self.seeded);
        j.final_oracles_run.extend(self.final_oracles_run);
        j.completeness_gaps.extend(self.completeness_gaps);
        j.k = self.k;
        j.dry_counter = self.dry_counter;
        j.cursor = self.cursor;
        j.retry_queue = self.retry_queue;
        j.angle_failures = self.angle_failures;
        j.stopped_reason = self.stopped_reason;
        j.dropped_due_to_budget = self.dropped_due_to_budget;
        j.budget_notes = self.budget_notes;
        j.completeness = self.completeness;
        j.seed_done = self.seed_done;
        j.spent = self.spent;
        j.spent_by_role = self.spent_by_role;
    }
}

/// The log of a snapshot path (`work-exhaust-x.json` → `work-exhaust-x.jsonl`).
pub fn log_path(snapshot: &Path) -> PathBuf {
    snapshot.with_extension("jsonl")
}

/// Why a journal could not be loaded.
#[derive(Debug, thiserror::Error)]
pub enum LoadError {
    /// The snapshot or the log could not be read.
    #[error("{0}")]
    Read(#[from] io::Error),
    /// The snapshot is not a journal.
    #[error("it is corrupt ({0})")]
    Corrupt(String),
}

/// A journal's files and where its log stands.
#[derive(Debug)]
pub struct Store {
    snapshot: PathBuf,
    log: PathBuf,
    seq: u64,
    /// The log on disk extends the snapshot on disk (its `base` is the snapshot's digest).
    based: bool,
    marks: Marks,
    log_bytes: u64,
    snapshot_bytes: u64,
    /// Snapshots written by this store.
    snapshots: u64,
}

impl Store {
    /// The store of the journal at `snapshot`, nothing loaded.
    pub fn new(snapshot: &Path) -> Self {
        Store {
            snapshot: snapshot.to_path_buf(),
            log: log_path(snapshot),
            seq: 0,
            based: false,
            marks: Marks::default(),
            log_bytes: 0,
            snapshot_bytes: 0,
            snapshots: 0,
        }
    }

    /// The snapshot's path (the documented journal file).
    pub fn snapshot_path(&self) -> &Path {
        &self.snapshot
    }

    /// Loads the journal: the snapshot with its log replayed. `Ok(None)` when there is no
    /// snapshot.
    pub fn load(snapshot: &Path) -> Result<Option<(Journal, Store)>, LoadError> {
        let Some(bytes) = work_runtime::fsx::read_optional_bytes(snapshot)? else { return Ok(None) };
        let text = std::str::from_utf8(&bytes).map_err(|e| LoadError::Corrupt(e.to_string()))?;
        let mut j = Journal::parse(text).map_err(LoadError::Corrupt)?;
        let mut store = Store::new(snapshot);
        store.snapshot_bytes = bytes.len() as u64;
        let lines = work_runtime::fsx::read_json_lines(&store.log)?.unwrap_or_default();
        let base = lines.first().and_then(|h| h.get("base")).and_then(Value::as_str);
        if base == Some(sha256_hex(&bytes).as_str()) {
            store.based = true;
            for line in lines.into_iter().skip(1) {
                store.log_bytes += line.to_string().len() as u64 + 1;
                let rec = serde_json::from_value::<Record>(line).ok().filter(|r| r.seq == store.seq + 1);
                let Some(rec) = rec else {
                    // A record out of sequence: nothing after it is appended to this log.
                    store.based = false;
                    break;
                };
                store.seq = rec.seq;
                rec.apply(&mut j);
            }
        }
        store.marks = Marks::of(&j);
        Ok(Some((j, store)))
    }

    /// The head of a finished journal, read from its log's header alone: `Ok(None)` unless the
    /// log holds nothing but a header with a head, and the snapshot's stamp is the one the header
    /// recorded (the snapshot is unchanged since the stop wrote it). Then the caller loads the
    /// journal whole.
    pub fn finished(snapshot: &Path) -> Result<Option<Head>, LoadError> {
        let Some(lines) = work_runtime::fsx::read_json_lines(&log_path(snapshot))? else { return Ok(None) };
        let [header] = lines.as_slice() else { return Ok(None) };
        let stamp = header.get("snapshot").and_then(|s| serde_json::from_value::<Stamp>(s.clone()).ok());
        if stamp.is_none() || stamp != Stamp::of(snapshot) {
            return Ok(None);
        }
        let head = header.get("head").and_then(|h| serde_json::from_value::<Head>(h.clone()).ok());
        Ok(head.filter(Head::is_final))
    }

    /// Records what changed since the last commit: one appended record, or a snapshot when
    /// the journal is small, the log has grown as large as the snapshot, or a list shrank.
    pub fn commit(&mut self, run: &RunContext, j: &Journal) -> io::Result<()> {
        let now = Marks::of(j);
        let small = self.snapshot_bytes < SMALL_JOURNAL;
        if small || self.log_bytes >= self.snapshot_bytes || !now.grown_from(&self.marks) || !self.based {
            return self.snapshot(run, j);
        }
        let rec = Record::of(j, self.seq + 1, &self.marks);
        let line =
            serde_json::to_vec(&run.redactor.redact_json(&serde_json::to_value(&rec).map_err(io::Error::other)?))
                .map_err(io::Error::other)?;
        work_runtime::fsx::append_line(&self.log, &line)?;
        self.seq += 1;
        self.log_bytes += line.len() as u64 + 1;
        self.marks = now;
        Ok(())
    }

    /// Writes the whole journal as the snapshot and starts a fresh log on it.
    pub fn snapshot(&mut self, run: &RunContext, j: &Journal) -> io::Result<()> {
        let written =
            work_runtime::fsx::write_atomic_streamed(&self.snapshot, |w| write_snapshot(&run.redactor, j, w))?;
        let mut header = serde_json::json!({"journalLog": LOG_VERSION, "base": written.sha256});
        if j.is_final()
            && let Some(stamp) = Stamp::of(&self.snapshot)
        {
            // A rerun of the finished task reads this instead of the snapshot ([`Store::finished`]).
            header["snapshot"] = serde_json::to_value(stamp).map_err(io::Error::other)?;
            header["head"] = run.redactor.redact_json(&serde_json::to_value(Head::of(j)).map_err(io::Error::other)?);
        }
        let mut line = header.to_string().into_bytes();
        line.push(b'\n');
        work_runtime::fsx::write_atomic(&self.log, &line)?;
        self.seq = 0;
        self.based = true;
        self.log_bytes = 0;
        self.snapshot_bytes = written.len;
        self.snapshots += 1;
        self.marks = Marks::of(j);
        Ok(())
    }
}

/// Writes the snapshot's text to `w`: the journal written out pretty, its strings redacted.
/// Written from the journal itself (with no secret to redact) or from one JSON copy of it,
/// redacted on the way out, and streamed to the file: a snapshot used to hold two whole copies
/// beside the journal (the JSON tree and its redacted copy) and then its whole text, most of a
/// long run's peak memory (docs/performance.md).
fn write_snapshot(redactor: &work_runtime::redact::Redactor, j: &Journal, w: &mut dyn io::Write) -> io::Result<()> {
    if redactor.is_empty() {
        serde_json::to_writer_pretty(&mut *w, j)
    } else {
        let v = serde_json::to_value(j).map_err(io::Error::other)?;
        serde_json::to_writer_pretty(&mut *w, &redactor.serializable(&v))
    }
    .map_err(io::Error::other)?;
    w.write_all(b"\n")
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn run(dir: &Path) -> RunContext {
        RunContext::start(
            work_runtime::run::RunOptions {
                root: dir.to_path_buf(),
                state_dir: dir.join(".work"),
                clock: std::sync::Arc::new(work_runtime::clock::SystemClock),
                redactor: Default::default(),
                budget: Default::default(),
                already_spent: Default::default(),
                already_by_role: Default::default(),
                progress: work_runtime::run::ProgressSink::Silent,
            },
            "exhaust",
        )
        .expect("run")
    }

    fn grow(j: &mut Journal, n: usize) {
        let id = format!("item-{n}");
        j.items.push(json!({"id": id, "location": format!("a.rs:{n}"), "pad": "x".repeat(300)}).into());
        j.seen.push(id);
        j.angles_used.push(format!("a{n}"));
        j.rounds.push(RoundRecord { n: n as u32 + 1, verdict: "new-items".into(), ..Default::default() });
        j.dry_counter = (n % 3) as u32;
        j.retry_queue = vec![format!("r{n}")];
    }

    #[test]
    fn the_snapshot_is_the_journal_written_out_redacted() {
        let mut j = Journal::new("t", "w", 2, vec!["a0".into(), "a1".into()]);
        for n in 0..5 {
            grow(&mut j, n);
        }
        j.items.push(json!({"id": "sk-canary-0123456789", "sk-canary-0123456789": 1.5, "n": [null, true]}).into());
        j.spent_by_role.insert("finder".into(), Default::default());
        let mut secret = work_runtime::redact::Redactor::default();
        secret.add("sk-canary-0123456789");
        for r in [work_runtime::redact::Redactor::default(), secret] {
            let tree = r.redact_json(&serde_json::to_value(&j).expect("tree"));
            let mut want = serde_json::to_vec_pretty(&tree).expect("text");
            want.push(b'\n');
            let mut got = Vec::new();
            write_snapshot(&r, &j, &mut got).expect("written");
            assert_eq!(String::from_utf8(got).expect("utf-8"), String::from_utf8(want).expect("utf-8"));
        }
    }

    #[test]
    fn commits_append_and_a_reload_is_the_same_journal() {
        let dir = tempfile::tempdir().expect("tempdir");
        let r = run(dir.path());
        let path = dir.path().join(".work/quality-journals/work-exhaust-t.json");
        let mut j = Journal::new("t", "things", 3, vec!["a".into()]);
        let mut store = Store::new(&path);
        store.snapshot(&r, &j).expect("snapshot");
        for n in 0..400 {
            grow(&mut j, n);
            store.commit(&r, &j).expect("commit");
            if n % 25 == 0 || n > 390 {
                let (back, _) = Store::load(&path).expect("load").expect("some");
                assert_eq!(back, j, "after commit {n}");
            }
        }
        assert!(
            store.snapshots < 150,
            "large journals grow by appending: {} snapshots in 400 commits",
            store.snapshots
        );
    }

    #[test]
    fn a_finished_journal_is_read_from_its_head_while_the_snapshot_is_untouched() {
        let dir = tempfile::tempdir().expect("tempdir");
        let r = run(dir.path());
        let path = dir.path().join(".work/quality-journals/work-exhaust-t.json");
        let mut j = Journal::new("t", "things", 3, Vec::new());
        for n in 0..30 {
            grow(&mut j, n);
        }
        let mut store = Store::new(&path);
        store.snapshot(&r, &j).expect("snapshot");
        assert_eq!(Store::finished(&path).expect("read"), None, "a journal that can go on has no head");
        j.stopped_reason = Some("k-consecutive-dry".into());
        store.snapshot(&r, &j).expect("snapshot");
        let head = Store::finished(&path).expect("read").expect("a finished journal's head");
        assert_eq!(head, Head::of(&j));
        assert_eq!((head.seen, head.rounds, head.first_items.len()), (30, 30, crate::head::HEAD_ITEMS));
        // The snapshot replaced by a copy of itself (another inode): the head is not believed.
        let copy = dir.path().join("copy.json");
        std::fs::copy(&path, &copy).expect("copy");
        std::fs::rename(&copy, &path).expect("replace");
        assert_eq!(Store::finished(&path).expect("read"), None);
        // Edited in place: neither.
        store.snapshot(&r, &j).expect("snapshot");
        assert!(Store::finished(&path).expect("read").is_some());
        let text = std::fs::read_to_string(&path).expect("read").replace("\"k\": 3", "\"k\": 30");
        std::fs::write(&path, text).expect("edit");
        assert_eq!(Store::finished(&path).expect("read"), None);
        // A record after the header: not a finished journal's log.
        store.snapshot(&r, &j).expect("snapshot");
        work_runtime::fsx::append_line(&log_path(&path), br#"{"seq": 1}"#).expect("append");
        assert_eq!(Store::finished(&path).expect("read"), None);
    }

    #[test]
    fn a_torn_round_is_not_a_change_outside_a_run() {
        let dir = tempfile::tempdir().expect("tempdir");
        work_runtime::fsx::digests::install(dir.path());
        let r = run(dir.path());
        let path = dir.path().join("j.json");
        let mut j = Journal::new("t", "things", 3, Vec::new());
        for n in 0..300 {
            grow(&mut j, n);
        }
        let mut store = Store::new(&path);
        store.snapshot(&r, &j).expect("snapshot");
        grow(&mut j, 300);
        store.commit(&r, &j).expect("commit");
        let committed = j.clone();
        grow(&mut j, 301);
        store.commit(&r, &j).expect("commit");
        // The second round's record torn by a crash mid-append: not committed, not refused.
        let bytes = std::fs::read(log_path(&path)).expect("log");
        std::fs::write(log_path(&path), &bytes[..bytes.len() - 5]).expect("tear");
        let (back, mut store) = Store::load(&path).expect("a torn tail is read").expect("some");
        assert_eq!(back, committed);
        store.commit(&r, &j).expect("commit again");
        assert_eq!(Store::load(&path).expect("load").expect("some").0, j);
    }

    #[test]
    fn a_torn_record_and_a_stale_log_are_ignored() {
        let dir = tempfile::tempdir().expect("tempdir");
        let r = run(dir.path());
        let path = dir.path().join("j.json");
        let mut j = Journal::new("t", "things", 3, Vec::new());
        for n in 0..300 {
            grow(&mut j, n);
        }
        let mut store = Store::new(&path);
        store.snapshot(&r, &j).expect("snapshot");
        let at_snapshot = j.clone();
        grow(&mut j, 300);
        store.commit(&r, &j).expect("commit");
        let committed = j.clone();
        // A torn record after it: dropped.
        use std::io::Write;
        let mut f = std::fs::OpenOptions::new().append(true).open(log_path(&path)).expect("log");
        f.write_all(br#"{"seq": 2, "seen": ["half"#).expect("tear");
        drop(f);
        assert_eq!(Store::load(&path).expect("load").expect("some").0, committed);
        // A snapshot replaced by hand: the log no longer extends it and is ignored.
        let text = std::fs::read_to_string(&path).expect("read").replace("\"k\": 3", "\"k\": 4");
        std::fs::write(&path, text).expect("write");
        let (back, _) = Store::load(&path).expect("load").expect("some");
        assert_eq!((back.k, back.seen.len()), (4, at_snapshot.seen.len()));
    }
}
