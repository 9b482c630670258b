//! The worker's side: pull requests from the shared consumer, run each with this machine's
//! own backends in its own checkout, publish the answer, then acknowledge the request.
//!
//! A request is handed back (refused, negatively acknowledged so another worker may take it)
//! when its repository or commit is not the one checked out here, when the checkout is not
//! usable (changed tracked files), or when it asks for a write role and the worker was not
//! started to run them. A request that carries the coordinator's change (a reviewer's) runs in
//! a scratch worktree at its commit with the change replayed instead (refused when the commit
//! is missing or the change does not replay to its tree); the agent must leave that tree as it
//! found it, or its answer is replaced by a failure. While an agent runs, the worker tells JetStream it is in progress, so
//! the short redelivery wait only elapses for a worker that died or stopped.

use crate::QueueError;
use crate::stream::{self, QueueUrl, Redelivery};
use crate::wire::{self, AnswerOutcome, Change, Notice, QUEUE_PROTOCOL, QueueAnswer, QueueRequest, RepoRef};
use async_nats::jetstream::{self, AckKind};
use futures_util::StreamExt;
use serde::{Deserialize, Serialize};
use std::path::PathBuf;
use std::sync::{Arc, Mutex};
use std::time::Duration;
use work_runtime::dispatch::{Access, Agent, AgentError, InvokeOptions};
use work_runtime::redact::Redactor;

/// What the worker needs from the machine it runs on (the CLI provides it: config, git).
pub trait Backends: Send + Sync {
    /// The backend for `role`, configured on this machine, working in `cwd` (the checkout's
    /// root when `None`, else a scratch worktree).
    fn agent(&self, role: &str, cwd: Option<&str>) -> Result<Arc<dyn Agent>, String>;
    /// The checkout as it is now; an error when it cannot serve (tracked files changed).
    fn checkout(&self) -> Result<RepoRef, String>;
    /// The checkout's root, absolute.
    fn root(&self) -> String;
    /// A scratch worktree at commit `head` with `change` replayed (its result checked against
    /// the change's tree); an error (one line) when it cannot be made. Blocking.
    fn scratch(&self, head: &str, change: &Change) -> Result<Box<dyn ScratchTree>, String>;
}

/// A scratch worktree a request with a change runs in; dropping it removes it (blocking).
pub trait ScratchTree: Send + Sync {
    /// Its root, absolute.
    fn root(&self) -> String;
    /// Whether it is still exactly what was made (nothing written, removed or committed); the
    /// error says what changed. Blocking.
    fn unchanged(&self) -> Result<(), String>;
}

/// How a worker runs.
#[derive(Debug, Clone)]
pub struct WorkerOptions {
    /// The worker's name (in answers and its status file).
    pub name: String,
    /// Run roles that may write (refused otherwise).
    pub allow_write_roles: bool,
    /// Requests run at once.
    pub concurrency: usize,
    /// The shared consumer's redelivery (used when this worker creates it).
    pub redelivery: Redelivery,
    /// Where the status is kept (`work worker status` reads it).
    pub status_path: Option<PathBuf>,
    /// This machine's secrets, kept out of every answer.
    pub redactor: Redactor,
}

/// A worker's state, as `work worker status` shows it.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct WorkerStatus {
    /// The worker's name.
    pub name: String,
    /// Its process id.
    pub pid: u32,
    /// The queue it pulls from.
    pub queue: String,
    /// Its checkout.
    pub root: String,
    /// The repository and commit checked out when it last looked.
    pub repository: Option<RepoRef>,
    /// Whether it runs write roles.
    pub allow_write_roles: bool,
    /// Requests it runs at once.
    pub concurrency: usize,
    /// Dispatch ids running now.
    pub running: Vec<String>,
    /// Requests answered (a failed agent is an answer too).
    pub answered: u64,
    /// Of those, how many failed.
    pub failed: u64,
    /// Requests handed back.
    pub refused: u64,
    /// The last refusal.
    pub last_refusal: Option<String>,
}

