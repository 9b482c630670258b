//! Processes: the one place in `work` that starts a program.
//!
//! Invariants:
//! - every child runs in its own process group, and nothing it starts outlives it: at its end
//!   and at its timeout, its group, every process carrying its marker and every descendant of
//!   `work` outside a live dispatch's tree get SIGTERM, a grace period, then SIGKILL, and are
//!   reaped; at every exit of `work` everything still descending from it; children die with
//!   `work` even on SIGKILL (see [`crate::contain`]);
//! - no child gets a handle to a process spawner outside the tree (`TMUX`, `STY`, …:
//!   [`crate::contain::DAEMON_HANDLES`]);
//! - stdout and stderr are read concurrently (no deadlock on a full pipe), each up to a cap;
//!   bytes past the cap are drained and discarded, and the truncation is reported;
//! - stdin is written and closed before the output is awaited;
//! - a program that cannot be started is a [`SpawnError`], never a panic.

use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::time::{Duration, Instant};
use tokio::io::{AsyncRead, AsyncReadExt, AsyncWriteExt};

/// The default cap on each of stdout and stderr: 8 MiB.
pub const DEFAULT_OUTPUT_CAP: usize = 8 * 1024 * 1024;

/// What to run.
#[derive(Debug, Clone)]
pub struct ProcessSpec {
    /// The program (looked up on PATH when it has no slash).
    pub program: String,
    /// Its arguments.
    pub args: Vec<String>,
    /// The working directory.
    pub cwd: PathBuf,
    /// Extra environment variables.
    pub env: Vec<(String, String)>,
    /// Inherited environment variables the process does not get.
    pub env_removed: Vec<String>,
    /// Bytes written to stdin, which is then closed. `None` gives an empty stdin.
    pub stdin: Option<Vec<u8>>,
    /// Kill the process group after this long.
    pub timeout: Option<Duration>,
    /// Cap on each captured stream, in bytes.
    pub output_cap: usize,
    /// Where Python keeps its bytecode cache for this process.
    pub python_bytecode: PythonBytecode,
    /// The sandbox and environment allowlist an agent's process runs under (see
    /// [`crate::sandbox`]); `None` for the engine's own processes (git, checks).
    pub confine: Option<crate::sandbox::Confine>,
}

/// Where a process's Python reads and writes bytecode.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum PythonBytecode {
    /// As the environment says (`__pycache__/` beside the sources): agents and tools.
    Inherited,
    /// A fresh empty directory of the engine's own (`PYTHONPYCACHEPREFIX`), removed when the
    /// process has ended: checks, so that no bytecode left in the tree is run instead of its
    /// source (see [`crate::bytecode`]).
    Fresh,
}

impl ProcessSpec {
    /// A spec for `program args…` in `cwd`, with no stdin, no timeout and the default cap.
    pub fn new(program: impl Into<String>, args: Vec<String>, cwd: &Path) -> Self {
        Self {
            program: program.into(),
            args,
            cwd: cwd.to_path_buf(),
            env: Vec::new(),
            env_removed: Vec::new(),
            stdin: None,
            timeout: None,
            output_cap: DEFAULT_OUTPUT_CAP,
            python_bytecode: PythonBytecode::Inherited,
            confine: None,
        }
    }

    /// Confines the process (an agent's): see [`crate::sandbox`].
    pub fn confined(mut self, confine: crate::sandbox::Confine) -> Self {
        self.confine = Some(confine);
        self
    }

    /// A spec for `sh -c <script>` in `cwd`: a check (a verify command, a gate, a test command,
    /// a scenario, an oracle), so it runs with a fresh Python bytecode cache
    /// ([`PythonBytecode::Fresh`]).
    pub fn shell(script: &str, cwd: &Path) -> Self {
        let mut spec = Self::new("sh", vec!["-c".into(), script.into()], cwd);
        spec.python_bytecode = PythonBytecode::Fresh;
        spec
    }

    /// Sets the stdin bytes.
    pub fn with_stdin(mut self, bytes: Vec<u8>) -> Self {
        self.stdin = Some(bytes);
        self
    }

    /// Sets the timeout.
    pub fn with_timeout(mut self, timeout: Option<Duration>) -> Self {
        self.timeout = timeout;
        self
    }

