//! What Codex keeps outside its stdout: the session rollout file (the billed token counts,
//! also for turns that failed or were killed), the provider's key and stored login (to scrub
//! from what a server's error quotes), and the `--output-schema` temporary files.

use serde_json::Value;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};
use work_runtime::budget::Usage;
use work_runtime::dispatch::{AgentError, AgentReply, DispatchRequest};

static SCHEMA_FILES: AtomicU64 = AtomicU64::new(0);

/// The prefix of the schema files, followed by the writing process's id.
const SCHEMA_PREFIX: &str = "work-codex-schema-";

/// `$CODEX_HOME`, else `~/.codex`.
pub(crate) fn codex_home() -> Option<PathBuf> {
    std::env::var_os("CODEX_HOME")
        .filter(|v| !v.is_empty())
        .map(PathBuf::from)
        .or_else(|| std::env::var_os("HOME").map(|h| PathBuf::from(h).join(".codex")))
}

/// The thread id of a `codex exec --json` stream (its `thread.started` event).
pub(crate) fn thread_id(stdout: &str) -> Option<String> {
    stdout.lines().find_map(|l| {
        let v: Value = serde_json::from_str(l.trim()).ok()?;
        (v.get("type").and_then(Value::as_str) == Some("thread.started"))
            .then(|| v.get("thread_id").and_then(Value::as_str).map(str::to_string))
            .flatten()
    })
}

fn find_rollout(dir: &Path, suffix: &str, depth: u32) -> Option<PathBuf> {
    for e in std::fs::read_dir(dir).ok()?.flatten() {
        let p = e.path();
        if p.is_dir() && depth < 4 {
            if let Some(f) = find_rollout(&p, suffix, depth + 1) {
                return Some(f);
            }
        } else if p.file_name().and_then(|n| n.to_str()).is_some_and(|n| n.ends_with(suffix)) {
            return Some(p);
        }
    }
    None
}

/// The session's billed total from its rollout file (`sessions/…/rollout-…-THREAD.jsonl`):
/// the last `token_count` event's `total_token_usage`.
pub(crate) fn rollout_usage(thread: &str, home: Option<&Path>) -> Option<Usage> {
    let sessions = home.map(Path::to_path_buf).or_else(codex_home)?.join("sessions");
    let file = find_rollout(&sessions, &format!("-{thread}.jsonl"), 0)?;
    usage_from_rollout(&std::fs::read_to_string(file).ok()?)
}

/// The last `token_count` total in a rollout file's text.
pub(crate) fn usage_from_rollout(text: &str) -> Option<Usage> {
    text.lines().rev().find_map(|l| {
        let v: Value = serde_json::from_str(l.trim()).ok()?;
        let p = v.get("payload")?;
        if p.get("type").and_then(Value::as_str) != Some("token_count") {
            return None;
        }
        let t = p.pointer("/info/total_token_usage")?;
        let n = |k: &str| t.get(k).and_then(Value::as_u64).unwrap_or(0);
        Some(Usage { input_tokens: n("input_tokens"), output_tokens: n("output_tokens"), cost_usd: 0.0 })
    })
}

/// Raises the usage of a result to at least `floor` (the rollout's billed total), priced.
pub(crate) fn raise_usage(
    result: &mut Result<AgentReply, AgentError>,
    floor: Usage,
    prices: (Option<f64>, Option<f64>),
) {
    let usage = match result {
        Ok(r) => &mut r.usage,
        Err(AgentError::Failed { usage, .. } | AgentError::Malformed { usage, .. }) => usage,
    };
    if floor.total_tokens() > usage.total_tokens() {
        *usage = floor;
        usage.cost_usd = crate::priced(usage, prices.0, prices.1);
    }
}

