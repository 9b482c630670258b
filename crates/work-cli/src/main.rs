//! `work`: run coding agents in deterministic loops.
//!
//! This binary is the outer edge: it parses arguments (clap), builds the [`ctx::Ctx`]
//! (repository root, state directory, `work.toml`, clock), hands off to one command module
//! under [`cmd`], and turns its result into an exit code through `work_run::status::exit_code`, the one mapping. Errors are printed
//! as one line, `error: failed to …`.
#![cfg_attr(test, allow(clippy::disallowed_methods, reason = "unit tests set up their fixtures directly"))]

mod budget_args;
mod cmd;
mod ctx;
mod dry_run;
mod examples;

use clap::{CommandFactory, FromArgMatches, Parser, Subcommand};
use std::path::PathBuf;
use work_run::output;
use work_run::status::{self, RunStatus};
use work_runtime::ExitStatus;

/// Run coding agents in deterministic loops.
#[derive(Debug, Parser)]
#[command(name = "work", version = env!("WORK_VERSION"), about = "Run coding agents in deterministic loops.", long_about = None, propagate_version = true)]
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
    /// Say only errors and the final summary line on stderr (nothing but the document with `--json`).
    #[arg(short = 'q', long, global = true, conflicts_with = "verbose")]
    quiet: bool,
    /// Also say each dispatch's start and end on stderr: role, model, duration, tokens, cost.
    #[arg(short = 'v', long, global = true)]
    verbose: bool,
    /// The agents' kernel sandbox: `auto` (where the platform has it), `required` (refuse to
    /// start without it), `none` (checks after each dispatch only). See docs/ground-truth.md.
    #[arg(long, value_name = "MODE", global = true, env = "WORK_ISOLATION", value_parser = ["auto", "required", "none"], default_value = "auto")]
    isolation: String,
    /// Colour on stderr: `auto` (on a terminal, unless `NO_COLOR` is set), `always`, `never`.
    #[arg(long, value_name = "WHEN", global = true, value_parser = ["auto", "always", "never"], default_value = "auto")]
    color: String,
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
    /// The run history of this repository (list, prune).
    Runs(cmd::runs::Args),
    /// One run: outcome, items/iterations/tasks, failures, paths.
    Show(cmd::show::Args),
    /// One self-contained HTML report of a run.
    Report(cmd::report::Args),
    /// Write a commented work.toml and ignore .work/.
    Init(cmd::init::Args),
    /// Shell completions generated from the command definitions.
    Completions(cmd::completions::Args),
    /// The man page generated from the command definitions.
    Man(cmd::completions::ManArgs),
    /// Serve the workflows as MCP tools over stdio (docs/hosts.md).
    Mcp(cmd::mcp::Args),
    /// Run dispatches from a NATS queue with this machine's agents (docs/scale-out.md).
    Worker(cmd::worker::Args),
}

/// The command definitions with every command's EXAMPLES section (`examples`): what is
/// parsed, and what completions and man pages are generated from.
pub fn command() -> clap::Command {
    examples::apply(Cli::command())
}

/// What a command returns: its exit status. Bad input is an [`ctx::CliError::BadInput`].
pub type CmdResult = Result<ExitStatus, ctx::CliError>;

fn main() {
    let cli = match command().try_get_matches().and_then(|m| Cli::from_arg_matches(&m)) {
        Ok(c) => c,
        Err(e) => std::process::exit(parse_error(e)),
    };
    let status = match run(cli) {
        Ok(status) => RunStatus::Ended(status),
        Err(e) => {
            // A live display a failed run left is cleared before the error line.
            work_run::progress::finish();
            let line = e.to_string().split_whitespace().collect::<Vec<_>>().join(" ");
            output::err_line(&format!("error: failed to {line}"));
            RunStatus::Ended(e.exit_status())
        }
    };
    let failure = output::failure();
    if let Some(output::WriteFailure::Failed(why)) = &failure {
        output::err_line(&format!("error: failed to write the result to stdout: {why}"));
    }
    // Nothing an agent started outlives `work`, whichever way the run ended.
    work_runtime::spawn::end_leftovers();
    std::process::exit(status::exit_code(status::with_output(status, failure.as_ref())));
}

