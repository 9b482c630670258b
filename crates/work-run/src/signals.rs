//! SIGINT and SIGTERM: every agent still running is stopped, the live display is cleared,
//! and stderr says how to resume — the command the workflow registered with
//! [`set_resume_hint`], else the exact command that was run (a workflow resumes from its
//! state when run again) — then, for a run, what it spent and the commands that look at it
//! again; `work` exits with [`crate::status::EXIT_SIGINT`] / [`crate::status::EXIT_SIGTERM`].

use crate::status::{Interrupt, RunStatus, exit_code};
use std::sync::{Arc, Mutex};
use work_runtime::budget::BudgetTracker;

static HINT: Mutex<Option<String>> = Mutex::new(None);
static RUN: Mutex<Option<(String, Arc<BudgetTracker>)>> = Mutex::new(None);

/// Registers the exact command that continues this run (`work until resume <id>`).
pub fn set_resume_hint(cmd: impl Into<String>) {
    *HINT.lock().unwrap_or_else(std::sync::PoisonError::into_inner) = Some(cmd.into());
}

/// Registers the run in progress: an interruption says what it spent and how to look at it.
pub fn set_run(run_id: &str, budget: Arc<BudgetTracker>) {
    *RUN.lock().unwrap_or_else(std::sync::PoisonError::into_inner) = Some((run_id.to_string(), budget));
}

/// The command this process was started with, as a shell would take it back: `work` and
/// its arguments, each quoted when it needs to be.
pub fn this_command() -> String {
    let args: Vec<String> = std::env::args_os().skip(1).map(|a| a.to_string_lossy().into_owned()).collect();
    let quoted = shell_words::join(args);
    if quoted.is_empty() { "work".into() } else { format!("work {quoted}") }
}

/// The line printed on an interruption.
pub fn interrupted_line() -> String {
    let cmd = HINT.lock().unwrap_or_else(std::sync::PoisonError::into_inner).clone().unwrap_or_else(this_command);
    format!("interrupted: agents stopped; resume with `{cmd}`")
}

/// The lines printed on an interruption: how to resume, then (for a run) what it spent and the
/// commands that look at it again.
pub fn interrupted_lines() -> Vec<String> {
    let mut out = vec![interrupted_line()];
    if let Some((id, budget)) = RUN.lock().unwrap_or_else(std::sync::PoisonError::into_inner).as_ref() {
        let s = crate::harness::Summary { spent: budget.spent(), ..Default::default() };
        out.push(format!("spent: {}", s.spent_line()));
        out.push(format!("look back: work show {id} · work report {id}"));
    }
    out
}

/// Watches SIGINT and SIGTERM on `rt` (see the module documentation).
pub fn watch(rt: &tokio::runtime::Runtime) {
    rt.spawn(async {
        use tokio::signal::unix::{SignalKind, signal};
        let (Ok(mut int), Ok(mut term)) = (signal(SignalKind::interrupt()), signal(SignalKind::terminate())) else {
            return;
        };
        let which = tokio::select! {
            _ = int.recv() => Interrupt::Sigint,
            _ = term.recv() => Interrupt::Sigterm,
        };
        // The display first: the agents' ends that the kill causes draw nowhere.
        crate::progress::finish();
        work_runtime::spawn::kill_all_children();
        for line in interrupted_lines() {
            crate::output::err_line(&line);
        }
        std::process::exit(exit_code(RunStatus::Interrupted(which)));
    });
}
