//! The MCP server: tools (one per workflow, plus `runs_list` and `run_show`), resources (the
//! run files), and the mapping of a child's exit code to a tool result:
//!
//! | exit | result |
//! |---|---|
//! | 0 | `structuredContent` = the `--json` document, `isError: false` |
//! | 1 | the same, `isError: false`: the run ended without success, and its document (stop reason, BLOCKED, budget) is the answer; a second text block says so |
//! | 2 | `isError: true`, the one-line reason naming the field |
//! | 3 | the document, `isError: false`, a text block "paused for a person" with the exact tool call that continues, also in `_meta["work/continue"]` |
//!
//! A call whose arguments do not fit the schema is refused (`isError: true`, naming the
//! field) before any child starts.

use crate::child::{Ended, Launcher};
use crate::gate::{Decision, Gate};
use crate::history;
use crate::resources;
use crate::tools::{Field, Kind, ToolDef, call_of_command};
use rmcp::model::{
    CallToolRequestParams, CallToolResponse, CallToolResult, ContentBlock, Implementation, ListResourcesResult,
    ListToolsResult, MetaObject, PaginatedRequestParams, ProgressNotificationParam, ReadResourceRequestParams,
    ReadResourceResponse, ReadResourceResult, Resource, ResourceContents, ServerCapabilities, ServerConfig, Tool,
};
use rmcp::service::{ElicitationMode, RequestContext};
use rmcp::{ErrorData as McpError, RoleServer, ServerHandler};
use serde_json::{Map, Value, json};
use std::sync::Arc;
use tokio_util::sync::CancellationToken;
use tokio_util::task::TaskTracker;

/// The workflow tools: (tool name, command path below `work`).
pub const WORKFLOW_TOOLS: [(&str, &[&str]); 6] = [
    ("exhaust", &["exhaust"]),
    ("until", &["until"]),
    ("implement", &["implement"]),
    ("edit", &["edit"]),
    ("ultra", &["ultra"]),
    ("loop_run", &["loop", "run"]),
];

/// Who answers a tool.
#[derive(Debug, Clone, PartialEq)]
enum Backing {
    /// A `work` child with these flags.
    Child,
    /// The server reads the event logs itself (the binary has no such command).
    RunsList,
    /// Likewise, for one run.
    RunShow,
}

#[derive(Debug, Clone)]
struct Entry {
    def: ToolDef,
    backing: Backing,
}

/// The `work mcp` server.
#[derive(Clone)]
pub struct WorkServer {
    cli: Arc<clap::Command>,
    entries: Arc<Vec<Entry>>,
    launcher: Arc<Launcher>,
    /// Fires when the server shuts down: every running child is interrupted.
    shutdown: CancellationToken,
    /// The calls still running (the server waits for their children before it exits).
    inflight: TaskTracker,
}

impl WorkServer {
    /// A server for the `work` command `cli`, starting children with `launcher`.
    pub fn new(cli: clap::Command, launcher: Launcher) -> Self {
        let mut entries: Vec<Entry> = WORKFLOW_TOOLS
            .iter()
            .filter_map(|(name, path)| ToolDef::from_command(&cli, name, path))
            .map(|def| Entry { def, backing: Backing::Child })
            .collect();
        entries.push(match ToolDef::from_command(&cli, "runs_list", &["runs", "list"]) {
            Some(def) => Entry { def, backing: Backing::Child },
            None => Entry {
                def: ToolDef {
                    name: "runs_list".into(),
                    path: vec![],
                    about: "Every run in this repository, newest first.".into(),
                    fields: vec![],
                },
                backing: Backing::RunsList,
            },
        });
        entries.push(match ToolDef::from_command(&cli, "run_show", &["show"]) {
            Some(def) => Entry { def, backing: Backing::Child },
            None => Entry {
                def: ToolDef {
                    name: "run_show".into(),
                    path: vec![],
                    about: "One run: outcome, dispatches, spend, failures, paths.".into(),
                    fields: vec![Field {
                        name: "run_id".into(),
                        long: None,
                        short: None,
                        kind: Kind::Text,
                        many: false,
                        required: true,
                        help: "The run id (from runs_list)".into(),
                    }],
                },
                backing: Backing::RunShow,
            },
        });
        Self {
            cli: Arc::new(cli),
            entries: Arc::new(entries),
            launcher: Arc::new(launcher),
            shutdown: CancellationToken::new(),
            inflight: TaskTracker::new(),
        }
    }

    /// Interrupts every running child (as SIGINT does: agents stopped, journals kept) and
    /// waits until each has ended.
    pub async fn shut_down(&self) {
        self.shutdown.cancel();
        self.inflight.close();
        self.inflight.wait().await;
    }

