//! The queue's JetStream setup: the `--queue` address, the connection, the two streams and
//! the workers' shared consumer. Every call is idempotent (whoever comes first creates).

use crate::QueueError;
use crate::wire::{ANSWER_STREAM, DISPATCH_STREAM, WORKER_CONSUMER};
use async_nats::jetstream::{self, consumer, stream};
use std::time::Duration;

/// How long a request's id is remembered for deduplication (a resumed coordinator that
/// publishes again within it publishes nothing new).
pub const DUPLICATE_WINDOW: Duration = Duration::from_secs(3600);
/// How long answers are kept (a coordinator resumed within it finds what arrived meanwhile).
pub const ANSWER_RETENTION: Duration = Duration::from_secs(24 * 3600);
/// How long the connection waits for a server at first.
pub const CONNECT_TIMEOUT: Duration = Duration::from_secs(5);

/// A parsed `--queue` value: one or more `nats://HOST:PORT`, comma-separated (any node of a
/// cluster; the client learns the others from the server).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct QueueUrl {
    servers: Vec<String>,
}

impl QueueUrl {
    /// Parses `nats://HOST:PORT[,nats://HOST:PORT…]`. The error is one line.
    pub fn parse(text: &str) -> Result<Self, QueueError> {
        let bad = |why: String| QueueError::BadUrl { url: text.into(), why };
        let mut servers = Vec::new();
        for part in text.split(',').map(str::trim) {
            let rest =
                part.strip_prefix("nats://").ok_or_else(|| bad(format!("`{part}` does not start with nats://")))?;
            let (host, port) = rest.rsplit_once(':').ok_or_else(|| bad(format!("`{part}` has no :PORT")))?;
            let host_ok = !host.is_empty()
                && host.chars().all(|c| c.is_ascii_alphanumeric() || matches!(c, '.' | '-' | '[' | ']' | ':'));
            if !host_ok {
                return Err(bad(format!("`{part}` has no valid host")));
            }
            match port.parse::<u16>() {
                Ok(p) if p > 0 => {}
                _ => return Err(bad(format!("`{part}` has no valid port (1-65535)"))),
            }
            servers.push(part.to_string());
        }
        Ok(QueueUrl { servers })
    }

    /// The servers, as given.
    pub fn servers(&self) -> &[String] {
        &self.servers
    }

    /// Connects (reconnecting for ever afterwards) and returns the JetStream context.
    pub async fn connect(&self, name: &str) -> Result<(async_nats::Client, jetstream::Context), QueueError> {
        let addrs: Vec<async_nats::ServerAddr> = self
            .servers
            .iter()
            .map(|s| s.parse::<async_nats::ServerAddr>())
            .collect::<Result<_, _>>()
            .map_err(|e| QueueError::BadUrl { url: self.servers.join(","), why: e.to_string() })?;
        let client = async_nats::ConnectOptions::new()
            .name(name)
            .connection_timeout(CONNECT_TIMEOUT)
            .max_reconnects(None)
            .connect(addrs)
            .await
            .map_err(|e| QueueError::Connect { url: self.servers.join(","), why: e.to_string() })?;
        let mut js = jetstream::new(client.clone());
        js.set_timeout(Duration::from_secs(10));
        Ok((client, js))
    }
}

/// Creates the two streams when they do not exist: on a cluster with three replicas, on a
/// single server with one. A cluster still electing its leader gets a few seconds.
pub async fn ensure_streams(js: &jetstream::Context) -> Result<(), QueueError> {
    let mut last = None;
    for _ in 0..20 {
        match try_ensure_streams(js).await {
            Ok(()) => return Ok(()),
            Err(e) => last = Some(e),
        }
        tokio::time::sleep(Duration::from_millis(500)).await;
    }
    Err(last.unwrap_or(QueueError::Stream { name: DISPATCH_STREAM.into(), why: "not ready".into() }))
}

async fn try_ensure_streams(js: &jetstream::Context) -> Result<(), QueueError> {
    let dispatch = |replicas| stream::Config {
        name: DISPATCH_STREAM.into(),
        subjects: vec!["work.dispatch.>".into()],
        retention: stream::RetentionPolicy::WorkQueue,
        storage: stream::StorageType::File,
        duplicate_window: DUPLICATE_WINDOW,
        num_replicas: replicas,
        ..Default::default()
    };
    let answers = |replicas| stream::Config {
        name: ANSWER_STREAM.into(),
        subjects: vec!["work.answer.>".into()],
        retention: stream::RetentionPolicy::Limits,
        storage: stream::StorageType::File,
        duplicate_window: DUPLICATE_WINDOW,
        max_age: ANSWER_RETENTION,
        num_replicas: replicas,
        ..Default::default()
    };
    for make in [&dispatch as &dyn Fn(usize) -> stream::Config, &answers] {
        let name = make(1).name;
        if js.get_stream(&name).await.is_ok() {
            continue;
        }
        if js.get_or_create_stream(make(3)).await.is_ok() {
            continue;
        }
        js.get_or_create_stream(make(1))
            .await
            .map_err(|e| QueueError::Stream { name: name.clone(), why: e.to_string() })?;
    }
    Ok(())
}

