//! What a person sees on stderr: the live status list on a terminal (run under a real
//! pseudo-terminal through python3's `pty`), plain lines without one, `-q` and `-v`, and the
//! end-of-run summary (tokens, cost, the budget overshoot, what to run next).

use crate::support::{Scenario, suite_isolation};
use std::process::Stdio;

/// Runs `python3 pty_run.py work args…` with stderr on a pseudo-terminal: returns (exit code,
/// stdout, what the terminal received).
const PTY_RUN: &str = r#"
import os, pty, subprocess, sys
master, slave = pty.openpty()
p = subprocess.Popen(sys.argv[1:], stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=slave)
os.close(slave)
seen = b''
while True:
    try:
        chunk = os.read(master, 65536)
    except OSError:
        break
    if not chunk:
        break
    seen += chunk
out = p.stdout.read()
code = p.wait()
open(os.environ['WORK_TEST_PTY_OUT'], 'wb').write(out)
open(os.environ['WORK_TEST_PTY_TTY'], 'wb').write(seen)
sys.exit(code)
"#;

/// A finder that thinks for a moment (so the display has a dispatch in flight to draw) and
/// reports its usage: angle `a` finds one item, the others nothing.
pub(crate) fn slow_finder(s: &Scenario) -> String {
    s.agent(
        "finder.py",
        r#"
time.sleep(1.5)
angle = ctx['angle']
items = [{"id": "todo", "title": "a TODO", "location": "src/lib.rs:2"}] if angle == 'a' else []
print(json.dumps({"work_result": {"angle": angle, "items": items, "roundNotes": "n"},
                  "usage": {"input_tokens": 100, "output_tokens": 20, "cost_usd": 0.3}}))
"#,
    )
}

pub(crate) fn repo() -> Scenario {
    let s = Scenario::new();
    s.write("src/lib.rs", "fn main() {\n    // TODO: parse the arguments\n}\n");
    s.commit("lib");
    s
}

pub(crate) fn exhaust_args(agent: &str) -> Vec<String> {
    ["exhaust", "todos", "-k", "2", "--angles", "a,b", "--max-rounds", "2", "--agent", agent, "--json"]
        .iter()
        .map(|a| a.to_string())
        .collect()
}

/// Runs `work args` with stderr on a pseudo-terminal.
pub(crate) fn on_a_terminal(s: &Scenario, args: &[String], no_color: bool) -> (i32, String, String) {
    let script = s.path(".agents/pty_run.py");
    s.write(".agents/pty_run.py", PTY_RUN);
    let (out, tty) = (s.path(".agent-state/pty.out"), s.path(".agent-state/pty.tty"));
    std::fs::create_dir_all(s.path(".agent-state")).expect("mkdir");
    let bin = assert_cmd::cargo::cargo_bin("work");
    #[expect(clippy::disallowed_methods, reason = "the test gives `work` a pseudo-terminal through python3")]
    let mut c = std::process::Command::new("python3");
    c.arg(&script)
        .arg(&bin)
        .args(args)
        .current_dir(s.root())
        .env("WORK_ISOLATION", suite_isolation())
        .env("WORK_SANDBOX_WRITABLE", s.path(".agent-state"))
        .env("WORK_TEST_PTY_OUT", &out)
        .env("WORK_TEST_PTY_TTY", &tty)
        .env("TERM", "xterm-256color")
        .env("WORK_FAKE_CLOCK", "2026-01-01T00:00:00Z")
        .env_remove("OPENAI_API_KEY")
        .env_remove("ANTHROPIC_API_KEY")
        .stdout(Stdio::null());
    if no_color {
        c.env("NO_COLOR", "1");
    } else {
        c.env_remove("NO_COLOR");
    }
    let status = c.status().expect("run python3");
    let read = |p: &std::path::Path| String::from_utf8_lossy(&std::fs::read(p).expect("read the capture")).into_owned();
    (status.code().unwrap_or(-1), read(&out), read(&tty))
}

