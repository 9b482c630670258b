//! `run_command`: a shell command in the repository root, through the runtime's spawner (own
//! process group, contained, killed at its timeout, output capped).

use super::{Outcome, arg, num};
use serde_json::Value;
use std::path::Path;
use std::time::Duration;
use work_runtime::dispatch::{Access, DispatchRequest};
use work_runtime::sandbox::{Confine, Network};
use work_runtime::spawn::{ProcessSpec, Spawner};

/// A command's timeout when the model names none.
pub const DEFAULT_TIMEOUT: Duration = Duration::from_secs(120);
/// The longest timeout a model may ask for.
pub const MAX_TIMEOUT: Duration = Duration::from_secs(600);
/// The cap on each of a command's stdout and stderr as captured (bytes); what is sent back is
/// cut further to the tool result cap.
pub const OUTPUT_CAP: usize = 1024 * 1024;

/// The process every `run_command` call starts: `sh -c COMMAND` in the repository root, with an
/// empty stdin, [`DEFAULT_TIMEOUT`], [`OUTPUT_CAP`], confined as any agent's process
/// (`work_runtime::sandbox`: the role's access in the kernel sandbox where there is one, no
/// network, and the environment's allowlist, so the model's commands never see the keys `work`
/// holds). The one place a tool's command is built, so that every restriction on what it may
/// do is applied here.
pub fn tool_command_spec(request: &DispatchRequest, command: &str) -> ProcessSpec {
    let root = Path::new(&request.cwd);
    // Confined as any agent's process: the role's access, no network, the environment's
    // allowlist (no key `work` holds reaches the model's command).
    let confine = match request.access {
        Access::ReadOnly => Confine::read_only(root, Network::None),
        Access::WorkspaceWrite => Confine::write(root, Network::None),
    };
    let mut spec = ProcessSpec::new("sh", vec!["-c".into(), command.into()], root)
        .with_timeout(Some(DEFAULT_TIMEOUT))
        .confined(confine);
    spec.output_cap = OUTPUT_CAP;
    spec
}

/// Runs the command of `input` (its timeout at most what is left of the dispatch, `budget`).
pub(super) async fn run_command(request: &DispatchRequest, input: &Value, budget: Duration) -> Outcome {
    let command = match arg(input, "command") {
        Ok(c) if !c.trim().is_empty() => c,
        Ok(_) => return Outcome::error("the command is empty"),
        Err(e) => return Outcome::error(e),
    };
    let asked = num(input, "timeout_secs").map_or(DEFAULT_TIMEOUT, Duration::from_secs).min(MAX_TIMEOUT);
    let mut spec = tool_command_spec(request, command);
    spec.timeout = Some(asked.min(budget).max(Duration::from_millis(100)));
    match Spawner.run(&spec).await {
        Err(e) => Outcome::error(format!("the command could not start: {e}")),
        Ok(out) => {
            let stdout = out.stdout_text();
            let stderr = out.stderr_text();
            let half = super::RESULT_CAP / 2 - 256;
            let mut text = format!("{}\n", out.describe_end());
            if !stdout.is_empty() {
                text.push_str(&format!("--- stdout ---\n{}\n", tail_cut(&stdout, half, out.stdout_truncated)));
            }
            if !stderr.is_empty() {
                text.push_str(&format!("--- stderr ---\n{}\n", tail_cut(&stderr, half, out.stderr_truncated)));
            }
            Outcome { text: super::cap(text), is_error: !out.success(), refused: None }
        }
    }
}

/// The last `n` bytes of `s` (a test run's verdict is at its end), marked when cut.
fn tail_cut(s: &str, n: usize, truncated: bool) -> String {
    let s = s.trim_end();
    if s.len() <= n && !truncated {
        return s.to_string();
    }
    let mut at = s.len().saturating_sub(n);
    while !s.is_char_boundary(at) {
        at += 1;
    }
    format!(
        "… (the first {at} bytes not shown{})\n{}",
        if truncated { ", and more cut at capture" } else { "" },
        &s[at..]
    )
}
