//! Evidence the engine re-reads: a `PATH:LINE` location (prose forms too, see
//! [`crate::locate`]) resolved inside the repository and read back the way a reviewer would —
//! exhaust's gate 2, and the evidence an adjudicator's refutation cites in `loop run`.

use std::path::{Path, PathBuf};

/// How much of a file gate 2 reads (16 MiB).
const READ_CAP: u64 = 16 * 1024 * 1024;

/// A location in `PATH:LINE` form.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FileLine {
    /// The path as written (leading `./` removed).
    pub path: String,
    /// The line (1-based).
    pub line: u64,
    /// The end of a `PATH:A-B` range.
    pub end: Option<u64>,
    /// Text after `PATH:LINE:` (oracle lines).
    pub text: Option<String>,
}

impl FileLine {
    /// The dedup key: `path:line`.
    pub fn key(&self) -> String {
        format!("{}:{}", self.path, self.line)
    }
}

/// What a location is.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Location {
    /// `PATH:LINE` (with an optional `-END`, `:COL` or `:TEXT` tail).
    FileLine(FileLine),
    /// A named concept: no `PATH:LINE` form and nothing path-like.
    Concept,
    /// Looks like a file location but cannot be read as one: refused, never a concept.
    Malformed(String),
}

/// True when `s` (a location without a usable `:LINE`) looks like a file path rather than a
/// named concept: absolute, `./`/`../`/`~`-prefixed, a drive letter, or one word with a `/`
/// or a file extension.
fn looks_like_path(s: &str) -> bool {
    let t = s.trim();
    let b = t.as_bytes();
    if t.starts_with('/') || t.starts_with("./") || t.starts_with("../") || t.starts_with('~') || t.contains('\\') {
        return true;
    }
    if b.len() > 2 && b[0].is_ascii_alphabetic() && b[1] == b':' {
        return true;
    }
    let word = t.split(':').next().unwrap_or("");
    word.contains('/') || crate::locate::path_like(word)
}

/// Classifies a location: `PATH:LINE`, `PATH:LINE-END`, `PATH:LINE:COL` or `PATH:LINE:TEXT`
/// is a [`Location::FileLine`]; anything that looks like a path but does not parse (an
/// overflowing line, an unknown tail, a path with no line) is [`Location::Malformed`]; the rest
/// is a [`Location::Concept`]. A Windows drive path (`C:\x:3`) parses with `C:\x` as its path,
/// so that gate 2 refuses it as absolute.
pub fn classify_location(location: &str) -> Location {
    let rewritten = crate::locate::prose_to_file_line(location);
    let s = rewritten.as_deref().unwrap_or(location).trim();
    let b = s.as_bytes();
    let (prefix, rest) = if b.len() > 2 && b[0].is_ascii_alphabetic() && b[1] == b':' && (b[2] == b'\\' || b[2] == b'/')
    {
        (&s[..2], &s[2..])
    } else {
        ("", s)
    };
    // The path is everything up to the first `:` followed by a digit.
    let mut search = 0;
    while let Some(rel) = rest[search..].find(':') {
        let colon = search + rel;
        let path = &rest[..colon];
        let after = &rest[colon + 1..];
        let digits: String = after.chars().take_while(|c| c.is_ascii_digit()).collect();
        if digits.is_empty() || path.trim().is_empty() || path.starts_with(char::is_whitespace) {
            search = colon + 1;
            continue;
        }
        if !looks_like_path(path) && path.contains(char::is_whitespace) {
            // "retry policy: 3 tries" and the like: prose, not a path.
            search = colon + 1;
            continue;
        }
        let Ok(line) = digits.parse::<u64>() else {
            return Location::Malformed(format!("line number `{digits}` is out of range"));
        };
        let tail = &after[digits.len()..];
        let (end, text) = if tail.is_empty() {
            (None, None)
        } else if let Some(r) = tail.strip_prefix('-') {
            match r.parse::<u64>() {
                Ok(e) if r.chars().all(|c| c.is_ascii_digit()) => (Some(e), None),
                _ => return Location::Malformed(format!("line range `{digits}{tail}` is not LINE-LINE")),
            }
        } else if let Some(t) = tail.strip_prefix(':') {
            (None, Some(t.to_string()))
        } else {
            return Location::Malformed(format!("`{digits}{tail}` after `{path}:` is not a line number"));
        };
        let mut p = format!("{prefix}{path}");
        if prefix.is_empty() && !p.starts_with('/') {
            // One spelling per path: `./a`, `a//b`, `a/`, `x/../a` all read as `a`. A path that
            // climbs out of the root keeps its spelling so that gate 2 refuses it as such.
            if let Some(n) = crate::locate::normalize_rel(&p) {
                p = n;
            }
        }
        return Location::FileLine(FileLine { path: p, line, end, text });
    }
    if looks_like_path(s) {
        return Location::Malformed("a file location needs PATH:LINE".into());
    }
    Location::Concept
}

