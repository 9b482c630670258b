//! The engine's own observation of a scenario, and the PASS/FAIL verdict drawn from it.
//!
//! A criterion is green only by this observation, never by an agent's claim. The verdict is a
//! pure function of the observation and the criterion's [`PassSpec`]; a timed-out or
//! unstartable scenario always fails.

use crate::goal::PassSpec;
use serde::{Deserialize, Serialize};
use sha2::{Digest, Sha256};
use std::path::Path;
use std::time::Duration;
use work_runtime::spawn::{ProcessSpec, Spawner};

/// What one scenario run showed.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct Observation {
    /// The exit code (`None` when killed or not started).
    pub exit_code: Option<i32>,
    /// The signal that ended it, if any.
    pub signal: Option<i32>,
    /// Killed at its timeout.
    pub timed_out: bool,
    /// stdout (lossy UTF-8, capped by the spawner).
    pub stdout: String,
    /// stderr (lossy UTF-8, capped by the spawner).
    pub stderr: String,
    /// The output was cut at the spawner's cap.
    pub truncated: bool,
    /// The scenario could not be started at all.
    pub spawn_error: Option<String>,
}

/// PASS or FAIL, with the check-by-check reasons.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Verdict {
    /// Every check held.
    pub pass: bool,
    /// One line per check: `exit code = 0: held (0)` / `… : failed (got 1)`.
    pub checks: Vec<String>,
}

impl Verdict {
    /// `pass` or `fail`.
    pub fn word(&self) -> &'static str {
        if self.pass { "pass" } else { "fail" }
    }

    /// The failed checks on one line (empty when it passed).
    pub fn failures(&self) -> String {
        self.checks.iter().filter(|c| c.contains(": failed")).cloned().collect::<Vec<_>>().join("; ")
    }
}

impl Observation {
    /// How the process ended, in a few words.
    pub fn describe_end(&self) -> String {
        if let Some(e) = &self.spawn_error {
            return format!("not started: {e}");
        }
        if self.timed_out {
            return "timed out".into();
        }
        match (self.exit_code, self.signal) {
            (Some(c), _) => format!("exit {c}"),
            (None, Some(s)) => format!("killed by signal {s}"),
            (None, None) => "ended without a status".into(),
        }
    }

    /// A fingerprint of what was observed (end, stdout, stderr): two failed attempts with the
    /// same fingerprint are "the same failure" (seed stop rule).
    pub fn fingerprint(&self) -> String {
        let mut h = Sha256::new();
        h.update(self.describe_end().as_bytes());
        h.update([0]);
        h.update(self.stdout.as_bytes());
        h.update([0]);
        h.update(self.stderr.as_bytes());
        hex::encode(h.finalize())[..16].to_string()
    }
}

/// Decides PASS/FAIL. Every check given must hold; a timeout or a start failure fails.
pub fn evaluate(pass: &PassSpec, obs: &Observation) -> Verdict {
    let mut checks = Vec::new();
    let mut ok = true;
    if obs.spawn_error.is_some() || obs.timed_out {
        checks.push(format!("scenario ran to completion: failed ({})", obs.describe_end()));
        ok = false;
    }
    let mut check = |what: String, held: bool, got: String| {
        ok &= held;
        checks.push(if held { format!("{what}: held") } else { format!("{what}: failed ({got})") });
    };
    if let Some(want) = pass.exit_code {
        check(format!("exit code = {want}"), obs.exit_code == Some(want), format!("got {}", obs.describe_end()));
    }
    if let Some(s) = &pass.stdout_contains {
        check(format!("stdout contains {s:?}"), obs.stdout.contains(s.as_str()), "not found".into());
    }
    if let Some(re) = &pass.stdout_matches {
        // Checked when the goal was parsed; an invalid pattern here fails the check.
        let held = crate::goal::compile_matcher(re).map(|r| r.is_match(&obs.stdout)).unwrap_or(false);
        check(format!("stdout matches /{re}/"), held, "no match".into());
    }
    if let Some(s) = &pass.stderr_contains {
        check(format!("stderr contains {s:?}"), obs.stderr.contains(s.as_str()), "not found".into());
    }
    Verdict { pass: ok, checks }
}

/// The spawner's output cap is large; evidence keeps at most this much of each stream.
pub const EVIDENCE_CAP: usize = 1024 * 1024;

fn capped(bytes: &[u8]) -> (String, bool) {
    if bytes.len() > EVIDENCE_CAP {
        (String::from_utf8_lossy(&bytes[..EVIDENCE_CAP]).into_owned(), true)
    } else {
        (String::from_utf8_lossy(bytes).into_owned(), false)
    }
}

/// The environment variable that marks every process a scenario starts (and every process
/// those start, unless one clears its environment): [`sweep`] finds them by it, also the ones
/// that left the scenario's process group (`setsid`, a double fork).
pub const MARKER_VAR: &str = "WORK_ULTRA_SCENARIO";

/// Runs `sh -c <command>` in `root` through the runtime's spawner (its process group is killed
/// when it ends or times out) and observes it.
pub async fn run_shell(spawner: &Spawner, command: &str, root: &Path, timeout: Duration) -> Observation {
    run_marked(spawner, command, root, timeout, None).await
}

