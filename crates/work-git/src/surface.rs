//! The check surface: everything a verdict depends on, frozen before the first dispatch.
//!
//! A verify, test, gate or scenario command is only as honest as the files it runs. Before any
//! agent is dispatched, [`CheckSurface::freeze`] records the content (sha256) of:
//!
//! - **pinned files** — every file a check command names on its command line (`sh check.sh`,
//!   `./scripts/verify`, `python3 tests/run.py`, a path inside a quoted `sh -c` script), the
//!   project's configuration (`work.toml`) and the test runners' configuration (`pytest.ini`,
//!   `pyproject.toml`, `setup.cfg`, `tox.ini`, `conftest.py`, `Cargo.toml`, `.config/nextest.toml`,
//!   `package.json`, `jest.config.*`, `vitest.config.*`, `go.mod`, `Makefile`, …);
//! - **test files** — the test tree of every ecosystem found (`tests/`, `test/`, `spec/`,
//!   `__tests__/` directories, `test_*.py`, `*_test.py`, `*_test.go`, `*.test.*`, `*.spec.*`, and
//!   the names `node --test` runs: `*-test.js`, `*_test.js`, `test-*.js`, `test.js`);
//! - **test-support modules** — what the checks import from outside the test tree and reads as
//!   support, not as the code under test (`support.py` imported by `tests/test_x.py`; see
//!   [`crate::support_modules`]), frozen by [`CheckSurface::pin_unnamed_by`].
//!
//! [`CheckSurface::changes`] then names every pinned file that changed or disappeared and every
//! test file that disappeared or changed; a workflow that lets its agent add tests passes
//! [`TestEdits::Add`], under which a changed test file is allowed only when no line was removed
//! from it (appending tests is adding; editing or deleting one is not) — new test files are
//! always allowed. Nothing is followed out of the root: symlinks are recorded by their target
//! text, never read through.

mod more;

pub use more::{named_by, names_inside};

use crate::suite_report::{self, Probe, SuiteReport};
use sha2::{Digest, Sha256};
use std::collections::BTreeMap;
use std::fs;
use std::path::Path;
use std::time::Duration;
use work_runtime::spawn::Spawner;

/// The most a single surface file may hold for its content to be compared (larger files are
/// compared by size and a hash of their first bytes).
const READ_CAP: u64 = 16 * 1024 * 1024;

/// The most files a test-tree walk records.
const MAX_FILES: usize = 20_000;

/// Configuration files every check depends on, when present at the root.
const CONFIG_FILES: &[&str] = &[
    "work.toml",
    "pytest.ini",
    "pyproject.toml",
    "setup.cfg",
    "tox.ini",
    "conftest.py",
    "noxfile.py",
    "Cargo.toml",
    ".config/nextest.toml",
    ".cargo/config.toml",
    "rust-toolchain.toml",
    "package.json",
    "jest.config.js",
    "jest.config.ts",
    "jest.config.cjs",
    "jest.config.mjs",
    "vitest.config.js",
    "vitest.config.ts",
    "vitest.config.mjs",
    ".mocharc.json",
    ".mocharc.yml",
    "go.mod",
    "Makefile",
    "makefile",
    "GNUmakefile",
    "justfile",
];

/// Configuration files whose only purpose is to configure a test runner: one created after the
/// freeze changes how the frozen checks run. (A project's manifest — `package.json`,
/// `Cargo.toml`, `pyproject.toml`, `go.mod`, a `Makefile` — may honestly be created by the work
/// itself; it stays frozen once it exists.)
const RUNNER_CONFIG: &[&str] = &[
    "pytest.ini",
    ".pytest.ini",
    "tox.ini",
    "conftest.py",
    ".config/nextest.toml",
    ".cargo/config.toml",
    ".cargo/config",
    "jest.config.js",
    "jest.config.ts",
    "jest.config.cjs",
    "jest.config.mjs",
    "vitest.config.js",
    "vitest.config.ts",
    "vitest.config.mjs",
    ".mocharc.json",
    ".mocharc.yml",
    ".mocharc.js",
];

/// Directories never walked for test files.
pub(crate) const SKIP_DIRS: &[&str] =
    &[".git", ".work", "target", "node_modules", ".venv", "venv", "__pycache__", "dist", "build"];

/// Which files named on a command line are frozen.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Named {
    /// Every named file: the command is a check (a verify command, a gate, a test command).
    All,
    /// Only files that read as checks — under a test directory, or named like one (`check`,
    /// `verify`, `test`, `spec`, `scenario`, `assert`, `e2e`, `smoke`, `validate`, `gate`, `lint`,
    /// `suite`): the command
    /// may run the very code the agent is asked to change (`sh greet.sh`).
    CheckLike,
}

/// True when a relative path reads as a check rather than as the code under test.
pub fn is_check_like(rel: &str) -> bool {
    let lower = rel.to_ascii_lowercase();
    let mut parts = lower.split('/').collect::<Vec<_>>();
    let name = parts.pop().unwrap_or_default();
    if parts.iter().any(|d| is_test_dir(d)) || is_test_name(name) {
        return true;
    }
    const WORDS: &[&str] =
        &["check", "verify", "test", "spec", "scenario", "assert", "e2e", "smoke", "validate", "gate", "lint", "suite"];
    name.split(|c: char| !c.is_ascii_alphanumeric()).any(|w| WORDS.iter().any(|k| w.starts_with(k)))
}

/// What a workflow's agent may do to test files.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum TestEdits {
    /// No test file may change.
    None,
    /// New test files and appended tests are allowed; removing or editing lines is not.
    Add,
}

/// Why a surface file is frozen.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum Role {
    /// Named by a check command or a runner's configuration: may never change.
    Pinned,
    /// Part of the test tree.
    Test,
    /// A test in a runner's own report (see [`crate::suite_report`]).
    Reported,
    /// A test runner whose report was read before the first dispatch.
    Runner,
    /// Test-support code the checks import from outside the test tree (see
    /// [`crate::support_modules`]): may never change.
    Support,
    /// A shell library a frozen check script sources (it defines functions: the code under
    /// test): it may change, but a line added that ends the check early (`exit 0`, `exec …`) is
    /// named; the rerun with the frozen checks restored keeps the work's version.
    Sourced,
}

/// One frozen file.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
struct Frozen {
    role: Role,
    /// sha256 of the content (`link:<target>` for a symlink).
    digest: String,
    /// A short digest of each line, kept for test files so that an append can be told from
    /// an edit.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    lines: Option<Vec<String>>,
}

/// A named change to the check surface.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SurfaceChange {
    /// The path, relative to the root.
    pub path: String,
    /// Why it is frozen.
    pub role: Role,
    /// What happened: `changed`, `deleted`, `edited` (a test file lost or changed lines),
    /// `added: …` (a file a runner loads on its own, or one that shadows a frozen module).
    pub what: std::borrow::Cow<'static, str>,
}

