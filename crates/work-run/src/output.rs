//! The one output writer: the only code in `work` that writes stdout.
//!
//! Every line and every `--json` document passes the process's [`Redactor`] here, once, for
//! every command. Writing never panics: a closed pipe (`work … | head`) ends the run quietly
//! as an interrupted one ([`WriteFailure::ClosedPipe`], exit 141), any other failure (a full
//! disk, `> /dev/full`) is remembered and turned into one `error:` line and exit 1 by
//! [`crate::status::exit_code`]. After the first failure nothing more is written.
//!
//! Lines on stderr go through [`err_line`], which is redacted the same way, writes above a
//! live progress display ([`crate::progress`]) and ignores a closed or full stderr (there is
//! nowhere left to say so).

#![allow(clippy::disallowed_macros, reason = "the one place that writes stdout")]

use serde_json::Value;
use std::io::{self, Write};
use std::sync::{Mutex, MutexGuard, OnceLock};
use work_runtime::redact::Redactor;

/// Why stdout could not be written.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum WriteFailure {
    /// The reader went away (`| head`): the run ends quietly as interrupted.
    ClosedPipe,
    /// Any other error (`ENOSPC` on `> /dev/full`, an I/O error): one `error:` line, exit 1.
    Failed(String),
}

#[derive(Default)]
struct Writer {
    redactor: Redactor,
    failure: Option<WriteFailure>,
    json: bool,
}

fn writer() -> MutexGuard<'static, Writer> {
    static W: OnceLock<Mutex<Writer>> = OnceLock::new();
    let m = W.get_or_init(|| Mutex::new(Writer { redactor: Redactor::from_env(), failure: None, json: false }));
    m.lock().unwrap_or_else(std::sync::PoisonError::into_inner)
}

/// Adds the secrets of a context (configured key variables) to what every line is redacted of.
pub fn set_redactor(r: &Redactor) {
    writer().redactor = r.clone();
}

/// The redactor in force (the environment's secrets, plus the configured ones once set).
pub fn redactor() -> Redactor {
    writer().redactor.clone()
}

fn write_bytes(w: &mut Writer, bytes: &[u8]) {
    if w.failure.is_some() {
        return;
    }
    let mut out = io::stdout().lock();
    if let Err(e) = out.write_all(bytes).and_then(|()| out.flush()) {
        w.failure = Some(match e.kind() {
            io::ErrorKind::BrokenPipe => WriteFailure::ClosedPipe,
            _ => WriteFailure::Failed(e.to_string()),
        });
    }
}

/// Writes one human line (redacted) on stdout.
pub fn line(text: impl AsRef<str>) {
    let mut w = writer();
    let mut s = w.redactor.redact(text.as_ref()).into_owned();
    s.push('\n');
    write_bytes(&mut w, s.as_bytes());
}

/// Writes one line of a workflow's human rendering of its result, or of what a command did
/// (`wrote work.toml`, `removed RUN`), on stdout. Under `-q` it is left out: the one final
/// line on stderr says the outcome, and `--json` (never affected) is the result to read.
pub fn human(text: impl AsRef<str>) {
    if crate::progress::verbosity() != crate::progress::Verbosity::Quiet {
        line(text);
    }
}

/// Writes one note for a person on stderr (which spec directory was picked, where a worker
/// pulls from); left out under `-q`. Errors and warnings go through [`err_line`] always.
pub fn note(text: &str) {
    if crate::progress::verbosity() != crate::progress::Verbosity::Quiet {
        err_line(text);
    }
}

/// Writes one JSON document (every string redacted, pretty-printed) on stdout: the `--json`
/// result, nothing else.
pub fn json(value: &Value) {
    let mut w = writer();
    w.json = true;
    let v = w.redactor.redact_json(value);
    match serde_json::to_string_pretty(&v) {
        Ok(mut s) => {
            s.push('\n');
            write_bytes(&mut w, s.as_bytes());
        }
        Err(e) => {
            drop(w);
            err_line(&format!("error: failed to encode the result as JSON: {e}"));
        }
    }
}

/// Writes one line (redacted) on stderr; a closed or full stderr is ignored.
pub fn err_line(text: &str) {
    let r = writer().redactor.clone();
    let text = r.redact(text);
    let text = crate::color::prefix(&text);
    crate::progress::suspended(|| {
        let _ = writeln!(io::stderr().lock(), "{text}");
    });
}

/// True once a `--json` document was written (a quiet run then says nothing more).
pub fn wrote_json() -> bool {
    writer().json
}

/// The first failure writing stdout, if any.
pub fn failure() -> Option<WriteFailure> {
    writer().failure.clone()
}
