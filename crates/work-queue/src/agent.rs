//! The coordinator's side: [`QueueAgent`], an [`Agent`] that publishes each attempt to the
//! work queue and waits for a worker's answer. The runtime's dispatcher stays as it is (it
//! validates, retries a malformed answer once, charges the budget and keeps the cap, which
//! is then the number of dispatches in flight across all workers).
//!
//! Rules: the request is published with its queue id as `Nats-Msg-Id` (JetStream drops a
//! second copy); the first answer per queue id is taken and later ones are ignored; a request
//! no worker finished (its delivery limit reached, or no answer within the timeout of its last
//! pickup plus a grace, or no pickup within the timeout) is a failed dispatch — never an empty
//! answer. Answers are read from the answer stream from its start, so a coordinator resumed
//! after a crash finds the answers that arrived while it was down.

use crate::QueueError;
use crate::stream::{self, QueueUrl};
use crate::wire::{ANSWER_STREAM, AnswerOutcome, DISPATCH_STREAM, Notice, QueueAnswer, QueueRequest, RepoRef};
use async_nats::jetstream::{self, consumer};
use async_trait::async_trait;
use futures_util::StreamExt;
use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::Duration;
use tokio::sync::watch;
use tokio::time::Instant;
use work_runtime::dispatch::{Agent, AgentError, AgentReply, DispatchRequest, InvokeOptions};

/// What the coordinator knows of one queue id.
#[derive(Debug, Clone, Default)]
struct Slot {
    /// Pickups seen (a redelivery is one more).
    started: u64,
    /// The last refusal, if any.
    refused: Option<String>,
    /// The first answer.
    answer: Option<QueueAnswer>,
    /// Answers after the first (ignored).
    duplicates: u64,
    /// JetStream gave the request up (delivery limit).
    given_up: bool,
}

struct Shared {
    js: jetstream::Context,
    namespace: String,
    repository: RepoRef,
    slots: Mutex<HashMap<String, watch::Sender<Slot>>>,
    by_sequence: Mutex<HashMap<u64, String>>,
    grace: Duration,
}

impl Shared {
    fn slot(&self, id: &str) -> watch::Sender<Slot> {
        let mut slots = self.slots.lock().unwrap_or_else(|p| p.into_inner());
        slots.entry(id.to_string()).or_insert_with(|| watch::channel(Slot::default()).0).clone()
    }

    fn apply(&self, notice: Notice) {
        let slot = self.slot(notice.queue_id());
        slot.send_modify(|s| match notice {
            Notice::Started { .. } => s.started += 1,
            Notice::Refused { worker, reason, .. } => s.refused = Some(format!("{worker}: {reason}")),
            Notice::Answer(a) if s.answer.is_none() => s.answer = Some(a),
            // The same answer seen live and from the stream is one answer.
            Notice::Answer(a) if s.answer.as_ref() == Some(&a) => {}
            Notice::Answer(_) => s.duplicates += 1,
        });
    }

    fn give_up(&self, sequence: u64) {
        let id = self.by_sequence.lock().unwrap_or_else(|p| p.into_inner()).get(&sequence).cloned();
        if let Some(id) = id {
            self.slot(&id).send_modify(|s| s.given_up = true);
        }
    }
}

/// The coordinator's queue-backed agent. Cheap to clone.
#[derive(Clone)]
pub struct QueueAgent {
    shared: Arc<Shared>,
    describe: String,
}

impl std::fmt::Debug for QueueAgent {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("QueueAgent").field("queue", &self.describe).finish()
    }
}

/// The grace a worker gets past the dispatch's timeout before the coordinator gives up on it
/// (the worker kills its own agent at the timeout and reports that first).
pub const DEFAULT_GRACE: Duration = Duration::from_secs(5);

