//! Files: atomic writes and path confinement.
//!
//! Invariants:
//! - a state file is either its old content or its new content, never a mix: [`write_atomic`]
//!   writes a temporary file in the same directory, fsyncs it, renames it over the target and
//!   fsyncs the directory;
//! - a path taken from outside (a flag, an agent answer, a file) is resolved against the
//!   repository root only through [`confine`], which refuses anything that could leave it;
//! - a file someone else supplies is read only through [`read_confined`] (below a root, no
//!   symlink followed) or [`read_user_file`] (a path a person named): open first, then check
//!   what was opened (a regular file, never a FIFO or device), with a size cap on every read.

use std::fs::{self, File, OpenOptions};
use std::io::{self, Write};
use std::path::{Component, Path, PathBuf};

mod append;
pub mod digests;
pub mod plain;
mod read;
pub use append::{append_line, parse_lines, read_json_lines};
pub use read::{
    FsError, USER_FILE_CAP, open_confined, open_user_file, read_confined, read_confined_prefix, read_user_file,
    read_user_string, read_user_text_optional, symlink_target_confined,
};

/// Why a relative path was refused by [`confine`].
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ConfineError {
    /// The path is empty or only whitespace.
    #[error("path is empty")]
    Empty,
    /// The path is absolute (`/x`, `C:\x`, `C:/x`, `\\server\x`).
    #[error("path `{0}` is absolute")]
    Absolute(String),
    /// The path contains a backslash.
    #[error("path `{0}` contains a backslash")]
    Backslash(String),
    /// The path contains a `.` or `..` segment, or an empty segment.
    #[error("path `{0}` has a `.`, `..` or empty segment")]
    DotSegment(String),
    /// The path resolves, through a symlink, outside the root.
    #[error("path `{0}` resolves outside the repository root")]
    Escapes(String),
    /// The root itself could not be resolved.
    #[error("repository root `{0}` cannot be resolved")]
    BadRoot(String),
    /// The path contains a NUL byte.
    #[error("path `{0}` contains a NUL byte")]
    Nul(String),
}

/// Resolves `rel`, a path relative to `root` taken from outside, to a path inside `root`.
///
/// Refused before any read or write: empty paths, absolute paths (including Windows drive
/// letters and UNC prefixes), backslashes, `.`/`..`/empty segments, and paths whose existing
/// prefix resolves (through symlinks) outside `root`. A path that does not exist yet is allowed
/// when its deepest existing ancestor is inside `root`.
pub fn confine(root: &Path, rel: &str) -> Result<PathBuf, ConfineError> {
    let trimmed = lexical(rel)?;
    let root_real = fs::canonicalize(root).map_err(|_| ConfineError::BadRoot(root.display().to_string()))?;
    confine_resolved(root_real, rel, trimmed)
}

/// The lexical rules of [`confine`]: `rel` without a trailing slash, or why it is refused.
fn lexical(rel: &str) -> Result<&str, ConfineError> {
    if rel.trim().is_empty() {
        return Err(ConfineError::Empty);
    }
    if rel.contains('\0') {
        return Err(ConfineError::Nul(rel.to_string()));
    }
    let bytes = rel.as_bytes();
    let drive = bytes.len() >= 2 && bytes[0].is_ascii_alphabetic() && bytes[1] == b':';
    if rel.starts_with('/') || drive {
        return Err(ConfineError::Absolute(rel.to_string()));
    }
    if rel.contains('\\') {
        return Err(ConfineError::Backslash(rel.to_string()));
    }
    let trimmed = rel.strip_suffix('/').unwrap_or(rel);
    for seg in trimmed.split('/') {
        if seg.is_empty() || seg == "." || seg == ".." {
            return Err(ConfineError::DotSegment(rel.to_string()));
        }
    }
    Ok(trimmed)
}

fn confine_resolved(root_real: PathBuf, rel: &str, trimmed: &str) -> Result<PathBuf, ConfineError> {
    let joined = root_real.join(trimmed);
    // Resolve the deepest existing ancestor; it must stay inside the root.
    let mut probe = joined.clone();
    let mut rest: Vec<std::ffi::OsString> = Vec::new();
    loop {
        match fs::canonicalize(&probe) {
            Ok(real) => {
                if !real.starts_with(&root_real) {
                    return Err(ConfineError::Escapes(rel.to_string()));
                }
                let mut out = real;
                for r in rest.iter().rev() {
                    out.push(r);
                }
                return Ok(out);
            }
            Err(_) => {
                // A dangling symlink counts as an escape: we cannot prove where it points.
                if fs::symlink_metadata(&probe).map(|m| m.file_type().is_symlink()).unwrap_or(false) {
                    return Err(ConfineError::Escapes(rel.to_string()));
                }
                match (probe.file_name().map(|s| s.to_os_string()), probe.parent()) {
                    (Some(name), Some(parent)) => {
                        rest.push(name);
                        probe = parent.to_path_buf();
                    }
                    _ => return Err(ConfineError::Escapes(rel.to_string())),
                }
            }
        }
    }
}

