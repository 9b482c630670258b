//! `work loop run --queue`: the review round (reviewers, then the finding-adjudicator per
//! report) on `work worker`s in their own clones, through a real nats-server
//! (docs/scale-out.md). Each request carries the coordinator's change against HEAD; the
//! worker replays it in a scratch worktree, refuses what it cannot replay, and catches a
//! reviewer that writes there.
//!
//! Needs `WORK_TEST_NATS_SERVER` (`scripts/test-tools/nats.sh start`); fails loudly without it.

use crate::ext_nats::{Cluster, Proc, nats_server, spawn_work};
use crate::loop_run::{DIR, calls, knob, run, setup, start, transitions};
use crate::support::Scenario;
use serde_json::Value;
use std::path::{Path, PathBuf};

/// A worker in its own clone of `s`, running every role with `agent`, its agents confined as
/// `isolation` says.
fn worker(s: &Scenario, url: &str, agent: &str, isolation: &str) -> (tempfile::TempDir, PathBuf, Proc) {
    let clones = tempfile::tempdir().expect("clones");
    let dir = clones.path().join("w");
    s.git(&["clone", "-q", &s.root().display().to_string(), &dir.display().to_string()]);
    let args = [
        "--isolation",
        isolation,
        "worker",
        "--queue",
        url,
        "--agent",
        agent,
        "--concurrency",
        "3",
        "--name",
        "w",
        "--ack-wait",
        "2",
        "--max-deliver",
        "2",
    ];
    let log = clones.path().join("w.log");
    let p = spawn_work(&dir, &args, &log, &s.path(".agent-state"));
    (clones, dir, p)
}

fn status(dir: &Path) -> Value {
    let path = dir.join(".work/workers/w.json");
    std::fs::read_to_string(&path).ok().and_then(|t| serde_json::from_str(&t).ok()).unwrap_or_default()
}

/// `work loop run` with `--queue` on every invocation: the first pauses at the spec gate, the
/// second at the plan gate, the third runs on and ends with `code`.
fn start_queued(s: &Scenario, agent: &str, url: &str, first: &[&str], code: i32) -> Value {
    fn with<'a>(extra: &[&'a str], url: &'a str) -> Vec<&'a str> {
        let mut v = extra.to_vec();
        v.extend(["--queue", url]);
        v
    }
    let v = run(s, agent, &with(first, url), 3);
    assert_eq!(v["reason"], "spec-human-gate", "{v}");
    let v = run(s, agent, &with(&["--resume"], url), 3);
    assert_eq!(v["reason"], "plan-human-gate", "{v}");
    run(s, agent, &with(&["--resume"], url), code)
}

/// What a review verdict says, without the run's own names.
fn verdict(s: &Scenario, unit: &str) -> Value {
    let v = s.read_json(&format!("{DIR}/reviews/{unit}/review-verdict.json"));
    let reviewers: Vec<Value> = v["reviewers"]
        .as_array()
        .expect("reviewers")
        .iter()
        .map(|r| serde_json::json!([r["role"], r["outcome"], r["sustained"], r["refuted"], r["indeterminate"]]))
        .collect();
    serde_json::json!({"state": v["state"], "reviewers": reviewers, "target": v["target"]["diff_fingerprint"]})
}

#[test]
fn ext_nats_review_loop_run_reviews_on_a_worker_with_the_local_verdicts() {
    nats_server();
    // The same run locally, meanwhile (it shares nothing with the queue run).
    let local = std::thread::spawn(|| {
        let local = Scenario::new();
        let local_agent = setup(&local, "test -f hello.txt", true);
        knob(&local, "review-finding", "1");
        knob(&local, "sustain-rounds", "1");
        let expected = start(&local, &local_agent, &["--full"], 3);
        (local, expected)
    });

    let cluster = Cluster::start(1);
    let url = cluster.url();
    let s = Scenario::new();
    let agent = setup(&s, "test -f hello.txt", true);
    knob(&s, "review-finding", "1");
    knob(&s, "sustain-rounds", "1");
    let (_clones, dir, _w) = worker(&s, &url, &agent, "auto");
    let v = start_queued(&s, &agent, &url, &["--full"], 3);
    let (local, expected) = local.join().expect("the local run");
    assert_eq!(expected["reason"], "code-human-gate", "{expected}");
    assert_eq!((&v["reason"], &v["state"]), (&expected["reason"], &expected["state"]), "{v}");
    assert_eq!(transitions(&v), transitions(&expected));
    let units: Vec<&str> =
        ["spec-1", "code-1"].into_iter().filter(|u| local.path(&format!("{DIR}/reviews/{u}")).exists()).collect();
    assert!(units.contains(&"code-1"), "{units:?}");
    for unit in units {
        assert_eq!(verdict(&s, unit), verdict(&local, unit), "{unit}");
    }
    let roles = ["adversarial-reviewer", "quality-reviewer", "finding-adjudicator", "implementer", "spec-drafter"];
    let count = |s: &Scenario| roles.map(|r| calls(s, r));
    assert_eq!(count(&s), count(&local), "every role ran as often as locally ({roles:?})");
    assert!(calls(&s, "finding-adjudicator") >= 3, "a finding was sustained, fixed and re-reviewed");
    // Every review dispatch ran on the worker, once; none was refused.
    let w = status(&dir);
    let reviews: u32 = roles[..3].iter().map(|r| calls(&s, r)).sum();
    assert_eq!((w["answered"].as_u64(), w["refused"].as_u64()), (Some(u64::from(reviews)), Some(0)), "{w}");
    assert!(!s.read("hello.txt").contains("reviewer"), "the coordinator's tree is the implementer's");
}

