//! Reading the process table for containment, at a cost that does not grow with the rest of
//! the machine:
//! - `work`'s descendants, from the kernel's list of each task's children
//!   (`/proc/PID/task/TID/children`), walked down from `work` itself;
//! - the processes started after a given pid (a daemon outside the tree may start one with a
//!   dispatch's marker): pids are given out in a cycle, so those are the pids after it up to the
//!   last one given out (`/proc/sys/kernel/ns_last_pid`); each of them is tried, and only when
//!   there are more than [`PROBED_AT_MOST`] is `/proc` listed to find those that run;
//! - every process, where the kernel has no list of children (built without
//!   `CONFIG_PROC_CHILDREN`; said once on stderr) or does not say which pid it gave out last.
//!
//! `WORK_TEST_PROC_READS=<file>` (tests only) appends `<scope> <pid>` to the file for every
//! `/proc/PID/stat` read, so that a test can show which processes a sweep looked at.

use std::collections::BTreeMap;
use std::io::{Read, Write};
use std::sync::{Mutex, OnceLock};

/// One line of `/proc/<pid>/stat`, the fields used here.
#[derive(Debug, Clone, Copy)]
pub(super) struct Stat {
    pub(super) pid: i32,
    pub(super) state: char,
    pub(super) ppid: i32,
    pub(super) pgrp: i32,
    /// Clock ticks after boot when it started: with the pid, names one process.
    pub(super) start: u64,
}

/// Which sweep reads a process (for the test probe).
#[derive(Debug, Clone, Copy)]
pub(super) enum Reader {
    /// The sweep after one dispatch.
    Dispatch,
    /// The sweep at `work`'s exit.
    Exit,
    /// Registering a dispatch's main process.
    Spawn,
}

impl Reader {
    fn as_str(self) -> &'static str {
        match self {
            Self::Dispatch => "dispatch",
            Self::Exit => "exit",
            Self::Spawn => "spawn",
        }
    }
}

fn probe(reader: Reader, pid: i32) {
    static LOG: OnceLock<Option<Mutex<std::fs::File>>> = OnceLock::new();
    let log = LOG.get_or_init(|| {
        let path = std::env::var_os("WORK_TEST_PROC_READS")?;
        crate::fsx::plain::open(std::fs::OpenOptions::new().create(true).append(true), std::path::Path::new(&path))
            .ok()
            .map(Mutex::new)
    });
    if let Some(f) = log
        && let Ok(mut f) = f.lock()
    {
        let _ = writeln!(f, "{} {pid}", reader.as_str());
    }
}

/// Reads a small `/proc` file into `buf` (no `statx` first, unlike `read_to_string`).
fn read_into(path: &str, buf: &mut Vec<u8>) -> Option<()> {
    buf.clear();
    std::fs::File::open(path).ok()?.read_to_end(buf).ok()?;
    Some(())
}

pub(super) fn stat(reader: Reader, pid: i32) -> Option<Stat> {
    probe(reader, pid);
    // Read into a buffer on the stack: a sweep may read one of these for many processes.
    let mut buf = [0u8; 1024];
    let mut file = std::fs::File::open(format!("/proc/{pid}/stat")).ok()?;
    let mut len = 0;
    while len < buf.len() {
        match file.read(&mut buf[len..]) {
            Ok(0) => break,
            Ok(n) => len += n,
            Err(_) => return None,
        }
    }
    parse_stat(pid, std::str::from_utf8(&buf[..len]).ok()?)
}

pub(super) fn parse_stat(pid: i32, text: &str) -> Option<Stat> {
    // The command name is in parentheses and may hold anything; the fields follow the last `)`.
    let rest = text.rsplit_once(')')?.1;
    let mut f = rest.split_whitespace();
    let state = f.next()?.chars().next()?;
    let ppid = f.next()?.parse().ok()?;
    let pgrp = f.next()?.parse().ok()?;
    // Field 22 of the line; `f` now stands at field 6.
    let start = f.nth(16)?.parse().ok()?;
    Some(Stat { pid, state, ppid, pgrp, start })
}

fn all_pids() -> Vec<i32> {
    let Ok(dir) = std::fs::read_dir("/proc") else { return Vec::new() };
    dir.filter_map(|e| e.ok()?.file_name().to_str()?.parse::<i32>().ok()).collect()
}

/// Every process on the machine (each `/proc/PID/stat` read once).
pub(super) fn every_process(reader: Reader) -> BTreeMap<i32, Stat> {
    all_pids().into_iter().filter_map(|p| stat(reader, p)).map(|st| (st.pid, st)).collect()
}

/// Whether this kernel lists each task's children. When it does not, that is said once.
pub(super) fn children_listed() -> bool {
    static LISTED: OnceLock<bool> = OnceLock::new();
    *LISTED.get_or_init(|| {
        let first_task = std::fs::read_dir("/proc/self/task").ok().and_then(|mut d| d.next()?.ok());
        let listed = first_task.is_some_and(|t| t.path().join("children").exists());
        if !listed {
            eprintln!(
                "note: this kernel does not list a process's children (/proc/PID/task/TID/children): \
                 process containment reads every process under /proc after each dispatch"
            );
        }
        listed
    })
}

/// The children of every thread of `pid`, appended to `out`.
fn children(pid: i32, buf: &mut Vec<u8>, out: &mut Vec<i32>) {
    let Ok(tasks) = std::fs::read_dir(format!("/proc/{pid}/task")) else { return };
    for task in tasks.flatten() {
        let Some(tid) = task.file_name().to_str().map(String::from) else { continue };
        if read_into(&format!("/proc/{pid}/task/{tid}/children"), buf).is_none() {
            continue;
        }
        let text = String::from_utf8_lossy(buf);
        out.extend(text.split_ascii_whitespace().filter_map(|p| p.parse::<i32>().ok()));
    }
}

