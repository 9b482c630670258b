//! `work loop run`: the agent-driven work loop end to end, with one scripted agent that answers
//! per role (drafter, reviewers, adjudicator, implementer) and the project's own gates.

use crate::support::{Scenario, assert_one_line_error};
use serde_json::Value;

const DIR: &str = "docs/specs/hello";

/// The scripted agent. Knobs are files under `.agent-state/` (`knob(name)`), so one script
/// serves every scenario:
/// - `impl-noop`: the implementer answers done without touching anything;
/// - `review-finding`: the code reviewer reports a blocker F1 on every round;
/// - `sustain-rounds`: how many code-review rounds the adjudicator sustains F1 (default 0:
///   refuted);
/// - `vary-finding`: the code reviewer's finding has a new title every round (no stasis);
/// - `adj-skip`: the adjudicator leaves the report's findings out (an invalid adjudication).
/// - `finding-severity`: the severity of the code reviewer's finding (default blocker);
/// - `spec-finding`: the spec/plan reviewer reports S1 on its first round (sustained).
const AGENT: &str = r#"
def knob(n, default=None):
    p = state_path(n)
    return open(p).read().strip() if os.path.exists(p) else default
role = req['role']
phase = ctx.get('phase')
bump('calls-' + role)
with open(state_path('log'), 'a') as f:
    f.write(json.dumps({'role': role, 'phase': phase, 'task_id': ctx.get('task_id'), 'model': req['model'], 'effort': req['effort'], 'access': req['access']}) + '\n')
def out(d):
    print(json.dumps(d))
    sys.exit(0)
if role == 'spec-drafter':
    d = ctx['spec_dir']
    if ctx.get('revision'):
        open(d + '/spec.md', 'a').write('\n- [ ] the greeting says hello (revised: %s)\n' % ctx['revision']['kind'])
    if not os.path.exists(d + '/spec.md'):
        open(d + '/spec.md', 'w').write('# Hello\n\n**Status:** Draft\n\nPrint a greeting.\n\n- [ ] hello.txt exists\n')
    if not os.path.exists(d + '/plan.md'):
        open(d + '/plan.md', 'w').write('# Plan\n\n**Status:** Drafting\n\n## Task 1: Write hello\nCreate hello.txt.\n')
    out({'status': 'drafted', 'summary': 'wrote spec and plan'})
if role == 'implementer':
    n = bump('impl')
    if knob('impl-noop'):
        out({'status': 'done', 'summary': 'all done, trust me'})
    if phase == 'fix':
        open('fixed.txt', 'a').write('fix %d %s\n' % (n, ctx.get('fix_kind')))
    else:
        open('hello.txt', 'a').write('hello from task %s\n' % ctx['task_id'])
    out({'status': 'done', 'summary': 'did it'})
if role in ('adversarial-reviewer', 'quality-reviewer'):
    if role == 'adversarial-reviewer' and phase == 'code' and knob('review-finding'):
        sev = knob('finding-severity', 'blocker')
        title = 'hello.txt greets nobody' + (' (round %d)' % ctx['round'] if knob('vary-finding') else '')
        out({'verdict': 'findings', 'findings': [{'id': 'F1', 'severity': sev, 'title': title, 'file': 'hello.txt', 'line': 1, 'fix': 'name the reader'}]})
    if phase == 'spec-plan' and knob('spec-finding') and bump('spec-reviews') == 1:
        out({'verdict': 'findings', 'findings': [{'id': 'S1', 'severity': 'concern', 'title': 'no acceptance criterion for the greeting text', 'file': ctx['spec_dir'] + '/spec.md'}]})
    out({'verdict': 'clean', 'findings': []})
if role == 'finding-adjudicator':
    findings = ctx['report']['findings']
    if knob('adj-skip'):
        out({'findings': []})
    rounds = int(knob('sustain-rounds', '0'))
    disp = 'sustained' if phase == 'spec-plan' else 'refuted'
    if findings and phase == 'code':
        seen = bump('adj-code-with-findings')
        if seen <= rounds:
            disp = 'sustained'
    out({'findings': [{'id': f['id'], 'disposition': disp, 'reason': 'checked hello.txt'} for f in findings]})
