//! `search`: a regex over the repository's files with ripgrep's libraries: the walk is the
//! `ignore` crate's (`.gitignore`, `.ignore`, git's excludes; hidden files included, `.git/`
//! never; symlinks not followed), the search is `grep-searcher` with a `grep-regex` matcher
//! (line by line, binary files skipped).

use super::{Workspace, arg};
use grep_regex::RegexMatcherBuilder;
use grep_searcher::{BinaryDetection, SearcherBuilder, sinks::UTF8};
use serde_json::Value;
use std::path::Path;

/// The most matching lines one search returns.
pub const MAX_MATCHES: usize = 200;
/// The longest matching line shown (characters); longer ones are cut.
const LINE_CHARS: usize = 300;
/// The largest file searched (bytes).
const SEARCH_FILE_CAP: u64 = 4 * 1024 * 1024;

/// The repository walker below `dir` (the ignore rules of its parents apply too).
pub(super) fn walker(dir: &Path) -> ignore::WalkBuilder {
    let mut b = ignore::WalkBuilder::new(dir);
    b.hidden(false)
        .follow_links(false)
        .git_ignore(true)
        .git_exclude(true)
        .git_global(false)
        .require_git(false)
        .parents(true)
        .filter_entry(|e| e.file_name() != ".git");
    b
}

/// At most `n` characters of `line`, marked when cut.
fn clip(line: &str, n: usize) -> String {
    match line.char_indices().nth(n) {
        Some((i, _)) => format!("{}…", &line[..i]),
        None => line.to_string(),
    }
}

/// `search`: `PATH:LINE: TEXT` for each matching line, at most [`MAX_MATCHES`].
pub(super) fn search(ws: &Workspace, input: &Value) -> Result<String, String> {
    let pattern = arg(input, "pattern")?;
    let matcher = RegexMatcherBuilder::new()
        .line_terminator(Some(b'\n'))
        .build(pattern)
        .map_err(|e| format!("the pattern is not a valid regex: {}", crate::head(&e.to_string(), 300)))?;
    let rel = ws.relative(input.get("path").and_then(Value::as_str).unwrap_or(""))?;
    let start = match &rel {
        Some(r) => {
            super::files::no_symlink_on_the_way(&ws.root, r)?;
            ws.root.join(r)
        }
        None => ws.root.clone(),
    };
    let mut searcher = SearcherBuilder::new().binary_detection(BinaryDetection::quit(0)).line_number(true).build();
    let mut out = String::new();
    let mut matches = 0usize;
    let mut files = 0usize;
    let mut more = false;
    let mut entries: Vec<_> =
        walker(&start).build().flatten().filter(|e| e.file_type().is_some_and(|t| t.is_file())).collect();
    entries.sort_by(|a, b| a.path().cmp(b.path()));
    for entry in entries {
        if more {
            break;
        }
        if entry.metadata().is_ok_and(|m| m.len() > SEARCH_FILE_CAP) {
            continue;
        }
        let shown = entry.path().strip_prefix(&ws.root).unwrap_or(entry.path()).to_string_lossy().into_owned();
        // The file is read through the confined read (no symlink followed), then searched.
        let Ok(bytes) = work_runtime::fsx::read_confined(&ws.root, &shown, SEARCH_FILE_CAP) else { continue };
        let mut hit = false;
        let _ = searcher.search_slice(
            &matcher,
            &bytes,
            UTF8(|lnum, line| {
                if matches >= MAX_MATCHES {
                    more = true;
                    return Ok(false);
                }
                matches += 1;
                hit = true;
                out.push_str(&format!("{shown}:{lnum}: {}\n", clip(line.trim_end_matches(['\n', '\r']), LINE_CHARS)));
                Ok(true)
            }),
        );
        files += usize::from(hit);
    }
    if matches == 0 {
        return Ok(format!("no match for `{pattern}`"));
    }
    if more {
        out.push_str(&format!("… (stopped at {MAX_MATCHES} matches: narrow the pattern or the path)\n"));
    } else {
        out.push_str(&format!("({matches} matching lines in {files} files)\n"));
    }
    Ok(out)
}
