//! `apply_patch`: the `*** Begin Patch` envelope (the format Codex models write).
//!
//! ```text
//! *** Begin Patch
//! *** Add File: PATH        then the file's lines, each starting with `+`
//! *** Delete File: PATH
//! *** Update File: PATH     then hunks: `@@` (optionally followed by a context line), then
//!                           lines starting with ` ` (context), `-` (removed), `+` (added)
//! *** End Patch
//! ```
//!
//! Each hunk's context and removed lines must occur exactly once in the file (searched from the
//! previous hunk's end). The whole patch is checked before anything is written; the files are
//! then written one by one through the confined write.

use super::files::{read_text, remove_confined, write_confined};
use super::{Workspace, arg};
use serde_json::Value;

/// One file's change.
#[derive(Debug, PartialEq)]
enum Change {
    Add { path: String, content: String },
    Delete { path: String },
    Update { path: String, hunks: Vec<Vec<String>> },
}

/// Reads the envelope into its changes.
fn parse(patch: &str) -> Result<Vec<Change>, String> {
    let mut lines = patch.lines().map(|l| l.strip_suffix('\r').unwrap_or(l)).peekable();
    while lines.peek().is_some_and(|l| l.trim().is_empty()) {
        lines.next();
    }
    if lines.next().map(str::trim) != Some("*** Begin Patch") {
        return Err("the patch must start with `*** Begin Patch`".into());
    }
    let mut changes = Vec::new();
    loop {
        let Some(line) = lines.next() else { return Err("the patch must end with `*** End Patch`".into()) };
        if line.trim() == "*** End Patch" {
            break;
        }
        if let Some(path) = line.strip_prefix("*** Add File: ") {
            let mut content = String::new();
            while let Some(l) = lines.next_if(|l| !l.starts_with("*** ")) {
                let body =
                    l.strip_prefix('+').ok_or_else(|| format!("a line of an added file must start with `+`: `{l}`"))?;
                content.push_str(body);
                content.push('\n');
            }
            changes.push(Change::Add { path: path.trim().to_string(), content });
        } else if let Some(path) = line.strip_prefix("*** Delete File: ") {
            changes.push(Change::Delete { path: path.trim().to_string() });
        } else if let Some(path) = line.strip_prefix("*** Update File: ") {
            let mut hunks: Vec<Vec<String>> = Vec::new();
            while let Some(l) = lines.next_if(|l| !l.starts_with("*** ")) {
                if l.starts_with("@@") {
                    hunks.push(Vec::new());
                } else if l.is_empty() || matches!(l.as_bytes()[0], b' ' | b'-' | b'+') {
                    if hunks.is_empty() {
                        hunks.push(Vec::new());
                    }
                    if let Some(h) = hunks.last_mut() {
                        h.push(if l.is_empty() { " ".to_string() } else { l.to_string() });
                    }
                } else {
                    return Err(format!("a hunk line must start with ` `, `-` or `+`: `{l}`"));
                }
            }
            hunks.retain(|h| !h.is_empty());
            if hunks.is_empty() {
                return Err(format!("`*** Update File: {}` has no hunk", path.trim()));
            }
            changes.push(Change::Update { path: path.trim().to_string(), hunks });
        } else if !line.trim().is_empty() {
            return Err(format!("unexpected line in the patch: `{}`", crate::head(line, 120)));
        }
    }
    if changes.is_empty() {
        return Err("the patch changes nothing".into());
    }
    Ok(changes)
}

/// The file's text with `hunks` applied.
fn apply_hunks(rel: &str, text: &str, hunks: &[Vec<String>]) -> Result<String, String> {
    let trailing_newline = text.ends_with('\n') || text.is_empty();
    let mut lines: Vec<String> = text.lines().map(str::to_string).collect();
    let mut from = 0usize;
    for (n, hunk) in hunks.iter().enumerate() {
        let old: Vec<&str> = hunk.iter().filter(|l| !l.starts_with('+')).map(|l| &l[1..]).collect();
        let new: Vec<String> = hunk.iter().filter(|l| !l.starts_with('-')).map(|l| l[1..].to_string()).collect();
        let at = if old.is_empty() {
            lines.len()
        } else {
            let found: Vec<usize> = (from..=lines.len().saturating_sub(old.len()))
                .filter(|&i| {
                    i + old.len() <= lines.len() && lines[i..i + old.len()].iter().zip(&old).all(|(a, b)| a == b)
                })
                .collect();
            match found.as_slice() {
                [i] => *i,
                [] => {
                    return Err(format!("hunk {} does not match `{rel}` (its ` ` and `-` lines must be exact)", n + 1));
                }
                _ => return Err(format!("hunk {} matches `{rel}` in {} places: add context", n + 1, found.len())),
            }
        };
        lines.splice(at..at + old.len(), new.iter().cloned());
        from = at + new.len();
    }
    let mut out = lines.join("\n");
    if trailing_newline && !out.is_empty() {
        out.push('\n');
    }
    Ok(out)
}

/// `apply_patch`: checks every change, then writes them.
pub(super) fn apply(ws: &Workspace, input: &Value) -> Result<String, String> {
    let changes = parse(arg(input, "patch")?)?;
    let rel = |p: &str| -> Result<String, String> {
        ws.relative(p)?.ok_or_else(|| format!("`{p}` names the repository root, not a file"))
    };
    // Everything is checked and computed before the first write.
    let mut plan: Vec<(String, Option<String>)> = Vec::new();
    for c in &changes {
        match c {
            Change::Add { path, content } => plan.push((rel(path)?, Some(content.clone()))),
            Change::Delete { path } => {
                let r = rel(path)?;
                read_text(ws, &r)?;
                plan.push((r, None));
            }
            Change::Update { path, hunks } => {
                let r = rel(path)?;
                let text = read_text(ws, &r)?;
                plan.push((r.clone(), Some(apply_hunks(&r, &text, hunks)?)));
            }
        }
    }
    if let Some(why) = plan.iter().find_map(|(r, _)| ws.protected_reason(r)) {
        return Err(why);
    }
    let mut done = Vec::new();
    for (r, content) in &plan {
        match content {
            Some(text) => write_confined(ws, r, text.as_bytes())?,
            None => remove_confined(ws, r)?,
        }
        done.push(format!("{} `{r}`", if content.is_some() { "wrote" } else { "deleted" }));
    }
    Ok(done.join("\n"))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn hunks_replace_unique_runs_of_lines() {
        let patch =
            "*** Begin Patch\n*** Update File: a.txt\n@@\n one\n-two\n+TWO\n*** Add File: b.txt\n+hi\n*** End Patch\n";
        let changes = parse(patch).expect("parses");
        assert_eq!(changes.len(), 2);
        let Change::Update { hunks, .. } = &changes[0] else { panic!("an update") };
        assert_eq!(apply_hunks("a.txt", "one\ntwo\nthree\n", hunks), Ok("one\nTWO\nthree\n".into()));
        assert!(apply_hunks("a.txt", "one\nthree\n", hunks).is_err_and(|e| e.contains("does not match")));
        assert!(apply_hunks("a.txt", "one\ntwo\none\ntwo\n", hunks).is_err_and(|e| e.contains("2 places")));
        assert_eq!(changes[1], Change::Add { path: "b.txt".into(), content: "hi\n".into() });
        assert!(parse("*** Update File: a\n").is_err());
        assert!(parse("*** Begin Patch\n*** End Patch\n").is_err_and(|e| e.contains("nothing")));
    }
}
