//! Containment: nothing `work` starts outlives its dispatch, or `work` itself.
//!
//! Four mechanisms, set up lazily by the first [`crate::spawn::Spawner`] call, so that no other
//! crate has to know about them:
//! - `work` is the child subreaper (`PR_SET_CHILD_SUBREAPER`) of everything it starts: a
//!   descendant that detaches (`setsid`, a double fork, a CLI running each tool command in its
//!   own session) is re-parented to `work`, not to init, and is found by a `/proc` scan;
//! - every child carries `WORK_CONTAINMENT=<owner>/<n>` in its environment (inherited by its
//!   descendants), which names the dispatch a process belongs to;
//! - every child gets `PR_SET_PDEATHSIG` = SIGKILL, so it dies with `work` even when `work` is
//!   SIGKILLed. The kernel sends it when the *thread* that forked dies, so every child is forked
//!   from one thread that lives as long as the process (the forker);
//! - a watchdog (`sh`, its own group, no pdeathsig) holds a pipe from `work`; when `work` dies
//!   (however), the pipe ends and the watchdog kills what carries this owner's marker and every
//!   process group still registered.
//!
//! After each process ends, [`end_dispatch`] ends what it left: its process group, every process
//! with its marker, and every re-parented orphan that no other live dispatch claims. Each gets
//! SIGTERM, a grace period, then SIGKILL; orphans are reaped (no zombies).

use std::collections::{BTreeMap, BTreeSet};
use std::io::Write;
use std::sync::{Mutex, OnceLock};
use std::time::{Duration, Instant};

/// The environment variable that names the dispatch a process belongs to.
pub const OWNER_VAR: &str = "WORK_CONTAINMENT";

/// How long a process has between SIGTERM and SIGKILL.
pub const GRACE: Duration = Duration::from_millis(500);

/// A child started by the spawner and not yet ended.
#[derive(Debug, Clone)]
struct Tracked {
    pgid: i32,
    marker: String,
}

/// Direct children of `work` still running (pid → group and marker). The lock is held while a
/// child is forked and registered, and while orphans are chosen, so a child just forked is
/// never mistaken for an orphan.
static TRACKED: Mutex<BTreeMap<i32, Tracked>> = Mutex::new(BTreeMap::new());

type Job = Box<dyn FnOnce() + Send>;

struct Shared {
    owner: String,
    forker: Option<std::sync::mpsc::Sender<Job>>,
    watchdog: Option<Mutex<std::process::ChildStdin>>,
    watchdog_pid: Option<i32>,
    next: std::sync::atomic::AtomicU64,
}

static SHARED: OnceLock<Shared> = OnceLock::new();

fn shared() -> &'static Shared {
    SHARED.get_or_init(|| {
        // Not fatal where unsupported: containment then falls back to groups and markers.
        let _ = nix::sys::prctl::set_child_subreaper(true);
        let nanos = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map(|d| d.as_nanos())
            .unwrap_or_default();
        let owner = format!("{}-{nanos}", std::process::id());
        let (watchdog, watchdog_pid) = match start_watchdog(&owner) {
            Some((stdin, pid)) => (Some(Mutex::new(stdin)), Some(pid)),
            None => (None, None),
        };
        Shared { owner, forker: start_forker(), watchdog, watchdog_pid, next: Default::default() }
    })
}

/// A fresh marker value for one process (`<owner>/<n>`).
pub fn new_marker() -> String {
    let s = shared();
    let n = s.next.fetch_add(1, std::sync::atomic::Ordering::Relaxed) + 1;
    format!("{}/{n}", s.owner)
}

fn start_forker() -> Option<std::sync::mpsc::Sender<Job>> {
    let (tx, rx) = std::sync::mpsc::channel::<Job>();
    std::thread::Builder::new()
        .name("work-forker".into())
        .spawn(move || {
            // Lives as long as the process: the parent-death signal is tied to this thread.
            while let Ok(job) = rx.recv() {
                job();
            }
        })
        .ok()?;
    Some(tx)
}

const WATCHDOG: &str = r#"owner="$1"; groups=""
while read -r op g; do
  case "$op" in
    +) groups="$groups $g" ;;
    -) keep=""; for x in $groups; do [ "$x" = "$g" ] || keep="$keep $x"; done; groups="$keep" ;;
  esac
done
for round in 1 2 3 4 5 6; do
  for g in $groups; do kill -KILL -- "-$g" 2>/dev/null; done
  pids=$(grep -lzsE "^WORK_CONTAINMENT=$owner(/|\$)" /proc/[0-9]*/environ 2>/dev/null | cut -d/ -f3)
  [ -z "$pids" ] && [ "$round" -gt 1 ] && break
  [ -n "$pids" ] && kill -KILL $pids 2>/dev/null
  sleep 0.1
done
"#;

