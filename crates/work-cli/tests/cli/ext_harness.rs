//! Shared harness of the real-CLI tests (`ext_claude`, `ext_codex`): the installed Claude Code
//! or Codex, pointed at a scripted model server on loopback, run by the real `work` binary as
//! `--agent claude` / `--agent codex` (the CLI is found on PATH).
//!
//! The CLI's location comes from `WORK_TEST_CLAUDE` / `WORK_TEST_CODEX`; without it every
//! test here fails loudly, naming the installer (`scripts/test.sh`, which runs
//! `scripts/test-tools/agent-clis.sh`). Each run gets a private `HOME` (and `CODEX_HOME`) so
//! that nothing of the machine's own configuration or login is used, and the network is never
//! touched: every URL points at 127.0.0.1.

#![allow(dead_code, reason = "each CLI's tests use a different subset")]

use crate::support::Scenario;
use assert_cmd::Command;
use serde_json::Value;
use std::path::{Path, PathBuf};
use work_model_server::{ModelServer, Script};

/// The fake key the server expects; it must never appear in what `work` writes.
pub const KEY: &str = "sk-scripted-test-key-0123456789";

/// Which CLI.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Cli {
    /// Claude Code.
    Claude,
    /// Codex.
    Codex,
}

impl Cli {
    fn var(self) -> &'static str {
        match self {
            Cli::Claude => "WORK_TEST_CLAUDE",
            Cli::Codex => "WORK_TEST_CODEX",
        }
    }

    /// The program name `work` looks up on PATH.
    pub fn name(self) -> &'static str {
        match self {
            Cli::Claude => "claude",
            Cli::Codex => "codex",
        }
    }
}

/// The installed CLI, or a loud failure naming the installer.
pub fn installed(cli: Cli) -> PathBuf {
    let var = cli.var();
    let Some(p) = std::env::var_os(var).filter(|v| !v.is_empty()) else {
        panic!(
            "{var} is not set: this test drives the real {} CLI. Run `scripts/test.sh` (it installs the CLIs \
             with scripts/test-tools/agent-clis.sh and exports {var}), or `eval \"$(scripts/test-tools/agent-clis.sh)\"`.",
            cli.name()
        );
    };
    let p = PathBuf::from(p);
    assert!(p.is_file(), "{var}={} is not a file: rerun scripts/test-tools/agent-clis.sh", p.display());
    p
}

/// One real CLI against one scripted server.
pub struct RealCli {
    /// The CLI.
    pub cli: Cli,
    /// The model server.
    pub server: ModelServer,
    /// Private HOME, CODEX_HOME and the PATH directory holding the CLI (kept out of /tmp: Codex
    /// refuses to set up its helpers under a temporary directory).
    dir: tempfile::TempDir,
}

impl RealCli {
    /// Installs nothing: finds the CLI (or fails loudly) and starts the server.
    pub fn new(cli: Cli, script: Script) -> Self {
        let program = installed(cli);
        let server = ModelServer::start(script).expect("start the model server on loopback");
        let dir = tempfile::Builder::new()
            .prefix("work-ext-")
            .tempdir_in(env!("CARGO_TARGET_TMPDIR"))
            .expect("create the private home");
        let bin = dir.path().join("bin");
        std::fs::create_dir_all(&bin).expect("mkdir bin");
        std::fs::create_dir_all(dir.path().join("home")).expect("mkdir home");
        std::os::unix::fs::symlink(&program, bin.join(cli.name())).expect("link the CLI into PATH");
        let r = RealCli { cli, server, dir };
        if cli == Cli::Codex {
            r.write_codex_config("");
        }
        r
    }

    /// The private HOME.
    pub fn home(&self) -> PathBuf {
        self.dir.path().join("home")
    }

    /// The private CODEX_HOME.
    pub fn codex_home(&self) -> PathBuf {
        self.dir.path().join("codex-home")
    }

    /// Writes CODEX_HOME/config.toml naming the scripted provider, plus `extra` TOML.
    pub fn write_codex_config(&self, extra: &str) {
        self.write_codex_provider("SCRIPTED_MODEL_KEY", extra);
    }

    /// Writes CODEX_HOME/config.toml naming the scripted provider, whose key is read from
    /// `env_key`, plus `extra` TOML.
    pub fn write_codex_provider(&self, env_key: &str, extra: &str) {
        let home = self.codex_home();
        std::fs::create_dir_all(&home).expect("mkdir CODEX_HOME");
        let text = format!(
            "model = \"gpt-5-codex\"\nmodel_provider = \"scripted\"\n{extra}\n[model_providers.scripted]\nname = \"scripted\"\n\
             base_url = \"{}\"\nwire_api = \"responses\"\nenv_key = \"{env_key}\"\n\
             request_max_retries = 0\nstream_max_retries = 0\n",
            self.server.v1_url()
        );
        std::fs::write(home.join("config.toml"), text).expect("write config.toml");
    }