#[test]
fn ext_nats_review_a_worker_without_the_commit_refuses_until_it_has_it() {
    // Confined, the implementer's commit lands in its private git directory and the
    // coordinator's HEAD never moves: the missing commit is the fallback's case.
    let _unconfined = crate::support::fallback_only(crate::support::refused::GIT);
    nats_server();
    let cluster = Cluster::start(1);
    let url = cluster.url();
    let s = Scenario::new();
    let agent = setup(&s, "test -f hello.txt", true);
    // The implementer commits its work: the coordinator's HEAD is a commit no worker has.
    knob(&s, "impl-commit", "1");
    let (_clones, dir, _w) = worker(&s, &url, &agent, "auto");
    let v = start_queued(&s, &agent, &url, &["--light"], 1);
    assert_eq!(v["reason"], "reviewer-missing", "{v}");
    let message = v["message"].as_str().unwrap_or("");
    assert!(message.contains("is not in this clone"), "{message}");
    assert_eq!(calls(&s, "adversarial-reviewer"), 0, "no reviewer ran on a tree it could not rebuild");
    let w = status(&dir);
    assert!(w["refused"].as_u64().is_some_and(|n| n >= 2), "{w}");

    // The worker fetches the commit: the resumed run asks again, and this time it runs.
    s.git(&["-C", &dir.display().to_string(), "fetch", "-q", "origin"]);
    let v = run(&s, &agent, &["--resume", "--queue", &url], 3);
    assert_eq!(v["reason"], "code-human-gate", "{v}");
    assert!(calls(&s, "adversarial-reviewer") >= 1);
    assert!(status(&dir)["answered"].as_u64().is_some_and(|n| n >= 2), "{}", status(&dir));
}

/// A code reviewer (read-only) that appends to hello.txt where it runs, on a worker whose
/// agents run as `isolation` says: the run ends `reviewer-missing` with `says` in its message.
fn a_writing_reviewer_on_a_worker(isolation: &str, says: &[&str]) {
    nats_server();
    let cluster = Cluster::start(1);
    let url = cluster.url();
    let s = Scenario::new();
    let agent = setup(&s, "test -f hello.txt", true);
    knob(&s, "reviewer-edit", "1");
    let (_clones, dir, _w) = worker(&s, &url, &agent, isolation);
    let v = start_queued(&s, &agent, &url, &["--light"], 1);
    assert_eq!(v["reason"], "reviewer-missing", "{v}");
    let message = v["message"].as_str().unwrap_or("");
    assert!(says.iter().all(|m| message.contains(m)), "{message}");
    assert_eq!(calls(&s, "adversarial-reviewer"), 1, "it ran, on the worker");
    assert_eq!(calls(&s, "finding-adjudicator"), 0, "its report was not used");
    assert!(!s.read("hello.txt").contains("the reviewer was here"), "the coordinator's tree is untouched");
    let w = status(&dir);
    assert_eq!(w["failed"].as_u64(), Some(1), "{w}");
    // The scratch worktree is gone: the worker's checkout lists only itself.
    let list = s.git(&["-C", &dir.display().to_string(), "worktree", "list", "--porcelain"]);
    assert_eq!(list.matches("worktree ").count(), 1, "{list}");
}

#[test]
fn ext_nats_review_a_reviewer_that_writes_its_scratch_tree_is_caught() {
    // Unconfined, the worker sees the write afterwards.
    a_writing_reviewer_on_a_worker("none", &["read-only violated on worker w", "hello.txt"]);
}

#[test]
fn ext_nats_review_a_confined_reviewer_cannot_write_its_scratch_tree() {
    // In the sandbox the kernel refuses the write: the reviewer fails, its report is not used.
    a_writing_reviewer_on_a_worker("required", &["Read-only file system", "hello.txt"]);
}
