//! One module per top-level command. Each parses its own flags, builds what it needs from
//! [`crate::ctx::Ctx`], calls into its workflow crate, and renders the result.

pub mod agents;
pub mod completions;
pub mod exhaust;
pub mod implement;
pub mod init;
pub mod loop_cmd;
pub mod loop_run;
pub mod mcp;
pub mod queue;
pub mod report;
pub mod runs;
pub mod show;
pub mod ultra;
pub mod until;
pub mod worker;

/// A value quoted for `sh` when it needs it (the commands a summary prints run as printed).
pub(crate) fn sh_quote(v: &str) -> String {
    if !v.is_empty() && v.chars().all(|c| c.is_ascii_alphanumeric() || "-_./:=@,+".contains(c)) {
        v.to_string()
    } else {
        format!("'{}'", v.replace('\'', "'\\''"))
    }
}
