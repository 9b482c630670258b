//! What travels over the queue: requests (coordinator → worker) and notices (worker →
//! coordinator). No credential is ever part of either: a worker runs its own backends with its
//! own keys, and redacts what it sends back with its own secrets.

use serde::{Deserialize, Serialize};
use serde_json::{Value, json};
use sha2::Digest;
use work_runtime::budget::Usage;
use work_runtime::dispatch::{Access, DispatchRequest};

/// The protocol name written in every request.
pub const QUEUE_PROTOCOL: &str = "work.queue.v1";

/// The stream the coordinator publishes requests to (work-queue retention: one worker each).
pub const DISPATCH_STREAM: &str = "WORK_DISPATCH";
/// The stream workers publish notices to (started, refused, answer).
pub const ANSWER_STREAM: &str = "WORK_ANSWERS";
/// The durable pull consumer every worker shares.
pub const WORKER_CONSUMER: &str = "work-workers";

/// The subject of a request in namespace `ns`.
pub fn dispatch_subject(ns: &str) -> String {
    format!("work.dispatch.{ns}")
}

/// The subject of one kind of notice (`started`, `refused`, `answer`: [`Notice::kind`]) about
/// dispatch `queue_id` in namespace `ns`. One subject per kind and dispatch, so that the answer
/// stream can be asked for the first answer of one dispatch by its subject alone.
pub fn notice_subject(ns: &str, queue_id: &str, kind: &str) -> String {
    format!("work.answer.{ns}.{queue_id}.{kind}")
}

/// Every notice of namespace `ns`.
pub fn notices_of(ns: &str) -> String {
    format!("work.answer.{ns}.>")
}

/// The repository a request was made in: the id (the root commit, the same in every clone),
/// the commit checked out, and which checkout it is.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct RepoRef {
    /// The repository id.
    pub id: String,
    /// The HEAD commit.
    pub head: String,
    /// The checkout: its git directory and that directory's device and inode (one checkout,
    /// one value; every clone its own). A worker refuses a request made in its own checkout.
    #[serde(default)]
    pub checkout: String,
}

/// One dispatch attempt on the queue.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct QueueRequest {
    /// Always [`QUEUE_PROTOCOL`].
    pub protocol: String,
    /// The coordinator's namespace (one per journal; kept across a resume).
    pub namespace: String,
    /// The queue's dispatch id: a hash of everything below but the run's own names, so a
    /// resumed coordinator that asks again asks the same message (`Nats-Msg-Id`).
    pub queue_id: String,
    /// The coordinator's run (for logs only).
    pub run_id: String,
    /// The coordinator's dispatch id (for logs only).
    pub dispatch_id: String,
    /// 1, or 2 for the retry after a malformed answer.
    pub attempt: u32,
    /// The workflow.
    pub workflow: String,
    /// The role.
    pub role: String,
    /// The pinned model.
    pub model: String,
    /// The pinned effort.
    pub effort: String,
    /// What the agent may touch.
    pub access: Access,
    /// The full brief.
    pub brief: String,
    /// The JSON Schema of the expected output, or null.
    pub schema: Option<Value>,
    /// Workflow data.
    pub context: Value,
    /// Where the dispatch must run.
    pub repository: RepoRef,
    /// The agent's time limit, in milliseconds.
    pub timeout_ms: u64,
    /// The coordinator's uncommitted change, for a dispatch that must see it (a reviewer):
    /// the worker replays it in a scratch worktree at `repository.head` and runs the agent
    /// there. None: the agent runs in the worker's own checkout, which must be at that commit.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub change: Option<Change>,
}

/// A working tree's change against the request's commit.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Change {
    /// The working tree as a git tree id: what the replayed change must give (and its
    /// fingerprint in the queue id).
    pub tree: String,
    /// `git diff --binary` from the commit to that tree.
    pub patch: String,
}

