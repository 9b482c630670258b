//! `work agents` end to end, and the real backends driven through the binary: fake `claude`
//! and `codex` executables on PATH that check the flags they receive and answer in the
//! tools' documented formats, and a loopback HTTP server for `openai:`.

use crate::support::{Scenario, assert_one_line_error, suite_confines};
use serde_json::{Value, json};
use std::path::PathBuf;

const CANARY: &str = "sk-canary-1234567890";

/// A fake `claude`: checks the flags of a headless structured-output run, then answers per
/// `WORK_TEST_FAKE_MODE` (ok, null, null-then-ok, max-turns, exit, hang).
const FAKE_CLAUDE: &str = r#"#!/usr/bin/env python3
import json, os, sys, time
args = sys.argv[1:]
VERSION = os.environ.get("WORK_TEST_FAKE_CLAUDE_VERSION", "2.1.240")
if args == ["--version"]:
    print(VERSION + " (Claude Code)")
    sys.exit(0)
prompt = sys.stdin.read()
def flag(name):
    return args[args.index(name) + 1] if name in args else None
def die(msg):
    sys.stderr.write("fake claude: " + msg + "\n")
    sys.exit(3)
# What real releases accept: max from 2.1.76, xhigh from 2.1.111.
v = tuple(int(x) for x in VERSION.split("."))
levels = ["low", "medium", "high"] + (["max"] if v >= (2, 1, 76) else []) + (["xhigh"] if v >= (2, 1, 111) else [])
if flag("--effort") is not None and flag("--effort") not in levels:
    sys.stderr.write("error: option '--effort <level>' argument '%s' is invalid. It must be one of: %s\n"
                     % (flag("--effort"), ", ".join(levels)))
    sys.exit(1)
if args[0] != "-p": die("not headless")
if flag("--output-format") != "json": die("no json output")
if flag("--model") != os.environ.get("WORK_TEST_WANT_MODEL", "sonnet"): die("model " + str(flag("--model")))
if flag("--effort") != os.environ.get("WORK_TEST_WANT_EFFORT", "high"): die("effort " + str(flag("--effort")))
schema = json.loads(flag("--json-schema") or "null")
if schema is None or "items" not in schema.get("required", []): die("no schema")
want_mode = "acceptEdits" if os.environ.get("WORK_TEST_WANT_WRITE") else "default"
if flag("--permission-mode") != want_mode: die("permission mode " + str(flag("--permission-mode")))
if want_mode == "default" and "Edit" not in (flag("--disallowedTools") or ""): die("edits not disallowed")
if os.getcwd() != os.environ["WORK_TEST_WANT_CWD"]: die("cwd " + os.getcwd())
if "brief:" not in prompt: die("no prompt on stdin")
state = os.environ["WORK_TEST_FAKE_STATE"]
n = int(open(state).read()) + 1 if os.path.exists(state) else 1
open(state, "w").write(str(n))
mode = os.environ.get("WORK_TEST_FAKE_MODE", "ok")
usage = {"input_tokens": 10, "cache_read_input_tokens": 90, "output_tokens": 5}
def result(**kw):
    r = {"type": "result", "subtype": "success", "is_error": False, "result": "", "total_cost_usd": 0.5,
         "usage": usage, "session_id": "s"}
    r.update(kw)
    print(json.dumps(r))
if mode == "ok" or (mode == "null-then-ok" and n == 2):
    result(structured_output={"items": ["a"]})
elif mode in ("null", "null-then-ok"):
    result(structured_output=None)
elif mode == "max-turns":
    result(subtype="error_max_turns", is_error=True)
    sys.exit(1)
elif mode == "exit":
    sys.stderr.write("Error: boom\n")
    sys.exit(7)
elif mode == "hang":
    time.sleep(60)
"#;

/// The strict-mode check OpenAI applies to a `codex_output_schema` (Python), shared with
/// work-agents' unit tests.
const STRICT_PY: &str = include_str!("../../../work-agents/testdata/strict_schema_check.py");

/// A fake `codex`: checks the flags of `codex exec --json` (refusing, like OpenAI, an output
/// schema outside the strict subset, and, like releases before 0.60, `xhigh`), then streams
/// JSONL per `WORK_TEST_FAKE_MODE` (ok, cumulative, failed, prose, hang, finder).
const FAKE_CODEX: &str = r#"#!/usr/bin/env python3
import json, os, re, sys, time
args = sys.argv[1:]
VERSION = os.environ.get("WORK_TEST_FAKE_CODEX_VERSION", "0.98.0")
if args == ["--version"]:
    print("codex-cli " + VERSION)
    sys.exit(0)
prompt = sys.stdin.read()
def flag(name):
    return args[args.index(name) + 1] if name in args else None
def die(msg):
    sys.stderr.write("fake codex: " + msg + "\n")
    sys.exit(3)