struct Worker {
    js: jetstream::Context,
    backends: Arc<dyn Backends>,
    opts: WorkerOptions,
    status: Mutex<WorkerStatus>,
}

/// Runs a worker until the process is stopped. Errors only when the queue cannot be reached
/// or set up at the start.
pub async fn run(url: &QueueUrl, backends: Arc<dyn Backends>, opts: WorkerOptions) -> Result<(), QueueError> {
    let (_client, js) = url.connect(&format!("work-worker-{}", opts.name)).await?;
    stream::ensure_streams(&js).await?;
    let consumer = stream::worker_consumer(&js, opts.redelivery).await?;
    let status = WorkerStatus {
        name: opts.name.clone(),
        pid: std::process::id(),
        queue: url.servers().join(","),
        root: backends.root(),
        repository: backends.checkout().ok(),
        allow_write_roles: opts.allow_write_roles,
        concurrency: opts.concurrency.max(1),
        ..Default::default()
    };
    let slots = Arc::new(tokio::sync::Semaphore::new(status.concurrency));
    let worker = Arc::new(Worker { js, backends, opts, status: Mutex::new(status) });
    worker.save();
    loop {
        let Ok(permit) = slots.clone().acquire_owned().await else { return Ok(()) };
        let batch = consumer.fetch().max_messages(1).expires(Duration::from_secs(1)).messages().await;
        let Ok(mut batch) = batch else {
            tokio::time::sleep(Duration::from_millis(500)).await;
            continue;
        };
        let mut permit = Some(permit);
        while let Some(m) = batch.next().await {
            let Ok(m) = m else { continue };
            let me = worker.clone();
            let held = permit.take();
            tokio::spawn(async move {
                me.handle(m).await;
                drop(held);
            });
        }
    }
}

impl Worker {
    fn save(&self) {
        self.update(|_| {});
    }

    /// Changes the status and writes it, under one lock: two requests ending at once never
    /// leave the older of their two states in the file.
    fn update(&self, f: impl FnOnce(&mut WorkerStatus)) {
        let mut status = self.status.lock().unwrap_or_else(|p| p.into_inner());
        f(&mut status);
        let Some(path) = &self.opts.status_path else { return };
        if let Err(e) = work_runtime::fsx::write_json_atomic(path, &*status) {
            eprintln!("warning: failed to write the worker status {}: {e}", path.display());
        }
    }

    /// Publishes a notice to the answer stream (retried with the same message id, so a retry
    /// after a lost acknowledgement stores nothing twice). False when the stream never took it.
    async fn notify(&self, q: &QueueRequest, notice: &Notice, id: String) -> bool {
        let Ok(payload) = serde_json::to_vec(notice) else { return false };
        let subject = wire::notice_subject(&q.namespace, &q.queue_id, notice.kind());
        for attempt in 0..16u64 {
            if attempt > 0 {
                tokio::time::sleep(Duration::from_millis((250 * attempt).min(1000))).await;
            }
            let msg = jetstream::message::PublishMessage::build().payload(payload.clone().into()).message_id(&id);
            if let Ok(ack) = self.js.send_publish(subject.clone(), msg).await
                && ack.await.is_ok()
            {
                return true;
            }
        }
        eprintln!("warning: worker {}: failed to publish a notice for {}", self.opts.name, q.queue_id);
        false
    }

    /// Whether the answer stream holds an answer to `q` already. While the stream cannot be
    /// asked (its leader lost with a node) it is asked again for a while, so that a request
    /// redelivered after its worker answered is not run twice.
    async fn answered(&self, q: &QueueRequest) -> bool {
        for attempt in 0..20u64 {
            match stream::first_answer(&self.js, &q.namespace, &q.queue_id).await {
                Ok(found) => return found.is_some(),
                Err(_) => tokio::time::sleep(Duration::from_millis((100 * (attempt + 1)).min(500))).await,
            }
        }
        false
    }

    /// Acknowledges a request, retried while the consumer's leader moves (a lost node); the
    /// request stays this worker's meanwhile (progress is reported until it returns).
    async fn ack(&self, m: &jetstream::Message) {
        for attempt in 0..20u64 {
            if m.double_ack().await.is_ok() {
                return;
            }
            tokio::time::sleep(Duration::from_millis((100 * (attempt + 1)).min(500))).await;
        }
    }