fn start_watchdog(owner: &str) -> Option<(std::process::ChildStdin, i32)> {
    use std::os::unix::process::CommandExt;
    #[expect(clippy::disallowed_methods, reason = "the containment watchdog is started by the runtime itself")]
    let mut cmd = std::process::Command::new("sh");
    cmd.args(["-c", WATCHDOG, "work-watchdog", owner])
        .env_remove(OWNER_VAR)
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .current_dir("/")
        .process_group(0);
    let mut child = cmd.spawn().ok()?;
    let pid = i32::try_from(child.id()).ok()?;
    let stdin = child.stdin.take()?;
    // Never waited for: it outlives `work` on purpose. Tracked so it is never an orphan.
    if let Ok(mut t) = TRACKED.lock() {
        t.insert(pid, Tracked { pgid: pid, marker: String::new() });
    }
    std::mem::forget(child);
    Some((stdin, pid))
}

fn tell_watchdog(line: &str) {
    if let Some(w) = shared().watchdog.as_ref()
        && let Ok(mut w) = w.lock()
    {
        let _ = writeln!(w, "{line}");
    }
}

/// Arms a child: it gets SIGKILL when `work` dies, and refuses to start if `work` already did.
#[allow(unsafe_code)]
pub(crate) fn arm(cmd: &mut tokio::process::Command) {
    let parent = nix::unistd::getpid();
    // SAFETY: the closure runs in the forked child before exec. It calls only prctl(2) and
    // getppid(2), which are async-signal-safe system calls; it allocates nothing, takes no lock
    // and touches no state shared with other threads of the parent.
    unsafe {
        cmd.pre_exec(move || {
            nix::sys::prctl::set_pdeathsig(nix::sys::signal::Signal::SIGKILL)
                .map_err(|e| std::io::Error::from_raw_os_error(e as i32))?;
            if nix::unistd::getppid() != parent {
                // `work` died between the fork and the prctl: do not start an orphan.
                return Err(std::io::Error::from_raw_os_error(nix::errno::Errno::ESRCH as i32));
            }
            Ok(())
        });
    }
}

/// Forks `cmd` on the forker thread (inside the caller's runtime) and registers the child.
pub(crate) async fn spawn_tracked(
    mut cmd: tokio::process::Command,
    marker: String,
) -> std::io::Result<tokio::process::Child> {
    let sh = shared();
    let handle = tokio::runtime::Handle::current();
    let (tx, rx) = tokio::sync::oneshot::channel();
    let job = move || {
        let _entered = handle.enter();
        let mut tracked = TRACKED.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
        let r = cmd.spawn();
        if let Ok(child) = &r
            && let Some(pid) = child.id().and_then(|p| i32::try_from(p).ok())
        {
            tracked.insert(pid, Tracked { pgid: pid, marker });
            drop(tracked);
            tell_watchdog(&format!("+ {pid}"));
        }
        let _ = tx.send(r);
    };
    match &sh.forker {
        Some(f) => {
            f.send(Box::new(job)).map_err(|_| std::io::Error::other("the forker thread is gone"))?;
        }
        None => job(),
    }
    rx.await.map_err(|_| std::io::Error::other("the forker thread dropped a spawn"))?
}

/// One line of `/proc/<pid>/stat`, the fields used here.
#[derive(Debug, Clone, Copy)]
struct Stat {
    pid: i32,
    state: char,
    ppid: i32,
    pgrp: i32,
}

fn stat(pid: i32) -> Option<Stat> {
    let text = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    // The command name is in parentheses and may hold anything; the fields follow the last `)`.
    let rest = text.rsplit_once(')')?.1;
    let mut f = rest.split_whitespace();
    let state = f.next()?.chars().next()?;
    let ppid = f.next()?.parse().ok()?;
    let pgrp = f.next()?.parse().ok()?;
    Some(Stat { pid, state, ppid, pgrp })
}

fn all_pids() -> Vec<i32> {
    let Ok(dir) = std::fs::read_dir("/proc") else { return Vec::new() };
    dir.filter_map(|e| e.ok()?.file_name().to_str()?.parse::<i32>().ok()).collect()
}

fn marker_of(pid: i32) -> Option<String> {
    let env = std::fs::read(format!("/proc/{pid}/environ")).ok()?;
    let prefix = format!("{OWNER_VAR}=");
    env.split(|&b| b == 0)
        .find_map(|kv| kv.strip_prefix(prefix.as_bytes()))
        .map(|v| String::from_utf8_lossy(v).into_owned())
}

/// What to end: processes and process groups.
#[derive(Debug, Default)]
struct Targets {
    pids: BTreeSet<i32>,
    groups: BTreeSet<i32>,
}

impl Targets {
    fn is_empty(&self) -> bool {
        self.pids.is_empty() && self.groups.is_empty()
    }

    fn signal(&self, sig: nix::sys::signal::Signal) {
        use nix::unistd::Pid;
        for &g in &self.groups {
            let _ = nix::sys::signal::killpg(Pid::from_raw(g), sig);
        }
        for &p in &self.pids {
            let _ = nix::sys::signal::kill(Pid::from_raw(p), sig);
        }
    }
}

