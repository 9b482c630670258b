//! Run history through the real binary: runs made by real `work exhaust`, `until` and
//! `implement` runs with scripted agents, then `runs list`, `show`, `report` and `runs gc`;
//! plus `init`, `completions`, `man` and `--version`.

use crate::support::{Scenario, assert_one_line_error, fallback_only, refused};
use serde_json::Value;

/// The title an agent gives its item: markup that must stay text in the report.
pub const INJECTED: &str = "<script>alert('x')</script><img src=x onerror=alert(2)>";
/// A secret in the environment that the agent echoes into its answer.
pub const SECRET: &str = "sk-history-test-0123456789";

/// A repository with a file finders can point at.
pub fn jobs_repo() -> Scenario {
    let s = Scenario::new();
    s.write("src/jobs.rs", "fn a() { transition(1); }\nfn b() { retry() }\nfn c() { lock() }\n");
    s.commit("jobs");
    s
}

/// An exhaust finder that reports tokens and cost, finds one real item (titled with markup and
/// the secret), one at a line that does not exist (gate 2 rejects it), and crashes on one angle.
pub fn lying_finder(s: &Scenario) -> String {
    s.agent(
        "finder.py",
        &format!(
            r#"
angle = ctx['angle']
if angle == 'concurrency-races':
    sys.stderr.write('finder blew up\n'); sys.exit(3)
items = []
if angle == 'error-paths':
    items = [{{"id": "retry", "title": {INJECTED:?} + ' ' + os.environ['HISTORY_API_KEY'], "location": "src/jobs.rs:2"}},
             {{"id": "ghost", "title": "moved", "location": "src/jobs.rs:99"}}]
print(json.dumps({{"work_result": {{"angle": angle, "items": items}},
                  "usage": {{"input_tokens": 100, "output_tokens": 20, "cost_usd": 0.01}}}}))
"#
        ),
    )
}

/// Runs `work exhaust` with the lying finder at `clock` and returns its master object.
pub fn exhaust_run(s: &Scenario, clock: &str) -> Value {
    let agent = lying_finder(s);
    let out = s
        .work()
        .env("WORK_FAKE_CLOCK", clock)
        .env("HISTORY_API_KEY", SECRET)
        .args([
            "exhaust",
            "retry sites",
            "-k",
            "2",
            "--angles",
            "error-paths,concurrency-races,event-emitters,migrations",
        ])
        .args(["-c", &format!("agents.liar.spec={agent:?}"), "-c", "agents.liar.env=[\"HISTORY_API_KEY\"]"])
        .args(["--agent", "liar", "--json"])
        .output()
        .expect("run work");
    let stdout = String::from_utf8_lossy(&out.stdout);
    serde_json::from_str(&stdout).unwrap_or_else(|e| panic!("exhaust --json ({e}): {stdout}"))
}

