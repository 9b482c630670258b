//! Every workflow through the real Claude Code CLI (`WORK_TEST_CLAUDE`), against the scripted model
//! server (see `ext_workflows` for the scenarios).

use crate::ext_harness::Cli;
use crate::ext_workflows as w;

const CLI: Cli = Cli::Claude;

#[test]
fn exhaust_read_only_finders_run_tools_but_cannot_write() {
    w::exhaust_read_only_finders_run_tools_but_cannot_write(CLI);
}

#[test]
fn until_with_recon_writes_through_the_cli() {
    w::until_with_recon_writes_through_the_cli(CLI);
}

#[test]
fn agents_check_probes_credentials() {
    w::agents_check_probes_credentials(CLI);
}

/// Needs the runtime's containment of the CLIs' session leaders (a subreaper): fails until
/// that lands.
#[test]
fn no_cli_child_survives_a_timeout() {
    w::no_cli_child_survives_a_timeout(CLI);
}

#[test]
fn exhaust_without_credentials_fails_fast() {
    w::exhaust_without_credentials_fails_fast(CLI);
}
