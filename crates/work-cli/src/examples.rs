//! The EXAMPLES section of every command's help, in one table: [`apply`] puts each into its
//! command's `after_help` (a command that already has one keeps it), so `work … --help` and the
//! man pages show it. A unit test walks the whole command tree: every command has a section,
//! and every example line parses with the real definitions.

use clap::Command;

/// The examples of each command, by its path under `work` ("" is `work` itself).
const EXAMPLES: &[(&str, &[&str])] = &[
    (
        "",
        &[
            "work exhaust \"unwrap and expect calls\"",
            "work runs list",
            "work -q until \"file NOTES.md exists\" --goal \"start the notes\" --json",
            "work -v implement --plan PLAN.md --iter-id it-1 --test-cmd \"cargo test\"",
        ],
    ),
    (
        "exhaust",
        &[
            "work exhaust \"TODO markers\" -k 2 --agent \"command:python3 examples/agents/grep_finder.py\"",
            "work exhaust \"places that touch job state\" --seed-oracle \"grep -rn 'transition(' src\" --json",
            "work exhaust \"unwrap calls\" --max-rounds 5 --budget-usd 0.50   # stops with stoppedReason budget",
        ],
    ),
    (
        "until",
        &[
            "work until \"file NOTES.md exists\" --goal \"start the notes\" --agent \"command:python3 examples/agents/until_worker.py\"",
            "work until \"make lint exits 0\" --goal \"fix the lint\" --verify \"make lint\" --max 5",
            "work until list",
            "work until resume lint --json",
        ],
    ),
    ("loop", &["work loop engine status docs/specs/login", "work loop run docs/specs/login --agent claude"]),
    ("loop engine", &["work loop engine init docs/specs/login --mode code", "work loop engine status --json"]),
    (
        "loop engine init",
        &["work loop engine init docs/specs/login --mode code", "work loop engine init --mode spec-plan --json"],
    ),
    (
        "loop engine transition",
        &[
            "work loop engine transition docs/specs/login spec-ready",
            "work loop engine transition reviewers-clean --json",
        ],
    ),
    ("loop engine status", &["work loop engine status docs/specs/login", "work loop engine status --json"]),
    ("loop engine reset", &["work loop engine reset docs/specs/login"]),
    ("loop engine resume", &["work loop engine resume docs/specs/login --json"]),
    ("loop engine table", &["work loop engine table", "work loop engine table --json"]),
    ("loop cohort", &["work loop cohort status docs/specs/login", "work loop cohort schedule --json"]),
    ("loop cohort init", &["work loop cohort init docs/specs/login --run-id run-1"]),
    ("loop cohort identity", &["work loop cohort identity docs/specs/login --json"]),
    (
        "loop cohort approve-plan",
        &[
            "work loop cohort approve-plan docs/specs/login --expect-run-id run-1",
            "work loop cohort approve-plan --rebaseline --expect-run-id run-1",
        ],
    ),
    ("loop cohort schedule", &["work loop cohort schedule docs/specs/login --json --expect-run-id run-1"]),
    (
        "loop cohort wave",
        &[
            "work loop cohort wave check --expect more",
            "work loop cohort wave advance --from-index 0 --expect-run-id run-1",
        ],
    ),
    (
        "loop cohort wave advance",
        &["work loop cohort wave advance docs/specs/login --from-index 0 --expect-run-id run-1"],
    ),
    ("loop cohort wave check", &["work loop cohort wave check docs/specs/login --expect last --wave-index 1"]),
    (
        "loop cohort record-attempt",
        &["work loop cohort record-attempt --phase implement --cycle-id run-1:7 --expect-run-id run-1"],
    ),
    (
        "loop cohort review",
        &[
            "work loop cohort review classify adjudication.md",
            "work loop cohort review record --all-skipped --expect-run-id run-1",
        ],
    ),
    (
        "loop cohort review record",
        &[
            "work loop cohort review record --fingerprint f1 --fingerprint f2 --expect-run-id run-1",
            "work loop cohort review record --report adjudication.md --adjudication --expect-run-id run-1",
        ],
    ),
    ("loop cohort review inspect", &["work loop cohort review inspect --adjudication adjudication.md --json"]),
    ("loop cohort review classify", &["work loop cohort review classify adjudication.md --json"]),
    (
        "loop cohort plan",
        &[
            "work loop cohort plan check-current --require-schedule",
            "work loop cohort plan mark-reviewed --expect-run-id run-1",
        ],
    ),
    ("loop cohort plan check-current", &["work loop cohort plan check-current docs/specs/login --require-schedule"]),
    ("loop cohort plan mark-reviewed", &["work loop cohort plan mark-reviewed docs/specs/login --expect-run-id run-1"]),
    ("loop cohort check", &["work loop cohort check docs/specs/login --json"]),
    ("loop cohort status", &["work loop cohort status docs/specs/login", "work loop cohort status --json"]),
    ("loop cohort reset", &["work loop cohort reset docs/specs/login"]),
    ("loop cohort dispatch-decision", &["work loop cohort dispatch-decision --json   # disabled: exits non-zero"]),
    ("loop cohort auto-parallel", &["work loop cohort auto-parallel --json   # disabled: exits non-zero"]),
    ("loop cohort worktree", &["work loop cohort worktree --json   # disabled: exits non-zero"]),
    ("loop lint-spec-status", &["work loop lint-spec-status", "work loop lint-spec-status --root . --json"]),
    (
        "loop workspace-status",
        &["work loop workspace-status", "work loop workspace-status --spec docs/specs/login --json"],
    ),
    ("loop base-freshness", &["work loop base-freshness", "work loop base-freshness --target origin/main --json"]),
    (
        "loop run",
        &[
            "work loop run docs/specs/login --agent claude",
            "work loop run docs/specs/login --light --budget-usd 2",
            "work loop run docs/specs/login --resume --approve",
        ],
    ),
    (
        "worker",
        &[
            "work worker --queue nats://127.0.0.1:4222 --agent claude",
            "work worker --queue nats://10.0.0.1:4222,nats://10.0.0.2:4222 --concurrency 4 --name pool-1",
            "work worker status",
        ],
    ),
    ("worker status", &["work worker status", "work worker status --json"]),
    (
        "implement",
        &[
            "work implement --plan PLAN.md --iter-id it-1 --test-cmd \"grep -q hi hello.txt\" --agent \"command:python3 examples/agents/implement_roles.py\"",
            "work implement --plan PLAN.md --iter-id it-1 --range 2-3 --json",
            "work implement --plan PLAN.md --iter-id it-1   # again: continues task by task",
        ],
    ),
    (
        "edit",
        &[
            "work edit --description \"rename parse to parse_args\" --def-site src/cli.rs:12 --test-cmd \"cargo test\"",
            "work edit --carrier-file edit.json --json",
        ],
    ),
    (
        "ultra",
        &[
            "work ultra examples/goals/greet.toml --agent \"command:python3 examples/agents/ultra_implementer.py\"",
            "work ultra GOAL.toml --budget-usd 5 --json",
        ],
    ),
    ("agents", &["work agents check", "work agents try \"say hi as JSON\" --agent claude"]),
    ("agents check", &["work agents check", "work agents check --json"]),
    (
        "agents try",
        &[
            "work agents try \"answer {\\\"ok\\\": true}\" --agent claude",
            "work agents try \"list the TODOs\" --role finder --json",
        ],
    ),
    ("runs list", &["work runs list", "work runs list --json"]),
    ("runs gc", &["work runs gc --older-than 30d", "work runs gc --older-than 12h --json"]),
    ("mcp", &["work mcp", "codex mcp add work -- work mcp"]),
];

