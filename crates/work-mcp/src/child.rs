//! One tool call = one real `work` child: the same binary, the same harness as a shell
//! user gets, with `--json`. While it runs its event log is watched for progress; a
//! cancellation sends it SIGINT (its agents are killed, its journal stays whole, the same
//! call resumes it); its exit code decides the kind of result.

use crate::history::{self, Live};
use serde_json::Value;
use std::path::PathBuf;
use std::time::Duration;
use tokio_util::sync::CancellationToken;
use work_runtime::redact::Redactor;
use work_runtime::spawn::{ProcessSpec, Spawner};

/// How children are started.
#[derive(Debug, Clone)]
pub struct Launcher {
    /// The `work` binary.
    pub exe: PathBuf,
    /// Where the children run (the repository root).
    pub cwd: PathBuf,
    /// The state directory (passed to every child as `--state-dir`).
    pub state_dir: PathBuf,
    /// `-c KEY=VALUE` overrides the server was started with.
    pub overrides: Vec<String>,
    /// Applied to everything that leaves the server.
    pub redactor: Redactor,
}

/// How a child ended.
#[derive(Debug, Clone, PartialEq)]
pub enum Ended {
    /// Exit 0: the `--json` document.
    Done(Value),
    /// Exit 1: ended without success; the document says why.
    Unsuccessful(Value),
    /// Exit 2: refused before anything ran; the one-line reason.
    BadInput(String),
    /// Exit 3: paused for a person; the document says how to continue.
    Paused(Value),
    /// Stopped by a cancellation (SIGINT); the child's last stderr line.
    Interrupted(String),
    /// Anything else (no document, a crash, a signal): what is known.
    Failed(String),
}

/// Set on every child (to the server's pid): marks the agents a served run dispatches.
pub const NESTED_VAR: &str = "WORK_MCP_PARENT";

/// What a host sets in the environment of the MCP servers it starts to bind them to its own
/// session (Claude Code: the session id, its messaging socket and token, the notes directory,
/// the IDE port, the "inside Claude Code" marker; Codex: the thread id). None of it reaches a
/// run: an agent the run dispatches — a nested `claude -p` when the host is also the agent —
/// is a session of its own and must never attach to, message, or wait on the host's session,
/// which is blocked on the tool call. (The host's lineage variable,
/// `CLAUDE_CODE_LAUNCHED_BY_SESSION_IDS`, is kept: the host's own guards against sessions
/// launching sessions still see it.)
pub const HOST_SESSION_VARS: [&str; 8] = [
    "CLAUDECODE",
    "CLAUDE_CODE_ENTRYPOINT",
    "CLAUDE_CODE_SESSION_ID",
    "CLAUDE_CODE_MESSAGING_SOCKET",
    "CLAUDE_CODE_MESSAGING_TOKEN",
    "CLAUDE_CODE_CHILD_NOTES_DIR",
    "CLAUDE_CODE_SSE_PORT",
    "CODEX_THREAD_ID",
];

/// How often the event log is read while a child runs.
const POLL: Duration = Duration::from_millis(200);

impl Launcher {
    /// Runs `work <argv…>` to its end, calling `progress(n, message)` for each new progress
    /// line of the child's run and whenever its dispatch figures change (`n` only grows),
    /// and interrupting the child when `cancel` fires.
    pub async fn run(
        &self,
        argv: &[String],
        cancel: &CancellationToken,
        mut progress: impl FnMut(u64, String),
    ) -> Ended {
        let mut args = vec!["--state-dir".to_string(), self.state_dir.display().to_string()];
        for o in &self.overrides {
            args.extend(["-c".to_string(), o.clone()]);
        }
        args.extend(argv.iter().cloned());
        // Every agent the child dispatches inherits this: a `work mcp` started inside one of
        // them (a nested Claude Code loading the same plugin) refuses to start workflows.
        let spec = HOST_SESSION_VARS.iter().fold(
            ProcessSpec::new(self.exe.display().to_string(), args, &self.cwd)
                .with_env(NESTED_VAR, std::process::id().to_string()),
            |spec, var| spec.without_env(*var),
        );
        let child = match Spawner.start(&spec).await {
            Ok(c) => c,
            Err(e) => return Ended::Failed(self.redactor.redact(&e.to_string()).into_owned()),
        };
        let pid = child.pid().unwrap_or(0);
        let stop = child.interrupter();
        let mut last = Live::default();
        let mut sent = 0u64;
        let mut interrupted = false;
        let wait = child.wait();
        tokio::pin!(wait);
        let out = loop {
            tokio::select! {
                r = &mut wait => break r,
                _ = cancel.cancelled(), if !interrupted => {
                    interrupted = true;
                    stop.interrupt();
                }
                _ = tokio::time::sleep(POLL) => {
                    if let Some(now) = history::live(&self.state_dir, pid) {
                        let new_lines = now.lines.len() > last.lines.len();
                        for line in now.lines.iter().skip(last.lines.len()) {
                            sent += 1;
                            progress(sent, now.message(Some(line)));
                        }
                        if !new_lines && now.figures_differ(&last) {
                            sent += 1;
                            progress(sent, now.message(now.lines.last().map(String::as_str)));
                        }
                        last = now;
                    }
                }
            }
        };
        let out = match out {
            Ok(o) => o,
            Err(e) => return Ended::Failed(self.redactor.redact(&e.to_string()).into_owned()),
        };
        let stderr = self.redactor.redact(&out.stderr_text()).into_owned();
        let last_line = stderr.lines().rev().find(|l| !l.trim().is_empty()).unwrap_or("").trim().to_string();
        if interrupted {
            return Ended::Interrupted(last_line);
        }
        let doc = serde_json::from_slice::<Value>(&out.stdout).ok().map(|d| self.redactor.redact_json(&d));
        match (out.code, doc) {
            (Some(2), _) => Ended::BadInput(last_line.strip_prefix("error: ").unwrap_or(&last_line).to_string()),
            (Some(0), Some(d)) => Ended::Done(d),
            (Some(1), Some(d)) => Ended::Unsuccessful(d),
            (Some(3), Some(d)) => Ended::Paused(d),
            (Some(c @ (0 | 1 | 3)), None) => {
                Ended::Failed(format!("`work` exited {c} without a JSON document: {last_line}"))
            }
            _ => Ended::Failed(format!("`work` {}: {last_line}", out.describe_end())),
        }
    }
}
