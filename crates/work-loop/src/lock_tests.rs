use super::*;
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::SystemTime;

fn refusal(err: LoopError, reason: &str) -> serde_json::Value {
    match err {
        LoopError::Refused { message, json } => {
            assert_eq!(json["reason"], reason, "{message}");
            json
        }
        other => panic!("expected a refusal, got {other:?}"),
    }
}

fn age(p: &Path, by: Duration) {
    let f = File::options().write(true).open(p).expect("open");
    f.set_modified(SystemTime::now() - by).expect("set mtime");
}

/// A script's record: the scripts' format, a token without `work`'s mark.
fn script_record(pid: u32) -> String {
    format!("statelock1 {} {pid}\n", "e".repeat(32))
}

#[test]
fn held_while_alive_refuses_past_the_wait_naming_the_holder_and_release_removes_the_file() {
    let d = tempfile::tempdir().expect("tempdir");
    let p = d.path().join("x.lock");
    let a = Lock::acquire(&p).expect("first");
    let text = fs::read_to_string(&p).expect("the record");
    assert_eq!(record_pid(&text), Some(std::process::id()), "{text:?}");
    let err = Lock::acquire_within(&p, Duration::from_millis(30)).expect_err("held past the wait");
    let LoopError::Refused { message, .. } = &err else { panic!("{err:?}") };
    assert!(message.contains(&format!("recorded holder pid {}", std::process::id())), "{message}");
    assert!(message.contains("could not acquire"), "{message}");
    assert_eq!(refusal(err, "lock_held")["holder_pid"], serde_json::json!(std::process::id()));
    drop(a);
    assert!(!p.exists(), "no lock file remains after release");
    drop(Lock::acquire(&p).expect("free again"));
    assert!(!p.exists());
}

#[test]
fn a_caller_waits_for_a_live_holder_and_then_takes_it() {
    let d = tempfile::tempdir().expect("tempdir");
    let p = d.path().join("x.lock");
    let holder = Lock::acquire(&p).expect("holder");
    let (tx, rx) = std::sync::mpsc::channel();
    let waiter = {
        let p = p.clone();
        std::thread::spawn(move || {
            tx.send(()).expect("started");
            Lock::acquire(&p).map(drop)
        })
    };
    rx.recv().expect("the waiter started");
    // Hold it a while after the waiter began: it must wait, not refuse.
    std::thread::sleep(Duration::from_millis(100));
    drop(holder);
    waiter.join().expect("join").expect("the waiter got the lock once the holder let go");
    assert!(!p.exists());
}

#[test]
fn a_planted_directory_is_refused_at_once_and_left_alone() {
    let d = tempfile::tempdir().expect("tempdir");
    let p = d.path().join("x.lock");
    fs::create_dir(&p).expect("mkdir");
    // An hour's wait: a lock path that can never be taken must not be waited for at all.
    let err = Lock::acquire_within(&p, Duration::from_secs(3600)).expect_err("a directory is unusable");
    let LoopError::Refused { message, .. } = &err else { panic!("{err:?}") };
    assert!(message.contains("must be a regular file (found mode drwx"), "{message}");
    refusal(err, "lock_unusable");
    assert!(p.is_dir());
}

#[test]
fn a_fresh_script_record_is_held_and_an_old_one_taken_as_the_scripts_do() {
    let d = tempfile::tempdir().expect("tempdir");
    let p = d.path().join("x.lock");
    // A running script holds no flock: its fresh record is waited for, then refused.
    fs::write(&p, script_record(1234567)).expect("plant");
    let json = refusal(Lock::acquire_within(&p, Duration::ZERO).expect_err("held"), "lock_held");
    assert_eq!(json["holder_pid"], 1234567);
    assert_eq!(fs::read_to_string(&p).expect("kept"), script_record(1234567));
    age(&p, STALE_AFTER + Duration::from_secs(5));
    let l = Lock::acquire_within(&p, Duration::ZERO).expect("a crashed script's old record is taken");
    assert_eq!(record_pid(&fs::read_to_string(&p).expect("ours")), Some(std::process::id()));
    drop(l);
    assert!(!p.exists());
}

