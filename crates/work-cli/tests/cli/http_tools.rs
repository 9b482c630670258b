//! The `openai:` and `anthropic:` backends as agents: the scripted model server
//! (`work-model-server`) answers with real tool calls in each API's own format, and `work`'s
//! engine-side loop runs them in a scratch repository (search, read, edit, write, run the
//! tests), through the real binary. Each scenario runs once per backend.

use crate::support::Scenario;
use serde_json::{Value, json};
use work_model_server::{ModelServer, Rule, Script, Step, ToolCall};

#[derive(Debug, Clone, Copy)]
enum Backend {
    OpenAi,
    Anthropic,
}

const BOTH: [Backend; 2] = [Backend::OpenAi, Backend::Anthropic];
const KEY: &str = "sk-ant-scripted-0123456789";

/// A repository with `work.toml` naming agent `m` on the server, committed, `.work/` excluded.
fn repo(server: &ModelServer, backend: Backend, extra: &str) -> Scenario {
    let s = Scenario::new();
    let agent = match backend {
        Backend::OpenAi => format!("spec = \"openai:scripted\"\nbase_url = \"{}\"\n", server.v1_url()),
        Backend::Anthropic => format!("spec = \"anthropic:claude-scripted\"\nbase_url = \"{}\"\n", server.base_url()),
    };
    s.write("work.toml", &format!("[agents.m]\n{agent}{extra}"));
    s.write(".git/info/exclude", ".work/\n");
    s.write("src/jobs.rs", "fn a() { transition(1); }\nfn e() { if err { rollback() } }\n");
    s.commit("jobs");
    s
}

/// `work ARGS --agent m --json`, with the key the Anthropic backend needs; (code, stdout
/// parsed, stderr).
fn run(s: &Scenario, args: &[&str]) -> (i32, Value, String) {
    let out = s
        .work()
        .env("ANTHROPIC_API_KEY", KEY)
        .env("NO_PROXY", "127.0.0.1,localhost")
        .env_remove("HTTP_PROXY")
        .env_remove("http_proxy")
        .args(args)
        .args(["--agent", "m", "--json"])
        .output()
        .expect("run work");
    let stdout = String::from_utf8_lossy(&out.stdout);
    let stderr = String::from_utf8_lossy(&out.stderr).into_owned();
    let v = serde_json::from_str(&stdout).unwrap_or_else(|e| panic!("stdout is not JSON ({e}):\n{stdout}\n{stderr}"));
    (out.status.code().unwrap_or(-1), v, stderr)
}

/// Every event of every run in the scenario.
fn events(s: &Scenario) -> Vec<Value> {
    let mut all = vec![];
    for run in std::fs::read_dir(s.path(".work/runs")).into_iter().flatten().flatten() {
        let text = std::fs::read_to_string(run.path().join("events.jsonl")).unwrap_or_default();
        all.extend(text.lines().filter_map(|l| serde_json::from_str::<Value>(l).ok()));
    }
    all
}

fn finder(angle: &str, items: Value) -> Step {
    Step::Answer(json!({"angle": angle, "items": items, "roundNotes": "scripted"}))
}

fn rollback_item() -> Value {
    json!([{"id": "swallowed-rollback-error", "title": "rollback swallows the error",
        "location": "src/jobs.rs:2", "evidence": "if err { rollback() }", "severity": "high"}])
}

