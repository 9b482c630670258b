//! Scale-out on a real NATS JetStream cluster (docs/scale-out.md): three nodes and three
//! `work worker`s on loopback, an exhaust of a few hundred finder dispatches through the queue
//! with faults injected (a worker killed mid-dispatch, a node killed, the coordinator killed and
//! resumed, a finder slower than its timeout), compared with the same exhaust run locally.
//!
//! Needs `WORK_TEST_NATS_SERVER` (set by `scripts/test-tools/nats.sh start`, which
//! `scripts/test.sh` runs); fails loudly without it.

use crate::support::{Scenario, assert_one_line_error};
use serde_json::Value;
use std::io::{Read, Write};
use std::path::{Path, PathBuf};
use std::process::{Child, Stdio};
use std::time::{Duration, Instant};

pub(crate) fn nats_server() -> PathBuf {
    let p = std::env::var_os("WORK_TEST_NATS_SERVER").map(PathBuf::from).unwrap_or_else(|| {
        panic!("WORK_TEST_NATS_SERVER is not set: run the suite with scripts/test.sh (scripts/test-tools/nats.sh installs nats-server)")
    });
    assert!(p.is_file(), "WORK_TEST_NATS_SERVER={} is not a file: run scripts/test-tools/nats.sh start", p.display());
    p
}

fn free_port() -> u16 {
    let l = std::net::TcpListener::bind("127.0.0.1:0").expect("bind a free port");
    l.local_addr().expect("addr").port()
}

/// A process killed (SIGKILL) and reaped on drop.
pub(crate) struct Proc(pub(crate) Option<Child>);

impl Proc {
    pub(crate) fn kill(&mut self) {
        if let Some(mut c) = self.0.take() {
            let _ = c.kill();
            let _ = c.wait();
        }
    }
}

impl Drop for Proc {
    fn drop(&mut self) {
        self.kill();
    }
}

/// A JetStream cluster of `n` nodes on loopback, in a temp dir.
pub(crate) struct Cluster {
    _dir: tempfile::TempDir,
    nodes: Vec<Proc>,
    clients: Vec<u16>,
}

impl Cluster {
    pub(crate) fn start(n: usize) -> Cluster {
        let bin = nats_server();
        let dir = tempfile::tempdir().expect("tempdir");
        let clients: Vec<u16> = (0..n).map(|_| free_port()).collect();
        let routes: Vec<u16> = (0..n).map(|_| free_port()).collect();
        let monitors: Vec<u16> = (0..n).map(|_| free_port()).collect();
        let mut nodes = Vec::new();
        for i in 0..n {
            let cluster = if n > 1 {
                let list: Vec<String> = routes.iter().map(|p| format!("nats-route://127.0.0.1:{p}")).collect();
                format!("cluster {{ name: work-test, listen: 127.0.0.1:{}, routes: [{}] }}", routes[i], list.join(", "))
            } else {
                String::new()
            };
            let conf = format!(
                "server_name: n{i}\nlisten: 127.0.0.1:{}\nhttp: 127.0.0.1:{}\njetstream {{ store_dir: {:?}, max_memory_store: 64MB, max_file_store: 512MB }}\n{cluster}\n",
                clients[i],
                monitors[i],
                dir.path().join(format!("n{i}")).display().to_string()
            );
            let path = dir.path().join(format!("n{i}.conf"));
            std::fs::write(&path, conf).expect("write conf");
            #[expect(clippy::disallowed_methods, reason = "the test runs the servers it kills")]
            let child = std::process::Command::new(&bin)
                .arg("-c")
                .arg(&path)
                .stdout(Stdio::null())
                .stderr(std::fs::File::create(dir.path().join(format!("n{i}.log"))).expect("log"))
                .spawn()
                .expect("start nats-server");
            nodes.push(Proc(Some(child)));
        }
        let deadline = Instant::now() + Duration::from_secs(30);
        for m in &monitors {
            while !healthy(*m) {
                assert!(
                    Instant::now() < deadline,
                    "the NATS cluster did not become healthy (logs in {:?})",
                    dir.path()
                );
                std::thread::sleep(Duration::from_millis(100));
            }
        }
        Cluster { _dir: dir, nodes, clients }
    }