    /// Why this worker cannot run `q`, if it cannot.
    async fn refusal(&self, q: &QueueRequest) -> Option<String> {
        if q.protocol != QUEUE_PROTOCOL {
            return Some(format!("unknown protocol `{}`", q.protocol));
        }
        if q.access != Access::ReadOnly && !self.opts.allow_write_roles {
            return Some(format!("role {} may write; this worker runs read-only roles only", q.role));
        }
        let backends = self.backends.clone();
        let here = tokio::task::spawn_blocking(move || backends.checkout()).await;
        let here = match here {
            Ok(Ok(r)) => r,
            Ok(Err(why)) => return Some(format!("its checkout cannot serve: {why}")),
            Err(e) => return Some(format!("its checkout could not be read: {e}")),
        };
        self.update(|s| s.repository = Some(here.clone()));
        if here.id != q.repository.id {
            return Some(format!("it has repository {}, not {}", here.id, q.repository.id));
        }
        if !q.repository.checkout.is_empty() && here.checkout == q.repository.checkout {
            return Some(
                "it runs in the coordinator's own checkout (its state and scratch trees would change the tree the \
                 coordinator judges): start the worker in a clone (`git clone`)"
                    .into(),
            );
        }
        // A request with a change runs in a scratch worktree at its commit: the checkout's own
        // HEAD does not matter.
        if q.change.is_none() && here.head != q.repository.head {
            return Some(format!("it has commit {} checked out, not {}", here.head, q.repository.head));
        }
        None
    }

    /// Handles one request, telling JetStream it is in progress from the moment it arrived
    /// (checking the checkout can take a while on a loaded machine) until it is acknowledged.
    async fn handle(&self, m: jetstream::Message) {
        let tick = (self.opts.redelivery.ack_wait / 3).max(Duration::from_millis(100));
        let work = self.process(&m);
        tokio::pin!(work);
        loop {
            tokio::select! {
                () = &mut work => return,
                () = tokio::time::sleep(tick) => { let _ = m.ack_with(AckKind::Progress).await; }
            }
        }
    }

    async fn process(&self, m: &jetstream::Message) {
        let delivery = m.info().map(|i| i.delivered).unwrap_or(1).max(1) as u64;
        let Ok(q) = serde_json::from_slice::<QueueRequest>(&m.payload) else {
            // Not a request at all: nobody can run it, and no coordinator waits for it by name.
            let _ = m.ack_with(AckKind::Term).await;
            return;
        };
        if delivery > 1 && self.answered(&q).await {
            // Answered already (its worker was lost before it acknowledged): run nothing twice.
            self.ack(m).await;
            return;
        }
        if let Some(reason) = self.refusal(&q).await {
            return self.refuse(m, &q, delivery, reason).await;
        }
        let scratch = match self.scratch(&q).await {
            Ok(s) => s,
            Err(reason) => return self.refuse(m, &q, delivery, reason).await,
        };
        self.update(|s| s.running.push(q.dispatch_id.clone()));
        let started = Notice::Started { queue_id: q.queue_id.clone(), worker: self.opts.name.clone(), delivery };
        // The pickup is told while the agent already runs (its deadline starts now either way).
        let told = self.notify(&q, &started, format!("{}.started.{delivery}", q.queue_id));
        let ((), answer) = tokio::join!(
            async {
                told.await;
            },
            self.run_agent(&q, delivery, scratch.as_deref())
        );
        if let Some(s) = scratch {
            let _ = tokio::task::spawn_blocking(move || drop(s)).await;
        }
        let failed = !matches!(answer.outcome, AnswerOutcome::Ok { .. });
        // The answer first, then the acknowledgement: a worker lost between the two leaves a
        // redelivery whose second answer the stream (same message id) and the coordinator (the
        // stream's first answer is the answer) both drop. An answer the stream never took is
        // not acknowledged: the request goes to a worker again rather than be lost.
        let stored = self.notify(&q, &Notice::Answer(answer), format!("{}.answer", q.queue_id)).await;
        if stored {
            self.ack(m).await;
        } else {
            let _ = m.ack_with(AckKind::Nak(None)).await;
        }
        self.update(|s| {
            s.running.retain(|d| d != &q.dispatch_id);
            s.answered += u64::from(stored);
            s.failed += u64::from(stored && failed);
        });
    }

