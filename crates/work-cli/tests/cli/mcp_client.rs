//! `work mcp` driven by an MCP client built on the official SDK (rmcp, in this process; the
//! server is the real binary): a client that can be asked (elicitation) is asked at a human
//! gate and the run continues on its answer; a call dropped by the client (the SDK sends
//! `notifications/cancelled`) stops the run's agents, and the same call resumes it.

use crate::support::{Scenario, fallback_only};
use rmcp::model::{
    CallToolRequestParams, CallToolResult, ClientCapabilities, ClientConfig, ElicitRequestParams, ElicitResult,
    ElicitationAction, Implementation,
};
use rmcp::service::{RequestContext, RoleClient, RunningService};
use rmcp::{ClientHandler, ErrorData, ServiceExt};
use serde_json::{Value, json};
use std::sync::{Arc, Mutex};
use std::time::Duration;

/// A client whose person gives the scripted answers in order (then declines), and that keeps
/// every question it was asked.
#[derive(Clone, Default)]
struct Person {
    elicitation: bool,
    answers: Arc<Mutex<Vec<ElicitResult>>>,
    asked: Arc<Mutex<Vec<String>>>,
}

impl ClientHandler for Person {
    fn get_info(&self) -> ClientConfig {
        let caps = if self.elicitation {
            ClientCapabilities::builder().enable_elicitation().build()
        } else {
            ClientCapabilities::default()
        };
        ClientConfig::new(caps, Implementation::new("work-test-client", "0"))
    }

    async fn create_elicitation(
        &self,
        request: ElicitRequestParams,
        _context: RequestContext<RoleClient>,
    ) -> Result<ElicitResult, ErrorData> {
        let message = match &request {
            ElicitRequestParams::FormElicitationParams { message, requested_schema, .. } => {
                let schema = serde_json::to_value(requested_schema).unwrap_or_default();
                format!("{message} {schema}")
            }
            _ => "not a form".to_string(),
        };
        if let Ok(mut a) = self.asked.lock() {
            a.push(message);
        }
        let next = self.answers.lock().ok().and_then(|mut a| (!a.is_empty()).then(|| a.remove(0)));
        Ok(next.unwrap_or_else(|| ElicitResult::new(ElicitationAction::Decline)))
    }
}

fn accept(content: Value) -> ElicitResult {
    let mut r = ElicitResult::new(ElicitationAction::Accept);
    r.content = Some(content);
    r
}

fn runtime() -> tokio::runtime::Runtime {
    tokio::runtime::Builder::new_multi_thread().enable_all().build().expect("a runtime")
}

/// Starts the real `work mcp` in the scenario and connects `person` to it.
async fn connect(s: &Scenario, person: Person) -> RunningService<RoleClient, Person> {
    let mut child = tokio::process::Command::from(s.work_std())
        .arg("mcp")
        .current_dir(s.root())
        .env("WORK_FAKE_CLOCK", "2026-01-01T00:00:00Z")
        .env("NO_COLOR", "1")
        .env_remove("OPENAI_API_KEY")
        .env_remove("ANTHROPIC_API_KEY")
        .env_remove("WORK_MCP_PARENT")
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::inherit())
        .kill_on_drop(true)
        .spawn()
        .expect("start work mcp");
    let (stdout, stdin) = (child.stdout.take().expect("stdout"), child.stdin.take().expect("stdin"));
    // The server lives as long as its pipes; the child handle may go.
    tokio::spawn(async move {
        let _ = child.wait().await;
    });
    person.serve((stdout, stdin)).await.expect("the MCP handshake")
}

fn call(tool: &str, args: Value) -> CallToolRequestParams {
    CallToolRequestParams::new(tool.to_string()).with_arguments(args.as_object().cloned().unwrap_or_default())
}

fn text(r: &CallToolResult) -> String {
    serde_json::to_value(&r.content)
        .ok()
        .and_then(|c| c.as_array().cloned())
        .unwrap_or_default()
        .iter()
        .filter_map(|b| b["text"].as_str().map(str::to_string))
        .collect::<Vec<_>>()
        .join("\n")
}

