//! The coordinator's side: [`QueueAgent`], an [`Agent`] that publishes each attempt to the
//! work queue and waits for a worker's answer. The runtime's dispatcher stays as it is (it
//! validates, retries a malformed answer once, charges the budget and keeps the cap, which
//! is then the number of dispatches in flight across all workers).
//!
//! Rules: the request is published with its queue id as `Nats-Msg-Id` (JetStream drops a
//! second copy); the answer is the first one the answer stream holds for the queue id (later
//! ones are ignored); a request no worker finished (its delivery limit reached, or no answer
//! within the timeout of its last pickup plus a grace, or no pickup within the timeout plus
//! [`PICKUP_GRACE`]) is a failed dispatch — never an empty answer.
//!
//! Answers are durable: they are kept in the answer stream (three replicas on a cluster), one
//! subject per dispatch, and the coordinator asks the stream for a dispatch's answer by that
//! subject before it publishes (a coordinator resumed after a crash finds what the workers
//! answered while it was down), when a notice on the live subject says one arrived, every
//! [`POLL`] while it waits (a notice missed while a node was lost), and before it gives up.
//! Nothing depends on a consumer's position, so a lost node or connection loses nothing.

use crate::QueueError;
use crate::stream::{self, QueueUrl};
use crate::wire::{AnswerOutcome, Change, DISPATCH_STREAM, Notice, QueueAnswer, QueueRequest, RepoRef};
use async_nats::jetstream;
use async_trait::async_trait;
use futures_util::StreamExt;
use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::Duration;
use tokio::sync::watch;
use tokio::time::Instant;
use work_runtime::dispatch::{Agent, AgentError, AgentReply, DispatchRequest, InvokeOptions};

/// What the coordinator knows of one queue id from the live subject and the advisories.
#[derive(Debug, Clone, Default)]
struct Slot {
    /// Pickups seen (a redelivery is one more).
    started: u64,
    /// The last refusal, if any.
    refused: Option<String>,
    /// Answers seen on the live subject, by worker and delivery (the stream's first one is
    /// the answer).
    answers: Vec<(String, u64)>,
    /// JetStream gave the request up (delivery limit).
    given_up: bool,
}

struct Shared {
    client: async_nats::Client,
    js: jetstream::Context,
    fresh: bool,
    namespace: String,
    repository: RepoRef,
    slots: Mutex<HashMap<String, watch::Sender<Slot>>>,
    by_sequence: Mutex<HashMap<u64, String>>,
    /// Per request (its generation-0 queue id): the generation the next ask of it starts
    /// from, past every ask of it this process made.
    generations: Mutex<HashMap<String, u32>>,
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
            Notice::Answer(a) => {
                let who = (a.worker, a.delivery);
                if !s.answers.contains(&who) {
                    s.answers.push(who);
                }
            }
        });
    }

    fn give_up(&self, sequence: u64) {
        let id = self.by_sequence.lock().unwrap_or_else(|p| p.into_inner()).get(&sequence).cloned();
        if let Some(id) = id {
            self.slot(&id).send_modify(|s| s.given_up = true);
        }
    }

    /// The generation an ask of `base` starts from; the next ask starts past it.
    fn reserve(&self, base: &str) -> u32 {
        let mut g = self.generations.lock().unwrap_or_else(|p| p.into_inner());
        let next = g.entry(base.to_string()).or_insert(0);
        *next += 1;
        *next - 1
    }

    /// An ask of `base` used generation `used`: the next one starts past it.
    fn used(&self, base: &str, used: u32) {
        let mut g = self.generations.lock().unwrap_or_else(|p| p.into_inner());
        let next = g.entry(base.to_string()).or_insert(0);
        *next = (*next).max(used + 1);
    }

    /// The stream's answer for `id`, if it holds one (an unreachable stream is asked again later).
    async fn stored(&self, id: &str) -> Option<QueueAnswer> {
        crate::stream::first_answer(&self.js, &self.namespace, id).await.ok().flatten()
    }
}

/// Takes the coordinator's change against HEAD (the HEAD commit and the change), for
/// dispatches whose agents must see the uncommitted tree (reviewers). Runs on a blocking
/// thread; the error is one line.
pub type ChangeSource = Arc<dyn Fn() -> Result<(String, Change), String> + Send + Sync>;

/// The coordinator's queue-backed agent. Cheap to clone.
#[derive(Clone)]
pub struct QueueAgent {
    shared: Arc<Shared>,
    describe: String,
    change: Option<ChangeSource>,
}

impl std::fmt::Debug for QueueAgent {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("QueueAgent").field("queue", &self.describe).finish()
    }
}

/// The grace a worker gets past the dispatch's timeout before the coordinator gives up on it
/// (the worker kills its own agent at the timeout and reports that first).
pub const DEFAULT_GRACE: Duration = Duration::from_secs(5);

/// What a request may wait for its first pickup beyond the dispatch's timeout: a cluster
/// that lost a node re-elects the workers' consumer's leader first (seconds), and a request
/// waiting for a free worker is not yet running. Past it, no worker serves the queue.
pub const PICKUP_GRACE: Duration = Duration::from_secs(30);

