//! Loop tests with a scripted in-process agent.

use super::commit::read_archive;
use super::*;
use crate::session::{Meta, init_session};
use async_trait::async_trait;
use std::sync::{Arc, Mutex};
use work_runtime::budget::Budget;
use work_runtime::dispatch::{Agent, AgentError, AgentReply, DispatchRequest, InvokeOptions};
use work_runtime::run::{ProgressSink, RunOptions};

type Step = Box<dyn Fn(&Path, u32) -> Result<serde_json::Value, String> + Send + Sync>;

struct Scripted {
    steps: Mutex<Vec<Step>>,
    seen: Mutex<Vec<u64>>,
}

#[async_trait]
impl Agent for Scripted {
    fn describe(&self) -> String {
        "scripted".into()
    }
    async fn invoke(&self, req: &DispatchRequest, _o: InvokeOptions) -> Result<AgentReply, AgentError> {
        let n = req.context["iteration"].as_u64().unwrap_or(99);
        self.seen.lock().expect("lock").push(n);
        let step = {
            let mut s = self.steps.lock().expect("lock");
            if s.is_empty() { None } else { Some(s.remove(0)) }
        };
        let Some(step) = step else {
            return Err(AgentError::Failed {
                reason: "no more steps".into(),
                raw: String::new(),
                usage: Default::default(),
            });
        };
        match step(Path::new(&req.cwd), req.attempt) {
            Ok(document) => Ok(AgentReply { raw: document.to_string(), document, usage: Default::default() }),
            Err(reason) => Err(AgentError::Failed { reason, raw: String::new(), usage: Default::default() }),
        }
    }
}

fn repo() -> tempfile::TempDir {
    let d = tempfile::tempdir().expect("tempdir");
    let g = Git::new(d.path());
    g.run(&["init", "-q"]).expect("init");
    g.run(&["-c", "user.email=a@b", "-c", "user.name=a", "commit", "-q", "--allow-empty", "-m", "x"]).expect("commit");
    std::fs::write(d.path().join(".git/info/exclude"), ".work/\n").expect("exclude");
    d
}

fn meta(verify: Option<&str>, max: u32, mode: Mode) -> Meta {
    let mut m = crate::session::tests_support::meta("s");
    m.verify = verify.map(str::to_string);
    m.max = max;
    m.mode = mode;
    m
}

fn edit(path: &'static str, status: &'static str) -> Step {
    Box::new(move |root: &Path, _| {
        let p = root.join(path);
        let old = std::fs::read_to_string(&p).unwrap_or_default();
        std::fs::write(&p, format!("{old}x\n")).map_err(|e| e.to_string())?;
        Ok(json!({"status": status, "summary": format!("edited {path}"), "changes_claimed": [path]}))
    })
}

fn say(doc: serde_json::Value) -> Step {
    Box::new(move |_: &Path, _| Ok(doc.clone()))
}

fn run_ctx(root: &Path) -> RunContext {
    run_from(root, Default::default())
}

/// A run that starts from what the session spent before (as `work until resume` does).
fn run_from(root: &Path, already_spent: work_runtime::budget::Spent) -> RunContext {
    RunContext::start(
        RunOptions {
            root: root.to_path_buf(),
            state_dir: root.join(".work"),
            clock: Arc::new(work_runtime::clock::SystemClock),
            redactor: Default::default(),
            budget: Budget::default(),
            already_spent,
            already_by_role: Default::default(),
            progress: ProgressSink::Silent,
        },
        "until",
    )
    .expect("run")
}

