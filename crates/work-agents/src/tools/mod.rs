//! The tools the HTTP backends (`openai:`, `anthropic:`) give a model, and the engine-side
//! agent loop that runs them ([`turns`]).
//!
//! A model asks for a tool through its API's function calling; the engine runs the call here,
//! in the repository, and sends the result back on the next turn. Every tool is confined to
//! the repository root:
//!
//! - `read_file` (a path, an optional line range): read through
//!   [`work_runtime::fsx::read_confined`] (no symlink followed, regular files only, capped);
//! - `list_dir` (a directory): its entries, `.gitignore`d ones left out (the `ignore` crate);
//! - `search` (a regex, an optional directory): matching lines as `PATH:LINE: TEXT`, over the
//!   files `list_dir` would show (ripgrep's `grep-searcher` and `grep-regex`);
//! - `run_command` (a shell command): `sh -c` in the root through the runtime's spawner,
//!   with a timeout and an output cap ([`run::tool_command_spec`]); write roles only;
//! - `edit_file` (one exact, unique replacement), `write_file` (a whole file) and
//!   `apply_patch` (the `*** Begin Patch` envelope): write roles only, written through an
//!   `openat(O_NOFOLLOW)` walk from the root, never into `.git/` or the state directory.
//!
//! A read-only role (`Access::ReadOnly`) is not offered the write tools nor `run_command`; if
//! its model calls one anyway, the call is refused at the tool with an error result and the
//! refusal is recorded ([`Outcome::refused`]). Every result is capped at [`RESULT_CAP`] bytes.

mod files;
mod patch;
pub(crate) mod run;
mod search;
pub(crate) mod turns;

use serde_json::{Value, json};
use std::path::{Path, PathBuf};
use std::time::Duration;
use work_runtime::dispatch::{Access, DispatchRequest};

/// The largest tool result sent back to the model (bytes); past it the result is cut and says so.
pub const RESULT_CAP: usize = 32 * 1024;
/// The largest file `read_file` reads, `edit_file` edits or `apply_patch` patches (bytes).
pub const FILE_CAP: u64 = 8 * 1024 * 1024;
/// The turns of one dispatch when the agent sets no `max_turns`.
pub const DEFAULT_MAX_TURNS: u32 = 30;

/// The tools, by name.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Tool {
    /// Read a file or a line range.
    ReadFile,
    /// List a directory.
    ListDir,
    /// Search the repository with a regex.
    Search,
    /// Run a shell command.
    RunCommand,
    /// Replace one exact, unique string in a file.
    EditFile,
    /// Write a whole file.
    WriteFile,
    /// Apply a patch.
    ApplyPatch,
}

/// Every tool, in the order they are offered.
pub const ALL: [Tool; 7] =
    [Tool::ReadFile, Tool::ListDir, Tool::Search, Tool::RunCommand, Tool::EditFile, Tool::WriteFile, Tool::ApplyPatch];

