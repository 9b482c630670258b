//! Git ground truth: what the tree really is, never what an agent says it is.
//!
//! Every call runs `git` through the runtime's spawner (blocking; callable from async code
//! running on a multi-threaded runtime, and from plain synchronous code).
#![cfg_attr(test, allow(clippy::disallowed_methods, reason = "unit tests set up their fixtures directly"))]

pub mod byproducts;
pub mod change;
pub mod copy;
pub mod evidence;
pub mod head;
pub mod integrity;
pub mod inventory;
pub mod locate;
pub mod looked;
pub mod loss;
pub mod nested;
pub mod readonly;
pub mod restore;
pub mod scope;
pub mod snapshot;
pub mod suite_report;
pub mod support_modules;
pub mod surface;
pub mod wave;

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use work_runtime::spawn::{ProcessSpec, Spawner};

/// Why a git query failed.
#[derive(Debug, Clone, thiserror::Error)]
pub enum GitError {
    /// `git` could not be started.
    #[error("run git: {0}")]
    Spawn(String),
    /// `git` exited non-zero, or was killed.
    #[error("run git {args} ({end}): {stderr}")]
    Failed {
        /// The arguments.
        args: String,
        /// The exit code (`None`: killed by a signal, or the engine's own message).
        code: Option<i32>,
        /// How it ended: `exit code 128`, `killed by signal 9`.
        end: String,
        /// What git said.
        stderr: String,
    },
}

impl GitError {
    /// A failure the engine found in git's answer rather than in how git ended.
    pub fn message(args: &[&str], what: &str) -> Self {
        GitError::Failed { args: args.join(" "), code: None, end: "unusable answer".into(), stderr: what.into() }
    }

    /// The failure of a git that ended as `out` says (not a success).
    pub(crate) fn ended(args: &[&str], out: &work_runtime::spawn::ProcessOutput) -> Self {
        GitError::Failed {
            args: args.join(" "),
            code: if out.timed_out { None } else { out.code },
            end: out.describe_end(),
            stderr: out.stderr_text().trim().to_string(),
        }
    }

    /// The exit code, when git exited with one.
    pub fn code(&self) -> Option<i32> {
        match self {
            GitError::Failed { code, .. } => *code,
            GitError::Spawn(_) => None,
        }
    }
}

/// One entry of `git status --porcelain`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct StatusEntry {
    /// The two status letters (`??` for untracked, ` M`, `A `, …).
    pub code: String,
    /// The path (the destination for renames).
    pub path: String,
}

/// What [`Git::tree_state`] measures the working tree against.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Base<'a> {
    /// HEAD and the index, as `git status` sees them: every staged, unstaged or untracked
    /// path, each with its status code.
    Status,
    /// A commit: the paths `git diff <commit>` names (the working tree against it, committed
    /// work included) plus untracked files.
    Commit(&'a str),
    /// No commit (an unborn base): every tracked file (`git ls-files`) plus untracked files.
    Empty,
}

/// One path of a [`TreeState`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PathState {
    /// The two `git status` letters (`??` untracked, ` M`, `A `, …); empty for a tracked path
    /// listed against a [`Base::Commit`] or [`Base::Empty`].
    pub code: String,
    /// sha256 hex of the working-tree file; `None` when it cannot be read (deleted).
    pub hash: Option<String>,
}

/// The working tree's change at one instant (see [`Git::tree_state`]).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TreeState {
    /// HEAD when measured (`None` on an unborn branch).
    pub head: Option<String>,
    /// Every changed or untracked path, outside the exclusions.
    pub paths: BTreeMap<String, PathState>,
}

impl TreeState {
    /// The paths whose content differs between `before` and `self` (a path that cannot be read,
    /// by its status code; staging is no change): changed, appeared or gone (back to the base),
    /// sorted. HEAD is not compared: look at [`TreeState::head`].
    pub fn changed_since(&self, before: &TreeState) -> Vec<String> {
        let seen = |t: &TreeState| -> BTreeMap<String, String> {
            t.paths
                .iter()
                .map(|(p, s)| (p.clone(), s.hash.clone().unwrap_or_else(|| format!("\0{}", s.code))))
                .collect()
        };
        inventory::diff(&seen(before), &seen(self)).into_iter().map(|(p, _, _)| p.clone()).collect()
    }

    /// The untracked paths.
    pub fn untracked(&self) -> impl Iterator<Item = &str> {
        self.paths.iter().filter(|(_, s)| s.code == "??").map(|(p, _)| p.as_str())
    }

