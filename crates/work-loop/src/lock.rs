//! The state lock: `<state file>.lock`, held the way the work-loop scripts hold theirs, with a
//! kernel `flock` underneath that says whether its holder is alive.
//!
//! - While held, the file holds one line in the scripts' format,
//!   `statelock1 <32 hex token> <pid>`, so a script sees it as held too. `work` takes the
//!   flock before it writes that line and keeps it until the file is removed.
//! - A caller that finds the lock held waits for it, as the scripts do: up to [`WAIT`], then
//!   it refuses naming the holder's pid. Twelve callers at once all complete, one at a time.
//! - Liveness is the flock alone: a file whose flock we get has no live `work` holder, whatever
//!   it holds — an empty file or a torn record (a holder killed between create and write), a
//!   record a killed `work` left, a bare pid, anything else — and is taken at once. A killed
//!   `work` never wedges the spec. The one exception is a complete record in the scripts'
//!   format that `work` did not write (its token lacks [`WORK_MARK`]): a running script holds
//!   no flock, so that record is waited for as the scripts wait for it, and taken over only
//!   once it is older than [`STALE_AFTER`], the scripts' own rule for their records.
//! - A lock path that is a directory (or anything but a regular file) is refused at once:
//!   waiting cannot make it acquirable.
//! - On release the file is removed, but only while the path still names the inode we locked;
//!   after taking the flock we check the same and start over if it does not, so two processes
//!   can never both hold it (one locking an unlinked inode, the other a new file).

use crate::common::{LoopError, sha256_hex};
use nix::fcntl::{Flock, FlockArg};
use std::fs::{self, File, OpenOptions};
use std::io::{self, Read, Write};
use std::os::unix::fs::{MetadataExt, OpenOptionsExt, PermissionsExt};
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};
use work_runtime::fsx::plain;

/// How long a caller waits for a held lock before it refuses (the scripts' timeout).
pub const WAIT: Duration = Duration::from_secs(10);

/// How old a script's record must be before it counts as a crashed script's (the scripts'
/// `stale_after`). Never applied to anything `work` wrote: a `work` holder is judged by its flock.
pub const STALE_AFTER: Duration = Duration::from_secs(300);

/// The first hex digits of the token in every record `work` writes ("work" in hex).
pub const WORK_MARK: &str = "776f726b";

/// The longest pause between two looks at a held lock (the scripts poll every 50 ms).
const POLL_MAX: Duration = Duration::from_millis(50);

/// How many times a lost identity race is looked at again, even past the wait.
const MOVED_RETRIES: usize = 64;

/// An exclusive lock on `<path>`, released (and its file removed) on drop.
#[derive(Debug)]
pub struct Lock {
    path: PathBuf,
    ident: (u64, u64),
    file: Option<Flock<File>>,
}

/// Why a lock could not be taken this time.
enum Busy {
    /// Held by a live holder: this pid when its record names one.
    Held(Option<u32>),
    /// The path changed under us; look again.
    Moved,
    /// Not a regular file (its mode): never acquirable.
    Unusable(u32),
}

impl Lock {
    /// Takes the lock at `path` (`…/engine-state.json.lock`), waiting up to [`WAIT`] while a
    /// live holder has it.
    pub fn acquire(path: &Path) -> Result<Lock, LoopError> {
        Self::acquire_within(path, WAIT)
    }

    /// Takes the lock at `path`, waiting up to `wait` while a live holder has it.
    pub fn acquire_within(path: &Path, wait: Duration) -> Result<Lock, LoopError> {
        let p = path.display().to_string();
        let io = |e: io::Error| LoopError::bad(format!("could not create lock {p}: {e}"));
        if let Some(dir) = path.parent() {
            work_runtime::fsx::ensure_dir(dir).map_err(io)?;
        }
        let deadline = Instant::now() + wait;
        let mut pause = Duration::from_millis(1);
        let mut moved = 0;
        loop {
            let holder = match Self::attempt(path).map_err(io)? {
                Ok(lock) => return Ok(lock),
                Err(Busy::Unusable(mode)) => {
                    return Err(LoopError::refused(
                        format!(
                            "refusing {p}: a lock path must be a regular file (found mode {}). Waiting cannot make this acquirable — remove it.",
                            filemode(mode)
                        ),
                        serde_json::json!({ "lock": p, "holder_pid": null, "reason": "lock_unusable" }),
                    ));
                }
                Err(Busy::Moved) => None,
                Err(Busy::Held(pid)) => Some(pid),
            };
            let Some(holder) = holder else {
                // A release or a takeover between two of our steps: look again at once.
                moved += 1;
                std::thread::yield_now();
                if moved < MOVED_RETRIES || Instant::now() < deadline {
                    continue;
                }
                return Err(held(&p, wait, None));
            };
            if Instant::now() >= deadline {
                return Err(held(&p, wait, holder));
            }
            std::thread::sleep(pause);
            pause = (pause * 2).min(POLL_MAX);
        }
    }

