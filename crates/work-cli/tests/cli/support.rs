//! Scenario helpers: a scratch git repository, scripted agents, and a `work` command bound to
//! them, in a few lines.
//!
//! ```ignore
//! let s = Scenario::new();
//! s.write("src/a.rs", "fn main() {}\n");
//! s.commit("init");
//! let agent = s.agent("finder.py", r#"print(json.dumps({"angle": req["context"]["angle"], "items": []}))"#);
//! s.work().args(["exhaust", "x", "--agent", &agent]).assert().success();
//! ```

#![allow(dead_code, reason = "each test module uses a different subset of the helpers")]

use assert_cmd::Command;
use serde_json::Value;
use std::path::{Path, PathBuf};

/// A scratch git repository.
pub struct Scenario {
    dir: tempfile::TempDir,
}

impl Scenario {
    /// A new repository with one empty commit.
    pub fn new() -> Self {
        let dir = tempfile::tempdir().expect("create a temp dir");
        let s = Scenario { dir };
        s.git(&["init", "-q", "-b", "main"]);
        s.git(&["config", "user.email", "test@example.com"]);
        s.git(&["config", "user.name", "test"]);
        s.git(&["commit", "-q", "--allow-empty", "-m", "root"]);
        s
    }

    /// The repository root.
    pub fn root(&self) -> &Path {
        self.dir.path()
    }

    /// A path inside the repository.
    pub fn path(&self, rel: &str) -> PathBuf {
        self.dir.path().join(rel)
    }

    /// Writes a file (creating parents).
    pub fn write(&self, rel: &str, content: &str) -> &Self {
        let p = self.path(rel);
        if let Some(parent) = p.parent() {
            std::fs::create_dir_all(parent).expect("mkdir");
        }
        std::fs::write(p, content).expect("write file");
        self
    }

    /// Reads a file.
    pub fn read(&self, rel: &str) -> String {
        std::fs::read_to_string(self.path(rel)).unwrap_or_else(|e| panic!("read {rel}: {e}"))
    }

    /// Reads a JSON file.
    pub fn read_json(&self, rel: &str) -> Value {
        serde_json::from_str(&self.read(rel)).unwrap_or_else(|e| panic!("parse {rel}: {e}"))
    }

    /// Runs git in the repository and returns stdout.
    pub fn git(&self, args: &[&str]) -> String {
        #[expect(clippy::disallowed_methods, reason = "tests set up fixtures with git directly")]
        let out = std::process::Command::new("git").args(args).current_dir(self.root()).output().expect("run git");
        assert!(out.status.success(), "git {args:?}: {}", String::from_utf8_lossy(&out.stderr));
        String::from_utf8_lossy(&out.stdout).into_owned()
    }

    /// Stages everything and commits.
    pub fn commit(&self, msg: &str) {
        self.git(&["add", "-A"]);
        self.git(&["commit", "-q", "--allow-empty", "-m", msg]);
    }

    /// Writes an executable Python agent script under `.agents/` (outside what finders see
    /// only by convention) and returns its `command:` spec. The body runs with `req` (the
    /// parsed dispatch request), `ctx` (its context), `json`, `os`, `sys` and `time` in scope,
    /// plus `state_path(name)` for a per-scenario counter directory.
    pub fn agent(&self, name: &str, body: &str) -> String {
        let rel = format!(".agents/{name}");
        let script = format!(
            "#!/usr/bin/env python3\nimport json, os, sys, time\nreq = json.load(sys.stdin)\nctx = req.get('context') or {{}}\nSTATE = {state:?}\ndef state_path(n):\n    os.makedirs(STATE, exist_ok=True)\n    return os.path.join(STATE, n)\ndef bump(n):\n    p = state_path(n)\n    c = int(open(p).read()) if os.path.exists(p) else 0\n    open(p, 'w').write(str(c + 1))\n    return c + 1\n{body}\n",
            state = self.dir.path().join(".agent-state").display().to_string(),
        );
        self.write(&rel, &script);
        let p = self.path(&rel);
        let mut perm = std::fs::metadata(&p).expect("stat").permissions();
        std::os::unix::fs::PermissionsExt::set_mode(&mut perm, 0o755);
        std::fs::set_permissions(&p, perm).expect("chmod");
        // Keep the fixtures out of git status so they never count as work.
        let exclude = self.path(".git/info/exclude");
        let mut ex = std::fs::read_to_string(&exclude).unwrap_or_default();
        if !ex.contains(".agents/") {
            ex.push_str("\n.agents/\n.agent-state/\n.work/\n");
            std::fs::write(&exclude, ex).expect("write exclude");
        }
        format!("command:python3 {}", p.display())
    }

