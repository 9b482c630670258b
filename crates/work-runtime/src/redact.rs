//! Secret redaction. Every string the runtime persists (events, dispatch records, journals
//! written through the run) and every line `work` prints passes through a [`Redactor`].
//!
//! A secret is caught whole and in the altered forms text takes on its way to a file or a
//! line: case-folded (`meta.md` keeps lower-cased blocker text), cut (a capped stderr tail,
//! a one-line summary ending in `…`), and turned into a file name (a label whose punctuation
//! became `-`). Matching runs on a normalised form of both the text and the secrets (ASCII
//! letters lower-cased, every other ASCII character `-`, other bytes as they are), so any
//! run of [`FRAGMENT`] or more normalised bytes of a secret is replaced, not only the whole.
//!
//! A secret is also caught encoded ([`encoded_forms`]): reversed, rot13, hex, URL-encoded, and
//! base64 (standard and URL-safe alphabets) at each of the three alignments a secret can take
//! inside longer encoded data — each form matched the same way, by any [`FRAGMENT`]-byte run.
//! And it is caught spaced out: any [`FRAGMENT`] letters and digits of a secret or of one of
//! its forms in order, whatever stands between them (`s k - l i v e …`, `sk.li.ve`, hex
//! split into pairs).

use std::borrow::Cow;
use std::collections::HashSet;

/// The text secrets are replaced with.
pub const REDACTED: &str = "[REDACTED]";

/// The replacement inside a file name (no brackets).
pub const REDACTED_NAME: &str = "redacted";

/// The shortest run of a secret that is redacted when it appears on its own (a cut or
/// altered copy). Whole secrets shorter than this (down to [`MIN_SECRET`]) are redacted whole.
pub const FRAGMENT: usize = 10;

/// Secrets shorter than this are ignored (they would redact noise).
pub const MIN_SECRET: usize = 6;

/// Replaces known secret values with [`REDACTED`].
#[derive(Debug, Clone, Default)]
pub struct Redactor {
    secrets: Vec<String>,
    /// Every [`FRAGMENT`]-byte window of every normalised secret that has enough letters or
    /// digits to mean something.
    windows: HashSet<[u8; FRAGMENT]>,
    /// Normalised secrets shorter than [`FRAGMENT`], matched whole.
    short: Vec<Vec<u8>>,
    /// Every [`FRAGMENT`]-byte window of the letters and digits alone (lower-cased) of every
    /// secret and form at least that long: matched against the text's letters and digits alone.
    spaced: HashSet<[u8; FRAGMENT]>,
}

/// True for environment variable names that hold secrets by convention.
pub fn is_secret_var(name: &str) -> bool {
    let n = name.to_ascii_uppercase();
    ["SECRET", "TOKEN", "PASSWORD", "PASSWD", "CREDENTIAL", "API_KEY", "APIKEY", "ACCESS_KEY", "PRIVATE_KEY"]
        .iter()
        .any(|s| n.contains(s))
        || n.ends_with("_KEY")
}

fn norm(b: u8) -> u8 {
    if b.is_ascii_alphanumeric() {
        b.to_ascii_lowercase()
    } else if b.is_ascii() {
        b'-'
    } else {
        b
    }
}

/// The encoded forms of `secret` an agent could smuggle it out in: reversed, rot13, hex,
/// URL-encoded, and base64 (standard and URL-safe) at each alignment — for an alignment, the
/// part of the encoding that depends on the secret's bytes alone (the characters shared with
/// the bytes before or after it left out).
pub fn encoded_forms(secret: &str) -> Vec<String> {
    use base64::Engine;
    let bytes = secret.as_bytes();
    let mut forms = vec![
        secret.chars().rev().collect::<String>(),
        secret
            .chars()
            .map(|c| match c {
                'a'..='m' | 'A'..='M' => (c as u8 + 13) as char,
                'n'..='z' | 'N'..='Z' => (c as u8 - 13) as char,
                _ => c,
            })
            .collect(),
        hex::encode(bytes),
        bytes
            .iter()
            .map(|&b| if b.is_ascii_alphanumeric() { (b as char).to_string() } else { format!("%{b:02X}") })
            .collect(),
    ];
    for engine in [&base64::engine::general_purpose::STANDARD, &base64::engine::general_purpose::URL_SAFE] {
        for lead in 0..3usize {
            let mut data = vec![0u8; lead];
            data.extend_from_slice(bytes);
            let enc = engine.encode(&data);
            // Characters wholly inside the secret: after the lead's bits, before the padding
            // and the last partial group (which the bytes after it would change).
            let start = (lead * 8).div_ceil(6);
            let end = (data.len() * 8) / 6;
            if let Some(inner) = enc.get(start..end) {
                forms.push(inner.to_string());
            }
        }
    }
    forms
}

