//! One workflow run: the harness every `work` command goes through.
//!
//! - [`color`]: the one colour decision (`--color`, `NO_COLOR`);
//! - [`harness`]: the [`harness::Workflow`] interface (state key, preflight, drive) and the
//!   one path preflight → locks → drive → render;
//! - [`lock`]: the state lock and the working-tree lock, with the holder's pid and run id;
//! - [`output`]: the one writer of stdout (redacted once, never panics on a closed pipe or a
//!   full disk);
//! - [`status`]: every workflow's typed outcome mapped to a [`status::RunStatus`], and the one
//!   exhaustive [`status::exit_code`];
//! - [`signals`]: SIGINT / SIGTERM, with the exact resume command;
//! - [`progress`]: the one renderer of a run's typed events on stderr (a live status list on
//!   a terminal, plain lines otherwise) and the `-q` / `-v` verbosity.
#![cfg_attr(test, allow(clippy::disallowed_methods, reason = "unit tests set up their fixtures directly"))]

pub mod color;
pub mod harness;
pub mod lock;
pub mod output;
pub mod progress;
pub mod signals;
pub mod status;
