//! What the server answers: per-role scripts of steps, chosen by the brief.
//!
//! A [`Rule`] matches a request when its `when` text occurs in what the user sent (the brief:
//! the user turns of the conversation, not the client's own system prompt). The step a rule
//! plays is derived from the request alone: the number of tool results already in the
//! conversation, where the results of one turn's several calls ([`Step::Tools`]) count as one.
//! Once a script is played out, the server answers with a short closing text.

use serde::{Deserialize, Serialize};
use serde_json::Value;

/// One step of a script.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Step {
    /// Run a shell command (Claude Code's `Bash`, Codex's `exec_command`/`shell`).
    Bash(String),
    /// Write a whole file (Claude Code's `Write`, Codex's `apply_patch` add).
    Write {
        /// The absolute path.
        path: String,
        /// The new content.
        content: String,
    },
    /// Replace one unique string in a file (Claude Code's `Edit`, Codex's `apply_patch` update).
    Edit {
        /// The absolute path.
        path: String,
        /// The text replaced.
        old: String,
        /// Its replacement.
        new: String,
    },
    /// Start a subagent with this prompt (Claude Code's `Agent` tool; its own requests carry
    /// the prompt as their brief, so a rule can script it). Codex has no subagents: there it
    /// is plain text ending the turn.
    Subagent(String),
    /// The final answer: a `StructuredOutput` call when the client offers that tool, else the
    /// document as the assistant's text. [`LAST_TOOL_OUTPUT`] in any of its strings is replaced
    /// by the conversation's last tool result (trimmed), as a model would quote what it saw.
    Answer(Value),
    /// Plain assistant text ending the turn.
    Text(String),
    /// An HTTP error with this status and body.
    Error {
        /// The status.
        status: u16,
        /// The body.
        body: String,
    },
    /// Accept the request and never answer (until the client goes away or the server stops).
    Hang,
    /// Start the stream, then close the connection before the end.
    Cut,
    /// Call tools the client offers, by their own names, all in one turn (parallel calls):
    /// e.g. `read_file` and `search` of `work`'s own tool loop (`openai:`/`anthropic:`
    /// backends). Counts as one step.
    Tools(Vec<ToolCall>),
    /// Call a tool of an MCP server the client has configured (the host CLI runs it through
    /// its MCP client): see [`crate::hosted`] for how the offered name is found.
    Mcp {
        /// The server's name in the client's configuration (`work`).
        server: String,
        /// The tool's name on that server (`exhaust`).
        tool: String,
        /// The arguments.
        input: Value,
    },
}

/// In a [`Step::Answer`]'s strings: replaced by the conversation's last tool result.
pub const LAST_TOOL_OUTPUT: &str = "{{last tool output}}";

/// `doc` with [`LAST_TOOL_OUTPUT`] in its strings replaced by `output`.
pub fn quote_tool_output(doc: &Value, output: &str) -> Value {
    match doc {
        Value::String(s) => Value::String(s.replace(LAST_TOOL_OUTPUT, output)),
        Value::Array(a) => Value::Array(a.iter().map(|v| quote_tool_output(v, output)).collect()),
        Value::Object(o) => Value::Object(o.iter().map(|(k, v)| (k.clone(), quote_tool_output(v, output))).collect()),
        other => other.clone(),
    }
}

/// One call of a [`Step::Tools`] turn.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ToolCall {
    /// The tool's name, as the client offers it.
    pub name: String,
    /// Its arguments.
    pub input: Value,
}

impl ToolCall {
    /// A call of `name` with `input`.
    pub fn new(name: impl Into<String>, input: Value) -> Self {
        Self { name: name.into(), input }
    }
}

/// A role's script.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Rule {
    /// Text that must occur in the brief.
    pub when: String,
    /// The steps, one per model call, in order.
    pub steps: Vec<Step>,
}

impl Rule {
    /// A rule.
    pub fn new(when: impl Into<String>, steps: Vec<Step>) -> Self {
        Self { when: when.into(), steps }
    }
}