    /// Path ⇒ content hash, `absent` standing for a file that cannot be read.
    pub fn content_map(&self, absent: &str) -> BTreeMap<String, String> {
        self.paths.iter().map(|(p, s)| (p.clone(), s.hash.clone().unwrap_or_else(|| absent.to_string()))).collect()
    }
}

/// A git repository at a root.
#[derive(Debug, Clone)]
pub struct Git {
    root: PathBuf,
}

impl Git {
    /// A handle on the repository whose work tree is `root`.
    pub fn new(root: &Path) -> Self {
        Self { root: root.to_path_buf() }
    }

    /// The repository root.
    pub fn root(&self) -> &Path {
        &self.root
    }

    /// The top level of the work tree containing `dir`, or `None` when `dir` is not in one.
    pub fn toplevel(dir: &Path) -> Option<PathBuf> {
        let out = run_in(dir, &["rev-parse", "--show-toplevel"]).ok()?;
        let top = out.trim();
        if top.is_empty() { None } else { Some(PathBuf::from(top)) }
    }

    /// Runs `git <args>` in the root and returns stdout.
    pub fn run(&self, args: &[&str]) -> Result<String, GitError> {
        run_in(&self.root, args)
    }

    /// True when the root is inside a git work tree.
    pub fn is_repo(&self) -> bool {
        self.run(&["rev-parse", "--is-inside-work-tree"]).map(|s| s.trim() == "true").unwrap_or(false)
    }

    /// `git status --porcelain` (untracked files included, one entry per file).
    pub fn status(&self) -> Result<Vec<StatusEntry>, GitError> {
        let out = self.run(&["status", "--porcelain=v1", "-z", "--untracked-files=all"])?;
        let mut entries = Vec::new();
        let mut parts = out.split('\0').filter(|s| !s.is_empty());
        while let Some(p) = parts.next() {
            if p.len() < 4 {
                continue;
            }
            let code = p[..2].to_string();
            let path = p[3..].to_string();
            if code.starts_with('R') || code.starts_with('C') {
                // -z puts the source path after the destination.
                let _ = parts.next();
            }
            entries.push(StatusEntry { code, path });
        }
        Ok(entries)
    }

    /// Runs `git <args>` whose documented answer is its exit code: `Ok(Some(stdout))` on exit
    /// 0, `Ok(None)` on `no` (exit 1: not an ancestor, no such ref, detached, differs), and an
    /// error for anything else — exit 128, a signal, a git that could not start — which is a
    /// failure of git, never an answer.
    pub fn query(&self, args: &[&str]) -> Result<Option<String>, GitError> {
        match self.run(args) {
            Ok(out) => Ok(Some(out)),
            Err(e) if e.code() == Some(1) => Ok(None),
            Err(e) => Err(e),
        }
    }

    /// The HEAD commit sha, or `None` on an unborn branch; `None` too when git fails (see
    /// [`Git::try_head_sha`] for a judgement).
    pub fn head_sha(&self) -> Option<String> {
        self.try_head_sha().ok().flatten()
    }

    /// The HEAD commit sha, `Ok(None)` on an unborn branch, an error when git fails.
    pub fn try_head_sha(&self) -> Result<Option<String>, GitError> {
        Ok(self
            .query(&["rev-parse", "--verify", "-q", "HEAD"])?
            .map(|s| s.trim().to_string())
            .filter(|s| !s.is_empty()))
    }

    /// The current branch name, or `None` when detached; `None` too when git fails (see
    /// [`Git::try_branch`] for a judgement).
    pub fn branch(&self) -> Option<String> {
        self.try_branch().ok().flatten()
    }

    /// The current branch name, `Ok(None)` when detached, an error when git fails.
    pub fn try_branch(&self) -> Result<Option<String>, GitError> {
        Ok(self
            .query(&["symbolic-ref", "--short", "-q", "HEAD"])?
            .map(|s| s.trim().to_string())
            .filter(|s| !s.is_empty()))
    }

    /// `git diff --name-only --no-renames -z <revs>`: the paths that differ between two
    /// commits (`[a, b]`), or between a commit and the working tree (`[a]`, committed, staged
    /// and unstaged work; untracked files are not in it).
    pub fn diff_names(&self, revs: &[&str]) -> Result<Vec<String>, GitError> {
        let mut args = vec!["diff", "--name-only", "--no-renames", "-z"];
        args.extend_from_slice(revs);
        Ok(split_z(&self.run(&args)?))
    }

