//! The little HTTP the viewer speaks (sans-IO): a request head parsed with hard limits,
//! routed to the page, the WebSocket of frames, or an error status. Anything else a
//! browser or a stray client sends gets a clear status and the connection is closed.
//!
//! Other web sites open in the same browser must not read the frames: a page served on
//! loopback (no token) answers only requests whose `Host` is a loopback name (no DNS
//! rebinding), and the WebSocket only a browser whose `Origin` is the page's own.

/// The largest request head read.
pub(crate) const MAX_HEAD: usize = 8 << 10;

/// What a request asks for.
#[derive(Debug, PartialEq, Eq)]
pub(crate) enum Route {
    /// The page.
    Page,
    /// The WebSocket of frames, with the client's `Sec-WebSocket-Key`.
    Frames { key: String },
    /// No icon.
    NoContent,
    /// An error status and why.
    Status(u16, &'static str),
}

/// A parsed request line and the headers the viewer reads.
#[derive(Debug, Default, PartialEq, Eq)]
struct Head<'a> {
    method: &'a str,
    path: &'a str,
    query: &'a str,
    upgrade: bool,
    ws_key: Option<&'a str>,
    host: Option<&'a str>,
    origin: Option<&'a str>,
}

fn parse(head: &[u8]) -> Option<Head<'_>> {
    let text = std::str::from_utf8(head).ok()?;
    let mut lines = text.split("\r\n");
    let mut first = lines.next()?.split(' ');
    let (method, target, version) = (first.next()?, first.next()?, first.next()?);
    if first.next().is_some() || !version.starts_with("HTTP/1.") {
        return None;
    }
    let (path, query) = target.split_once('?').unwrap_or((target, ""));
    let mut h = Head {
        method,
        path,
        query,
        ..Head::default()
    };
    for line in lines.take_while(|l| !l.is_empty()) {
        let (name, value) = line.split_once(':')?;
        let value = value.trim();
        if name.eq_ignore_ascii_case("upgrade") {
            h.upgrade = value.eq_ignore_ascii_case("websocket");
        } else if name.eq_ignore_ascii_case("sec-websocket-key") {
            h.ws_key = Some(value);
        } else if name.eq_ignore_ascii_case("host") {
            h.host = Some(value);
        } else if name.eq_ignore_ascii_case("origin") {
            h.origin = Some(value);
        }
    }
    Some(h)
}

/// The value of `name` in a query string (`a=1&b=2`).
fn query_value<'a>(query: &'a str, name: &str) -> Option<&'a str> {
    query
        .split('&')
        .filter_map(|kv| kv.split_once('='))
        .find(|(k, _)| *k == name)
        .map(|(_, v)| v)
}

/// Whether `host` (a `Host` header: a name or address and an optional port) names this
/// machine's loopback.
fn loopback_host(host: &str) -> bool {
    let name = if let Some(rest) = host.strip_prefix('[') {
        rest.split(']').next().unwrap_or("")
    } else {
        host.rsplit_once(':').map_or(host, |(n, _)| n)
    };
    name.eq_ignore_ascii_case("localhost")
        || name
            .parse::<std::net::IpAddr>()
            .is_ok_and(|a| a.is_loopback())
}

/// Compares in time independent of where they differ.
fn same(a: &[u8], b: &[u8]) -> bool {
    a.len() == b.len() && a.iter().zip(b).fold(0u8, |d, (x, y)| d | (x ^ y)) == 0
}

/// Where a request head goes; `token`, when set, must be the query's `token`.
pub(crate) fn route(head: &[u8], token: Option<&str>) -> Route {
    let Some(h) = parse(head) else {
        return Route::Status(400, "Bad Request");
    };
    if h.method != "GET" {
        return Route::Status(405, "Method Not Allowed");
    }
    if let Some(t) = token {
        let given = query_value(h.query, "token").unwrap_or("");
        if !same(given.as_bytes(), t.as_bytes()) && h.path != "/favicon.ico" {
            return Route::Status(403, "Forbidden");
        }
    } else if h.host.is_some_and(|host| !loopback_host(host)) {
        return Route::Status(403, "Forbidden");
    }
    // A browser says where the page that opens a WebSocket came from: only this page.
    if let (Some(origin), Some(host)) = (h.origin, h.host) {
        let own = origin
            .strip_prefix("http://")
            .or_else(|| origin.strip_prefix("https://"));
        if h.path == "/frames" && own != Some(host) {
            return Route::Status(403, "Forbidden");
        }
    }
    match h.path {
        "/" | "/index.html" => Route::Page,
        "/frames" => match (h.upgrade, h.ws_key) {
            (true, Some(key)) if !key.is_empty() => Route::Frames {
                key: key.to_string(),
            },
            _ => Route::Status(426, "Upgrade Required"),
        },
        "/favicon.ico" => Route::NoContent,
        _ => Route::Status(404, "Not Found"),
    }
}