/// The EXAMPLES section of the command at `path`, when the table has one.
pub fn section(path: &str) -> Option<String> {
    let (_, lines) = EXAMPLES.iter().find(|(p, _)| *p == path)?;
    Some(format!("EXAMPLES:\n{}", lines.iter().map(|l| format!("  {l}")).collect::<Vec<_>>().join("\n")))
}

/// Puts the table's section into every command under `cmd` that has none of its own.
pub fn apply(cmd: Command) -> Command {
    apply_at(cmd, "")
}

fn apply_at(mut cmd: Command, path: &str) -> Command {
    if cmd.get_after_help().is_none()
        && let Some(s) = section(path)
    {
        cmd = cmd.after_help(s);
    }
    let names: Vec<String> = cmd.get_subcommands().map(|s| s.get_name().to_string()).collect();
    for name in names {
        let sub_path = if path.is_empty() { name.clone() } else { format!("{path} {name}") };
        cmd = cmd.mut_subcommand(&name, |s| apply_at(s, &sub_path));
    }
    cmd
}

#[cfg(test)]
mod tests {
    use super::*;
    use clap::{CommandFactory, FromArgMatches};

    /// Every command's path under `work`, depth first.
    fn paths(cmd: &Command, path: &str, out: &mut Vec<(String, Option<String>)>) {
        out.push((path.to_string(), cmd.get_after_help().map(|h| h.to_string())));
        for s in cmd.get_subcommands().filter(|s| !s.is_hide_set() && s.get_name() != "help") {
            let p = if path.is_empty() { s.get_name().to_string() } else { format!("{path} {}", s.get_name()) };
            paths(s, &p, out);
        }
    }

    /// The argv of one example line: the `work …` command before any comment, pipe or redirect.
    fn argv(line: &str) -> Vec<String> {
        let words = shell_words::split(line).unwrap_or_else(|e| panic!("`{line}` does not split: {e}"));
        words.into_iter().take_while(|w| !["#", "|", ">", "&&", "2>"].contains(&w.as_str())).collect()
    }

    #[test]
    fn every_command_has_examples_and_every_example_parses() {
        let mut cmd = apply(crate::Cli::command());
        cmd.build();
        let mut all = Vec::new();
        paths(&cmd, "", &mut all);
        assert!(all.len() > 40, "the walk found the command tree: {}", all.len());
        let mut checked = 0;
        for (path, help) in all {
            let help = help.unwrap_or_else(|| panic!("`work {path}` has no EXAMPLES section"));
            assert!(help.starts_with("EXAMPLES:\n"), "`work {path}`: {help}");
            for line in help.lines().skip(1).map(str::trim).filter(|l| l.starts_with("work ")) {
                let args = argv(line);
                let m = cmd.clone().try_get_matches_from(&args).unwrap_or_else(|e| panic!("`{line}`: {e}"));
                crate::Cli::from_arg_matches(&m).unwrap_or_else(|e| panic!("`{line}`: {e}"));
                checked += 1;
            }
        }
        assert!(checked > 60, "only {checked} examples were parsed");
        for (p, _) in EXAMPLES {
            let mut c = &cmd;
            for word in p.split_whitespace() {
                c = c.find_subcommand(word).unwrap_or_else(|| panic!("the table names `work {p}`, no such command"));
            }
        }
    }
}
