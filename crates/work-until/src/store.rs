//! How the ledger is kept on disk: a snapshot plus an append-only log, so that committing an
//! iteration costs what the iteration added, not what the ledger holds.
//!
//! - `ledger.json` — the snapshot: the whole [`Ledger`] (parsed sections, pretty JSON).
//!   Written at the start of every run that goes on, at its stop, and whenever the log has
//!   grown as large as the snapshot; `master.md` (the ledger rendered for a person, compacted
//!   to its line budget) is written with it.
//! - `ledger.jsonl` — the log: a header line `{"ledgerLog": 1, "base": "<sha256 of the
//!   snapshot's bytes>"}`, then one record per committed iteration (`seq` 1, 2, …) holding the
//!   iteration's [`IterationRecord`] (or the recon's [`ReconRecord`]). The append of that
//!   record is the iteration's commit point. A log whose `base` is not the snapshot's digest
//!   is stale (a crash between a snapshot and the log's reset, or a snapshot replaced) and is
//!   ignored; a record that does not parse (a torn tail) or breaks the `seq` sequence ends the
//!   replay.
//!
//! Loading reads the snapshot, then merges the log's records onto it (merges are idempotent).

use crate::ledger::{IterationRecord, Ledger, ReconRecord};
use serde::{Deserialize, Serialize};
use serde_json::Value;
use std::collections::BTreeMap;
use std::io;
use std::path::{Path, PathBuf};
use work_runtime::fsx::sha256_hex;
use work_runtime::run::RunContext;

/// The log format version (the header's `ledgerLog`).
pub const LOG_VERSION: u32 = 1;
/// The snapshot's file name in the session directory.
pub const SNAPSHOT_FILE: &str = "ledger.json";
/// The log's file name in the session directory.
pub const LOG_FILE: &str = "ledger.jsonl";

/// One committed record.
#[derive(Debug, Clone, Serialize, Deserialize)]
struct Record {
    seq: u64,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    iteration: Option<IterationRecord>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    recon: Option<ReconRecord>,
}

/// What a load found in the log beside the ledger: the records it replayed.
#[derive(Debug, Default)]
pub struct Replayed {
    /// Iteration number ⇒ its committed record.
    pub iterations: BTreeMap<u32, IterationRecord>,
    /// The recon's record, when the log holds it.
    pub recon: Option<ReconRecord>,
}

/// A session's ledger files and where its log stands.
#[derive(Debug)]
pub struct LedgerStore {
    snapshot: PathBuf,
    log: PathBuf,
    seq: u64,
    /// The log on disk extends the snapshot on disk (its `base` is the snapshot's digest).
    based: bool,
    log_bytes: u64,
    snapshot_bytes: u64,
    /// Snapshots written by this store.
    pub snapshots: u64,
}

impl LedgerStore {
    /// The store of the session directory `dir`, nothing loaded.
    pub fn new(dir: &Path) -> Self {
        LedgerStore {
            snapshot: dir.join(SNAPSHOT_FILE),
            log: dir.join(LOG_FILE),
            seq: 0,
            based: false,
            log_bytes: 0,
            snapshot_bytes: 0,
            snapshots: 0,
        }
    }

