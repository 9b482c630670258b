//! `work-model-server SCRIPT.json [PORT]`: serves a script on 127.0.0.1 and prints the port,
//! then every request's API, rule and step on stderr, until killed. For trying a real CLI by
//! hand against the same server the tests use.

use std::process::ExitCode;
use work_model_server::{ModelServer, Script};

fn main() -> ExitCode {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let Some(path) = args.first() else {
        eprintln!("usage: work-model-server SCRIPT.json [PORT]");
        return ExitCode::from(2);
    };
    let script: Script = match std::fs::read_to_string(path)
        .map_err(|e| e.to_string())
        .and_then(|t| serde_json::from_str(&t).map_err(|e| e.to_string()))
    {
        Ok(s) => s,
        Err(e) => {
            eprintln!("error: failed to read the script {path}: {e}");
            return ExitCode::from(2);
        }
    };
    let port = args.get(1).and_then(|p| p.parse().ok()).unwrap_or(0);
    let server = match ModelServer::start_on(port, script) {
        Ok(s) => s,
        Err(e) => {
            eprintln!("error: failed to listen on 127.0.0.1:{port}: {e}");
            return ExitCode::from(2);
        }
    };
    #[allow(clippy::disallowed_macros, reason = "a test tool outside the product: it prints its port for the caller")]
    {
        println!("{}", server.port());
    }
    let mut seen = 0;
    loop {
        std::thread::sleep(std::time::Duration::from_millis(200));
        let reqs = server.requests();
        for r in &reqs[seen..] {
            eprintln!("{:?} {} {} rule={:?} step={:?}", r.api, r.method, r.path, r.rule, r.step);
        }
        seen = reqs.len();
    }
}