async fn go(root: &Path, meta: Meta, steps: Vec<Step>) -> (LoopOutcome, Session, Vec<u64>) {
    let state = root.join(".work");
    let loaded = Session::load(&state.join("sessions").join(&meta.id));
    let run = run_from(root, loaded.as_ref().map(|s| s.meta.spent).unwrap_or_default());
    let agent = Arc::new(Scripted { steps: Mutex::new(steps), seen: Mutex::new(vec![]) });
    let d = Dispatcher::new(
        agent.clone(),
        run.events.clone(),
        run.budget.clone(),
        "until",
        root.to_path_buf(),
        Duration::from_secs(30),
    );
    let mut session = match loaded {
        Ok(s) => s,
        Err(_) => init_session(&state, meta, &|p, t| run.write_text(p, t)).expect("init"),
    };
    let env = LoopEnv {
        run: &run,
        dispatcher: &d,
        model: "m".into(),
        effort: "low".into(),
        verify_timeout: Duration::from_secs(30),
    };
    let out = drive(&env, &mut session).await.expect("drive");
    let seen = agent.seen.lock().expect("lock").clone();
    (out, session, seen)
}

#[tokio::test(flavor = "multi_thread")]
async fn verify_failing_then_passing() {
    let d = repo();
    let steps = vec![
        edit("a.txt", "continue"),
        edit("a.txt", "continue"),
        edit("a.txt", "done"),
        Box::new(|root: &Path, _: u32| {
            std::fs::write(root.join("ok"), "").map_err(|e| e.to_string())?;
            Ok(json!({"status": "done", "summary": "made ok", "changes_claimed": ["ok"]}))
        }) as Step,
    ];
    let (out, s, seen) = go(d.path(), meta(Some("test -e ok"), 10, Mode::Auto), steps).await;
    assert_eq!(out.status, SessionStatus::Done, "{out:?}");
    assert_eq!(out.iterations, 4);
    assert_eq!(seen, vec![1, 2, 3, 4]);
    let master = std::fs::read_to_string(s.master_path()).expect("master");
    assert!(master.contains("verify-failed"), "{master}");
    assert!(s.archive_path(4).exists());
    assert!(out.summary.len() <= 25);
}

#[tokio::test(flavor = "multi_thread")]
async fn stall_rules() {
    let d = repo();
    let empty = || say(json!({"status": "continue", "summary": "looked around"}));
    let (out, _, _) = go(d.path(), meta(Some("false"), 10, Mode::Auto), vec![empty(), empty(), empty()]).await;
    assert_eq!(out.status, SessionStatus::Blocked);
    assert_eq!(out.iterations, 2);
    assert!(out.stopped_reason.contains("changed nothing"), "{}", out.stopped_reason);

    let d = repo();
    let b = |f: &'static str| -> Step {
        Box::new(move |root: &Path, _| {
            std::fs::write(root.join(f), "y").map_err(|e| e.to_string())?;
            Ok(json!({"status": "continue", "summary": "tried", "blocker": "The DB is down!", "changes_claimed": [f]}))
        })
    };
    let (out, _, _) = go(d.path(), meta(Some("false"), 10, Mode::Auto), vec![b("x"), b("y"), b("z")]).await;
    assert_eq!(out.status, SessionStatus::Blocked);
    assert_eq!(out.iterations, 2);
    assert!(out.stopped_reason.contains("same blocker"), "{}", out.stopped_reason);
}