    fn attempt(path: &Path) -> io::Result<Result<Lock, Busy>> {
        match fs::symlink_metadata(path) {
            Ok(md) if !md.file_type().is_file() => return Ok(Err(Busy::Unusable(md.permissions().mode()))),
            Ok(_) => return Self::take_existing(path),
            Err(e) if e.kind() == io::ErrorKind::NotFound => {}
            Err(e) => return Err(e),
        }
        let created = plain::open(
            OpenOptions::new().read(true).write(true).create_new(true).mode(0o600).custom_flags(nix::libc::O_NOFOLLOW),
            path,
        );
        let file = match created {
            Ok(f) => f,
            Err(e) if e.kind() == io::ErrorKind::AlreadyExists => return Ok(Err(Busy::Moved)),
            Err(e) => return Err(e),
        };
        // Between our create and this flock another caller may have found the file empty and
        // unlocked, and taken it: then it holds the flock and we wait like anyone else.
        match Flock::lock(file, FlockArg::LockExclusiveNonblock) {
            Ok(lock) => Self::claim(path, lock),
            Err((_, nix::errno::Errno::EWOULDBLOCK)) => Ok(Err(Busy::Held(None))),
            Err((_, e)) => Err(io::Error::from(e)),
        }
    }

    fn take_existing(path: &Path) -> io::Result<Result<Lock, Busy>> {
        let file =
            match plain::open(OpenOptions::new().read(true).write(true).custom_flags(nix::libc::O_NOFOLLOW), path) {
                Ok(f) => f,
                Err(e) if e.kind() == io::ErrorKind::NotFound => return Ok(Err(Busy::Moved)),
                // Replaced by a symlink since we looked: look again (it is refused then).
                Err(e) if e.raw_os_error() == Some(nix::libc::ELOOP) => return Ok(Err(Busy::Moved)),
                // Unreadable or unwritable by us: we cannot tell, so it is held.
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
        // Unreadable bytes (not UTF-8) are no script's record: the flock decides.
        let _ = (&*lock).take(257).read_to_string(&mut text);
        if let Some(pid) = record_pid(&text) {
            let ours = text.split(' ').nth(1).is_some_and(|t| t.starts_with(WORK_MARK));
            let age = md
                .modified()
                .ok()
                .and_then(|m| work_runtime::clock::file_time_now().duration_since(m).ok())
                .unwrap_or_default();
            if !ours && age <= STALE_AFTER {
                return Ok(Err(Busy::Held(Some(pid))));
            }
        }
        lock.set_len(0)?;
        Self::claim(path, lock)
    }

    /// With the flock held on `lock`: checks the path still names it, then writes our record.
    fn claim(path: &Path, mut lock: Flock<File>) -> io::Result<Result<Lock, Busy>> {
        let md = lock.metadata()?;
        let ident = (md.dev(), md.ino());
        if !same_inode(path, ident) {
            return Ok(Err(Busy::Moved));
        }
        let nanos = work_runtime::clock::nonce_nanos();
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
            let _ = plain::remove_file(&self.path);
        }
        drop(self.file.take());
    }
}

/// The refusal past the wait, in the scripts' words, naming the holder.
fn held(p: &str, wait: Duration, holder: Option<u32>) -> LoopError {
    let secs = format!("{:.1}s", wait.as_secs_f64());
    let message = match holder {
        Some(pid) => format!("could not acquire {p} within {secs} (recorded holder pid {pid}); nothing was changed"),
        None => format!("could not acquire {p} within {secs}: its holder is still working; nothing was changed"),
    };
    LoopError::refused(message, serde_json::json!({ "lock": p, "holder_pid": holder, "reason": "lock_held" }))
}

/// `ls -l`'s mode string (`drwxr-xr-x`), as the scripts name a lock path that is no file.
fn filemode(mode: u32) -> String {
    let kind = match mode & 0o170000 {
        0o040000 => 'd',
        0o120000 => 'l',
        0o010000 => 'p',
        0o140000 => 's',
        0o020000 => 'c',
        0o060000 => 'b',
        _ => '-',
    };
    let mut s = String::from(kind);
    for shift in [6, 3, 0] {
        let bits = (mode >> shift) & 7;
        s.push(if bits & 4 != 0 { 'r' } else { '-' });
        s.push(if bits & 2 != 0 { 'w' } else { '-' });
        s.push(if bits & 1 != 0 { 'x' } else { '-' });
    }
    s
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
