//! The async HTTP/1.1 client under the HTTP backends: hyper-util's pooled client
//! (`client::legacy::Client`) on the caller's tokio runtime, rustls for `https://`, and the
//! proxies of the environment as hyper-util's `Matcher` reads them.
//!
//! The pool keeps at most [`POOL_SIZE`] idle connections per host (scheme, host, port), each
//! closed after [`IDLE_AGE`] idle; a connection goes back to it as soon as its answer has been
//! read, and a request on a kept-alive connection the server closed before answering is sent
//! again on a fresh one. The connector below only chooses the route: directly, to the proxy
//! for an `http://` target (the client then sends the whole URL), or through the proxy's
//! `CONNECT` tunnel (hyper-util's `Tunnel`) for an `https://` one, TLS inside.

use bytes::Bytes;
use http_body_util::{BodyExt, Full, Limited};
use hyper::rt::{Read, ReadBufCursor, Write};
use hyper::{HeaderMap, Request, StatusCode, Uri};
use hyper_util::client::legacy::connect::proxy::Tunnel;
use hyper_util::client::legacy::connect::{Connected, Connection, HttpConnector};
use hyper_util::client::proxy::matcher::{Intercept, Matcher};
use hyper_util::rt::{TokioExecutor, TokioIo, TokioTimer};
use std::future::Future;
use std::pin::Pin;
use std::sync::{Arc, OnceLock};
use std::task::{Context, Poll};
use std::time::Duration;
use tokio::net::TcpStream;
use tokio_rustls::client::TlsStream;
use tower_service::Service;

/// Idle connections kept per host by one [`Client`]: one per dispatch slot at wave caps up
/// to this size; a larger wave opens more but keeps only this many.
pub(crate) const POOL_SIZE: usize = 256;
/// How long an idle connection is kept before it is closed.
pub(crate) const IDLE_AGE: Duration = Duration::from_secs(60);
/// The largest response body read.
const BODY_CAP: usize = 16 * 1024 * 1024;
/// The longest a new connection waits for one going back to the pool.
const RETURN_WAIT: Duration = Duration::from_secs(1);

/// One backend's HTTP client: a keep-alive connection pool shared by all its requests
/// (cheap to clone; clones share the pool).
#[derive(Clone)]
pub(crate) struct Client {
    pooled: hyper_util::client::legacy::Client<Connector, Full<Bytes>>,
    proxies: Arc<Matcher>,
    counts: Arc<Counts>,
}

/// Per pool key (`scheme://authority`): the requests in flight and the connections open.
///
/// hyper-util's client puts a connection back into its pool from a task of its own once the
/// answer's body has been read, so a request made right after the previous one returned may
/// find the pool empty and dial a second connection while the first is on its way back. With
/// at least as many connections open as requests in flight, one of them is idle or about to
/// be: the connector waits for it to be handed over (at most [`RETURN_WAIT`]) instead of
/// dialing, so N sequential requests use one connection and a wave of N at most N.
#[derive(Default)]
struct Counts {
    by_key: std::sync::Mutex<std::collections::HashMap<String, (usize, usize)>>,
    changed: tokio::sync::Notify,
}

impl Counts {
    fn update(&self, key: &str, f: impl FnOnce(&mut (usize, usize))) {
        if let Ok(mut map) = self.by_key.lock() {
            f(map.entry(key.to_string()).or_default());
        }
        self.changed.notify_waiters();
    }

    /// Whether a connection to `key` is idle or going back to the pool.
    fn one_spare(&self, key: &str) -> bool {
        self.by_key.lock().ok().and_then(|m| m.get(key).copied()).is_some_and(|(busy, open)| open >= busy)
    }

    /// Waits while a connection to `key` is spare (at most [`RETURN_WAIT`]); whether the
    /// connector should still dial. The client hands a returning connection to the waiting
    /// request and moves this connect to a task of its own: there, outside the request's
    /// scope, it gives up instead of dialing a connection no one asked for.
    async fn wait_for_spare(&self, key: &str) -> bool {
        let deadline = tokio::time::Instant::now() + RETURN_WAIT;
        loop {
            let changed = self.changed.notified();
            tokio::pin!(changed);
            changed.as_mut().enable();
            if IN_REQUEST.try_with(|_| ()).is_err() {
                return false;
            }
            if !self.one_spare(key) {
                return true;
            }
            if tokio::time::timeout_at(deadline, changed).await.is_err() {
                return IN_REQUEST.try_with(|_| ()).is_ok();
            }
        }
    }
}

