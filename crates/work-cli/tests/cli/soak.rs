//! The crash soak: `work` is killed (SIGKILL, through the test-only `WORK_TEST_KILL_AT=<n>`
//! hook of the runtime) at every state-changing call of a small scenario — every atomic state
//! write and every dispatch, n = 1, 2, … until a run is no longer killed — then run again the
//! way a person would (`resume`, or the same command when nothing was created), and the end
//! must be exactly the uninterrupted result: the same exit code and status, the same state
//! files (timestamps, run ids, dispatch numbers and the `Incidents` list of the ledger, which
//! records the crash, set aside), the same tree, and no committed iteration or DONE task
//! dispatched again. Each kill point is tried with a clean rerun or with a rerun killed at the
//! same call number before the clean one (a crash during the recovery): odd calls the first
//! way and even calls the second, so every call is killed once; with
//! `WORK_TEST_SOAK_EVERY_CALL=1` every call is tried both ways (twice the time).

use crate::support::{KILL_WORK, Scenario};
use std::collections::BTreeMap;
use std::path::Path;
use std::process::Output;

/// Stop looking for kill points here (a scenario has far fewer state-changing calls).
pub(crate) const MAX_CALLS: u64 = 400;

/// How one run of `work` ended.
pub(crate) enum End {
    /// Killed by the hook.
    Killed,
    /// Exited with this code and stdout.
    Exited(i32, String),
}

fn end_of(out: Output) -> End {
    use std::os::unix::process::ExitStatusExt;
    match out.status.code() {
        Some(c) => End::Exited(c, String::from_utf8_lossy(&out.stdout).into_owned()),
        None => {
            assert_eq!(out.status.signal(), Some(9), "work died of an unexpected signal: {out:?}");
            End::Killed
        }
    }
}

pub(crate) fn run(s: &Scenario, args: &[String], kill_at: Option<u64>) -> End {
    let mut c = s.work();
    c.args(args);
    match kill_at {
        Some(n) => c.env("WORK_TEST_KILL_AT", n.to_string()),
        None => c.env_remove("WORK_TEST_KILL_AT"),
    };
    end_of(c.output().expect("run work"))
}

/// Replaces every `dNNNN-` dispatch number and every RFC 3339 instant by a placeholder.
pub(crate) fn normalize(text: &str) -> String {
    let b = text.as_bytes();
    let mut out = String::with_capacity(text.len());
    let mut i = 0;
    while i < b.len() {
        let digits = |from: usize, n: usize| from + n <= b.len() && b[from..from + n].iter().all(u8::is_ascii_digit);
        if b[i] == b'd'
            && digits(i + 1, 4)
            && b.get(i + 5) == Some(&b'-')
            && (i == 0 || !b[i - 1].is_ascii_alphanumeric())
        {
            out.push_str("dNNNN-");
            i += 6;
            continue;
        }
        if digits(i, 4) && b.get(i + 4) == Some(&b'-') && digits(i + 5, 2) && b.get(i + 10) == Some(&b'T') {
            let mut j = i + 11;
            while j < b.len() && (b[j].is_ascii_digit() || b":.".contains(&b[j])) {
                j += 1;
            }
            if b.get(j) == Some(&b'Z') {
                out.push_str("<ts>");
                i = j + 1;
                continue;
            }
        }
        let ch = text[i..].chars().next().unwrap_or(' ');
        out.push(ch);
        i += ch.len_utf8();
    }
    out
}

/// Drops a markdown `## title` section (to the next `## `).
fn without_section(text: &str, title: &str) -> String {
    let mut out = Vec::new();
    let mut skip = false;
    for l in text.lines() {
        if l.starts_with("## ") {
            skip = l == format!("## {title}");
        }
        if !skip {
            out.push(l);
        }
    }
    out.join("\n")
}

/// Every file under `dir` (relative path ⇒ content), skipping `skip` top-level names.
pub(crate) fn files(dir: &Path, skip: &[&str]) -> BTreeMap<String, String> {
    fn walk(root: &Path, dir: &Path, skip: &[&str], out: &mut BTreeMap<String, String>) {
        let Ok(entries) = std::fs::read_dir(dir) else { return };
        for e in entries.flatten() {
            let p = e.path();
            let rel = p.strip_prefix(root).map(|r| r.display().to_string()).unwrap_or_default();
            // A temporary file of an interrupted atomic write is not state (`.NAME.tmp-PID-N`).
            let name = e.file_name().to_string_lossy().into_owned();
            if skip.iter().any(|s| rel == *s) || (name.starts_with('.') && name.contains(".tmp-")) {
                continue;
            }
            if p.is_dir() {
                walk(root, &p, skip, out);
            } else {
                out.insert(rel, std::fs::read_to_string(&p).unwrap_or_else(|_| "<binary>".into()));
            }
        }
    }
    let mut out = BTreeMap::new();
    walk(dir, dir, skip, &mut out);
    out
}