impl std::fmt::Display for SurfaceChange {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let role = match self.role {
            Role::Pinned => "check file",
            Role::Test => "test file",
            Role::Reported => "test",
            Role::Runner => "test runner",
            Role::Support => "test support module",
            Role::Sourced => "sourced script",
        };
        write!(f, "{role} `{}` {}", self.path, self.what)
    }
}

/// The frozen check surface of one run (serialisable, so that a run resumed later compares
/// with what was frozen when it started).
#[derive(Debug, Clone, Default, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct CheckSurface {
    files: BTreeMap<String, Frozen>,
    /// The suites' own reports before the first dispatch.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    suites: Vec<SuiteBaseline>,
    /// The whole-tree snapshot taken with the freeze (a git tree id, see
    /// [`crate::snapshot`]): what [`crate::restore`] writes the frozen files back from.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    tree: Option<String>,
    /// Files created after the freeze are compared too ([`CheckSurface::changes`]); a freeze
    /// recorded before they were leaves them alone.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    watch_added: bool,
    /// What the freeze recorded beyond the files (see [`more`]).
    #[serde(default, flatten)]
    more: more::More,
}

/// A runner's report recorded before the first dispatch.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
struct SuiteBaseline {
    probe: Probe,
    report: SuiteReport,
}

/// Reads a file's digest and (for test files) its lines, without following a symlink.
fn read(root: &Path, rel: &str, keep_lines: bool) -> Option<(String, Option<Vec<String>>)> {
    let path = root.join(rel);
    let meta = fs::symlink_metadata(&path).ok()?;
    if meta.file_type().is_symlink() {
        let target = fs::read_link(&path).ok()?;
        return Some((format!("link:{}", target.display()), None));
    }
    if !meta.is_file() {
        return None;
    }
    let (text, _) = work_runtime::fsx::read_text_capped(&path, READ_CAP).ok()?;
    let digest = hex::encode(Sha256::digest(text.as_bytes()));
    let lines = keep_lines.then(|| text.lines().map(line_digest).collect());
    Some((digest, lines))
}

/// The short digest of one line (trailing blanks aside) kept for a file whose additions are told
/// from its edits.
fn line_digest(line: &str) -> String {
    hex::encode(&Sha256::digest(line.trim_end().as_bytes())[..6])
}

/// True when `name` is a test file by the usual conventions: Python's (`test*.py` — unittest's
/// default discovery pattern, which covers `test_*.py` and Django's `tests.py` — `*_test.py`,
/// `*_tests.py`), Go's, Rust's, JavaScript's (`*.test.*`, `*.spec.*`, and the names `node
/// --test` runs on its own: see [`is_node_test_name`]), Ruby's, Elixir's, and the JVM's and
/// .NET's (`FooTest.java`, `FooTests.cs`).
pub(crate) fn is_test_name(name: &str) -> bool {
    is_node_test_name(name) || is_conventional_test_name(name)
}

/// The extensions `node --test` looks at (with its type stripping, TypeScript's too).
const NODE_TEST_EXTS: &[&str] = &["js", "mjs", "cjs", "ts", "mts", "cts"];

/// True when `node --test` with no file arguments runs `name`: `*-test.js`, `*_test.js`,
/// `test-*.js`, `test.js` (and `.mjs`, `.cjs`, `.ts`, `.mts`, `.cts`; `*.test.js` and files
/// under `test/` are tests by the other rules).
fn is_node_test_name(name: &str) -> bool {
    name.rsplit_once('.').is_some_and(|(stem, ext)| {
        NODE_TEST_EXTS.contains(&ext)
            && (stem == "test" || stem.ends_with("-test") || stem.ends_with("_test") || stem.starts_with("test-"))
    })
}

fn is_conventional_test_name(name: &str) -> bool {
    (name.starts_with("test") && name.ends_with(".py"))
        || name.ends_with("_test.py")
        || name.ends_with("_tests.py")
        || name.ends_with("_test.rb")
        || (name.starts_with("test_") && name.ends_with(".rb"))
        || name.ends_with("_test.exs")
        || [".java", ".kt", ".cs", ".php", ".swift", ".scala"].iter().any(|ext| {
            name.strip_suffix(ext).is_some_and(|stem| {
                stem.ends_with("Test")
                    || stem.ends_with("Tests")
                    || stem.ends_with("TestCase")
                    || stem.ends_with("Spec")
                    || stem.strip_prefix("Test").is_some_and(|rest| rest.starts_with(|c: char| c.is_ascii_uppercase()))
            })
        })
        || name.ends_with("_test.go")
        || name.ends_with("_test.rs")
        || name.contains(".test.")
        || name.contains(".spec.")
        || name.ends_with("_spec.rb")
}

/// True when a runner loads a file of this name on its own, whatever the check command says:
/// pytest's `conftest.py`, Python's `sitecustomize.py` / `usercustomize.py` and `.pth` files
/// (read at interpreter start from a directory on its path).
fn is_loaded_on_its_own(name: &str) -> bool {
    matches!(name, "conftest.py" | "sitecustomize.py" | "usercustomize.py") || name.ends_with(".pth")
}

/// The modules `rel` would shadow were they frozen: an import finds a package directory, or a
/// compiled extension, before a module of the same name (`a/helpers/__init__.py` and
/// `a/helpers.so` before `a/helpers.py`; `a/helpers/index.js` is what a directory import of
/// `a/helpers` finds).
fn shadowed(rel: &str) -> Vec<String> {
    let (dir, name) = rel.rsplit_once('/').unwrap_or(("", rel));
    let join =
        |stem: &str, ext: &str| if dir.is_empty() { format!("{stem}.{ext}") } else { format!("{dir}/{stem}.{ext}") };
    if name == "__init__.py" && !dir.is_empty() {
        return vec![format!("{dir}.py")];
    }
    if let Some(rest) = name.strip_prefix("index.")
        && !dir.is_empty()
        && ["js", "ts", "mjs", "cjs", "jsx", "tsx"].contains(&rest)
    {
        return ["js", "ts", "mjs", "cjs"].iter().map(|e| format!("{dir}.{e}")).collect();
    }
    if let Some(stem) = name.strip_suffix(".so").or_else(|| name.strip_suffix(".pyd")) {
        let stem = stem.split('.').next().unwrap_or(stem);
        return vec![join(stem, "py")];
    }
    Vec::new()
}

/// The project under `root` from `from` (see [`crate::inventory`]): every directory walked but
/// [`SKIP_DIRS`], symlinks listed, never followed. The walk every check-surface policy reads.
pub(crate) fn project(root: &Path, from: &str) -> crate::inventory::Inventory {
    use crate::inventory::{Inventory, Seen};
    Inventory::take(root, from, |rel, dir| {
        let skip = dir && rel.file_name().is_some_and(|n| SKIP_DIRS.iter().any(|s| n == *s));
        if skip { Seen::Skipped } else { Seen::Recorded }
    })
}