    pub(crate) fn url(&self) -> String {
        self.clients.iter().map(|p| format!("nats://127.0.0.1:{p}")).collect::<Vec<_>>().join(",")
    }
}

fn healthy(port: u16) -> bool {
    let Ok(mut s) = std::net::TcpStream::connect(("127.0.0.1", port)) else { return false };
    let _ = s.set_read_timeout(Some(Duration::from_secs(2)));
    if s.write_all(b"GET /healthz HTTP/1.0\r\nHost: x\r\n\r\n").is_err() {
        return false;
    }
    let mut out = String::new();
    let _ = s.read_to_string(&mut out);
    out.starts_with("HTTP/1.0 200") || out.starts_with("HTTP/1.1 200")
}

fn work_bin() -> PathBuf {
    assert_cmd::cargo::cargo_bin("work")
}

/// `work` with `args` in `dir`; its agents run confined (the sandbox, where the machine has
/// one) and may write `writable`, where the scripted agents keep their counters.
pub(crate) fn spawn_work(dir: &Path, args: &[&str], log: &Path, writable: &Path) -> Proc {
    #[expect(clippy::disallowed_methods, reason = "the test runs workers and coordinators it kills")]
    let child = std::process::Command::new(work_bin())
        .args(args)
        .current_dir(dir)
        .env("WORK_SANDBOX_WRITABLE", writable)
        .env("WORK_ISOLATION", crate::support::suite_isolation())
        .env("WORK_FAKE_CLOCK", "2026-01-01T00:00:00Z")
        .stdout(std::fs::File::create(log.with_extension("out")).expect("log"))
        .stderr(std::fs::File::create(log).expect("log"))
        .spawn()
        .expect("spawn work");
    Proc(Some(child))
}

/// Why the fault run's agents run unconfined: its scripted finders keep their fault markers
/// (which run is an angle's first) in a directory outside every tree, which a confined local
/// finder cannot write — every run of the slow angle would then be its first and time out.
const FAULT_MARKERS: &str = "scripted finders that keep their fault markers outside the repository, which a confined local finder cannot write (not a lie the sandbox refuses: a harness limit)";

const ANGLES: usize = 240;
/// The finders' time limit: what the slow finder overruns (in both runs), and ample for the
/// others, which answer at once.
const TIMEOUT: &str = "timeouts.dispatch_secs=8";
const PER_ROUND: usize = 40;