print('unknown role ' + role)
sys.exit(1)
"#;

fn setup(s: &Scenario, test_gate: &str, approved: bool) -> String {
    s.write("work.toml", &format!("[gates]\ntest = {test_gate:?}\n"));
    s.write("README.md", "demo\n");
    if approved {
        s.write(&format!("{DIR}/spec.md"), "# Hello\n\n**Status:** Approved\n\nPrint a greeting.\n");
        s.write(
            &format!("{DIR}/plan.md"),
            "# Plan\n\n**Status:** Approved\n\n## Task 1: Write hello\nCreate hello.txt.\n",
        );
    } else {
        std::fs::create_dir_all(s.path(DIR)).expect("mkdir");
    }
    s.commit("init");
    s.agent("agent.py", AGENT)
}

fn knob(s: &Scenario, name: &str, value: &str) {
    s.write(&format!(".agent-state/{name}"), value);
}

fn calls(s: &Scenario, role: &str) -> u32 {
    std::fs::read_to_string(s.path(&format!(".agent-state/calls-{role}")))
        .map(|t| t.trim().parse().unwrap_or(0))
        .unwrap_or(0)
}

fn log(s: &Scenario) -> Vec<Value> {
    std::fs::read_to_string(s.path(".agent-state/log"))
        .unwrap_or_default()
        .lines()
        .map(|l| serde_json::from_str(l).expect("log line"))
        .collect()
}

fn set_status(s: &Scenario, file: &str, status: &str) {
    let p = format!("{DIR}/{file}");
    let text = s.read(&p);
    let out: Vec<String> = text
        .lines()
        .map(|l| if l.starts_with("**Status:**") { format!("**Status:** {status}") } else { l.to_string() })
        .collect();
    s.write(&p, &(out.join("\n") + "\n"));
}

fn run(s: &Scenario, agent: &str, extra: &[&str], code: i32) -> Value {
    let mut args = vec!["loop", "run", DIR, "--agent", agent, "--json"];
    args.extend_from_slice(extra);
    s.run_json(&args, code)
}

fn transitions(v: &Value) -> Vec<String> {
    v["transitions"].as_array().expect("transitions").iter().map(|t| t.as_str().unwrap_or("").to_string()).collect()
}

fn engine(s: &Scenario) -> Value {
    s.read_json(&format!("{DIR}/engine-state.json"))
}

