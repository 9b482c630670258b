//! The checks rerun in the agent's tree with its frozen checks written back.
//!
//! A file-level freeze lets an agent append to a test file; an appended line can still change
//! what an existing test runs (`f = lambda: 1` after `from lib import f`: every old line and
//! test id is kept, the old test passes, the code is not fixed). So the final verdict also runs
//! the checks with every frozen check file that changed put back as it was when the run
//! started: [`Git::restore_paths`] names those files (through a git tree object and a temporary
//! index), [`Frozen::rerun`] writes their frozen content into the working tree itself, runs the
//! checks there, and puts the agent's versions back (also when the rerun fails or `work` is
//! interrupted: an undo hook of `work_runtime::scratch`). Every file the run **added** to the
//! test tree (a new test module, a new `__init__.py`, a helper beside the tests, a file a runner
//! loads on its own: [`crate::surface::CheckSurface::added_in_test_tree`]) is moved aside for
//! the rerun and put back after it (`stash`): a new module can change what a frozen test runs
//! (`lib.add.__code__ = …` at collection) while no frozen file changes, and an honest run's
//! frozen tests pass without the files it added. So is what the run added outside the test
//! tree that Python loads without the project importing it (a `*.dist-info` with a pytest
//! plugin, a root `__init__.py`, a package a standard module probes for:
//! [`crate::surface::CheckSurface::added_on_import_path`]).
//!
//! The rerun runs **in the tree**, never in a copy: code that can tell a copy from the tree
//! (no `.git` beside it, `git rev-parse` failing, its own path, no `.work/`, an ignored file
//! left out) could answer correctly only where the frozen checks run, and a suite that needs
//! the repository would be red in a copy for an honest agent.
//!
//! [`Frozen::rerun`] is the whole mechanism every workflow uses (implement, edit, until's
//! verify, loop run's gates, ultra's scenarios): the caller says how a check runs in a
//! directory and whether it held; the rerun says whether the verdict stands.

mod stash;

use crate::{Git, GitError, split_z};
use std::collections::BTreeMap;
use std::path::Path;

/// How many `--cacheinfo` entries one `update-index` call carries.
const CHUNK: usize = 200;

impl Git {
    /// The tree `now` with every one of `paths` that `frozen` holds and `now` holds differently
    /// (changed, deleted, its type changed) as `frozen` has it, and the paths put back (sorted).
    /// A path `frozen` does not hold (a new file) is left as `now` has it.
    pub fn restore_paths<S: AsRef<str>>(
        &self,
        now: &str,
        frozen: &str,
        paths: &[S],
    ) -> Result<(String, Vec<String>), GitError> {
        let wanted: std::collections::BTreeSet<&str> = paths.iter().map(AsRef::as_ref).collect();
        let entries = self.tree_entries(frozen)?;
        let restored: Vec<String> = self
            .tree_diff_names(frozen, now)?
            .into_iter()
            .filter(|p| wanted.contains(p.as_str()) && entries.contains_key(p))
            .collect();
        if restored.is_empty() {
            return Ok((now.to_string(), restored));
        }
        let (_guard, index) = self.temp_index()?;
        let env = [("GIT_INDEX_FILE", index.as_str())];
        self.run_env(&["read-tree", now], &env)?;
        // A frozen file where the agent left a directory (or the reverse) cannot be written back
        // over it: the directory's entries go first.
        let dirs: Vec<String> = restored.iter().map(|p| format!("{p}/")).collect();
        let mut rm = vec!["rm", "-r", "-q", "--cached", "--ignore-unmatch", "--"];
        rm.extend(dirs.iter().map(String::as_str));
        self.run_env(&rm, &env)?;
        let infos: Vec<String> =
            restored.iter().filter_map(|p| entries.get(p).map(|(mode, sha)| format!("{mode},{sha},{p}"))).collect();
        for chunk in infos.chunks(CHUNK) {
            // `--replace`: a file or symlink the agent left where a frozen file's directory
            // was (`tests` a symlink, `tests/test_a.py` frozen) gives way.
            let mut args = vec!["update-index", "--add", "--replace"];
            for info in chunk {
                args.extend(["--cacheinfo", info.as_str()]);
            }
            self.run_env(&args, &env)?;
        }
        Ok((self.run_env(&["write-tree"], &env)?.trim().to_string(), restored))
    }

    /// `path ⇒ (mode, blob)` of every file of `tree`.
    fn tree_entries(&self, tree: &str) -> Result<BTreeMap<String, (String, String)>, GitError> {
        let out = self.run(&["ls-tree", "-r", "-z", "--full-tree", tree])?;
        Ok(split_z(&out)
            .into_iter()
            .filter_map(|l| {
                let (meta, path) = l.split_once('\t')?;
                let mut m = meta.split_whitespace();
                let (mode, _kind, sha) = (m.next()?, m.next()?, m.next()?);
                Some((path.to_string(), (mode.to_string(), sha.to_string())))
            })
            .collect())
    }