/// A repository of 16 files × 10 lines, a finder per angle `aNNN` (a shell script: light on
/// a loaded machine): angles below 160 each find one line of their own, the rest only lines
/// already found (so the discovery goes dry). Faults, keyed by angle, each on the angle's first
/// run only (marker files say it started, holding the checkout it ran in, and that it ended):
/// a050 and a150 sleep 3 s, a100 1.5 s (the test kills a worker, a node and the coordinator
/// meanwhile), a200 sleeps past its timeout. Every start is counted per angle.
fn scenario() -> (Scenario, String, tempfile::TempDir) {
    let s = Scenario::new();
    // The finders' counters live outside the tree: the read-only check sees only the finders.
    let state_dir = tempfile::tempdir().expect("agent state");
    for f in 0..16 {
        let body: String = (1..=10).map(|l| format!("fn f{f}_{l}() {{ transition({l}); }}\n")).collect();
        s.write(&format!("src/f{f:02}.rs"), &body);
    }
    s.commit("files");
    let state = state_dir.path().to_path_buf();
    let script = format!(
        r#"#!/bin/bash
# Builtins only (a wait is a read with a timeout on a FIFO that never delivers): nothing forked.
nap() {{ read -r -t "$1" _ <> "$S/fifo" || true; }}
IFS= read -r req
# A regular expression, not ${{req##*…}}: bash's pattern removal is quadratic in a long brief.
[[ $req =~ \"angle\":\"(a[0-9]+)\" ]] && angle=${{BASH_REMATCH[1]}}
S={state:?}
echo x >> "$S/calls-$angle"
first=0
if [ ! -e "$S/first-$angle" ]; then
    first=1
    echo > "$S/first-$angle"
    echo "$PWD" > "$S/started-$angle"
fi
if [ $first = 1 ]; then
    case $angle in
        a200) nap 60 ;;
        a050|a150) nap 3 ;;
        a100) nap 1.5 ;;
    esac
    echo > "$S/done-$angle"
fi
i=${{angle#a}}; i=${{i#0}}; i=${{i#0}}
k=$((i))
[ "$k" -ge 160 ] && k=$((k % 160))
f=$((k / 10)); l=$((k % 10 + 1))
printf '{{"angle":"%s","items":[{{"id":"f%02d-%d","title":"transition %d","location":"src/f%02d.rs:%d"}}]}}\n' "$angle" $f $l $l $f $l
"#,
        state = state.display().to_string()
    );
    std::fs::create_dir_all(&state).expect("agent state");
    nix::unistd::mkfifo(&state.join("fifo"), nix::sys::stat::Mode::from_bits_truncate(0o600)).expect("mkfifo");
    s.write(".agents/finder.sh", &script);
    let p = s.path(".agents/finder.sh");
    let mut perm = std::fs::metadata(&p).expect("stat").permissions();
    std::os::unix::fs::PermissionsExt::set_mode(&mut perm, 0o755);
    std::fs::set_permissions(&p, perm).expect("chmod");
    let exclude = s.path(".git/info/exclude");
    let mut ex = std::fs::read_to_string(&exclude).unwrap_or_default();
    ex.push_str("\n.agents/\n.agent-state/\n.work/\n");
    std::fs::write(&exclude, ex).expect("write exclude");
    (s, format!("command:{}", p.display()), state_dir)
}

fn exhaust_args(agent: &str, queue: Option<&str>) -> Vec<String> {
    let angles: Vec<String> = (0..ANGLES).map(|i| format!("a{i:03}")).collect();
    let mut v: Vec<String> = ["-c", TIMEOUT, "exhaust", "transitions", "-k", "2", "--concurrency", "8"]
        .iter()
        .map(|s| s.to_string())
        .collect();
    v.extend(["--angles".into(), angles.join(","), "--angles-per-round".into(), PER_ROUND.to_string()]);
    v.extend(["--agent".into(), agent.to_string(), "--json".into()]);
    if let Some(q) = queue {
        v.extend(["--queue".into(), q.to_string()]);
    }
    v
}

fn calls(dir: &tempfile::TempDir) -> std::collections::BTreeMap<String, u64> {
    let dir = dir.path();
    let mut m = std::collections::BTreeMap::new();
    for e in std::fs::read_dir(dir).expect("agent state").flatten() {
        let name = e.file_name().to_string_lossy().into_owned();
        if let Some(angle) = name.strip_prefix("calls-") {
            m.insert(angle.to_string(), std::fs::read_to_string(e.path()).expect("read").lines().count() as u64);
        }
    }
    m
}

/// The failed dispatches of every run in a scenario, for a failure message.
fn failures(s: &Scenario) -> String {
    let mut out = String::new();
    for run in std::fs::read_dir(s.path(".work/runs")).into_iter().flatten().flatten() {
        let log = std::fs::read_to_string(run.path().join("events.jsonl")).unwrap_or_default();
        let failed = |l: &&str| {
            (l.contains("\"dispatch.end\"") && !l.contains("\"outcome\":\"ok\""))
                || l.contains("\"fanout.task_panicked\"")
                || l.contains("\"readonly.writes\"")
        };
        for line in log.lines().filter(failed) {
            out.push_str(&format!("  {}\n", line.chars().take(400).collect::<String>()));
        }
    }
    out
}

pub(crate) fn wait_for(path: &Path, what: &str, secs: u64) -> String {
    let deadline = Instant::now() + Duration::from_secs(secs);
    loop {
        if let Ok(t) = std::fs::read_to_string(path)
            && !t.is_empty()
        {
            return t;
        }
        assert!(Instant::now() < deadline, "{what} never happened ({})", path.display());
        std::thread::sleep(Duration::from_millis(20));
    }
}

/// Waits until worker `name` in `dir` no longer runs `angle`'s dispatch (its answer is then in
/// the answer stream: a worker publishes it before it says so).
pub(crate) fn wait_answered(dir: &Path, name: &str, angle: &str, secs: u64) {
    let path = dir.join(format!(".work/workers/{name}.json"));
    let deadline = Instant::now() + Duration::from_secs(secs);
    let suffix = format!("-{angle}");
    loop {
        let status: Value =
            std::fs::read_to_string(&path).ok().and_then(|t| serde_json::from_str(&t).ok()).unwrap_or_default();
        let running =
            status["running"].as_array().map(|r| r.iter().any(|d| d.as_str().is_some_and(|d| d.ends_with(&suffix))));
        if running == Some(false) {
            return;
        }
        assert!(Instant::now() < deadline, "{name} never answered {angle} ({})", path.display());
        std::thread::sleep(Duration::from_millis(20));
    }
}

/// The angles worker `name` in `dir` was running, by its status file.
fn running_angles(dir: &Path, name: &str) -> std::collections::BTreeSet<String> {
    let path = dir.join(format!(".work/workers/{name}.json"));
    // A worker that has just started may have written nothing yet: it runs nothing then.
    let status: Value =
        std::fs::read_to_string(&path).ok().and_then(|t| serde_json::from_str(&t).ok()).unwrap_or_default();
    let running = status["running"].as_array().cloned().unwrap_or_default();
    running.iter().filter_map(|d| Some(d.as_str()?.rsplit('-').next()?.to_string())).collect()
}

struct Workers {
    procs: Vec<(PathBuf, Proc)>,
    url: String,
    agent: String,
    logs: PathBuf,
    state: PathBuf,
}

impl Workers {
    fn start_one(&mut self, i: usize) {
        let dir = &self.procs[i].0;
        let name = format!("w{i}");
        let args = [
            "worker",
            "--queue",
            &self.url,
            "--agent",
            &self.agent,
            "--concurrency",
            "3",
            "--name",
            &name,
            "--ack-wait",
            "3",
            "--max-deliver",
            "5",
        ];
        self.procs[i].1 = spawn_work(
            dir,
            &args,
            &self.logs.join(format!("{name}.{}.log", Instant::now().elapsed().as_nanos())),
            &self.state,
        );
    }

    fn index_of(&self, checkout: &str) -> usize {
        let want = std::fs::canonicalize(checkout.trim()).expect("canonical");
        self.procs
            .iter()
            .position(|(d, _)| std::fs::canonicalize(d).expect("canonical") == want)
            .unwrap_or_else(|| panic!("no worker has checkout {checkout}"))
    }
}

#[test]
fn ext_nats_an_exhaust_through_a_cluster_with_faults_ends_like_a_local_run() {
    let _unconfined = crate::support::fallback_only(FAULT_MARKERS);
    nats_server();
    // Locally, meanwhile (it shares nothing with the queue run).
    let local = std::thread::spawn(move || {
        let _unconfined = crate::support::fallback_only(FAULT_MARKERS);
        let (local, agent, local_state) = scenario();
        let a = exhaust_args(&agent, None);
        let expected = local.run_json(&a.iter().map(String::as_str).collect::<Vec<_>>(), 0);
        (local, expected, calls(&local_state))
    });

    // Through the queue: three nodes, three workers, each in its own clone.
    let cluster = Cluster::start(3);
    let (s, agent, state) = scenario();
    let logs = tempfile::tempdir().expect("logs");
    let mut workers = Workers {
        procs: Vec::new(),
        url: cluster.url(),
        agent: agent.clone(),
        logs: logs.path().into(),
        state: state.path().into(),
    };
    let clones = tempfile::tempdir().expect("clones");
    for i in 0..3 {
        let dir = clones.path().join(format!("w{i}"));
        s.git(&["clone", "-q", &s.root().display().to_string(), &dir.display().to_string()]);
        workers.procs.push((dir, Proc(None)));
        workers.start_one(i);
    }
    let mut cluster = cluster;
    let a = exhaust_args(&agent, Some(&cluster.url()));
    let argv: Vec<&str> = a.iter().map(String::as_str).collect();
    let mut coordinator = spawn_work(s.root(), &argv, &logs.path().join("coordinator-1.log"), state.path());

    // A worker killed while its finder runs: the request goes to another worker.
    let checkout = wait_for(&state.path().join("started-a050"), "a050's dispatch", 120);
    let victim = workers.index_of(&checkout);
    workers.procs[victim].1.kill();
    // What it was running when killed (a050 among them): each may run a second time.
    let lost = running_angles(&workers.procs[victim].0, &format!("w{victim}"));
    assert!(lost.contains("a050"), "{lost:?}");
    workers.start_one(victim);

    // A node killed mid-round: the streams have three replicas.
    wait_for(&state.path().join("started-a100"), "a100's dispatch", 120);
    cluster.nodes[1].kill();
    // What ran meanwhile may run again: a worker whose connection went with the node cannot
    // report progress until it reconnects, and its request may go to another (its answer is
    // still taken once).
    let mut lost = lost;
    for i in 0..3 {
        lost.extend(running_angles(&workers.procs[i].0, &format!("w{i}")));
    }

    // The coordinator killed mid-round and resumed once a150's worker answered: what the
    // workers answered meanwhile is kept, and not run again.
    let checkout = wait_for(&state.path().join("started-a150"), "a150's dispatch", 120);
    coordinator.kill();
    let answering = workers.index_of(&checkout);
    wait_for(&state.path().join("done-a150"), "a150's finder", 60);
    wait_answered(&workers.procs[answering].0, &format!("w{answering}"), "a150", 60);
    let out = s.work().args(&argv).timeout(Duration::from_secs(240)).output().expect("resume");
    let stdout = String::from_utf8_lossy(&out.stdout);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(0), "resumed coordinator:\n{stderr}\n{stdout}");
    let master: Value = serde_json::from_str(&stdout).unwrap_or_else(|e| panic!("not JSON ({e}):\n{stdout}\n{stderr}"));

    let (local, expected, local_calls) = local.join().expect("the local run");
    assert!(expected["spent"]["dispatches"].as_u64().expect("dispatches") >= 240, "{}", expected["spent"]);
    assert_eq!(expected["stoppedReason"], "k-consecutive-dry", "{expected}");
    let brief = |m: &Value| {
        let r: Vec<String> = m["rounds"]
            .as_array()
            .expect("rounds")
            .iter()
            .map(|r| format!("{}:{}", r["n"], r["failedFinders"]))
            .collect();
        format!("rounds {r:?} gaps {} spent {}", m["completenessGaps"], m["spent"])
    };
    assert!(
        master == expected,
        "the queue run ends with the local run's master object:\nqueue {}\n{}\nlocal {}\n{}",
        brief(&master),
        failures(&s),
        brief(&expected),
        failures(&local)
    );
    let mut queue_calls = calls(&state);
    assert_eq!(queue_calls.remove("a050"), Some(2), "a050 ran again on another worker after its worker was killed");
    for angle in lost.iter().filter(|a| *a != "a050") {
        // Killed mid-run, or in flight when the node went (run again), or answered just before
        // (not run again).
        let n = queue_calls.remove(angle.as_str());
        assert!(matches!(n, Some(1 | 2)), "{angle} was in flight at a fault: ran {n:?} times");
    }
    let want: std::collections::BTreeMap<String, u64> =
        local_calls.into_iter().filter(|(a, _)| a != "a050" && !lost.contains(a)).collect();
    assert_eq!(queue_calls, want, "every other finder ran as often as locally: nothing answered was run twice");
    let failed: Vec<String> = master["rounds"]
        .as_array()
        .expect("rounds")
        .iter()
        .filter(|r| r["failedFinders"].as_u64() != Some(0))
        .map(|r| format!("{}:{}", r["n"], r["failedFinders"]))
        .collect();
    assert_eq!(failed, ["6:1"], "only the finder slower than its timeout failed (a200, in round 6)");
    assert_eq!(queue_calls.get("a200"), Some(&1), "the slow finder ran once");

    // Each worker's status: its answers and the one it lost when it was killed.
    let (code, out, err) = s.run(&["-C", &workers.procs[0].0.display().to_string(), "worker", "status", "--json"]);
    assert_eq!(code, 0, "{err}");
    let list: Value = serde_json::from_str(&out).expect("status JSON");
    assert_eq!(list[0]["name"], "w0", "{list}");
    assert_eq!(list[0]["state"], "running", "{list}");
    drop(workers);
}