    /// `git diff <base> <flags>` as text, leaving out `exclude` (repository-relative files or
    /// directories, matched literally, see [`is_excluded`]). Untracked files are not in it:
    /// render them from [`Git::tree_state`] in the caller's format.
    pub fn diff_text<S: AsRef<str>>(&self, base: &str, flags: &[&str], exclude: &[S]) -> Result<String, GitError> {
        let mut args: Vec<String> = vec!["diff".into(), base.into()];
        args.extend(flags.iter().map(|f| f.to_string()));
        let excludes: Vec<&str> = exclude_dirs(exclude).collect();
        if !excludes.is_empty() {
            args.extend(["--".to_string(), ".".to_string()]);
            args.extend(excludes.iter().map(|e| format!(":(exclude,literal){e}")));
        }
        let refs: Vec<&str> = args.iter().map(String::as_str).collect();
        self.run(&refs)
    }

    /// The working tree's change against `base`, outside `exclude` (repository-relative files
    /// or directories, see [`is_excluded`]): every changed or untracked path with its status
    /// code and a sha256 of its content, and HEAD at the time. Compare two of these
    /// ([`TreeState::changed_since`]) to see what changed in between, whatever was dirty
    /// already.
    pub fn tree_state<S: AsRef<str>>(&self, base: Base<'_>, exclude: &[S]) -> Result<TreeState, GitError> {
        let mut listed: Vec<(String, String)> = match base {
            Base::Status => self.status()?.into_iter().map(|e| (e.path, e.code)).collect(),
            Base::Commit(c) => self.diff_names(&[c])?.into_iter().map(|p| (p, String::new())).collect(),
            Base::Empty => split_z(&self.run(&["ls-files", "-z"])?).into_iter().map(|p| (p, String::new())).collect(),
        };
        if !matches!(base, Base::Status) {
            listed.extend(self.status()?.into_iter().filter(|e| e.code == "??").map(|e| (e.path, e.code)));
        }
        let mut paths = BTreeMap::new();
        for (path, code) in listed {
            if path.is_empty() || is_excluded(&path, exclude) {
                continue;
            }
            let hash = hash_entry(&self.root, &path);
            paths.insert(path, PathState { code, hash });
        }
        Ok(TreeState { head: self.head_sha(), paths })
    }
}

/// The sha256 of a tree entry, read without following any symlink: a regular file's content
/// (streamed, whatever its size), a symlink's target text (marked, so it never equals a file
/// with that content), `None` for what is missing or neither (a FIFO is never opened to wait).
fn hash_entry(root: &Path, rel: &str) -> Option<String> {
    match work_runtime::fsx::open_confined(root, rel) {
        Ok(f) => inventory::digest(f),
        Err(_) => work_runtime::fsx::symlink_target_confined(root, rel).map(|t| inventory::link_digest(&t)),
    }
}

fn run_in(dir: &Path, args: &[&str]) -> Result<String, GitError> {
    run_in_env(dir, args, &[])
}

/// The environment of every git the engine runs: no prompt, one locale, and objects as they are
/// — never through `refs/replace/` (an agent's `git replace <frozen blob> <its blob>` would
/// otherwise hand the engine its blob wherever it reads the frozen one).
pub(crate) const GIT_ENV: [(&str, &str); 3] =
    [("GIT_TERMINAL_PROMPT", "0"), ("LC_ALL", "C"), ("GIT_NO_REPLACE_OBJECTS", "1")];

fn run_in_env(dir: &Path, args: &[&str], env: &[(&str, &str)]) -> Result<String, GitError> {
    run_bytes(dir, args, env, None).map(|b| String::from_utf8_lossy(&b).into_owned())
}

/// Runs `git <args>` in `dir` with `stdin` and returns stdout as bytes (an error when it went
/// past the spawner's cap: a truncated blob is never taken for the file).
pub(crate) fn run_bytes(
    dir: &Path,
    args: &[&str],
    env: &[(&str, &str)],
    stdin: Option<Vec<u8>>,
) -> Result<Vec<u8>, GitError> {
    let mut spec = ProcessSpec::new("git", args.iter().map(|s| s.to_string()).collect(), dir);
    for (k, v) in GIT_ENV {
        spec = spec.with_env(k, v);
    }
    for (k, v) in env {
        spec = spec.with_env(*k, *v);
    }
    if let Some(bytes) = stdin {
        spec = spec.with_stdin(bytes);
    }
    let out = Spawner.run_blocking(&spec).map_err(|e| GitError::Spawn(e.to_string()))?;
    if out.stdout_truncated {
        return Err(GitError::Spawn(format!("git {}: its output went past the cap", args.join(" "))));
    }
    if out.success() { Ok(out.stdout) } else { Err(GitError::ended(args, &out)) }
}

