//! Files that change what a runner does the moment they appear, while no frozen file changes:
//!
//! - a test runner's configuration in a directory on the way to a frozen file (pytest looks
//!   for its ini file from the tests upwards): `pytest.ini`, `.pytest.ini`, `pytest.toml`,
//!   `.pytest.toml`, and a `pyproject.toml` / `setup.cfg` / `tox.ini` with a pytest section
//!   (`addopts = "-p plugin"` loads a new module as a plugin);
//! - a makefile that `make` reads before the frozen one (`GNUmakefile`, then `makefile`, then
//!   `Makefile`);
//! - a package manager's configuration beside a frozen `package.json` (`.npmrc`
//!   `script-shell=/bin/true` makes every `npm test` pass);
//! - a module that shadows the test runner (`pytest`, `_pytest`, `pluggy` …) or the standard
//!   library on a check's import path — the root (`python3 -m pytest` puts the working
//!   directory first) and every directory holding a frozen Python file (a script's own
//!   directory, pytest's rootdir-less test directories).
//!
//! Such files present at the freeze are frozen with it — except a module named like the
//! standard library, which may be the very code under test (`calendar.py`): its presence is
//! recorded, not its content — and one created later is named `check-tampered` "added".

use super::super::{CheckSurface, READ_CAP, Role, SurfaceChange};
use std::collections::BTreeSet;
use std::fs;
use std::path::Path;

/// Runner configuration files named for what they are, wherever on the way to a test.
const RUNNER_INI: &[&str] = &["pytest.ini", ".pytest.ini", "pytest.toml", ".pytest.toml"];

/// Project files that configure pytest only when they hold its section.
const WITH_SECTION: &[(&str, &str)] =
    &[("pyproject.toml", "[tool.pytest"), ("setup.cfg", "[tool:pytest]"), ("tox.ini", "[pytest]")];

/// The makefiles in the order GNU make looks for them.
const MAKEFILES: &[&str] = &["GNUmakefile", "makefile", "Makefile"];

/// Package managers' project configuration, read beside `package.json`.
const PACKAGE_CONFIG: &[&str] = &[".npmrc", ".yarnrc", ".yarnrc.yml", "bunfig.toml", ".pnpmfile.cjs"];

/// The test runners' own modules (a module of the same name on the import path runs instead).
const RUNNER_MODULES: &[&str] = &["pytest", "_pytest", "py", "pluggy", "iniconfig", "nose", "nose2", "unittest"];

/// The standard library's top-level modules (`sys.stdlib_module_names`, Python 3.11 to 3.13),
/// less the private `_…` ones and `test`.
const STDLIB: &str = "abc aifc antigravity argparse array ast asynchat asyncio asyncore atexit audioop base64 bdb \
binascii bisect builtins bz2 cProfile calendar cgi cgitb chunk cmath cmd code codecs codeop collections colorsys \
compileall concurrent configparser contextlib contextvars copy copyreg crypt csv ctypes curses dataclasses datetime dbm \
decimal difflib dis distutils doctest email encodings ensurepip enum errno faulthandler fcntl filecmp fileinput fnmatch \
fractions ftplib functools gc genericpath getopt getpass gettext glob graphlib grp gzip hashlib heapq hmac html http \
idlelib imaplib imghdr imp importlib inspect io ipaddress itertools json keyword lib2to3 linecache locale logging lzma \
mailbox mailcap marshal math mimetypes mmap modulefinder msilib msvcrt multiprocessing netrc nis nntplib nt ntpath \
nturl2path numbers opcode operator optparse os ossaudiodev pathlib pdb pickle pickletools pipes pkgutil platform \
plistlib poplib posix posixpath pprint profile pstats pty pwd py_compile pyclbr pydoc pydoc_data pyexpat queue quopri \
random re readline reprlib resource rlcompleter runpy sched secrets select selectors shelve shlex shutil signal site \
smtpd smtplib sndhdr socket socketserver spwd sqlite3 sre_compile sre_constants sre_parse ssl stat statistics string \
stringprep struct subprocess sunau symtable sys sysconfig syslog tabnanny tarfile telnetlib tempfile termios textwrap \
this threading time timeit tkinter token tokenize tomllib trace traceback tracemalloc tty turtle turtledemo types typing \
unicodedata unittest urllib uu uuid venv warnings wave weakref webbrowser winreg winsound wsgiref xdrlib xml xmlrpc \
zipapp zipfile zipimport zlib zoneinfo";

