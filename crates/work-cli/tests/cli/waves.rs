//! `work implement --concurrency N`: a plan's independent tasks in parallel, each in its own
//! worktree, merged back by the engine in plan order — honest plans, conflicts, liars that
//! write outside their worktree or delete a sibling's ref, a killed run resumed, bad input.

use crate::implement::{agent, implement, repo_with_plan};
use crate::support::{Scenario, assert_one_line_error, fallback_only, refused};

/// Why the tests whose scripted agents watch the user's tree or a sibling's worktree (to wait for
/// each other, or to kill `work`) run unconfined: a confined task sees its own worktree only.
const WATCHES_SIBLINGS: &str = "scripted agents that watch the user's tree or a sibling's worktree to time themselves; a confined task sees only its own worktree";
use serde_json::Value;

/// Helpers the wave agents share: waiting (bounded) for something another task does, and
/// where the user's tree and the run's refs are from inside a task's worktree.
const WAVE: &str = r#"
import subprocess
def wait_for(cond, what):
    for _ in range(1200):
        if cond():
            return
        time.sleep(0.05)
    print('gave up waiting for ' + what)
    sys.exit(3)
def git(*args):
    return subprocess.run(['git'] + list(args), capture_output=True, text=True)
def user_root():
    common = git('rev-parse', '--path-format=absolute', '--git-common-dir').stdout.strip()
    return os.path.dirname(common)
RUN = os.path.basename(os.path.dirname(os.getcwd()))
def ref_of(task):
    return 'refs/work/' + RUN + '/' + task
def has_ref(task):
    return git('rev-parse', '-q', '--verify', ref_of(task)).returncode == 0
def implementers():
    return sum(1 for l in open(LOG) if json.loads(l)['role'] == 'implementer')
"#;

fn wave_agent(s: &Scenario, body: &str) -> String {
    agent(s, &format!("{WAVE}\n{body}"))
}

fn events(s: &Scenario, r: &Value) -> Vec<Value> {
    let id = r["run_id"].as_str().expect("run id");
    s.read(&format!(".work/runs/{id}/events.jsonl")).lines().map(|l| serde_json::from_str(l).expect("event")).collect()
}

fn kinds<'a>(ev: &'a [Value], kind: &str) -> Vec<&'a Value> {
    ev.iter().filter(|e| e["kind"] == kind).collect()
}

fn implementer_runs(s: &Scenario, task: &str) -> usize {
    std::fs::read_to_string(s.path(".agent-state/log"))
        .unwrap_or_default()
        .lines()
        .map(|l| serde_json::from_str::<Value>(l).expect("log line"))
        .filter(|l| l["role"] == "implementer" && l["task"] == task)
        .count()
}

fn three_tasks() -> Scenario {
    repo_with_plan(&[
        ("1", "First file", "Create `t1.txt`."),
        ("2", "Second file", "Create `t2.txt`."),
        ("3", "Third file", "Create `t3.txt`."),
    ])
}

#[test]
fn independent_tasks_run_at_once_in_worktrees_and_merge_in_plan_order() {
    let s = three_tasks();
    // Each implementer waits until all three have started: run one after another, the first
    // would wait in vain and the run would not be DONE.
    let a = wave_agent(
        &s,
        "if role == 'implementer':\n    open(state_path('cwd-' + tid), 'w').write(os.getcwd())\n    wait_for(lambda: implementers() >= 3, 'every implementer')\n    write('t' + tid + '.txt', 'task ' + tid + '\\n')\n    out(DONE)",
    );
    let test = "test -f t1.txt && test -f t2.txt && test -f t3.txt";
    let r = implement(&s, &a, test, &["--concurrency", "3"], 0);
    assert_eq!(r["status"], "DONE", "{r}");
    for t in ["1", "2", "3"] {
        assert_eq!(s.read(&format!("t{t}.txt")), format!("task {t}\n"));
        let cwd = s.read(&format!(".agent-state/cwd-{t}"));
        assert!(cwd.contains("/.git/work/trees/"), "task {t} ran in a worktree of the engine's: {cwd}");
        assert!(!std::path::Path::new(&cwd).exists(), "a merged task's worktree is removed: {cwd}");
    }
    let ev = events(&s, &r);
    let merged: Vec<&str> = kinds(&ev, "wave.merged").iter().map(|e| e["task_id"].as_str().unwrap_or("")).collect();
    assert_eq!(merged, ["1", "2", "3"], "merged in plan order");
    let refs = s.git(&["for-each-ref", "--format=%(refname)", "refs/work/"]);
    assert_eq!(refs.lines().count(), 3, "each result kept on its ref: {refs}");
    assert_eq!(s.git(&["status", "--porcelain", "--", "shared.txt"]), "", "untouched paths stay untouched");
}

