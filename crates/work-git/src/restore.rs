//! The tree with its frozen checks written back, in a directory of the engine's own.
//!
//! A file-level freeze lets an agent append to a test file; an appended line can still change
//! what an existing test runs (`f = lambda: 1` after `from lib import f`: every old line and
//! test id is kept, the old test passes, the code is not fixed). So the final verdict also runs
//! the suite over the agent's tree with every frozen check file put back as it was when the run
//! started: [`Git::restore_paths`] builds that tree (a git tree object, through a temporary
//! index), [`Git::materialize`] writes it into an empty directory outside the repository, and
//! [`link_ignored`] links in what the snapshot leaves out (ignored dependencies such as
//! `node_modules/`, a virtualenv, `target/`), so the suite runs there as it does in the tree.
//! New test files the agent added stay in and run too.
//!
//! [`Frozen::rerun`] is the whole mechanism every workflow uses (implement, edit, until's
//! verify, loop run's gates, ultra's scenarios): the caller says how a check runs in a
//! directory and whether it held; the rerun says whether the verdict stands.

use crate::{Git, GitError, is_excluded, split_z};
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};

/// Ignored directories that are a runner's cache, never linked into a copy (a copy writing
/// there would leave its own compiled files in the agent's tree).
const CACHES: &[&str] = &["__pycache__", ".pytest_cache", ".mypy_cache", ".ruff_cache", ".cache", ".hypothesis"];

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
            let mut args = vec!["update-index", "--add"];
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

    /// Writes every file of `tree` under `dest` (an existing, empty directory outside the
    /// repository), through a temporary index: the real index and the working tree are not
    /// touched.
    pub fn materialize(&self, tree: &str, dest: &Path) -> Result<(), GitError> {
        let (_guard, index) = self.temp_index()?;
        let env = [("GIT_INDEX_FILE", index.as_str())];
        self.run_env(&["read-tree", tree], &env)?;
        let prefix = format!("{}/", dest.display());
        self.run_env(&["checkout-index", "-a", "-f", &format!("--prefix={prefix}")], &env)?;
        Ok(())
    }

    /// The ignored paths of the working tree (a wholly ignored directory as one entry, without
    /// its trailing `/`), outside `exclude`.
    pub fn ignored_paths<S: AsRef<str>>(&self, exclude: &[S]) -> Result<Vec<String>, GitError> {
        let out = self.run(&["ls-files", "-z", "--others", "--ignored", "--exclude-standard", "--directory"])?;
        Ok(split_z(&out)
            .into_iter()
            .map(|p| p.trim_end_matches('/').to_string())
            .filter(|p| !p.is_empty() && p != ".git" && !is_excluded(p, exclude))
            .collect())
    }
}

/// Links each of `ignored` (paths of `root`, from [`Git::ignored_paths`]) into `dest` by a
/// symlink to the original, runner caches left out; a path whose place in `dest` is taken is
/// skipped. Returns the paths linked.
pub fn link_ignored(root: &Path, dest: &Path, ignored: &[String]) -> Vec<String> {
    let mut linked = Vec::new();
    for rel in ignored {
        if rel.split('/').any(|part| CACHES.contains(&part)) {
            continue;
        }
        let target = dest.join(rel);
        if std::fs::symlink_metadata(&target).is_ok() {
            continue;
        }
        if let Some(parent) = target.parent()
            && work_runtime::fsx::ensure_dir(parent).is_err()
        {
            continue;
        }
        if std::os::unix::fs::symlink(root.join(rel), &target).is_ok() {
            linked.push(rel.clone());
        }
    }
    linked
}

/// Distinguishes the copies of one process.
static NEXT_COPY: AtomicU64 = AtomicU64::new(0);

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
        /// The failing run in the copy.
        run: R,
        /// The same checks in a plain copy of the agent's tree: `Ok(true)` green there (the
        /// copy can run them), `Ok(false)` red there too (they need something a copy lacks —
        /// still not believed: an agent could make its own tree red in a copy), `Err` the
        /// plain copy could not be made.
        plain: Result<(bool, R), String>,
    },
    /// The tree the checks were frozen in is no longer in git's object store: nothing can be
    /// written back (only a deliberate prune removes a tree this young).
    FrozenGone(String),
    /// The copy could not be built or written (an engine failure).
    Inconclusive(String),
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
            Rerun::Red { restored, run, plain } => {
                let plain = match plain {
                    Ok((true, _)) => "green in a plain copy of the agent's tree".to_string(),
                    Ok((false, p)) => format!(
                        "red in a plain copy of the agent's tree too ({}): if the checks need something a copy lacks, restore the frozen checks in the tree and run them there",
                        describe(p)
                    ),
                    Err(why) => why.clone(),
                };
                Some(format!(
                    "{checks}: green in the agent's tree, red with the frozen checks restored ({}: {}; {plain}); an added line changed what an existing test runs — adding tests is the only change allowed: fix the code, not the test, and run again",
                    written_back(restored),
                    describe(run)
                ))
            }
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
    /// Names the copies (the run id).
    pub tag: &'a str,
}

/// A directory outside the repository holding a copy of a tree; removed when dropped.
struct TreeCopy(PathBuf);