fn split_z(out: &str) -> Vec<String> {
    out.split('\0').filter(|p| !p.is_empty()).map(str::to_string).collect()
}

/// The non-empty entries of an exclusion list, without trailing slashes.
pub(crate) fn exclude_dirs<S: AsRef<str>>(exclude: &[S]) -> impl Iterator<Item = &str> {
    exclude.iter().map(|e| e.as_ref().trim_end_matches('/')).filter(|e| !e.is_empty())
}

/// Whether the repository-relative `path` is one of `exclude` or lies under one of them
/// (entries are files or directories; a trailing `/` is ignored; empty entries match
/// nothing). The rule every measurement of this crate leaves paths out by.
pub fn is_excluded<S: AsRef<str>>(path: &str, exclude: &[S]) -> bool {
    exclude_dirs(exclude).any(|e| path == e || path.strip_prefix(e).is_some_and(|rest| rest.starts_with('/')))
}

/// Scratch repositories for this crate's unit tests.
#[cfg(test)]
pub(crate) mod scratch {
    use super::Git;

    /// A new repository whose first commit holds `files` (path, content); directories are made.
    pub fn repo_with(files: &[(&str, &str)]) -> (tempfile::TempDir, Git) {
        let d = tempfile::tempdir().expect("tempdir");
        let g = Git::new(d.path());
        g.run(&["init", "-q"]).expect("init");
        for (path, content) in files {
            let p = d.path().join(path);
            std::fs::create_dir_all(p.parent().expect("a parent")).expect("mkdir");
            std::fs::write(p, content).expect("write");
        }
        g.run(&["add", "-A"]).expect("add");
        g.run(&["-c", "user.email=a@b", "-c", "user.name=a", "commit", "-q", "-m", "x"]).expect("commit");
        (d, g)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn repo() -> tempfile::TempDir {
        let d = tempfile::tempdir().expect("tempdir");
        let g = Git::new(d.path());
        g.run(&["init", "-q"]).expect("init");
        g.run(&["-c", "user.email=a@b", "-c", "user.name=a", "commit", "-q", "--allow-empty", "-m", "x"])
            .expect("commit");
        d
    }

    fn commit(g: &Git, msg: &str) -> String {
        g.run(&["add", "-A"]).expect("add");
        g.run(&["-c", "user.email=a@b", "-c", "user.name=a", "commit", "-q", "-m", msg]).expect("commit");
        g.head_sha().expect("head")
    }

    fn keys(t: &TreeState) -> Vec<&str> {
        t.paths.keys().map(String::as_str).collect()
    }

    #[test]
    fn status_lists_untracked_files() {
        let d = repo();
        let g = Git::new(d.path());
        assert!(g.status().expect("status").is_empty());
        std::fs::write(d.path().join("new file.txt"), "hello").expect("write");
        let st = g.status().expect("status");
        assert_eq!(st, vec![StatusEntry { code: "??".into(), path: "new file.txt".into() }]);
        assert!(g.head_sha().is_some());
        assert!(Git::toplevel(d.path()).is_some());
    }

    #[test]
    fn exclusions_match_whole_path_components() {
        let ex = [".work/", "docs/specs/a", ""];
        assert!(is_excluded(".work", &ex));
        assert!(is_excluded(".work/runs/e.jsonl", &ex));
        assert!(is_excluded("docs/specs/a/spec.md", &ex));
        assert!(!is_excluded(".workshop/x", &ex), "a prefix that is not a component is kept");
        assert!(!is_excluded("docs/specs/ab", &ex));
        assert!(!is_excluded("src/a.rs", &ex), "an empty entry matches nothing");
        assert!(!is_excluded::<&str>("x", &[]));
    }

    #[test]
    fn tree_state_hashes_untracked_and_deleted_files_outside_exclusions() {
        let d = repo();
        let g = Git::new(d.path());
        std::fs::write(d.path().join("a.txt"), "a\n").expect("write");
        std::fs::write(d.path().join("b.txt"), "b\n").expect("write");
        commit(&g, "ab");
        let clean = g.tree_state(Base::Status, &[".work"]).expect("state");
        assert!(clean.paths.is_empty());
        assert_eq!(clean.head, g.head_sha());

        std::fs::create_dir_all(d.path().join(".work/runs")).expect("mkdir");
        std::fs::write(d.path().join(".work/runs/e.jsonl"), "x").expect("write");
        std::fs::write(d.path().join("a.txt"), "changed\n").expect("write");
        std::fs::remove_file(d.path().join("b.txt")).expect("rm");
        std::fs::write(d.path().join("new.txt"), "n\n").expect("write");
        let s1 = g.tree_state(Base::Status, &[".work/"]).expect("state");
        assert_eq!(keys(&s1), vec!["a.txt", "b.txt", "new.txt"], "the state dir is left out");
        assert_eq!(s1.paths["a.txt"].code, " M");
        assert!(s1.paths["a.txt"].hash.is_some());
        assert_eq!(s1.paths["b.txt"], PathState { code: " D".into(), hash: None });
        assert_eq!(s1.untracked().collect::<Vec<_>>(), vec!["new.txt"]);
        assert_eq!(s1.changed_since(&clean), vec!["a.txt", "b.txt", "new.txt"]);
        assert_eq!(s1.content_map("<absent>")["b.txt"], "<absent>");

        // Writes to the excluded directory change nothing; A-B-A is no change.
        std::fs::write(d.path().join(".work/runs/e.jsonl"), "xy").expect("write");
        std::fs::write(d.path().join("a.txt"), "other\n").expect("write");
        std::fs::write(d.path().join("a.txt"), "changed\n").expect("write");
        let s2 = g.tree_state(Base::Status, &[".work"]).expect("state");
        assert_eq!(s2, s1);
        assert!(s2.changed_since(&s1).is_empty());

        // Staging is a change of status, not of content; a path back at HEAD is a change.
        g.run(&["add", "a.txt"]).expect("add");
        std::fs::write(d.path().join("b.txt"), "b\n").expect("write");
        let s3 = g.tree_state(Base::Status, &[".work"]).expect("state");
        assert_eq!(s3.paths["a.txt"].code, "M ");
        assert_eq!(s3.changed_since(&s2), vec!["b.txt"]);
    }

    #[test]
    fn tree_state_against_a_commit_includes_committed_work() {
        let d = repo();
        let g = Git::new(d.path());
        let base = g.head_sha().expect("head");
        std::fs::write(d.path().join("a.txt"), "a\n").expect("write");
        std::fs::create_dir_all(d.path().join("spec")).expect("mkdir");
        std::fs::write(d.path().join("spec/plan.md"), "p\n").expect("write");
        commit(&g, "work");
        std::fs::write(d.path().join("u.txt"), "u\n").expect("write");
        let since = g.tree_state(Base::Commit(&base), &["spec"]).expect("state");
        assert_eq!(keys(&since), vec!["a.txt", "u.txt"]);
        assert_eq!(since.paths["a.txt"].code, "", "a tracked path listed by the diff has no status code");
        assert_eq!(since.untracked().collect::<Vec<_>>(), vec!["u.txt"]);
        let status = g.tree_state(Base::Status, &["spec"]).expect("state");
        assert_eq!(keys(&status), vec!["u.txt"], "against HEAD the committed work is not a change");
        let empty = g.tree_state(Base::Empty, &["spec"]).expect("state");
        assert_eq!(keys(&empty), vec!["a.txt", "u.txt"], "against nothing every tracked file counts");
        assert_eq!(g.diff_names(&[&base, "HEAD"]).expect("names"), vec!["a.txt", "spec/plan.md"]);
    }

    #[test]
    fn diff_text_leaves_exclusions_out() {
        let d = repo();
        let g = Git::new(d.path());
        std::fs::create_dir_all(d.path().join("spec")).expect("mkdir");
        std::fs::write(d.path().join("spec/plan.md"), "p\n").expect("write");
        std::fs::write(d.path().join("a.txt"), "a\n").expect("write");
        commit(&g, "files");
        std::fs::write(d.path().join("spec/plan.md"), "q\n").expect("write");
        std::fs::write(d.path().join("a.txt"), "b\n").expect("write");
        let all = g.diff_text::<&str>("HEAD", &["--no-color"], &[]).expect("diff");
        assert!(all.contains("spec/plan.md") && all.contains("a.txt"));
        let some = g.diff_text("HEAD", &["--no-color"], &["spec/"]).expect("diff");
        assert!(!some.contains("spec/plan.md") && some.contains("+b"));
    }
}
