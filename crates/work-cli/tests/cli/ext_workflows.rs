//! The workflows as the real-CLI tests run them, one function per scenario, for either CLI:
//! `ext_claude` and `ext_codex` call each with their CLI. The CLI runs its own tools in the
//! scratch repository (Claude Code's Bash/Write/Edit, Codex's `exec_command`/`apply_patch`)
//! as the scripted model server asks, and `work` sees the result through git.

use crate::ext_harness::{Cli, RealCli, assert_key_never_written};
pub(crate) use crate::ext_workflows_confined::*;
use crate::support::Scenario;
use serde_json::{Value, json};
use work_model_server::{Rule, Script, Step};

pub(crate) fn jobs_repo() -> Scenario {
    let s = Scenario::new();
    s.write("src/jobs.rs", "fn a() { transition(1); }\nfn e() { if err { rollback() } }\n");
    s.commit("jobs");
    s
}

pub(crate) fn finder_answer(angle: &str, items: Value) -> Step {
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

/// The steps of a read-only reviewer that tries to write (a file with the write tool, and one
/// with a shell redirect) before it answers `answer`; both refusals come back as tool results.
fn refused_writes(root: &str, tag: &str, answer: Value) -> Vec<Step> {
    vec![
        Step::Write { path: format!("{root}/{tag}-wrote.txt"), content: "x\n".into() },
        Step::Bash(format!("echo x > {root}/{tag}-shell.txt")),
        Step::Answer(answer),
    ]
}

/// Asserts that no `*-wrote.txt` / `*-shell.txt` a read-only role tried to create exists, and
/// that the role's every step ran (it saw both refusals).
fn assert_refused(cli: &RealCli, s: &Scenario, rule: usize, tags: &[&str]) {
    for tag in tags {
        for f in [format!("{tag}-wrote.txt"), format!("{tag}-shell.txt")] {
            assert!(!s.path(&f).exists(), "the read-only {tag} wrote {f}\n{}", cli.summary());
        }
    }
    let seen = cli.server.requests_for(rule);
    assert!(seen.iter().any(|r| r.tool_results >= 2), "rule {rule} ran both writes: {}", cli.summary());
}

/// The untracked and modified paths of the tree, `.work/` aside (`git status --porcelain`).
fn tree_status(s: &Scenario) -> String {
    s.git(&["status", "--porcelain", "--untracked-files=all", "--", ".", ":!.work"])
}

/// Implement (standard mode): the implementer creates the file with the CLI's write tool, the
/// read-only spec and quality reviewers try to write and are refused, the suite is green, and
/// the tree holds the implementer's file alone, uncommitted.
pub fn implement_writes_through_the_cli_and_reviewers_cannot(which: Cli) {
    let s = Scenario::new();
    s.write("PLAN.md", "# Plan\n\n## Task 1: Add greeting\n\nCreate hello.txt holding `hi`.\n");
    s.commit("plan");
    let head = s.git(&["rev-parse", "HEAD"]);
    let root = s.root().display().to_string();
    let cli = RealCli::new(
        which,
        Script::new(vec![
            Rule::new(
                "You are the IMPLEMENTER of task 1",
                vec![
                    Step::Write { path: format!("{root}/hello.txt"), content: "hi\n".into() },
                    Step::Answer(json!({"status": "DONE", "summary": "wrote hello.txt", "applied_changes": true})),
                ],
            ),
            Rule::new(
                "You are the SPEC-COMPLIANCE REVIEWER of task 1",
                refused_writes(
                    &root,
                    "spec",
                    json!({"status": "compliant", "issues": [], "files_read": ["hello.txt"]}),
                ),
            ),
            Rule::new(
                "You are the QUALITY REVIEWER of task 1",
                refused_writes(
                    &root,
                    "quality",
                    json!({"verdict": "approved", "issues": [], "files_read": ["hello.txt"]}),
                ),
            ),
        ]),
    );
    let r = cli.run_json(
        &s,
        &[
            "implement",
            "--plan",
            "PLAN.md",
            "--iter-id",
            "it-1",
            "--agent",
            which.name(),
            "--test-cmd",
            "grep -q hi hello.txt",
        ],
        0,
    );
    assert_eq!(r["status"], "DONE", "{r:#}\n{}", cli.summary());
    assert_eq!(r["suite_green"], true, "{r:#}");
    assert_eq!(s.read("hello.txt"), "hi\n", "the CLI's write tool wrote the file");
    assert_eq!(tree_status(&s), "?? hello.txt\n", "the implementer's file alone, uncommitted");
    assert_eq!(s.git(&["rev-parse", "HEAD"]), head, "nothing committed");
    assert_refused(&cli, &s, 1, &["spec"]);
    assert_refused(&cli, &s, 2, &["quality"]);
    assert!(cli.server.requests_for(1)[0].brief.contains("hello.txt"), "the spec reviewer saw the diff");
    assert_key_never_written(s.root());
}

/// Implement (mini mode): the RED test fails first, the implementer fixes it with a shell
/// command through the CLI, and the engine's rerun of the RED test and the suite are green.
pub fn implement_mini_fixes_the_red_test_with_a_command(which: Cli) {
    let s = Scenario::new();
    s.write("README.md", "demo\n");
    s.commit("init");
    let cli = RealCli::new(
        which,
        Script::new(vec![Rule::new(
            "You are the IMPLEMENTER",
            vec![
                Step::Bash("printf 'ok\\n' > fixed.txt".into()),
                Step::Answer(json!({"status": "DONE", "summary": "created fixed.txt", "applied_changes": true})),
            ],
        )]),
    );
    let r = cli.run_json(
        &s,
        &[
            "implement",
            "--mini",
            "--iter-id",
            "m-1",
            "--red-test",
            "fixed.txt",
            "--cause",
            "the file is missing",
            "--red-test-cmd",
            "test -f {test}",
            "--agent",
            which.name(),
            "--test-cmd",
            "grep -q ok fixed.txt",
        ],
        0,
    );
    assert_eq!(r["status"], "DONE", "{r:#}\n{}", cli.summary());
    assert_eq!(r["detail"]["red_before"]["green"], false, "{r:#}");
    assert_eq!(r["detail"]["red_after"]["green"], true, "{r:#}");
    assert_eq!(s.read("fixed.txt"), "ok\n", "the command ran in the repository");
    assert_eq!(tree_status(&s), "?? fixed.txt\n");
    assert_key_never_written(s.root());
}

/// Edit: the editor changes the definition site with the CLI's edit tool; the suite checks the
/// new name and the tree shows the one modified file.
pub fn edit_changes_the_definition_site_through_the_cli(which: Cli) {
    let s = Scenario::new();
    s.write("src/lib.txt", "struct Foo\n");
    s.commit("lib");
    let root = s.root().display().to_string();
    let cli = RealCli::new(
        which,
        Script::new(vec![Rule::new(
            "You are the COMPILER-DRIVEN EDITOR",
            vec![
                Step::Bash("cat src/lib.txt".into()),
                Step::Edit { path: format!("{root}/src/lib.txt"), old: "struct Foo".into(), new: "struct Bar".into() },
                Step::Answer(json!({"status": "DONE", "applied_changes": true, "sites": 0, "hole": null})),
            ],
        )]),
    );
    let r = cli.run_json(
        &s,
        &[
            "edit",
            "--iter-id",
            "e-1",
            "--description",
            "rename Foo to Bar",
            "--def-site",
            "src/lib.txt:1",
            "--agent",
            which.name(),
            "--test-cmd",
            "grep -q Bar src/lib.txt",
        ],
        0,
    );
    assert_eq!(r["status"], "DONE", "{r:#}\n{}", cli.summary());
    assert_eq!(r["detail"]["sites"], 0, "{r:#}");
    assert_eq!(s.read("src/lib.txt"), "struct Bar\n");
    assert_eq!(tree_status(&s), " M src/lib.txt\n");
    assert_key_never_written(s.root());
}

const GREET_GOAL: &str = r#"
id = "greet"
objective = "greet.sh prints hello, world"
tier = "LIGHT"
tier_justification = "one script following a known pattern"
stop_line = "I'll stop right away when sh greet.sh prints hello, world"

[[criteria]]
id = "happy"
scenario = "sh greet.sh"
evidence = ["stdout", "stderr", "exit_code"]
pass = { exit_code = 0, stdout_contains = "hello, world" }
"#;

/// Ultra: RED is captured before the dispatch, the implementer writes the script with the CLI's
/// write tool, and the engine observes GREEN itself.
pub fn ultra_turns_red_to_green_through_the_cli(which: Cli) {
    let s = Scenario::new();
    s.write("GOAL.toml", GREET_GOAL);
    s.commit("goal");
    let root = s.root().display().to_string();
    let cli = RealCli::new(
        which,
        Script::new(vec![Rule::new(
            "TASK: Change the repository so that the failing success criteria `happy`",
            vec![
                Step::Bash("sh greet.sh; echo exit=$?".into()),
                Step::Write { path: format!("{root}/greet.sh"), content: "echo \"hello, world\"\n".into() },
                Step::Answer(json!({"status": "done", "summary": "wrote greet.sh",
                    "claims": [{"criterion": "happy", "claim": "greet.sh prints the greeting"}], "cleanup": []})),
            ],
        )]),
    );
    let out = cli.run_json(&s, &["ultra", "GOAL.toml", "--agent", which.name()], 0);
    assert_eq!((out["status"].as_str(), out["stop_reason"].as_str()), (Some("DONE"), Some("all-green")), "{out:#}");
    assert_eq!(out["attempts"], 1, "{out:#}");
    let happy = out["criteria"].as_array().and_then(|c| c.iter().find(|c| c["id"] == "happy")).expect("criterion");
    assert_eq!((happy["red"]["verdict"].as_str(), happy["green"]["verdict"].as_str()), (Some("fail"), Some("pass")));
    assert_eq!(s.read("greet.sh"), "echo \"hello, world\"\n");
    assert_eq!(tree_status(&s), "?? greet.sh\n");
    let first = cli.server.requests_for(0);
    let ran = first.iter().find(|r| r.tool_results == 1).expect("the command's result came back");
    assert!(ran.body.to_string().contains("exit="), "the RED run was observed by the agent: {}", ran.body);
    assert_key_never_written(s.root());
}

const LOOP_DIR: &str = "docs/specs/hello";

/// Loop run over an approved spec and plan: the spec and plan gates pause for a person, then
/// the implementer writes the task's file through the CLI, the gate passes, the read-only
/// reviewers try to write and are refused, the adjudicator confirms the clean reports, and the
/// run pauses at the merge gate with the change in the tree.
pub fn loop_run_implements_reviews_and_reaches_the_merge_gate(which: Cli) {
    let s = Scenario::new();
    s.write("work.toml", "[gates]\ntest = \"grep -q 'hello from task 1' hello.txt\"\n");
    s.write("README.md", "demo\n");
    s.write(&format!("{LOOP_DIR}/spec.md"), "# Hello\n\n**Status:** Approved\n\nPrint a greeting.\n");
    s.write(
        &format!("{LOOP_DIR}/plan.md"),
        "# Plan\n\n**Status:** Approved\n\n## Task 1: Write hello\nCreate hello.txt.\n",
    );
    s.commit("init");
    let base = s.git(&["rev-parse", "HEAD"]);
    let root = s.root().display().to_string();
    let clean = json!({"verdict": "clean", "findings": [],
                       "files_read": [format!("{LOOP_DIR}/spec.md"), format!("{LOOP_DIR}/plan.md"), "hello.txt".to_string()]});
    let cli = RealCli::new(
        which,
        Script::new(vec![
            Rule::new(
                "You implement one task of the approved plan",
                vec![
                    Step::Write { path: format!("{root}/hello.txt"), content: "hello from task 1\n".into() },
                    Step::Bash(
                        "git add hello.txt && git commit -qm 'task 1' && echo committed || echo commit-refused".into(),
                    ),
                    Step::Answer(
                        json!({"status": "done", "summary": "wrote hello.txt", "files_changed": ["hello.txt"]}),
                    ),
                ],
            ),
            Rule::new("You are the adversarial-reviewer", refused_writes(&root, "adversarial", clean.clone())),
            Rule::new("You are the quality-reviewer", refused_writes(&root, "quality", clean)),
            Rule::new("You are the finding adjudicator", vec![Step::Answer(json!({"findings": []}))]),
        ]),
    );
    let run = |extra: &[&str], code: i32| {
        let mut args = vec!["loop", "run", LOOP_DIR, "--agent", which.name()];
        args.extend_from_slice(extra);
        cli.run_json(&s, &args, code)
    };
    assert_eq!(run(&["--full"], 3)["reason"], "spec-human-gate");
    assert_eq!(run(&["--resume"], 3)["reason"], "plan-human-gate");
    let v = run(&["--resume"], 3);
    assert_eq!(v["reason"], "code-human-gate", "{v:#}\n{}", cli.summary());
    let transitions = v["transitions"].to_string();
    for e in ["wave-complete", "gates-clean", "reviewers-clean"] {
        assert!(transitions.contains(&format!("({e})")), "{e} missing in {transitions}");
    }
    assert_eq!(s.read("hello.txt"), "hello from task 1\n", "the CLI's write tool wrote the task's file");
    assert!(!tree_status(&s).contains("-wrote.txt") && !tree_status(&s).contains("-shell.txt"), "{}", tree_status(&s));
    // Confined, both CLIs' commits land in the dispatch's private git directory and are
    // discarded; the brief says the change left in the tree counts: both reach the merge gate
    // with the user's branch where it was.
    let implementer = cli.server.requests_for(0);
    assert!(implementer[0].brief.contains("you need not commit"), "{}", implementer[0].brief);
    let commit =
        implementer.iter().find(|r| r.tool_results == 2).expect("the commit's result came back").body.to_string();
    let expected = if crate::support::suite_confines() { "committed" } else { "commit-refused" };
    assert!(commit.contains(expected), "{}: {expected}: {commit}", which.name());
    assert_eq!(s.git(&["rev-parse", "HEAD"]), base);
    assert_eq!(s.git(&["status", "--porcelain", "--", "hello.txt"]), "?? hello.txt\n", "in the tree");
    assert_refused(&cli, &s, 1, &["adversarial"]);
    assert_refused(&cli, &s, 2, &["quality"]);
    assert!(!cli.server.requests_for(3).is_empty(), "every report was adjudicated: {}", cli.summary());
    assert_key_never_written(s.root());
}

/// The environment variable holding the key the CLI reads.
pub(crate) fn key_var(which: Cli) -> &'static str {
    match which {
        Cli::Claude => "ANTHROPIC_API_KEY",
        Cli::Codex => "SCRIPTED_MODEL_KEY",
    }
}