tokio::task_local! {
    /// Set while a request waits for its answer's head.
    static IN_REQUEST: ();
}

/// A request in flight, counted until it ends (or is dropped by a timeout).
struct InFlight<'a> {
    counts: &'a Counts,
    key: String,
}

impl Drop for InFlight<'_> {
    fn drop(&mut self) {
        self.counts.update(&self.key, |c| c.0 = c.0.saturating_sub(1));
    }
}

/// `scheme://authority` of a URI, as the client keys its pool.
fn pool_key(uri: &Uri) -> String {
    format!("{}://{}", uri.scheme_str().unwrap_or(""), uri.authority().map_or("", |a| a.as_str()))
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

/// Why the connector opened no connection (one line, never a proxy's credentials).
#[derive(Debug, thiserror::Error)]
#[error("{0}")]
struct ConnectFailure(String);

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

impl Client {
    /// A client with an empty pool, going through the proxies the environment names.
    pub(crate) fn new() -> Self {
        let proxies = Arc::new(Matcher::from_env());
        let mut http = HttpConnector::new();
        http.enforce_http(false);
        http.set_nodelay(true);
        let counts = Arc::new(Counts::default());
        let connector =
            Connector { http, proxies: proxies.clone(), tls: Arc::new(OnceLock::new()), counts: counts.clone() };
        let pooled = hyper_util::client::legacy::Client::builder(TokioExecutor::new())
            .pool_max_idle_per_host(POOL_SIZE)
            .pool_idle_timeout(IDLE_AGE)
            .pool_timer(TokioTimer::new())
            .build(connector);
        Self { pooled, proxies, counts }
    }

    /// POSTs `body` to `url` with `headers` and reads the answer whole.
    pub(crate) async fn post(&self, url: &str, headers: &[(String, String)], body: Bytes) -> Result<Answer, SendError> {
        let uri: Uri = url.parse().map_err(|e| SendError::Url(format!("`{url}` is not a URL: {e}")))?;
        if !matches!(uri.scheme_str(), Some("http" | "https")) {
            return Err(SendError::Url(format!("`{url}` is not an http:// or https:// URL")));
        }
        if uri.host().is_none_or(str::is_empty) {
            return Err(SendError::Url(format!("`{url}` has no host")));
        }
        let mut req = Request::post(uri.clone());
        // Through a proxy, an http:// request carries the proxy's credentials itself (an
        // https:// one sends them with its CONNECT).
        if uri.scheme_str() == Some("http")
            && let Some(auth) = self.proxies.intercept(&uri).as_ref().and_then(Intercept::basic_auth)
        {
            req = req.header(hyper::header::PROXY_AUTHORIZATION, auth.clone());
        }
        for (k, v) in headers {
            req = req.header(k.as_str(), v.as_str());
        }
        let req = req.body(Full::new(body)).map_err(|e| SendError::Url(format!("the request is invalid: {e}")))?;
        let key = pool_key(&uri);
        self.counts.update(&key, |c| c.0 += 1);
        let _in_flight = InFlight { counts: &self.counts, key };
        let response = IN_REQUEST.scope((), self.pooled.request(req)).await.map_err(|e| {
            if e.is_connect() { SendError::Connect(connect_reason(&e)) } else { SendError::Exchange(chain(&e)) }
        })?;
        let (parts, incoming) = response.into_parts();
        let body = Limited::new(incoming, BODY_CAP).collect().await.map_err(|e| SendError::Body(chain(&*e)))?;
        Ok(Answer { status: parts.status, headers: parts.headers, body: body.to_bytes() })
    }
}

/// The connector's own reason when it gave one, else the error's chain without the client's
/// "client error (Connect)".
fn connect_reason(e: &hyper_util::client::legacy::Error) -> String {
    let mut cur = std::error::Error::source(e);
    while let Some(s) = cur {
        if let Some(f) = s.downcast_ref::<ConnectFailure>() {
            return f.0.clone();
        }
        cur = s.source();
    }
    std::error::Error::source(e).map_or_else(|| chain(e), chain)
}

/// Opens the connections of one [`Client`]: directly, to the proxy, or through its tunnel.
#[derive(Clone)]
struct Connector {
    http: HttpConnector,
    proxies: Arc<Matcher>,
    tls: Arc<OnceLock<Result<tokio_rustls::TlsConnector, String>>>,
    counts: Arc<Counts>,
}

impl Service<Uri> for Connector {
    type Response = Stream;
    type Error = ConnectFailure;
    type Future = Pin<Box<dyn Future<Output = Result<Stream, ConnectFailure>> + Send>>;

    fn poll_ready(&mut self, _: &mut Context<'_>) -> Poll<Result<(), Self::Error>> {
        Poll::Ready(Ok(()))
    }

    fn call(&mut self, dst: Uri) -> Self::Future {
        Box::pin(self.clone().open(dst))
    }
}

impl Connector {
    async fn open(mut self, dst: Uri) -> Result<Stream, ConnectFailure> {
        let key = pool_key(&dst);
        if !self.counts.wait_for_spare(&key).await {
            return Err(ConnectFailure("a connection went back to the pool first".into()));
        }
        let mut stream = self.dial(dst).await?;
        self.counts.update(&key, |c| c.1 += 1);
        stream.open = Some((self.counts.clone(), key));
        Ok(stream)
    }

    async fn dial(&mut self, dst: Uri) -> Result<Stream, ConnectFailure> {
        let https = dst.scheme_str() == Some("https");
        let proxy = self.proxies.intercept(&dst);
        let tcp = match &proxy {
            None => self.http.call(dst.clone()).await.map_err(|e| ConnectFailure(chain(&e)))?,
            Some(p) => {
                let shown = shown(p.uri(), https);
                if p.uri().scheme_str() != Some("http") {
                    return Err(ConnectFailure(format!(
                        "the proxy {shown} is not an http:// proxy: only http:// proxies are supported"
                    )));
                }
                if https {
                    let mut tunnel = Tunnel::new(p.uri().clone(), self.http.clone());
                    if let Some(auth) = p.basic_auth() {
                        tunnel = tunnel.with_auth(auth.clone());
                    }
                    tunnel.call(dst.clone()).await.map_err(|e| tunnel_failure(&e, &shown, &dst))?
                } else {
                    self.http.call(p.uri().clone()).await.map_err(|e| {
                        ConnectFailure(crate::head(
                            &format!("cannot reach the proxy {shown}: {}", source_text(&e)),
                            300,
                        ))
                    })?
                }
            }
        };
        if !https {
            return Ok(Stream { io: Io::Plain(tcp), proxied: proxy.is_some(), open: None });
        }
        let tls = self.tls.get_or_init(tls_connector).clone().map_err(ConnectFailure)?;
        let host = dst.host().unwrap_or_default().trim_start_matches('[').trim_end_matches(']').to_string();
        let name = rustls::pki_types::ServerName::try_from(host.clone())
            .map_err(|e| ConnectFailure(format!("`{host}` is not a TLS server name: {e}")))?;
        let stream = tls.connect(name, tcp.into_inner()).await.map_err(|e| ConnectFailure(chain(&e)))?;
        Ok(Stream { io: Io::Tls(Box::new(TokioIo::new(stream))), proxied: false, open: None })
    }
}

/// The innermost reason of an error (the OS's, for a refused connection).
fn source_text(e: &(dyn std::error::Error + 'static)) -> String {
    let mut cur = e;
    while let Some(s) = cur.source() {
        cur = s;
    }
    cur.to_string()
}

/// Why a `CONNECT` tunnel did not open, naming the proxy. hyper-util does not export its
/// tunnel's error type: a source that is an I/O error broke the exchange, any other source is
/// the connection to the proxy, and without one the proxy answered something other than 200.
fn tunnel_failure(e: &(dyn std::error::Error + 'static), shown: &str, dst: &Uri) -> ConnectFailure {
    let target = format!("{}:{}", dst.host().unwrap_or_default(), dst.port_u16().unwrap_or(443));
    let text = match e.source() {
        Some(io) if io.is::<std::io::Error>() => format!("the proxy {shown} broke off CONNECT {target}: {io}"),
        Some(inner) => format!("cannot reach the proxy {shown}: {}", source_text(inner)),
        None if e.to_string().contains("authorization required") => {
            format!("the proxy {shown} answered CONNECT {target} with 407 (proxy authentication required)")
        }
        None => format!("the proxy {shown} refused CONNECT {target} ({e})"),
    };
    ConnectFailure(crate::head(&text, 300))
}

/// `SCHEME://HOST[:PORT] (from VAR)` of a proxy, for reasons (the matcher keeps no
/// credentials in the URI).
fn shown(proxy: &Uri, https: bool) -> String {
    let url = format!("{}://{}", proxy.scheme_str().unwrap_or("http"), proxy.authority().map_or("", |a| a.as_str()));
    match source(proxy, https) {
        Some(var) => format!("{url} (from {var})"),
        None => url,
    }
}

/// The variable that named `proxy`, read in the matcher's order.
fn source(proxy: &Uri, https: bool) -> Option<&'static str> {
    let (names, probe) = if https {
        (["HTTPS_PROXY", "https_proxy", "ALL_PROXY", "all_proxy"], Uri::from_static("https://probe.invalid/"))
    } else {
        (["HTTP_PROXY", "http_proxy", "ALL_PROXY", "all_proxy"], Uri::from_static("http://probe.invalid/"))
    };
    names.into_iter().find(|n| {
        std::env::var(n)
            .ok()
            .and_then(|v| Matcher::builder().all(v).build().intercept(&probe))
            .is_some_and(|i| i.uri() == proxy)
    })
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

/// One open connection, plain or TLS.
enum Io {
    Plain(TokioIo<TcpStream>),
    Tls(Box<TokioIo<TlsStream<TcpStream>>>),
}

/// A connection and whether it goes to a proxy that wants whole URLs.
struct Stream {
    io: Io,
    proxied: bool,
    /// Counted among the open connections of its key until dropped.
    open: Option<(Arc<Counts>, String)>,
}

impl Drop for Stream {
    fn drop(&mut self) {
        if let Some((counts, key)) = &self.open {
            counts.update(key, |c| c.1 = c.1.saturating_sub(1));
        }
    }
}

impl Connection for Stream {
    fn connected(&self) -> Connected {
        let connected = match &self.io {
            Io::Plain(s) => s.connected(),
            Io::Tls(s) => s.inner().get_ref().0.connected(),
        };
        connected.proxy(self.proxied)
    }
}

impl Read for Stream {
    fn poll_read(self: Pin<&mut Self>, cx: &mut Context<'_>, buf: ReadBufCursor<'_>) -> Poll<std::io::Result<()>> {
        match &mut self.get_mut().io {
            Io::Plain(s) => Pin::new(s).poll_read(cx, buf),
            Io::Tls(s) => Pin::new(&mut **s).poll_read(cx, buf),
        }
    }
}

impl Write for Stream {
    fn poll_write(self: Pin<&mut Self>, cx: &mut Context<'_>, buf: &[u8]) -> Poll<std::io::Result<usize>> {
        match &mut self.get_mut().io {
            Io::Plain(s) => Pin::new(s).poll_write(cx, buf),
            Io::Tls(s) => Pin::new(&mut **s).poll_write(cx, buf),
        }
    }

    fn poll_flush(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<std::io::Result<()>> {
        match &mut self.get_mut().io {
            Io::Plain(s) => Pin::new(s).poll_flush(cx),
            Io::Tls(s) => Pin::new(&mut **s).poll_flush(cx),
        }
    }

    fn poll_shutdown(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<std::io::Result<()>> {
        match &mut self.get_mut().io {
            Io::Plain(s) => Pin::new(s).poll_shutdown(cx),
            Io::Tls(s) => Pin::new(&mut **s).poll_shutdown(cx),
        }
    }

    fn is_write_vectored(&self) -> bool {
        match &self.io {
            Io::Plain(s) => s.is_write_vectored(),
            Io::Tls(s) => s.is_write_vectored(),
        }
    }

    fn poll_write_vectored(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        bufs: &[std::io::IoSlice<'_>],
    ) -> Poll<std::io::Result<usize>> {
        match &mut self.get_mut().io {
            Io::Plain(s) => Pin::new(s).poll_write_vectored(cx, bufs),
            Io::Tls(s) => Pin::new(&mut **s).poll_write_vectored(cx, bufs),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_tls_setup_builds() {
        assert!(tls_connector().is_ok());
    }

    #[test]
    fn a_proxy_is_shown_without_credentials() {
        let p = Matcher::builder().all("http://u:s3cret@proxy.corp:3128").build();
        let i = p.intercept(&Uri::from_static("https://api.x.com/")).expect("proxied");
        assert_eq!(shown(i.uri(), true), "http://proxy.corp:3128");
        assert_eq!(i.basic_auth().map(|a| a.as_bytes().to_vec()), Some(b"Basic dTpzM2NyZXQ=".to_vec()));
    }

    #[test]
    fn proxy_credentials_are_percent_decoded_and_sent_as_basic() {
        let p = Matcher::builder().all("http://us%40r:p%3Ass@h:3128").build();
        let i = p.intercept(&Uri::from_static("https://api.x.com/")).expect("proxied");
        assert_eq!(i.basic_auth().map(|a| a.as_bytes().to_vec()), Some(b"Basic dXNAcjpwOnNz".to_vec()), "us@r:p:ss");
    }
}