#[tokio::test(flavor = "multi_thread")]
async fn done_reports_whose_verify_fails_obey_the_stall_rules() {
    // Always `done`, never a change, verify failing: two empty reports ⇒ blocked, not max.
    let d = repo();
    let done = || say(json!({"status": "done", "summary": "surely done"}));
    let (out, s, seen) = go(d.path(), meta(Some("false"), 6, Mode::Auto), vec![done(), done(), done()]).await;
    assert_eq!(out.status, SessionStatus::Blocked, "{}", out.stopped_reason);
    assert_eq!(out.iterations, 2);
    assert_eq!(seen, vec![1, 2]);
    assert!(out.stopped_reason.contains("changed nothing"), "{}", out.stopped_reason);
    let master = std::fs::read_to_string(s.master_path()).expect("master");
    assert!(master.contains("- decision: verify-failed (exit code 1); stalled (two empty reports)"), "{master}");

    // continue / done alternating, claiming a file it never touches.
    let d = repo();
    let c = || say(json!({"status": "continue", "summary": "x", "changes_claimed": ["src/x.rs"]}));
    let dn = || say(json!({"status": "done", "summary": "x", "changes_claimed": ["src/x.rs"]}));
    let (out, _, _) = go(d.path(), meta(Some("false"), 8, Mode::Auto), vec![c(), dn(), c(), dn()]).await;
    assert_eq!((out.status, out.iterations), (SessionStatus::Blocked, 2));

    // The same blocker twice on `done` reports that change the tree.
    let d = repo();
    let b = |f: &'static str| -> Step {
        Box::new(move |root: &Path, _| {
            std::fs::write(root.join(f), "y").map_err(|e| e.to_string())?;
            Ok(json!({"status": "done", "blocker": "The DB is down", "changes_claimed": [f]}))
        })
    };
    let (out, _, _) = go(d.path(), meta(Some("false"), 8, Mode::Auto), vec![b("x"), b("y"), b("z")]).await;
    assert_eq!((out.status, out.iterations), (SessionStatus::Blocked, 2), "{}", out.stopped_reason);
    assert!(out.stopped_reason.contains("same blocker"), "{}", out.stopped_reason);

    // A done that changes the tree each time is progress: max-reached, not stalled.
    let d = repo();
    let (out, _, _) =
        go(d.path(), meta(Some("false"), 3, Mode::Auto), vec![edit("a", "done"), edit("a", "done"), edit("a", "done")])
            .await;
    assert_eq!(out.status, SessionStatus::MaxReached);
}

#[tokio::test(flavor = "multi_thread")]
async fn outside_git_claims_are_unverifiable_and_not_progress() {
    let d = tempfile::tempdir().expect("tempdir");
    let ghost = || say(json!({"status": "continue", "summary": "x", "changes_claimed": ["src/ghost.rs"]}));
    let (out, s, _) = go(d.path(), meta(Some("false"), 5, Mode::Auto), vec![ghost(), ghost(), ghost()]).await;
    assert_eq!((out.status, out.iterations), (SessionStatus::Blocked, 2), "{}", out.stopped_reason);
    assert!(out.stopped_reason.contains("no verifiable change"), "{}", out.stopped_reason);
    let master = std::fs::read_to_string(s.master_path()).expect("master");
    assert!(master.contains("claimed `src/ghost.rs`: unverifiable (not a git work tree); not progress"), "{master}");
}

#[tokio::test(flavor = "multi_thread")]
async fn false_claims_are_not_progress() {
    let d = repo();
    let liar =
        || say(json!({"status": "continue", "summary": "rewrote everything", "changes_claimed": ["src/lib.rs"]}));
    let (out, s, _) = go(d.path(), meta(Some("false"), 10, Mode::Auto), vec![liar(), liar()]).await;
    assert_eq!(out.status, SessionStatus::Blocked, "a lie is an empty continue");
    let master = std::fs::read_to_string(s.master_path()).expect("master");
    assert!(master.contains("claimed `src/lib.rs` but git shows no change"), "{master}");
}

#[tokio::test(flavor = "multi_thread")]
async fn max_reached_and_human_gate_resume() {
    let d = repo();
    let (out, _, _) =
        go(d.path(), meta(Some("false"), 2, Mode::Auto), vec![edit("a", "continue"), edit("a", "continue")]).await;
    assert_eq!(out.status, SessionStatus::MaxReached);
    assert_eq!(out.iterations, 2);

    let d = repo();
    let (out, _, _) = go(d.path(), meta(Some("test -e b"), 5, Mode::HumanGate), vec![edit("a", "continue")]).await;
    assert_eq!(out.status, SessionStatus::Paused);
    assert_eq!(out.iterations, 1);
    let (out, _, seen) = go(d.path(), meta(Some("test -e b"), 5, Mode::HumanGate), vec![edit("b", "done")]).await;
    assert_eq!(out.status, SessionStatus::Done);
    assert_eq!(out.iterations, 2);
    assert_eq!(seen, vec![2]);
}

