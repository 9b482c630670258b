//! One workflow run: the harness every `work` command goes through.
//!
//! - [`harness`]: the [`harness::Workflow`] interface (state key, preflight, drive) and the
//!   one path preflight → locks → drive → render;
//! - [`lock`]: the state lock and the working-tree lock, with the holder's pid and run id;
//! - [`output`]: the one writer of stdout (redacted once, never panics on a closed pipe or a
//!   full disk);
//! - [`status`]: every workflow's typed outcome mapped to a [`status::RunStatus`], and the one
//!   exhaustive [`status::exit_code`];
//! - [`signals`]: SIGINT / SIGTERM, with the exact resume command.

pub mod harness;
pub mod lock;
pub mod output;
pub mod signals;
pub mod status;