/// The text with every escape sequence (CSI … letter) taken out.
pub(crate) fn strip_escapes(s: &str) -> String {
    let mut out = String::new();
    let mut chars = s.chars().peekable();
    while let Some(c) = chars.next() {
        if c == '\x1b' {
            if chars.peek() == Some(&'[') {
                chars.next();
                for n in chars.by_ref() {
                    if n.is_ascii_alphabetic() {
                        break;
                    }
                }
            }
            continue;
        }
        out.push(c);
    }
    out
}

#[test]
fn a_terminal_gets_the_live_status_list_and_the_bar_and_stdout_only_the_document() {
    let s = repo();
    let agent = slow_finder(&s);
    let (code, out, tty) = on_a_terminal(&s, &exhaust_args(&agent), false);
    let text = strip_escapes(&tty);
    assert_eq!(code, 1, "two rounds of a cap of two end as caller-target:\n{text}");
    // One row per dispatch in flight (role, model, elapsed), then the same row done.
    assert!(text.contains("● finder"), "a running dispatch row:\n{text}");
    assert!(text.contains("d0001-finder-a"), "the row names the dispatch:\n{text}");
    assert!(text.contains("✓ finder"), "a done dispatch row:\n{text}");
    assert!(text.contains("○ exhaust"), "the idle status row between dispatches:\n{text}");
    assert!(text.contains("● exhaust · round 1 · 1 in flight"), "the running status row:\n{text}");
    // The bar against --max-rounds.
    assert!(text.contains("0/2 rounds") && text.contains("1/2 rounds"), "the done/total bar:\n{text}");
    assert!(text.contains('█') && text.contains('░'), "the bar is drawn:\n{text}");
    // The progress lines scroll above it, the summary follows it.
    assert!(text.contains("Round 1: 1 new (1 total) · angle=a"), "{text}");
    assert!(text.contains("outcome: caller-target"), "{text}");
    // Colour when NO_COLOR is not set; the cursor is moved to redraw.
    assert!(tty.contains("\x1b[33m●\x1b[0m"), "the running glyph is coloured: {tty:?}");
    assert!(tty.contains("\x1b[2K") || tty.contains("\x1b[1A"), "the display redraws in place");
    // stdout holds the document alone.
    assert!(!out.contains('\x1b'), "no escape code on stdout: {out:?}");
    let doc: serde_json::Value = serde_json::from_str(&out).expect("stdout is the master object");
    assert_eq!(doc["stoppedReason"], "caller-target");
}

#[test]
fn no_color_keeps_the_glyph_rows_and_drops_the_colour() {
    let s = repo();
    let agent = slow_finder(&s);
    let (_, _, tty) = on_a_terminal(&s, &exhaust_args(&agent), true);
    let text = strip_escapes(&tty);
    assert!(text.contains("● finder") && text.contains("✓ finder"), "{text}");
    let sgr_colour = ["\x1b[31m", "\x1b[32m", "\x1b[33m", "\x1b[2m", "\x1b[0m"];
    for code in sgr_colour {
        assert!(!tty.contains(code), "NO_COLOR: no colour code {code:?} in {tty:?}");
    }
}

#[test]
fn without_a_terminal_stderr_is_plain_lines_with_no_escape_code() {
    let s = repo();
    let agent = slow_finder(&s);
    let args = exhaust_args(&agent);
    let args: Vec<&str> = args.iter().map(String::as_str).collect();
    let out = s.work().args(&args).env_remove("NO_COLOR").env("TERM", "xterm-256color").output().expect("run");
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(!err.contains('\x1b'), "no escape code at all: {err:?}");
    assert!(!err.contains("● ") && !err.contains("✓ ") && !err.contains('█'), "no live rows: {err}");
    assert!(err.contains("Round 1: 1 new (1 total) · angle=a · dryCounter 0/2"), "the plain round line: {err}");
    assert!(err.contains("Round 2: 0 new (1 total) · angle=b · dryCounter 1/2"), "{err}");
}

