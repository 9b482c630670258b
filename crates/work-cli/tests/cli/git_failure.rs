//! A git the engine runs that fails is an error of the run — one `error:` line naming git, its
//! command and what it said, exit 1 — never a verdict about the agent (docs/ground-truth.md,
//! "A failing git is no verdict"). The fault is the engine's side: `work` runs with a `git` on
//! its PATH that fails `merge-base --is-ancestor` (exit 128) and passes everything else to the
//! real git, so the agent's own git (it commits its fix on top of the base, an honest move)
//! works. Before, the failed ancestry check read as "HEAD no longer descends from the base":
//! BLOCKED `head-moved`. The honest twin runs with the same `git` and writes its fix without
//! committing: no ancestry check is needed, and the run ends as it always did.

use crate::head_rule::HEAD;
use crate::support::{Scenario, assert_one_line_error, fallback_only};
use std::path::PathBuf;

/// A directory holding a `git` that runs `fault` (a shell fragment that may print to stderr and
/// `exit 128`) before the real git; the PATH to run `work` with.
fn git_with(fault: &str) -> (tempfile::TempDir, String) {
    let old = std::env::var("PATH").unwrap_or_default();
    let real = old
        .split(':')
        .map(|d| PathBuf::from(d).join("git"))
        .find(|p| p.is_absolute() && p.is_file())
        .expect("git on PATH")
        .display()
        .to_string();
    let dir = tempfile::tempdir().expect("tmp");
    let path: PathBuf = dir.path().join("git");
    std::fs::write(&path, format!("#!/bin/sh\n{fault}\nexec {real} \"$@\"\n")).expect("write git");
    std::fs::set_permissions(&path, std::os::unix::fs::PermissionsExt::from_mode(0o755)).expect("chmod");
    let path = format!("{}:{old}", dir.path().display());
    (dir, path)
}

/// A `git` that fails `merge-base --is-ancestor` (exit 128) and runs the real git otherwise.
fn failing_git() -> (tempfile::TempDir, String) {
    git_with(
        "for a in \"$@\"; do\n  if [ \"$a\" = --is-ancestor ]; then echo 'fatal: injected failure' >&2; exit 128; fi\ndone",
    )
}

