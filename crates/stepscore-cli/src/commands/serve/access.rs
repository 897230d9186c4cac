//! Who may call: the `Host` must name this server (a web page that
//! rebinds its own DNS name to 127.0.0.1 sends its own name), a request
//! from a web page (`Origin`) is refused unless allowed, the bearer token
//! is checked when one is set (`/health` stays open, as in vLLM), and
//! POST bodies must say they are JSON (a page's form post cannot).

use std::net::{IpAddr, SocketAddr};

use axum::http::{header, HeaderMap, Method, StatusCode};

use super::answer::{error, ApiError};

pub struct Access {
    /// The address actually bound (its port is the one clients name).
    pub listen: SocketAddr,
    /// `--allow-host`: `NAME` or `NAME:PORT`, lower case; `*` allows any.
    pub hosts: Vec<String>,
    /// `--allow-origin`: exact origins; `*` allows any.
    pub origins: Vec<String>,
    pub api_key: Option<String>,
}

impl Access {
    pub fn check(&self, method: &Method, path: &str, headers: &HeaderMap) -> Result<(), ApiError> {
        self.host(headers)?;
        if let Some(origin) = headers.get(header::ORIGIN) {
            let origin = origin.to_str().unwrap_or("");
            if !self.origins.iter().any(|o| o == "*" || o == origin) {
                return Err(error(
                    StatusCode::FORBIDDEN,
                    "origin_not_allowed",
                    format!("requests from the web origin `{origin}` are refused; allow it with --allow-origin"),
                ));
            }
        }
        if let Some(key) = &self.api_key {
            let given = headers
                .get(header::AUTHORIZATION)
                .and_then(|v| v.to_str().ok())
                .and_then(|v| v.strip_prefix("Bearer "));
            if path != "/health" && !given.is_some_and(|g| same(g.as_bytes(), key.as_bytes())) {
                return Err(ApiError {
                    challenge: true,
                    ..error(
                        StatusCode::UNAUTHORIZED,
                        "unauthorized",
                        "this server needs `Authorization: Bearer <key>` (--api-key / STEPSCORE_API_KEY)",
                    )
                });
            }
        }
        if method == Method::POST {
            let ctype = headers
                .get(header::CONTENT_TYPE)
                .and_then(|v| v.to_str().ok())
                .unwrap_or("");
            let essence = ctype.split(';').next().unwrap_or("").trim();
            if !essence.eq_ignore_ascii_case("application/json") {
                return Err(error(
                    StatusCode::UNSUPPORTED_MEDIA_TYPE,
                    "unsupported_media_type",
                    format!(
                        "the body must be sent as Content-Type: application/json (got `{ctype}`)"
                    ),
                ));
            }
        }
        Ok(())
    }

    fn host(&self, headers: &HeaderMap) -> Result<(), ApiError> {
        let refuse = |what: String| {
            Err(error(
                StatusCode::MISDIRECTED_REQUEST,
                "host_not_allowed",
                format!(
                    "{what}; this server answers to {} (add names with --allow-host)",
                    self.listen
                ),
            ))
        };
        let Some(host) = headers.get(header::HOST).and_then(|h| h.to_str().ok()) else {
            return refuse("the request has no Host header".into());
        };
        let host = host.to_ascii_lowercase();
        if self.hosts.iter().any(|h| h == "*" || *h == host) {
            return Ok(());
        }
        let (name, port) = split_host(&host);
        // A name given with --allow-host is accepted on any port (behind a proxy).
        if self.hosts.iter().any(|h| *h == name) {
            return Ok(());
        }
        if port.unwrap_or(80) != self.listen.port() {
            return refuse(format!("Host `{host}` names another port"));
        }
        let ip = self.listen.ip();
        let named_ip = name
            .trim_start_matches('[')
            .trim_end_matches(']')
            .parse::<IpAddr>()
            .ok();
        let ok = match named_ip {
            Some(n) => n == ip || ip.is_unspecified() || (ip.is_loopback() && n.is_loopback()),
            None => {
                (name == "localhost" || name.ends_with(".localhost"))
                    && (ip.is_loopback() || ip.is_unspecified())
            }
        };
        if ok {
            Ok(())
        } else {
            refuse(format!("Host `{host}` is not this server's address"))
        }
    }
}