/// The files of `tree` that a runner loads on its own or that could shadow a module
/// ([`is_loaded_on_its_own`], [`shadowed`]): a name is all that is looked at.
fn hook_files(tree: &crate::inventory::Inventory) -> Vec<String> {
    let name = |rel: &str| rel.rsplit('/').next().unwrap_or_default().to_string();
    tree.files()
        .map(|(rel, _)| rel)
        .filter(|rel| is_loaded_on_its_own(&name(rel)) || !shadowed(rel).is_empty())
        .collect()
}

/// True when `rel` is in the test tree (frozen as a test file by this module): under a test
/// directory, or a test file by its name.
pub(crate) fn is_test_path(rel: &str) -> bool {
    let mut parts: Vec<&str> = rel.split('/').collect();
    let name = parts.pop().unwrap_or_default();
    parts.iter().any(|d| is_test_dir(d)) || is_test_name(name)
}

/// True when a directory name holds tests.
pub(crate) fn is_test_dir(name: &str) -> bool {
    matches!(name, "tests" | "test" | "spec" | "__tests__" | "testdata")
}

/// A command line's shell words (whitespace-split when it does not parse as shell).
fn shell_split(cmd: &str) -> Vec<String> {
    shell_words::split(cmd).unwrap_or_else(|_| cmd.split_whitespace().map(str::to_string).collect())
}

/// The words of a command line that run as programs: the first word of each simple command
/// (after `VAR=value` assignments and an `env`), or, when that is an interpreter (`sh`,
/// `python3`, `node`, `.`, …), the first word after its options; the words of a quoted
/// `sh -c` script too.
fn program_words(cmd: &str) -> Vec<String> {
    const INTERPRETERS: &[&str] = &[
        "sh", "bash", "zsh", "dash", "ksh", "python", "python3", "node", "ruby", "perl", "deno", "bun", ".", "source",
    ];
    let words = shell_split(cmd);
    let mut out = Vec::new();
    let mut at_command = true;
    let mut after_interpreter = false;
    for w in words {
        if w.contains(char::is_whitespace) {
            out.extend(program_words(&w));
            continue;
        }
        if matches!(w.as_str(), "&&" | "||" | ";" | "|" | "&") || w.ends_with(';') {
            at_command = true;
            after_interpreter = false;
            continue;
        }
        if after_interpreter {
            if !w.starts_with('-') {
                out.push(w);
                after_interpreter = false;
            }
            continue;
        }
        if !at_command || w == "env" || (w.contains('=') && !w.starts_with('=')) {
            continue;
        }
        at_command = false;
        let name = w.rsplit('/').next().unwrap_or(&w);
        if INTERPRETERS.contains(&name) {
            after_interpreter = true;
        } else {
            out.push(w);
        }
    }
    out
}

/// The words of a command line that name what a runner reads as its configuration or recipe:
/// the value of `-f`/`--file`/`--makefile` (make), `-c`/`--config`/`--config-file`/`--rcfile`/
/// `--settings`/`--project`/`-p` (pytest, jest, vitest, mocha, tsc, pylint, …), as the next word
/// or after `=`, and any word with a configuration or recipe extension (`ci.mk`, `ci.ini`,
/// `checks.toml`, `.yaml`, `.cfg`, `.conf`). `make -f ci.mk test`: `ci.mk` decides what `test`
/// runs, as `Makefile` would.
fn config_words(cmd: &str) -> Vec<String> {
    const OPTIONS: &[&str] =
        &["-f", "--file", "--makefile", "-c", "--config", "--config-file", "--rcfile", "--settings", "--project", "-p"];
    const EXTENSIONS: &[&str] = &[".mk", ".ini", ".toml", ".cfg", ".conf", ".yaml", ".yml"];
    let words = shell_split(cmd);
    let mut out = Vec::new();
    let mut take_next = false;
    for w in words {
        if w.contains(char::is_whitespace) {
            out.extend(config_words(&w));
            continue;
        }
        if std::mem::take(&mut take_next) && !w.starts_with('-') {
            out.push(w.clone());
        }
        if OPTIONS.contains(&w.as_str()) {
            take_next = true;
        } else if let Some((opt, value)) = w.split_once('=')
            && OPTIONS.contains(&opt)
        {
            out.push(value.to_string());
        } else if EXTENSIONS.iter().any(|e| w.ends_with(e)) && !w.starts_with('-') {
            out.push(w.clone());
        }
    }
    out
}

/// The words of a command line that may name files: shell words, and the words of a quoted
/// `sh -c` / `bash -c` script.
fn command_words(cmd: &str) -> Vec<String> {
    let words = shell_split(cmd);
    let mut out = Vec::new();
    for w in words {
        if w.contains(char::is_whitespace) {
            out.extend(command_words(&w));
        } else {
            for part in w.split(['=', ';', '&', '|', '(', ')', '<', '>']) {
                if !part.is_empty() {
                    out.push(part.to_string());
                }
            }
        }
    }
    out
}

/// A relative path named by `word`, when it names a file or directory inside the root.
fn named_path(root: &Path, word: &str) -> Option<String> {
    let w = word.trim_start_matches("./");
    if w.is_empty() || w == "." || w.starts_with('/') || w.starts_with('-') || w.split('/').any(|s| s == "..") {
        return None;
    }
    let p = root.join(w);
    fs::symlink_metadata(&p).ok().map(|_| w.trim_end_matches('/').to_string())
}

/// Words that may stand between a script's name and what it must do (`ci.sh should pass`,
/// `ci.sh is green`, `ci.sh runs green`).
const FILLERS: &[&str] = &[
    "is", "are", "should", "must", "will", "does", "do", "then", "again", "now", "still", "be", "become", "becomes",
    "goes", "turns", "runs", "stays", "all",
];

/// Words that say a script must pass: it is named as the check, not as the work.
const PASSES: &[&str] =
    &["pass", "passes", "passing", "passed", "succeed", "succeeds", "succeeding", "green", "ok", "clean"];

/// True when the work's text names `rel` (its path, or its file name as a word) as something to
/// work on: some mention of it is not followed by what it must do — pass, succeed, be green,
/// exit 0 (`fix lib.add so that scripts/ci.sh passes` names the check; `write scripts/ci.sh
/// that runs the tests`, `greet.sh prints hello`, `change expected() in support.py to return
/// 0` name the work).
pub(crate) fn work_names(text: &str, rel: &str) -> bool {
    let base = rel.rsplit('/').next().unwrap_or(rel);
    let is_sep = |c: char| c.is_whitespace() || "`'\"(),;:".contains(c);
    let mut after: Vec<&str> = text.match_indices(rel).map(|(i, m)| &text[i + m.len()..]).collect();
    for w in text.split(is_sep).filter(|w| *w == base) {
        // `w` is a slice of `text`: where it ends is where its mention's rest starts.
        let end = w.as_ptr() as usize - text.as_ptr() as usize + w.len();
        after.push(text.get(end..).unwrap_or_default());
    }
    after.iter().any(|rest| !says_it_passes(rest))
}