    /// The tools as MCP lists them.
    pub fn tools(&self) -> Vec<Tool> {
        self.entries
            .iter()
            .map(|e| {
                let about = if e.backing == Backing::Child && !e.def.path.is_empty() {
                    let about = e.def.about.trim_end_matches('.');
                    format!("{about}. Runs `work {} --json`.", e.def.path.join(" "))
                } else {
                    e.def.about.clone()
                };
                Tool::new(e.def.name.clone(), about, Arc::new(e.def.input_schema()))
                    .annotate(annotations(&e.def.name))
                    .with_raw_output_schema(Arc::new(output_schema(&e.def.name)))
            })
            .collect()
    }

    fn defs(&self) -> Vec<ToolDef> {
        self.entries.iter().map(|e| e.def.clone()).collect()
    }

    async fn call(&self, req: CallToolRequestParams, ctx: RequestContext<RoleServer>) -> CallToolResult {
        let Some(entry) = self.entries.iter().find(|e| e.def.name == req.name) else {
            let names: Vec<&str> = self.entries.iter().map(|e| e.def.name.as_str()).collect();
            let hint = crate::tools::did_you_mean(&req.name, &names).map(|n| format!(" (did you mean `{n}`?)"));
            return error_text(format!("unknown tool `{}`{}", req.name, hint.unwrap_or_default()));
        };
        let args = req.arguments.clone().unwrap_or_default();
        let argv = match entry.def.argv(&args) {
            Ok(a) => a,
            Err(reason) => return error_text(reason),
        };
        let red = &self.launcher.redactor;
        match entry.backing {
            Backing::RunsList => {
                return structured(json!({"runs": red.redact_json(&json!(history::list(&self.launcher.state_dir)))}));
            }
            Backing::RunShow => {
                let id = args.get("run_id").and_then(Value::as_str).unwrap_or("");
                return match history::show(&self.launcher.state_dir, id) {
                    Some(v) => structured(red.redact_json(&v)),
                    None => error_text(format!("run_show: no run `{id}` (field `run_id`; see runs_list)")),
                };
            }
            Backing::Child => {}
        }
        let is_workflow = WORKFLOW_TOOLS.iter().any(|(name, _)| *name == entry.def.name);
        if is_workflow && let Ok(parent) = std::env::var(crate::child::NESTED_VAR) {
            return error_text(format!(
                "{}: refused: this server runs inside an agent that a `work` run started from MCP server {parent} \
                 dispatched ({} is set); a workflow here would recurse into the same loop. Give nested agents \
                 their own configuration (docs/hosts.md)",
                entry.def.name,
                crate::child::NESTED_VAR
            ));
        }
        let token = req.meta.as_ref().and_then(|m| m.get_progress_token()).or_else(|| ctx.meta.get_progress_token());
        let _running = self.inflight.token();
        // One forwarder keeps the notifications in order; `progress` only grows across the
        // runs of one call (a gate the person decides continues with another run).
        let (tx, mut rx) = tokio::sync::mpsc::unbounded_channel::<ProgressNotificationParam>();
        let peer = ctx.peer.clone();
        let forwarder = tokio::spawn(async move {
            while let Some(p) = rx.recv().await {
                let _ = peer.notify_progress(p).await;
            }
        });
        let sent = std::sync::atomic::AtomicU64::new(0);
        let progress = |message: String| {
            if let Some(token) = token.clone() {
                let n = sent.fetch_add(1, std::sync::atomic::Ordering::SeqCst) + 1;
                let msg = red.redact(&message).into_owned();
                let _ = tx.send(ProgressNotificationParam::new(token, n as f64).with_message(msg));
            }
        };
        let (mut def, mut argv) = (entry.def.clone(), argv);
        // Ok: the run ended (its result is made once every progress note is out); Err: a
        // paused result.
        let outcome = loop {
            let ended = self.run_once(&argv, &ctx, &progress).await;
            let Ended::Paused(doc) = ended else { break Ok(ended) };
            match self.ask(&doc, &ctx).await {
                Some(Decision::Continue(tool, args)) => {
                    let next = self.entries.iter().find(|e| e.def.name == tool).map(|e| e.def.clone());
                    let Some((d, a)) = next.and_then(|d| d.argv(&args).ok().map(|a| (d, a))) else {
                        break Err(self.paused(&def, doc, None));
                    };
                    progress(format!("the person decided: calling `{tool}` with {}", Value::Object(args)));
                    (def, argv) = (d, a);
                }
                Some(Decision::Undecided(note)) => break Err(self.paused(&def, doc, Some(note))),
                None => break Err(self.paused(&def, doc, None)),
            }
        };
        drop(tx);
        let _ = forwarder.await;
        match outcome {
            Ok(ended) => self.result(&def, ended, token, &ctx).await,
            Err(paused) => paused,
        }
    }

