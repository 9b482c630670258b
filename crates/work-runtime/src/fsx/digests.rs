//! State digests: what `work` last wrote to each state file, so that a file changed outside a
//! run (by an agent's detached process, by hand, by a script) is refused on the next read
//! instead of believed.
//!
//! Once [`install`]ed for a state directory (the CLI does it before any command runs), every
//! state file written through [`super::write_atomic`] or [`super::append_line`] under that
//! directory — journals and their logs, session files, `meta.md`, progress files, goal state,
//! loop state; not `runs/` (event logs and dispatch records), `locks/` or this log itself — and
//! every file a workflow [`cover`]s outside it (`work loop run`'s `loop-run.json` beside the
//! spec) gets a line in `<state>/state-digests.jsonl` **before** the write: `{"path":
//! "<relative>", "sha256": "<digest of the whole file after the write>", "chain": "<sha256 of
//! the previous line>"}`. A run's `run.end` event records the files it wrote and the chain's
//! head ([`written`], [`head`]).
//!
//! Reading a state file through [`super::read_optional`], [`super::read_optional_bytes`],
//! [`super::read_json_lines`] or [`super::read_kept`] checks it: a file with a recorded digest
//! must hash to the last recorded one, or to the one before it (a crash between the line and
//! the write leaves the old content). Anything else is refused with one line naming the file;
//! [`super::read_kept`] also refuses a recorded file that is gone. A file never recorded
//! (written before digests existed, or by a person before any run) is read as it is; a file
//! `work` removed is forgotten.
//!
//! The lines form a hash chain, checked whenever the log is read: a line edited, removed or
//! inserted anywhere but at the end breaks it, and every recorded file is then refused. Lines
//! are appended under a lock (`<state>/locks/state-digests.lock`), and every process reads the
//! lines others appended before it checks or appends, so concurrent runs keep one chain.
//!
//! This is a tripwire, not a signature: where the agent can read the log, a process that
//! rewrites a file *and* appends a correctly chained line (or removes the log) is not caught.
//! With the kernel sandbox (`crate::sandbox`) the state directory, this log included, is not
//! there for any agent and nothing an agent starts outlives its dispatch: against agents, the
//! chain is then needed only for the state files a workflow keeps in the tree, where a write
//! role can reach them (`work loop run`'s `loop-run.json`), and a forged line is out of its
//! reach. For the files in the state directory it is the fallback's defence (`--isolation
//! none`, no user namespaces), and a tripwire for edits made outside any run, by hand or by a
//! script.

use sha2::Digest;
use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::fs;
use std::io::{self, Read, Seek, SeekFrom, Write};
use std::path::{Path, PathBuf};
use std::sync::Mutex;

/// The digest log's file name, in the state directory.
pub const LOG_NAME: &str = "state-digests.jsonl";

#[derive(Default)]
struct Registry {
    state_dir: PathBuf,
    /// Per relative path: the last two recorded digests (older first), the 1-based line of the
    /// log that recorded the last one, and whether that write created the file.
    index: HashMap<String, (Option<String>, String, usize, bool)>,
    head: String,
    lines: usize,
    /// Bytes of the log read so far (complete lines only), and the inode they were read from
    /// (a compaction replaces the file).
    consumed: u64,
    inode: u64,
    /// Set when the chain is broken: the 1-based line that does not follow its predecessor.
    broken: Option<usize>,
    /// Hashers of append-only logs, with the length they have hashed.
    running: HashMap<PathBuf, (u64, sha2::Sha256)>,
    /// What this process wrote: path → last digest.
    written: BTreeMap<String, String>,
    /// State files outside the state directory (absolute paths).
    covered: BTreeSet<PathBuf>,
}

static REGISTRY: Mutex<Option<Registry>> = Mutex::new(None);

/// Starts recording (and checking) the state files under `state_dir`.
pub fn install(state_dir: &Path) {
    let dir = std::path::absolute(state_dir).unwrap_or_else(|_| state_dir.to_path_buf());
    if let Ok(mut g) = REGISTRY.lock() {
        *g = Some(Registry { state_dir: dir, ..Default::default() });
    }
}

/// The state directory [`install`] was given (absolute), when one was: what an agent's tools
/// must never write.
pub fn installed_state_dir() -> Option<PathBuf> {
    REGISTRY.lock().ok().and_then(|g| g.as_ref().map(|r| r.state_dir.clone()))
}

