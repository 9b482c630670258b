//! Positive evidence: what counts as an agent's change.
//!
//! A dirty byte is not work. Running a project's own checks leaves files behind — `.pyc` files
//! in `__pycache__/`, `.pytest_cache/`, a log the suite appends to — and an agent that only runs
//! the suite would otherwise "change" the tree. [`Byproducts::learn`] compares the engine's
//! copy of the tree before and after the engine's own baseline run of the checks there (before
//! any agent is dispatched) and keeps what that run created or changed: the exact paths, and
//! the names of the directories it created that hold no tracked file (`__pycache__`,
//! `.cache`), so the same byproduct elsewhere in the tree (`src/__pycache__/new.pyc`) is one
//! too. [`Byproducts::is_byproduct`] then tells evidence from residue. Python bytecode (a
//! `.pyc` anywhere, anything under a `__pycache__/`) is residue whatever was learned: any
//! Python run writes it, the engine's own checks write theirs outside the tree (a fresh
//! `PYTHONPYCACHEPREFIX`, see `work_runtime::bytecode`) so the baseline run cannot teach it,
//! and no check reads what is in the tree.

use crate::{Git, TreeState};
use std::collections::BTreeSet;

/// What the engine's own check runs leave in the tree (see the module documentation).
#[derive(Debug, Clone, Default, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct Byproducts {
    /// Paths the baseline run created or changed.
    pub paths: BTreeSet<String>,
    /// Names of the directories it created that hold no tracked file.
    pub dirs: BTreeSet<String>,
}

impl Byproducts {
    /// What a baseline check run changed between `before` and `after` (two
    /// [`Git::tree_state`]s around it).
    pub fn learn(git: &Git, before: &TreeState, after: &TreeState) -> Byproducts {
        let paths: BTreeSet<String> = after.changed_since(before).into_iter().collect();
        let mut dirs = BTreeSet::new();
        for p in &paths {
            let Some((dir, _)) = p.rsplit_once('/') else { continue };
            let tracked = git.run(&["ls-files", "--", dir]).map(|o| !o.trim().is_empty()).unwrap_or(true);
            if !tracked && let Some(name) = dir.rsplit('/').next() {
                dirs.insert(name.to_string());
            }
        }
        Byproducts { paths, dirs }
    }

    /// True when `path` is residue of a check run rather than work: Python bytecode, a path
    /// the baseline run left, or one under a directory named like one it created.
    pub fn is_byproduct(&self, path: &str) -> bool {
        if self.paths.contains(path) || is_bytecode(path) {
            return true;
        }
        let mut parts: Vec<&str> = path.split('/').collect();
        parts.pop();
        parts.iter().any(|d| self.dirs.contains(*d))
    }

    /// True when nothing was learned.
    pub fn is_empty(&self) -> bool {
        self.paths.is_empty() && self.dirs.is_empty()
    }
}

/// True for Python bytecode: a `.pyc` / `.pyo` file, or anything under a `__pycache__/`.
fn is_bytecode(path: &str) -> bool {
    path.ends_with(".pyc") || path.ends_with(".pyo") || path.split('/').rev().skip(1).any(|d| d == "__pycache__")
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::Base;

    #[test]
    fn a_baseline_run_teaches_its_residue_and_nothing_else() {
        let (d, g) = crate::scratch::repo_with(&[("tests/t.py", "x\n")]);
        let before = g.tree_state::<&str>(Base::Status, &[]).expect("state");
        std::fs::create_dir_all(d.path().join("tests/__pycache__")).expect("mkdir");
        std::fs::write(d.path().join("tests/__pycache__/t.pyc"), "b").expect("write");
        std::fs::write(d.path().join("suite.log"), "ran").expect("write");
        let after = g.tree_state::<&str>(Base::Status, &[]).expect("state");
        let b = Byproducts::learn(&g, &before, &after);
        assert_eq!(b.dirs, BTreeSet::from(["__pycache__".to_string()]), "tests/ holds tracked files: not learned");
        assert!(b.is_byproduct("suite.log"));
        assert!(b.is_byproduct("src/pkg/__pycache__/new.cpython-311.pyc"));
        assert!(!b.is_byproduct("src/pkg/new.py"));
        assert!(!b.is_byproduct("tests/test_new.py"));
        assert!(!b.is_byproduct("notes.txt"));
        let none = Byproducts::default();
        assert!(none.is_byproduct("__pycache__/lib.cpython-311.pyc") && none.is_byproduct("lib.pyc"));
        assert!(!none.is_byproduct("__pycache__.py") && !none.is_byproduct("pyc"), "bytecode, whatever was learned");
    }
}