STRICT
mode = os.environ.get("WORK_TEST_FAKE_MODE", "ok")
if args[:2] != ["exec", "--json"]: die("not exec --json")
if "--skip-git-repo-check" not in args: die("no --skip-git-repo-check")
if flag("-C") != os.environ["WORK_TEST_WANT_CWD"]: die("-C " + str(flag("-C")))
if flag("--sandbox") != os.environ["WORK_TEST_WANT_SANDBOX"]: die("sandbox " + str(flag("--sandbox")))
if "-m" in args: die("a tier pin must not become -m")
if "xhigh" in (flag("-c") or "") and tuple(int(x) for x in VERSION.split(".")) < (0, 60, 0):
    sys.stderr.write("Error loading configuration: unknown variant `xhigh`, expected one of `minimal`, `low`, `medium`, `high`\n")
    sys.exit(1)
if flag("-c") != 'model_reasoning_effort="%s"' % os.environ.get("WORK_TEST_WANT_EFFORT", "high"): die("effort " + str(flag("-c")))
schema = json.load(open(flag("--output-schema")))
err = check_strict(schema)
if err:
    print(json.dumps({"type": "error", "message": "Invalid schema for response_format 'codex_output_schema': " + err}))
    print(json.dumps({"type": "turn.failed", "error": {"message": "invalid_json_schema: " + err}}))
    sys.exit(1)
if "items" not in schema.get("required", []): die("bad schema file")
if args[-1] != "-" or (mode != "finder" and "brief:" not in prompt): die("no prompt on stdin")
def emit(**e):
    print(json.dumps(e), flush=True)
emit(type="thread.started", thread_id="t1")
emit(type="turn.started")
def msg(text):
    emit(type="item.completed", item={"id": "i", "type": "agent_message", "text": text})
def turn(i, o):
    emit(type="turn.completed", usage={"input_tokens": i, "cached_input_tokens": 0, "output_tokens": o})
if mode == "ok":
    msg("Looking around.")
    msg(json.dumps({"items": ["x", "y"]}))
    turn(120, 30)
elif mode == "cumulative":
    turn(100, 10)
    msg(json.dumps({"items": []}))
    turn(300, 40)
elif mode == "failed":
    emit(type="turn.failed", error={"message": "usage limit reached"})
    sys.exit(1)
elif mode == "prose":
    msg("I found two items.")
    turn(1, 1)
elif mode == "hang":
    time.sleep(60)
elif mode == "finder":
    # A strict model writes every property, null for the ones it has nothing for.
    angle = re.search(r"YOUR ANGLE: (.*?) —", prompt).group(1)
    msg(json.dumps({"angle": angle, "roundNotes": None, "items": [{"id": "job-state", "title": "job state",
        "location": "src/jobs.rs:1", "description": None, "evidence": None, "severity": None}]}))
    turn(10, 5)
"#;

fn fake_codex() -> String {
    FAKE_CODEX.replace("STRICT\n", &format!("{STRICT_PY}\n"))
}

struct Fakes {
    bin: PathBuf,
}

fn fakes(s: &Scenario) -> Fakes {
    // The scenario's helper writes executable scripts under `.agents/` (ignored by git).
    s.agent("placeholder.py", "pass");
    std::fs::create_dir_all(s.path(".agents/tmp")).expect("mkdir tmp");
    let bin = s.path(".agents/bin");
    for (name, body) in [("claude", FAKE_CLAUDE.to_string()), ("codex", fake_codex())] {
        s.write(&format!(".agents/bin/{name}"), &body);
        let p = bin.join(name);
        let mut perm = std::fs::metadata(&p).expect("stat").permissions();
        std::os::unix::fs::PermissionsExt::set_mode(&mut perm, 0o755);
        std::fs::set_permissions(&p, perm).expect("chmod");
    }
    Fakes { bin }
}

impl Fakes {
    fn path(&self) -> String {
        format!("{}:{}", self.bin.display(), std::env::var("PATH").unwrap_or_default())
    }
}

/// The `--sandbox` a read-only Codex gets: its own where it runs unconfined; inside the kernel
/// sandbox, which holds it to its role's access, none of its own (it cannot nest one).
fn codex_sandbox() -> &'static str {
    if suite_confines() { "danger-full-access" } else { "read-only" }
}

fn root(s: &Scenario) -> String {
    std::fs::canonicalize(s.root()).expect("canonical root").display().to_string()
}

/// Runs `work agents try` with the fakes on PATH; returns (code, stdout JSON, stderr).
fn try_with(s: &Scenario, f: &Fakes, agent: &str, mode: &str, extra: &[&str]) -> (i32, Value, String) {
    try_env(s, f, agent, mode, extra, &[])
}

/// [`try_with`] with extra environment variables.
fn try_env(
    s: &Scenario,
    f: &Fakes,
    agent: &str,
    mode: &str,
    extra: &[&str],
    envs: &[(&str, &str)],
) -> (i32, Value, String) {
    s.write(
        ".agents/schema.json",
        r#"{"type": "object", "required": ["items"], "properties": {"items": {"type": "array"}}}"#,
    );
    let mut args = vec!["agents", "try", "--agent", agent, "--schema", ".agents/schema.json", "--json"];
    args.extend_from_slice(extra);
    args.push("brief: list the items");
    let out = s
        .work()
        .env("PATH", f.path())
        .env("WORK_TEST_FAKE_MODE", mode)
        .env("WORK_TEST_FAKE_STATE", s.path(&format!(".agent-state/fake-{mode}")))
        .env("WORK_TEST_WANT_CWD", root(s))
        .env("WORK_TEST_WANT_SANDBOX", codex_sandbox())
        .env("TMPDIR", s.path(".agents/tmp"))
        .envs(envs.iter().copied())
        .args(&args)
        .output()
        .expect("run work");
    let stdout = String::from_utf8_lossy(&out.stdout).into_owned();
    let stderr = String::from_utf8_lossy(&out.stderr).into_owned();
    let v = serde_json::from_str(&stdout).unwrap_or_else(|e| panic!("stdout is not JSON ({e}):\n{stdout}\n{stderr}"));
    (out.status.code().unwrap_or(-1), v, stderr)
}