fn meaningful(w: &[u8]) -> bool {
    w.iter().filter(|b| b.is_ascii_alphanumeric() || !b.is_ascii()).count() >= 6
}

impl Redactor {
    /// A redactor for the secrets in the process environment (variables named like keys,
    /// tokens, secrets or passwords, with values of at least [`MIN_SECRET`] characters).
    pub fn from_env() -> Self {
        let mut r = Self::default();
        for (k, v) in std::env::vars() {
            if is_secret_var(&k) {
                r.add(v);
            }
        }
        r
    }

    /// Adds one secret value (ignored when shorter than [`MIN_SECRET`]).
    pub fn add(&mut self, secret: impl Into<String>) {
        let s = secret.into();
        let s = s.trim().to_string();
        if s.len() < MIN_SECRET || self.secrets.contains(&s) {
            return;
        }
        let n: Vec<u8> = s.bytes().map(norm).collect();
        if n.len() < FRAGMENT {
            self.short.push(n);
        } else {
            self.add_windows(&n);
        }
        self.add_spaced(&s);
        for form in encoded_forms(&s) {
            let n: Vec<u8> = form.bytes().map(norm).collect();
            self.add_windows(&n);
            self.add_spaced(&form);
        }
        self.secrets.push(s);
    }

    fn add_windows(&mut self, n: &[u8]) {
        for w in n.windows(FRAGMENT) {
            if meaningful(w)
                && let Ok(a) = <[u8; FRAGMENT]>::try_from(w)
            {
                self.windows.insert(a);
            }
        }
    }

    fn add_spaced(&mut self, text: &str) {
        let letters: Vec<u8> = text.bytes().filter(u8::is_ascii_alphanumeric).map(|b| b.to_ascii_lowercase()).collect();
        for w in letters.windows(FRAGMENT) {
            if let Ok(a) = <[u8; FRAGMENT]>::try_from(w) {
                self.spaced.insert(a);
            }
        }
    }

    /// The byte ranges of `text` whose letters and digits alone hold a [`FRAGMENT`]-long run
    /// of a secret's (a secret spaced out, or split by punctuation).
    fn spaced_hits(&self, text: &[u8]) -> Vec<(usize, usize)> {
        let (at, letters): (Vec<usize>, Vec<u8>) = text
            .iter()
            .enumerate()
            .filter(|(_, b)| b.is_ascii_alphanumeric())
            .map(|(i, b)| (i, b.to_ascii_lowercase()))
            .unzip();
        let mut hits = Vec::new();
        for (i, w) in letters.windows(FRAGMENT).enumerate() {
            if let Ok(a) = <[u8; FRAGMENT]>::try_from(w)
                && self.spaced.contains(&a)
            {
                hits.push((at[i], at[i + FRAGMENT - 1] + 1));
            }
        }
        hits
    }

    /// True when no secret is known.
    pub fn is_empty(&self) -> bool {
        self.secrets.is_empty()
    }

    /// The byte ranges of `text` that hold a secret or a fragment of one, merged, on char
    /// boundaries.
    fn ranges(&self, text: &str) -> Vec<(usize, usize)> {
        let bytes = text.as_bytes();
        let n: Vec<u8> = bytes.iter().copied().map(norm).collect();
        let mut hits: Vec<(usize, usize)> = Vec::new();
        if !self.windows.is_empty() && n.len() >= FRAGMENT {
            for (i, w) in n.windows(FRAGMENT).enumerate() {
                if let Ok(a) = <[u8; FRAGMENT]>::try_from(w)
                    && self.windows.contains(&a)
                {
                    hits.push((i, i + FRAGMENT));
                }
            }
        }
        for s in &self.short {
            let mut from = 0;
            while from + s.len() <= n.len() {
                match n[from..].windows(s.len()).position(|w| w == s.as_slice()) {
                    Some(p) => {
                        hits.push((from + p, from + p + s.len()));
                        from += p + 1;
                    }
                    None => break,
                }
            }
        }
        if !self.spaced.is_empty() {
            hits.extend(self.spaced_hits(bytes));
        }
        hits.sort_unstable();
        let mut merged: Vec<(usize, usize)> = Vec::new();
        for (a, b) in hits {
            let (mut a, mut b) = (a, b);
            while a > 0 && !text.is_char_boundary(a) {
                a -= 1;
            }
            while b < text.len() && !text.is_char_boundary(b) {
                b += 1;
            }
            match merged.last_mut() {
                Some(last) if a <= last.1 => last.1 = last.1.max(b),
                _ => merged.push((a, b)),
            }
        }
        merged
    }

