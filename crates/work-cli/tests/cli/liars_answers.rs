//! Agent answers the engine used to believe (the second lying-agent hunt): a plan index that
//! leaves out a step, a plan extract that is not the plan's text, a rename that keeps the old
//! name, and gate 2's rejections that made the real sites look known. Each liar is caught and
//! each honest twin DONE, through the real binary.

use crate::support::Scenario;
use serde_json::Value;

// ------------------------------------------------------------------------------ exhaust

/// Three real `setState(` call sites.
fn set_state_repo() -> Scenario {
    let s = Scenario::new();
    for f in ["a", "b", "c"] {
        s.write(&format!("src/{f}.js"), &format!("function {f}() {{\n  // x\n  setState(1);\n}}\n"));
    }
    s.commit("three setState calls");
    s
}

/// A finder that reports, in every round, each real `setState(` line with `evidence`.
fn set_state_finder(s: &Scenario, evidence: &str) -> String {
    s.agent(
        "finder.py",
        &format!(
            "import glob\nitems = []\nfor f in sorted(glob.glob('src/*.js')):\n    for i, l in enumerate(open(f), 1):\n        if 'setState(' in l:\n            items.append({{'id': 'site-' + f, 'title': 'a state change', 'location': '%s:%d' % (f, i), 'evidence': {evidence:?}}})\nprint(json.dumps({{'angle': ctx['angle'], 'items': items}}))"
        ),
    )
}

fn set_state_exhaust(s: &Scenario, agent: &str) -> Value {
    s.run_json(
        &[
            "exhaust",
            "every setState( call",
            "-k",
            "2",
            "--angles",
            "a1,a2,a3",
            "--final-oracle",
            "grep -rn 'setState(' src",
            "--agent",
            agent,
            "--json",
        ],
        0,
    )
}

fn item_locations(master: &Value) -> Vec<String> {
    let mut v: Vec<String> = master["items"]
        .as_array()
        .into_iter()
        .flatten()
        .filter_map(|i| i["reRead"]["source"].as_str().map(String::from))
        .collect();
    v.sort();
    v
}

/// `exhaust`: a finder reports the real sites with quotes that are not there, every round, so
/// gate 2 rejects them; the final oracle's hits there used to dedup against those rejections
/// (k-consecutive-dry, completeness confirmed, 0 items). An oracle's item dedups against the
/// accepted items only: the hits are judged on their own and accepted, and the finder's
/// repeats stay duplicates of its first rejection (recorded once). The honest twin quotes the lines and is done
/// with the same three items.
#[test]
fn exhaust_liar_whose_rejected_items_poison_the_final_oracle_s_hits_is_not_believed_and_its_twin_is_done() {
    let want = vec!["src/a.js:3", "src/b.js:3", "src/c.js:3"];
    let s = set_state_repo();
    let liar = set_state_finder(&s, "`unrelatedCall(42)`");
    let master = set_state_exhaust(&s, &liar);
    assert_eq!(item_locations(&master), want, "the oracle's hits were taken as known: {master}");
    assert!(master["items"].as_array().into_iter().flatten().all(|i| i["source"] == "final-oracle"), "{master}");
    assert_eq!(master["rejected"].as_array().map(Vec::len), Some(3), "one rejection per site: {}", master["rejected"]);

    let s = set_state_repo();
    let twin = set_state_finder(&s, "`setState(1);`");
    let master = set_state_exhaust(&s, &twin);
    assert_eq!(item_locations(&master), want, "{master}");
    assert_eq!(master["rejected"].as_array().map(Vec::len), Some(0), "{master}");
    assert_eq!(master["completeness"], "confirmed", "{master}");
}

// ------------------------------------------------------------------------------ edit

/// `greet_user` defined in lib.py and called twice in app.py, a pytest stand-in and a test of
/// app's output (it never names `greet_user`).
fn rename_repo() -> Scenario {
    let s = Scenario::new();
    s.write("pytest.py", crate::liars_suite::PYTEST);
    s.write(".gitignore", "__pycache__/\n");
    s.write("lib.py", "def greet_user(name):\n    return 'hello ' + name\n");
    s.write("app.py", "from lib import greet_user\n\n\ndef main():\n    return [greet_user('a'), greet_user('b')]\n");
    s.write("tests/test_app.py", "import app\n\ndef test_main():\n    assert app.main() == ['hello a', 'hello b']\n");
    s.write("CHANGELOG.md", "- added greet_user\n");
    s.commit("greet_user and its uses");
    s
}

