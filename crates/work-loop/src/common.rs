//! What every verb shares: the error type, the result shape, confined spec directories,
//! status lines, hashing and the exclusive lock.

use serde_json::Value;
use sha2::{Digest, Sha256};
use std::fs::{self, OpenOptions};
use std::io::{self, Write};
use std::path::{Path, PathBuf};
use work_runtime::ExitStatus;
use work_runtime::fsx;

/// Why a verb did not do what was asked.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum LoopError {
    /// Bad input (a flag, a path, an unreadable or malformed file): exit 2, nothing changed.
    /// The message reads after "failed to".
    #[error("{0}")]
    BadInput(String),
    /// A refusal by the rules (illegal transition, guard, run-id mismatch, lock held): exit 1,
    /// nothing changed. `json` is the result document for `--json`.
    #[error("{message}")]
    Refused {
        /// The reason, reading after "failed to".
        message: String,
        /// The result document.
        json: Value,
    },
}

impl LoopError {
    /// A bad-input error.
    pub fn bad(msg: impl Into<String>) -> Self {
        LoopError::BadInput(msg.into())
    }

    /// A refusal whose JSON document is `{"ok": false, "error": msg}` merged with `extra`.
    pub fn refused(msg: impl Into<String>, extra: Value) -> Self {
        let message = msg.into();
        let mut json = serde_json::json!({ "ok": false, "error": message });
        if let (Some(o), Value::Object(e)) = (json.as_object_mut(), extra) {
            for (k, v) in e {
                o.insert(k, v);
            }
        }
        LoopError::Refused { message, json }
    }

    /// The exit status.
    pub fn exit_status(&self) -> ExitStatus {
        match self {
            LoopError::BadInput(_) => ExitStatus::BadInput,
            LoopError::Refused { .. } => ExitStatus::Unsuccessful,
        }
    }
}

/// What a verb produced: the exit status, the `--json` document and the human text.
#[derive(Debug, Clone, PartialEq)]
pub struct Outcome {
    /// 0 on success; 1 for a negative answer that is not a refusal (`wave check`, `check`, …).
    pub exit: ExitStatus,
    /// The document printed with `--json`.
    pub json: Value,
    /// The lines printed without `--json`.
    pub text: String,
}

impl Outcome {
    /// A successful outcome.
    pub fn ok(json: Value, text: impl Into<String>) -> Self {
        Outcome { exit: ExitStatus::Done, json, text: text.into() }
    }

    /// An outcome with an explicit exit status.
    pub fn with(exit: ExitStatus, json: Value, text: impl Into<String>) -> Self {
        Outcome { exit, json, text: text.into() }
    }
}

/// Result of a verb.
pub type LoopResult = Result<Outcome, LoopError>;

/// Resolves a repository-relative path from outside through [`fsx::confine`], mapping refusals
/// to bad input.
pub fn confine(root: &Path, rel: &str) -> Result<PathBuf, LoopError> {
    fsx::confine(root, rel).map_err(|e| LoopError::bad(format!("use path `{rel}`: {e}")))
}

/// A spec directory (`docs/specs/<feature>`), confined to the repository root.
#[derive(Debug, Clone)]
pub struct SpecDir {
    root: PathBuf,
    rel: String,
    dir: PathBuf,
}

impl SpecDir {
    /// Confines `rel` under `root`. The directory need not exist yet.
    pub fn open(root: &Path, rel: &str) -> Result<SpecDir, LoopError> {
        let dir = confine(root, rel)?;
        if dir.exists() && !dir.is_dir() {
            return Err(LoopError::bad(format!("use spec directory `{rel}`: not a directory")));
        }
        let rel = rel.trim_end_matches('/').to_string();
        Ok(SpecDir { root: root.to_path_buf(), rel, dir })
    }

    /// The path as given (without a trailing slash).
    pub fn rel(&self) -> &str {
        &self.rel
    }

    /// The resolved directory.
    pub fn dir(&self) -> &Path {
        &self.dir
    }

    /// A file of the directory, confined again (so a symlinked file cannot lead outside).
    pub fn file(&self, name: &str) -> Result<PathBuf, LoopError> {
        confine(&self.root, &format!("{}/{name}", self.rel))
    }

    /// Reads a file of the directory; `None` when it does not exist.
    pub fn read_optional(&self, name: &str) -> Result<Option<String>, LoopError> {
        let p = self.file(name)?;
        fsx::read_optional(&p).map_err(|e| LoopError::bad(format!("read `{}/{name}`: {e}", self.rel)))
    }
}