    /// Writes the files `paths` of `tree` into the working tree, through a temporary index
    /// (the real index is not touched; git never writes through a symlinked directory: it
    /// replaces the symlink); a path `tree` does not hold is removed from the working tree
    /// first (never through a symlink).
    pub fn write_paths(&self, tree: &str, paths: &[String]) -> Result<(), GitError> {
        let entries = self.tree_entries(tree)?;
        let (have, gone): (Vec<&String>, Vec<&String>) = paths.iter().partition(|p| entries.contains_key(*p));
        for rel in gone {
            remove_inside(&self.root, rel).map_err(|e| GitError::Spawn(format!("removing {rel}: {e}")))?;
        }
        if have.is_empty() {
            return Ok(());
        }
        let (_guard, index) = self.temp_index()?;
        let env = [("GIT_INDEX_FILE", index.as_str())];
        self.run_env(&["read-tree", tree], &env)?;
        for chunk in have.chunks(CHUNK) {
            let mut args = vec!["checkout-index", "-f", "--"];
            args.extend(chunk.iter().map(|p| p.as_str()));
            self.run_env(&args, &env)?;
        }
        Ok(())
    }
}

/// Removes `rel` under `root` (a file, a symlink, or a directory and what it holds), unless a
/// directory on the way is a symlink (it may lead out of the repository): then nothing is
/// removed and an error says so. Already absent is fine.
fn remove_inside(root: &Path, rel: &str) -> std::io::Result<()> {
    let mut at = root.to_path_buf();
    let parts: Vec<&str> = rel.split('/').filter(|p| !p.is_empty()).collect();
    for (i, part) in parts.iter().enumerate() {
        if *part == ".." || *part == "." {
            return Err(std::io::Error::other("not a plain relative path"));
        }
        at.push(part);
        let meta = match std::fs::symlink_metadata(&at) {
            Ok(m) => m,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(()),
            Err(e) => return Err(e),
        };
        if i + 1 < parts.len() && meta.file_type().is_symlink() {
            return Err(std::io::Error::other(format!("{} is a symlink", at.display())));
        }
        if i + 1 == parts.len() {
            return if meta.is_dir() { std::fs::remove_dir_all(&at) } else { std::fs::remove_file(&at) };
        }
    }
    Ok(())
}

/// What a rerun with the frozen checks restored found; `R` is the caller's record of a run of
/// its checks in a copy.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Rerun<R> {
    /// No frozen file differs from its frozen content: nothing to rerun.
    Unchanged,
    /// The checks held with the frozen files (named) written back.
    Green(Vec<String>),
    /// The checks failed with the frozen files written back: the agent's change to a check is
    /// what made them pass.
    Red {
        /// The frozen files written back.
        restored: Vec<String>,
        /// The files the run added to the test tree, moved aside.
        hidden: Vec<String>,
        /// The tests a check names that the run wrote, left empty.
        emptied: Vec<String>,
        /// The failing run.
        run: R,
    },
    /// The tree the checks were frozen in is no longer in git's object store (only a
    /// deliberate prune removes a tree this young), or none was recorded, or the root is not a
    /// git repository ([`no_tree`]): nothing can be written back.
    FrozenGone(String),
    /// The frozen checks could not be written back, or the agent's versions could not be put
    /// back afterwards (an engine failure).
    Inconclusive(String),
    /// The run added files to the test tree and the rerun without them could not be made (or
    /// they could not be put back): the verdict is never believed.
    NotRerun(String),
}

impl<R> Rerun<R> {
    /// Why a green verdict of `checks` (a few words: "`sh verify.sh`", "the gates") is not
    /// believed: `None` when it stands. `describe` says how a run in a copy ended. A rerun that
    /// could not be made fails closed when `frozen_changed` (a frozen file differs from its
    /// frozen content, so the copy would not be the tree): the verdict is not believed.
    pub fn blocked_reason(
        &self,
        checks: &str,
        describe: impl Fn(&R) -> String,
        frozen_changed: bool,
    ) -> Option<String> {
        match self {
            Rerun::Unchanged | Rerun::Green(_) => None,
            Rerun::Red { restored, hidden, emptied, run } => Some(format!(
                "{checks}: green in the agent's tree, red with the frozen checks restored in that same tree ({}: {}); {}",
                set_aside(restored, hidden, emptied),
                describe(run),
                red_advice(&[hidden.as_slice(), emptied].concat())
            )),
            Rerun::NotRerun(why) => Some(format!(
                "{checks}: green in the agent's tree, but the checks could not be rerun with the files the run added to the test tree moved aside ({why}): not believed; run again"
            )),
            Rerun::FrozenGone(why) | Rerun::Inconclusive(why) if frozen_changed => Some(format!(
                "{checks}: green in the agent's tree, but frozen check files differ from their frozen content and the checks could not be rerun with them restored ({why}): not believed; restore them (git diff shows the change), or put added tests in a new file, and run again"
            )),
            Rerun::FrozenGone(_) | Rerun::Inconclusive(_) => None,
        }
    }
}