/// Every event of every run under `.work/runs/`, in file order.
fn events(s: &Scenario) -> Vec<Value> {
    let mut out = Vec::new();
    let mut dirs: Vec<_> =
        std::fs::read_dir(s.path(".work/runs")).into_iter().flatten().flatten().map(|e| e.path()).collect();
    dirs.sort();
    for d in dirs {
        let text = std::fs::read_to_string(d.join("events.jsonl")).unwrap_or_default();
        out.extend(text.lines().filter_map(|l| serde_json::from_str::<Value>(l).ok()));
    }
    out
}

fn of_kind<'a>(events: &'a [Value], kind: &str) -> Vec<&'a Value> {
    events.iter().filter(|e| e["kind"] == kind).collect()
}

/// One workflow run through a CLI without credentials: it stops after at most `max_started`
/// started dispatches, exit 1, with the CLI's own cause on stderr and in the `--json` result;
/// the result is returned.
fn without_credentials(which: Cli, s: &Scenario, args: &[&str], max_started: usize) -> Value {
    let cli = RealCli::new(which, Script::new(vec![]));
    let mut all: Vec<&str> = args.to_vec();
    all.extend(["--agent", which.name(), "--json"]);
    let out = cli.work(s).args(&all).env_remove(key_var(which)).output().expect("run work");
    let err = String::from_utf8_lossy(&out.stderr).into_owned();
    assert_eq!(out.status.code(), Some(1), "work {all:?}\n{err}");
    let result: Value = serde_json::from_slice(&out.stdout).unwrap_or_else(|e| panic!("json ({e}): {err}"));
    let ev = events(s);
    let started = of_kind(&ev, "dispatch.start").len();
    assert!((1..=max_started).contains(&started), "{started} dispatch(es) started, at most {max_started}: {err}");
    let cause = of_kind(&ev, "dispatch.end")
        .first()
        .and_then(|e| e["reason"].as_str())
        .map(str::to_string)
        .expect("the failed dispatch's reason");
    // The CLI's own words (its message after `exit code N: `), not only a stop code.
    let words = cause.split_once(": ").map_or(cause.as_str(), |(_, w)| w);
    let words: String = words.chars().take(40).collect();
    assert!(err.contains(&words), "the cause `{words}` is on stderr:\n{err}");
    assert!(result.to_string().contains(&words), "the cause `{words}` is in the result: {result:#}");
    assert!(!err.contains("success:"), "the API error reads cleanly: {err}");
    assert!(cli.server.requests().iter().all(|r| r.header("x-api-key").is_none()), "no key was sent");
    result
}