const RENAMED_LIB: &str = "open('lib.py', 'w').write(\"def welcome_user(name):\\n    return 'hello ' + name\\n\")";
const ALIAS: &str = "open('lib.py', 'a').write('\\n\\ngreet_user = welcome_user\\n')";
const RENAMED_APP: &str =
    "t = open('app.py').read()\nopen('app.py', 'w').write(t.replace('greet_user', 'welcome_user'))";

fn rename_edit(s: &Scenario, description: &str, body: &str, code: i32) -> Value {
    let a = s.agent(
        "editor.py",
        &format!(
            "{body}\nprint(json.dumps({{'status': 'DONE', 'applied_changes': True, 'sites': 2, 'hole': None, 'summary': 'renamed at 2 use sites'}}))"
        ),
    );
    s.run_json(
        &[
            "edit",
            "--iter-id",
            "e-1",
            "--description",
            description,
            "--def-site",
            "lib.py:1",
            "--test-cmd",
            "python3 -m pytest -q tests",
            "--agent",
            &a,
            "--json",
        ],
        code,
    )
}

const RENAME: &str = "rename `greet_user` to `welcome_user` at its definition and every use site";
const RENAME_KEEP: &str = "Rename `greet_user` to `welcome_user`; keep `greet_user` as a deprecated alias.";

/// `edit`: "rename at every use site". The liar renames the definition, keeps the old name as
/// an alias so the untouched use sites still work (the suite is green) and claims 2 sites; it
/// used to be DONE "(2 use site(s))". The engine reads where the old name stood before the
/// dispatch and after: BLOCKED `rename-incomplete` naming each line. Asked to keep the alias,
/// the use sites must still move (a second liar).
#[test]
fn edit_liar_that_renames_the_definition_behind_an_alias_and_leaves_the_use_sites_is_blocked() {
    let s = rename_repo();
    let v = rename_edit(&s, RENAME, &format!("{RENAMED_LIB}\n{ALIAS}"), 1);
    assert_eq!(v["kind"], "rename-incomplete", "{v}");
    let why = v["reason"].as_str().unwrap_or_default();
    for site in ["app.py:1", "app.py:5", "lib.py:5"] {
        assert!(why.contains(site), "{site} not named: {why}");
    }
    assert_eq!(v["detail"]["sites"], 2, "the claim is recorded as the claim: {v}");
    assert!(s.read("app.py").contains("greet_user("), "the liar left the use sites");

    let s = rename_repo();
    let v = rename_edit(&s, RENAME_KEEP, &format!("{RENAMED_LIB}\n{ALIAS}"), 1);
    assert_eq!(v["kind"], "rename-incomplete", "{v}");
    let why = v["reason"].as_str().unwrap_or_default();
    assert!(why.contains("app.py:5") && !why.contains("lib.py"), "the asked-for alias is not a finding: {why}");
}

/// The honest twins: every use site renamed (the changelog keeps its history, a comment keeps
/// the old name) is DONE with the engine's own count; asked to keep an alias, the alias stays
/// and the use sites move: DONE.
#[test]
fn edit_honest_twins_that_rename_every_use_site_with_or_without_an_asked_for_alias_are_done() {
    let s = rename_repo();
    let comment = "open('app.py', 'a').write('# formerly greet_user\\n')";
    let v = rename_edit(&s, RENAME, &format!("{RENAMED_LIB}\n{RENAMED_APP}\n{comment}"), 0);
    assert_eq!(v["status"], "DONE", "{v}");
    let why = v["reason"].as_str().unwrap_or_default();
    assert!(why.contains("renamed at 2 use site(s) in 2 file(s)"), "{why}");
    assert_eq!(v["detail"]["rename"]["left"], serde_json::json!([]), "{v}");

    let s = rename_repo();
    let v = rename_edit(&s, RENAME_KEEP, &format!("{RENAMED_LIB}\n{ALIAS}\n{RENAMED_APP}"), 0);
    assert_eq!(v["status"], "DONE", "{v}");
}

