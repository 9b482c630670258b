//! `work mcp` through a real MCP client, the inspector's CLI mode (`--cli`): it lists the
//! tools and calls `exhaust` on a scratch repository with a command agent. Needs
//! `WORK_TEST_MCP_INSPECTOR` (`scripts/test-tools/mcp-inspector.sh` prints it; `scripts/test.sh`
//! sets it); without it every test here fails, never silently passes.

use crate::support::Scenario;
use serde_json::{Value, json};

fn inspector() -> String {
    std::env::var("WORK_TEST_MCP_INSPECTOR").unwrap_or_else(|_| {
        panic!(
            "WORK_TEST_MCP_INSPECTOR is not set: run `scripts/test.sh`, or \
             `eval \"$(scripts/test-tools/mcp-inspector.sh)\"` first"
        )
    })
}

/// Runs `mcp-inspector --cli work mcp <args…>` in the scenario and parses its JSON output.
fn inspect(s: &Scenario, args: &[&str]) -> Value {
    let work = assert_cmd::cargo::cargo_bin("work");
    #[expect(clippy::disallowed_methods, reason = "the test drives a real MCP client")]
    let out = std::process::Command::new(inspector())
        .arg("--cli")
        .arg(&work)
        .arg("mcp")
        .args(args)
        .current_dir(s.root())
        .env("WORK_FAKE_CLOCK", "2026-01-01T00:00:00Z")
        .env("NO_COLOR", "1")
        .output()
        .expect("run the inspector");
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(out.status.success(), "inspector {args:?}: {stdout}\n{}", String::from_utf8_lossy(&out.stderr));
    serde_json::from_str(&stdout).unwrap_or_else(|e| panic!("inspector output is not JSON ({e}): {stdout}"))
}

#[test]
fn the_inspector_lists_the_tools() {
    let s = Scenario::new();
    let listed = inspect(&s, &["--method", "tools/list"]);
    let names: Vec<&str> =
        listed["tools"].as_array().expect("tools").iter().filter_map(|t| t["name"].as_str()).collect();
    assert_eq!(names, ["exhaust", "until", "implement", "edit", "ultra", "loop_run", "runs_list", "run_show"]);
}

#[test]
fn the_inspector_calls_exhaust_and_gets_the_master_object() {
    let s = Scenario::new();
    s.write("src/jobs.rs", "fn a() { transition(1); }\n");
    s.commit("jobs");
    let agent = s.agent(
        "finder.py",
        r#"
items = [{"id": "s1", "title": "t", "location": "src/jobs.rs:1"}] if ctx['angle'] == 'a' else []
print(json.dumps({"angle": ctx['angle'], "items": items}))
"#,
    );
    let result = inspect(
        &s,
        &[
            "--method",
            "tools/call",
            "--tool-name",
            "exhaust",
            "--tool-arg",
            "what=job state sites",
            "--tool-arg",
            "k=2",
            "--tool-arg",
            r#"angles=["a","b","c"]"#,
            "--tool-arg",
            &format!("agent={agent}"),
        ],
    );
    assert_ne!(result["isError"], json!(true), "{result}");
    let master = &result["structuredContent"];
    assert_eq!(master["stoppedReason"], "k-consecutive-dry", "{master}");
    assert_eq!(master["seen"], json!(["s1"]), "{master}");
    // The journal's master object (JavaScript prints 0.0 as 0: spend is compared as numbers).
    let mut journal = s.read_json(".work/quality-journals/work-exhaust-job-state-sites.json");
    let mut got = master.clone();
    assert_eq!(got["spent"]["dispatches"], journal["spent"]["dispatches"]);
    assert_eq!(got["spent"]["usage"]["cost_usd"].as_f64(), journal["spent"]["usage"]["cost_usd"].as_f64());
    for doc in [&mut journal, &mut got] {
        if let Some(o) = doc.as_object_mut() {
            o.remove("spent");
            o.remove("spentByRole");
        }
    }
    assert_eq!(got, journal);
}