impl QueueRequest {
    /// The request for one attempt of `req` in namespace `ns`, at `repository`, with the
    /// coordinator's `change` when the agent must see it.
    pub fn new(ns: &str, repository: &RepoRef, req: &DispatchRequest, timeout_ms: u64, change: Option<Change>) -> Self {
        let mut content = json!([
            ns,
            repository.id,
            repository.head,
            req.attempt,
            req.workflow,
            req.role,
            req.model,
            req.effort,
            req.access,
            req.prompt,
            req.schema,
            req.context,
            timeout_ms
        ]);
        // The change's fingerprint, only when there is one: the ids of requests without one
        // stay what they were.
        if let (Some(c), Value::Array(a)) = (&change, &mut content) {
            a.push(json!(c.tree));
        }
        let digest = sha2::Sha256::digest(content.to_string().as_bytes());
        QueueRequest {
            protocol: QUEUE_PROTOCOL.into(),
            namespace: ns.into(),
            queue_id: hex::encode(&digest[..16]),
            run_id: req.run_id.clone(),
            dispatch_id: req.dispatch_id.clone(),
            attempt: req.attempt,
            workflow: req.workflow.clone(),
            role: req.role.clone(),
            model: req.model.clone(),
            effort: req.effort.clone(),
            access: req.access,
            brief: req.prompt.clone(),
            schema: req.schema.clone(),
            context: req.context.clone(),
            repository: repository.clone(),
            timeout_ms,
            change,
        }
    }

    /// The same request asked anew after `generation` earlier asks of it failed: a queue id
    /// of its own (a new message, a new answer subject), so that a failure is never the
    /// answer to a later deliberate retry. Generation 0 is the request itself.
    pub fn generation(&self, generation: u32) -> Self {
        let mut q = self.clone();
        if generation > 0 {
            q.queue_id = format!("{}-{generation}", self.queue_id);
        }
        q
    }

    /// The `work.dispatch.v1` request a worker hands its own backend, in its checkout `cwd`.
    pub fn to_dispatch(&self, cwd: &str) -> DispatchRequest {
        DispatchRequest {
            protocol: work_runtime::dispatch::PROTOCOL.into(),
            run_id: self.run_id.clone(),
            dispatch_id: self.dispatch_id.clone(),
            attempt: self.attempt,
            workflow: self.workflow.clone(),
            role: self.role.clone(),
            model: self.model.clone(),
            effort: self.effort.clone(),
            access: self.access,
            cwd: cwd.into(),
            prompt: self.brief.clone(),
            schema: self.schema.clone(),
            context: self.context.clone(),
        }
    }
}

/// How a worker's attempt ended.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "outcome", rename_all = "kebab-case")]
pub enum AnswerOutcome {
    /// A JSON document (the coordinator validates it against the schema).
    Ok {
        /// The document.
        document: Value,
        /// The raw text, for the coordinator's dispatch record.
        raw: String,
    },
    /// The agent answered, but not with one JSON document.
    Malformed {
        /// Why.
        reason: String,
        /// What it printed.
        raw: String,
    },
    /// The agent failed (exit code, kill, timeout, transport).
    Failed {
        /// Why.
        reason: String,
        /// What it printed.
        raw: String,
    },
}

/// A worker's answer to one request.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct QueueAnswer {
    /// The request's queue id.
    pub queue_id: String,
    /// The worker that ran it.
    pub worker: String,
    /// Which delivery of the request it answers (1 unless it was redelivered).
    #[serde(default)]
    pub delivery: u64,
    /// How it ended.
    #[serde(flatten)]
    pub outcome: AnswerOutcome,
    /// What it cost.
    pub usage: Usage,
}

/// What a worker publishes about a request.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "notice", rename_all = "kebab-case")]
pub enum Notice {
    /// A worker took the request (its deadline starts now).
    Started {
        /// The request's queue id.
        queue_id: String,
        /// The worker.
        worker: String,
        /// 1 for the first delivery, more after a redelivery.
        delivery: u64,
    },
    /// A worker handed the request back (wrong repository or commit, a write role it may
    /// not run); another worker may take it.
    Refused {
        /// The request's queue id.
        queue_id: String,
        /// The worker.
        worker: String,
        /// Why.
        reason: String,
    },
    /// The answer.
    Answer(QueueAnswer),
}

impl Notice {
    /// The queue id the notice is about.
    pub fn queue_id(&self) -> &str {
        match self {
            Notice::Started { queue_id, .. } | Notice::Refused { queue_id, .. } => queue_id,
            Notice::Answer(a) => &a.queue_id,
        }
    }

