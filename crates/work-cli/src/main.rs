//! `work`: run coding agents in deterministic loops.
//!
//! This binary is the outer edge: it parses arguments (clap), builds the [`ctx::Ctx`]
//! (repository root, state directory, `work.toml`, clock), hands off to one command module
//! under [`cmd`], and turns its result into an exit code (CONTRACTS §1). Errors are printed
//! as one line, `error: failed to …`.

mod budget_args;
mod cmd;
mod ctx;

use clap::{Parser, Subcommand};
use std::io::Write;
use std::path::PathBuf;
use work_runtime::ExitStatus;

/// Run coding agents in deterministic loops.
#[derive(Debug, Parser)]
#[command(name = "work", version, about = "Run coding agents in deterministic loops.", long_about = None, propagate_version = true)]
struct Cli {
    /// Change to DIR before doing anything.
    #[arg(short = 'C', value_name = "DIR", global = true)]
    directory: Option<PathBuf>,
    /// Keep durable state in DIR instead of `<repo>/.work`.
    #[arg(long, value_name = "DIR", global = true)]
    state_dir: Option<PathBuf>,
    /// Override a work.toml setting (`-c concurrency=4`, `-c roles.finder.model=opus`).
    #[arg(short = 'c', value_name = "KEY=VALUE", global = true)]
    config: Vec<String>,
    #[command(subcommand)]
    command: Command,
}

#[derive(Debug, Subcommand)]
enum Command {
    /// Discovery until dry: parallel finders, dedup barrier, three oracle gates.
    Exhaust(cmd::exhaust::Args),
    /// Loop one worker until a checkable condition holds.
    Until(cmd::until::Args),
    /// The work-loop state machine, cohort bookkeeping, lints and preflight.
    #[command(name = "loop")]
    Loop(cmd::loop_cmd::Args),
    /// The per-task implementer → spec review → quality review pipeline.
    Implement(cmd::implement::ImplementArgs),
    /// A compiler-driven edit at a definition site.
    Edit(cmd::implement::EditArgs),
    /// The evidence-driven goal runner (RED → GREEN per success criterion).
    Ultra(cmd::ultra::Args),
    /// Inspect agent backends.
    Agents(cmd::agents::Args),
    /// Serve the workflows as MCP tools over stdio (docs/hosts.md).
    Mcp(cmd::mcp::Args),
}

/// What a command returns: its exit status. Bad input is an [`ctx::CliError::BadInput`].
pub type CmdResult = Result<ExitStatus, ctx::CliError>;

fn main() {
    let cli = match Cli::try_parse() {
        Ok(c) => c,
        Err(e) => {
            use clap::error::ErrorKind;
            match e.kind() {
                ErrorKind::DisplayHelp
                | ErrorKind::DisplayVersion
                | ErrorKind::DisplayHelpOnMissingArgumentOrSubcommand => {
                    let _ = e.print();
                    std::process::exit(if e.kind() == ErrorKind::DisplayHelpOnMissingArgumentOrSubcommand {
                        2
                    } else {
                        0
                    });
                }
                _ => {
                    let rendered = e.to_string();
                    let mut lines = rendered.lines().map(str::trim).filter(|l| !l.is_empty());
                    let first = lines.next().unwrap_or("bad arguments");
                    let mut first = first.strip_prefix("error: ").unwrap_or(first).to_string();
                    // "the following required arguments were not provided:" names them on the next line.
                    if first.ends_with(':')
                        && let Some(next) = lines.next()
                    {
                        first = format!("{first} {next}");
                    }
                    eprintln!("error: failed to parse arguments: {first} (see `work --help`)");
                    std::process::exit(ExitStatus::BadInput.code());
                }
            }
        }
    };
    let code = match run(cli) {
        Ok(status) => status.code(),
        Err(e) => {
            let redactor = work_runtime::redact::Redactor::from_env();
            let line = e.to_string().split_whitespace().collect::<Vec<_>>().join(" ");
            eprintln!("error: failed to {}", redactor.redact(&line));
            e.exit_status().code()
        }
    };
    let _ = std::io::stdout().flush();
    std::process::exit(code);
}

fn run(cli: Cli) -> CmdResult {
    let global = ctx::Global { directory: cli.directory, state_dir: cli.state_dir, overrides: cli.config };
    match cli.command {
        Command::Exhaust(a) => cmd::exhaust::run(&global, a),
        Command::Until(a) => cmd::until::run(&global, a),
        Command::Loop(a) => cmd::loop_cmd::run(&global, a),
        Command::Implement(a) => cmd::implement::run_implement(&global, a),
        Command::Edit(a) => cmd::implement::run_edit(&global, a),
        Command::Ultra(a) => cmd::ultra::run(&global, a),
        Command::Agents(a) => cmd::agents::run(&global, a),
        Command::Mcp(a) => cmd::mcp::run(&global, a),
    }
}
