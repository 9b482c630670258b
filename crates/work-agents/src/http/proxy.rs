//! The proxy variables, as curl reads them: `https_proxy`/`HTTPS_PROXY` for `https://` URLs,
//! `http_proxy`/`HTTP_PROXY` for `http://` ones, `all_proxy`/`ALL_PROXY` for either, and
//! `no_proxy`/`NO_PROXY` naming the hosts reached directly (lowercase first).
//!
//! A proxy is an `http://[USER:PASSWORD@]HOST[:PORT]` URL (no scheme means `http://`; the port
//! defaults to 80). An `http://` target goes to it as an absolute-form request; an `https://`
//! one through a `CONNECT` tunnel, TLS inside. Credentials go as `Proxy-Authorization: Basic`
//! and are never quoted. `NO_PROXY` is a comma-separated list of host names (a name matches
//! itself and its subdomains; a leading `.` or `*.` is ignored), IP addresses (matched
//! exactly), or `*` for every host; a `:PORT` on an entry is ignored, CIDR ranges are not read.

/// One proxy to go through.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Proxy {
    pub host: String,
    pub port: u16,
    /// `Basic …`, when the URL has credentials.
    pub auth: Option<String>,
    /// `http://HOST:PORT (from VAR)`, for reasons (no credentials).
    pub shown: String,
}

/// The proxy settings read from the environment once per client.
#[derive(Debug, Clone, Default)]
pub(crate) struct Proxies {
    /// (variable, value) for `http://` and for `https://` targets.
    http: Option<(String, String)>,
    https: Option<(String, String)>,
    no_proxy: Vec<String>,
}

impl Proxies {
    /// The settings of this process's environment.
    pub(crate) fn from_env() -> Self {
        Self::from_lookup(|k| std::env::var(k).ok())
    }

    /// The settings from `get` (a variable's value, if set).
    pub(crate) fn from_lookup(get: impl Fn(&str) -> Option<String>) -> Self {
        let first = |names: &[&str]| {
            names.iter().find_map(|n| get(n).filter(|v| !v.trim().is_empty()).map(|v| (n.to_string(), v)))
        };
        let all = first(&["all_proxy", "ALL_PROXY"]);
        let no_proxy = first(&["no_proxy", "NO_PROXY"]).map(|(_, v)| v).unwrap_or_default();
        Self {
            http: first(&["http_proxy", "HTTP_PROXY"]).or_else(|| all.clone()),
            https: first(&["https_proxy", "HTTPS_PROXY"]).or(all),
            no_proxy: no_proxy.split([',', ' ', '\t']).filter_map(entry).collect(),
        }
    }

    /// The proxy for a target, `None` to go directly, or why the configured proxy is unusable.
    pub(crate) fn route(&self, https: bool, host: &str) -> Option<Result<Proxy, String>> {
        let (var, value) = if https { self.https.as_ref()? } else { self.http.as_ref()? };
        if self.bypassed(host) {
            return None;
        }
        Some(parse(var, value))
    }

    fn bypassed(&self, host: &str) -> bool {
        let host = host.trim_start_matches('[').trim_end_matches(']').trim_end_matches('.').to_ascii_lowercase();
        self.no_proxy.iter().any(|e| e == "*" || host == *e || host.ends_with(&format!(".{e}")))
    }
}

/// One `NO_PROXY` entry, normalised (lowercase, without `*.`/`.`, port or brackets).
fn entry(raw: &str) -> Option<String> {
    let e = raw.trim().to_ascii_lowercase();
    let e = e.trim_start_matches("*.").trim_start_matches('.');
    let e = match e.strip_prefix('[') {
        Some(v6) => v6.split(']').next().unwrap_or(""),
        // One colon: `host:port`; more: a bare IPv6 address.
        None if e.matches(':').count() == 1 => e.split(':').next().unwrap_or(""),
        None => e,
    };
    (!e.is_empty()).then(|| e.to_string())
}