/// Records (and checks) `path`, a state file kept outside the state directory, like the
/// files inside it. Every process that writes or reads the file must cover it first.
pub fn cover(path: &Path) {
    let Ok(abs) = std::path::absolute(path) else { return };
    with(|r| r.covered.insert(abs));
}

impl Registry {
    /// The path's key in the log, when it is a recorded state file: relative to the state
    /// directory, or (a [`cover`]ed file) to its parent as `../…`, else absolute.
    fn rel(&self, path: &Path) -> Option<String> {
        let abs = std::path::absolute(path).ok()?;
        if self.covered.contains(&abs) {
            let rest = self.state_dir.parent().and_then(|p| abs.strip_prefix(p).ok());
            return Some(match rest {
                Some(r) => format!("../{}", r.to_string_lossy()),
                None => abs.to_string_lossy().into_owned(),
            });
        }
        let rel = abs.strip_prefix(&self.state_dir).ok()?;
        let first = rel.components().next()?.as_os_str().to_string_lossy().into_owned();
        if matches!(first.as_str(), "runs" | "locks" | LOG_NAME) {
            return None;
        }
        Some(rel.to_string_lossy().into_owned())
    }

    fn log_path(&self) -> PathBuf {
        self.state_dir.join(LOG_NAME)
    }

    /// Reads the lines appended since the last call (all of them the first time, or when the
    /// log shrank: compacted by another process, or cut), checking the chain.
    fn sync(&mut self) {
        use std::os::unix::fs::MetadataExt;
        let path = self.log_path();
        let (len, inode) = fs::metadata(&path).map(|m| (m.len(), m.ino())).unwrap_or((0, 0));
        if len < self.consumed || inode != self.inode {
            self.index.clear();
            (self.head, self.lines, self.consumed, self.broken, self.inode) = (String::new(), 0, 0, None, inode);
        }
        if len == self.consumed {
            return;
        }
        let mut bytes = Vec::new();
        let read = fs::File::open(&path).and_then(|mut f| {
            f.seek(SeekFrom::Start(self.consumed))?;
            f.read_to_end(&mut bytes)
        });
        if read.is_err() {
            return;
        }
        let complete = bytes.iter().rposition(|&b| b == b'\n').map_or(0, |i| i + 1);
        self.consumed += complete as u64;
        for line in bytes[..complete].split(|&b| b == b'\n').filter(|l| !l.is_empty()) {
            self.apply(line);
        }
    }

    /// Applies one line of the log. A line that does not parse is a torn write and skipped (the
    /// next line chains to the one before it).
    fn apply(&mut self, line: &[u8]) {
        let Ok(v) = serde_json::from_slice::<serde_json::Value>(line) else { return };
        let Some(path) = v.get("path").and_then(|p| p.as_str()) else { return };
        self.lines += 1;
        if self.broken.is_none() && v.get("chain").and_then(|c| c.as_str()) != Some(self.head.as_str()) {
            self.broken = Some(self.lines);
        }
        self.head = super::sha256_hex(line);
        let created = v.get("created").and_then(serde_json::Value::as_bool).unwrap_or(false);
        match v.get("sha256").and_then(|s| s.as_str()) {
            Some(sha) => self.note(path, sha, created),
            None => {
                self.index.remove(path);
            }
        }
    }

    /// Notes `sha` as `rel`'s last digest, recorded by line `self.lines` (a write that
    /// `created` the file, or not).
    fn note(&mut self, rel: &str, sha: &str, created: bool) {
        let prev = self.index.remove(rel).map(|(_, last, _, _)| last);
        self.index.insert(rel.to_string(), (prev, sha.to_string(), self.lines, created));
    }

    /// Rewrites the log with the last two digests of each file (a fresh chain). Never on a
    /// broken chain: that would launder the edit.
    fn compact(&mut self) {
        if self.broken.is_some() || self.lines <= 2 * self.index.len() + 256 {
            return;
        }
        let mut out = Vec::new();
        let mut head = String::new();
        let mut paths: Vec<String> = self.index.keys().cloned().collect();
        paths.sort();
        let mut at = BTreeMap::new();
        for p in paths {
            let Some((prev, last, _, _)) = self.index.get(&p) else { continue };
            for sha in prev.iter().chain([last]) {
                let line = serde_json::json!({"path": p, "sha256": sha, "chain": head}).to_string();
                head = super::sha256_hex(line.as_bytes());
                out.extend_from_slice(line.as_bytes());
                out.push(b'\n');
            }
            at.insert(p, out.iter().filter(|&&b| b == b'\n').count());
        }
        if super::write_atomic_unrecorded(&self.log_path(), &out).is_ok() {
            use std::os::unix::fs::MetadataExt;
            self.head = head;
            self.lines = out.iter().filter(|&&b| b == b'\n').count();
            for (p, n) in at {
                if let Some(e) = self.index.get_mut(&p) {
                    e.2 = n;
                }
            }
            self.consumed = out.len() as u64;
            self.inode = fs::metadata(self.log_path()).map(|m| m.ino()).unwrap_or(0);
        }
    }

