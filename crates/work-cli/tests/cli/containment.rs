//! Process containment through the real binary: an agent that detaches a descendant (`setsid`
//! and a double fork, the way a CLI runs each tool command in its own session) leaves nothing
//! running after a normal dispatch, a timeout, SIGINT, SIGTERM, or a SIGKILL of `work` itself.

use crate::support::{Scenario, fallback_only, suite_isolation};

/// Why these are the fallback's tests: they test the sweep that ends what a dispatch detached.
pub(crate) const SWEEP: &str = "the containment sweep; with the sandbox the dispatch's PID namespace ends what it detached (ext_sandbox), and the pids the agent records are the namespace's";
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

/// How long a detached descendant sleeps before it writes its "survived" marker.
pub(crate) const SLEEP_SECS: u64 = 3;

/// A finder that starts a detached grandchild (new session, double fork) which records its
/// pid, sleeps, then writes `survived-<pid>`. `then` is what the finder does next: `answer`
/// or `hang`.
fn hostile_finder(s: &Scenario, then: &str) -> String {
    s.agent(
        "hostile.py",
        &format!(
            r#"
r, w = os.pipe()
if os.fork() == 0:
    os.setsid()
    if os.fork() > 0:
        os._exit(0)
    os.close(r)
    # Detached: own session, parent gone. Leave stdout and stderr so pipes do not tell.
    devnull = os.open(os.devnull, os.O_RDWR)
    for fd in (0, 1, 2):
        os.dup2(devnull, fd)
    me = os.getpid()
    open(state_path('pid-%d' % me), 'w').write(str(me))
    os.write(w, b'ready'); os.close(w)
    time.sleep({SLEEP_SECS})
    open(state_path('survived-%d' % me), 'w').write('alive')
    os._exit(0)
os.close(w)
os.read(r, 5)
if {then:?} == 'hang':
    time.sleep(60)
print(json.dumps({{"angle": ctx['angle'], "items": []}}))
"#
        ),
    )
}

pub(crate) fn state_dir(s: &Scenario) -> PathBuf {
    s.path(".agent-state")
}

/// The pids the detached descendants recorded.
pub(crate) fn descendant_pids(s: &Scenario) -> Vec<i32> {
    let Ok(dir) = std::fs::read_dir(state_dir(s)) else { return Vec::new() };
    dir.filter_map(|e| e.ok()?.file_name().to_str()?.strip_prefix("pid-")?.parse().ok()).collect()
}

/// Running, not a zombie.
pub(crate) fn running(pid: i32) -> bool {
    match std::fs::read_to_string(format!("/proc/{pid}/stat")) {
        Ok(stat) => !matches!(stat.rsplit(')').next().map(str::trim_start).and_then(|r| r.chars().next()), Some('Z')),
        Err(_) => false,
    }
}

/// Waits (bounded) until every recorded descendant is gone and returns those still running;
/// then waits past their sleep and returns the markers of those that survived to write one.
pub(crate) fn survivors(s: &Scenario, settle: Duration) -> (Vec<i32>, Vec<String>) {
    let pids = descendant_pids(s);
    assert!(!pids.is_empty(), "the hostile finder never started its descendant");
    let deadline = Instant::now() + settle;
    while pids.iter().any(|&p| running(p)) && Instant::now() < deadline {
        std::thread::sleep(Duration::from_millis(50));
    }
    let alive: Vec<i32> = pids.iter().copied().filter(|&p| running(p)).collect();
    for &p in &alive {
        // Do not leave the machine dirty when the assertion below fails.
        let _ = nix::sys::signal::kill(nix::unistd::Pid::from_raw(p), nix::sys::signal::Signal::SIGKILL);
    }
    std::thread::sleep(Duration::from_secs(SLEEP_SECS + 1));
    let survived: Vec<String> = std::fs::read_dir(state_dir(s))
        .map(|d| {
            d.filter_map(|e| e.ok()?.file_name().to_str().filter(|n| n.starts_with("survived-")).map(String::from))
                .collect()
        })
        .unwrap_or_default();
    (alive, survived)
}

pub(crate) fn repo() -> Scenario {
    let s = Scenario::new();
    s.write("src/a.rs", "fn a() {}\n");
    s.commit("init");
    s
}

pub(crate) fn exhaust_args<'a>(agent: &'a str, timeout: &'a str) -> Vec<&'a str> {
    vec!["-c", timeout, "exhaust", "things", "-k", "2", "--angles", "a,b,c", "--agent", agent, "--json"]
}

#[test]
fn a_detaching_agent_leaves_nothing_after_a_normal_dispatch() {
    let _unconfined = fallback_only(SWEEP);
    let s = repo();
    let agent = hostile_finder(&s, "answer");
    let (code, out, err) = s.run(&exhaust_args(&agent, "timeouts.dispatch_secs=30"));
    assert_eq!(code, 0, "stdout:\n{out}\nstderr:\n{err}");
    // `work` has exited: what it left is checked at once, without grace.
    let (alive, survived) = survivors(&s, Duration::ZERO);
    assert_eq!(alive, Vec::<i32>::new(), "detached descendants outlived their dispatch");
    assert_eq!(survived, Vec::<String>::new());
    assert!(descendant_pids(&s).len() >= 2, "one descendant per dispatch");
}

