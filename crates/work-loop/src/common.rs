//! What every verb shares: the error type, the result shape, confined spec directories,
//! status lines, hashing and the exclusive lock.

use serde_json::Value;
use sha2::{Digest, Sha256};
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

    /// The work-loop scripts stop with exit 1 on every refusal, a missing or unreadable state
    /// file and a path they will not use alike (only a malformed command line is exit 2):
    /// the engine and cohort verbs answer the same way, so bad input becomes a refusal.
    #[must_use]
    pub fn as_script_refusal(self) -> Self {
        match self {
            LoopError::BadInput(m) => LoopError::refused(m, serde_json::json!({ "reason": "bad_input" })),
            other => other,
        }
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
    /// True when the text goes to stderr (the scripts print their findings and sentinels
    /// there); the `--json` document is always on stdout.
    pub text_on_stderr: bool,
    /// Warnings printed on stderr (one line each, with or without `--json`), as the scripts
    /// print theirs beside a successful answer.
    pub warnings: Vec<String>,
}

impl Outcome {
    /// A successful outcome.
    pub fn ok(json: Value, text: impl Into<String>) -> Self {
        Outcome { exit: ExitStatus::Done, json, text: text.into(), text_on_stderr: false, warnings: Vec::new() }
    }

    /// An outcome with an explicit exit status.
    pub fn with(exit: ExitStatus, json: Value, text: impl Into<String>) -> Self {
        Outcome { exit, json, text: text.into(), text_on_stderr: false, warnings: Vec::new() }
    }

    /// The same outcome with its text on stderr.
    #[must_use]
    pub fn text_to_stderr(mut self) -> Self {
        self.text_on_stderr = true;
        self
    }

    /// The same outcome with these warnings.
    #[must_use]
    pub fn with_warnings(mut self, warnings: Vec<String>) -> Self {
        self.warnings = warnings;
        self
    }
}

/// Result of a verb.
pub type LoopResult = Result<Outcome, LoopError>;

/// Resolves a repository-relative path from outside through [`fsx::confine`], mapping refusals
/// to bad input.
pub fn confine(root: &Path, rel: &str) -> Result<PathBuf, LoopError> {
    let rel = &repo_relative(root, rel)?;
    fsx::confine(root, rel).map_err(|e| LoopError::bad(format!("use path `{rel}`: {e}")))
}