/// The JSON block of a `meta.md`, without the fields that differ between runs.
fn meta_json(text: &str) -> serde_json::Value {
    let start = text.find("```json\n").map(|i| i + 8).unwrap_or(0);
    let end = text[start..].find("\n```").map(|i| start + i).unwrap_or(text.len());
    let mut v: serde_json::Value = serde_json::from_str(&text[start..end]).unwrap_or(serde_json::Value::Null);
    if let Some(o) = v.as_object_mut() {
        for k in ["runs", "created", "updated", "spent", "agent"] {
            o.remove(k);
        }
    }
    v
}

/// Prints a soak's figures and its failures' first lines, then asserts it made more than `min`
/// trials and that none failed.
pub(crate) fn assert_soak(name: &str, trials: usize, min: usize, failures: &[String]) {
    eprintln!("{name}: {} failure(s) in {trials} trials", failures.len());
    for f in failures {
        eprintln!("  {}", f.lines().next().unwrap_or_default());
    }
    assert!(trials > min, "{name}: too few trials: {trials}");
    assert!(failures.is_empty(), "{name}: {} failure(s) in {trials} trials; first:\n{}", failures.len(), failures[0]);
}

/// Runs `trial(n, twice)` for n = 1, 2, … until it reports that the run was not killed, a few
/// trials at a time: odd n with a clean rerun (`twice` false), even n with a killed rerun first
/// — or every n both ways with `WORK_TEST_SOAK_EVERY_CALL=1`. Returns the trial count and the
/// failures.
pub(crate) fn soak(trial: impl Fn(u64, bool) -> Option<Result<(), String>> + Sync) -> (usize, Vec<String>) {
    let every_call = every_call();
    let stride = if every_call { 1 } else { 2 };
    let (mut trials, mut failures) = sweep(1, stride, |n| trial(n, false));
    let (t, f) = sweep(if every_call { 1 } else { 2 }, stride, |n| trial(n, true));
    trials += t;
    failures.extend(f);
    (trials, failures)
}

/// [`soak`] at every `stride`-th call (n = 1, 1 + stride, … with a clean rerun; n = 2, 2 +
/// stride, … killed twice), or at every call both ways with `WORK_TEST_SOAK_EVERY_CALL=1`: for
/// a soak whose trials cost several runs of `work` each.
pub(crate) fn soak_sampled(
    stride: u64,
    trial: impl Fn(u64, bool) -> Option<Result<(), String>> + Sync,
) -> (usize, Vec<String>) {
    if every_call() {
        return soak(trial);
    }
    let (mut trials, mut failures) = sweep(1, stride, |n| trial(n, false));
    let (t, f) = sweep(2, stride, |n| trial(n, true));
    trials += t;
    failures.extend(f);
    (trials, failures)
}

/// Runs `trial(n)` for the odd n = 1, 3, … (every n with `WORK_TEST_SOAK_EVERY_CALL=1`) until
/// it reports that the run got past the n-th call untouched: for the faults that have one way to
/// be tried (a full disk from the n-th call on). Returns the trial count and the failures.
pub(crate) fn soak_calls(trial: impl Fn(u64) -> Option<Result<(), String>> + Sync) -> (usize, Vec<String>) {
    sweep(1, if every_call() { 1 } else { 2 }, trial)
}

fn every_call() -> bool {
    std::env::var_os("WORK_TEST_SOAK_EVERY_CALL").is_some_and(|v| v == "1")
}

/// `trial(n)` for n = first, first + stride, …, a few at a time, until one reports `None`.
fn sweep(first: u64, stride: u64, trial: impl Fn(u64) -> Option<Result<(), String>> + Sync) -> (usize, Vec<String>) {
    const PAR: u64 = 3;
    let mut trials = 0;
    let mut failures = Vec::new();
    let mut n = first;
    'calls: while n <= MAX_CALLS {
        let results: Vec<Option<Result<(), String>>> = std::thread::scope(|sc| {
            let t = &trial;
            let hs: Vec<_> = (0..PAR).map(|i| sc.spawn(move || t(n + i * stride))).collect();
            hs.into_iter().map(|h| h.join().unwrap_or_else(|_| Some(Err("a trial panicked".into())))).collect()
        });
        for r in results {
            let Some(r) = r else { break 'calls };
            trials += 1;
            if let Err(e) = r {
                failures.push(e);
            }
        }
        n += PAR * stride;
    }
    (trials, failures)
}

/// What an `until` trial ended with.
#[derive(Debug, PartialEq)]
pub(crate) struct UntilEnd {
    code: i32,
    status: String,
    iterations: u64,
    reason: String,
    meta: serde_json::Value,
    state: BTreeMap<String, String>,
    tree: BTreeMap<String, String>,
}

const SLUG: &str = "soak";

