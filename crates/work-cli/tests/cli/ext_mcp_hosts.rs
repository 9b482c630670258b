//! `work mcp` inside the real agent hosts, offline: Claude Code (`WORK_TEST_CLAUDE`) loads the
//! repository's own `.mcp.json`, Codex (`WORK_TEST_CODEX`) the `[mcp_servers.work]` block of
//! docs/hosts.md, each against the scripted model server. The scripted model calls the
//! `exhaust` tool on a scratch repository; the host runs `work mcp`, which runs the loop; the
//! test asserts that the master object came back to the model (the next request carries the
//! tool result) and that it is the journal's.
//!
//! Without the CLIs every test here fails loudly naming `scripts/test.sh` (see
//! `ext_harness::installed`).

use crate::ext_harness::{Cli, KEY, RealCli};
use crate::support::Scenario;
use serde_json::{Value, json};
use std::path::{Path, PathBuf};
use work_model_server::hosted::tool_outputs;
use work_model_server::{Rule, Script, Step};

/// What the person asks the host (the scripted model's rule for the host's own turns).
const ASK: &str = "HOST: find every place that touches job state";

/// The repository root (where `.mcp.json`, the plugin marketplace and docs/hosts.md live).
fn repo_root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../..")
}

/// The directory of the `work` binary under test: first on PATH, so that a host starting
/// `work mcp` (as `.mcp.json` and the Codex block say) starts this one.
fn work_dir() -> PathBuf {
    let bin = assert_cmd::cargo::cargo_bin("work");
    bin.parent().expect("the binary's directory").to_path_buf()
}

fn jobs_repo() -> (Scenario, String) {
    let s = Scenario::new();
    s.write("src/jobs.rs", "fn a() { transition(1); }\nfn b() { transition(2); }\n");
    s.commit("jobs");
    let agent = s.agent(
        "finder.py",
        r#"
items = [{"id": "s1", "title": "transition", "location": "src/jobs.rs:1"}] if ctx['angle'] == 'a' else []
print(json.dumps({"angle": ctx['angle'], "items": items}))
"#,
    );
    (s, agent)
}

/// The script: the host's model calls `exhaust` of server `work` with `input`, then ends the
/// turn once the result is back.
fn host_script(input: Value, more: Vec<Rule>) -> Script {
    host_script_for("work", input, more)
}

/// The same for the server named `server` in the host (a plugin's server is
/// `plugin_<plugin>_<server>`: Claude Code may defer MCP tools behind its tool search, so the
/// name is not always among the offered tools).
fn host_script_for(server: &str, input: Value, more: Vec<Rule>) -> Script {
    let mut rules = vec![Rule::new(
        ASK,
        vec![Step::Mcp { server: server.into(), tool: "exhaust".into(), input }, Step::Text("done".into())],
    )];
    rules.extend(more);
    Script::new(rules)
}

/// The host CLI run in the scenario with a private HOME, pointed at the model server, with
/// this `work` first on PATH.
fn host(cli: &RealCli, s: &Scenario) -> std::process::Command {
    let path =
        format!("{}:{}:{}", work_dir().display(), cli.bin_dir().display(), std::env::var("PATH").unwrap_or_default());
    #[expect(clippy::disallowed_methods, reason = "the test drives the real host CLI")]
    let mut c = std::process::Command::new(cli.bin_dir().join(cli.cli.name()));
    c.current_dir(s.root())
        .env("PATH", path)
        .env("HOME", cli.home())
        .env("WORK_FAKE_CLOCK", "2026-01-01T00:00:00Z")
        .env("NO_COLOR", "1")
        .env_remove("XDG_CONFIG_HOME")
        .env_remove("WORK_MCP_PARENT")
        .env_remove("OPENAI_API_KEY")
        .env_remove("ANTHROPIC_API_KEY")
        .stdin(std::process::Stdio::null());
    match cli.cli {
        Cli::Claude => {
            c.env("ANTHROPIC_BASE_URL", cli.server.base_url())
                .env("ANTHROPIC_API_KEY", KEY)
                .env("CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC", "1")
                .env("DISABLE_AUTOUPDATER", "1")
                .env("DISABLE_TELEMETRY", "1")
                .env("DISABLE_ERROR_REPORTING", "1");
        }
        Cli::Codex => {
            c.env("CODEX_HOME", cli.codex_home()).env("SCRIPTED_MODEL_KEY", KEY);
        }
    }
    c
}

