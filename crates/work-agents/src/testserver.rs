//! A scripted HTTP server for the HTTP backends' tests: loopback only, bounded in
//! connections and lifetime, every request recorded. [`TestServer::start`] answers one
//! scripted reply per connection and closes it; [`TestServer::start_keep_alive`] keeps each
//! connection open for further requests (HTTP/1.1 keep-alive) and counts accepted connections.

use std::collections::VecDeque;
use std::io::{BufRead, BufReader, Read, Write};
use std::net::{TcpListener, TcpStream};
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

/// The longest a server lives.
const LIFETIME: Duration = Duration::from_secs(60);

/// One scripted reply.
#[derive(Debug, Clone)]
pub(crate) struct Reply {
    pub status: u16,
    pub headers: Vec<(String, String)>,
    pub body: String,
    /// Wait this long before answering (a hang, for timeout tests).
    pub delay: Duration,
}

impl Reply {
    /// A JSON reply.
    pub fn json(status: u16, body: serde_json::Value) -> Self {
        Self { status, headers: vec![], body: body.to_string(), delay: Duration::ZERO }
    }

    /// A raw text reply.
    pub fn text(status: u16, body: &str) -> Self {
        Self { status, headers: vec![], body: body.to_string(), delay: Duration::ZERO }
    }

    /// Adds a header.
    pub fn header(mut self, k: &str, v: &str) -> Self {
        self.headers.push((k.into(), v.into()));
        self
    }

    /// Delays the answer.
    pub fn delayed(mut self, d: Duration) -> Self {
        self.delay = d;
        self
    }
}

/// One request the server received.
#[derive(Debug, Clone)]
pub(crate) struct Recorded {
    pub path: String,
    /// Header names lowercased.
    pub headers: Vec<(String, String)>,
    pub body: String,
}

impl Recorded {
    /// A header's value.
    pub fn header(&self, name: &str) -> Option<&str> {
        self.headers.iter().find(|(k, _)| k == name).map(|(_, v)| v.as_str())
    }

    /// The body as JSON.
    pub fn json(&self) -> serde_json::Value {
        serde_json::from_str(&self.body).expect("the request body is JSON")
    }
}

/// A running server; stops when dropped.
pub(crate) struct TestServer {
    port: u16,
    requests: Arc<Mutex<Vec<Recorded>>>,
    stop: Arc<AtomicBool>,
    connections: Arc<AtomicUsize>,
}

impl TestServer {
    /// Starts a server on 127.0.0.1 answering `replies` in order (then 500s).
    pub fn start(replies: Vec<Reply>) -> Self {
        let listener = TcpListener::bind("127.0.0.1:0").expect("bind loopback");
        listener.set_nonblocking(true).expect("nonblocking");
        let port = listener.local_addr().expect("addr").port();
        let requests = Arc::new(Mutex::new(Vec::new()));
        let stop = Arc::new(AtomicBool::new(false));
        let (reqs, stopped) = (requests.clone(), stop.clone());
        let max_connections = replies.len() + 4;
        std::thread::spawn(move || {
            let started = Instant::now();
            let mut replies = replies.into_iter();
            let mut served = 0;
            while !stopped.load(Ordering::SeqCst) && started.elapsed() < LIFETIME && served < max_connections {
                match listener.accept() {
                    Ok((stream, _)) => {
                        served += 1;
                        let reply = replies.next().unwrap_or_else(|| Reply::text(500, "no scripted reply left"));
                        serve(stream, reply, &reqs);
                    }
                    Err(_) => std::thread::sleep(Duration::from_millis(5)),
                }
            }
        });
        Self { port, requests, stop, connections: Arc::new(AtomicUsize::new(0)) }
    }

    /// Starts a keep-alive server on 127.0.0.1: every accepted connection is served on its own
    /// thread, request after request, each answered with the next of `replies` (then 500s).
    pub fn start_keep_alive(replies: Vec<Reply>) -> Self {
        let listener = TcpListener::bind("127.0.0.1:0").expect("bind loopback");
        listener.set_nonblocking(true).expect("nonblocking");
        let port = listener.local_addr().expect("addr").port();
        let requests = Arc::new(Mutex::new(Vec::new()));
        let stop = Arc::new(AtomicBool::new(false));
        let connections = Arc::new(AtomicUsize::new(0));
        let max_connections = replies.len() + 4;
        let queue = Arc::new(Mutex::new(VecDeque::from(replies)));
        let (reqs, stopped, count) = (requests.clone(), stop.clone(), connections.clone());
        std::thread::spawn(move || {
            let started = Instant::now();
            while !stopped.load(Ordering::SeqCst)
                && started.elapsed() < LIFETIME
                && count.load(Ordering::SeqCst) < max_connections
            {
                match listener.accept() {
                    Ok((stream, _)) => {
                        count.fetch_add(1, Ordering::SeqCst);
                        let (queue, reqs, stopped) = (queue.clone(), reqs.clone(), stopped.clone());
                        std::thread::spawn(move || serve_keep_alive(stream, &queue, &reqs, &stopped));
                    }
                    Err(_) => std::thread::sleep(Duration::from_millis(5)),
                }
            }
        });
        Self { port, requests, stop, connections }
    }

