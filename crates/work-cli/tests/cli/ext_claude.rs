//! Every workflow through the real Claude Code CLI (`WORK_TEST_CLAUDE`), against the scripted model
//! server (see `ext_workflows` for the scenarios).

use crate::ext_harness::Cli;

crate::ext_workflows::every_scenario_through!(
    Cli::Claude;
    a_subagent_is_charged,
    a_hostile_repository_s_agent_configuration_is_ignored,
    an_opted_in_repository_s_claude_settings_apply,
    a_timed_out_attempt_not_confined_is_charged_what_was_billed
);