    fn replace<'a>(&self, text: &'a str, with: &str) -> Cow<'a, str> {
        if self.secrets.is_empty() {
            return Cow::Borrowed(text);
        }
        let ranges = self.ranges(text);
        if ranges.is_empty() {
            return Cow::Borrowed(text);
        }
        let mut out = String::with_capacity(text.len());
        let mut at = 0;
        for (a, b) in ranges {
            out.push_str(&text[at..a]);
            out.push_str(with);
            at = b;
        }
        out.push_str(&text[at..]);
        Cow::Owned(out)
    }

    /// The text with every known secret, whole or altered, replaced by [`REDACTED`].
    pub fn redact<'a>(&self, text: &'a str) -> Cow<'a, str> {
        self.replace(text, REDACTED)
    }

    /// A file name with every secret, whole or altered, replaced by [`REDACTED_NAME`].
    pub fn redact_name<'a>(&self, name: &'a str) -> Cow<'a, str> {
        self.replace(name, REDACTED_NAME)
    }

    /// Redacts every string of `value` (keys and values) where it is: only a string that
    /// holds a secret is replaced, nothing is copied.
    pub fn redact_json_in_place(&self, value: &mut serde_json::Value) {
        use serde_json::Value;
        if self.secrets.is_empty() {
            return;
        }
        match value {
            Value::String(s) => {
                if let Cow::Owned(r) = self.redact(s) {
                    *s = r;
                }
            }
            Value::Array(a) => a.iter_mut().for_each(|v| self.redact_json_in_place(v)),
            Value::Object(o) => {
                if o.keys().any(|k| matches!(self.redact(k), Cow::Owned(_))) {
                    let old = std::mem::take(o);
                    *o = old.into_iter().map(|(k, v)| (self.redact(&k).into_owned(), v)).collect();
                }
                o.values_mut().for_each(|v| self.redact_json_in_place(v));
            }
            _ => {}
        }
    }

    /// `value` to serialise with every string (keys and values) redacted on the way out:
    /// what [`Self::redact_json`] gives, written without building the copy.
    pub fn serializable<'a>(&'a self, value: &'a serde_json::Value) -> RedactedJson<'a> {
        RedactedJson { value, redactor: self }
    }

    /// A JSON value with every string (keys and values) redacted.
    pub fn redact_json(&self, value: &serde_json::Value) -> serde_json::Value {
        use serde_json::Value;
        if self.secrets.is_empty() {
            return value.clone();
        }
        match value {
            Value::String(s) => Value::String(self.redact(s).into_owned()),
            Value::Array(a) => Value::Array(a.iter().map(|v| self.redact_json(v)).collect()),
            Value::Object(o) => {
                Value::Object(o.iter().map(|(k, v)| (self.redact(k).into_owned(), self.redact_json(v))).collect())
            }
            other => other.clone(),
        }
    }
}

/// A JSON value serialised redacted ([`Redactor::serializable`]).
#[derive(Debug, Clone, Copy)]
pub struct RedactedJson<'a> {
    value: &'a serde_json::Value,
    redactor: &'a Redactor,
}

