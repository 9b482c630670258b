//! Oracle commands (gates 1 and 3): deterministic enumerations run with `sh -c` at the root
//! of the engine's copy of the tree as the run started ([`OracleTree`]), never in the tree the
//! finders can write. Their stdout is a JSON array of items, or `PATH:LINE[:TEXT]` lines (what
//! `grep -n` and `rg -n` print).

use crate::items::parse_file_line;
use serde_json::{Map, Value};
use std::path::{Path, PathBuf};
use std::time::Duration;
use work_git::copy::EngineCopy;
use work_git::inventory::Inventory;
use work_runtime::spawn::Spawner;

/// Where a run's oracles search: the engine's copy of the tree as the run started (git's
/// snapshot of it — HEAD and any uncommitted change, the state directory left out — checked out
/// under the git directory, the ignored entries copied in, files past 1 MiB hard-linked:
/// [`work_git::Git::engine_copy`]). Made once per run, before any finder runs; removed when
/// dropped and on an interruption. A finder that deletes or rewrites the file an oracle greps
/// (tracked, untracked or ignored — but an ignored file past 1 MiB rewritten in place, which
/// the copy shares) changes its own tree, not this one; one that writes into the
/// copy itself (it lies in the git directory, which only the sandbox makes read-only) is seen
/// before the next oracle runs, and the copy is made again from the tree the run started with
/// (its ignored entries as they are by then). Outside a git repository there is no copy: the
/// oracles run in the tree itself, and a dry stop is then never `confirmed`.
#[derive(Debug, Default)]
pub struct OracleTree {
    copy: Option<Copied>,
}

/// The copy and what it is made from.
#[derive(Debug)]
struct Copied {
    git: work_git::Git,
    /// The state directory, left out of the copy.
    exclude: Vec<String>,
    /// The snapshot of the tree when the run started.
    tree: String,
    /// Where the copies are made ([`work_git::Git::copies_home`]).
    home: PathBuf,
    copy: EngineCopy,
    /// The copy as the engine last left it.
    seen: Inventory,
}

impl OracleTree {
    /// The copy of `root`'s tree now (`state_dir` left out when it lies inside `root`); no copy
    /// outside a git repository.
    pub fn at_start(root: &Path, state_dir: &Path) -> Result<Self, OracleError> {
        let git = work_git::Git::new(root);
        if !git.is_repo() {
            return Ok(OracleTree { copy: None });
        }
        let no_copy = |e: work_git::GitError| OracleError::NoCopy(e.to_string());
        let exclude: Vec<String> = state_dir
            .strip_prefix(root)
            .ok()
            .map(|p| p.to_string_lossy().into_owned())
            .filter(|p| !p.is_empty())
            .into_iter()
            .collect();
        let tree = git.snapshot_tree(&exclude).map_err(no_copy)?;
        let home = git.copies_home().map_err(no_copy)?;
        let copy = git.engine_copy(&tree, &exclude).map_err(no_copy)?;
        let seen = Inventory::read_only(copy.path(), &[]);
        Ok(OracleTree { copy: Some(Copied { git, exclude, tree, home, copy, seen }) })
    }

    /// The copy's root, where the oracles run (`None` outside a git repository), and what in it
    /// was changed since the engine last left it — then it was made again from the tree the
    /// run started with.
    pub fn ready(&mut self) -> Result<(Option<PathBuf>, Vec<String>), OracleError> {
        let Some(c) = &mut self.copy else { return Ok((None, Vec::new())) };
        let now = Inventory::read_only(c.copy.path(), &[]);
        let changes = c.seen.changes(&now);
        c.seen = now;
        if !changes.is_empty() {
            c.copy = c.git.engine_copy(&c.tree, &c.exclude).map_err(|e| OracleError::NoCopy(e.to_string()))?;
            c.seen = Inventory::read_only(c.copy.path(), &[]);
        }
        Ok((Some(c.copy.path().to_path_buf()), changes))
    }

    /// Records the copy as the oracles left it (what they write there is the engine's own).
    pub fn settle(&mut self) {
        if let Some(c) = &mut self.copy {
            c.seen = Inventory::read_only(c.copy.path(), &[]);
        }
    }

    /// The directory the copies are made in: left out of the read-only walks of the tree.
    pub fn home(&self) -> Option<&Path> {
        self.copy.as_ref().map(|c| c.home.as_path())
    }
}

/// Why an oracle gave no usable answer.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum OracleError {
    /// The command could not run, or exited with a failure.
    #[error("run oracle `{command}`: {reason}")]
    Failed {
        /// The command.
        command: String,
        /// Why.
        reason: String,
    },
    /// The engine's copy the oracles search could not be made.
    #[error("make the engine's copy of the tree the oracles search: {0}")]
    NoCopy(String),
    /// The output is neither a JSON array of items nor `PATH:LINE[:TEXT]` lines.
    #[error("read oracle `{command}` output: {reason}")]
    BadOutput {
        /// The command.
        command: String,
        /// What is wrong.
        reason: String,
    },
}