impl QueueAgent {
    /// Connects to the queue, creates the streams when missing, and starts reading the
    /// answers of `namespace` (from the stream's start) and the delivery-limit advisories.
    /// Must be called inside the tokio runtime the dispatches run on.
    /// `grace` is what a worker gets past the timeout ([`DEFAULT_GRACE`] unless a test needs less).
    pub async fn connect(
        url: &QueueUrl,
        namespace: &str,
        repository: RepoRef,
        grace: Duration,
    ) -> Result<Self, QueueError> {
        let (client, js) = url.connect("work-coordinator").await?;
        stream::ensure_streams(&js).await?;
        let advisories = client
            .subscribe(stream::max_deliveries_subject())
            .await
            .map_err(|e| QueueError::Connect { url: url.servers().join(","), why: e.to_string() })?;
        // Notices also arrive live, straight from the subject: while a node is lost and the
        // stream's consumer is re-created, answers still reach the coordinator.
        let live = client
            .subscribe(crate::wire::answer_subject(namespace, ">"))
            .await
            .map_err(|e| QueueError::Connect { url: url.servers().join(","), why: e.to_string() })?;
        let shared = Arc::new(Shared {
            js,
            namespace: namespace.into(),
            repository,
            slots: Mutex::default(),
            by_sequence: Mutex::default(),
            grace,
        });
        tokio::spawn(read_answers(shared.clone()));
        tokio::spawn(read_advisories(shared.clone(), advisories));
        tokio::spawn(read_live(shared.clone(), live));
        Ok(QueueAgent { shared, describe: format!("queue:{}", url.servers().join(",")) })
    }

    /// Answers ignored because an earlier one was taken, over every queue id so far.
    pub fn duplicates_ignored(&self) -> u64 {
        let slots = self.shared.slots.lock().unwrap_or_else(|p| p.into_inner());
        slots.values().map(|s| s.borrow().duplicates).sum()
    }

    async fn publish(&self, q: &QueueRequest) -> Result<u64, String> {
        let payload = serde_json::to_vec(q).map_err(|e| e.to_string())?;
        let subject = crate::wire::dispatch_subject(&self.shared.namespace);
        let mut last = String::new();
        // A node lost mid-publish: the same message id again is safe (JetStream deduplicates).
        for attempt in 0..16u64 {
            if attempt > 0 {
                tokio::time::sleep(Duration::from_millis((250 * attempt).min(1000))).await;
            }
            let msg =
                jetstream::message::PublishMessage::build().payload(payload.clone().into()).message_id(&q.queue_id);
            match self.shared.js.send_publish(subject.clone(), msg).await {
                Ok(ack) => match ack.await {
                    Ok(ack) => return Ok(ack.sequence),
                    Err(e) => last = e.to_string(),
                },
                Err(e) => last = e.to_string(),
            }
        }
        Err(format!("publish to the queue failed: {last}"))
    }

    async fn forget(&self, sequence: u64) {
        if let Ok(s) = self.shared.js.get_stream(DISPATCH_STREAM).await {
            let _ = s.delete_message(sequence).await;
        }
    }
}

fn failed(reason: String) -> AgentError {
    AgentError::Failed { reason, raw: String::new(), usage: Default::default() }
}

/// The worker's answer as the backend's reply: the same reasons a local backend gives (the
/// worker ran one), so a queue run's journal reads as a local run's.
fn reply(a: QueueAnswer) -> Result<AgentReply, AgentError> {
    match a.outcome {
        AnswerOutcome::Ok { document, raw } => Ok(AgentReply { document, usage: a.usage, raw }),
        AnswerOutcome::Malformed { reason, raw } => Err(AgentError::Malformed { reason, raw, usage: a.usage }),
        AnswerOutcome::Failed { reason, raw } => Err(AgentError::Failed { reason, raw, usage: a.usage }),
    }
}

#[async_trait]
impl Agent for QueueAgent {
    fn describe(&self) -> String {
        self.describe.clone()
    }