/// True when `rest` (the text after a script's name) starts by saying it must pass.
fn says_it_passes(rest: &str) -> bool {
    let mut words = rest
        .split(|c: char| c.is_whitespace() || "`'\"(),;:".contains(c))
        .filter(|w| !w.is_empty())
        .map(|w| w.trim_end_matches(['.', '!', '?']).to_ascii_lowercase());
    for _ in 0..4 {
        let Some(w) = words.next() else { return false };
        if FILLERS.contains(&w.as_str()) {
            continue;
        }
        if PASSES.contains(&w.as_str()) {
            return true;
        }
        return matches!(w.as_str(), "exits" | "exit")
            && words.next().is_some_and(|n| matches!(n.as_str(), "0" | "zero" | "successfully" | "cleanly" | "with"));
    }
    false
}

/// A digest of the files `commands` name on their command lines (path and content), for a
/// definition fingerprint: a check whose script changed is a different check.
pub fn commands_digest<S: AsRef<str>>(root: &Path, commands: &[S], which: Named) -> String {
    let mut named: BTreeMap<String, String> = BTreeMap::new();
    for cmd in commands {
        for w in command_words(cmd.as_ref()) {
            if let Some(rel) = named_path(root, &w)
                && (which == Named::All || is_check_like(&rel))
                && let Some((digest, _)) = read(root, &rel, false)
            {
                named.insert(rel, digest);
            }
        }
    }
    let mut h = Sha256::new();
    for (p, d) in &named {
        h.update(p.as_bytes());
        h.update([0]);
        h.update(d.as_bytes());
        h.update([0]);
    }
    hex::encode(h.finalize())[..16].to_string()
}

impl CheckSurface {
    /// Freezes the surface of `commands` (the verify/test/gate/scenario command lines) in `root`;
    /// `which` says which of the files they name are checks.
    pub fn freeze<S: AsRef<str>>(root: &Path, commands: &[S], which: Named) -> CheckSurface {
        let mut s = CheckSurface { watch_added: true, ..CheckSurface::default() };
        for cfg in CONFIG_FILES.iter().chain(RUNNER_CONFIG) {
            s.add(root, cfg, Role::Pinned);
        }
        for cmd in commands {
            for w in command_words(cmd.as_ref()) {
                if let Some(rel) = named_path(root, &w) {
                    if which == Named::CheckLike && !is_check_like(&rel) {
                        continue;
                    }
                    if root.join(&rel).is_dir() {
                        s.add_tests(root, &project(root, &rel), true);
                    } else {
                        s.add(root, &rel, Role::Pinned);
                    }
                }
            }
        }
        let tree = project(root, "");
        s.add_tests(root, &tree, false);
        // What a runner loads on its own, and what would shadow a frozen module, as the tree
        // has them now: only files created later are `added`.
        for rel in hook_files(&tree) {
            let name = rel.rsplit('/').next().unwrap_or_default();
            if !s.files.contains_key(&rel)
                && (is_loaded_on_its_own(name) || shadowed(&rel).iter().any(|m| s.files.contains_key(m)))
            {
                s.add(root, &rel, Role::Pinned);
            }
        }
        s.freeze_more(root, commands, which);
        s.protect(root);
        s
    }

    /// Makes the files that may never change (pinned checks and configuration, test-support
    /// modules) read-only for every later write role of this run (`work_runtime::sandbox`):
    /// an honest agent gets `EROFS` at once; test files stay writable (a test may be added).
    fn protect(&self, root: &Path) {
        work_runtime::sandbox::protect(
            self.files
                .iter()
                .filter(|(_, f)| matches!(f.role, Role::Pinned | Role::Support))
                .map(|(p, _)| root.join(p)),
        );
    }

    /// Freezes too every script `commands` run (a program word, or the script an interpreter
    /// runs: `sh scripts/ci.sh`, `./ci.sh`, `python3 check_all.py` — never a data argument like
    /// grep's file or a redirect's target) that does not read as a check (see
    /// [`Named::CheckLike`]) when the work's own text does not name it either: `work` is what
    /// the agent is asked (a goal, an objective), with the command lines themselves taken out.
    /// A script only the check names is the check (`sh scripts/ci.sh`); one the work names is
    /// the code under change (`greet.sh prints hello` checked by `sh greet.sh`).
    ///
    /// A mention only as what must pass (`fix lib.add so that scripts/ci.sh passes`, `until
    /// ci.sh is green`, `ci.sh exits 0`) does not make a script the work: that is the check
    /// (see [`work_names`]).
    ///
    /// The test-support modules the frozen checks import from outside the test tree
    /// ([`crate::support_modules::find`]: `support.py` imported by `tests/test_x.py`), and what
    /// a frozen makefile includes or a frozen shell script sources (`-include .env`,
    /// `. scripts/env.sh`; see `more::included`), are frozen here too, by the same rule: one the
    /// work names is the code under change.
    pub fn pin_unnamed_by<S: AsRef<str>>(&mut self, root: &Path, commands: &[S], work: &str) {
        let mut text = work.to_string();
        for cmd in commands {
            text = text.replace(cmd.as_ref().trim(), " ");
        }
        let named = |rel: &str| work_names(&text, rel);
        for cmd in commands {
            let words = program_words(cmd.as_ref()).into_iter().chain(config_words(cmd.as_ref()));
            for w in words {
                if let Some(rel) = named_path(root, &w)
                    && !is_check_like(&rel)
                    && !named(&rel)
                    && !root.join(&rel).is_dir()
                {
                    self.add(root, &rel, Role::Pinned);
                }
            }
        }
        let starts: Vec<&str> = self.files.keys().map(String::as_str).collect();
        let support = crate::support_modules::find(root, &starts, |p| self.files.contains_key(p));
        for rel in support {
            if !named(&rel) {
                self.add(root, &rel, Role::Support);
            }
        }
        self.pin_included(root, &named);
        self.protect(root);
    }

    fn add(&mut self, root: &Path, rel: &str, role: Role) {
        if self.files.len() >= MAX_FILES {
            return;
        }
        if let Some(existing) = self.files.get_mut(rel) {
            existing.role = existing.role.min(role);
            return;
        }
        if let Some((digest, lines)) = read(root, rel, matches!(role, Role::Test | Role::Sourced)) {
            self.files.insert(rel.to_string(), Frozen { role, digest, lines });
        }
    }

    /// Records the files of `tree` (every one when `all`, else the test files).
    fn add_tests(&mut self, root: &Path, tree: &crate::inventory::Inventory, all: bool) {
        for (child, _) in tree.files() {
            if all || is_test_path(&child) {
                self.add(root, &child, Role::Test);
            }
        }
    }

    /// Records the own report of every test runner `commands` run that can give one (see
    /// [`crate::suite_report`]): the baseline [`CheckSurface::suite_changes`] compares with. A
    /// runner that gives no report now is left to the file-level freeze. Runs each suite once.
    pub async fn record_suites<S: AsRef<str>>(
        &mut self,
        spawner: &Spawner,
        root: &Path,
        commands: &[S],
        timeout: Option<Duration>,
    ) {
        for cmd in commands {
            for probe in suite_report::detect(cmd.as_ref()) {
                if self.suites.iter().any(|b| b.probe.report_command == probe.report_command) {
                    continue;
                }
                if let Some(report) = suite_report::run(spawner, root, &probe, timeout).await {
                    self.suites.push(SuiteBaseline { probe, report });
                }
            }
        }
    }