#[test]
fn quiet_says_one_final_line_or_nothing_beside_the_document() {
    let s = repo();
    let agent = slow_finder(&s);
    let mut args = vec!["-q".to_string()];
    args.extend(exhaust_args(&agent));
    let a: Vec<&str> = args.iter().map(String::as_str).collect();
    let (code, out, err) = s.run(&a);
    assert_eq!(code, 1, "{err}");
    assert_eq!(err, "", "quiet with --json: nothing on stderr");
    assert!(serde_json::from_str::<serde_json::Value>(&out).is_ok(), "{out}");
    // Without --json: the final line alone.
    let (_, out, err) = s.run(&a[..a.len() - 1].iter().copied().chain(["--fresh"]).collect::<Vec<_>>());
    assert_eq!(out, "", "exhaust prints its result only with --json");
    let lines: Vec<&str> = err.lines().collect();
    assert_eq!(lines.len(), 1, "one line: {err}");
    let line = lines[0];
    assert!(line.starts_with("caller-target · spent 2 dispatch(es) · 240 tokens (200 in, 40 out) · $0.6000"), "{line}");
    assert!(line.contains("next: the same command with a larger budget or --max-rounds resumes"), "{line}");
    // The two spellings are one flag each, and they exclude each other.
    let (code, _, err) = s.run(&["-q", "-v", "runs", "list"]);
    assert_eq!(code, 2, "{err}");
    assert!(
        err.starts_with("error: failed to parse arguments: the argument '--quiet' cannot be used with '--verbose'"),
        "{err}"
    );
    let (code, _, err) = s.run(&["--quiet", "runs", "list"]);
    assert_eq!(code, 0, "--quiet is the long spelling: {err}");
    let (code, _, err) = s.run(&["--silent", "runs", "list"]);
    assert_eq!(code, 2, "no synonym: {err}");
}

#[test]
fn verbose_says_each_dispatch_start_and_end_with_role_model_duration_and_tokens() {
    let s = repo();
    let agent = slow_finder(&s);
    let mut args = vec!["-v".to_string()];
    args.extend(exhaust_args(&agent));
    let a: Vec<&str> = args.iter().map(String::as_str).collect();
    let (_, _, err) = s.run(&a);
    let start =
        err.lines().find(|l| l.starts_with("dispatch d0001-finder-a start:")).unwrap_or_else(|| panic!("{err}"));
    assert!(start.contains(": finder · ") && start.ends_with("(attempt 1)"), "{start}");
    let end = err.lines().find(|l| l.starts_with("dispatch d0001-finder-a ok:")).unwrap_or_else(|| panic!("{err}"));
    assert!(end.contains(": finder · ") && end.contains("· attempt 1 · "), "{end}");
    assert!(end.contains("s · 120 tokens · $0.3000"), "duration, tokens, cost: {end}");
    assert!(err.contains("dispatch d0002-finder-b start:"), "every dispatch: {err}");
    // The -v lines sit beside the normal progress lines.
    assert!(err.contains("Round 1: 1 new"), "{err}");
}

/// A `command:` agent ignores the role's pinned model: the live list and `-v` name the
/// backend that really runs (`command:finder.py`), never the pin (`sonnet`).
#[test]
fn a_command_agent_is_named_as_what_runs_not_the_role_s_pinned_model() {
    let s = repo();
    let agent = slow_finder(&s);
    let mut args = vec!["-v".to_string()];
    args.extend(exhaust_args(&agent));
    let a: Vec<&str> = args.iter().map(String::as_str).collect();
    let (_, _, err) = s.run(&a);
    let start =
        err.lines().find(|l| l.starts_with("dispatch d0001-finder-a start:")).unwrap_or_else(|| panic!("{err}"));
    assert_eq!(start, "dispatch d0001-finder-a start: finder · command:finder.py (attempt 1)");
    let end = err.lines().find(|l| l.starts_with("dispatch d0001-finder-a ok:")).unwrap_or_else(|| panic!("{err}"));
    assert!(end.contains(": finder · command:finder.py · attempt 1 · "), "{end}");
    assert!(!err.contains("sonnet"), "the pin never runs: {err}");
    let s = repo();
    let agent = slow_finder(&s);
    let (_, _, tty) = on_a_terminal(&s, &exhaust_args(&agent), true);
    let text = strip_escapes(&tty);
    assert!(text.contains("finder           command:finder.py d0001-finder-a"), "the live row:\n{text}");
    assert!(!text.contains("sonnet"), "the live row names no pin:\n{text}");
}