fn doc(r: &CallToolResult) -> Value {
    r.structured_content.clone().unwrap_or(Value::Null)
}

#[test]
fn a_client_that_can_be_asked_decides_the_gate_and_the_run_continues() {
    let s = Scenario::new();
    crate::mcp::gated_loop(&s);
    let person = Person {
        elicitation: true,
        answers: Arc::new(Mutex::new(vec![accept(json!({"decision": "approve"}))])),
        ..Person::default()
    };
    let asked = person.asked.clone();
    let r = runtime().block_on(async {
        let client = connect(&s, person).await;
        let r = client.call_tool(call("loop_run", json!({"spec_dir": "docs/specs/hello"}))).await.expect("a result");
        let _ = client.cancel().await;
        r
    });
    // Asked at the spec gate: approved, so the run went on to the plan gate; asked again there:
    // declined, so the call ends paused at the plan gate with the calls that continue.
    let asked = asked.lock().map(|a| a.clone()).unwrap_or_default();
    assert_eq!(asked.len(), 2, "{asked:#?}");
    assert!(asked[0].contains("the spec awaits") && asked[0].contains(r#""enum":["approve","reject"]"#), "{asked:#?}");
    assert!(asked[1].contains("the plan awaits"), "{asked:#?}");
    assert_eq!(r.is_error, Some(false), "{r:?}");
    assert_eq!(doc(&r)["reason"], "plan-human-gate", "{r:?}");
    let t = text(&r);
    assert!(t.contains("Asked through the client: the person declined to decide"), "{t}");
    assert!(t.contains("To continue (approve), call `loop_run`"), "{t}");
    let transitions = doc(&r)["transitions"].to_string();
    assert!(transitions.contains("(spec-approved)"), "the approval was the person's: {transitions}");
}

#[test]
fn a_rejection_through_the_client_sends_the_spec_back_with_the_persons_words() {
    let s = Scenario::new();
    crate::mcp::gated_loop(&s);
    let person = Person {
        elicitation: true,
        answers: Arc::new(Mutex::new(vec![accept(
            json!({"decision": "reject", "changes": "greet the reader by name"}),
        )])),
        ..Person::default()
    };
    let r = runtime().block_on(async {
        let client = connect(&s, person).await;
        let r = client.call_tool(call("loop_run", json!({"spec_dir": "docs/specs/hello"}))).await.expect("a result");
        let _ = client.cancel().await;
        r
    });
    assert!(doc(&r)["transitions"].to_string().contains("(spec-rejected)"), "{r:?}");
    assert!(s.read("docs/specs/hello/spec.md").contains("**Status:** Draft"), "the spec went back to drafting");
    // The drafter it went back to was told what the person said.
    let ctx = s.read(".agent-state/ctx");
    assert!(ctx.contains("greet the reader by name"), "the drafter's context: {ctx}");
}

#[test]
fn a_client_that_cannot_be_asked_gets_paused() {
    let s = Scenario::new();
    crate::mcp::gated_loop(&s);
    let r = runtime().block_on(async {
        let client = connect(&s, Person::default()).await;
        let r = client.call_tool(call("loop_run", json!({"spec_dir": "docs/specs/hello"}))).await.expect("a result");
        let _ = client.cancel().await;
        r
    });
    assert_eq!(doc(&r)["reason"], "spec-human-gate", "{r:?}");
    assert!(!text(&r).contains("Asked through the client"), "{r:?}");
}

#[test]
fn a_call_the_client_drops_stops_the_agents_and_the_same_call_resumes() {
    // The test reads the hanging finder by the pid it records.
    let _unconfined = fallback_only(crate::containment::SWEEP);
    let (s, agent) = crate::mcp::hanging_scenario();
    let args = json!({"what": "job state sites", "k": 2, "angles": ["a", "b", "c", "d"], "agent": agent});
    let hanging = s.path(".agent-state/hanging");
    let (first, second) = runtime().block_on(async {
        let client = connect(&s, Person::default()).await;
        let peer = client.peer().clone();
        let request = call("exhaust", args.clone());
        let pending = tokio::spawn(async move { peer.call_tool(request).await });
        for _ in 0..1200 {
            if hanging.exists() {
                break;
            }
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
        // Dropping the call is how the SDK cancels it (`notifications/cancelled`).
        pending.abort();
        let first = pending.await;
        let pid: i32 =
            std::fs::read_to_string(&hanging).expect("round 2's finder started").trim().parse().expect("pid");
        for _ in 0..600 {
            if crate::mcp::proc_is_zombie(pid) {
                break;
            }
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
        assert!(crate::mcp::proc_is_zombie(pid), "the hanging agent survived the cancellation");
        let second = client.call_tool(call("exhaust", args.clone())).await.expect("a result");
        let _ = client.cancel().await;
        (first.is_err(), second)
    });
    assert!(first, "the dropped call never completed");
    assert_eq!(second.is_error, Some(false), "{second:?}");
    let master = doc(&second);
    assert_eq!(master["stoppedReason"], "k-consecutive-dry", "{master}");
    assert_eq!(master["rounds"][0]["newItems"], json!(["s1"]), "{master}");
    assert_eq!(s.read(".agent-state/calls-a"), "1", "round 1 was not run again");
}

/// Every tool, as the SDK's client lists it, carries the four annotations and an output
/// schema; until, implement and edit declare what a call must carry; exhaust's `k` is at least
/// 2 (a call with 1 is refused before anything runs); a structured result the client checks
/// against the output schema is accepted.
#[test]
fn every_tool_carries_annotations_an_output_schema_and_its_required_fields() {
    let s = Scenario::new();
    s.write("src/a.rs", "fn a() {}\n");
    s.commit("a");
    let (tools, refused, listed) = runtime().block_on(async {
        let client = connect(&s, Person::default()).await;
        let tools = client.list_all_tools().await.expect("tools/list");
        let refused = client.call_tool(call("exhaust", json!({"what": "x", "k": 1}))).await.expect("a result");
        let listed = client.call_tool(call("runs_list", json!({}))).await.expect("a result");
        let _ = client.cancel().await;
        (tools, refused, listed)
    });
    assert_eq!(tools.len(), 8, "{tools:?}");
    for t in &tools {
        let a = t.annotations.as_ref().unwrap_or_else(|| panic!("{} has no annotations", t.name));
        assert!(
            a.read_only_hint.is_some()
                && a.destructive_hint.is_some()
                && a.idempotent_hint.is_some()
                && a.open_world_hint.is_some(),
            "{}: {a:?}",
            t.name
        );
        let out = t.output_schema.as_ref().unwrap_or_else(|| panic!("{} has no output schema", t.name));
        assert_eq!(out.get("type"), Some(&json!("object")), "{}", t.name);
    }
    let tool = |n: &str| tools.iter().find(|t| t.name == n).unwrap_or_else(|| panic!("{n}"));
    let hints = |n: &str| {
        let a = tool(n).annotations.clone().unwrap_or_default();
        (a.read_only_hint, a.destructive_hint, a.open_world_hint)
    };
    assert_eq!(hints("exhaust"), (Some(true), Some(false), Some(true)));
    assert_eq!(hints("edit"), (Some(false), Some(true), Some(true)));
    assert_eq!(hints("runs_list"), (Some(true), Some(false), Some(false)));
    let input = |n: &str| Value::Object((*tool(n).input_schema).clone());
    assert_eq!(input("until")["required"], json!(["until", "goal"]));
    assert_eq!(
        input("implement")["anyOf"],
        json!([{"required": ["plan"]}, {"required": ["carrier"]}, {"required": ["carrier_file"]}])
    );
    assert_eq!(input("edit")["anyOf"][0], json!({"required": ["description", "def_site"]}));
    assert_eq!(input("exhaust")["properties"]["k"]["minimum"], 2);
    assert_eq!(refused.is_error, Some(true));
    assert!(text(&refused).contains("field `k` must be at least 2"), "{}", text(&refused));
    assert!(!s.path(".work/quality-journals").exists(), "nothing ran");
    assert_eq!(listed.is_error, Some(false), "{}", text(&listed));
    assert!(doc(&listed)["runs"].is_array(), "{listed:?}");
}
