//! `work mcp`: the workflows as Model Context Protocol tools, served over stdio.
//!
//! - [`tools`]: each tool's schema read from the CLI's own `clap::Command` (one field per
//!   flag, snake_case), argument checks before anything runs, arguments → command line, and
//!   a printed `work …` command back → a tool call.
//! - [`child`]: a call is a real `work` child (`--json`) watched for progress and interrupted
//!   (SIGINT) on cancellation, its exit code mapped to [`child::Ended`].
//! - [`history`]: `runs_list` / `run_show` from the event logs, and the live figures of a
//!   running child.
//! - [`resources`]: the run files as `work://state/…` resources.
//! - [`gate`]: a human gate asked through the client (elicitation) instead of "paused".
//! - [`server`]: the rmcp handler.
//!
//! The server never calls a workflow in process: every call goes through the same harness
//! as a shell user's command.
#![cfg_attr(test, allow(clippy::disallowed_methods, reason = "unit tests set up their fixtures directly"))]

pub mod child;
pub mod gate;
pub mod history;
pub mod resources;
pub mod server;
pub mod tools;

pub use child::Launcher;
pub use server::WorkServer;

/// Why the server stopped with an error.
#[derive(Debug, thiserror::Error)]
pub enum ServeError {
    /// The MCP session could not start (a malformed `initialize`, stdio closed early).
    #[error("start the MCP session: {0}")]
    Init(String),
    /// The session ended abnormally.
    #[error("serve MCP: {0}")]
    Serve(String),
}

/// Serves `server` on stdin/stdout until the client closes the connection or the server is
/// sent SIGINT / SIGTERM; then every running child is interrupted and awaited, so that no
/// agent outlives the server and every journal is left resumable.
pub async fn serve_stdio(server: WorkServer) -> Result<(), ServeError> {
    use rmcp::ServiceExt;
    use tokio::signal::unix::{SignalKind, signal};
    let handle = server.clone();
    let running = server.serve(rmcp::transport::stdio()).await.map_err(|e| ServeError::Init(e.to_string()));
    let result = match running {
        Ok(running) => {
            let (Ok(mut int), Ok(mut term)) = (signal(SignalKind::interrupt()), signal(SignalKind::terminate())) else {
                return Err(ServeError::Serve("watch SIGINT and SIGTERM".into()));
            };
            tokio::select! {
                r = running.waiting() => r.map(|_| ()).map_err(|e| ServeError::Serve(e.to_string())),
                _ = int.recv() => Ok(()),
                _ = term.recv() => Ok(()),
            }
        }
        Err(e) => Err(e),
    };
    handle.shut_down().await;
    result
}