/// Two iterations: `continue`, then `done` (verified). Each iteration writes its own file, so
/// a redone iteration leaves the tree as the first attempt did.
pub(crate) fn until_scenario() -> (Scenario, Vec<String>) {
    let s = Scenario::new();
    let agent = s.agent(
        "worker.py",
        r#"
n = ctx['iteration']
open(state_path('log'), 'a').write('%d\n' % n)
open('step%d.txt' % n, 'w').write('step %d\n' % n)
changes = ['step%d.txt' % n]
if n == 2:
    open('READY', 'w').write('ok\n')
    changes.append('READY')
print(json.dumps({"status": "done" if n >= 2 else "continue", "summary": "step %d" % n,
                  "changes_claimed": changes, "blocker": None, "next_steps": ["step %d" % (n + 1)],
                  "decisions": ["d%d" % n], "evidence": []}))
"#,
    );
    let args = ["until", "file READY exists", "--goal", "write the steps", "--verify", "test -e READY", "--slug", SLUG]
        .iter()
        .map(|a| a.to_string())
        .chain(["--agent".to_string(), agent, "--json".to_string()])
        .collect();
    (s, args)
}

pub(crate) fn until_end(s: &Scenario, end: End) -> UntilEnd {
    let End::Exited(code, stdout) = end else { panic!("the clean rerun was killed") };
    let v: serde_json::Value = serde_json::from_str(&stdout).unwrap_or(serde_json::Value::Null);
    let dir = s.path(&format!(".work/sessions/{SLUG}"));
    // The ledger's snapshot and log hold the incidents a crash leaves (an interrupted
    // iteration); `master.md`, their rendering, is compared without them.
    let mut state = files(&dir, &["handoff.md", "meta.md", "iteration-start.json", "ledger.json", "ledger.jsonl"]);
    for (name, text) in state.iter_mut() {
        let t = if name == "master.md" { without_section(text, "Incidents") } else { text.clone() };
        *text = normalize(&t);
    }
    UntilEnd {
        code,
        status: v["status"].as_str().unwrap_or("-").to_string(),
        iterations: v["iterations"].as_u64().unwrap_or(0),
        reason: normalize(v["stoppedReason"].as_str().unwrap_or("-")),
        meta: meta_json(&std::fs::read_to_string(dir.join("meta.md")).unwrap_or_default()),
        state,
        tree: files(s.root(), &[".git", ".work", ".agents", ".agent-state"]),
    }
}

fn log_lines(s: &Scenario) -> Vec<String> {
    std::fs::read_to_string(s.path(".agent-state/log")).unwrap_or_default().lines().map(str::to_string).collect()
}

/// The committed iteration count in the session's `meta.md` (0 when there is none).
fn committed(s: &Scenario) -> u64 {
    let text = std::fs::read_to_string(s.path(&format!(".work/sessions/{SLUG}/meta.md"))).unwrap_or_default();
    meta_json(&text)["iteration_count"].as_u64().unwrap_or(0)
}

/// The rerun a person makes after a crash: resume the session if it exists, else the same
/// command again.
pub(crate) fn until_rerun(s: &Scenario, args: &[String]) -> Vec<String> {
    if s.path(&format!(".work/sessions/{SLUG}")).exists() {
        let agent = args.iter().position(|a| a == "--agent").map(|i| args[i + 1].clone()).unwrap_or_default();
        ["until", "resume", SLUG, "--agent", &agent, "--json"].iter().map(|a| a.to_string()).collect()
    } else {
        args.to_vec()
    }
}

/// One trial: kill at `n`; optionally kill the first rerun at `n` too; then a clean rerun.
/// `None` when the run was not killed (n is past the last state-changing call).
fn until_trial(n: u64, twice: bool, baseline: &UntilEnd) -> Option<Result<(), String>> {
    let (s, args) = until_scenario();
    if let End::Exited(..) = run(&s, &args, Some(n)) {
        return None;
    }
    if twice {
        let _ = run(&s, &until_rerun(&s, &args), Some(n));
    }
    let before = committed(&s);
    let logged_before = log_lines(&s).len();
    let end = until_end(&s, run(&s, &until_rerun(&s, &args), None));
    let redone: Vec<String> = log_lines(&s)[logged_before..]
        .iter()
        .filter(|l| l.parse::<u64>().is_ok_and(|k| k <= before))
        .cloned()
        .collect();
    Some(if !redone.is_empty() {
        Err(format!("kill at {n} (twice: {twice}): committed iteration(s) {redone:?} dispatched again"))
    } else if &end != baseline {
        Err(format!("kill at {n} (twice: {twice}): ended with\n{end:#?}\ninstead of\n{baseline:#?}"))
    } else {
        Ok(())
    })
}

#[test]
fn until_survives_a_kill_at_every_state_changing_call() {
    let (s, args) = until_scenario();
    let baseline = until_end(&s, run(&s, &args, None));
    assert_eq!((baseline.code, baseline.status.as_str(), baseline.iterations), (0, "done", 2), "{baseline:#?}");
    assert_eq!(log_lines(&s), vec!["1", "2"]);
    let (trials, failures) = soak(|n, twice| until_trial(n, twice, &baseline));
    assert_soak("until soak", trials, 20, &failures);
}