/// The secrets Codex may send that no key-like variable names: the value of every provider's
/// `env_key` in `config.toml`, and the stored login's key and tokens in `auth.json`.
pub(crate) fn secrets() -> Vec<String> {
    let Some(home) = codex_home() else { return vec![] };
    let mut out = Vec::new();
    let config = std::fs::read_to_string(home.join("config.toml")).unwrap_or_default();
    for line in config.lines() {
        let Some((k, v)) = line.split_once('=') else { continue };
        if k.trim() == "env_key" {
            let var = v.trim().trim_matches('"').trim_matches('\'');
            if let Ok(value) = std::env::var(var) {
                out.push(value);
            }
        }
    }
    if let Ok(auth) = std::fs::read_to_string(home.join("auth.json"))
        && let Ok(v) = serde_json::from_str::<Value>(&auth)
    {
        for p in ["/OPENAI_API_KEY", "/tokens/access_token", "/tokens/refresh_token", "/tokens/id_token"] {
            if let Some(s) = v.pointer(p).and_then(Value::as_str) {
                out.push(s.to_string());
            }
        }
    }
    out.retain(|s| s.trim().len() >= 8);
    out
}

fn scrub_all(text: &str, secrets: &[String]) -> String {
    secrets.iter().fold(text.to_string(), |t, s| crate::http::scrub(&t, Some(s)))
}

/// The error with every secret replaced in its reason and raw output.
pub(crate) fn scrub_error(e: AgentError, secrets: &[String]) -> AgentError {
    match e {
        AgentError::Failed { reason, raw, usage } => {
            AgentError::Failed { reason: scrub_all(&reason, secrets), raw: scrub_all(&raw, secrets), usage }
        }
        AgentError::Malformed { reason, raw, usage } => {
            AgentError::Malformed { reason: scrub_all(&reason, secrets), raw: scrub_all(&raw, secrets), usage }
        }
    }
}

/// What Codex's configuration says about credentials: `Ok(None)` when the selected provider
/// needs no key, `Ok(Some(var))` when it reads its key from `var` (set), `Err(why)` when the
/// key variable is unset. `Ok(Some("login"))` means the OpenAI provider with neither
/// `OPENAI_API_KEY` nor `CODEX_API_KEY` set: only a stored login (`codex login status`) can
/// serve.
pub(crate) fn credential_source() -> Result<Option<String>, String> {
    let set = |v: &str| std::env::var(v).is_ok_and(|x| !x.trim().is_empty());
    let config: toml::Table = codex_home()
        .and_then(|h| std::fs::read_to_string(h.join("config.toml")).ok())
        .and_then(|t| t.parse().ok())
        .unwrap_or_default();
    let provider = config.get("model_provider").and_then(|p| p.as_str()).unwrap_or("openai").to_string();
    if provider != "openai" {
        let env_key = config
            .get("model_providers")
            .and_then(|p| p.get(&provider))
            .and_then(|p| p.get("env_key"))
            .and_then(|k| k.as_str());
        return match env_key {
            None => Ok(None),
            Some(var) if set(var) => Ok(Some(var.to_string())),
            Some(var) => Err(format!("provider `{provider}` reads its key from `{var}`, which is not set")),
        };
    }
    for var in ["OPENAI_API_KEY", "CODEX_API_KEY"] {
        if set(var) {
            return Ok(Some(var.to_string()));
        }
    }
    Ok(Some("login".into()))
}

/// A schema written for `--output-schema`, removed when dropped (also when the dispatch is
/// cancelled) and on SIGINT/SIGTERM ([`work_runtime::scratch`]); files left by a process that
/// was killed are swept by the next one.
pub(crate) struct SchemaFile(PathBuf);

impl SchemaFile {
    /// Writes `schema` for `request`, in `dir` (a sandboxed Codex's private home, which it
    /// sees) or else the temporary directory.
    pub(crate) fn write(request: &DispatchRequest, schema: &Value, dir: Option<&Path>) -> Result<Self, String> {
        let n = SCHEMA_FILES.fetch_add(1, Ordering::SeqCst);
        let safe: String =
            request.dispatch_id.chars().map(|c| if c.is_ascii_alphanumeric() { c } else { '-' }).take(60).collect();
        let path = dir.map(Path::to_path_buf).unwrap_or_else(std::env::temp_dir).join(format!(
            "{SCHEMA_PREFIX}{}-{safe}-a{}-{n}.json",
            std::process::id(),
            request.attempt
        ));
        work_runtime::scratch::register(&path);
        if let Err(e) = work_runtime::fsx::write_json_atomic(&path, schema) {
            work_runtime::scratch::forget(&path);
            return Err(format!("write the output schema to {}: {e}", path.display()));
        }
        Ok(Self(path))
    }