/// The value of the first status line of a spec or plan: `**Status:** X`, `Status: X`,
/// `- **Status**: X` (case-insensitive key; the first word of the value, without markup).
/// Lines inside fenced code blocks are skipped.
pub fn read_status(text: &str) -> Option<String> {
    let mut fence = false;
    for line in text.lines() {
        let t = line.trim();
        if t.starts_with("```") || t.starts_with("~~~") {
            fence = !fence;
            continue;
        }
        if fence {
            continue;
        }
        let t = t.trim_start_matches(['-', '*', '+', '>', ' ']).trim_start();
        let t = t.trim_start_matches(['*', '_']);
        let Some(head) = t.get(..6) else { continue };
        if !head.eq_ignore_ascii_case("status") {
            continue;
        }
        let rest = t[6..].trim_start_matches(['*', '_']).trim_start();
        let Some(rest) = rest.strip_prefix(':') else { continue };
        let rest = rest.trim_start_matches(['*', '_', ' ', '`']);
        let word: String = rest.chars().take_while(|c| c.is_ascii_alphanumeric() || *c == '-').collect();
        if !word.is_empty() {
            return Some(word);
        }
    }
    None
}

/// The sha256 of `bytes`, as lowercase hex.
pub fn sha256_hex(bytes: &[u8]) -> String {
    hex::encode(Sha256::digest(bytes))
}

/// An exclusive lock held by creating `<path>` with `create_new`; removed on drop.
///
/// A lock whose recorded process is gone is stale and is taken over. A live holder makes
/// [`Lock::acquire`] fail at once with a refusal that names it: the loser of a race changes
/// nothing and says so.
#[derive(Debug)]
pub struct Lock {
    path: PathBuf,
}

impl Lock {
    /// Takes the lock at `path` (`…/engine-state.json.lock`).
    pub fn acquire(path: &Path) -> Result<Lock, LoopError> {
        for _ in 0..2 {
            match OpenOptions::new().write(true).create_new(true).open(path) {
                Ok(mut f) => {
                    // The lock's content only helps stale detection; it need not be atomic.
                    let _ = writeln!(f, "{}", std::process::id());
                    return Ok(Lock { path: path.to_path_buf() });
                }
                Err(e) if e.kind() == io::ErrorKind::AlreadyExists => {
                    let holder = fs::read_to_string(path).ok().and_then(|s| s.trim().parse::<i32>().ok());
                    match holder {
                        Some(pid) if !process_alive(pid) => {
                            let _ = fs::remove_file(path);
                        }
                        // A lock being written right now has no pid yet: it is live.
                        _ => {
                            let who = holder.map(|p| format!(" by pid {p}")).unwrap_or_default();
                            return Err(LoopError::refused(
                                format!(
                                    "take the lock `{}`: another transition holds it{who}; nothing was changed",
                                    path.display()
                                ),
                                serde_json::json!({ "lock": path.display().to_string(), "holder_pid": holder }),
                            ));
                        }
                    }
                }
                Err(e) => return Err(LoopError::bad(format!("create the lock `{}`: {e}", path.display()))),
            }
        }
        Err(LoopError::refused(
            format!("take the lock `{}`: it keeps reappearing; nothing was changed", path.display()),
            serde_json::json!({ "lock": path.display().to_string() }),
        ))
    }
}

impl Drop for Lock {
    fn drop(&mut self) {
        let _ = fs::remove_file(&self.path);
    }
}

fn process_alive(pid: i32) -> bool {
    if pid <= 0 {
        return false;
    }
    match nix::sys::signal::kill(nix::unistd::Pid::from_raw(pid), None) {
        Ok(()) => true,
        Err(nix::errno::Errno::ESRCH) => false,
        Err(_) => true,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn status_lines_in_every_spelling() {
        assert_eq!(read_status("# T\n\n**Status:** Approved\n").as_deref(), Some("Approved"));
        assert_eq!(read_status("Status: Draft\n").as_deref(), Some("Draft"));
        assert_eq!(read_status("- **Status**: Implementing (since x)\n").as_deref(), Some("Implementing"));
        assert_eq!(read_status("status: `Shipped`\n").as_deref(), Some("Shipped"));
        assert_eq!(read_status("```\nStatus: Draft\n```\nStatus: Done\n").as_deref(), Some("Done"));
        assert_eq!(read_status("Statuses: x\nno status\n"), None);
    }

    #[test]
    fn lock_is_exclusive_and_released_on_drop() {
        let d = tempfile::tempdir().expect("tempdir");
        let p = d.path().join("x.lock");
        let a = Lock::acquire(&p).expect("first");
        let err = Lock::acquire(&p).expect_err("second is refused");
        assert!(matches!(err, LoopError::Refused { .. }), "{err:?}");
        drop(a);
        assert!(!p.exists());
        Lock::acquire(&p).expect("free again");
    }

    #[test]
    fn stale_lock_of_a_dead_process_is_taken_over() {
        let d = tempfile::tempdir().expect("tempdir");
        let p = d.path().join("x.lock");
        // pid 0x3fffffff is above any pid_max, so no such process exists.
        fs::write(&p, "1073741823\n").expect("write");
        let _l = Lock::acquire(&p).expect("stale lock taken over");
    }
}
