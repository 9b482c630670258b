//! `work loop` as a drop-in for the work-loop scripts, continued: the schedule's `Touches:`
//! screen and forward references, and the lint's code references (invariant iii), `Contract:`
//! back-references (invariant v) and root confinement — through the real binary.

use crate::support::Scenario;
use serde_json::Value;

const DIR: &str = "docs/specs/feat";

fn lp(s: &Scenario, args: &[&str]) -> (i32, String, String) {
    let mut a = vec!["loop"];
    a.extend_from_slice(args);
    s.run(&a)
}

fn json_of(out: &str) -> Value {
    serde_json::from_str(out.trim()).unwrap_or_else(|e| panic!("one JSON document on stdout ({e}): {out}"))
}

/// An engine and a cohort of one run, with spec.md and this plan.md; returns the run id.
fn with_plan(s: &Scenario, plan: &str) -> String {
    s.write(&format!("{DIR}/spec.md"), "# Feat\n\nStatus: Approved\n");
    s.write(&format!("{DIR}/plan.md"), &format!("# Plan\n\nStatus: Approved\n\n{plan}"));
    let (code, out, err) = lp(s, &["engine", "init", DIR, "--mode", "code", "--json"]);
    assert_eq!(code, 0, "{err}");
    let run = json_of(&out)["run_id"].as_str().expect("run_id").to_string();
    assert_eq!(lp(s, &["cohort", "init", DIR, "--run-id", &run]).0, 0);
    run
}

fn schedule(s: &Scenario, run: &str) -> (i32, String, String) {
    lp(s, &["cohort", "schedule", DIR, "--plan", &format!("{DIR}/plan.md"), "--expect-run-id", run])
}

#[test]
fn schedule_predicts_disjointness_from_touches_lines() {
    let cases = [
        ("src/api/*", Some("src/api/x.py"), "predicted-disjoint: no"),
        ("src/a/*", Some("src/b/*"), "predicted-disjoint: yes"),
        ("src/a/*", None, "predicted-disjoint: unknown"),
        ("**/*.py", Some("src/x.py"), "predicted-disjoint: no"),
        ("src/*", Some("src/api/x.py"), "predicted-disjoint: yes"),
    ];
    for (first, second, want) in cases {
        let s = Scenario::new();
        let second = second.map(|g| format!("**Touches:** {g}\n")).unwrap_or_default();
        let plan = format!(
            "### T1: a\n**Depends on:** none\n**Touches:** {first} (prose)\n### T2: b\n**Depends on:** none\n{second}"
        );
        let run = with_plan(&s, &plan);
        let (code, out, err) = schedule(&s, &run);
        assert_eq!(code, 0, "{err}");
        assert!(out.contains("wave 1: T1, T2") && out.contains(want), "{first} / {second}: {out}");
    }
    // A single-task wave carries no annotation; --json carries the verdict per wave.
    let s = Scenario::new();
    let run = with_plan(&s, "### T1: a\n**Touches:** src/a/*\n### T2: b\n**Depends on:** T1\n**Touches:** src/a/*\n");
    let (code, out, _) = schedule(&s, &run);
    assert_eq!(code, 0);
    assert!(!out.contains("predicted-disjoint"), "{out}");
    let (code, out, _) = lp(&s, &["cohort", "schedule", DIR, "--expect-run-id", &run, "--json"]);
    assert_eq!(code, 0);
    assert_eq!(json_of(&out)["predicted_disjoint"], serde_json::json!([null, null]));
}

#[test]
fn a_forward_reference_is_a_warning_on_stderr_and_the_dependency_runs_first() {
    let s = Scenario::new();
    let run = with_plan(&s, "### T13: build\n**Depends on:** T15\n### T15: test\n**Depends on:** none\n");
    let (code, out, err) = schedule(&s, &run);
    assert_eq!(code, 0, "{err}");
    assert!(err.contains("forward-reference") && err.contains("T13->T15"), "{err}");
    let (t15, t13) = (out.find("T15").expect("T15"), out.find("T13").expect("T13"));
    assert!(t15 < t13, "reordered: {out}");
    // The warning stays on stderr with --json, and stdout is still one document.
    let (code, out, err) = lp(&s, &["cohort", "schedule", DIR, "--expect-run-id", &run, "--json"]);
    assert_eq!(code, 0);
    assert!(err.contains("forward-reference"));
    assert_eq!(json_of(&out)["forward_references"], serde_json::json!([["T13", "T15"]]));
    // The honest twin: a plan in dependency order warns of nothing.
    let s = Scenario::new();
    let run = with_plan(&s, "### T1: a\n### T2: b\n**Depends on:** T1\n");
    let (code, _, err) = schedule(&s, &run);
    assert_eq!(code, 0);
    assert!(!err.contains("forward-reference"), "{err}");
}

fn spec_body(s: &Scenario, name: &str, body: &str) {
    s.write(
        &format!("docs/specs/{name}/spec.md"),
        &format!("# Spec: {name}\n\n- **Status:** Draft\n\n{body}\n\n## Acceptance Criteria\n\n- [ ] AC1\n"),
    );
}

fn lint(s: &Scenario) -> (i32, String, String) {
    lp(s, &["lint-spec-status", "--root", "."])
}