/// How the workers' shared consumer redelivers.
#[derive(Debug, Clone, Copy)]
pub struct Redelivery {
    /// A request not acknowledged (nor reported in progress) within this goes to another worker.
    pub ack_wait: Duration,
    /// Deliveries before a request is given up (the coordinator then fails the dispatch).
    pub max_deliver: i64,
}

impl Default for Redelivery {
    fn default() -> Self {
        Redelivery { ack_wait: Duration::from_secs(30), max_deliver: 3 }
    }
}

/// The durable pull consumer every worker pulls from (created by the first worker).
pub async fn worker_consumer(
    js: &jetstream::Context,
    redelivery: Redelivery,
) -> Result<consumer::PullConsumer, QueueError> {
    let err = |e: &dyn std::fmt::Display| QueueError::Stream { name: DISPATCH_STREAM.into(), why: e.to_string() };
    let s = js.get_stream(DISPATCH_STREAM).await.map_err(|e| err(&e))?;
    s.get_or_create_consumer(
        WORKER_CONSUMER,
        consumer::pull::Config {
            durable_name: Some(WORKER_CONSUMER.into()),
            ack_policy: consumer::AckPolicy::Explicit,
            ack_wait: redelivery.ack_wait,
            max_deliver: redelivery.max_deliver,
            filter_subject: "work.dispatch.>".into(),
            ..Default::default()
        },
    )
    .await
    .map_err(|e| err(&e))
}

/// The first answer the answer stream holds for dispatch `queue_id` of namespace `ns` — the
/// answer, whoever asks and however often (a second answer has the same message id and is
/// dropped within the duplicate window; one after it comes later in the stream). `Ok(None)`
/// when there is none yet; an error when the stream could not be asked.
pub async fn first_answer(
    js: &jetstream::Context,
    ns: &str,
    queue_id: &str,
) -> Result<Option<crate::wire::QueueAnswer>, String> {
    use jetstream::stream::RawMessageErrorKind;
    let s = js.get_stream_no_info(ANSWER_STREAM).await.map_err(|e| e.to_string())?;
    let subject = crate::wire::notice_subject(ns, queue_id, "answer");
    match s.get_first_raw_message_by_subject(&subject, 1).await {
        Ok(m) => match serde_json::from_slice::<crate::wire::Notice>(&m.payload) {
            Ok(crate::wire::Notice::Answer(a)) => Ok(Some(a)),
            Ok(_) | Err(_) => Err(format!("the answer stream holds something else on {subject}")),
        },
        Err(e) if e.kind() == RawMessageErrorKind::NoMessageFound => Ok(None),
        Err(e) => Err(e.to_string()),
    }
}

/// Whether the answer stream holds a `started` notice for dispatch `queue_id` of namespace `ns`.
pub async fn was_started(js: &jetstream::Context, ns: &str, queue_id: &str) -> bool {
    let Ok(s) = js.get_stream_no_info(ANSWER_STREAM).await else { return false };
    let subject = crate::wire::notice_subject(ns, queue_id, "started");
    s.get_first_raw_message_by_subject(&subject, 1).await.is_ok()
}

/// The advisory JetStream sends when a request reached its delivery limit.
pub fn max_deliveries_subject() -> String {
    format!("$JS.EVENT.ADVISORY.CONSUMER.MAX_DELIVERIES.{DISPATCH_STREAM}.{WORKER_CONSUMER}")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn queue_urls_are_checked_before_anything_connects() {
        let u = QueueUrl::parse("nats://127.0.0.1:4222,nats://node-2.local:4223").expect("valid");
        assert_eq!(u.servers().len(), 2);
        for bad in [
            "",
            "127.0.0.1:4222",
            "http://h:1",
            "nats://h",
            "nats://h:0",
            "nats://h:99999",
            "nats://:4222",
            "nats://h:4222,",
            "nats://a b:1",
        ] {
            let e = QueueUrl::parse(bad).expect_err(bad).to_string();
            assert!(!e.contains('\n') && e.contains("expected nats://"), "{bad}: {e}");
        }
    }
}
