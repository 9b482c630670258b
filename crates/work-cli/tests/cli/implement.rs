//! `work implement` and `work edit` end to end: one scripted agent plays every role (it
//! branches on `role` and `context.task_id`), and lies the way the pipeline's changelog says
//! agents lie. Every test asserts how the run ends AND how many dispatches it took (the agent
//! counts its own invocations in `.agent-state/all`).

use crate::support::{Scenario, assert_one_line_error, fallback_only, refused};
use serde_json::Value;

/// Shared prelude of every scripted agent: logging, counters, helpers, and the honest default
/// answer of each role (reached when the test's body did not answer first).
const PRELUDE: &str = r#"
role = req['role']
tid = str(ctx.get('task_id'))
phase = ctx.get('phase', '')
# One appended line per invocation (O_APPEND: safe under the concurrent fan-out).
LOG = state_path('log')
earlier = [json.loads(l) for l in open(LOG)] if os.path.exists(LOG) else []
n_role = 1 + sum(1 for l in earlier if l['role'] == role)
line = json.dumps({'role': role, 'task': tid, 'phase': phase, 'model': req['model'],
                   'effort': req['effort'], 'access': req['access']}) + '\n'
fd = os.open(LOG, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
os.write(fd, line.encode())
os.close(fd)
def out(d):
    # A reviewer reads every file of the diff it is shown unless the test says what it read.
    if role in ('spec-reviewer', 'quality-reviewer') and isinstance(d, dict) and 'files_read' not in d:
        d = dict(d, files_read=READ)
    print(json.dumps({'work_result': d, 'usage': {'input_tokens': 100, 'output_tokens': 10}}))
    sys.exit(0)
def write(p, c):
    d = os.path.dirname(p)
    if d:
        os.makedirs(d, exist_ok=True)
    open(p, 'w').write(c)
def sh(cmd):
    os.system(cmd)
DONE = {'status': 'DONE', 'summary': 'done', 'applied_changes': True}
# What an honest reviewer read: every file of the diff it was shown.
import re
READ = re.findall(r'^diff --git a/(\S+) ', req.get('prompt', ''), re.M)
"#;

const DEFAULTS: &str = r#"
if role == 'spec-reviewer':
    out({'status': 'compliant', 'issues': [], 'files_read': READ})
if role == 'quality-reviewer':
    out({'verdict': 'approved', 'issues': [], 'files_read': READ})
if role == 'implementer':
    out(DONE)
if role == 'tester':
    out({'status': 'DONE', 'fixtures': 1})
if role == 'editor':
    out({'status': 'DONE', 'applied_changes': True, 'sites': 0, 'hole': None})
print('no answer for role ' + role)
sys.exit(3)
"#;

pub(crate) fn agent(s: &Scenario, body: &str) -> String {
    s.agent("agent.py", &format!("{PRELUDE}\n{body}\n{DEFAULTS}"))
}

/// Agent invocations, from the append-only log (the counters race under the fan-out).
fn dispatches(s: &Scenario) -> usize {
    log(s).len()
}

fn role_count(s: &Scenario, role: &str) -> usize {
    log(s).iter().filter(|l| l["role"] == role).count()
}

fn log(s: &Scenario) -> Vec<Value> {
    std::fs::read_to_string(s.path(".agent-state/log"))
        .unwrap_or_default()
        .lines()
        .map(|l| serde_json::from_str(l).expect("log line"))
        .collect()
}

/// A repository with a tracked file and a committed plan of `tasks` (id, title, body).
pub(crate) fn repo_with_plan(tasks: &[(&str, &str, &str)]) -> Scenario {
    let s = Scenario::new();
    s.write("shared.txt", "base\n");
    let mut plan = String::from("# Plan\n\nSome preamble.\n\n");
    for (id, title, body) in tasks {
        plan.push_str(&format!("## Task {id}: {title}\n\n{body}\n\n"));
    }
    s.write("PLAN.md", &plan);
    s.commit("plan");
    s
}

pub(crate) fn implement(s: &Scenario, agent: &str, test_cmd: &str, extra: &[&str], code: i32) -> Value {
    let mut args =
        vec!["implement", "--plan", "PLAN.md", "--iter-id", "it-1", "--agent", agent, "--test-cmd", test_cmd, "--json"];
    args.extend_from_slice(extra);
    s.run_json(&args, code)
}

fn concerns(r: &Value) -> String {
    r["concerns"]
        .as_array()
        .map(|a| a.iter().map(|c| c.as_str().unwrap_or("")).collect::<Vec<_>>().join("\n"))
        .unwrap_or_default()
}

// ---------------------------------------------------------------- end-verify (#11, #12, #29)

#[test]
fn done_claimed_on_an_untouched_tree_is_blocked_with_no_blocked_md() {
    let s = repo_with_plan(&[("1", "Add greeting", "Create hello.txt.")]);
    // The implementer claims DONE and applied_changes, and writes nothing; reviewers approve.
    let a = agent(&s, "");
    let r = implement(&s, &a, "true", &[], 1);
    assert_eq!(r["status"], "BLOCKED");
    assert_eq!(r["kind"], "no-op");
    assert_eq!(r["files_touched"], 0);
    assert_eq!(r["suite_green"], Value::Null, "a clean tree never reaches the suite");
    assert_eq!(r["artifacts"]["blocked_md"], Value::Null);
    assert_eq!(r["artifacts"]["stats_json"], Value::Null);
    assert!(!s.path(".work/iterations/it-1/BLOCKED.md").exists());
    assert!(concerns(&r).contains("applied_changes"), "the false claim surfaces as a concern: {r}");
    assert_eq!(dispatches(&s), 3, "implementer, spec reviewer, quality reviewer");
}

#[test]
fn an_untracked_only_change_counts_and_a_green_suite_is_done() {
    let s = repo_with_plan(&[("1", "Add greeting", "Create hello.txt.")]);
    let a = agent(&s, "if role == 'implementer':\n    write('hello.txt', 'hi\\n')\n    out(DONE)");
    let r = implement(&s, &a, "test -f hello.txt", &[], 0);
    assert_eq!(r["status"], "DONE", "{r}");
    assert_eq!(r["files_touched"], 1);
    assert_eq!(r["files"][0], "?? hello.txt");
    assert_eq!(r["suite_green"], true);
    assert_eq!(r["tasks"][0]["status"], "DONE");
    assert_eq!(r["artifacts"]["blocked_md"], Value::Null);
    assert_eq!(r["blocked_detail"], Value::Null);
    assert_eq!(dispatches(&s), 3);
    assert_eq!(r["stats"]["dispatches"], 3);
    assert_eq!(r["stats"]["dispatches_per_done_task"], 3.0);
    assert_eq!(r["stats"]["tokens_per_done_task"], 330.0);
    // Every role carried its own pins, and only the implementer could write.
    let log = log(&s);
    let pin = |role: &str| log.iter().find(|l| l["role"] == role).cloned().expect("dispatched");
    assert_eq!(
        (pin("implementer")["model"].clone(), pin("implementer")["effort"].clone()),
        ("sonnet".into(), "high".into())
    );
    assert_eq!(pin("quality-reviewer")["model"], "opus");
    assert_eq!(pin("quality-reviewer")["effort"], "xhigh");
    assert_eq!(pin("implementer")["access"], "workspace-write");
    assert_eq!(pin("spec-reviewer")["access"], "read-only");
    // The run is audited.
    let run_id = r["run_id"].as_str().expect("run id");
    assert!(s.path(&format!(".work/runs/{run_id}/events.jsonl")).exists());
}

#[test]
fn a_red_suite_blocks_and_writes_the_artifacts() {
    let s = repo_with_plan(&[("1", "Add greeting", "Create hello.txt.")]);
    let a = agent(&s, "if role == 'implementer':\n    write('hello.txt', 'hi\\n')\n    out(DONE)");
    let r = implement(&s, &a, "echo 'suite says no'; exit 1", &[], 1);
    assert_eq!(r["status"], "BLOCKED");
    assert_eq!(r["kind"], "suite-red");
    assert_eq!(r["route"], "debug");
    assert_eq!(r["suite_green"], false);
    assert_eq!(r["tasks"][0]["status"], "DONE", "the task's self-report was DONE; the suite overrules it");
    let md = s.read(".work/iterations/it-1/BLOCKED.md");
    assert_eq!(r["artifacts"]["blocked_md"], md.as_str(), "the report carries the file byte-identical");
    assert!(md.contains("- Date: 2026-01-01"), "{md}");
    assert!(md.contains("?? hello.txt"), "FILES_TOUCHED filled: {md}");
    let stats = s.read_json(".work/iterations/it-1/stats.json");
    assert_eq!(stats["date"], "2026-01-01");
    assert_eq!(stats["files_touched"], 1);
    assert_eq!(stats["status"], "BLOCKED");
    assert_eq!(dispatches(&s), 3);
}

// ---------------------------------------------------------------- snapshot guard (#23)

#[test]
fn a_later_task_discarding_an_earlier_tasks_file_is_a_hard_blocked() {
    // Task 2 puts shared.txt back from git's objects, as `git checkout --` does without writing
    // `.git`: a loss the sandbox does not refuse, judged the same confined or not.
    let s = repo_with_plan(&[("1", "Edit shared", "Append to shared.txt."), ("2", "Add b", "Create b.txt.")]);
    let a = agent(
        &s,
        r#"
if role == 'implementer' and tid == '1':
    write('shared.txt', 'base\ntask one\n')
    out(DONE)
if role == 'implementer' and tid == '2':
    sh('git show HEAD:shared.txt > shared.txt')
    write('b.txt', 'b\n')
    out(DONE)
"#,
    );
    let r = implement(&s, &a, "true", &[], 1);
    assert_eq!(r["status"], "BLOCKED", "{r}");
    assert_eq!(r["kind"], "snapshot-loss");
    let d = &r["blocked_detail"];
    assert_eq!(d["lost_paths"], serde_json::json!(["shared.txt"]));
    assert_eq!(d["boundary"]["from"], "after task 1");
    assert_eq!(d["boundary"]["to"], "after task 2");
    let sha = d["snapshot_sha"].as_str().expect("sha");
    assert!(r["reason"].as_str().expect("reason").contains(sha));
    assert!(r["reason"].as_str().expect("reason").contains("shared.txt"));
    assert_eq!(s.git(&["show", &format!("{sha}:shared.txt")]), "base\ntask one\n", "the snapshot recovers it");
    assert_eq!(r["tasks"][1]["status"], "DONE", "the per-task report said DONE; the tree says otherwise");
    assert_eq!(r["suite_green"], Value::Null);
    assert!(s.path(".work/iterations/it-1/BLOCKED.md").exists());
    assert_eq!(dispatches(&s), 6, "three per task, and the snapshots cost none");
}

#[test]
fn accumulating_tasks_and_a_plan_intended_deletion_pass_the_snapshot_guard() {
    let s = repo_with_plan(&[
        ("1", "Edit shared", "Append to shared.txt."),
        ("2", "Delete shared", "Depends on: 1\nRemove shared.txt."),
        ("3", "Add c", "Create c.txt."),
    ]);
    let a = agent(
        &s,
        r#"
if role == 'implementer' and tid == '1':
    write('shared.txt', 'base\nmore\n')
    out(DONE)
if role == 'implementer' and tid == '2':
    os.remove('shared.txt')
    out(DONE)
if role == 'implementer' and tid == '3':
    write('c.txt', 'c\n')
    out(DONE)
"#,
    );
    let r = implement(&s, &a, "test ! -f shared.txt && test -f c.txt", &[], 0);
    assert_eq!(r["status"], "DONE", "{r}");
    assert_eq!(r["snapshots"].as_array().expect("snapshots").len(), 3);
    // Wave order: 1 and 3 have no dependencies, 2 waits for 1.
    let order: Vec<&str> =
        r["tasks"].as_array().expect("tasks").iter().map(|t| t["id"].as_str().unwrap_or("")).collect();
    assert_eq!(order, vec!["1", "3", "2"]);
    assert_eq!(dispatches(&s), 9);
}

// ---------------------------------------------------------------- review loop (#10, #29, valve)

#[test]
fn an_important_finding_over_a_byte_identical_diff_is_blocked() {
    let s = repo_with_plan(&[("1", "Add greeting", "Create hello.txt.")]);
    let a = agent(
        &s,
        r#"
if role == 'implementer' and phase == 'implement':
    write('hello.txt', 'hi\n')
    out(DONE)
if role == 'implementer':
    out({'status': 'DONE', 'summary': 'looked at it', 'applied_changes': True})
if role == 'quality-reviewer':
    out({'verdict': 'changes_requested', 'issues': [{'severity': 'important', 'text': 'hello.txt lacks a trailing period'}]})
"#,
    );
    let r = implement(&s, &a, "true", &["--max-repairs", "5"], 1);
    assert_eq!(r["status"], "BLOCKED", "{r}");
    assert_eq!(r["kind"], "important-on-unchanged-diff");
    assert!(r["reason"].as_str().expect("reason").contains("trailing period"));
    assert_eq!(r["blocked_detail"]["findings"][0]["severity"], "important");
    assert_eq!(dispatches(&s), 4, "implementer, spec, quality, one no-op repair — and no re-review");
}

#[test]
fn an_a_b_a_repair_is_caught_by_the_fingerprint_set() {
    let s = repo_with_plan(&[("1", "Add greeting", "Create hello.txt.")]);
    let a = agent(
        &s,
        r#"
if role == 'implementer' and phase == 'implement':
    write('hello.txt', 'A\n')
    out(DONE)
if role == 'implementer' and phase == 'quality-repair':
    write('hello.txt', 'B\n' if ctx['round'] == 1 else 'A\n')
    out(DONE)
if role == 'quality-reviewer':
    out({'verdict': 'changes_requested', 'issues': [{'severity': 'important', 'text': 'wrong letter'}]})
"#,
    );
    let r = implement(&s, &a, "true", &["--max-repairs", "5"], 1);
    assert_eq!(r["kind"], "important-on-unchanged-diff", "{r}");
    assert_eq!(r["tasks"][0]["fingerprints"], 2, "A and B");
    assert_eq!(r["tasks"][0]["repairs"], 2);
    assert_eq!(dispatches(&s), 7, "impl, spec, q(A), repair→B, spec(B), q(B), repair→A; no third review");
}

#[test]
fn important_findings_use_the_whole_repair_budget_then_block() {
    let s = repo_with_plan(&[("1", "Add greeting", "Create hello.txt.")]);
    let a = agent(
        &s,
        r#"
if role == 'implementer':
    write('hello.txt', 'v%d\n' % n_role)
    out(DONE)
if role == 'quality-reviewer':
    out({'verdict': 'changes_requested', 'issues': [{'severity': 'important', 'text': 'still wrong %d' % n_role}]})
"#,
    );
    let r = implement(&s, &a, "true", &[], 1);
    assert_eq!(r["kind"], "review-loop-exhausted", "{r}");
    assert_eq!(r["tasks"][0]["repairs"], 2);
    assert_eq!(role_count(&s, "quality-reviewer"), 3);
    assert_eq!(role_count(&s, "spec-reviewer"), 3, "every repaired diff goes back through the spec gate");
    assert_eq!(dispatches(&s), 9, "impl, spec, q, r, spec, q, r, spec, q");
}

#[test]
fn all_minor_findings_after_a_repair_end_the_loop_as_concerns() {
    let s = repo_with_plan(&[("1", "Add greeting", "Create hello.txt.")]);
    let a = agent(
        &s,
        r#"
if role == 'implementer':
    write('hello.txt', 'v%d\n' % n_role)
    out(DONE)
if role == 'quality-reviewer' and n_role == 1:
    out({'verdict': 'changes_requested', 'issues': [{'severity': 'important', 'text': 'real bug'}]})
if role == 'quality-reviewer':
    out({'verdict': 'changes_requested', 'issues': [{'severity': 'minor', 'text': 'stale comment cross-reference'}]})
"#,
    );
    let r = implement(&s, &a, "true", &[], 0);
    assert_eq!(r["status"], "DONE", "{r}");
    assert!(concerns(&r).contains("stale comment cross-reference"), "{r}");
    assert_eq!(dispatches(&s), 6, "impl, spec, q(important), repair, spec, q(minor) ⇒ valve");
}

#[test]
fn a_reviewer_oscillating_on_a_plan_prescribed_name_is_held_not_chased() {
    let s = repo_with_plan(&[("1", "Add fn", "Add `fn frobnicate()` to lib.txt — the name is prescribed.")]);
    let a = agent(
        &s,
        r#"
if role == 'implementer' and phase == 'implement':
    write('lib.txt', 'fn frobnicate()\n')
    out(DONE)
if role == 'implementer' and phase == 'quality-repair':
    assert 'frobnicate()` to lib.txt' in req['prompt'], 'the repair brief carries the task text'
    assert 'HOLD CLAUSE' in req['prompt']
    out({'status': 'DONE', 'summary': 'kept the plan', 'applied_changes': False,
         'held': [{'finding': 'name frobnicate misleads', 'reason': 'the plan prescribes it; build green'}]})
if role == 'quality-reviewer':
    out({'verdict': 'changes_requested', 'issues': [{'severity': 'minor', 'text': 'name frobnicate misleads'}]})
"#,
    );
    let r = implement(&s, &a, "grep -q frobnicate lib.txt", &[], 0);
    assert_eq!(r["status"], "DONE", "{r}");
    assert_eq!(r["tasks"][0]["held"][0]["finding"], "name frobnicate misleads");
    let c = concerns(&r);
    assert!(c.contains("held to the plan"), "{c}");
    assert!(c.contains("already-seen diff state"), "{c}");
    assert_eq!(dispatches(&s), 4, "no second quality review over the unchanged diff");
}

#[test]
fn unclear_on_a_contradictory_task_is_spec_ambiguous_at_once() {
    let s =
        repo_with_plan(&[("1", "Exit code", "The binary must exit 1 on bad input. It must also exit 2 on bad input.")]);
    let a = agent(
        &s,
        r#"
if role == 'implementer':
    write('main.txt', 'exit 2\n')
    out(DONE)
if role == 'spec-reviewer':
    out({'status': 'unclear', 'issues': [], 'ambiguity': 'the task requires exit 1 and exit 2 for the same input'})
"#,
    );
    let r = implement(&s, &a, "true", &[], 1);
    assert_eq!(r["status"], "BLOCKED", "{r}");
    assert_eq!(r["kind"], "spec-ambiguous");
    assert!(r["reason"].as_str().expect("reason").contains("exit 1 and exit 2"));
    assert_eq!(dispatches(&s), 2, "no repair round is burned on a contradiction");
    assert!(s.path(".work/iterations/it-1/BLOCKED.md").exists());
}

#[test]
fn a_blocked_second_task_leaves_a_partial_run_and_the_rest_unattempted() {
    let s = repo_with_plan(&[("1", "A", "Create a.txt."), ("2", "B", "Create b.txt."), ("3", "C", "Create c.txt.")]);
    let a = agent(
        &s,
        r#"
if role == 'implementer' and tid == '2':
    out({'status': 'BLOCKED', 'reason': 'needs a database'})
if role == 'implementer':
    write(tid + '.txt', tid)
    out(DONE)
"#,
    );
    let r = implement(&s, &a, "true", &[], 1);
    assert_eq!(r["status"], "PARTIAL", "{r}");
    assert_eq!(r["tasks"][1]["status"], "BLOCKED");
    assert_eq!(r["tasks"][2]["status"], "NOT_ATTEMPTED");
    assert!(r["reason"].as_str().expect("reason").contains("needs a database"));
    assert_eq!(dispatches(&s), 4);
}

#[test]
fn a_spec_repair_is_re_reviewed_and_a_no_op_spec_repair_blocks() {
    let s = repo_with_plan(&[("1", "Add greeting", "Create hello.txt with `hi`.")]);
    let a = agent(
        &s,
        r#"
if role == 'implementer' and phase == 'implement':
    write('hello.txt', 'hello\n')
    out(DONE)
if role == 'implementer' and phase == 'spec-repair':
    write('hello.txt', 'hi\n')
    out(DONE)
if role == 'spec-reviewer':
    ok = open('hello.txt').read() == 'hi\n'
    out({'status': 'compliant' if ok else 'non_compliant', 'issues': [] if ok else ['hello.txt must say hi']})
"#,
    );
    let r = implement(&s, &a, "grep -q hi hello.txt", &[], 0);
    assert_eq!(r["status"], "DONE", "{r}");
    assert_eq!(dispatches(&s), 5, "impl, spec(non-compliant), repair, spec(compliant), quality");

    let s = repo_with_plan(&[("1", "Add greeting", "Create hello.txt with `hi`.")]);
    let a = agent(
        &s,
        r#"
if role == 'implementer' and phase == 'implement':
    write('hello.txt', 'hello\n')
    out(DONE)
if role == 'spec-reviewer':
    out({'status': 'non_compliant', 'issues': ['hello.txt must say hi']})
"#,
    );
    let r = implement(&s, &a, "true", &[], 1);
    assert_eq!(r["kind"], "spec-unresolved", "{r}");
    assert_eq!(dispatches(&s), 3, "impl, spec, a repair that changed nothing — no re-review");
}

#[test]
fn an_e2e_tester_that_writes_the_tree_or_fails_is_blocked_and_its_honest_twin_is_not() {
    let run = |tester: &str, code: i32| {
        let s = repo_with_plan(&[("1", "E2E: greeting", "Create hello.txt.")]);
        let a =
            agent(&s, &format!("if role == 'implementer':\n    write('hello.txt', 'hi\\n')\n    out(DONE)\n{tester}"));
        let r = implement(&s, &a, "true", &[], code);
        (s, r)
    };
    let unconfined = fallback_only(refused::READ_ONLY);
    // The liar fakes a green fixture in the tree.
    let (s, r) = run(
        "if role == 'tester':\n    write('tests/e2e_greeting.sh', 'true\\n')\n    out({'status': 'DONE', 'fixtures': 1})",
        1,
    );
    assert_eq!(r["status"], "BLOCKED", "{r}");
    assert_eq!(r["kind"], "tester-wrote-tree", "{r}");
    assert!(r["reason"].as_str().is_some_and(|x| x.contains("tests/e2e_greeting.sh")), "{r}");
    assert_eq!(role_count(&s, "tester"), 1);
    let access = log(&s).into_iter().find(|l| l["role"] == "tester").map(|l| l["access"].clone());
    assert_eq!(access, Some("read-only".into()), "the tester is dispatched read-only");

    // The liar deletes a tracked file.
    let (_s, r) = run("if role == 'tester':\n    os.remove('PLAN.md')\n    out({'status': 'DONE', 'fixtures': 1})", 1);
    assert_eq!(r["kind"], "tester-wrote-tree", "{r}");

    drop(unconfined);
    // An honest FAILED is a stop, not a concern.
    let (_s, r) =
        run("if role == 'tester':\n    out({'status': 'FAILED', 'fixtures': 1, 'summary': 'no greeting'})", 1);
    assert_eq!(r["kind"], "e2e-failed", "{r}");
    assert!(r["reason"].as_str().is_some_and(|x| x.contains("no greeting")), "{r}");

    // The honest twin writes its fixtures where the engine says, outside the tree.
    let (s, r) = run(
        r#"if role == 'tester':
    d = ctx['fixtures_dir']
    assert not d.startswith(os.getcwd()), d
    write(os.path.join(d, 'greeting.txt'), 'fixture')
    out({'status': 'DONE', 'fixtures': 1})"#,
        0,
    );
    assert_eq!(r["status"], "DONE", "{r}");
    assert_eq!(r["files_touched"], 1, "{r}");
    assert_eq!(r["tasks"][0]["e2e"], true);
    assert_eq!(dispatches(&s), 4);
}

#[test]
fn a_crashing_or_garbage_printing_implementer_blocks_the_task() {
    let s = repo_with_plan(&[("1", "A", "Create a.txt.")]);
    let a = agent(&s, "if role == 'implementer':\n    print('I am not JSON')\n    sys.exit(0)");
    let r = implement(&s, &a, "true", &[], 1);
    assert_eq!(r["kind"], "dispatch-failed", "{r}");
    assert!(r["reason"].as_str().expect("reason").contains("malformed twice"), "{r}");
    assert_eq!(dispatches(&s), 2, "one retry, then dropped");
    let s = repo_with_plan(&[("1", "A", "Create a.txt.")]);
    let a = agent(&s, "if role == 'implementer':\n    sys.exit(7)");
    let r = implement(&s, &a, "true", &[], 1);
    assert_eq!(r["kind"], "dispatch-failed", "{r}");
    assert_eq!(dispatches(&s), 1, "a failure is not retried");
}

// ---------------------------------------------------------------- carriers and preflight (#24, #29)

fn carrier_run(s: &Scenario, a: &str, carrier: &str) -> Value {
    s.run_json(&["implement", "--carrier", carrier, "--agent", a, "--test-cmd", "true", "--json"], 1)
}

#[test]
fn malformed_carriers_block_with_zero_dispatches() {
    let s = repo_with_plan(&[("1", "A", "Create a.txt.")]);
    let a = agent(&s, "");
    for (carrier, kind, needle) in [
        ("42", "bad-carrier", "a number"),
        ("please implement PLAN.md", "bad-carrier", "a string (free text)"),
        ("[\"PLAN.md\"]", "bad-carrier", "an array"),
        ("true", "bad-carrier", "a boolean"),
        (r#"{"iter_id": "it-1"}"#, "missing-field", "plan_path"),
        (r#"{"iter_id": " ", "plan_path": "PLAN.md"}"#, "missing-field", "iter_id"),
        (r#"{"mode": "turbo", "iter_id": "it-1", "plan_path": "PLAN.md"}"#, "bad-carrier", "turbo"),
        (r#"{"mode": "mini", "iter_id": "it-1", "red_test_path": "t"}"#, "missing-field", "cause_summary"),
        (r#"{"iter_id": "it-1", "plan_path": "PLAN.md", "range": "3-1"}"#, "bad-range", "3-1"),
    ] {
        let r = carrier_run(&s, &a, carrier);
        assert_eq!(r["status"], "BLOCKED", "{carrier}: {r}");
        assert_eq!(r["kind"], kind, "{carrier}: {r}");
        assert!(r["reason"].as_str().expect("reason").contains(needle), "{carrier}: {r}");
        assert_eq!(r["artifacts"]["blocked_md"], Value::Null);
        assert_eq!(r["blocked_detail"], Value::Null);
    }
    assert_eq!(dispatches(&s), 0, "no carrier failure reaches an agent");
}

#[test]
fn a_json_string_carrier_of_an_object_is_accepted() {
    let s = repo_with_plan(&[("1", "A", "Create a.txt.")]);
    let a = agent(&s, "if role == 'implementer':\n    write('a.txt', 'a')\n    out(DONE)");
    let inner = r#"{"iter_id": "it-9", "plan_path": "PLAN.md"}"#;
    let stringified = serde_json::to_string(inner).expect("encode");
    let r = s.run_json(&["implement", "--carrier", &stringified, "--agent", &a, "--test-cmd", "true", "--json"], 0);
    assert_eq!(r["status"], "DONE", "{r}");
    assert_eq!(r["iter_id"], "it-9");
    s.write("carrier.json", inner);
    s.git(&["add", "carrier.json"]);
    s.git(&["commit", "-q", "-m", "carrier"]);
    s.git(&["clean", "-fdq", "-e", ".agents", "-e", ".agent-state", "-e", ".work"]);
    let r =
        s.run_json(&["implement", "--carrier-file", "carrier.json", "--agent", &a, "--test-cmd", "true", "--json"], 0);
    assert_eq!(r["status"], "DONE", "{r}");
}

#[test]
fn a_dirty_tree_blocks_before_the_plan_is_read() {
    let s = repo_with_plan(&[("1", "A", "Create a.txt.")]);
    let a = agent(&s, "");
    s.write("stray.txt", "x");
    let r = s.run_json(
        &["implement", "--plan", "NO-SUCH-PLAN.md", "--iter-id", "it-1", "--agent", &a, "--test-cmd", "true", "--json"],
        1,
    );
    assert_eq!(r["status"], "BLOCKED");
    assert_eq!(r["kind"], "dirty-tree");
    assert_eq!(r["preflight"]["clean"], false);
    assert_eq!(r["preflight"]["dirty_paths"], serde_json::json!(["stray.txt"]));
    assert_eq!(r["preflight"]["branch"], "main");
    assert_eq!(dispatches(&s), 0);
}

#[test]
fn malformed_flags_and_missing_files_are_bad_input() {
    let s = repo_with_plan(&[("1", "A", "Create a.txt.")]);
    let a = agent(&s, "");
    for args in [
        vec!["implement", "--plan", "PLAN.md", "--iter-id", "i", "--range", "x-y", "--agent", &a, "--test-cmd", "true"],
        vec!["implement", "--plan", "MISSING.md", "--iter-id", "i", "--agent", &a, "--test-cmd", "true"],
        vec!["implement", "--plan", "PLAN.md", "--iter-id", "i", "--test-cmd", "true"],
        vec!["implement", "--carrier-file", "nope.json", "--agent", &a, "--test-cmd", "true"],
        vec!["implement", "--max-repairs", "lots"],
    ] {
        let (code, out, err) = s.run(&args);
        assert_eq!(code, 2, "{args:?}: {out} {err}");
        assert_one_line_error(&err);
        assert!(out.is_empty());
    }
    assert_eq!(dispatches(&s), 0);
    assert!(!s.path(".work/runs").exists(), "bad input changes no state");
}

#[test]
fn a_range_must_be_covered_exactly() {
    let s = repo_with_plan(&[("1", "A", "Create a.txt."), ("2", "B", "Create b.txt.")]);
    let a = agent(&s, "if role == 'implementer':\n    write(tid + '.txt', tid)\n    out(DONE)");
    // A range the plan does not cover is bad input: exit 2 before any dispatch or artifact.
    let (code, out, err) = s.run(&[
        "implement",
        "--plan",
        "PLAN.md",
        "--iter-id",
        "it-1",
        "--agent",
        &a,
        "--test-cmd",
        "true",
        "--range",
        "2-4",
    ]);
    assert_eq!(code, 2, "stdout: {out}\nstderr: {err}");
    assert_one_line_error(&err);
    assert!(err.contains("--range") && err.contains("got 1 of 3"), "{err}");
    assert!(!s.path(".work/iterations").exists(), "no artifacts");
    assert_eq!(dispatches(&s), 0);
    let r = implement(&s, &a, "test -f 2.txt && test ! -f 1.txt", &["--range", "2-2"], 0);
    assert_eq!(r["status"], "DONE", "{r}");
    assert_eq!(r["tasks"].as_array().expect("tasks").len(), 1);
}

// ---------------------------------------------------------------- free-form plans (#22, #29)

fn free_form_repo() -> Scenario {
    let s = Scenario::new();
    s.write(
        "PLAN.md",
        "# A free-form plan\n\nFirst, BODY-1: create 1.txt.\nThen BODY-2: create 2.txt.\nFinally BODY-3: create 3.txt.\n",
    );
    s.commit("plan");
    s
}

const FREE_FORM_IMPLEMENTER: &str = r#"
if role == 'implementer' and phase == 'implement':
    if ('BODY-' + tid) not in req['prompt']:
        out({'status': 'BLOCKED', 'reason': 'task text of the wrong task'})
    write(tid + '.txt', tid)
    out(DONE)
if role == 'plan-index' and os.environ.get('WORK_TEST_SHORT_INDEX'):
    out({'total_tasks': 3, 'tasks': [{'id': '1', 'title': 'one', 'est_bytes': 30}, {'id': '2', 'title': 'two', 'est_bytes': 30}]})
if role == 'plan-index':
    out({'total_tasks': 3, 'tasks': [{'id': str(i), 'title': 't%d' % i, 'est_bytes': 30} for i in (1, 2, 3)]})
"#;

fn free_form(s: &Scenario, a: &str, code: i32, env: &[(&str, &str)]) -> Value {
    let mut c = s.work();
    c.args(["implement", "--plan", "PLAN.md", "--iter-id", "ff", "--agent", a, "--test-cmd", "true", "--json"]);
    for (k, v) in env {
        c.env(k, v);
    }
    let out = c.output().expect("run work");
    assert_eq!(out.status.code(), Some(code), "{}", String::from_utf8_lossy(&out.stderr));
    serde_json::from_slice(&out.stdout).expect("json")
}

#[test]
fn a_prefix_truncated_batch_is_discarded_for_a_per_task_fan_out_associated_by_id() {
    let s = free_form_repo();
    let a = agent(
        &s,
        &format!(
            "{FREE_FORM_IMPLEMENTER}
if role == 'plan-extract' and tid == 'all':
    out({{'tasks': [{{'id': '1', 'text': 'BODY-1: create 1.txt.'}}]}})
if role == 'plan-extract':
    # Claims the wrong id on purpose: the engine associates by the id it asked for.
    out({{'id': 'zzz', 'text': 'BODY-' + tid + ': create ' + tid + '.txt.'}})
"
        ),
    );
    let r = free_form(&s, &a, 0, &[]);
    assert_eq!(r["status"], "DONE", "{r}");
    assert_eq!(r["tasks"].as_array().expect("tasks").len(), 3);
    assert_eq!(role_count(&s, "plan-extract"), 4, "one discarded batch, then three per-task calls");
    assert_eq!(r["stats"]["extraction_dispatches"], 5);
    assert_eq!(dispatches(&s), 5 + 9);
}

#[test]
fn a_batch_with_ids_out_of_order_is_accepted_in_one_call() {
    let s = free_form_repo();
    let a = agent(
        &s,
        &format!(
            "{FREE_FORM_IMPLEMENTER}
if role == 'plan-extract' and tid == 'all':
    out({{'tasks': [{{'id': i, 'text': 'BODY-' + i + ': create ' + i + '.txt.'}} for i in ('3', '1', '2')]}})
"
        ),
    );
    let r = free_form(&s, &a, 0, &[]);
    assert_eq!(r["status"], "DONE", "{r}");
    let order: Vec<&str> =
        r["tasks"].as_array().expect("tasks").iter().map(|t| t["id"].as_str().unwrap_or("")).collect();
    assert_eq!(order, vec!["1", "2", "3"], "index order, not answer order");
    assert_eq!(role_count(&s, "plan-extract"), 1);
    assert_eq!(dispatches(&s), 2 + 9);
}

/// The plan-index and plan-extract roles are read-only: one that rewrites a file of the tree
/// (here the plan's own check, before anything is frozen) or adds one is BLOCKED
/// `extractor-wrote-tree` before any task runs, its answer dropped. Its honest twin is
/// `a_batch_with_ids_out_of_order_is_accepted_in_one_call`.
#[test]
fn a_plan_index_or_extract_agent_that_writes_the_tree_is_blocked_before_any_task() {
    let _unconfined = fallback_only(refused::READ_ONLY);
    for (role, write) in [("plan-index", "write('check.sh', 'exit 0')"), ("plan-extract", "write('notes.txt', 'x')")] {
        let s = free_form_repo();
        s.write("check.sh", "test -f 3.txt\n");
        s.commit("check");
        let a = agent(
            &s,
            &format!(
                "if role == '{role}':\n    {write}\n{FREE_FORM_IMPLEMENTER}
if role == 'plan-extract' and tid == 'all':
    out({{'tasks': [{{'id': i, 'text': 'BODY-' + i + ': create ' + i + '.txt.'}} for i in ('1', '2', '3')]}})
"
            ),
        );
        let r = free_form(&s, &a, 1, &[]);
        assert_eq!(r["kind"], "extractor-wrote-tree", "{role}: {r}");
        assert!(r["reason"].as_str().is_some_and(|x| x.contains("read-only")), "{r}");
        assert_eq!(role_count(&s, "implementer"), 0, "no task runs after a write by {role}");
    }
}

#[test]
fn an_index_that_lists_fewer_than_it_counts_is_blocked_got_n_of_m() {
    let s = free_form_repo();
    let a = agent(&s, FREE_FORM_IMPLEMENTER);
    let r = free_form(&s, &a, 1, &[("WORK_TEST_SHORT_INDEX", "1")]);
    assert_eq!(r["status"], "BLOCKED");
    assert_eq!(r["kind"], "cardinality");
    assert!(r["reason"].as_str().expect("reason").contains("got 2 of 3"), "{r}");
    assert_eq!(dispatches(&s), 1);
}

#[test]
fn a_fan_out_with_an_empty_task_is_blocked_got_n_of_m() {
    let s = free_form_repo();
    let a = agent(
        &s,
        &format!(
            "{FREE_FORM_IMPLEMENTER}
if role == 'plan-extract' and tid == 'all':
    out({{'tasks': []}})
if role == 'plan-extract':
    out({{'id': tid, 'text': '' if tid == '2' else 'BODY-' + tid}})
"
        ),
    );
    let r = free_form(&s, &a, 1, &[]);
    assert_eq!(r["kind"], "cardinality", "{r}");
    assert!(r["reason"].as_str().expect("reason").contains("got 2 of 3"), "{r}");
    assert_eq!(role_count(&s, "implementer"), 0, "no task runs on a short extraction");
    assert_eq!(dispatches(&s), 5);
}

// ---------------------------------------------------------------- mini mode

fn mini(s: &Scenario, a: &str, suite: &str, code: i32) -> Value {
    s.run_json(
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
            a,
            "--test-cmd",
            suite,
            "--json",
        ],
        code,
    )
}

#[test]
fn mini_mode_reruns_the_red_test_and_the_suite() {
    let s = Scenario::new();
    let a = agent(&s, "if role == 'implementer':\n    write('fixed.txt', 'ok')\n    out(DONE)");
    let r = mini(&s, &a, "true", 0);
    assert_eq!(r["status"], "DONE", "{r}");
    assert_eq!(r["detail"]["red_before"]["green"], false);
    assert_eq!(r["detail"]["red_after"]["green"], true);
    assert_eq!(dispatches(&s), 1);
}

#[test]
fn mini_mode_blocks_a_still_red_test_a_regression_and_a_clean_tree() {
    for (body, suite, kind) in [
        ("if role == 'implementer':\n    write('other.txt', 'x')\n    out(DONE)", "true", "still-red"),
        (
            "if role == 'implementer':\n    write('fixed.txt', 'x')\n    write('broken.txt', 'x')\n    out(DONE)",
            "test ! -f broken.txt",
            "regression",
        ),
        ("", "true", "no-op"),
    ] {
        let s = Scenario::new();
        let a = agent(&s, body);
        let r = mini(&s, &a, suite, 1);
        assert_eq!(r["status"], "BLOCKED", "{kind}: {r}");
        assert_eq!(r["kind"], kind, "{r}");
        assert_eq!(r["route"], "debug");
        assert_eq!(dispatches(&s), 1);
    }
    // A RED test that is already green is refused before any dispatch.
    let s = Scenario::new();
    s.write("fixed.txt", "already");
    s.commit("green already");
    let a = agent(&s, "");
    let r = mini(&s, &a, "true", 1);
    assert_eq!(r["kind"], "red-test-not-red");
    assert_eq!(dispatches(&s), 0);
}

// ---------------------------------------------------------------- work edit (#7, #11)

fn edit(s: &Scenario, a: &str, extra: &[&str], code: i32) -> Value {
    let mut args = vec![
        "edit",
        "--iter-id",
        "e-1",
        "--description",
        "rename Foo to Bar",
        "--def-site",
        "src/lib.txt:1",
        "--agent",
        a,
        "--json",
    ];
    args.extend_from_slice(extra);
    s.run_json(&args, code)
}

fn edit_repo() -> Scenario {
    let s = Scenario::new();
    s.write("src/lib.txt", "struct Foo\n");
    s.commit("lib");
    s
}

#[test]
fn a_definition_site_only_edit_is_done_with_sites_zero() {
    let s = edit_repo();
    let a = agent(
        &s,
        "if role == 'editor':\n    write('src/lib.txt', 'struct Bar\\n')\n    out({'status': 'DONE', 'applied_changes': True, 'sites': 0, 'hole': None})",
    );
    let r = edit(&s, &a, &["--test-cmd", "grep -q Bar src/lib.txt"], 0);
    assert_eq!(r["status"], "DONE", "{r}");
    assert_eq!(r["detail"]["sites"], 0, "a legitimate sites: 0 stays 0, never null");
    assert_eq!(r["detail"]["working_tree_dirty"], true);
    assert_eq!(dispatches(&s), 1);
}

#[test]
fn a_no_op_edit_is_blocked_before_the_suite_whatever_the_agent_claims() {
    let s = edit_repo();
    let a = agent(&s, "");
    let r = edit(&s, &a, &["--test-cmd", "true"], 1);
    assert_eq!(r["kind"], "no-op-edit", "{r}");
    assert_eq!(r["suite_green"], Value::Null, "no suite run against an empty tree");
    assert!(concerns(&r).contains("applied_changes"));
    assert_eq!(r["artifacts"]["blocked_md"], Value::Null);
    assert_eq!(dispatches(&s), 1);
}

#[test]
fn a_hole_bounces_up_and_a_regression_bounces_to_debug() {
    let s = edit_repo();
    let a = agent(
        &s,
        "if role == 'editor':\n    write('src/lib.txt', 'struct Bar\\n')\n    out({'status': 'HOLE', 'applied_changes': True, 'sites': 3, 'hole': {'route': 'tdd', 'detail': 'a new variant needs behaviour'}})",
    );
    let r = edit(&s, &a, &["--test-cmd", "true"], 1);
    assert_eq!((r["kind"].clone(), r["route"].clone()), ("hole".into(), "tdd".into()), "{r}");
    let s = edit_repo();
    let a = agent(
        &s,
        "if role == 'editor':\n    write('src/lib.txt', 'struct Bar\\n')\n    out({'status': 'DONE', 'applied_changes': True, 'sites': 2, 'hole': None})",
    );
    let r = edit(&s, &a, &["--test-cmd", "grep -q Foo src/lib.txt"], 1);
    assert_eq!((r["kind"].clone(), r["route"].clone()), ("regression".into(), "debug".into()), "{r}");
    assert!(s.path(".work/iterations/e-1/BLOCKED.md").exists());
}

#[test]
fn a_red_build_is_propagated_then_checked_again() {
    let s = edit_repo();
    let a = agent(
        &s,
        r#"
if role == 'editor' and ctx['round'] == 0:
    write('src/lib.txt', 'struct Bar\n')
    out({'status': 'DONE', 'applied_changes': True, 'sites': 0, 'hole': None})
if role == 'editor':
    assert 'BUILD FAILS' in req['prompt']
    write('src/use.txt', 'Bar\n')
    out({'status': 'DONE', 'applied_changes': True, 'sites': 1, 'hole': None})
"#,
    );
    let r = edit(&s, &a, &["--test-cmd", "true", "--build-cmd", "test -f src/use.txt"], 0);
    assert_eq!(r["status"], "DONE", "{r}");
    assert_eq!(r["detail"]["sites"], 1);
    assert_eq!(dispatches(&s), 2);
}

#[test]
fn edit_carriers_are_guarded_too() {
    let s = edit_repo();
    let a = agent(&s, "");
    // Flags alone: a missing one is bad input naming the flag.
    let (code, out, err) = s.run(&["edit", "--description", "x", "--agent", &a, "--test-cmd", "true", "--json"]);
    assert_eq!(code, 2, "stdout: {out}\nstderr: {err}");
    assert!(out.is_empty(), "{out}");
    assert_one_line_error(&err);
    assert!(err.contains("--def-site"), "{err}");
    // A carrier missing the field keeps the carrier guard: BLOCKED, zero dispatches.
    let carrier = r#"{"mode": "edit", "iter_id": "e1", "edit_description": "x"}"#;
    let r = s.run_json(&["edit", "--carrier", carrier, "--agent", &a, "--test-cmd", "true", "--json"], 1);
    assert_eq!(r["kind"], "missing-field");
    assert!(r["reason"].as_str().expect("reason").contains("def_site"));
    let r = s.run_json(&["edit", "--carrier", "7", "--agent", &a, "--test-cmd", "true", "--json"], 1);
    assert_eq!(r["kind"], "bad-carrier");
    assert_eq!(dispatches(&s), 0);
}

// ---------------------------------------------------------------- review fixes

#[test]
fn a_minimal_quality_verdict_is_read_once_and_another_name_is_malformed() {
    // The case and blanks of a status word are folded (docs/protocol.md): ` Approved ` is the word.
    for answer in [
        "{'verdict': 'approved', 'files_read': READ}",
        "{'verdict': 'approved', 'issues': [], 'files_read': READ}",
        "{'verdict': ' Approved ', 'files_read': READ}",
    ] {
        let s = repo_with_plan(&[("1", "Add greeting", "Create hello.txt.")]);
        let a = agent(
            &s,
            &format!(
                "if role == 'implementer':\n    write('hello.txt', 'hi\\n')\n    out(DONE)\nif role == 'quality-reviewer':\n    out({answer})"
            ),
        );
        let r = implement(&s, &a, "test -f hello.txt", &[], 0);
        assert_eq!(r["status"], "DONE", "{answer}: {r}");
        assert_eq!(dispatches(&s), 3, "{answer}: nothing was retried");
    }
    // `status` is not the quality reviewer's field, nor is a synonym of its verdict a verdict:
    // the answer is malformed (retried once, then dropped), never read as approval.
    for answer in ["{'status': 'approved'}", "{'verdict': 'lgtm'}"] {
        let s = repo_with_plan(&[("1", "Add greeting", "Create hello.txt.")]);
        let a = agent(
            &s,
            &format!(
                "if role == 'implementer':\n    write('hello.txt', 'hi\\n')\n    out(DONE)\nif role == 'quality-reviewer':\n    out({answer})"
            ),
        );
        let r = implement(&s, &a, "test -f hello.txt", &[], 1);
        assert_ne!(r["status"], "DONE", "{answer}: {r}");
        assert_eq!(dispatches(&s), 4, "{answer}: impl, spec, quality twice");
    }
}

#[test]
fn an_important_finding_gets_a_repair_and_a_minor_one_rides_the_valve() {
    let s = repo_with_plan(&[("1", "Add greeting", "Create hello.txt.")]);
    let a = agent(
        &s,
        r#"
if role == 'implementer':
    write('hello.txt', 'v%d\n' % n_role)
    out(DONE)
if role == 'quality-reviewer' and n_role == 1:
    out({'verdict': 'changes_requested', 'issues': [{'severity': 'important', 'text': 'a real bug'}]})
if role == 'quality-reviewer':
    out({'verdict': 'changes_requested', 'issues': [{'severity': 'minor', 'text': 'stale comment'}]})
"#,
    );
    let r = implement(&s, &a, "true", &[], 0);
    assert_eq!(r["status"], "DONE", "{r}");
    assert_eq!(r["tasks"][0]["repairs"], 1, "the important finding got a repair");
    assert!(concerns(&r).contains("[minor] stale comment"), "the minor finding rode the valve: {r}");
    assert_eq!(dispatches(&s), 6, "impl, spec, q, repair, spec, q(minor) ⇒ valve");
}

#[test]
fn an_edit_agent_reports_its_applied_changes() {
    let s = edit_repo();
    let a = agent(
        &s,
        "if role == 'editor':\n    write('src/lib.txt', 'struct Bar\\n')\n    out({'status': 'DONE', 'applied_changes': True, 'sites': 0})",
    );
    let r = edit(&s, &a, &["--test-cmd", "grep -q Bar src/lib.txt"], 0);
    assert_eq!(r["status"], "DONE", "{r}");
    assert_eq!(r["detail"]["applied_changes"], true);
    assert!(!concerns(&r).contains("applied_changes"), "{r}");
    assert_eq!(dispatches(&s), 1);
}

fn artifacts_written(s: &Scenario, r: &Value, iter: &str) {
    let md = s.read(&format!(".work/iterations/{iter}/BLOCKED.md"));
    assert_eq!(r["artifacts"]["blocked_md"], md.as_str(), "{r}");
    let stats = s.read_json(&format!(".work/iterations/{iter}/stats.json"));
    assert_eq!(stats["status"], r["status"]);
    assert_eq!(stats["kind"], r["kind"]);
    assert_eq!(r["artifacts"]["stats_json"].as_str().map(|t| serde_json::from_str::<Value>(t).is_ok()), Some(true));
}

#[test]
fn blocked_runs_write_their_artifacts_even_on_a_clean_tree() {
    // spec-ambiguous, the implementer touching nothing.
    let s = repo_with_plan(&[("1", "Exit code", "Exit 1 on bad input. Also exit 2 on bad input.")]);
    let a = agent(&s, "if role == 'spec-reviewer':\n    out({'status': 'unclear', 'ambiguity': 'exit 1 and exit 2'})");
    let r = implement(&s, &a, "true", &[], 1);
    assert_eq!((r["kind"].clone(), r["files_touched"].clone()), ("spec-ambiguous".into(), 0.into()), "{r}");
    artifacts_written(&s, &r, "it-1");

    // The implementer reports BLOCKED at once.
    let s = repo_with_plan(&[("1", "A", "Create a.txt.")]);
    let a = agent(&s, "if role == 'implementer':\n    out({'status': 'BLOCKED', 'reason': 'needs a database'})");
    let r = implement(&s, &a, "true", &[], 1);
    assert_eq!(r["kind"], "implementer-blocked", "{r}");
    artifacts_written(&s, &r, "it-1");
    assert_eq!(dispatches(&s), 1);

    // "got N of M".
    let s = free_form_repo();
    let a = agent(&s, FREE_FORM_IMPLEMENTER);
    let r = free_form(&s, &a, 1, &[("WORK_TEST_SHORT_INDEX", "1")]);
    assert_eq!(r["kind"], "cardinality", "{r}");
    artifacts_written(&s, &r, "ff");

    // A RED test that is not red.
    let s = Scenario::new();
    s.write("fixed.txt", "already");
    s.commit("green already");
    let a = agent(&s, "");
    let r = mini(&s, &a, "true", 1);
    assert_eq!(r["kind"], "red-test-not-red", "{r}");
    artifacts_written(&s, &r, "m-1");
}

/// A commit on top of the base is the implementer's change (the one rule for HEAD,
/// `head_rule.rs`): the reviewers are shown it, measured from the base, and it counts as
/// touched. A reviewer that was not shown the committed file rejects the task. Confined, the
/// commit lands in the dispatch's private git directory: the same change, left in the tree.
#[test]
fn an_implementers_commit_is_shown_to_the_reviewers_and_counted() {
    let s = repo_with_plan(&[("1", "Edit shared", "Append to shared.txt and add committed.txt.")]);
    let a = agent(
        &s,
        r#"
if role == 'implementer':
    write('committed.txt', 'shown to the reviewers\n')
    sh('git add committed.txt && git commit -qm "commit it"')
    write('shared.txt', 'base\nmore\n')
    out(DONE)
if role == 'spec-reviewer' and 'committed.txt' not in READ:
    out({'status': 'issues', 'issues': [{'severity': 'critical', 'description': 'committed.txt hidden'}]})
"#,
    );
    let head = s.git(&["rev-parse", "HEAD"]).trim().to_string();
    let r = implement(&s, &a, "true", &[], 0);
    assert_eq!(r["status"], "DONE", "{r}");
    assert_eq!(r["files_touched"], 2, "{r}");
    if crate::support::suite_confines() {
        assert_eq!(s.git(&["rev-parse", "HEAD"]).trim(), head, "the user's branch did not move");
        assert_eq!(s.read("committed.txt"), "shown to the reviewers\n", "the change is in the tree");
    } else {
        assert_eq!(s.git(&["rev-parse", "HEAD~1"]).trim(), head, "the implementer's commit, on the base");
    }
}

#[test]
fn mini_mode_measures_the_tree_without_the_engines_own_test_byproducts() {
    let run = |s: &Scenario, a: &str, code: i32| {
        s.run_json(
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
                "mkdir -p .cache && echo run >> .cache/log && test -f {test}",
                "--agent",
                a,
                "--test-cmd",
                "mkdir -p .cache && echo suite >> .cache/log",
                "--json",
            ],
            code,
        )
    };
    let s = Scenario::new();
    let a = agent(&s, "");
    let r = run(&s, &a, 1);
    assert_eq!(r["kind"], "no-op", "a do-nothing fix is a no-op, whatever the RED run left: {r}");
    assert_eq!(r["files_touched"], 0);
    assert_eq!(r["tasks"][0]["status"], "BLOCKED", "{r}");
    assert_eq!(r["artifacts"]["blocked_md"], Value::Null);

    let s = Scenario::new();
    let a = agent(&s, "if role == 'implementer':\n    write('fixed.txt', 'ok')\n    out(DONE)");
    let r = run(&s, &a, 0);
    assert_eq!(r["status"], "DONE", "{r}");
    assert_eq!(r["files_touched"], 1, "{r}");
    assert_eq!(r["files"], serde_json::json!(["?? fixed.txt"]));
    assert_eq!(r["tasks"][0]["status"], "DONE");
}

#[test]
fn a_quality_repair_that_drifts_off_the_task_goes_back_to_the_spec_reviewer() {
    let s = repo_with_plan(&[("1", "Add greeting", "Create hello.txt saying exactly `hi`.")]);
    let a = agent(
        &s,
        r#"
if role == 'implementer' and phase == 'implement':
    write('hello.txt', 'hi\n')
    out(DONE)
if role == 'implementer' and phase == 'quality-repair':
    write('hello.txt', 'hello there\n')
    out(DONE)
if role == 'implementer' and phase == 'spec-repair':
    out({'status': 'DONE', 'summary': 'the quality reviewer wanted it', 'applied_changes': False})
if role == 'spec-reviewer':
    ok = open('hello.txt').read() == 'hi\n'
    out({'status': 'compliant' if ok else 'non_compliant', 'issues': [] if ok else ['hello.txt must say hi']})
if role == 'quality-reviewer' and n_role == 1:
    out({'verdict': 'changes_requested', 'issues': [{'severity': 'important', 'text': 'hi is too terse'}]})
"#,
    );
    let r = implement(&s, &a, "true", &[], 1);
    assert_eq!(r["status"], "BLOCKED", "{r}");
    assert_eq!(r["kind"], "spec-unresolved", "{r}");
    assert!(r["reason"].as_str().expect("reason").contains("after quality repair 1"), "{r}");
    assert_eq!(dispatches(&s), 6, "impl, spec, q, quality repair, spec(non-compliant), spec repair (no-op)");
}

#[test]
fn agent_text_with_template_slots_does_not_corrupt_the_artifacts() {
    let s = repo_with_plan(&[("1", "A", "Create a.txt.")]);
    let a = agent(
        &s,
        r#"
if role == 'implementer':
    write('a.txt', 'a')
    out({'status': 'BLOCKED', 'reason': 'cannot {{STATS}} finish {{DATE}} {{FILES_TOUCHED}} {{TASKS}}'})
"#,
    );
    let r = implement(&s, &a, "true", &[], 1);
    assert_eq!(r["kind"], "implementer-blocked", "{r}");
    let stats = s.read_json(".work/iterations/it-1/stats.json");
    assert!(
        stats["reason"]
            .as_str()
            .expect("reason")
            .contains("cannot {{STATS}} finish {{DATE}} {{FILES_TOUCHED}} {{TASKS}}")
    );
    assert_eq!(stats["files_touched"], 1);
    let md = s.read(".work/iterations/it-1/BLOCKED.md");
    assert!(md.contains("cannot {{STATS}} finish {{DATE}} {{FILES_TOUCHED}} {{TASKS}}"), "{md}");
    assert!(md.contains("- Date: 2026-01-01"), "{md}");
}

#[test]
fn an_uncommitted_plan_file_does_not_make_the_tree_dirty() {
    let s = Scenario::new();
    s.write("shared.txt", "base\n");
    s.commit("base");
    s.write("docs/plan.md", "# Plan\n\n## Task 1: Add greeting\n\nCreate hello.txt.\n");
    let run = |a: &str, code: i32| {
        s.run_json(
            &["implement", "--plan", "docs/plan.md", "--iter-id", "p-1", "--agent", a, "--test-cmd", "true", "--json"],
            code,
        )
    };
    let a = agent(&s, "");
    let r = run(&a, 1);
    assert_eq!(r["kind"], "no-op", "the plan does not count as touched: {r}");
    assert_eq!(r["preflight"]["excluded_paths"], serde_json::json!(["docs/plan.md"]));
    assert!(concerns(&r).contains("the plan `docs/plan.md` is uncommitted"), "{r}");

    let a = agent(&s, "if role == 'implementer':\n    write('hello.txt', 'hi\\n')\n    out(DONE)");
    let r = run(&a, 0);
    assert_eq!(r["status"], "DONE", "{r}");
    assert_eq!(r["files"], serde_json::json!(["?? hello.txt"]));
    // Any other stray path still blocks.
    std::fs::remove_file(s.path("hello.txt")).expect("rm");
    s.write("stray.txt", "x");
    let r = run(&a, 1);
    assert_eq!(r["kind"], "dirty-tree", "{r}");
    assert_eq!(r["preflight"]["dirty_paths"], serde_json::json!(["stray.txt"]));
}

#[test]
fn without_any_test_command_the_run_is_refused_before_any_dispatch() {
    // No suite to run: DONE could never be reached, so the run is refused before it pays
    // for any dispatch (exit 2, one line naming where a test command comes from).
    let s = repo_with_plan(&[("1", "A", "Create a.txt.")]);
    let a = agent(&s, "if role == 'implementer':\n    write('a.txt', 'a\\n')\n    out(DONE)");
    let (code, out, err) = s.run(&["implement", "--plan", "PLAN.md", "--iter-id", "i", "--agent", &a, "--json"]);
    assert_eq!(code, 2, "stdout: {out}\nstderr: {err}");
    assert!(out.is_empty(), "{out}");
    assert_one_line_error(&err);
    assert!(err.contains("--test-cmd") && err.contains("[gates].test"), "{err}");
    assert_eq!(dispatches(&s), 0);
    // A repository's own build file names its suite.
    let s = repo_with_plan(&[("1", "A", "Create a.txt.")]);
    s.write("Makefile", "test:\n\ttest -f a.txt\n");
    s.commit("make");
    let a = agent(&s, "if role == 'implementer':\n    write('a.txt', 'a\\n')\n    out(DONE)");
    let r = s.run_json(&["implement", "--plan", "PLAN.md", "--iter-id", "i", "--agent", &a, "--json"], 0);
    assert_eq!(r["status"], "DONE", "{r}");
}

#[test]
fn a_dispatch_budget_stops_implement_blocked_budget_naming_what_was_not_done() {
    let s = repo_with_plan(&[("1", "First", "Do one."), ("2", "Second", "Do two.")]);
    let a = agent(&s, "if role == 'implementer':\n    write('t%s.txt' % tid, 'x\\n')\n    out(DONE)");
    let r = implement(&s, &a, "true", &["--budget-dispatches", "3"], 1);
    assert_eq!(r["status"], "BLOCKED", "{r}");
    assert_eq!(r["kind"], "budget", "{r}");
    // Task 1: implementer, spec review, quality review; task 2's implementer was refused.
    assert_eq!(dispatches(&s), 3, "exactly the allowed dispatches");
    assert_eq!(r["stats"]["dispatches"], 3);
    assert_eq!(r["tasks"][0]["status"], "DONE");
    assert_eq!(r["tasks"][1]["kind"], "budget", "not the agent's failure: {r}");
    assert_eq!(r["tasks"][1]["spent"]["dispatches"], 0, "a refused dispatch is not counted");
    let reason = r["reason"].as_str().expect("reason");
    assert!(reason.contains("the dispatches budget (3) is spent"), "{reason}");
    assert!(reason.contains("implementer dispatch for task 2"), "{reason}");
    assert!(reason.contains("task 2") && reason.contains("the end-verify suite run"), "{reason}");
    assert_eq!(r["blocked_detail"]["kind"], "budget");
    assert!(r["suite"].is_null(), "no suite run after a budget stop");
    // The same command with a larger budget goes on from task 2, as the summary says.
    let r = implement(&s, &a, "true", &["--budget-dispatches", "20"], 0);
    assert_eq!(r["status"], "DONE", "{r}");
    assert_eq!(dispatches(&s), 3 + 3, "task 2 alone (implementer, spec and quality reviews): {r}");
    assert_eq!(r["stats"]["dispatches"], 6, "the whole iteration is counted: {r}");
}

#[test]
fn a_token_budget_stops_edit_blocked_budget() {
    let s = edit_repo();
    let a = agent(
        &s,
        "if role == 'editor':\n    write('src/lib.txt', 'struct Bar\\n')\n    out({'status': 'DONE', 'applied_changes': True, 'sites': 1, 'hole': None})",
    );
    // Each dispatch reports 110 tokens: the first edit spends the budget, the propagation
    // round the red build asks for is refused.
    let r = edit(&s, &a, &["--test-cmd", "true", "--build-cmd", "false", "--budget-tokens", "50"], 1);
    assert_eq!(r["status"], "BLOCKED", "{r}");
    assert_eq!(r["kind"], "budget", "{r}");
    assert_eq!(dispatches(&s), 1);
    let reason = r["reason"].as_str().expect("reason");
    assert!(reason.contains("the tokens budget (50) is spent") && reason.contains("editor dispatch"), "{reason}");
    assert_eq!(r["tasks"][0]["kind"], "budget");
}

#[test]
fn budget_flags_are_checked_before_anything_runs() {
    let s = repo_with_plan(&[("1", "First", "Do one.")]);
    let a = agent(&s, "");
    for (cmd, flag, value) in [
        ("implement", "--budget-dispatches", "0"),
        ("implement", "--budget-usd", "-1"),
        ("edit", "--budget-tokens", "0"),
    ] {
        let mut args = vec![cmd, "--iter-id", "b-1", "--agent", &a, flag, value];
        if cmd == "implement" {
            args.extend_from_slice(&["--plan", "PLAN.md"]);
        } else {
            args.extend_from_slice(&["--description", "x", "--def-site", "PLAN.md:1"]);
        }
        let (code, _, err) = s.run(&args);
        assert_eq!(code, 2, "{cmd} {flag} {value}: {err}");
        assert_one_line_error(&err);
        assert_eq!(dispatches(&s), 0);
    }
}

// ---------------------------------------------------------------- the check surface

/// A repository with a committed suite script and a committed test it runs.
fn repo_with_suite() -> Scenario {
    let s = repo_with_plan(&[("1", "Add greeting", "Create hello.txt and a test for it.")]);
    s.write("run_tests.sh", "for t in tests/*.sh; do sh \"$t\" || exit 1; done\n");
    s.write("tests/test_base.sh", "grep -q base shared.txt\n");
    s.commit("suite");
    s
}

#[test]
fn an_implementer_that_weakens_the_suite_is_blocked_and_its_honest_twin_is_not() {
    let unconfined = fallback_only(refused::FROZEN);
    // Rewriting the suite script to pass.
    let s = repo_with_suite();
    let a = agent(
        &s,
        "if role == 'implementer':\n    write('hello.txt', 'hi\\n')\n    write('run_tests.sh', 'exit 0\\n')\n    out(DONE)",
    );
    let r = implement(&s, &a, "sh run_tests.sh", &[], 1);
    assert_eq!(r["status"], "BLOCKED", "{r}");
    assert_eq!(r["kind"], "check-tampered", "{r}");
    assert!(r["reason"].as_str().is_some_and(|x| x.contains("run_tests.sh")), "{r}");

    drop(unconfined);
    // Deleting a test the suite runs.
    let s = repo_with_suite();
    let a = agent(
        &s,
        "if role == 'implementer':\n    write('hello.txt', 'hi\\n')\n    os.remove('tests/test_base.sh')\n    out(DONE)",
    );
    let r = implement(&s, &a, "sh run_tests.sh", &[], 1);
    assert_eq!(r["kind"], "check-tampered", "{r}");
    assert!(r["reason"].as_str().is_some_and(|x| x.contains("tests/test_base.sh")), "{r}");

    // The honest twin writes the code and adds a test: DONE.
    let s = repo_with_suite();
    let a = agent(
        &s,
        "if role == 'implementer':\n    write('hello.txt', 'hi\\n')\n    write('tests/test_hello.sh', 'test -f hello.txt\\n')\n    out(DONE)",
    );
    let r = implement(&s, &a, "sh run_tests.sh", &[], 0);
    assert_eq!(r["status"], "DONE", "{r}");
}

// ---------------------------------------------------------------- ground truth past the index

/// An implementer that does the task and runs `hide` (Python) is BLOCKED `git-tampered`
/// naming `named`, before any reviewer reads a diff git was told to hide.
fn hidden_from_git_is_blocked(hide: &str, named: &str) {
    let s = repo_with_plan(&[("1", "Add greeting", "Create hello.txt.")]);
    let a =
        agent(&s, &format!("if role == 'implementer':\n    write('hello.txt', 'hi\\n')\n    {hide}\n    out(DONE)"));
    let r = implement(&s, &a, "test -f hello.txt", &[], 1);
    assert_eq!(r["status"], "BLOCKED", "{hide}: {r}");
    assert_eq!(r["kind"], "git-tampered", "{hide}: {r}");
    assert!(r["reason"].as_str().is_some_and(|x| x.contains(named)), "{named}: {r}");
    assert_eq!(role_count(&s, "spec-reviewer"), 0, "no reviewer reads a diff git was told to hide: {r}");
}

#[test]
fn an_implementer_that_hides_a_change_from_git_is_blocked_and_its_honest_twin_is_not() {
    // Each liar does the task and hides a second change from `git status` / `git diff` with
    // plumbing: the run stops before a reviewer reads a diff that does not show it. All but the
    // `.gitattributes` (a file of the tree) write `.git`, which the sandbox makes a private copy (the lie never reaches the user's git).
    let unconfined = fallback_only(refused::GIT);
    for (hide, named) in [
        (
            "write('shared.txt', 'base\\nbackdoor\\n')\n    sh('git update-index --assume-unchanged shared.txt')",
            "assume-unchanged set on `shared.txt`",
        ),
        (
            "write('shared.txt', 'base\\nbackdoor\\n')\n    sh('git update-index --skip-worktree shared.txt')",
            "skip-worktree set on `shared.txt`",
        ),
        (
            "write('backdoor.txt', 'x\\n')\n    open('.git/info/exclude', 'a').write('backdoor.txt\\n')",
            "info/exclude changed",
        ),
        ("sh('git config diff.hide.textconv true')", "git config `diff.hide.textconv` set"),
        ("write('.git/hooks/pre-commit', 'exit 0\\n')", "hook pre-commit created"),
    ] {
        hidden_from_git_is_blocked(hide, named);
    }
    drop(unconfined);
    hidden_from_git_is_blocked("write('.gitattributes', '*.txt -diff\\n')", ".gitattributes .gitattributes created");
    // The honest twin does the same work without touching git's view.
    let s = repo_with_plan(&[("1", "Add greeting", "Create hello.txt.")]);
    let a = agent(
        &s,
        "if role == 'implementer':\n    write('hello.txt', 'hi\\n')\n    write('shared.txt', 'base\\nmore\\n')\n    out(DONE)",
    );
    let r = implement(&s, &a, "test -f hello.txt", &[], 0);
    assert_eq!(r["status"], "DONE", "{r}");
}

#[test]
fn mini_mode_an_implementer_that_hides_its_test_edit_from_git_is_blocked_and_its_honest_twin_is_not() {
    let run = |body: &str, code: i32| {
        let s = Scenario::new();
        s.write("tests/test_fixed.sh", "test -f fixed.txt\n");
        s.commit("red test");
        let a = agent(&s, body);
        s.run_json(
            &[
                "implement",
                "--mini",
                "--iter-id",
                "m-1",
                "--red-test",
                "tests/test_fixed.sh",
                "--cause",
                "missing",
                "--red-test-cmd",
                "sh {test}",
                "--agent",
                &a,
                "--test-cmd",
                "sh tests/test_fixed.sh",
                "--json",
            ],
            code,
        )
    };
    let unconfined = fallback_only(refused::GIT);
    let r = run(
        "if role == 'implementer':\n    write('fixed.txt', 'ok')\n    sh('git update-index --skip-worktree tests/test_fixed.sh')\n    out(DONE)",
        1,
    );
    assert_eq!(r["kind"], "git-tampered", "{r}");
    drop(unconfined);
    let r = run("if role == 'implementer':\n    write('fixed.txt', 'ok')\n    out(DONE)", 0);
    assert_eq!(r["status"], "DONE", "{r}");
}

#[test]
fn reviewers_read_the_tasks_own_diff_and_a_summary_of_earlier_tasks() {
    let s = repo_with_plan(&[("1", "Add a", "Create a.txt."), ("2", "Add b", "Depends on: 1\nCreate b.txt.")]);
    let a = agent(
        &s,
        r#"if role == 'implementer' and tid == '1':
    write('a.txt', 'alpha line\n')
    out(DONE)
if role == 'implementer' and tid == '2':
    write('b.txt', 'beta line\n')
    out(DONE)
if role == 'spec-reviewer' and tid == '2':
    p = req['prompt']
    ok = '+beta line' in p and 'a.txt (+1 -0)' in p and 'alpha line' not in p
    out({'status': 'compliant' if ok else 'non_compliant', 'issues': [] if ok else ['saw: ' + p[-400:]]})
"#,
    );
    let r = implement(&s, &a, "test -f a.txt && test -f b.txt", &[], 0);
    assert_eq!(r["status"], "DONE", "{r}");
    assert_eq!(dispatches(&s), 6, "no repair: task 2's reviewer read its own diff only: {r}");
}

#[test]
fn a_later_task_that_stashes_an_earlier_tasks_untracked_file_is_blocked_liar() {
    let _unconfined = fallback_only(refused::GIT);
    let s = repo_with_plan(&[("1", "Add a", "Create a.txt."), ("2", "Add b", "Depends on: 1\nCreate b.txt.")]);
    let a = agent(
        &s,
        r#"if role == 'implementer' and tid == '1':
    write('a.txt', 'task one\n')
    out(DONE)
if role == 'implementer' and tid == '2':
    sh('git stash push -q -u')
    write('b.txt', 'b\n')
    out(DONE)
"#,
    );
    let r = implement(&s, &a, "true", &[], 1);
    assert_eq!(r["kind"], "snapshot-loss", "{r}");
    let d = &r["blocked_detail"];
    assert_eq!(d["lost_paths"], serde_json::json!(["a.txt"]), "{r}");
    let sha = d["snapshot_sha"].as_str().expect("sha");
    assert_eq!(
        s.git(&["show", &format!("{sha}:a.txt")]),
        "task one\n",
        "the whole-tree snapshot holds untracked files"
    );
}

#[test]
fn a_later_task_that_reverts_and_re_edits_a_file_loses_lines_liar_and_honest_twin() {
    let plan = [
        ("1", "Edit shared", "Append a line to shared.txt."),
        ("2", "Edit shared again", "Depends on: 1\nAppend another line to shared.txt."),
    ];
    // The liar reverts the file (from git's objects, as `git checkout --` does) and re-edits it: the path stays modified,
    // task one's line is gone.
    let s = repo_with_plan(&plan);
    let a = agent(
        &s,
        r#"if role == 'implementer' and tid == '1':
    write('shared.txt', 'base\ntask one\n')
    out(DONE)
if role == 'implementer' and tid == '2':
    sh('git show HEAD:shared.txt > shared.txt')
    open('shared.txt', 'a').write('task two\n')
    out(DONE)
"#,
    );
    let r = implement(&s, &a, "true", &[], 1);
    assert_eq!(r["status"], "BLOCKED", "{r}");
    assert_eq!(r["kind"], "snapshot-loss", "{r}");
    let d = &r["blocked_detail"];
    assert_eq!(d["lost_lines"], serde_json::json!([{"path": "shared.txt", "lines": ["task one"]}]), "{r}");
    let reason = r["reason"].as_str().unwrap_or_default();
    let sha = d["snapshot_sha"].as_str().expect("sha");
    assert!(
        reason.contains("`task one`") && reason.contains(sha) && reason.contains("adjudicate against the snapshot"),
        "{r}"
    );
    assert_eq!(s.git(&["show", &format!("{sha}:shared.txt")]), "base\ntask one\n");

    // The honest twin keeps task one's line.
    let s = repo_with_plan(&plan);
    let a = agent(
        &s,
        r#"if role == 'implementer' and tid == '1':
    write('shared.txt', 'base\ntask one\n')
    out(DONE)
if role == 'implementer' and tid == '2':
    open('shared.txt', 'a').write('task two\n')
    out(DONE)
"#,
    );
    let r = implement(&s, &a, "true", &[], 0);
    assert_eq!(r["status"], "DONE", "{r}");

    // A line the later task's text names is planned: replacing it is no loss.
    let s = repo_with_plan(&[
        ("1", "Edit shared", "Append a line to shared.txt."),
        ("2", "Reword", "Depends on: 1\nReplace the line `task one` in shared.txt with `task 1`."),
    ]);
    let a = agent(
        &s,
        r#"if role == 'implementer' and tid == '1':
    write('shared.txt', 'base\ntask one\n')
    out(DONE)
if role == 'implementer' and tid == '2':
    write('shared.txt', 'base\ntask 1\n')
    out(DONE)
"#,
    );
    let r = implement(&s, &a, "true", &[], 0);
    assert_eq!(r["status"], "DONE", "{r}");
}

#[test]
fn an_implementer_that_only_runs_the_suite_is_a_no_op_and_its_honest_twin_is_not() {
    // The suite leaves a log behind; the engine learns that from its own baseline run.
    let suite = "mkdir -p .cache/suite && echo run >> .cache/suite/log && grep -q base shared.txt";
    let s = repo_with_plan(&[("1", "Add greeting", "Create hello.txt.")]);
    let a = agent(&s, &format!("if role == 'implementer':\n    sh({suite:?})\n    out(DONE)"));
    let r = implement(&s, &a, suite, &[], 1);
    assert_eq!(r["status"], "BLOCKED", "{r}");
    assert_eq!(r["kind"], "no-op", "the suite's residue is not work: {r}");
    assert_eq!(r["files_touched"], 0, "{r}");

    let s = repo_with_plan(&[("1", "Add greeting", "Create hello.txt.")]);
    let a = agent(
        &s,
        &format!("if role == 'implementer':\n    write('hello.txt', 'hi\\n')\n    sh({suite:?})\n    out(DONE)"),
    );
    let r = implement(&s, &a, suite, &[], 0);
    assert_eq!(r["status"], "DONE", "{r}");
    assert_eq!(r["files"], serde_json::json!(["?? hello.txt"]), "{r}");
}
