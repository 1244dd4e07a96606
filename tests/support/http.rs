//! Plain HTTP/1.1 to an admin port, one request per connection, for the
//! tests that read `/metrics`, the probes and the status API.

use std::io::{Read, Write};
use std::net::TcpStream;
use std::time::Duration;

/// One request on a fresh connection: status code and body.
pub fn http(port: u16, request: &str) -> Result<(u16, String), String> {
    let mut s = TcpStream::connect(("127.0.0.1", port)).map_err(|e| e.to_string())?;
    s.set_read_timeout(Some(Duration::from_secs(5)))
        .map_err(|e| e.to_string())?;
    s.write_all(request.as_bytes()).map_err(|e| e.to_string())?;
    let mut out = String::new();
    s.read_to_string(&mut out).map_err(|e| e.to_string())?;
    let (head, body) = out.split_once("\r\n\r\n").ok_or("no head")?;
    let code = head
        .split(' ')
        .nth(1)
        .and_then(|c| c.parse().ok())
        .ok_or("no status")?;
    Ok((code, body.to_string()))
}

/// `GET path`: status code and body.
pub fn http_get(port: u16, path: &str) -> Result<(u16, String), String> {
    http(
        port,
        &format!("GET {path} HTTP/1.1\r\nHost: localhost\r\n\r\n"),
    )
}