/// Until without credentials: the first failed worker ends the session with the cause.
pub fn until_without_credentials_fails_fast(which: Cli) {
    let s = Scenario::new();
    s.write("notes.md", "todo\n");
    s.commit("notes");
    let r =
        without_credentials(which, &s, &["until", "file READY exists", "--goal", "g", "--verify", "test -e READY"], 1);
    assert_eq!(r["status"], "failed", "{r:#}");
}

/// Implement without credentials: the first failed implementer blocks the run with the cause.
pub fn implement_without_credentials_fails_fast(which: Cli) {
    let s = Scenario::new();
    s.write("PLAN.md", "# Plan\n\n## Task 1: A\n\nCreate a.txt.\n\n## Task 2: B\n\nCreate b.txt.\n");
    s.commit("plan");
    let r = without_credentials(
        which,
        &s,
        &["implement", "--plan", "PLAN.md", "--iter-id", "it-1", "--test-cmd", "test -f a.txt"],
        1,
    );
    assert_eq!(r["status"], "BLOCKED", "{r:#}");
}

/// Ultra without credentials: two attempts fail for one cause and the goal stops
/// `agent-failing` (not `same-failure-repeated`, which would blame the code).
pub fn ultra_without_credentials_stops_agent_failing(which: Cli) {
    let s = Scenario::new();
    s.write("GOAL.toml", &GREET_GOAL.replace("pass = {", "max_attempts = 5\npass = {"));
    s.commit("goal");
    let r = without_credentials(which, &s, &["ultra", "GOAL.toml"], 2);
    assert_eq!((r["status"].as_str(), r["stop_reason"].as_str()), (Some("BLOCKED"), Some("agent-failing")), "{r:#}");
    assert_eq!(r["attempts"], 2, "{r:#}");
    assert_eq!(of_kind(&events(&s), "agent.failing").len(), 1);
}