#[test]
fn a_detaching_agent_leaves_nothing_after_a_timeout() {
    let _unconfined = fallback_only(SWEEP);
    let s = repo();
    let agent = hostile_finder(&s, "hang");
    let (code, out, err) = s.run(&exhaust_args(&agent, "timeouts.dispatch_secs=3"));
    assert!(code == 0 || code == 1, "code {code}\nstdout:\n{out}\nstderr:\n{err}");
    assert!(out.contains("timed out"), "the finders timed out:\n{out}");
    let (alive, survived) = survivors(&s, Duration::ZERO);
    assert_eq!(alive, Vec::<i32>::new(), "detached descendants outlived the timeout");
    assert_eq!(survived, Vec::<String>::new());
}

/// Starts `work` with a hanging hostile finder, waits until its descendant runs, sends `sig`
/// to `work`, and returns what is left.
fn signalled(sig: nix::sys::signal::Signal) -> (Vec<i32>, Vec<String>) {
    signalled_with(sig, |s| hostile_finder(s, "hang"))
}

/// [`signalled`] with the finder `agent` writes (it must hang once its descendant recorded
/// its pid, and answer once its descendant is ready).
pub(crate) fn signalled_with(
    sig: nix::sys::signal::Signal,
    agent: impl Fn(&Scenario) -> String,
) -> (Vec<i32>, Vec<String>) {
    signalled_env(sig, &[], agent)
}

/// [`signalled_with`], `work` run with the extra environment `env`.
fn signalled_env(
    sig: nix::sys::signal::Signal,
    env: &[(&str, &str)],
    agent: impl Fn(&Scenario) -> String,
) -> (Vec<i32>, Vec<String>) {
    let s = repo();
    let agent = agent(&s);
    #[expect(clippy::disallowed_methods, reason = "the test needs a `work` it can signal mid-dispatch")]
    let mut child = std::process::Command::new(assert_cmd::cargo::cargo_bin("work"))
        .envs(env.iter().copied())
        .env("WORK_ISOLATION", suite_isolation())
        .args(exhaust_args(&agent, "timeouts.dispatch_secs=60"))
        .current_dir(s.root())
        .env("WORK_FAKE_CLOCK", "2026-01-01T00:00:00Z")
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .spawn()
        .expect("spawn work");
    wait_for_descendants(s.root(), 1);
    let pid = nix::unistd::Pid::from_raw(i32::try_from(child.id()).expect("pid"));
    nix::sys::signal::kill(pid, sig).expect("signal work");
    child.wait().expect("reap work");
    // After a SIGKILL the kernel and the watchdog end the rest: give them a bounded moment.
    survivors(&s, Duration::from_secs(10))
}

pub(crate) fn wait_for_descendants(root: &Path, n: usize) {
    let dir = root.join(".agent-state");
    let deadline = Instant::now() + Duration::from_secs(60);
    loop {
        let count = std::fs::read_dir(&dir)
            .map(|d| {
                d.filter(|e| e.as_ref().is_ok_and(|e| e.file_name().to_string_lossy().starts_with("pid-"))).count()
            })
            .unwrap_or(0);
        if count >= n {
            return;
        }
        assert!(Instant::now() < deadline, "the hostile finders never started their descendants");
        std::thread::sleep(Duration::from_millis(20));
    }
}

#[test]
fn a_detaching_agent_dies_with_work_on_sigint() {
    let _unconfined = fallback_only(SWEEP);
    let (alive, survived) = signalled(nix::sys::signal::Signal::SIGINT);
    assert_eq!(alive, Vec::<i32>::new(), "detached descendants outlived SIGINT of work");
    assert_eq!(survived, Vec::<String>::new());
}

#[test]
fn a_detaching_agent_dies_with_work_on_sigterm() {
    let _unconfined = fallback_only(SWEEP);
    let (alive, survived) = signalled(nix::sys::signal::Signal::SIGTERM);
    assert_eq!(alive, Vec::<i32>::new(), "detached descendants outlived SIGTERM of work");
    assert_eq!(survived, Vec::<String>::new());
}

#[test]
fn a_detaching_agent_dies_with_work_on_sigkill() {
    let _unconfined = fallback_only(SWEEP);
    let (alive, survived) = signalled(nix::sys::signal::Signal::SIGKILL);
    assert_eq!(alive, Vec::<i32>::new(), "detached descendants outlived SIGKILL of work");
    assert_eq!(survived, Vec::<String>::new());
}

/// A finder whose own process leaves its process group and the containment marker behind: it
/// records its pid, starts a session of its own and execs a shell with an empty environment
/// that sleeps and then writes `survived-<pid>`. Neither the group nor the marker finds it
/// after a SIGKILL of `work`; its parent-death signal does.
fn group_and_marker_leaver(s: &Scenario) -> String {
    s.agent(
        "leaver.py",
        &format!(
            "me = os.getpid()\nopen(state_path('pid-%d' % me), 'w').write(str(me))\nos.setsid()\n\
             os.execve('/bin/sh', ['sh', '-c', 'sleep {SLEEP_SECS}; echo alive > \"$0\"', state_path('survived-%d' % me)], {{}})\n"
        ),
    )
}

