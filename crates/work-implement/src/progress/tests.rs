use super::*;
use crate::report::TaskStatus;

fn run(dir: &Path) -> RunContext {
    RunContext::start(
        work_runtime::run::RunOptions {
            root: dir.to_path_buf(),
            state_dir: dir.join(".work"),
            clock: std::sync::Arc::new(work_runtime::clock::SystemClock),
            redactor: Default::default(),
            budget: Default::default(),
            already_spent: Default::default(),
            already_by_role: Default::default(),
            progress: work_runtime::run::ProgressSink::Silent,
        },
        "implement",
    )
    .expect("run")
}

fn fresh(iter: &str) -> Progress {
    let pf = Preflight {
        clean: true,
        head_sha: Some("h".into()),
        branch: None,
        dirty_paths: vec![],
        excluded_paths: vec![],
    };
    Progress::new(iter, Some("h".into()), pf, Some("t0".into()))
}

/// Task `n` of a plan where every task adds one file: its outcome and boundary snapshot.
fn task(n: usize) -> (TaskOutcome, Snapshot) {
    let mut o = TaskOutcome::new(&n.to_string(), &format!("task {n}"));
    o.status = TaskStatus::Done;
    o.concerns = vec![format!("task {n}: a concern")];
    let mut paths: Vec<String> = (0..=n).map(|k| format!("src/f{k:04}.rs")).collect();
    paths.push("shared.txt".into());
    paths.sort();
    let s = Snapshot {
        boundary: format!("after task {n}"),
        task_id: n.to_string(),
        sha: Some(format!("sha{n}")),
        paths,
        tree: Some(format!("t{n}")),
    };
    (o, s)
}

fn json(p: &Progress) -> Value {
    serde_json::to_value(p).expect("json")
}

fn step(r: &RunContext, p: &mut Progress, n: usize) {
    p.start_task(InProgress { task_id: n.to_string(), start: p.tree.clone() });
    save(r, p).expect("save start");
    let (o, s) = task(n);
    p.end_task(&o, Some(&s), Some(format!("t{n}")));
    save(r, p).expect("save end");
}

#[test]
fn task_steps_append_and_a_reload_is_the_same_record() {
    let dir = tempfile::tempdir().expect("tempdir");
    let r = run(dir.path());
    let mut p = fresh("it-1");
    snapshot(&r, &mut p).expect("snapshot");
    let mut snapshots = 0;
    let mut last_snapshot = std::fs::read(path(&r.state_dir, "it-1")).expect("read");
    for n in 0..200 {
        step(&r, &mut p, n);
        let now = std::fs::read(path(&r.state_dir, "it-1")).expect("read");
        if now != last_snapshot {
            snapshots += 1;
            last_snapshot = now;
        }
        if n % 17 == 0 || n > 195 {
            let back = load(&r.state_dir, "it-1").expect("load").expect("some");
            assert_eq!(json(&back), json(&p), "after task {n}");
        }
    }
    assert!(snapshots < 20, "a long plan grows by appending: {snapshots} snapshots in 200 tasks");
    // A boundary names the paths it added, not every dirty path: records do not grow.
    let log = std::fs::read_to_string(log_path(&r.state_dir, "it-1")).expect("log");
    let longest = log.lines().map(str::len).max().unwrap_or(0);
    assert!(longest < 1024, "a task's record stays small: {longest} bytes");
    // A task redone after a crash replaces its earlier outcome and snapshot.
    let (mut o, s) = task(199);
    o.status = TaskStatus::Blocked;
    p.end_task(&o, Some(&s), Some("t199".into()));
    save(&r, &mut p).expect("save");
    let back = load(&r.state_dir, "it-1").expect("load").expect("some");
    assert_eq!(json(&back), json(&p));
    assert_eq!((back.ended.len(), back.snapshots.len()), (200, 200));
    assert_eq!(back.ended.last().map(|t| t.status), Some(TaskStatus::Blocked));
    // Finished: the last snapshot holds everything and a later run starts afresh.
    p.finished = true;
    save(&r, &mut p).expect("finish");
    assert!(load(&r.state_dir, "it-1").expect("load").is_none());
    let whole: Value = serde_json::from_slice(&std::fs::read(path(&r.state_dir, "it-1")).expect("read")).expect("json");
    assert_eq!(whole["ended"].as_array().map(Vec::len), Some(200), "the documented file is whole at the end");
}