/// Loop run without credentials: the drafter's failure stops the run with the cause.
pub fn loop_run_without_credentials_fails_fast(which: Cli) {
    let s = Scenario::new();
    s.write("work.toml", "[gates]\ntest = \"true\"\n");
    s.write("README.md", "demo\n");
    std::fs::create_dir_all(s.path(LOOP_DIR)).expect("mkdir");
    s.commit("init");
    let r = without_credentials(which, &s, &["loop", "run", LOOP_DIR], 1);
    assert_eq!(r["outcome"], "blocked", "{r:#}");
}

/// A worker whose first model call is answered (a command, billed 100 in / 10 out) and whose
/// second is refused by the server: the failed attempt is charged what the CLI was billed
/// (Claude Code's `modelUsage`, Codex's session file), not 0.
pub fn a_failed_attempt_is_charged_what_was_billed(which: Cli) {
    let s = Scenario::new();
    s.write("notes.md", "todo\n");
    s.commit("notes");
    let cli = RealCli::new(
        which,
        Script::new(vec![Rule::new(
            "You are the worker for iteration 1",
            vec![Step::Bash("ls".into()), Step::Error { status: 400, body: "the request was refused".into() }],
        )]),
    );
    let (code, _out, err) =
        cli.run(&s, &["until", "file READY exists", "--goal", "g", "--agent", which.name(), "--json"]);
    assert_eq!(code, 1, "{err}\n{}", cli.summary());
    assert!(
        cli.server.requests_for(0).iter().any(|r| r.tool_results == 1),
        "the refused call was made: {}",
        cli.summary()
    );
    let ev = events(&s);
    let end = of_kind(&ev, "dispatch.end");
    let failed = end.iter().find(|e| e["outcome"] == "failed").unwrap_or_else(|| panic!("a failed attempt: {ev:?}"));
    let tokens = |k: &str| failed["usage"][k].as_u64().unwrap_or(0);
    assert!(tokens("input_tokens") >= 100 && tokens("output_tokens") >= 10, "the answered call is charged: {failed}");
}