    /// Where it is.
    pub(crate) fn path(&self) -> &Path {
        &self.0
    }
}

impl Drop for SchemaFile {
    fn drop(&mut self) {
        let _ = work_runtime::fsx::plain::remove_file(&self.0);
        work_runtime::scratch::forget(&self.0);
    }
}

/// Removes, once per process, the schema files of processes that no longer run (a run
/// interrupted by SIGINT or SIGKILL leaves its files behind).
pub(crate) fn sweep_stale_schema_files() {
    static SWEPT: std::sync::Once = std::sync::Once::new();
    SWEPT.call_once(|| sweep_in(&std::env::temp_dir()));
}

pub(crate) fn sweep_in(dir: &Path) {
    for e in std::fs::read_dir(dir).into_iter().flatten().flatten() {
        let name = e.file_name().to_string_lossy().into_owned();
        let Some(rest) = name.strip_prefix(SCHEMA_PREFIX) else { continue };
        let Some(pid) = rest.split('-').next().and_then(|p| p.parse::<u32>().ok()) else { continue };
        if pid != std::process::id() && !Path::new(&format!("/proc/{pid}")).exists() {
            let _ = work_runtime::fsx::plain::remove_file(e.path());
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_rollout_total_is_the_last_token_count() {
        let text = r#"{"type":"session_meta","payload":{"id":"t"}}
{"type":"event_msg","payload":{"type":"token_count","info":{"total_token_usage":{"input_tokens":100,"output_tokens":10}}}}
{"type":"event_msg","payload":{"type":"token_count","info":{"total_token_usage":{"input_tokens":250,"output_tokens":30}}}}
{"type":"event_msg","payload":{"type":"task_complete"}}"#;
        let u = usage_from_rollout(text).expect("a total");
        assert_eq!((u.input_tokens, u.output_tokens), (250, 30));
        assert!(usage_from_rollout("{}").is_none());
        let stdout = "{\"type\":\"thread.started\",\"thread_id\":\"abc\"}\n{\"type\":\"turn.started\"}\n";
        assert_eq!(thread_id(stdout).as_deref(), Some("abc"));
    }

    #[test]
    fn a_failed_attempt_is_billed_what_the_rollout_says() {
        let mut r: Result<AgentReply, AgentError> =
            Err(AgentError::Failed { reason: "timed out".into(), raw: String::new(), usage: Usage::default() });
        raise_usage(&mut r, Usage { input_tokens: 1_000_000, output_tokens: 0, cost_usd: 0.0 }, (Some(2.0), None));
        match r {
            Err(AgentError::Failed { usage, .. }) => assert_eq!((usage.input_tokens, usage.cost_usd), (1_000_000, 2.0)),
            other => panic!("{other:?}"),
        }
    }

    #[test]
    fn schema_files_of_dead_processes_are_swept_and_live_ones_kept() {
        let dir = tempfile::tempdir().expect("tempdir");
        let dead = dir.path().join(format!("{SCHEMA_PREFIX}4000000000-d1-a1-0.json"));
        let mine = dir.path().join(format!("{SCHEMA_PREFIX}{}-d1-a1-0.json", std::process::id()));
        let other = dir.path().join("unrelated.json");
        for p in [&dead, &mine, &other] {
            std::fs::write(p, "{}").expect("write");
        }
        sweep_in(dir.path());
        assert!(!dead.exists() && mine.exists() && other.exists());
    }

    #[test]
    fn secrets_are_scrubbed_from_reasons_and_raw() {
        let e = AgentError::Failed {
            reason: "401: invalid key sk-provider-secret-1".into(),
            raw: "{\"error\": \"sk-provider-secret-1\"}".into(),
            usage: Usage::default(),
        };
        match scrub_error(e, &["sk-provider-secret-1".into()]) {
            AgentError::Failed { reason, raw, .. } => {
                assert!(!reason.contains("secret") && !raw.contains("secret"), "{reason} {raw}");
            }
            other => panic!("{other:?}"),
        }
    }
}
