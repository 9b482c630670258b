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

#[test]
fn implement_writes_through_the_cli_and_reviewers_cannot() {
    w::implement_writes_through_the_cli_and_reviewers_cannot(CLI);
}

#[test]
fn implement_mini_fixes_the_red_test_with_a_command() {
    w::implement_mini_fixes_the_red_test_with_a_command(CLI);
}

#[test]
fn edit_changes_the_definition_site_through_the_cli() {
    w::edit_changes_the_definition_site_through_the_cli(CLI);
}

#[test]
fn ultra_turns_red_to_green_through_the_cli() {
    w::ultra_turns_red_to_green_through_the_cli(CLI);
}

#[test]
fn loop_run_implements_reviews_and_reaches_the_merge_gate() {
    w::loop_run_implements_reviews_and_reaches_the_merge_gate(CLI);
}

#[test]
fn until_without_credentials_fails_fast() {
    w::until_without_credentials_fails_fast(CLI);
}

#[test]
fn implement_without_credentials_fails_fast() {
    w::implement_without_credentials_fails_fast(CLI);
}

#[test]
fn ultra_without_credentials_stops_agent_failing() {
    w::ultra_without_credentials_stops_agent_failing(CLI);
}

#[test]
fn loop_run_without_credentials_fails_fast() {
    w::loop_run_without_credentials_fails_fast(CLI);
}

#[test]
fn a_failed_attempt_is_charged_what_was_billed() {
    w::a_failed_attempt_is_charged_what_was_billed(CLI);
}

#[test]
fn a_subagent_is_charged() {
    w::a_subagent_is_charged(CLI);
}
