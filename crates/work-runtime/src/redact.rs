//! Secret redaction. Every string the runtime persists (events, dispatch records, journals
//! written through the run) passes through a [`Redactor`].

use std::borrow::Cow;

/// The text secrets are replaced with.
pub const REDACTED: &str = "[REDACTED]";

/// Replaces known secret values with [`REDACTED`].
#[derive(Debug, Clone, Default)]
pub struct Redactor {
    secrets: Vec<String>,
}

/// True for environment variable names that hold secrets by convention.
pub fn is_secret_var(name: &str) -> bool {
    let n = name.to_ascii_uppercase();
    ["SECRET", "TOKEN", "PASSWORD", "PASSWD", "CREDENTIAL", "API_KEY", "APIKEY", "ACCESS_KEY", "PRIVATE_KEY"]
        .iter()
        .any(|s| n.contains(s))
        || n.ends_with("_KEY")
}

impl Redactor {
    /// A redactor for the secrets in the process environment (variables named like keys,
    /// tokens, secrets or passwords, with values of at least 6 characters).
    pub fn from_env() -> Self {
        let mut r = Self::default();
        for (k, v) in std::env::vars() {
            if is_secret_var(&k) {
                r.add(v);
            }
        }
        r
    }

    /// Adds one secret value (ignored when shorter than 6 characters, which would redact noise).
    pub fn add(&mut self, secret: impl Into<String>) {
        let s = secret.into();
        if s.trim().len() >= 6 && !self.secrets.contains(&s) {
            self.secrets.push(s);
            // Longest first so that a secret containing another is replaced whole.
            self.secrets.sort_by_key(|s| std::cmp::Reverse(s.len()));
        }
    }

    /// The text with every known secret replaced.
    pub fn redact<'a>(&self, text: &'a str) -> Cow<'a, str> {
        if self.secrets.iter().any(|s| text.contains(s.as_str())) {
            let mut out = text.to_string();
            for s in &self.secrets {
                out = out.replace(s.as_str(), REDACTED);
            }
            Cow::Owned(out)
        } else {
            Cow::Borrowed(text)
        }
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn redacts_in_strings_and_json() {
        let mut r = Redactor::default();
        r.add("sk-canary-123456");
        r.add("abc"); // too short, ignored
        assert_eq!(r.redact("key=sk-canary-123456!"), "key=[REDACTED]!");
        let v = serde_json::json!({"a": ["x sk-canary-123456"], "abc": 1});
        assert_eq!(r.redact_json(&v), serde_json::json!({"a": ["x [REDACTED]"], "abc": 1}));
        assert!(is_secret_var("OPENAI_API_KEY"));
        assert!(is_secret_var("GITHUB_TOKEN"));
        assert!(is_secret_var("AWS_SECRET_ACCESS_KEY"));
        assert!(is_secret_var("ANTHROPIC_API_KEY"));
        assert!(is_secret_var("MY_SERVICE_KEY"));
        assert!(!is_secret_var("PATH"));
        assert!(!is_secret_var("HOME"));
    }
}