    /// The last part of its subject ([`notice_subject`]).
    pub fn kind(&self) -> &'static str {
        match self {
            Notice::Started { .. } => "started",
            Notice::Refused { .. } => "refused",
            Notice::Answer(_) => "answer",
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn request(prompt: &str, run: &str, n: &str) -> DispatchRequest {
        DispatchRequest {
            protocol: work_runtime::dispatch::PROTOCOL.into(),
            run_id: run.into(),
            dispatch_id: n.into(),
            attempt: 1,
            workflow: "exhaust".into(),
            role: "finder".into(),
            model: "m".into(),
            effort: "low".into(),
            access: Access::ReadOnly,
            cwd: "/coordinator".into(),
            prompt: prompt.into(),
            schema: None,
            context: json!({"angle": "a"}),
        }
    }

    #[test]
    fn the_queue_id_names_the_dispatch_not_the_run() {
        let repo = RepoRef { id: "r".into(), head: "h".into(), checkout: "c".into() };
        let a = QueueRequest::new("ns", &repo, &request("p", "run-1", "d0001"), 1000, None);
        let b = QueueRequest::new("ns", &repo, &request("p", "run-2", "d0007"), 1000, None);
        assert_eq!(a.queue_id, b.queue_id, "a resumed run asks the same dispatch");
        let c = QueueRequest::new("ns", &repo, &request("q", "run-1", "d0001"), 1000, None);
        assert_ne!(a.queue_id, c.queue_id);
        let d = QueueRequest::new("other", &repo, &request("p", "run-1", "d0001"), 1000, None);
        assert_ne!(a.queue_id, d.queue_id, "another journal never shares answers");
        let e = QueueRequest::new(
            "ns",
            &RepoRef { id: "r".into(), head: "h2".into(), checkout: "c".into() },
            &request("p", "r", "d"),
            1000,
            None,
        );
        assert_ne!(a.queue_id, e.queue_id, "another commit is another dispatch");
        let change = |tree: &str| Some(Change { tree: tree.into(), patch: "p".into() });
        let f = QueueRequest::new("ns", &repo, &request("p", "run-1", "d0001"), 1000, change("t1"));
        let g = QueueRequest::new("ns", &repo, &request("p", "run-2", "d0002"), 1000, change("t2"));
        assert_ne!(a.queue_id, f.queue_id, "a change is another dispatch");
        assert_ne!(f.queue_id, g.queue_id, "another change is another dispatch");
        let again = f.generation(1);
        assert_ne!(again.queue_id, f.queue_id, "a retry after a failure is a new message");
        assert_eq!((f.generation(0).queue_id, again.brief), (f.queue_id.clone(), f.brief.clone()));
    }

    #[test]
    fn the_worker_runs_the_brief_in_its_own_checkout() {
        let repo = RepoRef { id: "r".into(), head: "h".into(), checkout: "c".into() };
        let q = QueueRequest::new("ns", &repo, &request("p", "run-1", "d0001"), 1000, None);
        let d = q.to_dispatch("/worker");
        assert_eq!((d.cwd.as_str(), d.prompt.as_str(), d.dispatch_id.as_str()), ("/worker", "p", "d0001"));
        let text = serde_json::to_string(&Notice::Answer(QueueAnswer {
            queue_id: "q".into(),
            worker: "w".into(),
            delivery: 1,
            outcome: AnswerOutcome::Failed { reason: "x".into(), raw: String::new() },
            usage: Usage::default(),
        }))
        .expect("json");
        let back: Notice = serde_json::from_str(&text).expect("parse");
        assert_eq!(back.queue_id(), "q");
    }

    #[test]
    fn each_kind_of_notice_has_its_own_subject_under_the_namespace() {
        let started = Notice::Started { queue_id: "q".into(), worker: "w".into(), delivery: 1 };
        let refused = Notice::Refused { queue_id: "q".into(), worker: "w".into(), reason: "r".into() };
        let answer = Notice::Answer(QueueAnswer {
            queue_id: "q".into(),
            worker: "w".into(),
            delivery: 2,
            outcome: AnswerOutcome::Ok { document: json!({}), raw: String::new() },
            usage: Usage::default(),
        });
        let subjects: Vec<String> =
            [&started, &refused, &answer].iter().map(|n| notice_subject("ns", n.queue_id(), n.kind())).collect();
        assert_eq!(subjects, ["work.answer.ns.q.started", "work.answer.ns.q.refused", "work.answer.ns.q.answer"]);
        let all = notices_of("ns");
        assert!(subjects.iter().all(|s| s.starts_with(all.trim_end_matches('>'))), "{all}");
        // An answer from a worker that does not send its delivery number reads as delivery 0.
        let old: QueueAnswer =
            serde_json::from_value(json!({"queue_id": "q", "worker": "w", "outcome": "failed", "reason": "x", "raw": "", "usage": Usage::default()}))
                .expect("parse");
        assert_eq!(old.delivery, 0);
    }
}