fn at(s: &Scenario, clock: &str, args: &[&str]) -> (i32, String, String) {
    let out = s.work().env("WORK_FAKE_CLOCK", clock).args(args).output().expect("run work");
    (
        out.status.code().unwrap_or(-1),
        String::from_utf8_lossy(&out.stdout).into_owned(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

fn list(s: &Scenario) -> Vec<Value> {
    s.run_json(&["runs", "list", "--json"], 0).as_array().cloned().expect("runs list --json is an array")
}

#[test]
fn an_exhaust_run_is_listed_shown_and_reported_with_agent_text_escaped_and_secrets_redacted() {
    let s = jobs_repo();
    let master = exhaust_run(&s, "2026-01-01T00:00:00Z");
    let runs = list(&s);
    assert_eq!(runs.len(), 1, "{runs:?}");
    let r = &runs[0];
    for key in ["run_id", "workflow", "started", "outcome", "dispatches", "tokens", "cost_usd"] {
        assert!(r.get(key).is_some_and(|v| !v.is_null()), "runs list --json lacks {key}: {r}");
    }
    assert_eq!(r["workflow"], "exhaust");
    assert_eq!(r["outcome"], master["stoppedReason"], "the outcome is run.end's");
    assert_eq!(r["subject"]["kind"], "task");
    let dispatches = r["dispatches"].as_u64().expect("dispatches");
    assert!(dispatches >= 4, "every angle ran, the crashing one twice: {r}");
    // Every attempt but the crashes reported 120 tokens and one cent.
    let ok = dispatches - 2;
    assert_eq!(r["tokens"].as_u64(), Some(ok * 120), "{r}");
    assert!((r["cost_usd"].as_f64().expect("cost") - ok as f64 * 0.01).abs() < 1e-9, "{r}");
    let run_id = r["run_id"].as_str().expect("id").to_string();
    let task = r["subject"]["id"].as_str().expect("task").to_string();

    // show by task name and by run id say the same; the failure's reason and the paths are there.
    let (code, by_task, err) = s.run(&["show", &task]);
    assert_eq!(code, 0, "{err}");
    let (_, by_id, _) = s.run(&["show", &run_id]);
    assert_eq!(by_task, by_id);
    assert!(by_task.contains("src/jobs.rs:2") && by_task.contains("Accepted"), "{by_task}");
    assert!(by_task.contains("src/jobs.rs:99") && by_task.contains("Rejected"), "{by_task}");
    assert!(by_task.contains("finder blew up") || by_task.contains("failed"), "failure reason shown: {by_task}");
    assert!(by_task.contains(&format!(".work/runs/{run_id}/events.jsonl")), "{by_task}");
    assert!(by_task.contains(&format!(".work/runs/{run_id}/dispatches")), "{by_task}");
    assert!(!by_task.contains(SECRET), "{by_task}");
    let v = s.run_json(&["show", &run_id, "--json"], 0);
    assert_eq!(v["run"]["run_id"], run_id.as_str());
    assert_eq!(v["detail"]["exhaust"]["accepted"][0]["location"], "src/jobs.rs:2");
    assert!(v["run"]["failures"].as_array().is_some_and(|f| f.iter().any(|x| x["outcome"] == "failed")), "{v}");

    // The report: self-contained, the charts drawn, the agent's markup inert, the secret gone.
    let out = s.path("report.html");
    let (code, stdout, err) = s.run(&["report", &run_id, "-o", out.to_str().expect("utf-8")]);
    assert_eq!(code, 0, "{err}");
    assert_eq!(stdout.trim(), out.display().to_string());
    let html = std::fs::read_to_string(&out).expect("report written");
    assert!(!html.to_ascii_lowercase().contains("<script"), "no script element, injected or not");
    assert!(!html.contains("<img"), "the agent's <img> is text");
    assert!(html.contains("&lt;script&gt;alert(&#39;x&#39;)&lt;/script&gt;"), "the title is shown, escaped");
    assert!(!html.contains(SECRET), "secrets are redacted");
    assert!(!html.contains("http://") && !html.contains("https://"), "nothing is fetched");
    assert!(html.contains("Content-Security-Policy"), "scripts and network are forbidden by the page itself");
    for chart in ["rounds", "spend", "latency"] {
        assert!(html.contains(&format!("data-chart=\"{chart}\"")), "chart {chart} missing");
    }
    assert!(html.contains("class=\"bar\""), "bars drawn");
    assert!(html.contains("gate 2 rejected"), "the gate event is marked on the chart");
    assert!(html.contains("src/jobs.rs:99") && html.contains("re-read evidence"), "accepted and rejected tables");
    // Default place: beside the run's log.
    let (code, stdout, _) = s.run(&["report", &task]);
    assert_eq!(code, 0);
    assert!(stdout.trim().ends_with(&format!(".work/runs/{run_id}/report.html")), "{stdout}");
}

fn until_worker(s: &Scenario) -> String {
    s.agent(
        "worker.py",
        r#"
n = ctx['iteration']
open('work.txt', 'a').write('step %d\n' % n)
if n == 2:
    open('READY', 'w').write('ok')
status = 'continue' if n == 1 else 'done'
print(json.dumps({"status": status, "summary": "step %d" % n, "changes_claimed": ['work.txt', 'ghost.rs'],
                  "blocker": None, "next_steps": [], "decisions": [], "evidence": []}))
"#,
    )
}

fn implement_agent(s: &Scenario) -> String {
    s.agent(
        "impl.py",
        r#"
role = req['role']
def out(d):
    print(json.dumps({'work_result': d, 'usage': {'input_tokens': 100, 'output_tokens': 10}}))
    sys.exit(0)
if role == 'implementer':
    open('hello.txt', 'w').write('hi\n')
    out({'status': 'DONE', 'summary': 'done', 'applied_changes': True})
if role == 'spec-reviewer':
    out({'status': 'compliant', 'issues': [], 'files_read': __import__('re').findall(r'^diff --git a/(\S+) ', req['prompt'], 8)})
if role == 'quality-reviewer':
    out({'verdict': 'approved', 'issues': [], 'files_read': __import__('re').findall(r'^diff --git a/(\S+) ', req['prompt'], 8)})
sys.exit(3)
"#,
    )
}

#[test]
fn until_and_implement_runs_join_the_history_newest_first_with_their_own_views() {
    let s = jobs_repo();
    exhaust_run(&s, "2026-01-01T00:00:00Z");
    let worker = until_worker(&s);
    let (code, out, err) = at(
        &s,
        "2026-01-02T00:00:00Z",
        &[
            "until",
            "file READY exists",
            "--goal",
            "make READY",
            "--verify",
            "test -e READY",
            "--agent",
            &worker,
            "--json",
        ],
    );
    assert_eq!(code, 0, "{out}\n{err}");
    let until: Value = serde_json::from_str(&out).expect("until json");
    let session = until["session_id"].as_str().expect("session id").to_string();
    s.write("PLAN.md", "# Plan\n\n## Task 1: Add greeting\n\nCreate hello.txt.\n");
    s.commit("plan");
    let agent = implement_agent(&s);
    let (code, out, err) = at(
        &s,
        "2026-01-03T00:00:00Z",
        &[
            "implement",
            "--plan",
            "PLAN.md",
            "--iter-id",
            "it-1",
            "--agent",
            &agent,
            "--test-cmd",
            "test -f hello.txt",
            "--json",
        ],
    );
    assert_eq!(code, 0, "{out}\n{err}");

    let runs = list(&s);
    let workflows: Vec<&str> = runs.iter().map(|r| r["workflow"].as_str().unwrap_or("")).collect();
    assert_eq!(workflows, ["implement", "until", "exhaust"], "newest first");
    assert_eq!(runs[1]["subject"]["id"], session.as_str());
    assert_eq!(runs[1]["outcome"], "done");
    assert_eq!(runs[0]["outcome"], "DONE");
    assert_eq!(runs[0]["tokens"], 330);

    // until: the iterations, the verify result, and the claim git does not back.
    let (code, shown, err) = s.run(&["show", &session]);
    assert_eq!(code, 0, "{err}");
    assert!(shown.contains("iteration 2: done"), "{shown}");
    assert!(shown.contains("verify passed"), "{shown}");
    assert!(shown.contains("claimed, not changed: ghost.rs"), "{shown}");
    let html_path = s.path("until.html");
    let (code, _, err) = s.run(&["report", &session, "-o", html_path.to_str().expect("utf-8")]);
    assert_eq!(code, 0, "{err}");
    let html = s.read("until.html");
    assert!(html.contains("data-chart=\"iterations\"") && html.contains("ghost.rs") && html.contains("verify passed"));

    // implement: the task timeline with its reviews, and the gates.
    let id = runs[0]["run_id"].as_str().expect("id");
    let (code, shown, err) = s.run(&["show", id]);
    assert_eq!(code, 0, "{err}");
    assert!(shown.contains("task") && shown.contains("DONE"), "{shown}");
    let (code, _, err) = s.run(&["report", id, "-o", "impl.html"]);
    assert_eq!(code, 0, "{err}");
    let html = s.read("impl.html");
    assert!(
        html.contains("<h2>Timeline</h2>") && html.contains("review") && html.contains("quality-reviewer"),
        "{html}"
    );
    assert!(html.contains("data-chart=\"spend\""));
}

#[test]
fn gc_prunes_old_runs_never_a_running_one_and_killed_runs_read_as_interrupted() {
    let s = jobs_repo();
    exhaust_run(&s, "2026-01-01T00:00:00Z");
    let real = list(&s)[0]["run_id"].as_str().expect("id").to_string();
    let log = s.read(&format!(".work/runs/{real}/events.jsonl"));
    let cut: String = log.lines().filter(|l| !l.contains("\"run.end\"")).map(|l| format!("{l}\n")).collect();
    // A run killed mid-write: no run.end, a torn last line, its process gone.
    let killed = real.rsplit_once('-').map(|(head, _)| format!("{head}-7ffffffe")).expect("id has a pid");
    s.write(&format!(".work/runs/{killed}/events.jsonl"), &format!("{cut}{{\"ts\":\"2026-01-01T00:0"));
    // A run still going: no run.end, and the pid in its id is alive (this test's own).
    let running = real.rsplit_once('-').map(|(head, _)| format!("{head}-{:x}", std::process::id())).expect("pid");
    s.write(&format!(".work/runs/{running}/events.jsonl"), &cut);

    let runs = list(&s);
    let outcome = |id: &str| runs.iter().find(|r| r["run_id"] == id).map(|r| r["outcome"].clone()).expect("listed");
    assert_eq!(outcome(&killed), "interrupted");
    assert_eq!(outcome(&running), "running");
    let (code, shown, _) = s.run(&["show", &killed]);
    assert_eq!(code, 0);
    assert!(shown.contains("Outcome: interrupted") && shown.contains("unreadable line"), "{shown}");

    // Too young to prune at the same instant.
    let (code, out, err) = at(&s, "2026-01-01T00:10:00Z", &["runs", "gc", "--older-than", "1d", "--json"]);
    assert_eq!(code, 0, "{err}");
    let r: Value = serde_json::from_str(&out).expect("gc json");
    assert_eq!(r["removed"], Value::Array(vec![]));
    // A dry run names what would go and removes nothing.
    let (code, out, err) = at(&s, "2026-01-05T00:00:00Z", &["runs", "gc", "--older-than", "1d", "--dry-run"]);
    assert_eq!(code, 0, "{err}");
    assert!(out.contains(&format!("would remove {real}")) && out.contains("2 run(s) would be removed"), "{out}");
    assert!(s.path(&format!(".work/runs/{real}/events.jsonl")).exists(), "a dry run removed a run");
    let (code, out, err) = at(&s, "2026-01-05T00:00:00Z", &["runs", "gc", "--older-than", "1d", "--json"]);
    assert_eq!(code, 0, "{err}");
    let r: Value = serde_json::from_str(&out).expect("gc json");
    assert_eq!(r["dry_run"], false);
    let mut removed: Vec<&str> = r["removed"].as_array().expect("removed").iter().filter_map(Value::as_str).collect();
    removed.sort();
    let mut expected = vec![killed.as_str(), real.as_str()];
    expected.sort();
    assert_eq!(removed, expected);
    assert_eq!(r["kept_running"][0], running.as_str());
    assert!(!s.path(&format!(".work/runs/{real}")).exists());
    assert!(s.path(&format!(".work/runs/{running}/events.jsonl")).exists());

    let (code, _, err) = s.run(&["runs", "gc", "--older-than", "a while"]);
    assert_eq!(code, 2);
    assert_one_line_error(&err);
}

#[test]
fn show_and_report_refuse_what_is_not_a_run() {
    let s = jobs_repo();
    for args in [vec!["show", "nope"], vec!["report", "nope"], vec!["show", "../../etc"]] {
        let (code, _, err) = s.run(&args);
        assert_eq!(code, 2, "{args:?}");
        assert_one_line_error(&err);
    }
    let (code, out, _) = s.run(&["runs", "list"]);
    assert_eq!(code, 0);
    assert!(out.contains("No runs yet"), "{out}");
}

#[test]
fn init_writes_a_commented_work_toml_once_and_ignores_the_state_dir() {
    let s = Scenario::new();
    s.write("Cargo.toml", "[package]\nname = \"x\"\n");
    s.write(".gitignore", "target/");
    let (code, out, err) = s.run(&["init"]);
    assert_eq!(code, 0, "{err}");
    assert!(out.contains("work.toml"), "{out}");
    let toml = s.read("work.toml");
    assert!(
        toml.contains("agent = \"claude\"") && toml.contains("# [roles.finder]") && toml.contains("[gates]"),
        "{toml}"
    );
    assert!(toml.contains("test = \"cargo test\""), "gates guessed from Cargo.toml: {toml}");
    assert_eq!(s.read(".gitignore").matches(".work/").count(), 1);
    assert!(s.read(".gitignore").starts_with("target/\n"), "the missing newline is added before our line");
    // The written file is a valid work.toml (every command loads it).
    let (code, _, err) = s.run(&["runs", "list"]);
    assert_eq!(code, 0, "{err}");

    s.write("work.toml", "agent = \"mine\"\n");
    let (code, _, err) = s.run(&["init"]);
    assert_eq!(code, 2);
    assert_one_line_error(&err);
    assert!(err.contains("--force"), "{err}");
    assert_eq!(s.read("work.toml"), "agent = \"mine\"\n", "an existing work.toml is never replaced without --force");
    let (code, _, err) = s.run(&["init", "--force"]);
    assert_eq!(code, 0, "{err}");
    assert!(s.read("work.toml").contains("# work.toml"));
    assert_eq!(s.read(".gitignore").matches(".work/").count(), 1, "idempotent");
}

#[test]
fn completions_man_and_version_come_from_the_command_definitions() {
    let s = Scenario::new();
    for shell in ["bash", "zsh", "fish"] {
        let (code, out, err) = s.run(&["completions", shell]);
        assert_eq!(code, 0, "{err}");
        for sub in ["exhaust", "runs", "report", "init"] {
            assert!(out.contains(sub), "{shell} completion lacks {sub}");
        }
    }
    let (code, _, err) = s.run(&["completions", "tcsh"]);
    assert_eq!(code, 2);
    assert_one_line_error(&err);
    let (code, man, _) = s.run(&["man"]);
    assert_eq!(code, 0);
    assert!(man.contains(".TH work 1") && man.contains("runs"), "{man}");
    let (code, _, err) = s.run(&["man", "--out-dir", "man1"]);
    assert_eq!(code, 0, "{err}");
    assert!(s.read("man1/work-report.1").contains("work\\-report"));
    // Nested commands have their own pages, named as git names them.
    for page in ["work-loop-run", "work-runs-gc", "work-agents-check", "work-loop-cohort-approve-plan"] {
        assert!(s.read(&format!("man1/{page}.1")).contains(&page.replace('-', "\\-")), "{page}");
    }
    assert!(!s.path("man1/work-help.1").exists() && !s.path("man1/work-loop-help.1").exists());
    let (code, v, _) = s.run(&["--version"]);
    assert_eq!(code, 0);
    let v = v.trim();
    assert!(v.starts_with("work 0.1.0"), "{v}");
    // Built from a git checkout: the commit follows in parentheses.
    let sha = v.split_once('(').map(|(_, r)| r.trim_end_matches(')')).unwrap_or("");
    assert!(sha.len() >= 7 && sha.chars().all(|c| c.is_ascii_hexdigit()), "{v}");
}

#[test]
fn gc_removes_a_planted_symlinked_run_as_a_link_and_never_what_it_points_at() {
    // An agent with write access plants an "old run" under .work/runs/ that is a symlink to a
    // directory it wants gone; gc must remove the link, not the directory behind it.
    let s = jobs_repo();
    let precious = tempfile::tempdir().expect("outside dir");
    std::fs::write(
        precious.path().join("events.jsonl"),
        "{\"ts\":\"2020-01-01T00:00:00Z\",\"kind\":\"run.start\",\"workflow\":\"exhaust\"}\n{\"ts\":\"2020-01-01T00:00:01Z\",\"kind\":\"run.end\",\"outcome\":\"done\"}\n",
    )
    .expect("write");
    std::fs::write(precious.path().join("keep.txt"), "mine").expect("write");
    std::fs::create_dir_all(s.path(".work/runs")).expect("mkdir");
    let planted = s.path(".work/runs/20200101T000000000Z-exhaust-7ffffffe");
    std::os::unix::fs::symlink(precious.path(), &planted).expect("symlink");
    // The honest twin: a real old run is pruned as usual.
    exhaust_run(&s, "2026-01-01T00:00:00Z");
    let (code, out, err) = at(&s, "2026-03-01T00:00:00Z", &["runs", "gc", "--older-than", "7d", "--json"]);
    assert_eq!(code, 0, "{err}");
    let r: Value = serde_json::from_str(&out).expect("gc json");
    assert_eq!(r["removed"].as_array().map(Vec::len), Some(2), "{r}");
    assert!(std::fs::symlink_metadata(&planted).is_err(), "the link is gone");
    assert_eq!(std::fs::read_to_string(precious.path().join("keep.txt")).expect("still there"), "mine");
    assert!(precious.path().join("events.jsonl").exists());
    assert_eq!(list(&s).len(), 0);
}

/// A run that ended blocked, whose log a later agent rewrites to say `done`: the history reads
/// the run as `altered` (its log no longer matches the seal recorded when it ended), never as
/// done. The honest twin: an untouched log reads as it ended.
#[test]
fn a_finished_runs_log_rewritten_later_reads_altered_never_as_its_forged_outcome() {
    let s = jobs_repo();
    let blocker =
        s.agent("blocker.py", "print(json.dumps({'status': 'blocked', 'summary': 'no', 'blocker': 'need a person'}))");
    let (code, out, err) = at(
        &s,
        "2026-01-01T00:00:00Z",
        &[
            "until",
            "file READY exists",
            "--goal",
            "make READY",
            "--verify",
            "test -e READY",
            "--agent",
            &blocker,
            "--json",
        ],
    );
    assert_eq!(code, 1, "{out}\n{err}");
    let runs = list(&s);
    assert_eq!(runs.len(), 1, "{runs:?}");
    assert_eq!(runs[0]["outcome"], "blocked", "the honest twin: an untouched log reads as it ended: {runs:?}");
    let id = runs[0]["run_id"].as_str().expect("run id").to_string();
    let path = format!(".work/runs/{id}/events.jsonl");
    let forged = s.read(&path).replace("\"outcome\":\"blocked\"", "\"outcome\":\"done\"");
    assert!(forged.contains("\"outcome\":\"done\""), "the forgery took: {forged}");
    s.write(&path, &forged);
    let runs = list(&s);
    assert_eq!(
        (runs[0]["outcome"].as_str(), runs[0]["state"].as_str()),
        (Some("altered"), Some("altered")),
        "{runs:?}"
    );
    let (code, out, err) = at(&s, "2026-01-01T00:00:00Z", &["show", &id]);
    assert_eq!(code, 0, "{out}\n{err}");
    assert!(out.contains("altered") && !out.contains("Outcome: done"), "{out}");
}

/// A run that ended on a state write that failed (its journal's directory replaced by a file
/// mid-run) is never shown as `Failures: none`: `work show` names the error it ended on.
#[test]
fn show_names_the_write_failure_a_run_ended_on() {
    // The finder stands in for a failing disk; with the sandbox it never sees `.work/`.
    let _unconfined = fallback_only(refused::STATE);
    let s = jobs_repo();
    let agent = s.agent(
        "finder.py",
        r#"
import shutil
d = os.path.join(req.get('cwd') or '.', '.work/quality-journals')
if os.path.isdir(d):
    shutil.rmtree(d); open(d, 'w').write('x')
print(json.dumps({"angle": ctx['angle'], "items": []}))
"#,
    );
    let (code, _, err) = s.run(&["exhaust", "x", "-k", "2", "--angles", "a,b", "--agent", &agent]);
    assert_eq!(code, 1, "{err}");
    let (code, show, _) = s.run(&["show", "x"]);
    assert_eq!(code, 0);
    assert!(!show.contains("Failures: none"), "{show}");
    assert!(show.contains("Failures (1):\n  the run ended on an error (error): write journal"), "{show}");
}

/// A backend that reports no usage has an unknown cost: the summary, `work show`, `runs list`
/// and the report say `unknown`, never `$0.0000`; a finder that reports its cost is priced.
#[test]
fn an_unknown_price_reads_unknown_never_zero_dollars() {
    let s = jobs_repo();
    let agent = s.agent("finder.py", "print(json.dumps({'angle': ctx['angle'], 'items': []}))");
    let (code, _, err) = s.run(&["exhaust", "x", "-k", "2", "--angles", "a,b", "--agent", &agent]);
    assert_eq!(code, 0, "{err}");
    assert!(err.contains("spent: 2 dispatch(es) · 0 tokens (0 in, 0 out) · cost unknown\n"), "{err}");
    let (_, show, _) = s.run(&["show", "x"]);
    assert!(show.contains("Spent: 2 dispatch(es) · 0 tokens · unknown (finder 2 · 0 tok · unknown)"), "{show}");
    let (_, list, _) = s.run(&["runs", "list"]);
    assert!(list.lines().nth(1).is_some_and(|l| l.trim_end().ends_with("unknown")), "{list}");
    let (code, _, _) = s.run(&["report", "x", "-o", "r.html"]);
    assert_eq!(code, 0);
    assert!(s.read("r.html").contains("<dt>cost</dt><dd>unknown</dd>"), "the report says unknown");
    for text in [&err, &show, &list] {
        assert!(!text.contains("$0.0000"), "{text}");
    }
    // A finder that reports its cost is priced.
    let priced = s.agent(
        "priced.py",
        "print(json.dumps({'work_result': {'angle': ctx['angle'], 'items': []}, 'usage': {'input_tokens': 10, 'output_tokens': 2, 'cost_usd': 0.5}}))",
    );
    let (_, _, err) = s.run(&["exhaust", "y", "-k", "2", "--angles", "a,b", "--agent", &priced]);
    assert!(err.contains("· 24 tokens (20 in, 4 out) · $1.0000\n"), "{err}");
}

/// The points of the polyline of `series` in the chart `chart` of a rendered report.
fn polyline_points(html: &str, chart: &str) -> Vec<(f64, f64)> {
    let svg =
        html.split(&format!("data-chart=\"{chart}\"")).nth(1).expect("the chart").split("</svg>").next().unwrap_or("");
    let points = svg.split("<polyline").nth(1).expect("a line").split("points=\"").nth(1).expect("points");
    points
        .split('"')
        .next()
        .unwrap_or("")
        .split_whitespace()
        .map(|p| {
            let (x, y) = p.split_once(',').expect("x,y");
            (x.parse().expect("x"), y.parse().expect("y"))
        })
        .collect()
}

/// The report of a run whose parallel finders end in another order than they started: the
/// cumulative spend line never runs backwards in time; the outcome pill says the run has gaps;
/// the failures come before the run's big tables.
#[test]
fn the_report_s_spend_line_runs_forward_and_its_pill_and_failures_say_what_went_wrong() {
    let s = jobs_repo();
    let agent = s.agent(
        "finder.py",
        r#"
angle = ctx['angle']
if angle == 'c':
    sys.stderr.write('finder blew up\n'); sys.exit(3)
if angle == 'a':
    time.sleep(1.5)
print(json.dumps({"work_result": {"angle": angle, "items": []},
                  "usage": {"input_tokens": 10, "output_tokens": 2, "cost_usd": 0.1}}))
"#,
    );
    let (code, _, err) =
        s.run(&["exhaust", "x", "-k", "2", "--angles", "a,b,c", "--angles-per-round", "3", "--agent", &agent]);
    assert_eq!(code, 1, "angle c was given up: {err}");
    let (code, _, err) = s.run(&["report", "x", "-o", "r.html"]);
    assert_eq!(code, 0, "{err}");
    let html = s.read("r.html");
    let pts = polyline_points(&html, "spend");
    assert!(pts.len() >= 5, "{pts:?}");
    for w in pts.windows(2) {
        assert!(w[1].0 >= w[0].0, "the spend line runs backwards in time: {pts:?}");
        assert!(w[1].1 <= w[0].1, "a cumulative line only rises (SVG y grows downwards): {pts:?}");
    }
    let pill = html.split("<span class=\"outcome").nth(1).and_then(|p| p.split("</span>").next()).expect("the pill");
    assert_eq!(pill, " warn\" data-state=\"warn\">angles-and-oracles-exhausted · 1 gap(s)", "the pill says the gap");
    let failures = html.find("<h2>Failures</h2>").expect("failures");
    let exhaust = html.find("<h2>Exhaust: ").expect("the exhaust section");
    assert!(failures < exhaust, "failures come first");
}
