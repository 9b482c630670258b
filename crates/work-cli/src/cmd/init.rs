//! `work init [--force]`: writes a commented `work.toml` (agent, roles, gates) at the
//! repository root and adds `.work/` to `.gitignore`. Refuses to replace an existing
//! `work.toml` without `--force` (exit 2, nothing written); the `.gitignore` line is added
//! once, however often it runs. The gates are guessed from the tree (Cargo.toml, package.json,
//! pyproject.toml, go.mod) and stay commented otherwise.

use crate::CmdResult;
use crate::ctx::{CliError, Global};
use std::path::Path;
use work_runtime::ExitStatus;

/// Arguments of `work init`.
#[derive(Debug, clap::Args)]
#[command(after_help = "EXAMPLES:\n  work init\n  work init --force      # replace an existing work.toml")]
pub struct Args {
    /// Replace an existing work.toml.
    #[arg(long)]
    pub force: bool,
}

const HEAD: &str = r#"# work.toml: how `work` runs agents in this repository. Every key is optional.
# Unknown keys are refused by name, so a typo never passes silently.

# The agent every role uses unless [roles.ROLE] says otherwise: "claude", "codex",
# "openai:MODEL", "anthropic:MODEL", "command:PROGRAM ARGS" (the JSON stdin/stdout protocol),
# or the name of an [agents.NAME] entry below. `work agents check` tells which work here.
agent = "claude"

# At most this many agents at once (default: 8; agents wait on models, not on the CPU).
# concurrency = 4

# Models that are never dispatched (case-insensitive substring match).
# banned_models = ["fable"]

# [timeouts]
# dispatch_secs = 600   # one agent attempt
# oracle_secs = 300     # one exhaust oracle command
# gate_secs = 1800      # one gate command

# A named agent with its own settings:
# [agents.local]
# spec = "openai:qwen2.5-coder"
# base_url = "http://127.0.0.1:8080/v1"
# api_key_env = "LOCAL_API_KEY"

# Per-role pins (the defaults live in the engine; reviewers default to the stronger model):
# [roles.finder]
# model = "sonnet"
# effort = "high"
# [roles.quality-reviewer]
# agent = "codex"
# model = "gpt-5"
# effort = "xhigh"

"#;

fn gates(root: &Path) -> String {
    let guess: Option<[&str; 3]> = if root.join("Cargo.toml").is_file() {
        Some(["cargo clippy --all-targets -- -D warnings", "cargo check --all-targets", "cargo test"])
    } else if root.join("package.json").is_file() {
        Some(["npm run lint", "npx tsc --noEmit", "npm test"])
    } else if root.join("pyproject.toml").is_file() {
        Some(["ruff check .", "mypy .", "pytest -q"])
    } else if root.join("go.mod").is_file() {
        Some(["go vet ./...", "go build ./...", "go test ./..."])
    } else {
        None
    };
    let mut s = String::from(
        "# The project's own checks, run by `sh -c` in the repository root (implement, loop run).\n[gates]\n",
    );
    match guess {
        Some([lint, typecheck, test]) => {
            s.push_str(&format!("lint = {lint:?}\ntypecheck = {typecheck:?}\ntest = {test:?}\n"));
        }
        None => s.push_str("# lint = \"make lint\"\n# typecheck = \"make check\"\n# test = \"make test\"\n"),
    }
    s
}

fn root_of(global: &Global) -> Result<std::path::PathBuf, CliError> {
    let cwd = std::env::current_dir().map_err(|e| CliError::Runtime(format!("read the current directory: {e}")))?;
    let dir = match &global.directory {
        Some(d) if d.is_absolute() => d.clone(),
        Some(d) => cwd.join(d),
        None => cwd,
    };
    if !dir.is_dir() {
        return Err(CliError::bad(format!("change to directory `{}`: not a directory", dir.display())));
    }
    let dir = std::fs::canonicalize(&dir).unwrap_or(dir);
    Ok(work_git::Git::toplevel(&dir).unwrap_or(dir))
}

/// Whether `.gitignore` text already ignores the state directory.
fn ignores_state(text: &str) -> bool {
    text.lines().map(str::trim).any(|l| matches!(l, ".work" | ".work/" | "/.work" | "/.work/"))
}

/// Runs `work init`.
pub fn run(global: &Global, args: Args) -> CmdResult {
    let root = root_of(global)?;
    let toml = root.join("work.toml");
    if toml.exists() && !args.force {
        return Err(CliError::bad(format!("write `{}`: it exists (pass --force to replace it)", toml.display())));
    }
    let text = format!("{HEAD}{}", gates(&root));
    work_runtime::fsx::write_atomic(&toml, text.as_bytes())
        .map_err(|e| CliError::Runtime(format!("write `{}`: {e}", toml.display())))?;
    work_run::output::human(format!("wrote {}", toml.display()));
    let ignore = root.join(".gitignore");
    let current = work_runtime::fsx::read_optional(&ignore)
        .map_err(|e| CliError::Runtime(format!("read `{}`: {e}", ignore.display())))?
        .unwrap_or_default();
    if ignores_state(&current) {
        work_run::output::human(format!("{} already ignores .work/", ignore.display()));
    } else {
        let sep = if current.is_empty() || current.ends_with('\n') { "" } else { "\n" };
        let next = format!("{current}{sep}# work's state (run logs, journals, sessions)\n.work/\n");
        work_runtime::fsx::write_atomic(&ignore, next.as_bytes())
            .map_err(|e| CliError::Runtime(format!("write `{}`: {e}", ignore.display())))?;
        work_run::output::human(format!("added .work/ to {}", ignore.display()));
    }
    work_run::output::human("Next: work agents check · work exhaust \"WHAT TO FIND\"");
    Ok(ExitStatus::Done)
}
