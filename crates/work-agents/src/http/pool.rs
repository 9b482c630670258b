//! The async HTTP/1.1 client under the HTTP backends: hyper's connection API over tokio
//! (rustls for `https://`), with a bounded keep-alive pool of its own.
//!
//! A request takes the most recently idle connection to its host (scheme, host, port) or,
//! when none is idle, opens one; once its answer has been read whole, the connection goes
//! back to the pool before the request returns — so the next request of the same task, or of
//! the dispatch that takes its slot, finds it. A wave of N concurrent requests therefore opens
//! at most N connections, and later waves reuse them. At most [`POOL_SIZE`] connections are
//! kept idle per host; one idle longer than [`IDLE_AGE`], or closed by the server, is dropped.
//! No thread is held per request in flight: every connection is a task on the caller's runtime.
//! The proxy variables are read once per client ([`super::proxy`]): a proxied `http://` target
//! is sent to the proxy in absolute form, an `https://` one through a `CONNECT` tunnel.

use super::proxy::{Proxies, Proxy};
use bytes::Bytes;
use http_body_util::{BodyExt, Full, Limited};
use hyper::client::conn::http1::SendRequest;
use hyper::{HeaderMap, Request, StatusCode, Uri};
use hyper_util::rt::TokioIo;
use std::collections::HashMap;
use std::sync::{Arc, Mutex, OnceLock};
use std::time::{Duration, Instant};

/// Idle connections kept per host by one [`Client`]: one per dispatch slot at wave caps up
/// to this size; a larger wave opens more but keeps only this many.
pub(crate) const POOL_SIZE: usize = 256;
/// How long an idle connection is kept before it is closed.
pub(crate) const IDLE_AGE: Duration = Duration::from_secs(60);
/// The largest response body read.
const BODY_CAP: usize = 16 * 1024 * 1024;
/// How long a connection may take to be ready again once its answer was read.
const READY_WAIT: Duration = Duration::from_secs(1);
/// The largest answer head read from a proxy's `CONNECT`.
const CONNECT_HEAD_CAP: usize = 16 * 1024;

/// Scheme (https?), host, port.
type Key = (bool, String, u16);

/// One idle connection.
struct Idle {
    sender: SendRequest<Full<Bytes>>,
    since: Instant,
}

#[derive(Default)]
struct Inner {
    idle: Mutex<HashMap<Key, Vec<Idle>>>,
    tls: OnceLock<Result<tokio_rustls::TlsConnector, String>>,
    proxies: Proxies,
}

/// One backend's HTTP client: a keep-alive connection pool shared by all its requests
/// (cheap to clone; clones share the pool).
#[derive(Clone, Default)]
pub(crate) struct Client {
    inner: Arc<Inner>,
}

impl std::fmt::Debug for Client {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Client").finish_non_exhaustive()
    }
}

/// An answer read whole.
#[derive(Debug)]
pub(crate) struct Answer {
    pub status: StatusCode,
    pub headers: HeaderMap,
    pub body: Bytes,
}

/// Why a request got no answer.
#[derive(Debug)]
pub(crate) enum SendError {
    /// The URL cannot be requested (one line).
    Url(String),
    /// No connection could be opened (one line).
    Connect(String),
    /// The exchange broke off (one line).
    Exchange(String),
    /// The answer's body could not be read (one line).
    Body(String),
}

