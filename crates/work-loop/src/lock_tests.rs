use super::*;
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};

fn refusal(err: LoopError) -> serde_json::Value {
    match err {
        LoopError::Refused { message, json } => {
            assert!(message.contains("nothing was changed"), "{message}");
            assert_eq!(json["reason"], "lock_held");
            json
        }
        other => panic!("expected a refusal, got {other:?}"),
    }
}

fn age(p: &Path, by: Duration) {
    let f = File::options().write(true).open(p).expect("open");
    f.set_modified(SystemTime::now() - by).expect("set mtime");
}

#[test]
fn held_while_alive_refuses_and_release_removes_the_file() {
    let d = tempfile::tempdir().expect("tempdir");
    let p = d.path().join("x.lock");
    let a = Lock::acquire(&p).expect("first");
    let text = fs::read_to_string(&p).expect("the record");
    assert_eq!(record_pid(&text), Some(std::process::id()), "{text:?}");
    let json = refusal(Lock::acquire(&p).expect_err("second is refused"));
    assert_eq!(json["holder_pid"], serde_json::json!(std::process::id()));
    drop(a);
    assert!(!p.exists(), "no lock file remains after release");
    drop(Lock::acquire(&p).expect("free again"));
    assert!(!p.exists());
}

#[test]
fn a_planted_directory_or_fresh_record_is_held_and_left_alone() {
    let d = tempfile::tempdir().expect("tempdir");
    let p = d.path().join("x.lock");
    fs::create_dir(&p).expect("mkdir");
    assert_eq!(refusal(Lock::acquire(&p).expect_err("a directory is held"))["holder_pid"], serde_json::Value::Null);
    assert!(p.is_dir());
    fs::remove_dir(&p).expect("rmdir");
    // A script's record (its pid need not be ours, nor alive: the scripts wait it out too).
    let planted = format!("statelock1 {} 1234567\n", "e".repeat(32));
    fs::write(&p, &planted).expect("plant");
    assert_eq!(refusal(Lock::acquire(&p).expect_err("a fresh record is held"))["holder_pid"], 1234567);
    assert_eq!(fs::read_to_string(&p).expect("kept"), planted);
    // A fresh empty file is a creator between create and write.
    fs::write(&p, "").expect("empty");
    refusal(Lock::acquire(&p).expect_err("a fresh empty file is held"));
    // Content no holder wrote is never taken over, however old.
    fs::write(&p, "not a lock record\n").expect("foreign");
    age(&p, STALE_AFTER * 2);
    refusal(Lock::acquire(&p).expect_err("foreign content is held"));
    assert_eq!(fs::read_to_string(&p).expect("kept"), "not a lock record\n");
}

#[test]
fn a_record_a_gone_work_process_left_is_taken_at_once() {
    let d = tempfile::tempdir().expect("tempdir");
    let p = d.path().join("x.lock");
    let a = Lock::acquire(&p).expect("first");
    let left = fs::read_to_string(&p).expect("the record");
    assert!(left.split(' ').nth(1).is_some_and(|t| t.starts_with(WORK_MARK) && t.len() == 32), "{left:?}");
    drop(a);
    // What a killed holder leaves: its fresh record, and no flock on the file.
    fs::write(&p, format!("statelock1 {WORK_MARK}{} 1234567\n", "e".repeat(24))).expect("plant");
    let l = Lock::acquire(&p).unwrap_or_else(|e| panic!("a gone work holder's record is free: {e:?}"));
    drop(l);
    assert!(!p.exists());
}

#[test]
fn a_stale_record_an_old_empty_file_or_a_bare_pid_is_taken() {
    let d = tempfile::tempdir().expect("tempdir");
    let p = d.path().join("x.lock");
    for (content, old) in [
        (format!("statelock1 {} 1234567\n", "e".repeat(32)), true),
        (String::new(), true),
        ("1073741823\n".to_string(), false),
    ] {
        fs::write(&p, &content).expect("plant");
        if old {
            age(&p, STALE_AFTER + Duration::from_secs(5));
        }
        let l = Lock::acquire(&p).unwrap_or_else(|e| panic!("{content:?} is free: {e:?}"));
        let now = fs::read_to_string(&p).expect("ours");
        assert_eq!(record_pid(&now), Some(std::process::id()), "{now:?}");
        drop(l);
        assert!(!p.exists());
    }
}

#[test]
fn racing_threads_never_both_hold_it() {
    // Two acquisitions in one process use two open file descriptions, so flock conflicts
    // exactly as between processes. Each round every thread takes and releases the lock
    // repeatedly; a counter inside the section must never exceed one.
    let d = tempfile::tempdir().expect("tempdir");
    let p = d.path().join("x.lock");
    for round in 0..20 {
        if round % 2 == 1 {
            fs::write(&p, "1073741823\n").expect("a leftover from an earlier release");
        }
        let inside = Arc::new(AtomicUsize::new(0));
        let wins = Arc::new(AtomicUsize::new(0));
        let start = Arc::new(std::sync::Barrier::new(8));
        let handles: Vec<_> = (0..8)
            .map(|_| {
                let (p, inside, wins, start) = (p.clone(), inside.clone(), wins.clone(), start.clone());
                std::thread::spawn(move || {
                    start.wait();
                    for _ in 0..50 {
                        if let Ok(l) = Lock::acquire(&p) {
                            assert_eq!(inside.fetch_add(1, Ordering::SeqCst), 0, "two holders at once");
                            wins.fetch_add(1, Ordering::SeqCst);
                            std::thread::yield_now();
                            inside.fetch_sub(1, Ordering::SeqCst);
                            drop(l);
                        }
                    }
                })
            })
            .collect();
        for h in handles {
            h.join().expect("no thread saw two holders");
        }
        assert!(wins.load(Ordering::SeqCst) > 0);
        assert!(!p.exists(), "the last release removed the file");
    }
}

#[test]
fn all_racers_at_once_get_exactly_one_winner() {
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
                    let l = Lock::acquire(&p);
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