impl serde::Serialize for RedactedJson<'_> {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        use serde::ser::{SerializeMap, SerializeSeq};
        use serde_json::Value;
        let r = self.redactor;
        if r.is_empty() {
            return self.value.serialize(s);
        }
        match self.value {
            Value::String(t) => s.serialize_str(&r.redact(t)),
            Value::Array(a) => {
                let mut seq = s.serialize_seq(Some(a.len()))?;
                for v in a {
                    seq.serialize_element(&r.serializable(v))?;
                }
                seq.end()
            }
            // Keys that hold a secret (rare): the redacted copy, in which two keys that redact
            // alike are one, as in [`Redactor::redact_json`].
            Value::Object(o) if o.keys().any(|k| matches!(r.redact(k), Cow::Owned(_))) => {
                r.redact_json(self.value).serialize(s)
            }
            Value::Object(o) => {
                let mut map = s.serialize_map(Some(o.len()))?;
                for (k, v) in o {
                    map.serialize_entry(k, &r.serializable(v))?;
                }
                map.end()
            }
            other => other.serialize(s),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn redacts_in_strings_and_json() {
        let mut r = Redactor::default();
        r.add("sk-canary-123456");
        r.add("abc"); // too short, ignored
        assert_eq!(r.redact("key=sk-canary-123456!"), "key=[REDACTED]!");
        let v = serde_json::json!({"a": ["x sk-canary-123456"], "abc": 1, "sk-canary-123456": "k"});
        let want = serde_json::json!({"a": ["x [REDACTED]"], "abc": 1, "[REDACTED]": "k"});
        assert_eq!(r.redact_json(&v), want);
        let mut w = v.clone();
        r.redact_json_in_place(&mut w);
        assert_eq!(w, want, "in place as in a copy");
        let written = |r: &Redactor, v: &serde_json::Value| serde_json::to_string(&r.serializable(v)).expect("writes");
        assert_eq!(written(&r, &v), want.to_string(), "written out redacted as the copy is");
        let nested = serde_json::json!({"k": [{"x": "sk-canary-123456"}, 2, null], "n": 1.5});
        assert_eq!(written(&r, &nested), r.redact_json(&nested).to_string());
        assert_eq!(written(&Redactor::default(), &v), v.to_string(), "nothing to redact: as it is");
        assert!(is_secret_var("OPENAI_API_KEY"));
        assert!(is_secret_var("GITHUB_TOKEN"));
        assert!(is_secret_var("AWS_SECRET_ACCESS_KEY"));
        assert!(is_secret_var("ANTHROPIC_API_KEY"));
        assert!(is_secret_var("MY_SERVICE_KEY"));
        assert!(!is_secret_var("PATH"));
        assert!(!is_secret_var("HOME"));
    }

    #[test]
    fn redacts_altered_copies() {
        let mut r = Redactor::default();
        r.add("sk-Canary-9f8e7d6c5b4a");
        r.add("tok_ab12"); // shorter than a fragment: whole only (any case, any punctuation)
        // Case-folded, upper-cased, cut at either end, punctuation turned into `-`.
        for t in [
            "blocker: sk-canary-9f8e7d6c5b4a failed",
            "SK-CANARY-9F8E7D6C5B4A",
            "…tail: nary-9f8e7d6c5b4a",
            "head sk-Canary-9f8e…",
            "d0001-worker-sk-canary-9f8e7d6c5b4a.a1.json",
            "sk_canary_9f8e7d6c5b4a",
            "x TOK-AB12 y",
        ] {
            let out = r.redact(t);
            assert!(out.contains(REDACTED), "{t} → {out}");
            let low = out.to_lowercase();
            assert!(!low.contains("9f8e7d6c") && !low.contains("canary-9") && !low.contains("ab12"), "{t} → {out}");
        }
        assert_eq!(r.redact_name("d0001-sk-canary-9f8e7d6c5b4a.a1.json"), "d0001-redacted.a1.json");
        // Unrelated text and short common runs stay.
        assert_eq!(r.redact("sk- a canary in the mine, 9f8e"), "sk- a canary in the mine, 9f8e");
        assert_eq!(r.redact("----------------"), "----------------");
        // Multi-byte text around a secret keeps its characters whole.
        assert_eq!(r.redact("é sk-canary-9f8e7d6c5b4a é"), "é [REDACTED] é");
    }

    #[test]
    fn redacts_encoded_copies_at_every_alignment() {
        use base64::Engine;
        let secret = "sk-live-4f9a8b7c6d5e4f3a2b1c";
        let mut r = Redactor::default();
        r.add(secret);
        let b64 = |data: &[u8]| base64::engine::general_purpose::STANDARD.encode(data);
        let url = |data: &[u8]| base64::engine::general_purpose::URL_SAFE_NO_PAD.encode(data);
        let mut smuggled = vec![
            secret.chars().rev().collect::<String>(),
            hex::encode(secret),
            hex::encode(secret).to_uppercase(),
            secret.replace('-', "%2D"),
            "fx-yvir-4s9n8o7p6q5r4s3n2o1p".to_string(), // rot13
        ];
        for lead in ["", "a", "ab", "key=", "{\"k\": \""] {
            let data = format!("{lead}{secret}\" tail");
            smuggled.push(b64(data.as_bytes()));
            smuggled.push(url(data.as_bytes()));
        }
        for t in smuggled {
            let out = r.redact(&t);
            assert!(out.contains(REDACTED), "{t} → {out}");
        }
        // Spaced out, split by punctuation, hex in pairs.
        let spaced: String = secret.chars().flat_map(|c| [c, ' ']).collect();
        let pairs: Vec<String> =
            hex::encode(secret).as_bytes().chunks(2).map(|p| String::from_utf8_lossy(p).into_owned()).collect();
        for t in [spaced, secret.replace('-', "").chars().flat_map(|c| [c, '.']).collect(), pairs.join(" ")] {
            let out = r.redact(&t);
            assert!(out.contains(REDACTED), "{t} → {out}");
            assert!(!out.contains("4 f 9 a") && !out.contains("4.f.9.a") && !out.contains("66 39"), "{t} → {out}");
        }
        // Ordinary base64 and hex (of other data) stay.
        let other = b64(b"an ordinary sentence about nothing secret at all");
        assert_eq!(r.redact(&other), other);
        let digest = hex::encode([7u8; 32]);
        assert_eq!(r.redact(&digest), digest);
    }
}