/// The scripts take absolute paths as well as relative ones: an absolute path whose deepest
/// existing ancestor resolves (through symlinks) inside the repository becomes the
/// root-relative path; one that resolves outside is bad input. Relative paths are returned
/// unchanged (confinement judges them).
pub fn repo_relative(root: &Path, given: &str) -> Result<String, LoopError> {
    if !given.starts_with('/') {
        return Ok(given.to_string());
    }
    let outside = || LoopError::bad(format!("use path `{given}`: it resolves outside the repository"));
    let root_real = std::fs::canonicalize(root).map_err(|_| outside())?;
    let mut probe = PathBuf::from(given);
    let mut rest: Vec<String> = Vec::new();
    let real = loop {
        if let Ok(real) = std::fs::canonicalize(&probe) {
            break real;
        }
        let name = probe.file_name().and_then(|n| n.to_str()).map(str::to_string);
        match (name, probe.parent()) {
            (Some(n), Some(parent)) => {
                rest.push(n);
                probe = parent.to_path_buf();
            }
            _ => return Err(outside()),
        }
    };
    let inside = real.strip_prefix(&root_real).map_err(|_| outside())?;
    let mut parts: Vec<String> = inside.components().map(|c| c.as_os_str().to_string_lossy().into_owned()).collect();
    parts.extend(rest.into_iter().rev());
    if parts.is_empty() {
        return Ok(".".to_string());
    }
    Ok(parts.join("/"))
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
        let rel = &repo_relative(root, rel)?;
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

    /// The repository root.
    pub fn root(&self) -> &Path {
        &self.root
    }

    /// The directory's last component (the scripts' `feature`).
    pub fn feature(&self) -> String {
        self.dir.file_name().map(|n| n.to_string_lossy().into_owned()).unwrap_or_default()
    }

    /// The resolved directory.
    pub fn dir(&self) -> &Path {
        &self.dir
    }

    /// A file of the directory, confined again (so a symlinked file cannot lead outside).
    pub fn file(&self, name: &str) -> Result<PathBuf, LoopError> {
        confine(&self.root, &format!("{}/{name}", self.rel))
    }

    /// Reads a file of the directory; `None` when it does not exist. As the scripts read
    /// their managed files: it must be a regular file (not a symlink, a directory or a FIFO)
    /// of at most [`MAX_MANAGED_BYTES`].
    pub fn read_optional(&self, name: &str) -> Result<Option<String>, LoopError> {
        let p = self.file(name)?;
        let bad = |why: String| LoopError::bad(format!("read `{}/{name}`: {why}", self.rel));
        // The path as named, not as confinement resolved it: a symlink is refused even when it
        // leads inside the repository.
        match std::fs::symlink_metadata(self.dir.join(name)) {
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(None),
            Err(e) => return Err(bad(e.to_string())),
            Ok(m) if !m.file_type().is_file() => {
                return Err(bad(format!("{name} must be a regular file (not a symlink, directory or device)")));
            }
            Ok(m) if m.len() > MAX_MANAGED_BYTES => {
                return Err(bad(format!("{name} exceeds the {MAX_MANAGED_BYTES}-byte (8 MiB) limit")));
            }
            Ok(_) => {}
        }
        fsx::read_optional(&p).map_err(|e| bad(e.to_string()))
    }

    /// A spec directory given as an absolute path outside the repository, as the scripts'
    /// cohort takes it (it refuses only `..`): the deepest existing ancestor, resolved through
    /// symlinks, becomes the root its files are confined under.
    pub fn open_outside(given: &str) -> Result<SpecDir, LoopError> {
        let p = Path::new(given);
        if !p.is_absolute() || p.components().any(|c| matches!(c, std::path::Component::ParentDir)) {
            return Err(LoopError::bad(format!("use path `{given}`: it must not contain `..`")));
        }
        let mut probe = p.to_path_buf();
        let mut rest: Vec<String> = Vec::new();
        let real = loop {
            if let Ok(real) = std::fs::canonicalize(&probe) {
                break real;
            }
            let name = probe.file_name().and_then(|n| n.to_str()).map(str::to_string);
            match (name, probe.parent()) {
                (Some(n), Some(parent)) => {
                    rest.push(n);
                    probe = parent.to_path_buf();
                }
                _ => return Err(LoopError::bad(format!("use path `{given}`: no part of it exists"))),
            }
        };
        let (root, mut rel) = if rest.is_empty() {
            let name = real.file_name().and_then(|n| n.to_str()).map(str::to_string);
            match (real.parent(), name) {
                (Some(parent), Some(n)) => (parent.to_path_buf(), vec![n]),
                _ => return Err(LoopError::bad(format!("use path `{given}`: it is the file-system root"))),
            }
        } else {
            (real, Vec::new())
        };
        rel.extend(rest.into_iter().rev());
        SpecDir::open(&root, &rel.join("/"))
    }
}

/// The largest state file or artifact read (the scripts' cap: 8 MiB).
pub const MAX_MANAGED_BYTES: u64 = 8 * 1024 * 1024;

/// Where the spec directories live, relative to the repository root.
pub const SPECS_DIR: &str = "docs/specs";

/// The spec directories (`docs/specs/<name>`, sorted) holding loop state: an
/// `engine-state.json` or a `state.json` that is a regular file inside the repository.
pub fn spec_dirs_with_state(root: &Path) -> Result<Vec<String>, LoopError> {
    let base = confine(root, SPECS_DIR)?;
    let Ok(entries) = std::fs::read_dir(&base) else { return Ok(Vec::new()) };
    let mut out: Vec<String> = entries
        .filter_map(Result::ok)
        .filter_map(|e| e.file_name().to_str().map(str::to_string))
        .filter(|name| !name.starts_with('.'))
        .map(|name| format!("{SPECS_DIR}/{name}"))
        .filter(|d| {
            ["engine-state.json", "state.json"]
                .iter()
                .any(|f| fsx::confine(root, &format!("{d}/{f}")).map(|p| p.is_file()).unwrap_or(false))
        })
        .collect();
    out.sort();
    Ok(out)
}