/// True when `path` lexically has no `..` component and is relative.
pub fn is_plain_relative(path: &Path) -> bool {
    path.components().all(|c| matches!(c, Component::Normal(_)))
}

/// Writes `bytes` to `path` atomically: temporary file in the same directory, fsync, rename,
/// fsync of the directory. Creates missing parent directories. A state file's digest is
/// recorded first ([`digests`]), and recorded back when the write fails.
pub fn write_atomic(path: &Path, bytes: &[u8]) -> io::Result<()> {
    digests::before_write(path, bytes)?;
    write_atomic_unrecorded(path, bytes).inspect_err(|_| digests::after_failed_write(path))
}

/// The length and SHA-256 (hex) of what [`write_atomic_streamed`] wrote.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Written {
    /// Bytes written.
    pub len: u64,
    /// Their SHA-256, hex.
    pub sha256: String,
}

/// A writer that hashes and counts what passes through it.
struct Hashing<W> {
    inner: W,
    hasher: sha2::Sha256,
    len: u64,
}

impl<W: Write> Write for Hashing<W> {
    fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
        let n = self.inner.write(buf)?;
        sha2::Digest::update(&mut self.hasher, &buf[..n]);
        self.len += n as u64;
        Ok(n)
    }

    fn flush(&mut self) -> io::Result<()> {
        self.inner.flush()
    }
}

/// [`write_atomic`] of bytes `fill` writes, streamed to the file as they are made (a large
/// file never sits whole in memory): the digest is recorded once they are all written and
/// before the file replaces `path`.
pub fn write_atomic_streamed(path: &Path, fill: impl FnOnce(&mut dyn Write) -> io::Result<()>) -> io::Result<Written> {
    let mut written = None;
    let result = write_atomic_with(path, |f| {
        let mut w = Hashing { inner: io::BufWriter::new(f), hasher: sha2::Digest::new(), len: 0 };
        fill(&mut w)?;
        w.flush()?;
        let sha256 = hex::encode(sha2::Digest::finalize(w.hasher));
        digests::before_write_digest(path, &sha256)?;
        written = Some(Written { len: w.len, sha256 });
        Ok(())
    });
    if result.is_err() && written.is_some() {
        digests::after_failed_write(path);
    }
    result?;
    written.ok_or_else(|| io::Error::other("nothing was written"))
}

/// [`write_atomic`] without recording a digest (the digest log's own compaction).
fn write_atomic_unrecorded(path: &Path, bytes: &[u8]) -> io::Result<()> {
    write_atomic_with(path, |f| f.write_all(bytes))
}

/// Writes a temporary file beside `path` with `fill`, syncs it and renames it over `path`.
fn write_atomic_with(path: &Path, fill: impl FnOnce(&mut File) -> io::Result<()>) -> io::Result<()> {
    let dir = match path.parent() {
        Some(d) if !d.as_os_str().is_empty() => d.to_path_buf(),
        _ => PathBuf::from("."),
    };
    let mut tmp = temp_beside(&dir, path)?;
    fill(tmp.as_file_mut())?;
    tmp.as_file().sync_all()?;
    crate::faults::state_write()?;
    tmp.persist(path).map_err(|e| e.error)?;
    if let Ok(d) = File::open(&dir) {
        // Some filesystems refuse fsync on a directory; the rename is still atomic.
        let _ = d.sync_all();
    }
    Ok(())
}

/// A new temporary file in `dir` for a whole-file write of `path`, named `.NAME.tmp-PID-XXXXXX`
/// so that a killed run's leftovers can be told by their PID ([`clean_stale_temps`]); removed
/// when dropped unless persisted. Created with the mode a plain create gives (0666 less umask),
/// since it becomes `path`.
fn temp_beside(dir: &Path, path: &Path) -> io::Result<tempfile::NamedTempFile> {
    fs::create_dir_all(dir)?;
    clean_stale_temps_once(dir);
    let name = path.file_name().map(|n| n.to_string_lossy().into_owned()).unwrap_or_else(|| "file".into());
    tempfile::Builder::new()
        .prefix(&format!(".{name}.tmp-{}-", std::process::id()))
        .permissions(std::os::unix::fs::PermissionsExt::from_mode(0o666))
        .tempfile_in(dir)
}

