//! Playing the kubelet for tests against the API server: real
//! valkey-servers standing in for a `ValkeyCluster`'s pods, each on a
//! loopback address of its own (port 6379) and announcing the pod's stable
//! DNS name, which `/etc/hosts` maps to that address for the test's
//! duration (the tests run as root, as CI does).

use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::time::Duration;

use super::{valkey_server, wait_until};

/// `/etc/hosts` entries, removed on drop.
pub struct Hosts {
    marker: String,
}

impl Hosts {
    /// Adds `(ip, name)` entries, marked with `tag` and this process.
    pub fn add(tag: &str, entries: &[(String, String)]) -> Hosts {
        let marker = format!("# valkyrie-test-{}-{tag}", std::process::id());
        let mut text = std::fs::read_to_string("/etc/hosts").unwrap();
        for (ip, name) in entries {
            text.push_str(&format!("{ip} {name} {marker}\n"));
        }
        std::fs::write("/etc/hosts", text).expect("/etc/hosts (the test runs as root)");
        Hosts { marker }
    }
}

impl Drop for Hosts {
    fn drop(&mut self) {
        if let Ok(text) = std::fs::read_to_string("/etc/hosts") {
            let kept: String = text
                .lines()
                .filter(|l| !l.ends_with(&self.marker))
                .map(|l| format!("{l}\n"))
                .collect();
            let _ = std::fs::write("/etc/hosts", kept);
        }
    }
}

/// One pod's valkey-server on `ip:6379`, announcing `fqdn`; killed on drop.
pub struct PodServer {
    pub ip: String,
    pub child: Child,
    /// What valkey-cli needs besides the address (TLS files, password).
    cli: Vec<String>,
}

/// A TLS-only pod: its certificate files (`ca.crt`, `tls.crt`, `tls.key`
/// in `dir`, as its Secret volume holds them) and its password.
pub struct PodTls<'a> {
    pub dir: &'a Path,
    pub password: &'a str,
}

impl PodServer {
    /// Starts it (a replica of `master`'s DNS name when given) and waits
    /// until it answers.
    pub fn start(dir: &Path, ip: &str, fqdn: &str, master: Option<&str>) -> PodServer {
        Self::spawn(
            dir,
            ip,
            fqdn,
            master,
            vec!["--port".into(), "6379".into()],
            Vec::new(),
        )
    }

    /// Starts one that speaks TLS only (`port 0`, `tls-port 6379`,
    /// `tls-replication yes`, clients' certificates required) with `tls`'s
    /// files and password, and waits until it answers.
    pub fn start_tls(
        dir: &Path,
        ip: &str,
        fqdn: &str,
        master: Option<&str>,
        tls: &PodTls<'_>,
    ) -> PodServer {
        let file = |name: &str| tls.dir.join(name).display().to_string();
        let server: Vec<String> = [
            "--port",
            "0",
            "--tls-port",
            "6379",
            "--tls-replication",
            "yes",
            "--tls-auth-clients",
            "yes",
        ]
        .into_iter()
        .map(String::from)
        .chain([
            "--tls-cert-file".into(),
            file("tls.crt"),
            "--tls-key-file".into(),
            file("tls.key"),
            "--tls-ca-cert-file".into(),
            file("ca.crt"),
            "--requirepass".into(),
            tls.password.into(),
            "--masterauth".into(),
            tls.password.into(),
        ])
        .collect();
        let cli = vec![
            "--tls".into(),
            "--cacert".into(),
            file("ca.crt"),
            "--cert".into(),
            file("tls.crt"),
            "--key".into(),
            file("tls.key"),
            "--no-auth-warning".into(),
            "-a".into(),
            tls.password.into(),
        ];
        Self::spawn(dir, ip, fqdn, master, server, cli)
    }

    fn spawn(
        dir: &Path,
        ip: &str,
        fqdn: &str,
        master: Option<&str>,
        server: Vec<String>,
        cli: Vec<String>,
    ) -> PodServer {
        let dir = dir.join(ip);
        std::fs::create_dir_all(&dir).unwrap();
        let mut cmd = Command::new(valkey_server());
        cmd.args(["--bind", ip, "--save", ""])
            .args(&server)
            .args(["--appendonly", "no", "--replica-announce-ip", fqdn])
            .args([
                "--repl-diskless-sync",
                "yes",
                "--repl-diskless-sync-delay",
                "0",
            ])
            .arg("--dir")
            .arg(&dir)
            .arg("--logfile")
            .arg(dir.join("valkey.log"));
        if let Some(m) = master {
            cmd.args(["--replicaof", m, "6379"]);
        }
        let child = cmd
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .unwrap();
        let s = PodServer {
            ip: ip.to_string(),
            child,
            cli,
        };
        wait_until(Duration::from_secs(10), || s.ask(&["PING"]) == "PONG");
        s
    }

    /// A command's reply as valkey-cli prints it (empty when unreachable).
    pub fn ask(&self, args: &[&str]) -> String {
        let cli = std::env::var_os("VALKEY_CLI").unwrap_or_else(|| "valkey-cli".into());
        let out = Command::new(cli)
            .args(&self.cli)
            .args(["-h", &self.ip, "-p", "6379"])
            .args(args)
            .output()
            .unwrap();
        String::from_utf8_lossy(&out.stdout).trim().to_string()
    }

    /// `INFO replication`.
    pub fn info(&self) -> String {
        self.ask(&["INFO", "replication"])
    }

    /// SIGKILL, and reaped.
    pub fn kill(&mut self) {
        self.child.kill().unwrap();
        let _ = self.child.wait();
    }

    /// Whether a Valkyrie link (named `sentinel-…-cmd`) is connected.
    pub fn has_valkyrie_link(&self) -> bool {
        self.ask(&["CLIENT", "LIST"])
            .lines()
            .any(|l| l.contains("name=sentinel-") && l.contains("-cmd"))
    }
}

impl Drop for PodServer {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// A master and two replicas at `<net>.1..3`, announcing `fqdn(i)`;
/// returns once both replicas are linked.
pub fn topology(dir: &Path, net: &str, fqdn: &dyn Fn(usize) -> String) -> Vec<PodServer> {
    let mut servers = vec![PodServer::start(dir, &format!("{net}.1"), &fqdn(0), None)];
    for i in 1..3 {
        let ip = format!("{net}.{}", i + 1);
        servers.push(PodServer::start(dir, &ip, &fqdn(i), Some(&fqdn(0))));
    }
    wait_until(Duration::from_secs(20), || {
        servers[0].info().contains("connected_slaves:2")
    });
    servers
}
