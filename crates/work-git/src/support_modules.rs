//! Test-support modules: code the checks import that lives outside the test tree.
//!
//! A test is only as honest as what it imports. `tests/test_x.py` doing `from support import
//! expected` is judged by `support.py` at the root as much as by its own lines, so a module the
//! test tree (or a check script) imports is part of the check surface when it is **test
//! support** — and it must not be when it is the **code under test**, which the tests import
//! too and which the agent is there to change. The rule, from the path and the import graph:
//!
//! 1. the module is reached from the test tree, the runners' configuration or a check script
//!    through imports — Python `import x` / `from x import y` (relative imports too), JS/TS
//!    `require('./x')`, `import … from './x'`, `import('./x')`, `export … from './x'`, a shell
//!    script's `source x` / `. x` — resolved to an in-repo file outside the test tree,
//!    transitively through support modules only (what the code under test imports is the code
//!    under test), at most [`MAX_DEPTH`] imports deep;
//! 2. its path reads as support: a directory or file name with a word starting with `test`
//!    (`testutil`, `testing`, `testkit`) or one of [`SUPPORT_WORDS`] (`support`, `helpers`,
//!    `fixtures`, `conftest`, `mocks`, `fakes`, `stubs` …) — a name alone never makes the code
//!    under test (`calc.py`, `src/app.js`) a check;
//! 3. no file of the project's own source imports it (a file outside the test tree, not frozen,
//!    whose name does not read as support): a `src/helpers.py` the application imports is code,
//!    however it is named.
//!
//! Every read is bounded (at most [`MAX_READS`] files parsed for imports, [`READ_CAP`] bytes of
//! each, [`MAX_SCAN`] source files scanned for importers) and goes through the runtime's
//! confined read: below the root, no symlink followed, regular files only.

use crate::locate::normalize_rel;
use crate::surface::is_test_path;
use std::cell::RefCell;
use std::collections::{BTreeMap, BTreeSet, HashMap, VecDeque};
use std::path::Path;
use std::sync::LazyLock;

/// How many imports deep support modules are followed from a test file.
pub const MAX_DEPTH: usize = 4;

/// The most files parsed for their imports (test files, check scripts, support modules).
pub const MAX_READS: usize = 4_000;

/// The most project source files scanned for an import of a support module.
pub const MAX_SCAN: usize = 5_000;

/// The most bytes of one file read for its imports.
pub const READ_CAP: u64 = 256 * 1024;

/// Words of a path that mark test support (besides a word starting with `test`).
pub const SUPPORT_WORDS: &[&str] = &[
    "support", "helper", "helpers", "fixture", "fixtures", "conftest", "mock", "mocks", "fake", "fakes", "stub",
    "stubs",
];

/// The languages whose imports are read.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Lang {
    Python,
    Js,
    Shell,
}

const JS_EXTS: &[&str] = &["js", "ts", "mjs", "cjs", "jsx", "tsx"];

/// The language of `rel` by its extension, `None` when it has one of no interest; an
/// extensionless file is read by its `#!` line (see [`shebang`]).
fn lang_by_name(rel: &str) -> Option<Option<Lang>> {
    let name = rel.rsplit('/').next().unwrap_or(rel);
    let Some((_, ext)) = name.rsplit_once('.').filter(|(stem, _)| !stem.is_empty()) else {
        return Some(None);
    };
    match ext {
        "py" => Some(Some(Lang::Python)),
        e if JS_EXTS.contains(&e) => Some(Some(Lang::Js)),
        "sh" | "bash" | "bats" | "zsh" => Some(Some(Lang::Shell)),
        _ => None,
    }
}

fn shebang(text: &str) -> Option<Lang> {
    let first = text.lines().next()?.strip_prefix("#!")?;
    if first.contains("python") {
        Some(Lang::Python)
    } else if first.contains("node") || first.contains("deno") || first.contains("bun") {
        Some(Lang::Js)
    } else if first.contains("sh") {
        Some(Lang::Shell)
    } else {
        None
    }
}

/// True when a path reads as test support (rule 2 of the module docs).
pub fn reads_as_support(rel: &str) -> bool {
    rel.to_ascii_lowercase()
        .split(|c: char| !c.is_ascii_alphanumeric())
        .any(|w| w.starts_with("test") || SUPPORT_WORDS.contains(&w))
}