// ------------------------------------------------------------------------------- implement

/// Two tasks through implementer → spec review → quality review, then the suite: task 1
/// edits a tracked file, task 2 adds one. Every answer is a function of the task, so a redone
/// task leaves the tree as the first attempt did.
pub(crate) fn implement_scenario() -> (Scenario, Vec<String>) {
    let s = Scenario::new();
    s.write("shared.txt", "base\n");
    s.write(
        "PLAN.md",
        "# Plan\n\n## Task 1: Edit shared\n\nAppend one to shared.txt.\n\n## Task 2: Add t2\n\nCreate t2.txt.\n",
    );
    s.commit("plan");
    let agent = s.agent(
        "agent.py",
        r#"
role = req['role']
tid = str(ctx.get('task_id'))
open(state_path('log'), 'a').write('%s %s %s\n' % (tid, role, ctx.get('phase', '')))
def out(d):
    print(json.dumps({'work_result': d, 'usage': {'input_tokens': 100, 'output_tokens': 10}}))
    sys.exit(0)
if role == 'implementer':
    if tid == '1':
        open('shared.txt', 'w').write('base\none\n')
    else:
        open('t2.txt', 'w').write('two\n')
    out({'status': 'DONE', 'summary': 'task %s' % tid, 'applied_changes': True})
if role == 'spec-reviewer':
    out({'status': 'compliant', 'issues': [], 'files_read': __import__('re').findall(r'^diff --git a/(\S+) ', req['prompt'], 8)})
if role == 'quality-reviewer':
    out({'verdict': 'approved', 'issues': [], 'files_read': __import__('re').findall(r'^diff --git a/(\S+) ', req['prompt'], 8)})
sys.exit(3)
"#,
    );
    let args =
        ["implement", "--plan", "PLAN.md", "--iter-id", "it-1", "--test-cmd", "test -f t2.txt", "--json", "--agent"]
            .iter()
            .map(|a| a.to_string())
            .chain([agent])
            .collect();
    (s, args)
}

/// What an `implement` trial ended with.
#[derive(Debug, PartialEq)]
pub(crate) struct ImplementEnd {
    code: i32,
    report: serde_json::Value,
    tree: BTreeMap<String, String>,
}

/// Drops what differs between runs: run ids, commit shas (each scenario's commits, and the
/// snapshots' dangling commits, carry the wall time; so does an edit's default iteration id,
/// made from HEAD). The spend stays: a resumed run counts
/// what the iteration's committed steps spent, as the uninterrupted run did.
fn scrub(v: &mut serde_json::Value) {
    match v {
        serde_json::Value::Object(o) => {
            for k in ["run_id", "sha", "snapshot_sha", "recovery", "head_sha", "iter_id"] {
                o.remove(k);
            }
            o.values_mut().for_each(scrub);
        }
        serde_json::Value::Array(a) => a.iter_mut().for_each(scrub),
        serde_json::Value::String(s) => *s = normalize(s),
        _ => {}
    }
}

pub(crate) fn implement_end(s: &Scenario, end: End) -> ImplementEnd {
    let End::Exited(code, stdout) = end else { panic!("the clean rerun was killed") };
    let root = s.root().display().to_string();
    let mut report: serde_json::Value =
        serde_json::from_str(&stdout.replace(&root, "<root>")).unwrap_or(serde_json::Value::String(stdout));
    scrub(&mut report);
    ImplementEnd { code, report, tree: files(s.root(), &[".git", ".work", ".agents", ".agent-state"]) }
}

/// The tasks the progress record says are DONE (its snapshot with its log replayed).
pub(crate) fn done_tasks(s: &Scenario) -> Vec<String> {
    let p = work_implement::progress::read(&s.path(".work"), "it-1").ok().flatten();
    p.map(|p| {
        p.ended.iter().filter(|t| t.status == work_implement::report::TaskStatus::Done).map(|t| t.id.clone()).collect()
    })
    .unwrap_or_default()
}

fn implement_trial(n: u64, twice: bool, baseline: &ImplementEnd) -> Option<Result<(), String>> {
    let (s, args) = implement_scenario();
    if let End::Exited(..) = run(&s, &args, Some(n)) {
        return None;
    }
    let done_before = done_tasks(&s);
    let logged_before = log_lines(&s).len();
    // A recovery that is not killed ends the iteration (a later run starts afresh).
    let end = match twice.then(|| run(&s, &args, Some(n))) {
        Some(e @ End::Exited(..)) => implement_end(&s, e),
        _ => implement_end(&s, run(&s, &args, None)),
    };
    let redone: Vec<String> = log_lines(&s)[logged_before..]
        .iter()
        .filter(|l| done_before.iter().any(|t| l.starts_with(&format!("{t} "))))
        .cloned()
        .collect();
    Some(if !redone.is_empty() {
        Err(format!("kill at {n} (twice: {twice}): DONE task(s) dispatched again: {redone:?}"))
    } else if &end != baseline {
        Err(format!("kill at {n} (twice: {twice}): ended with\n{end:#?}\ninstead of\n{baseline:#?}"))
    } else {
        Ok(())
    })
}

