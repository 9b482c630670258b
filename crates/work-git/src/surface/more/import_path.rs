//! What a run added **outside the test tree** that Python loads without anything the project
//! wrote asking for it: the rerun with the frozen checks restored moves it aside too (see
//! `crate::restore`), with what the run added to the test tree.
//!
//! - a new `*.dist-info` / `*.egg-info` on a check's import path: `importlib.metadata` reads it
//!   from every directory on `sys.path`, and pytest loads each `pytest11` entry point in it as a
//!   plugin (`python3 -m pytest` puts the working directory first);
//! - a new `__init__.py` in a directory on the way to a frozen test: pytest's default import
//!   mode imports every package above a test module, so one at the root runs at collection;
//! - a new top-level module or package on a check's import path (the root, and every directory
//!   holding a frozen Python file outside the test tree) that no Python file of the project
//!   imports: a standard module may probe for it (`copy` tries `org.python.core`), a runner may
//!   import it if it is there. One the project's own code imports — the helper module a fix
//!   adds — is the work, and stays.
//!
//! The project's imports are those of the frozen Python files as they were frozen (an import
//! appended to a frozen test does not count: the rerun writes the test back without it) and of
//! every other Python file outside the test tree as it is now, less the new modules themselves
//! and the added test files the rerun moves aside.

use super::super::{CheckSurface, MAX_FILES, READ_CAP, SKIP_DIRS, is_loaded_on_its_own, is_test_dir, is_test_name};
use std::collections::{BTreeMap, BTreeSet};
use std::fs;
use std::path::Path;

/// How deep a new directory is searched for Python files (a namespace package needs none at
/// its top).
const PACKAGE_DEPTH: usize = 8;

/// What the freeze records: the entries of each directory it looks at, and the top-level
/// modules the frozen Python files import.
#[derive(Debug, Clone, Default, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub(in crate::surface) struct ImportPath {
    /// Directory (relative, `""` for the root) ⇒ its entries' names at the freeze.
    listing: BTreeMap<String, BTreeSet<String>>,
    /// Top-level module names the frozen Python files import.
    imported: BTreeSet<String>,
}

/// True when `name` is a Python identifier (what `import` can name).
fn is_identifier(name: &str) -> bool {
    let mut chars = name.chars();
    chars.next().is_some_and(|c| c.is_alphabetic() || c == '_') && chars.all(|c| c.is_alphanumeric() || c == '_')
}

/// The module `name` in a directory provides, when it is one an import finds: `X.py`, `X.pyc`,
/// an extension `X….so` / `X.pyd`, or a directory `X/` holding Python (a package, regular or
/// namespace).
fn module_name(dir: &Path, name: &str) -> Option<String> {
    let stem = name.strip_suffix(".py").or_else(|| name.strip_suffix(".pyc")).or_else(|| {
        name.strip_suffix(".so").or_else(|| name.strip_suffix(".pyd")).map(|s| s.split('.').next().unwrap_or(s))
    });
    match stem {
        Some(s) => is_identifier(s).then(|| s.to_string()),
        None => (is_identifier(name) && !SKIP_DIRS.contains(&name) && holds_python(&dir.join(name)))
            .then(|| name.to_string()),
    }
}

/// True when a directory (not a symlink) holds a Python file within [`PACKAGE_DEPTH`] levels.
fn holds_python(dir: &Path) -> bool {
    let mut stack = vec![(dir.to_path_buf(), 0usize)];
    let mut seen = 0usize;
    while let Some((d, depth)) = stack.pop() {
        if fs::symlink_metadata(&d).map_or(true, |m| !m.is_dir()) {
            continue;
        }
        let Ok(rd) = fs::read_dir(&d) else { continue };
        for e in rd.flatten() {
            seen += 1;
            if seen > MAX_FILES {
                return true;
            }
            let name = e.file_name().to_string_lossy().into_owned();
            if [".py", ".pyc", ".so", ".pyd"].iter().any(|x| name.ends_with(x)) {
                return true;
            }
            if depth < PACKAGE_DEPTH && e.file_type().is_ok_and(|t| t.is_dir()) {
                stack.push((e.path(), depth + 1));
            }
        }
    }
    false
}