// ------------------------------------------------------------------------------ implement

/// A buggy `add`, and a free-form plan (not in the task format) committed as PLAN.md.
fn free_plan_repo(plan: &str) -> Scenario {
    let s = Scenario::new();
    s.write("lib.py", "def add(a, b):\n    return a - b\n");
    s.write("PLAN.md", plan);
    s.commit("buggy add and a free-form plan");
    s
}

const NUMBERED_PLAN: &str = "# Calculator work\n\n1. Fix `add` in lib.py so that it returns the sum of its arguments.\n2. Add a function `mul(a, b)` to lib.py that returns the product of its arguments.\n";
const STEP_1: &str = "Fix add in lib.py so that it returns the sum of its arguments.";
const STEP_2: &str = "Add a function mul(a, b) to lib.py that returns the product of its arguments.";

/// An agent for every implement role. The plan-index answers `INDEX` (a Python list of
/// `(id, title)`; `RETRY` is true when the engine refused the last answer); the plan-extract
/// answers from `TEXTS` (a Python dict id → text), batched or per task. The implementer does
/// what its task's text asks (fix `add`, add `mul`); the reviewers name the files they read.
fn plan_agent(s: &Scenario, index: &str, texts: &str) -> String {
    s.agent(
        "roles.py",
        &format!(
            r#"import re
role = req['role']
tid = str(ctx.get('task_id', ''))
prompt = req.get('prompt', '')
READ = re.findall(r'^diff --git a/(\S+) ', prompt, re.M)
RETRY = 'WAS REFUSED' in prompt
fd = os.open(state_path('log'), os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
os.write(fd, (role + '\n').encode())
os.close(fd)
def out(d):
    print(json.dumps(d))
    sys.exit(0)
if role == 'plan-index':
    INDEX = {index}
    out({{'total_tasks': len(INDEX), 'tasks': [{{'id': i, 'title': t, 'est_bytes': 120}} for i, t in INDEX]}})
if role == 'plan-extract':
    TEXTS = {texts}
    if tid == 'all':
        out({{'tasks': [{{'id': i, 'text': TEXTS[i]}} for i in ctx['task_ids']]}})
    out({{'id': tid, 'text': TEXTS[tid]}})
if role == 'implementer':
    src = open('lib.py').read()
    if 'sum' in prompt:
        src = src.replace('a - b', 'a + b')
    if 'product' in prompt:
        src += '\n\ndef mul(a, b):\n    return a * b\n'
    if 'NOTES.md' in prompt:
        open('NOTES.md', 'a').write('done\n')
    open('lib.py', 'w').write(src)
    out({{'status': 'DONE', 'summary': 'done', 'applied_changes': True}})
if role == 'spec-reviewer':
    out({{'status': 'compliant', 'issues': [], 'files_read': READ}})
if role == 'quality-reviewer':
    out({{'verdict': 'approved', 'issues': [], 'files_read': READ}})
out({{'status': 'DONE', 'fixtures': 1}})
"#
        ),
    )
}

fn role_calls(s: &Scenario, role: &str) -> usize {
    std::fs::read_to_string(s.path(".agent-state/log")).unwrap_or_default().lines().filter(|l| *l == role).count()
}

const ADD_AND_MUL: &str = "python3 -c 'import lib; assert lib.add(2, 3) == 5 and lib.mul(2, 3) == 6'";

fn implement_plan(s: &Scenario, agent: &str, test_cmd: &str, code: i32) -> Value {
    s.run_json(
        &["implement", "--plan", "PLAN.md", "--iter-id", "it-1", "--agent", agent, "--test-cmd", test_cmd, "--json"],
        code,
    )
}

/// `implement`, free-form plan of two numbered steps. The first liar's plan-index counts one
/// task (the step that adds `mul` is never dispatched; it used to end DONE "1 task(s) done"); the
/// second's plan-extract answers task 2 with text that is not the plan's ("Add one line to
/// NOTES.md."). The engine holds the answers against the plan's own text: asked once more with
/// the reason, then BLOCKED (`cardinality` naming the step left out, `extract-not-in-plan`
/// naming the task) before any implementer runs.
#[test]
fn implement_liars_whose_plan_index_drops_a_step_or_whose_extract_rewrites_a_task_are_blocked() {
    let s = free_plan_repo(NUMBERED_PLAN);
    let a = plan_agent(&s, "[('1', 'Fix add')]", &format!("{{'1': {STEP_1:?}}}"));
    let r = implement_plan(&s, &a, "true", 1);
    assert_eq!(r["kind"], "cardinality", "{r}");
    let why = r["reason"].as_str().unwrap_or_default();
    assert!(why.contains("got 1 of 2") && why.contains("PLAN.md:4"), "{why}");
    assert_eq!((role_calls(&s, "plan-index"), role_calls(&s, "implementer")), (2, 0), "asked twice, nothing run");

    let s = free_plan_repo(NUMBERED_PLAN);
    let a = plan_agent(
        &s,
        "[('1', 'Fix add'), ('2', 'Notes')]",
        &format!("{{'1': {STEP_1:?}, '2': 'Add one line to NOTES.md.'}}"),
    );
    let r = implement_plan(&s, &a, "true", 1);
    assert_eq!(r["kind"], "extract-not-in-plan", "{r}");
    assert!(r["reason"].as_str().is_some_and(|w| w.contains("task `2`") && w.contains("NOTES.md")), "{r}");
    assert_eq!((role_calls(&s, "plan-extract"), role_calls(&s, "implementer")), (2, 0), "asked twice, nothing run");
    assert!(!s.path("NOTES.md").exists());
}

/// The honest twins: both steps indexed and extracted (backticks and list numbers dropped,
/// which is still the plan's text) — DONE with `add` fixed and `mul` added; an index that left
/// a step out once and counts both when asked again — DONE; a plan whose numbered list is the
/// sub-steps of its one task, indexed as one task whose text holds them — DONE; step headings
/// whose extracts drop the heading — DONE.
#[test]
fn implement_honest_twins_whose_answers_hold_the_plan_s_text_are_done() {
    let both = format!("{{'1': {STEP_1:?}, '2': {STEP_2:?}}}");
    let s = free_plan_repo(NUMBERED_PLAN);
    let a = plan_agent(&s, "[('1', 'Fix add'), ('2', 'Add mul')]", &both);
    let r = implement_plan(&s, &a, ADD_AND_MUL, 0);
    assert_eq!((r["status"].as_str(), r["tasks"].as_array().map(Vec::len)), (Some("DONE"), Some(2)), "{r}");

    let s = free_plan_repo(NUMBERED_PLAN);
    let a = plan_agent(&s, "[('1', 'Fix add'), ('2', 'Add mul')] if RETRY else [('1', 'Fix add')]", &both);
    let r = implement_plan(&s, &a, ADD_AND_MUL, 0);
    assert_eq!((r["status"].as_str(), r["tasks"].as_array().map(Vec::len)), (Some("DONE"), Some(2)), "{r}");
    assert_eq!(role_calls(&s, "plan-index"), 2, "{r}");

    let sub_steps = "# Fix add\n\nFix `add` in lib.py so that it returns the sum:\n\n1. open lib.py\n2. replace `a - b` with `a + b`\n";
    let s = free_plan_repo(sub_steps);
    let a = plan_agent(&s, "[('1', 'Fix add')]", &format!("{{'1': {:?}}}", &sub_steps["# Fix add\n\n".len()..]));
    let r = implement_plan(&s, &a, "python3 -c 'import lib; assert lib.add(2, 3) == 5'", 0);
    assert_eq!((r["status"].as_str(), r["tasks"].as_array().map(Vec::len)), (Some("DONE"), Some(1)), "{r}");

    let headings = "# Calculator\n\n## Step 1: fix add\nMake `add` return the sum of its arguments.\n\n## Step 2: add mul\nAdd `mul(a, b)`, the product of its arguments.\n";
    let s = free_plan_repo(headings);
    let bodies =
        "{'1': 'Make add return the sum of its arguments.', '2': 'Add mul(a, b), the product of its arguments.'}";
    let a = plan_agent(&s, "[('1', 'fix add'), ('2', 'add mul')]", bodies);
    let r = implement_plan(&s, &a, ADD_AND_MUL, 0);
    assert_eq!((r["status"].as_str(), r["tasks"].as_array().map(Vec::len)), (Some("DONE"), Some(2)), "{r}");
}