    /// Adds an environment variable.
    pub fn with_env(mut self, key: impl Into<String>, value: impl Into<String>) -> Self {
        self.env.push((key.into(), value.into()));
        self
    }

    /// Leaves an inherited environment variable out.
    pub fn without_env(mut self, key: impl Into<String>) -> Self {
        self.env_removed.push(key.into());
        self
    }
}

/// What a finished (or killed) process left.
#[derive(Debug, Clone)]
pub struct ProcessOutput {
    /// The exit code, when the process exited normally.
    pub code: Option<i32>,
    /// The signal that ended it, when one did.
    pub signal: Option<i32>,
    /// Captured stdout (at most the cap; for a process killed at its timeout, what it wrote
    /// before the kill).
    pub stdout: Vec<u8>,
    /// Captured stderr (at most the cap; the same).
    pub stderr: Vec<u8>,
    /// stdout went past the cap.
    pub stdout_truncated: bool,
    /// stderr went past the cap.
    pub stderr_truncated: bool,
    /// The timeout fired and the process group was killed.
    pub timed_out: bool,
    /// Wall time from spawn to the end of output.
    pub elapsed: Duration,
    /// The timeout the process ran under.
    pub limit: Option<Duration>,
}

impl ProcessOutput {
    /// Exited normally with code 0 and was not killed.
    pub fn success(&self) -> bool {
        self.code == Some(0) && !self.timed_out
    }

    /// stdout as lossy UTF-8.
    pub fn stdout_text(&self) -> String {
        String::from_utf8_lossy(&self.stdout).into_owned()
    }

    /// stderr as lossy UTF-8.
    pub fn stderr_text(&self) -> String {
        String::from_utf8_lossy(&self.stderr).into_owned()
    }

    /// A short description of how it ended: `exit code 3`, `killed by signal 9`, `timed out after 5s`.
    pub fn describe_end(&self) -> String {
        if self.timed_out {
            // The limit, not the measured time: the description must be repeatable.
            let limit = self.limit.unwrap_or(self.elapsed);
            format!("timed out after {}s", limit.as_secs_f64())
        } else if let Some(c) = self.code {
            format!("exit code {c}")
        } else if let Some(s) = self.signal {
            format!("killed by signal {s}")
        } else {
            "ended without an exit code".into()
        }
    }
}

/// Why a process could not be run at all.
#[derive(Debug, thiserror::Error)]
pub enum SpawnError {
    /// The program was not found.
    #[error("start `{program}`: not found")]
    NotFound {
        /// The program name.
        program: String,
    },
    /// The working directory does not exist.
    #[error("start `{program}`: working directory `{cwd}` does not exist")]
    NoCwd {
        /// The program name.
        program: String,
        /// The directory.
        cwd: String,
    },
    /// Any other OS error while starting or talking to the process.
    #[error("run `{program}`: {source}")]
    Io {
        /// The program name.
        program: String,
        /// The OS error.
        source: std::io::Error,
    },
}

/// Starts processes. Cheap to clone; the only way `work` runs a program.
#[derive(Debug, Clone, Default)]
pub struct Spawner;