#[test]
fn implement_survives_a_kill_at_every_state_changing_call() {
    let (s, args) = implement_scenario();
    let baseline = implement_end(&s, run(&s, &args, None));
    assert_eq!((baseline.code, &baseline.report["status"]), (0, &serde_json::json!("DONE")), "{baseline:#?}");
    assert_eq!(log_lines(&s).len(), 6, "three dispatches a task");
    let (trials, failures) = soak(|n, twice| implement_trial(n, twice, &baseline));
    assert_soak("implement soak", trials, 10, &failures);
}

/// A run killed after its last write (the record finished, the report not yet printed) left
/// what the uninterrupted run leaves: the same command again prints that run's report — DONE,
/// the same stats — and dispatches nothing (it used to refuse the tree the run left as dirty).
/// Twins: a tree changed since, or another plan, is no rerun of that run and is refused as dirty.
#[test]
fn implement_killed_after_its_last_write_reruns_to_the_same_report() {
    let (s, args) = implement_scenario();
    let baseline = implement_end(&s, run(&s, &args, None));
    assert_eq!(baseline.report["stats"]["dispatches"], 6, "{baseline:#?}");
    let logged = log_lines(&s).len();
    let again = implement_end(&s, run(&s, &args, None));
    assert_eq!(again, baseline);
    assert_eq!(log_lines(&s).len(), logged, "nothing is dispatched again");
    let dirty = |s: &Scenario, args: &[String]| match run(s, args, None) {
        End::Exited(code, out) => code != 0 && out.contains("dirty-tree"),
        End::Killed => false,
    };
    let mut other = args.clone();
    let at = other.iter().position(|a| a == "test -f t2.txt").expect("the suite command");
    other[at] = "test -f t2.txt && true".into();
    assert!(dirty(&s, &other), "another request over the same tree is refused as dirty");
    s.write("shared.txt", "base\none\nmore\n");
    assert!(dirty(&s, &args), "a tree changed since the run is refused as dirty");
}