/// Parses a `PATH:LINE` location (see [`classify_location`]); `None` for anything else.
pub fn parse_file_line(location: &str) -> Option<FileLine> {
    match classify_location(location) {
        Location::FileLine(fl) => Some(fl),
        _ => None,
    }
}

/// What gate 2 concluded.
#[derive(Debug, Clone, PartialEq)]
pub enum Gate2 {
    /// Re-read: the line exists; `text` is what the engine read there.
    Read {
        /// The re-read source, `path:line`.
        source: String,
        /// The line's text (trimmed, at most 300 characters).
        text: String,
    },
    /// A named concept; nothing to re-read.
    Concept,
    /// Refused.
    Refused(String),
}

/// What gate 2 holds a location to beyond existing: the places that are never evidence, and
/// the scope a discovery is bounded to.
#[derive(Debug, Clone, Default)]
pub struct Gate2Rules {
    /// Canonical directories no location may point into (the state directory; `.git` is
    /// always refused).
    pub forbidden: Vec<PathBuf>,
    /// When not empty, a location must lie at or under one of these normalised relative paths.
    pub scope: Vec<String>,
}

/// A `PATH:LINE` location resolved inside the root: its real path and its one spelling
/// relative to the root (symlinks followed to their in-repo target).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Resolved {
    /// The real path.
    pub real: PathBuf,
    /// The canonical relative path.
    pub rel: String,
}

/// Resolves `fl`'s path inside `root`; `Err` says why it cannot be (absolute, `..`, an escape).
pub fn resolve(root: &Path, fl: &FileLine) -> Result<Resolved, String> {
    let real = work_runtime::fsx::confine(root, &fl.path).map_err(|e| format!("location refused: {e}"))?;
    let root_real = std::fs::canonicalize(root).map_err(|e| format!("cannot resolve the root: {e}"))?;
    let rel = real
        .strip_prefix(&root_real)
        .map_err(|_| format!("location refused: `{}` is outside the repository", fl.path))?
        .to_string_lossy()
        .into_owned();
    Ok(Resolved { real, rel })
}

/// The first word of a concept location that names an existing file in the repository — the
/// word itself, or its head up to the first character no path has (`a.py@99`, `a.py~99`,
/// `a.py→line 99`, `a.py#line99` name `a.py`).
fn names_a_file(root: &Path, location: &str) -> Option<String> {
    let is_file = |w: &str| !w.is_empty() && work_runtime::fsx::confine(root, w).is_ok_and(|p| p.is_file());
    location
        .split(|c: char| c.is_whitespace() || ",;()[]`\"'".contains(c))
        .map(|w| w.trim_end_matches([':', '.', '!', '?']))
        .filter(|w| !w.is_empty())
        .find_map(|w| {
            let head = w.split(|c: char| !(c.is_ascii_alphanumeric() || "._/-+".contains(c))).next().unwrap_or(w);
            let head = head.trim_end_matches(['.', '-']);
            [w, head].into_iter().find(|x| is_file(x)).map(str::to_string)
        })
}

/// Gate 2 with the default rules and no evidence to compare (see [`gate2_with`]).
pub fn gate2(root: &Path, location: &str) -> Gate2 {
    gate2_with(root, location, None, &Gate2Rules::default())
}

