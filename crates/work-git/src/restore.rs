//! The checks rerun on the engine's copy with the run's frozen checks put back.
//!
//! A file-level freeze lets an agent append to a test file; an appended line can still change
//! what an existing test runs (`f = lambda: 1` after `from lib import f`: every old line and
//! test id is kept, the old test passes, the code is not fixed). So the final verdict also runs
//! the checks with every frozen check file that changed put back as it was when the run
//! started: [`Git::restore_paths`] builds that tree (the agent's tree as a snapshot, the
//! frozen files put back, through a git tree object and a temporary index), and
//! [`Frozen::rerun`] checks it out as an engine-owned worktree ([`crate::copy`]) and runs the
//! checks there. Every file the run **added** to the test tree (a new test module, a new
//! `__init__.py`, a helper beside the tests, a file a runner loads on its own:
//! [`crate::surface::CheckSurface::added_in_test_tree`]) is left out of the copy: a new module
//! can change what a frozen test runs (`lib.add.__code__ = …` at collection) while no frozen
//! file changes, and an honest run's frozen tests pass without the files it added. So is what
//! the run added outside the test tree that Python loads without the project importing it (a
//! `*.dist-info` with a pytest plugin, a root `__init__.py`, a package a standard module probes
//! for: [`crate::surface::CheckSurface::added_on_import_path`]) — unless a check names it: a
//! file the check runs is asked for.
//!
//! Nothing is written into the agent's tree: there is nothing to put back, on an error, an
//! interruption or a kill alike.
//!
//! [`Frozen::rerun`] is the whole mechanism every workflow uses (implement, edit, until's
//! verify, loop run's gates, ultra's scenarios): the caller says how a check runs in a
//! directory and whether it held; the rerun says whether the verdict stands.

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

    /// The content of the regular file at `path` in `tree`: `None` when `tree` holds no
    /// regular file there (absent, a symlink, a directory, a submodule) or it cannot be read.
    pub fn file_in_tree(&self, tree: &str, path: &str) -> Option<Vec<u8>> {
        let (_, sha) = self.regular_entry(tree, path)?;
        crate::run_bytes(&self.root, &["cat-file", "blob", &sha], &[], None).ok()
    }

    /// `tree` with each of `files` (path, content) written where `tree` holds a regular file
    /// (its mode kept): how the engine puts its own version of a frozen check into the tree the
    /// rerun checks out ([`Frozen::tree`]). Written as it is (`--no-filters`: no clean filter
    /// or attribute of the repository sees it); a path `tree` holds no regular file at is an
    /// error.
    pub fn tree_with(&self, tree: &str, files: &[(String, Vec<u8>)]) -> Result<String, GitError> {
        if files.is_empty() {
            return Ok(tree.to_string());
        }
        let (_guard, index) = self.temp_index()?;
        let env = [("GIT_INDEX_FILE", index.as_str())];
        self.run_env(&["read-tree", tree], &env)?;
        for (path, content) in files {
            let (mode, _) = self
                .regular_entry(tree, path)
                .ok_or_else(|| GitError::Spawn(format!("`{path}` is not a regular file of tree {tree}")))?;
            let args = ["hash-object", "-w", "--no-filters", "--stdin"];
            let sha = crate::run_bytes(&self.root, &args, &[], Some(content.clone()))?;
            let sha = String::from_utf8_lossy(&sha).trim().to_string();
            let info = format!("{mode},{sha},{path}");
            self.run_env(&["update-index", "--cacheinfo", &info], &env)?;
        }
        Ok(self.run_env(&["write-tree"], &env)?.trim().to_string())
    }

    /// `(mode, blob)` of the regular file at `path` in `tree`.
    fn regular_entry(&self, tree: &str, path: &str) -> Option<(String, String)> {
        let out = self.run(&["ls-tree", "-z", "--full-tree", tree, "--", path]).ok()?;
        let line = split_z(&out).into_iter().next()?;
        let (meta, at) = line.split_once('\t')?;
        let mut m = meta.split_whitespace();
        let (mode, kind, sha) = (m.next()?, m.next()?, m.next()?);
        (at == path && kind == "blob" && matches!(mode, "100644" | "100755"))
            .then(|| (mode.to_string(), sha.to_string()))
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
    /// The engine's copy could not be made (an engine failure).
    Inconclusive(String),
    /// The run added files to the test tree and the rerun without them could not be made: the
    /// verdict is never believed.
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
                "{checks}: green on the tree as the agent left it, red on the engine's copy with the frozen checks restored ({}: {}); {}",
                set_aside(restored, hidden, emptied),
                describe(run),
                red_advice(&[hidden.as_slice(), emptied].concat())
            )),
            Rerun::NotRerun(why) => Some(format!(
                "{checks}: green on the tree as the agent left it, but the checks could not be rerun with the files the run added to the test tree moved aside ({why}): not believed; run again"
            )),
            Rerun::FrozenGone(why) | Rerun::Inconclusive(why) if frozen_changed => Some(format!(
                "{checks}: green on the tree as the agent left it, but frozen check files differ from their frozen content and the checks could not be rerun with them restored ({why}): not believed; restore them (git diff shows the change), or put added tests in a new file, and run again"
            )),
            Rerun::FrozenGone(_) | Rerun::Inconclusive(_) => None,
        }
    }
}