/// A worker whose first model call is answered (a command, billed by the server) and whose
/// second hangs until the dispatch timeout kills the CLI: the timed-out attempt is charged what
/// the CLI was billed before the kill (Claude Code's session transcript, Codex's session file),
/// not 0.
pub fn a_timed_out_attempt_is_charged_what_was_billed(which: Cli) {
    timed_out_attempt_is_charged(which, "required");
}

/// The same, `work` not confining the CLI (`--isolation none`): Claude Code then writes its
/// transcripts among the user's other sessions, and the attempt is charged its own session's
/// (the session `work` named), not 0.
pub fn a_timed_out_attempt_not_confined_is_charged_what_was_billed(which: Cli) {
    timed_out_attempt_is_charged(which, "none");
}

fn timed_out_attempt_is_charged(which: Cli, isolation: &str) {
    let s = Scenario::new();
    s.write("notes.md", "todo\n");
    s.commit("notes");
    let cli = RealCli::new(
        which,
        Script::new(vec![Rule::new("You are the worker for iteration 1", vec![Step::Bash("ls".into()), Step::Hang])]),
    );
    // Another session of the user's, billed far more: never this attempt's.
    let other = cli.home().join(".claude/projects/-elsewhere");
    std::fs::create_dir_all(&other).expect("mkdir");
    let line = json!({"type": "assistant", "message": {"id": "other", "usage": {"input_tokens": 900_000, "output_tokens": 90_000}}});
    std::fs::write(other.join("other-session.jsonl"), format!("{line}\n")).expect("write");
    let args = ["until", "file READY exists", "--goal", "g", "--max", "1", "-c", "timeouts.dispatch_secs=20"];
    let out = cli
        .work(&s)
        .args([&args[..], &["--agent", which.name(), "--json"]].concat())
        .env("WORK_ISOLATION", isolation)
        .output()
        .expect("run work");
    let (code, err) = (out.status.code().unwrap_or(-1), String::from_utf8_lossy(&out.stderr));
    assert_eq!(code, 1, "{err}\n{}", cli.summary());
    assert!(
        cli.server.requests_for(0).iter().any(|r| r.tool_results == 1),
        "the hanging call was made: {}",
        cli.summary()
    );
    let ev = events(&s);
    let end = of_kind(&ev, "dispatch.end");
    let failed = end.iter().find(|e| e["outcome"] == "failed").unwrap_or_else(|| panic!("a failed attempt: {ev:?}"));
    assert!(failed.to_string().contains("timed out"), "the attempt timed out: {failed}");
    let tokens = |k: &str| failed["usage"][k].as_u64().unwrap_or(0);
    assert!(tokens("input_tokens") >= 100 && tokens("output_tokens") >= 10, "the answered call is charged: {failed}");
    assert!(tokens("input_tokens") < 900_000, "only this attempt's session is charged: {failed}");
}