#[test]
fn http_exhaust_finder_searches_and_reads_before_its_items_pass_gate2() {
    for backend in BOTH {
        let server = ModelServer::start(Script::new(vec![
            Rule::new(
                "YOUR ANGLE: error-paths",
                vec![
                    Step::Tools(vec![
                        ToolCall::new("search", json!({"pattern": "rollback\\("})),
                        ToolCall::new("list_dir", json!({"path": "src"})),
                    ]),
                    Step::Tools(vec![ToolCall::new("read_file", json!({"path": "src/jobs.rs", "start_line": 2}))]),
                    finder("error-paths", rollback_item()),
                ],
            ),
            Rule::new("YOUR ANGLE: races", vec![finder("races", json!([]))]),
            Rule::new("YOUR ANGLE: docs", vec![finder("docs", json!([]))]),
        ]))
        .expect("server");
        let s = repo(&server, backend, "");
        let (code, master, err) =
            run(&s, &["exhaust", "error handling", "-k", "2", "--angles", "error-paths,races,docs"]);
        assert_eq!(code, 0, "{backend:?}: {master:#}\n{err}");
        assert_eq!(master["seen"], json!(["swallowed-rollback-error"]), "{backend:?}: gate 2 kept it: {master:#}");
        let turns = server.requests_for(0);
        assert_eq!(turns.len(), 3, "{backend:?}: three turns for the finder");
        let second = turns[1].body["messages"].to_string();
        assert!(second.contains("src/jobs.rs:2: fn e() { if err { rollback() } }"), "{backend:?}: search: {second}");
        assert!(second.contains("jobs.rs"), "{backend:?}: list_dir ran in the same turn: {second}");
        let third = turns[2].body["messages"].to_string();
        assert!(third.contains("2: fn e() { if err { rollback() } }"), "{backend:?}: read_file: {third}");
    }
}

#[test]
fn http_read_only_finder_asking_to_write_is_refused_and_the_run_says_so() {
    for backend in BOTH {
        let server = ModelServer::start(Script::new(vec![
            Rule::new(
                "YOUR ANGLE: error-paths",
                vec![
                    // Not offered to a read-only role: the model calls them anyway.
                    Step::Tools(vec![ToolCall::new("write_file", json!({"path": "written.txt", "content": "x\n"}))]),
                    Step::Tools(vec![ToolCall::new("run_command", json!({"command": "touch ran.txt"}))]),
                    finder("error-paths", json!([])),
                ],
            ),
            Rule::new("YOUR ANGLE: races", vec![finder("races", json!([]))]),
        ]))
        .expect("server");
        let s = repo(&server, backend, "");
        let (code, master, err) = run(&s, &["exhaust", "error handling", "-k", "2", "--angles", "error-paths,races"]);
        assert_eq!(code, 0, "{backend:?}: {master:#}\n{err}");
        assert!(
            !s.path("written.txt").exists() && !s.path("ran.txt").exists(),
            "{backend:?}: a read-only finder wrote"
        );
        assert!(
            err.contains("`write_file` on `written.txt` refused") && err.contains("the finder role is read-only"),
            "{backend:?}: the run says so on stderr:\n{err}"
        );
        assert!(err.contains("`run_command` on `touch ran.txt` refused"), "{backend:?}:\n{err}");
        let notes: Vec<Value> = events(&s).into_iter().filter(|e| e["kind"] == "dispatch.note").collect();
        assert_eq!(notes.len(), 2, "{backend:?}: {notes:?}");
        let turns = server.requests_for(0);
        assert!(turns[1].body["messages"].to_string().contains("refused"), "{backend:?}: the model is told");
    }
}

#[test]
fn http_until_worker_edits_and_runs_the_tests_to_done() {
    for backend in BOTH {
        let server = ModelServer::start(Script::new(vec![Rule::new(
            "You are the worker for iteration 1",
            vec![
                Step::Write { path: "READY".into(), content: "ok\n".into() },
                Step::Edit { path: "src/jobs.rs".into(), old: "transition(1)".into(), new: "transition(2)".into() },
                Step::Bash("test -e READY && grep -q 'transition(2)' src/jobs.rs && echo tests-pass && env".into()),
                Step::Answer(
                    json!({"status": "done", "summary": "wrote READY", "changes_claimed": ["READY", "src/jobs.rs"],
                    "blocker": null, "next_steps": [], "decisions": [], "evidence": ["tests-pass"]}),
                ),
            ],
        )]))
        .expect("server");
        let s = repo(&server, backend, "");
        let (code, v, err) =
            run(&s, &["until", "file READY exists", "--goal", "write READY", "--verify", "test -e READY"]);
        assert_eq!((code, v["status"].as_str()), (0, Some("done")), "{backend:?}: {v:#}\n{err}");
        assert_eq!(s.read("READY"), "ok\n");
        assert!(s.read("src/jobs.rs").contains("transition(2)"), "{backend:?}: the edit is in the tree");
        let status = s.git(&["status", "--porcelain", "--", ".", ":!.work"]);
        assert_eq!(status, " M src/jobs.rs\n?? READY\n", "{backend:?}");
        let turns = server.requests_for(0);
        let sent = turns[3].body["messages"].to_string();
        assert!(sent.contains("tests-pass") && sent.contains("PATH="), "{backend:?}: the command's output: {sent}");
        assert!(!sent.contains(KEY), "{backend:?}: the key `work` holds reached a command's environment");
    }
}