/// The end of a request head in `buf` (just past its blank line), if it is there.
pub(crate) fn head_end(buf: &[u8]) -> Option<usize> {
    buf.windows(4).position(|w| w == b"\r\n\r\n").map(|i| i + 4)
}

/// A whole response with a body.
pub(crate) fn response(code: u16, reason: &str, kind: &str, body: &[u8]) -> Vec<u8> {
    let mut r = format!(
        "HTTP/1.1 {code} {reason}\r\nContent-Type: {kind}\r\nContent-Length: {}\r\n\
         Cache-Control: no-store\r\nX-Content-Type-Options: nosniff\r\n\
         Content-Security-Policy: default-src 'self'; style-src 'unsafe-inline'; \
         script-src 'unsafe-inline'; img-src 'self' blob: data:; connect-src 'self'\r\n\
         Connection: close\r\n\r\n",
        body.len()
    )
    .into_bytes();
    r.extend_from_slice(body);
    r
}

/// The answer that upgrades a request to a WebSocket.
pub(crate) fn upgrade(key: &str) -> Vec<u8> {
    let accept = tungstenite::handshake::derive_accept_key(key.as_bytes());
    format!(
        "HTTP/1.1 101 Switching Protocols\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n\
         Sec-WebSocket-Accept: {accept}\r\n\r\n"
    )
    .into_bytes()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn requests_are_routed() {
        let get = |t: &str| format!("GET {t} HTTP/1.1\r\nHost: 127.0.0.1:8080\r\n\r\n");
        assert_eq!(route(get("/").as_bytes(), None), Route::Page);
        assert_eq!(
            route(get("/nope").as_bytes(), None),
            Route::Status(404, "Not Found")
        );
        assert_eq!(
            route(b"\x00\xff garbage", None),
            Route::Status(400, "Bad Request")
        );
        assert_eq!(
            route(b"POST / HTTP/1.1\r\n\r\n", None),
            Route::Status(405, "Method Not Allowed")
        );
        let ws = "GET /frames?token=abc HTTP/1.1\r\nUpgrade: WebSocket\r\nSec-WebSocket-Key: \
                  dGhlIHNhbXBsZSBub25jZQ==\r\n\r\n";
        assert_eq!(
            route(ws.as_bytes(), Some("abc")),
            Route::Frames {
                key: "dGhlIHNhbXBsZSBub25jZQ==".into()
            }
        );
        assert_eq!(
            route(ws.as_bytes(), Some("abd")),
            Route::Status(403, "Forbidden")
        );
        assert_eq!(
            route(get("/").as_bytes(), Some("abc")),
            Route::Status(403, "Forbidden")
        );
        assert_eq!(
            route(get("/frames").as_bytes(), None),
            Route::Status(426, "Upgrade Required")
        );
    }

    #[test]
    fn other_sites_cannot_reach_the_frames() {
        let ws = |host: &str, origin: &str| {
            format!(
                "GET /frames HTTP/1.1\r\nHost: {host}\r\nOrigin: {origin}\r\nUpgrade: websocket\r\n\
                 Sec-WebSocket-Key: a2V5\r\n\r\n"
            )
        };
        let ok = Route::Frames { key: "a2V5".into() };
        assert_eq!(
            route(
                ws("127.0.0.1:8080", "http://127.0.0.1:8080").as_bytes(),
                None
            ),
            ok
        );
        assert_eq!(
            route(
                ws("localhost:8080", "http://localhost:8080").as_bytes(),
                None
            ),
            ok
        );
        assert_eq!(
            route(ws("[::1]:8080", "http://[::1]:8080").as_bytes(), None),
            ok
        );
        let forbidden = Route::Status(403, "Forbidden");
        // Another site's page, and a name rebound to loopback.
        assert_eq!(
            route(ws("127.0.0.1:8080", "http://evil.example").as_bytes(), None),
            forbidden
        );
        assert_eq!(
            route(
                ws("evil.example:8080", "http://evil.example:8080").as_bytes(),
                None
            ),
            forbidden
        );
        let page = "GET / HTTP/1.1\r\nHost: evil.example\r\n\r\n";
        assert_eq!(route(page.as_bytes(), None), forbidden);
        // Beyond loopback the token decides the host; the origin must still be the page's.
        let far =
            "GET /frames?token=t HTTP/1.1\r\nHost: node7:8080\r\nOrigin: http://node7:8080\r\n\
                   Upgrade: websocket\r\nSec-WebSocket-Key: a2V5\r\n\r\n";
        assert_eq!(route(far.as_bytes(), Some("t")), ok);
    }

    #[test]
    fn the_upgrade_answers_the_rfc_example() {
        let r = String::from_utf8(upgrade("dGhlIHNhbXBsZSBub25jZQ==")).unwrap();
        assert!(
            r.contains("Sec-WebSocket-Accept: s3pPLMBiTxaQ9kYGzzhZRbK+xOo="),
            "{r}"
        );
        assert_eq!(head_end(b"GET / HTTP/1.1\r\n\r\nrest"), Some(18));
    }
}