const STDLIB_WHOSE: &str = "the standard library's";

/// Why a module named `module` on the import path matters: `None` when it shadows nothing.
fn shadows(module: &str) -> Option<&'static str> {
    if RUNNER_MODULES.contains(&module) {
        Some("the test runner's")
    } else if STDLIB.split_ascii_whitespace().any(|m| m == module) {
        Some(STDLIB_WHOSE)
    } else {
        None
    }
}

/// The module an entry of a directory on the import path provides, when it is one: `X.py`,
/// `X.pyc`, an extension `X.so` / `X.cpython-311-….so` / `X.pyd`, or a package `X/` (reported
/// as `X/__init__.py`).
fn module_of(dir: &Path, name: &str) -> Option<(String, String)> {
    if let Some(stem) = name.strip_suffix(".py").or_else(|| name.strip_suffix(".pyc")) {
        return Some((stem.to_string(), name.to_string()));
    }
    if let Some(stem) = name.strip_suffix(".so").or_else(|| name.strip_suffix(".pyd")) {
        return Some((stem.split('.').next().unwrap_or(stem).to_string(), name.to_string()));
    }
    let init = dir.join(name).join("__init__.py");
    fs::symlink_metadata(&init).is_ok().then(|| (name.to_string(), format!("{name}/__init__.py")))
}

/// True when the file at `path` holds `section` (its first [`READ_CAP`] bytes).
fn holds(path: &Path, section: &str) -> bool {
    work_runtime::fsx::read_text_capped(path, READ_CAP).is_ok_and(|(t, _)| t.contains(section))
}

impl CheckSurface {
    /// The directories on the way to a frozen file (the root included), and those holding a
    /// frozen Python file (the import path's).
    pub(in crate::surface) fn directories(&self) -> (BTreeSet<String>, BTreeSet<String>) {
        let mut on_the_way = BTreeSet::from([String::new()]);
        let mut import_path = BTreeSet::from([String::new()]);
        for (rel, f) in &self.files {
            if !matches!(f.role, Role::Pinned | Role::Test) {
                continue;
            }
            let mut dir = rel.as_str();
            if let Some((d, _)) = dir.rsplit_once('/')
                && rel.ends_with(".py")
            {
                import_path.insert(d.to_string());
            }
            while let Some((d, _)) = dir.rsplit_once('/') {
                if !on_the_way.insert(d.to_string()) {
                    break;
                }
                dir = d;
            }
        }
        (on_the_way, import_path)
    }

    /// Every file (relative) that changes what a runner does by being there, with why.
    fn runner_files(&self, root: &Path) -> (Vec<(String, String)>, Vec<String>) {
        let (on_the_way, import_path) = self.directories();
        let (mut out, mut stdlib) = (Vec::new(), Vec::new());
        for dir in &on_the_way {
            let Ok(rd) = fs::read_dir(root.join(dir)) else { continue };
            let join = |n: &str| if dir.is_empty() { n.to_string() } else { format!("{dir}/{n}") };
            let frozen = |n: &str| self.files.contains_key(&join(n));
            for e in rd.flatten() {
                let name = e.file_name().to_string_lossy().into_owned();
                if RUNNER_INI.contains(&name.as_str()) {
                    out.push((join(&name), "a test runner reads it on its way to the tests".to_string()));
                } else if let Some((_, section)) = WITH_SECTION.iter().find(|(n, _)| *n == name)
                    && holds(&root.join(join(&name)), section)
                {
                    out.push((join(&name), format!("its `{section}` section configures the test runner")));
                } else if let Some(i) = MAKEFILES.iter().position(|m| *m == name)
                    && let Some(later) = MAKEFILES[i + 1..].iter().find(|m| frozen(m))
                {
                    out.push((join(&name), format!("`make` reads it before the frozen `{}`", join(later))));
                } else if PACKAGE_CONFIG.contains(&name.as_str()) && frozen("package.json") {
                    out.push((
                        join(&name),
                        format!("the package manager reads it beside the frozen `{}`", join("package.json")),
                    ));
                } else if import_path.contains(dir)
                    && let Some((module, rel)) = module_of(&root.join(dir), &name)
                    && !module.starts_with("__")
                    && let Some(whose) = shadows(&module)
                {
                    out.push((join(&rel), format!("it shadows {whose} `{module}` on a check's import path")));
                    if whose == STDLIB_WHOSE {
                        stdlib.push(join(&rel));
                    }
                }
            }
        }
        out.sort();
        (out, stdlib)
    }