/// [`run_shell`], with `marker` in [`MARKER_VAR`] of the process and its descendants.
pub async fn run_marked(
    spawner: &Spawner,
    command: &str,
    root: &Path,
    timeout: Duration,
    marker: Option<&str>,
) -> Observation {
    let mut spec = ProcessSpec::shell(command, root).with_timeout(Some(timeout));
    if let Some(m) = marker {
        spec = spec.with_env(MARKER_VAR, m);
    }
    match spawner.run(&spec).await {
        Ok(out) => {
            let (stdout, t1) = capped(&out.stdout);
            let (stderr, t2) = capped(&out.stderr);
            Observation {
                exit_code: out.code,
                signal: out.signal,
                timed_out: out.timed_out,
                stdout,
                stderr,
                truncated: t1 || t2 || out.stdout_truncated || out.stderr_truncated,
                spawn_error: None,
            }
        }
        Err(e) => Observation { spawn_error: Some(e.to_string()), ..Observation::default() },
    }
}

pub use work_runtime::spawn::{Sweep, pid_running};

/// The running processes whose environment holds `MARKER_VAR=marker` (never this process).
pub fn marked_processes(marker: &str) -> Vec<i64> {
    work_runtime::spawn::marked_processes(MARKER_VAR, marker)
}

/// Finds every process still running with `marker` (see [`MARKER_VAR`]), kills it and checks
/// that it is gone (the runtime's [`work_runtime::spawn::sweep_marked`]).
pub async fn sweep(marker: &str) -> Sweep {
    work_runtime::spawn::sweep_marked(MARKER_VAR, marker).await
}

#[cfg(test)]
mod tests {
    use super::*;

    fn obs(code: i32, out: &str) -> Observation {
        Observation { exit_code: Some(code), stdout: out.into(), ..Observation::default() }
    }

    #[test]
    fn every_check_must_hold() {
        let p = PassSpec { exit_code: Some(0), stdout_contains: Some("hello".into()), ..PassSpec::default() };
        assert!(evaluate(&p, &obs(0, "hello world")).pass);
        let v = evaluate(&p, &obs(0, "bye"));
        assert!(!v.pass);
        assert_eq!(v.failures(), "stdout contains \"hello\": failed (not found)");
        assert!(!evaluate(&p, &obs(1, "hello")).pass);
        let re = PassSpec { stdout_matches: Some("^v[0-9]+$".into()), ..PassSpec::default() };
        assert!(evaluate(&re, &obs(3, "x\nv12\n")).pass, "^ and $ match at line boundaries");
        assert!(!evaluate(&re, &obs(0, "xv12\n")).pass);
        let err = PassSpec { stderr_contains: Some("warn".into()), ..PassSpec::default() };
        assert!(evaluate(&err, &Observation { stderr: "a warning".into(), ..obs(1, "") }).pass);
    }

    #[test]
    fn a_timeout_always_fails_even_when_the_text_is_there() {
        let p = PassSpec { stdout_contains: Some("x".into()), ..PassSpec::default() };
        let o = Observation { timed_out: true, stdout: "x".into(), ..Observation::default() };
        let v = evaluate(&p, &o);
        assert!(!v.pass);
        assert!(v.failures().contains("timed out"));
    }

    #[test]
    fn the_fingerprint_tells_failures_apart() {
        assert_eq!(obs(1, "a").fingerprint(), obs(1, "a").fingerprint());
        assert_ne!(obs(1, "a").fingerprint(), obs(2, "a").fingerprint());
        assert_ne!(obs(1, "a").fingerprint(), obs(1, "b").fingerprint());
    }

    #[tokio::test]
    async fn a_process_that_left_the_scenario_group_is_found_and_killed() {
        let dir = tempfile::tempdir().expect("tmp");
        let marker = format!("unit-{}", std::process::id());
        let script = "python3 -c \"import subprocess; p = subprocess.Popen(['sleep', '60'], start_new_session=True, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL); print(p.pid)\"";
        let o = run_marked(&Spawner, script, dir.path(), Duration::from_secs(30), Some(&marker)).await;
        let pid: i64 = o.stdout.trim().parse().expect("the leaked pid");
        // The runtime contains the scenario: what left its group is gone when it ends, and the
        // engine's own sweep (the second line of defence) finds nothing left.
        let mut gone = false;
        for _ in 0..50 {
            if !pid_running(pid) {
                gone = true;
                break;
            }
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
        assert!(gone, "the detached process {pid} outlived its scenario");
        assert_eq!(sweep(&marker).await, Sweep::default(), "nothing is left to find");
    }

    #[tokio::test]
    async fn run_shell_observes_code_and_streams() {
        let dir = tempfile::tempdir().expect("tmp");
        let o = run_shell(&Spawner, "echo out; echo err >&2; exit 3", dir.path(), Duration::from_secs(30)).await;
        assert_eq!((o.exit_code, o.stdout.as_str(), o.stderr.as_str()), (Some(3), "out\n", "err\n"));
    }
}