/// Codex reading its key from a variable whose name does not look like a key's: when the
/// server's error quotes the key, nothing `work` prints or writes quotes it.
pub fn a_key_the_server_quotes_is_redacted(which: Cli) {
    assert_eq!(which, Cli::Codex, "Claude Code's key variable is key-like");
    let s = Scenario::new();
    s.write("notes.md", "todo\n");
    s.commit("notes");
    let body =
        format!("Incorrect API key provided: {}. You can find your API key at the dashboard.", crate::ext_harness::KEY);
    let cli = RealCli::new(
        which,
        Script::new(vec![Rule::new("You are the worker for iteration 1", vec![Step::Error { status: 401, body }])]),
    );
    cli.write_codex_provider("SCRIPTED_MODEL_AUTH", "");
    let out = cli
        .work(&s)
        .args(["until", "file READY exists", "--goal", "g", "--agent", which.name(), "--json"])
        .env("SCRIPTED_MODEL_AUTH", crate::ext_harness::KEY)
        .output()
        .expect("run");
    let (stdout, stderr) = (String::from_utf8_lossy(&out.stdout), String::from_utf8_lossy(&out.stderr));
    assert_eq!(out.status.code(), Some(1), "{stderr}\n{}", cli.summary());
    assert!(!cli.server.requests_for(0).is_empty(), "the server was asked: {}", cli.summary());
    assert!(stdout.contains("Incorrect API key provided"), "the server's error is reported: {stdout}");
    for (what, text) in [("stdout", &stdout), ("stderr", &stderr)] {
        assert!(!text.contains(crate::ext_harness::KEY), "{what} quotes the key: {text}");
    }
    assert_key_never_written(s.root());
}