    /// Records a baseline report the caller already has: the one a run of `probe`'s report
    /// command gave before the first dispatch (see [`crate::suite_report::sole_probe`]: a check
    /// command that is one runner invocation is run once, its report taken from that run).
    pub fn record_suite(&mut self, probe: Probe, report: SuiteReport) {
        if !self.suites.iter().any(|b| b.probe.report_command == probe.report_command) {
            self.suites.push(SuiteBaseline { probe, report });
        }
    }

    /// The runners whose baseline report was recorded: `(command part, collected, skipped)`.
    pub fn suites(&self) -> Vec<(&str, usize, usize)> {
        self.suites
            .iter()
            .map(|b| (b.probe.part.as_str(), b.report.collected(), b.report.count(suite_report::Outcome::Skipped)))
            .collect()
    }

    /// Runs every recorded runner again and names the tests its report lost since the baseline
    /// (gone, skipped where they ran, added skipped), and a runner that gives no report now.
    /// Call it when a verdict is green: a red verdict needs no second look.
    pub async fn suite_changes(&self, spawner: &Spawner, root: &Path, timeout: Option<Duration>) -> Vec<SurfaceChange> {
        let mut out = Vec::new();
        for b in &self.suites {
            match suite_report::run(spawner, root, &b.probe, timeout).await {
                None => out.push(SurfaceChange {
                    path: b.probe.part.clone(),
                    role: Role::Runner,
                    what: "gave no report (it gave one before the first dispatch)".into(),
                }),
                Some(now) => out.extend(suite_report::compare(&b.report, &now).into_iter().map(|l| SurfaceChange {
                    path: l.test,
                    role: Role::Reported,
                    what: l.what.into(),
                })),
            }
        }
        out
    }

    /// Records the whole working tree (outside `exclude`) as the tree the checks were frozen
    /// in; a tree that cannot be written is left unrecorded (the rerun with the frozen checks
    /// restored is then skipped, and the file-level freeze and the suite report still hold).
    pub fn record_tree<S: AsRef<str>>(&mut self, git: &crate::Git, exclude: &[S]) {
        self.tree = git.snapshot_tree(exclude).ok();
    }

    /// The checks as frozen, for a rerun with them written back ([`crate::restore::Frozen`]);
    /// `None` when no tree was recorded with the freeze.
    pub fn frozen<'a>(
        &'a self,
        git: &'a crate::Git,
        root: &'a Path,
        exclude: &'a [String],
    ) -> Option<crate::restore::Frozen<'a>> {
        let tree = self.tree.as_deref()?;
        Some(crate::restore::Frozen {
            git,
            tree,
            paths: self.restored_paths(),
            exclude,
            hide: self.to_move_aside(root),
            emptied: self.emptied_in_rerun(root),
        })
    }

    /// The frozen paths the rerun with the frozen checks restored writes back (every one but a
    /// sourced shell library, which is the work's), sorted.
    pub fn restored_paths(&self) -> Vec<&str> {
        self.files.iter().filter(|(_, f)| f.role != Role::Sourced).map(|(p, _)| p.as_str()).collect()
    }

    /// The frozen paths, sorted.
    pub fn paths(&self) -> Vec<&str> {
        self.files.keys().map(String::as_str).collect()
    }

    /// The frozen pinned paths (check scripts and configuration), sorted.
    pub fn pinned(&self) -> Vec<&str> {
        self.files.iter().filter(|(_, f)| f.role == Role::Pinned).map(|(p, _)| p.as_str()).collect()
    }

    /// What changed in `root` since the freeze, under `edits`, sorted by path.
    pub fn changes(&self, root: &Path, edits: TestEdits) -> Vec<SurfaceChange> {
        let mut out = Vec::new();
        for (path, frozen) in &self.files {
            let now = read(root, path, frozen.lines.is_some());
            let what = match (&now, frozen.role) {
                (None, _) => Some("deleted"),
                (Some((d, _)), _) if *d == frozen.digest => None,
                (Some(_), Role::Pinned | Role::Reported | Role::Runner | Role::Support) => Some("changed"),
                (Some((_, lines)), Role::Test) => match (edits, &frozen.lines, lines) {
                    (TestEdits::Add, Some(old), Some(new)) if only_appended(old, new) => {
                        added_lines_problem(root, path, old, new)
                    }
                    _ => Some("edited"),
                },
                (Some(_), Role::Sourced) => sourced_problem(root, path, frozen.lines.as_deref().unwrap_or_default()),
            };
            if let Some(what) = what {
                out.push(SurfaceChange { path: path.clone(), role: frozen.role, what: what.into() });
            }
        }
        if self.watch_added {
            out.extend(self.added(root));
            out.sort_by(|a, b| a.path.cmp(&b.path));
        }
        out
    }

    /// Files that did not exist when the checks were frozen and change what the frozen checks
    /// run although no frozen file changed: a runner's configuration created at the root, a
    /// file a runner loads on its own ([`is_loaded_on_its_own`]: `conftest.py`,
    /// `sitecustomize.py`, a `.pth` file …), and a file that shadows a frozen module
    /// ([`shadowed`]: `tests/helpers/__init__.py` beside `tests/helpers.py`).
    fn added(&self, root: &Path) -> Vec<SurfaceChange> {
        let mut out = Vec::new();
        let mut push = |path: &str, what: String| {
            if !self.files.contains_key(path) {
                out.push(SurfaceChange { path: path.to_string(), role: Role::Pinned, what: what.into() });
            }
        };
        for cfg in RUNNER_CONFIG {
            if read(root, cfg, false).is_some() {
                push(cfg, "added (a test runner's configuration: it changes how every check runs)".to_string());
            }
        }
        for rel in hook_files(&project(root, "")) {
            if let Some(name) = rel.rsplit('/').next()
                && is_loaded_on_its_own(name)
            {
                push(&rel, "added (a runner loads it on its own: it changes what every check runs)".to_string());
            } else if let Some(module) = shadowed(&rel).into_iter().find(|m| self.files.contains_key(m)) {
                push(&rel, format!("added: it shadows the frozen `{module}` (a check importing it would run this)"));
            }
        }
        self.more_added(root, &mut out);
        out
    }
}

/// Markers that switch a test off, in the usual runners (pytest, unittest, Rust, Go, jest,
/// mocha, vitest, RSpec).
const SKIP_MARKERS: &[&str] =
    &["skip", "xfail", "#[ignore", "xit(", "xdescribe(", "xtest(", ".todo(", "t.skip", "pending(", ".only("];

/// Calls that end the whole process (a test file has no business ending the suite).
const PROCESS_EXITS: &[&str] = &[
    "sys.exit(",
    "os._exit(",
    "raise systemexit",
    "pytest.exit(",
    "process.exit(",
    "os.exit(",
    "process::exit(",
    "runtime.goexit(",
];