#[test]
fn full_happy_path_drafts_pauses_at_each_human_gate_and_ends_done() {
    let s = Scenario::new();
    let agent = setup(&s, "test -f hello.txt", false);

    // 1. Drafting (the drafter writes spec.md and plan.md), spec/plan review, spec gate.
    let v = run(&s, &agent, &["--full"], 3);
    assert_eq!(v["outcome"], "paused");
    assert_eq!(v["reason"], "spec-human-gate");
    assert_eq!(v["state"], "SPEC-HUMAN-GATE");
    assert_eq!(v["review_mode"], "full");
    assert!(v["next"]["edit"].as_str().unwrap_or("").contains("**Status:** Approved"), "{v}");
    assert!(v["next"]["resume"].as_str().unwrap_or("").contains("--resume"), "{v}");
    assert_eq!(calls(&s, "spec-drafter"), 1);
    assert!(log(&s).iter().any(|l| l["role"] == "adversarial-reviewer" && l["phase"] == "spec-plan"));
    let spec_verdict = s.read_json(&format!("{DIR}/reviews/spec-1/review-verdict.json"));
    assert_eq!(spec_verdict["schema"], "review-verdict.v1");
    assert_eq!(spec_verdict["state"], "READY");
    assert_eq!(engine(&s)["pending_human_wait"], true);

    // Resuming without approving waits again and changes nothing.
    let seq = engine(&s)["transition_sequence"].clone();
    let v = run(&s, &agent, &["--resume"], 3);
    assert_eq!(v["reason"], "spec-human-gate");
    assert_eq!(engine(&s)["transition_sequence"], seq);

    // 2. The person approves the spec: the plan gate pauses next.
    set_status(&s, "spec.md", "Approved");
    let v = run(&s, &agent, &["--resume"], 3);
    assert_eq!(v["reason"], "plan-human-gate");
    assert_eq!(v["state"], "PLAN-HUMAN-GATE");
    assert!(v["next"]["file"].as_str().unwrap_or("").ends_with("plan.md"), "{v}");

    // 3. The person approves the plan: seal, execute, gates, review, merge gate.
    set_status(&s, "plan.md", "Approved");
    let v = run(&s, &agent, &["--resume"], 3);
    assert_eq!(v["reason"], "code-human-gate", "{v}");
    assert_eq!(v["state"], "CODE-HUMAN-GATE");
    let t = transitions(&v).join("\n");
    for e in ["plan-approved", "plan-locked", "wave-complete", "gates-clean", "reviewers-clean"] {
        assert!(t.contains(&format!("({e})")), "{e} missing in {t}");
    }
    assert!(s.read("hello.txt").contains("hello from task 1"));
    assert!(s.read(&format!("{DIR}/spec.md")).contains("**Status:** Shipped"));
    let code_verdict = s.read_json(&format!("{DIR}/reviews/code-1/review-verdict.json"));
    assert_eq!(code_verdict["state"], "READY");
    assert_eq!(code_verdict["review_mode"], "full");
    assert_eq!(code_verdict["human_merge_decision"], "pending");
    let reviewers: Vec<&str> =
        code_verdict["reviewers"].as_array().expect("reviewers").iter().filter_map(|r| r["role"].as_str()).collect();
    assert_eq!(reviewers, ["adversarial-reviewer", "quality-reviewer"]);
    assert!(code_verdict["target"]["changed_paths"].as_array().expect("paths").iter().any(|p| p == "hello.txt"));
    // Every review report went through the adjudicator.
    assert_eq!(calls(&s, "finding-adjudicator"), 3);
    let cohort = s.read_json(&format!("{DIR}/state.json"));
    assert_eq!(cohort["review_round_count"], 1);
    assert_eq!(cohort["review_rounds"][0]["kind"], "clean-report");

    // 4. The merge decision.
    let v = run(&s, &agent, &["--resume", "--approve"], 0);
    assert_eq!(v["outcome"], "done");
    assert_eq!(v["ok"], true);
    assert_eq!(v["state"], "DONE");
    assert_eq!(engine(&s)["last_event"], "done");
    assert!(s.read(&format!("{DIR}/plan.md")).contains("**Status:** Done"));
    assert_eq!(v["verdicts"].as_array().map(Vec::len), Some(2));
    // Every dispatch carried a model and effort pin, with the right access.
    for l in log(&s) {
        assert!(!l["model"].as_str().unwrap_or("").is_empty() && !l["effort"].as_str().unwrap_or("").is_empty());
        let writes = l["role"] == "implementer" || l["role"] == "spec-drafter";
        assert_eq!(l["access"], if writes { "workspace-write" } else { "read-only" }, "{l}");
    }
    // Running again at DONE is a no-op success.
    let v = run(&s, &agent, &[], 0);
    assert_eq!(v["outcome"], "done");
    assert!(transitions(&v).is_empty());
}

