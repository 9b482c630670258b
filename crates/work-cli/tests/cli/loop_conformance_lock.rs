//! `work loop`'s state lock as the work-loop scripts' callers rely on it, through the real
//! binary: concurrent cohort calls wait their turn (none refused, no update lost), a live
//! holder is waited for and only then named in a refusal, and whatever a killed holder left is
//! taken at once (liveness is the kernel flock, never the file's age or content).

use crate::loop_conformance::{DIR, init_pair, json_of, lp};
use crate::support::Scenario;

fn retry_count(s: &Scenario) -> u64 {
    s.read_json(&format!("{DIR}/state.json"))["implementation_retry_count"].as_u64().expect("a count")
}

#[test]
fn sixteen_concurrent_record_attempts_all_complete_and_none_is_lost() {
    let s = Scenario::new();
    let run = init_pair(&s);
    let n = 16;
    let children: Vec<_> = (0..n)
        .map(|i| {
            let cycle = format!("{run}:{}", i + 1);
            #[expect(clippy::disallowed_methods, reason = "the test runs many work processes at once")]
            std::process::Command::new(assert_cmd::cargo::cargo_bin("work"))
                .current_dir(s.root())
                .env("WORK_FAKE_CLOCK", "2026-01-01T00:00:00Z")
                .args(["loop", "cohort", "record-attempt", DIR, "--phase", "implement"])
                .args(["--cycle-id", &cycle, "--expect-run-id", &run])
                .stdout(std::process::Stdio::piped())
                .stderr(std::process::Stdio::piped())
                .spawn()
                .expect("spawn work")
        })
        .collect();
    for child in children {
        let out = child.wait_with_output().expect("wait");
        assert_eq!(out.status.code(), Some(0), "every caller completes: {}", String::from_utf8_lossy(&out.stderr));
    }
    assert_eq!(retry_count(&s), n, "every attempt is counted once");
    assert!(!s.path(&format!("{DIR}/state.json.lock")).exists(), "no lock file remains");
}

/// The holder process, killed (SIGKILL) when dropped, so a failing test leaves none behind.
struct Holder(std::process::Child);

impl Holder {
    fn pid(&self) -> u32 {
        self.0.id()
    }

    fn kill(mut self) {
        self.0.kill().expect("SIGKILL the holder");
        self.0.wait().expect("reap");
    }
}

impl Drop for Holder {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

/// A second process that holds the cohort's lock as a `work` holder does (the kernel flock,
/// then its record) with `content` in the file; it prints `held` once it holds it.
fn hold(s: &Scenario, content: &str) -> Holder {
    let lock = s.path(&format!("{DIR}/state.json.lock"));
    #[expect(clippy::disallowed_methods, reason = "the test holds the lock from a second process")]
    let mut holder = std::process::Command::new("python3")
        .args([
            "-c",
            "import fcntl, os, sys, time\nf = open(sys.argv[1], 'w')\nfcntl.flock(f, fcntl.LOCK_EX)\nf.write(sys.argv[2].replace('PID', str(os.getpid()))); f.flush()\nprint('held', flush=True)\ntime.sleep(120)",
            &lock.display().to_string(),
            content,
        ])
        .stdout(std::process::Stdio::piped())
        .spawn()
        .expect("spawn the holder");
    let mut line = String::new();
    std::io::BufRead::read_line(&mut std::io::BufReader::new(holder.stdout.take().expect("stdout")), &mut line)
        .expect("read");
    assert_eq!(line.trim(), "held");
    Holder(holder)
}

#[test]
fn a_live_holder_is_waited_for_then_named_and_a_sigkilled_one_never_wedges_the_spec() {
    let s = Scenario::new();
    let run = init_pair(&s);
    let attempt = |n: u32| {
        let cycle = format!("{run}:{n}");
        lp(
            &s,
            &[
                "cohort",
                "record-attempt",
                DIR,
                "--phase",
                "implement",
                "--cycle-id",
                &cycle,
                "--expect-run-id",
                &run,
                "--json",
            ],
        )
    };
    // A live holder (its flock held): waited for through the whole bound, then refused naming it.
    let holder = hold(&s, "statelock1 776f726b0123456789abcdef01234567 PID\n");
    let before = s.read(&format!("{DIR}/state.json"));
    let (code, out, err) = attempt(1);
    assert_eq!(code, 1, "{out}{err}");
    let doc = json_of(&out);
    assert_eq!(doc["reason"], "lock_held", "{out}");
    assert_eq!(doc["holder_pid"], serde_json::json!(holder.pid()), "{out}");
    assert!(err.contains(&format!("recorded holder pid {}", holder.pid())), "{err}");
    assert!(err.contains("within 10.0s"), "{err}");
    assert_eq!(s.read(&format!("{DIR}/state.json")), before, "nothing written");
    // SIGKILLed: its record stays in the file, its flock is gone, and the next call takes it.
    holder.kill();
    assert!(s.path(&format!("{DIR}/state.json.lock")).is_file(), "the killed holder's file is left");
    let (code, _, err) = attempt(1);
    assert_eq!(code, 0, "{err}");
    assert_eq!(retry_count(&s), 1);
    // Killed between creating the file and writing its token (empty), or mid-token (torn).
    for (n, left) in [(2, ""), (3, "statelock1 776f72")] {
        let holder = hold(&s, left);
        holder.kill();
        assert_eq!(s.read(&format!("{DIR}/state.json.lock")), left);
        let (code, _, err) = attempt(n);
        assert_eq!(code, 0, "a lock file left {left:?} by a killed holder is taken at once: {err}");
    }
    assert_eq!(retry_count(&s), 3);
    assert!(!s.path(&format!("{DIR}/state.json.lock")).exists());
}