/// Every event of the scenario's runs, as one string.
fn all_logs(s: &Scenario) -> String {
    let mut out = String::new();
    let runs = s.path(".work/runs");
    for run in std::fs::read_dir(&runs).expect("runs dir").flatten() {
        out.push_str(&std::fs::read_to_string(run.path().join("events.jsonl")).unwrap_or_default());
        out.push_str(&std::fs::read_to_string(run.path().join("dispatches.jsonl")).unwrap_or_default());
    }
    out
}

#[test]
fn claude_structured_output_usage_and_cost_are_accounted() {
    let s = Scenario::new();
    let f = fakes(&s);
    let (code, v, err) = try_with(&s, &f, "claude", "ok", &[]);
    assert_eq!(code, 0, "{v}\n{err}");
    assert_eq!(v["outcome"], "ok");
    assert_eq!(v["output"], json!({"items": ["a"]}));
    assert_eq!((v["model"].as_str(), v["effort"].as_str()), (Some("sonnet"), Some("high")));
    assert_eq!(v["usage"]["input_tokens"], 100, "cache reads count as input");
    assert_eq!(v["usage"]["output_tokens"], 5);
    assert_eq!(v["usage"]["cost_usd"], 0.5);
    let logs = all_logs(&s);
    assert!(logs.contains("\"dispatch.end\"") && logs.contains("\"cost_usd\":0.5"), "{logs}");
}