/// An error and its sources on one line.
fn chain(e: &(dyn std::error::Error + 'static)) -> String {
    let mut out = e.to_string();
    let mut cur = e.source();
    while let Some(s) = cur {
        let t = s.to_string();
        if !out.contains(&t) {
            out.push_str(": ");
            out.push_str(&t);
        }
        cur = s.source();
    }
    crate::head(&out, 300)
}

/// The key and the origin-form target of a URL.
fn target(url: &str) -> Result<(Key, String, String), SendError> {
    let uri: Uri = url.parse().map_err(|e| SendError::Url(format!("`{url}` is not a URL: {e}")))?;
    let https = match uri.scheme_str() {
        Some("https") => true,
        Some("http") => false,
        _ => return Err(SendError::Url(format!("`{url}` is not an http:// or https:// URL"))),
    };
    let host = uri.host().filter(|h| !h.is_empty()).ok_or_else(|| SendError::Url(format!("`{url}` has no host")))?;
    let port = uri.port_u16().unwrap_or(if https { 443 } else { 80 });
    let authority = match uri.port_u16() {
        Some(p) => format!("{host}:{p}"),
        None => host.to_string(),
    };
    let path = uri.path_and_query().map_or("/", |p| p.as_str()).to_string();
    Ok(((https, host.trim_start_matches('[').trim_end_matches(']').to_string(), port), authority, path))
}

impl Client {
    /// A client with an empty pool, going through the proxies the environment names.
    pub(crate) fn new() -> Self {
        Self::with_proxies(Proxies::from_env())
    }

    /// A client with an empty pool and these proxy settings.
    pub(crate) fn with_proxies(proxies: Proxies) -> Self {
        Self { inner: Arc::new(Inner { proxies, ..Inner::default() }) }
    }

    /// POSTs `body` to `url` with `headers` and reads the answer whole.
    pub(crate) async fn post(&self, url: &str, headers: &[(String, String)], body: Bytes) -> Result<Answer, SendError> {
        let (key, authority, path) = target(url)?;
        let proxy = match self.inner.proxies.route(key.0, &key.1) {
            None => None,
            Some(Ok(p)) => Some(p),
            Some(Err(e)) => return Err(SendError::Connect(e)),
        };
        // Through a proxy, an http:// request names its whole URL (an https:// one goes inside
        // the tunnel as usual).
        let forward = proxy.as_ref().filter(|_| !key.0);
        let uri = match forward {
            Some(_) => format!("http://{authority}{path}"),
            None => path.clone(),
        };
        let build = || {
            let mut req = Request::post(uri.as_str()).header(hyper::header::HOST, authority.as_str());
            if let Some(auth) = forward.and_then(|p| p.auth.as_deref()) {
                req = req.header(hyper::header::PROXY_AUTHORIZATION, auth);
            }
            for (k, v) in headers {
                req = req.header(k.as_str(), v.as_str());
            }
            req.body(Full::new(body.clone())).map_err(|e| SendError::Url(format!("the request is invalid: {e}")))
        };
        let (mut sender, reused) = match self.checkout(&key) {
            Some(s) => (s, true),
            None => (self.connect(&key, proxy.as_ref()).await?, false),
        };
        let response = match sender.try_send_request(build()?).await {
            Ok(r) => r,
            // A kept-alive connection the server closed as it was taken: once more on a fresh
            // one (the server never answered on the old one).
            Err(e) if reused && (e.message().is_some() || e.error().is_incomplete_message()) => {
                sender = self.connect(&key, proxy.as_ref()).await?;
                sender.send_request(build()?).await.map_err(|e| SendError::Exchange(chain(&e)))?
            }
            Err(e) => return Err(SendError::Exchange(chain(e.error()))),
        };
        let (parts, incoming) = response.into_parts();
        let body = Limited::new(incoming, BODY_CAP).collect().await.map_err(|e| SendError::Body(chain(&*e)))?;
        let answer = Answer { status: parts.status, headers: parts.headers, body: body.to_bytes() };
        // Back into the pool before returning, so that whoever runs next finds it idle.
        if tokio::time::timeout(READY_WAIT, sender.ready()).await.is_ok_and(|r| r.is_ok()) {
            self.checkin(key, sender);
        }
        Ok(answer)
    }

    /// The most recently idle open connection to `key`, if any.
    fn checkout(&self, key: &Key) -> Option<SendRequest<Full<Bytes>>> {
        let mut idle = self.inner.idle.lock().ok()?;
        let list = idle.get_mut(key)?;
        while let Some(c) = list.pop() {
            if c.since.elapsed() < IDLE_AGE && !c.sender.is_closed() && c.sender.is_ready() {
                return Some(c.sender);
            }
        }
        None
    }

    /// Puts an idle connection back. A host's list is in the order connections went idle
    /// (checkout takes from the end): those past [`IDLE_AGE`] are at its start and dropped
    /// from there, so a checkin does not walk the whole pool — at a wave cap of 256 that walk,
    /// once per request, was a cost per request that grew with the cap. Closed connections
    /// are dropped as checkout meets them, or here when the list is full.
    fn checkin(&self, key: Key, sender: SendRequest<Full<Bytes>>) {
        let now = Instant::now();
        if let Ok(mut idle) = self.inner.idle.lock() {
            let list = idle.entry(key).or_default();
            let stale = list.iter().take_while(|c| now.saturating_duration_since(c.since) >= IDLE_AGE).count();
            list.drain(..stale);
            if list.len() >= POOL_SIZE {
                list.retain(|c| !c.sender.is_closed());
            }
            if list.len() < POOL_SIZE {
                list.push(Idle { sender, since: now });
            }
        }
    }

    /// Opens a connection (TCP, to the proxy if any, then a `CONNECT` tunnel and TLS for
    /// https) and starts its task.
    async fn connect(&self, key: &Key, proxy: Option<&Proxy>) -> Result<SendRequest<Full<Bytes>>, SendError> {
        let (https, host, port) = key;
        let (dial_host, dial_port) = proxy.map_or((host.as_str(), *port), |p| (p.host.as_str(), p.port));
        let mut tcp = tokio::net::TcpStream::connect((dial_host, dial_port)).await.map_err(|e| {
            SendError::Connect(crate::head(
                &match proxy {
                    Some(p) => format!("cannot reach the proxy {}: {e}", p.shown),
                    None => e.to_string(),
                },
                300,
            ))
        })?;
        let _ = tcp.set_nodelay(true);
        if let (true, Some(p)) = (*https, proxy) {
            tunnel(&mut tcp, host, *port, p).await?;
        }
        let handshake = |e: hyper::Error| SendError::Connect(chain(&e));
        if !*https {
            let (sender, conn) = hyper::client::conn::http1::handshake(TokioIo::new(tcp)).await.map_err(handshake)?;
            tokio::spawn(conn);
            return Ok(sender);
        }
        let tls = self.inner.tls.get_or_init(tls_connector).clone().map_err(SendError::Connect)?;
        let name = rustls::pki_types::ServerName::try_from(host.clone())
            .map_err(|e| SendError::Connect(format!("`{host}` is not a TLS server name: {e}")))?;
        let stream = tls.connect(name, tcp).await.map_err(|e| SendError::Connect(chain(&e)))?;
        let (sender, conn) = hyper::client::conn::http1::handshake(TokioIo::new(stream)).await.map_err(handshake)?;
        tokio::spawn(conn);
        Ok(sender)
    }
}

/// Asks the proxy for a tunnel to `host:port` and reads its answer head (a 2xx opens it).
async fn tunnel(tcp: &mut tokio::net::TcpStream, host: &str, port: u16, proxy: &Proxy) -> Result<(), SendError> {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    let target = if host.contains(':') { format!("[{host}]:{port}") } else { format!("{host}:{port}") };
    let mut head = format!("CONNECT {target} HTTP/1.1\r\nHost: {target}\r\n");
    if let Some(auth) = &proxy.auth {
        head.push_str(&format!("Proxy-Authorization: {auth}\r\n"));
    }
    head.push_str("\r\n");
    let broke =
        |e: std::io::Error| SendError::Connect(format!("the proxy {} broke off CONNECT {target}: {e}", proxy.shown));
    tcp.write_all(head.as_bytes()).await.map_err(broke)?;
    let mut answer = Vec::new();
    let mut buf = [0u8; 1024];
    // Read in chunks up to the blank line: after a 2xx head the proxy sends nothing until the
    // client speaks (TLS starts with the client's hello), so nothing of the tunnel is lost.
    while !answer.windows(4).any(|w| w == b"\r\n\r\n") {
        if answer.len() > CONNECT_HEAD_CAP {
            return Err(SendError::Connect(format!("the proxy {} answered CONNECT {target} with no end", proxy.shown)));
        }
        let n = tcp.read(&mut buf).await.map_err(broke)?;
        if n == 0 {
            return Err(SendError::Connect(format!("the proxy {} closed CONNECT {target} unanswered", proxy.shown)));
        }
        answer.extend_from_slice(&buf[..n]);
    }
    let text = String::from_utf8_lossy(&answer);
    let status = text.lines().next().unwrap_or("").trim();
    match status.split_whitespace().nth(1).and_then(|c| c.parse::<u16>().ok()) {
        Some(200..=299) => Ok(()),
        _ => Err(SendError::Connect(crate::head(
            &format!("the proxy {} answered CONNECT {target} with `{status}`", proxy.shown),
            300,
        ))),
    }
}

/// rustls with ring and the webpki roots (built once per client, on its first https request).
fn tls_connector() -> Result<tokio_rustls::TlsConnector, String> {
    let roots = rustls::RootCertStore { roots: webpki_roots::TLS_SERVER_ROOTS.to_vec() };
    let config = rustls::ClientConfig::builder_with_provider(Arc::new(rustls::crypto::ring::default_provider()))
        .with_safe_default_protocol_versions()
        .map_err(|e| format!("TLS setup failed: {e}"))?
        .with_root_certificates(roots)
        .with_no_client_auth();
    Ok(tokio_rustls::TlsConnector::from(Arc::new(config)))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn targets_are_read_from_urls() {
        let ((https, host, port), authority, path) = target("https://api.x.com/v1/chat?k=1").expect("a URL");
        assert_eq!(
            (https, host.as_str(), port, authority.as_str(), path.as_str()),
            (true, "api.x.com", 443, "api.x.com", "/v1/chat?k=1")
        );
        let ((https, host, port), authority, _) = target("http://[::1]:8080/v1").expect("a URL");
        assert_eq!((https, host.as_str(), port, authority.as_str()), (false, "::1", 8080, "[::1]:8080"));
        assert!(matches!(target("ftp://x/y"), Err(SendError::Url(_))));
    }

    #[test]
    fn the_tls_setup_builds() {
        assert!(tls_connector().is_ok());
    }
}
