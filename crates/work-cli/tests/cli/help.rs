//! The conventions of the command line itself, through the real binary: every command's help
//! has an EXAMPLES section, and an argument error is one `error:` line first, followed by
//! clap's own suggestion, possible values and usage.

use crate::support::{Scenario, assert_one_line_error};

/// The subcommand names listed under `Commands:` in a help text.
fn subcommands(help: &str) -> Vec<String> {
    let Some(section) = help.split("\nCommands:\n").nth(1) else { return Vec::new() };
    section
        .lines()
        .take_while(|l| !l.trim().is_empty())
        .filter(|l| l.starts_with("  ") && !l.starts_with("   "))
        .filter_map(|l| l.split_whitespace().next())
        .filter(|n| *n != "help")
        .map(str::to_string)
        .collect()
}

#[test]
fn every_command_help_has_an_examples_section_of_work_commands() {
    let s = Scenario::new();
    let mut queue = vec![Vec::<String>::new()];
    let mut seen = 0;
    while let Some(path) = queue.pop() {
        let mut args: Vec<&str> = path.iter().map(String::as_str).collect();
        args.push("--help");
        let (code, out, err) = s.run(&args);
        assert_eq!(code, 0, "work {args:?}: {err}");
        let examples = out
            .split("\nEXAMPLES:\n")
            .nth(1)
            .unwrap_or_else(|| panic!("`work {} --help` has no EXAMPLES section:\n{out}", path.join(" ")));
        let first = examples.lines().next().unwrap_or_default().trim();
        assert!(first.starts_with("work ") || first.contains(" work "), "`work {}`: {first}", path.join(" "));
        seen += 1;
        for sub in subcommands(&out) {
            let mut p = path.clone();
            p.push(sub);
            queue.push(p);
        }
    }
    assert!(seen > 40, "the walk reached every command ({seen})");
}

#[test]
fn a_misspelt_command_flag_or_value_keeps_clap_s_suggestion_values_and_usage() {
    let s = Scenario::new();
    let cases: &[(&[&str], &[&str])] = &[
        (
            &["exhuast", "x"],
            &["unrecognized subcommand 'exhuast'", "tip: a similar subcommand exists: 'exhaust'", "Usage: work"],
        ),
        (
            &["exhaust", "x", "--angel", "a"],
            &[
                "unexpected argument '--angel'",
                "(see `work exhaust --help`)",
                "tip: a similar argument exists: '--angles'",
                "Usage: work exhaust",
            ],
        ),
        (
            &["completions", "bsh"],
            &[
                "invalid value 'bsh'",
                "[possible values: bash, elvish, fish, powershell, zsh]",
                "tip: a similar value exists: 'bash'",
            ],
        ),
        (
            &["until", "x", "--goal", "g", "--mode", "humangate"],
            &["[possible values: auto, human-gate]", "'human-gate'"],
        ),
        (&["runs", "gc"], &["required arguments were not provided: --older-than <DURATION>", "Usage: work runs gc"]),
    ];
    for (args, want) in cases {
        let (code, out, err) = s.run(args);
        assert_eq!(code, 2, "work {args:?}: {err}");
        assert_eq!(out, "", "nothing on stdout");
        assert!(err.starts_with("error: failed to parse arguments: "), "one error line first: {err}");
        assert_one_line_error(&err);
        for w in *want {
            assert!(err.contains(w), "work {args:?} says `{w}`:\n{err}");
        }
    }
}
