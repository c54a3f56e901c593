//! The one HTTP request `fleet --prometheus` makes: `GET` over plain HTTP/1.1 to a Prometheus
//! server, bounded in time and size.
//!
//! Prometheus' HTTP API answers JSON to a `GET /api/v1/query` (prometheus.io/docs/prometheus/
//! latest/querying/api/). The request says `Connection: close`, so the answer ends where the
//! connection does; its body comes with a `Content-Length` or in chunks (`Transfer-Encoding:
//! chunked`, RFC 9112 §7.1: Go's net/http chunks any answer it did not size first), and both
//! are read. No `Accept-Encoding` is sent, so the body is never compressed. HTTPS is not spoken:
//! in-cluster Prometheus is plain HTTP on its service; reach another with `kubectl
//! port-forward`.

use std::io::{Read, Write};
use std::net::{TcpStream, ToSocketAddrs};
use std::time::{Duration, Instant};

/// Largest answer read: 10,000 nodes' series are some 100 MB of JSON at most.
pub const MAX_ANSWER_BYTES: u64 = 256 << 20;

/// Where a Prometheus server is: `http://host[:port][/path prefix]`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Server {
    pub host: String,
    pub port: u16,
    /// The path the API lives under (`/prometheus` behind a proxy), without a trailing `/`.
    pub prefix: String,
}

impl Server {
    /// Read `http://host[:port][/prefix]`; what is wrong with anything else, said plainly.
    /// A URL is printable ASCII (RFC 3986 §2): a control character, a space or any other
    /// character — raw, or percent-encoded control (`%0d%0a`) — is refused before any
    /// connection, since the prefix is written into the request line as it is, and a CR/LF there
    /// would end it and add headers or a second request of the caller's choosing.
    pub fn parse(url: &str) -> Result<Server, String> {
        if let Some(c) = url.chars().find(|c| !c.is_ascii_graphic()) {
            return Err(format!(
                "`{}`: {c:?} cannot stand in a URL (printable ASCII only; percent-encode anything else)",
                url.escape_debug()
            ));
        }
        if let Some(at) = encoded_control(url) {
            return Err(format!(
                "`{url}`: `{}` is an encoded control character, which no server address needs",
                url.get(at..at + 3).unwrap_or("%")
            ));
        }
        let rest = if let Some(rest) = url.strip_prefix("http://") {
            rest
        } else if url.starts_with("https://") {
            return Err(format!(
                "{url}: https is not supported; use the server's plain-HTTP service address, or `kubectl port-forward` it and pass http://localhost:9090"
            ));
        } else {
            return Err(format!(
                "{url}: not an http:// URL (example: http://prometheus.monitoring:9090)"
            ));
        };
        let (authority, path) = match rest.find('/') {
            Some(i) => (&rest[..i], &rest[i..]),
            None => (rest, ""),
        };
        if authority.is_empty() || authority.contains('@') {
            return Err(format!(
                "{url}: name the server as host or host:port (no user name)"
            ));
        }
        let (host, port) = match authority.rsplit_once(':') {
            // `[::1]:9090`, `host:9090`; a bare IPv6 address must be bracketed.
            Some((host, port)) if !port.contains(']') => {
                let port = port
                    .parse::<u16>()
                    .map_err(|_| format!("{url}: `{port}` is not a port number"))?;
                (host, port)
            }
            _ => (authority, 80),
        };
        let host = host.trim_start_matches('[').trim_end_matches(']');
        if host.is_empty() || path.contains(['?', '#']) {
            return Err(format!(
                "{url}: give the server's address only (http://host:port[/prefix])"
            ));
        }
        Ok(Server {
            host: host.to_string(),
            port,
            prefix: path.trim_end_matches('/').to_string(),
        })
    }

    /// `http://host:port/prefix`, as people write it.
    pub fn url(&self) -> String {
        let host = if self.host.contains(':') {
            format!("[{}]", self.host)
        } else {
            self.host.clone()
        };
        format!("http://{host}:{}{}", self.port, self.prefix)
    }
}

/// Where `url` holds a percent-encoded control character (`%00`–`%1F`, `%7F`).
fn encoded_control(url: &str) -> Option<usize> {
    url.match_indices('%').map(|(i, _)| i).find(|&i| {
        url.get(i + 1..i + 3)
            .and_then(|hex| u8::from_str_radix(hex, 16).ok())
            .is_some_and(|b| b < 0x20 || b == 0x7f)
    })
}