/// A run's frozen checks: the tree they were frozen in and what to write back from it.
pub struct Frozen<'a> {
    /// The repository.
    pub git: &'a Git,
    /// Its working tree.
    pub root: &'a Path,
    /// The whole-tree snapshot taken when the checks were frozen.
    pub tree: &'a str,
    /// The frozen paths ([`crate::surface::CheckSurface::paths`]).
    pub paths: Vec<&'a str>,
    /// Paths the snapshots leave out (the state directory).
    pub exclude: &'a [String],
    /// The files the run added to the test tree, and outside it those Python loads unasked,
    /// moved aside for the rerun ([`crate::surface::CheckSurface::to_move_aside`]).
    pub hide: Vec<String>,
    /// The tests a check names that the run wrote (they did not exist at the freeze), moved
    /// aside with an empty file left in their place ([`crate::surface::CheckSurface::emptied_in_rerun`]):
    /// the check still finds every file it names, and what a new test's body does when it is
    /// imported (`lib.add.__code__ = …`) cannot make the frozen tests beside it pass.
    pub emptied: Vec<String>,
}

/// The record of a rerun in progress, kept in the git directory while the frozen checks are in
/// the working tree: the agent's tree and the paths to take from it. A `work` killed outright
/// (SIGKILL, a power cut) before it put the agent's versions back leaves it behind, and the
/// next run that locks the tree puts them back first ([`Git::recover_interrupted_rerun`]).
///
/// Anything that can write the git directory can write such a file, so a record is believed
/// only when `work` wrote it: its digest is recorded in the state-digest log before it is
/// written (the file is covered like a state file), and it names its writer (pid and process
/// start time), which must be gone — a killed run's record.
#[derive(serde::Serialize, serde::Deserialize)]
struct Pending {
    /// The writer: its pid and start time (clock ticks after boot, `/proc/<pid>/stat`).
    pid: u32,
    started: u64,
    tree: String,
    paths: Vec<String>,
    /// The added files moved aside, and the directory in the git directory holding them (file
    /// `i` of `hidden` is `stash/<i>`).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    hidden: Vec<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    stash: Option<std::path::PathBuf>,
}

/// The pending record's name under the git directory, and the most of it that is read.
const PENDING: &str = "work-rerun-pending.json";
const PENDING_CAP: u64 = 64 << 20;

/// A process's start time (clock ticks after boot), `None` when it is gone.
fn process_started(pid: u32) -> Option<u64> {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    let rest = &stat[stat.rfind(')')? + 2..];
    rest.split_whitespace().nth(19)?.parse().ok()
}

impl Git {
    /// The pending record's path, covered by the state-digest log (every write and read of it
    /// goes through the log).
    fn pending_path(&self) -> Result<std::path::PathBuf, GitError> {
        let rel = self.run(&["rev-parse", "--git-path", PENDING])?;
        let path = std::path::PathBuf::from(rel.trim());
        let path = if path.is_absolute() { path } else { self.root.join(path) };
        work_runtime::fsx::digests::cover(&path);
        Ok(path)
    }