#[test]
fn two_tasks_editing_the_same_lines_block_the_second_and_keep_its_ref() {
    let s = repo_with_plan(&[
        ("1", "One", "Change `shared.txt` to say one."),
        ("2", "Two", "Change `shared.txt` to say two."),
        ("3", "After two", "Depends on: 2\nCreate `t3.txt`."),
    ]);
    let a = wave_agent(
        &s,
        "if role == 'implementer' and tid in ('1', '2'):\n    write('shared.txt', {'1': 'one\\n', '2': 'two\\n'}[tid])\n    out(DONE)\nif role == 'implementer':\n    write('t3.txt', 'x\\n')\n    out(DONE)",
    );
    let r = implement(&s, &a, "true", &["--concurrency", "2"], 1);
    assert_eq!(r["kind"], "merge-conflict", "{r}");
    assert_eq!(r["tasks"][0]["status"], "DONE");
    assert_eq!(r["tasks"][1]["status"], "BLOCKED");
    assert_eq!(r["tasks"][1]["kind"], "merge-conflict");
    assert_eq!(r["tasks"][2]["status"], "NOT_ATTEMPTED", "a task depending on an unmerged one is not run");
    assert_eq!(implementer_runs(&s, "3"), 0);
    assert_eq!(s.read("shared.txt"), "one\n", "the first in plan order is merged");
    let found = &r["tasks"][1]["findings"][0];
    let reference = found["ref"].as_str().expect("the ref is named");
    assert_eq!(s.git(&["show", &format!("{reference}:shared.txt")]), "two\n", "nothing lost: the ref keeps it");
    let wt = found["worktree"].as_str().expect("the worktree is named");
    assert_eq!(std::fs::read_to_string(format!("{wt}/shared.txt")).expect("the worktree is kept"), "two\n");
    let reason = r["tasks"][1]["reason"].as_str().unwrap_or("");
    assert!(reason.contains("git diff ") && reason.contains(reference), "{reason}");
}

#[test]
fn a_task_writing_into_the_users_tree_is_caught_and_nothing_is_merged() {
    let _unconfined = fallback_only(refused::OUTSIDE);
    let s = repo_with_plan(&[("1", "One", "Create `t1.txt`."), ("2", "Two", "Create `t2.txt`.")]);
    let a = wave_agent(
        &s,
        "if role == 'implementer':\n    write('t' + tid + '.txt', tid + '\\n')\n    if tid == '1':\n        open(os.path.join(user_root(), 'stray.txt'), 'w').write('x\\n')\n    out(DONE)",
    );
    let r = implement(&s, &a, "true", &["--concurrency", "2"], 1);
    assert_eq!(r["status"], "BLOCKED", "{r}");
    assert_eq!(r["kind"], "outside-worktree");
    assert!(r["reason"].as_str().unwrap_or("").contains("stray.txt"), "{r}");
    assert!(!s.path("t1.txt").exists() && !s.path("t2.txt").exists(), "nothing of the wave is merged");
    let refs = s.git(&["for-each-ref", "--format=%(refname)", "refs/work/"]);
    assert_eq!(refs.lines().count(), 2, "both results kept: {refs}");
    for line in refs.lines() {
        let task = line.rsplit('/').next().unwrap_or("");
        assert_eq!(s.git(&["show", &format!("{line}:t{task}.txt")]), format!("{task}\n"));
    }
}