/// The error a failing state write gets from call `n` on: a full disk (`ENOSPC`) or, for every
/// other call number a soak tries, an I/O error (`EIO`) — both must stop a run the same way.
/// The variables to set and the text the error's line must carry.
pub(crate) fn write_fault(n: u64) -> ([(&'static str, String); 2], &'static str) {
    let (errno, text) = if n % 4 == 3 { ("EIO", "Input/output error") } else { ("ENOSPC", "No space left on device") };
    ([("WORK_TEST_FAIL_AT", n.to_string()), ("WORK_TEST_FAIL_ERRNO", errno.to_string())], text)
}

/// A run whose state writes fail from the n-th state-changing call on ([`write_fault`]):
/// `Ok(None)` when no write was left to fail (the run ended as the baseline did), `Ok(Some(()))`
/// when it stopped at once with one `error:` line naming the file that failed and exit 1.
pub(crate) fn full_disk_run(s: &Scenario, args: &[String], n: u64) -> Result<Option<()>, String> {
    let (vars, text) = write_fault(n);
    let out = s.work().args(args).envs(vars).output().expect("run work");
    let stderr = String::from_utf8_lossy(&out.stderr);
    let errors: Vec<&str> = stderr.lines().filter(|l| l.starts_with("error:")).collect();
    if out.status.code() == Some(0) && errors.is_empty() {
        return Ok(None);
    }
    let named = errors.first().is_some_and(|l| l.contains(text) && l.contains(".work/"));
    if out.status.code() != Some(1) || errors.len() != 1 || !named {
        return Err(format!(
            "disk full from call {n}: exit {:?}, {} error line(s) (wanted exit 1 and one line naming the file):\n{stderr}\nstdout: {}",
            out.status.code(),
            errors.len(),
            String::from_utf8_lossy(&out.stdout)
        ));
    }
    Ok(Some(()))
}

/// A full disk stops `implement` at once with one line naming the file (exit 1), at every
/// state-changing call; the same command, once the disk has room again, ends as the run that
/// never failed.
#[test]
fn implement_stops_at_a_full_disk_and_resumes_once_it_has_room() {
    let (s, args) = implement_scenario();
    let baseline = implement_end(&s, run(&s, &args, None));
    let mut failures = Vec::new();
    let mut trials = 0;
    for n in 1..MAX_CALLS {
        let (s, args) = implement_scenario();
        match full_disk_run(&s, &args, n) {
            Ok(None) => break,
            Ok(Some(())) => {
                trials += 1;
                let end = implement_end(&s, run(&s, &args, None));
                if end != baseline {
                    let again = s.work().args(&args).output().expect("run work");
                    let why = String::from_utf8_lossy(&again.stderr).into_owned();
                    failures.push(format!(
                        "disk full from call {n}: the rerun ended with ({why})\n{end:#?}\ninstead of\n{baseline:#?}"
                    ));
                }
            }
            Err(e) => failures.push(e),
        }
    }
    assert_soak("implement full disk", trials, 5, &failures);
}

// ------------------------------------------------------------------------------------ edit

/// A rename of `Foo` at its definition site and its one use site, a green build, the suite.
/// The editor writes what the description asks whatever the tree holds, so a redone edit
/// leaves the tree as the first attempt did; the rename's use sites are read before the first
/// dispatch (a redone edit must be judged by that reading, not by the tree it finds).
pub(crate) fn edit_scenario() -> (Scenario, Vec<String>) {
    edit_scenario_with("")
}

/// [`edit_scenario`] with `then` run by the editor after it wrote the edit.
fn edit_scenario_with(then: &str) -> (Scenario, Vec<String>) {
    let s = Scenario::new();
    s.write("src/lib.sh", "struct Foo\n");
    s.write("src/use.sh", "echo Foo\n");
    s.commit("lib");
    let agent = s.agent(
        "editor.py",
        &format!(
            r#"
open(state_path('log'), 'a').write('%s %s\n' % (req['role'], ctx.get('round')))
if req['role'] != 'editor':
    sys.exit(3)
open('src/lib.sh', 'w').write('struct Bar\n')
open('src/use.sh', 'w').write('echo Bar\n')
{then}
print(json.dumps({{'work_result': {{'status': 'DONE', 'applied_changes': True, 'sites': 1, 'hole': None}},
                  'usage': {{'input_tokens': 100, 'output_tokens': 10}}}}))
"#
        ),
    );
    let args = [
        "edit",
        "--description",
        "rename `Foo` to `Bar`",
        "--def-site",
        "src/lib.sh:1",
        "--build-cmd",
        "test -f src/use.sh",
        "--test-cmd",
        "grep -q Bar src/lib.sh",
        "--json",
        "--agent",
    ]
    .iter()
    .map(|a| a.to_string())
    .chain([agent])
    .collect();
    (s, args)
}

/// Whether the edit's iteration (its one record under `iterations/`) has finished.
fn edit_finished(s: &Scenario) -> bool {
    let Ok(dirs) = std::fs::read_dir(s.path(".work/iterations")) else { return false };
    dirs.flatten().any(|d| {
        let id = d.file_name().to_string_lossy().into_owned();
        work_implement::progress::read(&s.path(".work"), &id).ok().flatten().is_some_and(|p| p.finished)
    })
}

fn edit_trial(n: u64, twice: bool, baseline: &ImplementEnd) -> Option<Result<(), String>> {
    let (s, args) = edit_scenario();
    if let End::Exited(..) = run(&s, &args, Some(n)) {
        return None;
    }
    let end = match twice.then(|| run(&s, &args, Some(n))) {
        Some(e @ End::Exited(..)) => implement_end(&s, e),
        _ => {
            let finished = edit_finished(&s);
            let logged_before = log_lines(&s).len();
            let end = implement_end(&s, run(&s, &args, None));
            if finished && log_lines(&s).len() > logged_before {
                return Some(Err(format!("kill at {n} (twice: {twice}): the finished edit was dispatched again")));
            }
            end
        }
    };
    Some(if &end != baseline {
        Err(format!("kill at {n} (twice: {twice}): ended with\n{end:#?}\ninstead of\n{baseline:#?}"))
    } else {
        Ok(())
    })
}

/// `work edit` killed at every state-changing call, then the same command again (no
/// `--iter-id`: the same command over the same HEAD is the same iteration): the end is the
/// uninterrupted edit's — report, stats and tree.
#[test]
fn edit_survives_a_kill_at_every_state_changing_call() {
    let (s, args) = edit_scenario();
    let baseline = implement_end(&s, run(&s, &args, None));
    assert_eq!((baseline.code, &baseline.report["status"]), (0, &serde_json::json!("DONE")), "{baseline:#?}");
    assert_eq!(log_lines(&s), vec!["editor 0"], "one edit dispatch");
    let before = &baseline.report["detail"]["rename"]["use_sites_before"];
    assert!(before.as_u64().is_some_and(|n| n > 0), "the rename was read before the dispatch: {before}");
    let (trials, failures) = soak(|n, twice| edit_trial(n, twice, &baseline));
    assert_soak("edit soak", trials, 5, &failures);
}

/// The kill the hook cannot place: `work` dies while its editor works, the edit already in the
/// tree (the editor kills it). The same command again continues the edit — it used to refuse
/// the tree the killed run left as dirty — and ends as the uninterrupted edit did.
#[test]
fn edit_killed_while_its_editor_works_is_continued_by_the_same_command() {
    let (s, args) = edit_scenario();
    let baseline = implement_end(&s, run(&s, &args, None));
    let kill = format!(
        "if not os.path.exists(state_path('killed')):\n    open(state_path('killed'), 'w').write('1')\n{}",
        KILL_WORK.lines().map(|l| format!("    {l}")).collect::<Vec<_>>().join("\n")
    );
    let (s, args) = edit_scenario_with(&kill);
    assert!(matches!(end_of(s.output_killable(&args)), End::Killed), "the editor had work killed");
    assert_eq!(s.read("src/lib.sh"), "struct Bar\n", "the killed run left the edit in the tree");
    let end = implement_end(&s, run(&s, &args, None));
    assert_eq!(end, baseline);
}

// --------------------------------------------------------------------------------- exhaust

const EXHAUST_TASK: &str = "soak";
/// Lines gate 1 seeds: enough that the journal's snapshot outgrows `SMALL_JOURNAL`, so that
/// rounds are committed as records appended to its log, not as rewrites of the snapshot.
const SEEDED: usize = 400;

/// Gate 1 seeds [`SEEDED`] items; then one angle a round: `a`, `b` and `c` each find one new
/// item, `d` finds nothing (dry), and the pool is exhausted.
pub(crate) fn exhaust_scenario() -> (Scenario, Vec<String>) {
    let s = Scenario::new();
    let mut text: String = (1..=SEEDED).map(|i| format!("entry {i}\n")).collect();
    text.push_str("other a\nother b\nother c\n");
    s.write("src/big.txt", &text);
    s.commit("big");
    let agent = s.agent(
        "finder.py",
        &format!(
            r#"
angle = ctx['angle']
open(state_path('log'), 'a').write(angle + '\n')
line = {{'a': {a}, 'b': {b}, 'c': {c}}}.get(angle)
items = [] if line is None else [{{"id": "found-" + angle, "title": "t", "location": "src/big.txt:%d" % line,
                                  "evidence": "`other " + angle + "`"}}]
print(json.dumps({{"angle": angle, "items": items}}))
"#,
            a = SEEDED + 1,
            b = SEEDED + 2,
            c = SEEDED + 3
        ),
    );
    let args = [
        "exhaust",
        "entries",
        "--task",
        EXHAUST_TASK,
        "-k",
        "2",
        "--angles",
        "a,b,c,d",
        "--seed-oracle",
        "grep -Hn entry src/big.txt",
        "--json",
        "--agent",
    ]
    .iter()
    .map(|a| a.to_string())
    .chain([agent])
    .collect();
    (s, args)
}

fn journal_rel(ext: &str) -> String {
    format!(".work/quality-journals/work-exhaust-{EXHAUST_TASK}.{ext}")
}

/// What an `exhaust` trial ended with.
#[derive(Debug, PartialEq)]
pub(crate) struct ExhaustEnd {
    code: i32,
    master: serde_json::Value,
    journal: serde_json::Value,
    tree: BTreeMap<String, String>,
}

pub(crate) fn exhaust_end(s: &Scenario, end: End) -> ExhaustEnd {
    let End::Exited(code, stdout) = end else { panic!("the clean rerun was killed") };
    let scrubbed = |text: &str| {
        let mut v: serde_json::Value = serde_json::from_str(&normalize(text)).unwrap_or(serde_json::Value::Null);
        // What was spent counts the dispatches a crash lost and the rerun made again.
        if let Some(o) = v.as_object_mut() {
            o.remove("spent");
            o.remove("spentByRole");
        }
        v
    };
    let journal = std::fs::read_to_string(s.path(&journal_rel("json"))).unwrap_or_default();
    ExhaustEnd {
        code,
        master: scrubbed(&stdout),
        journal: scrubbed(&journal),
        tree: files(s.root(), &[".git", ".work", ".agents", ".agent-state"]),
    }
}

/// The angles the journal (its snapshot with its log replayed) records as run.
fn committed_angles(s: &Scenario) -> Vec<String> {
    work_exhaust::store::Store::load(&s.path(&journal_rel("json")))
        .ok()
        .flatten()
        .map(|(j, _)| j.angles_used)
        .unwrap_or_default()
}

/// Records appended to the journal's log after its header.
fn appended_records(s: &Scenario) -> usize {
    std::fs::read_to_string(s.path(&journal_rel("jsonl"))).map(|t| t.lines().count().saturating_sub(1)).unwrap_or(0)
}

/// One trial: kill at `n` (optionally the first rerun too), then a clean rerun of the same
/// command. Returns the outcome and whether the killed run left appended records.
fn exhaust_trial(n: u64, twice: bool, baseline: &ExhaustEnd) -> Option<(Result<(), String>, bool)> {
    let (s, args) = exhaust_scenario();
    if let End::Exited(..) = run(&s, &args, Some(n)) {
        return None;
    }
    let appended = appended_records(&s) > 0;
    if twice {
        let _ = run(&s, &args, Some(n));
    }
    let done_before = committed_angles(&s);
    let logged_before = log_lines(&s).len();
    let end = exhaust_end(&s, run(&s, &args, None));
    let redone: Vec<String> =
        log_lines(&s)[logged_before..].iter().filter(|a| done_before.contains(a)).cloned().collect();
    Some((
        if !redone.is_empty() {
            Err(format!("kill at {n} (twice: {twice}): committed angle(s) {redone:?} dispatched again"))
        } else if &end != baseline {
            Err(format!("kill at {n} (twice: {twice}): ended with\n{end:#?}\ninstead of\n{baseline:#?}"))
        } else {
            Ok(())
        },
        appended,
    ))
}

#[test]
fn exhaust_survives_a_kill_at_every_state_changing_call_over_the_appended_log() {
    let (s, args) = exhaust_scenario();
    let baseline = exhaust_end(&s, run(&s, &args, None));
    assert_eq!(baseline.code, 0, "{baseline:#?}");
    assert_eq!(baseline.master["seen"].as_array().map(Vec::len), Some(SEEDED + 3), "{:#}", baseline.master);
    assert_eq!(baseline.master["stoppedReason"], "angles-and-oracles-exhausted");
    assert_eq!(log_lines(&s), vec!["a", "b", "c", "d"]);
    let with_records = std::sync::atomic::AtomicUsize::new(0);
    let (trials, failures) = soak(|n, twice| {
        exhaust_trial(n, twice, &baseline).map(|(r, appended)| {
            if appended {
                with_records.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
            }
            r
        })
    });
    let with_records = with_records.into_inner();
    eprintln!(
        "exhaust soak: {} failure(s) in {trials} trials, {with_records} killed with appended records",
        failures.len()
    );
    for f in &failures {
        eprintln!("  {}", f.lines().next().unwrap_or_default());
    }
    assert!(trials > 10, "the hook killed too few runs: {trials}");
    // Rounds are committed by appending (the snapshot is large): kills after a commit find
    // records in the log, and the rerun must replay them.
    assert!(with_records >= 4, "only {with_records} trial(s) were killed with records in the journal's log");
    assert!(failures.is_empty(), "{} failure(s) in {trials} trials; first:\n{}", failures.len(), failures[0]);
}

// ------------------------------------------------------------------------- full disk, all

/// One full-disk trial of a workflow: every state write fails from call `n` on; the run must
/// stop at once (exit 1, one `error:` line naming the file under `.work/`), and the rerun a
/// person makes once the disk has room (`rerun`) must end as the run that never failed.
/// `None` when the run made fewer than `n` state-changing calls.
pub(crate) fn full_disk_trial<E: PartialEq + std::fmt::Debug>(
    n: u64,
    scenario: fn() -> (Scenario, Vec<String>),
    rerun: fn(&Scenario, &[String]) -> Vec<String>,
    end: fn(&Scenario, End) -> E,
    baseline: &E,
) -> Option<Result<(), String>> {
    let (s, args) = scenario();
    match full_disk_run(&s, &args, n) {
        Ok(None) => None,
        Err(e) => Some(Err(e)),
        Ok(Some(())) => {
            let got = end(&s, run(&s, &rerun(&s, &args), None));
            Some(if &got == baseline {
                Ok(())
            } else {
                Err(format!("disk full from call {n}: the rerun ended with\n{got:#?}\ninstead of\n{baseline:#?}"))
            })
        }
    }
}

/// `until`, `edit` and `exhaust` stop at a full disk at every state-changing call (each call
/// once; the calls three at a time) and end as the uninterrupted run once it has room.
#[test]
fn until_edit_and_exhaust_stop_at_a_full_disk_and_resume_once_it_has_room() {
    let mut report = Vec::new();
    let mut failures = Vec::new();
    let (s, args) = until_scenario();
    let until_base = until_end(&s, run(&s, &args, None));
    let (t, f) = soak_calls(|n| full_disk_trial(n, until_scenario, until_rerun, until_end, &until_base));
    report.push(("until", t));
    failures.extend(f);
    let (s, args) = edit_scenario();
    let edit_base = implement_end(&s, run(&s, &args, None));
    let (t, f) = soak_calls(|n| full_disk_trial(n, edit_scenario, |_, a| a.to_vec(), implement_end, &edit_base));
    report.push(("edit", t));
    failures.extend(f);
    let (s, args) = exhaust_scenario();
    let exhaust_base = exhaust_end(&s, run(&s, &args, None));
    let (t, f) = soak_calls(|n| full_disk_trial(n, exhaust_scenario, |_, a| a.to_vec(), exhaust_end, &exhaust_base));
    report.push(("exhaust", t));
    failures.extend(f);
    eprintln!("full disk: {report:?} trials, {} failure(s)", failures.len());
    for f in &failures {
        eprintln!("  {}", f.lines().next().unwrap_or_default());
    }
    for (workflow, trials) in &report {
        assert!(*trials >= 4, "{workflow}: too few writes failed: {trials}");
    }
    assert!(failures.is_empty(), "{} failure(s); first:\n{}", failures.len(), failures[0]);
}
