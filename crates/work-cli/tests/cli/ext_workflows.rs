//! The workflows as the real-CLI tests run them, one function per scenario, for either CLI:
//! `ext_claude` and `ext_codex` call each with their CLI. The CLI runs its own tools in the
//! scratch repository (Claude Code's Bash/Write/Edit, Codex's `exec_command`/`apply_patch`)
//! as the scripted model server asks, and `work` sees the result through git.

use crate::ext_harness::{Cli, RealCli, assert_key_never_written};
use crate::support::Scenario;
use serde_json::{Value, json};
use work_model_server::{Rule, Script, Step};

fn jobs_repo() -> Scenario {
    let s = Scenario::new();
    s.write("src/jobs.rs", "fn a() { transition(1); }\nfn e() { if err { rollback() } }\n");
    s.commit("jobs");
    s
}

fn finder_answer(angle: &str, items: Value) -> Step {
    Step::Answer(json!({"angle": angle, "items": items, "roundNotes": "scripted"}))
}

/// Exhaust: a read-only finder that tries to write (the Write tool, `git log --output=FILE`
/// inside and `git diff --output=FILE` outside the repository) is refused every time, its
/// read-only commands run, its item passes gate 2, and round 2's finder receives what round 1
/// found (the brief's "see context.seen").
pub fn exhaust_read_only_finders_run_tools_but_cannot_write(which: Cli) {
    let s = jobs_repo();
    let outside = tempfile::tempdir().expect("tempdir");
    let root = s.root().display().to_string();
    let leak_in = format!("{root}/leak-inside.txt");
    let leak_out = outside.path().join("leak-outside.txt").display().to_string();
    let item = json!([{"id": "swallowed-rollback-error", "title": "rollback swallows the error",
        "location": "src/jobs.rs:2", "evidence": "if err { rollback() }", "severity": "high"}]);
    let cli = RealCli::new(
        which,
        Script::new(vec![
            Rule::new(
                "YOUR ANGLE: error-paths",
                vec![
                    Step::Bash("git log --oneline -1".into()),
                    Step::Bash(format!("git log -1 --output={leak_in}")),
                    Step::Bash(format!("git diff HEAD~1 --output={leak_out}")),
                    Step::Write { path: format!("{root}/written.txt"), content: "x\n".into() },
                    finder_answer("error-paths", item),
                ],
            ),
            Rule::new("YOUR ANGLE: races", vec![finder_answer("races", json!([]))]),
            Rule::new("YOUR ANGLE: docs", vec![finder_answer("docs", json!([]))]),
        ]),
    );
    let master = cli.run_json(
        &s,
        &["exhaust", "error handling", "-k", "2", "--angles", "error-paths,races,docs", "--agent", which.name()],
        0,
    );
    assert_eq!(master["stoppedReason"], "k-consecutive-dry", "{master:#}");
    assert_eq!(master["seen"], json!(["swallowed-rollback-error"]), "{master:#}");
    for leak in [&leak_in, &leak_out, &format!("{root}/written.txt")] {
        assert!(!std::path::Path::new(leak).exists(), "a read-only finder wrote {leak}\n{}", cli.summary());
    }
    assert_eq!(s.git(&["status", "--porcelain", "--", ".", ":!.work"]), "", "the tree is untouched");
    let finder = cli.server.requests_for(0);
    assert!(finder.iter().any(|r| r.tool_results == 4), "every tool step ran: {}", cli.summary());
    let log_result = finder.iter().find(|r| r.tool_results == 1).expect("the git log result");
    assert!(log_result.body.to_string().contains("jobs"), "`git log` ran read-only: {}", log_result.body);
    let round2 = cli.server.requests_for(1);
    let brief = &round2.first().expect("round 2 dispatched").brief;
    assert!(brief.contains("swallowed-rollback-error"), "context.seen reached the model:\n{brief}");
    assert_key_never_written(s.root());
}

/// Until with recon: the read-only recon maps (and cannot write), the worker writes READY with
/// the CLI's own write tool, the engine's verify passes, and the claim matches git.
pub fn until_with_recon_writes_through_the_cli(which: Cli) {
    let s = Scenario::new();
    s.write("notes.md", "todo\n");
    s.commit("notes");
    let root = s.root().display().to_string();
    let cli = RealCli::new(
        which,
        Script::new(vec![
            Rule::new(
                "You are the recon",
                vec![
                    Step::Bash("ls".into()),
                    Step::Write { path: format!("{root}/recon-wrote.txt"), content: "x\n".into() },
                    Step::Answer(json!({"summary": "one notes file", "map": ["notes.md: the notes"],
                        "risks": [], "recommended_next": ["write READY"]})),
                ],
            ),
            Rule::new(
                "You are the worker for iteration 1",
                vec![
                    Step::Write { path: format!("{root}/READY"), content: "ok\n".into() },
                    Step::Edit { path: format!("{root}/notes.md"), old: "todo".into(), new: "done".into() },
                    Step::Answer(
                        json!({"status": "done", "summary": "wrote READY", "changes_claimed": ["READY", "notes.md"],
                        "blocker": null, "next_steps": [], "decisions": [], "evidence": ["wrote READY"]}),
                    ),
                ],
            ),
        ]),
    );
    let v = cli.run_json(
        &s,
        &[
            "until",
            "file READY exists",
            "--goal",
            "write READY",
            "--verify",
            "test -e READY",
            "--recon",
            "--agent",
            which.name(),
        ],
        0,
    );
    assert_eq!(v["status"], "done", "{v:#}\n{}", cli.summary());
    assert_eq!(s.read("READY"), "ok\n", "the CLI's write tool wrote the file");
    assert_eq!(s.read("notes.md"), "done\n", "the CLI's edit tool edited the file");
    assert!(!s.path("recon-wrote.txt").exists(), "the read-only recon wrote a file");
    let recon = cli.server.requests_for(0);
    assert!(recon.iter().any(|r| r.tool_results == 2), "the recon's steps all ran: {}", cli.summary());
    let worker = cli.server.requests_for(1);
    assert!(worker.first().is_some_and(|r| r.brief.contains("one notes file")), "the recon map reached the worker");
    assert_key_never_written(s.root());
}

