//! The engine's transition log, `.loop-run/events.jsonl` at the repository root (the work-loop
//! scripts' outbox): `engine init` creates it empty (and lists `.loop-run/` in `.gitignore`),
//! every applied transition appends one line, `engine reset` removes the directory.
//!
//! Each line is one envelope with the fields of [`ENVELOPE_FIELDS`], every one present (a
//! field that does not apply is `null`). The log is a courtesy for observers: a failure to
//! write it is a warning on stderr and never undoes or blocks a transition. The log file must
//! be a regular file: a symlink (dangling or not) or anything else is left alone.

use serde_json::{Map, Value};
use std::io::Write;
use std::path::{Path, PathBuf};
use work_runtime::fsx;

/// The directory, relative to the repository root.
pub const LOOP_RUN_DIR: &str = ".loop-run";
/// The envelope's fields, in order (absent means null).
pub const ENVELOPE_FIELDS: [&str; 14] = [
    "seq",
    "run_id",
    "spec",
    "from",
    "event",
    "to",
    "at",
    "mode",
    "feature",
    "wave_index",
    "intent_incomplete",
    "cycle_id",
    "gate_question",
    "pending_human_wait",
];

/// Builds an envelope: every field of [`ENVELOPE_FIELDS`], `null` unless `given` has it.
pub fn envelope(given: &Map<String, Value>) -> Map<String, Value> {
    ENVELOPE_FIELDS.iter().map(|k| ((*k).to_string(), given.get(*k).cloned().unwrap_or(Value::Null))).collect()
}

fn log_path(root: &Path) -> PathBuf {
    root.join(LOOP_RUN_DIR).join("events.jsonl")
}

fn warn(msg: &str) {
    eprintln!("work loop: warning: {msg}");
}

/// The log file when it is usable: `.loop-run/` a real directory, the file absent (then
/// created empty) or a regular file. Anything else is a warning and `None`.
fn open_log(root: &Path) -> Option<std::fs::File> {
    let dir = root.join(LOOP_RUN_DIR);
    match std::fs::symlink_metadata(&dir) {
        Ok(m) if !m.is_dir() => {
            warn(".loop-run is not a regular directory; the transition log is not written");
            return None;
        }
        Ok(_) => {}
        Err(_) => {
            if let Err(e) = fsx::ensure_dir(&dir) {
                warn(&format!("create .loop-run: {e}"));
                return None;
            }
        }
    }
    let p = log_path(root);
    if let Ok(m) = std::fs::symlink_metadata(&p)
        && !m.file_type().is_file()
    {
        warn(".loop-run/events.jsonl is not a regular file; the transition log is not written");
        return None;
    }
    let mut opts = std::fs::OpenOptions::new();
    opts.append(true).create(true);
    #[cfg(unix)]
    {
        use std::os::unix::fs::OpenOptionsExt;
        opts.mode(0o600);
    }
    match work_runtime::fsx::plain::open(&opts, &p) {
        Ok(f) => Some(f),
        Err(e) => {
            warn(&format!("open .loop-run/events.jsonl: {e}"));
            None
        }
    }
}

/// At `engine init`: the empty log and the `.gitignore` entry.
pub fn init_log(root: &Path) {
    if open_log(root).is_none() {
        return;
    }
    let gi = root.join(".gitignore");
    if std::fs::symlink_metadata(&gi).is_ok_and(|m| !m.file_type().is_file()) {
        return;
    }
    let text = std::fs::read_to_string(&gi).unwrap_or_default();
    if text.lines().any(|l| matches!(l.trim(), ".loop-run/" | ".loop-run" | "/.loop-run/" | "/.loop-run")) {
        return;
    }
    let mut out = text;
    if !out.is_empty() && !out.ends_with('\n') {
        out.push('\n');
    }
    out.push_str(".loop-run/\n");
    if let Err(e) = fsx::write_atomic(&gi, out.as_bytes()) {
        warn(&format!("add .loop-run/ to .gitignore: {e}; add it by hand"));
    }
}

/// After a transition was written: appends its envelope (one write of one line).
pub fn append(root: &Path, given: &Map<String, Value>) {
    let Some(mut f) = open_log(root) else { return };
    let mut line = Value::Object(envelope(given)).to_string();
    line.push('\n');
    if let Err(e) = f.write_all(line.as_bytes()) {
        warn(&format!("append to .loop-run/events.jsonl: {e}"));
    }
}

/// At `engine reset`: removes `.loop-run/` (a symlink is removed, never followed).
pub fn remove_log(root: &Path) {
    let dir = root.join(LOOP_RUN_DIR);
    let Ok(m) = std::fs::symlink_metadata(&dir) else { return };
    let r = if m.is_dir() {
        work_runtime::fsx::plain::remove_dir_all(&dir)
    } else {
        work_runtime::fsx::plain::remove_file(&dir)
    };
    if let Err(e) = r {
        warn(&format!("remove .loop-run: {e}"));
    }
}