/// Adds the top-level modules `text` (Python source) imports to `out`: `import a.b, c`,
/// `from a.b import x` (not a relative `from . import x`), `importlib.import_module("a.b")`,
/// `__import__("a")`.
pub(in crate::surface) fn imports(text: &str, out: &mut BTreeSet<String>) {
    let mut add = |module: &str| {
        let top = module.trim().split(['.', ' ']).next().unwrap_or_default();
        if is_identifier(top) {
            out.insert(top.to_string());
        }
    };
    for line in text.lines() {
        for stmt in line.split(';') {
            let t = stmt.trim_start().trim_start_matches("try:").trim_start();
            if let Some(rest) = t.strip_prefix("import ") {
                rest.split(',').for_each(&mut add);
            } else if let Some(rest) = t.strip_prefix("from ")
                && !rest.starts_with('.')
            {
                add(rest);
            }
            for call in ["import_module(", "__import__("] {
                if let Some((_, after)) = stmt.split_once(call)
                    && let Some(q) = after.trim_start().chars().next().filter(|c| *c == '"' || *c == '\'')
                {
                    add(after.trim_start()[1..].split(q).next().unwrap_or_default());
                }
            }
        }
    }
}

/// Adds the imports of the Python file at `path`, or of every Python file under the directory
/// at `path` (symlinks not followed, at most [`MAX_FILES`] entries), to `out`.
fn python_imports(path: &Path, out: &mut BTreeSet<String>) {
    let mut stack = vec![path.to_path_buf()];
    let mut seen = 0usize;
    while let Some(p) = stack.pop() {
        seen += 1;
        if seen > MAX_FILES {
            return;
        }
        let Ok(meta) = fs::symlink_metadata(&p) else { continue };
        if meta.is_dir() {
            stack.extend(fs::read_dir(&p).into_iter().flatten().flatten().map(|e| e.path()));
        } else if meta.is_file()
            && p.extension().is_some_and(|x| x == "py")
            && let Ok((text, _)) = work_runtime::fsx::read_text_capped(&p, READ_CAP)
        {
            imports(&text, out);
        }
    }
}

impl CheckSurface {
    /// True when `rel` is in the test tree: under a test directory (or one a check walks
    /// whole), or named like a test or a file a runner loads on its own.
    pub(in crate::surface) fn in_test_tree(&self, rel: &str) -> bool {
        let mut dir = String::new();
        for part in rel.split('/').take(rel.split('/').count().saturating_sub(1)) {
            dir = if dir.is_empty() { part.to_string() } else { format!("{dir}/{part}") };
            if is_test_dir(part) || self.more.test_dirs.contains(&dir) {
                return true;
            }
        }
        let name = rel.rsplit('/').next().unwrap_or(rel);
        is_test_name(name) || is_loaded_on_its_own(name)
    }

    /// Records [`ImportPath`] at the freeze: the directories on the way to a frozen file that
    /// are outside the test tree, and the imports of the frozen Python files.
    pub(in crate::surface) fn record_import_path(&mut self, root: &Path) {
        let (on_the_way, _) = self.directories();
        let mut listing = BTreeMap::new();
        for dir in on_the_way.into_iter().filter(|d| d.is_empty() || !self.in_test_tree(&format!("{d}/x"))) {
            let Ok(rd) = fs::read_dir(root.join(&dir)) else { continue };
            listing.insert(dir, rd.flatten().map(|e| e.file_name().to_string_lossy().into_owned()).collect());
        }
        let mut imported = BTreeSet::new();
        for rel in self.files.keys().filter(|r| r.ends_with(".py")) {
            if let Ok((text, _)) = work_runtime::fsx::read_text_capped(&root.join(rel), READ_CAP) {
                imports(&text, &mut imported);
            }
        }
        self.more.import_path = Some(ImportPath { listing, imported });
    }

    /// What the run added outside the test tree that Python loads unasked (see the module
    /// documentation), relative and sorted; nothing for a freeze that did not record it.
    pub fn added_on_import_path(&self, root: &Path) -> Vec<String> {
        let Some(ip) = &self.more.import_path else { return Vec::new() };
        let (on_the_way, import_path) = self.directories();
        let (mut always, mut modules) = (Vec::new(), Vec::<(String, String)>::new());
        for (dir, before) in &ip.listing {
            let Ok(rd) = fs::read_dir(root.join(dir)) else { continue };
            let join = |n: &str| if dir.is_empty() { n.to_string() } else { format!("{dir}/{n}") };
            for e in rd.flatten() {
                let name = e.file_name().to_string_lossy().into_owned();
                if before.contains(&name) || self.files.contains_key(&join(&name)) {
                    continue;
                }
                if name == "__init__.py" && on_the_way.contains(dir) {
                    always.push(join(&name));
                } else if !import_path.contains(dir) {
                    continue;
                } else if name.ends_with(".dist-info") || name.ends_with(".egg-info") {
                    always.push(join(&name));
                } else if let Some(module) = module_name(&root.join(dir), &name) {
                    modules.push((join(&name), module));
                }
            }
        }
        if !modules.is_empty() {
            let new: BTreeSet<&str> =
                modules.iter().map(|(rel, _)| rel.as_str()).chain(always.iter().map(String::as_str)).collect();
            let mut used = self.project_imports(root, &new, &ip.imported);
            // A new module the project imports is the work: what it imports is imported too.
            let mut kept = BTreeSet::new();
            while let Some((rel, _)) = modules.iter().find(|(r, m)| used.contains(m) && !kept.contains(r)) {
                kept.insert(rel.clone());
                python_imports(&root.join(rel), &mut used);
            }
            always.extend(modules.into_iter().filter(|(_, m)| !used.contains(m)).map(|(rel, _)| rel));
        }
        always.sort();
        always
    }

