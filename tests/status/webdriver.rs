//! A small WebDriver client for the status page test: chromedriver
//! started as a process, one headless Chromium session, and the few
//! commands the test needs (navigate, execute script, screenshot, the
//! browser's console log). Plain HTTP/1.1 on loopback: no client stack.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::disallowed_methods)]

use std::io::{Read, Write};
use std::net::TcpStream;
use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::time::Duration;

use base64::Engine;
use serde_json::{Value, json};

use crate::support::{free_port, wait_until};

/// An executable: `$var` if set, else `name` on PATH. A missing browser
/// fails the test (scripts/test installs them), never skips it.
fn executable(var: &str, name: &str) -> PathBuf {
    if let Ok(p) = std::env::var(var) {
        return PathBuf::from(p);
    }
    std::env::var_os("PATH")
        .and_then(|paths| {
            std::env::split_paths(&paths)
                .map(|d| d.join(name))
                .find(|p| p.is_file())
        })
        .unwrap_or_else(|| {
            panic!("{name} not found (set {var}, or run scripts/test, which installs it)")
        })
}

/// chromedriver, killed by PID on drop.
pub struct Driver {
    child: Child,
    port: u16,
}

impl Driver {
    pub fn start() -> Driver {
        let port = free_port();
        let child = Command::new(executable("VALKYRIE_CHROMEDRIVER", "chromedriver"))
            .arg(format!("--port={port}"))
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .unwrap();
        let driver = Driver { child, port };
        wait_until(Duration::from_secs(20), || {
            call(port, "GET", "/status", None).is_ok_and(|v| v["value"]["ready"] == true)
        });
        driver
    }
}

impl Drop for Driver {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// One command: the response's JSON, or its error.
fn call(port: u16, method: &str, path: &str, body: Option<&Value>) -> Result<Value, String> {
    let mut s = TcpStream::connect(("127.0.0.1", port)).map_err(|e| e.to_string())?;
    s.set_read_timeout(Some(Duration::from_secs(60)))
        .map_err(|e| e.to_string())?;
    let body = body.map(Value::to_string).unwrap_or_default();
    let request = format!(
        "{method} {path} HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close\r\n\
         Content-Type: application/json\r\nContent-Length: {}\r\n\r\n{body}",
        body.len()
    );
    s.write_all(request.as_bytes()).map_err(|e| e.to_string())?;
    // chromedriver keeps the connection open: read the head, then
    // Content-Length bytes.
    let mut out = Vec::new();
    let mut chunk = [0u8; 16 * 1024];
    let head_end = loop {
        if let Some(i) = out.windows(4).position(|w| w == b"\r\n\r\n") {
            break i + 4;
        }
        let n = s.read(&mut chunk).map_err(|e| e.to_string())?;
        if n == 0 {
            return Err("closed before the head".into());
        }
        out.extend_from_slice(&chunk[..n]);
    };
    let head = String::from_utf8_lossy(&out[..head_end]).to_string();
    let length: usize = head
        .lines()
        .find_map(|l| {
            let (k, v) = l.split_once(':')?;
            k.eq_ignore_ascii_case("content-length")
                .then(|| v.trim().parse().ok())?
        })
        .ok_or("no Content-Length")?;
    while out.len() < head_end + length {
        let n = s.read(&mut chunk).map_err(|e| e.to_string())?;
        if n == 0 {
            return Err("closed before the body".into());
        }
        out.extend_from_slice(&chunk[..n]);
    }
    let body = String::from_utf8_lossy(&out[head_end..head_end + length]);
    let value: Value = serde_json::from_str(&body).map_err(|e| format!("{e}: {body}"))?;
    if head.split(' ').nth(1) != Some("200") {
        return Err(format!("{head}\n{value}"));
    }
    Ok(value)
}

/// One headless Chromium session; deleted on drop.
pub struct Session {
    port: u16,
    id: String,
}

impl Session {
    pub fn new(driver: &Driver) -> Session {
        let chromium = executable("VALKYRIE_CHROMIUM", "chromium");
        let capabilities = json!({"capabilities": {"alwaysMatch": {
            "browserName": "chrome",
            "goog:chromeOptions": {
                "binary": chromium,
                "args": ["--headless=new", "--no-sandbox", "--disable-gpu",
                         "--disable-dev-shm-usage", "--window-size=1280,1000"],
            },
            "goog:loggingPrefs": {"browser": "ALL"},
        }}});
        let v = call(driver.port, "POST", "/session", Some(&capabilities)).unwrap();
        Session {
            port: driver.port,
            id: v["value"]["sessionId"].as_str().unwrap().to_string(),
        }
    }

    fn command(&self, method: &str, path: &str, body: Option<&Value>) -> Value {
        let path = format!("/session/{}{path}", self.id);
        let mut v = call(self.port, method, &path, body).unwrap();
        v["value"].take()
    }

    pub fn goto(&self, url: &str) {
        self.command("POST", "/url", Some(&json!({ "url": url })));
    }

    /// Runs `script` (a function body) in the page; its return value.
    pub fn execute(&self, script: &str) -> Value {
        self.command(
            "POST",
            "/execute/sync",
            Some(&json!({"script": script, "args": []})),
        )
    }

    pub fn screenshot(&self) -> Vec<u8> {
        let v = self.command("GET", "/screenshot", None);
        base64::engine::general_purpose::STANDARD
            .decode(v.as_str().unwrap())
            .unwrap()
    }

    /// The browser console's entries since the last call (each with
    /// `level`, `source`, `message`).
    pub fn console(&self) -> Vec<Value> {
        let v = self.command("POST", "/se/log", Some(&json!({"type": "browser"})));
        v.as_array().cloned().unwrap_or_default()
    }
}

impl Drop for Session {
    fn drop(&mut self) {
        let _ = call(self.port, "DELETE", &format!("/session/{}", self.id), None);
    }
}
