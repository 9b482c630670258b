//! `work until` (not implemented yet).

use crate::CmdResult;
use crate::ctx::{CliError, Global};

/// Arguments (none yet).
#[derive(Debug, clap::Args)]
pub struct Args {
    /// Anything.
    #[arg(trailing_var_arg = true, allow_hyphen_values = true)]
    pub rest: Vec<String>,
}

/// Runs the command.
pub fn run(_global: &Global, _args: Args) -> CmdResult {
    Err(CliError::bad("run this command: it is not implemented yet"))
}