impl Spawner {
    /// Starts `spec` contained (its own process group, the marker every descendant inherits,
    /// the parent-death signal, tracked for the sweeps; see `contain`). The guard ends what the
    /// process leaves behind when it is ended, or kills its group when dropped first.
    pub(crate) async fn spawn_contained(
        &self,
        spec: &ProcessSpec,
    ) -> Result<(tokio::process::Child, Option<Ended>), SpawnError> {
        if !spec.cwd.is_dir() {
            return Err(SpawnError::NoCwd { program: spec.program.clone(), cwd: spec.cwd.display().to_string() });
        }
        let sandbox = Sandboxed::new(spec).map_err(|e| SpawnError::Io { program: spec.program.clone(), source: e })?;
        // In the sandbox, `bwrap --die-with-parent` gives the death signal; outside it, see
        // `contain::DeathSignal`.
        let death = if sandbox.is_some() { None } else { Some(crate::contain::death_signal()) };
        #[expect(clippy::disallowed_methods, reason = "the runtime's spawner is the one chokepoint for processes")]
        let mut cmd = match (&sandbox, death) {
            (Some(s), _) => {
                let mut c = tokio::process::Command::new(&s.bwrap);
                c.args(&s.args).arg("--").arg(&spec.program);
                c
            }
            (None, Some(crate::contain::DeathSignal::Shim(shim))) => {
                if !on_path(spec) {
                    return Err(SpawnError::NotFound { program: spec.program.clone() });
                }
                let mut c = tokio::process::Command::new(shim);
                c.args(["--pdeathsig", "KILL", "--"]).arg(&spec.program);
                c
            }
            (None, _) => tokio::process::Command::new(&spec.program),
        };
        if let Some(c) = &spec.confine {
            // An allowlist, in every mode: a key the agent never sees it cannot leak.
            cmd.env_clear().envs(crate::sandbox::allowed_env(&c.env_allow));
            if sandbox.is_some() {
                cmd.env("TMPDIR", "/tmp");
            }
        }
        cmd.args(&spec.args)
            .current_dir(&spec.cwd)
            .stdin(if spec.stdin.is_some() { Stdio::piped() } else { Stdio::null() })
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .process_group(0)
            .kill_on_drop(true);
        for k in &spec.env_removed {
            cmd.env_remove(k);
        }
        for (k, v) in &spec.env {
            cmd.env(k, v);
        }
        // No handle to a process spawner outside `work`'s tree (a terminal multiplexer).
        for k in crate::contain::daemon_handles() {
            cmd.env_remove(k);
        }
        let cache = match spec.python_bytecode {
            PythonBytecode::Inherited => None,
            PythonBytecode::Fresh => Some(
                crate::bytecode::FreshCache::new()
                    .map_err(|e| SpawnError::Io { program: spec.program.clone(), source: e })?,
            ),
        };
        if let Some(c) = &cache {
            cmd.env(crate::bytecode::PREFIX_VAR, c.path());
        }
        // Every descendant inherits the marker that names this process; see `contain`.
        let marker = crate::contain::new_marker();
        cmd.env(crate::contain::OWNER_VAR, &marker);
        if matches!(death, Some(crate::contain::DeathSignal::Forked)) {
            crate::contain::arm(&mut cmd);
        }
        let child = crate::contain::spawn_tracked(cmd, marker.clone()).await.map_err(|e| {
            if e.kind() == std::io::ErrorKind::NotFound {
                SpawnError::NotFound { program: spec.program.clone() }
            } else {
                SpawnError::Io { program: spec.program.clone(), source: e }
            }
        })?;
        // Untracks and ends what the process left, whichever way its owner ends.
        let guard = child.id().map(|p| Ended {
            pgid: p as i32,
            marker,
            done: false,
            in_pid_namespace: sandbox.is_some(),
            _cache: cache,
            _tmp: sandbox.map(|s| (s.tmp, s.git)),
        });
        Ok((child, guard))
    }

    /// Runs a process to completion (or to its timeout) and captures its output.
    pub async fn run(&self, spec: &ProcessSpec) -> Result<ProcessOutput, SpawnError> {
        use std::os::unix::process::ExitStatusExt;
        let started = Instant::now();
        let (mut child, guard) = self.spawn_contained(spec).await?;
        let pgid = child.id().map(|p| p as i32);

        let stdin_task = match (child.stdin.take(), spec.stdin.clone()) {
            (Some(mut w), Some(bytes)) => Some(tokio::spawn(async move {
                // A child that exits without reading its stdin gives EPIPE: not our failure.
                let _ = w.write_all(&bytes).await;
                let _ = w.shutdown().await;
            })),
            _ => None,
        };
        let cap = spec.output_cap;
        let out_task = child.stdout.take().map(|r| tokio::spawn(read_capped(r, cap)));
        let err_task = child.stderr.take().map(|r| tokio::spawn(read_capped(r, cap)));

        let outcome = match spec.timeout {
            Some(t) => tokio::time::timeout(t, child.wait()).await.ok(),
            None => Some(child.wait().await),
        };
        let timed_out = outcome.is_none();
        let status = match outcome {
            Some(status) => status,
            None => {
                // Timeout: SIGTERM to the group, a grace period, then SIGKILL.
                if let Some(pg) = pgid {
                    crate::contain::signal_group(pg, nix::sys::signal::Signal::SIGTERM);
                }
                match tokio::time::timeout(crate::contain::GRACE, child.wait()).await {
                    Ok(status) => status,
                    Err(_) => {
                        if let Some(pg) = pgid {
                            crate::contain::signal_group(pg, nix::sys::signal::Signal::SIGKILL);
                        }
                        let _ = child.start_kill();
                        child.wait().await
                    }
                }
            }
        };
        // The main process has ended: nothing it left may keep running (or keep the pipes open:
        // a background child holding stdout would otherwise stall us until the timeout).
        if let Some(g) = guard {
            g.end().await;
        }
        let ((stdout, so_t), (stderr, se_t)) = (collect(out_task).await, collect(err_task).await);
        if let Some(t) = stdin_task {
            t.abort();
        }
        let elapsed = started.elapsed();
        if timed_out {
            return Ok(ProcessOutput {
                code: None,
                signal: Some(9),
                stdout,
                stderr,
                stdout_truncated: so_t,
                stderr_truncated: se_t,
                timed_out: true,
                elapsed,
                limit: spec.timeout,
            });
        }
        let status = status.map_err(|e| SpawnError::Io { program: spec.program.clone(), source: e })?;
        Ok(ProcessOutput {
            code: status.code(),
            signal: status.signal(),
            stdout,
            stderr,
            stdout_truncated: so_t,
            stderr_truncated: se_t,
            timed_out: false,
            elapsed,
            limit: spec.timeout,
        })
    }

