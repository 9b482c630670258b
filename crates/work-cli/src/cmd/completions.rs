//! `work completions SHELL` and `work man [--out-dir DIR]`, both generated from the clap
//! definitions of the binary itself (clap_complete, clap_mangen), so they never drift from
//! the flags.

use crate::CmdResult;
use crate::ctx::CliError;
use std::path::PathBuf;
use work_runtime::ExitStatus;

/// Arguments of `work completions`.
#[derive(Debug, clap::Args)]
#[command(
    after_help = "EXAMPLES:\n  work completions bash > ~/.local/share/bash-completion/completions/work\n  work completions zsh > \"${fpath[1]}/_work\"\n  work completions fish > ~/.config/fish/completions/work.fish"
)]
pub struct Args {
    /// The shell.
    #[arg(value_name = "SHELL")]
    pub shell: clap_complete::Shell,
}

/// Arguments of `work man`.
#[derive(Debug, clap::Args)]
#[command(after_help = "EXAMPLES:\n  work man | man -l -\n  work man --out-dir /usr/local/share/man/man1")]
pub struct ManArgs {
    /// Write `work.1` and one page per command and subcommand (`work-loop-run.1` for `work loop
    /// run`) into DIR instead of printing `work.1`.
    #[arg(long, value_name = "DIR")]
    pub out_dir: Option<PathBuf>,
}

/// Runs `work completions`.
pub fn run(args: Args) -> CmdResult {
    let mut cmd = crate::command();
    let mut buf = Vec::new();
    clap_complete::generate(args.shell, &mut cmd, "work", &mut buf);
    print_bytes(&buf)
}

/// Prints to stdout; a closed pipe (`| head`) is not an error.
fn print_bytes(bytes: &[u8]) -> CmdResult {
    use std::io::Write;
    match std::io::stdout().lock().write_all(bytes) {
        Ok(()) => Ok(ExitStatus::Done),
        Err(e) if e.kind() == std::io::ErrorKind::BrokenPipe => Ok(ExitStatus::Done),
        Err(e) => Err(CliError::Runtime(format!("print to stdout: {e}"))),
    }
}

fn page(cmd: clap::Command) -> Result<Vec<u8>, CliError> {
    let mut buf = Vec::new();
    clap_mangen::Man::new(cmd).render(&mut buf).map_err(|e| CliError::Runtime(format!("render the man page: {e}")))?;
    Ok(buf)
}

/// Runs `work man`.
pub fn run_man(args: ManArgs) -> CmdResult {
    let mut cmd = crate::command();
    let Some(dir) = args.out_dir else {
        return print_bytes(&page(cmd)?);
    };
    let write = |name: String, bytes: Vec<u8>| {
        let p = dir.join(name);
        work_runtime::fsx::write_atomic(&p, &bytes)
            .map_err(|e| CliError::Runtime(format!("write `{}`: {e}", p.display())))?;
        work_run::output::line(p.display().to_string());
        Ok::<(), CliError>(())
    };
    cmd.build();
    let mut pages = Vec::new();
    subcommand_pages(&cmd, "work", &mut pages);
    for (name, sub) in pages {
        write(format!("{name}.1"), page(sub.display_name(&name))?)?;
    }
    write("work.1".into(), page(cmd.clone())?)?;
    Ok(ExitStatus::Done)
}

/// Every visible subcommand under `cmd`, at any depth, named as git names its pages
/// (`work-loop-run` for `work loop run`).
fn subcommand_pages(cmd: &clap::Command, prefix: &str, pages: &mut Vec<(String, clap::Command)>) {
    for sub in cmd.get_subcommands().filter(|s| !s.is_hide_set() && s.get_name() != "help") {
        let name = format!("{prefix}-{}", sub.get_name());
        pages.push((name.clone(), sub.clone()));
        subcommand_pages(sub, &name, pages);
    }
}