#[test]
fn claude_pins_and_write_access_map_to_its_flags() {
    let s = Scenario::new();
    let f = fakes(&s);
    s.write("work.toml", "[roles.implementer]\nmodel = \"opus\"\neffort = \"xhigh\"\n");
    s.write(".agents/schema.json", r#"{"type": "object", "required": ["items"]}"#);
    let out = s
        .work()
        .env("PATH", f.path())
        .env("WORK_TEST_FAKE_STATE", s.path(".agent-state/fake-w"))
        .env("WORK_TEST_WANT_CWD", root(&s))
        .env("WORK_TEST_WANT_SANDBOX", codex_sandbox())
        .env("WORK_TEST_WANT_MODEL", "opus")
        .env("WORK_TEST_WANT_EFFORT", "xhigh")
        .env("WORK_TEST_WANT_WRITE", "1")
        .args(["agents", "try", "--agent", "claude", "--role", "implementer", "--write", "--json"])
        .args(["--schema", ".agents/schema.json", "brief: edit"])
        .output()
        .expect("runs");
    let v: Value = serde_json::from_slice(&out.stdout).expect("json");
    assert_eq!(v["outcome"], "ok", "{v} {}", String::from_utf8_lossy(&out.stderr));
}

#[test]
fn claude_null_structured_output_is_retried_once_then_dropped() {
    let s = Scenario::new();
    let f = fakes(&s);
    let (code, v, _) = try_with(&s, &f, "claude", "null-then-ok", &[]);
    assert_eq!((code, v["outcome"].as_str(), v["attempts"].as_u64()), (0, Some("ok"), Some(2)), "{v}");
    assert_eq!(v["usage"]["cost_usd"], 1.0, "both attempts are charged");
    let (code, v, _) = try_with(&s, &f, "claude", "null", &[]);
    assert_eq!((code, v["outcome"].as_str()), (1, Some("dropped")), "{v}");
    assert!(v["reason"].as_str().unwrap_or("").contains("structured_output is null"), "{v}");
    assert_eq!(v["dispatches"], 2);
}

#[test]
fn claude_error_subtypes_exits_and_hangs_fail_the_dispatch() {
    let s = Scenario::new();
    let f = fakes(&s);
    let (code, v, _) = try_with(&s, &f, "claude", "max-turns", &[]);
    assert_eq!((code, v["outcome"].as_str()), (1, Some("failed")), "{v}");
    assert!(v["reason"].as_str().unwrap_or("").contains("error_max_turns"), "{v}");
    assert_eq!(v["dispatches"], 1, "a failure is not retried");
    let (_, v, _) = try_with(&s, &f, "claude", "exit", &[]);
    assert!(v["reason"].as_str().unwrap_or("").contains("exit code 7: Error: boom"), "{v}");
    let (code, v, _) = try_with(&s, &f, "claude", "hang", &["-c", "timeouts.dispatch_secs=1"]);
    assert_eq!((code, v["outcome"].as_str()), (1, Some("failed")), "{v}");
    assert!(v["reason"].as_str().unwrap_or("").contains("timed out"), "{v}");
}

#[test]
fn codex_last_agent_message_and_cumulative_usage() {
    let s = Scenario::new();
    let f = fakes(&s);
    let (code, v, err) = try_with(&s, &f, "codex", "ok", &[]);
    assert_eq!(code, 0, "{v}\n{err}");
    assert_eq!(v["output"], json!({"items": ["x", "y"]}));
    assert_eq!((v["usage"]["input_tokens"].as_u64(), v["usage"]["output_tokens"].as_u64()), (Some(120), Some(30)));
    let (_, v, _) = try_with(&s, &f, "codex", "cumulative", &[]);
    assert_eq!(v["usage"]["input_tokens"], 300, "cumulative turn usage is not double counted: {v}");
    let (code, v, _) = try_with(&s, &f, "codex", "failed", &[]);
    assert_eq!((code, v["outcome"].as_str()), (1, Some("failed")));
    assert!(v["reason"].as_str().unwrap_or("").contains("usage limit reached"), "{v}");
    let (_, v, _) = try_with(&s, &f, "codex", "prose", &[]);
    assert_eq!(v["outcome"], "dropped", "prose is malformed twice: {v}");
    let (_, v, _) = try_with(&s, &f, "codex", "hang", &["-c", "timeouts.dispatch_secs=1"]);
    assert!(v["reason"].as_str().unwrap_or("").contains("timed out"), "{v}");
    let leftovers: Vec<_> = std::fs::read_dir(s.path(".agents/tmp")).expect("tmp").flatten().collect();
    assert!(leftovers.is_empty(), "schema files are removed");
}

#[test]
fn check_reports_usable_and_unusable_backends() {
    let s = Scenario::new();
    let f = fakes(&s);
    s.write(
        "work.toml",
        "agent = \"remote\"\n[agents.remote]\nspec = \"anthropic:claude-sonnet-4-5\"\n[agents.local]\nspec = \"openai:qwen\"\nbase_url = \"http://127.0.0.1:9/v1\"\n",
    );
    let out = s.work().env("PATH", f.path()).args(["agents", "check", "--json"]).output().expect("runs");
    assert_eq!(out.status.code(), Some(1), "the configured `remote` has no key");
    let v: Value = serde_json::from_slice(&out.stdout).expect("one JSON document");
    let get = |n: &str| v["agents"].as_array().and_then(|a| a.iter().find(|x| x["name"] == n)).cloned().expect(n);
    assert_eq!(get("claude")["usable"], true);
    assert_eq!(get("claude")["version"], "2.1.240 (Claude Code)");
    assert_eq!(get("codex")["version"], "codex-cli 0.98.0");
    assert_eq!(get("anthropic")["reason"], "ANTHROPIC_API_KEY is not set");
    assert_eq!(get("remote")["configured"], true);
    assert_eq!(get("local")["usable"], true);
    let roles = get("local")["roles"].as_str().unwrap_or("").to_string();
    assert!(
        roles.contains("read-only roles read_file, list_dir, search; write roles") && roles.contains("run_command"),
        "{roles}"
    );
    assert!(get("claude")["roles"].as_str().unwrap_or("").contains("Claude Code's own tools"), "{v}");

    // Without the fakes on PATH the CLIs are missing; with a key the configured agent is usable.
    let out = s
        .work()
        .env("PATH", "/usr/bin:/bin")
        .env("ANTHROPIC_API_KEY", CANARY)
        .args(["agents", "check"])
        .output()
        .expect("runs");
    let text = String::from_utf8_lossy(&out.stdout);
    assert_eq!(out.status.code(), Some(0), "{text}");
    assert!(
        text.lines().any(|l| l.starts_with("claude") && l.contains("unusable") && l.contains("not on PATH")),
        "{text}"
    );
    assert!(
        text.lines().any(|l| l.starts_with("remote") && l.contains("roles: all roles through the engine's tools")),
        "{text}"
    );
    assert!(!text.contains(CANARY));
}

#[test]
fn bad_agent_settings_and_missing_clis_are_one_line_errors() {
    let s = Scenario::new();
    s.write("work.toml", "[agents.x]\nspec = \"openai:m\"\nresponse_format = \"yaml\"\n");
    let (code, _, err) = s.run(&["agents", "try", "--agent", "x", "brief: hi"]);
    assert_eq!(code, 2);
    assert_one_line_error(&err);
    assert!(err.contains("response_format `yaml`"), "{err}");
    let out =
        s.work().env("PATH", "/usr/bin:/bin").args(["agents", "try", "--agent", "codex", "hi"]).output().expect("runs");
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(2));
    assert_one_line_error(&err);
    assert!(err.contains("`codex` CLI is not on PATH"), "{err}");
    let (code, _, err) = s.run(&["agents", "try", "--agent", "anthropic:claude-x", "hi"]);
    assert_eq!(code, 2);
    assert!(err.contains("ANTHROPIC_API_KEY is not set"), "{err}");
}

