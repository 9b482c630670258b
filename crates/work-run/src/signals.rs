//! SIGINT and SIGTERM: every agent still running is stopped, one line on stderr says how to
//! resume (the command the workflow registered with [`set_resume_hint`], else "the same
//! command"), and `work` exits with [`crate::status::EXIT_SIGINT`] / [`crate::status::EXIT_SIGTERM`].

use crate::status::{Interrupt, RunStatus, exit_code};
use std::sync::Mutex;

static HINT: Mutex<Option<String>> = Mutex::new(None);

/// Registers the exact command that continues this run (`work until resume <id>`).
pub fn set_resume_hint(cmd: impl Into<String>) {
    *HINT.lock().unwrap_or_else(std::sync::PoisonError::into_inner) = Some(cmd.into());
}

/// The line printed on an interruption.
pub fn interrupted_line() -> String {
    match HINT.lock().unwrap_or_else(std::sync::PoisonError::into_inner).as_deref() {
        Some(cmd) => format!("interrupted: agents stopped; resume with `{cmd}`"),
        None => "interrupted: agents stopped; run the same command again to resume".into(),
    }
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
        work_runtime::spawn::kill_all_children();
        crate::progress::finish();
        crate::output::err_line(&interrupted_line());
        std::process::exit(exit_code(RunStatus::Interrupted(which)));
    });
}