    async fn invoke(&self, request: &DispatchRequest, options: InvokeOptions) -> Result<AgentReply, AgentError> {
        let timeout_ms = u64::try_from(options.timeout.as_millis()).unwrap_or(u64::MAX);
        let q = QueueRequest::new(&self.shared.namespace, &self.shared.repository, request, timeout_ms);
        let mut rx = self.shared.slot(&q.queue_id).subscribe();
        if let Some(a) = rx.borrow_and_update().answer.clone() {
            return reply(a);
        }
        let sequence = self.publish(&q).await.map_err(failed)?;
        self.shared.by_sequence.lock().unwrap_or_else(|p| p.into_inner()).insert(sequence, q.queue_id.clone());
        let mut deadline = Instant::now() + options.timeout;
        let mut seen_started = 0;
        loop {
            let slot = rx.borrow_and_update().clone();
            if let Some(a) = slot.answer {
                return reply(a);
            }
            if slot.given_up {
                let why = slot.refused.map(|r| format!("; last refusal: {r}")).unwrap_or_default();
                return Err(failed(format!("no worker finished it: its delivery limit was reached{why}")));
            }
            if slot.started != seen_started {
                seen_started = slot.started;
                deadline = Instant::now() + options.timeout + self.shared.grace;
            }
            tokio::select! {
                changed = rx.changed() => if changed.is_err() { return Err(failed("the queue closed".into())) },
                _ = tokio::time::sleep_until(deadline) => {
                    self.forget(sequence).await;
                    let secs = options.timeout.as_secs_f64();
                    return Err(failed(match (seen_started, slot.refused) {
                        (0, Some(r)) => format!("no worker took it within {secs}s (refused by {r})"),
                        (0, None) => format!("no worker took it within {secs}s"),
                        _ => format!("timed out: no answer from the worker within {secs}s of its pickup"),
                    }));
                }
            }
        }
    }
}

/// Reads every notice of the namespace, from the stream's start, into the slots; after a lost
/// connection it goes on from the last sequence read.
async fn read_answers(shared: Arc<Shared>) {
    let filter = crate::wire::answer_subject(&shared.namespace, ">");
    let mut next = 1u64;
    loop {
        let Ok(stream) = shared.js.get_stream(ANSWER_STREAM).await else {
            tokio::time::sleep(Duration::from_millis(500)).await;
            continue;
        };
        let config = consumer::pull::OrderedConfig {
            filter_subject: filter.clone(),
            deliver_policy: consumer::DeliverPolicy::ByStartSequence { start_sequence: next },
            ..Default::default()
        };
        let messages = match stream.create_consumer(config).await {
            Ok(c) => c.messages().await,
            Err(_) => {
                tokio::time::sleep(Duration::from_millis(500)).await;
                continue;
            }
        };
        let Ok(mut messages) = messages else {
            tokio::time::sleep(Duration::from_millis(500)).await;
            continue;
        };
        while let Some(Ok(m)) = messages.next().await {
            if let Ok(info) = m.info() {
                next = info.stream_sequence + 1;
            }
            if let Ok(notice) = serde_json::from_slice::<Notice>(&m.payload) {
                shared.apply(notice);
            }
        }
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
}

/// Applies the notices published while connected (the stream has them too; the first answer
/// per queue id wins whichever way it came).
async fn read_live(shared: Arc<Shared>, mut sub: async_nats::Subscriber) {
    while let Some(m) = sub.next().await {
        if let Ok(notice) = serde_json::from_slice::<Notice>(&m.payload) {
            shared.apply(notice);
        }
    }
}

/// Marks the requests JetStream gave up on (their delivery limit reached).
async fn read_advisories(shared: Arc<Shared>, mut sub: async_nats::Subscriber) {
    while let Some(m) = sub.next().await {
        let v: serde_json::Value = serde_json::from_slice(&m.payload).unwrap_or_default();
        if let Some(seq) = v.get("stream_seq").and_then(serde_json::Value::as_u64) {
            shared.give_up(seq);
        }
    }
}
