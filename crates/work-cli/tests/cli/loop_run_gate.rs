//! `loop run`'s human output at a gate and at DONE: one short block, one command.

use crate::loop_run::{DIR, setup};
use crate::support::Scenario;

const TEST: &str = "test -f hello.txt";

/// Runs `work loop run DIR --agent A --test-cmd T extra…` and returns (code, stdout, stderr)
/// with the scenario's paths and the run ids replaced by placeholders.
fn run(s: &Scenario, agent: &str, extra: &[&str]) -> (i32, String, String) {
    let mut args = vec!["loop", "run", DIR, "--agent", agent, "--test-cmd", TEST];
    args.extend_from_slice(extra);
    let (code, out, err) = s.run(&args);
    let root = s.root().display().to_string();
    let clean = |t: &str| {
        t.lines()
            .map(|l| {
                let l = l.replace(&root, "ROOT");
                let l = l.split(" · work report").next().unwrap_or(&l).to_string();
                let prefix = "20260101T000000000Z-loop-";
                match l.find(prefix) {
                    Some(i) => {
                        // The run id ends where its hexadecimal suffix does (its length varies).
                        let rest = &l[i + prefix.len()..];
                        let end = rest.find(|c: char| !c.is_ascii_hexdigit()).unwrap_or(rest.len());
                        format!("{}RUN{}", &l[..i], &rest[end..])
                    }
                    None => l,
                }
            })
            .collect::<Vec<_>>()
            .join("\n")
    };
    (code, clean(&out), clean(&err))
}

/// The summary block: from `outcome:` to the end.
fn block(err: &str) -> String {
    let at = err.find("outcome:").expect("a summary");
    err[at..].to_string()
}

#[test]
fn a_gate_says_its_one_command_once_with_every_flag_the_resume_needs() {
    let s = Scenario::new();
    let agent = setup(&s, TEST, true);
    let (code, out, err) = run(&s, &agent, &[]);
    assert_eq!(code, 3, "{out}\n{err}");
    let quoted = "'command:python3 ROOT/.agents/agent.py'";
    let cmd = format!("work loop run {DIR} --resume --agent {quoted} --test-cmd '{TEST}' --approve");
    assert_eq!(
        out,
        format!(
            "paused (spec-human-gate): the spec awaits a person's approval: {DIR}/spec.md already says `Approved`, but that predates this gate\n\
             state: SPEC-HUMAN-GATE  run: loop-20260101T000000Z-{}  review mode: light",
            out.rsplit("loop-20260101T000000Z-").next().unwrap_or("").split_whitespace().next().unwrap_or("")
        )
    );
    assert_eq!(
        block(&err),
        format!(
            "outcome: paused (spec-human-gate)\n\
             spent: 0 dispatch(es) · 0 tokens (0 in, 0 out) · $0.0000\n\
             next: {cmd}  (or --reject \"<what to change>\" in place of --approve)\n\
             look back: work show RUN\n\
             events: ROOT/.work/runs/RUN/events.jsonl"
        )
    );
    let both = format!("{out}\n{err}");
    assert_eq!(both.matches("work loop run").count(), 1, "one command in all:\n{both}");
    assert!(err.contains("loop: waiting for a person (spec-human-gate)\n"), "{err}");
}

#[test]
fn done_with_the_change_uncommitted_says_so_in_one_line_and_committed_says_nothing() {
    let hint = "note: the change is not committed: inspect it with `git status` and `git diff`, then `git add` and `git commit` it";
    let s = Scenario::new();
    let agent = setup(&s, TEST, true);
    for extra in [&[][..], &["--resume", "--approve"], &["--resume", "--approve"]] {
        let (code, out, err) = run(&s, &agent, extra);
        assert_eq!(code, 3, "{out}\n{err}");
        assert!(!err.contains(hint), "{err}");
    }
    let (code, out, err) = run(&s, &agent, &["--resume", "--approve"]);
    assert_eq!(code, 0, "{out}\n{err}");
    assert!(out.starts_with("done (done): code run finished"), "{out}");
    assert_eq!(err.matches(hint).count(), 1, "{err}");
    // Committed: no hint (a run already DONE reports DONE again).
    s.git(&["add", "-A"]);
    s.git(&["commit", "-qm", "hello"]);
    let (code, out, err) = run(&s, &agent, &["--resume"]);
    assert_eq!(code, 0, "{out}\n{err}");
    assert!(!err.contains(hint), "{err}");
}