/// Every descendant of `root` (not `root` itself), each `stat` read once. A process that ends
/// during the walk may be missed with what it started; the sweeps repeat until nothing is left.
pub(super) fn descendants(reader: Reader, root: i32) -> BTreeMap<i32, Stat> {
    let mut out = BTreeMap::new();
    let (mut queue, mut buf, mut found) = (vec![root], Vec::new(), Vec::new());
    while let Some(pid) = queue.pop() {
        found.clear();
        children(pid, &mut buf, &mut found);
        for &child in &found {
            if child == root || out.contains_key(&child) {
                continue;
            }
            if let Some(st) = stat(reader, child) {
                out.insert(child, st);
                queue.push(child);
            }
        }
    }
    out
}

fn read_number(path: &str) -> Option<i64> {
    let mut buf = Vec::new();
    read_into(path, &mut buf)?;
    std::str::from_utf8(&buf).ok()?.trim().parse().ok()
}

/// At most this many pids after a dispatch's are tried one by one (an open of a pid that names
/// no process fails at once); past that — the machine started more processes than this while
/// the dispatch ran — `/proc` is listed instead.
const PROBED_AT_MOST: i64 = 1024;

/// The highest pid plus one (`/proc/sys/kernel/pid_max`), read once.
fn pid_max() -> Option<i64> {
    static MAX: OnceLock<Option<i64>> = OnceLock::new();
    *MAX.get_or_init(|| read_number("/proc/sys/kernel/pid_max"))
}

/// The pids given out after `after` (up to the last one given out, around the cycle) that may
/// name a running process: the processes started since `after` was, and whatever reuses a pid
/// of that range (told apart by its start time). A short range is given whole, without listing
/// `/proc`, so the cost follows what started during the dispatch, not how many processes the
/// machine runs; a pid in it may name no process. `None` when the kernel does not say which
/// pid it gave out last.
pub(super) fn pids_after(after: i32) -> Option<Vec<i32>> {
    let last = i32::try_from(read_number("/proc/sys/kernel/ns_last_pid")?).ok()?;
    if let Some(max) = pid_max() {
        let (a, l) = (i64::from(after), i64::from(last));
        let count = if l >= a { l - a } else { (max - 1 - a) + l };
        if (0..=PROBED_AT_MOST).contains(&count) {
            let range = if l >= a { (after + 1..=last).collect() } else { wrapped(after, last, max) };
            return Some(range);
        }
    }
    let within = |p: i32| if last >= after { p > after && p <= last } else { p > after || p <= last };
    Some(all_pids().into_iter().filter(|&p| within(p)).collect())
}

/// The pids after `after` up to `max - 1`, then from 1 up to `last`.
fn wrapped(after: i32, last: i32, max: i64) -> Vec<i32> {
    let top = i32::try_from(max - 1).unwrap_or(i32::MAX);
    (after.saturating_add(1)..=top).chain(1..=last).collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_command_name_with_parentheses_and_spaces_is_read_past() {
        let line = "42 (a) b (c) S 7 42 42 0 -1 4194560 100 0 0 0 1 2 0 0 20 0 1 0 12345 1000 10 0";
        let st = parse_stat(42, line).expect("parsed");
        assert_eq!((st.state, st.ppid, st.pgrp, st.start), ('S', 7, 42, 12345));
    }

    #[test]
    fn the_pids_after_a_dispatch_are_the_range_up_to_the_last_given_out_around_the_cycle() {
        assert_eq!(wrapped(32765, 2, 32768), vec![32766, 32767, 1, 2]);
        assert_eq!(wrapped(32767, 1, 32768), vec![1]);
        let me = std::process::id() as i32;
        #[expect(clippy::disallowed_methods, reason = "the test starts a process of its own")]
        let mut child = std::process::Command::new("sleep").arg("5").spawn().expect("sleep");
        let after = pids_after(me);
        let pid = child.id() as i32;
        let _ = child.kill();
        let _ = child.wait();
        if let Some(after) = after {
            assert!(after.contains(&pid) && !after.contains(&me), "{pid} {after:?}");
        }
    }

    #[test]
    fn the_walk_finds_a_grandchild_and_nothing_above() {
        if !children_listed() {
            return;
        }
        #[expect(clippy::disallowed_methods, reason = "the test starts a small tree of its own")]
        let mut child = std::process::Command::new("sh")
            .args(["-c", "sleep 5 & echo $!; wait"])
            .stdout(std::process::Stdio::piped())
            .spawn()
            .expect("sh");
        let mut line = String::new();
        let out = child.stdout.take().expect("stdout");
        std::io::BufRead::read_line(&mut std::io::BufReader::new(out), &mut line).expect("read");
        let grandchild: i32 = line.trim().parse().expect("pid");
        let me = std::process::id() as i32;
        let tree = descendants(Reader::Dispatch, me);
        let sh = child.id() as i32;
        let _ = child.kill();
        let _ = nix::sys::signal::kill(nix::unistd::Pid::from_raw(grandchild), nix::sys::signal::Signal::SIGKILL);
        let _ = child.wait();
        assert!(tree.contains_key(&sh) && tree.contains_key(&grandchild), "{tree:?}");
        assert_eq!(tree.get(&grandchild).map(|s| s.ppid), Some(sh));
        assert!(!tree.contains_key(&me) && !tree.contains_key(&1));
    }
}