#[test]
fn a_finder_that_leaves_its_group_and_marker_dies_with_work_on_sigkill() {
    let _unconfined = fallback_only(SWEEP);
    let (alive, survived) = signalled_env(nix::sys::signal::Signal::SIGKILL, &[], group_and_marker_leaver);
    assert_eq!(alive, Vec::<i32>::new(), "a finder outlived SIGKILL of work");
    assert_eq!(survived, Vec::<String>::new());
}

/// The same through the spawn shim `work` takes once forking the engine costs more than it
/// (`setpriv --pdeathsig`, started with `posix_spawn`): the death signal is still set.
#[test]
fn a_finder_that_leaves_its_group_and_marker_dies_with_work_on_sigkill_through_the_spawn_shim() {
    let _unconfined = fallback_only(SWEEP);
    let shim = [("WORK_TEST_SPAWN_SHIM", "1")];
    let (alive, survived) = signalled_env(nix::sys::signal::Signal::SIGKILL, &shim, group_and_marker_leaver);
    assert_eq!(alive, Vec::<i32>::new(), "a finder outlived SIGKILL of work");
    assert_eq!(survived, Vec::<String>::new());
}

/// The honest twin of the shim: agents started through it answer, and their detached
/// descendants are still ended with their dispatch.
#[test]
fn a_detaching_agent_started_through_the_spawn_shim_answers_and_leaves_nothing() {
    let _unconfined = fallback_only(SWEEP);
    let s = repo();
    let agent = hostile_finder(&s, "answer");
    let out = s
        .work()
        .env("WORK_TEST_SPAWN_SHIM", "1")
        .args(exhaust_args(&agent, "timeouts.dispatch_secs=30"))
        .output()
        .expect("run work");
    assert_eq!(out.status.code(), Some(0), "{}", String::from_utf8_lossy(&out.stderr));
    let (alive, survived) = survivors(&s, Duration::ZERO);
    assert_eq!(alive, Vec::<i32>::new(), "detached descendants outlived their dispatch");
    assert_eq!(survived, Vec::<String>::new());
}

/// Many processes elsewhere on the machine: the sweeps after each dispatch (and at `work`'s
/// exit) read `work`'s own descendants and what started after it, never those processes —
/// while they still find and end what each dispatch detached. Every `/proc/PID/stat` read is
/// logged by the runtime's test probe (`WORK_TEST_PROC_READS`).
#[test]
fn the_sweeps_read_no_process_outside_work_s_tree_that_started_before_it() {
    let _unconfined = fallback_only(SWEEP);
    let s = repo();
    let agent = hostile_finder(&s, "answer");
    let idle: Vec<std::process::Child> = (0..300)
        .map(|_| {
            #[expect(clippy::disallowed_methods, reason = "the test plays the rest of the machine")]
            let c = std::process::Command::new("sleep")
                .arg("120")
                .env_remove(work_runtime::contain::OWNER_VAR)
                .stdin(std::process::Stdio::null())
                .spawn()
                .expect("start an idle process");
            c
        })
        .collect();
    let idle_pids: std::collections::BTreeSet<i32> = idle.iter().map(|c| c.id() as i32).collect();
    // Outside the repository: the read-only guard would see a file the sweeps write in it.
    let probe = tempfile::tempdir().expect("tempdir");
    let log = probe.path().join("proc-reads");
    let out = s
        .work()
        .env("WORK_TEST_PROC_READS", &log)
        .args(exhaust_args(&agent, "timeouts.dispatch_secs=30"))
        .output()
        .expect("run work");
    for mut c in idle {
        let _ = c.kill();
        let _ = c.wait();
    }
    assert_eq!(out.status.code(), Some(0), "{}", String::from_utf8_lossy(&out.stderr));
    let (alive, survived) = survivors(&s, Duration::ZERO);
    assert_eq!(alive, Vec::<i32>::new(), "detached descendants outlived their dispatch");
    assert_eq!(survived, Vec::<String>::new());
    let reads: Vec<(String, i32)> = std::fs::read_to_string(&log)
        .expect("the probe logged the sweeps' reads")
        .lines()
        .filter_map(|l| {
            let (who, pid) = l.split_once(' ')?;
            Some((who.to_string(), pid.parse().ok()?))
        })
        .collect();
    // The probe sees the sweeps: they read the descendants each dispatch detached.
    let detached = descendant_pids(&s);
    assert!(
        reads.iter().any(|(who, p)| who == "dispatch" && detached.contains(p)),
        "no sweep read a detached descendant: {reads:?}"
    );
    let outside: Vec<&(String, i32)> = reads.iter().filter(|(_, p)| idle_pids.contains(p)).collect();
    assert_eq!(outside, Vec::<&(String, i32)>::new(), "the sweeps read processes outside work's tree");
}