    /// Puts back the agent's versions a rerun interrupted by a kill left in the git directory's
    /// pending record (see [`Pending`]), then removes the record; the paths put back (none when
    /// there was no record or this is not a repository). A record naming a path that is not
    /// plain and relative is refused whole, and so is one no killed run of `work` wrote (see
    /// [`Pending`]): nothing is written then, and the record is left for a person to inspect.
    pub fn recover_interrupted_rerun(&self) -> Result<Vec<String>, GitError> {
        if !self.is_repo() {
            return Ok(Vec::new());
        }
        let path = self.pending_path()?;
        let bad = |why: String| GitError::Spawn(format!("the interrupted rerun's record {}: {why}", path.display()));
        let text = match work_runtime::fsx::read_text_capped(&path, PENDING_CAP) {
            Ok((_, true)) => return Err(bad("larger than any record work writes".into())),
            Ok((t, false)) => t,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(Vec::new()),
            Err(e) => return Err(bad(e.to_string())),
        };
        let forged = |why: String| {
            bad(format!(
                "not written by a killed run of work ({why}); nothing was put back: inspect it, restore the tree from git if it was changed, and remove the record"
            ))
        };
        work_runtime::fsx::digests::vouched(&path, text.as_bytes()).map_err(forged)?;
        let pending: Pending = serde_json::from_str(&text).map_err(|e| forged(e.to_string()))?;
        if process_started(pending.pid) == Some(pending.started) {
            return Err(forged(format!("its writer, pid {}, is still running", pending.pid)));
        }
        if let Some(p) = pending.paths.iter().find(|p| !work_runtime::fsx::is_plain_relative(Path::new(p.as_str()))) {
            return Err(bad(format!("names `{p}`, which is not a plain relative path")));
        }
        if !pending.paths.is_empty() {
            self.write_paths(&pending.tree, &pending.paths)?;
        }
        if let Some(stash) = &pending.stash {
            stash::put_back(&self.root, stash, &pending.hidden).map_err(|e| bad(e.to_string()))?;
        }
        work_runtime::fsx::remove_state(&path).map_err(|e| bad(e.to_string()))?;
        Ok(pending.paths.into_iter().chain(pending.hidden).collect())
    }

    /// Removes the pending record once the agent's versions are back.
    fn clear_pending(&self) -> Result<(), GitError> {
        let path = self.pending_path()?;
        match work_runtime::fsx::remove_state(&path) {
            Err(e) if e.kind() != std::io::ErrorKind::NotFound => {
                Err(GitError::Spawn(format!("removing {}: {e}", path.display())))
            }
            _ => Ok(()),
        }
    }
}

/// The frozen checks written into the working tree and the added files moved aside; the
/// agent's versions are put back by [`WrittenBack::put_back`], on a drop (an error or a panic on
/// the way), or by the undo hook when `work` is interrupted.
struct WrittenBack<'a> {
    git: &'a Git,
    /// The agent's tree, and the paths to take from it.
    now: String,
    paths: Vec<String>,
    /// The added files moved aside, and where to.
    hidden: Vec<String>,
    stash: Option<std::path::PathBuf>,
    hook: u64,
    done: bool,
}

impl<'a> WrittenBack<'a> {
    /// Writes `restored` (paths of `restored_tree`) into the working tree and moves `hidden`
    /// aside; `now` is the agent's tree, what is put back: the same paths, and any the agent
    /// has under them (a directory where a file was frozen).
    fn write(
        git: &'a Git,
        now: &str,
        restored_tree: &str,
        restored: &[String],
        hidden: &[String],
        emptied: &[String],
    ) -> Result<Self, GitError> {
        let mut paths = Vec::new();
        if !restored.is_empty() {
            let under: Vec<String> = restored.iter().map(|r| format!("{r}/")).collect();
            // What the agent has under a restored path (a directory where a file was frozen),
            // or on the way to one (a file or symlink where a frozen file's directory was).
            paths = git
                .tree_entries(now)?
                .into_keys()
                .filter(|p| {
                    under.iter().any(|u| p.starts_with(u.as_str()))
                        || restored.iter().any(|r| r.strip_prefix(p.as_str()).is_some_and(|rest| rest.starts_with('/')))
                })
                .chain(restored.iter().cloned())
                .collect();
            paths.sort();
            paths.dedup();
        }
        let stash = if hidden.is_empty() { None } else { Some(git.new_stash()?) };
        let pid = std::process::id();
        let pending = Pending {
            pid,
            started: process_started(pid).unwrap_or_default(),
            tree: now.to_string(),
            paths: paths.clone(),
            hidden: hidden.to_vec(),
            stash: stash.clone(),
        };
        let record = serde_json::to_vec(&pending).map_err(|e| GitError::Spawn(e.to_string()))?;
        let pending_path = git.pending_path()?;
        work_runtime::fsx::write_atomic(&pending_path, &record)
            .map_err(|e| GitError::Spawn(format!("writing {}: {e}", pending_path.display())))?;
        let undo = (Git::new(&git.root), now.to_string(), paths.clone(), hidden.to_vec(), stash.clone());
        let hook = work_runtime::scratch::on_interrupt(move || {
            let (git, now, paths, hidden, stash) = &undo;
            if Self::undo(git, now, paths, hidden, stash.as_deref()).is_ok() {
                let _ = git.clear_pending();
            }
        });
        let wb = WrittenBack { git, now: now.to_string(), paths, hidden: hidden.to_vec(), stash, hook, done: false };
        if !wb.paths.is_empty() {
            git.write_paths(restored_tree, &wb.paths)?;
        }
        if let Some(stash) = &wb.stash {
            stash::move_aside(&git.root, stash, &wb.hidden).map_err(|e| GitError::Spawn(e.to_string()))?;
            stash::leave_empty(&git.root, stash, &wb.hidden, emptied).map_err(|e| GitError::Spawn(e.to_string()))?;
        }
        Ok(wb)
    }