#[test]
fn red_gates_reopen_implementation_and_count_a_retry() {
    let s = Scenario::new();
    let agent = setup(&s, "test -f fixed.txt", true);
    let v = run(&s, &agent, &["--light"], 3);
    assert_eq!(v["reason"], "code-human-gate", "{v}");
    assert_eq!(v["review_mode"], "light");
    assert_eq!(v["implementation_retry_count"], 1);
    let t = transitions(&v).join("\n");
    assert!(t.contains("(gates-failed)") && t.contains("(gates-clean)"), "{t}");
    assert!(s.read("fixed.txt").contains("gates"), "the fix dispatch was told the gates failed");
    assert_eq!(calls(&s, "implementer"), 2);
    let cohort = s.read_json(&format!("{DIR}/state.json"));
    assert_eq!(cohort["implementation_retry_count"], 1);
    assert_eq!(cohort["attempt_cycle_ids"].as_array().map(Vec::len), Some(1));
    // Light mode: no pre-EXECUTE spec review, no quality reviewer.
    assert!(!log(&s).iter().any(|l| l["phase"] == "spec-plan" || l["role"] == "quality-reviewer"));
}

#[test]
fn retry_cap_reached_ends_blocked() {
    let s = Scenario::new();
    let agent = setup(&s, "false", true);
    let v = run(&s, &agent, &["--light", "--implementation-retry-cap", "1"], 1);
    assert_eq!(v["outcome"], "blocked");
    assert_eq!(v["reason"], "implementation-retry-cap");
    assert_eq!(v["state"], "CODE-VERIFICATION");
    assert_eq!(v["implementation_retry_count"], 1);
    assert!(v["message"].as_str().unwrap_or("").contains("gate test (`false`) is red"), "{v}");
    // The task and one fix; the second red run is not retried.
    assert_eq!(calls(&s, "implementer"), 2);
    assert_eq!(calls(&s, "adversarial-reviewer"), 0);
}

#[test]
fn a_refuted_finding_does_not_reopen_implementation() {
    let s = Scenario::new();
    let agent = setup(&s, "test -f hello.txt", true);
    knob(&s, "review-finding", "1");
    let v = run(&s, &agent, &["--full"], 3);
    assert_eq!(v["reason"], "code-human-gate", "{v}");
    assert_eq!(calls(&s, "implementer"), 1);
    assert!(!transitions(&v).join("\n").contains("findings-remain"));
    let verdict = s.read_json(&format!("{DIR}/reviews/code-1/review-verdict.json"));
    assert_eq!(verdict["state"], "READY");
    assert_eq!(verdict["reviewers"][0]["refuted"], 1);
    assert_eq!(verdict["sustained_findings"].as_array().map(Vec::len), Some(0));
    let adj = s.read_json(&format!("{DIR}/reviews/code-1/r1-adversarial-reviewer.adjudication.json"));
    assert_eq!(adj["findings"][0]["disposition"], "refuted");
    assert_eq!(adj["findings"][0]["title"], "hello.txt greets nobody");
}

#[test]
fn a_sustained_finding_reopens_implementation_then_clean_review_is_ready() {
    let s = Scenario::new();
    let agent = setup(&s, "test -f hello.txt", true);
    knob(&s, "review-finding", "1");
    knob(&s, "sustain-rounds", "1");
    let v = run(&s, &agent, &["--full"], 3);
    assert_eq!(v["reason"], "code-human-gate", "{v}");
    let t = transitions(&v).join("\n");
    assert!(t.contains("CODE-REVIEW -> CODE-IMPLEMENTATION (findings-remain)"), "{t}");
    assert_eq!(v["review_retry_count"], 1);
    assert_eq!(calls(&s, "implementer"), 2);
    assert!(s.read("fixed.txt").contains("review"));
    let fix = log(&s).into_iter().find(|l| l["phase"] == "fix").expect("a fix dispatch");
    assert_eq!(fix["task_id"], "fix-review");
    let verdict = s.read_json(&format!("{DIR}/reviews/code-1/review-verdict.json"));
    assert_eq!(verdict["state"], "READY");
    assert_eq!(verdict["rounds"], 2);
    assert_eq!(verdict["sustained_findings"][0]["id"], "F1");
    assert_eq!(verdict["sustained_findings"][0]["resolution"], "fixed");
    let cohort = s.read_json(&format!("{DIR}/state.json"));
    let kinds: Vec<&str> =
        cohort["review_rounds"].as_array().expect("rounds").iter().filter_map(|r| r["kind"].as_str()).collect();
    assert_eq!(kinds, ["fingerprints", "clean-report"]);
}