#[tokio::test(flavor = "multi_thread")]
async fn dropped_and_failed_dispatches_stop_without_counting() {
    let d = repo();
    let junk = || say(json!({"nope": 1}));
    let (out, s, _) =
        go(d.path(), meta(Some("false"), 5, Mode::Auto), vec![edit("a", "continue"), junk(), junk()]).await;
    assert_eq!(out.status, SessionStatus::InvalidReport);
    assert_eq!(out.iterations, 1);
    assert_eq!(s.meta.iteration_count, 1);
    assert!(!s.archive_path(2).exists());
    let d = repo();
    let (out, _, _) = go(d.path(), meta(Some("false"), 5, Mode::Auto), vec![]).await;
    assert_eq!(out.status, SessionStatus::Failed);
    assert_eq!(out.iterations, 0);
}

#[tokio::test(flavor = "multi_thread")]
async fn a_merge_lost_to_a_crash_is_rolled_forward_once() {
    let d = repo();
    let (out, mut s, _) = go(d.path(), meta(Some("false"), 5, Mode::HumanGate), vec![edit("a", "continue")]).await;
    assert_eq!(out.iterations, 1);
    // Simulate a kill between the commit of iteration 1 (its record appended to the log) and
    // everything after it: the snapshot is still the empty ledger, the meta still says 0.
    let r1: IterationRecord = read_archive(&s, 1).expect("archive");
    let run = run_ctx(d.path());
    let mut store = crate::store::LedgerStore::new(&s.dir);
    store.snapshot(&run, &Ledger::default()).expect("snapshot");
    store.commit_iteration(&run, &r1).expect("commit");
    std::fs::remove_file(s.archive_path(1)).expect("rm archive");
    // And a kill in the middle of iteration 2 (started, never merged).
    s.meta.iteration_count = 0;
    s.meta.in_progress = Some(2);
    s.meta.mode = Mode::Auto;
    s.meta.verify = Some("test -e b".into());
    s.save_meta("t".into(), &|p, t| work_runtime::fsx::write_atomic(p, t.as_bytes())).expect("meta");
    // The rolled-forward iteration paused the session: this run ends with that stop.
    let (out, mut s, seen) = go(d.path(), meta(Some("test -e b"), 5, Mode::Auto), vec![]).await;
    assert_eq!((out.status, out.iterations), (SessionStatus::Paused, 1), "{}", out.stopped_reason);
    assert!(seen.is_empty(), "iteration 1 is rolled forward from the log's record, not redone");
    assert!(s.archive_path(1).exists(), "the archive is written again from the log's record");
    s.meta.in_progress = Some(2);
    s.meta.mode = Mode::Auto;
    s.save_meta("t".into(), &|p, t| work_runtime::fsx::write_atomic(p, t.as_bytes())).expect("meta");
    let (out, s, seen) = go(d.path(), meta(Some("test -e b"), 5, Mode::Auto), vec![edit("b", "done")]).await;
    assert_eq!(out.status, SessionStatus::Done, "{}", out.stopped_reason);
    assert_eq!(seen, vec![2], "iteration 2 is redone with the same number");
    let text = std::fs::read_to_string(s.master_path()).expect("master");
    assert_eq!(text.matches("### Iteration 01").count(), 1, "{text}");
    assert_eq!(text.matches("### Iteration 02").count(), 1, "{text}");
    assert!(text.contains("interrupted before it was merged"));
}