    /// Puts the agent's versions of `paths` (from `now`) and the files moved aside back.
    fn undo(git: &Git, now: &str, paths: &[String], hidden: &[String], stash: Option<&Path>) -> Result<(), GitError> {
        let written = if paths.is_empty() { Ok(()) } else { git.write_paths(now, paths) };
        let moved =
            stash.map_or(Ok(()), |s| stash::put_back(&git.root, s, hidden).map_err(|e| GitError::Spawn(e.to_string())));
        written.and(moved)
    }

    /// Puts the agent's versions back.
    fn put_back(mut self) -> Result<(), GitError> {
        self.done = true;
        work_runtime::scratch::cancel(self.hook);
        Self::undo(self.git, &self.now, &self.paths, &self.hidden, self.stash.as_deref())?;
        self.git.clear_pending()
    }
}

impl Drop for WrittenBack<'_> {
    fn drop(&mut self) {
        if !self.done {
            work_runtime::scratch::cancel(self.hook);
            if Self::undo(self.git, &self.now, &self.paths, &self.hidden, self.stash.as_deref()).is_ok() {
                let _ = self.git.clear_pending();
            }
        }
    }
}

impl Frozen<'_> {
    /// Runs `check` (it says whether the checks held, and how they ran) in the working tree
    /// with every frozen file that changed written back as it was frozen and every file the run
    /// added to the test tree moved aside, then puts the agent's versions back. With the frozen
    /// tree gone, the added files are still moved aside: red then is [`Rerun::Red`], green
    /// [`Rerun::FrozenGone`] (the frozen files could not be written back).
    pub async fn rerun<R>(&self, mut check: impl AsyncFnMut(&Path) -> (bool, R)) -> Rerun<R> {
        let gone = self
            .git
            .run(&["cat-file", "-e", &format!("{}^{{tree}}", self.tree)])
            .is_err()
            .then(|| format!("the tree the checks were frozen in ({}) is gone from git's object store", self.tree));
        let aside: Vec<String> = self.hide.iter().chain(&self.emptied).cloned().collect();
        let not_made = |why: String| if aside.is_empty() { Rerun::Inconclusive(why) } else { Rerun::NotRerun(why) };
        if let Some(why) = &gone
            && aside.is_empty()
        {
            return Rerun::FrozenGone(why.clone());
        }
        let built = self.git.snapshot_tree(self.exclude).and_then(|now| {
            if gone.is_some() {
                return Ok((now.clone(), now, Vec::new()));
            }
            let (restored_tree, restored) = self.git.restore_paths(&now, self.tree, &self.paths)?;
            Ok((now, restored_tree, restored))
        });
        let (now, restored_tree, restored) = match built {
            Ok(b) => b,
            Err(e) => return not_made(format!("the tree with its frozen checks could not be built: {e}")),
        };
        if restored.is_empty() && aside.is_empty() {
            return Rerun::Unchanged;
        }
        let written = match WrittenBack::write(self.git, &now, &restored_tree, &restored, &aside, &self.emptied) {
            Ok(w) => w,
            Err(e) => return not_made(format!("the frozen checks could not be written back: {e}")),
        };
        let (green, run) = check(self.root).await;
        if let Err(e) = written.put_back() {
            return not_made(format!(
                "the agent's versions of {} could not be put back ({e}); they are in git tree {now} (`git checkout {now} -- PATH`) and the git directory's `work-rerun-hidden-*`",
                restored.iter().chain(&aside).cloned().collect::<Vec<_>>().join(", ")
            ));
        }
        match (green, gone) {
            (true, Some(why)) => Rerun::FrozenGone(why),
            (true, None) => Rerun::Green(restored),
            (false, _) => Rerun::Red { restored, hidden: self.hide.clone(), emptied: self.emptied.clone(), run },
        }
    }
}

/// Why there is nothing to write the frozen checks back from, when [`crate::surface::CheckSurface::frozen`]
/// gives no [`Frozen`] (`in_repo`: the root is a git repository): the rerun then counts as
/// [`Rerun::FrozenGone`], which fails closed when a frozen file differs.
pub fn no_tree(in_repo: bool) -> String {
    if in_repo {
        "no tree was recorded when the checks were frozen".to_string()
    } else {
        "not a git repository: there is no tree to write the frozen checks back from".to_string()
    }
}

