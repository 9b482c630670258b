//! The state lock: `<state file>.lock`, held the way the work-loop scripts hold theirs, with a
//! kernel `flock` underneath for exclusivity between `work` processes.
//!
//! - While held, the file holds one line in the scripts' format,
//!   `statelock1 <32 hex token> <pid>`, so a script sees it as held too.
//! - On release the file is removed, but only while the path still names the inode we locked;
//!   after taking the flock we check the same and start over if it does not, so two processes
//!   can never both hold it (one locking an unlinked inode, the other a new file).
//! - A lock path that is a directory (or anything but a regular file) is held and never
//!   waited out. A regular file whose flock we get is judged as the scripts judge it: a record
//!   in their format, or an empty file (a creator between create and write), is held until it is
//!   older than [`STALE_AFTER`], then taken over; content in no known format is held for good
//!   (the scripts never reclaim a file they did not write). A bare pid (the format earlier
//!   `work` releases left behind, guarded by their flock alone) is free.
//! - A record `work` wrote (its token starts with [`WORK_MARK`]) whose flock we get is free at
//!   once: a live `work` holder keeps its flock, so its holder is gone (killed, crashed). A
//!   crashed `work` run never wedges the spec; a script's record is still waited out.

use crate::common::{LoopError, sha256_hex};
use nix::fcntl::{Flock, FlockArg};
use std::fs::{self, File, OpenOptions};
use std::io::{self, Read, Write};
use std::os::unix::fs::{MetadataExt, OpenOptionsExt};
use std::path::{Path, PathBuf};
use std::time::{Duration, SystemTime};

/// How old a record (or an empty file) must be before it counts as a crashed holder's.
pub const STALE_AFTER: Duration = Duration::from_secs(300);

/// The first hex digits of the token in every record `work` writes ("work" in hex): a record
/// with it and no flock on its file was left by a `work` process that is gone.
pub const WORK_MARK: &str = "776f726b";

/// How many times a lost identity race is retried before the lock counts as held.
const ATTEMPTS: usize = 64;

/// An exclusive lock on `<path>`, released (and its file removed) on drop.
#[derive(Debug)]
pub struct Lock {
    path: PathBuf,
    ident: (u64, u64),
    file: Option<Flock<File>>,
}

/// Why a lock could not be taken.
enum Busy {
    /// Held: by this pid when the record names one.
    Held(Option<u32>),
    /// The path changed under us; try again.
    Moved,
}

impl Lock {
    /// Takes the lock at `path` (`…/engine-state.json.lock`) without waiting.
    pub fn acquire(path: &Path) -> Result<Lock, LoopError> {
        let io = |e: io::Error| LoopError::bad(format!("failed to take the lock `{}`: {e}", path.display()));
        if let Some(dir) = path.parent() {
            fs::create_dir_all(dir).map_err(io)?;
        }
        let mut holder = None;
        for _ in 0..ATTEMPTS {
            match Self::attempt(path).map_err(io)? {
                Ok(lock) => return Ok(lock),
                Err(Busy::Held(pid)) => {
                    holder = pid;
                    break;
                }
                Err(Busy::Moved) => std::thread::yield_now(),
            }
        }
        let p = path.display().to_string();
        let who = holder.map(|p| format!(" by pid {p}")).unwrap_or_default();
        Err(LoopError::refused(
            format!("take the lock `{p}`: another transition holds it{who}; nothing was changed"),
            serde_json::json!({ "lock": p, "holder_pid": holder, "reason": "lock_held" }),
        ))
    }

    fn attempt(path: &Path) -> io::Result<Result<Lock, Busy>> {
        match fs::symlink_metadata(path) {
            Ok(md) if !md.file_type().is_file() => return Ok(Err(Busy::Held(None))),
            Ok(_) => return Self::take_existing(path),
            Err(e) if e.kind() == io::ErrorKind::NotFound => {}
            Err(e) => return Err(e),
        }
        let created = OpenOptions::new()
            .read(true)
            .write(true)
            .create_new(true)
            .mode(0o600)
            .custom_flags(nix::libc::O_NOFOLLOW)
            .open(path);
        let file = match created {
            Ok(f) => f,
            Err(e) if e.kind() == io::ErrorKind::AlreadyExists => return Ok(Err(Busy::Moved)),
            Err(e) => return Err(e),
        };
        // We created it: anyone else with its flock finds it fresh and empty, so held, and lets go.
        let lock = Flock::lock(file, FlockArg::LockExclusive).map_err(|(_, e)| io::Error::from(e))?;
        Self::claim(path, lock)
    }