/// The Codex schema files a dispatch writes are gone after `work` is interrupted mid-dispatch.
pub fn schema_files_are_removed_on_an_interrupt(which: Cli) {
    assert_eq!(which, Cli::Codex, "only Codex reads its schema from a file");
    let s = Scenario::new();
    s.write("notes.md", "todo\n");
    s.commit("notes");
    let cli = RealCli::new(which, Script::new(vec![Rule::new("You are the worker for iteration 1", vec![Step::Hang])]));
    let tmp = tempfile::Builder::new().prefix("work-tmp-").tempdir_in(env!("CARGO_TARGET_TMPDIR")).expect("tmp");
    let schema_files = || -> Vec<String> {
        // In the temporary directory, or (in the sandbox) in Codex's private home there.
        let mut found: Vec<String> = Vec::new();
        for e in std::fs::read_dir(tmp.path()).into_iter().flatten().flatten() {
            let name = e.file_name().to_string_lossy().into_owned();
            if name.starts_with("work-codex-schema-") || name.starts_with("work-cli-home-") {
                found.push(name.clone());
            }
            if name.starts_with("work-cli-home-") {
                for f in std::fs::read_dir(e.path()).into_iter().flatten().flatten() {
                    let inner = f.file_name().to_string_lossy().into_owned();
                    if inner.starts_with("work-codex-schema-") {
                        found.push(format!("{name}/{inner}"));
                    }
                }
            }
        }
        found.sort();
        found
    };
    let mut std_cmd = cli.work_process(&s);
    std_cmd
        .args(["until", "file READY exists", "--goal", "g", "--agent", which.name()])
        .env("TMPDIR", tmp.path())
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::piped());
    let child = std_cmd.spawn().expect("start work");
    // Wait (bounded) until the CLI is waiting on the server with its schema file written.
    for _ in 0..600 {
        if !cli.server.requests_for(0).is_empty() {
            break;
        }
        std::thread::sleep(std::time::Duration::from_millis(100));
    }
    assert!(!cli.server.requests_for(0).is_empty(), "the worker reached the server");
    let during = schema_files();
    assert_eq!(
        during.iter().filter(|n| n.contains("work-codex-schema-")).count(),
        1,
        "the schema file is there while Codex runs: {during:?}"
    );
    #[expect(clippy::disallowed_methods, reason = "the test interrupts the `work` it started, by pid")]
    let _ = std::process::Command::new("kill").args(["-INT", &child.id().to_string()]).status();
    let out = child.wait_with_output().expect("wait");
    assert_eq!(out.status.code(), Some(130), "{}", String::from_utf8_lossy(&out.stderr));
    assert_eq!(schema_files(), Vec::<String>::new(), "the interrupted run left its schema file or private home");
}