/// What a rerun set aside: the frozen files written back ([`written_back`]), the added files
/// moved aside ("tests/test_new.py (added during the run) moved aside") and the new tests a
/// check names left empty.
pub fn set_aside(restored: &[String], hidden: &[String], emptied: &[String]) -> String {
    let mut parts = Vec::new();
    if !restored.is_empty() {
        parts.push(written_back(restored));
    }
    if !hidden.is_empty() {
        parts.push(format!("{} (added during the run) moved aside", hidden.join(", ")));
    }
    if !emptied.is_empty() {
        parts.push(format!(
            "{} (written during the run; the check names it beside frozen tests) left empty",
            emptied.join(", ")
        ));
    }
    parts.join("; ")
}

/// What a red rerun tells the agent to do, by what was set aside.
pub fn red_advice(hidden: &[String]) -> &'static str {
    if hidden.is_empty() {
        "the agent's change to a check is what made them pass — adding tests is the only change allowed: fix the code, not the test, and run again"
    } else {
        "the agent's change to a check, or a file it added to the test tree or that Python loads unasked, is what made them pass — the frozen checks must pass without the files the run added, and adding tests is the only change allowed: fix the code, not the test, and run again"
    }
}

/// "a.py written back as it was when the checks were frozen" / "a.py, b.py written back as
/// they were …": the first half of every workflow's reason.
pub fn written_back(restored: &[String]) -> String {
    format!(
        "{} written back as {} when the checks were frozen",
        restored.join(", "),
        if restored.len() == 1 { "it was" } else { "they were" }
    )
}

#[cfg(test)]
mod tests {
    #[test]
    fn frozen_files_are_written_back_and_new_files_stay() {
        let (d, g) = crate::scratch::repo_with(&[
            ("lib.py", "def f():\n    return 0\n"),
            ("tests/test_lib.py", "from lib import f\n\ndef test_f():\n    assert f() == 1\n"),
            (".gitignore", "deps/\n__pycache__/\n"),
        ]);
        let frozen = g.base_tree().expect("base");
        std::fs::write(
            d.path().join("tests/test_lib.py"),
            "from lib import f\n\ndef test_f():\n    assert f() == 1\nf = lambda: 1\n",
        )
        .expect("write");
        std::fs::write(d.path().join("tests/test_new.py"), "def test_new():\n    pass\n").expect("write");
        std::fs::write(d.path().join("lib.py"), "def f():\n    return 2\n").expect("write");
        std::fs::create_dir_all(d.path().join("deps/pkg")).expect("mkdir");
        std::fs::write(d.path().join("deps/pkg/m.py"), "x = 1\n").expect("write");
        std::fs::create_dir_all(d.path().join("__pycache__")).expect("mkdir");
        g.run(&["update-index", "--skip-worktree", "tests/test_lib.py"]).expect("flag");
        let now = g.snapshot_tree::<&str>(&[]).expect("snap");
        let paths = ["tests/test_lib.py", "tests/test_new.py", "lib.py.missing"];
        let (tree, restored) = g.restore_paths(&now, &frozen, &paths).expect("restore");
        assert_eq!(restored, vec!["tests/test_lib.py"], "only a frozen file that changed is put back");
        let (same, none) = g.restore_paths(&frozen, &frozen, &paths).expect("restore");
        assert_eq!((same.as_str(), none.len()), (frozen.as_str(), 0));

        // Written into the working tree and back: the frozen test, then the agent's.
        let read = |p: &str| std::fs::read_to_string(d.path().join(p)).unwrap_or_default();
        g.write_paths(&tree, &restored).expect("write back");
        assert!(!read("tests/test_lib.py").contains("lambda"), "the frozen test is back");
        assert_eq!(read("lib.py"), "def f():\n    return 2\n", "the agent's code is kept");
        assert!(read("tests/test_new.py").contains("test_new"), "a new test file stays");
        assert_eq!(read("deps/pkg/m.py"), "x = 1\n", "ignored files are not touched");
        g.write_paths(&now, &restored).expect("put back");
        assert!(read("tests/test_lib.py").contains("lambda"), "the agent's version is back");
        assert_eq!(g.run(&["ls-files", "-v", "tests/test_lib.py"]).expect("ls"), "S tests/test_lib.py\n");
    }

