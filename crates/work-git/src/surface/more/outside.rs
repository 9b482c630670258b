//! Files outside the repository that a check's runner reads: an agent that cannot change a
//! frozen file can still write one of these.
//!
//! - **the repository's parent directories**: pytest looks upwards for its rootdir and ini
//!   file (`pytest.ini`, `pyproject.toml`, `tox.ini`, `setup.cfg`, `pytest.toml`) and loads the
//!   `conftest.py` there; npm, cargo and go look upwards too (`package.json`, `.npmrc`,
//!   `.cargo/config.toml`, `Cargo.toml`, `go.work`);
//! - **Python's user site** (`$PYTHONUSERBASE` or `~/.local`, `lib/python3.*/site-packages`):
//!   its `*.pth` files, `usercustomize.py` and `sitecustomize.py` run at every interpreter
//!   start; the entry points of each distribution installed there (`*.dist-info/` and
//!   `*.egg-info/`: pytest loads a `pytest11` entry point as a plugin), and which top-level
//!   modules and packages it holds (a standard module may probe for one: `copy` tries
//!   `org.python.core`) — so a distribution installed there during the run is named too;
//! - **the user's package-manager configuration**: `~/.npmrc`, `~/.yarnrc`, `~/.yarnrc.yml`,
//!   `~/.bunfig.toml`, and cargo's own (`$CARGO_HOME/config.toml` and `config`, `~/.cargo` when
//!   `CARGO_HOME` is unset: a `runner = "true"` there makes every `cargo test` pass).
//!
//! The freeze hashes what is there (a handful of stats and bounded reads, never a tree walk);
//! a later change, a file created where there was none, or one removed is named
//! `check-tampered`, by its absolute path.
//!
//! Fallback only: with the kernel sandbox (`work_runtime::sandbox`) everything outside the
//! repository is read-only to every agent (`$HOME`, the user site and a virtualenv's
//! site-packages included), so an agent's write here fails with `EROFS` as it is tried. This
//! hashing is what holds where there is no sandbox (`--isolation none`, no user namespaces),
//! and only there: a confined run records nothing here, so a file that something other than
//! the agent changes during the run (a `.pth` another program installs in `~/.local`) does not
//! block it. Without the sandbox such a change still blocks the run (the price of detection).

use super::super::{Role, SurfaceChange, read};
use std::collections::BTreeMap;
use std::fs;
use std::path::{Path, PathBuf};

/// Files a runner reads in a parent directory of the repository.
const PARENT_FILES: &[&str] = &[
    "pytest.ini",
    ".pytest.ini",
    "pytest.toml",
    ".pytest.toml",
    "pyproject.toml",
    "tox.ini",
    "setup.cfg",
    "conftest.py",
    "package.json",
    ".npmrc",
    ".yarnrc",
    ".yarnrc.yml",
    "bunfig.toml",
    ".cargo/config.toml",
    ".cargo/config",
    "Cargo.toml",
    "go.work",
];

/// The user's package-manager configuration, under the home directory.
const HOME_FILES: &[&str] = &[".npmrc", ".yarnrc", ".yarnrc.yml", ".bunfig.toml"];

/// Cargo's configuration in its home directory (see [`cargo_home`]).
const CARGO_HOME_FILES: &[&str] = &["config.toml", "config"];

/// Cargo's home: `$CARGO_HOME`, else `~/.cargo`.
fn cargo_home() -> Option<PathBuf> {
    std::env::var_os("CARGO_HOME")
        .filter(|h| !h.is_empty())
        .map(PathBuf::from)
        .or_else(|| std::env::var_os("HOME").map(|h| Path::new(&h).join(".cargo")))
}

/// The most parent directories looked at.
const MAX_DEPTH: usize = 32;

/// The key [`record`] always writes, so that a freeze that looked is told from one that did not.
const LOOKED: &str = "(looked)";

/// True when a user-site file runs at interpreter start.
fn is_startup(name: &str) -> bool {
    name.ends_with(".pth") || name == "usercustomize.py" || name == "sitecustomize.py"
}