impl Drop for TreeCopy {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

impl Frozen<'_> {
    /// Runs `check` (it says whether the checks held, and how they ran) over a copy of the
    /// agent's tree with every frozen file that changed written back as it was frozen; when
    /// they fail there, over a plain copy of the agent's tree too (for the reason only).
    pub async fn rerun<R>(&self, mut check: impl AsyncFnMut(&Path) -> (bool, R)) -> Rerun<R> {
        if self.git.run(&["cat-file", "-e", &format!("{}^{{tree}}", self.tree)]).is_err() {
            return Rerun::FrozenGone(format!(
                "the tree the checks were frozen in ({}) is gone from git's object store",
                self.tree
            ));
        }
        let built = self.git.snapshot_tree(self.exclude).and_then(|now| {
            let (restored_tree, restored) = self.git.restore_paths(&now, self.tree, &self.paths)?;
            Ok((now, restored_tree, restored))
        });
        let (now, restored_tree, restored) = match built {
            Ok(b) => b,
            Err(e) => return Rerun::Inconclusive(format!("the tree with its frozen checks could not be built: {e}")),
        };
        if restored.is_empty() {
            return Rerun::Unchanged;
        }
        let (green, run) = match self.copy(&restored_tree, "frozen") {
            Ok(copy) => check(&copy.0).await,
            Err(why) => return Rerun::Inconclusive(why),
        };
        if green {
            return Rerun::Green(restored);
        }
        let plain = match self.copy(&now, "plain") {
            Ok(copy) => Ok(check(&copy.0).await),
            Err(why) => Err(why),
        };
        Rerun::Red { restored, run, plain }
    }

    /// Writes `tree` into a fresh directory outside the repository, ignored dependencies linked
    /// in (see [`link_ignored`]).
    fn copy(&self, tree: &str, what: &str) -> Result<TreeCopy, String> {
        let n = NEXT_COPY.fetch_add(1, Ordering::Relaxed);
        let tag: String =
            self.tag.chars().map(|c| if c.is_ascii_alphanumeric() || c == '-' { c } else { '_' }).collect();
        let dir = std::env::temp_dir().join(format!("work-{what}-{tag}-{}-{n}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        work_runtime::fsx::ensure_dir(&dir).map_err(|e| format!("the copy of the tree could not be made: {e}"))?;
        let copy = TreeCopy(dir);
        self.git.materialize(tree, &copy.0).map_err(|e| format!("the copy of the tree could not be written: {e}"))?;
        if let Ok(ignored) = self.git.ignored_paths(self.exclude) {
            link_ignored(self.root, &copy.0, &ignored);
        }
        Ok(copy)
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

        let dest = tempfile::tempdir().expect("tempdir");
        g.materialize(&tree, dest.path()).expect("materialize");
        let read = |p: &str| std::fs::read_to_string(dest.path().join(p)).unwrap_or_default();
        assert!(!read("tests/test_lib.py").contains("lambda"), "the frozen test is back");
        assert_eq!(read("lib.py"), "def f():\n    return 2\n", "the agent's code is kept");
        assert!(read("tests/test_new.py").contains("test_new"), "a new test file stays");
        let ignored = g.ignored_paths(&[".work"]).expect("ignored");
        assert!(ignored.contains(&"deps".to_string()), "{ignored:?}");
        let linked = super::link_ignored(d.path(), dest.path(), &ignored);
        assert_eq!(linked, vec!["deps"], "caches are not linked");
        assert_eq!(read("deps/pkg/m.py"), "x = 1\n");
        assert_eq!(g.run(&["ls-files", "-v", "tests/test_lib.py"]).expect("ls"), "S tests/test_lib.py\n");
    }

    #[tokio::test(flavor = "multi_thread")]
    async fn a_rerun_writes_the_frozen_checks_back_and_names_a_frozen_tree_that_is_gone() {
        use super::{Frozen, Rerun};
        let (d, g) = crate::scratch::repo_with(&[("lib.py", "x = 0\n"), ("tests/t.py", "assert x == 1\n")]);
        let frozen = g.snapshot_tree::<&str>(&[]).expect("snap");
        std::fs::write(d.path().join("tests/t.py"), "assert x == 1\nx = 1\n").expect("write");
        fn fz<'a>(g: &'a crate::Git, root: &'a std::path::Path, tree: &'a str, paths: Vec<&'a str>) -> Frozen<'a> {
            Frozen { git: g, root, tree, paths, exclude: &[], tag: "unit" }
        }
        let tree = frozen.as_str();
        let fz = |tree, paths| fz(&g, d.path(), tree, paths);
        // The check holds when the test file carries no rebinding: green with it written back.
        let honest = async |dir: &std::path::Path| {
            (!std::fs::read_to_string(dir.join("tests/t.py")).unwrap_or_default().contains("x = 1"), dir.to_path_buf())
        };
        assert!(matches!(fz(tree, vec!["tests/t.py"]).rerun(honest).await, Rerun::Green(r) if r == ["tests/t.py"]));
        // The check holds only with the rebinding: red restored, green in a plain copy; both
        // copies are gone afterwards.
        let liar = async |dir: &std::path::Path| {
            (std::fs::read_to_string(dir.join("tests/t.py")).unwrap_or_default().contains("x = 1"), dir.to_path_buf())
        };
        match fz(tree, vec!["tests/t.py"]).rerun(liar).await {
            Rerun::Red { restored, run, plain: Ok((true, plain_dir)) } => {
                assert_eq!(restored, ["tests/t.py"]);
                assert!(!run.exists() && !plain_dir.exists(), "the copies are removed");
                assert!(!run.starts_with(d.path()), "a copy lies outside the repository");
            }
            other => panic!("{other:?}"),
        }
        assert!(matches!(fz(tree, vec!["lib.py"]).rerun(honest).await, Rerun::Unchanged));
        let gone = "1111111111111111111111111111111111111111";
        assert!(matches!(fz(gone, vec!["tests/t.py"]).rerun(honest).await, Rerun::FrozenGone(_)));
    }
}
