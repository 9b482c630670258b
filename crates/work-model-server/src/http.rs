//! Minimal HTTP/1.1 on a blocking socket: one request per connection (`connection: close`).

use std::io::{BufRead, BufReader, Read, Write};
use std::net::TcpStream;
use std::time::Duration;

/// The largest body read.
const MAX_BODY: usize = 64 * 1024 * 1024;

/// One parsed request.
#[derive(Debug, Clone)]
pub struct HttpRequest {
    /// `POST`, `GET`, …
    pub method: String,
    /// The path with its query (`/v1/messages?beta=true`).
    pub path: String,
    /// Header names lowercased, in order.
    pub headers: Vec<(String, String)>,
    /// The body.
    pub body: Vec<u8>,
}

impl HttpRequest {
    /// A header's value.
    pub fn header(&self, name: &str) -> Option<&str> {
        self.headers.iter().find(|(k, _)| k == name).map(|(_, v)| v.as_str())
    }
}

/// Reads one request; `None` when the peer sent nothing usable.
pub fn read_request(stream: &TcpStream) -> Option<HttpRequest> {
    let _ = stream.set_read_timeout(Some(Duration::from_secs(30)));
    let mut reader = BufReader::new(stream.try_clone().ok()?);
    let mut line = String::new();
    reader.read_line(&mut line).ok()?;
    let mut words = line.split_whitespace();
    let method = words.next()?.to_string();
    let path = words.next()?.to_string();
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
    let mut req = HttpRequest { method, path, headers, body: Vec::new() };
    if let Some(len) = req.header("content-length").and_then(|l| l.parse::<usize>().ok()) {
        req.body.resize(len.min(MAX_BODY), 0);
        reader.read_exact(&mut req.body).ok()?;
    } else if req.header("transfer-encoding").is_some_and(|t| t.contains("chunked")) {
        req.body = read_chunked(&mut reader)?;
    }
    Some(req)
}

fn read_chunked(reader: &mut impl BufRead) -> Option<Vec<u8>> {
    let mut body = Vec::new();
    loop {
        let mut size = String::new();
        reader.read_line(&mut size).ok()?;
        let n = usize::from_str_radix(size.trim().split(';').next().unwrap_or("0"), 16).ok()?;
        if n == 0 {
            let mut end = String::new();
            let _ = reader.read_line(&mut end);
            return Some(body);
        }
        if body.len() + n > MAX_BODY {
            return None;
        }
        let mut chunk = vec![0; n];
        reader.read_exact(&mut chunk).ok()?;
        body.extend_from_slice(&chunk);
        let mut crlf = String::new();
        reader.read_line(&mut crlf).ok()?;
    }
}

/// Writes a whole response.
pub fn respond(stream: &mut TcpStream, status: u16, content_type: &str, body: &str) {
    let head = format!(
        "HTTP/1.1 {status} {}\r\ncontent-type: {content_type}\r\ncontent-length: {}\r\nconnection: close\r\n\r\n",
        reason(status),
        body.len()
    );
    let _ = stream.write_all(head.as_bytes());
    let _ = stream.write_all(body.as_bytes());
    let _ = stream.flush();
}

/// Starts an SSE response (no length: the stream ends when the connection closes).
pub fn start_sse(stream: &mut TcpStream) -> bool {
    let head =
        "HTTP/1.1 200 OK\r\ncontent-type: text/event-stream\r\ncache-control: no-cache\r\nconnection: close\r\n\r\n";
    stream.write_all(head.as_bytes()).is_ok()
}

/// Writes one SSE event (`event:` line when `name` is given).
pub fn event(stream: &mut TcpStream, name: Option<&str>, data: &serde_json::Value) -> bool {
    let mut s = String::new();
    if let Some(n) = name {
        s.push_str(&format!("event: {n}\n"));
    }
    s.push_str(&format!("data: {data}\n\n"));
    stream.write_all(s.as_bytes()).and_then(|()| stream.flush()).is_ok()
}

/// Writes an SSE data line as is (`[DONE]`).
pub fn raw_data(stream: &mut TcpStream, data: &str) {
    let _ = stream.write_all(format!("data: {data}\n\n").as_bytes());
    let _ = stream.flush();
}

fn reason(status: u16) -> &'static str {
    match status {
        200 => "OK",
        400 => "Bad Request",
        401 => "Unauthorized",
        404 => "Not Found",
        429 => "Too Many Requests",
        500 => "Internal Server Error",
        503 => "Service Unavailable",
        529 => "Overloaded",
        _ => "Status",
    }
}