/// What a user-site entry is recorded as, when it is one Python can load: a startup file by
/// its content, a distribution's metadata by its entry points, a module or package by its
/// presence.
enum SiteEntry {
    Content(PathBuf),
    Present(&'static str),
}

fn site_entry(path: &Path, name: &str) -> Option<SiteEntry> {
    if is_startup(name) {
        return Some(SiteEntry::Content(path.to_path_buf()));
    }
    if name.ends_with(".dist-info") || name.ends_with(".egg-info") {
        let ep = path.join("entry_points.txt");
        return Some(if ep.exists() { SiteEntry::Content(ep) } else { SiteEntry::Present("no entry points") });
    }
    let stem = name.strip_suffix(".py").or_else(|| name.split('.').next().filter(|_| name.ends_with(".so")));
    let module = stem.unwrap_or(name);
    let importable = !module.is_empty()
        && module != "__pycache__"
        && module.chars().next().is_some_and(|c| c.is_alphabetic() || c == '_')
        && module.chars().all(|c| c.is_alphanumeric() || c == '_');
    (importable && (stem.is_some() || path.is_dir())).then_some(SiteEntry::Present("a module"))
}

/// The user-site directories: the versions Python 3 has used, and any other `python3.*` there.
fn user_sites() -> Vec<PathBuf> {
    let base = std::env::var_os("PYTHONUSERBASE")
        .map(PathBuf::from)
        .or_else(|| std::env::var_os("HOME").map(|h| Path::new(&h).join(".local")));
    let Some(base) = base else { return Vec::new() };
    let lib = base.join("lib");
    let mut versions: Vec<String> = (6..=16).map(|m| format!("python3.{m}")).collect();
    if let Ok(rd) = fs::read_dir(&lib) {
        versions.extend(
            rd.flatten()
                .map(|e| e.file_name().to_string_lossy().into_owned())
                .filter(|n| n.starts_with("python3") && !n.contains('/'))
                .take(64),
        );
    }
    versions.sort();
    versions.dedup();
    versions.into_iter().map(|v| lib.join(v).join("site-packages")).collect()
}

/// Every file looked at that is there now: absolute path ⇒ digest.
fn present(root: &Path) -> BTreeMap<String, String> {
    let mut out = BTreeMap::new();
    let put = |out: &mut BTreeMap<String, String>, p: PathBuf| {
        let key = p.display().to_string();
        if let Some((digest, _)) = read(Path::new("/"), &key, false) {
            out.insert(key, digest);
        }
    };
    let root = fs::canonicalize(root).unwrap_or_else(|_| root.to_path_buf());
    for dir in root.ancestors().skip(1).take(MAX_DEPTH) {
        for name in PARENT_FILES {
            put(&mut out, dir.join(name));
        }
    }
    if let Some(home) = std::env::var_os("HOME") {
        for name in HOME_FILES {
            put(&mut out, Path::new(&home).join(name));
        }
    }
    if let Some(cargo_home) = cargo_home() {
        for name in CARGO_HOME_FILES {
            put(&mut out, cargo_home.join(name));
        }
    }
    for site in user_sites() {
        let Ok(rd) = fs::read_dir(&site) else { continue };
        for e in rd.flatten().take(4096) {
            match site_entry(&e.path(), &e.file_name().to_string_lossy()) {
                Some(SiteEntry::Content(p)) => put(&mut out, p),
                Some(SiteEntry::Present(what)) => {
                    out.insert(e.path().display().to_string(), what.to_string());
                }
                None => {}
            }
        }
    }
    out
}

/// What the freeze records: the files [`present`] finds, and the [`LOOKED`] mark.
pub(super) fn record(root: &Path) -> BTreeMap<String, String> {
    let mut out = present(root);
    out.insert(LOOKED.to_string(), String::new());
    out
}

/// The changes since `frozen` (a record of [`record`]; an empty one looked at nothing).
pub(super) fn changes(root: &Path, frozen: &BTreeMap<String, String>) -> Vec<SurfaceChange> {
    if !frozen.contains_key(LOOKED) {
        return Vec::new();
    }
    let now = present(root);
    let change = |path: &str, what: &'static str| SurfaceChange {
        path: path.to_string(),
        role: Role::Pinned,
        what: format!("{what} outside the repository (a test runner reads it: it changes what the frozen checks run)")
            .into(),
    };
    let mut out = Vec::new();
    for (path, digest) in &now {
        match frozen.get(path) {
            None => out.push(change(path, "added")),
            Some(d) if d != digest => out.push(change(path, "changed")),
            Some(_) => {}
        }
    }
    for path in frozen.keys().filter(|p| *p != LOOKED && !now.contains_key(*p)) {
        out.push(change(path, "deleted"));
    }
    out
}

#[cfg(test)]
mod tests {
    #[test]
    fn runner_files_in_a_parent_directory_are_named_when_they_change_or_appear() {
        let d = tempfile::tempdir().expect("tempdir");
        let root = d.path().join("repo");
        std::fs::create_dir_all(&root).expect("mkdir");
        std::fs::write(d.path().join("setup.cfg"), "[metadata]\n").expect("write");
        let frozen = super::record(&root);
        assert!(super::changes(&root, &frozen).is_empty());
        std::fs::write(d.path().join("conftest.py"), "import lib\n").expect("write");
        std::fs::write(d.path().join("setup.cfg"), "[tool:pytest]\n").expect("write");
        let named: Vec<String> = super::changes(&root, &frozen).iter().map(ToString::to_string).collect();
        let parent = std::fs::canonicalize(d.path()).expect("canonical").display().to_string();
        assert_eq!(
            named,
            [
                format!(
                    "check file `{parent}/conftest.py` added outside the repository (a test runner reads it: it changes what the frozen checks run)"
                ),
                format!(
                    "check file `{parent}/setup.cfg` changed outside the repository (a test runner reads it: it changes what the frozen checks run)"
                ),
            ]
        );
        assert!(super::changes(&root, &Default::default()).is_empty(), "a freeze that looked at nothing");
    }
}