    /// TCP connections accepted so far (keep-alive servers only).
    pub fn connections(&self) -> usize {
        self.connections.load(Ordering::SeqCst)
    }

    /// The base URL (`http://127.0.0.1:PORT/v1`).
    pub fn url(&self) -> String {
        format!("http://127.0.0.1:{}/v1", self.port)
    }

    /// What was received so far.
    pub fn requests(&self) -> Vec<Recorded> {
        self.requests.lock().map(|r| r.clone()).unwrap_or_default()
    }
}

impl Drop for TestServer {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::SeqCst);
    }
}

fn serve(stream: TcpStream, reply: Reply, requests: &Mutex<Vec<Recorded>>) {
    let _ = stream.set_nonblocking(false);
    let _ = stream.set_read_timeout(Some(Duration::from_secs(5)));
    let mut reader = BufReader::new(match stream.try_clone() {
        Ok(s) => s,
        Err(_) => return,
    });
    if let Some(recorded) = read_request(&mut reader) {
        if let Ok(mut r) = requests.lock() {
            r.push(recorded);
        }
        write_reply(stream, &reply, false);
    }
}

fn serve_keep_alive(
    stream: TcpStream,
    queue: &Mutex<VecDeque<Reply>>,
    requests: &Mutex<Vec<Recorded>>,
    stop: &AtomicBool,
) {
    let _ = stream.set_nonblocking(false);
    let _ = stream.set_read_timeout(Some(Duration::from_secs(5)));
    let mut reader = BufReader::new(match stream.try_clone() {
        Ok(s) => s,
        Err(_) => return,
    });
    while !stop.load(Ordering::SeqCst) {
        let Some(recorded) = read_request(&mut reader) else { return };
        if let Ok(mut r) = requests.lock() {
            r.push(recorded);
        }
        let reply = queue.lock().ok().and_then(|mut q| q.pop_front());
        let reply = reply.unwrap_or_else(|| Reply::text(500, "no scripted reply left"));
        match stream.try_clone() {
            Ok(s) => write_reply(s, &reply, true),
            Err(_) => return,
        }
    }
}

/// Reads one request; `None` at end of stream or on a read error.
fn read_request(reader: &mut BufReader<TcpStream>) -> Option<Recorded> {
    let mut line = String::new();
    match reader.read_line(&mut line) {
        Ok(0) | Err(_) => return None,
        Ok(_) => {}
    }
    let path = line.split_whitespace().nth(1).unwrap_or("").to_string();
    let mut headers = Vec::new();
    loop {
        let mut h = String::new();
        match reader.read_line(&mut h) {
            Ok(0) | Err(_) => break,
            Ok(_) if h.trim().is_empty() => break,
            Ok(_) => {
                if let Some((k, v)) = h.split_once(':') {
                    headers.push((k.trim().to_ascii_lowercase(), v.trim().to_string()));
                }
            }
        }
    }
    let find = |n: &str| headers.iter().find(|(k, _)| k == n).map(|(_, v)| v.clone());
    let mut body = Vec::new();
    if let Some(len) = find("content-length").and_then(|l| l.parse::<usize>().ok()) {
        body.resize(len.min(64 * 1024 * 1024), 0);
        let _ = reader.read_exact(&mut body);
    } else if find("transfer-encoding").is_some_and(|t| t.contains("chunked")) {
        read_chunked(reader, &mut body);
    }
    Some(Recorded { path, headers, body: String::from_utf8_lossy(&body).into_owned() })
}

fn read_chunked(reader: &mut BufReader<TcpStream>, body: &mut Vec<u8>) {
    loop {
        let mut size = String::new();
        if reader.read_line(&mut size).is_err() {
            break;
        }
        let n = usize::from_str_radix(size.trim(), 16).unwrap_or(0);
        if n == 0 {
            let mut end = String::new();
            let _ = reader.read_line(&mut end);
            break;
        }
        let mut chunk = vec![0; n];
        if reader.read_exact(&mut chunk).is_err() {
            break;
        }
        body.extend_from_slice(&chunk);
        let mut crlf = String::new();
        let _ = reader.read_line(&mut crlf);
    }
}

fn write_reply(mut stream: TcpStream, reply: &Reply, keep_alive: bool) {
    if !reply.delay.is_zero() {
        std::thread::sleep(reply.delay);
    }
    let connection = if keep_alive { "keep-alive" } else { "close" };
    let mut out = format!(
        "HTTP/1.1 {} X\r\ncontent-type: application/json\r\ncontent-length: {}\r\nconnection: {connection}\r\n",
        reply.status,
        reply.body.len()
    );
    for (k, v) in &reply.headers {
        out.push_str(&format!("{k}: {v}\r\n"));
    }
    out.push_str("\r\n");
    out.push_str(&reply.body);
    let _ = stream.write_all(out.as_bytes());
    let _ = stream.flush();
}