    /// Freezes the files [`CheckSurface::runner_files`] finds now (a module named like the
    /// standard library: only that it is there).
    pub(super) fn pin_shadows(&mut self, root: &Path) {
        let (found, stdlib) = self.runner_files(root);
        for (rel, _) in found {
            if !stdlib.contains(&rel) {
                self.add(root, &rel, Role::Pinned);
            }
        }
        self.more.stdlib_named = stdlib;
    }

    /// The files [`CheckSurface::runner_files`] finds now that the freeze did not hold.
    pub(super) fn added_shadows(&self, root: &Path) -> Vec<SurfaceChange> {
        self.runner_files(root)
            .0
            .into_iter()
            .filter(|(rel, _)| !self.files.contains_key(rel) && !self.more.stdlib_named.contains(rel))
            .map(|(path, why)| SurfaceChange {
                path,
                role: Role::Pinned,
                what: format!("added ({why}: it changes what the frozen checks run)").into(),
            })
            .collect()
    }
}

#[cfg(test)]
mod tests {
    use super::super::super::{CheckSurface, Named, TestEdits, describe};

    use super::super::super::tests::write;

    #[test]
    fn runner_configuration_makefiles_package_config_and_shadowing_modules_added_later_are_named() {
        let d = tempfile::tempdir().expect("tempdir");
        let root = d.path();
        write(root, "lib.py", "x = 0\n");
        write(root, "calendar.py", "def f():\n    return 0\n");
        write(root, "pytest.py", "# a stand-in present at the freeze\n");
        write(root, "tests/test_lib.py", "from lib import x\n");
        write(root, "Makefile", "test:\n\tpython3 -m pytest\n");
        write(root, "package.json", "{}\n");
        write(root, "pyproject.toml", "[project]\nname = 'x'\n");
        let s = CheckSurface::freeze(root, &["make test"], Named::CheckLike);
        assert!(s.pinned().contains(&"pytest.py"), "a shadow present at the freeze is frozen: {:?}", s.pinned());
        assert!(!s.pinned().contains(&"calendar.py"), "code named like the stdlib is not: {:?}", s.pinned());
        write(root, "calendar.py", "def f():\n    return 1\n");
        // Honest additions: new code, a helper with a name of its own, a sub-project's
        // pyproject without a pytest section, a module named like the stdlib off the path.
        write(root, "addfix_helpers.py", "y = 1\n");
        write(root, "tests/helpers.py", "y = 1\n");
        write(root, "sub/pyproject.toml", "[tool.pytest.ini_options]\n");
        write(root, "src/pkg/json.py", "y = 1\n");
        assert!(s.changes(root, TestEdits::Add).is_empty(), "{:?}", describe(&s.changes(root, TestEdits::Add)));
        for rel in [
            "GNUmakefile",
            ".npmrc",
            "pytest.toml",
            "tests/setup.cfg",
            "unittest.py",
            "_pytest/__init__.py",
            "tests/json.py",
            "tests/pytest.ini",
        ] {
            write(root, rel, "[tool:pytest]\naddopts = -p addfix\n");
        }
        let ch = s.changes(root, TestEdits::Add);
        let named: Vec<&str> = ch.iter().map(|c| c.path.as_str()).collect();
        assert_eq!(
            named,
            [
                ".npmrc",
                "GNUmakefile",
                "_pytest/__init__.py",
                "pytest.toml",
                "tests/json.py",
                "tests/pytest.ini",
                "tests/setup.cfg",
                "unittest.py"
            ]
        );
        let text = describe(&ch);
        assert!(text.contains("`make` reads it before the frozen `Makefile`"), "{text}");
        assert!(text.contains("shadows the standard library's `json`"), "{text}");
        assert!(text.contains("shadows the test runner's `_pytest`"), "{text}");
        // A frozen manifest whose runner section changes is a changed check file.
        write(root, "pyproject.toml", "[project]\nname = 'x'\n[tool.pytest.ini_options]\naddopts = '-p addfix'\n");
        assert!(describe(&s.changes(root, TestEdits::Add)).contains("check file `pyproject.toml` changed"));
    }
}
