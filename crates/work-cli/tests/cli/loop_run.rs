//! `work loop run`: the agent-driven work loop end to end, with one scripted agent that answers
//! per role (drafter, reviewers, adjudicator, implementer) and the project's own gates.

use crate::support::{Scenario, assert_one_line_error, fallback_only, refused};
use serde_json::Value;

pub(crate) const DIR: &str = "docs/specs/hello";

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
/// - `impl-status`: the implementer's status word (default `done`);
/// - `impl-rewrite`: `PATH|TEXT` (one a line): the implementer overwrites each PATH with its TEXT
///   (`\n` in TEXT is a newline) and does nothing else;
/// - `impl-commit`: the implementer commits what it wrote;
/// - `impl-hide`: `PATH|TEXT`: the implementer also overwrites PATH with TEXT and hides it
///   from git (`update-index --skip-worktree`);
/// - `impl-hang`: the first implementer call writes its change, then waits for `release`;
/// - `impl-task-<id>`: a shell command the implementer runs for task `<id>` (or `fix-<kind>`)
///   instead of its usual write;
/// - `impl-logonly`: the implementer only appends to `agent-calls.log` in the repository;
/// - `drafter-status`: the drafter's status word (default `drafted`);
/// - `drafter-noop`: the drafter answers without revising anything;
/// - `drafter-tamper`: the drafter also writes README.md (`plain`), hidden behind
///   `skip-worktree` (`hide`), or writes `conftest.py` in the spec directory (`conftest`), or
///   (honest) markdown notes there (`notes`);
/// - `reviewer-tamper`: the code reviewer resets the cohort's review retry count;
/// - `reviewer-edit`: the code reviewer (read-only) appends to hello.txt (`1`), appends to
///   README.md and flags it `assume-unchanged` (`hide`), or writes `notes.py` and hides it with
///   a `.git/info/exclude` line (`exclude`);
/// - `reviewer-look`: the code reviewer runs git's read-only commands (status, diff, log);
/// - `adj-hide`: the adjudicator appends to README.md and flags it `assume-unchanged`;
/// - `adj-tamper`: the adjudicator rewrites the reviewer's persisted report.
/// - `reviewer-lazy`: the code reviewer answers clean without naming a file it read (`once`:
///   only its first answer);
/// - `finding-gate`: the code reviewer's finding is about the gate of that name;
/// - `gate-red-by-reviewer`: the code reviewer leaves `.agent-state/gate-red` (a gate reading
///   it turns red after GATES passed);
/// - `adj-evidence`: how the adjudicator backs a refutation: `quote` (default: the finding's
///   line, re-read), `none`, `wrong` (a quote that is not there), `outside` (`../x:1`).
///
/// - `tree-watch`: every dispatch records the working tree (each entry's mode, mtime, inode and
///   content hash; `.git`, the state directories and the spec directory aside) — the implementer when it
///   ends (`tree-at-end`), every later dispatch when it starts, appending the entries that
///   differ to `tree-watched` (one JSON line per dispatch).
///
/// A clean reviewer names the changed files it read (`files_read`).
///
/// Every code reviewer's context is kept in `review-ctx` (the last one).
const AGENT: &str = r#"
import subprocess
def knob(n, default=None):
    p = state_path(n)
    return open(p).read().strip() if os.path.exists(p) else default
role = req['role']
phase = ctx.get('phase')
bump('calls-' + role)
def tree_fp():
    import hashlib
    fp = {}
    for dp, dns, fns in os.walk('.'):
        if dp == '.':
            dns[:] = [d for d in dns if d not in ('.git', '.work', '.agent-state', '.agents', '.loop-run', 'docs')]
        for n in dns + fns:
            p = os.path.join(dp, n)
            st = os.lstat(p)
            if os.path.islink(p):
                body = os.readlink(p)
            elif os.path.isdir(p):
                body = ''
            else:
                body = hashlib.sha256(open(p, 'rb').read()).hexdigest()
            fp[p] = [st.st_mode, st.st_mtime_ns, st.st_ino, body]
    return fp
if knob('tree-watch') and os.path.exists(state_path('tree-at-end')):
    before, now = json.load(open(state_path('tree-at-end'))), tree_fp()
    with open(state_path('tree-watched'), 'a') as f:
        f.write(json.dumps({'role': role, 'changed': sorted(p for p in set(before) | set(now) if before.get(p) != now.get(p))}) + '\n')
with open(state_path('log'), 'a') as f:
    f.write(json.dumps({'role': role, 'phase': phase, 'task_id': ctx.get('task_id'), 'model': req['model'], 'effort': req['effort'], 'access': req['access'], 'detail': ctx.get('detail')}) + '\n')
def out(d):
    if role == 'implementer' and knob('tree-watch'):
        json.dump(tree_fp(), open(state_path('tree-at-end'), 'w'))
    print(json.dumps(d))
    sys.exit(0)