    /// Runs `sh -c <script>` in `cwd`.
    pub async fn shell(
        &self,
        script: &str,
        cwd: &Path,
        timeout: Option<Duration>,
    ) -> Result<ProcessOutput, SpawnError> {
        self.run(&ProcessSpec::shell(script, cwd).with_timeout(timeout)).await
    }

    /// Runs a process from synchronous code (builds a small runtime when none is running).
    pub fn run_blocking(&self, spec: &ProcessSpec) -> Result<ProcessOutput, SpawnError> {
        let io_err = |e: std::io::Error| SpawnError::Io { program: spec.program.clone(), source: e };
        match tokio::runtime::Handle::try_current() {
            Ok(h) => tokio::task::block_in_place(|| h.block_on(self.run(spec))),
            Err(_) => tokio::runtime::Builder::new_current_thread()
                .enable_all()
                .build()
                .map_err(io_err)?
                .block_on(self.run(spec)),
        }
    }
}

/// Whether `spec`'s program can be found: a path (with a `/`) as it is, a name on the `PATH`
/// the process gets. Checked before the shim is started, which would otherwise report a
/// missing program as its own failure.
fn on_path(spec: &ProcessSpec) -> bool {
    if spec.program.contains('/') {
        return spec.cwd.join(&spec.program).is_file();
    }
    let path = match spec.env.iter().rev().find(|(k, _)| k == "PATH") {
        Some((_, v)) => Some(std::ffi::OsString::from(v)),
        None => std::env::var_os("PATH"),
    };
    path.is_some_and(|p| std::env::split_paths(&p).any(|d| d.join(&spec.program).is_file()))
}

/// Ends what a process left once its main process has ended; when the future that ran it is
/// dropped first (its caller gave up), the drop does it instead.
#[derive(Debug)]
pub(crate) struct Ended {
    pgid: i32,
    marker: String,
    done: bool,
    /// The process ran in a PID namespace of its own: when its main process ended, the kernel
    /// ended everything it started, so there is nothing to sweep.
    in_pid_namespace: bool,
    /// The process's fresh bytecode cache, removed once what it left has ended.
    _cache: Option<crate::bytecode::FreshCache>,
    /// A sandboxed process's private `/tmp` and private git directory, removed once it has ended.
    _tmp: Option<(crate::scratch::ScratchDir, Option<crate::sandbox::git::GitScratch>)>,
}

impl Ended {
    pub(crate) async fn end(mut self) {
        self.done = true;
        crate::contain::untrack(self.pgid);
        let marker = std::mem::take(&mut self.marker);
        if self.in_pid_namespace {
            crate::contain::forget_start(&marker);
        } else {
            crate::contain::end_dispatch(self.pgid, marker).await;
        }
    }
}

/// How a confined process is started in the kernel sandbox: `bwrap`, its arguments, the
/// private `/tmp` it gets, and a write role's private git directory.
struct Sandboxed {
    bwrap: PathBuf,
    args: Vec<std::ffi::OsString>,
    tmp: crate::scratch::ScratchDir,
    git: Option<crate::sandbox::git::GitScratch>,
}

