//! Append-only state logs: one JSON document a line, each appended whole and synced.
//!
//! A crash can cut only the last line (a write that a power loss tore): [`read_json_lines`]
//! reads only the lines a newline ends (an unfinished last line was never committed) and drops
//! any line that does not parse, and the next [`append_line`] cuts a torn last line away
//! before it appends, so a torn record never hides or doubles the ones after it. A state log
//! with a torn tail is checked against its recorded digest without the tail
//! ([`super::digests`]): a tear is a crash, not a change outside a run.

use std::fs::{self, File, OpenOptions};
use std::io::{self, Read, Seek, SeekFrom, Write};
use std::path::Path;

/// Appends `line` and a newline to the log at `path` (created with its directory) in one
/// write, then syncs the data. A torn last line (what a crash cut) is cut away first.
pub fn append_line(path: &Path, line: &[u8]) -> io::Result<()> {
    if let Some(dir) = path.parent().filter(|d| !d.as_os_str().is_empty()) {
        fs::create_dir_all(dir)?;
    }
    let mut f = OpenOptions::new().create(true).truncate(false).read(true).write(true).open(path)?;
    if let Some(whole) = torn_at(&mut f)? {
        cut_torn_tail(path, &mut f, whole)?;
    }
    f.seek(SeekFrom::End(0))?;
    let mut buf = Vec::with_capacity(line.len() + 1);
    buf.extend_from_slice(line);
    buf.push(b'\n');
    super::digests::before_append(path, &buf)?;
    let written = crate::faults::state_append()
        .and_then(|tear| {
            if tear {
                // Test-only: the write a power loss cuts (half the line, no newline), then death.
                let _ = f.write_all(&buf[..line.len() / 2]).and_then(|()| f.sync_data());
                crate::faults::torn();
            }
            f.write_all(&buf)
        })
        .and_then(|()| f.sync_data());
    if written.is_err() {
        // Whatever part of the line reached the file is a torn tail: read without it.
        super::digests::after_failed_write(path);
    }
    written
}

/// When the file does not end with a newline (a torn last line): the length of its lines
/// that do, the part a cut keeps.
fn torn_at(f: &mut File) -> io::Result<Option<u64>> {
    let len = f.seek(SeekFrom::End(0))?;
    if len == 0 {
        return Ok(None);
    }
    f.seek(SeekFrom::End(-1))?;
    let mut last = [0u8; 1];
    f.read_exact(&mut last)?;
    if last[0] == b'\n' {
        return Ok(None);
    }
    let mut bytes = Vec::new();
    f.seek(SeekFrom::Start(0))?;
    f.read_to_end(&mut bytes)?;
    Ok(Some(whole_lines(&bytes) as u64))
}

/// Cuts the torn last line of the log `f` (at `path`) away, leaving its first `whole` bytes:
/// recorded (and counted as a state change) like any other write.
fn cut_torn_tail(path: &Path, f: &mut File, whole: u64) -> io::Result<()> {
    let mut kept = Vec::new();
    f.seek(SeekFrom::Start(0))?;
    f.take(whole).read_to_end(&mut kept)?;
    super::digests::before_write(path, &kept)?;
    let cut = crate::faults::state_write().and_then(|()| f.set_len(whole)).and_then(|()| f.sync_data());
    if cut.is_err() {
        super::digests::after_failed_write(path);
    }
    cut
}

/// The length of the lines of `bytes` that a newline ends (an unfinished last line left out).
pub(crate) fn whole_lines(bytes: &[u8]) -> usize {
    bytes.iter().rposition(|&b| b == b'\n').map_or(0, |i| i + 1)
}

/// The JSON objects of a log, in order: its lines that a newline ends (an unfinished last line
/// is a write a crash tore, never committed) and that parse. A missing log is `Ok(None)`; a
/// state log is checked against its recorded digest, with a torn last line left out.
pub fn read_json_lines(path: &Path) -> io::Result<Option<Vec<serde_json::Value>>> {
    let bytes = match fs::read(path) {
        Ok(b) => b,
        Err(e) if e.kind() == io::ErrorKind::NotFound => return Ok(None),
        Err(e) => return Err(e),
    };
    let whole = &bytes[..whole_lines(&bytes)];
    super::digests::check_log(path, &bytes, whole)?;
    Ok(Some(parse_lines(whole)))
}

/// The JSON objects of log text, in order; a line that does not parse is dropped.
pub fn parse_lines(bytes: &[u8]) -> Vec<serde_json::Value> {
    bytes
        .split(|&b| b == b'\n')
        .filter(|l| !l.is_empty())
        .filter_map(|l| serde_json::from_slice::<serde_json::Value>(l).ok())
        .filter(serde_json::Value::is_object)
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_torn_tail_is_dropped_and_the_next_record_is_whole() {
        let dir = tempfile::tempdir().expect("tempdir");
        let p = dir.path().join("sub/log.jsonl");
        append_line(&p, br#"{"n":1}"#).expect("append");
        let mut f = OpenOptions::new().append(true).open(&p).expect("open");
        f.write_all(br#"{"n":2, "cut"#).expect("tear");
        drop(f);
        assert_eq!(read_json_lines(&p).expect("read").expect("some").len(), 1, "the torn line is dropped");
        append_line(&p, br#"{"n":3}"#).expect("append");
        let lines = read_json_lines(&p).expect("read").expect("some");
        assert_eq!(lines, vec![serde_json::json!({"n": 1}), serde_json::json!({"n": 3})]);
        assert!(read_json_lines(&dir.path().join("none")).expect("missing").is_none());
    }
}