    /// A `work` command run in the repository with a fixed fake clock, no inherited agent
    /// keys, and loopback (where the scripted model servers listen) never proxied.
    pub fn work(&self) -> Command {
        Command::from_std(self.work_std())
    }

    /// [`Scenario::work`] as a plain `std` command, for a test that needs the child (to signal
    /// it, or read its output as it comes).
    pub fn work_std(&self) -> std::process::Command {
        #[expect(clippy::disallowed_methods, reason = "the suite starts the binary under test")]
        let mut c = std::process::Command::new(assert_cmd::cargo::cargo_bin("work"));
        // The scripted agents keep their counters here, in every role: the user's own grant.
        let state = self.path(".agent-state");
        std::fs::create_dir_all(&state).expect("mkdir .agent-state");
        c.current_dir(self.root())
            // Confined where the sandbox works (or as `WORK_TEST_ISOLATION` says); the tests of
            // the fallback's detection pin `none` (`fallback_only`).
            .env("WORK_ISOLATION", suite_isolation())
            .env("WORK_SANDBOX_WRITABLE", &state)
            .env("WORK_FAKE_CLOCK", "2026-01-01T00:00:00Z")
            .env("NO_COLOR", "1")
            .env_remove("OPENAI_API_KEY")
            .env_remove("ANTHROPIC_API_KEY");
        // Loopback added to the proxy exceptions: a proxy the real CLIs may need still
        // carries them, never the scripted servers' requests.
        let mut no_proxy = std::env::var("no_proxy").or_else(|_| std::env::var("NO_PROXY")).unwrap_or_default();
        no_proxy.push_str(",127.0.0.1,localhost,::1");
        c.env("no_proxy", &no_proxy).env("NO_PROXY", &no_proxy);
        c
    }

    /// Runs `work args…` and returns (exit code, stdout, stderr).
    pub fn run(&self, args: &[&str]) -> (i32, String, String) {
        let out = self.work().args(args).output().expect("run work");
        (
            out.status.code().unwrap_or(-1),
            String::from_utf8_lossy(&out.stdout).into_owned(),
            String::from_utf8_lossy(&out.stderr).into_owned(),
        )
    }

    /// Runs `work args…` as [`Scenario::run`] does, and SIGKILLs it once an agent asks by
    /// creating `.agent-state/kill-work` ([`KILL_WORK`]): a crash at the moment the agent picks,
    /// which the test deals, since a confined agent can neither see nor signal `work`.
    pub fn run_killable(&self, args: &[&str]) -> (i32, String, String) {
        let out = self.output_killable(args);
        (
            out.status.code().unwrap_or(-1),
            String::from_utf8_lossy(&out.stdout).into_owned(),
            String::from_utf8_lossy(&out.stderr).into_owned(),
        )
    }

    /// [`Scenario::run_killable`]'s whole output.
    pub fn output_killable<S: AsRef<std::ffi::OsStr>>(&self, args: &[S]) -> std::process::Output {
        use std::io::Read;
        use std::process::Stdio;
        let marker = self.path(".agent-state/kill-work");
        let mut child =
            self.work_std().args(args).stdout(Stdio::piped()).stderr(Stdio::piped()).spawn().expect("start work");
        let read = |pipe: Option<Box<dyn Read + Send>>| {
            std::thread::spawn(move || {
                let mut bytes = Vec::new();
                if let Some(mut p) = pipe {
                    let _ = p.read_to_end(&mut bytes);
                }
                bytes
            })
        };
        let out = read(child.stdout.take().map(|p| Box::new(p) as Box<dyn Read + Send>));
        let err = read(child.stderr.take().map(|p| Box::new(p) as Box<dyn Read + Send>));
        let status = loop {
            if let Some(status) = child.try_wait().expect("wait for work") {
                break status;
            }
            if marker.exists() {
                let _ = child.kill();
                let _ = std::fs::remove_file(&marker);
            }
            std::thread::sleep(std::time::Duration::from_millis(20));
        };
        std::process::Output { status, stdout: out.join().unwrap_or_default(), stderr: err.join().unwrap_or_default() }
    }

    /// Runs `work args…`, asserts the exit code, and parses stdout as JSON.
    pub fn run_json(&self, args: &[&str], expect_code: i32) -> Value {
        let (code, out, err) = self.run(args);
        assert_eq!(code, expect_code, "exit code of work {args:?}\nstdout:\n{out}\nstderr:\n{err}");
        serde_json::from_str(&out)
            .unwrap_or_else(|e| panic!("stdout of work {args:?} is not JSON ({e}):\n{out}\nstderr:\n{err}"))
    }
}