/// Gate 2: re-reads `location` inside `root` the way a reviewer would. Refuses absolute paths,
/// `..`, symlink escapes, `.git/` and the forbidden directories, locations outside the scope,
/// missing files, directories, lines out of range, a concept that names a file, and quoted
/// `evidence` that is not in the lines around the location.
pub fn gate2_with(root: &Path, location: &str, evidence: Option<&str>, rules: &Gate2Rules) -> Gate2 {
    let fl = match classify_location(location) {
        Location::FileLine(fl) => fl,
        Location::Concept => {
            if let Some(file) = names_a_file(root, location) {
                return Gate2::Refused(format!(
                    "location `{location}` names the file `{file}`: a file location needs PATH:LINE"
                ));
            }
            return Gate2::Concept;
        }
        Location::Malformed(reason) => return Gate2::Refused(format!("location `{location}` refused: {reason}")),
    };
    let r = match resolve(root, &fl) {
        Ok(r) => r,
        Err(e) => return Gate2::Refused(e),
    };
    if r.rel.split('/').any(|c| c == ".git") {
        return Gate2::Refused(format!("location `{location}` is inside .git: git's own files are not evidence"));
    }
    if let Some(dir) = rules.forbidden.iter().find(|d| r.real.starts_with(d)) {
        return Gate2::Refused(format!(
            "location `{location}` is inside {}: work's own state is not evidence",
            dir.file_name().map(|n| n.to_string_lossy().into_owned()).unwrap_or_default()
        ));
    }
    if !rules.scope.is_empty() && !rules.scope.iter().any(|sc| r.rel == *sc || r.rel.starts_with(&format!("{sc}/"))) {
        return Gate2::Refused(format!("location `{location}` is outside the scope ({})", rules.scope.join(", ")));
    }
    if fl.line == 0 {
        return Gate2::Refused("line 0 does not exist (lines start at 1)".into());
    }
    // Opened first, then checked: no symlink followed (the path is already resolved to its
    // in-repo target), a regular file only, capped. A path swapped between the resolution and
    // the read cannot redirect it: the no-follow open refuses the symlink.
    let text = match work_runtime::fsx::read_confined_prefix(root, &r.rel, READ_CAP) {
        Ok((bytes, _)) => String::from_utf8_lossy(&bytes).into_owned(),
        Err(e) if e.is_not_found() => return Gate2::Refused(format!("no file `{}` in the repository", fl.path)),
        Err(e @ work_runtime::fsx::FsError::NotRegular { .. }) => {
            return Gate2::Refused(format!("no file `{}` in the repository: {e}", fl.path));
        }
        Err(e) => return Gate2::Refused(format!("location refused: {e}")),
    };
    let lines: Vec<&str> = text.lines().collect();
    let last = fl.end.unwrap_or(fl.line).max(fl.line);
    if last as usize > lines.len() {
        return Gate2::Refused(format!(
            "line {last} is past the end of `{}` ({} line{})",
            fl.path,
            lines.len(),
            if lines.len() == 1 { "" } else { "s" }
        ));
    }
    if let Some(ev) = evidence
        && let Err(why) = crate::locate::check_evidence(&lines, fl.line as usize, last as usize, ev)
    {
        return Gate2::Refused(format!("location `{location}`: {why}"));
    }
    let line_text: String = lines[fl.line as usize - 1].trim().chars().take(300).collect();
    Gate2::Read { source: format!("{}:{}", r.rel, fl.line), text: line_text }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn file_lines_parse() {
        let fl = parse_file_line("./src/a.rs:12").expect("parses");
        assert_eq!((fl.path.as_str(), fl.line), ("src/a.rs", 12));
        let fl = parse_file_line("src/a b.rs:3:  let x = 1;").expect("parses");
        assert_eq!(fl.text.as_deref(), Some("  let x = 1;"));
        assert_eq!(parse_file_line("src/a.rs:3-9").and_then(|f| f.end), Some(9));
        assert_eq!(parse_file_line("C:\\x\\y.rs:4").map(|f| f.path), Some("C:\\x\\y.rs".into()));
        assert_eq!(parse_file_line("/etc/passwd:1").map(|f| f.path), Some("/etc/passwd".into()));
        assert!(parse_file_line("the job queue").is_none());
        assert!(parse_file_line("retry policy: 3 tries").is_none());
        assert!(parse_file_line("src/a.rs").is_none());
        for bad in [
            "/etc/passwd:18446744073709551616",
            "../../etc/passwd:1-",
            "/etc/passwd:1,2",
            "src/a.rs:3-5:foo",
            "src/a.rs",
            "/etc/passwd",
            "../x",
        ] {
            assert!(matches!(classify_location(bad), Location::Malformed(_)), "{bad}");
        }
        for concept in ["the job queue", "retry policy: 3 tries", "job-state-machine", "Section 3: 12 rules"] {
            assert_eq!(classify_location(concept), Location::Concept, "{concept}");
        }
    }

    #[test]
    fn gate2_rereads_and_refuses() {
        let dir = tempfile::tempdir().expect("tempdir");
        let root = dir.path();
        std::fs::write(root.join("a.txt"), "one\n  two  \n").expect("write");
        assert_eq!(gate2(root, "a.txt:2"), Gate2::Read { source: "a.txt:2".into(), text: "two".into() });
        assert!(matches!(gate2(root, "a.txt:3"), Gate2::Refused(r) if r.contains("past the end")));
        assert!(matches!(gate2(root, "a.txt:0"), Gate2::Refused(_)));
        assert!(matches!(gate2(root, "b.txt:1"), Gate2::Refused(r) if r.contains("no file")));
        assert!(matches!(gate2(root, "../a.txt:1"), Gate2::Refused(r) if r.contains("refused")));
        assert!(matches!(gate2(root, "/etc/passwd:1"), Gate2::Refused(r) if r.contains("absolute")));
        assert_eq!(gate2(root, "a concept"), Gate2::Concept);
    }

    #[test]
    fn a_location_glued_to_a_file_name_names_the_file_and_is_never_a_concept() {
        let dir = tempfile::tempdir().expect("tempdir");
        let root = dir.path();
        std::fs::write(root.join("a.py"), "one\n").expect("write");
        for glued in ["a.py@99", "a.py~99", "a.py→line 99", "a.py#line99", "see a.py@L9"] {
            assert!(matches!(gate2(root, glued), Gate2::Refused(r) if r.contains("names the file `a.py`")), "{glued}");
        }
        for concept in ["the a-py convention", "retry policy", "a.pyc-free build"] {
            assert_eq!(gate2(root, concept), Gate2::Concept, "{concept}");
        }
    }
}