/// The pid in a temporary file name `.NAME.tmp-PID-XXXXXX` written by [`write_atomic`].
fn temp_owner(file_name: &str) -> Option<i32> {
    let rest = file_name.strip_prefix('.')?;
    let (_, tail) = rest.rsplit_once(".tmp-")?;
    let (pid, random) = tail.split_once('-')?;
    if random.is_empty() || !random.chars().all(|c| c.is_ascii_alphanumeric()) {
        return None;
    }
    pid.parse().ok()
}

/// Removes the temporary files in `dir` that a killed run left (`.NAME.tmp-PID-N` whose PID no
/// longer runs; this process's own are never touched). Returns how many were removed.
pub fn clean_stale_temps(dir: &Path) -> usize {
    let me = std::process::id() as i32;
    let Ok(rd) = fs::read_dir(dir) else { return 0 };
    let mut removed = 0;
    for e in rd.flatten() {
        let name = e.file_name();
        let Some(pid) = name.to_str().and_then(temp_owner) else { continue };
        let is_file = e.file_type().is_ok_and(|t| t.is_file());
        if pid != me && is_file && !crate::spawn::pid_running(i64::from(pid)) && fs::remove_file(e.path()).is_ok() {
            removed += 1;
        }
    }
    removed
}

/// [`clean_stale_temps`] the first time this process writes into `dir`.
fn clean_stale_temps_once(dir: &Path) {
    static CLEANED: std::sync::Mutex<std::collections::BTreeSet<PathBuf>> =
        std::sync::Mutex::new(std::collections::BTreeSet::new());
    let first = CLEANED.lock().map(|mut c| c.insert(dir.to_path_buf())).unwrap_or(false);
    if first {
        clean_stale_temps(dir);
    }
}

/// Serialises `value` as pretty JSON (with a trailing newline) and writes it atomically.
pub fn write_json_atomic<T: serde::Serialize>(path: &Path, value: &T) -> io::Result<()> {
    let mut bytes = serde_json::to_vec_pretty(value).map_err(io::Error::other)?;
    bytes.push(b'\n');
    write_atomic(path, &bytes)
}

/// Writes compact JSON whole (temporary file + rename, so a reader never sees half of it) but
/// without fsync: for audit records whose loss in a crash costs nothing.
pub fn write_json_unsynced<T: serde::Serialize>(path: &Path, value: &T) -> io::Result<()> {
    let bytes = serde_json::to_vec(value).map_err(io::Error::other)?;
    write_line_unsynced(path, &bytes)
}

/// Writes `text` and a newline to `path` atomically like [`write_json_unsynced`] (a temporary
/// file renamed into place, not synced): `text` is a JSON document already written out.
pub fn write_line_unsynced(path: &Path, text: &[u8]) -> io::Result<()> {
    let mut bytes = Vec::with_capacity(text.len() + 1);
    bytes.extend_from_slice(text);
    bytes.push(b'\n');
    let dir = match path.parent() {
        Some(d) if !d.as_os_str().is_empty() => d,
        _ => Path::new("."),
    };
    let mut tmp = temp_beside(dir, path)?;
    tmp.write_all(&bytes)?;
    tmp.persist(path).map(drop).map_err(|e| e.error)
}

/// Removes a state file and fsyncs its directory, so that the removal is durable like a write.
pub fn remove_state(path: &Path) -> io::Result<()> {
    digests::before_remove(path)?;
    fs::remove_file(path)?;
    if let Some(dir) = path.parent()
        && let Ok(d) = File::open(dir)
    {
        let _ = d.sync_all();
    }
    Ok(())
}

/// Removes a whole state directory (a pruned run's `runs/<run-id>/`) and fsyncs its parent.
/// A symlink is removed as a link, never followed.
pub fn remove_state_dir(path: &Path) -> io::Result<()> {
    if fs::symlink_metadata(path)?.file_type().is_symlink() {
        fs::remove_file(path)?;
    } else {
        fs::remove_dir_all(path)?;
    }
    if let Some(dir) = path.parent()
        && let Ok(d) = File::open(dir)
    {
        let _ = d.sync_all();
    }
    Ok(())
}