#[test]
fn review_retry_cap_ends_blocked_with_a_blocked_verdict() {
    let s = Scenario::new();
    let agent = setup(&s, "test -f hello.txt", true);
    knob(&s, "review-finding", "1");
    knob(&s, "vary-finding", "1");
    knob(&s, "sustain-rounds", "99");
    let v = run(&s, &agent, &["--full", "--review-retry-cap", "1"], 1);
    assert_eq!(v["reason"], "review-retry-cap", "{v}");
    assert_eq!(v["state"], "CODE-REVIEW");
    assert_eq!(v["verdict_state"], "BLOCKED");
    let verdict = s.read_json(&format!("{DIR}/reviews/code-1/review-verdict.json"));
    assert_eq!(verdict["state"], "BLOCKED");
    assert!(verdict["blocking_reason"].as_str().unwrap_or("").contains("review retry cap"));
    assert_eq!(verdict["rounds"], 2);
}

#[test]
fn the_same_sustained_findings_twice_is_stasis_for_a_person() {
    let s = Scenario::new();
    let agent = setup(&s, "test -f hello.txt", true);
    knob(&s, "review-finding", "1");
    knob(&s, "sustain-rounds", "99");
    let v = run(&s, &agent, &["--full"], 3);
    assert_eq!(v["reason"], "review-stasis", "{v}");
    assert_eq!(v["verdict_state"], "BLOCKED");
    assert_eq!(v["review_retry_count"], 1, "the stasis round is not recorded");
    let code_reviews = log(&s).iter().filter(|l| l["role"] == "adversarial-reviewer" && l["phase"] == "code").count();
    assert_eq!(code_reviews, 2, "no third round after stasis");
}

#[test]
fn an_implementer_that_changes_nothing_is_not_done() {
    let s = Scenario::new();
    let agent = setup(&s, "true", true);
    knob(&s, "impl-noop", "1");
    let v = run(&s, &agent, &["--light"], 1);
    assert_eq!(v["outcome"], "blocked");
    assert_eq!(v["reason"], "task-unchanged", "{v}");
    assert_eq!(v["state"], "CODE-IMPLEMENTATION");
    assert!(!transitions(&v).join("\n").contains("wave-complete"));
    assert_eq!(calls(&s, "implementer"), 2, "one nudge, then blocked");
}

#[test]
fn changes_requested_at_the_merge_gate_open_a_second_review_unit() {
    let s = Scenario::new();
    let agent = setup(&s, "test -f hello.txt", true);
    run(&s, &agent, &["--light"], 3);
    let v = run(&s, &agent, &["--resume", "--reject", "greet the reader by name"], 3);
    assert_eq!(v["reason"], "code-human-gate", "{v}");
    assert!(transitions(&v).join("\n").contains("(blocker-applied)"));
    assert!(s.read("fixed.txt").contains("human"));
    assert!(s.path(&format!("{DIR}/reviews/code-1/review-verdict.json")).exists());
    let second = s.read_json(&format!("{DIR}/reviews/code-2/review-verdict.json"));
    assert_eq!(second["review_unit"], "code-2");
    assert_eq!(v["verdicts"].as_array().map(Vec::len), Some(2));
}

#[test]
fn an_adjudication_that_skips_a_finding_is_a_loud_stop() {
    let s = Scenario::new();
    let agent = setup(&s, "test -f hello.txt", true);
    knob(&s, "review-finding", "1");
    knob(&s, "adj-skip", "1");
    let v = run(&s, &agent, &["--light"], 3);
    assert_eq!(v["reason"], "adjudication-indeterminate", "{v}");
    assert_eq!(v["state"], "CODE-REVIEW");
    assert_eq!(v["verdict_state"], "BLOCKED");
    assert_eq!(calls(&s, "implementer"), 1, "nothing reopened");
}

