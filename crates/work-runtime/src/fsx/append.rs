//! Append-only state logs: one JSON document a line, each appended whole and synced.
//!
//! A crash can cut only the last line (a write that a power loss tore); [`read_json_lines`]
//! drops any line that does not parse, and the next [`append_line`] starts on a fresh line, so
//! a torn record never hides the ones after it.

use std::fs::{self, File, OpenOptions};
use std::io::{self, Read, Seek, SeekFrom, Write};
use std::path::Path;

/// Appends `line` and a newline to the log at `path` (created with its directory) in one
/// write, then syncs the data. A log whose last line is torn gets a newline first.
pub fn append_line(path: &Path, line: &[u8]) -> io::Result<()> {
    if let Some(dir) = path.parent().filter(|d| !d.as_os_str().is_empty()) {
        fs::create_dir_all(dir)?;
    }
    let mut f = OpenOptions::new().create(true).read(true).append(true).open(path)?;
    let mut buf = Vec::with_capacity(line.len() + 2);
    if ends_torn(&mut f)? {
        buf.push(b'\n');
    }
    buf.extend_from_slice(line);
    buf.push(b'\n');
    super::digests::before_append(path, &buf)?;
    crate::faults::state_change();
    f.write_all(&buf)?;
    f.sync_data()
}

/// True when the file is not empty and does not end with a newline.
fn ends_torn(f: &mut File) -> io::Result<bool> {
    if f.seek(SeekFrom::End(0))? == 0 {
        return Ok(false);
    }
    f.seek(SeekFrom::End(-1))?;
    let mut last = [0u8; 1];
    f.read_exact(&mut last)?;
    Ok(last[0] != b'\n')
}

/// The JSON objects of a log, in order; a line that does not parse is dropped. A missing log
/// is `Ok(None)`; a state log is checked against its recorded digest.
pub fn read_json_lines(path: &Path) -> io::Result<Option<Vec<serde_json::Value>>> {
    Ok(super::read_optional_bytes(path)?.map(|b| parse_lines(&b)))
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