/// Which processes a cleanup ends.
#[derive(Debug, Clone)]
enum Scope {
    /// One ended dispatch: its group, its marker, and unclaimed orphans.
    Dispatch { pgid: i32, marker: String },
    /// Everything `work` started (on SIGINT/SIGTERM).
    All,
}

/// Chooses what is still running in `scope` (zombies excluded; they are reaped, not killed).
fn targets(scope: &Scope) -> Targets {
    let me = std::process::id() as i32;
    let owner = &shared().owner;
    // The processes first, then what is tracked: a child forked in between is then both listed
    // and tracked (the spawner holds the lock from its fork until it is registered), never
    // taken for an unclaimed orphan and killed as it starts.
    let running: Vec<Stat> =
        all_pids().into_iter().filter_map(stat).filter(|st| !matches!(st.state, 'Z' | 'X')).collect();
    let tracked = TRACKED.lock().map(|t| t.clone()).unwrap_or_default();
    let watchdog = shared().watchdog_pid;
    let live_markers: BTreeSet<&str> = tracked.values().map(|t| t.marker.as_str()).collect();
    let live_groups: BTreeSet<i32> = tracked.values().map(|t| t.pgid).collect();
    let mut out = Targets::default();
    let wanted_groups: BTreeSet<i32> = match scope {
        Scope::Dispatch { pgid, .. } => BTreeSet::from([*pgid]),
        Scope::All => live_groups.iter().copied().filter(|g| Some(*g) != watchdog).collect(),
    };
    for st in &running {
        if st.pid == me || Some(st.pid) == watchdog {
            continue;
        }
        if wanted_groups.contains(&st.pgrp) {
            out.groups.insert(st.pgrp);
        }
        if tracked.contains_key(&st.pid) {
            continue;
        }
        let marker = marker_of(st.pid);
        let take = match scope {
            Scope::All => st.ppid == me || marker.as_deref().is_some_and(|m| m.starts_with(&format!("{owner}/"))),
            Scope::Dispatch { marker: mine, .. } => {
                let claimed = marker.as_deref().is_some_and(|m| m != mine && live_markers.contains(m))
                    || live_groups.contains(&st.pgrp);
                marker.as_deref() == Some(mine.as_str()) || (st.ppid == me && !claimed)
            }
        };
        if take {
            out.pids.insert(st.pid);
        }
    }
    out
}

/// Reaps every exited child of `work` that the spawner does not wait for itself.
fn reap_orphans() {
    use nix::sys::wait::{WaitPidFlag, waitpid};
    let me = std::process::id() as i32;
    let Ok(tracked) = TRACKED.lock() else { return };
    for pid in all_pids() {
        if tracked.contains_key(&pid) {
            continue;
        }
        if let Some(st) = stat(pid)
            && st.ppid == me
            && st.state == 'Z'
        {
            let _ = waitpid(nix::unistd::Pid::from_raw(pid), Some(WaitPidFlag::WNOHANG));
        }
    }
}

/// SIGTERM, up to [`GRACE`] for it to work, then SIGKILL until nothing in scope runs (bounded).
fn terminate(scope: &Scope) {
    use nix::sys::signal::Signal;
    let started = Instant::now();
    let mut t = targets(scope);
    if t.is_empty() {
        reap_orphans();
        return;
    }
    t.signal(Signal::SIGTERM);
    while started.elapsed() < GRACE {
        std::thread::sleep(Duration::from_millis(10));
        reap_orphans();
        t = targets(scope);
        if t.is_empty() {
            return;
        }
        // A process started after the first round also gets its SIGTERM.
        t.signal(Signal::SIGTERM);
    }
    let deadline = Instant::now() + Duration::from_secs(3);
    while !t.is_empty() && Instant::now() < deadline {
        t.signal(Signal::SIGKILL);
        std::thread::sleep(Duration::from_millis(10));
        reap_orphans();
        t = targets(scope);
    }
    reap_orphans();
}

/// Forgets a child the spawner has waited for (or given up on).
pub(crate) fn untrack(pid: i32) {
    if let Ok(mut t) = TRACKED.lock() {
        t.remove(&pid);
    }
    tell_watchdog(&format!("- {pid}"));
}

/// Ends what a dispatch left behind once its main process has ended: its group, every process
/// with its marker, every unclaimed re-parented orphan (SIGTERM, grace, SIGKILL), and reaps.
pub(crate) async fn end_dispatch(pgid: i32, marker: String) {
    let scope = Scope::Dispatch { pgid, marker };
    let work = tokio::task::spawn_blocking(move || terminate(&scope));
    if work.await.is_err() {
        reap_orphans();
    }
}

/// Ends everything `work` started (SIGTERM, grace, SIGKILL) and reaps it: for SIGINT/SIGTERM.
pub fn end_all() {
    if SHARED.get().is_none() {
        return;
    }
    terminate(&Scope::All);
}

/// A process group signalled directly (a timeout, before the main process is waited for).
pub(crate) fn signal_group(pgid: i32, sig: nix::sys::signal::Signal) {
    let _ = nix::sys::signal::killpg(nix::unistd::Pid::from_raw(pgid), sig);
}