/// A run's frozen checks: the tree they were frozen in and what to write back from it.
pub struct Frozen<'a> {
    /// The repository.
    pub git: &'a Git,
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

impl Frozen<'_> {
    /// Runs `check` (it says whether the checks held, and how they ran) on the engine's copy of
    /// the agent's tree with every frozen file that changed put back as it was frozen and every
    /// file the run added to the test tree left out. With the frozen tree gone, the added files
    /// are still left out: red then is [`Rerun::Red`], green [`Rerun::FrozenGone`] (the frozen
    /// files could not be put back).
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
        let (_, restored_tree, restored) = match built {
            Ok(b) => b,
            Err(e) => return not_made(format!("the tree with its frozen checks could not be built: {e}")),
        };
        if restored.is_empty() && aside.is_empty() {
            return Rerun::Unchanged;
        }
        let copy = match self.git.engine_copy(&restored_tree, self.exclude) {
            Ok(c) => c,
            Err(e) => return not_made(format!("the engine's copy could not be made: {e}")),
        };
        if let Err(e) = copy.set_aside(&self.hide, &self.emptied) {
            return not_made(e.to_string());
        }
        let (green, run) = check(copy.path()).await;
        drop(copy);
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

        // Index flags are the agent's business: untouched.
        assert_eq!(g.run(&["ls-files", "-v", "tests/test_lib.py"]).expect("ls"), "S tests/test_lib.py\n");
        assert!(tree != now);
    }

    #[test]
    fn a_tree_with_the_engines_version_of_a_file_keeps_every_other_file() {
        let (d, g) = crate::scratch::repo_with(&[("lib.py", "x = 0\n"), ("tests/t.py", "assert add(1) == 1\n")]);
        let tree = g.snapshot_tree::<&str>(&[]).expect("snap");
        assert_eq!(g.file_in_tree(&tree, "tests/t.py").as_deref(), Some(&b"assert add(1) == 1\n"[..]));
        assert_eq!((g.file_in_tree(&tree, "tests"), g.file_in_tree(&tree, "t.py")), (None, None));
        let ours = vec![("tests/t.py".to_string(), b"assert plus(1) == 1\n".to_vec())];
        let renamed = g.tree_with(&tree, &ours).expect("tree");
        assert_eq!(g.file_in_tree(&renamed, "tests/t.py").as_deref(), Some(&b"assert plus(1) == 1\n"[..]));
        assert_eq!(g.file_in_tree(&renamed, "lib.py").as_deref(), Some(&b"x = 0\n"[..]));
        assert_eq!(g.tree_diff_names(&tree, &renamed).expect("diff"), ["tests/t.py"]);
        assert!(g.tree_with(&tree, &[("new.py".to_string(), Vec::new())]).is_err(), "only a file the tree holds");
        let t = std::fs::read_to_string(d.path().join("tests/t.py")).expect("read");
        assert_eq!(t, "assert add(1) == 1\n", "the working tree is untouched");
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
        fn fz<'a>(g: &'a crate::Git, tree: &'a str, paths: Vec<&'a str>) -> Frozen<'a> {
            Frozen { git: g, tree, paths, exclude: &[], hide: Vec::new(), emptied: Vec::new() }
        }
        let tree = frozen.as_str();
        let fz = |tree, paths| fz(&g, tree, paths);
        // The check holds when the test file carries no rebinding: green with it put back, run
        // on the engine's copy.
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
                assert!(run != d.path(), "the checks run on the engine's copy, not in the tree");
            }
            other => panic!("{other:?}"),
        }
        assert_eq!(std::fs::read_to_string(d.path().join("tests/t.py")).expect("read"), "assert x == 1\nx = 1\n");
        assert!(matches!(fz(tree, vec!["lib.py"]).rerun(honest).await, Rerun::Unchanged));
        let gone = "1111111111111111111111111111111111111111";
        assert!(matches!(fz(gone, vec!["tests/t.py"]).rerun(honest).await, Rerun::FrozenGone(_)));
    }
}