/// Runs `work -q args…` with `path` as PATH: (exit code, stdout, stderr).
fn run_with(s: &Scenario, path: &str, args: &[&str]) -> (i32, String, String) {
    // `-q`: no progress lines, so stderr holds the error line alone.
    let out = s.work().env("PATH", path).arg("-q").args(args).output().expect("run work");
    (
        out.status.code().unwrap_or(-1),
        String::from_utf8_lossy(&out.stdout).into_owned(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

/// The run ended with git's failure: exit 1, one line naming the command, how it ended and
/// what git said; no verdict about the agent anywhere.
fn assert_git_error(what: &str, (code, out, err): (i32, String, String)) {
    assert_eq!(code, 1, "{what}: exit 1\nstdout:\n{out}\nstderr:\n{err}");
    assert_one_line_error(&err);
    for needle in ["git merge-base --is-ancestor", "exit code 128", "injected failure"] {
        assert!(err.contains(needle), "{what}: `{needle}` named: {err}");
    }
    for verdict in ["head-moved", "history-rewritten", "git-tampered", "BLOCKED", "blocked"] {
        assert!(!out.contains(verdict) && !err.contains(verdict), "{what}: no verdict `{verdict}`:\n{out}\n{err}");
    }
}

/// The shell the agent runs: writes `text` to `path`, committing it when `commit`.
fn fix(path: &str, text: &str, commit: bool) -> String {
    let write = format!("printf '{text}' > {path}");
    let sh = if commit { format!("{write} && git add {path} && git commit -q -m 'the fix'") } else { write };
    format!("import subprocess\nsubprocess.run(['sh', '-c', {sh:?}], check=True)")
}

fn implement(commit: bool) -> (i32, String, String) {
    let s = crate::implement::repo_with_plan(&[("1", "Edit shared", "Append a line to shared.txt.")]);
    let body = format!(
        "if role == 'implementer':\n    {}\n    out(DONE)",
        fix("shared.txt", "base\\nmore\\n", commit).replace('\n', "\n    ")
    );
    let a = crate::implement::agent(&s, &body);
    let (_dir, path) = failing_git();
    let args =
        ["implement", "--plan", "PLAN.md", "--iter-id", "it-1", "--agent", &a, "--test-cmd", "grep -q more shared.txt"];
    let mut args = args.to_vec();
    args.push("--json");
    run_with(&s, &path, &args)
}

/// Judging a commit needs the agent to commit, which only the fallback lets it do.
#[test]
fn implement_ends_with_an_error_when_git_fails_judging_a_commit() {
    let _unconfined = fallback_only(HEAD);
    assert_git_error("implement", implement(true));
}

#[test]
fn implement_honest_twin_that_does_not_commit_is_done_with_the_same_git() {
    let (code, out, err) = implement(false);
    assert_eq!(code, 0, "the twin needs no ancestry check\nstdout:\n{out}\nstderr:\n{err}");
    assert!(out.contains("\"DONE\""), "{out}");
}

fn edit(commit: bool) -> (i32, String, String) {
    let (s, args) = crate::head_rule::rename_edit(&fix("src/lib.txt", "struct Bar\\n", commit));
    let (_dir, path) = failing_git();
    let args: Vec<&str> = args.iter().map(String::as_str).collect();
    run_with(&s, &path, &args)
}

/// Judging a commit needs the agent to commit, which only the fallback lets it do.
#[test]
fn edit_ends_with_an_error_when_git_fails_judging_a_commit() {
    let _unconfined = fallback_only(HEAD);
    assert_git_error("edit", edit(true));
}

#[test]
fn edit_honest_twin_that_does_not_commit_is_done_with_the_same_git() {
    let (code, out, err) = edit(false);
    assert_eq!(code, 0, "the twin needs no ancestry check\nstdout:\n{out}\nstderr:\n{err}");
    assert!(out.contains("\"DONE\""), "{out}");
}

fn until(commit: bool) -> (i32, String, String) {
    let s = crate::liars_matrix::until_repo();
    let agent = s.agent(
        "worker.py",
        &format!(
            "{}\nprint(json.dumps({{\"status\": \"done\", \"summary\": \"done\"}}))",
            fix("src/lib.rs", "pub fn f() {}\\npub fn ready() {}\\n", commit)
        ),
    );
    let (_dir, path) = failing_git();
    let args =
        ["until", "`sh check.sh` exits 0", "--goal", "g", "--verify", "sh check.sh", "--agent", &agent, "--json"];
    run_with(&s, &path, &args)
}

/// Judging a commit needs the agent to commit, which only the fallback lets it do.
#[test]
fn until_ends_with_an_error_when_git_fails_judging_a_commit() {
    let _unconfined = fallback_only(HEAD);
    assert_git_error("until", until(true));
}

#[test]
fn until_honest_twin_that_does_not_commit_is_done_with_the_same_git() {
    let (code, out, err) = until(false);
    assert_eq!(code, 0, "the twin needs no ancestry check\nstdout:\n{out}\nstderr:\n{err}");
    assert!(out.contains("\"done\""), "{out}");
}

fn ultra(commit: bool) -> (i32, String, String) {
    let (s, agent) = crate::head_rule::ultra_repo(&fix("greet.sh", "echo \"hello, world\"\\n", commit));
    let (_dir, path) = failing_git();
    run_with(&s, &path, &["ultra", "GOAL.toml", "--agent", &agent, "--json"])
}

/// Judging a commit needs the agent to commit, which only the fallback lets it do.
#[test]
fn ultra_ends_with_an_error_when_git_fails_judging_a_commit() {
    let _unconfined = fallback_only(HEAD);
    assert_git_error("ultra", ultra(true));
}

#[test]
fn ultra_honest_twin_that_does_not_commit_is_done_with_the_same_git() {
    let (code, out, err) = ultra(false);
    assert_eq!(code, 0, "the twin needs no ancestry check\nstdout:\n{out}\nstderr:\n{err}");
    assert!(out.contains("all-green"), "{out}");
}

/// `loop run` to the plan gate with the real git (no HEAD is judged before the code phase),
/// then the code phase with the failing one.
fn loop_run(commit: bool) -> (i32, String, String) {
    use crate::loop_run::{knob, run, setup};
    let s = Scenario::new();
    let agent = setup(&s, "test -f hello.txt", true);
    let write = "printf 'hello\\n' > hello.txt";
    let sh = if commit { format!("{write} && git add hello.txt && git commit -q -m 'the fix'") } else { write.into() };
    knob(&s, "impl-task-1", &sh);
    assert_eq!(run(&s, &agent, &["--light"], 3)["reason"], "spec-human-gate");
    assert_eq!(run(&s, &agent, &["--light", "--resume"], 3)["reason"], "plan-human-gate");
    let (_dir, path) = failing_git();
    run_with(&s, &path, &["loop", "run", crate::loop_run::DIR, "--agent", &agent, "--json", "--light", "--resume"])
}

/// `loop run` ends every error of its driver with its JSON report, reason `git` here: the
/// message names git's command, how it ended and what it said; no verdict about the agent.
#[test]
fn loop_run_ends_with_an_error_when_git_fails_judging_a_commit() {
    let _unconfined = fallback_only(HEAD);
    let (code, out, err) = loop_run(true);
    assert_eq!(code, 1, "stdout:\n{out}\nstderr:\n{err}");
    let v: serde_json::Value = serde_json::from_str(&out).expect("the report");
    assert_eq!(v["reason"], "git", "{v:#}");
    let message = v["message"].as_str().unwrap_or_default();
    for needle in ["git merge-base --is-ancestor", "exit code 128", "injected failure"] {
        assert!(message.contains(needle), "`{needle}` named: {message}");
    }
    assert!(!out.contains("head-moved") && !out.contains("history-rewritten"), "no verdict: {out}");
}

#[test]
fn loop_run_honest_twin_that_does_not_commit_reaches_the_merge_gate_with_the_same_git() {
    let (code, out, err) = loop_run(false);
    assert_eq!(code, 3, "the twin reaches the merge gate\nstdout:\n{out}\nstderr:\n{err}");
    assert!(out.contains("code-human-gate"), "{out}");
}

/// A `git` that fails `ls-files` (how git's sealed view is read) once `marker` exists, and runs
/// the real git otherwise.
fn git_failing_once(marker: &std::path::Path) -> (tempfile::TempDir, String) {
    git_with(&format!(
        "if [ -e {} ]; then\n  for a in \"$@\"; do\n    if [ \"$a\" = ls-files ]; then echo 'fatal: injected failure' >&2; exit 128; fi\n  done\nfi",
        marker.display()
    ))
}

/// exhaust: when git's view cannot be read after a wave (git fails for the engine), the wave's
/// answers are dropped as unverified, the gap names git's failure and the run is never
/// `confirmed` — and no finder is said to have changed the tree. Before, the failed reading was
/// dropped silently and the wave's answers were accepted unchecked. The twin, whose git never
/// fails, keeps its answer and ends confirmed.
#[test]
fn exhaust_drops_a_wave_it_could_not_check_and_never_blames_the_finder() {
    for failing in [true, false] {
        let s = Scenario::new();
        s.write("src/jobs.rs", "fn a() { transition(1); }\n");
        s.commit("jobs");
        // Where a confined agent may write: the scenario's own grant.
        let marker = s.path(".agent-state/fail-now");
        let touch =
            if failing { format!("open({:?}, 'w').close()\n", marker.display().to_string()) } else { String::new() };
        let agent = s.agent(
            "finder.py",
            &format!(
                "{touch}items = [{{'id': 'a', 'title': 't', 'location': 'src/jobs.rs:1'}}] if ctx['round'] == 1 else []\nprint(json.dumps({{'angle': ctx['angle'], 'items': items, 'roundNotes': 'n'}}))"
            ),
        );
        let (_dir, path) = git_failing_once(&marker);
        let out = s
            .work()
            .env("PATH", &path)
            .args(["exhaust", "transitions", "-k", "2", "--angles", "a,b,c", "--final-oracle", "true"])
            .args(["--agent", &agent, "--json"])
            .output()
            .expect("run work");
        let stdout = String::from_utf8_lossy(&out.stdout);
        let stderr = String::from_utf8_lossy(&out.stderr);
        let master: serde_json::Value =
            serde_json::from_str(&stdout).unwrap_or_else(|e| panic!("{e}\n{stdout}\n{stderr}"));
        let gaps = master["completenessGaps"].to_string();
        let seen = master["items"].as_array().map(Vec::len).unwrap_or(0);
        if failing {
            assert!(gaps.contains("could not run") && gaps.contains("injected failure"), "{gaps}\n{stderr}");
            assert_eq!(seen, 0, "the unchecked wave's answer was dropped: {stdout}");
            assert_ne!(master["completeness"], "confirmed", "{stdout}");
            assert!(!stderr.contains("changed the tree") && !gaps.contains("changed the tree"), "{gaps}\n{stderr}");
        } else {
            assert_eq!(seen, 1, "{stdout}\n{stderr}");
            assert_eq!(master["completeness"], "confirmed", "{gaps}\n{stderr}");
        }
    }
}

/// loop run: a git that fails re-reading the tree after the read-only reviewers (git's view
/// cannot be read) ends the run with reason `git` and git's line — never `read-only-violated`,
/// which said the reviewers changed the tree. The twin, whose git never fails, reaches the merge
/// gate.
#[test]
fn loop_run_ends_with_git_s_error_when_the_reviewers_guard_cannot_read_the_tree() {
    use crate::loop_run::{DIR, knob, run, setup};
    for failing in [true, false] {
        let s = Scenario::new();
        let agent = setup(&s, "test -f hello.txt", true);
        assert_eq!(run(&s, &agent, &["--light"], 3)["reason"], "spec-human-gate");
        assert_eq!(run(&s, &agent, &["--light", "--resume"], 3)["reason"], "plan-human-gate");
        // Where a confined agent may write: the scenario's own grant.
        let marker = s.path(".agent-state/fail-now");
        if failing {
            knob(&s, "reviewer-marker", &marker.display().to_string());
        }
        let (_dir, path) = git_failing_once(&marker);
        let (code, out, err) =
            run_with(&s, &path, &["loop", "run", DIR, "--agent", &agent, "--json", "--light", "--resume"]);
        let v: serde_json::Value = serde_json::from_str(&out).unwrap_or_else(|e| panic!("{e}\n{out}\n{err}"));
        if failing {
            assert_eq!((code, v["reason"].as_str()), (1, Some("git")), "{v:#}");
            let message = v["message"].as_str().unwrap_or_default();
            assert!(message.contains("ls-files") && message.contains("injected failure"), "{message}");
            assert!(!out.contains("read-only-violated"), "no verdict about the reviewers: {out}");
        } else {
            assert_eq!((code, v["reason"].as_str()), (3, Some("code-human-gate")), "{v:#}");
        }
    }
}