/// `GET path?query` on `server`, everything within `timeout`; the body of a `200` answer.
/// Prometheus answers errors (a bad query: 400, 422, 503) with a JSON body saying why: that body
/// is the error's text.
pub fn get(server: &Server, path_and_query: &str, timeout: Duration) -> Result<Vec<u8>, String> {
    let deadline = Instant::now() + timeout;
    let addresses: Vec<_> = (server.host.as_str(), server.port)
        .to_socket_addrs()
        .map_err(|e| format!("{}: cannot resolve {}: {e}", server.url(), server.host))?
        .collect();
    let mut last = format!("{}: no address for {}", server.url(), server.host);
    let mut stream = None;
    for address in addresses {
        let left = deadline.saturating_duration_since(Instant::now());
        if left.is_zero() {
            break;
        }
        match TcpStream::connect_timeout(&address, left) {
            Ok(s) => {
                stream = Some(s);
                break;
            }
            Err(e) => last = format!("{}: cannot connect to {address}: {e}", server.url()),
        }
    }
    let mut stream = stream.ok_or(last)?;
    let host = if server.host.contains(':') {
        format!("[{}]:{}", server.host, server.port)
    } else {
        format!("{}:{}", server.host, server.port)
    };
    let request = format!(
        "GET {}{path_and_query} HTTP/1.1\r\nHost: {host}\r\nAccept: application/json\r\nUser-Agent: gpudoctor/{}\r\nConnection: close\r\n\r\n",
        server.prefix,
        env!("CARGO_PKG_VERSION")
    );
    let io = |e: std::io::Error| format!("{}: {e}", server.url());
    stream
        .set_write_timeout(Some(left(deadline)?))
        .map_err(io)?;
    stream.write_all(request.as_bytes()).map_err(io)?;
    let mut answer = Vec::new();
    let mut buf = [0u8; 64 * 1024];
    loop {
        stream.set_read_timeout(Some(left(deadline)?)).map_err(io)?;
        match stream.read(&mut buf) {
            Ok(0) => break,
            Ok(n) => {
                answer.extend_from_slice(&buf[..n]);
                if answer.len() as u64 > MAX_ANSWER_BYTES {
                    return Err(format!(
                        "{}: the answer is over {} MiB; ask for fewer series",
                        server.url(),
                        MAX_ANSWER_BYTES >> 20
                    ));
                }
            }
            Err(e) if e.kind() == std::io::ErrorKind::Interrupted => continue,
            Err(e)
                if matches!(
                    e.kind(),
                    std::io::ErrorKind::WouldBlock | std::io::ErrorKind::TimedOut
                ) =>
            {
                return Err(format!(
                    "{}: no complete answer within {} s",
                    server.url(),
                    timeout.as_secs()
                ));
            }
            Err(e) => return Err(io(e)),
        }
    }
    let (status, body) = parse_answer(&answer).map_err(|e| format!("{}: {e}", server.url()))?;
    if status != 200 {
        let text = String::from_utf8_lossy(&body);
        let text: String = text.chars().take(400).collect();
        return Err(format!("{}: HTTP {status}: {}", server.url(), text.trim()));
    }
    Ok(body)
}

fn left(deadline: Instant) -> Result<Duration, String> {
    let left = deadline.saturating_duration_since(Instant::now());
    if left.is_zero() {
        return Err("no answer within the timeout".to_string());
    }
    Ok(left)
}

/// Status code and body of a whole HTTP/1.1 answer (the connection closed after it).
pub fn parse_answer(answer: &[u8]) -> Result<(u16, Vec<u8>), String> {
    let end = find(answer, b"\r\n\r\n").ok_or("the answer ended inside its headers")?;
    let head = std::str::from_utf8(&answer[..end]).map_err(|_| "headers that are not text")?;
    let mut lines = head.split("\r\n");
    let status_line = lines.next().unwrap_or_default();
    let mut parts = status_line.splitn(3, ' ');
    let version = parts.next().unwrap_or_default();
    let status = parts
        .next()
        .and_then(|s| s.parse::<u16>().ok())
        .filter(|_| version.starts_with("HTTP/1."))
        .ok_or_else(|| format!("not an HTTP answer: `{}`", status_line.escape_debug()))?;
    let mut chunked = false;
    let mut length: Option<usize> = None;
    for line in lines {
        let Some((name, value)) = line.split_once(':') else {
            continue;
        };
        let value = value.trim();
        if name.eq_ignore_ascii_case("transfer-encoding") {
            chunked = value
                .rsplit(',')
                .next()
                .is_some_and(|last| last.trim().eq_ignore_ascii_case("chunked"));
        } else if name.eq_ignore_ascii_case("content-length") {
            length = value.parse().ok();
        } else if name.eq_ignore_ascii_case("content-encoding")
            && !value.eq_ignore_ascii_case("identity")
        {
            return Err(format!(
                "a body encoded as {value}, which was not asked for"
            ));
        }
    }
    let rest = &answer[end + 4..];
    let body = if chunked {
        dechunk(rest)?
    } else if let Some(length) = length {
        rest.get(..length)
            .ok_or("the answer ended before its Content-Length")?
            .to_vec()
    } else {
        rest.to_vec()
    };
    Ok((status, body))
}

