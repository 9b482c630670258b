//! The HTTP transport shared by the `openai:` and `anthropic:` backends.
//!
//! One POST of a JSON body, with a deadline (the dispatch timeout) over all tries together.
//! `429`, `500`, `502`, `503`, `504` and `529` are retried at most [`MAX_RETRIES`] times,
//! honouring `Retry-After` (seconds, capped at [`MAX_RETRY_WAIT`] and at the time left);
//! any other non-2xx status, a timeout or a transport error ends the call as a failure with a
//! one-line reason. Reasons never quote request headers, and the key itself is scrubbed from
//! anything quoted from the server or the transport.
//!
//! The client ([`client::Client`]) is async: hyper-util's pooled HTTP/1.1 client on the
//! caller's tokio runtime (rustls with ring and the webpki roots for `https://`, the proxy
//! variables read by hyper-util's matcher), no thread held per request in flight. Each backend
//! builds ONE [`Client`] and sends every request through it: its connections are kept alive
//! and reused (at most [`client::POOL_SIZE`] idle connections per host), so N sequential
//! requests to one host cost one TCP (and TLS) handshake, and a wave of N concurrent ones at
//! most N.

mod client;

pub(crate) use client::Client;
use serde_json::Value;
use std::time::{Duration, Instant};

/// Retries after the first try, for statuses that say "try again".
pub(crate) const MAX_RETRIES: u32 = 2;
/// The longest wait honoured from a `Retry-After` header.
pub(crate) const MAX_RETRY_WAIT: Duration = Duration::from_secs(30);

/// One POST to make.
#[derive(Debug, Clone)]
pub(crate) struct Post {
    /// The full URL.
    pub url: String,
    /// Headers (the credential header among them).
    pub headers: Vec<(String, String)>,
    /// The JSON body.
    pub body: Vec<u8>,
    /// The key, scrubbed from every reason.
    pub secret: Option<String>,
    /// The environment variable the key came from, named in a refusal.
    pub key_var: Option<String>,
}

/// Why a call produced no 2xx body. Every variant is a failed dispatch.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct HttpFailure {
    /// One line.
    pub reason: String,
    /// The last body received, if any (for the dispatch record).
    pub raw: String,
}

/// Statuses worth another try.
fn retryable(status: u16) -> bool {
    matches!(status, 429 | 500 | 502 | 503 | 504 | 529)
}

/// Replaces the key in `text`.
pub(crate) fn scrub(text: &str, secret: Option<&str>) -> String {
    match secret {
        Some(s) if s.len() >= 4 => text.replace(s, "[REDACTED]"),
        _ => text.to_string(),
    }
}

/// The server's own error message from a JSON error body (`error.message`, `message`,
/// FastAPI's `detail`); an HTML page (a proxy's or a web server's error page) reduced to its
/// title; else the start of the body.
pub(crate) fn server_message(body: &str) -> String {
    if let Some(title) = html_title(body) {
        return title;
    }
    let msg = serde_json::from_str::<Value>(body).ok().and_then(|v| {
        let direct = v.pointer("/error/message").or_else(|| v.get("message")).and_then(Value::as_str);
        match direct {
            Some(m) => Some(m.to_string()),
            None => match (v.get("error"), v.get("detail")) {
                (Some(Value::String(e)), _) => Some(e.clone()),
                (_, Some(Value::String(d))) => Some(d.clone()),
                (_, Some(d)) => Some(d.to_string()),
                _ => None,
            },
        }
    });
    crate::head(&msg.unwrap_or_else(|| body.to_string()), 300)
}

/// The title of an HTML page (else its first heading, else "an HTML page"); `None` when the
/// body is not HTML.
fn html_title(body: &str) -> Option<String> {
    let t = body.trim_start();
    // ASCII lowercasing keeps every byte offset, so offsets found in `lower` slice `t`.
    let lower = t.to_ascii_lowercase();
    let head = lower.get(..lower.len().min(1024)).unwrap_or(&lower);
    let is_html =
        t.starts_with('<') && ["<!doctype html", "<html", "<head", "<body", "<title"].iter().any(|m| head.contains(m));
    if !is_html {
        return None;
    }
    let inner = |tag: &str| {
        let open = lower.find(&format!("<{tag}"))?;
        let start = open + lower[open..].find('>')? + 1;
        let end = start + lower[start..].find(&format!("</{tag}"))?;
        let text = t[start..end].split_whitespace().collect::<Vec<_>>().join(" ");
        (!text.is_empty()).then_some(text)
    };
    let text = inner("title").or_else(|| inner("h1")).unwrap_or_else(|| "an HTML page".into());
    Some(crate::head(&text, 120))
}

/// Seconds from a `Retry-After` header (delta-seconds only; an HTTP date counts as absent).
fn retry_after(value: Option<&str>) -> Option<Duration> {
    let secs: f64 = value?.trim().parse().ok()?;
    (secs.is_finite() && secs >= 0.0).then(|| Duration::from_secs_f64(secs.min(3600.0)))
}