#[test]
fn whatever_a_gone_holder_left_is_taken_at_once_however_fresh() {
    // What a killed `work` leaves behind: an empty file (killed between create and write), a
    // torn record, its whole record; also a bare pid and content no holder wrote. None has a
    // live flock on it, so none waits, whatever its age.
    let d = tempfile::tempdir().expect("tempdir");
    let p = d.path().join("x.lock");
    for content in [
        String::new(),
        format!("statelock1 {WORK_MARK}12"),
        format!("statelock1 {WORK_MARK}{} 1234567\n", "e".repeat(24)),
        "1073741823\n".to_string(),
        "not a lock record\n".to_string(),
        format!("statelock1 {}", "e".repeat(20)),
    ] {
        fs::write(&p, &content).expect("plant");
        let l = Lock::acquire_within(&p, Duration::ZERO).unwrap_or_else(|e| panic!("{content:?} is free: {e:?}"));
        let now = fs::read_to_string(&p).expect("ours");
        assert_eq!(record_pid(&now), Some(std::process::id()), "{now:?}");
        assert!(now.split(' ').nth(1).is_some_and(|t| t.starts_with(WORK_MARK)), "{now:?}");
        drop(l);
        assert!(!p.exists());
    }
}

#[test]
fn racing_threads_never_both_hold_it_and_every_one_gets_it() {
    // Two acquisitions in one process use two open file descriptions, so flock conflicts
    // exactly as between processes. Each round every thread takes and releases the lock
    // repeatedly, waiting when it is held; a counter inside the section must never exceed
    // one, and every acquisition succeeds.
    let d = tempfile::tempdir().expect("tempdir");
    let p = d.path().join("x.lock");
    for round in 0..10 {
        if round % 2 == 1 {
            fs::write(&p, "").expect("a leftover empty file from a killed holder");
        }
        let inside = Arc::new(AtomicUsize::new(0));
        let wins = Arc::new(AtomicUsize::new(0));
        let start = Arc::new(std::sync::Barrier::new(8));
        let handles: Vec<_> = (0..8)
            .map(|_| {
                let (p, inside, wins, start) = (p.clone(), inside.clone(), wins.clone(), start.clone());
                std::thread::spawn(move || {
                    start.wait();
                    for _ in 0..20 {
                        let l = Lock::acquire(&p).expect("every caller gets the lock in turn");
                        assert_eq!(inside.fetch_add(1, Ordering::SeqCst), 0, "two holders at once");
                        wins.fetch_add(1, Ordering::SeqCst);
                        std::thread::yield_now();
                        inside.fetch_sub(1, Ordering::SeqCst);
                        drop(l);
                    }
                })
            })
            .collect();
        for h in handles {
            h.join().expect("no thread saw two holders");
        }
        assert_eq!(wins.load(Ordering::SeqCst), 8 * 20);
        assert!(!p.exists(), "the last release removed the file");
    }
}

#[test]
fn all_racers_at_once_without_waiting_get_exactly_one_winner() {
    let d = tempfile::tempdir().expect("tempdir");
    let p = d.path().join("x.lock");
    for _ in 0..30 {
        let start = Arc::new(std::sync::Barrier::new(8));
        let hold = Arc::new(std::sync::Barrier::new(8));
        let wins = Arc::new(AtomicUsize::new(0));
        let handles: Vec<_> = (0..8)
            .map(|_| {
                let (p, start, hold, wins) = (p.clone(), start.clone(), hold.clone(), wins.clone());
                std::thread::spawn(move || {
                    start.wait();
                    let l = Lock::acquire_within(&p, Duration::ZERO);
                    if l.is_ok() {
                        wins.fetch_add(1, Ordering::SeqCst);
                    }
                    hold.wait();
                    drop(l);
                })
            })
            .collect();
        for h in handles {
            h.join().expect("join");
        }
        assert_eq!(wins.load(Ordering::SeqCst), 1);
        assert!(!p.exists());
    }
}

#[test]
fn filemode_reads_like_ls() {
    assert_eq!(filemode(0o040755), "drwxr-xr-x");
    assert_eq!(filemode(0o100600), "-rw-------");
    assert_eq!(filemode(0o120777), "lrwxrwxrwx");
}
