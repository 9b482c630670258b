//! `work until` end to end: the real binary, scripted worker agents, a scratch git repository.

use crate::support::{Scenario, assert_one_line_error, fallback_only, refused};
use serde_json::Value;

/// Logs `iteration:attempt` for every dispatch, then runs `body`.
fn worker(s: &Scenario, body: &str) -> String {
    let logged = format!(
        "open(state_path('log'), 'a').write('%s:%s\\n' % (ctx['iteration'], req['attempt']))\nn = ctx['iteration']\n{body}"
    );
    s.agent("worker.py", &logged)
}

fn log(s: &Scenario) -> Vec<String> {
    std::fs::read_to_string(s.path(".agent-state/log")).unwrap_or_default().lines().map(str::to_string).collect()
}

fn session_dir(v: &Value) -> std::path::PathBuf {
    std::path::PathBuf::from(v["path"].as_str().expect("path in the result"))
}

fn read(p: &std::path::Path) -> String {
    std::fs::read_to_string(p).unwrap_or_else(|e| panic!("read {}: {e}", p.display()))
}

#[test]
fn continue_continue_done_failing_verify_then_done_passing() {
    let s = Scenario::new();
    let agent = worker(
        &s,
        r#"
open('work.txt', 'a').write('step %d\n' % n)
changes = ['work.txt']
if n == 4:
    open('READY', 'w').write('ok')
    changes.append('READY')
status = 'continue' if n <= 2 else 'done'
print(json.dumps({"status": status, "summary": "step %d" % n, "changes_claimed": changes,
                  "blocker": None, "next_steps": ["step %d" % (n + 1)], "decisions": ["d%d" % n] if n == 1 else [],
                  "evidence": []}))
"#,
    );
    let v = s.run_json(
        &[
            "until",
            "file READY exists",
            "--goal",
            "write the work file",
            "--verify",
            "test -e READY",
            "--agent",
            &agent,
            "--json",
        ],
        0,
    );
    assert_eq!(v["status"], "done");
    assert_eq!(v["iterations"], 4);
    assert_eq!(log(&s), vec!["1:1", "2:1", "3:1", "4:1"]);
    let dir = session_dir(&v);
    for n in 1..=4 {
        assert!(dir.join(format!("reports/{n:02}.md")).exists(), "reports/{n:02}.md");
    }
    for f in ["meta.md", "master.md", "handoff.md", "report.md"] {
        assert!(dir.join(f).exists(), "{f}");
    }
    let master = read(&dir.join("master.md"));
    assert!(master.contains("### Iteration 03 · done"), "{master}");
    assert!(read(&dir.join("reports/03.md")).contains("verify-failed"));
    assert!(master.contains("- [iter 1] d1"), "decisions are kept: {master}");
    let handoff = read(&dir.join("handoff.md"));
    assert!(handoff.contains("The last `done` did not verify"), "the 4th worker was told: {handoff}");
    let meta = read(&dir.join("meta.md"));
    assert!(meta.contains("| status | done |") && meta.contains("| iteration_count | 4 |"), "{meta}");
    let summary = v["summary"].as_array().expect("summary");
    assert!(summary.len() <= 25);
    assert!(summary.iter().any(|l| l.as_str().is_some_and(|l| l.contains(v["session_id"].as_str().unwrap_or("?")))));
}

#[test]
fn the_same_blocker_twice_is_blocked() {
    let s = Scenario::new();
    let agent = worker(
        &s,
        r#"
open('f%d' % n, 'w').write('x')
print(json.dumps({"status": "continue", "summary": "tried", "changes_claimed": ["f%d" % n],
                  "blocker": "The staging database is unreachable."}))
"#,
    );
    let v = s.run_json(&["until", "`false` exits 0", "--goal", "g", "--agent", &agent, "--json"], 1);
    assert_eq!(v["status"], "blocked");
    assert_eq!(v["iterations"], 2);
    assert!(v["stoppedReason"].as_str().unwrap_or("").contains("same blocker"), "{v}");
    assert_eq!(log(&s).len(), 2);
}

