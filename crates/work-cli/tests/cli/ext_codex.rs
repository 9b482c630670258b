//! Every workflow through the real Codex CLI (`WORK_TEST_CODEX`), against the scripted model
//! server (see `ext_workflows` for the scenarios).

use crate::ext_harness::Cli;

crate::ext_workflows::every_scenario_through!(Cli::Codex; a_key_the_server_quotes_is_redacted, schema_files_are_removed_on_an_interrupt);
