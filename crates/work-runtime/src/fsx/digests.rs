//! State digests: what `work` last wrote to each state file, so that a file changed outside a
//! run (by an agent's detached process, by hand, by a script) is refused on the next read
//! instead of believed.
//!
//! Once [`install`]ed for a state directory (the CLI does it before any command runs), every
//! state file written through [`super::write_atomic`] or [`super::append_line`] under that
//! directory — journals and their logs, session files, `meta.md`, progress files, loop state;
//! not `runs/` (event logs and dispatch records), `locks/` or this log itself — gets a line in
//! `<state>/state-digests.jsonl` **before** the write: `{"path": "<relative>", "sha256":
//! "<digest of the whole file after the write>", "chain": "<sha256 of the previous line>"}`.
//! The lines form a hash chain; a run's `run.end` event records the files it wrote and the
//! chain's head ([`written`], [`head`]).
//!
//! Reading a state file through [`super::read_optional`], [`super::read_optional_bytes`] or
//! [`super::read_json_lines`] checks it: a file with a recorded digest must hash to the last
//! recorded one, or to the one before it (a crash between the line and the write leaves the old
//! content). Anything else is refused with one line naming the file. A file never recorded
//! (written before digests existed, or by a person before any run) is read as it is; a file
//! `work` removed is forgotten.
//!
//! This is a tripwire, not a signature: a process that rewrites the file *and* appends a
//! matching line is not caught (nothing here is secret from the agent).

use sha2::Digest;
use std::collections::{BTreeMap, HashMap};
use std::fs;
use std::io::{self, Write};
use std::path::{Path, PathBuf};
use std::sync::Mutex;

/// The digest log's file name, in the state directory.
pub const LOG_NAME: &str = "state-digests.jsonl";

#[derive(Default)]
struct Registry {
    state_dir: PathBuf,
    loaded: bool,
    /// Per relative path: the last two recorded digests (older first).
    index: HashMap<String, (Option<String>, String)>,
    head: String,
    lines: usize,
    /// Hashers of append-only logs, with the length they have hashed.
    running: HashMap<PathBuf, (u64, sha2::Sha256)>,
    /// What this process wrote: path → last digest.
    written: BTreeMap<String, String>,
}

static REGISTRY: Mutex<Option<Registry>> = Mutex::new(None);

/// Starts recording (and checking) the state files under `state_dir`.
pub fn install(state_dir: &Path) {
    let dir = std::path::absolute(state_dir).unwrap_or_else(|_| state_dir.to_path_buf());
    if let Ok(mut g) = REGISTRY.lock() {
        *g = Some(Registry { state_dir: dir, ..Default::default() });
    }
}

impl Registry {
    /// The path relative to the state directory, when it is a recorded state file.
    fn rel(&self, path: &Path) -> Option<String> {
        let abs = std::path::absolute(path).ok()?;
        let rel = abs.strip_prefix(&self.state_dir).ok()?;
        let first = rel.components().next()?.as_os_str().to_string_lossy().into_owned();
        if matches!(first.as_str(), "runs" | "locks" | LOG_NAME) {
            return None;
        }
        Some(rel.to_string_lossy().into_owned())
    }

    fn log_path(&self) -> PathBuf {
        self.state_dir.join(LOG_NAME)
    }

    fn load(&mut self) {
        if self.loaded {
            return;
        }
        self.loaded = true;
        let Ok(bytes) = fs::read(self.log_path()) else { return };
        for line in bytes.split(|&b| b == b'\n').filter(|l| !l.is_empty()) {
            let Ok(v) = serde_json::from_slice::<serde_json::Value>(line) else { continue };
            let Some(path) = v.get("path").and_then(|p| p.as_str()) else { continue };
            self.lines += 1;
            self.head = super::sha256_hex(line);
            match v.get("sha256").and_then(|s| s.as_str()) {
                Some(sha) => self.note(path, sha),
                None => {
                    self.index.remove(path);
                }
            }
        }
        if self.lines > 2 * self.index.len() + 256 {
            self.compact();
        }
    }

    fn note(&mut self, rel: &str, sha: &str) {
        let prev = self.index.remove(rel).map(|(_, last)| last);
        self.index.insert(rel.to_string(), (prev, sha.to_string()));
    }

    /// Rewrites the log with the last two digests of each file (a fresh chain).
    fn compact(&mut self) {
        let mut out = Vec::new();
        let mut head = String::new();
        let mut paths: Vec<&String> = self.index.keys().collect();
        paths.sort();
        for p in paths {
            let (prev, last) = &self.index[p];
            for sha in prev.iter().chain([last]) {
                let line = serde_json::json!({"path": p, "sha256": sha, "chain": head}).to_string();
                head = super::sha256_hex(line.as_bytes());
                out.extend_from_slice(line.as_bytes());
                out.push(b'\n');
            }
        }
        if super::write_atomic_unrecorded(&self.log_path(), &out).is_ok() {
            self.head = head;
            self.lines = out.iter().filter(|&&b| b == b'\n').count();
        }
    }