fn run(mut c: std::process::Command, cli: &RealCli) -> String {
    let out = c.output().expect("run the host CLI");
    let stdout = String::from_utf8_lossy(&out.stdout).into_owned();
    assert!(
        out.status.success(),
        "the host exited {:?}\nstdout:\n{stdout}\nstderr:\n{}\nrequests:\n{}",
        out.status.code(),
        String::from_utf8_lossy(&out.stderr),
        cli.summary()
    );
    stdout
}

/// Claude Code in print mode with the repository's `.mcp.json` (and no other MCP server),
/// allowed to call the `work` tools without asking.
fn claude(cli: &RealCli, s: &Scenario) -> String {
    let mut c = host(cli, s);
    c.args(["-p", ASK, "--output-format", "json", "--strict-mcp-config", "--mcp-config"])
        .arg(repo_root().join(".mcp.json"))
        .args(["--allowedTools", "mcp__work__exhaust"]);
    run(c, cli)
}

/// The `[mcp_servers.work]` block exactly as docs/hosts.md gives it.
fn documented_codex_block() -> String {
    let doc = std::fs::read_to_string(repo_root().join("docs/hosts.md")).expect("read docs/hosts.md");
    let start = doc.find("```toml\n[mcp_servers.work]").expect("docs/hosts.md has the [mcp_servers.work] block");
    let block = &doc[start + "```toml\n".len()..];
    block[..block.find("```").expect("the block ends")].to_string()
}

/// `codex exec` with the documented block in CODEX_HOME/config.toml; a non-interactive run
/// has nobody to ask, so the tools are approved on the command line (as docs/hosts.md says).
fn codex(cli: &RealCli, s: &Scenario) -> String {
    cli.write_codex_config(&documented_codex_block());
    let mut c = host(cli, s);
    c.args([
        "exec",
        "--json",
        "--skip-git-repo-check",
        "-c",
        "mcp_servers.work.default_tools_approval_mode=\"approve\"",
    ])
    .arg("-C")
    .arg(s.root())
    .arg(ASK);
    run(c, cli)
}

/// The host's request that carried the `exhaust` result back to the model: the JSON document
/// in its one tool output (Codex puts a `Wall time: …` / `Output:` header before it).
fn returned_to_the_model(cli: &RealCli) -> Value {
    let reqs = cli.server.requests_for(0);
    let back = reqs
        .iter()
        .find(|r| r.tool_results == 1)
        .unwrap_or_else(|| panic!("no request carried the tool result back to the model:\n{}", cli.summary()));
    let outputs = tool_outputs(back.api, &back.body);
    assert_eq!(outputs.len(), 1, "{outputs:?}");
    let text = &outputs[0];
    let at = text.lines().find(|l| l.starts_with('{')).and_then(|l| text.find(l)).unwrap_or(0);
    let mut docs = serde_json::Deserializer::from_str(&text[at..]).into_iter::<Value>();
    match docs.next() {
        Some(Ok(v)) => v,
        other => panic!("the tool result holds no JSON document ({other:?}):\n{text}"),
    }
}

/// The master object the model got equals the journal (spend compared as numbers: a host may
/// re-print `0.0` as `0`).
fn assert_is_the_journal(s: &Scenario, got: &Value) {
    assert_eq!(got["stoppedReason"], "k-consecutive-dry", "{got:#}");
    assert_eq!(got["seen"], json!(["s1"]), "{got:#}");
    let mut journal = s.read_json(".work/quality-journals/work-exhaust-job-state-sites.json");
    let mut got = got.clone();
    assert_eq!(got["spent"]["dispatches"], journal["spent"]["dispatches"]);
    for doc in [&mut journal, &mut got] {
        if let Some(o) = doc.as_object_mut() {
            o.remove("spent");
            o.remove("spentByRole");
        }
    }
    assert_eq!(got, journal, "the model got the journal's master object");
}

fn exhaust_input(agent: &str) -> Value {
    json!({"what": "job state sites", "k": 2, "angles": ["a", "b", "c"], "agent": agent})
}

