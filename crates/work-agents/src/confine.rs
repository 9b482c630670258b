//! How the CLI backends are confined (see `work_runtime::sandbox`): the environment each gets,
//! and, in the kernel sandbox (where `$HOME` is read-only), a private copy of the CLI's own
//! state directory for the one dispatch.
//!
//! - Claude Code gets `ANTHROPIC_*`, `CLAUDE_*`, `DISABLE_*` and the proxy variables; in the
//!   sandbox `CLAUDE_CONFIG_DIR` names a private directory holding copies of the user's
//!   `.credentials.json`, `settings.json`, `CLAUDE.md` and `~/.claude.json`.
//! - Codex gets `OPENAI_*`, `CODEX_*`, the proxy variables and every `env_key` its
//!   `config.toml` names for a model provider; in the sandbox `CODEX_HOME` names a private
//!   directory holding copies of the user's `config.toml`, `auth.json` and `AGENTS.md` (the
//!   session's rollout, written there, is read before the directory is removed).
//! - Both get the names in `[agents.NAME].env`.

use std::path::{Path, PathBuf};
use work_runtime::dispatch::{Access, DispatchRequest};
use work_runtime::sandbox::{Confine, Network, PROXY_ENV};

/// A CLI's private state directory for one dispatch (copies of the user's credentials),
/// removed when dropped and on an interruption.
#[derive(Debug)]
pub(crate) struct PrivateHome {
    dir: work_runtime::scratch::ScratchDir,
}

impl PrivateHome {
    /// A fresh directory holding copies of `files` (those that exist) from `from`, each a
    /// `(source path, name in the copy)` pair.
    fn seeded(files: &[(PathBuf, &str)]) -> std::io::Result<Self> {
        let dir = work_runtime::scratch::ScratchDir::new("work-cli-home-")?;
        for (src, name) in files {
            // Bounded: a CLI's own small files; a missing one is simply not copied.
            if std::fs::symlink_metadata(src).is_ok_and(|m| m.is_file() && m.len() <= 4 * 1024 * 1024) {
                work_runtime::fsx::plain::copy(src, dir.path().join(name))?;
            }
        }
        Ok(Self { dir })
    }

    /// The directory.
    pub(crate) fn path(&self) -> &Path {
        self.dir.path()
    }
}

/// The confinement of a CLI backend's attempt: the request's access, the host network (the
/// CLI talks to its model), the environment names it needs plus `extra`.
pub(crate) fn cli(request: &DispatchRequest, root: &Path, names: &[&str], extra: &[String]) -> Confine {
    let c = match request.access {
        Access::ReadOnly => Confine::read_only(root, Network::Host),
        Access::WorkspaceWrite => Confine::write(root, Network::Host),
    };
    c.allow_env(names.iter().chain(PROXY_ENV).map(|s| s.to_string())).allow_env(extra.iter().cloned())
}

fn home() -> Option<PathBuf> {
    std::env::var_os("HOME").filter(|h| !h.is_empty()).map(PathBuf::from)
}

fn env_dir(var: &str, default_in_home: &str) -> Option<PathBuf> {
    std::env::var_os(var)
        .filter(|v| !v.is_empty())
        .map(PathBuf::from)
        .or_else(|| home().map(|h| h.join(default_in_home)))
}

/// The variables Claude Code may get.
pub(crate) const CLAUDE_ENV: &[&str] = &["ANTHROPIC_*", "CLAUDE_*", "DISABLE_*"];

/// The user's Claude Code state directory: `$CLAUDE_CONFIG_DIR`, else `~/.claude`.
pub(crate) fn claude_user_dir() -> Option<PathBuf> {
    env_dir("CLAUDE_CONFIG_DIR", ".claude")
}

/// Claude Code's private state directory (in the kernel sandbox only).
pub(crate) fn claude_home() -> std::io::Result<Option<PrivateHome>> {
    if !work_runtime::sandbox::mode().is_kernel() {
        return Ok(None);
    }
    let mut files = Vec::new();
    if let Some(dir) = env_dir("CLAUDE_CONFIG_DIR", ".claude") {
        for name in [".credentials.json", "settings.json", "CLAUDE.md", ".claude.json"] {
            files.push((dir.join(name), name));
        }
    }
    if std::env::var_os("CLAUDE_CONFIG_DIR").is_none()
        && let Some(h) = home()
    {
        files.push((h.join(".claude.json"), ".claude.json"));
    }
    PrivateHome::seeded(&files).map(Some)
}