/// How often a waiting dispatch asks the answer stream for its answer, in case the live
/// notice was missed (a lost node or connection).
pub const POLL: Duration = Duration::from_secs(2);

impl QueueAgent {
    /// Connects to the queue, creates the streams when missing, and starts reading the live
    /// notices of `namespace` and the delivery-limit advisories. `fresh` when the namespace is
    /// new (no answer can be stored for it yet: nothing is looked up before publishing). Must be called inside the
    /// tokio runtime the dispatches run on. `grace` is what a worker gets past the timeout
    /// ([`DEFAULT_GRACE`] unless a test needs less).
    pub async fn connect(
        url: &QueueUrl,
        namespace: &str,
        fresh: bool,
        repository: RepoRef,
        grace: Duration,
    ) -> Result<Self, QueueError> {
        let (client, js) = url.connect("work-coordinator").await?;
        stream::ensure_streams(&js).await?;
        let subscribe = |subject: String| {
            let client = client.clone();
            async move {
                client
                    .subscribe(subject)
                    .await
                    .map_err(|e| QueueError::Connect { url: url.servers().join(","), why: e.to_string() })
            }
        };
        let advisories = subscribe(stream::max_deliveries_subject()).await?;
        let live = subscribe(crate::wire::notices_of(namespace)).await?;
        let shared = Arc::new(Shared {
            client,
            js,
            fresh,
            namespace: namespace.into(),
            repository,
            slots: Mutex::default(),
            by_sequence: Mutex::default(),
            generations: Mutex::default(),
            grace,
        });
        tokio::spawn(read_advisories(shared.clone(), advisories));
        tokio::spawn(read_live(shared.clone(), live));
        Ok(QueueAgent { shared, describe: format!("queue:{}", url.servers().join(",")), change: None })
    }

    /// The same queue, for agents that must see the coordinator's uncommitted change: every
    /// request carries it (taken by `source` when the request is made), and the worker runs
    /// the agent in a scratch worktree with the change replayed (docs/scale-out.md).
    pub fn carrying_change(&self, source: ChangeSource) -> Self {
        QueueAgent { change: Some(source), ..self.clone() }
    }

    /// Answers seen after the one taken (another worker ran the same request again), over
    /// every queue id so far: each was ignored.
    pub fn duplicates_ignored(&self) -> u64 {
        let slots = self.shared.slots.lock().unwrap_or_else(|p| p.into_inner());
        slots.values().map(|s| s.borrow().answers.len().saturating_sub(1) as u64).sum()
    }

    /// Publishes `q`: its sequence in the dispatch stream, and whether JetStream had it already
    /// (the same queue id within the duplicate window).
    async fn publish(&self, q: &QueueRequest) -> Result<(u64, bool), String> {
        let payload = serde_json::to_vec(q).map_err(|e| e.to_string())?;
        let max = self.shared.client.server_info().max_payload;
        if max > 0 && payload.len() > max {
            let change = q.change.as_ref().map(|c| format!(" (the change against HEAD is {} bytes)", c.patch.len()));
            return Err(format!(
                "the request is {} bytes{}, more than the queue's max_payload of {max}: commit part of the change, raise max_payload on the servers, or run without --queue",
                payload.len(),
                change.unwrap_or_default()
            ));
        }
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
                    Ok(ack) => return Ok((ack.sequence, ack.duplicate)),
                    Err(e) => last = e.to_string(),
                },
                Err(e) => last = e.to_string(),
            }
        }
        Err(format!("publish to the queue failed: {last}"))
    }

    /// Whether the dispatch stream still holds request `sequence` (not yet answered and
    /// acknowledged, nor given up on). Unknown counts as held.
    async fn held(&self, sequence: u64) -> bool {
        use jetstream::stream::RawMessageErrorKind;
        let Ok(s) = self.shared.js.get_stream_no_info(DISPATCH_STREAM).await else { return true };
        match s.get_raw_message(sequence).await {
            Ok(_) => true,
            Err(e) => e.kind() != RawMessageErrorKind::NoMessageFound,
        }
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
        let (repository, change) = self.change_now().await.map_err(failed)?;
        let base = QueueRequest::new(&self.shared.namespace, &repository, request, timeout_ms, change);
        let (generation, result) = self.ask(&base, options.timeout).await;
        self.shared.used(&base.queue_id, generation);
        result
    }
}

/// At most this many generations of one request (each one a failed ask before it).
const MAX_GENERATIONS: u32 = 64;

impl QueueAgent {
    /// The repository and change a request is made at: the coordinator's HEAD and change now
    /// when the agent must see the change, else the checkout the queue was connected at.
    async fn change_now(&self) -> Result<(RepoRef, Option<Change>), String> {
        let Some(source) = self.change.clone() else { return Ok((self.shared.repository.clone(), None)) };
        let (head, change) = tokio::task::spawn_blocking(move || source())
            .await
            .map_err(|e| format!("take the change against HEAD: {e}"))?
            .map_err(|e| format!("take the change against HEAD: {e}"))?;
        let repository = &self.shared.repository;
        Ok((RepoRef { id: repository.id.clone(), head, checkout: repository.checkout.clone() }, Some(change)))
    }

