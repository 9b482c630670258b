//! A child that the caller watches while it runs: started through the same chokepoint as
//! [`Spawner::run`], but returned as a handle that can be interrupted (SIGINT, so that the
//! child stops the way a person's Ctrl-C stops it) before its output is collected.
//!
//! Invariants (the same as [`Spawner::run`]):
//! - the child runs in its own process group, and that group is killed once the child has
//!   ended and when the handle is dropped (nothing it started outlives it);
//! - stdout and stderr are read concurrently, each up to the spec's cap;
//! - stdin is written and closed right after the start.
//!
//! [`RunningChild::interrupt`] signals the child only, not its group: a `work` child
//! handles SIGINT by killing its own agents' groups and leaving its journals whole.

use crate::spawn::{ProcessOutput, ProcessSpec, SpawnError, Spawner, read_capped};
use std::time::Instant;
use tokio::io::AsyncWriteExt;
use tokio::task::JoinHandle;

/// A started child: interrupt it, then [`wait`](RunningChild::wait) for what it left.
#[derive(Debug)]
pub struct RunningChild {
    program: String,
    child: tokio::process::Child,
    pid: Option<i32>,
    started: Instant,
    out: Option<JoinHandle<(Vec<u8>, bool)>>,
    err: Option<JoinHandle<(Vec<u8>, bool)>>,
    reaped: bool,
    /// Ends what the child leaves behind (contained like every process the spawner starts).
    guard: Option<crate::spawn::Ended>,
}

impl Spawner {
    /// Starts `spec` and returns at once with a handle (the spec's timeout is not applied:
    /// the caller decides when to interrupt).
    pub async fn start(&self, spec: &ProcessSpec) -> Result<RunningChild, SpawnError> {
        let (mut child, guard) = self.spawn_contained(spec).await?;
        if let (Some(mut w), Some(bytes)) = (child.stdin.take(), spec.stdin.clone()) {
            tokio::spawn(async move {
                // A child that exits without reading its stdin gives EPIPE: not our failure.
                let _ = w.write_all(&bytes).await;
                let _ = w.shutdown().await;
            });
        }
        let cap = spec.output_cap;
        Ok(RunningChild {
            program: spec.program.clone(),
            pid: child.id().and_then(|p| i32::try_from(p).ok()),
            out: child.stdout.take().map(|r| tokio::spawn(read_capped(r, cap))),
            err: child.stderr.take().map(|r| tokio::spawn(read_capped(r, cap))),
            child,
            started: Instant::now(),
            reaped: false,
            guard,
        })
    }
}

impl RunningChild {
    /// The child's process id (also its process group id).
    pub fn pid(&self) -> Option<i32> {
        self.pid
    }

    /// Sends SIGINT to the child (not to its group): it stops as on a person's Ctrl-C.
    pub fn interrupt(&self) {
        if !self.reaped {
            self.interrupter().interrupt();
        }
    }

    /// A handle that interrupts the child while [`wait`](RunningChild::wait) runs.
    pub fn interrupter(&self) -> Interrupter {
        Interrupter { pid: self.pid }
    }

    /// Waits for the child to end, kills what is left of its group, and returns its output.
    pub async fn wait(mut self) -> Result<ProcessOutput, SpawnError> {
        use std::os::unix::process::ExitStatusExt;
        let status = self.child.wait().await;
        self.reaped = true;
        self.kill_group();
        if let Some(g) = self.guard.take() {
            g.end().await;
        }
        let out = match self.out.take() {
            Some(t) => t.await.unwrap_or_default(),
            None => (Vec::new(), false),
        };
        let err = match self.err.take() {
            Some(t) => t.await.unwrap_or_default(),
            None => (Vec::new(), false),
        };
        let status = status.map_err(|e| SpawnError::Io { program: self.program.clone(), source: e })?;
        Ok(ProcessOutput {
            code: status.code(),
            signal: status.signal(),
            stdout: out.0,
            stderr: err.0,
            stdout_truncated: out.1,
            stderr_truncated: err.1,
            timed_out: false,
            elapsed: self.started.elapsed(),
            limit: None,
        })
    }