    /// Appends one line (synced) under the log's lock, after reading what other processes
    /// appended, and updates the index.
    fn record(&mut self, rel: &str, sha: Option<&str>, created: bool) -> io::Result<()> {
        fs::create_dir_all(&self.state_dir)?;
        let _lock = self.lock()?;
        self.sync();
        self.compact();
        let mut line = serde_json::json!({"path": rel, "sha256": sha, "chain": self.head});
        if created && sha.is_some() {
            line["created"] = true.into();
        }
        let line = line.to_string();
        let mut f = fs::OpenOptions::new().create(true).read(true).append(true).open(self.log_path())?;
        let end = f.seek(SeekFrom::End(0))?;
        // A torn last line (a crash mid-append) gets its newline, so this line stands alone.
        let mut buf = if end > self.consumed { b"\n".to_vec() } else { Vec::new() };
        buf.extend_from_slice(line.as_bytes());
        buf.push(b'\n');
        f.write_all(&buf)?;
        f.sync_data()?;
        self.consumed = end + buf.len() as u64;
        self.inode = {
            use std::os::unix::fs::MetadataExt;
            f.metadata().map(|m| m.ino()).unwrap_or(0)
        };
        self.head = super::sha256_hex(line.as_bytes());
        self.lines += 1;
        match sha {
            Some(s) => {
                self.note(rel, s, created);
                self.written.insert(rel.to_string(), s.to_string());
            }
            None => {
                self.index.remove(rel);
                self.written.remove(rel);
            }
        }
        Ok(())
    }

    /// Before this process first writes `rel`: when the last recorded write never landed (a
    /// run killed between its line and its rename left the content the line before records),
    /// that content is recorded again, so that one more crash between line and write still
    /// leaves a file whose digest is one of the last two.
    fn vouch_unlanded(&mut self, rel: &str, path: &Path) -> io::Result<()> {
        if self.written.contains_key(rel) {
            return Ok(());
        }
        self.sync();
        let Some((Some(prev), last, _, _)) = self.index.get(rel).cloned() else { return Ok(()) };
        let Ok(bytes) = fs::read(path) else { return Ok(()) };
        let sha = super::sha256_hex(&bytes);
        if sha != last && sha == prev { self.record(rel, Some(&sha), false) } else { Ok(()) }
    }

    /// The log's lock (blocking; released when dropped or when the process dies).
    fn lock(&self) -> io::Result<nix::fcntl::Flock<fs::File>> {
        let p = self.state_dir.join("locks").join("state-digests.lock");
        fs::create_dir_all(self.state_dir.join("locks"))?;
        let f = fs::OpenOptions::new().create(true).truncate(false).write(true).open(p)?;
        nix::fcntl::Flock::lock(f, nix::fcntl::FlockArg::LockExclusive).map_err(|(_, e)| io::Error::from(e))
    }

    /// Why a recorded file cannot be believed now, if the chain is broken.
    fn broken_msg(&self, name: &str) -> Option<String> {
        self.broken.map(|n| {
            format!(
                "state file `{name}` cannot be checked: the digest log `{LOG_NAME}` was edited outside a run of work (line {n} does not follow the line before it); restore the log, or remove it if you trust every state file as it is"
            )
        })
    }
}

fn with<T>(f: impl FnOnce(&mut Registry) -> T) -> Option<T> {
    let mut g = REGISTRY.lock().ok()?;
    g.as_mut().map(f)
}

fn file_name(path: &Path) -> String {
    path.file_name().map(|n| n.to_string_lossy().into_owned()).unwrap_or_default()
}

/// Records the digest `path` will have once `bytes` replace it (called before the write).
pub(crate) fn before_write(path: &Path, bytes: &[u8]) -> io::Result<()> {
    before_write_digest(path, &super::sha256_hex(bytes))
}