    #[test]
    fn removing_a_path_never_goes_through_a_symlinked_directory() {
        let (repo, outside) = (tempfile::tempdir().expect("tempdir"), tempfile::tempdir().expect("tempdir"));
        std::fs::write(outside.path().join("t.py"), "outside\n").expect("write");
        std::os::unix::fs::symlink(outside.path(), repo.path().join("tests")).expect("symlink");
        assert!(super::remove_inside(repo.path(), "tests/t.py").is_err());
        assert!(outside.path().join("t.py").exists(), "nothing outside the repository is removed");
        assert!(super::remove_inside(repo.path(), "../x").is_err());
        std::fs::write(repo.path().join("a.py"), "x\n").expect("write");
        super::remove_inside(repo.path(), "a.py").expect("remove");
        super::remove_inside(repo.path(), "gone/b.py").expect("already absent is fine");
        assert!(!repo.path().join("a.py").exists());
    }

    #[test]
    fn a_kill_with_frozen_files_written_back_and_added_files_aside_is_undone_from_the_pending_record() {
        let (d, g) = crate::scratch::repo_with(&[("lib.py", "x = 0\n"), ("tests/t.py", "assert x == 1\n")]);
        // The record is believed only when the state-digest log vouches for it.
        work_runtime::fsx::digests::install(&d.path().join(".git/work-state"));
        let frozen = g.snapshot_tree::<&str>(&[]).expect("snap");
        std::fs::write(d.path().join("tests/t.py"), "assert x == 1\nx = 1\n").expect("write");
        std::fs::write(d.path().join("tests/test_zz.py"), "import lib\n").expect("write");
        let now = g.snapshot_tree::<&str>(&[]).expect("snap");
        let restored = vec!["tests/t.py".to_string()];
        let (tree, _) = g.restore_paths(&now, &frozen, &restored).expect("restore");
        let hidden = vec!["tests/test_zz.py".to_string()];
        let wb = super::WrittenBack::write(&g, &now, &tree, &restored, &hidden, &[]).expect("write back");
        assert!(!d.path().join("tests/test_zz.py").exists(), "the added file is aside");
        // A SIGKILL: neither the drop nor the undo hook runs.
        work_runtime::scratch::cancel(wb.hook);
        std::mem::forget(wb);
        // Its writer is alive (this process): not a killed run's record.
        let err = g.recover_interrupted_rerun().expect_err("a live writer's record").to_string();
        assert!(err.contains("still running"), "{err}");
        // The writer is gone (a pid no process has), recorded by work: applied.
        let path = g.pending_path().expect("path");
        let mut rec: serde_json::Value =
            serde_json::from_str(&std::fs::read_to_string(&path).expect("read")).expect("json");
        rec["pid"] = u32::MAX.into();
        let text = rec.to_string();
        // Written by anyone else, the same record is refused and nothing is put back.
        std::fs::write(&path, &text).expect("forge");
        let err = g.recover_interrupted_rerun().expect_err("a forged record").to_string();
        assert!(err.contains("not written by a killed run"), "{err}");
        assert!(!d.path().join("tests/test_zz.py").exists(), "nothing was put back");
        work_runtime::fsx::write_atomic(&path, text.as_bytes()).expect("rewrite");
        assert_eq!(g.recover_interrupted_rerun().expect("recover"), ["tests/t.py", "tests/test_zz.py"]);
        let read = |p: &str| std::fs::read_to_string(d.path().join(p)).unwrap_or_default();
        assert_eq!(
            (read("tests/t.py").as_str(), read("tests/test_zz.py").as_str()),
            ("assert x == 1\nx = 1\n", "import lib\n")
        );
        assert!(g.recover_interrupted_rerun().expect("nothing left").is_empty());
    }

    #[tokio::test(flavor = "multi_thread")]
    async fn a_new_test_the_check_names_is_left_empty_for_the_rerun_and_put_back() {
        use super::{Frozen, Rerun};
        let (d, g) = crate::scratch::repo_with(&[("lib.py", "x = 0\n"), ("tests/t.py", "assert x == 1\n")]);
        let frozen = g.snapshot_tree::<&str>(&[]).expect("snap");
        let patch = "import lib\nlib.x = 1\n";
        std::fs::write(d.path().join("tests/test_new.py"), patch).expect("write");
        let fz = Frozen {
            git: &g,
            root: d.path(),
            tree: &frozen,
            paths: vec!["tests/t.py"],
            exclude: &[],
            hide: Vec::new(),
            emptied: vec!["tests/test_new.py".to_string()],
        };
        // The check needs the file it names to exist, and is green only while it patches.
        let liar = async |dir: &std::path::Path| {
            let text = std::fs::read_to_string(dir.join("tests/test_new.py")).expect("the named file is there");
            (!text.is_empty(), ())
        };
        match fz.rerun(liar).await {
            Rerun::Red { hidden, emptied, .. } => {
                assert!(hidden.is_empty());
                assert_eq!(emptied, ["tests/test_new.py"]);
            }
            other => panic!("{other:?}"),
        }
        assert_eq!(std::fs::read_to_string(d.path().join("tests/test_new.py")).expect("read"), patch, "put back");
        let reason = fz.rerun(liar).await.blocked_reason("`pytest`", |_| "exit 1".into(), false).expect("red");
        assert!(
            reason.contains(
                "tests/test_new.py (written during the run; the check names it beside frozen tests) left empty"
            ),
            "{reason}"
        );
    }