/// The whole script: rules tried in order, plus the usage reported for every answer.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Script {
    /// Rules, first match wins.
    pub rules: Vec<Rule>,
    /// Input tokens reported per answer.
    #[serde(default = "default_input")]
    pub input_tokens: u64,
    /// Output tokens reported per answer.
    #[serde(default = "default_output")]
    pub output_tokens: u64,
}

fn default_input() -> u64 {
    100
}

fn default_output() -> u64 {
    10
}

impl Script {
    /// A script of `rules` with the default usage (100 in, 10 out per answer).
    pub fn new(rules: Vec<Rule>) -> Self {
        Self { rules, input_tokens: default_input(), output_tokens: default_output() }
    }

    /// The step for a request whose brief is `brief` and that already holds `tool_results`
    /// results: the matching rule's index and the step (`None`: no rule matches, or the rule is
    /// played out).
    pub fn pick(&self, brief: &str, tool_results: usize) -> (Option<usize>, Option<Step>) {
        match self.rules.iter().position(|r| brief.contains(&r.when)) {
            Some(i) => (Some(i), self.rules[i].steps.get(tool_results).cloned()),
            None => (None, None),
        }
    }
}

/// A unified diff-like `apply_patch` envelope for a step (Codex's patch grammar).
pub fn apply_patch_text(step: &Step, read: impl Fn(&str) -> Option<String>) -> Option<String> {
    match step {
        Step::Write { path, content } => {
            let mut p = String::from("*** Begin Patch\n");
            match read(path) {
                Some(old) => {
                    p.push_str(&format!("*** Update File: {path}\n@@\n"));
                    for l in old.lines() {
                        p.push_str(&format!("-{l}\n"));
                    }
                }
                None => p.push_str(&format!("*** Add File: {path}\n")),
            }
            for l in content.lines() {
                p.push_str(&format!("+{l}\n"));
            }
            p.push_str("*** End Patch\n");
            Some(p)
        }
        Step::Edit { path, old, new } => {
            let mut p = format!("*** Begin Patch\n*** Update File: {path}\n@@\n");
            for l in old.lines() {
                p.push_str(&format!("-{l}\n"));
            }
            for l in new.lines() {
                p.push_str(&format!("+{l}\n"));
            }
            p.push_str("*** End Patch\n");
            Some(p)
        }
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_answer_quotes_the_last_tool_output_where_it_says_so() {
        let doc = serde_json::json!({"items": [{"title": format!("saw: {LAST_TOOL_OUTPUT}"), "n": 1}], "k": "as is"});
        let quoted = quote_tool_output(&doc, "abc");
        assert_eq!(quoted, serde_json::json!({"items": [{"title": "saw: abc", "n": 1}], "k": "as is"}));
    }
    use serde_json::json;

    #[test]
    fn the_step_follows_the_tool_results() {
        let s = Script::new(vec![
            Rule::new("finder", vec![Step::Bash("ls".into()), Step::Answer(json!({"items": []}))]),
            Rule::new("", vec![Step::Text("hi".into())]),
        ]);
        assert_eq!(s.pick("you are a finder", 0), (Some(0), Some(Step::Bash("ls".into()))));
        assert_eq!(s.pick("you are a finder", 1).1, Some(Step::Answer(json!({"items": []}))));
        assert_eq!(s.pick("you are a finder", 2), (Some(0), None));
        assert_eq!(s.pick("other", 0), (Some(1), Some(Step::Text("hi".into()))));
        let text = serde_json::to_string(&s).expect("serialises");
        assert_eq!(serde_json::from_str::<Script>(&text).expect("parses"), s);
    }

    #[test]
    fn patches_add_or_replace() {
        let w = Step::Write { path: "/r/a.txt".into(), content: "x\ny\n".into() };
        assert_eq!(
            apply_patch_text(&w, |_| None).as_deref(),
            Some("*** Begin Patch\n*** Add File: /r/a.txt\n+x\n+y\n*** End Patch\n")
        );
        let e = Step::Edit { path: "/r/a.txt".into(), old: "x".into(), new: "z".into() };
        assert!(apply_patch_text(&e, |_| None).unwrap_or_default().contains("@@\n-x\n+z\n"));
    }
}