/// [`before_write`] given the digest of the bytes (a streamed write computes it as it writes).
pub(crate) fn before_write_digest(path: &Path, digest: &str) -> io::Result<()> {
    with(|r| {
        let Some(rel) = r.rel(path) else { return Ok(()) };
        r.running.remove(path);
        let created = fs::symlink_metadata(path).is_err();
        r.vouch_unlanded(&rel, path)?;
        r.record(&rel, Some(digest), created)
    })
    .unwrap_or(Ok(()))
}

/// Records the digest `path` will have once `bytes` are appended to it.
pub(crate) fn before_append(path: &Path, bytes: &[u8]) -> io::Result<()> {
    with(|r| {
        let Some(rel) = r.rel(path) else { return Ok(()) };
        let len = fs::metadata(path).map(|m| m.len()).unwrap_or(0);
        let mut hasher = match r.running.remove(path) {
            Some((n, h)) if n == len => h,
            _ => {
                let mut h = sha2::Sha256::new();
                if len > 0 {
                    h.update(fs::read(path)?);
                }
                h
            }
        };
        hasher.update(bytes);
        let sha = hex::encode(hasher.clone().finalize());
        r.running.insert(path.to_path_buf(), (len + bytes.len() as u64, hasher));
        let created = fs::symlink_metadata(path).is_err();
        r.record(&rel, Some(&sha), created)
    })
    .unwrap_or(Ok(()))
}

/// Records the files of a state directory under the name it is about to be renamed to (a
/// staged session published whole).
pub(crate) fn before_move_dir(from: &Path, to: &Path) -> io::Result<()> {
    with(|r| {
        let (Some(from), Some(to)) = (r.rel(from), r.rel(to)) else { return Ok(()) };
        r.sync();
        let prefix = format!("{from}/");
        let mut moved: Vec<(String, String)> = r
            .index
            .iter()
            .filter_map(|(p, (_, last, _, _))| {
                p.strip_prefix(&prefix).map(|rest| (format!("{to}/{rest}"), last.clone()))
            })
            .collect();
        moved.sort();
        for (p, sha) in moved {
            r.record(&p, Some(&sha), false)?;
        }
        Ok(())
    })
    .unwrap_or(Ok(()))
}

/// Records that a write of `path` recorded by [`before_write`] or [`before_append`] failed (a
/// full disk, an I/O error): the file keeps the content recorded before it, or — the write was
/// to create it — does not exist. Best effort: when the disk is full this line may not be
/// written either, and a crash between the two lines is the case the previous digest covers.
pub(crate) fn after_failed_write(path: &Path) {
    let _ = with(|r| {
        let Some(rel) = r.rel(path) else { return Ok(()) };
        r.running.remove(path);
        r.sync();
        let Some((prev, _, _, created)) = r.index.get(&rel).cloned() else { return Ok(()) };
        match prev.filter(|_| !created) {
            Some(sha) => r.record(&rel, Some(&sha), false),
            None => r.record(&rel, None, false),
        }
    });
}

/// Forgets a state file `work` removes.
pub(crate) fn before_remove(path: &Path) -> io::Result<()> {
    with(|r| {
        let Some(rel) = r.rel(path) else { return Ok(()) };
        r.running.remove(path);
        r.record(&rel, None, false)
    })
    .unwrap_or(Ok(()))
}

fn refused(msg: Option<String>) -> io::Result<()> {
    match msg {
        Some(msg) => Err(io::Error::new(io::ErrorKind::InvalidData, msg)),
        None => Ok(()),
    }
}

/// Checks what was read from `path` against the last recorded digest.
pub(crate) fn check(path: &Path, bytes: &[u8]) -> io::Result<()> {
    check_log(path, bytes, bytes)
}

/// Checks an append-only log read from `path`: `bytes` whole, or `whole` — its lines a newline
/// ends — when the last line is torn. A crash in the middle of an append leaves the log's
/// earlier content and part of the line (the last recorded digest is the whole line's); a torn
/// line that was never recorded is not a change either, since readers drop it and the next
/// append cuts it away.
pub(crate) fn check_log(path: &Path, bytes: &[u8], whole: &[u8]) -> io::Result<()> {
    let verdict = with(|r| {
        let rel = r.rel(path)?;
        r.sync();
        let (prev, last, _, _) = r.index.get(&rel)?;
        let name = file_name(path);
        if let Some(msg) = r.broken_msg(&name) {
            return Some(msg);
        }
        let believed = |b: &[u8]| {
            let sha = super::sha256_hex(b);
            &sha == last || prev.as_deref() == Some(sha.as_str())
        };
        if believed(bytes) || (whole.len() < bytes.len() && believed(whole)) {
            return None;
        }
        let sha = super::sha256_hex(bytes);
        Some(format!(
            "state file `{name}` was changed outside a run of work (its sha256 is {}…, work last wrote {}…); \
             restore it or start over",
            &sha[..12],
            &last[..last.len().min(12)]
        ))
    });
    refused(verdict.flatten())
}