    /// The directory put first on PATH.
    pub fn bin_dir(&self) -> PathBuf {
        self.dir.path().join("bin")
    }

    /// The variables `work` runs with (set, removed): the CLI on PATH, a private HOME, the CLI
    /// pointed at the server with the key.
    fn env(&self) -> (Vec<(&'static str, String)>, Vec<&'static str>) {
        let path = format!("{}:{}", self.bin_dir().display(), std::env::var("PATH").unwrap_or_default());
        // The real CLIs run in the kernel sandbox (scripts/test-tools/sandbox.sh installs it).
        let mut set =
            vec![("PATH", path), ("HOME", self.home().display().to_string()), ("WORK_ISOLATION", "required".into())];
        let mut remove = vec!["XDG_CONFIG_HOME"];
        match self.cli {
            Cli::Claude => {
                set.extend([
                    ("ANTHROPIC_BASE_URL", self.server.base_url()),
                    ("ANTHROPIC_API_KEY", KEY.to_string()),
                    ("CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC", "1".into()),
                    ("DISABLE_AUTOUPDATER", "1".into()),
                    ("DISABLE_TELEMETRY", "1".into()),
                    ("DISABLE_ERROR_REPORTING", "1".into()),
                ]);
            }
            Cli::Codex => {
                set.extend([
                    ("CODEX_HOME", self.codex_home().display().to_string()),
                    ("SCRIPTED_MODEL_KEY", KEY.to_string()),
                ]);
                remove.push("OPENAI_API_KEY");
            }
        }
        (set, remove)
    }

    /// `work` in the scenario, with the CLI on PATH and pointed at the server.
    pub fn work(&self, s: &Scenario) -> Command {
        let mut c = s.work();
        let (set, remove) = self.env();
        c.envs(set);
        for r in remove {
            c.env_remove(r);
        }
        c
    }

    /// The same `work` as a plain process (for a test that signals it mid-run).
    pub fn work_process(&self, s: &Scenario) -> std::process::Command {
        #[expect(clippy::disallowed_methods, reason = "the test needs a `work` it can signal mid-dispatch")]
        let mut c = std::process::Command::new(assert_cmd::cargo::cargo_bin("work"));
        c.current_dir(s.root()).env("WORK_FAKE_CLOCK", "2026-01-01T00:00:00Z").env("NO_COLOR", "1");
        c.env_remove("ANTHROPIC_API_KEY");
        let (set, remove) = self.env();
        c.envs(set);
        for r in remove {
            c.env_remove(r);
        }
        c
    }

    /// Runs `work args…`: (exit code, stdout, stderr).
    pub fn run(&self, s: &Scenario, args: &[&str]) -> (i32, String, String) {
        let out = self.work(s).args(args).output().expect("run work");
        (
            out.status.code().unwrap_or(-1),
            String::from_utf8_lossy(&out.stdout).into_owned(),
            String::from_utf8_lossy(&out.stderr).into_owned(),
        )
    }

    /// Runs `work args… --json`, asserts the exit code, parses stdout.
    pub fn run_json(&self, s: &Scenario, args: &[&str], code: i32) -> Value {
        let mut all: Vec<&str> = args.to_vec();
        all.push("--json");
        let (got, out, err) = self.run(s, &all);
        assert_eq!(got, code, "exit code of work {all:?}\nstdout:\n{out}\nstderr:\n{err}\n{}", self.summary());
        serde_json::from_str(&out).unwrap_or_else(|e| panic!("stdout of work {all:?} is not JSON ({e}):\n{out}\n{err}"))
    }

    /// One line per request the server saw (for failure messages).
    pub fn summary(&self) -> String {
        self.server
            .requests()
            .iter()
            .map(|r| format!("{:?} {} rule={:?} results={} step={:?}", r.api, r.path, r.rule, r.tool_results, r.step))
            .collect::<Vec<_>>()
            .join("\n")
    }
}

/// Asserts that nothing `work` wrote under `.work/` quotes the key.
pub fn assert_key_never_written(root: &Path) {
    fn walk(p: &Path, out: &mut Vec<PathBuf>) {
        for e in std::fs::read_dir(p).into_iter().flatten().flatten() {
            let p = e.path();
            if p.is_dir() { walk(&p, out) } else { out.push(p) }
        }
    }
    let mut files = Vec::new();
    walk(&root.join(".work"), &mut files);
    for f in files {
        let text = std::fs::read_to_string(&f).unwrap_or_default();
        assert!(!text.contains(KEY), "{} quotes the key", f.display());
    }
}