/// Prints a clap error (help and version on stdout, exit 0; anything else as one
/// `error: failed to parse arguments: …` line, then clap's own tips and usage) and returns
/// the exit code.
fn parse_error(e: clap::Error) -> i32 {
    use clap::error::ErrorKind;
    let code = |s| status::exit_code(RunStatus::Ended(s));
    match e.kind() {
        ErrorKind::DisplayHelp | ErrorKind::DisplayVersion => {
            output::line(e.to_string().trim_end());
            let failure = output::failure();
            if let Some(output::WriteFailure::Failed(why)) = &failure {
                output::err_line(&format!("error: failed to write the help to stdout: {why}"));
            }
            status::exit_code(status::with_output(RunStatus::Ended(ExitStatus::Done), failure.as_ref()))
        }
        ErrorKind::DisplayHelpOnMissingArgumentOrSubcommand => {
            output::err_line(e.to_string().trim_end());
            code(ExitStatus::BadInput)
        }
        _ => {
            let rendered = e.to_string();
            let mut lines = rendered.lines().map(str::trim).filter(|l| !l.is_empty()).peekable();
            let first = lines.next().unwrap_or("bad arguments");
            let mut first = first.strip_prefix("error: ").unwrap_or(first).to_string();
            // "the following required arguments were not provided:" names them on the next lines.
            while first.ends_with(':') || lines.peek().is_some_and(|l| l.starts_with('<') || l.starts_with("--")) {
                match lines.next() {
                    Some(next) if !next.starts_with("tip:") && !next.starts_with("Usage:") => {
                        first = format!("{first} {next}");
                    }
                    _ => break,
                }
            }
            let rest: Vec<&str> = lines
                .filter(|l| l.starts_with("tip:") || l.starts_with("Usage:") || l.starts_with("[possible values:"))
                .collect();
            output::err_line(&format!("error: failed to parse arguments: {first} (see `{} --help`)", help_path(&rest)));
            for l in rest {
                output::err_line(&format!("  {l}"));
            }
            code(ExitStatus::BadInput)
        }
    }
}

/// The command whose help explains a parse error, read from clap's usage line
/// (`Usage: work exhaust --angles <A,B,…> <WHAT>` ⇒ `work exhaust`).
fn help_path(rest: &[&str]) -> String {
    let usage = rest.iter().find_map(|l| l.strip_prefix("Usage:")).unwrap_or("work");
    let words: Vec<&str> =
        usage.split_whitespace().take_while(|w| !w.starts_with(['-', '<', '[']) && *w == w.to_lowercase()).collect();
    if words.first() == Some(&"work") { words.join(" ") } else { "work".into() }
}

fn run(cli: Cli) -> CmdResult {
    use work_run::progress::{Verbosity, set_verbosity};
    set_verbosity(match (cli.quiet, cli.verbose) {
        (true, _) => Verbosity::Quiet,
        (false, true) => Verbosity::Verbose,
        (false, false) => Verbosity::Normal,
    });
    work_run::color::set_choice(cli.color.parse().map_err(ctx::CliError::bad)?);
    let isolation = cli.isolation.parse().map_err(ctx::CliError::bad)?;
    let global = ctx::Global { directory: cli.directory, state_dir: cli.state_dir, overrides: cli.config, isolation };
    match cli.command {
        Command::Exhaust(a) => cmd::exhaust::run(&global, a),
        Command::Until(a) => cmd::until::run(&global, a),
        Command::Loop(a) => cmd::loop_cmd::run(&global, a),
        Command::Implement(a) => cmd::implement::run_implement(&global, a),
        Command::Edit(a) => cmd::implement::run_edit(&global, a),
        Command::Ultra(a) => cmd::ultra::run(&global, a),
        Command::Agents(a) => cmd::agents::run(&global, a),
        Command::Runs(a) => cmd::runs::run(&global, a),
        Command::Show(a) => cmd::show::run(&global, a),
        Command::Report(a) => cmd::report::run(&global, a),
        Command::Init(a) => cmd::init::run(&global, a),
        Command::Completions(a) => cmd::completions::run(a),
        Command::Man(a) => cmd::completions::run_man(a),
        Command::Mcp(a) => cmd::mcp::run(&global, a),
        Command::Worker(a) => cmd::worker::run(&global, a),
    }
}