    /// Asks `base`. Within one coordinator every ask is a new message: a repeated ask is a
    /// deliberate retry (a failure, or an answer the dispatcher refused, is never the answer
    /// to it), so each ask of the same request takes a generation of its own. Across a
    /// restart, an answer stored already is taken when it is a success; a failure, or a
    /// request that is gone unanswered, moves on to the next generation (a new message that
    /// runs again). Returns the generation used.
    async fn ask(&self, base: &QueueRequest, timeout: Duration) -> (u32, Result<AgentReply, AgentError>) {
        let mut generation = self.shared.reserve(&base.queue_id);
        while generation < MAX_GENERATIONS {
            let q = base.generation(generation);
            let mut rx = self.shared.slot(&q.queue_id).subscribe();
            rx.borrow_and_update();
            // Answered already (by a worker while this coordinator was down): nothing to ask.
            if !self.shared.fresh
                && let Some(a) = self.shared.stored(&q.queue_id).await
            {
                if matches!(a.outcome, AnswerOutcome::Ok { .. }) {
                    return (generation, reply(a));
                }
                generation += 1;
                continue;
            }
            let (sequence, duplicate) = match self.publish(&q).await {
                Ok(p) => p,
                Err(e) => return (generation, Err(failed(e))),
            };
            // Asked before, and gone: answered (a success is the answer; a failure is not the
            // answer to this ask), or given up on unanswered.
            if duplicate && !self.held(sequence).await {
                match self.settled(&q.queue_id).await {
                    Some(a) if matches!(a.outcome, AnswerOutcome::Ok { .. }) => return (generation, reply(a)),
                    _ => {
                        generation += 1;
                        continue;
                    }
                }
            }
            self.shared.by_sequence.lock().unwrap_or_else(|p| p.into_inner()).insert(sequence, q.queue_id.clone());
            return (generation, self.wait(&q.queue_id, sequence, timeout, rx).await);
        }
        (generation, Err(failed(format!("asked {MAX_GENERATIONS} times, and every ask failed"))))
    }
}

impl QueueAgent {
    /// Waits for the stream's answer to `id` (see the module's rules).
    async fn wait(
        &self,
        id: &str,
        sequence: u64,
        timeout: Duration,
        mut rx: watch::Receiver<Slot>,
    ) -> Result<AgentReply, AgentError> {
        let mut deadline = Instant::now() + timeout + PICKUP_GRACE;
        let (mut seen_started, mut seen_answers) = (0, 0);
        loop {
            let slot = rx.borrow_and_update().clone();
            if slot.answers.len() != seen_answers {
                seen_answers = slot.answers.len();
                if let Some(a) = self.settled(id).await {
                    return reply(a);
                }
            }
            if slot.given_up {
                self.forget(sequence).await;
                let why = slot.refused.map(|r| format!("; last refusal: {r}")).unwrap_or_default();
                return Err(failed(format!("no worker finished it: its delivery limit was reached{why}")));
            }
            if slot.started != seen_started {
                seen_started = slot.started;
                deadline = Instant::now() + timeout + self.shared.grace;
            }
            let wake = deadline.min(Instant::now() + POLL);
            tokio::select! {
                changed = rx.changed() => if changed.is_err() { return Err(failed("the queue closed".into())) },
                () = tokio::time::sleep_until(wake) => {
                    if let Some(a) = self.shared.stored(id).await {
                        return reply(a);
                    }
                    if Instant::now() < deadline {
                        continue;
                    }
                    // A pickup whose live notice was missed: the worker still has its time.
                    if seen_started == 0 && stream::was_started(&self.shared.js, &self.shared.namespace, id).await {
                        seen_started = 1;
                        deadline = Instant::now() + timeout + self.shared.grace;
                        continue;
                    }
                    self.forget(sequence).await;
                    let secs = timeout.as_secs_f64();
                    let wait = (timeout + PICKUP_GRACE).as_secs_f64();
                    return Err(failed(match (seen_started, slot.refused) {
                        (0, Some(r)) => format!("no worker took it within {wait}s (refused by {r})"),
                        (0, None) => format!("no worker took it within {wait}s"),
                        _ => format!("timed out: no answer from the worker within {secs}s of its pickup"),
                    }));
                }
            }
        }
    }

    /// The stream's answer once a live notice said one was published: the stream stores it
    /// a moment after the notice goes by, so it is asked a few times before the next poll.
    async fn settled(&self, id: &str) -> Option<QueueAnswer> {
        let mut pause = Duration::from_millis(5);
        let until = Instant::now() + POLL;
        loop {
            if let Some(a) = self.shared.stored(id).await {
                return Some(a);
            }
            if Instant::now() + pause > until {
                return None;
            }
            tokio::time::sleep(pause).await;
            pause = (pause * 2).min(Duration::from_millis(200));
        }
    }
}

/// Applies the notices published while connected: pickups, refusals, and the answers that
/// wake a waiting dispatch (which then takes the stream's first answer).
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