#[test]
fn ext_nats_a_worker_refuses_another_commit_and_write_roles_until_allowed() {
    nats_server();
    let cluster = Cluster::start(1);
    let (s, agent, state) = scenario();
    let clones = tempfile::tempdir().expect("clones");
    let dir = clones.path().join("w");
    s.git(&["clone", "-q", &s.root().display().to_string(), &dir.display().to_string()]);
    // The coordinator moves on: the worker's checkout is one commit behind.
    s.write("src/new.rs", "fn new() { transition(0); }\n");
    s.commit("ahead");
    let logs = tempfile::tempdir().expect("logs");
    let url = cluster.url();
    let _w = spawn_work(
        &dir,
        &["worker", "--queue", &url, "--agent", &agent, "--name", "behind", "--ack-wait", "1", "--max-deliver", "2"],
        &logs.path().join("w.log"),
        state.path(),
    );
    let master = s.run_json(
        &[
            "-c",
            TIMEOUT,
            "exhaust",
            "transitions",
            "-k",
            "2",
            "--angles",
            "a001",
            "--agent",
            &agent,
            "--queue",
            &url,
            "--json",
        ],
        1,
    );
    assert_eq!(master["rounds"][0]["failedFinders"], 1, "{master}");
    let gaps = master["completenessGaps"].to_string();
    assert!(!state.path().join("calls-a001").exists(), "the finder never ran on the wrong commit");
    let status = s.run(&["-C", &dir.display().to_string(), "worker", "status"]);
    assert!(status.1.contains("behind") && status.1.contains("refused"), "{status:?} {gaps}");
}

