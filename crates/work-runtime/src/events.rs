//! The append-only event log of a run: `.work/runs/<run-id>/events.jsonl`, one JSON object a
//! line, each with `ts`, `run_id`, `seq` and `kind`; and the dispatch records beside it
//! (`dispatches/<dispatch-id>.a<attempt>.json`, the request and the response of one attempt).
//!
//! Invariants: `seq` is strictly increasing from 1 within a run; every line is flushed when
//! written; every string passes through the run's [`Redactor`] first.

use crate::clock::Clock;
use crate::redact::Redactor;
use serde_json::{Map, Value, json};
use std::fs::{File, OpenOptions};
use std::io::{self, Write};
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};

/// The event log of one run.
pub struct EventLog {
    run_id: String,
    dir: PathBuf,
    inner: Mutex<(u64, Option<File>)>,
    clock: Arc<dyn Clock>,
    redactor: Redactor,
    dispatches: std::sync::atomic::AtomicU64,
}

impl std::fmt::Debug for EventLog {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("EventLog").field("run_id", &self.run_id).field("dir", &self.dir).finish()
    }
}

impl EventLog {
    /// Opens (creating) the log in `dir` for `run_id`.
    pub fn open(dir: &Path, run_id: &str, clock: Arc<dyn Clock>, redactor: Redactor) -> io::Result<Self> {
        std::fs::create_dir_all(dir.join("dispatches"))?;
        let file = OpenOptions::new().create(true).append(true).open(dir.join("events.jsonl"))?;
        Ok(Self {
            run_id: run_id.to_string(),
            dir: dir.to_path_buf(),
            inner: Mutex::new((0, Some(file))),
            clock,
            redactor,
            dispatches: Default::default(),
        })
    }

    /// A log that records nothing (for tests of pure logic).
    pub fn discard(run_id: &str, clock: Arc<dyn Clock>) -> Self {
        Self {
            run_id: run_id.to_string(),
            dir: PathBuf::new(),
            inner: Mutex::new((0, None)),
            clock,
            redactor: Redactor::default(),
            dispatches: Default::default(),
        }
    }

    /// The run's directory.
    pub fn dir(&self) -> &Path {
        &self.dir
    }

    /// The run id.
    pub fn run_id(&self) -> &str {
        &self.run_id
    }

    /// Appends one event. `fields` (an object) is merged after `ts`, `run_id`, `seq`, `kind`.
    /// A failure to write the log is reported on stderr once per event, never fatal.
    pub fn emit(&self, kind: &str, fields: Value) {
        let Ok(mut guard) = self.inner.lock() else { return };
        guard.0 += 1;
        let mut obj = Map::new();
        obj.insert("ts".into(), json!(self.clock.now_rfc3339()));
        obj.insert("run_id".into(), json!(self.run_id));
        obj.insert("seq".into(), json!(guard.0));
        obj.insert("kind".into(), json!(kind));
        if let Value::Object(m) = self.redactor.redact_json(&fields) {
            for (k, v) in m {
                obj.entry(k).or_insert(v);
            }
        }
        if let Some(f) = guard.1.as_mut() {
            let mut line = Value::Object(obj).to_string();
            line.push('\n');
            if let Err(e) = f.write_all(line.as_bytes()).and_then(|_| f.flush()) {
                eprintln!("warning: failed to append to the event log: {e}");
            }
        }
    }

    /// Writes the record of one dispatch attempt beside the log and returns its path
    /// (relative to the run directory).
    pub fn record_dispatch(&self, dispatch_id: &str, attempt: u32, record: &Value) -> Option<String> {
        if self.dir.as_os_str().is_empty() {
            return None;
        }
        let rel = format!("dispatches/{dispatch_id}.a{attempt}.json");
        let value = self.redactor.redact_json(record);
        // An audit record, not resume state: written whole (temp + rename) but not fsynced,
        // which would dominate the cost of a short dispatch.
        match crate::fsx::write_json_unsynced(&self.dir.join(&rel), &value) {
            Ok(()) => Some(rel),
            Err(e) => {
                eprintln!("warning: failed to write dispatch record {rel}: {e}");
                None
            }
        }
    }

    /// The next dispatch number of this run (1, 2, …), shared by every dispatcher of the run.
    pub fn next_dispatch_number(&self) -> u64 {
        self.dispatches.fetch_add(1, std::sync::atomic::Ordering::SeqCst) + 1
    }

    /// The redactor this log applies.
    pub fn redactor(&self) -> &Redactor {
        &self.redactor
    }
}