#[test]
fn a_task_writing_into_a_siblings_worktree_is_caught_before_its_merge() {
    let _unconfined = fallback_only(refused::OUTSIDE);
    let s = repo_with_plan(&[("1", "One", "Create `t1.txt`."), ("2", "Two", "Create `t2.txt`.")]);
    let a = wave_agent(
        &s,
        "if role == 'implementer':\n    if tid == '1':\n        wait_for(lambda: has_ref('2'), 'the sibling kept its result')\n        open(os.path.join('..', '2', 'evil.txt'), 'w').write('x\\n')\n    write('t' + tid + '.txt', tid + '\\n')\n    out(DONE)",
    );
    let r = implement(&s, &a, "true", &["--concurrency", "2"], 1);
    assert_eq!(r["kind"], "outside-worktree", "{r}");
    assert_eq!(r["tasks"][0]["status"], "DONE");
    assert_eq!(r["tasks"][1]["status"], "BLOCKED");
    assert!(r["tasks"][1]["reason"].as_str().unwrap_or("").contains("evil.txt"), "{r}");
    assert!(s.path("t1.txt").exists(), "the first task, merged before, stays merged");
    assert!(!s.path("evil.txt").exists() && !s.path("t2.txt").exists(), "nothing of the written worktree is merged");
    let reference =
        r["tasks"][1]["reason"].as_str().unwrap_or("").split_whitespace().find(|w| w.starts_with("refs/work/"));
    let reference = reference.expect("the ref is named").trim_end_matches(|c: char| !c.is_alphanumeric());
    assert_eq!(s.git(&["show", &format!("{reference}:t2.txt")]), "2\n", "its kept result is intact");
}

#[test]
fn a_task_deleting_a_siblings_ref_is_caught_and_the_ref_put_back() {
    let _unconfined = fallback_only(refused::GIT);
    let s = repo_with_plan(&[("1", "One", "Create `t1.txt`."), ("2", "Two", "Create `t2.txt`.")]);
    let a = wave_agent(
        &s,
        "if role == 'implementer':\n    if tid == '1':\n        wait_for(lambda: has_ref('2'), 'the sibling kept its result')\n        git('update-ref', '-d', ref_of('2'))\n    write('t' + tid + '.txt', tid + '\\n')\n    out(DONE)",
    );
    let r = implement(&s, &a, "test -f t1.txt && test -f t2.txt", &["--concurrency", "2"], 0);
    assert_eq!(r["status"], "DONE", "{r}");
    let concerns = r["concerns"].to_string();
    assert!(concerns.contains("deleted or moved") && concerns.contains("put back"), "{concerns}");
    assert_eq!(s.read("t2.txt"), "2\n", "merged from the recorded result");
    let refs = s.git(&["for-each-ref", "--format=%(refname)", "refs/work/"]);
    assert_eq!(refs.lines().count(), 2, "the deleted ref is back: {refs}");
}

/// A task that forges a sibling's merge: it points the sibling's result ref at a commit of its
/// own making (the sibling's tree plus a file no task was judged on).
const FORGER: &str = r#"
if role == 'implementer':
    if tid == '1':
        wait_for(lambda: has_ref('2'), 'the sibling kept its result')
        env = dict(os.environ, GIT_INDEX_FILE=os.path.join(tempfile.mkdtemp(), 'forged.idx'))
        def g(*args, stdin=None):
            return subprocess.run(['git'] + list(args), input=stdin, capture_output=True, text=True, env=env).stdout.strip()
        g('read-tree', ref_of('2'))
        blob = g('hash-object', '-w', '--stdin', stdin='forged\n')
        g('update-index', '--add', '--cacheinfo', '100644,' + blob + ',backdoor.txt')
        forged = g('commit-tree', g('write-tree'), '-p', ref_of('2'), '-m', 'forged')
        git('update-ref', ref_of('2'), forged)
    write('t' + tid + '.txt', tid + '\n')
    out(DONE)
"#;