#[test]
fn bad_input_is_refused_before_anything_runs() {
    let s = Scenario::new();
    let agent = setup(&s, "true", true);
    let (code, out, err) = s.run(&["loop", "run", "docs/specs/nope", "--agent", &agent, "--json"]);
    assert_eq!(code, 2, "{out}{err}");
    assert!(out.is_empty());
    assert_one_line_error(&err);
    let (code, _, err) = s.run(&["loop", "run", DIR, "--agent", &agent, "--approve"]);
    assert_eq!(code, 2);
    assert_one_line_error(&err);
    let (code, _, err) = s.run(&["loop", "run", DIR, "--agent", &agent, "--resume"]);
    assert_eq!(code, 2);
    assert_one_line_error(&err);
    let (code, _, err) = s.run(&["loop", "run", "../outside", "--agent", &agent]);
    assert_eq!(code, 2);
    assert_one_line_error(&err);
    assert!(!s.path(&format!("{DIR}/engine-state.json")).exists());
    assert_eq!(calls(&s, "spec-drafter") + calls(&s, "implementer"), 0);
}

#[test]
fn sustained_spec_review_findings_send_the_spec_back_to_the_drafter() {
    let s = Scenario::new();
    let agent = setup(&s, "test -f hello.txt", false);
    knob(&s, "spec-finding", "1");
    let v = run(&s, &agent, &["--full"], 3);
    assert_eq!(v["reason"], "spec-human-gate", "{v}");
    let t = transitions(&v).join("\n");
    assert!(t.contains("SPEC-PLAN-REVIEW -> SPEC-PLAN-DRAFTING (findings-remain)"), "{t}");
    assert_eq!(calls(&s, "spec-drafter"), 2, "drafted, then revised from the sustained finding");
    assert!(s.read(&format!("{DIR}/spec.md")).contains("revised: review"));
    let verdict = s.read_json(&format!("{DIR}/reviews/spec-1/review-verdict.json"));
    assert_eq!(verdict["state"], "READY");
    assert_eq!(verdict["rounds"], 2);
    assert_eq!(verdict["sustained_findings"][0]["resolution"], "fixed");
}

#[test]
fn light_mode_accepts_non_blocker_fixes_without_a_second_pass() {
    let s = Scenario::new();
    let agent = setup(&s, "test -f hello.txt", true);
    knob(&s, "review-finding", "1");
    knob(&s, "finding-severity", "concern");
    knob(&s, "sustain-rounds", "99");
    let v = run(&s, &agent, &["--light"], 3);
    assert_eq!(v["reason"], "code-human-gate", "{v}");
    assert_eq!(calls(&s, "adversarial-reviewer"), 1, "a single bounded pass");
    assert_eq!(calls(&s, "implementer"), 2);
    assert_eq!(v["verdict_state"], "READY_WITH_RESIDUAL_RISK");
    let verdict = s.read_json(&format!("{DIR}/reviews/code-1/review-verdict.json"));
    assert!(verdict["residual_risks"][0].as_str().unwrap_or("").contains("not re-reviewed"), "{verdict}");
}

#[test]
fn light_mode_rereviews_a_blocker_once_then_escalates_to_full() {
    let s = Scenario::new();
    let agent = setup(&s, "test -f hello.txt", true);
    knob(&s, "review-finding", "1");
    knob(&s, "sustain-rounds", "2");
    let v = run(&s, &agent, &["--light"], 3);
    assert_eq!(v["reason"], "code-human-gate", "{v}");
    assert_eq!(v["review_mode"], "full");
    assert!(v["review_mode_reasons"].to_string().contains("escalated"), "{v}");
    // Round 1 (light), the single re-review (light, the Blocker survives), then full mode with
    // the quality reviewer, adjudicated clean.
    assert_eq!(calls(&s, "adversarial-reviewer"), 3);
    assert_eq!(calls(&s, "quality-reviewer"), 1);
    assert_eq!(v["verdict_state"], "READY");
    assert_eq!(v["review_retry_count"], 2);
}
