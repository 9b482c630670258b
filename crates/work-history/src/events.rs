//! Bounded reading of one event log.

use serde_json::Value;
use std::io;
use std::path::Path;

/// The most of one `events.jsonl` read (a longer log is read up to here and marked truncated).
pub const MAX_LOG_BYTES: u64 = 64 * 1024 * 1024;

/// One event log as read.
#[derive(Debug, Default, Clone)]
pub struct EventsRead {
    /// The events that parsed as JSON objects, in file order.
    pub events: Vec<Value>,
    /// Lines that did not parse (a torn last line of a killed run, or garbage).
    pub skipped_lines: usize,
    /// The file was longer than [`MAX_LOG_BYTES`].
    pub truncated: bool,
    /// Why the log is not believed: it changed after its run ended (see
    /// `work_runtime::fsx::digests::check_event_log`).
    pub altered: Option<String>,
}

/// Reads `path` (at most [`MAX_LOG_BYTES`]), keeping every line that is a JSON object.
pub fn read_log(path: &Path) -> io::Result<EventsRead> {
    read_log_capped(path, MAX_LOG_BYTES)
}

/// [`read_log`] with an explicit cap.
pub fn read_log_capped(path: &Path, cap: u64) -> io::Result<EventsRead> {
    let (text, truncated) = work_runtime::fsx::read_text_capped(path, cap)?;
    let mut read = parse_lines(&text, truncated);
    if !truncated && let Err(e) = work_runtime::fsx::digests::check_event_log(path, text.as_bytes()) {
        read.altered = Some(e.to_string());
    }
    Ok(read)
}

/// Parses JSONL text; blank lines are ignored, unparsable ones counted.
pub fn parse_lines(text: &str, truncated: bool) -> EventsRead {
    let mut out = EventsRead { truncated, ..EventsRead::default() };
    for line in text.lines() {
        if line.trim().is_empty() {
            continue;
        }
        match serde_json::from_str::<Value>(line) {
            Ok(v) if v.is_object() => out.events.push(v),
            _ => out.skipped_lines += 1,
        }
    }
    out
}

/// The `kind` of an event.
pub fn kind(e: &Value) -> &str {
    e.get("kind").and_then(Value::as_str).unwrap_or("")
}

/// A string field.
pub fn str_field<'a>(e: &'a Value, key: &str) -> Option<&'a str> {
    e.get(key).and_then(Value::as_str)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn torn_last_line_is_skipped_and_counted() {
        let text = "{\"kind\":\"run.start\",\"seq\":1}\n\n[1]\n{\"kind\":\"dispatch.st";
        let r = parse_lines(text, false);
        assert_eq!(r.events.len(), 1);
        assert_eq!(r.skipped_lines, 2);
        assert_eq!(kind(&r.events[0]), "run.start");
    }

    #[test]
    fn cap_bounds_the_read() {
        let dir = tempfile::tempdir().expect("tempdir");
        let p = dir.path().join("events.jsonl");
        let line = "{\"kind\":\"progress\",\"line\":\"x\"}\n";
        std::fs::write(&p, line.repeat(100)).expect("write");
        let r = read_log_capped(&p, line.len() as u64 * 10 + 5).expect("read");
        assert!(r.truncated);
        assert_eq!(r.events.len(), 10);
        assert_eq!(r.skipped_lines, 1);
    }
}