/// A loopback server for `openai:` that answers per scripted status and records requests.
const FAKE_SERVER: &str = r#"#!/usr/bin/env python3
import json, sys, time
from http.server import BaseHTTPRequestHandler, HTTPServer
port_file, log_file, mode = sys.argv[1], sys.argv[2], sys.argv[3]
class H(BaseHTTPRequestHandler):
    def log_message(self, *a):
        pass
    def do_POST(self):
        body = json.loads(self.rfile.read(int(self.headers["content-length"])))
        open(log_file, "a").write(json.dumps({"auth": self.headers.get("authorization"), "body": body}) + "\n")
        key = (self.headers.get("authorization") or "").replace("Bearer ", "")
        if mode == "html500":
            page = ("<!DOCTYPE html>\n<html><head><title>500 Internal Server Error</title><style>" + "x" * 4000
                    + "</style></head><body><h1>Internal Server Error</h1><p>The server hit a snag.</p></body></html>").encode()
            self.send_response(500)
            self.send_header("content-type", "text/html")
            self.send_header("retry-after", "0")
            self.send_header("content-length", str(len(page)))
            self.end_headers()
            self.wfile.write(page)
            return
        if mode == "refuse":
            status, reply = 401, {"error": {"message": "Incorrect API key provided: " + key}}
        elif body["response_format"]["type"] == "json_schema":
            status, reply = 422, {"detail": "json_schema is not supported, key " + key}
        else:
            content = json.dumps({"items": ["from-server"]})
            status, reply = 200, {"choices": [{"finish_reason": "stop", "message": {"content": content}}],
                                  "usage": {"prompt_tokens": 40, "completion_tokens": 2}}
        data = json.dumps(reply).encode()
        self.send_response(status)
        self.send_header("content-type", "application/json")
        self.send_header("content-length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)
srv = HTTPServer(("127.0.0.1", 0), H)
srv.timeout = 1
open(port_file, "w").write(str(srv.server_address[1]))
deadline = time.time() + 60
while time.time() < deadline:
    srv.handle_request()
"#;

struct Server(std::process::Child);

impl Drop for Server {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

fn server(s: &Scenario, mode: &str) -> (Server, String) {
    s.write(".agents/server.py", FAKE_SERVER);
    let port_file = s.path(&format!(".agents/port-{mode}"));
    #[expect(clippy::disallowed_methods, reason = "the test starts its own loopback HTTP server")]
    let child = std::process::Command::new("python3")
        .arg(s.path(".agents/server.py"))
        .arg(&port_file)
        .arg(s.path(&format!(".agents/requests-{mode}.jsonl")))
        .arg(mode)
        .spawn()
        .expect("start the server");
    let guard = Server(child);
    for _ in 0..500 {
        if let Ok(p) = std::fs::read_to_string(&port_file)
            && !p.is_empty()
        {
            return (guard, format!("http://127.0.0.1:{p}/v1"));
        }
        std::thread::sleep(std::time::Duration::from_millis(20));
    }
    panic!("the test server did not start");
}

#[test]
fn openai_key_never_reaches_logs_records_or_errors() {
    let s = Scenario::new();
    let (_srv, url) = server(&s, "refuse");
    s.write(
        "work.toml",
        &format!("[agents.llm]\nspec = \"openai:qwen\"\nbase_url = \"{url}\"\napi_key_env = \"LLM_CRED\"\n"),
    );
    s.write(".agents/schema.json", r#"{"type": "object", "required": ["items"]}"#);
    let out = s
        .work()
        .env("LLM_CRED", CANARY)
        .args(["agents", "try", "--agent", "llm", "--schema", ".agents/schema.json", "--json", "brief: x"])
        .output()
        .expect("runs");
    let (stdout, stderr) = (String::from_utf8_lossy(&out.stdout), String::from_utf8_lossy(&out.stderr));
    assert_eq!(out.status.code(), Some(1));
    let v: Value = serde_json::from_str(&stdout).expect("json");
    assert_eq!(v["outcome"], "failed");
    assert!(v["reason"].as_str().unwrap_or("").contains("HTTP 401"), "{v}");
    let sent = s.read(".agents/requests-refuse.jsonl");
    assert!(sent.contains(&format!("Bearer {CANARY}")), "the key was sent");
    for (what, text) in [("stdout", stdout.to_string()), ("stderr", stderr.to_string()), ("logs", all_logs(&s))] {
        assert!(!text.contains(CANARY) && !text.contains("canary-123"), "the key leaked into {what}: {text}");
    }
}

/// A server answering 500 with an HTML page: the one-line cause is the status and the page's
/// title, not the page.
#[test]
fn an_html_error_page_is_reduced_to_its_status_and_title() {
    let s = Scenario::new();
    let (_srv, url) = server(&s, "html500");
    s.write("work.toml", &format!("[agents.llm]\nspec = \"openai:qwen\"\nbase_url = \"{url}\"\n"));
    s.write(".agents/schema.json", r#"{"type": "object", "required": ["items"]}"#);
    let (code, out, err) =
        s.run(&["agents", "try", "--agent", "llm", "--schema", ".agents/schema.json", "--json", "brief: x"]);
    assert_eq!(code, 1, "{err}");
    let v: Value = serde_json::from_str(&out).expect("json");
    assert_eq!(v["reason"], "failed: HTTP 500 after 3 tries: 500 Internal Server Error", "{v}");
    for text in [&out, &err] {
        assert!(!text.contains("<html") && !text.contains("xxxx"), "no page in the output: {text}");
    }
}

#[test]
fn openai_json_object_mode_for_servers_without_json_schema() {
    let s = Scenario::new();
    let (_srv, url) = server(&s, "object");
    s.write(".agents/schema.json", r#"{"type": "object", "required": ["items"]}"#);
    let run = |extra: &str| {
        s.write("work.toml", &format!("[agents.llm]\nspec = \"openai:smollm2\"\nbase_url = \"{url}\"\n{extra}"));
        s.run_json(&["agents", "try", "--agent", "llm", "--schema", ".agents/schema.json", "--json", "brief: x"], {
            if extra.is_empty() { 1 } else { 0 }
        })
    };
    let v = run("");
    assert!(v["reason"].as_str().unwrap_or("").contains("HTTP 422"), "{v}");
    let v = run("response_format = \"json_object\"\n");
    assert_eq!(v["output"], json!({"items": ["from-server"]}));
    assert_eq!(v["usage"]["input_tokens"], 40);
    let sent: Vec<Value> =
        s.read(".agents/requests-object.jsonl").lines().map(|l| serde_json::from_str(l).expect("json")).collect();
    let last = &sent[sent.len() - 1]["body"];
    assert_eq!(last["model"], "smollm2", "the tier pin falls back to the spec's model");
    assert_eq!(last["response_format"]["schema"]["required"], json!(["items"]));
    assert!(sent[0]["auth"].is_null(), "no key is sent to a local server when none is set");
}

/// `work exhaust` with the fake codex on PATH; returns (code, stdout, stderr).
fn exhaust_with(s: &Scenario, f: &Fakes, mode: &str, args: &[&str], envs: &[(&str, &str)]) -> (i32, String, String) {
    let out = s
        .work()
        .env("PATH", f.path())
        .env("WORK_TEST_FAKE_MODE", mode)
        .env("WORK_TEST_WANT_CWD", root(s))
        .env("WORK_TEST_WANT_SANDBOX", codex_sandbox())
        .env("TMPDIR", s.path(".agents/tmp"))
        .envs(envs.iter().copied())
        .arg("exhaust")
        .args(args)
        .output()
        .expect("run work");
    (
        out.status.code().unwrap_or(-1),
        String::from_utf8_lossy(&out.stdout).into_owned(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

#[test]
fn codex_gets_a_strict_finder_schema_and_its_nulls_pass_the_engine() {
    // Codex sends --output-schema in strict mode: the fake refuses any other schema, and then
    // answers like a strict model, with null for every optional property it has nothing for.
    let s = Scenario::new();
    let f = fakes(&s);
    s.write("src/jobs.rs", "fn job_state() {}\n");
    s.commit("jobs");
    let (code, out, err) = exhaust_with(
        &s,
        &f,
        "finder",
        &["job state", "--agent", "codex", "-k", "2", "--max-rounds", "1", "--json"],
        &[],
    );
    assert_eq!(code, 1, "caller-target after one round\n{out}\n{err}");
    assert!(!err.contains("failed"), "no finder failed: {err}");
    let v: Value = serde_json::from_str(&out).expect("one JSON document");
    assert_eq!(v["seen"].as_array().map(Vec::len), Some(1), "the item with null optionals was accepted: {v}\n{err}");
    assert_eq!(v["rejected"], json!([]), "{v}");
    let leftovers: Vec<_> = std::fs::read_dir(s.path(".agents/tmp")).expect("tmp").flatten().collect();
    assert!(leftovers.is_empty(), "schema files are removed");
}

#[test]
fn older_clis_get_the_efforts_they_accept() {
    let s = Scenario::new();
    let f = fakes(&s);
    // Claude Code 2.1.104 refuses `--effort xhigh` (the adversarial reviewer's default pin).
    let claude_env = [
        ("WORK_TEST_FAKE_CLAUDE_VERSION", "2.1.104"),
        ("WORK_TEST_WANT_MODEL", "opus"),
        ("WORK_TEST_WANT_EFFORT", "high"),
    ];
    let (code, v, err) = try_env(&s, &f, "claude", "ok", &["--role", "adversarial-reviewer"], &claude_env);
    assert_eq!((code, v["outcome"].as_str()), (0, Some("ok")), "{v}\n{err}");
    assert_eq!(v["effort"], "xhigh", "the pin is recorded as pinned");
    // The current release takes xhigh as it is.
    let new_env = [("WORK_TEST_WANT_MODEL", "opus"), ("WORK_TEST_WANT_EFFORT", "xhigh")];
    let (code, v, err) = try_env(&s, &f, "claude", "ok", &["--role", "adversarial-reviewer"], &new_env);
    assert_eq!(code, 0, "{v}\n{err}");
    // Codex before 0.60 refuses model_reasoning_effort="xhigh" at config load.
    let (code, v, err) = try_env(
        &s,
        &f,
        "codex",
        "ok",
        &["--role", "adversarial-reviewer"],
        &[("WORK_TEST_FAKE_CODEX_VERSION", "0.39.0")],
    );
    assert_eq!((code, v["outcome"].as_str()), (0, Some("ok")), "{v}\n{err}");
    let (code, v, err) =
        try_env(&s, &f, "codex", "ok", &["--role", "adversarial-reviewer"], &[("WORK_TEST_WANT_EFFORT", "xhigh")]);
    assert_eq!(code, 0, "{v}\n{err}");
    // `agents check` says how efforts will be sent.
    let out = s
        .work()
        .env("PATH", f.path())
        .env("WORK_TEST_FAKE_CLAUDE_VERSION", "2.1.104")
        .env("WORK_TEST_FAKE_CODEX_VERSION", "0.39.0")
        .args(["agents", "check", "--json"])
        .output()
        .expect("runs");
    let v: Value = serde_json::from_slice(&out.stdout).expect("json");
    let get = |n: &str| v["agents"].as_array().and_then(|a| a.iter().find(|x| x["name"] == n)).cloned().expect(n);
    assert!(get("claude")["efforts"].as_str().unwrap_or("").contains("xhigh sent as high"), "{v}");
    assert!(get("codex")["efforts"].as_str().unwrap_or("").contains("xhigh and max sent as high"), "{v}");
    let out = s.work().env("PATH", f.path()).args(["agents", "check"]).output().expect("runs");
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(text.lines().any(|l| l.starts_with("claude") && l.contains("efforts sent as pinned")), "{text}");
}

#[test]
fn the_model_actually_sent_is_checked_against_banned_models() {
    let s = Scenario::new();
    s.write(
        "work.toml",
        "[roles.finder]\nmodel = \"sonnet\"\n[agents.cx]\nspec = \"codex\"\nmodel = \"fable-5\"\n[agents.local]\nspec = \"openai:fable-5\"\nbase_url = \"http://127.0.0.1:9/v1\"\n",
    );
    let cases: [&[&str]; 5] = [
        &["agents", "try", "--agent", "openai:fable-5", "brief: x"],
        &["agents", "try", "--agent", "local", "brief: x"],
        &["agents", "try", "--agent", "cx", "brief: x"],
        &["-c", "roles.finder.model=haiku", "agents", "try", "--agent", "anthropic:claude-fable-5", "brief: x"],
        &["exhaust", "job state", "--agent", "local"],
    ];
    for args in cases {
        let out = s.work().env("OPENAI_BASE_URL", "http://127.0.0.1:9/v1").args(args).output().expect("runs");
        let err = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(2), "{args:?}: {err}");
        assert_one_line_error(&err);
        assert!(err.contains("fable-5") && err.contains("banned"), "{args:?}: {err}");
    }
    assert!(!s.path(".work/runs").exists(), "nothing was dispatched");
}

#[test]
fn a_model_in_the_cli_spec_beats_the_role_pin_in_work_toml() {
    let s = Scenario::new();
    let f = fakes(&s);
    s.write("work.toml", "[roles.finder]\nmodel = \"opus\"\n");
    let (code, v, err) = try_env(&s, &f, "claude:haiku", "ok", &[], &[("WORK_TEST_WANT_MODEL", "haiku")]);
    assert_eq!((code, v["model"].as_str()), (0, Some("haiku")), "{v}\n{err}");
    // Without a model in the spec, the role's pin applies.
    let (code, v, err) = try_env(&s, &f, "claude", "ok", &[], &[("WORK_TEST_WANT_MODEL", "opus")]);
    assert_eq!((code, v["model"].as_str()), (0, Some("opus")), "{v}\n{err}");
}

#[test]
fn a_huge_timeout_does_not_panic() {
    let s = Scenario::new();
    let huge = "9223372036854775807";
    for o in [
        format!("timeouts.dispatch_secs={huge}"),
        format!("roles.finder.timeout_secs={huge}"),
        format!("agents.m.timeout_secs={huge}"),
    ] {
        let out = s
            .work()
            .env("OPENAI_BASE_URL", "http://127.0.0.1:9/v1")
            .args(["-c", "agents.m.spec=openai:qwen", "-c", &o, "agents", "try", "--agent", "m", "--json", "brief: x"])
            .output()
            .expect("runs");
        let err = String::from_utf8_lossy(&out.stderr);
        assert!(!err.contains("panicked"), "{o}: {err}");
        assert_eq!(out.status.code(), Some(1), "{o}: nothing listens on port 9: {err}");
        let v: Value = serde_json::from_slice(&out.stdout).expect("one JSON document");
        assert_eq!(v["outcome"], "failed", "{v}");
    }
}

#[test]
fn bad_numbers_in_agent_settings_are_refused_by_key() {
    let s = Scenario::new();
    let cases = [
        ("agents.x.max_turns=0", "agents.x.max_turns"),
        ("agents.x.max_budget_usd=nan", "agents.x.max_budget_usd"),
        ("agents.x.max_budget_usd=-2.0", "agents.x.max_budget_usd"),
        ("agents.x.max_tokens=0", "agents.x.max_tokens"),
        ("agents.x.input_usd_per_mtok=-1.0", "agents.x.input_usd_per_mtok"),
        ("agents.x.output_usd_per_mtok=nan", "agents.x.output_usd_per_mtok"),
        ("agents.x.timeout_secs=0", "agents.x.timeout_secs"),
        ("roles.finder.timeout_secs=0", "roles.finder.timeout_secs"),
    ];
    for (o, key) in cases {
        let (code, _, err) =
            s.run(&["-c", "agents.x.spec=claude", "-c", o, "agents", "try", "--agent", "x", "brief: x"]);
        assert_eq!(code, 2, "{o}: {err}");
        assert_one_line_error(&err);
        assert!(err.contains(key), "{o}: {err}");
    }
}

#[test]
fn budget_usd_is_refused_for_a_backend_that_reports_no_cost() {
    let s = Scenario::new();
    let f = fakes(&s);
    s.write(
        "work.toml",
        "[agents.priced]\nspec = \"openai:qwen\"\nbase_url = \"http://127.0.0.1:9/v1\"\ninput_usd_per_mtok = 0.5\noutput_usd_per_mtok = 1.5\n",
    );
    let base = [("OPENAI_BASE_URL", "http://127.0.0.1:9/v1")];
    for agent in ["openai:qwen", "codex"] {
        let (code, _, err) =
            exhaust_with(&s, &f, "finder", &["job state", "--agent", agent, "--budget-usd", "1"], &base);
        assert_eq!(code, 2, "{agent}: {err}");
        assert_one_line_error(&err);
        assert!(err.contains("input_usd_per_mtok") && err.contains("output_usd_per_mtok"), "{agent}: {err}");
    }
    assert!(!s.path(".work/quality-journals").exists(), "refused before any state");
    // With prices the budget can be kept: the run starts (and its finders fail: nothing listens).
    let (code, _, err) = exhaust_with(
        &s,
        &f,
        "finder",
        &["job state", "--agent", "priced", "--budget-usd", "1", "--max-rounds", "1"],
        &base,
    );
    assert_ne!(code, 2, "{err}");
    // Without --budget-usd nothing is refused.
    let (code, _, err) =
        exhaust_with(&s, &f, "finder", &["job st", "--agent", "openai:qwen", "--max-rounds", "1"], &base);
    assert_ne!(code, 2, "{err}");
}

/// A mistyped agent name is one `error:` line with the nearest backend or configured agent;
/// an unknown key appended to `work init`'s file is refused naming its table.
#[test]
fn a_mistyped_agent_or_key_is_refused_with_a_did_you_mean_naming_where() {
    let s = Scenario::new();
    let (code, _, err) = s.run(&["exhaust", "x", "--agent", "cluade"]);
    assert_eq!(code, 2, "{err}");
    crate::support::assert_one_line_error(&err);
    assert!(err.trim_end().ends_with("nor an agent named in work.toml; did you mean `claude`?"), "{err}");
    s.write("work.toml", "[agents.example-finder]\nspec = \"command:true\"\n");
    let (code, _, err) = s.run(&["exhaust", "x", "--agent", "example-findr"]);
    assert_eq!(code, 2, "{err}");
    assert!(err.contains("did you mean `example-finder`?"), "{err}");
    std::fs::remove_file(s.path("work.toml")).expect("rm");
    let (code, _, err) = s.run(&["init"]);
    assert_eq!(code, 0, "{err}");
    let text = s.read("work.toml");
    s.write("work.toml", &format!("{text}\ntmeout = 3\n"));
    let (code, _, err) = s.run(&["runs", "list"]);
    assert_eq!(code, 2, "{err}");
    let last = text.lines().rev().find(|l| l.starts_with('[')).expect("a table in work init's file");
    assert!(err.contains(&format!("unknown key `tmeout` in {last} of work.toml")), "{err}");
}

/// A schema Codex can never answer — its root is not an object, and Codex sends
/// `--output-schema` in strict mode, which needs one — is refused with one line, exit 2, before
/// any dispatch or run is started; its twin, the same values wrapped in an object property,
/// is dispatched and answered.
#[test]
fn a_schema_codex_cannot_serve_is_refused_before_the_first_dispatch() {
    let s = Scenario::new();
    let f = fakes(&s);
    s.write(".agents/array.json", r#"{"type": "array", "items": {"type": "string"}}"#);
    let out = s
        .work()
        .env("PATH", f.path())
        .env("WORK_TEST_WANT_CWD", root(&s))
        .env("WORK_TEST_WANT_SANDBOX", codex_sandbox())
        .args(["agents", "try", "--agent", "codex", "--schema", ".agents/array.json", "--json", "brief: list"])
        .output()
        .expect("runs");
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{err}");
    assert_one_line_error(&err);
    assert!(err.contains(".agents/array.json") && err.contains("strict mode") && err.contains("\"array\""), "{err}");
    assert!(out.stdout.is_empty(), "no report: {}", String::from_utf8_lossy(&out.stdout));
    assert!(!s.path(".work/runs").exists(), "no run was started, nothing was dispatched");
    // The honest twin: an object root is dispatched.
    let (code, v, err) = try_with(&s, &f, "codex", "ok", &[]);
    assert_eq!(code, 0, "{v}\n{err}");
    assert_eq!(v["output"], json!({"items": ["x", "y"]}));
}