#[test]
fn the_summary_shows_tokens_cost_the_overshoot_and_what_to_run_next() {
    let s = repo();
    let agent = slow_finder(&s);
    let (code, _, err) =
        s.run(&["exhaust", "todos", "-k", "2", "--angles", "a,b,c", "--budget-usd", "0.5", "--agent", &agent]);
    assert_eq!(code, 1, "{err}");
    assert!(err.contains("outcome: budget"), "{err}");
    assert!(err.contains("spent: 2 dispatch(es) · 240 tokens (200 in, 40 out) · $0.6000"), "{err}");
    assert!(err.contains("budget: spent $0.60 of $0.50 (+20%)"), "how far past the limit: {err}");
    assert!(
        err.contains("next: the same command with a larger budget or --max-rounds resumes from the journal"),
        "{err}"
    );
    let look = err.lines().find(|l| l.starts_with("look back: work show ")).unwrap_or_else(|| panic!("{err}"));
    // The command it names works.
    let id = look.trim_start_matches("look back: work show ").split(' ').next().expect("a run id");
    let (code, shown, e) = s.run(&["show", id]);
    assert_eq!(code, 0, "{e}");
    assert!(shown.contains(id), "{shown}");
}

const RED_GOAL: &str = r#"
id = "greet"
objective = "greet.sh prints hello, world"
tier = "LIGHT"
tier_justification = "one script following a known pattern"
stop_line = "I'll stop right away when sh greet.sh prints hello, world"

[[criteria]]
id = "happy"
scenario = "sh greet.sh"
evidence = ["stdout", "exit_code"]
pass = { exit_code = 0, stdout_contains = "hello, world" }
"#;

/// Runs a command line a summary printed, with this build's `work` first on PATH.
fn run_printed(s: &Scenario, line: &str) -> (i32, String) {
    let bin = assert_cmd::cargo::cargo_bin("work");
    let dir = bin.parent().expect("the binary's directory");
    let path = format!("{}:{}", dir.display(), std::env::var("PATH").unwrap_or_default());
    #[expect(clippy::disallowed_methods, reason = "the printed command runs as a person would paste it")]
    let out = std::process::Command::new("sh")
        .args(["-c", line])
        .current_dir(s.root())
        .env("PATH", path)
        .env("NO_COLOR", "1")
        .output()
        .expect("run sh");
    (out.status.code().unwrap_or(-1), String::from_utf8_lossy(&out.stderr).into_owned())
}