    fn kill_group(&self) {
        if let Some(pg) = self.pid {
            use nix::sys::signal::{Signal, killpg};
            let _ = killpg(nix::unistd::Pid::from_raw(pg), Signal::SIGKILL);
        }
    }
}

/// Sends SIGINT to one started child (see [`RunningChild::interrupter`]).
#[derive(Debug, Clone, Copy)]
pub struct Interrupter {
    pid: Option<i32>,
}

impl Interrupter {
    /// Sends SIGINT to the child (not to its group).
    pub fn interrupt(&self) {
        if let Some(pid) = self.pid {
            use nix::sys::signal::{Signal, kill};
            // ESRCH (already gone) is not an error.
            let _ = kill(nix::unistd::Pid::from_raw(pid), Signal::SIGINT);
        }
    }
}

impl Drop for RunningChild {
    fn drop(&mut self) {
        // A handle dropped before `wait` (the caller went away): the whole group goes.
        if !self.reaped {
            self.kill_group();
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn collects_output_and_exit_code() {
        let dir = tempfile::tempdir().expect("tempdir");
        let child = Spawner
            .start(&ProcessSpec::shell("cat; echo err >&2; exit 3", dir.path()).with_stdin(b"hi".to_vec()))
            .await
            .expect("starts");
        let out = child.wait().await.expect("waits");
        assert_eq!(out.code, Some(3));
        assert_eq!(out.stdout, b"hi");
        assert_eq!(out.stderr_text(), "err\n");
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn interrupt_reaches_the_child_and_its_trap_runs() {
        let dir = tempfile::tempdir().expect("tempdir");
        // The child says when its trap is set, so the signal cannot arrive before it.
        let script = "trap 'echo interrupted; exit 130' INT; echo ready > ready; while :; do sleep 0.05; done";
        let child = Spawner.start(&ProcessSpec::shell(script, dir.path())).await.expect("starts");
        while !dir.path().join("ready").exists() {
            tokio::time::sleep(std::time::Duration::from_millis(20)).await;
        }
        child.interrupt();
        let out = child.wait().await.expect("waits");
        assert_eq!(out.code, Some(130));
        assert_eq!(out.stdout_text(), "interrupted\n");
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn a_descendant_that_left_the_group_is_ended_with_the_child() {
        let dir = tempfile::tempdir().expect("tempdir");
        // The liar: a grandchild in its own session, which a group kill alone misses.
        let script = "python3 -c \"import subprocess; p = subprocess.Popen(['sleep', '60'], start_new_session=True); open('gc', 'w').write(str(p.pid))\"";
        let child = Spawner.start(&ProcessSpec::shell(script, dir.path())).await.expect("starts");
        let out = child.wait().await.expect("waits");
        assert_eq!(out.code, Some(0), "{}", out.stderr_text());
        let pid: i32 = std::fs::read_to_string(dir.path().join("gc")).expect("pid").trim().parse().expect("a pid");
        let mut gone = false;
        for _ in 0..100 {
            if !crate::fsx::process_alive(pid) {
                gone = true;
                break;
            }
            tokio::time::sleep(std::time::Duration::from_millis(50)).await;
        }
        assert!(gone, "the detached grandchild {pid} outlived the started child");
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn dropping_the_handle_kills_the_group() {
        let dir = tempfile::tempdir().expect("tempdir");
        let script = "(sleep 30) & echo $! > bg; wait";
        let child = Spawner.start(&ProcessSpec::shell(script, dir.path())).await.expect("starts");
        let bg = dir.path().join("bg");
        let pid = loop {
            if let Ok(t) = std::fs::read_to_string(&bg)
                && let Ok(p) = t.trim().parse::<i64>()
            {
                break p;
            }
            tokio::time::sleep(std::time::Duration::from_millis(20)).await;
        };
        drop(child);
        // SIGKILL is delivered at once; the bound only keeps a broken kill from hanging.
        for _ in 0..500 {
            if !crate::spawn::pid_running(pid) {
                break;
            }
            tokio::time::sleep(std::time::Duration::from_millis(10)).await;
        }
        assert!(!crate::spawn::pid_running(pid), "the background child outlived the dropped handle");
    }
}
