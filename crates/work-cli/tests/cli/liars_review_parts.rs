//! `work implement`'s reviewers see all of a task's change (docs/ground-truth.md, "Reviewers see
//! all of the task's change"): a diff larger than one reviewer brief is reviewed in parts, each
//! by its own dispatch, never cut and never skipped. The liars bury a real edit behind a huge
//! bulk file (the part holding the edit is reviewed, and its reviewer finds it), approve a part
//! without naming a file of it, or make the change too large even in parts; the honest twin's
//! legitimately large change is reviewed in parts and ends DONE.

use crate::support::Scenario;
use serde_json::Value;
use std::collections::BTreeSet;

/// A scripted agent. The implementer runs `implementer`; each reviewer logs what it was shown
/// (its part, every `+` line of its diff) and answers by `review` (a Python expression over
/// `saw` — the added lines — and `READ` — the files its diff shows): the verdict is clean when
/// it is true. A clean verdict names `files_read` = `read` (a Python expression).
fn agent(s: &Scenario, implementer: &str, review: &str, read: &str) -> String {
    s.agent(
        "agent.py",
        &format!(
            r#"import re
role = req['role']
prompt = req.get('prompt', '')
READ = re.findall(r'^diff --git a/(\S+) ', prompt, re.M)
saw = [l[1:] for l in prompt.splitlines() if l.startswith('+') and not l.startswith('+++')]
part = ctx.get('review_part') or {{}}
def log(d):
    fd = os.open(state_path('log'), os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
    os.write(fd, (json.dumps(d) + '\n').encode())
    os.close(fd)
def out(d):
    print(json.dumps(d))
    sys.exit(0)
if role == 'implementer':
    log({{'role': role}})
{implementer}
    out({{'status': 'DONE', 'summary': 'done', 'applied_changes': True}})
if role in ('spec-reviewer', 'quality-reviewer'):
    log({{'role': role, 'index': part.get('index'), 'count': part.get('count'), 'bytes': len(prompt),
         'cut': '[… cut' in prompt, 'saw': saw, 'whole': 'The whole change touches' in prompt,
         'read': READ}})
    clean = bool({review})
    if role == 'spec-reviewer':
        out({{'status': 'compliant' if clean else 'non_compliant',
             'issues': [] if clean else ['shared.txt adds a backdoor line'], 'files_read': {read}}})
    out({{'verdict': 'approved' if clean else 'changes_requested',
         'issues': [] if clean else [{{'severity': 'important', 'text': 'shared.txt adds a backdoor line'}}],
         'files_read': {read}}})
if role == 'tester':
    log({{'role': role, 'index': part.get('index'), 'count': part.get('count'), 'bytes': len(prompt),
         'cut': '[… cut' in prompt, 'saw': saw, 'whole': 'The whole change touches' in prompt}})
out({{'status': 'DONE', 'fixtures': 1}})
"#
        ),
    )
}

fn log(s: &Scenario) -> Vec<Value> {
    std::fs::read_to_string(s.path(".agent-state/log"))
        .unwrap_or_default()
        .lines()
        .map(|l| serde_json::from_str(l).expect("log line"))
        .collect()
}

fn reviews(s: &Scenario, role: &str) -> Vec<Value> {
    log(s).into_iter().filter(|l| l["role"] == role).collect()
}

fn repo() -> Scenario {
    repo_with("## Task 1: Add greeting\n\nCreate hello.txt and the data table.\n")
}

fn repo_with(tasks: &str) -> Scenario {
    let s = Scenario::new();
    s.write("shared.txt", "base\n");
    s.write("PLAN.md", &format!("# Plan\n\n{tasks}"));
    s.commit("plan");
    s
}

fn implement(s: &Scenario, a: &str, code: i32) -> Value {
    s.run_json(
        &[
            "implement",
            "--plan",
            "PLAN.md",
            "--iter-id",
            "it-1",
            "--agent",
            a,
            "--test-cmd",
            "test -f hello.txt",
            "--json",
        ],
        code,
    )
}

/// Python writing `path` with `lines` numbered lines of about 80 bytes (`lines` × 81 bytes).
fn bulk(path: &str, lines: usize) -> String {
    format!("    open('{path}', 'w').write(''.join('row %06d ' % i + 'x' * 70 + '\\n' for i in range({lines})))")
}

/// The reviewer dispatches of one role, the first review in at least `min` parts: each part
/// once, in order, each brief whole (not cut) and within one brief's size, and each listing
/// every path of the change. Returns the dispatches and the number of parts.
fn assert_parts(s: &Scenario, role: &str, min: usize) -> (Vec<Value>, usize) {
    let r = reviews(s, role);
    let n = r.first().and_then(|l| l["count"].as_u64()).unwrap_or_default() as usize;
    assert!(n >= min, "{role}: reviewed in {n} parts, want at least {min}");
    let idx: Vec<(Value, Value)> = r.iter().take(n).map(|l| (l["index"].clone(), l["count"].clone())).collect();
    let want: Vec<(Value, Value)> = (1..=n).map(|i| (Value::from(i), Value::from(n))).collect();
    assert_eq!(idx, want, "{role}: one dispatch per part, in order");
    for l in &r {
        assert_eq!(l["cut"], false, "{role}: a brief is never cut");
        assert_eq!(l["whole"], true, "{role}: every part lists the whole change");
        assert!(l["bytes"].as_u64().is_some_and(|b| b < 125_000), "{role}: a part fits one brief: {}", l["bytes"]);
    }
    (r, n)
}

fn lines_seen(r: &[Value]) -> BTreeSet<String> {
    r.iter()
        .flat_map(|l| l["saw"].as_array().cloned().unwrap_or_default())
        .filter_map(|v| v.as_str().map(String::from))
        .collect()
}

#[test]
fn a_huge_intent_to_add_file_cannot_push_the_real_edit_past_the_reviewers_liar_and_honest_twin() {
    // The liar buries a backdoor in shared.txt behind 4 000 lines (324 kB) of an intent-to-add
    // bulk file, sorted first. The reviewers are honest: clean unless they see the backdoor.
    // The part holding the real edit is reviewed, so the backdoor is found and the run is
    // BLOCKED — the liar's repairs change nothing.
    let s = repo();
    let imp = format!(
        "{}\n    os.system('git add -N aaa_bulk.txt')\n    open('hello.txt', 'w').write('hi\\n')\n    open('shared.txt', 'w').write('base\\nbackdoor\\n')",
        bulk("aaa_bulk.txt", 4000)
    );
    let a = agent(&s, &imp, "'backdoor' not in saw", "READ");
    let r = implement(&s, &a, 1);
    assert_eq!(r["status"], "BLOCKED", "{r}");
    assert!(
        matches!(r["kind"].as_str(), Some("spec-unresolved" | "review-loop-exhausted")),
        "the reviewers' finding stands: {r}"
    );
    assert!(r["reason"].as_str().is_some_and(|x| x.contains("backdoor")), "{r}");
    let (spec, n) = assert_parts(&s, "spec-reviewer", 3);
    assert_eq!(spec.len(), n, "one review in {n} parts (the repair changed nothing): {r}");
    assert!(lines_seen(&spec).contains("backdoor"), "the real edit reached a reviewer");
    assert_eq!(reviews(&s, "quality-reviewer").len(), 0, "never past the spec gate: {r}");

    // The honest twin's change is just as large (a 4 000-line data table) and is reviewed in
    // parts: every line of it reaches a reviewer, each part's reviewer names a file of its
    // part, and the run is DONE.
    let s = repo();
    let imp = format!(
        "{}\n    open('hello.txt', 'w').write('hi\\n')\n    open('shared.txt', 'w').write('base\\nmore\\n')",
        bulk("aaa_table.txt", 4000)
    );
    let a = agent(&s, &imp, "'backdoor' not in saw", "READ");
    let r = implement(&s, &a, 0);
    assert_eq!(r["status"], "DONE", "{r}");
    assert_eq!(r["files_touched"], 3, "{r}");
    for role in ["spec-reviewer", "quality-reviewer"] {
        let (rv, n) = assert_parts(&s, role, 3);
        assert_eq!(rv.len(), n, "{role}: one review in {n} parts, no retry: {r}");
        let seen = lines_seen(&rv);
        let table = (0..4000).map(|i| format!("row {i:06} {}", "x".repeat(70)));
        let missing: Vec<String> = table.chain(["hi".into(), "more".into()]).filter(|l| !seen.contains(l)).collect();
        assert!(missing.is_empty(), "{role}: every added line is reviewed; missing {}", missing.len());
    }
}

#[test]
fn a_part_approved_without_naming_a_file_of_that_part_is_not_clean() {
    // The liar reviewer approves every part naming only shared.txt (a file of the last part):
    // a part that does not show shared.txt has no proof it was read. Asked once more, then
    // BLOCKED `review-unproven`.
    let s = repo();
    let imp = format!("{}\n    open('hello.txt', 'w').write('hi\\n')", bulk("aaa_table.txt", 4000));
    let a = agent(&s, &format!("{imp}\n    open('shared.txt', 'w').write('base\\nmore\\n')"), "True", "['shared.txt']");
    let r = implement(&s, &a, 1);
    assert_eq!(r["status"], "BLOCKED", "{r}");
    assert_eq!(r["kind"], "review-unproven", "{r}");
    let why = r["reason"].as_str().unwrap_or_default();
    assert!(why.contains("aaa_table.txt") && why.contains("only shared.txt"), "{why}");
    assert_eq!(reviews(&s, "spec-reviewer").len(), 2, "part 1 asked twice, then refused: {r}");
}

#[test]
fn a_change_too_large_even_in_parts_is_blocked_before_any_reviewer() {
    // 16 000 lines (1.3 MB): more than the most parts a review is split into. And a single line
    // of 200 kB cannot be split at all. Neither reaches a reviewer, neither is cut.
    for (imp, why) in [
        (bulk("aaa_bulk.txt", 16_000), "more than 8 reviewer briefs"),
        ("    open('aaa_bulk.txt', 'w').write('x' * 200000 + '\\n')".to_string(), "one diff line of"),
    ] {
        let s = repo();
        let a = agent(&s, &format!("{imp}\n    open('hello.txt', 'w').write('hi\\n')"), "True", "READ");
        let r = implement(&s, &a, 1);
        assert_eq!(r["status"], "BLOCKED", "{r}");
        assert_eq!(r["kind"], "too-large-to-review", "{r}");
        let reason = r["reason"].as_str().unwrap_or_default();
        assert!(reason.contains(why) && reason.contains("aaa_bulk.txt"), "{reason}");
        assert_eq!(reviews(&s, "spec-reviewer").len(), 0, "{r}");
    }
}

// ------------------------------------------------------------- the tester and the repairs

#[test]
fn the_e2e_tester_reads_a_change_over_the_cap_in_parts_with_every_changed_line() {
    // The E2E tester used to read the run's diff cut at 120 000 bytes with a note: the last
    // file of a 328 kB change never reached it. Now it is shown the change in parts, one
    // dispatch per part, and together they carry every changed line.
    let s = repo_with("## Task 1: E2E: greeting\n\nCreate hello.txt and the data table.\n");
    let imp = format!(
        "{}\n    open('hello.txt', 'w').write('hi\\n')\n    open('shared.txt', 'w').write('base\\nlast line\\n')",
        bulk("aaa_table.txt", 4000)
    );
    let a = agent(&s, &imp, "True", "READ");
    let r = implement(&s, &a, 0);
    assert_eq!(r["status"], "DONE", "{r}");
    let (t, n) = assert_parts(&s, "tester", 3);
    assert_eq!(t.len(), n, "one tester dispatch per part: {r}");
    let seen = lines_seen(&t);
    let table = (0..4000).map(|i| format!("row {i:06} {}", "x".repeat(70)));
    let missing: Vec<String> = table.chain(["hi".into(), "last line".into()]).filter(|l| !seen.contains(l)).collect();
    assert!(missing.is_empty(), "every changed line reaches the tester; missing {}", missing.len());
}

#[test]
fn a_run_whose_change_is_too_large_for_the_tester_even_in_parts_is_blocked_before_it() {
    // Each task's change can be reviewed in parts (about 570 kB each), but the run's whole
    // change (1.1 MB) is more than the tester can be shown in 8 parts: BLOCKED, never cut.
    let s = repo_with(
        "## Task 1: Bulk table\n\nCreate the first table.\n\n## Task 2: E2E: greeting\n\nCreate hello.txt and the second table.\n",
    );
    let imp = format!(
        "    if ctx.get('task_id') == '1':\n    {}\n    else:\n    {}\n        open('hello.txt', 'w').write('hi\\n')",
        bulk("aaa_table.txt", 7000),
        bulk("bbb_table.txt", 7000)
    );
    let a = agent(&s, &imp, "True", "READ");
    let r = implement(&s, &a, 1);
    assert_eq!(r["status"], "BLOCKED", "{r}");
    assert_eq!(r["kind"], "too-large-to-review", "{r}");
    let why = r["reason"].as_str().unwrap_or_default();
    assert!(why.contains("E2E tester") && why.contains("more than 8"), "{why}");
    assert_eq!(reviews(&s, "tester").len(), 0, "no tester read a cut change: {r}");
}

#[test]
fn a_repair_brief_over_the_cap_carries_the_named_files_diff_in_full_and_lists_the_rest() {
    // The honest twin of the backdoor liar above: its reviewer's finding names shared.txt; the
    // repair brief shows shared.txt's diff in full (never an arbitrary byte cut that may end
    // before it), lists the bulk file with its size, and the implementer, seeing the line the
    // finding is about, removes it: DONE.
    let s = repo();
    let imp = format!(
        r#"    if 'repairing task' in prompt:
        log({{'role': 'repair', 'prompt': prompt}})
        if '+backdoor' in prompt:
            open('shared.txt', 'w').write('base\nmore\n')
    else:
    {}
        os.system('git add -N aaa_bulk.txt')
        open('hello.txt', 'w').write('hi\n')
        open('shared.txt', 'w').write('base\nbackdoor\n')"#,
        bulk("aaa_bulk.txt", 4000)
    );
    let a = agent(&s, &imp, "'backdoor' not in saw", "READ");
    let r = implement(&s, &a, 0);
    assert_eq!(r["status"], "DONE", "{r}");
    let repairs: Vec<Value> = log(&s).into_iter().filter(|l| l["role"] == "repair").collect();
    assert_eq!(repairs.len(), 1, "one spec repair: {r}");
    let p = repairs[0]["prompt"].as_str().unwrap_or_default();
    assert!(p.contains("shared.txt adds a backdoor line"), "the finding: {p:.2000}");
    assert!(p.contains("diff --git a/shared.txt b/shared.txt") && p.contains("+backdoor"), "{p:.4000}");
    assert!(p.contains("IT IS NOT CUT") && !p.contains("[… cut"), "{p:.2000}");
    assert!(p.contains("- aaa_bulk.txt (+4000 -0): ") && p.contains("bytes of diff, not shown"), "{p:.2000}");
    assert!(!p.contains("row 000000"), "the file no finding names is listed, not shown");
}

// ------------------------------------------------------------------------------ loop run

/// `work loop run`'s reviewers read the change in `context.diff`, which is never cut: a change
/// over 200 000 bytes stops BLOCKED `too-large-to-review` before any code reviewer (it used
/// to reach them cut, the real edit past the cut). A change under the cap travels whole.
#[test]
fn loop_run_a_diff_over_the_cap_is_blocked_never_cut_and_its_honest_twin_is_reviewed_whole() {
    use crate::loop_run::{knob, log, setup, start};
    let rows = |n: usize| (0..n).map(|i| format!("row {i:06} {}\\n", "x".repeat(70))).collect::<String>();
    let code_reviews =
        |s: &Scenario| log(s).iter().filter(|l| l["phase"] == "code" && l["role"] != "implementer").count();

    let s = Scenario::new();
    let agent = setup(&s, "true", true);
    knob(&s, "impl-rewrite", &format!("aaa_bulk.txt|{}backdoor\\n", rows(3000)));
    let v = start(&s, &agent, &["--light"], 1);
    assert_eq!(v["reason"], "too-large-to-review", "{v}");
    let msg = v["message"].as_str().unwrap_or_default();
    assert!(msg.contains("aaa_bulk.txt") && msg.contains("never reads a cut diff"), "{v}");
    assert_eq!(code_reviews(&s), 0, "no reviewer read a cut diff: {v}");

    let s = Scenario::new();
    let agent = setup(&s, "true", true);
    knob(&s, "impl-rewrite", &format!("aaa_bulk.txt|{}last line\\n", rows(2000)));
    let v = start(&s, &agent, &["--light"], 3);
    assert_eq!(v["reason"], "code-human-gate", "{v}");
    let ctx: Value = serde_json::from_str(&s.read(".agent-state/review-ctx")).expect("review ctx");
    let diff = ctx["diff"].as_str().unwrap_or_default();
    assert!(diff.contains("+last line") && !diff.contains("cut at"), "the whole diff: {} bytes", diff.len());
}