impl Tool {
    /// The name the model calls it by.
    pub fn name(self) -> &'static str {
        match self {
            Tool::ReadFile => "read_file",
            Tool::ListDir => "list_dir",
            Tool::Search => "search",
            Tool::RunCommand => "run_command",
            Tool::EditFile => "edit_file",
            Tool::WriteFile => "write_file",
            Tool::ApplyPatch => "apply_patch",
        }
    }

    /// The tool called `name`.
    pub fn named(name: &str) -> Option<Tool> {
        ALL.into_iter().find(|t| t.name() == name)
    }

    /// True for the tools a read-only role is offered.
    pub fn read_only(self) -> bool {
        matches!(self, Tool::ReadFile | Tool::ListDir | Tool::Search)
    }

    fn description(self) -> &'static str {
        match self {
            Tool::ReadFile => {
                "Read a text file of the repository, or lines start_line..=end_line of it (1-based). \
                 Lines come back numbered as `N: text`."
            }
            Tool::ListDir => {
                "List a directory of the repository (default: the root). Entries ignored by .gitignore are \
                 left out; directories end with `/`."
            }
            Tool::Search => {
                "Search the repository's files (those .gitignore keeps) for a regular expression (Rust regex \
                 syntax). Matches come back as `PATH:LINE: TEXT`."
            }
            Tool::RunCommand => {
                "Run a shell command (sh -c) in the repository root, e.g. the tests. Returns the exit status, \
                 stdout and stderr (capped); the command is killed after its timeout."
            }
            Tool::EditFile => {
                "Replace the exact text `old` with `new` in a file. `old` must occur exactly once; include \
                 enough surrounding lines to make it unique."
            }
            Tool::WriteFile => "Write a whole file (created, or replaced), with its parent directories.",
            Tool::ApplyPatch => {
                "Apply a patch in the envelope `*** Begin Patch` … `*** End Patch`, with sections \
                 `*** Add File: PATH` (lines starting with +), `*** Delete File: PATH` and \
                 `*** Update File: PATH` (hunks after `@@`: ` ` context, `-` removed, `+` added lines)."
            }
        }
    }

    fn parameters(self) -> Value {
        let s = |d: &str| json!({"type": "string", "description": d});
        let n = |d: &str| json!({"type": "integer", "minimum": 1, "description": d});
        let (props, required): (Value, &[&str]) = match self {
            Tool::ReadFile => (
                json!({"path": s("path relative to the repository root"),
                       "start_line": n("first line to read (1-based)"), "end_line": n("last line to read")}),
                &["path"],
            ),
            Tool::ListDir => (json!({"path": s("directory relative to the repository root (default: the root)")}), &[]),
            Tool::Search => (
                json!({"pattern": s("a regular expression"),
                       "path": s("directory or file to search, relative to the root (default: the root)")}),
                &["pattern"],
            ),
            Tool::RunCommand => (
                json!({"command": s("the shell command"),
                       "timeout_secs": n("kill it after this many seconds (default 120, at most 600)")}),
                &["command"],
            ),
            Tool::EditFile => (
                json!({"path": s("path relative to the repository root"), "old": s("the exact text to replace"),
                       "new": s("its replacement")}),
                &["path", "old", "new"],
            ),
            Tool::WriteFile => (
                json!({"path": s("path relative to the repository root"), "content": s("the whole new content")}),
                &["path", "content"],
            ),
            Tool::ApplyPatch => (json!({"patch": s("the patch, from *** Begin Patch to *** End Patch")}), &["patch"]),
        };
        json!({"type": "object", "properties": props, "required": required})
    }
}

/// The tools offered to a role with `access`.
pub fn offered(access: Access) -> Vec<Tool> {
    ALL.into_iter().filter(|t| access == Access::WorkspaceWrite || t.read_only()).collect()
}

/// The tool definitions for `access` in Chat Completions' form (`tools`), as JSON text.
pub fn openai_definitions(access: Access) -> String {
    let defs: Vec<Value> = offered(access)
        .into_iter()
        .map(|t| {
            json!({"type": "function", "function": {"name": t.name(), "description": t.description(),
                "parameters": t.parameters()}})
        })
        .collect();
    Value::Array(defs).to_string()
}

/// The tool definitions for `access` in the Messages API's form (`tools`), as JSON values.
pub fn anthropic_definitions(access: Access) -> Vec<Value> {
    offered(access)
        .into_iter()
        .map(|t| json!({"name": t.name(), "description": t.description(), "input_schema": t.parameters()}))
        .collect()
}

/// What one tool call gave.
#[derive(Debug, Clone, PartialEq)]
pub struct Outcome {
    /// The result sent to the model (capped at [`RESULT_CAP`]).
    pub text: String,
    /// True when the call failed (a bad argument, a missing file, a refusal).
    pub is_error: bool,
    /// Why the call was refused by the role's access, when it was (a read-only role asking to
    /// write or run a command).
    pub refused: Option<String>,
}

impl Outcome {
    fn ok(text: String) -> Self {
        Self { text: cap(text), is_error: false, refused: None }
    }

    fn error(text: impl Into<String>) -> Self {
        Self { text: cap(format!("error: {}", text.into())), is_error: true, refused: None }
    }
}

/// Cuts `text` at [`RESULT_CAP`] bytes (on a character boundary), saying so.
pub(crate) fn cap(text: String) -> String {
    cut(text, RESULT_CAP)
}

/// Cuts `text` at `n` bytes (on a character boundary), saying so.
pub(crate) fn cut(mut text: String, n: usize) -> String {
    if text.len() <= n {
        return text;
    }
    let total = text.len();
    let mut at = n;
    while !text.is_char_boundary(at) {
        at -= 1;
    }
    text.truncate(at);
    text.push_str(&format!("\n… (cut at {n} of {total} bytes)"));
    text
}

/// Where the tools of one dispatch work.
#[derive(Debug, Clone)]
pub struct Workspace {
    /// The repository root.
    pub root: PathBuf,
    /// Directories below the root never written (`.git`, the state directory), relative.
    pub protected: Vec<String>,
}

