//! The dispatch records of a run: `dispatches.jsonl` beside the event log, one attempt a line
//! (`{"dispatch_id", "attempt", "request", "response"}`), appended whole in one write.
//!
//! One file per run, not one per attempt: creating a file costs an inode, and a wave's answers
//! arrive together — at a cap of 256, creating their files one after the other on the runtime's
//! workers held each slot's next request behind the others' bookkeeping (docs/performance.md).
//!
//! An audit record, not resume state: appended (to the kernel: a killed process loses none)
//! but not synced. A crash can cut only the last line; [`read_records`] drops a line that does
//! not parse, and the next append after a reopen starts on a fresh line.

use serde_json::Value;
use std::fs::{File, OpenOptions};
use std::io::{self, Read, Write};
use std::path::{Path, PathBuf};
use std::sync::Mutex;

/// The records file, relative to the run directory.
pub const RECORDS_FILE: &str = "dispatches.jsonl";

/// Where one record is: [`RECORDS_FILE`] and its 1-based line.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct RecordAt {
    /// The file, relative to the run directory.
    pub file: &'static str,
    /// The line (1-based).
    pub line: u64,
}

/// The append side: opened on the first record, then held (with its line count).
#[derive(Debug)]
pub(crate) struct RecordLog {
    path: PathBuf,
    open: Mutex<Option<(File, u64)>>,
}

impl RecordLog {
    pub(crate) fn new(run_dir: &Path) -> Self {
        Self { path: run_dir.join(RECORDS_FILE), open: Mutex::new(None) }
    }

    /// Appends one record (a JSON line without its newline) and says where it is.
    pub(crate) fn append(&self, mut line: Vec<u8>) -> io::Result<RecordAt> {
        line.push(b'\n');
        let mut guard = self.open.lock().map_err(|_| io::Error::other("the records lock is poisoned"))?;
        if guard.is_none() {
            *guard = Some(self.open_file()?);
        }
        let Some((file, lines)) = guard.as_mut() else { return Err(io::Error::other("the records file is not open")) };
        if crate::faults::record_append() {
            // Test-only: the write a power loss cuts (half the line, no newline), then death.
            let _ = file.write_all(&line[..line.len() / 2]);
            crate::faults::torn();
        }
        file.write_all(&line)?;
        *lines += 1;
        Ok(RecordAt { file: RECORDS_FILE, line: *lines })
    }

    /// Opens for appending; an existing file's lines are counted, and a torn last line is
    /// closed so that the next record starts a line of its own.
    fn open_file(&self) -> io::Result<(File, u64)> {
        let mut file = OpenOptions::new().create(true).read(true).append(true).open(&self.path)?;
        let mut text = Vec::new();
        file.read_to_end(&mut text)?;
        let mut lines = text.iter().filter(|&&b| b == b'\n').count() as u64;
        if text.last().is_some_and(|&b| b != b'\n') {
            file.write_all(b"\n")?;
            lines += 1;
        }
        Ok((file, lines))
    }
}

/// Every record of the run in `run_dir`, in order, blobs not put back ([`super::resolve_record`]
/// does that). A line that does not parse (cut by a crash) is dropped; no file is no records.
pub fn read_records(run_dir: &Path) -> io::Result<Vec<Value>> {
    match std::fs::read(run_dir.join(RECORDS_FILE)) {
        Ok(bytes) => Ok(crate::fsx::parse_lines(&bytes)),
        Err(e) if e.kind() == io::ErrorKind::NotFound => Ok(Vec::new()),
        Err(e) => Err(e),
    }
}

/// The record of one attempt, with its blobs put back: the request and response as the agent
/// saw and answered them.
pub fn find_record(run_dir: &Path, dispatch_id: &str, attempt: u64) -> io::Result<Option<Value>> {
    Ok(read_records(run_dir)?
        .into_iter()
        .rev()
        .find(|r| r["dispatch_id"] == dispatch_id && r["attempt"] == attempt)
        .map(|r| super::resolve_record(run_dir, &r)))
}