impl Sandboxed {
    /// `None` when `spec` is not confined or there is no kernel sandbox here.
    fn new(spec: &ProcessSpec) -> std::io::Result<Option<Self>> {
        // The engine's own processes (git, checks) never probe for the sandbox.
        let Some(c) = &spec.confine else { return Ok(None) };
        let crate::sandbox::Mode::Kernel { bwrap } = crate::sandbox::mode() else { return Ok(None) };
        let tmp = crate::scratch::ScratchDir::new("work-sandbox-")?;
        // A write role commits into a copy of the git directory, never the real one.
        // Where the copy cannot be made, `.git` stays read-only (a commit gets `EROFS`).
        let git = if c.write { crate::sandbox::git::GitScratch::new(&c.root).ok().flatten() } else { None };
        let args = crate::sandbox::bwrap_args(
            c,
            tmp.path(),
            &spec.cwd,
            std::iter::once(spec.program.as_str()).chain(spec.args.iter().map(String::as_str)),
            git.as_ref(),
        );
        Ok(Some(Self { bwrap: bwrap.clone(), args, tmp, git }))
    }
}

impl Drop for Ended {
    fn drop(&mut self) {
        if self.done {
            return;
        }
        // The future was dropped mid-run: kill the group now; the sweep of the next
        // dispatch (or of the signal handler) ends whatever detached from it.
        crate::contain::signal_group(self.pgid, nix::sys::signal::Signal::SIGKILL);
        crate::contain::untrack(self.pgid);
        crate::contain::forget_start(&self.marker);
    }
}

/// Ends every process still descending from `work` (SIGTERM, a grace period, SIGKILL): called
/// at every exit of `work`, so that nothing an agent left runs on after the verdict.
pub fn end_leftovers() {
    crate::contain::end_all();
}

/// Ends every process `work` started: each group and every detached descendant gets SIGTERM,
/// a grace period, then SIGKILL. Called when `work` itself is interrupted (SIGINT, SIGTERM),
/// so that no agent outlives it and keeps spending.
pub fn kill_all_children() {
    crate::contain::end_all();
    crate::scratch::remove_all();
}

/// The captured stream of a process that has ended, and whose leftovers have been ended: every
/// writer is gone, so the read ends at once; bounded anyway, in case one was not ours to kill.
/// A process killed at its timeout keeps what it wrote before the kill (an agent CLI's usage
/// lines: what the backend billed is charged however the attempt ended).
async fn collect(task: Option<tokio::task::JoinHandle<(Vec<u8>, bool)>>) -> (Vec<u8>, bool) {
    let Some(mut t) = task else { return (Vec::new(), false) };
    match tokio::time::timeout(Duration::from_secs(2), &mut t).await {
        Ok(r) => r.unwrap_or_default(),
        Err(_) => {
            t.abort();
            (Vec::new(), true)
        }
    }
}

/// Reads `r` to its end, keeping at most `cap` bytes; true when more came than was kept.
pub(crate) async fn read_capped<R: AsyncRead + Unpin>(mut r: R, cap: usize) -> (Vec<u8>, bool) {
    let mut kept = Vec::new();
    let mut truncated = false;
    let mut buf = vec![0u8; 64 * 1024];
    loop {
        match r.read(&mut buf).await {
            Ok(0) | Err(_) => break,
            Ok(n) => {
                let room = cap.saturating_sub(kept.len());
                if n > room {
                    truncated = true;
                }
                kept.extend_from_slice(&buf[..n.min(room)]);
            }
        }
    }
    (kept, truncated)
}

/// Whether a process runs: it exists and is not a zombie (a killed process whose parent has
/// not reaped it yet is gone for every purpose here).
pub fn pid_running(pid: i64) -> bool {
    let Ok(pid) = i32::try_from(pid) else { return false };
    if pid <= 0 {
        return false;
    }
    match std::fs::read_to_string(format!("/proc/{pid}/stat")) {
        // The state is the first field after the command name, which is in parentheses.
        Ok(stat) => {
            !matches!(stat.rsplit(')').next().map(str::trim_start).and_then(|r| r.chars().next()), Some('Z' | 'X'))
        }
        Err(_) if std::path::Path::new("/proc/self/stat").exists() => false,
        Err(_) => crate::fsx::process_alive(pid),
    }
}