/// Reads a file to a string; `Ok(None)` when it does not exist.
/// A state file is checked against its recorded digest ([`digests`]).
pub fn read_optional(path: &Path) -> io::Result<Option<String>> {
    match fs::read_to_string(path) {
        Ok(s) => {
            digests::check(path, s.as_bytes())?;
            Ok(Some(s))
        }
        Err(e) if e.kind() == io::ErrorKind::NotFound => Ok(None),
        Err(e) => Err(e),
    }
}

/// [`read_optional`] for a state file a later run trusts (a goal's state, a loop run's
/// progress): besides the digest check, one that `work` wrote and did not remove is refused
/// when it is gone, so deleting it cannot make the next run start over unnoticed.
pub fn read_kept(path: &Path) -> io::Result<Option<String>> {
    let text = read_optional(path)?;
    if text.is_none() {
        digests::check_missing(path)?;
    }
    Ok(text)
}

/// The SHA-256 of `bytes`, lower-case hex: how state files and dispatch payloads are named
/// and checked.
pub fn sha256_hex(bytes: &[u8]) -> String {
    use sha2::Digest;
    hex::encode(sha2::Sha256::digest(bytes))
}

/// Reads a file's bytes; `Ok(None)` when it does not exist.
/// A state file is checked against its recorded digest ([`digests`]).
pub fn read_optional_bytes(path: &Path) -> io::Result<Option<Vec<u8>>> {
    match fs::read(path) {
        Ok(b) => {
            digests::check(path, &b)?;
            Ok(Some(b))
        }
        Err(e) if e.kind() == io::ErrorKind::NotFound => Ok(None),
        Err(e) => Err(e),
    }
}

/// Creates a directory and its parents.
pub fn ensure_dir(path: &Path) -> io::Result<()> {
    fs::create_dir_all(path)
}

/// Reads at most `cap` bytes of a file as lossy UTF-8; `Ok((text, truncated))`.
pub fn read_text_capped(path: &Path, cap: u64) -> io::Result<(String, bool)> {
    use std::io::Read;
    let f = File::open(path)?;
    let len = f.metadata()?.len();
    let mut buf = Vec::new();
    f.take(cap).read_to_end(&mut buf)?;
    Ok((String::from_utf8_lossy(&buf).into_owned(), len > cap))
}

/// Why a [`LockFile`] could not be taken.
#[derive(Debug, thiserror::Error)]
pub enum LockError {
    /// A live process holds it.
    #[error("`{path}` is held by another run{}", holder.map(|p| format!(" (pid {p})")).unwrap_or_default())]
    Held {
        /// The lock file.
        path: String,
        /// The holder's pid, when recorded.
        holder: Option<i32>,
    },
    /// The lock file could not be created.
    #[error("create the lock `{path}`: {source}")]
    Io {
        /// The lock file.
        path: String,
        /// The OS error.
        source: io::Error,
    },
}

/// An exclusive advisory lock (`flock`) on a lock file that holds the owner's pid.
///
/// The kernel releases the lock when its holder dies, so a crashed run never leaves a stale
/// lock, and two processes can never both hold it. The file itself is never deleted: deleting
/// it would let a third process lock a new file while a second still locks the old one.
#[derive(Debug)]
pub struct LockFile {
    _lock: nix::fcntl::Flock<File>,
}

impl LockFile {
    /// Takes the lock at `path` without waiting, creating the file and its parent directories.
    pub fn acquire(path: &Path) -> Result<LockFile, LockError> {
        use nix::fcntl::{Flock, FlockArg};
        let io_err = |source| LockError::Io { path: path.display().to_string(), source };
        if let Some(dir) = path.parent() {
            fs::create_dir_all(dir).map_err(io_err)?;
        }
        let file = OpenOptions::new().create(true).truncate(false).read(true).write(true).open(path).map_err(io_err)?;
        match Flock::lock(file, FlockArg::LockExclusiveNonblock) {
            Ok(mut lock) => {
                use std::io::Seek;
                // The pid only names the holder in the loser's error; the lock is the flock.
                let _ = lock.set_len(0);
                let _ = lock.seek(io::SeekFrom::Start(0));
                let _ = writeln!(*lock, "{}", std::process::id());
                Ok(LockFile { _lock: lock })
            }
            Err((_, nix::errno::Errno::EWOULDBLOCK)) => {
                let holder = fs::read_to_string(path).ok().and_then(|s| s.trim().parse::<i32>().ok());
                Err(LockError::Held { path: path.display().to_string(), holder })
            }
            Err((_, errno)) => Err(io_err(io::Error::from(errno))),
        }
    }
}

