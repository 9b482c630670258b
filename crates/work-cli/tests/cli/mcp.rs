//! `work mcp` over stdio, driven with raw JSON-RPC from the test: the handshake, the tool
//! schemas, a call that returns the master object, refusals before anything runs, progress
//! notifications, a cancellation that leaves a resumable journal, secrets, resources and
//! the run history.

use crate::support::{Scenario, fallback_only};
use serde_json::{Value, json};
use std::io::{BufRead, BufReader, Write};
use std::process::{Child, ChildStdin, Stdio};
use std::sync::mpsc::{Receiver, channel};
use std::time::Duration;

/// Long enough for any step on a loaded machine; only a hang reaches it.
const PATIENCE: Duration = Duration::from_secs(120);

const SECRET: &str = "sk-planted-secret-0123456789";

/// A `work mcp` server and the messages it wrote.
struct Mcp {
    child: Child,
    stdin: ChildStdin,
    rx: Receiver<Value>,
    /// Everything read so far, in order.
    seen: Vec<Value>,
    next_id: u64,
}

impl Mcp {
    fn start(s: &Scenario) -> Mcp {
        Self::start_with(s, &[])
    }

    fn start_with(s: &Scenario, env: &[(&str, &str)]) -> Mcp {
        let mut child = s
            .work_std()
            .arg("mcp")
            .current_dir(s.root())
            .env("WORK_FAKE_CLOCK", "2026-01-01T00:00:00Z")
            .env("NO_COLOR", "1")
            .env("PLANTED_API_KEY", SECRET)
            .env_remove("OPENAI_API_KEY")
            .env_remove("ANTHROPIC_API_KEY")
            .env_remove("WORK_MCP_PARENT")
            .envs(env.iter().copied())
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::inherit())
            .spawn()
            .expect("start work mcp");
        let stdin = child.stdin.take().expect("stdin");
        let stdout = child.stdout.take().expect("stdout");
        let (tx, rx) = channel();
        std::thread::spawn(move || {
            for line in BufReader::new(stdout).lines().map_while(Result::ok) {
                let v: Value = serde_json::from_str(&line).unwrap_or_else(|e| panic!("not JSON-RPC ({e}): {line}"));
                if tx.send(v).is_err() {
                    break;
                }
            }
        });
        let mut m = Mcp { child, stdin, rx, seen: Vec::new(), next_id: 0 };
        let init = m.request(
            "initialize",
            json!({"protocolVersion": "2025-11-25", "capabilities": {}, "clientInfo": {"name": "test", "version": "0"}}),
        );
        assert_eq!(init["result"]["serverInfo"]["name"], "work", "{init}");
        assert!(init["result"]["capabilities"]["tools"].is_object(), "{init}");
        assert!(init["result"]["capabilities"]["resources"].is_object(), "{init}");
        m.send(&json!({"jsonrpc": "2.0", "method": "notifications/initialized"}));
        m
    }

    fn send(&mut self, v: &Value) {
        writeln!(self.stdin, "{v}").expect("write to the server");
        self.stdin.flush().expect("flush");
    }

    /// Sends a request and returns its id.
    fn send_request(&mut self, method: &str, params: Value) -> u64 {
        self.next_id += 1;
        let id = self.next_id;
        self.send(&json!({"jsonrpc": "2.0", "id": id, "method": method, "params": params}));
        id
    }

    /// The next message that satisfies `pred` (earlier ones are kept in `seen`).
    fn wait_for(&mut self, what: &str, pred: impl Fn(&Value) -> bool) -> Value {
        loop {
            let v = self.rx.recv_timeout(PATIENCE).unwrap_or_else(|_| panic!("no {what}; seen: {:#?}", self.seen));
            self.seen.push(v.clone());
            if pred(&v) {
                return v;
            }
        }
    }

    fn response(&mut self, id: u64) -> Value {
        self.wait_for(&format!("response {id}"), |v| v["id"] == id && v.get("method").is_none())
    }

    fn request(&mut self, method: &str, params: Value) -> Value {
        let id = self.send_request(method, params);
        self.response(id)
    }

    /// `tools/call` with a progress token; returns the result.
    fn call(&mut self, tool: &str, args: Value, token: &str) -> Value {
        let r = self.request("tools/call", json!({"name": tool, "arguments": args, "_meta": {"progressToken": token}}));
        assert!(r.get("error").is_none(), "a protocol error: {r}");
        r["result"].clone()
    }

    fn progress(&self, token: &str) -> Vec<String> {
        self.seen
            .iter()
            .filter(|v| v["method"] == "notifications/progress" && v["params"]["progressToken"] == token)
            .map(|v| v["params"]["message"].as_str().unwrap_or("").to_string())
            .collect()
    }
}