/// The repository's files as the resolver sees them: read below the root without following a
/// symlink, each existence probe asked once (most imports name the same library modules).
struct Files<'a> {
    root: &'a Path,
    known: RefCell<HashMap<String, bool>>,
}

impl Files<'_> {
    /// The text of `rel` (at most [`READ_CAP`] bytes).
    fn read(&self, rel: &str) -> Option<String> {
        let (bytes, _) = work_runtime::fsx::read_confined_prefix(self.root, rel, READ_CAP).ok()?;
        Some(String::from_utf8_lossy(&bytes).into_owned())
    }

    /// True when `rel` is a regular file below the root, reached through no symlink.
    fn is_file(&self, rel: &str) -> bool {
        if let Some(k) = self.known.borrow().get(rel) {
            return *k;
        }
        let yes = work_runtime::fsx::open_confined(self.root, rel).is_ok();
        self.known.borrow_mut().insert(rel.to_string(), yes);
        yes
    }
}

/// `dir/rel` (`rel` alone at the root).
pub(crate) fn join(dir: &str, rel: &str) -> String {
    if dir.is_empty() { rel.to_string() } else { format!("{dir}/{rel}") }
}

/// The directory holding `rel` (`""` at the root).
pub(crate) fn parent(rel: &str) -> &str {
    rel.rsplit_once('/').map(|(d, _)| d).unwrap_or("")
}

/// The in-repo files `rel` imports (see the module docs for the forms read).
fn imports_of(fs: &Files<'_>, rel: &str) -> Vec<String> {
    let by_name = match lang_by_name(rel) {
        None => return Vec::new(),
        Some(l) => l,
    };
    let Some(text) = fs.read(rel) else { return Vec::new() };
    let Some(lang) = by_name.or_else(|| shebang(&text)) else { return Vec::new() };
    let mut out = match lang {
        Lang::Python => python(fs, rel, &text),
        Lang::Js => js(fs, rel, &text),
        Lang::Shell => shell(fs, rel, &text),
    };
    out.retain(|p| p != rel);
    out.sort();
    out.dedup();
    out
}

/// One Python import: `level` leading dots, the dotted module, the names imported from it.
fn python_statements(text: &str) -> Vec<(usize, String, Vec<String>)> {
    let mut out = Vec::new();
    for line in text.lines() {
        let line = line.split('#').next().unwrap_or_default().trim();
        if let Some(rest) = line.strip_prefix("import ") {
            for m in rest.split(',') {
                let m = m.split(" as ").next().unwrap_or_default().trim();
                if !m.is_empty() {
                    out.push((0, m.to_string(), Vec::new()));
                }
            }
        } else if let Some(rest) = line.strip_prefix("from ")
            && let Some((module, names)) = rest.split_once(" import ")
        {
            let module = module.trim();
            let level = module.chars().take_while(|c| *c == '.').count();
            let names = names
                .trim_matches(|c: char| c == '(' || c == ')' || c.is_whitespace())
                .split(',')
                .map(|n| n.split(" as ").next().unwrap_or_default().trim().to_string())
                .filter(|n| !n.is_empty() && n != "*" && n.chars().all(|c| c.is_alphanumeric() || c == '_'))
                .collect();
            out.push((level, module[level..].to_string(), names));
        }
    }
    out
}

fn python(fs: &Files<'_>, rel: &str, text: &str) -> Vec<String> {
    let dir = parent(rel);
    let mut out = Vec::new();
    for (level, module, names) in python_statements(text) {
        let bases: Vec<String> = if level > 0 {
            let mut d = dir.to_string();
            for _ in 1..level {
                d = parent(&d).to_string();
            }
            vec![d]
        } else {
            // Where `sys.path` finds it: the importing file's directory and each one above it
            // (pytest's rootdir insertion), the root (`python -m`), a `src/` layout.
            let mut b = vec![dir.to_string()];
            let mut d = dir;
            while !d.is_empty() {
                d = parent(d);
                b.push(d.to_string());
            }
            b.push("src".to_string());
            b
        };
        for base in bases {
            let found = python_at(fs, &base, &module, &names);
            if !found.is_empty() {
                out.extend(found);
                break;
            }
        }
    }
    out
}