#[test]
fn a_task_forging_a_siblings_merge_is_caught_and_the_recorded_result_merged() {
    let _unconfined = fallback_only(refused::GIT);
    let s = repo_with_plan(&[("1", "One", "Create `t1.txt`."), ("2", "Two", "Create `t2.txt`.")]);
    let a = wave_agent(&s, &format!("import tempfile\n{FORGER}"));
    let r = implement(&s, &a, "test -f t1.txt && test -f t2.txt", &["--concurrency", "2"], 0);
    assert_eq!(r["status"], "DONE", "{r}");
    let concerns = r["concerns"].to_string();
    assert!(concerns.contains("deleted or moved") && concerns.contains("put back"), "{concerns}");
    assert_eq!(s.read("t2.txt"), "2\n", "merged from the recorded result");
    assert!(!s.path("backdoor.txt").exists(), "the forged commit was merged");
    let reference = format!("refs/work/{}/2", r["run_id"].as_str().expect("run id"));
    let listed = s.git(&["ls-tree", "--name-only", &reference]);
    assert!(!listed.contains("backdoor.txt"), "the ref still points at the forged commit: {listed}");
    assert!(!kinds(&events(&s, &r), "ref.restored").is_empty(), "no ref.restored event");
}

#[test]
fn honest_twins_run_at_once_without_a_finding() {
    let _unconfined = fallback_only(WATCHES_SIBLINGS);
    let s = repo_with_plan(&[("1", "One", "Create `t1.txt`."), ("2", "Two", "Create `t2.txt`.")]);
    let a = wave_agent(
        &s,
        "if role == 'implementer':\n    if tid == '1':\n        wait_for(lambda: has_ref('2'), 'the sibling kept its result')\n    write('t' + tid + '.txt', tid + '\\n')\n    out(DONE)",
    );
    let r = implement(&s, &a, "test -f t1.txt && test -f t2.txt", &["--concurrency", "2"], 0);
    assert_eq!(r["status"], "DONE", "{r}");
    assert!(!r["concerns"].to_string().contains("put back"), "{r}");
    assert!(kinds(&events(&s, &r), "wave.outside").is_empty());
}

#[test]
fn a_killed_wave_resumes_without_dispatching_a_finished_task_again() {
    let _unconfined = fallback_only(WATCHES_SIBLINGS);
    let s = repo_with_plan(&[("1", "One", "Create `t1.txt`."), ("2", "Two", "Create `t2.txt`.")]);
    // Task 2's first implementer waits until task 1's result is recorded, then kills `work`.
    let a = wave_agent(
        &s,
        r#"
def recorded():
    p = os.path.join(user_root(), '.work', 'iterations', 'it-1', 'progress.json')
    try:
        w = json.load(open(p)).get('waves') or {}
    except Exception:
        return False
    return any(t['task_id'] == '1' and t.get('result') for t in w.get('tasks', []))
if role == 'implementer':
    if tid == '2' and bump('kill') == 1:
        wait_for(recorded, 'task 1 recorded')
        locks = os.path.join(user_root(), '.work', 'locks')
        for f in os.listdir(locks):
            if f.endswith('.holder'):
                os.kill(int(open(os.path.join(locks, f)).read().split()[0]), 9)
        time.sleep(5)
        sys.exit(3)
    write('t' + tid + '.txt', tid + '\n')
    out(DONE)
"#,
    );
    let test = "test -f t1.txt && test -f t2.txt";
    let args = ["implement", "--plan", "PLAN.md", "--iter-id", "it-1", "--agent", &a, "--test-cmd", test, "--json"];
    let mut first = args.to_vec();
    first.extend(["--concurrency", "2"]);
    let (code, _, err) = s.run(&first);
    assert_ne!(code, 0, "the first run was killed: {err}");
    assert!(!s.path("t1.txt").exists(), "killed before any merge");
    let r = implement(&s, &a, test, &["--concurrency", "2"], 0);
    assert_eq!(r["status"], "DONE", "{r}");
    assert_eq!(implementer_runs(&s, "1"), 1, "a finished task is merged, never dispatched again");
    assert_eq!(implementer_runs(&s, "2"), 2, "the task in flight runs again in its worktree");
    assert_eq!(s.read("t1.txt"), "1\n");
    assert_eq!(s.read("t2.txt"), "2\n");
}