/// The running processes whose environment holds `var=marker` (never this process): how a
/// caller finds descendants that left the process group the spawner kills (Linux `/proc`).
pub fn marked_processes(var: &str, marker: &str) -> Vec<i64> {
    let needle = format!("{var}={marker}");
    let me = i64::from(std::process::id());
    let Ok(dir) = std::fs::read_dir("/proc") else { return Vec::new() };
    let mut found: Vec<i64> = dir
        .filter_map(|e| e.ok()?.file_name().to_str()?.parse::<i64>().ok())
        .filter(|&pid| pid != me)
        .filter(|pid| {
            std::fs::read(format!("/proc/{pid}/environ"))
                .is_ok_and(|env| env.split(|&b| b == 0).any(|kv| kv == needle.as_bytes()))
        })
        .filter(|&pid| pid_running(pid))
        .collect();
    found.sort_unstable();
    found
}

/// What [`sweep`] found.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct Sweep {
    /// Marked processes still running after the scenario (and its cleanup) ended: they left
    /// the process group the spawner killed.
    pub escaped: Vec<i64>,
    /// Those still running after being killed.
    pub survivors: Vec<i64>,
}

/// Finds every process still running with `var=marker` in its environment, kills it (SIGKILL)
/// and checks that it is gone. Bounded: gives up waiting after about two seconds, and what
/// still runs then is reported in [`Sweep::survivors`].
pub async fn sweep_marked(var: &str, marker: &str) -> Sweep {
    use nix::sys::signal::{Signal, kill};
    use nix::unistd::Pid;
    let mut escaped: Vec<i64> = Vec::new();
    // A process may start another while it is being killed: a few rounds.
    for _ in 0..5 {
        let found = marked_processes(var, marker);
        if found.is_empty() {
            break;
        }
        for &pid in &found {
            if let Ok(p) = i32::try_from(pid) {
                let _ = kill(Pid::from_raw(p), Signal::SIGKILL);
            }
            if !escaped.contains(&pid) {
                escaped.push(pid);
            }
        }
        for _ in 0..100 {
            if !found.iter().any(|&p| pid_running(p)) {
                break;
            }
            tokio::time::sleep(std::time::Duration::from_millis(20)).await;
        }
    }
    escaped.sort_unstable();
    let mut survivors: Vec<i64> = escaped.iter().copied().filter(|&p| pid_running(p)).collect();
    survivors.extend(marked_processes(var, marker).into_iter().filter(|p| !escaped.contains(p)));
    survivors.sort_unstable();
    survivors.dedup();
    Sweep { escaped, survivors }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn a_check_runs_with_a_fresh_bytecode_cache_that_is_gone_after_it() {
        let dir = tempfile::tempdir().expect("tempdir");
        let script = "d=$PYTHONPYCACHEPREFIX; [ -d \"$d\" ] && [ -z \"$(ls -A \"$d\")\" ] && echo \"$d\"";
        let (a, b) = (
            Spawner.run(&ProcessSpec::shell(script, dir.path())).await.expect("runs"),
            Spawner.run(&ProcessSpec::shell(script, dir.path())).await.expect("runs"),
        );
        assert!(a.success() && b.success(), "{} {}", a.stderr_text(), b.stderr_text());
        let (pa, pb) = (a.stdout_text().trim().to_string(), b.stdout_text().trim().to_string());
        assert_ne!(pa, pb, "each check gets its own");
        assert!(!dir.path().join(&pa).starts_with(dir.path()), "outside the tree: {pa}");
        assert!(!Path::new(&pa).exists() && !Path::new(&pb).exists(), "removed once the check ended");
        let plain =
            ProcessSpec::new("sh", vec!["-c".into(), "echo \"${PYTHONPYCACHEPREFIX-unset}\"".into()], dir.path());
        let out = Spawner.run(&plain.without_env(crate::bytecode::PREFIX_VAR)).await.expect("runs");
        assert_eq!(out.stdout_text(), "unset\n", "an agent's process keeps its environment's");
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn captures_output_and_exit_code() {
        let dir = tempfile::tempdir().expect("tempdir");
        let out = Spawner
            .run(&ProcessSpec::shell("cat; echo err >&2; exit 3", dir.path()).with_stdin(b"hello".to_vec()))
            .await
            .expect("runs");
        assert_eq!(out.code, Some(3));
        assert_eq!(out.stdout, b"hello");
        assert_eq!(out.stderr_text(), "err\n");
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn timeout_kills_the_whole_group() {
        let dir = tempfile::tempdir().expect("tempdir");
        let marker = dir.path().join("grandchild-alive");
        let script = format!("(sleep 1; touch {}) & sleep 30", marker.display());
        let out = Spawner
            .run(&ProcessSpec::shell(&script, dir.path()).with_timeout(Some(Duration::from_millis(200))))
            .await
            .expect("runs");
        assert!(out.timed_out);
        assert!(!out.success());
        tokio::time::sleep(Duration::from_millis(1500)).await;
        assert!(!marker.exists(), "the grandchild survived the timeout");
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn a_background_child_holding_stdout_does_not_stall_the_result() {
        let dir = tempfile::tempdir().expect("tempdir");
        let spec = ProcessSpec::shell("(sleep 30) & echo done", dir.path()).with_timeout(Some(Duration::from_secs(20)));
        let out = Spawner.run(&spec).await.expect("runs");
        assert!(!out.timed_out, "waited for the background child");
        assert_eq!(out.stdout_text(), "done\n");
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn caps_output_without_blocking() {
        let dir = tempfile::tempdir().expect("tempdir");
        let mut spec = ProcessSpec::shell("head -c 300000 /dev/zero; head -c 300000 /dev/zero >&2", dir.path());
        spec.output_cap = 1000;
        let out = Spawner.run(&spec).await.expect("runs");
        assert_eq!(out.stdout.len(), 1000);
        assert!(out.stdout_truncated && out.stderr_truncated);
        assert_eq!(out.code, Some(0));
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn missing_program_is_an_error_not_a_panic() {
        let dir = tempfile::tempdir().expect("tempdir");
        let err = Spawner
            .run(&ProcessSpec::new("definitely-not-a-program-xyz", vec![], dir.path()))
            .await
            .expect_err("fails");
        assert!(matches!(err, SpawnError::NotFound { .. }));
    }
    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn the_exit_sweep_ends_a_descendant_no_dispatch_sweep_saw() {
        let dir = tempfile::tempdir().expect("tempdir");
        let pidfile = dir.path().join("pid");
        // Its own session, no marker; the run's future is dropped (its caller gave up), so
        // only its group is killed and no dispatch sweep runs.
        let script = format!(
            "setsid env -u WORK_CONTAINMENT sh -c 'echo $$ > {p}; exec sleep 30' </dev/null >/dev/null 2>&1 & \
             while [ ! -s {p} ]; do sleep 0.01; done; sleep 30",
            p = pidfile.display()
        );
        let spec = ProcessSpec::shell(&script, dir.path());
        let mut run = Box::pin(Spawner.run(&spec));
        while !pidfile.exists() || std::fs::read_to_string(&pidfile).unwrap_or_default().trim().is_empty() {
            assert!(tokio::time::timeout(Duration::from_millis(20), &mut run).await.is_err(), "the script ended early");
        }
        drop(run);
        let pid: i64 = std::fs::read_to_string(&pidfile).expect("pid").trim().parse().expect("a pid");
        assert!(pid_running(pid), "the descendant was ended before the exit sweep");
        tokio::task::spawn_blocking(end_leftovers).await.expect("the sweep ran");
        assert!(!pid_running(pid), "the descendant {pid} outlived the exit sweep");
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn a_detached_descendant_is_ended_with_its_dispatch() {
        let dir = tempfile::tempdir().expect("tempdir");
        let pidfile = dir.path().join("pid");
        // New session, parent gone: outside the process group the spawner kills.
        let script = format!(
            "setsid sh -c 'echo $$ > {p}; exec sleep 30' </dev/null >/dev/null 2>&1 & \
             while [ ! -s {p} ]; do sleep 0.01; done",
            p = pidfile.display()
        );
        let out = Spawner.run(&ProcessSpec::shell(&script, dir.path())).await.expect("runs");
        assert!(out.success(), "{}", out.stderr_text());
        let pid: i64 = std::fs::read_to_string(&pidfile).expect("pid").trim().parse().expect("a pid");
        assert!(!pid_running(pid), "the detached descendant {pid} outlived its dispatch");
    }
}