    #[tokio::test(flavor = "multi_thread")]
    async fn a_rerun_moves_the_added_files_aside_also_when_the_frozen_tree_is_gone() {
        use super::{Frozen, Rerun};
        let (d, g) = crate::scratch::repo_with(&[("lib.py", "x = 0\n"), ("tests/t.py", "assert x == 1\n")]);
        let frozen = g.snapshot_tree::<&str>(&[]).expect("snap");
        std::fs::write(d.path().join("tests/test_zz.py"), "import lib\n").expect("write");
        let hide = vec!["tests/test_zz.py".to_string()];
        let fz = |tree| Frozen {
            git: &g,
            root: d.path(),
            tree,
            paths: vec!["tests/t.py"],
            exclude: &[],
            hide: hide.clone(),
            emptied: Vec::new(),
        };
        // Green only while the added file is there (it patches the code): red without it.
        let liar = async |dir: &std::path::Path| (dir.join("tests/test_zz.py").exists(), ());
        let honest = async |_: &std::path::Path| (true, ());
        match fz(frozen.as_str()).rerun(liar).await {
            Rerun::Red { restored, hidden, .. } => assert_eq!((restored.len(), hidden), (0, hide.clone())),
            other => panic!("{other:?}"),
        }
        assert!(d.path().join("tests/test_zz.py").exists(), "the added file is put back");
        assert!(matches!(fz(frozen.as_str()).rerun(honest).await, Rerun::Green(r) if r.is_empty()));
        let gone = "1111111111111111111111111111111111111111";
        assert!(matches!(fz(gone).rerun(liar).await, Rerun::Red { .. }), "still red with the tree gone");
        assert!(matches!(fz(gone).rerun(honest).await, Rerun::FrozenGone(_)));
        assert!(d.path().join("tests/test_zz.py").exists());
    }

    #[tokio::test(flavor = "multi_thread")]
    async fn a_rerun_writes_the_frozen_checks_back_and_names_a_frozen_tree_that_is_gone() {
        use super::{Frozen, Rerun};
        let (d, g) = crate::scratch::repo_with(&[("lib.py", "x = 0\n"), ("tests/t.py", "assert x == 1\n")]);
        let frozen = g.snapshot_tree::<&str>(&[]).expect("snap");
        std::fs::write(d.path().join("tests/t.py"), "assert x == 1\nx = 1\n").expect("write");
        fn fz<'a>(g: &'a crate::Git, root: &'a std::path::Path, tree: &'a str, paths: Vec<&'a str>) -> Frozen<'a> {
            Frozen { git: g, root, tree, paths, exclude: &[], hide: Vec::new(), emptied: Vec::new() }
        }
        let tree = frozen.as_str();
        let fz = |tree, paths| fz(&g, d.path(), tree, paths);
        // The check holds when the test file carries no rebinding: green with it written back,
        // run in the tree itself.
        let honest = async |dir: &std::path::Path| {
            (!std::fs::read_to_string(dir.join("tests/t.py")).unwrap_or_default().contains("x = 1"), dir.to_path_buf())
        };
        assert!(matches!(fz(tree, vec!["tests/t.py"]).rerun(honest).await, Rerun::Green(r) if r == ["tests/t.py"]));
        // The check holds only with the rebinding: red; the agent's version is back afterwards.
        let liar = async |dir: &std::path::Path| {
            (std::fs::read_to_string(dir.join("tests/t.py")).unwrap_or_default().contains("x = 1"), dir.to_path_buf())
        };
        match fz(tree, vec!["tests/t.py"]).rerun(liar).await {
            Rerun::Red { restored, run, .. } => {
                assert_eq!(restored, ["tests/t.py"]);
                assert_eq!(run, d.path(), "the checks run in the tree");
            }
            other => panic!("{other:?}"),
        }
        assert_eq!(std::fs::read_to_string(d.path().join("tests/t.py")).expect("read"), "assert x == 1\nx = 1\n");
        assert!(matches!(fz(tree, vec!["lib.py"]).rerun(honest).await, Rerun::Unchanged));
        let gone = "1111111111111111111111111111111111111111";
        assert!(matches!(fz(gone, vec!["tests/t.py"]).rerun(honest).await, Rerun::FrozenGone(_)));
    }
}