/// The body of a chunked answer (RFC 9112 §7.1): `size[;ext]\r\n data\r\n`, ending in size 0.
fn dechunk(mut rest: &[u8]) -> Result<Vec<u8>, String> {
    let mut body = Vec::new();
    loop {
        let eol = find(rest, b"\r\n").ok_or("a chunk size line without its end")?;
        let line =
            std::str::from_utf8(&rest[..eol]).map_err(|_| "a chunk size that is not text")?;
        let size_text = line.split(';').next().unwrap_or_default().trim();
        let size = usize::from_str_radix(size_text, 16)
            .map_err(|_| format!("`{}` is not a chunk size", size_text.escape_debug()))?;
        rest = &rest[eol + 2..];
        if size == 0 {
            return Ok(body);
        }
        let data = rest.get(..size).ok_or("the answer ended inside a chunk")?;
        body.extend_from_slice(data);
        rest = rest
            .get(size..)
            .and_then(|r| r.strip_prefix(b"\r\n"))
            .ok_or("a chunk not followed by its line end")?;
    }
}

fn find(haystack: &[u8], needle: &[u8]) -> Option<usize> {
    haystack.windows(needle.len()).position(|w| w == needle)
}

/// `text` as a URL query value (RFC 3986 §2.1: every byte but the unreserved ones encoded).
pub fn encode(text: &str) -> String {
    let mut out = String::with_capacity(text.len() * 3);
    for b in text.bytes() {
        if b.is_ascii_alphanumeric() || matches!(b, b'-' | b'.' | b'_' | b'~') {
            out.push(b as char);
        } else {
            out.push_str(&format!("%{b:02X}"));
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn urls_as_people_write_them() {
        let s = Server::parse("http://prometheus.monitoring:9090").unwrap();
        assert_eq!(
            (s.host.as_str(), s.port, s.prefix.as_str()),
            ("prometheus.monitoring", 9090, "")
        );
        let s = Server::parse("http://[::1]:9090/prom/").unwrap();
        assert_eq!(
            (s.host.as_str(), s.port, s.prefix.as_str()),
            ("::1", 9090, "/prom")
        );
        assert_eq!(s.url(), "http://[::1]:9090/prom");
        assert_eq!(Server::parse("http://prom").unwrap().port, 80);
        for bad in [
            "https://p:9090",
            "p:9090",
            "http://",
            "http://u@p:1",
            "http://p:x",
            "http://p/?q",
        ] {
            assert!(Server::parse(bad).is_err(), "{bad}");
        }
        // Issue 41: CR/LF would end the request line and add a header and a second request.
        for bad in [
            "http://127.0.0.1:1/a\r\nX-Injected: 1",
            "http://127.0.0.1:1/a\nGET /b",
            "http://127.0.0.1:1/a%0d%0aX",
            "http://127.0.0.1:1/a%0A",
            "http://127.0.0.1:1/a%7f",
            "http://p\u{85}:9090",
            "http://p:9090/a b",
            "http://p:9090/\u{202e}",
            "http://p\t:9090",
        ] {
            let err = Server::parse(bad).unwrap_err();
            assert!(!err.contains(['\r', '\n', '\u{85}']), "{err}");
        }
        // An ordinary encoded character is a path like any other.
        assert_eq!(
            Server::parse("http://p:9090/a%20b").unwrap().prefix,
            "/a%20b"
        );
    }

    #[test]
    fn bodies_sized_chunked_and_cut() {
        // Go's net/http chunks an answer it did not size (what a Prometheus of 2.42 sends for a
        // large query result).
        let chunked = b"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nTransfer-Encoding: chunked\r\n\r\n5\r\nhello\r\n7;x=y\r\n, world\r\n0\r\n\r\n";
        assert_eq!(
            parse_answer(chunked).unwrap(),
            (200, b"hello, world".to_vec())
        );
        let sized = b"HTTP/1.1 400 Bad Request\r\nContent-Length: 2\r\n\r\n{}extra";
        assert_eq!(parse_answer(sized).unwrap(), (400, b"{}".to_vec()));
        for cut in [
            &b"HTTP/1.1 200 OK\r\nContent-Length: 9\r\n\r\nshort"[..],
            b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n9\r\nshort",
            b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\nzz\r\n",
            b"SSH-2.0-OpenSSH_9.6\r\n\r\n",
            b"HTTP/1.1 200 OK\r\nContent-Encoding: gzip\r\n\r\n\x1f\x8b",
            b"HTTP/1.1 200",
        ] {
            assert!(
                parse_answer(cut).is_err(),
                "{}",
                String::from_utf8_lossy(cut)
            );
        }
    }

    #[test]
    fn queries_are_percent_encoded() {
        assert_eq!(
            encode(r#"{__name__=~"gpudoctor_.+"}"#),
            "%7B__name__%3D~%22gpudoctor_.%2B%22%7D"
        );
    }
}