/// What an added line does to the test file it was added to, when it ends the check early or
/// makes existing lines vacuous: `None` for an honest addition.
///
/// - a skip marker (`skip`, `xfail`, `#[ignore]`, `.only(` …) anywhere;
/// - a process exit anywhere (`sys.exit(`, `process.exit(`, `os.Exit(` …, a shell `exit` with no
///   status or status 0, a bare `exit()`/`quit()`): it ends the suite, or makes a check script
///   pass whatever came before;
/// - a `return` or an always-false condition (`if False:`, `if (false)`, `if 0`) or a `try`
///   directly above an existing line at the same or a deeper indentation: the existing lines
///   no longer run, or their failure is swallowed. A helper's `return` above the next
///   function (a shallower line) is honest.
fn added_line_problem(line: &str, next_old_indent: Option<usize>) -> Option<&'static str> {
    let lower = line.trim().to_ascii_lowercase();
    if PROCESS_EXITS.iter().any(|m| lower.contains(m)) || is_bare_exit(&lower) {
        return Some("edited (a check ends early)");
    }
    if SKIP_MARKERS.iter().any(|m| contains_word(&lower, m)) {
        return Some("edited (a test is skipped)");
    }
    let indent = line.len() - line.trim_start().len();
    let shadows = next_old_indent.is_some_and(|n| n >= indent);
    let word = lower.split(|c: char| !c.is_ascii_alphanumeric() && c != '_').next().unwrap_or_default();
    if shadows && word == "return" {
        return Some("edited (a check ends early)");
    }
    let squeezed: String = lower.chars().filter(|c| !c.is_whitespace()).collect();
    const DEAD: &[&str] = &["iffalse", "if(false)", "if0", "if(0)", "while(false)", "whilefalse", "iftrue==false"];
    if shadows && (DEAD.iter().any(|d| squeezed.starts_with(d)) || matches!(squeezed.as_str(), "try:" | "try{")) {
        return Some("edited (a check is made vacuous)");
    }
    None
}

/// True when `marker` occurs in `line` not as the tail of a longer word (`xit(` is not in
/// `exit(`).
fn contains_word(line: &str, marker: &str) -> bool {
    line.match_indices(marker).any(|(i, _)| {
        !marker.starts_with(|c: char| c.is_ascii_alphabetic())
            || !line[..i].ends_with(|c: char| c.is_ascii_alphanumeric() || c == '_')
    })
}

/// A shell `exit` with no status or status 0 (the last statement of the line, comments
/// aside), or a bare `exit()`/`quit()` (Python): a success whatever ran before.
fn is_bare_exit(lower: &str) -> bool {
    let code = lower.split(" #").next().unwrap_or(lower).trim().trim_end_matches(';').trim();
    let stmt = code.rsplit(['&', '|', ';']).next().unwrap_or(code).trim();
    matches!(stmt, "exit" | "exit 0" | "exit()" | "exit(0)" | "quit()" | "quit(0)")
}

/// Why a test file that kept every old line is still refused: an added line switches a test
/// off, ends the check early or makes existing lines vacuous (see [`added_line_problem`]).
fn added_lines_problem(root: &Path, rel: &str, old: &[String], new: &[String]) -> Option<&'static str> {
    let Ok((text, _)) = work_runtime::fsx::read_text_capped(&root.join(rel), READ_CAP) else { return None };
    let lines: Vec<&str> = text.lines().collect();
    let mut old_it = old.iter().peekable();
    let is_old: Vec<bool> = new
        .iter()
        .map(|h| {
            let hit = old_it.peek().is_some_and(|o| *o == h);
            if hit {
                old_it.next();
            }
            hit
        })
        .collect();
    for (i, kept) in is_old.iter().enumerate() {
        if *kept {
            continue;
        }
        let line = lines.get(i).copied().unwrap_or_default();
        // The next non-blank line, when it is an existing one: its indentation.
        let next_old_indent = (i + 1..lines.len())
            .find(|&j| !lines[j].trim().is_empty())
            .filter(|&j| is_old.get(j).copied().unwrap_or(false))
            .map(|j| lines[j].len() - lines[j].trim_start().len());
        if let Some(why) = added_line_problem(line, next_old_indent) {
            return Some(why);
        }
    }
    None
}

/// Why a sourced shell library's change is refused: a line that was not there at the freeze
/// ends the check that sources it early (`exit` / `exit 0`, `exec …`, a `trap` that exits).
fn sourced_problem(root: &Path, rel: &str, old: &[String]) -> Option<&'static str> {
    let Ok((text, _)) = work_runtime::fsx::read_text_capped(&root.join(rel), READ_CAP) else { return Some("changed") };
    let old: std::collections::BTreeSet<&String> = old.iter().collect();
    text.lines()
        .filter(|l| !old.contains(&line_digest(l)))
        .any(|l| {
            let lower = l.trim().to_ascii_lowercase();
            is_bare_exit(&lower) || lower.starts_with("exec ") || (lower.starts_with("trap ") && lower.contains("exit"))
        })
        .then_some("edited (a check ends early)")
}

/// True when every line of `old` is still in `new`, in order (lines were only added).
fn only_appended(old: &[String], new: &[String]) -> bool {
    let mut it = new.iter();
    old.iter().all(|line| it.any(|n| n == line))
}

