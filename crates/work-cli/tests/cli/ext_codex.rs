//! Every workflow through the real Codex CLI (`WORK_TEST_CODEX`), against the scripted model
//! server (see `ext_workflows` for the scenarios).

use crate::ext_harness::Cli;

crate::ext_workflows::every_scenario_through!(Cli::Codex; a_key_the_server_quotes_is_redacted, schema_files_are_removed_on_an_interrupt, a_hostile_repository_s_agent_configuration_is_ignored, an_opted_in_repository_s_codex_configuration_is_read);