if role == 'spec-drafter':
    d = ctx['spec_dir']
    if knob('drafter-tamper') == 'conftest':
        open(d + '/conftest.py', 'w').write('import lib\nlib.add = lambda a, b: a + b\n')
    elif knob('drafter-tamper') == 'notes':
        os.makedirs(d + '/design', exist_ok=True)
        open(d + '/notes.md', 'w').write('# Notes\n\nWhy hello.txt.\n')
        open(d + '/design/overview.md', 'w').write('# Overview\n')
    elif knob('drafter-tamper'):
        open('README.md', 'w').write('weakened before anything is frozen\n')
        if knob('drafter-tamper') == 'hide':
            subprocess.run(['git', 'update-index', '--skip-worktree', 'README.md'], check=True)
    if ctx.get('revision') and not knob('drafter-noop'):
        open(d + '/spec.md', 'a').write('\n- [ ] the greeting says hello (revised: %s)\n' % ctx['revision']['kind'])
    if not os.path.exists(d + '/spec.md'):
        open(d + '/spec.md', 'w').write('# Hello\n\n**Status:** Draft\n\nPrint a greeting.\n\n- [ ] hello.txt exists\n')
    if not os.path.exists(d + '/plan.md'):
        open(d + '/plan.md', 'w').write('# Plan\n\n**Status:** Drafting\n\n## Task 1: Write hello\nCreate hello.txt.\n')
    out({'status': knob('drafter-status', 'drafted'), 'summary': 'wrote spec and plan'})
if role == 'implementer':
    n = bump('impl')
    status = knob('impl-status', 'done')
    if knob('impl-noop'):
        out({'status': status, 'summary': 'all done, trust me'})
    if knob('impl-rewrite'):
        for entry in knob('impl-rewrite').splitlines():
            path, text = entry.split('|', 1)
            open(path, 'w').write(text.replace('\\n', '\n'))
        out({'status': status, 'summary': 'fixed it'})
    script = knob('impl-task-' + str(ctx.get('task_id')))
    if script:
        subprocess.run(['sh', '-c', script], check=True)
        out({'status': status, 'summary': 'did ' + str(ctx.get('task_id'))})
    if knob('impl-logonly'):
        open('agent-calls.log', 'a').write('implementer call %d\n' % n)
        out({'status': status, 'summary': 'did it'})
    if phase == 'fix':
        open('fixed.txt', 'a').write('fix %d %s\n' % (n, ctx.get('fix_kind')))
        written = 'fixed.txt'
    else:
        line = 'hello from task %s\n' % ctx['task_id']
        old = open('hello.txt').read() if os.path.exists('hello.txt') else ''
        if line not in old:
            open('hello.txt', 'a').write(line)
        written = 'hello.txt'
    if knob('impl-hide'):
        path, text = knob('impl-hide').split('|', 1)
        open(path, 'w').write(text.replace('\\n', '\n'))
        subprocess.run(['git', 'update-index', '--skip-worktree', path], check=True)
    if knob('impl-commit'):
        subprocess.run(['git', 'add', written], check=True)
        subprocess.run(['git', 'commit', '-q', '-m', 'implementer %d' % n], check=True)
    if knob('impl-hang') and n == 1:
        open(state_path('impl-wrote'), 'w').write('1')
        for _ in range(6000):
            if os.path.exists(state_path('release')):
                break
            time.sleep(0.1)
    out({'status': status, 'summary': 'did it'})
if role in ('adversarial-reviewer', 'quality-reviewer'):
    if knob('reviewer-marker'):
        open(knob('reviewer-marker'), 'w').close()
    if phase == 'code':
        open(state_path('review-ctx'), 'w').write(json.dumps(ctx))
        if knob('reviewer-tamper') and role == 'adversarial-reviewer':
            p = ctx['spec_dir'] + '/state.json'
            st = json.load(open(p))
            st['review_retry_count'] = 0
            open(p, 'w').write(json.dumps(st))
        edit = knob('reviewer-edit') if role == 'adversarial-reviewer' else None
        if edit == 'hide':
            open('README.md', 'a').write('BACKDOOR = True\n')
            subprocess.run(['git', 'update-index', '--assume-unchanged', 'README.md'], check=True)
        elif edit == 'exclude':
            open('notes.py', 'w').write('BACKDOOR = True\n')
            open('.git/info/exclude', 'a').write('notes.py\n')
        elif edit:
            open('hello.txt', 'a').write('the reviewer was here\n')
        if knob('reviewer-look'):
            for cmd in (['status', '--porcelain'], ['diff', 'HEAD'], ['log', '--oneline'], ['diff', '--stat']):
                subprocess.run(['git'] + cmd, check=True, stdout=subprocess.DEVNULL)
    if role == 'adversarial-reviewer' and phase == 'code' and knob('gate-red-by-reviewer'):
        open(state_path('gate-red'), 'w').write('1')
    if role == 'adversarial-reviewer' and phase == 'code' and knob('review-finding'):
        sev = knob('finding-severity', 'blocker')
        title = 'hello.txt greets nobody' + (' (round %d)' % ctx['round'] if knob('vary-finding') else '')
        f = {'id': 'F1', 'severity': sev, 'title': title, 'file': 'hello.txt', 'line': 1, 'fix': 'name the reader'}
        if knob('finding-gate'):
            f['gate'] = knob('finding-gate')
        out({'verdict': 'findings', 'findings': [f], 'files_read': ['hello.txt']})
    if phase == 'spec-plan' and knob('spec-finding') and bump('spec-reviews') == 1:
        out({'verdict': 'findings', 'findings': [{'id': 'S1', 'severity': 'concern', 'title': 'no acceptance criterion for the greeting text', 'file': ctx['spec_dir'] + '/spec.md'}]})
    lazy = knob('reviewer-lazy')
    if phase == 'code' and role == 'adversarial-reviewer' and lazy and (lazy != 'once' or bump('lazy') == 1):
        out({'verdict': 'clean', 'findings': []})
    read = ctx.get('changed_paths') if phase == 'code' else [ctx['spec_dir'] + '/spec.md', ctx['spec_dir'] + '/plan.md']
    out({'verdict': 'clean', 'findings': [], 'files_read': read or []})