    /// One `work` child to its end, its progress lines through `progress`, interrupted when
    /// the call is cancelled or the server shuts down.
    async fn run_once(&self, argv: &[String], ctx: &RequestContext<RoleServer>, progress: &impl Fn(String)) -> Ended {
        let stop = CancellationToken::new();
        let (call_ct, server_ct, stop2) = (ctx.ct.clone(), self.shutdown.clone(), stop.clone());
        let relay = tokio::spawn(async move {
            tokio::select! {
                _ = call_ct.cancelled() => stop2.cancel(),
                _ = server_ct.cancelled() => stop2.cancel(),
            }
        });
        let ended = self.launcher.run(argv, &stop, |_, message| progress(message)).await;
        relay.abort();
        ended
    }

    /// Asks the person through the client to decide a paused run's gate, when the client
    /// can be asked (form elicitation) and the run offers an approval; `None` otherwise.
    async fn ask(&self, doc: &Value, ctx: &RequestContext<RoleServer>) -> Option<Decision> {
        if !ctx.peer.supported_elicitation_modes().contains(&ElicitationMode::Form) {
            return None;
        }
        let defs = self.defs();
        let gate = Gate::of(doc, |c| call_of_command(&self.cli, &defs, c))?;
        let question = gate.question()?;
        let answer = tokio::select! {
            a = ctx.peer.create_elicitation(question) => a,
            _ = ctx.ct.cancelled() => return Some(Decision::Undecided("the call was cancelled".into())),
            _ = self.shutdown.cancelled() => return Some(Decision::Undecided("the server is stopping".into())),
        };
        Some(match answer {
            Ok(a) => gate.decide(&a),
            Err(e) => Decision::Undecided(format!(
                "the client could not ask: {}",
                self.launcher.redactor.redact(&e.to_string())
            )),
        })
    }

    async fn result(
        &self,
        def: &ToolDef,
        ended: Ended,
        token: Option<rmcp::model::ProgressToken>,
        ctx: &RequestContext<RoleServer>,
    ) -> CallToolResult {
        // Structured content is an object: the run list is `{"runs": [...]}`, as without a child.
        let key = if def.name == "runs_list" { "runs" } else { "result" };
        let wrap = |d: Value| if d.is_object() { d } else { json!({ key: d }) };
        match ended {
            Ended::Done(d) => structured(wrap(d)),
            Ended::Unsuccessful(d) => {
                let mut r = structured(wrap(d));
                r.content.push(ContentBlock::text(format!(
                    "`work {}` ended without success (exit 1): the document says why",
                    def.path.join(" ")
                )));
                r
            }
            Ended::BadInput(reason) => error_text(def.name_fields(&reason)),
            Ended::Paused(d) => self.paused(def, wrap(d), None),
            Ended::Interrupted(line) => {
                if let Some(token) = token {
                    let msg =
                        format!("cancelled: agents stopped, the journal is kept; call `{}` again to resume", def.name);
                    let _ = ctx
                        .peer
                        .notify_progress(ProgressNotificationParam::new(token, f64::from(u32::MAX)).with_message(msg))
                        .await;
                }
                error_text(format!("cancelled: {line}"))
            }
            Ended::Failed(why) => error_text(why),
        }
    }

    /// A paused result: the document, and each `work …` command it offers as the tool call
    /// that continues.
    fn paused(&self, def: &ToolDef, doc: Value, note: Option<String>) -> CallToolResult {
        let doc = if doc.is_object() { doc } else { json!({ "result": doc }) };
        let mut commands = Vec::new();
        collect_commands("", &doc, &mut commands);
        let defs = self.defs();
        let calls: Vec<Value> = commands
            .iter()
            .filter_map(|(label, c)| {
                call_of_command(&self.cli, &defs, c).map(
                    |(tool, arguments)| json!({"label": label, "tool": tool, "arguments": arguments, "command": c}),
                )
            })
            .collect();
        let mut text = format!("`work {}` paused for a person (exit 3).", def.path.join(" "));
        if let Some(note) = note {
            text.push_str(&format!(" Asked through the client: {note}."));
        }
        for c in &calls {
            text.push_str(&format!(
                " To continue ({}), call `{}` with {}.",
                c["label"].as_str().unwrap_or(""),
                c["tool"].as_str().unwrap_or(""),
                c["arguments"]
            ));
        }
        let mut r = structured(doc);
        r.content.push(ContentBlock::text(text));
        let mut meta = Map::new();
        meta.insert("work/continue".into(), json!(calls));
        r.with_meta(Some(MetaObject::from(meta)))
    }
}