/// A Claude Code worker that starts a subagent: the dispatch is charged the subagent's calls
/// too (the result's `modelUsage`; its `usage` counts the main conversation alone).
pub fn a_subagent_is_charged(which: Cli) {
    assert_eq!(which, Cli::Claude, "Codex has no subagents");
    let s = Scenario::new();
    s.write("notes.md", "todo\n");
    s.commit("notes");
    let root = s.root().display().to_string();
    let cli = RealCli::new(
        which,
        Script::new(vec![
            Rule::new("SUBAGENT: count the notes", vec![Step::Text("one notes file".into())]),
            Rule::new(
                "You are the worker for iteration 1",
                vec![
                    Step::Subagent("SUBAGENT: count the notes".into()),
                    Step::Write { path: format!("{root}/READY"), content: "ok\n".into() },
                    Step::Answer(json!({"status": "done", "summary": "wrote READY", "changes_claimed": ["READY"],
                        "blocker": null, "next_steps": [], "decisions": [], "evidence": ["wrote READY"]})),
                ],
            ),
        ]),
    );
    let v = cli.run_json(
        &s,
        &["until", "file READY exists", "--goal", "g", "--verify", "test -e READY", "--agent", which.name()],
        0,
    );
    assert_eq!(v["status"], "done", "{v:#}\n{}", cli.summary());
    assert!(!cli.server.requests_for(0).is_empty(), "the subagent ran: {}", cli.summary());
    let calls = cli.server.requests().iter().filter(|r| r.api == work_model_server::Api::Messages).count() as u64;
    let ev = events(&s);
    let end = of_kind(&ev, "dispatch.end");
    let ok = end.iter().find(|e| e["outcome"] == "ok").unwrap_or_else(|| panic!("an answer: {ev:?}"));
    let tokens = |k: &str| ok["usage"][k].as_u64().unwrap_or(0);
    assert_eq!(
        (tokens("input_tokens"), tokens("output_tokens")),
        (100 * calls, 10 * calls),
        "every call, the subagent's included, is charged ({calls} calls): {ok}\n{}",
        cli.summary()
    );
}

/// One `#[test]` per scenario every CLI runs, for the CLI given, plus the CLI's own
/// scenarios named after it (`ext_claude.rs`, `ext_codex.rs`).
macro_rules! every_scenario_through {
    ($cli:expr $(; $($own:ident),* $(,)?)?) => {
        $crate::ext_workflows::every_scenario_through!(@tests $cli;
            exhaust_read_only_finders_run_tools_but_cannot_write,
            until_with_recon_writes_through_the_cli,
            agents_check_probes_credentials,
            no_cli_child_survives_a_timeout,
            exhaust_without_credentials_fails_fast,
            implement_writes_through_the_cli_and_reviewers_cannot,
            implement_mini_fixes_the_red_test_with_a_command,
            edit_changes_the_definition_site_through_the_cli,
            ultra_turns_red_to_green_through_the_cli,
            loop_run_implements_reviews_and_reaches_the_merge_gate,
            until_without_credentials_fails_fast,
            implement_without_credentials_fails_fast,
            ultra_without_credentials_stops_agent_failing,
            loop_run_without_credentials_fails_fast,
            a_failed_attempt_is_charged_what_was_billed,
            a_timed_out_attempt_is_charged_what_was_billed,
            a_key_a_tool_command_prints_encoded_is_never_written,
            a_write_role_writes_the_tree_and_nothing_outside
            $($(, $own)*)?
        );
    };
    (@tests $cli:expr; $($name:ident),*) => {
        $(
            #[test]
            fn $name() {
                $crate::ext_workflows::$name($cli);
            }
        )*
    };
}
pub(crate) use every_scenario_through;
