//! `work report RUN [-o FILE.html]`: one self-contained HTML report of a run (no script, no
//! network; charts as inline SVG). Written to `<run dir>/report.html` unless `-o` says where;
//! the path is printed on stdout.

use crate::CmdResult;
use crate::ctx::{CliError, Ctx, Global};
use std::path::PathBuf;
use work_history::Store;
use work_runtime::ExitStatus;

/// Arguments of `work report`.
#[derive(Debug, clap::Args)]
#[command(
    after_help = "EXAMPLES:\n  work report 20260101T000000000Z-exhaust-1a2b\n  work report my-task -o /tmp/run.html"
)]
pub struct Args {
    /// A run id (or a unique prefix), or an exhaust task, until session, ultra goal or task id.
    #[arg(value_name = "RUN|TASK")]
    pub run: String,
    /// Where to write the report (default `<run dir>/report.html`).
    #[arg(short = 'o', long = "output", value_name = "FILE.html")]
    pub output: Option<PathBuf>,
}

/// Runs `work report`.
pub fn run(global: &Global, args: Args) -> CmdResult {
    let ctx = Ctx::new(global)?;
    let store = Store::new(&ctx.state_dir);
    let summary = store.resolve(&args.run).map_err(|e| CliError::bad(e.to_string()))?;
    let out = match args.output {
        Some(p) if p.is_absolute() => p,
        Some(p) => std::env::current_dir().map(|d| d.join(&p)).unwrap_or(p),
        None => summary.run_dir.join("report.html"),
    };
    if out.is_dir() {
        return Err(CliError::bad(format!("write the report to `{}`: it is a directory", out.display())));
    }
    let detail = store.detail(&summary).map_err(|e| CliError::Runtime(e.to_string()))?;
    let html = work_history::report::render(&summary, &detail, &ctx.redactor, &ctx.clock.now_rfc3339());
    work_runtime::fsx::write_atomic(&out, html.as_bytes())
        .map_err(|e| CliError::Runtime(format!("write the report `{}`: {e}", out.display())))?;
    work_run::output::line(out.display().to_string());
    Ok(ExitStatus::Done)
}
