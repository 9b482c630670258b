//! HTML text with every piece of outside text escaped and redacted.
//!
//! Everything in a report that came from an agent, a file or the log goes through
//! [`Html::text`]: secrets are redacted first, then `& < > " '` are escaped, so the text can
//! sit in an element or a quoted attribute and never becomes markup.

use work_runtime::redact::Redactor;

/// Escapes text for an element body or a quoted attribute.
pub fn escape(s: &str) -> String {
    let mut out = String::with_capacity(s.len());
    for c in s.chars() {
        match c {
            '&' => out.push_str("&amp;"),
            '<' => out.push_str("&lt;"),
            '>' => out.push_str("&gt;"),
            '"' => out.push_str("&quot;"),
            '\'' => out.push_str("&#39;"),
            c if c.is_control() && c != '\n' && c != '\t' => out.push('\u{fffd}'),
            c => out.push(c),
        }
    }
    out
}

/// An HTML document being written.
pub struct Html<'a> {
    out: String,
    redactor: &'a Redactor,
}

impl<'a> Html<'a> {
    /// An empty document that redacts with `redactor`.
    pub fn new(redactor: &'a Redactor) -> Self {
        Self { out: String::new(), redactor }
    }

    /// Appends trusted markup (the engine's own literals, never outside text).
    pub fn raw(&mut self, markup: &str) -> &mut Self {
        self.out.push_str(markup);
        self
    }

    /// Appends outside text, redacted and escaped.
    pub fn text(&mut self, s: &str) -> &mut Self {
        let red = self.redactor.redact(s);
        self.out.push_str(&escape(&red));
        self
    }

    /// Outside text, redacted and escaped, as a string (for attributes and SVG labels).
    pub fn esc(&self, s: &str) -> String {
        escape(&self.redactor.redact(s))
    }

    /// `<tag>text</tag>`.
    pub fn el(&mut self, tag: &str, s: &str) -> &mut Self {
        self.raw(&format!("<{tag}>")).text(s).raw(&format!("</{tag}>"))
    }

    /// A table with a header row and text cells.
    pub fn table(&mut self, class: &str, head: &[&str], rows: &[Vec<String>]) -> &mut Self {
        self.raw(&format!("<table class=\"{class}\"><thead><tr>"));
        for h in head {
            self.el("th", h);
        }
        self.raw("</tr></thead><tbody>");
        for r in rows {
            self.raw("<tr>");
            for c in r {
                self.el("td", c);
            }
            self.raw("</tr>");
        }
        self.raw("</tbody></table>");
        self
    }

    /// The document.
    pub fn finish(self) -> String {
        self.out
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn markup_and_secrets_never_pass() {
        let mut r = Redactor::default();
        r.add("sk-live-123456789");
        let mut h = Html::new(&r);
        h.el("td", "<script>alert('x')</script> \"sk-live-123456789\" &");
        let out = h.finish();
        assert!(!out.contains("<script"), "{out}");
        assert!(!out.contains("sk-live-123456789"), "{out}");
        assert!(out.contains("&lt;script&gt;alert(&#39;x&#39;)&lt;/script&gt; &quot;"), "{out}");
    }
}
