//! `work mcp`: serve the workflows as Model Context Protocol tools over stdio (docs/hosts.md).
//! Every tool call runs this same binary as a child with the command's flags and `--json`,
//! so a host gets exactly what a shell user gets; see the `work-mcp` crate.

use crate::CmdResult;
use crate::ctx::{CliError, Ctx, Global};
use work_runtime::ExitStatus;

/// `work mcp` takes no flags of its own: the global `-C`, `--state-dir` and `-c` apply to
/// every call it serves.
#[derive(Debug, clap::Args)]
pub struct Args {}

/// Serves until the client closes stdin (or SIGINT / SIGTERM).
pub fn run(global: &Global, _args: Args) -> CmdResult {
    let ctx = Ctx::new(global)?;
    let exe = std::env::current_exe().map_err(|e| CliError::Runtime(format!("find the `work` binary: {e}")))?;
    let launcher = work_mcp::Launcher {
        exe,
        cwd: ctx.root.clone(),
        state_dir: ctx.state_dir.clone(),
        overrides: global.overrides.clone(),
        redactor: ctx.redactor.clone(),
    };
    let server = work_mcp::WorkServer::new(<crate::Cli as clap::CommandFactory>::command(), launcher);
    let rt = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .map_err(|e| CliError::Runtime(format!("start the async runtime: {e}")))?;
    rt.block_on(work_mcp::serve_stdio(server)).map_err(|e| CliError::Runtime(e.to_string()))?;
    Ok(ExitStatus::Done)
}