impl Workspace {
    /// The workspace of `request`: its `cwd`, with `.git`, `.work` and the run's state
    /// directory (when it lies inside the root) protected.
    pub fn of(request: &DispatchRequest) -> Self {
        let root = PathBuf::from(&request.cwd);
        let mut protected = vec![".git".to_string(), ".work".to_string()];
        if let Some(state) = work_runtime::fsx::digests::installed_state_dir()
            && let Ok(rel) = state.strip_prefix(&root)
            && let Some(rel) = rel.to_str().filter(|r| !r.is_empty())
            && !protected.iter().any(|p| p == rel)
        {
            protected.push(rel.to_string());
        }
        Self { root, protected }
    }

    /// `path` as the model gave it, made relative to the root: an absolute path inside the
    /// root loses the root, `./` prefixes go; `""`/`.` is the root itself (`None`).
    pub(crate) fn relative(&self, path: &str) -> Result<Option<String>, String> {
        let p = path.trim();
        let p = match Path::new(p).strip_prefix(&self.root) {
            Ok(rest) => rest.to_str().unwrap_or(p).to_string(),
            Err(_) if p.starts_with('/') => return Err(format!("`{p}` is outside the repository")),
            Err(_) => p.to_string(),
        };
        let mut p = p.as_str();
        while let Some(rest) = p.strip_prefix("./") {
            p = rest;
        }
        let p = p.trim_end_matches('/');
        if p.is_empty() || p == "." {
            return Ok(None);
        }
        if p.split('/').any(|seg| seg == ".." || seg == "." || seg.is_empty()) {
            return Err(format!("`{path}` has a `.`, `..` or empty segment"));
        }
        Ok(Some(p.to_string()))
    }

    /// Why `rel` may not be written (it is in `.git/` or the state directory), or `None`.
    pub(crate) fn protected_reason(&self, rel: &str) -> Option<String> {
        self.protected
            .iter()
            .find(|p| rel == p.as_str() || rel.starts_with(&format!("{p}/")))
            .map(|p| format!("`{rel}` is inside `{p}/`, which tools never write"))
    }
}

/// Runs one call of `name` with `input` for `request` (`budget`: the time left in the dispatch).
pub async fn call(request: &DispatchRequest, ws: &Workspace, name: &str, input: &Value, budget: Duration) -> Outcome {
    let Some(tool) = Tool::named(name) else {
        let names: Vec<&str> = offered(request.access).into_iter().map(Tool::name).collect();
        return Outcome::error(format!("there is no tool `{name}`; the tools are: {}", names.join(", ")));
    };
    if request.access == Access::ReadOnly && !tool.read_only() {
        let what = if tool == Tool::RunCommand { "runs commands" } else { "writes files" };
        let target = input.get("path").or_else(|| input.get("command")).and_then(Value::as_str);
        let why = format!(
            "`{}`{} refused: it {what}, and the {} role is read-only",
            tool.name(),
            target.map(|t| format!(" on `{}`", crate::head(t, 80))).unwrap_or_default(),
            request.role
        );
        let mut o = Outcome::error(format!("{why}. Nothing was changed; answer from what you can read."));
        o.refused = Some(why);
        return o;
    }
    if !input.is_object() {
        return Outcome::error(format!("the arguments of `{name}` are not a JSON object"));
    }
    let result = match tool {
        Tool::ReadFile => files::read_file(ws, input),
        Tool::ListDir => files::list_dir(ws, input),
        Tool::Search => search::search(ws, input),
        Tool::EditFile => files::edit_file(ws, input),
        Tool::WriteFile => files::write_file(ws, input),
        Tool::ApplyPatch => patch::apply(ws, input),
        Tool::RunCommand => return run::run_command(request, input, budget).await,
    };
    match result {
        Ok(text) => Outcome::ok(text),
        Err(e) => Outcome::error(e),
    }
}

/// A string argument, or why it is missing.
pub(crate) fn arg<'a>(input: &'a Value, key: &str) -> Result<&'a str, String> {
    input.get(key).and_then(Value::as_str).ok_or_else(|| format!("the argument `{key}` (a string) is missing"))
}

/// An optional positive integer argument (a number or a numeric string).
pub(crate) fn num(input: &Value, key: &str) -> Option<u64> {
    match input.get(key)? {
        Value::Number(n) => n.as_u64().or_else(|| n.as_f64().filter(|f| *f >= 1.0).map(|f| f as u64)),
        Value::String(s) => s.trim().parse().ok(),
        _ => None,
    }
}

#[cfg(test)]
mod loop_tests;
#[cfg(test)]
mod tests;