/// `name` and port of a Host value (`[::1]:8000`, `localhost`).
fn split_host(host: &str) -> (&str, Option<u16>) {
    match host.rfind(':') {
        Some(i) if !host[i..].contains(']') => match host[i + 1..].parse() {
            Ok(p) => (&host[..i], Some(p)),
            Err(_) => (host, None),
        },
        _ => (host, None),
    }
}

/// Compares without stopping at the first difference (the key's bytes
/// cannot be found one at a time by timing answers).
fn same(a: &[u8], b: &[u8]) -> bool {
    a.len() == b.len() && a.iter().zip(b).fold(0u8, |acc, (x, y)| acc | (x ^ y)) == 0
}

#[cfg(test)]
mod tests {
    use super::*;
    use axum::http::HeaderValue;

    fn access(listen: &str, hosts: &[&str]) -> Access {
        Access {
            listen: listen.parse().unwrap(),
            hosts: hosts.iter().map(|s| s.to_string()).collect(),
            origins: vec![],
            api_key: None,
        }
    }

    fn host_ok(a: &Access, host: &str) -> bool {
        let mut h = HeaderMap::new();
        h.insert(header::HOST, HeaderValue::from_str(host).unwrap());
        a.check(&Method::GET, "/health", &h).is_ok()
    }

    #[test]
    fn loopback_answers_to_its_names_only() {
        let a = access("127.0.0.1:8000", &[]);
        for ok in [
            "127.0.0.1:8000",
            "localhost:8000",
            "[::1]:8000",
            "LOCALHOST:8000",
        ] {
            assert!(host_ok(&a, ok), "{ok}");
        }
        for bad in [
            "evil.example:8000",
            "localhost:8001",
            "evil.example",
            "10.0.0.1:8000",
        ] {
            assert!(!host_ok(&a, bad), "{bad}");
        }
        let a = access("127.0.0.1:8000", &["rm.internal"]);
        assert!(host_ok(&a, "rm.internal:8000") && host_ok(&a, "rm.internal"));
        assert!(host_ok(&access("0.0.0.0:80", &[]), "10.1.2.3"));
        assert!(!host_ok(&access("0.0.0.0:80", &[]), "attacker.example"));
    }

    #[test]
    fn origin_key_and_content_type() {
        let mut a = access("127.0.0.1:8000", &[]);
        a.api_key = Some("k".into());
        let mut h = HeaderMap::new();
        h.insert(header::HOST, HeaderValue::from_static("127.0.0.1:8000"));
        assert!(a.check(&Method::GET, "/health", &h).is_ok());
        assert_eq!(
            a.check(&Method::GET, "/metrics", &h).unwrap_err().code,
            "unauthorized"
        );
        h.insert(header::AUTHORIZATION, HeaderValue::from_static("Bearer k"));
        assert!(a.check(&Method::GET, "/metrics", &h).is_ok());
        let e = a.check(&Method::POST, "/v1/score_steps", &h).unwrap_err();
        assert_eq!(e.code, "unsupported_media_type");
        h.insert(
            header::CONTENT_TYPE,
            HeaderValue::from_static("application/json; charset=utf-8"),
        );
        assert!(a.check(&Method::POST, "/v1/score_steps", &h).is_ok());
        h.insert(
            header::ORIGIN,
            HeaderValue::from_static("https://evil.example"),
        );
        assert_eq!(
            a.check(&Method::POST, "/v1/score_steps", &h)
                .unwrap_err()
                .code,
            "origin_not_allowed"
        );
        a.origins = vec!["https://evil.example".into()];
        assert!(a.check(&Method::POST, "/v1/score_steps", &h).is_ok());
    }
}
