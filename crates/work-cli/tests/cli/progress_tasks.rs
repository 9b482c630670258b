//! The task rows of the live status list (implement, loop run): one row per task — `●` while
//! it runs, with the role, model and elapsed time of its dispatch in flight; `✓` done, `⚠`
//! not done — and a bar of done/total tasks; on a real pseudo-terminal, and none of it (no
//! escape code, no row) when stderr is a pipe.

use crate::progress::{on_a_terminal, strip_escapes};
use crate::support::Scenario;
use std::path::Path;

/// Runs an example agent of this repository after a pause, so a display has a dispatch in
/// flight to draw.
const SLOW: &str = r#"
import subprocess, sys, time
data = sys.stdin.read()
time.sleep(1.0)
p = subprocess.run([sys.executable, sys.argv[1]], input=data, capture_output=True, text=True)
sys.stdout.write(p.stdout)
sys.stderr.write(p.stderr)
sys.exit(p.returncode)
"#;

fn slow(s: &Scenario, example: &str) -> String {
    s.write(".agents/slow.py", SLOW);
    let ex = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../examples/agents").join(example);
    format!("command:python3 {} {}", s.path(".agents/slow.py").display(), ex.display())
}

/// Task 1 the example implementer can do; task 2 names no file, so it asks for context.
fn plan_repo() -> Scenario {
    let s = Scenario::new();
    s.write(".git/info/exclude", ".agents/\n.agent-state/\n.work/\n");
    s.write(
        "PLAN.md",
        "## Task 1: Add the greeting\nCreate `hello.txt` containing `hi`.\n\n## Task 2: Make it nicer\nPolish it.\n",
    );
    s.commit("plan");
    s
}

fn args(list: &[&str]) -> Vec<String> {
    list.iter().map(|a| a.to_string()).collect()
}

fn implement_args(agent: &str) -> Vec<String> {
    args(&["implement", "--plan", "PLAN.md", "--iter-id", "it-1", "--test-cmd", "true", "--agent", agent, "--json"])
}

#[test]
fn implement_on_a_terminal_draws_a_row_per_task_with_its_dispatch_in_flight_and_the_task_bar() {
    let s = plan_repo();
    let agent = slow(&s, "implement_roles.py");
    let (code, out, tty) = on_a_terminal(&s, &implement_args(&agent), false);
    let text = strip_escapes(&tty);
    assert_eq!(code, 1, "task 2 needs context:\n{text}");
    // The running task's row names the role and model of the dispatch in flight.
    for role in ["implementer", "spec-reviewer", "quality-reviewer"] {
        assert!(text.contains(&format!("● task 1 Add the greeting · {role} · ")), "{role} in flight:\n{text}");
    }
    assert!(text.contains("✓ task 1 Add the greeting · 3 dispatch(es) · "), "task 1 done:\n{text}");
    assert!(text.contains("● task 2 Make it nicer · implementer · "), "task 2 running:\n{text}");
    assert!(text.contains("⚠ task 2 Make it nicer · 1 dispatch(es) · "), "task 2 not done:\n{text}");
    assert!(text.contains("blocked: task 2: the implementer needs context"), "why, on its row:\n{text}");
    // The bar counts done tasks against the plan.
    assert!(text.contains("0/2 tasks") && text.contains("1/2 tasks"), "the task bar:\n{text}");
    assert!(!text.contains("2/2 tasks"), "a task not done is not counted:\n{text}");
    assert!(text.contains("● implement · task 2 · 1 in flight"), "the status row names the task:\n{text}");
    // In colour (NO_COLOR unset): done green, blocked red.
    assert!(tty.contains("\x1b[32m✓\x1b[0m task 1") && tty.contains("\x1b[31m⚠\x1b[0m task 2"), "{tty:?}");
    let doc: serde_json::Value = serde_json::from_str(&out).expect("stdout is the end-report alone");
    assert_eq!(doc["status"], "NEEDS_CONTEXT");
}

#[test]
fn implement_piped_prints_the_plain_task_lines_and_no_row_or_escape_code() {
    let s = plan_repo();
    let agent = slow(&s, "implement_roles.py");
    let a = implement_args(&agent);
    let out = s.work().args(&a).env_remove("NO_COLOR").env("TERM", "xterm-256color").output().expect("run");
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(!err.contains('\x1b'), "no escape code: {err:?}");
    assert!(!err.contains("● ") && !err.contains("✓ ") && !err.contains("⚠ ") && !err.contains('█'), "{err}");
    assert!(err.contains("task 1: Add the greeting\n") && err.contains("task 2: Make it nicer\n"), "{err}");
    // -v adds one plain line per task end.
    let s = plan_repo();
    let agent = slow(&s, "implement_roles.py");
    let a: Vec<String> = ["-v".to_string()].into_iter().chain(implement_args(&agent)).collect();
    let out = s.work().args(&a).output().expect("run");
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("task 1 DONE: 3 dispatch(es) · "), "{err}");
    assert!(err.contains("task 2 not done: 1 dispatch(es) · ") && err.contains("blocked: task 2:"), "{err}");
}