/// The spec directory to use when a verb is given none: the only `docs/specs/*/` with loop
/// state. None or several is bad input naming the candidates.
pub fn find_spec_dir(root: &Path) -> Result<String, LoopError> {
    let mut found = spec_dirs_with_state(root)?;
    match found.len() {
        1 => Ok(found.remove(0)),
        0 => Err(LoopError::bad(format!(
            "find the spec directory: no `{SPECS_DIR}/*/` has engine-state.json or state.json; pass SPEC_DIR or --spec-dir"
        ))),
        _ => Err(LoopError::bad(format!(
            "find the spec directory: several have loop state ({}); pass SPEC_DIR or --spec-dir",
            found.join(", ")
        ))),
    }
}

/// The value of the first status line of a spec or plan: `**Status:** X`, `Status: X`,
/// `- **Status**: X` (case-insensitive key; the first word of the value, without markup).
/// Lines inside fenced code blocks are skipped.
pub fn read_status(text: &str) -> Option<String> {
    status_lines(text).into_iter().next().map(|(_, s)| s)
}

/// The part of each line outside HTML comments (`<!-- … -->`, which may span lines), in order.
pub fn uncommented_lines(text: &str) -> Vec<String> {
    let mut in_comment = false;
    let mut out = Vec::new();
    for line in text.lines() {
        let mut visible = String::new();
        let mut rest = line;
        loop {
            if in_comment {
                match rest.find("-->") {
                    Some(i) => {
                        rest = &rest[i + 3..];
                        in_comment = false;
                    }
                    None => break,
                }
            } else {
                match rest.find("<!--") {
                    Some(i) => {
                        visible.push_str(&rest[..i]);
                        rest = &rest[i + 4..];
                        in_comment = true;
                    }
                    None => {
                        visible.push_str(rest);
                        break;
                    }
                }
            }
        }
        out.push(visible);
    }
    out
}

/// `(0-based index, line)` of every line outside fenced code blocks (```` ``` ```` or `~~~`
/// opens and closes one; the fence lines themselves are left out): the one reading of fences
/// every markdown parser of this crate shares.
pub fn unfenced<'a>(lines: impl IntoIterator<Item = &'a str>) -> impl Iterator<Item = (usize, &'a str)> {
    let mut fence = false;
    lines.into_iter().enumerate().filter(move |(_, line)| {
        let t = line.trim_start();
        if t.starts_with("```") || t.starts_with("~~~") {
            fence = !fence;
            return false;
        }
        !fence
    })
}

/// `(1-based line, value)` of every status line outside fenced code and HTML comments.
pub fn status_lines(text: &str) -> Vec<(usize, String)> {
    let lines = uncommented_lines(text);
    unfenced(lines.iter().map(String::as_str))
        .filter_map(|(i, line)| status_value(line.trim()).map(|word| (i + 1, word)))
        .collect()
}

fn status_value(t: &str) -> Option<String> {
    let t = t.trim_start_matches(['-', '*', '+', '>', ' ']).trim_start();
    let t = t.trim_start_matches(['*', '_']);
    let head = t.get(..6)?;
    if !head.eq_ignore_ascii_case("status") {
        return None;
    }
    let rest = t[6..].trim_start_matches(['*', '_']).trim_start();
    let rest = rest.strip_prefix(':')?;
    let rest = rest.trim_start_matches(['*', '_', ' ', '`']);
    let word: String = rest.chars().take_while(|c| c.is_ascii_alphanumeric() || *c == '-').collect();
    (!word.is_empty()).then_some(word)
}

/// The sha256 of `bytes`, as lowercase hex.
pub fn sha256_hex(bytes: &[u8]) -> String {
    hex::encode(Sha256::digest(bytes))
}

pub use crate::lock::Lock;

/// A document on one line as the scripts print theirs (Python's `json.dumps`: `", "` and
/// `": "` between items, non-ASCII escaped), so a caller comparing bytes sees the same line.
pub fn script_json(v: &Value) -> String {
    let mut out = String::new();
    write_script_json(v, &mut out);
    out
}