#[tokio::test(flavor = "multi_thread")]
async fn a_commit_rolled_forward_keeps_its_spending() {
    let d = repo();
    let (out, s, _) = go(d.path(), meta(Some("test -e b"), 5, Mode::HumanGate), vec![edit("a", "continue")]).await;
    assert_eq!(out.iterations, 1);
    let after_one = s.meta.clone();
    assert_eq!(after_one.spent.dispatches, 1);
    let mut s = s;
    s.meta.mode = Mode::Auto;
    s.save_meta("t".into(), &|p, t| work_runtime::fsx::write_atomic(p, t.as_bytes())).expect("meta");
    let (out, s, _) = go(d.path(), meta(Some("test -e b"), 5, Mode::Auto), vec![edit("b", "done")]).await;
    assert_eq!((out.status, out.iterations), (SessionStatus::Done, 2), "{}", out.stopped_reason);
    let spent = s.meta.spent;
    assert_eq!(spent.dispatches, 2);
    // A kill after iteration 2 committed and before `meta.md` said so: the meta of iteration 1.
    let mut s = s;
    s.meta = after_one;
    s.meta.mode = Mode::Auto;
    s.save_meta("t".into(), &|p, t| work_runtime::fsx::write_atomic(p, t.as_bytes())).expect("meta");
    let (out, s, seen) = go(d.path(), meta(Some("test -e b"), 5, Mode::Auto), vec![]).await;
    assert_eq!((out.status, out.iterations), (SessionStatus::Done, 2), "{}", out.stopped_reason);
    assert!(seen.is_empty(), "iteration 2 is rolled forward, not redone");
    assert_eq!(s.meta.spent, spent, "the rolled-forward iteration's dispatch is counted");
    let back = Session::load(&s.dir).expect("load");
    assert_eq!(back.meta.spent, spent, "and recorded in meta.md");
}

#[tokio::test(flavor = "multi_thread")]
async fn a_session_from_before_the_log_resumes_from_master_md_and_its_archives() {
    let d = repo();
    let (out, mut s, _) = go(d.path(), meta(Some("false"), 5, Mode::HumanGate), vec![edit("a", "continue")]).await;
    assert_eq!(out.iterations, 1);
    // The old format: no ledger.json / ledger.jsonl, master.md behind the archives.
    std::fs::remove_file(s.dir.join(crate::store::SNAPSHOT_FILE)).expect("rm snapshot");
    std::fs::remove_file(s.dir.join(crate::store::LOG_FILE)).expect("rm log");
    std::fs::write(s.master_path(), Ledger::default().render(&s.meta)).expect("write");
    s.meta.mode = Mode::Auto;
    s.meta.verify = Some("test -e b".into());
    s.save_meta("t".into(), &|p, t| work_runtime::fsx::write_atomic(p, t.as_bytes())).expect("meta");
    let (out, s, seen) = go(d.path(), meta(Some("test -e b"), 5, Mode::Auto), vec![edit("b", "done")]).await;
    assert_eq!((out.status, seen), (SessionStatus::Done, vec![2]), "{}", out.stopped_reason);
    let text = std::fs::read_to_string(s.master_path()).expect("master");
    assert_eq!(text.matches("### Iteration 01").count(), 1, "{text}");
    assert!(s.dir.join(crate::store::SNAPSHOT_FILE).exists(), "the next snapshot starts the log");
}