/// One line naming the changes (at most eight paths).
pub fn describe(changes: &[SurfaceChange]) -> String {
    crate::inventory::describe(changes, 8, "; ")
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;

    /// Writes `text` at `rel` under `root`, creating its directories (the work-git unit tests'
    /// one fixture writer).
    pub(crate) fn write(root: &Path, rel: &str, text: &str) {
        let p = root.join(rel);
        if let Some(d) = p.parent() {
            fs::create_dir_all(d).expect("mkdir");
        }
        fs::write(p, text).expect("write");
    }

    #[test]
    fn a_script_only_the_check_names_is_frozen_and_one_the_work_names_is_not() {
        let d = tempfile::tempdir().expect("tempdir");
        std::fs::create_dir_all(d.path().join("scripts")).expect("mkdir");
        std::fs::write(d.path().join("scripts/ci.sh"), "grep -q ready lib.rs\n").expect("write");
        std::fs::write(d.path().join("greet.sh"), "echo hi\n").expect("write");
        let cmds = ["sh scripts/ci.sh && sh greet.sh"];
        let mut s = CheckSurface::freeze(d.path(), &cmds, Named::CheckLike);
        s.pin_unnamed_by(d.path(), &cmds, "`sh scripts/ci.sh && sh greet.sh` exits 0 and greet.sh prints hello");
        assert!(s.files.contains_key("scripts/ci.sh"), "only the check names it: {:?}", s.files.keys());
        assert!(!s.files.contains_key("greet.sh"), "the work names it: {:?}", s.files.keys());
        // Data a check reads or writes is not the check: only what it runs.
        std::fs::write(d.path().join("lib.rs"), "fn ready() {}\n").expect("write");
        let cmds = ["mkdir -p out && echo run >> lib.rs && grep -q ready lib.rs"];
        let mut s = CheckSurface::default();
        s.pin_unnamed_by(d.path(), &cmds, "");
        assert!(!s.files.contains_key("lib.rs"), "{:?}", s.files.keys());
        let progs = program_words("A=1 env B=2 ./scripts/ci.sh x && sh -e scripts/ci.sh y | python3 -u run.py");
        assert_eq!(progs, vec!["./scripts/ci.sh", "scripts/ci.sh", "run.py"]);
        assert_eq!(program_words("sh -c 'bash tools/gate.sh --fast'"), vec!["tools/gate.sh"]);
    }

    #[test]
    fn a_script_the_work_names_only_as_what_must_pass_is_the_check() {
        for (text, named) in [
            ("fix lib.add so that scripts/ci.sh passes", false),
            ("until ci.sh is green", false),
            ("make `scripts/ci.sh` pass.", false),
            ("ci.sh should exit 0 and ci.sh: succeeds", false),
            ("fix lib.add; scripts/ci.sh must pass", false),
            ("write scripts/ci.sh that runs the tests", true),
            ("greet.sh prints hello", true),
            ("fix scripts/ci.sh so that it passes", true),
            ("scripts/ci.sh passes once ci.sh runs the linter too", true),
            ("fix lib.add", false),
            ("change expected() in scripts/ci.sh to return 0", true),
            ("change main in scripts/ci.sh to exit 0 on --help, to pass the flag on", true),
        ] {
            assert_eq!(work_names(text, "scripts/ci.sh") || work_names(text, "greet.sh"), named, "{text}");
        }
        let d = tempfile::tempdir().expect("tmp");
        write(d.path(), "scripts/ci.sh", "python3 -m pytest\n");
        let cmds = ["sh scripts/ci.sh"];
        let mut s = CheckSurface::freeze(d.path(), &cmds, Named::CheckLike);
        s.pin_unnamed_by(d.path(), &cmds, "fix lib.add so that scripts/ci.sh passes");
        assert!(s.paths().contains(&"scripts/ci.sh"), "named only as what must pass: the check");
        let mut s = CheckSurface::freeze(d.path(), &cmds, Named::CheckLike);
        s.pin_unnamed_by(d.path(), &cmds, "write scripts/ci.sh that runs the tests");
        assert!(!s.paths().contains(&"scripts/ci.sh"), "the work writes it");
    }

    #[test]
    fn a_makefile_or_config_file_a_check_names_by_option_is_frozen_unless_the_work_names_it() {
        let d = tempfile::tempdir().expect("tmp");
        write(d.path(), "ci.mk", "test:\n\tpython3 -m pytest\n");
        write(d.path(), "ci.ini", "[pytest]\n");
        write(d.path(), "lib.py", "x = 1\n");
        let cmds = ["make -f ci.mk test", "python3 -m pytest -c ci.ini", "mypy lib.py"];
        let mut s = CheckSurface::freeze(d.path(), &cmds, Named::CheckLike);
        s.pin_unnamed_by(d.path(), &cmds, "fix lib.py");
        let paths = s.paths();
        assert!(paths.contains(&"ci.mk") && paths.contains(&"ci.ini"), "{paths:?}");
        assert!(!paths.contains(&"lib.py"), "the code the check names stays free: {paths:?}");
        let mut s = CheckSurface::freeze(d.path(), &cmds, Named::CheckLike);
        s.pin_unnamed_by(d.path(), &cmds, "make the ci.mk recipe run the linter");
        assert!(!s.paths().contains(&"ci.mk"), "the work names it");
    }

    #[test]
    fn pins_the_scripts_a_command_runs_and_the_runner_config() {
        let dir = tempfile::tempdir().expect("tempdir");
        let root = dir.path();
        write(root, "check.sh", "test -f done\n");
        write(root, "scripts/verify", "exit 1\n");
        write(root, "work.toml", "[gates]\n");
        write(root, "src/lib.rs", "fn a() {}\n");
        let s = CheckSurface::freeze(
            root,
            &["sh check.sh && ./scripts/verify", "bash -c 'python3 -m pytest -q'"],
            Named::All,
        );
        assert_eq!(s.pinned(), vec!["check.sh", "scripts/verify", "work.toml"]);
        assert!(s.changes(root, TestEdits::None).is_empty());
        // Editing source is not a surface change; rewriting the check is.
        write(root, "src/lib.rs", "fn b() {}\n");
        write(root, "check.sh", "exit 0\n");
        fs::remove_file(root.join("scripts/verify")).expect("rm");
        let ch = s.changes(root, TestEdits::Add);
        assert_eq!(describe(&ch), "check file `check.sh` changed; check file `scripts/verify` deleted");
    }

    #[test]
    fn a_file_a_runner_loads_on_its_own_or_a_shadow_of_a_frozen_module_added_later_is_named() {
        let dir = tempfile::tempdir().expect("tempdir");
        let root = dir.path();
        write(root, "tests/test_a.py", "from tests.helpers import expect\n");
        write(root, "tests/helpers.py", "def expect(a, b):\n    assert a == b\n");
        write(root, "src/conftest.py", "# there before the freeze\n");
        let s = CheckSurface::freeze(root, &["python3 -m pytest"], Named::All);
        // An honest helper module and test file, and a conftest that was there: nothing named.
        write(root, "tests/more_helpers.py", "def twice(x):\n    return 2 * x\n");
        write(root, "tests/test_more.py", "def test_more():\n    pass\n");
        assert!(s.changes(root, TestEdits::Add).is_empty(), "{:?}", s.changes(root, TestEdits::Add));
        write(root, "tests/conftest.py", "def pytest_collection_modifyitems(items): pass\n");
        write(root, "sitecustomize.py", "import lib\n");
        write(root, "venv.pth", "/tmp\n");
        write(root, "pytest.ini", "[pytest]\n");
        write(root, "tests/helpers/__init__.py", "def expect(a, b): pass\n");
        write(root, "tests/helpers.cpython-311-x86_64-linux-gnu.so", "");
        let named: Vec<String> = s.changes(root, TestEdits::Add).iter().map(|c| c.path.clone()).collect();
        assert_eq!(
            named,
            [
                "pytest.ini",
                "sitecustomize.py",
                "tests/conftest.py",
                "tests/helpers.cpython-311-x86_64-linux-gnu.so",
                "tests/helpers/__init__.py",
                "venv.pth"
            ]
        );
        assert!(describe(&s.changes(root, TestEdits::Add)).contains("shadows the frozen `tests/helpers.py`"));
        // A freeze recorded before added files were compared leaves them alone.
        let mut old = s.clone();
        old.watch_added = false;
        assert!(old.changes(root, TestEdits::Add).is_empty());
    }

    #[test]
    fn tests_may_be_added_but_never_edited_or_removed() {
        let dir = tempfile::tempdir().expect("tempdir");
        let root = dir.path();
        write(root, "tests/test_a.py", "def test_one():\n    assert f() == 1\n");
        write(root, "pkg/b_test.go", "func TestB(t *testing.T) {}\n");
        write(root, "target/debug/x_test.rs", "ignored\n");
        let s = CheckSurface::freeze(root, &["python3 -m pytest"], Named::All);
        assert_eq!(s.paths(), vec!["pkg/b_test.go", "tests/test_a.py"]);
        // Appending a test and adding a file: allowed under Add, not under None.
        write(
            root,
            "tests/test_a.py",
            "def test_one():\n    assert f() == 1\n\ndef test_two():\n    assert f() == 1\n",
        );
        write(root, "tests/test_new.py", "def test_new(): pass\n");
        assert!(s.changes(root, TestEdits::Add).is_empty());
        assert_eq!(s.changes(root, TestEdits::None).len(), 1);
        // Switching a test off by inserting a marker keeps every old line, and is still caught.
        write(
            root,
            "tests/test_a.py",
            "import pytest\ndef test_one():\n    assert f() == 1\n\ndef test_two():\n    assert f() == 1\n",
        );
        assert!(s.changes(root, TestEdits::Add).is_empty(), "an import above is an addition");
        write(root, "tests/test_a.py", "@pytest.mark.skip\ndef test_one():\n    assert f() == 1\n");
        assert_eq!(
            describe(&s.changes(root, TestEdits::Add)),
            "test file `tests/test_a.py` edited (a test is skipped)"
        );
        // Weakening an assertion, skipping, or deleting: never allowed.
        write(root, "tests/test_a.py", "import pytest\n@pytest.mark.skip\ndef test_one():\n    assert True\n");
        fs::remove_file(root.join("pkg/b_test.go")).expect("rm");
        let ch = s.changes(root, TestEdits::Add);
        assert_eq!(describe(&ch), "test file `pkg/b_test.go` deleted; test file `tests/test_a.py` edited");
    }

    #[test]
    fn an_added_line_that_ends_a_check_early_is_caught_and_an_honest_addition_is_not() {
        let dir = tempfile::tempdir().expect("tempdir");
        let root = dir.path();
        let py = "def test_one():\n    assert f() == 1\n";
        let sh = "grep -q hello out.txt\n";
        let js = "test('a', () => {\n  expect(f()).toBe(1);\n});\n";
        write(root, "tests/test_a.py", py);
        write(root, "tests/lib.sh", sh);
        write(root, "tests/a.test.js", js);
        let s = CheckSurface::freeze(root, &["python3 -m pytest"], Named::All);
        let caught = |rel: &str, text: &str| {
            write(root, rel, text);
            let ch = describe(&s.changes(root, TestEdits::Add));
            write(root, "tests/test_a.py", py);
            write(root, "tests/lib.sh", sh);
            write(root, "tests/a.test.js", js);
            ch
        };
        for (rel, liar) in [
            ("tests/test_a.py", "import sys\nsys.exit(0)\ndef test_one():\n    assert f() == 1\n"),
            ("tests/test_a.py", "def test_one():\n    return\n    assert f() == 1\n"),
            ("tests/a.test.js", "test('a', () => {\n  if (false)\n  expect(f()).toBe(1);\n});\n"),
            ("tests/lib.sh", "grep -q hello out.txt\nexit 0\n"),
            ("tests/lib.sh", "exit\ngrep -q hello out.txt\n"),
            ("tests/lib.sh", "true && exit 0 # done\ngrep -q hello out.txt\n"),
            ("tests/a.test.js", "test('a', () => {\n  return;\n  expect(f()).toBe(1);\n});\n"),
            ("tests/a.test.js", "process.exit(0);\ntest('a', () => {\n  expect(f()).toBe(1);\n});\n"),
            ("tests/a.test.js", "test('a', () => {\n  try {\n  expect(f()).toBe(1);\n  } catch (e) {}\n});\n"),
        ] {
            let ch = caught(rel, liar);
            assert!(ch.contains("ends early") || ch.contains("vacuous"), "{rel}: {liar:?} gave {ch:?}");
        }
        for (rel, honest) in [
            (
                "tests/test_a.py",
                "def helper():\n    return 1\n\ndef test_one():\n    assert f() == 1\n\ndef test_two():\n    if f():\n        return\n    assert helper() == 1\n",
            ),
            ("tests/lib.sh", "[ -f out.txt ] || exit 1\ngrep -q hello out.txt\ngrep -q world out.txt\n"),
            (
                "tests/a.test.js",
                "function g() {\n  return 1;\n}\ntest('a', () => {\n  expect(f()).toBe(1);\n});\ntest('b', () => {\n  try {\n    g();\n  } finally {}\n});\n",
            ),
        ] {
            assert_eq!(caught(rel, honest), "", "{rel}: an honest addition is allowed");
        }
    }

    #[test]
    fn a_command_digest_follows_its_scripts() {
        let dir = tempfile::tempdir().expect("tempdir");
        let root = dir.path();
        write(root, "check.sh", "exit 1\n");
        write(root, "greet.sh", "echo hi\n");
        let before = commands_digest(root, &["sh check.sh && sh greet.sh"], Named::CheckLike);
        assert_eq!(before, commands_digest(root, &["sh ./check.sh && sh greet.sh"], Named::CheckLike));
        // The code under test may change; the check may not.
        write(root, "greet.sh", "echo hello\n");
        assert_eq!(before, commands_digest(root, &["sh check.sh && sh greet.sh"], Named::CheckLike));
        write(root, "check.sh", "exit 0\n");
        assert_ne!(before, commands_digest(root, &["sh check.sh && sh greet.sh"], Named::CheckLike));
        for (p, want) in [
            ("check.sh", true),
            ("scripts/verify-all", true),
            ("tests/run", true),
            ("greet.sh", false),
            ("src/app.py", false),
        ] {
            assert_eq!(is_check_like(p), want, "{p}");
        }
    }

    #[test]
    fn the_names_node_test_runs_on_its_own_are_test_names() {
        for name in ["add-test.js", "add_test.mjs", "test-add.cjs", "test.js", "add-test.ts", "test.mts", "a.test.js"] {
            assert!(is_test_name(name), "{name}");
        }
        for name in ["add.js", "contest.js", "latest.js", "testing.js", "test-add.json", "attest-x.js"] {
            assert!(!is_test_name(name), "{name}");
        }
    }

    #[test]
    fn symlinks_are_recorded_not_followed() {
        let dir = tempfile::tempdir().expect("tempdir");
        let outside = tempfile::tempdir().expect("tempdir");
        fs::write(outside.path().join("secret"), "s").expect("write");
        let root = dir.path();
        std::os::unix::fs::symlink(outside.path().join("secret"), root.join("check.sh")).expect("symlink");
        let s = CheckSurface::freeze(root, &["sh check.sh"], Named::All);
        fs::write(outside.path().join("secret"), "changed outside").expect("write");
        assert!(s.changes(root, TestEdits::None).is_empty(), "the link itself did not change");
        fs::remove_file(root.join("check.sh")).expect("rm");
        fs::write(root.join("check.sh"), "exit 0").expect("write");
        assert_eq!(s.changes(root, TestEdits::None).len(), 1);
    }
}