#[test]
fn lint_warns_on_code_references_that_do_not_resolve() {
    let s = Scenario::new();
    s.write("tools/real.py", "x\n");
    s.write("tools/y.py", "x\n");
    spec_body(
        &s,
        "code",
        "Touches `tools/real.py`, `tools/missing.py`, `tools/y.py:42:10`, [y](../../../tools/y.py#L4) and `tools/gone.py:7`.",
    );
    let (code, out, err) = lint(&s);
    assert_eq!(code, 0, "warn-only: {out}{err}");
    assert!(out.is_empty(), "findings go to stderr: {out}");
    for missing in ["tools/missing.py", "tools/gone.py"] {
        assert!(err.contains(missing) && err.contains("dangling_code_reference"), "{missing}: {err}");
    }
    assert!(!err.contains("tools/real.py") && !err.contains("tools/y.py"), "resolving paths are quiet: {err}");
    // Shapes that are not one literal path never warn; their full-path twins do.
    spec_body(
        &s,
        "code",
        "Bare `install.py`; `packages/<pkg>/x.py`; `tools/lint-*.py`; `packs/core/...x.toml`; `packages/adapters/{a,b}.py`; `https://x.test/tools/a.py`. Controls: `tools/install.py`, `packages/real/x.py`.",
    );
    let (code, _, err) = lint(&s);
    assert_eq!(code, 0);
    for quiet in ["`install.py`", "<pkg>", "lint-*", "...x.toml", "{a,b}", "x.test"] {
        assert!(!err.contains(quiet), "{quiet}: {err}");
    }
    assert!(err.contains("tools/install.py") && err.contains("packages/real/x.py"), "{err}");
}

#[test]
fn lint_never_resolves_a_reference_or_reads_a_file_outside_the_root() {
    let s = Scenario::new();
    let outside = tempfile::tempdir().expect("outside");
    std::fs::write(outside.path().join("outside.py"), "outside_code_sentinel = 1\n").expect("write");
    std::fs::write(outside.path().join("c.yaml"), "x-spec: [docs/specs/orders]\noutside-contract-sentinel\n")
        .expect("write");
    std::fs::write(outside.path().join("ws.toml"), "# workspace-sentinel\n[backlog]\nopen = [\"far\"]\n")
        .expect("write");
    // The liars: a `../` climb out of the root, a symlinked contract and a symlinked workspace.
    std::fs::create_dir_all(s.path("contracts/openapi")).expect("mkdir");
    std::os::unix::fs::symlink(outside.path().join("c.yaml"), s.path("contracts/openapi/orders.yaml")).expect("ln");
    std::os::unix::fs::symlink(outside.path().join("ws.toml"), s.path("workspace.toml")).expect("ln");
    let climb = "../".repeat(8);
    spec_body(&s, "escaping", &format!("See `{climb}outside.py`."));
    s.write(
        "docs/specs/orders/spec.md",
        "# Orders\n\n- **Status:** Draft\n- **Contract:** `contracts/openapi/orders.yaml`\n\n## Acceptance Criteria\n\n- [ ] AC1 (deferred: far)\n",
    );
    let (code, out, err) = lint(&s);
    assert_eq!(code, 1, "the outside workspace anchors nothing: {err}");
    assert!(err.contains("outside.py") && err.contains("dangling_code_reference"), "{err}");
    assert!(err.contains("contract_unresolved") && err.contains("does not resolve to a file"), "{err}");
    assert!(err.contains("invariant (iv)") && err.contains("far"), "{err}");
    for sentinel in ["outside_code_sentinel", "outside-contract-sentinel", "workspace-sentinel"] {
        assert!(!format!("{out}{err}").contains(sentinel), "{sentinel} leaked");
    }
}

#[test]
fn lint_checks_contract_back_references() {
    let s = Scenario::new();
    let contract = |name: &str, value: &str| {
        s.write(
            &format!("docs/specs/{name}/spec.md"),
            &format!(
                "# {name}\n\n- **Status:** Draft\n- **Contract:** {value}\n\n## Acceptance Criteria\n\n- [ ] AC1\n"
            ),
        );
    };
    // The honest twins: an inline x-spec back-reference, and REGISTRY.md for a format without one.
    s.write("contracts/openapi/orders.yaml", "openapi: 3.1.0\nx-spec: [docs/specs/orders/]\n");
    s.write("contracts/proto/pay/v1/pay.proto", "syntax = \"proto3\";\n");
    s.write("contracts/REGISTRY.md", "# Registry\n\n- `contracts/proto/pay/v1/pay.proto` → docs/specs/pay/\n");
    contract("orders", "`contracts/openapi/orders.yaml`");
    contract("pay", "`contracts/proto/pay/v1/pay.proto`");
    contract("plain", "none");
    contract("templ", "<!-- contracts/openapi/x.yaml when the feature has an API -->");
    let (code, _, err) = lint(&s);
    assert_eq!(code, 0, "{err}");
    assert!(!err.contains("invariant (v)"), "{err}");
    // The liars: a contract without a way back, one that does not exist, and a `..` climb.
    s.write("contracts/openapi/bare.yaml", "openapi: 3.1.0\n");
    contract("bare", "`contracts/openapi/bare.yaml`");
    contract("ghost", "`contracts/openapi/ghost.yaml`");
    contract("climb", "`contracts/../../etc/passwd.json`");
    let (code, out, err) = lp(&s, &["lint-spec-status", "--json"]);
    assert_eq!(code, 0, "warn-only: {err}");
    let doc = json_of(&out);
    let codes: Vec<(String, String)> = doc["findings"]
        .as_array()
        .expect("findings")
        .iter()
        .filter(|f| f["message"].as_str().is_some_and(|m| m.contains("invariant (v)")))
        .map(|f| (f["path"].as_str().unwrap_or("").to_string(), f["code"].as_str().unwrap_or("").to_string()))
        .collect();
    assert_eq!(
        codes,
        [
            ("docs/specs/bare/spec.md".to_string(), "contract_without_backref".to_string()),
            ("docs/specs/ghost/spec.md".to_string(), "contract_unresolved".to_string()),
        ],
        "the `..` token is no contract path: {doc}"
    );
}