    /// Hands `q` back: another worker may take it.
    async fn refuse(&self, m: &jetstream::Message, q: &QueueRequest, delivery: u64, reason: String) {
        self.update(|s| {
            s.refused += 1;
            s.last_refusal = Some(reason.clone());
        });
        let worker = self.opts.name.clone();
        let id = format!("{}.refused.{worker}.{delivery}", q.queue_id);
        self.notify(q, &Notice::Refused { queue_id: q.queue_id.clone(), worker, reason }, id).await;
        let _ = m.ack_with(AckKind::Nak(Some(Duration::from_millis(500)))).await;
    }

    /// The scratch worktree `q` runs in, when it carries a change.
    async fn scratch(&self, q: &QueueRequest) -> Result<Option<Box<dyn ScratchTree>>, String> {
        let Some(change) = q.change.clone() else { return Ok(None) };
        let (backends, head) = (self.backends.clone(), q.repository.head.clone());
        match tokio::task::spawn_blocking(move || backends.scratch(&head, &change)).await {
            Ok(Ok(s)) => Ok(Some(s)),
            Ok(Err(why)) => Err(format!("its scratch worktree could not be made: {why}")),
            Err(e) => Err(format!("its scratch worktree could not be made: {e}")),
        }
    }

    /// Runs `q`'s agent: in the scratch worktree when there is one (which it must leave as it
    /// found it: its answer is replaced by a failure otherwise), else in the checkout.
    async fn run_agent(&self, q: &QueueRequest, delivery: u64, scratch: Option<&dyn ScratchTree>) -> QueueAnswer {
        let mut a = self.run_agent_in(q, delivery, scratch.map(|s| s.root())).await;
        if let Some(s) = scratch
            && let Err(why) = tokio::task::block_in_place(|| s.unchanged())
        {
            let reason = format!(
                "read-only violated on worker {}: the {} changed its scratch worktree ({why}); its answer is not used",
                self.opts.name, q.role
            );
            a.outcome =
                AnswerOutcome::Failed { reason: self.opts.redactor.redact(&reason).into_owned(), raw: String::new() };
        }
        a
    }

    async fn run_agent_in(&self, q: &QueueRequest, delivery: u64, cwd: Option<String>) -> QueueAnswer {
        let r = &self.opts.redactor;
        let answer = |outcome, usage| QueueAnswer {
            queue_id: q.queue_id.clone(),
            worker: self.opts.name.clone(),
            delivery,
            outcome,
            usage,
        };
        let agent = match self.backends.agent(&q.role, cwd.as_deref()) {
            Ok(a) => a,
            Err(why) => {
                let reason = r.redact(&format!("no backend for role {}: {why}", q.role)).into_owned();
                return answer(AnswerOutcome::Failed { reason, raw: String::new() }, Default::default());
            }
        };
        let request = q.to_dispatch(&cwd.unwrap_or_else(|| self.backends.root()));
        let options = InvokeOptions { timeout: Duration::from_millis(q.timeout_ms.max(1)) };
        let result = agent.invoke(&request, options).await;
        let text = |s: &str| r.redact(s).into_owned();
        match result {
            Ok(reply) => answer(
                AnswerOutcome::Ok { document: r.redact_json(&reply.document), raw: text(&reply.raw) },
                reply.usage,
            ),
            Err(AgentError::Malformed { reason, raw, usage }) => {
                answer(AnswerOutcome::Malformed { reason: text(&reason), raw: text(&raw) }, usage)
            }
            Err(AgentError::Failed { reason, raw, usage }) => {
                answer(AnswerOutcome::Failed { reason: text(&reason), raw: text(&raw) }, usage)
            }
        }
    }
}