/// Checks that `path`, found missing, was not a recorded state file: one `work` wrote and did
/// not remove is refused as removed outside a run.
pub(crate) fn check_missing(path: &Path) -> io::Result<()> {
    let verdict = with(|r| {
        let rel = r.rel(path)?;
        r.sync();
        let (_, last, at, created) = r.index.get(&rel)?;
        let name = file_name(path);
        // A write that was to create the file, recorded by the log's last line: `work` may have
        // died between the line and the write, so the file never existed. Once anything was
        // recorded after it, the write had finished (a line is appended after the previous write
        // synced); a file that existed before its last write keeps its old content on a crash.
        if *created && *at == r.lines && r.broken.is_none() {
            return None;
        }
        Some(r.broken_msg(&name).unwrap_or_else(|| {
            format!(
                "state file `{name}` was removed outside a run of work (work last wrote it with sha256 {}…); restore it or start over",
                &last[..last.len().min(12)]
            )
        }))
    });
    refused(verdict.flatten())
}

/// The key of a run's event log in the digest log (`runs/<id>/events.jsonl`, relative to the
/// state directory), when `path` is one.
fn event_log_key(r: &Registry, path: &Path) -> Option<String> {
    let abs = std::path::absolute(path).ok()?;
    let rel = abs.strip_prefix(&r.state_dir).ok()?;
    (rel.starts_with("runs") && rel.file_name().is_some_and(|n| n == "events.jsonl"))
        .then(|| rel.to_string_lossy().into_owned())
}

/// Seals a run's event log once its `run.end` is written: its digest is recorded like a state
/// file's, so that run history tells a log changed after its run ended ([`check_event_log`]).
/// An event log is appended line by line while the run goes, unrecorded; only the finished
/// log is sealed.
pub fn seal_event_log(path: &Path) -> io::Result<()> {
    with(|r| {
        let Some(key) = event_log_key(r, path) else { return Ok(()) };
        let bytes = fs::read(path)?;
        r.record(&key, Some(&super::sha256_hex(&bytes)), false)
    })
    .unwrap_or(Ok(()))
}

/// Checks a finished run's event log, read whole, against its seal ([`seal_event_log`]): a
/// log never sealed (a run still going, killed, or older than seals) passes.
pub fn check_event_log(path: &Path, bytes: &[u8]) -> io::Result<()> {
    let verdict = with(|r| {
        let key = event_log_key(r, path)?;
        r.sync();
        if let Some(msg) = r.broken_msg("state-digests.jsonl") {
            return Some(msg);
        }
        let (_, last, _, _) = r.index.get(&key)?;
        let sha = super::sha256_hex(bytes);
        (sha != *last).then(|| {
            format!(
                "the event log `{key}` was changed after its run ended (its sha256 is {}…, work sealed it with {}…)",
                &sha[..12],
                &last[..last.len().min(12)]
            )
        })
    });
    refused(verdict.flatten())
}

/// Checks a state file read by a reader of its own (`None`: it is missing) the way
/// [`super::read_kept`] does: changed, or recorded and gone, is refused.
pub fn verify(path: &Path, content: Option<&[u8]>) -> io::Result<()> {
    match content {
        Some(bytes) => check(path, bytes),
        None => check_missing(path),
    }
}

/// The state files this process wrote, with their last digests.
pub fn written() -> BTreeMap<String, String> {
    with(|r| r.written.clone()).unwrap_or_default()
}

/// The digest log's chain head (the sha256 of its last line).
pub fn head() -> String {
    with(|r| {
        r.sync();
        r.head.clone()
    })
    .unwrap_or_default()
}

#[cfg(test)]
mod tests {
    use super::*;