/// A worker started in the coordinator's own checkout would run its finders (and keep its
/// state and scratch trees) in the tree the coordinator judges: it refuses every request,
/// saying to use a clone; a worker in a clone serves the same run (the twin).
#[test]
fn ext_nats_a_worker_in_the_coordinator_s_checkout_refuses_and_one_in_a_clone_serves() {
    nats_server();
    let cluster = Cluster::start(1);
    let (s, agent, state) = scenario();
    let logs = tempfile::tempdir().expect("logs");
    let url = cluster.url();
    let args =
        ["worker", "--queue", &url, "--agent", &agent, "--name", "inside", "--ack-wait", "1", "--max-deliver", "2"];
    let inside = spawn_work(s.root(), &args, &logs.path().join("inside.log"), state.path());
    let run = |topic: &str, code: i32| {
        s.run_json(
            &[
                "-c", TIMEOUT, "exhaust", topic, "-k", "2", "--angles", "a001", "--agent", &agent, "--queue", &url,
                "--json",
            ],
            code,
        )
    };
    let master = run("transitions", 1);
    assert_eq!(master["rounds"][0]["failedFinders"], 1, "{master}");
    assert!(!state.path().join("calls-a001").exists(), "the finder never ran in the coordinator's tree");
    let status = s.run(&["worker", "status", "--json"]);
    assert!(status.1.contains("inside") && status.1.contains("coordinator's own checkout"), "{status:?}");
    drop(inside);

    let clones = tempfile::tempdir().expect("clones");
    let dir = clones.path().join("w");
    s.git(&["clone", "-q", &s.root().display().to_string(), &dir.display().to_string()]);
    let args =
        ["worker", "--queue", &url, "--agent", &agent, "--name", "clone", "--ack-wait", "1", "--max-deliver", "2"];
    let _clone = spawn_work(&dir, &args, &logs.path().join("clone.log"), state.path());
    let master = run("transitions in a clone", 0);
    assert_eq!(master["seen"].as_array().map(Vec::len), Some(1), "{master}");
}