/// True when a process with this pid exists.
pub fn process_alive(pid: i32) -> bool {
    if pid <= 0 {
        return false;
    }
    match nix::sys::signal::kill(nix::unistd::Pid::from_raw(pid), None) {
        Ok(()) => true,
        Err(nix::errno::Errno::ESRCH) => false,
        Err(_) => true,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn confine_refuses_every_escape_vector() {
        let dir = tempfile::tempdir().expect("tempdir");
        let root = dir.path();
        fs::create_dir_all(root.join("src")).expect("mkdir");
        fs::write(root.join("src/a.rs"), "x\n").expect("write");
        let outside = tempfile::tempdir().expect("tempdir");
        std::os::unix::fs::symlink(outside.path(), root.join("escape")).expect("symlink");
        std::os::unix::fs::symlink(root.join("nowhere"), root.join("dangling")).expect("symlink");

        assert!(confine(root, "src/a.rs").is_ok());
        assert!(confine(root, "src/new/file.rs").is_ok());
        assert_eq!(confine(root, ""), Err(ConfineError::Empty));
        assert!(matches!(confine(root, "/etc/passwd"), Err(ConfineError::Absolute(_))));
        assert!(matches!(confine(root, "C:/x"), Err(ConfineError::Absolute(_))));
        assert!(matches!(confine(root, "c:\\x"), Err(ConfineError::Absolute(_))));
        assert!(matches!(confine(root, "src\\a.rs"), Err(ConfineError::Backslash(_))));
        assert!(matches!(confine(root, "../x"), Err(ConfineError::DotSegment(_))));
        assert!(matches!(confine(root, "src/./a.rs"), Err(ConfineError::DotSegment(_))));
        assert!(matches!(confine(root, "src//a.rs"), Err(ConfineError::DotSegment(_))));
        assert!(matches!(confine(root, "escape/x"), Err(ConfineError::Escapes(_))));
        assert!(matches!(confine(root, "dangling"), Err(ConfineError::Escapes(_))));
    }

    #[test]
    fn lock_is_exclusive_and_a_leftover_file_is_not_a_lock() {
        let dir = tempfile::tempdir().expect("tempdir");
        let p = dir.path().join("a/x.lock");
        let held = LockFile::acquire(&p).expect("first");
        match LockFile::acquire(&p) {
            Err(LockError::Held { holder, .. }) => assert_eq!(holder, Some(std::process::id() as i32)),
            other => panic!("expected held, got {other:?}"),
        }
        drop(held);
        let _again = LockFile::acquire(&p).expect("released on drop");
        drop(_again);
        fs::write(&p, "999999999\n").expect("a crashed holder's file");
        let _taken = LockFile::acquire(&p).expect("a file without a live flock is free");
    }

    #[test]
    fn temps_of_dead_runs_are_cleaned_and_live_ones_kept() {
        let dir = tempfile::tempdir().expect("tempdir");
        let me = std::process::id();
        let dead = dir.path().join(".state.json.tmp-999999999-3");
        let mine = dir.path().join(format!(".state.json.tmp-{me}-7"));
        let other = dir.path().join(".state.json.tmp-x-1");
        for p in [&dead, &mine, &other] {
            fs::write(p, "partial").expect("write");
        }
        write_atomic(&dir.path().join("state.json"), b"whole").expect("write");
        assert!(!dead.exists(), "a dead run's temp file is removed");
        assert!(mine.exists(), "this process's temp files are kept");
        assert!(other.exists(), "a file not in the temp pattern is kept");
        assert_eq!(temp_owner(".a.b.tmp-12-0"), Some(12));
        assert_eq!(temp_owner(".a.b.tmp-12-Xy9aQ2"), Some(12));
        assert_eq!(temp_owner(".a.b.tmp-12-"), None);
    }

    #[test]
    fn write_atomic_replaces_whole_file_and_leaves_no_temp() {
        let dir = tempfile::tempdir().expect("tempdir");
        let p = dir.path().join("deep/state.json");
        write_atomic(&p, b"one").expect("write");
        write_atomic(&p, b"two").expect("write");
        assert_eq!(fs::read_to_string(&p).expect("read"), "two");
        let names: Vec<_> = fs::read_dir(dir.path().join("deep")).expect("ls").collect();
        assert_eq!(names.len(), 1);
        // It has the mode a plain create gives (a file of the user's tree keeps its usual mode).
        let plain = dir.path().join("plain");
        fs::write(&plain, "x").expect("write");
        let mode = |p: &Path| std::os::unix::fs::PermissionsExt::mode(&fs::metadata(p).expect("stat").permissions());
        assert_eq!(mode(&p), mode(&plain));
    }
}