fn write_script_json(v: &Value, out: &mut String) {
    match v {
        Value::Array(items) => {
            out.push('[');
            for (i, item) in items.iter().enumerate() {
                if i > 0 {
                    out.push_str(", ");
                }
                write_script_json(item, out);
            }
            out.push(']');
        }
        Value::Object(map) => {
            out.push('{');
            for (i, (k, item)) in map.iter().enumerate() {
                if i > 0 {
                    out.push_str(", ");
                }
                write_script_str(k, out);
                out.push_str(": ");
                write_script_json(item, out);
            }
            out.push('}');
        }
        Value::String(t) => write_script_str(t, out),
        other => out.push_str(&other.to_string()),
    }
}

fn write_script_str(t: &str, out: &mut String) {
    out.push('"');
    for c in t.chars() {
        match c {
            '"' => out.push_str("\\\""),
            '\\' => out.push_str("\\\\"),
            '\n' => out.push_str("\\n"),
            '\r' => out.push_str("\\r"),
            '\t' => out.push_str("\\t"),
            '\u{8}' => out.push_str("\\b"),
            '\u{c}' => out.push_str("\\f"),
            c if c.is_ascii() && !c.is_ascii_control() => out.push(c),
            c => {
                let mut units = [0u16; 2];
                for u in c.encode_utf16(&mut units) {
                    out.push_str(&format!("\\u{u:04x}"));
                }
            }
        }
    }
    out.push('"');
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::fs;

    #[test]
    fn script_json_is_pythons_json_dumps() {
        let v =
            serde_json::json!({ "run_id": "r\"1", "schema_version": 1, "w": [["T1", "T2"], []], "n": null, "é": true });
        assert_eq!(
            script_json(&v),
            r#"{"run_id": "r\"1", "schema_version": 1, "w": [["T1", "T2"], []], "n": null, "\u00e9": true}"#
        );
    }

    #[test]
    fn status_lines_in_every_spelling() {
        assert_eq!(read_status("# T\n\n**Status:** Approved\n").as_deref(), Some("Approved"));
        assert_eq!(read_status("Status: Draft\n").as_deref(), Some("Draft"));
        assert_eq!(read_status("- **Status**: Implementing (since x)\n").as_deref(), Some("Implementing"));
        assert_eq!(read_status("status: `Shipped`\n").as_deref(), Some("Shipped"));
        assert_eq!(read_status("```\nStatus: Draft\n```\nStatus: Done\n").as_deref(), Some("Done"));
        assert_eq!(read_status("Statuses: x\nno status\n"), None);
        // A commented-out status, on one line or across several, is not the live one.
        assert_eq!(read_status("<!--\nStatus: Approved\n-->\nStatus: Draft\n").as_deref(), Some("Draft"));
        assert_eq!(read_status("<!-- Status: Approved -->\nStatus: Draft\n").as_deref(), Some("Draft"));
    }

    #[test]
    fn the_only_spec_dir_with_state_is_found_and_several_are_named() {
        let d = tempfile::tempdir().expect("tempdir");
        let root = d.path();
        let err = find_spec_dir(root).expect_err("no docs/specs at all");
        assert!(matches!(err, LoopError::BadInput(_)), "{err:?}");
        fs::create_dir_all(root.join("docs/specs/a")).expect("mkdir");
        fs::create_dir_all(root.join("docs/specs/b")).expect("mkdir");
        fs::write(root.join("docs/specs/a/spec.md"), "x").expect("write");
        assert!(find_spec_dir(root).is_err(), "no state anywhere");
        fs::write(root.join("docs/specs/b/state.json"), "{}").expect("write");
        assert_eq!(find_spec_dir(root).expect("one"), "docs/specs/b");
        fs::write(root.join("docs/specs/a/engine-state.json"), "{}").expect("write");
        match find_spec_dir(root) {
            Err(LoopError::BadInput(m)) => assert!(m.contains("docs/specs/a, docs/specs/b"), "{m}"),
            other => panic!("expected bad input, got {other:?}"),
        }
    }
}
