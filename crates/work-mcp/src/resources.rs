//! The state files of past runs as resources: `work://state/<path under the state dir>`.
//! Only the files a person reads to audit a run are served (event logs, exhaust journals,
//! until sessions and reports, implement artifacts, ultra notepads and states), every one
//! re-redacted on the way out; any other path is refused.

use std::path::{Component, Path, PathBuf};

/// The URI scheme and prefix of every resource.
pub const PREFIX: &str = "work://state/";

/// One servable file.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Entry {
    /// Its path under the state directory, with `/`.
    pub rel: String,
    /// Its MIME type.
    pub mime: &'static str,
    /// Its size in bytes.
    pub size: u64,
}

/// Whether `rel` (components under the state directory) is one of the served kinds.
fn served(parts: &[&str]) -> bool {
    match parts {
        ["runs", _, "events.jsonl"] => true,
        ["quality-journals", f] => f.ends_with(".json"),
        ["sessions", _, f] => f.ends_with(".md"),
        ["sessions", _, "reports", f] => f.ends_with(".md"),
        ["iterations", _, "stats.json" | "BLOCKED.md"] => true,
        ["goals", _, "notepad.md" | "state.json" | "receipts.json"] => true,
        _ => false,
    }
}

fn mime(rel: &str) -> &'static str {
    if rel.ends_with(".jsonl") {
        "application/x-ndjson"
    } else if rel.ends_with(".json") {
        "application/json"
    } else {
        "text/markdown"
    }
}

/// Every served file under `state_dir`, in path order.
pub fn list(state_dir: &Path) -> Vec<Entry> {
    let mut out = Vec::new();
    walk(state_dir, state_dir, 0, &mut out);
    out.sort_by(|a, b| a.rel.cmp(&b.rel));
    out
}

fn walk(base: &Path, dir: &Path, depth: usize, out: &mut Vec<Entry>) {
    if depth > 3 {
        return;
    }
    for e in std::fs::read_dir(dir).into_iter().flatten().filter_map(|e| e.ok()) {
        let Ok(ft) = e.file_type() else { continue };
        let path = e.path();
        if ft.is_dir() {
            walk(base, &path, depth + 1, out);
        } else if ft.is_file()
            && let Ok(rel) = path.strip_prefix(base)
            && let Some(rel) = rel.to_str()
        {
            let parts: Vec<&str> = rel.split('/').collect();
            if served(&parts) {
                let size = e.metadata().map(|m| m.len()).unwrap_or(0);
                out.push(Entry { rel: rel.to_string(), mime: mime(rel), size });
            }
        }
    }
}

/// Why a resource cannot be read.
#[derive(Debug, thiserror::Error)]
pub enum ReadError {
    /// Not a `work://state/` URI of a served file.
    #[error("read resource `{0}`: not a run file of this repository (expected {PREFIX}<path>)")]
    NotServed(String),
    /// The file is not there (or cannot be read).
    #[error("read resource `{uri}`: {source}")]
    Io {
        /// The URI.
        uri: String,
        /// The OS error.
        source: std::io::Error,
    },
}

/// The file behind `uri`, confined to `state_dir` (no `..`, no symlink out), and its MIME type.
pub fn resolve(state_dir: &Path, uri: &str) -> Result<(PathBuf, &'static str), ReadError> {
    let not = || ReadError::NotServed(uri.to_string());
    let rel = uri.strip_prefix(PREFIX).ok_or_else(not)?;
    let rel_path = Path::new(rel);
    if !rel_path.components().all(|c| matches!(c, Component::Normal(_))) {
        return Err(not());
    }
    let parts: Vec<&str> = rel.split('/').collect();
    if !served(&parts) {
        return Err(not());
    }
    let path = state_dir.join(rel_path);
    let real = path.canonicalize().map_err(|source| ReadError::Io { uri: uri.into(), source })?;
    let base = state_dir.canonicalize().map_err(|source| ReadError::Io { uri: uri.into(), source })?;
    if !real.starts_with(&base) {
        return Err(not());
    }
    Ok((real, mime(rel)))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn serves_run_files_only_and_stays_inside() {
        let dir = tempfile::tempdir().expect("tempdir");
        let d = dir.path();
        for f in ["runs/r1/events.jsonl", "quality-journals/work-exhaust-x.json", "sessions/s/report.md", "secret.txt"]
        {
            let p = d.join(f);
            std::fs::create_dir_all(p.parent().expect("parent")).expect("mkdir");
            std::fs::write(p, "x").expect("write");
        }
        let rels: Vec<String> = list(d).into_iter().map(|e| e.rel).collect();
        assert_eq!(rels, ["quality-journals/work-exhaust-x.json", "runs/r1/events.jsonl", "sessions/s/report.md"]);
        assert!(resolve(d, "work://state/runs/r1/events.jsonl").is_ok());
        for bad in
            ["work://state/secret.txt", "work://state/runs/../secret.txt", "file:///etc/passwd", "work://state//etc/x"]
        {
            assert!(matches!(resolve(d, bad), Err(ReadError::NotServed(_))), "{bad}");
        }
    }
}