#[test]
fn a_torn_step_is_not_a_change_outside_a_run() {
    let dir = tempfile::tempdir().expect("tempdir");
    let r = run(dir.path());
    work_runtime::fsx::digests::install(&r.state_dir);
    let mut p = fresh("it-1");
    p.preflight.excluded_paths = (0..100).map(|k| format!("{k:0>100}")).collect();
    snapshot(&r, &mut p).expect("snapshot");
    step(&r, &mut p, 0);
    let committed = json(&p);
    p.start_task(InProgress { task_id: "1".into(), start: Some("t0".into()) });
    save(&r, &mut p).expect("save");
    // The start of task 1 torn by a crash mid-append: not recorded, not refused.
    let log = log_path(&r.state_dir, "it-1");
    let bytes = std::fs::read(&log).expect("log");
    std::fs::write(&log, &bytes[..bytes.len() - 7]).expect("tear");
    let mut back = load(&r.state_dir, "it-1").expect("a torn tail is read").expect("some");
    assert_eq!(json(&back), committed);
    // The rerun starts task 1 again; then half a line by hand, then read.
    back.start_task(InProgress { task_id: "1".into(), start: Some("t0".into()) });
    save(&r, &mut back).expect("save again");
    use std::io::Write;
    let mut f = std::fs::OpenOptions::new().append(true).open(&log).expect("log");
    f.write_all(br#"{"seq": 4, "end": {"outcome": {"id": "1""#).expect("half a line");
    drop(f);
    let again = load(&r.state_dir, "it-1").expect("half a line is read").expect("some");
    assert_eq!(json(&again), json(&back));
    assert_eq!(again.start_of("1"), Some(Some("t0".into())));
}

#[test]
fn a_torn_record_and_a_stale_log_are_ignored() {
    let dir = tempfile::tempdir().expect("tempdir");
    let r = run(dir.path());
    let mut p = fresh("it-1");
    // A snapshot larger than the records below: none of them compacts the log.
    p.preflight.excluded_paths = (0..100).map(|k| format!("{k:0>100}")).collect();
    snapshot(&r, &mut p).expect("snapshot");
    step(&r, &mut p, 0);
    p.start_task(InProgress { task_id: "1".into(), start: Some("t0".into()) });
    save(&r, &mut p).expect("save");
    let committed = json(&p);
    // A torn record after it: dropped.
    use std::io::Write;
    let mut f = std::fs::OpenOptions::new().append(true).open(log_path(&r.state_dir, "it-1")).expect("log");
    f.write_all(br#"{"seq": 4, "end": {"outcome": {"id": "1""#).expect("tear");
    drop(f);
    let back = load(&r.state_dir, "it-1").expect("load").expect("some");
    assert_eq!(json(&back), committed);
    assert_eq!(back.start_of("1"), Some(Some("t0".into())), "the task in progress is known");
    // The next record after a torn one starts on a line of its own and is read.
    let mut back = back;
    let (o, s) = task(1);
    back.end_task(&o, Some(&s), Some("t1".into()));
    save(&r, &mut back).expect("save");
    let again = load(&r.state_dir, "it-1").expect("load").expect("some");
    assert_eq!(json(&again), json(&back));
    // A record out of sequence ends the replay.
    let log = log_path(&r.state_dir, "it-1");
    let text = std::fs::read_to_string(&log).expect("log");
    let skipped = text.replacen("\"seq\":2", "\"seq\":7", 1);
    std::fs::write(&log, skipped).expect("write");
    let cut = read(&r.state_dir, "it-1").expect("read").expect("some");
    assert_eq!(cut.ended.len(), 0, "nothing after a gap is replayed");
    // A snapshot replaced: the log no longer extends it and is ignored.
    let snap = path(&r.state_dir, "it-1");
    let text = std::fs::read_to_string(&snap).expect("read").replace("\"t0\"", "\"t-other\"");
    std::fs::write(&snap, text).expect("write");
    let stale = read(&r.state_dir, "it-1").expect("read").expect("some");
    assert_eq!((stale.tree.as_deref(), stale.ended.len()), (Some("t-other"), 0));
}

#[test]
fn unsorted_boundary_paths_are_kept_whole() {
    let (_, prev) = task(1);
    let mut s = prev.clone();
    s.paths = vec!["z".into(), "a".into()];
    let rec = BoundaryRecord::of(&s, Some(&prev));
    assert_eq!(rec.into_snapshot(Some(&prev)), s);
    let (_, next) = task(2);
    let rec = BoundaryRecord::of(&next, Some(&prev));
    assert_eq!(rec.paths_added, vec!["src/f0002.rs".to_string()]);
    assert!(rec.paths_removed.is_empty() && rec.paths.is_none());
    assert_eq!(rec.into_snapshot(Some(&prev)), next);
}