/// Python for a scripted agent (`Scenario::agent`): asks the test to SIGKILL `work` now
/// ([`Scenario::run_killable`]) and waits to be ended with it.
pub const KILL_WORK: &str = "open(state_path('kill-work'), 'w').close()\ntime.sleep(600)\nsys.exit(1)";

/// Asserts that a failed command printed exactly one line on stderr (the one-line error rule);
/// an argument error may follow it with clap's own `tip:`, `[possible values: …]` and `Usage:` lines.
pub fn assert_one_line_error(stderr: &str) {
    let lines: Vec<&str> = stderr
        .lines()
        .filter(|l| !l.trim().is_empty())
        .filter(|l| {
            !(l.starts_with("  ")
                && (l.trim().starts_with("tip:")
                    || l.trim().starts_with("Usage:")
                    || l.trim().starts_with("[possible values:")))
        })
        .collect();
    assert_eq!(lines.len(), 1, "expected a one-line error, got:\n{stderr}");
    assert!(lines[0].starts_with("error: "), "expected `error: …`, got {:?}", lines[0]);
    assert!(!stderr.contains("panicked"), "panic: {stderr}");
}

thread_local! {
    /// Set while a [`fallback_only`] guard of the test running on this thread lives.
    static FALLBACK_ONLY: std::cell::Cell<bool> = const { std::cell::Cell::new(false) };
}

/// Marks what follows in the running test, until the guard it returns is dropped (the whole
/// test: `let _unconfined = fallback_only(WHY);` at its top), as a test of the fallback: the
/// detection that holds where there is no sandbox. Its `work` commands run their agents
/// unconfined (`--isolation none`) whatever mode the suite runs in. `why` says in one line what
/// the kernel refuses with the sandbox, so that only the fallback needs this detection. An
/// honest twin in the same test comes after the guard's scope and runs in the suite's mode.
#[must_use = "the test runs unconfined only while the guard lives"]
pub fn fallback_only(why: &str) -> Unconfined {
    assert!(!why.trim().is_empty() && !why.contains('\n'), "fallback_only wants a one-line reason");
    eprintln!("fallback test, agents unconfined: {why}");
    FALLBACK_ONLY.with(|f| f.set(true));
    Unconfined(())
}

/// Why a test is the fallback's, for the lies the sandbox refuses most often.
pub mod refused {
    /// A write role's write to what judges it.
    pub const FROZEN: &str = "a write role rewriting a frozen check, a script it runs or sources, or a runner's configuration; with the sandbox they are bound read-only (EROFS)";
    /// A write to git's own files.
    pub const GIT: &str = "a write to .git (an index flag, a stash, a checkout, git replace, gc); with the sandbox .git is a private copy discarded after the dispatch";
    /// A write outside the repository.
    pub const OUTSIDE: &str = "a write outside the repository (the user site, a parent directory, cargo's home); with the sandbox all of it is read-only";
    /// An agent reaching the state directory.
    pub const STATE: &str =
        "an agent reading or rewriting the state directory (.work/); with the sandbox it is hidden from every agent";
    /// A read-only role's write.
    pub const READ_ONLY: &str = "a read-only role writing the tree (or the engine's copy under .git); with the sandbox every file is read-only to it";
}

/// While it lives, the running test's `work` commands run their agents unconfined ([`fallback_only`]).
pub struct Unconfined(());

impl Drop for Unconfined {
    fn drop(&mut self) {
        FALLBACK_ONLY.with(|f| f.set(false));
    }
}

/// The sandbox mode the suite's `work` commands run in: `none` in a [`fallback_only`] test,
/// else `WORK_TEST_ISOLATION` (`none`, `auto`, `required`), else `required` where the sandbox
/// works on this machine (`bwrap` on `PATH` that can set up the namespaces) and `none` where it
/// does not.
pub fn suite_isolation() -> String {
    if FALLBACK_ONLY.with(std::cell::Cell::get) {
        return "none".to_string();
    }
    match std::env::var("WORK_TEST_ISOLATION") {
        Ok(mode) if ["none", "auto", "required"].contains(&mode.as_str()) => mode,
        Ok(other) => panic!("WORK_TEST_ISOLATION={other}: expected none, auto or required"),
        Err(_) if sandbox_works() => "required".to_string(),
        Err(_) => "none".to_string(),
    }
}

/// Whether the suite's `work` commands run their agents confined ([`suite_isolation`]).
pub fn suite_confines() -> bool {
    match suite_isolation().as_str() {
        "none" => false,
        "required" => true,
        _ => sandbox_works(),
    }
}

/// Whether the kernel sandbox works on this machine, probed once per test process.
fn sandbox_works() -> bool {
    static WORKS: std::sync::OnceLock<bool> = std::sync::OnceLock::new();
    *WORKS.get_or_init(|| work_runtime::sandbox::probe().is_kernel())
}
