//! The HTTP backends honour the proxy variables: `HTTP_PROXY` carries an `http://` endpoint
//! (the request goes to the proxy in absolute form), `HTTPS_PROXY` opens a `CONNECT` tunnel
//! with the proxy's credentials, a dead proxy stops the dispatch naming it, and `NO_PROXY`
//! goes around it. The scripted model server plays the proxy for `http://` (a proxy that
//! answers itself is what the client sees); the endpoints' host names do not resolve, so only
//! a request that went through the proxy can be answered.

use crate::support::Scenario;
use serde_json::{Value, json};
use std::io::{Read, Write};
use std::net::TcpListener;
use std::sync::{Arc, Mutex};
use work_model_server::{ModelServer, Rule, Script, Step};

const PROXY_VARS: [&str; 8] =
    ["HTTP_PROXY", "http_proxy", "HTTPS_PROXY", "https_proxy", "ALL_PROXY", "all_proxy", "NO_PROXY", "no_proxy"];

fn answering() -> ModelServer {
    ModelServer::start(Script::new(vec![Rule::new("list the items", vec![Step::Answer(json!({"items": []}))])]))
        .expect("server")
}

/// `work agents try --agent m` with agent `m` = `spec` at `base_url`, under `env` (every other
/// proxy variable removed); (code, stdout parsed, stderr).
fn try_agent(spec: &str, base_url: &str, env: &[(&str, String)]) -> (i32, Value, String) {
    let s = Scenario::new();
    s.write("work.toml", &format!("[agents.m]\nspec = \"{spec}\"\nbase_url = \"{base_url}\"\n"));
    s.write(
        ".agents/schema.json",
        r#"{"type": "object", "required": ["items"], "properties": {"items": {"type": "array"}}}"#,
    );
    let mut cmd = s.work();
    for v in PROXY_VARS {
        cmd.env_remove(v);
    }
    let out = cmd
        .env("ANTHROPIC_API_KEY", "sk-ant-scripted-0123456789")
        .envs(env.iter().map(|(k, v)| (*k, v.as_str())))
        .args(["agents", "try", "--agent", "m", "--schema", ".agents/schema.json", "--json", "brief: list the items"])
        .output()
        .expect("run work");
    let stdout = String::from_utf8_lossy(&out.stdout).into_owned();
    let stderr = String::from_utf8_lossy(&out.stderr).into_owned();
    let v = serde_json::from_str(&stdout).unwrap_or_else(|e| panic!("stdout is not JSON ({e}):\n{stdout}\n{stderr}"));
    (out.status.code().unwrap_or(-1), v, stderr)
}

#[test]
fn http_proxy_carries_both_http_backends_to_an_unresolvable_host() {
    for (spec, base, path) in [
        ("openai:scripted", "http://model.invalid/v1", "http://model.invalid/v1/chat/completions"),
        ("anthropic:claude-scripted", "http://model.invalid:8080", "http://model.invalid:8080/v1/messages"),
    ] {
        let server = answering();
        let (code, v, err) = try_agent(spec, base, &[("HTTP_PROXY", server.base_url())]);
        assert_eq!((code, v["outcome"].as_str()), (0, Some("ok")), "{spec}: {v:#}\n{err}");
        let got = server.requests();
        assert_eq!(got.len(), 1, "{spec}");
        assert_eq!(got[0].path, path, "{spec}: the proxy got the whole URL");
        assert_eq!(got[0].header("host"), Some(path.split('/').nth(2).unwrap_or("")), "{spec}");
    }
}

#[test]
fn a_dead_proxy_stops_the_dispatch_and_no_proxy_goes_around_it() {
    // Nothing listens on the proxy's port: the dispatch fails naming it.
    let dead = TcpListener::bind("127.0.0.1:0").expect("bind");
    let dead_url = format!("http://{}", dead.local_addr().expect("addr"));
    drop(dead);
    let server = answering();
    let (code, v, err) = try_agent("openai:scripted", &server.v1_url(), &[("HTTP_PROXY", dead_url.clone())]);
    assert_ne!(code, 0, "{v:#}\n{err}");
    let reason = v["reason"].as_str().unwrap_or_default();
    assert!(reason.contains(&format!("cannot reach the proxy {dead_url} (from HTTP_PROXY)")), "{v:#}");
    assert!(server.requests().is_empty(), "nothing went around the proxy");
    // The honest twins: the endpoint's host is in NO_PROXY (by address, or in a CIDR range),
    // so the dead proxy is not used.
    for no_proxy in [("no_proxy", "localhost,127.0.0.1"), ("NO_PROXY", "10.0.0.0/8, 127.0.0.0/8")] {
        let server = answering();
        let (code, v, err) = try_agent(
            "openai:scripted",
            &server.v1_url(),
            &[("http_proxy", dead_url.clone()), (no_proxy.0, no_proxy.1.into())],
        );
        assert_eq!((code, v["outcome"].as_str()), (0, Some("ok")), "{no_proxy:?}: {v:#}\n{err}");
        assert_eq!(server.requests()[0].path, "/v1/chat/completions", "{no_proxy:?}: sent directly");
    }
}

/// A proxy that records each request head and refuses every tunnel with 407.
fn refusing_proxy() -> (String, Arc<Mutex<Vec<String>>>) {
    let listener = TcpListener::bind("127.0.0.1:0").expect("bind");
    let url = listener.local_addr().expect("addr").to_string();
    let heads = Arc::new(Mutex::new(vec![]));
    let seen = heads.clone();
    std::thread::spawn(move || {
        for mut conn in listener.incoming().flatten() {
            let mut head = Vec::new();
            let mut buf = [0u8; 1024];
            while !head.windows(4).any(|w| w == b"\r\n\r\n") {
                match conn.read(&mut buf) {
                    Ok(0) | Err(_) => break,
                    Ok(n) => head.extend_from_slice(&buf[..n]),
                }
            }
            seen.lock().expect("lock").push(String::from_utf8_lossy(&head).into_owned());
            let _ = conn.write_all(b"HTTP/1.1 407 Proxy Authentication Required\r\nContent-Length: 0\r\n\r\n");
        }
    });
    (url, heads)
}

#[test]
fn https_proxy_opens_a_connect_tunnel_with_the_proxys_credentials() {
    let (addr, heads) = refusing_proxy();
    let (code, v, err) = try_agent(
        "openai:scripted",
        "https://api.example.invalid/v1",
        &[("HTTPS_PROXY", format!("http://u:s3cret@{addr}"))],
    );
    assert_ne!(code, 0, "{v:#}\n{err}");
    let reason = v["reason"].as_str().unwrap_or_default();
    assert!(
        reason
            .contains(&format!("the proxy http://{addr} (from HTTPS_PROXY) answered CONNECT api.example.invalid:443"))
            && reason.contains("407"),
        "{v:#}"
    );
    let all = format!("{v}\n{err}");
    assert!(!all.contains("s3cret") && !all.contains("dTpzM2NyZXQ="), "the proxy's credentials are never shown: {all}");
    let heads = heads.lock().expect("lock").clone();
    assert!(!heads.is_empty(), "the proxy was asked");
    assert!(heads[0].starts_with("CONNECT api.example.invalid:443 HTTP/1.1\r\n"), "{heads:?}");
    assert!(heads[0].contains("Proxy-Authorization: Basic dTpzM2NyZXQ=\r\n"), "u:s3cret: {heads:?}");
}