    /// Loads the ledger: the snapshot with its log merged. `Ok(None)` when there is no
    /// snapshot (a session written before the log existed: its `master.md` is the ledger).
    pub fn load(dir: &Path) -> io::Result<Option<(Ledger, LedgerStore, Replayed)>> {
        let mut store = LedgerStore::new(dir);
        let Some(bytes) = work_runtime::fsx::read_optional_bytes(&store.snapshot)? else { return Ok(None) };
        let mut ledger: Ledger = serde_json::from_slice(&bytes)
            .map_err(|e| io::Error::new(io::ErrorKind::InvalidData, format!("it is corrupt ({e})")))?;
        store.snapshot_bytes = bytes.len() as u64;
        let mut replayed = Replayed::default();
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
                if let Some(r) = rec.recon {
                    ledger.merge_recon(&r);
                    replayed.recon = Some(r);
                }
                if let Some(r) = rec.iteration {
                    ledger.merge(&r);
                    replayed.iterations.insert(r.iteration, r);
                }
            }
        }
        Ok(Some((ledger, store, replayed)))
    }

    /// Commits one iteration: one appended record (synced). A log that does not extend the
    /// snapshot on disk gets a snapshot first (the caller's `ledger` without this record).
    pub fn commit_iteration(&mut self, run: &RunContext, r: &IterationRecord) -> io::Result<()> {
        self.append(run, Record { seq: self.seq + 1, iteration: Some(r.clone()), recon: None })
    }

    /// Commits the recon.
    pub fn commit_recon(&mut self, run: &RunContext, r: &ReconRecord) -> io::Result<()> {
        self.append(run, Record { seq: self.seq + 1, iteration: None, recon: Some(r.clone()) })
    }

    fn append(&mut self, run: &RunContext, rec: Record) -> io::Result<()> {
        if !self.based {
            return Err(io::Error::other("the ledger log has no snapshot to extend (write one first)"));
        }
        let v = run.redactor.redact_json(&serde_json::to_value(&rec).map_err(io::Error::other)?);
        let line = serde_json::to_vec(&v).map_err(io::Error::other)?;
        work_runtime::fsx::append_line(&self.log, &line)?;
        self.seq = rec.seq;
        self.log_bytes += line.len() as u64 + 1;
        Ok(())
    }

    /// The log has grown as large as the snapshot (or does not extend it): time for a
    /// snapshot, so that snapshots cost at most what the log does.
    pub fn due(&self) -> bool {
        !self.based || self.log_bytes >= self.snapshot_bytes
    }

    /// Writes the whole ledger as the snapshot and starts a fresh log on it.
    pub fn snapshot(&mut self, run: &RunContext, ledger: &Ledger) -> io::Result<()> {
        let v = run.redactor.redact_json(&serde_json::to_value(ledger).map_err(io::Error::other)?);
        let mut bytes = serde_json::to_vec_pretty(&v).map_err(io::Error::other)?;
        bytes.push(b'\n');
        work_runtime::fsx::write_atomic(&self.snapshot, &bytes)?;
        let header = serde_json::json!({"ledgerLog": LOG_VERSION, "base": sha256_hex(&bytes)});
        let mut line = header.to_string().into_bytes();
        line.push(b'\n');
        work_runtime::fsx::write_atomic(&self.log, &line)?;
        self.seq = 0;
        self.based = true;
        self.log_bytes = 0;
        self.snapshot_bytes = bytes.len() as u64;
        self.snapshots += 1;
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::report::validate_report;
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
            "until",
        )
        .expect("run")
    }

    fn record(n: u32) -> IterationRecord {
        let report = validate_report(&json!({"status": "continue", "summary": format!("step {n}"),
            "decisions": [format!("decision {n}")]}))
        .expect("valid");
        IterationRecord {
            iteration: n,
            dispatch_id: format!("d{n}"),
            report,
            git: true,
            changed: vec!["a.rs".into()],
            false_claims: vec![],
            unclaimed: vec!["a.rs".into()],
            verify: None,
            decision: "continue".into(),
            empty: false,
            commit: None,
        }
    }

    #[test]
    fn commits_append_and_a_reload_is_the_same_ledger() {
        let dir = tempfile::tempdir().expect("tempdir");
        let r = run(dir.path());
        let mut ledger = Ledger::default();
        let mut store = LedgerStore::new(dir.path());
        assert!(store.commit_iteration(&r, &record(1)).is_err(), "no snapshot to extend yet");
        store.snapshot(&r, &ledger).expect("snapshot");
        for n in 1..=60 {
            store.commit_iteration(&r, &record(n)).expect("commit");
            ledger.merge(&record(n));
            if store.due() {
                store.snapshot(&r, &ledger).expect("snapshot");
            }
            let (back, _, _) = LedgerStore::load(dir.path()).expect("load").expect("some");
            assert_eq!(back, ledger, "after commit {n}");
        }
        assert!(store.snapshots < 30, "the ledger grows by appending: {} snapshots in 60 commits", store.snapshots);
    }

    /// Cuts the last `n` bytes off a file: an append a crash tore.
    fn tear(path: &Path, n: usize) {
        let bytes = std::fs::read(path).expect("read");
        std::fs::write(path, &bytes[..bytes.len() - n]).expect("tear");
    }

    #[test]
    fn a_torn_commit_is_not_a_change_outside_a_run() {
        let dir = tempfile::tempdir().expect("tempdir");
        work_runtime::fsx::digests::install(dir.path());
        let r = run(dir.path());
        let mut ledger = Ledger::default();
        let mut store = LedgerStore::new(dir.path());
        store.snapshot(&r, &ledger).expect("snapshot");
        store.commit_iteration(&r, &record(1)).expect("commit");
        ledger.merge(&record(1));
        store.commit_iteration(&r, &record(2)).expect("commit");
        // The commit of iteration 2 torn by a crash mid-append: not committed, not refused.
        tear(&dir.path().join(LOG_FILE), 9);
        let (back, mut store, replayed) = LedgerStore::load(dir.path()).expect("a torn tail is read").expect("some");
        assert_eq!(back, ledger);
        assert_eq!(replayed.iterations.keys().copied().collect::<Vec<_>>(), vec![1]);
        // The rerun commits iteration 2 again; then half a line written by hand, then read.
        store.commit_iteration(&r, &record(2)).expect("commit again");
        ledger.merge(&record(2));
        use std::io::Write;
        let mut f = std::fs::OpenOptions::new().append(true).open(dir.path().join(LOG_FILE)).expect("log");
        f.write_all(br#"{"seq": 3, "iteration": {"iter"#).expect("half a line");
        drop(f);
        let (back, _, replayed) = LedgerStore::load(dir.path()).expect("half a line is read").expect("some");
        assert_eq!(back, ledger);
        assert_eq!(replayed.iterations.keys().copied().collect::<Vec<_>>(), vec![1, 2]);
    }

    #[test]
    fn a_torn_record_and_a_stale_log_are_ignored() {
        let dir = tempfile::tempdir().expect("tempdir");
        let r = run(dir.path());
        let mut ledger = Ledger::default();
        let mut store = LedgerStore::new(dir.path());
        store.snapshot(&r, &ledger).expect("snapshot");
        store.commit_iteration(&r, &record(1)).expect("commit");
        ledger.merge(&record(1));
        use std::io::Write;
        let mut f = std::fs::OpenOptions::new().append(true).open(dir.path().join(LOG_FILE)).expect("log");
        f.write_all(br#"{"seq": 2, "iteration": {"iter"#).expect("tear");
        drop(f);
        let (back, _, replayed) = LedgerStore::load(dir.path()).expect("load").expect("some");
        assert_eq!(back, ledger, "the torn record is dropped");
        assert_eq!(replayed.iterations.keys().copied().collect::<Vec<_>>(), vec![1]);
        // A snapshot replaced by hand: the log no longer extends it and is ignored.
        std::fs::write(dir.path().join(SNAPSHOT_FILE), "{}\n").expect("write");
        let (back, store, replayed) = LedgerStore::load(dir.path()).expect("load").expect("some");
        assert_eq!((back, replayed.iterations.len()), (Ledger::default(), 0));
        assert!(store.due(), "a stale log is replaced by the next snapshot");
    }
}