    /// One test: the registry is process-wide, so its cases run in order.
    #[test]
    fn changes_removals_foreign_lines_and_a_broken_chain() {
        let d = tempfile::tempdir().expect("tmp");
        let state = d.path().join(".work");
        install(&state);
        let journal = state.join("j.json");
        super::super::write_atomic(&journal, b"one").expect("write");
        assert_eq!(super::super::read_optional(&journal).expect("read").as_deref(), Some("one"));
        fs::write(&journal, b"two").expect("tamper");
        let e = super::super::read_optional(&journal).expect_err("refused");
        assert!(e.to_string().contains("`j.json` was changed outside a run"), "{e}");

        // A file outside the state directory, once covered; removed behind work's back.
        let outside = d.path().join("spec").join("loop-run.json");
        cover(&outside);
        super::super::write_atomic(&outside, b"{}").expect("write");
        assert!(fs::read_to_string(state.join(LOG_NAME)).expect("log").contains("\"../spec/loop-run.json\""));
        fs::remove_file(&outside).expect("rm");
        // Its creation is the log's last line: work may have died before the write.
        assert_eq!(super::super::read_kept(&outside).expect("a first write cut short"), None);
        // Once a later line shows the write had finished, a removal is refused.
        super::super::write_atomic(&state.join("other.json"), b"{}").expect("write");
        let e = super::super::read_kept(&outside).expect_err("refused");
        assert!(e.to_string().contains("removed outside a run"), "{e}");

        // Another process appends a correctly chained line: read, not refused.
        super::super::write_atomic(&journal, b"three").expect("write");
        let head = head();
        let line = serde_json::json!({"path": "j.json", "sha256": super::super::sha256_hex(b"four"), "chain": head});
        let mut f = fs::OpenOptions::new().append(true).open(state.join(LOG_NAME)).expect("open");
        writeln!(f, "{line}").expect("append");
        fs::write(&journal, b"four").expect("the other process's write");
        assert_eq!(super::super::read_optional(&journal).expect("read").as_deref(), Some("four"));

        // An append-only log torn by a crash mid-append (the digest of the whole line recorded,
        // part of it written), or with half a line never recorded: read without the torn
        // line, not refused; the next append cuts it away. A changed record is still refused.
        let log = state.join("p.jsonl");
        super::super::append_line(&log, br#"{"seq":1}"#).expect("append");
        super::super::append_line(&log, br#"{"seq":2}"#).expect("append");
        let whole = fs::read(&log).expect("log");
        fs::write(&log, &whole[..whole.len() - 4]).expect("tear the last append");
        let lines = super::super::read_json_lines(&log).expect("a torn append is read").expect("some");
        assert_eq!(lines, vec![serde_json::json!({"seq": 1})]);
        super::super::append_line(&log, br#"{"seq":2,"again":true}"#).expect("append after a tear");
        let mut f = fs::OpenOptions::new().append(true).open(&log).expect("open");
        f.write_all(br#"{"seq":3,"half"#).expect("half a line, never recorded");
        drop(f);
        let lines = super::super::read_json_lines(&log).expect("half a line is read").expect("some");
        assert_eq!(lines, vec![serde_json::json!({"seq": 1}), serde_json::json!({"seq": 2, "again": true})]);
        super::super::append_line(&log, br#"{"seq":3}"#).expect("append");
        assert_eq!(fs::read_to_string(&log).expect("log"), "{\"seq\":1}\n{\"seq\":2,\"again\":true}\n{\"seq\":3}\n");
        let text = fs::read_to_string(&log).expect("log").replace("\"seq\":3", "\"seq\":4");
        fs::write(&log, text).expect("edit a record");
        let e = super::super::read_json_lines(&log).expect_err("refused");
        assert!(e.to_string().contains("`p.jsonl` was changed outside a run"), "{e}");
        let text = fs::read_to_string(&log).expect("log");
        fs::write(&log, format!("{text}{{\"seq\":5}}")).expect("a whole record without its newline");
        let e = super::super::read_json_lines(&log).expect_err("the edit is still refused");
        assert!(e.to_string().contains("`p.jsonl` was changed outside a run"), "{e}");

        // A write that fails (here: its directory cannot be made) is recorded back: the file a
        // failed write was to create reads as never written, even once later lines follow.
        let blocked = state.join("j.json").join("x.json");
        super::super::write_atomic(&blocked, b"new").expect_err("no directory");
        super::super::write_atomic(&state.join("other.json"), b"[]").expect("a later write");
        verify(&blocked, None).expect("a failed first write: never written");

        // A line edited in place breaks the chain: every recorded file is refused.
        let log = state.join(LOG_NAME);
        let text = fs::read_to_string(&log).expect("log");
        fs::write(&log, text.replacen("j.json", "x.json", 1)).expect("edit");
        install(&state);
        let e = super::super::read_optional(&journal).expect_err("refused");
        assert!(e.to_string().contains("edited outside a run of work (line 2"), "{e}");
    }
}