#[tokio::test(flavor = "multi_thread")]
async fn a_long_session_keeps_the_ledger_and_the_brief_within_budget() {
    // 125 iterations, each with a decision, a false claim and a real edit: master.md stays
    // within its line budget, the newest decisions verbatim, the brief stops growing, and
    // committing an iteration appends to the log instead of rewriting the ledger.
    let d = repo();
    let total = 125u32;
    let steps: Vec<Step> = (1..=total)
        .map(|n| -> Step {
            Box::new(move |root: &Path, _| {
                std::fs::write(root.join("a.txt"), format!("{n}\n")).map_err(|e| e.to_string())?;
                let brief = std::fs::read_to_string(root.join(".work/sessions/s/handoff.md")).unwrap_or_default();
                std::fs::write(root.join(format!(".work/brief-{n}.len")), brief.len().to_string())
                    .map_err(|e| e.to_string())?;
                Ok(json!({"status": "continue", "summary": format!("step {n}: edited a.txt"),
                          "changes_claimed": ["a.txt", "ghost.rs"],
                          "decisions": [format!("decision number {n}: keep the format of a.txt stable")],
                          "next_steps": [format!("step {}", n + 1)]}))
            })
        })
        .collect();
    let (out, s, seen) = go(d.path(), meta(Some("false"), total, Mode::Auto), steps).await;
    assert_eq!((out.status, out.iterations), (SessionStatus::MaxReached, total), "{}", out.stopped_reason);
    assert_eq!(seen.len(), total as usize);
    let master = std::fs::read_to_string(s.master_path()).expect("master");
    let lines = master.lines().count();
    assert!(lines <= LEDGER_LINE_LIMIT, "master.md has {lines} lines at iteration {total}:\n{master}");
    // The oldest decisions are folded into one line naming how many; every later one is
    // verbatim, at least the newest DECISIONS_VERBATIM.
    let fold = master.lines().find(|l| l.contains(" earlier decisions folded (iterations 1–")).expect("a fold line");
    let folded: u32 = fold.trim_start_matches("- ").split(' ').next().and_then(|c| c.parse().ok()).expect("count");
    assert!(folded >= 1 && total - folded >= crate::ledger::DECISIONS_VERBATIM as u32, "{fold}");
    for n in (folded + 1)..=total {
        assert!(master.contains(&format!("- [iter {n}] decision number {n}:")), "decision {n} verbatim:\n{master}");
    }
    // The brief stops growing: each decision line costs ~60 B, so unfolded the brief would be
    // ~9 KB at 125 and gain ~1.5 KB over the last 25 iterations.
    let brief = |n: u32| -> usize {
        std::fs::read_to_string(d.path().join(format!(".work/brief-{n}.len"))).expect("len").parse().expect("n")
    };
    let peak = |r: std::ops::RangeInclusive<u32>| r.map(brief).max().unwrap_or(0);
    let (middle, last) = (peak(50..=100), peak(101..=total));
    assert!(last <= 4096, "the brief reached {last} B after iteration 100");
    assert!(last <= middle + 400, "the brief peaked at {middle} B in 50–100 and {last} B in 101–{total}");
    let snapshots = std::fs::read_to_string(s.dir.join(crate::store::LOG_FILE)).expect("log");
    assert_eq!(snapshots.lines().count(), 1, "a stopped session's log is folded into its snapshot");
    let ledger: Ledger =
        serde_json::from_str(&std::fs::read_to_string(s.dir.join(crate::store::SNAPSHOT_FILE)).expect("snapshot"))
            .expect("the snapshot is the ledger");
    assert_eq!(ledger.merged_through, total);
}

#[tokio::test(flavor = "multi_thread")]
async fn recon_runs_read_only_first() {
    let d = repo();
    let mut m = meta(Some("test -e a"), 5, Mode::Auto);
    m.recon = true;
    let steps = vec![say(json!({"summary": "the map", "recommended_next": ["create a"]})), edit("a", "done")];
    let (out, s, seen) = go(d.path(), m, steps).await;
    assert_eq!(out.status, SessionStatus::Done);
    assert_eq!(seen, vec![0, 1]);
    assert!(s.archive_path(0).exists());
    assert!(std::fs::read_to_string(s.master_path()).expect("m").contains("## Recon"));
}

#[tokio::test(flavor = "multi_thread")]
async fn committed_changes_count_and_unverifiable_done_pauses() {
    let d = repo();
    let commit: Step = Box::new(|root: &Path, _| {
        std::fs::write(root.join("c.txt"), "x").map_err(|e| e.to_string())?;
        let g = Git::new(root);
        g.run(&["add", "c.txt"]).map_err(|e| e.to_string())?;
        g.run(&["-c", "user.email=a@b", "-c", "user.name=a", "commit", "-q", "-m", "c"]).map_err(|e| e.to_string())?;
        Ok(json!({"status": "continue", "summary": "committed c", "changes_claimed": ["c.txt"]}))
    });
    let done = say(json!({"status": "done", "summary": "all good"}));
    let (out, s, _) = go(d.path(), meta(None, 5, Mode::Auto), vec![commit, done]).await;
    assert_eq!(out.status, SessionStatus::Paused, "no verify command: a person checks");
    assert!(out.stopped_reason.starts_with("unverified-done"), "{}", out.stopped_reason);
    let r1: IterationRecord = read_archive(&s, 1).expect("archive");
    assert_eq!(r1.changed, vec!["c.txt".to_string()], "{r1:?}");
    assert!(r1.false_claims.is_empty());
}