/// Runs one oracle and returns its items (each an object with at least `id` and `location`).
///
/// Exit code 0 ⇒ the output is parsed. For a search command (`grep`, `rg`, `ag`, `ack`,
/// `git grep`), exit code 1 with nothing on stdout or stderr is their "no match" ⇒ no items.
/// Any other non-zero exit (including `false` or `exit 1` from anything else) fails.
pub async fn run_oracle(
    spawner: &Spawner,
    root: &Path,
    command: &str,
    timeout: Duration,
) -> Result<Vec<Map<String, Value>>, OracleError> {
    let failed = |reason: String| OracleError::Failed { command: command.to_string(), reason };
    let out = spawner.shell(command, root, Some(timeout)).await.map_err(|e| failed(e.to_string()))?;
    let stdout = out.stdout_text();
    if out.code == Some(1) && stdout.trim().is_empty() && out.stderr.is_empty() && is_search_command(command) {
        return Ok(Vec::new());
    }
    if !out.success() {
        let err = out.stderr_text();
        let err = err.trim().lines().last().unwrap_or("");
        return Err(failed(if err.is_empty() { out.describe_end() } else { format!("{}: {err}", out.describe_end()) }));
    }
    if out.stdout_truncated {
        return Err(OracleError::BadOutput { command: command.into(), reason: "output exceeded the cap".into() });
    }
    parse_oracle_output(&stdout).map_err(|reason| OracleError::BadOutput { command: command.into(), reason })
}

/// True when the command's last pipeline stage is a search tool whose exit code 1 means
/// "no match".
pub fn is_search_command(command: &str) -> bool {
    let last = command.rsplit('|').next().unwrap_or(command);
    let words: Vec<&str> = last.split_whitespace().collect();
    let first = words.iter().find(|w| !w.contains('=')).copied().unwrap_or("");
    let name = first.rsplit('/').next().unwrap_or(first);
    matches!(name, "grep" | "egrep" | "fgrep" | "rg" | "ag" | "ack") || (name == "git" && words.contains(&"grep"))
}

/// Parses oracle stdout (see [`run_oracle`]).
pub fn parse_oracle_output(stdout: &str) -> Result<Vec<Map<String, Value>>, String> {
    let t = stdout.trim();
    if t.is_empty() {
        return Ok(Vec::new());
    }
    if t.starts_with('[') {
        let v: Value = serde_json::from_str(t).map_err(|e| format!("not a JSON array of items: {e}"))?;
        let Value::Array(arr) = v else { return Err("not a JSON array".into()) };
        let mut items = Vec::new();
        for (i, it) in arr.into_iter().enumerate() {
            let Value::Object(mut m) = it else { return Err(format!("item {i} is not an object")) };
            let id = m.get("id").and_then(Value::as_str).map(str::to_string);
            let loc = m.get("location").and_then(Value::as_str).map(str::to_string);
            match (id, loc) {
                (None, None) => return Err(format!("item {i} has neither `id` nor `location`")),
                (Some(id), None) => {
                    m.insert("location".into(), Value::from(id));
                }
                (None, Some(loc)) => {
                    m.insert("id".into(), Value::from(loc));
                }
                _ => {}
            }
            if !m.contains_key("title") {
                let title = m.get("id").cloned().unwrap_or(Value::Null);
                m.insert("title".into(), title);
            }
            items.push(m);
        }
        return Ok(items);
    }
    let mut items = Vec::new();
    for (n, line) in t.lines().enumerate() {
        if line.trim().is_empty() {
            continue;
        }
        let Some(fl) = parse_file_line(line) else {
            return Err(format!("line {} is not PATH:LINE[:TEXT]: {:?}", n + 1, truncate(line, 80)));
        };
        let mut m = Map::new();
        let key = fl.key();
        m.insert("id".into(), Value::from(key.clone()));
        m.insert("location".into(), Value::from(key));
        m.insert("title".into(), Value::from(fl.text.as_deref().map(str::trim).unwrap_or("").to_string()));
        items.push(m);
    }
    Ok(items)
}

fn truncate(s: &str, n: usize) -> String {
    s.chars().take(n).collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_grep_lines_and_json() {
        let items = parse_oracle_output("./src/a.rs:3:fn x() {}\nsrc/b.rs:10:y\n").expect("parses");
        assert_eq!(items.len(), 2);
        assert_eq!(items[0]["id"], "src/a.rs:3");
        assert_eq!(items[0]["title"], "fn x() {}");
        let items = parse_oracle_output(r#"[{"location": "a:1"}, {"id": "concept-x", "title": "t"}]"#).expect("json");
        assert_eq!(items[0]["id"], "a:1");
        assert_eq!(items[1]["location"], "concept-x");
        assert!(parse_oracle_output("garbage line").is_err());
        assert!(parse_oracle_output("[1]").is_err());
    }

    #[test]
    fn only_search_commands_read_exit_1_as_no_match() {
        assert!(is_search_command("grep -rn x src"));
        assert!(is_search_command("LC_ALL=C rg -n x"));
        assert!(is_search_command("find . | /usr/bin/grep -n x"));
        assert!(is_search_command("git grep -n x"));
        assert!(!is_search_command("false"));
        assert!(!is_search_command("exit 1"));
        assert!(!is_search_command("sh -c 'grep x' && false"));
    }
}