/// Makes the call through `client`: the body of a 2xx answer, or why not.
pub(crate) async fn post(client: &Client, call: Post, timeout: Duration) -> Result<String, HttpFailure> {
    let secret = call.secret.as_deref();
    // Capped so that the deadline cannot overflow, whatever the caller passed.
    let timeout = timeout.min(Duration::from_secs(work_config::MAX_TIMEOUT_SECS));
    let deadline = Instant::now() + timeout;
    let fail = |reason: String, raw: &str| HttpFailure { reason: scrub(&reason, secret), raw: scrub(raw, secret) };
    let timed_out = || fail(format!("timed out after {:.1}s", timeout.as_secs_f64()), "");
    let body = bytes::Bytes::from(call.body);
    let mut tries = 0u32;
    loop {
        tries += 1;
        let left = deadline.saturating_duration_since(Instant::now());
        if left.is_zero() {
            return Err(timed_out());
        }
        let answer = match tokio::time::timeout(left, client.post(&call.url, &call.headers, body.clone())).await {
            Err(_) => return Err(timed_out()),
            Ok(Ok(a)) => a,
            Ok(Err(e)) => {
                let endpoint = endpoint_of(&call.url);
                let what = match e {
                    client::SendError::Connect(e) => format!("the endpoint {endpoint} is unreachable ({e})"),
                    client::SendError::Url(e) | client::SendError::Exchange(e) => {
                        format!("request to {endpoint} failed: {e}")
                    }
                    client::SendError::Body(e) => format!("reading the answer from {endpoint} failed: {e}"),
                };
                return Err(fail(crate::head(&what, 300), ""));
            }
        };
        let status = answer.status.as_u16();
        let wait = retry_after(answer.headers.get("retry-after").and_then(|v| v.to_str().ok()));
        let body_text = String::from_utf8_lossy(&answer.body).into_owned();
        if (200..300).contains(&status) {
            return Ok(body_text);
        }
        if retryable(status) && tries <= MAX_RETRIES {
            let wait = wait.unwrap_or(Duration::from_millis(500 * u64::from(tries))).min(MAX_RETRY_WAIT);
            if Instant::now() + wait < deadline {
                tokio::time::sleep(wait).await;
                continue;
            }
            return Err(fail(
                format!(
                    "HTTP {status}: {} (retry-after {:.0}s would pass the dispatch timeout)",
                    server_message(&body_text),
                    wait.as_secs_f64()
                ),
                &body_text,
            ));
        }
        let reason = match status {
            401 | 403 => format!(
                "HTTP {status}: the endpoint refused the credentials{}",
                call.key_var.as_ref().map(|v| format!(" (from {v})")).unwrap_or_default()
            ),
            _ if retryable(status) => {
                format!("HTTP {status} after {tries} tries: {}", server_message(&body_text))
            }
            _ => format!("HTTP {status}: {}", server_message(&body_text)),
        };
        // The body of a refusal may echo part of the key; keep it out of the record too.
        let raw = if matches!(status, 401 | 403) { String::new() } else { body_text };
        return Err(fail(reason, &raw));
    }
}

/// `scheme://host[:port]` of a URL, for messages (never the path's query or credentials).
pub(crate) fn endpoint_of(url: &str) -> String {
    let (scheme, rest) = url.split_once("://").unwrap_or(("", url));
    let host = rest.split('/').next().unwrap_or("");
    let host = host.rsplit('@').next().unwrap_or(host);
    if scheme.is_empty() { host.to_string() } else { format!("{scheme}://{host}") }
}

/// Joins a base URL and a path (`https://x/v1` + `/chat/completions`).
pub(crate) fn join(base: &str, path: &str) -> String {
    format!("{}/{}", base.trim_end_matches('/'), path.trim_start_matches('/'))
}

/// Checks a base URL: `http://` or `https://` and a host.
pub(crate) fn check_base_url(base: &str) -> Result<(), String> {
    let ok = (base.starts_with("http://") || base.starts_with("https://")) && !endpoint_of(base).ends_with("://");
    if ok { Ok(()) } else { Err(format!("base URL `{base}` is not an http:// or https:// URL")) }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn messages_are_read_from_error_bodies() {
        assert_eq!(server_message(r#"{"error": {"message": "bad model"}}"#), "bad model");
        assert_eq!(server_message(r#"{"type":"error","error":{"type":"x","message":"overloaded"}}"#), "overloaded");
        assert!(server_message(r#"{"detail": [{"msg": "json_schema not supported"}]}"#).contains("json_schema"));
        assert_eq!(server_message("plain\ntext"), "plain text");
        let page = "<!DOCTYPE html>\n<html><head><TITLE>500 Internal\n Server Error</TITLE><style>body{}</style></head>\
                    <body><h1>Oops</h1><p>lots of markup</p></body></html>";
        assert_eq!(server_message(page), "500 Internal Server Error");
        assert_eq!(server_message("<html><body><h1>Bad Gateway</h1></body></html>"), "Bad Gateway");
        assert_eq!(server_message("<html><body></body></html>"), "an HTML page");
        assert_eq!(retry_after(Some("2")), Some(Duration::from_secs(2)));
        assert_eq!(retry_after(Some("Wed, 21 Oct 2015 07:28:00 GMT")), None);
        assert_eq!(endpoint_of("https://user:pw@api.x.com/v1/chat?k=1"), "https://api.x.com");
        assert_eq!(join("http://h/v1/", "/chat/completions"), "http://h/v1/chat/completions");
        assert!(check_base_url("ftp://x").is_err() && check_base_url("http://127.0.0.1:9/v1").is_ok());
    }

    #[tokio::test]
    async fn a_huge_timeout_does_not_overflow_the_deadline() {
        let call = Post {
            url: "http://127.0.0.1:9/v1/chat/completions".into(),
            headers: vec![],
            body: b"{}".to_vec(),
            secret: None,
            key_var: None,
        };
        let e = post(&Client::new(), call, Duration::MAX).await.expect_err("nothing listens on port 9");
        assert!(!e.reason.contains('\n'), "{}", e.reason);
    }
}
