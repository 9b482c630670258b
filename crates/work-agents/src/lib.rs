//! Agent backends: each turns a `work.dispatch.v1` request into a JSON document.
//!
//! Backends know nothing of workflows; the runtime's [`work_runtime::dispatch::Dispatcher`]
//! validates what they return. Every process is started through the runtime's spawner.
//!
//! - [`command`]: any program speaking the command protocol (CONTRACTS §2.1).

pub mod command;

use std::path::Path;
use std::sync::Arc;
use work_config::{AgentSpec, ResolvedRole};
use work_runtime::dispatch::Agent;

/// Why a backend could not be built for a role.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum BuildError {
    /// The backend is not available in this build.
    #[error("use agent `{0}`: this backend is not available yet")]
    Unsupported(String),
    /// The backend cannot run here (CLI missing, key absent).
    #[error("use agent `{spec}`: {reason}")]
    Unusable {
        /// The spec.
        spec: String,
        /// Why.
        reason: String,
    },
}

/// Builds the backend for a resolved role, rooted at the repository root.
pub fn build(role: &ResolvedRole, root: &Path) -> Result<Arc<dyn Agent>, BuildError> {
    match &role.spec {
        AgentSpec::Command(argv) => Ok(Arc::new(command::CommandAgent::new(argv.clone(), root))),
        other => Err(BuildError::Unsupported(describe_spec(other))),
    }
}

/// The SPEC string for a parsed spec.
pub fn describe_spec(spec: &AgentSpec) -> String {
    match spec {
        AgentSpec::Command(argv) => format!("command:{}", argv.join(" ")),
        AgentSpec::Claude(m) => m.as_ref().map_or("claude".into(), |m| format!("claude:{m}")),
        AgentSpec::Codex(m) => m.as_ref().map_or("codex".into(), |m| format!("codex:{m}")),
        AgentSpec::OpenAi(m) => format!("openai:{m}"),
        AgentSpec::Anthropic(m) => format!("anthropic:{m}"),
        AgentSpec::Named(n) => n.clone(),
    }
}