/// The files `module` (and `names` from it) resolve to below `base`: every package
/// `__init__.py` on the way, the module itself, and a submodule per name.
fn python_at(fs: &Files<'_>, base: &str, module: &str, names: &[String]) -> Vec<String> {
    let mut out = Vec::new();
    let mut dir = base.to_string();
    let parts: Vec<&str> = module.split('.').filter(|p| !p.is_empty()).collect();
    for (i, part) in parts.iter().enumerate() {
        dir = join(&dir, part);
        let init = format!("{dir}/__init__.py");
        if fs.is_file(&init) {
            out.push(init);
        } else if i + 1 == parts.len() && fs.is_file(&format!("{dir}.py")) {
            out.push(format!("{dir}.py"));
        }
    }
    for name in names {
        for cand in [format!("{}.py", join(&dir, name)), format!("{}/__init__.py", join(&dir, name))] {
            if fs.is_file(&cand) {
                out.push(cand);
            }
        }
    }
    out.into_iter().filter_map(|p| normalize_rel(&p)).collect()
}

static JS_SPEC: LazyLock<Option<regex::Regex>> = LazyLock::new(|| {
    regex::Regex::new(r#"(?:\brequire\s*\(|\bimport\s*\(|\bfrom\s+|\bimport\s+)\s*['"`](\.{1,2}/[^'"`\s]*)['"`]"#).ok()
});

fn js(fs: &Files<'_>, rel: &str, text: &str) -> Vec<String> {
    let Some(re) = JS_SPEC.as_ref() else { return Vec::new() };
    let dir = parent(rel);
    re.captures_iter(text).filter_map(|c| js_resolve(fs, &join(dir, c.get(1)?.as_str()))).collect()
}

/// A relative specifier resolved the way Node and the bundlers do: the file, the file with an
/// extension, a `.js` written for a `.ts` source, a directory's `index`.
fn js_resolve(fs: &Files<'_>, spec: &str) -> Option<String> {
    let p = normalize_rel(spec)?;
    let mut cands = vec![p.clone()];
    cands.extend(JS_EXTS.iter().chain(&["json"]).map(|e| format!("{p}.{e}")));
    if let Some(stem) = p.strip_suffix(".js") {
        cands.extend([format!("{stem}.ts"), format!("{stem}.tsx")]);
    }
    cands.extend(JS_EXTS.iter().map(|e| format!("{p}/index.{e}")));
    cands.into_iter().find(|c| fs.is_file(c))
}

fn shell(fs: &Files<'_>, rel: &str, text: &str) -> Vec<String> {
    let dir = parent(rel);
    let mut out = Vec::new();
    for line in text.lines() {
        for stmt in line.split(['#']).next().unwrap_or_default().split([';', '&', '|']) {
            let stmt = stmt.trim();
            let Some(rest) = stmt.strip_prefix("source ").or_else(|| stmt.strip_prefix(". ")) else { continue };
            let words =
                shell_words::split(rest).unwrap_or_else(|_| rest.split_whitespace().map(String::from).collect());
            let Some(word) = words.first() else { continue };
            // `"$(dirname "$0")/lib.sh"`, `${BASH_SOURCE%/*}/lib.sh`, `$DIR/lib.sh`: the script's
            // directory; a plain path: the directory the check runs in (the root), or the
            // script's.
            let (path, bases) = match after_variable(word) {
                Some(p) => (p, vec![dir]),
                None if word.contains('$') => continue,
                None => (word.as_str(), vec!["", dir]),
            };
            if let Some(found) = bases.into_iter().filter_map(|b| normalize_rel(&join(b, path))).find(|c| fs.is_file(c))
            {
                out.push(found);
            }
        }
    }
    out
}

/// The path after a leading variable expansion and a `/`: `$(…)/x`, `${…}/x`, `$NAME/x`.
pub(crate) fn after_variable(word: &str) -> Option<&str> {
    let rest = word.strip_prefix('$')?;
    let end = match rest.chars().next()? {
        '(' => rest.rfind(")/")? + 1,
        '{' => rest.find("}/")? + 1,
        _ => rest.find(|c: char| !(c.is_ascii_alphanumeric() || c == '_'))?,
    };
    let path = rest[end..].strip_prefix('/')?;
    (!path.contains('$') && !path.is_empty()).then_some(path)
}

/// The support modules reached from `starts` (test files, check scripts, runner configuration)
/// by the rule of the module docs, sorted; `frozen` says which files are already frozen (they
/// are starts, never support).
pub fn find(root: &Path, starts: &[&str], frozen: impl Fn(&str) -> bool) -> Vec<String> {
    let fs = Files { root, known: RefCell::new(HashMap::new()) };
    let mut queue: VecDeque<(String, usize)> = starts.iter().map(|s| (s.to_string(), 0)).collect();
    let mut seen: BTreeSet<String> = starts.iter().map(|s| s.to_string()).collect();
    // Each support candidate, with the files that import it.
    let mut parents: BTreeMap<String, BTreeSet<String>> = BTreeMap::new();
    let mut reads = 0;
    while let Some((file, depth)) = queue.pop_front() {
        if lang_by_name(&file).is_none() {
            continue;
        }
        reads += 1;
        if reads > MAX_READS {
            break;
        }
        for dep in imports_of(&fs, &file) {
            if frozen(&dep) || is_test_path(&dep) || !reads_as_support(&dep) {
                continue;
            }
            parents.entry(dep.clone()).or_default().insert(file.clone());
            if depth + 1 < MAX_DEPTH && seen.insert(dep.clone()) {
                queue.push_back((dep, depth + 1));
            }
        }
    }
    if parents.is_empty() {
        return Vec::new();
    }
    let code = imported_by_source(&fs, &parents, &frozen);
    // Kept: a candidate the source does not import, reached from a start through kept ones.
    let starts: BTreeSet<&str> = starts.iter().copied().collect();
    let mut kept: BTreeSet<String> = BTreeSet::new();
    loop {
        let before = kept.len();
        for (dep, from) in &parents {
            if !code.contains(dep) && from.iter().any(|f| starts.contains(f.as_str()) || kept.contains(f)) {
                kept.insert(dep.clone());
            }
        }
        if kept.len() == before {
            break;
        }
    }
    kept.into_iter().collect()
}

/// The candidates a file of the project's own source imports (rule 3): a file outside the test
/// tree, not frozen, not itself named like support; at most [`MAX_SCAN`] files are read.
fn imported_by_source(
    fs: &Files<'_>,
    candidates: &BTreeMap<String, BTreeSet<String>>,
    frozen: &impl Fn(&str) -> bool,
) -> BTreeSet<String> {
    let mut out = BTreeSet::new();
    let tree = crate::surface::project(fs.root, "");
    let source = tree.files().filter(|(rel, kind)| {
        *kind == 'f'
            && !matches!(lang_by_name(rel), None | Some(None))
            && !frozen(rel)
            && !is_test_path(rel)
            && !reads_as_support(rel)
    });
    for (rel, _) in source.take(MAX_SCAN) {
        out.extend(imports_of(fs, &rel).into_iter().filter(|d| candidates.contains_key(d)));
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    use crate::surface::tests::write;

    fn found(root: &Path, starts: &[&str]) -> Vec<String> {
        find(root, starts, |p| starts.contains(&p))
    }

    #[test]
    fn support_the_tests_import_is_found_and_the_code_under_test_is_not() {
        let d = tempfile::tempdir().expect("tempdir");
        let root = d.path();
        write(root, "calc.py", "def add(a, b):\n    return a - b\n");
        write(root, "support.py", "from testkit.data import TABLE\ndef expected():\n    return 3\n");
        write(root, "testkit/__init__.py", "");
        write(root, "testkit/data.py", "TABLE = [1]\n");
        write(root, "tests/test_calc.py", "from calc import add\nfrom support import expected\n");
        assert_eq!(
            found(root, &["tests/test_calc.py"]),
            ["support.py", "testkit/__init__.py", "testkit/data.py"],
            "calc.py is the code under test"
        );
        // A support-named module the application imports is code, and so is what only it reaches.
        write(root, "app.py", "import support\n");
        assert!(found(root, &["tests/test_calc.py"]).is_empty());
    }

    #[test]
    fn js_requires_shell_sources_and_relative_python_imports_resolve() {
        let d = tempfile::tempdir().expect("tempdir");
        let root = d.path();
        write(root, "helpers.js", "module.exports = { expected: () => 3 };\n");
        write(root, "src/sum.js", "module.exports = (a, b) => a + b;\n");
        write(root, "fixtures/table.ts", "export const T = 1;\n");
        write(
            root,
            "__tests__/sum.test.js",
            "const { expected } = require('../helpers');\nconst sum = require('../src/sum');\nimport { T } from \"../fixtures/table.js\";\n",
        );
        assert_eq!(found(root, &["__tests__/sum.test.js"]), ["fixtures/table.ts", "helpers.js"]);
        write(root, "lib/test_helpers.sh", "ok() { true; }\n");
        write(root, "scripts/check_helpers.sh", "die() { exit 1; }\n");
        write(root, "greet.sh", "echo hi\n");
        write(
            root,
            "check.sh",
            "#!/bin/sh\n. \"$(dirname \"$0\")/lib/test_helpers.sh\"\nsource scripts/check_helpers.sh; . ./greet.sh\n",
        );
        assert_eq!(
            found(root, &["check.sh"]),
            ["lib/test_helpers.sh", "scripts/check_helpers.sh"],
            "greet.sh is the code under test"
        );
        write(root, "pkg/__init__.py", "");
        write(root, "pkg/fixtures.py", "X = 1\n");
        write(root, "pkg/tests/test_x.py", "from ..fixtures import X\nfrom pkg import core\n");
        write(root, "pkg/core.py", "\n");
        assert_eq!(found(root, &["pkg/tests/test_x.py"]), ["pkg/fixtures.py"]);
    }

    #[test]
    fn the_check_surface_freezes_support_unless_the_work_names_it() {
        use crate::surface::{CheckSurface, Named, TestEdits, describe};
        let d = tempfile::tempdir().expect("tempdir");
        let root = d.path();
        write(root, "calc.py", "def add(a, b):\n    return a - b\n");
        write(root, "support.py", "def expected():\n    return 3\n");
        write(root, "tests/test_calc.py", "from calc import add\nfrom support import expected\n");
        let cmds = ["python3 -m pytest -q tests"];
        let mut s = CheckSurface::freeze(root, &cmds, Named::CheckLike);
        s.pin_unnamed_by(root, &cmds, "make add(1, 2) return 3");
        write(root, "calc.py", "def add(a, b):\n    return a + b\n");
        assert!(s.changes(root, TestEdits::Add).is_empty(), "the code under test may change");
        write(root, "support.py", "def expected():\n    return -1\n");
        assert_eq!(describe(&s.changes(root, TestEdits::Add)), "test support module `support.py` changed");
        // A package that would shadow the frozen module is named too.
        write(root, "support/__init__.py", "def expected():\n    return -1\n");
        assert!(describe(&s.changes(root, TestEdits::Add)).contains("shadows the frozen `support.py`"));
        // The work names it: it is the code under change.
        let mut s = CheckSurface::freeze(root, &cmds, Named::CheckLike);
        s.pin_unnamed_by(root, &cmds, "the expected sum changes: update support.py and calc.py");
        write(root, "support.py", "def expected():\n    return 4\n");
        assert!(s.changes(root, TestEdits::Add).is_empty());
    }

    #[test]
    fn nothing_is_read_through_a_symlink_or_outside_the_root() {
        let d = tempfile::tempdir().expect("tempdir");
        let outside = tempfile::tempdir().expect("tempdir");
        let root = d.path();
        write(outside.path(), "support.py", "X = 1\n");
        std::os::unix::fs::symlink(outside.path().join("support.py"), root.join("support.py")).expect("symlink");
        std::os::unix::fs::symlink(outside.path(), root.join("helpers")).expect("symlink");
        write(root, "tests/test_a.py", "import support\nfrom helpers import support as s\n");
        write(root, "tests/a.test.js", "require('../../helpers.js')\n");
        assert!(found(root, &["tests/test_a.py", "tests/a.test.js"]).is_empty());
        assert_eq!(after_variable("${BASH_SOURCE%/*}/x.sh"), Some("x.sh"));
        assert_eq!(after_variable("$DIR/x.sh"), Some("x.sh"));
        assert_eq!(after_variable("$HOME"), None);
    }
}