#[test]
fn ultra_names_the_command_that_runs_the_goal_again_and_it_runs() {
    let s = repo();
    s.write("GOAL.toml", RED_GOAL);
    s.commit("goal");
    let liar =
        s.agent("liar.py", r#"print(json.dumps({"status": "done", "summary": "fixed", "claims": [], "cleanup": []}))"#);
    let (code, _, err) = s.run(&["ultra", "GOAL.toml", "--agent", &liar, "--budget-dispatches", "1"]);
    assert_eq!(code, 1, "{err}");
    assert!(err.contains("outcome: BLOCKED (budget)") && err.contains("budget: spent 1 of 1 dispatches"), "{err}");
    let next = err.lines().find_map(|l| l.strip_prefix("next: ")).unwrap_or_else(|| panic!("a next step: {err}"));
    let cmd = next.strip_suffix(" continues with a larger budget").unwrap_or_else(|| panic!("{next}"));
    assert!(cmd.starts_with("work ultra GOAL.toml --agent ") && cmd.ends_with(" --budget-dispatches 2"), "{cmd}");
    // The printed command runs the goal again: the lie is seen twice and the goal stops.
    let (code, err) = run_printed(&s, cmd);
    assert_eq!(code, 1, "{err}");
    assert!(err.contains("outcome: BLOCKED (same-failure-repeated)"), "{err}");
    let next = err.lines().find_map(|l| l.strip_prefix("next: ")).unwrap_or_else(|| panic!("{err}"));
    assert!(
        next.starts_with("read ") && next.contains("notepad.md (what was tried), then `work ultra GOAL.toml"),
        "{next}"
    );
}

/// Runs `work args…` with stderr on a pseudo-terminal, sends SIGINT once the agent has
/// started (`.agent-state/started` exists), and returns (exit code, what the terminal received).
const PTY_INTERRUPT: &str = r#"
import os, pty, signal, subprocess, sys, time
master, slave = pty.openpty()
p = subprocess.Popen(sys.argv[1:], stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=slave)
os.close(slave)
os.set_blocking(master, False)
seen, sent = b'', False
while True:
    if not sent and os.path.exists(os.environ['STARTED']):
        time.sleep(0.3)
        p.send_signal(signal.SIGINT)
        sent = True
    try:
        chunk = os.read(master, 65536)
        if not chunk:
            break
        seen += chunk
    except BlockingIOError:
        if p.poll() is not None:
            break
        time.sleep(0.02)
    except OSError:
        break
open(os.environ['PTY_TTY'], 'wb').write(seen)
sys.exit(p.wait())
"#;

/// Ctrl-C during `work exhaust` on a terminal: the live display is cleared, and stderr names
/// the exact command that resumes (the one that was run, quoted for a shell), what the run
/// spent and the commands that look at it again; that command resumes the run.
#[test]
fn ctrl_c_in_exhaust_clears_the_display_and_prints_the_exact_resume_command() {
    let s = repo();
    let agent = s.agent(
        "finder.py",
        "if not os.path.exists(state_path('started')):\n    open(state_path('started'), 'w').write('1')\n    time.sleep(60)\nprint(json.dumps({'angle': ctx['angle'], 'items': []}))",
    );
    s.write(".agents/pty_interrupt.py", PTY_INTERRUPT);
    let tty_file = s.path(".agent-state/pty.tty");
    std::fs::create_dir_all(s.path(".agent-state")).expect("mkdir");
    let bin = assert_cmd::cargo::cargo_bin("work");
    #[expect(
        clippy::disallowed_methods,
        reason = "the test gives `work` a pseudo-terminal and a Ctrl-C through python3"
    )]
    let status = std::process::Command::new("python3")
        .arg(s.path(".agents/pty_interrupt.py"))
        .arg(&bin)
        .args(["exhaust", "slow things", "-k", "2", "--angles", "a,b", "--agent", &agent])
        .current_dir(s.root())
        .env("WORK_ISOLATION", suite_isolation())
        .env("WORK_SANDBOX_WRITABLE", s.path(".agent-state"))
        .env("PTY_TTY", &tty_file)
        .env("STARTED", s.path(".agent-state/started"))
        .env("TERM", "xterm-256color")
        .env("WORK_FAKE_CLOCK", "2026-01-01T00:00:00Z")
        .env_remove("NO_COLOR")
        .stdout(Stdio::null())
        .status()
        .expect("run python3");
    let tty = String::from_utf8_lossy(&std::fs::read(&tty_file).expect("read the capture")).into_owned();
    assert_eq!(status.code(), Some(130), "{tty:?}");
    let text = strip_escapes(&tty);
    let quoted = format!("'{agent}'");
    let expected = format!(
        "interrupted: agents stopped; resume with `work exhaust 'slow things' -k 2 --angles a,b --agent {quoted}`"
    );
    assert!(text.contains(&expected), "the exact command:\n{text}");
    // The display was drawn, then erased before the line: nothing of it is drawn after the erase.
    let at = tty.find("interrupted:").expect("the line");
    let last_row = tty[..at].rfind("exhaust ·").expect("the live status row was drawn");
    assert!(tty[last_row..at].contains("\x1b[2K"), "the status row is erased before the line: {:?}", &tty[last_row..]);
    assert!(!tty[at..].contains('●') && !tty[at..].contains('○'), "no row after the line: {:?}", &tty[at..]);
    let after = &text[text.find("interrupted:").unwrap_or(0)..];
    assert!(after.contains("\nspent: 1 dispatch(es) · 0 tokens (0 in, 0 out) · "), "what it spent:\n{after}");
    assert!(after.contains("\nlook back: work show "), "where to look:\n{after}");
    // The printed command resumes the run (the finder answers at once the second time).
    let printed = expected.split('`').nth(1).expect("the command");
    let args = shell_words::split(printed).expect("a shell command");
    let (code, _, err) = s.run(&args[1..].iter().map(String::as_str).collect::<Vec<_>>());
    assert_eq!(code, 0, "{err}");
    assert!(err.contains("Resuming") || err.contains("Round"), "{err}");
}