/// `work loop run` up to the merge gate: the spec and plan gates are approved piped, the run
/// that implements the plan is `run`'s.
fn loop_to_implementation(s: &Scenario, agent: &str) -> Vec<String> {
    let base = args(&[
        "loop",
        "run",
        "docs/specs/greeting",
        "--light",
        "--test-cmd",
        "grep -q hi hello.txt",
        "--agent",
        agent,
    ]);
    std::fs::create_dir_all(s.path("docs/specs/greeting")).expect("mkdir");
    let (code, _, err) = s.run(&base.iter().map(String::as_str).collect::<Vec<_>>());
    assert_eq!(code, 3, "the spec gate: {err}");
    let resume: Vec<String> = base.iter().cloned().chain(args(&["--resume", "--approve"])).collect();
    let (code, _, err) = s.run(&resume.iter().map(String::as_str).collect::<Vec<_>>());
    assert_eq!(code, 3, "the plan gate: {err}");
    resume
}

#[test]
fn loop_run_on_a_terminal_draws_the_task_row_and_the_bar_and_piped_it_does_not() {
    let s = Scenario::new();
    s.write(".git/info/exclude", ".agents/\n.agent-state/\n.work/\n");
    let agent = slow(&s, "loop_roles.py");
    let resume = loop_to_implementation(&s, &agent);
    let (code, _, tty) = on_a_terminal(&s, &resume, true);
    let text = strip_escapes(&tty);
    assert_eq!(code, 3, "implemented and reviewed, paused at the merge gate:\n{text}");
    assert!(text.contains("● task 1 Add the greeting · implementer · "), "the dispatch in flight:\n{text}");
    assert!(text.contains("✓ task 1 Add the greeting · 1 dispatch(es) · "), "the task done:\n{text}");
    assert!(text.contains("0/1 tasks") && text.contains("1/1 tasks"), "the plan's tasks:\n{text}");
    assert!(text.contains("● adversarial-reviewer"), "the review dispatch has its own row:\n{text}");
    assert!(!tty.contains("\x1b[32m") && !tty.contains("\x1b[33m"), "NO_COLOR: no colour");
    // The same step piped: plain lines only.
    let p = Scenario::new();
    p.write(".git/info/exclude", ".agents/\n.agent-state/\n.work/\n");
    let agent = slow(&p, "loop_roles.py");
    let resume = loop_to_implementation(&p, &agent);
    let out = p.work().args(&resume).env_remove("NO_COLOR").env("TERM", "xterm-256color").output().expect("run");
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(3), "{err}");
    assert!(!err.contains('\x1b') && !err.contains("● ") && !err.contains("✓ ") && !err.contains('█'), "{err}");
    assert!(err.contains("loop: wave 0: task 1: Add the greeting"), "{err}");
    // The summary names the one command that continues the run, with the flags it needs.
    let next = err.lines().find_map(|l| l.strip_prefix("next: ")).unwrap_or_else(|| panic!("a next step: {err}"));
    assert!(next.starts_with("work loop run ") && next.contains(" --resume --agent "), "{next}");
    assert_eq!(next.matches("work loop run").count(), 1, "{next}");
}

#[test]
fn implement_on_a_dirty_tree_says_to_commit_or_stash_and_that_the_same_command_continues() {
    let s = plan_repo();
    s.write("stray.txt", "not committed\n");
    let a = implement_args(&slow(&s, "implement_roles.py"));
    let (code, _, err) = s.run(&a[..a.len() - 1].iter().map(String::as_str).collect::<Vec<_>>());
    assert_eq!(code, 1, "{err}");
    assert!(err.contains("outcome: BLOCKED dirty-tree"), "{err}");
    assert!(err.contains("spent: 0 dispatch(es) · 0 tokens (0 in, 0 out) · $0.0000"), "nothing dispatched: {err}");
    let next = err.lines().find_map(|l| l.strip_prefix("next: ")).unwrap_or_else(|| panic!("a next step: {err}"));
    assert_eq!(
        next,
        "commit or stash what `git status` shows; the same command with --iter-id it-1 continues task by task"
    );
}