/// The variables Codex may get (the providers' `env_key`s come from its config).
pub(crate) const CODEX_ENV: &[&str] = &["OPENAI_*", "CODEX_*"];

/// The user's Codex home: `$CODEX_HOME`, else `~/.codex`.
pub(crate) fn codex_user_home() -> Option<PathBuf> {
    env_dir("CODEX_HOME", ".codex")
}

/// Codex's private home (in the kernel sandbox only). The copied `config.toml` loses its
/// `[projects]` table, so no repository's own `.codex/` configuration is read — unless
/// `trusted` names the repository a person opted in (`project_config = true`): Codex then trusts
/// exactly that one.
pub(crate) fn codex_home(trusted: Option<&Path>) -> std::io::Result<Option<PrivateHome>> {
    if !work_runtime::sandbox::mode().is_kernel() {
        return Ok(None);
    }
    let files: Vec<(PathBuf, &str)> = codex_user_home()
        .map(|d| ["config.toml", "auth.json", "AGENTS.md"].into_iter().map(|n| (d.join(n), n)).collect())
        .unwrap_or_default();
    let home = PrivateHome::seeded(&files)?;
    let config = home.path().join("config.toml");
    let text = std::fs::read_to_string(&config).unwrap_or_default();
    work_runtime::fsx::plain::write(&config, trusting_only(&text, trusted))?;
    Ok(Some(home))
}

/// `text` with its `[projects]` table (the trust Codex gives a project's own config) replaced
/// by one that trusts `trusted` alone, or by none. A config that does not parse is kept as it
/// is: Codex refuses it the same way it would unconfined.
fn trusting_only(text: &str, trusted: Option<&Path>) -> String {
    let Ok(mut doc) = text.parse::<toml::Table>() else { return text.to_string() };
    doc.remove("projects");
    if let Some(root) = trusted {
        let mut entry = toml::Table::new();
        entry.insert("trust_level".into(), toml::Value::String("trusted".into()));
        let mut projects = toml::Table::new();
        projects.insert(root.display().to_string(), toml::Value::Table(entry));
        doc.insert("projects".into(), toml::Value::Table(projects));
    }
    doc.to_string()
}

/// The `env_key` of every model provider in the user's Codex `config.toml` (the variable that
/// holds that provider's key): Codex needs them, nothing else does.
pub(crate) fn codex_provider_keys() -> Vec<String> {
    let Some(path) = codex_user_home().map(|d| d.join("config.toml")) else { return Vec::new() };
    let Ok(text) = work_runtime::fsx::read_user_file(&path, 1024 * 1024) else { return Vec::new() };
    provider_keys(&String::from_utf8_lossy(&text))
}

fn provider_keys(text: &str) -> Vec<String> {
    let Ok(doc) = text.parse::<toml::Table>() else { return Vec::new() };
    let Some(providers) = doc.get("model_providers").and_then(toml::Value::as_table) else { return Vec::new() };
    providers
        .values()
        .filter_map(|p| p.get("env_key").and_then(toml::Value::as_str))
        .filter(|k| !k.is_empty() && !k.contains('*'))
        .map(str::to_string)
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn codex_provider_keys_are_read_from_the_config() {
        let text = "model = \"m\"\n[model_providers.a]\nenv_key = \"A_KEY\"\n[model_providers.b]\nname = \"b\"\n";
        assert_eq!(provider_keys(text), vec!["A_KEY".to_string()]);
        assert!(provider_keys("not toml [").is_empty());
        assert!(provider_keys("[model_providers.x]\nenv_key = \"ALL*\"\n").is_empty(), "no prefix through a key");
    }

    #[test]
    fn the_private_codex_config_trusts_no_project_or_only_the_one_opted_in() {
        let text = "model = \"m\"\n[projects.\"/repo\"]\ntrust_level = \"trusted\"\n";
        let out = trusting_only(text, None);
        assert!(!out.contains("projects") && out.contains("model"), "{out}");
        let out: toml::Table = trusting_only(text, Some(Path::new("/work/r"))).parse().expect("toml");
        let projects = out["projects"].as_table().expect("projects");
        assert_eq!(projects.keys().collect::<Vec<_>>(), ["/work/r"]);
        assert_eq!(projects["/work/r"]["trust_level"].as_str(), Some("trusted"));
    }
}