#[test]
fn http_implement_implementer_writes_and_runs_the_suite_to_done() {
    for backend in BOTH {
        let server = ModelServer::start(Script::new(vec![
            Rule::new(
                "You are the IMPLEMENTER of task 1",
                vec![
                    Step::Tools(vec![ToolCall::new(
                        "apply_patch",
                        json!({"patch":
                        "*** Begin Patch\n*** Add File: hello.txt\n+hi\n*** End Patch\n"}),
                    )]),
                    Step::Bash("grep -q hi hello.txt && echo suite-green".into()),
                    Step::Answer(json!({"status": "DONE", "summary": "wrote hello.txt", "applied_changes": true})),
                ],
            ),
            Rule::new(
                "You are the SPEC-COMPLIANCE REVIEWER of task 1",
                vec![
                    Step::Tools(vec![ToolCall::new("read_file", json!({"path": "hello.txt"}))]),
                    Step::Answer(json!({"status": "compliant", "issues": [], "files_read": ["hello.txt"]})),
                ],
            ),
            Rule::new(
                "You are the QUALITY REVIEWER of task 1",
                vec![
                    Step::Tools(vec![ToolCall::new("read_file", json!({"path": "hello.txt"}))]),
                    Step::Answer(json!({"verdict": "approved", "issues": [], "files_read": ["hello.txt"]})),
                ],
            ),
        ]))
        .expect("server");
        let s = repo(&server, backend, "");
        s.write("PLAN.md", "# Plan\n\n## Task 1: Add greeting\n\nCreate hello.txt holding `hi`.\n");
        s.commit("plan");
        let (code, r, err) =
            run(&s, &["implement", "--plan", "PLAN.md", "--iter-id", "it-1", "--test-cmd", "grep -q hi hello.txt"]);
        assert_eq!((code, r["status"].as_str()), (0, Some("DONE")), "{backend:?}: {r:#}\n{err}");
        assert_eq!(r["suite_green"], true, "{backend:?}: {r:#}");
        assert_eq!(s.read("hello.txt"), "hi\n");
        let status = s.git(&["status", "--porcelain", "--untracked-files=all", "--", ".", ":!.work"]);
        assert_eq!(status, "?? hello.txt\n", "{backend:?}");
        let implementer = server.requests_for(0);
        assert!(implementer[2].body["messages"].to_string().contains("suite-green"), "{backend:?}");
    }
}

#[test]
fn http_a_model_looping_on_tool_calls_stops_at_the_turn_cap() {
    for backend in BOTH {
        let list = || Step::Tools(vec![ToolCall::new("list_dir", json!({}))]);
        let server = ModelServer::start(Script::new(vec![Rule::new(
            "You are the worker for iteration 1",
            (0..10).map(|_| list()).collect(),
        )]))
        .expect("server");
        let s = repo(&server, backend, "max_turns = 3\n");
        let (code, v, err) = run(&s, &["until", "file READY exists", "--goal", "g", "--verify", "test -e READY"]);
        assert_ne!(code, 0, "{backend:?}: {v:#}");
        let text = format!("{v}\n{err}");
        assert!(text.contains("max_turns = 3 reached without an answer"), "{backend:?}: a clear reason:\n{text}");
        let turns = server.requests_for(0);
        assert_eq!(turns.len(), 3, "{backend:?}: no fourth turn");
        // Told to answer on the last turn (the scripted model does not listen).
        let choices: Vec<&Value> = turns.iter().map(|t| &t.body["tool_choice"]).collect();
        let want = match backend {
            Backend::OpenAi => [json!("auto"), json!("auto"), json!("none")],
            Backend::Anthropic => [Value::Null, Value::Null, json!({"type": "none"})],
        };
        assert_eq!(choices, want.iter().collect::<Vec<_>>(), "{backend:?}");
    }
}