/// Every string in the document that is a `work …` command, in document order.
/// Each labelled by the key that holds it (`approve`, `resume`; the first key when several
/// hold the same command).
fn collect_commands(key: &str, v: &Value, out: &mut Vec<(String, String)>) {
    match v {
        Value::String(s) if s.starts_with("work ") && !out.iter().any(|(_, c)| c == s) => {
            out.push((key.to_string(), s.clone()))
        }
        Value::Array(a) => a.iter().for_each(|x| collect_commands(key, x, out)),
        Value::Object(o) => o.iter().for_each(|(k, x)| collect_commands(k, x, out)),
        _ => {}
    }
}

/// What a tool does to its environment, for a host deciding whether to ask first: exhaust and
/// the history tools leave the repository as it is (exhaust keeps its journal under `.work/`);
/// the other workflows edit the working tree (files changed or removed, never committed); every
/// workflow talks to agents outside (an open world), the history tools read `.work/` alone.
fn annotations(tool: &str) -> rmcp::model::ToolAnnotations {
    let a = rmcp::model::ToolAnnotations::new();
    match tool {
        "runs_list" | "run_show" => a.read_only(true).destructive(false).idempotent(true).open_world(false),
        "exhaust" => a.read_only(true).destructive(false).idempotent(true).open_world(true),
        _ => a.read_only(false).destructive(true).idempotent(false).open_world(true),
    }
}

/// The shape of a tool's structured result: always an object — the command's `--json`
/// document (its fields per command in docs/hosts.md), `{"runs": [...]}` for runs_list.
fn output_schema(tool: &str) -> serde_json::Map<String, Value> {
    let v = match tool {
        "runs_list" => json!({"type": "object", "properties": {"runs": {"type": "array", "items": {"type": "object"}}},
                              "required": ["runs"]}),
        "run_show" => json!({"type": "object", "description": "one run: its outcome, spend, failures and detail"}),
        _ => json!({"type": "object", "description": format!("the `--json` document of the command behind `{tool}`")}),
    };
    match v {
        Value::Object(m) => m,
        _ => serde_json::Map::new(),
    }
}

fn structured(doc: Value) -> CallToolResult {
    let text = serde_json::to_string_pretty(&doc).unwrap_or_default();
    let mut r = CallToolResult::structured(doc);
    r.content = vec![ContentBlock::text(text)];
    r
}

fn error_text(reason: String) -> CallToolResult {
    CallToolResult::error(vec![ContentBlock::text(reason)])
}

impl ServerHandler for WorkServer {
    fn get_info(&self) -> ServerConfig {
        let caps = ServerCapabilities::builder().enable_tools().enable_resources().build();
        let mut imp = Implementation::new("work", env!("CARGO_PKG_VERSION"));
        imp.title = Some("work: deterministic agent loops".into());
        ServerConfig::new(caps).with_server_info(imp).with_instructions(
            "Each workflow tool runs the real `work` command (same flags, snake_case) with --json and returns its \
             document. Use `exhaust` to find every instance of something, `until` to loop a worker until a check \
             passes, `implement`/`edit` for plan tasks and compiler-driven edits, `ultra` for a GOAL.toml, `loop_run` \
             for the spec→plan→code loop. A paused result names the call that continues.",
        )
    }

    async fn list_tools(
        &self,
        _request: Option<PaginatedRequestParams>,
        _context: RequestContext<RoleServer>,
    ) -> Result<ListToolsResult, McpError> {
        Ok(ListToolsResult::with_all_items(self.tools()))
    }

    async fn call_tool(
        &self,
        request: CallToolRequestParams,
        context: RequestContext<RoleServer>,
    ) -> Result<CallToolResponse, McpError> {
        Ok(CallToolResponse::from(self.call(request, context).await))
    }

    async fn list_resources(
        &self,
        _request: Option<PaginatedRequestParams>,
        _context: RequestContext<RoleServer>,
    ) -> Result<ListResourcesResult, McpError> {
        let items = resources::list(&self.launcher.state_dir)
            .into_iter()
            .map(|e| {
                Resource::new(format!("{}{}", resources::PREFIX, e.rel), e.rel.clone())
                    .with_mime_type(e.mime)
                    .with_size(e.size)
            })
            .collect();
        Ok(ListResourcesResult::with_all_items(items))
    }

    async fn read_resource(
        &self,
        request: ReadResourceRequestParams,
        _context: RequestContext<RoleServer>,
    ) -> Result<ReadResourceResponse, McpError> {
        let not_found = |e: resources::ReadError| McpError::resource_not_found(e.to_string(), None);
        let (path, mime) = resources::resolve(&self.launcher.state_dir, &request.uri).map_err(not_found)?;
        let text = std::fs::read_to_string(&path)
            .map_err(|source| not_found(resources::ReadError::Io { uri: request.uri.clone(), source }))?;
        let text = self.launcher.redactor.redact(&text).into_owned();
        let contents = ResourceContents::text(text, request.uri.clone()).with_mime_type(mime);
        Ok(ReadResourceResponse::from(ReadResourceResult::new(vec![contents])))
    }
}