#[test]
fn ext_nats_a_bad_queue_is_one_line_and_exit_2_before_any_dispatch() {
    nats_server();
    let (s, agent, state) = scenario();
    for q in ["localhost:4222", "nats://h", "http://127.0.0.1:1"] {
        let (code, _, err) = s.run(&["exhaust", "x", "--agent", &agent, "--queue", q]);
        assert_eq!(code, 2, "{q}: {err}");
        assert_one_line_error(&err);
        assert!(err.contains("nats://"), "{err}");
    }
    let port = free_port();
    let (code, _, err) = s.run(&["exhaust", "x", "--agent", &agent, "--queue", &format!("nats://127.0.0.1:{port}")]);
    assert_eq!(code, 2, "{err}");
    assert_one_line_error(&err);
    assert!(calls(&state).is_empty(), "nothing was dispatched");
    assert!(!s.path(".work/quality-journals/work-exhaust-x.json").exists(), "no journal was written");
    let (code, _, err) = s.run(&["worker"]);
    assert_eq!(code, 2, "{err}");
    assert_one_line_error(&err);
}

/// A finder that fails its first call of a001 and waits 8 s on its first call of a002 (each
/// call counted per angle in the agent state directory).
fn retry_scenario() -> (Scenario, String, tempfile::TempDir) {
    let s = Scenario::new();
    s.write("src/a.rs", "fn a() {}\n");
    s.commit("files");
    let state = tempfile::tempdir().expect("agent state");
    nix::unistd::mkfifo(&state.path().join("fifo"), nix::sys::stat::Mode::from_bits_truncate(0o600)).expect("mkfifo");
    let script = format!(
        r#"#!/bin/bash
IFS= read -r req
[[ $req =~ \"angle\":\"(a[0-9]+)\" ]] && angle=${{BASH_REMATCH[1]}}
S={state:?}
echo x >> "$S/calls-$angle"
n=$(wc -l < "$S/calls-$angle")
if [ "$angle" = a001 ] && [ "$n" = 1 ]; then echo "a001 fails its first call" >&2; exit 1; fi
if [ "$angle" = a002 ] && [ "$n" = 1 ]; then echo > "$S/started-a002"; read -r -t 8 _ <> "$S/fifo" || true; fi
printf '{{"angle":"%s","items":[]}}\n' "$angle"
"#,
        state = state.path().display().to_string()
    );
    s.write(".agents/finder.sh", &script);
    let p = s.path(".agents/finder.sh");
    let mut perm = std::fs::metadata(&p).expect("stat").permissions();
    std::os::unix::fs::PermissionsExt::set_mode(&mut perm, 0o755);
    std::fs::set_permissions(&p, perm).expect("chmod");
    let exclude = s.path(".git/info/exclude");
    let mut ex = std::fs::read_to_string(&exclude).unwrap_or_default();
    ex.push_str("\n.agents/\n.work/\n");
    std::fs::write(&exclude, ex).expect("write exclude");
    (s, format!("command:{}", p.display()), state)
}

#[test]
fn ext_nats_a_resumed_coordinator_runs_again_what_failed_while_it_was_down() {
    nats_server();
    let cluster = Cluster::start(1);
    let url = cluster.url();
    let (s, agent, state) = retry_scenario();
    let clones = tempfile::tempdir().expect("clones");
    let dir = clones.path().join("w");
    s.git(&["clone", "-q", &s.root().display().to_string(), &dir.display().to_string()]);
    let args = ["worker", "--queue", &url, "--agent", &agent, "--concurrency", "2", "--name", "w"];
    let _w = spawn_work(&dir, &args, &clones.path().join("w.log"), state.path());
    let argv = [
        "-c",
        "timeouts.dispatch_secs=30",
        "exhaust",
        "x",
        "-k",
        "2",
        "--angles",
        "a001,a002",
        "--angles-per-round",
        "2",
        "--max-rounds",
        "1",
        "--agent",
        &agent,
        "--queue",
        &url,
        "--json",
    ];
    // Killed while a002 still runs, after a001's failure was stored: the round was never
    // committed, so the resumed coordinator asks both again.
    let mut coordinator = spawn_work(s.root(), &argv, &clones.path().join("coordinator.log"), state.path());
    wait_for(&state.path().join("started-a002"), "a002's dispatch", 60);
    wait_for(&state.path().join("calls-a001"), "a001's dispatch", 60);
    wait_answered(&dir, "w", "a001", 60);
    coordinator.kill();
    let out = s.work().args(argv).timeout(Duration::from_secs(120)).output().expect("resume");
    let stdout = String::from_utf8_lossy(&out.stdout);
    let master: Value = serde_json::from_str(&stdout)
        .unwrap_or_else(|e| panic!("not JSON ({e}):\n{stdout}\n{}", String::from_utf8_lossy(&out.stderr)));
    // The failure is not the answer to the resumed ask: a001 ran again (and answered); a002's
    // answer, still running at the kill, is taken once.
    assert_eq!(master["rounds"][0]["failedFinders"], 0, "{master}");
    let c = calls(&state);
    assert_eq!((c.get("a001"), c.get("a002")), (Some(&2), Some(&1)), "{c:?}");
}
