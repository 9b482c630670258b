//! Scale-out: a fan-out's dispatches over a NATS JetStream work queue.
//!
//! - [`wire`]: what travels (requests, notices, answers); never a credential.
//! - [`stream`]: the `--queue` address, the connection, the streams and the workers' consumer.
//! - [`agent`]: [`QueueAgent`], the coordinator's `work_runtime::dispatch::Agent`: the runtime
//!   and the workflows stay ignorant of the queue (journal, budgets, cap and every rule are the
//!   coordinator's, exactly as in a local run).
//! - [`worker`]: the worker loop behind `work worker`.
#![cfg_attr(test, allow(clippy::disallowed_methods, reason = "unit tests set up their fixtures directly"))]

pub mod agent;
pub mod stream;
pub mod wire;
pub mod worker;

pub use agent::QueueAgent;
pub use stream::QueueUrl;
pub use wire::RepoRef;

/// Why the queue could not be used.
#[derive(Debug, thiserror::Error)]
pub enum QueueError {
    /// The `--queue` value is not `nats://HOST:PORT[,…]`.
    #[error("use queue `{url}`: {why} (expected nats://HOST:PORT, comma-separated for several)")]
    BadUrl {
        /// As given.
        url: String,
        /// Why.
        why: String,
    },
    /// No server answered.
    #[error("connect to the queue {url}: {why}")]
    Connect {
        /// The servers.
        url: String,
        /// Why.
        why: String,
    },
    /// A stream or consumer could not be set up (JetStream not enabled?).
    #[error("set up the queue's stream {name}: {why} (is JetStream enabled on the server?)")]
    Stream {
        /// The stream.
        name: String,
        /// Why.
        why: String,
    },
}