impl Drop for Mcp {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

fn text(result: &Value) -> String {
    result["content"]
        .as_array()
        .map(|c| c.iter().filter_map(|b| b["text"].as_str()).collect::<Vec<_>>().join("\n"))
        .unwrap_or_default()
}

/// A repository with job-state sites and a finder that answers per angle; `hang` names an
/// angle whose first call writes its pid to `.agent-state/hanging` and sleeps.
fn scenario(hang: &str) -> (Scenario, String) {
    let s = Scenario::new();
    s.write("src/jobs.rs", "fn a() { transition(1); }\nfn b() { transition(2); }\n");
    s.commit("jobs");
    let agent = s.agent(
        "finder.py",
        &format!(
            r#"
angle = ctx['angle']
if angle == {hang:?} and bump('hang-' + angle) == 1:
    open(state_path('hanging'), 'w').write(str(os.getpid()))
    time.sleep(600)
bump('calls-' + angle)
open(state_path('saw-secret'), 'w').write(os.environ.get('PLANTED_API_KEY', ''))
items = []
if angle == 'a':
    items = [{{"id": "s1", "title": "leak " + os.environ.get('PLANTED_API_KEY', ''), "location": "src/jobs.rs:1"}}]
print(json.dumps({{"angle": angle, "items": items, "roundNotes": "notes " + os.environ.get('PLANTED_API_KEY', '')}}))
"#
        ),
    );
    // The finder is given the planted key (an agent sees no key it is not given), and leaks it.
    s.write("work.toml", &format!("[agents.leaky]\nspec = {agent:?}\nenv = [\"PLANTED_API_KEY\"]\n"));
    s.commit("the leaky agent");
    (s, "leaky".to_string())
}

/// The scenario whose finder of angle `b` (round 2) hangs on its first call.
pub(crate) fn hanging_scenario() -> (Scenario, String) {
    scenario("b")
}

fn exhaust_args(agent: &str) -> Value {
    json!({"what": "job state sites", "k": 2, "angles": ["a", "b", "c", "d"], "agent": agent})
}

#[test]
fn lists_the_tools_with_the_commands_flags() {
    let (s, _) = scenario("none");
    let mut m = Mcp::start(&s);
    let r = m.request("tools/list", json!({}));
    let tools = r["result"]["tools"].as_array().expect("tools");
    let names: Vec<&str> = tools.iter().filter_map(|t| t["name"].as_str()).collect();
    for want in ["exhaust", "until", "implement", "edit", "ultra", "loop_run", "runs_list", "run_show"] {
        assert!(names.contains(&want), "{want} missing from {names:?}");
    }
    let schema = |n: &str| tools.iter().find(|t| t["name"] == n).map(|t| t["inputSchema"].clone()).expect("tool");
    let ex = schema("exhaust");
    assert_eq!(ex["required"], json!(["what"]));
    assert_eq!(ex["additionalProperties"], false);
    let p = &ex["properties"];
    assert_eq!(p["k"]["type"], "integer");
    assert_eq!(p["angles"]["type"], "array");
    assert_eq!(p["seed_oracle"]["type"], "array");
    assert_eq!(p["final_oracle"]["items"]["type"], "string");
    assert_eq!(p["fresh"]["type"], "boolean");
    assert_eq!(p["budget_usd"]["type"], "number");
    assert!(p.get("json").is_none() && p.get("state_dir").is_none(), "output and global flags are not fields: {p}");
    assert_eq!(schema("until")["properties"]["mode"]["enum"], json!(["auto", "human-gate"]));
    assert_eq!(schema("loop_run")["required"], json!(["spec_dir"]));
    assert_eq!(schema("ultra")["required"], json!(["goal"]));
}

#[test]
fn exhaust_returns_the_master_object_with_progress_and_no_secret() {
    let (s, agent) = scenario("none");
    let mut m = Mcp::start(&s);
    let r = m.call("exhaust", exhaust_args(&agent), "p1");
    assert_eq!(r["isError"], false, "{r}");
    let master = &r["structuredContent"];
    assert_eq!(master["stoppedReason"], "k-consecutive-dry", "{master}");
    let journal = s.read_json(".work/quality-journals/work-exhaust-job-state-sites.json");
    assert_eq!(master, &journal, "the result is the journal's master object");
    let progress = m.progress("p1");
    assert!(progress.iter().any(|l| l.starts_with("Round 1: 1 new")), "{progress:?}");
    assert!(progress.iter().any(|l| l.contains("dispatch(es) in flight")), "{progress:?}");
    // Resources: the journal and the event log, readable, redacted.
    let list = m.request("resources/list", json!({}));
    let uris: Vec<String> = list["result"]["resources"]
        .as_array()
        .expect("resources")
        .iter()
        .filter_map(|x| x["uri"].as_str().map(str::to_string))
        .collect();
    let journal_uri = "work://state/quality-journals/work-exhaust-job-state-sites.json";
    assert!(uris.iter().any(|u| u == journal_uri), "{uris:?}");
    assert!(uris.iter().any(|u| u.starts_with("work://state/runs/") && u.ends_with("/events.jsonl")), "{uris:?}");
    let read = m.request("resources/read", json!({"uri": journal_uri}));
    let body = read["result"]["contents"][0]["text"].as_str().expect("text");
    assert_eq!(serde_json::from_str::<Value>(body).expect("json"), journal);
    let outside = m.request("resources/read", json!({"uri": "work://state/../src/jobs.rs"}));
    assert!(outside.get("error").is_some(), "{outside}");
    // History.
    let runs = m.call("runs_list", json!({}), "p2");
    let run = &runs["structuredContent"]["runs"][0];
    assert_eq!(run["workflow"], "exhaust", "{runs}");
    assert_eq!(run["outcome"], "k-consecutive-dry", "{runs}");
    assert!(run["dispatches"].as_u64().is_some_and(|n| n >= 2), "{run}");
    for k in ["run_id", "started", "tokens", "cost_usd"] {
        assert!(run.get(k).is_some(), "{k} missing: {run}");
    }
    let shown = m.call("run_show", json!({"run_id": run["run_id"]}), "p3");
    assert_eq!(shown["structuredContent"]["run"]["run_id"], run["run_id"], "the `work show --json` document: {shown}");
    // The planted secret reached the agent, never the client.
    assert_eq!(s.read(".agent-state/saw-secret"), SECRET, "the agent had the secret");
    for v in &m.seen {
        assert!(!v.to_string().contains(SECRET), "the secret leaked: {v}");
    }
}

#[test]
fn bad_arguments_are_tool_errors_naming_the_field_before_anything_runs() {
    let (s, agent) = scenario("none");
    let mut m = Mcp::start(&s);
    let mut args = exhaust_args(&agent);
    args["seed_oracles"] = json!(["grep x"]);
    let r = m.call("exhaust", args, "b1");
    assert_eq!(r["isError"], true, "{r}");
    assert!(text(&r).contains("unknown field `seed_oracles` (did you mean `seed_oracle`?)"), "{r}");
    let r = m.call("exhaust", json!({"what": "x", "k": "two", "agent": agent}), "b2");
    assert_eq!(r["isError"], true, "{r}");
    assert!(text(&r).contains("field `k` must be a whole number"), "{r}");
    let r = m.call("exhaust", json!({"k": 2, "agent": agent}), "b3");
    assert!(text(&r).contains("field `what` is required"), "{r}");
    assert!(!s.path(".work").exists(), "a refused call left state behind");
    // The command's bound (K ≥ 2) is the schema's minimum, refused before anything runs.
    let r = m.call("exhaust", json!({"what": "x", "k": 1, "agent": agent}), "b4");
    assert_eq!(r["isError"], true, "{r}");
    assert!(text(&r).contains("field `k` must be at least 2"), "{r}");
    assert!(!text(&r).contains("--k"), "{r}");
    assert!(!s.path(".work/quality-journals").exists(), "exit 2 changed state");
    let r = m.request("tools/call", json!({"name": "exhast", "arguments": {}}));
    assert!(text(&r["result"]).contains("did you mean `exhaust`?"), "{r}");
}

#[test]
fn a_cancelled_call_stops_the_agents_and_the_same_call_resumes() {
    // The test reads the hanging finder by the pid it records.
    let _unconfined = fallback_only(crate::containment::SWEEP);
    let (s, agent) = scenario("b");
    let mut m = Mcp::start(&s);
    let id = m.send_request(
        "tools/call",
        json!({"name": "exhaust", "arguments": exhaust_args(&agent), "_meta": {"progressToken": "c1"}}),
    );
    // Round 1 is committed once its progress line arrives; round 2's finder then hangs.
    m.wait_for("round 1", |v| {
        v["params"]["progressToken"] == "c1"
            && v["params"]["message"].as_str().is_some_and(|l| l.starts_with("Round 1"))
    });
    // The finder creates the file, then writes its pid: wait for a whole pid, not the file.
    let hanging = s.path(".agent-state/hanging");
    let read_pid = || std::fs::read_to_string(&hanging).ok().and_then(|t| t.trim().parse::<i32>().ok());
    for _ in 0..1200 {
        if read_pid().is_some() {
            break;
        }
        std::thread::sleep(Duration::from_millis(100));
    }
    let pid: i32 = read_pid().expect("the finder of round 2 started and wrote its pid");
    m.send(
        &json!({"jsonrpc": "2.0", "method": "notifications/cancelled", "params": {"requestId": id, "reason": "user"}}),
    );
    m.wait_for("the cancellation note", |v| {
        v["params"]["progressToken"] == "c1"
            && v["params"]["message"].as_str().is_some_and(|l| l.starts_with("cancelled: agents stopped"))
    });
    // SIGKILL is asynchronous: the agent may take a moment to die once the child has exited.
    let gone = || !std::path::Path::new(&format!("/proc/{pid}")).exists() || proc_is_zombie(pid);
    for _ in 0..100 {
        if gone() {
            break;
        }
        std::thread::sleep(Duration::from_millis(100));
    }
    assert!(gone(), "the hanging agent survived");
    let journal = s.read_json(".work/quality-journals/work-exhaust-job-state-sites.json");
    assert_eq!(journal["rounds"].as_array().map(Vec::len), Some(1), "round 1 kept: {journal}");
    assert!(journal["stoppedReason"].is_null(), "{journal}");
    // No response to a cancelled request; the same call resumes at round 2.
    let r = m.call("exhaust", exhaust_args(&agent), "c2");
    assert!(!m.seen.iter().any(|v| v["id"] == id && v.get("result").is_some()), "the cancelled call was answered");
    assert_eq!(r["isError"], false, "{r}");
    let master = &r["structuredContent"];
    assert_eq!(master["stoppedReason"], "k-consecutive-dry", "{master}");
    assert_eq!(master["rounds"][0]["newItems"], json!(["s1"]), "{master}");
    assert_eq!(master["rounds"].as_array().map(Vec::len), Some(3), "{master}");
    assert_eq!(s.read(".agent-state/calls-a"), "1", "round 1 was not run again");
    assert!(m.progress("c2").iter().any(|l| l.starts_with("Resuming at round 2")), "{:?}", m.progress("c2"));
}

/// The process is gone or a zombie.
pub(crate) fn proc_is_zombie(pid: i32) -> bool {
    std::fs::read_to_string(format!("/proc/{pid}/stat"))
        .map(|s| s.rsplit(')').next().map(str::trim_start).is_some_and(|r| r.starts_with('Z') || r.starts_with('X')))
        .unwrap_or(true)
}

#[test]
fn a_server_inside_a_dispatched_agent_refuses_workflows_but_not_history() {
    // The agents of a served run inherit WORK_MCP_PARENT; a nested host loading the same
    // plugin starts its `work mcp` with it.
    let (s, agent) = scenario("none");
    let mut outer = Mcp::start(&s);
    let seen_by_agent = s.agent("env.py", "open(state_path('parent'), 'w').write(os.environ.get('WORK_MCP_PARENT', ''))\nprint(json.dumps({'angle': ctx['angle'], 'items': []}))");
    let r = outer.call("exhaust", json!({"what": "env", "k": 2, "angles": ["a", "b"], "agent": seen_by_agent}), "n0");
    assert_eq!(r["isError"], false, "{r}");
    let parent = s.read(".agent-state/parent");
    assert_eq!(parent, outer.child.id().to_string(), "the agent knows it runs under a served run");
    let mut m = Mcp::start_with(&s, &[("WORK_MCP_PARENT", &parent)]);
    let r = m.call("exhaust", exhaust_args(&agent), "n1");
    assert_eq!(r["isError"], true, "{r}");
    assert!(text(&r).contains("would recurse"), "{r}");
    assert!(!s.path(".work/quality-journals/work-exhaust-job-state-sites.json").exists());
    let runs = m.call("runs_list", json!({}), "n2");
    assert_eq!(runs["isError"], false, "{runs}");
}

#[test]
fn the_host_sessions_variables_never_reach_a_runs_agents() {
    // Claude Code starts its MCP servers with its session's identity, messaging socket and
    // marker; a nested agent that inherited them could attach to the host's session, which
    // is blocked on this very call.
    let (s, _) = scenario("none");
    let host = [
        ("CLAUDECODE", "1"),
        ("CLAUDE_CODE_ENTRYPOINT", "cli"),
        ("CLAUDE_CODE_SESSION_ID", "host-session"),
        ("CLAUDE_CODE_MESSAGING_SOCKET", "/tmp/host.sock"),
        ("CLAUDE_CODE_MESSAGING_TOKEN", "host-token"),
        ("CLAUDE_CODE_CHILD_NOTES_DIR", "/tmp/host-notes"),
        ("CLAUDE_CODE_SSE_PORT", "4242"),
        ("CODEX_THREAD_ID", "host-thread"),
        ("CLAUDE_CODE_LAUNCHED_BY_SESSION_IDS", "host-session"),
    ];
    let mut m = Mcp::start_with(&s, &host);
    let agent = s.agent(
        "env.py",
        "open(state_path('env'), 'w').write(json.dumps(dict(os.environ)))\nprint(json.dumps({'angle': ctx['angle'], 'items': []}))",
    );
    let r = m.call("exhaust", json!({"what": "env", "k": 2, "angles": ["a", "b"], "agent": agent}), "h1");
    assert_eq!(r["isError"], false, "{r}");
    let env: Value = s.read_json(".agent-state/env");
    // None reaches a command agent (the environment's allowlist); the lineage is kept for a
    // Claude Code backend, which gets `CLAUDE_*` (the served run's own `work` still has it).
    for (k, _) in &host {
        assert!(env.get(*k).is_none(), "{k} reached the agent: {env}");
    }
    assert_eq!(env["WORK_MCP_PARENT"], m.child.id().to_string(), "the agent is marked as a served run's");
}

/// A spec directory whose spec and plan already say Approved: `work loop run` pauses at the
/// spec gate (a person confirms), then at the plan gate. The agent (named in work.toml, so
/// that a continuing call needs nothing but what the paused result says) must not be needed.
pub(crate) fn gated_loop(s: &Scenario) {
    let agent = s.agent(
        "loop.py",
        "bump('calls')\nopen(state_path('ctx'), 'w').write(json.dumps(ctx))\nprint('no agent is needed before the plan gate')\nsys.exit(1)",
    );
    s.write("work.toml", &format!("agent = {agent:?}\n[gates]\ntest = \"test -f hello.txt\"\n"));
    s.write("README.md", "demo\n");
    s.write("docs/specs/hello/spec.md", "# Hello\n\n**Status:** Approved\n\nPrint a greeting.\n");
    s.write(
        "docs/specs/hello/plan.md",
        "# Plan\n\n**Status:** Approved\n\n## Task 1: Write hello\nCreate hello.txt.\n",
    );
    s.commit("spec");
}

#[test]
fn a_paused_run_names_the_exact_call_that_continues_and_that_call_continues() {
    let s = Scenario::new();
    gated_loop(&s);
    let mut m = Mcp::start(&s);
    let r = m.call("loop_run", json!({"spec_dir": "docs/specs/hello"}), "g1");
    assert_eq!(r["isError"], false, "{r}");
    assert_eq!(r["structuredContent"]["outcome"], "paused", "{r}");
    assert_eq!(r["structuredContent"]["reason"], "spec-human-gate", "{r}");
    let calls = r["_meta"]["work/continue"].as_array().expect("the calls that continue").clone();
    let approve = calls
        .iter()
        .find(|c| c["command"] == "work loop run docs/specs/hello --resume --approve")
        .unwrap_or_else(|| panic!("the approval as a call: {calls:?}"));
    assert_eq!(approve["tool"], "loop_run");
    assert_eq!(approve["arguments"], json!({"spec_dir": "docs/specs/hello", "resume": true, "approve": true}));
    let t = text(&r);
    assert!(t.contains("paused for a person (exit 3)"), "{t}");
    assert!(
        t.contains(r#"To continue (approve), call `loop_run` with {"spec_dir":"docs/specs/hello","resume":true,"approve":true}"#),
        "{t}"
    );
    assert_eq!(approve["label"], "approve");
    // The exact call continues the run.
    let r = m.call("loop_run", approve["arguments"].clone(), "g2");
    assert_eq!(r["structuredContent"]["reason"], "plan-human-gate", "{r}");
    assert!(s.read("docs/specs/hello/spec.md").contains("**Status:** Approved"));
    assert!(!s.path(".agent-state/calls").exists(), "no agent was dispatched");
}