#[test]
fn two_empty_continues_are_blocked() {
    let s = Scenario::new();
    let agent = worker(&s, r#"print(json.dumps({"status": "continue", "summary": "read some code"}))"#);
    let v =
        s.run_json(&["until", "all tests pass", "--verify", "false", "--goal", "g", "--agent", &agent, "--json"], 1);
    assert_eq!(v["status"], "blocked");
    assert_eq!(v["iterations"], 2);
    assert!(v["stoppedReason"].as_str().unwrap_or("").contains("changed nothing"), "{v}");
}

#[test]
fn max_reached() {
    let s = Scenario::new();
    let agent = worker(
        &s,
        r#"
open('f%d' % n, 'w').write('x')
print(json.dumps({"status": "done", "summary": "surely done", "changes_claimed": ["f%d" % n]}))
"#,
    );
    let v = s.run_json(&["until", "`false` exits 0", "--goal", "g", "--max", "3", "--agent", &agent, "--json"], 1);
    assert_eq!(v["status"], "max-reached");
    assert_eq!(v["iterations"], 3);
    assert_eq!(v["verify"], "false", "the verify command was derived from the backticks");
    assert_eq!(log(&s).len(), 3);
}

#[test]
fn a_malformed_report_is_retried_once_then_the_session_stops() {
    let s = Scenario::new();
    let agent = worker(
        &s,
        r#"
if n == 1:
    open('a', 'w').write('x')
    print(json.dumps({"status": "continue", "summary": "ok", "changes_claimed": ["a"]}))
else:
    open(state_path('prompt%s' % req['attempt']), 'w').write(req['prompt'])
    print('I think it went well!' if req['attempt'] == 1 else json.dumps({"status": "finished"}))
"#,
    );
    let v = s.run_json(&["until", "`false` exits 0", "--goal", "g", "--agent", &agent, "--json"], 1);
    assert_eq!(v["status"], "invalid-report");
    assert_eq!(v["iterations"], 1, "the invalid iteration is not counted");
    assert_eq!(log(&s), vec!["1:1", "2:1", "2:2"]);
    assert!(s.read(".agent-state/prompt2").contains("REJECTED"), "the retry carries the validation error");
    let dir = session_dir(&v);
    assert!(!dir.join("reports/02.md").exists());
    assert!(read(&dir.join("meta.md")).contains("| status | invalid-report |"));
    assert!(read(&dir.join("master.md")).contains("iteration 02 not counted"));
}

#[test]
fn a_crashing_worker_stops_the_session_without_counting() {
    let s = Scenario::new();
    let agent = worker(&s, "sys.exit(3)");
    let v = s.run_json(&["until", "`false` exits 0", "--goal", "g", "--agent", &agent, "--json"], 1);
    assert_eq!(v["status"], "failed");
    assert_eq!(v["iterations"], 0);
    assert_eq!(log(&s), vec!["1:1"], "a failed dispatch is not retried");
}

#[test]
fn a_worker_claiming_edits_it_never_made_is_caught() {
    let s = Scenario::new();
    s.write("src/lib.rs", "pub fn f() {}\n");
    s.commit("src");
    let agent = worker(
        &s,
        r#"print(json.dumps({"status": "continue", "summary": "refactored src/lib.rs", "changes_claimed": ["src/lib.rs", "src/new.rs"]}))"#,
    );
    let v = s.run_json(&["until", "`false` exits 0", "--goal", "g", "--agent", &agent, "--json"], 1);
    assert_eq!(v["status"], "blocked", "claims without changes are not progress: {v}");
    assert_eq!(v["iterations"], 2);
    let master = read(&session_dir(&v).join("master.md"));
    assert!(master.contains("claimed `src/lib.rs` but git shows no change to it"), "{master}");
    assert!(master.contains("claimed `src/new.rs` but git shows no change to it"), "{master}");
    assert!(read(&session_dir(&v).join("reports/01.md")).contains("Claimed but not changed"));
}

/// Runs the `resume` command a result names, word for word.
fn run_hint(s: &Scenario, hint: &str, expect_code: i32) -> Value {
    let words: Vec<&str> = hint.split_whitespace().collect();
    assert_eq!(words.first(), Some(&"work"), "{hint}");
    let mut args: Vec<&str> = words[1..].to_vec();
    args.push("--json");
    s.run_json(&args, expect_code)
}

#[test]
fn human_gate_stops_after_each_merge_and_its_resume_hint_continues() {
    let s = Scenario::new();
    let agent = worker(
        &s,
        r#"
open('f%d' % n, 'w').write('x')
print(json.dumps({"status": "done" if n == 3 else "continue", "summary": "step %d" % n, "changes_claimed": ["f%d" % n]}))
"#,
    );
    let v = s.run_json(
        &[
            "until",
            "file f3 exists",
            "--goal",
            "three files",
            "--mode",
            "human-gate",
            "--slug",
            "two",
            "--agent",
            &agent,
            "--json",
        ],
        3,
    );
    assert_eq!(v["status"], "paused");
    assert_eq!(v["iterations"], 1);
    assert_eq!(v["resume"], "work until resume two");
    let reason = v["stoppedReason"].as_str().expect("reason");
    assert!(reason.contains("`work until resume two`"), "the pause names the same command: {reason}");
    let summary = v["summary"].to_string();
    assert!(summary.contains("continue later: work until resume two"), "{summary}");

    // The command the result names, as it stands, continues: an exact id is a pick.
    let v = run_hint(&s, v["resume"].as_str().expect("resume"), 3);
    assert_eq!(v["status"], "paused");
    assert_eq!(v["iterations"], 2);
    assert_eq!(log(&s), vec!["1:1", "2:1"]);

    // So does a bare `work until resume` when this is the only resumable session.
    let v = s.run_json(&["until", "resume", "--json"], 0);
    assert_eq!(v["status"], "done");
    assert_eq!(v["iterations"], 3);
    assert_eq!(v["resume"], Value::Null);
    assert_eq!(log(&s), vec!["1:1", "2:1", "3:1"]);
    // A finished session named exactly answers with its result and dispatches nothing (a run
    // killed during its last writes finishes the same way).
    let v = s.run_json(&["until", "resume", "two", "--yes", "--json"], 0);
    assert_eq!(v["status"], "done");
    assert_eq!(log(&s), vec!["1:1", "2:1", "3:1"], "nothing was dispatched again");
}

#[test]
fn a_fuzzy_hint_only_recommends_and_needs_yes() {
    let s = Scenario::new();
    let agent = worker(
        &s,
        r#"
open('f%d' % n, 'w').write('x')
print(json.dumps({"status": "continue", "summary": "step %d" % n, "changes_claimed": ["f%d" % n]}))
"#,
    );
    let args = ["until", "`false` exits 0", "--goal", "g", "--slug", "sweep-todos", "--mode", "human-gate"];
    let mut a = args.to_vec();
    a.extend(["--agent", &agent, "--json"]);
    s.run_json(&a, 3);
    let r = s.run_json(&["until", "resume", "todos", "--json"], 3);
    assert_eq!(r["status"], "needs-confirmation");
    assert_eq!(r["recommended"]["id"], "sweep-todos");
    assert_eq!(r["next"], "work until resume sweep-todos");
    assert_eq!(log(&s).len(), 1, "nothing was dispatched on a guess");
    let v = s.run_json(&["until", "resume", "todos", "--yes", "--json"], 3);
    assert_eq!(v["iterations"], 2);
}

#[test]
fn max_reached_names_a_resume_that_raises_the_max() {
    let s = Scenario::new();
    let agent = worker(
        &s,
        r#"
open('f%d' % n, 'w').write('x')
print(json.dumps({"status": "done" if n == 3 else "continue", "summary": "s", "changes_claimed": ["f%d" % n]}))
"#,
    );
    let v = s.run_json(
        &["until", "file f3 exists", "--goal", "g", "--slug", "m", "--max", "2", "--agent", &agent, "--json"],
        1,
    );
    assert_eq!(v["status"], "max-reached");
    assert_eq!(v["resume"], "work until resume m --max 12");
    let v = run_hint(&s, v["resume"].as_str().expect("resume"), 0);
    assert_eq!((v["status"].clone(), v["iterations"].clone()), ("done".into(), 3.into()));
}

#[test]
fn a_minimal_report_and_a_full_one_are_accepted_and_claims_still_checked() {
    let s = Scenario::new();
    let agent = worker(
        &s,
        r#"
if n == 1:
    open('a.txt', 'w').write('x')
    print(json.dumps({"status": "continue"}))
elif n == 2:
    open('b.txt', 'w').write('x')
    print(json.dumps({"status": "continue", "summary": "b", "next_steps": ["write READY"],
                      "notes": "n1", "decisions": ["keep it small"], "evidence": ["ls"],
                      "changes_claimed": ["b.txt", "ghost.rs", "phantom.rs"], "blocker": None}))
else:
    open('READY', 'w').write('x')
    print(json.dumps({"status": "done", "changes_claimed": ["READY"]}))
"#,
    );
    let v = s.run_json(&["until", "file READY exists", "--goal", "g", "--agent", &agent, "--json"], 0);
    assert_eq!(v["status"], "done", "{v}");
    assert_eq!(v["iterations"], 3);
    assert_eq!(log(&s), vec!["1:1", "2:1", "3:1"], "no report was retried");
    let master = read(&session_dir(&v).join("master.md"));
    assert!(master.contains("- [iter 2] keep it small"), "{master}");
    assert!(master.contains("claimed `ghost.rs` but git shows no change to it"), "{master}");
    assert!(master.contains("claimed `phantom.rs` but git shows no change to it"), "{master}");
    assert!(!master.contains("claimed `b.txt` but"), "{master}");
}

#[test]
fn a_joined_blocker_seen_twice_is_blocked() {
    let s = Scenario::new();
    let agent = worker(
        &s,
        r#"
open('f%d' % n, 'w').write('x')
print(json.dumps({"status": "continue", "changes_claimed": ["f%d" % n], "blocker": "The staging DB is down; no key"}))
"#,
    );
    let v = s.run_json(&["until", "`false` exits 0", "--goal", "g", "--agent", &agent, "--json"], 1);
    assert_eq!(v["status"], "blocked", "{v}");
    assert_eq!(v["iterations"], 2);
    assert!(v["stoppedReason"].as_str().unwrap_or("").contains("same blocker"), "{v}");
}

#[test]
fn an_always_done_worker_that_changes_nothing_is_blocked_not_max_reached() {
    let s = Scenario::new();
    let agent =
        worker(&s, r#"print(json.dumps({"status": "done", "summary": "all good", "changes_claimed": ["src/x.rs"]}))"#);
    let v = s.run_json(&["until", "`false` exits 0", "--goal", "g", "--max", "6", "--agent", &agent, "--json"], 1);
    assert_eq!(v["status"], "blocked", "{v}");
    assert_eq!(v["iterations"], 2);
    assert!(v["stoppedReason"].as_str().unwrap_or("").contains("changed nothing"), "{v}");
    assert_eq!(log(&s).len(), 2);

    // Alternating continue and done, with the same blocker: the second one stops it.
    let s = Scenario::new();
    let agent = worker(
        &s,
        r#"
open('f%d' % n, 'w').write('x')
print(json.dumps({"status": "done" if n % 2 == 0 else "continue", "changes_claimed": ["f%d" % n],
                  "blocker": "the API key is missing"}))
"#,
    );
    let v = s.run_json(&["until", "`false` exits 0", "--goal", "g", "--max", "8", "--agent", &agent, "--json"], 1);
    assert_eq!(v["status"], "blocked", "{v}");
    assert_eq!(v["iterations"], 2);
    assert!(v["stoppedReason"].as_str().unwrap_or("").contains("same blocker"), "{v}");
}

#[test]
fn outside_a_git_repository_claims_are_unverifiable_and_not_progress() {
    let s = Scenario::new();
    let agent = worker(
        &s,
        r#"print(json.dumps({"status": "continue", "summary": "edited", "changes_claimed": ["src/ghost.rs"]}))"#,
    );
    let plain = tempfile::tempdir().expect("a directory outside git");
    let out = s
        .work()
        .current_dir(plain.path())
        .args(["until", "`false` exits 0", "--goal", "g", "--max", "5", "--agent", &agent, "--json"])
        .output()
        .expect("run work");
    assert_eq!(out.status.code(), Some(1), "{}", String::from_utf8_lossy(&out.stderr));
    let v: Value = serde_json::from_slice(&out.stdout).expect("json");
    assert_eq!(v["status"], "blocked", "{v}");
    assert_eq!(v["iterations"], 2, "claims that cannot be checked are not progress");
    let master = read(&session_dir(&v).join("master.md"));
    assert!(master.contains("claimed `src/ghost.rs`: unverifiable (not a git work tree); not progress"), "{master}");
}

#[test]
fn resume_with_several_sessions_recommends_one_and_takes_a_pick() {
    let s = Scenario::new();
    let agent = worker(
        &s,
        r#"
open('f%s%d' % (ctx['session_id'], n), 'w').write('x')
print(json.dumps({"status": "continue", "summary": "s", "changes_claimed": ['f%s%d' % (ctx['session_id'], n)]}))
"#,
    );
    for slug in ["alpha", "beta"] {
        s.run_json(
            &[
                "until",
                "`false` exits 0",
                "--goal",
                slug,
                "--slug",
                slug,
                "--mode",
                "human-gate",
                "--agent",
                &agent,
                "--json",
            ],
            3,
        );
    }
    let r = s.run_json(&["until", "resume", "--json"], 3);
    assert_eq!(r["candidates"].as_array().map(Vec::len), Some(2));
    let r = s.run_json(&["until", "list", "--json"], 0);
    assert_eq!(r["sessions"].as_array().map(Vec::len), Some(2));
    let v = s.run_json(&["until", "resume", "alpha", "--yes", "--json"], 3);
    assert_eq!(v["session_id"], "alpha");
    assert_eq!(v["iterations"], 2);
}

#[test]
fn sigkill_during_an_iteration_then_resume_loses_nothing_and_counts_nothing_twice() {
    let s = Scenario::new();
    let agent = worker(
        &s,
        r#"
if n == 2 and bump('second') == 1:
    open(state_path('pid'), 'w').write(str(os.getpid()))
    time.sleep(120)
open('f%d' % n, 'a').write('x')
print(json.dumps({"status": "done" if n == 3 else "continue", "summary": "step %d" % n, "changes_claimed": ["f%d" % n]}))
"#,
    );
    let mut child = s
        .work_std()
        .args(["until", "file f3 exists", "--goal", "three files", "--slug", "k", "--agent", &agent, "--json"])
        .current_dir(s.root())
        .env("WORK_FAKE_CLOCK", "2026-01-01T00:00:00Z")
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .spawn()
        .expect("spawn work");
    let pid_file = s.path(".agent-state/pid");
    // Wait (not a timing assertion) until the second worker is running.
    for _ in 0..1200 {
        if pid_file.exists() && !s.read(".agent-state/pid").is_empty() {
            break;
        }
        std::thread::sleep(std::time::Duration::from_millis(50));
    }
    assert!(pid_file.exists(), "the second worker never started");
    child.kill().expect("SIGKILL work");
    let _ = child.wait();
    #[expect(clippy::disallowed_methods, reason = "reap the orphaned scripted worker")]
    let _ = std::process::Command::new("kill").args(["-9", s.read(".agent-state/pid").trim()]).status();

    let dir = s.path(".work/sessions/k");
    let meta = read(&dir.join("meta.md"));
    assert!(meta.contains("| iteration_count | 1 |") && meta.contains("| in_progress | 2 |"), "{meta}");

    let v = s.run_json(&["until", "resume", "k", "--yes", "--json"], 0);
    assert_eq!(v["status"], "done");
    assert_eq!(v["iterations"], 3);
    assert_eq!(log(&s), vec!["1:1", "2:1", "2:1", "3:1"], "iteration 2 is redone with the same number");
    let master = read(&dir.join("master.md"));
    for n in 1..=3 {
        assert_eq!(master.matches(&format!("### Iteration {n:02}")).count(), 1, "{master}");
        assert!(dir.join(format!("reports/{n:02}.md")).exists());
    }
    assert!(!dir.join("reports/04.md").exists());
    assert!(master.contains("interrupted before it was merged"), "{master}");
}

#[test]
fn a_vague_until_is_refused_with_nothing_written() {
    let s = Scenario::new();
    let agent = worker(&s, r#"print(json.dumps({"status": "done", "summary": "x"}))"#);
    let (code, out, err) = s.run(&["until", "the code feels nicer", "--goal", "g", "--agent", &agent]);
    assert_eq!(code, 2);
    assert!(out.is_empty());
    assert_one_line_error(&err);
    assert!(err.contains("`make lint` exits 0") && err.contains("--verify"), "examples: {err}");
    assert!(!s.path(".work").exists(), "nothing written");
    assert!(log(&s).is_empty(), "nothing dispatched");

    // Other bad input, same promise.
    for args in [
        vec!["until", "`make lint` exits 0", "--agent", agent.as_str()],
        vec!["until", "`make lint` exits 0", "--goal", "g", "--max", "0", "--agent", agent.as_str()],
        vec!["until", "`make lint` exits 0", "--goal", "g", "--agent", "nonsense-agent"],
        vec!["until", "`make lint` exits 0", "--goal", "g", "--slug", "Bad Slug", "--agent", agent.as_str()],
        vec!["until", "resume", "--yes"],
    ] {
        let (code, _, err) = s.run(&args);
        assert_eq!(code, 2, "{args:?}: {err}");
        assert_one_line_error(&err);
    }
    assert!(!s.path(".work/sessions").exists(), "nothing written");
    assert!(log(&s).is_empty());
    // With --verify, the same words are accepted.
    s.run_json(&["until", "the code feels nicer", "--verify", "true", "--goal", "g", "--agent", &agent, "--json"], 0);
}

/// A worker that changes the tree every iteration, says `continue` until `READY` exists
/// (written on iteration 4), and reports 10 tokens per dispatch.
fn spending_worker(s: &Scenario) -> String {
    worker(
        s,
        r#"
open('work.txt', 'a').write('step %d\n' % n)
changes = ['work.txt']
if n >= 4:
    open('READY', 'w').write('ok')
    changes.append('READY')
print(json.dumps({"work_result": {"status": "done" if n >= 4 else "continue", "summary": "step %d" % n,
                  "changes_claimed": changes}, "usage": {"input_tokens": 6, "output_tokens": 4, "cost_usd": 0.01}}))
"#,
    )
}

#[test]
fn a_budget_stops_with_status_budget_and_resume_with_a_bigger_budget_is_cumulative() {
    let s = Scenario::new();
    let agent = spending_worker(&s);
    let v = s.run_json(
        &[
            "until",
            "file READY exists",
            "--goal",
            "write the work file",
            "--budget-dispatches",
            "1",
            "--agent",
            &agent,
            "--json",
        ],
        1,
    );
    assert_eq!(v["status"], "budget", "{v}");
    assert_eq!(v["iterations"], 1, "the refused iteration is not counted");
    assert_eq!(log(&s), vec!["1:1"], "exactly the allowed dispatch");
    let reason = v["stoppedReason"].as_str().expect("reason");
    assert!(
        reason.starts_with("budget: the dispatches budget (1) is spent") && reason.contains("iteration 02"),
        "{reason}"
    );
    assert_eq!(v["spent"]["dispatches"], 1);
    let id = v["session_id"].as_str().expect("id").to_string();
    assert_eq!(v["resume"], format!("work until resume {id} --budget-dispatches 2"));
    let meta = read(&session_dir(&v).join("meta.md"));
    assert!(meta.contains("| status | budget |") && meta.contains("| spent | 1 dispatch(es), 10 token(s)"), "{meta}");

    // Resume with 3 dispatches in all: the session already spent 1, so 2 more run.
    let v = s.run_json(&["until", "resume", &id, "--budget-dispatches", "3", "--json"], 1);
    assert_eq!(v["status"], "budget", "{v}");
    assert_eq!(v["iterations"], 3);
    assert_eq!(log(&s), vec!["1:1", "2:1", "3:1"], "the budget is cumulative over the session");
    assert_eq!(v["spent"]["dispatches"], 3);

    // A token budget: 30 spent, 45 allowed ⇒ two more dispatches at most; iteration 4 is done.
    let v = s.run_json(&["until", "resume", &id, "--budget-tokens", "45", "--json"], 0);
    assert_eq!(v["status"], "done", "{v}");
    assert_eq!(v["iterations"], 4);
    assert_eq!(v["spent"]["usage"]["input_tokens"], 24);
}

#[test]
fn a_token_budget_stops_a_new_session_and_bad_budgets_are_refused() {
    let s = Scenario::new();
    let agent = spending_worker(&s);
    let v = s.run_json(
        &["until", "file READY exists", "--goal", "g", "--budget-tokens", "15", "--agent", &agent, "--json"],
        1,
    );
    assert_eq!(v["status"], "budget", "{v}");
    assert_eq!(log(&s).len(), 2, "10 then 20 tokens: the third dispatch is refused");
    assert!(v["stoppedReason"].as_str().unwrap_or("").contains("the tokens budget (15) is spent"), "{v}");

    for args in [
        vec!["until", "file READY exists", "--goal", "g", "--budget-dispatches", "0", "--agent", &agent],
        vec!["until", "resume", "--budget-usd", "nan", "--agent", &agent],
    ] {
        let (code, _, err) = s.run(&args);
        assert_eq!(code, 2, "{args:?}: {err}");
        assert_one_line_error(&err);
    }
    assert_eq!(log(&s).len(), 2, "nothing dispatched");
}

/// A repository whose verify is a committed check script, with a committed test beside it.
fn checked_repo() -> Scenario {
    let s = Scenario::new();
    s.write("check.sh", "grep -q 'fn ready' src/lib.rs\n");
    s.write("tests/test_lib.sh", "grep -q 'pub fn' src/lib.rs\n");
    s.write("src/lib.rs", "pub fn f() {}\n");
    s.commit("code, check and test");
    s
}

#[test]
fn a_worker_that_rewrites_the_verify_script_or_a_test_is_blocked_and_its_honest_twin_is_not() {
    let unconfined = fallback_only(refused::FROZEN);
    // The liar makes the check pass instead of doing the work.
    let s = checked_repo();
    let liar = worker(
        &s,
        r#"open('check.sh', 'w').write('exit 0\n')
print(json.dumps({"status": "done", "summary": "done"}))"#,
    );
    let v = s.run_json(
        &["until", "`sh check.sh` exits 0", "--goal", "g", "--verify", "sh check.sh", "--agent", &liar, "--json"],
        1,
    );
    assert_eq!(v["status"], "blocked", "{v}");
    let reason = v["stoppedReason"].as_str().unwrap_or_default();
    assert!(reason.contains("check-tampered") && reason.contains("check.sh"), "{v}");

    drop(unconfined);
    // Deleting a test is caught the same way (adding one is not).
    let s = checked_repo();
    let liar = worker(
        &s,
        r#"import os
os.remove('tests/test_lib.sh')
open('src/lib.rs', 'a').write('pub fn ready() {}\n')
print(json.dumps({"status": "done", "summary": "done"}))"#,
    );
    let v = s.run_json(
        &["until", "`sh check.sh` exits 0", "--goal", "g", "--verify", "sh check.sh", "--agent", &liar, "--json"],
        1,
    );
    assert!(v["stoppedReason"].as_str().unwrap_or_default().contains("tests/test_lib.sh"), "{v}");

    // The honest twin does the work and adds a test.
    let s = checked_repo();
    let honest = worker(
        &s,
        r#"open('src/lib.rs', 'a').write('pub fn ready() {}\n')
open('tests/test_ready.sh', 'w').write("grep -q 'fn ready' src/lib.rs\n")
print(json.dumps({"status": "done", "summary": "added ready()"}))"#,
    );
    let v = s.run_json(
        &["until", "`sh check.sh` exits 0", "--goal", "g", "--verify", "sh check.sh", "--agent", &honest, "--json"],
        0,
    );
    assert_eq!(v["status"], "done", "{v}");
}

#[test]
fn a_worker_that_hides_a_change_from_git_is_blocked_and_its_honest_twin_is_not() {
    for hide in [
        "subprocess.run(['git', 'update-index', '--skip-worktree', 'src/lib.rs'])",
        "open('.git/info/exclude', 'a').write('backdoor.rs\\n')",
        "open('.gitattributes', 'w').write('*.rs -diff\\n')",
    ] {
        // All but `.gitattributes` (a file of the tree) write `.git`, which the sandbox makes a private copy (the lie never reaches the user's git).
        let _unconfined = (!hide.contains(".gitattributes")).then(|| fallback_only(refused::GIT));
        let s = checked_repo();
        let liar = worker(
            &s,
            &format!(
                "import subprocess\nopen('src/lib.rs', 'a').write('pub fn ready() {{}}\\n')\nopen('backdoor.rs', 'w').write('x')\n{hide}\nprint(json.dumps({{\"status\": \"done\", \"summary\": \"done\"}}))"
            ),
        );
        let v = s.run_json(
            &["until", "`sh check.sh` exits 0", "--goal", "g", "--verify", "sh check.sh", "--agent", &liar, "--json"],
            1,
        );
        assert_eq!(v["status"], "blocked", "{hide}: {v}");
        let reason = v["stoppedReason"].as_str().unwrap_or_default();
        assert!(reason.starts_with("git-tampered"), "{hide}: {v}");
    }
    let s = checked_repo();
    let honest = worker(
        &s,
        r#"open('src/lib.rs', 'a').write('pub fn ready() {}\n')
open('backdoor.rs', 'w').write('x')
print(json.dumps({"status": "done", "summary": "added ready()"}))"#,
    );
    let v = s.run_json(
        &["until", "`sh check.sh` exits 0", "--goal", "g", "--verify", "sh check.sh", "--agent", &honest, "--json"],
        0,
    );
    assert_eq!(v["status"], "done", "{v}");
}