/// `work agents check` asks the CLI for credentials: usable with the key, unusable (with the
/// reason) without it.
pub fn agents_check_probes_credentials(which: Cli) {
    let s = Scenario::new();
    let cli = RealCli::new(which, Script::new(vec![]));
    let entry = |out: &[u8]| -> Value {
        let v: Value = serde_json::from_slice(out).unwrap_or_else(|e| panic!("agents check --json: {e}"));
        let agents = v["agents"].as_array().cloned().unwrap_or_default();
        agents.into_iter().find(|a| a["name"] == which.name()).expect("the built-in is listed")
    };
    let with_key = cli.work(&s).args(["agents", "check", "--json"]).output().expect("run");
    let c = entry(&with_key.stdout);
    assert_eq!(c["usable"], true, "{c}");
    let key_var = match which {
        Cli::Claude => "ANTHROPIC_API_KEY",
        Cli::Codex => "SCRIPTED_MODEL_KEY",
    };
    let without = cli.work(&s).args(["agents", "check", "--json"]).env_remove(key_var).output().expect("run");
    let c = entry(&without.stdout);
    assert_eq!(c["usable"], false, "no credentials, not usable: {c}");
    assert!(c["reason"].as_str().unwrap_or("").contains("no credentials"), "{c}");
}

/// The pids of live processes whose command line contains `marker`.
fn processes_with(marker: &str) -> Vec<u32> {
    let mut out = Vec::new();
    for e in std::fs::read_dir("/proc").into_iter().flatten().flatten() {
        let Some(pid) = e.file_name().to_str().and_then(|n| n.parse::<u32>().ok()) else { continue };
        let cmdline = std::fs::read(e.path().join("cmdline")).unwrap_or_default();
        let text = String::from_utf8_lossy(&cmdline).replace('\0', " ");
        if text.contains(marker) && !text.contains("cargo") {
            out.push(pid);
        }
    }
    out
}

/// A worker whose command outlives the dispatch timeout: when `work` ends, no process the CLI
/// started survives (Claude Code runs each Bash command in its own session, Codex its shell).
/// Depends on the runtime's containment of session leaders (a subreaper).
pub fn no_cli_child_survives_a_timeout(which: Cli) {
    let s = Scenario::new();
    let marker = format!("sleep 31{}", std::process::id() % 100 + 10);
    let cli = RealCli::new(
        which,
        Script::new(vec![Rule::new(
            "You are the worker for iteration 1",
            vec![Step::Bash(format!("touch started && {marker} && echo survived")), Step::Text("late".into())],
        )]),
    );
    let args = ["until", "file never exists", "--goal", "g", "--max", "1", "-c", "timeouts.dispatch_secs=25"];
    let (_code, _out, err) = cli.run(&s, &[&args[..], &["--agent", which.name()]].concat());
    let survivors = processes_with(&marker);
    for pid in &survivors {
        #[expect(clippy::disallowed_methods, reason = "the test kills only the survivors it found, by pid")]
        let _ = std::process::Command::new("kill").arg("-9").arg(pid.to_string()).status();
    }
    assert!(s.path("started").exists(), "the command ran\n{err}\n{}", cli.summary());
    assert!(survivors.is_empty(), "`{marker}` survived `work` (pids {survivors:?})\n{err}\n{}", cli.summary());
}

/// A CLI without credentials: exhaust stops after two all-failed rounds with the CLI's own
/// reason on stderr, instead of burning every angle.
pub fn exhaust_without_credentials_fails_fast(which: Cli) {
    let s = jobs_repo();
    let cli = RealCli::new(which, Script::new(vec![]));
    let key_var = match which {
        Cli::Claude => "ANTHROPIC_API_KEY",
        Cli::Codex => "SCRIPTED_MODEL_KEY",
    };
    let out = cli
        .work(&s)
        .args(["exhaust", "x", "-k", "2", "--angles", "a,b,c,d,e,f", "--agent", which.name(), "--json"])
        .env_remove(key_var)
        .output()
        .expect("run");
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(1), "{err}");
    let master: Value = serde_json::from_slice(&out.stdout).expect("json");
    assert_eq!(master["stoppedReason"], "agent-failing", "{master:#}\n{err}");
    assert_eq!(master["rounds"].as_array().map(Vec::len), Some(3), "a twice, then b: {master:#}");
    assert!(!err.contains("success:"), "the API error reads cleanly: {err}");
}