    fn take_existing(path: &Path) -> io::Result<Result<Lock, Busy>> {
        let file = match OpenOptions::new().read(true).write(true).custom_flags(nix::libc::O_NOFOLLOW).open(path) {
            Ok(f) => f,
            Err(e) if e.kind() == io::ErrorKind::NotFound => return Ok(Err(Busy::Moved)),
            // A symlink (ELOOP) or an unreadable file: never ours to take.
            Err(_) => return Ok(Err(Busy::Held(read_record(path).and_then(|r| record_pid(&r))))),
        };
        let lock = match Flock::lock(file, FlockArg::LockExclusiveNonblock) {
            Ok(l) => l,
            Err((_, nix::errno::Errno::EWOULDBLOCK)) => {
                return Ok(Err(Busy::Held(read_record(path).and_then(|r| record_pid(&r)))));
            }
            Err((_, e)) => return Err(io::Error::from(e)),
        };
        let md = lock.metadata()?;
        if !same_inode(path, (md.dev(), md.ino())) {
            return Ok(Err(Busy::Moved));
        }
        let mut text = String::new();
        let read = (&*lock).take(257).read_to_string(&mut text);
        let age = md.modified().ok().and_then(|m| SystemTime::now().duration_since(m).ok()).unwrap_or_default();
        let stale = age > STALE_AFTER;
        let verdict = match read {
            Err(_) => Verdict::Foreign,
            Ok(_) => classify(&text),
        };
        match verdict {
            Verdict::Record { pid, ours: false } if !stale => Ok(Err(Busy::Held(Some(pid)))),
            Verdict::Empty if !stale => Ok(Err(Busy::Held(None))),
            Verdict::Foreign => Ok(Err(Busy::Held(None))),
            Verdict::Record { .. } | Verdict::Empty | Verdict::BarePid => {
                lock.set_len(0)?;
                Self::claim(path, lock)
            }
        }
    }

    /// With the flock held on `lock`: checks the path still names it, then writes our record.
    fn claim(path: &Path, mut lock: Flock<File>) -> io::Result<Result<Lock, Busy>> {
        let md = lock.metadata()?;
        let ident = (md.dev(), md.ino());
        if !same_inode(path, ident) {
            return Ok(Err(Busy::Moved));
        }
        let nanos = SystemTime::now().duration_since(SystemTime::UNIX_EPOCH).map(|d| d.as_nanos()).unwrap_or_default();
        let pid = std::process::id();
        let token = sha256_hex(format!("{pid} {nanos} {:?} {}", std::thread::current().id(), md.ino()).as_bytes());
        use std::io::Seek;
        lock.seek(io::SeekFrom::Start(0))?;
        let tail = &token[..32 - WORK_MARK.len()];
        lock.write_all(format!("statelock1 {WORK_MARK}{tail} {pid}\n").as_bytes())?;
        Ok(Ok(Lock { path: path.to_path_buf(), ident, file: Some(lock) }))
    }
}

impl Drop for Lock {
    fn drop(&mut self) {
        // Remove the file while still holding the flock, and only if it is still ours: a
        // contender that opened it meanwhile finds the path gone (or someone else's) and retries.
        if same_inode(&self.path, self.ident) {
            let _ = fs::remove_file(&self.path);
        }
        drop(self.file.take());
    }
}

enum Verdict {
    /// A record in the scripts' format; `ours` when `work` wrote it ([`WORK_MARK`]).
    Record {
        pid: u32,
        ours: bool,
    },
    Empty,
    BarePid,
    Foreign,
}

fn classify(text: &str) -> Verdict {
    if text.is_empty() {
        return Verdict::Empty;
    }
    if let Some(pid) = record_pid(text) {
        let ours = text.split(' ').nth(1).is_some_and(|t| t.starts_with(WORK_MARK));
        return Verdict::Record { pid, ours };
    }
    let bare = text.strip_suffix('\n').unwrap_or(text);
    if !bare.is_empty() && bare.len() <= 10 && bare.bytes().all(|b| b.is_ascii_digit()) {
        return Verdict::BarePid;
    }
    Verdict::Foreign
}

/// The pid in a record in the scripts' format (`statelock1 <32 lowercase hex> <pid>\n`).
fn record_pid(text: &str) -> Option<u32> {
    let line = text.strip_suffix('\n')?;
    let mut parts = line.split(' ');
    let (tag, token, pid) = (parts.next()?, parts.next()?, parts.next()?);
    let token_ok = token.len() == 32 && token.bytes().all(|b| b.is_ascii_digit() || (b'a'..=b'f').contains(&b));
    let pid_ok = !pid.is_empty() && pid.len() <= 10 && pid.bytes().all(|b| b.is_ascii_digit());
    (tag == "statelock1" && token_ok && pid_ok && parts.next().is_none()).then(|| pid.parse().ok())?
}

fn read_record(path: &Path) -> Option<String> {
    let mut s = String::new();
    File::open(path).ok()?.take(257).read_to_string(&mut s).ok()?;
    Some(s)
}

fn same_inode(path: &Path, ident: (u64, u64)) -> bool {
    fs::symlink_metadata(path).map(|m| (m.dev(), m.ino()) == ident).unwrap_or(false)
}

#[cfg(test)]
#[path = "lock_tests.rs"]
mod tests;
