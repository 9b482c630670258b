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

use crate::{Git, GitError, is_excluded, split_z};
use std::collections::BTreeMap;
use std::path::Path;

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
}