if role == 'finding-adjudicator':
    findings = ctx['report']['findings']
    if knob('adj-hide'):
        open('README.md', 'a').write('BACKDOOR = True\n')
        subprocess.run(['git', 'update-index', '--assume-unchanged', 'README.md'], check=True)
    if knob('adj-tamper'):
        open(ctx['report_path'], 'w').write('{"findings": []}')
    if knob('adj-skip'):
        out({'findings': []})
    rounds = int(knob('sustain-rounds', '0'))
    disp = 'sustained' if phase == 'spec-plan' else 'refuted'
    if findings and phase == 'code':
        seen = bump('adj-code-with-findings')
        if seen <= rounds:
            disp = 'sustained'
    def answer(f):
        a = {'id': f['id'], 'disposition': disp, 'reason': 'checked hello.txt'}
        how = knob('adj-evidence', 'quote')
        if disp == 'refuted' and how != 'none' and f.get('file') and f.get('line'):
            lines = open(f['file']).read().splitlines() if os.path.exists(f['file']) else ['']
            quote = {'wrong': 'this line is not in the file', 'outside': lines[0]}.get(how, lines[f['line'] - 1])
            loc = '../outside.txt:1' if how == 'outside' else '%s:%d' % (f['file'], f['line'])
            a['evidence'] = {'location': loc, 'quote': quote}
        return a
    out({'findings': [answer(f) for f in findings]})
print('unknown role ' + role)
sys.exit(1)
"#;