    /// The top-level modules the project imports: `frozen` (the frozen files' imports at the
    /// freeze) and those of every Python file outside the test tree that is not frozen and not
    /// under one of `new` — plus a test a check names that the work writes (never moved aside).
    fn project_imports(&self, root: &Path, new: &BTreeSet<&str>, frozen: &BTreeSet<String>) -> BTreeSet<String> {
        let mut out = frozen.clone();
        let under_new =
            |rel: &str| new.iter().any(|n| rel == *n || rel.strip_prefix(n).is_some_and(|r| r.starts_with('/')));
        for (child, kind) in crate::surface::project(root, "").files().take(MAX_FILES) {
            if kind == 'f'
                && child.ends_with(".py")
                && !under_new(&child)
                && !self.files.contains_key(&child)
                && (!self.in_test_tree(&child) || self.names_unborn(&child))
                && let Ok((text, _)) = work_runtime::fsx::read_text_capped(&root.join(&child), READ_CAP)
            {
                imports(&text, &mut out);
            }
        }
        out
    }
}

#[cfg(test)]
mod tests {
    use super::super::super::tests::write;
    use super::super::super::{CheckSurface, Named};
    use std::collections::BTreeSet;

    #[test]
    fn imports_are_read_from_every_statement_form() {
        let mut out = BTreeSet::new();
        super::imports(
            "import a.b, c as d\nfrom e.f import g\nfrom . import h\n    try: import i\nx = 1; import j\nm = importlib.import_module('k.l')\n__import__(\"n\")\n# import_module(x)\n",
            &mut out,
        );
        assert_eq!(out.into_iter().collect::<Vec<_>>(), ["a", "c", "e", "i", "j", "k", "n"]);
    }

    #[test]
    fn new_loadable_files_outside_the_test_tree_are_listed_unless_the_project_imports_them() {
        let d = tempfile::tempdir().expect("tempdir");
        let root = d.path();
        write(root, "lib.py", "def f():\n    return 0\n");
        write(root, "tests/__init__.py", "");
        write(root, "tests/test_lib.py", "from lib import f\n");
        write(root, "docs/guide.md", "x\n");
        let s = CheckSurface::freeze(root, &["python3 -m pytest -q tests"], Named::CheckLike);
        assert!(s.added_on_import_path(root).is_empty());
        // Honest: a helper the fix imports, a package the code imports dynamically, data, a
        // virtual environment, a new file inside an existing directory off the import path.
        write(root, "lib.py", "import helpers\nimport importlib\nP = importlib.import_module('plugins.x')\n");
        write(root, "helpers.py", "from helperpkg import y\n");
        write(root, "helperpkg/__init__.py", "y = 1\n");
        write(root, "plugins/x.py", "y = 1\n");
        write(root, "data.json", "{}\n");
        write(root, ".venv/lib/site.py", "y = 1\n");
        write(root, "venv/lib/site.py", "y = 1\n");
        write(root, "docs/conf.py", "y = 1\n");
        assert!(s.added_on_import_path(root).is_empty(), "{:?}", s.added_on_import_path(root));
        // Loaded unasked: a probed-for package (also a namespace one), a plugin's metadata, a
        // root package above the tests, a module only a new test or another new module imports.
        write(root, "org/__init__.py", "import lib\n");
        write(root, "ns/deep/m.py", "import lib\n");
        write(root, "zzfix-0.dist-info/entry_points.txt", "[pytest11]\nzzfix = zzfix\n");
        write(root, "zzfix.py", "import lib\nimport zzfix2\n");
        write(root, "zzfix2.py", "import lib\n");
        write(root, "__init__.py", "import lib\n");
        write(root, "tests/test_new.py", "import org\n");
        // An import appended to the frozen test does not count: the rerun writes it back.
        write(root, "tests/test_lib.py", "from lib import f\nimport ns\n");
        assert_eq!(
            s.added_on_import_path(root),
            ["__init__.py", "ns", "org", "zzfix-0.dist-info", "zzfix.py", "zzfix2.py"]
        );
    }
}
