//! What a Claude Code run was billed, from its session transcripts: a run that ends without a
//! result object (killed at its timeout, crashed) printed no usage, but Claude Code writes every
//! assistant message it received, with its `usage`, to `projects/…/*.jsonl` under its state
//! directory as it goes. Read from the run's private state directory (the kernel sandbox's), or —
//! a run not confined writes to the user's own, which holds other sessions — only the
//! transcripts of the session `work` named for the run (`--session-id`).

use serde_json::Value;
use std::collections::BTreeMap;
use std::path::Path;
use work_runtime::budget::Usage;

/// How deep under `projects/` transcripts are looked for (a subagent's sit in a directory of
/// their session).
const MAX_DEPTH: usize = 4;

/// The usage of every assistant message in the transcripts under `home` (`None` when there is
/// none): input counts cache reads and writes, as the result object's does.
pub(crate) fn billed(home: &Path) -> Option<Usage> {
    billed_of(home, |_| true)
}

/// The usage of the session `session`'s transcripts under `home` (the user's state directory):
/// `projects/<project>/<session>.jsonl` and its subagents' under `projects/<project>/<session>/`.
pub(crate) fn billed_session(home: &Path, session: &str) -> Option<Usage> {
    let projects = home.join("projects");
    billed_of(home, |f| {
        f.strip_prefix(&projects).is_ok_and(|rel| {
            rel.components().skip(1).any(|c| c.as_os_str() == session)
                || rel.file_stem().is_some_and(|s| s == session) && rel.components().count() == 2
        })
    })
}

fn billed_of(home: &Path, keep: impl Fn(&Path) -> bool) -> Option<Usage> {
    let mut messages: BTreeMap<String, (u64, u64)> = BTreeMap::new();
    let mut files = Vec::new();
    jsonl_files(&home.join("projects"), 0, &mut files);
    for f in files.into_iter().filter(|f| keep(f)) {
        let Ok(text) = std::fs::read_to_string(&f) else { continue };
        read_messages(&text, &mut messages);
    }
    if messages.is_empty() {
        return None;
    }
    let (input, output) = messages.values().fold((0, 0), |(a, b), (i, o)| (a + i, b + o));
    Some(Usage { input_tokens: input, output_tokens: output, cost_usd: 0.0 })
}

/// Every `*.jsonl` under `dir`, at most [`MAX_DEPTH`] levels down, symlinks not followed.
fn jsonl_files(dir: &Path, depth: usize, out: &mut Vec<std::path::PathBuf>) {
    let Ok(entries) = std::fs::read_dir(dir) else { return };
    for e in entries.flatten() {
        let Ok(t) = e.file_type() else { continue };
        let p = e.path();
        if t.is_dir() && depth < MAX_DEPTH {
            jsonl_files(&p, depth + 1, out);
        } else if t.is_file() && p.extension().is_some_and(|x| x == "jsonl") {
            out.push(p);
        }
    }
}

/// Each assistant message's usage in `text`, by message id: Claude Code writes one line per
/// content block of a message, each with the message's usage, so a message counts once (its
/// largest numbers).
fn read_messages(text: &str, messages: &mut BTreeMap<String, (u64, u64)>) {
    for line in text.lines() {
        let Ok(v) = serde_json::from_str::<Value>(line.trim()) else { continue };
        if v.get("type").and_then(Value::as_str) != Some("assistant") {
            continue;
        }
        let Some(u) = v.pointer("/message/usage") else { continue };
        let n = |k: &str| u.get(k).and_then(Value::as_u64).unwrap_or(0);
        let input = n("input_tokens") + n("cache_creation_input_tokens") + n("cache_read_input_tokens");
        let id = v
            .pointer("/message/id")
            .and_then(Value::as_str)
            .or(v.get("uuid").and_then(Value::as_str))
            .unwrap_or_default()
            .to_string();
        let slot = messages.entry(id).or_default();
        *slot = (slot.0.max(input), slot.1.max(n("output_tokens")));
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn every_message_counts_once_and_cache_counts_as_input() {
        let d = tempfile::tempdir().expect("tmp");
        let dir = d.path().join("projects/-repo/sess/subagents");
        std::fs::create_dir_all(&dir).expect("mkdir");
        let line = |id: &str, i: u64, o: u64| {
            json!({"type": "assistant", "message": {"id": id, "usage": {"input_tokens": i,
                "cache_read_input_tokens": 5, "output_tokens": o}}})
            .to_string()
        };
        let main = [line("m1", 100, 20), line("m1", 100, 20), json!({"type": "user"}).to_string(), "{torn".into()];
        std::fs::write(d.path().join("projects/-repo/sess.jsonl"), main.join("\n")).expect("write");
        std::fs::write(dir.join("agent-1.jsonl"), line("m2", 10, 2)).expect("write");
        let u = billed(d.path()).expect("billed");
        assert_eq!((u.input_tokens, u.output_tokens), (105 + 15, 22));
        assert!(billed(&d.path().join("none")).is_none());
        // The user's own directory: only the named session (and its subagents) counts.
        std::fs::write(d.path().join("projects/-repo/other.jsonl"), line("m3", 1000, 200)).expect("write");
        let u = billed_session(d.path(), "sess").expect("billed");
        assert_eq!((u.input_tokens, u.output_tokens), (105 + 15, 22));
        assert!(billed_session(d.path(), "none").is_none());
    }
}