#[test]
fn a_bad_concurrency_is_one_line_and_exit_2_before_anything() {
    let s = three_tasks();
    let a = agent(&s, "");
    for bad in ["0", "x"] {
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
            "--concurrency",
            bad,
        ]);
        assert_eq!(code, 2, "--concurrency {bad}: {err}");
        assert!(out.is_empty());
        assert_one_line_error(&err);
        assert!(err.contains("--concurrency"), "{err}");
        assert!(!s.path(".work").exists(), "nothing written for --concurrency {bad}");
    }
}

#[test]
fn gc_removes_a_kept_worktree_only_once_its_work_is_exactly_on_its_ref() {
    let s = repo_with_plan(&[
        ("1", "One", "Change `shared.txt` to say one."),
        ("2", "Two", "Change `shared.txt` to say two."),
    ]);
    let a = wave_agent(
        &s,
        "if role == 'implementer':\n    write('shared.txt', {'1': 'one\\n', '2': 'two\\n'}[tid])\n    out(DONE)",
    );
    let r = implement(&s, &a, "true", &["--concurrency", "2"], 1);
    assert_eq!(r["tasks"][1]["kind"], "merge-conflict", "{r}");
    let found = &r["tasks"][1]["findings"][0];
    let (reference, wt) = (found["ref"].as_str().expect("ref"), found["worktree"].as_str().expect("worktree"));
    let gc = |when: Option<&str>, extra: &[&str]| {
        let mut args = vec!["runs", "gc", "--older-than", "1d"];
        args.extend_from_slice(extra);
        let mut cmd = s.work();
        cmd.args(&args);
        if let Some(t) = when {
            cmd.env("WORK_FAKE_CLOCK", t);
        }
        let out = cmd.output().expect("run work");
        assert_eq!(out.status.code(), Some(0), "{}", String::from_utf8_lossy(&out.stderr));
        String::from_utf8_lossy(&out.stdout).to_string()
    };
    let later = Some("2099-01-01T00:00:00Z");

    // A young run's worktree is not looked at.
    let v: Value = serde_json::from_str(&gc(None, &["--json"])).expect("gc json");
    assert_eq!(
        (v["worktrees_removed"].as_array().map(Vec::len), v["worktrees_kept"].as_array().map(Vec::len)),
        (Some(0), Some(0)),
        "{v}"
    );

    // Work in the worktree that is on no ref: kept and named, whatever the age.
    std::fs::write(format!("{wt}/notes.txt"), "unsaved\n").expect("write into the kept worktree");
    let out = gc(later, &[]);
    assert!(out.contains(&format!("kept worktree {wt} (work on no ref; look: git -C {wt} status)")), "{out}");
    assert!(std::path::Path::new(&format!("{wt}/notes.txt")).exists(), "unexported work was removed");

    // Exactly its ref's tree: a dry run names it, the real run removes the worktree, the ref stays.
    std::fs::remove_file(format!("{wt}/notes.txt")).expect("remove");
    let out = gc(later, &["--dry-run"]);
    assert!(out.contains(&format!("would remove worktree {wt} (its work is on {reference})")), "{out}");
    assert!(std::path::Path::new(wt).exists(), "a dry run removed a worktree");
    let v: Value = serde_json::from_str(&gc(later, &["--json"])).expect("gc json");
    assert_eq!(v["worktrees_removed"][0]["path"], wt, "{v}");
    assert_eq!(v["worktrees_removed"][0]["reference"], reference, "{v}");
    assert!(!std::path::Path::new(wt).exists(), "the exported worktree is still there");
    assert!(!s.git(&["worktree", "list"]).contains(wt), "git still lists the worktree");
    assert_eq!(s.git(&["show", &format!("{reference}:shared.txt")]), "two\n", "the ref keeps the work");
}