    /// Appends one line (synced) and updates the index.
    fn record(&mut self, rel: &str, sha: Option<&str>) -> io::Result<()> {
        self.load();
        let line = serde_json::json!({"path": rel, "sha256": sha, "chain": self.head}).to_string();
        fs::create_dir_all(&self.state_dir)?;
        let mut f = fs::OpenOptions::new().create(true).append(true).open(self.log_path())?;
        f.write_all(format!("{line}\n").as_bytes())?;
        f.sync_data()?;
        self.head = super::sha256_hex(line.as_bytes());
        self.lines += 1;
        match sha {
            Some(s) => {
                self.note(rel, s);
                self.written.insert(rel.to_string(), s.to_string());
            }
            None => {
                self.index.remove(rel);
                self.written.remove(rel);
            }
        }
        Ok(())
    }
}

fn with<T>(f: impl FnOnce(&mut Registry) -> T) -> Option<T> {
    let mut g = REGISTRY.lock().ok()?;
    g.as_mut().map(f)
}

/// Records the digest `path` will have once `bytes` replace it (called before the write).
pub(crate) fn before_write(path: &Path, bytes: &[u8]) -> io::Result<()> {
    with(|r| {
        let Some(rel) = r.rel(path) else { return Ok(()) };
        r.running.remove(path);
        r.record(&rel, Some(&super::sha256_hex(bytes)))
    })
    .unwrap_or(Ok(()))
}

/// Records the digest `path` will have once `bytes` are appended to it.
pub(crate) fn before_append(path: &Path, bytes: &[u8]) -> io::Result<()> {
    with(|r| {
        let Some(rel) = r.rel(path) else { return Ok(()) };
        let len = fs::metadata(path).map(|m| m.len()).unwrap_or(0);
        let mut hasher = match r.running.remove(path) {
            Some((n, h)) if n == len => h,
            _ => {
                let mut h = sha2::Sha256::new();
                if len > 0 {
                    h.update(fs::read(path)?);
                }
                h
            }
        };
        hasher.update(bytes);
        let sha = hex::encode(hasher.clone().finalize());
        r.running.insert(path.to_path_buf(), (len + bytes.len() as u64, hasher));
        r.record(&rel, Some(&sha))
    })
    .unwrap_or(Ok(()))
}

/// Records the files of a state directory under the name it is about to be renamed to (a
/// staged session published whole).
pub(crate) fn before_move_dir(from: &Path, to: &Path) -> io::Result<()> {
    with(|r| {
        let (Some(from), Some(to)) = (r.rel(from), r.rel(to)) else { return Ok(()) };
        r.load();
        let prefix = format!("{from}/");
        let mut moved: Vec<(String, String)> = r
            .index
            .iter()
            .filter_map(|(p, (_, last))| p.strip_prefix(&prefix).map(|rest| (format!("{to}/{rest}"), last.clone())))
            .collect();
        moved.sort();
        for (p, sha) in moved {
            r.record(&p, Some(&sha))?;
        }
        Ok(())
    })
    .unwrap_or(Ok(()))
}

/// Forgets a state file `work` removes.
pub(crate) fn before_remove(path: &Path) -> io::Result<()> {
    with(|r| {
        let Some(rel) = r.rel(path) else { return Ok(()) };
        r.running.remove(path);
        r.record(&rel, None)
    })
    .unwrap_or(Ok(()))
}

/// Checks what was read from `path` against the last recorded digest.
pub(crate) fn check(path: &Path, bytes: &[u8]) -> io::Result<()> {
    let verdict = with(|r| {
        let rel = r.rel(path)?;
        r.load();
        let (prev, last) = r.index.get(&rel)?;
        let sha = super::sha256_hex(bytes);
        if &sha == last || prev.as_deref() == Some(sha.as_str()) {
            return None;
        }
        let name = path.file_name().map(|n| n.to_string_lossy().into_owned()).unwrap_or_default();
        Some(format!(
            "state file `{name}` was changed outside a run of work (its sha256 is {}…, work last wrote {}…); \
             restore it or start over",
            &sha[..12],
            &last[..last.len().min(12)]
        ))
    });
    match verdict.flatten() {
        Some(msg) => Err(io::Error::new(io::ErrorKind::InvalidData, msg)),
        None => Ok(()),
    }
}

/// The state files this process wrote, with their last digests.
pub fn written() -> BTreeMap<String, String> {
    with(|r| r.written.clone()).unwrap_or_default()
}

/// The digest log's chain head (the sha256 of its last line).
pub fn head() -> String {
    with(|r| {
        r.load();
        r.head.clone()
    })
    .unwrap_or_default()
}