/// Reads a proxy URL from variable `var`.
fn parse(var: &str, value: &str) -> Result<Proxy, String> {
    let value = value.trim();
    let rest = match value.split_once("://") {
        Some((scheme, rest)) if scheme.eq_ignore_ascii_case("http") => rest,
        Some((scheme, _)) => {
            return Err(format!("{var} names a `{scheme}://` proxy: only http:// proxies are supported"));
        }
        None => value,
    };
    let authority = rest.split(['/', '?', '#']).next().unwrap_or("");
    let (userinfo, hostport) = match authority.rsplit_once('@') {
        Some((u, h)) => (Some(u), h),
        None => (None, authority),
    };
    let bad = || format!("{var} is not a proxy URL (http://HOST:PORT)");
    let port = |p: &str| p.parse::<u16>().map_err(|_| bad());
    let (host, port) = match hostport.strip_prefix('[') {
        Some(v6) => match v6.split_once(']') {
            Some((h, "")) => (h, 80),
            Some((h, after)) => (h, port(after.strip_prefix(':').ok_or_else(bad)?)?),
            None => return Err(bad()),
        },
        None => match hostport.split_once(':') {
            Some((h, p)) => (h, port(p)?),
            None => (hostport, 80),
        },
    };
    if host.is_empty() {
        return Err(bad());
    }
    let shown_host = if host.contains(':') { format!("[{host}]") } else { host.to_string() };
    Ok(Proxy {
        host: host.to_string(),
        port,
        auth: userinfo.map(|u| {
            let decoded: Vec<u8> = percent_encoding::percent_decode_str(u).collect();
            format!("Basic {}", base64::Engine::encode(&base64::engine::general_purpose::STANDARD, decoded))
        }),
        shown: format!("http://{shown_host}:{port} (from {var})"),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn env(pairs: &[(&str, &str)]) -> Proxies {
        let pairs: Vec<(String, String)> = pairs.iter().map(|(k, v)| (k.to_string(), v.to_string())).collect();
        Proxies::from_lookup(move |k| pairs.iter().find(|(n, _)| n == k).map(|(_, v)| v.clone()))
    }

    #[test]
    fn each_scheme_takes_its_variable_and_no_proxy_bypasses() {
        let p = env(&[
            ("HTTPS_PROXY", "http://user:p%40ss@proxy.corp:3128"),
            ("http_proxy", "proxy.corp"),
            ("HTTP_PROXY", "http://ignored:1"),
            ("NO_PROXY", "localhost, .internal.corp,10.0.0.7:8080,[::1]"),
        ]);
        let https = p.route(true, "api.openai.com").expect("proxied").expect("valid");
        assert_eq!((https.host.as_str(), https.port), ("proxy.corp", 3128));
        assert_eq!(https.auth.as_deref(), Some("Basic dXNlcjpwQHNz"), "user:p@ss");
        assert_eq!(https.shown, "http://proxy.corp:3128 (from HTTPS_PROXY)");
        let http = p.route(false, "gpu.example").expect("proxied").expect("valid");
        assert_eq!((http.host.as_str(), http.port, http.auth), ("proxy.corp", 80, None), "lowercase first");
        for direct in ["localhost", "LOCALHOST", "vllm.internal.corp", "internal.corp", "10.0.0.7", "[::1]", "::1"] {
            assert!(p.route(true, direct).is_none(), "{direct}");
        }
        for proxied in ["notlocalhost", "xinternal.corp", "10.0.0.70", "127.0.0.1"] {
            assert!(p.route(true, proxied).is_some(), "{proxied}");
        }
        assert!(env(&[("ALL_PROXY", "http://a:1"), ("NO_PROXY", "*")]).route(false, "x").is_none());
        assert!(env(&[("NO_PROXY", "x")]).route(true, "y").is_none(), "no proxy set");
        assert_eq!(env(&[("all_proxy", "http://a:1")]).route(true, "y").expect("all").expect("ok").port, 1);
    }

    #[test]
    fn unusable_proxies_are_named_without_credentials() {
        let e = |v: &str| env(&[("HTTPS_PROXY", v)]).route(true, "h").expect("proxied").expect_err(v);
        assert_eq!(
            e("socks5://u:secret@h:1"),
            "HTTPS_PROXY names a `socks5://` proxy: only http:// proxies are supported"
        );
        assert_eq!(e("http://u:secret@h:99999"), "HTTPS_PROXY is not a proxy URL (http://HOST:PORT)");
        assert_eq!(e("http://:8080"), "HTTPS_PROXY is not a proxy URL (http://HOST:PORT)");
        let v6 = env(&[("HTTPS_PROXY", "http://[::1]:3128/")]).route(true, "h").expect("p").expect("ok");
        assert_eq!(
            (v6.host.as_str(), v6.port, v6.shown.as_str()),
            ("::1", 3128, "http://[::1]:3128 (from HTTPS_PROXY)")
        );
    }

    #[test]
    fn credentials_are_percent_decoded_and_sent_as_basic() {
        let p = env(&[("HTTPS_PROXY", "http://us%40r:p%3Ass@h:3128")]).route(true, "x").expect("p").expect("ok");
        assert_eq!(p.auth.as_deref(), Some("Basic dXNAcjpwOnNz"), "base64 of `us@r:p:ss`");
    }
}
