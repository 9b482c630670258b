//! `work implement` and `work edit` (not implemented yet).

use crate::CmdResult;
use crate::ctx::{CliError, Global};

/// Arguments of `work implement` (none yet).
#[derive(Debug, clap::Args)]
pub struct ImplementArgs {
    /// Anything.
    #[arg(trailing_var_arg = true, allow_hyphen_values = true)]
    pub rest: Vec<String>,
}

/// Arguments of `work edit` (none yet).
#[derive(Debug, clap::Args)]
pub struct EditArgs {
    /// Anything.
    #[arg(trailing_var_arg = true, allow_hyphen_values = true)]
    pub rest: Vec<String>,
}

/// Runs `work implement`.
pub fn run_implement(_global: &Global, _args: ImplementArgs) -> CmdResult {
    Err(CliError::bad("run this command: it is not implemented yet"))
}

/// Runs `work edit`.
pub fn run_edit(_global: &Global, _args: EditArgs) -> CmdResult {
    Err(CliError::bad("run this command: it is not implemented yet"))
}