#[test]
fn claude_code_calls_the_exhaust_tool_and_gets_the_master_object() {
    let (s, agent) = jobs_repo();
    let cli = RealCli::new(Cli::Claude, host_script(exhaust_input(&agent), vec![]));
    claude(&cli, &s);
    let got = returned_to_the_model(&cli);
    assert_is_the_journal(&s, &got);
}

#[test]
fn codex_calls_the_exhaust_tool_and_gets_the_master_object() {
    let (s, agent) = jobs_repo();
    let cli = RealCli::new(Cli::Codex, host_script(exhaust_input(&agent), vec![]));
    let events = codex(&cli, &s);
    let got = returned_to_the_model(&cli);
    assert_is_the_journal(&s, &got);
    assert!(events.contains("\"type\":\"mcp_tool_call\""), "{events}");
}

fn finder_answer(angle: &str, items: Value) -> Step {
    Step::Answer(json!({"angle": angle, "items": items, "roundNotes": "scripted"}))
}

/// The host is also the agent: Claude Code calls `exhaust` with `agent: "claude"`, and each
/// finder is a nested, headless Claude Code (started by the `work` run that `work mcp`
/// started) against the same model server. The nested sessions answer their own briefs and
/// the host gets the master object: nothing recursed into the host's session, nothing waited
/// on it.
#[test]
fn claude_code_as_host_and_as_the_finders_does_not_recurse() {
    let (s, _) = jobs_repo();
    let item = json!([{"id": "s1", "title": "transition", "location": "src/jobs.rs:1"}]);
    let cli = RealCli::new(
        Cli::Claude,
        host_script(
            json!({"what": "job state sites", "k": 2, "angles": ["a", "b", "c"], "agent": "claude"}),
            vec![
                Rule::new("YOUR ANGLE: a", vec![finder_answer("a", item)]),
                Rule::new("YOUR ANGLE: b", vec![finder_answer("b", json!([]))]),
                Rule::new("YOUR ANGLE: c", vec![finder_answer("c", json!([]))]),
            ],
        ),
    );
    claude(&cli, &s);
    let got = returned_to_the_model(&cli);
    assert_is_the_journal(&s, &got);
    for rule in 1..=3 {
        assert_eq!(cli.server.requests_for(rule).len(), 1, "one nested finder per angle:\n{}", cli.summary());
    }
    assert_eq!(cli.server.requests_for(0).len(), 2, "the host's session saw its call and the result only");
}

/// The plugin installed as docs/hosts.md says (`claude plugin marketplace add <repository>`,
/// `claude plugin install work@work`, in the private HOME): a session then has the plugin's
/// `work` server, and the scripted model's call of its `exhaust` tool gets the master object.
/// The install copies only the plugin's directory (never the repository's build output).
#[test]
fn the_installed_claude_code_plugin_serves_the_exhaust_tool() {
    let (s, agent) = jobs_repo();
    let cli = RealCli::new(Cli::Claude, host_script_for("plugin_work_work", exhaust_input(&agent), vec![]));
    for args in [
        vec!["plugin".to_string(), "marketplace".into(), "add".into(), repo_root().display().to_string()],
        vec!["plugin".into(), "install".into(), "work@work".into()],
    ] {
        let mut c = host(&cli, &s);
        c.args(&args);
        run(c, &cli);
    }
    let mut c = host(&cli, &s);
    c.args(["plugin", "list"]);
    let listed = run(c, &cli);
    assert!(listed.contains("work@work"), "{listed}");
    let cache = cli.home().join(".claude/plugins/cache");
    assert!(dir_size(&cache) < 1_000_000, "the install copied more than the plugin: {} bytes", dir_size(&cache));
    let mut c = host(&cli, &s);
    c.args(["-p", ASK, "--output-format", "json", "--allowedTools", "mcp__plugin_work_work__exhaust"]);
    run(c, &cli);
    let got = returned_to_the_model(&cli);
    assert_is_the_journal(&s, &got);
}

fn dir_size(p: &Path) -> u64 {
    std::fs::read_dir(p)
        .into_iter()
        .flatten()
        .flatten()
        .map(|e| match e.file_type() {
            Ok(t) if t.is_dir() => dir_size(&e.path()),
            _ => e.metadata().map(|m| m.len()).unwrap_or(0),
        })
        .sum()
}