pub(crate) fn setup(s: &Scenario, test_gate: &str, approved: bool) -> String {
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

pub(crate) fn knob(s: &Scenario, name: &str, value: &str) {
    s.write(&format!(".agent-state/{name}"), value);
}

pub(crate) fn calls(s: &Scenario, role: &str) -> u32 {
    std::fs::read_to_string(s.path(&format!(".agent-state/calls-{role}")))
        .map(|t| t.trim().parse().unwrap_or(0))
        .unwrap_or(0)
}

pub(crate) fn log(s: &Scenario) -> Vec<Value> {
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

pub(crate) fn run(s: &Scenario, agent: &str, extra: &[&str], code: i32) -> Value {
    let mut args = vec!["loop", "run", DIR, "--agent", agent, "--json"];
    args.extend_from_slice(extra);
    s.run_json(&args, code)
}

/// A run over approved spec.md / plan.md: the first invocation pauses at the spec gate (an
/// approval that predates the gate is confirmed by a person), the first resume at the plan
/// gate, the second resume runs on and ends with `code`.
pub(crate) fn start(s: &Scenario, agent: &str, extra: &[&str], code: i32) -> Value {
    let v = run(s, agent, extra, 3);
    assert_eq!(v["reason"], "spec-human-gate", "{v}");
    let v = run(s, agent, &["--resume"], 3);
    assert_eq!(v["reason"], "plan-human-gate", "{v}");
    run(s, agent, &["--resume"], code)
}

pub(crate) fn transitions(v: &Value) -> Vec<String> {
    v["transitions"].as_array().expect("transitions").iter().map(|t| t.as_str().unwrap_or("").to_string()).collect()
}

pub(crate) fn engine(s: &Scenario) -> Value {
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
    let v = start(&s, &agent, &["--light"], 3);
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
    let v = start(&s, &agent, &["--light", "--implementation-retry-cap", "1"], 1);
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
    let v = start(&s, &agent, &["--full"], 3);
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
    let v = start(&s, &agent, &["--full"], 3);
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
    let v = start(&s, &agent, &["--full", "--review-retry-cap", "1"], 1);
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
    let v = start(&s, &agent, &["--full"], 3);
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
    let v = start(&s, &agent, &["--light"], 1);
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
    start(&s, &agent, &["--light"], 3);
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
    let v = start(&s, &agent, &["--light"], 3);
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
    let v = start(&s, &agent, &["--light"], 3);
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
    let v = start(&s, &agent, &["--light"], 3);
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

// ----- hardening from the adversarial review (docs/loop-run.md "Ground truth") ----------------

fn review_ctx(s: &Scenario) -> Value {
    s.read_json(".agent-state/review-ctx")
}

#[test]
fn an_implementer_that_commits_its_work_is_done_and_reviewed_against_the_base() {
    let s = Scenario::new();
    let agent = setup(&s, "test -f hello.txt", true);
    let base = s.git(&["rev-parse", "HEAD"]).trim().to_string();
    knob(&s, "impl-commit", "1");
    let v = start(&s, &agent, &["--light"], 3);
    assert_eq!(v["reason"], "code-human-gate", "{v}");
    assert_eq!(calls(&s, "implementer"), 1, "a committed change is a change: no nudge");
    if crate::support::suite_confines() {
        // The commit landed in the dispatch's private git directory: the branch did not move.
        assert_eq!(s.git(&["rev-parse", "HEAD"]).trim(), base, "the user's branch did not move");
        assert!(!s.git(&["status", "--porcelain", "--", "hello.txt"]).is_empty(), "hello.txt is in the tree");
    } else {
        assert_ne!(s.git(&["rev-parse", "HEAD"]).trim(), base, "the implementer committed");
        assert!(s.git(&["status", "--porcelain", "--", "hello.txt"]).trim().is_empty(), "hello.txt is committed");
    }
    // The reviewer saw the change against the base, not the (empty) diff against HEAD.
    let ctx = review_ctx(&s);
    assert_eq!(ctx["base"], base.as_str(), "{ctx}");
    assert!(ctx["changed_paths"].to_string().contains("hello.txt"), "{ctx}");
    assert!(ctx["diff"].as_str().unwrap_or("").contains("+hello from task 1"), "{ctx}");
    let verdict = s.read_json(&format!("{DIR}/reviews/code-1/review-verdict.json"));
    assert_eq!(verdict["target"]["base"], base.as_str());
    assert!(verdict["target"]["changed_paths"].to_string().contains("hello.txt"), "{verdict}");
}

#[test]
fn sigkill_during_an_implementer_dispatch_then_resume_judges_against_the_real_before_state() {
    let s = Scenario::new();
    let agent = setup(&s, "test -f hello.txt", true);
    knob(&s, "impl-hang", "1");
    run(&s, &agent, &["--light"], 3);
    run(&s, &agent, &["--resume"], 3);
    let mut child = s
        .work_std()
        .args(["loop", "run", DIR, "--agent", &agent, "--json", "--resume"])
        .current_dir(s.root())
        .env("WORK_FAKE_CLOCK", "2026-01-01T00:00:00Z")
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .spawn()
        .expect("spawn work");
    let wrote = s.path(".agent-state/impl-wrote");
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(120);
    while !wrote.exists() {
        assert!(std::time::Instant::now() < deadline, "the implementer never ran");
        std::thread::sleep(std::time::Duration::from_millis(20));
    }
    child.kill().expect("SIGKILL");
    child.wait().expect("reap");
    // Let the orphaned agent go; its change (hello.txt) is already in the tree.
    knob(&s, "release", "1");
    assert!(s.read("hello.txt").contains("hello from task 1"));
    // The resumed dispatch finds the work done and, honestly, changes nothing more.
    let v = run(&s, &agent, &["--resume"], 3);
    assert_eq!(v["reason"], "code-human-gate", "the honest agent is not called a liar: {v}");
    assert_eq!(calls(&s, "implementer"), 2, "one dispatch killed, one on resume, no nudge");
    assert_eq!(s.read("hello.txt").matches("hello from task 1").count(), 1);
}

#[test]
fn a_reviewer_that_edits_the_loop_state_is_a_loud_stop() {
    let _unconfined = fallback_only(refused::READ_ONLY);
    let s = Scenario::new();
    let agent = setup(&s, "test -f hello.txt", true);
    knob(&s, "reviewer-tamper", "1");
    let v = start(&s, &agent, &["--light"], 1);
    assert_eq!(v["outcome"], "blocked");
    assert_eq!(v["reason"], "state-tampered", "{v}");
    assert!(v["message"].as_str().unwrap_or("").contains("adversarial-reviewer"), "{v}");
    assert_eq!(calls(&s, "finding-adjudicator"), 0, "nothing is routed after the tamper");
    assert!(!transitions(&v).join("\n").contains("reviewers-clean"));
}

#[test]
fn a_read_only_reviewer_that_changes_the_tree_is_a_loud_stop() {
    let _unconfined = fallback_only(refused::READ_ONLY);
    let s = Scenario::new();
    let agent = setup(&s, "test -f hello.txt", true);
    knob(&s, "reviewer-edit", "1");
    let v = start(&s, &agent, &["--light"], 1);
    assert_eq!(v["reason"], "read-only-violated", "{v}");
    assert!(v["message"].as_str().unwrap_or("").contains("hello.txt"), "{v}");
    assert_eq!(v["state"], "CODE-REVIEW");
}

/// The drafter writes the spec and the plan only: it runs before the check surface is frozen
/// and git's view sealed, so a file it changes elsewhere (hidden behind an index flag or not)
/// would become the baseline. BLOCKED `drafter-wrote-tree` before its drafts are read. The
/// honest twin is `full_happy_path_drafts_pauses_at_each_human_gate_and_ends_done`.
#[test]
fn a_drafter_that_changes_the_tree_outside_the_spec_dir_is_blocked() {
    for how in ["plain", "hide"] {
        // The index flag writes `.git` (a private copy with the sandbox); the plain write is judged confined.
        let _unconfined = (how == "hide").then(|| fallback_only(refused::GIT));
        let s = Scenario::new();
        let agent = setup(&s, "test -f hello.txt", false);
        knob(&s, "drafter-tamper", how);
        let v = run(&s, &agent, &[], 1);
        assert_eq!(v["reason"], "drafter-wrote-tree", "{how}: {v}");
        let msg = v["message"].as_str().unwrap_or("");
        assert!(msg.contains("README.md"), "{how}: {v}");
        assert_eq!(how == "hide", msg.contains("skip-worktree"), "{how}: {v}");
        assert_eq!(calls(&s, "implementer"), 0);
    }
}

#[test]
fn an_adjudicator_that_rewrites_a_persisted_report_is_a_loud_stop() {
    let _unconfined = fallback_only(refused::READ_ONLY);
    let s = Scenario::new();
    let agent = setup(&s, "test -f hello.txt", true);
    knob(&s, "review-finding", "1");
    knob(&s, "adj-tamper", "1");
    let v = start(&s, &agent, &["--light"], 1);
    assert_eq!(v["reason"], "state-tampered", "{v}");
    assert!(v["message"].as_str().unwrap_or("").contains("finding-adjudicator"), "{v}");
    assert_eq!(v["state"], "CODE-REVIEW");
}

#[test]
fn a_tampering_reviewer_cannot_reset_the_review_retry_cap() {
    let _unconfined = fallback_only(refused::READ_ONLY);
    let s = Scenario::new();
    let agent = setup(&s, "test -f hello.txt", true);
    knob(&s, "review-finding", "1");
    knob(&s, "vary-finding", "1");
    knob(&s, "sustain-rounds", "99");
    knob(&s, "reviewer-tamper", "1");
    let v = start(&s, &agent, &["--full", "--review-retry-cap", "1"], 1);
    assert_eq!(v["reason"], "state-tampered", "{v}");
    assert!(calls(&s, "adversarial-reviewer") <= 2, "the cap (1) bounds the rounds");
    assert!(!transitions(&v).join("\n").contains("findings-remain"), "{v}");
}

#[test]
fn answers_use_one_spelling_and_a_synonym_is_malformed() {
    // The canonical words are accepted; another word for the same thing is malformed: retried
    // once with the schema error, then the dispatch is dropped — never read as the claim.
    let s = Scenario::new();
    let agent = setup(&s, "test -f hello.txt", false);
    knob(&s, "drafter-status", "ok");
    let v = run(&s, &agent, &["--light"], 1);
    assert_eq!(calls(&s, "spec-drafter"), 2, "one retry for a synonym: {v}");
    assert_ne!(v["reason"], "spec-human-gate", "{v}");

    let s = Scenario::new();
    let agent = setup(&s, "test -f hello.txt", true);
    knob(&s, "review-finding", "1");
    knob(&s, "finding-severity", "major");
    let v = start(&s, &agent, &["--light"], 1);
    assert_eq!(calls(&s, "adversarial-reviewer"), 2, "one retry for `major`: {v}");

    // Every canonical severity is taken as written.
    for word in ["concern", "nit"] {
        let s = Scenario::new();
        let agent = setup(&s, "test -f hello.txt", true);
        knob(&s, "review-finding", "1");
        knob(&s, "finding-severity", word);
        knob(&s, "sustain-rounds", "1");
        let v = start(&s, &agent, &["--light"], 3);
        assert_eq!(v["reason"], "code-human-gate", "severity {word}: {v}");
        let verdict = s.read_json(&format!("{DIR}/reviews/code-1/review-verdict.json"));
        assert_eq!(verdict["sustained_findings"][0]["severity"], word, "{verdict}");
    }
}

#[test]
fn stasis_waits_for_a_decision_and_approve_accepts_the_findings_as_residual_risk() {
    let s = Scenario::new();
    let agent = setup(&s, "test -f hello.txt", true);
    knob(&s, "review-finding", "1");
    knob(&s, "sustain-rounds", "99");
    let v = start(&s, &agent, &["--full"], 3);
    assert_eq!(v["reason"], "review-stasis", "{v}");
    assert!(v["next"]["approve"].as_str().unwrap_or("").contains("--approve"), "{v}");
    assert!(v["next"]["reject"].as_str().unwrap_or("").contains("--reject"), "{v}");
    let reviews = calls(&s, "adversarial-reviewer");
    let adjudications = calls(&s, "finding-adjudicator");
    // Resuming without a decision pauses again, with no new paid review.
    let v = run(&s, &agent, &["--resume"], 3);
    assert_eq!(v["reason"], "review-stasis", "{v}");
    assert_eq!(calls(&s, "adversarial-reviewer"), reviews);
    assert_eq!(calls(&s, "finding-adjudicator"), adjudications);
    // The person accepts the findings as residual risk: the unit goes to the merge gate.
    let v = run(&s, &agent, &["--resume", "--approve"], 3);
    assert_eq!(v["reason"], "code-human-gate", "{v}");
    assert_eq!(v["verdict_state"], "READY_WITH_RESIDUAL_RISK");
    assert_eq!(calls(&s, "adversarial-reviewer"), reviews);
    let verdict = s.read_json(&format!("{DIR}/reviews/code-1/review-verdict.json"));
    assert!(verdict["residual_risks"].to_string().contains("F1"), "{verdict}");
    assert_eq!(v["review_retry_count"], 1, "accepting is not a retry");
}

#[test]
fn stasis_reject_sends_the_findings_back_to_implementation() {
    let s = Scenario::new();
    let agent = setup(&s, "test -f hello.txt", true);
    knob(&s, "review-finding", "1");
    knob(&s, "sustain-rounds", "2");
    let v = start(&s, &agent, &["--full"], 3);
    assert_eq!(v["reason"], "review-stasis", "{v}");
    let before = calls(&s, "implementer");
    let v = run(&s, &agent, &["--resume", "--reject", "greet the reader by name"], 3);
    assert_eq!(v["reason"], "code-human-gate", "{v}");
    assert!(transitions(&v).join("\n").contains("CODE-REVIEW -> CODE-IMPLEMENTATION (findings-remain)"), "{v}");
    assert_eq!(calls(&s, "implementer"), before + 1);
    let fix = log(&s).into_iter().rev().find(|l| l["phase"] == "fix").expect("a fix dispatch");
    let detail = fix["detail"].as_str().unwrap_or("");
    assert!(detail.contains("greet the reader by name") && detail.contains("F1"), "{detail}");
    assert_eq!(v["verdict_state"], "READY");
}

#[test]
fn an_undecided_adjudication_waits_for_a_decision_and_reject_sustains_it() {
    let s = Scenario::new();
    let agent = setup(&s, "test -f hello.txt", true);
    knob(&s, "review-finding", "1");
    knob(&s, "adj-skip", "1");
    let v = start(&s, &agent, &["--light"], 3);
    assert_eq!(v["reason"], "adjudication-indeterminate", "{v}");
    let reviews = calls(&s, "adversarial-reviewer");
    let adjudications = calls(&s, "finding-adjudicator");
    let v = run(&s, &agent, &["--resume"], 3);
    assert_eq!(v["reason"], "adjudication-indeterminate", "{v}");
    assert_eq!(calls(&s, "adversarial-reviewer"), reviews, "no new paid review");
    assert_eq!(calls(&s, "finding-adjudicator"), adjudications);
    std::fs::remove_file(s.path(".agent-state/adj-skip")).expect("rm knob");
    let v = run(&s, &agent, &["--resume", "--reject", "F1 is real"], 3);
    assert_eq!(v["reason"], "code-human-gate", "{v}");
    assert!(transitions(&v).join("\n").contains("(findings-remain)"), "{v}");
    assert_eq!(calls(&s, "implementer"), 2);
    assert_eq!(v["review_retry_count"], 1);
}

#[test]
fn an_undecided_adjudication_can_be_accepted_as_residual_risk() {
    let s = Scenario::new();
    let agent = setup(&s, "test -f hello.txt", true);
    knob(&s, "review-finding", "1");
    knob(&s, "adj-skip", "1");
    start(&s, &agent, &["--full"], 3);
    let v = run(&s, &agent, &["--resume", "--approve"], 3);
    assert_eq!(v["reason"], "code-human-gate", "{v}");
    assert_eq!(v["verdict_state"], "READY_WITH_RESIDUAL_RISK");
    let verdict = s.read_json(&format!("{DIR}/reviews/code-1/review-verdict.json"));
    assert!(verdict["residual_risks"].to_string().contains("F1"), "{verdict}");
    assert_eq!(calls(&s, "implementer"), 1);
}

#[test]
fn reviewers_see_the_full_diff_so_a_log_only_change_is_reviewed() {
    let s = Scenario::new();
    let agent = setup(&s, "true", true);
    knob(&s, "impl-logonly", "1");
    let v = start(&s, &agent, &["--light"], 3);
    // A change anywhere outside the spec and state directories is a change (the engine cannot
    // know which files a task owns); the reviewer judges it from the full diff.
    assert_eq!(v["reason"], "code-human-gate", "{v}");
    let ctx = review_ctx(&s);
    assert!(ctx["diff"].as_str().unwrap_or("").contains("+implementer call 1"), "{ctx}");
    assert!(ctx["changed_paths"].to_string().contains("agent-calls.log"), "{ctx}");
}

#[test]
fn a_hanging_gate_is_red_with_the_timeout_as_its_reason() {
    let s = Scenario::new();
    let agent = setup(&s, "sleep 30", true);
    s.write("work.toml", "[gates]\ntest = \"sleep 30\"\n\n[timeouts]\ngate_secs = 1\n");
    s.commit("gate timeout");
    let v = start(&s, &agent, &["--light", "--implementation-retry-cap", "1"], 1);
    assert_eq!(v["reason"], "implementation-retry-cap", "{v}");
    assert!(v["message"].as_str().unwrap_or("").contains("timed out after 1s"), "{v}");
}

#[test]
fn a_drafter_that_owes_a_revision_and_changes_nothing_is_not_done() {
    let s = Scenario::new();
    let agent = setup(&s, "test -f hello.txt", false);
    knob(&s, "spec-finding", "1");
    knob(&s, "drafter-noop", "1");
    let v = run(&s, &agent, &["--full"], 1);
    assert_eq!(v["reason"], "draft-unchanged", "{v}");
    assert_eq!(v["state"], "SPEC-PLAN-DRAFTING");
    assert_eq!(calls(&s, "spec-drafter"), 2);
}

#[test]
fn an_approval_that_predates_the_gate_still_pauses_once() {
    let s = Scenario::new();
    let agent = setup(&s, "test -f hello.txt", true);
    let v = run(&s, &agent, &["--light"], 3);
    assert_eq!(v["reason"], "spec-human-gate", "{v}");
    assert_eq!(v["state"], "SPEC-HUMAN-GATE");
    assert!(v["message"].as_str().unwrap_or("").contains("predates"), "{v}");
    assert_eq!(calls(&s, "implementer"), 0);
    // Resuming confirms the approval; the plan gate pauses once in turn.
    let v = run(&s, &agent, &["--resume"], 3);
    assert_eq!(v["reason"], "plan-human-gate", "{v}");
    let v = run(&s, &agent, &["--resume"], 3);
    assert_eq!(v["reason"], "code-human-gate", "{v}");
    assert_eq!(calls(&s, "implementer"), 1);
}

#[test]
fn approve_at_the_spec_and_plan_gates_sets_the_status_and_continues() {
    let s = Scenario::new();
    let agent = setup(&s, "test -f hello.txt", false);
    let v = run(&s, &agent, &["--light"], 3);
    assert_eq!(v["reason"], "spec-human-gate", "{v}");
    assert!(v["next"]["approve"].as_str().unwrap_or("").contains("--approve"), "{v}");
    let v = run(&s, &agent, &["--resume", "--approve"], 3);
    assert_eq!(v["reason"], "plan-human-gate", "{v}");
    assert!(s.read(&format!("{DIR}/spec.md")).contains("**Status:** Approved"));
    let v = run(&s, &agent, &["--resume", "--approve"], 3);
    assert_eq!(v["reason"], "code-human-gate", "{v}");
    assert!(transitions(&v).join("\n").contains("(plan-approved)"), "{v}");
    let v = run(&s, &agent, &["--resume", "--approve"], 0);
    assert_eq!(v["outcome"], "done");
}

#[test]
fn bad_input_leaves_no_state_directory_behind() {
    let s = Scenario::new();
    let agent = setup(&s, "true", true);
    assert!(!s.path(".work").exists());
    let (code, _, err) = s.run(&["loop", "run", "docs/specs/nope", "--agent", &agent]);
    assert_eq!(code, 2, "{err}");
    assert_one_line_error(&err);
    assert!(!s.path(".work").exists(), "an exit 2 leaves no .work/ directory");
    // A pre-existing state directory is kept.
    std::fs::create_dir_all(s.path(".work/keep")).expect("mkdir");
    let (code, _, _) = s.run(&["loop", "run", "docs/specs/nope", "--agent", &agent]);
    assert_eq!(code, 2);
    assert!(s.path(".work/keep").is_dir());
    assert!(!s.path(".work/locks").exists());
}

#[test]
fn an_undecided_spec_review_waits_for_a_decision_too() {
    let s = Scenario::new();
    let agent = setup(&s, "test -f hello.txt", false);
    knob(&s, "spec-finding", "1");
    knob(&s, "adj-skip", "1");
    let v = run(&s, &agent, &["--full"], 3);
    assert_eq!(v["reason"], "adjudication-indeterminate", "{v}");
    assert_eq!(v["state"], "SPEC-PLAN-REVIEW");
    let v = run(&s, &agent, &["--resume", "--approve"], 3);
    assert_eq!(v["reason"], "spec-human-gate", "{v}");
    let verdict = s.read_json(&format!("{DIR}/reviews/spec-1/review-verdict.json"));
    assert_eq!(verdict["state"], "READY_WITH_RESIDUAL_RISK", "{verdict}");
    assert!(verdict["residual_risks"].to_string().contains("S1"), "{verdict}");
    assert_eq!(calls(&s, "spec-drafter"), 1, "accepting sends nothing back to the drafter");
}

#[test]
fn a_budget_stops_blocked_budget_and_the_cut_round_is_taken_back() {
    let s = Scenario::new();
    let agent = setup(&s, "test -f hello.txt", false);
    // The drafter spends the one dispatch; the spec/plan reviewer is refused.
    let v = run(&s, &agent, &["--full", "--budget-dispatches", "1"], 1);
    assert_eq!((v["outcome"].as_str(), v["reason"].as_str()), (Some("blocked"), Some("budget")), "{v}");
    assert!(v["message"].as_str().unwrap_or("").contains("the dispatches budget (1) is spent"), "{v}");
    assert_eq!((calls(&s, "spec-drafter"), calls(&s, "adversarial-reviewer")), (1, 0));

    // One more dispatch: the reviewer runs, its adjudicator is refused; the round is taken back.
    let v = run(&s, &agent, &["--resume", "--budget-dispatches", "1"], 1);
    assert_eq!(v["reason"], "budget", "{v}");
    assert_eq!((calls(&s, "adversarial-reviewer"), calls(&s, "finding-adjudicator")), (1, 0));
    assert!(!s.path(&format!("{DIR}/reviews/spec-1/review-verdict.json")).exists(), "no verdict for a cut round");

    // A bigger budget: the same round (r1) runs again and the run reaches the spec gate.
    let v = run(&s, &agent, &["--resume", "--budget-dispatches", "10"], 3);
    assert_eq!(v["reason"], "spec-human-gate", "{v}");
    assert_eq!(calls(&s, "spec-drafter"), 1, "the drafter's work was not redone");
    assert!(s.path(&format!("{DIR}/reviews/spec-1/r1-adversarial-reviewer.report.json")).exists());
    assert!(!s.path(&format!("{DIR}/reviews/spec-1/r2-adversarial-reviewer.report.json")).exists());

    let (code, _, err) = s.run(&["loop", "run", DIR, "--agent", &agent, "--resume", "--budget-usd", "0"]);
    assert_eq!(code, 2, "{err}");
    assert_one_line_error(&err);
}

#[test]
fn an_implementer_that_rewrites_the_gate_script_is_blocked_and_its_honest_twin_is_not() {
    let unconfined = fallback_only(refused::FROZEN);
    let s = Scenario::new();
    s.write("gate.sh", "test -f hello.txt\n");
    let agent = setup(&s, "sh gate.sh", true);
    knob(&s, "impl-rewrite", "gate.sh|exit 0\\n");
    let v = start(&s, &agent, &[], 1);
    assert_eq!(v["reason"], "check-tampered", "{v}");
    assert!(v["message"].as_str().is_some_and(|m| m.contains("gate.sh")), "{v}");

    // The same trick through work.toml: the config is frozen too.
    let s = Scenario::new();
    let agent = setup(&s, "test -f hello.txt", true);
    knob(&s, "impl-rewrite", "work.toml|[gates]\\ntest = \"true\"\\n");
    let v = start(&s, &agent, &[], 1);
    assert_eq!(v["reason"], "check-tampered", "{v}");

    drop(unconfined);
    // The honest twin writes the code (and may add a test); the gate stays.
    let s = Scenario::new();
    s.write("gate.sh", "test -f hello.txt\n");
    let agent = setup(&s, "sh gate.sh", true);
    let v = start(&s, &agent, &[], 3);
    assert_eq!(v["reason"], "code-human-gate", "{v}");
}

#[test]
fn a_resume_runs_the_gates_pinned_when_the_run_started() {
    let s = Scenario::new();
    let agent = setup(&s, "test -f hello.txt", true);
    knob(&s, "impl-rewrite", "other.txt|not the greeting\\n");
    let v = run(&s, &agent, &[], 3);
    assert_eq!(v["reason"], "spec-human-gate", "{v}");
    // While the run waits, the gate in work.toml is weakened (as an agent could).
    s.write("work.toml", "[gates]\ntest = \"true\"\n");
    let v = run(&s, &agent, &["--resume"], 3);
    assert_eq!(v["reason"], "plan-human-gate", "{v}");
    let (code, out, err) = s.run(&["loop", "run", DIR, "--agent", &agent, "--json", "--resume"]);
    assert_eq!(code, 1, "an implementer that never writes hello.txt never passes the pinned gate\n{out}\n{err}");
    assert!(err.contains("running the pinned ones"), "{err}");
    let runner = s.read_json(&format!("{DIR}/loop-run.json"));
    assert_eq!(runner["last_gates"][0]["command"], "test -f hello.txt", "{runner}");
    assert_eq!(runner["last_gates"][0]["green"], false);
}

#[test]
fn the_approved_spec_rewritten_after_plan_locked_blocks_the_code_phase() {
    let s = Scenario::new();
    let agent = setup(&s, "test -f hello.txt", true);
    knob(&s, "impl-rewrite", &format!("{DIR}/spec.md|# Hello\\n\\n**Status:** Approved\\n\\nPrint nothing at all.\\n"));
    let v = start(&s, &agent, &[], 1);
    assert_eq!(v["reason"], "approved-artifacts-changed", "{v}");
    assert!(v["message"].as_str().is_some_and(|m| m.contains("spec.md")), "{v}");
}

#[test]
fn a_bad_queue_is_exit_2_before_any_dispatch_or_state() {
    let s = Scenario::new();
    let agent = setup(&s, "true", true);
    let free = std::net::TcpListener::bind("127.0.0.1:0").expect("bind").local_addr().expect("addr").port();
    let nobody = format!("nats://127.0.0.1:{free}");
    for q in ["localhost:4222", "nats://h", nobody.as_str()] {
        let (code, _, err) = s.run(&["loop", "run", DIR, "--agent", &agent, "--light", "--queue", q]);
        assert_eq!(code, 2, "{q}: {err}");
        assert_one_line_error(&err);
        assert!(err.contains("queue"), "{q}: {err}");
        assert!(!s.path(".work").exists(), "{q}: an exit 2 leaves no .work/ directory");
        assert!(!s.path(&format!("{DIR}/engine-state.json")).exists(), "{q}: no run was started");
        assert!(log(&s).is_empty(), "{q}: nothing was dispatched");
    }
}
