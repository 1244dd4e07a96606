//! Network cuts: iptables rules (deleted when their guard drops), the
//! connection marks that tell each sentinel's connections apart, and the
//! deployment's cuts between a sentinel and data nodes or other sentinels.

use std::process::Command;

use super::Deployment;
use crate::support::cut::iptables_bin;

/// iptables rules, deleted on drop.
#[derive(Debug)]
pub struct Rules {
    /// (table, chain and rule specification).
    rules: Vec<(&'static str, Vec<String>)>,
}

impl Rules {
    pub(super) fn new() -> Rules {
        Rules { rules: Vec::new() }
    }

    /// Inserts `spec` (chain first) into `table`, tagged with a comment
    /// naming this test process (for cleaning up after a killed run).
    fn insert(&mut self, table: &'static str, mut spec: Vec<String>) {
        let tag = format!("valkyrie-peers-{}", std::process::id());
        spec.splice(1..1, strings(&["-m", "comment", "--comment", &tag]));
        let status = Command::new(iptables_bin())
            .args(["-w", "-t", table, "-I"])
            .args(&spec)
            .status()
            .expect("run iptables");
        assert!(status.success(), "iptables -t {table} -I {spec:?} failed");
        self.rules.push((table, spec));
    }

    /// Marks every connection `uid` opens with `uid` (mangle table):
    /// what tells a sentinel's connections apart in [`Deployment::cut`].
    pub(super) fn mark_connections_of(&mut self, uid: u32) {
        self.insert(
            "mangle",
            strings(&[
                "OUTPUT",
                "-m",
                "owner",
                "--uid-owner",
                &uid.to_string(),
                "-m",
                "connmark",
                "--mark",
                "0",
                "-j",
                "CONNMARK",
                "--set-mark",
                &uid.to_string(),
            ]),
        );
    }

    /// Deletes the rules now (the path heals).
    pub fn heal(mut self) {
        self.remove();
    }

    fn remove(&mut self) {
        for (table, spec) in self.rules.drain(..).rev() {
            let _ = Command::new(iptables_bin())
                .args(["-w", "-t", table, "-D"])
                .args(&spec)
                .status();
        }
    }
}

impl Drop for Rules {
    fn drop(&mut self) {
        self.remove();
    }
}

fn strings(v: &[&str]) -> Vec<String> {
    v.iter().map(|s| s.to_string()).collect()
}

impl Deployment {
    /// Cuts sentinel `i` from the data nodes on `data_ports` and from the
    /// sentinels `others`, both directions. Heals when the guard drops.
    pub fn cut(&self, i: usize, data_ports: &[u16], others: &[usize]) -> Rules {
        let me = &self.sentinels[i];
        let mut rules = Rules::new();
        let mut drop_rule = |mark: u32, dir: &str, port: u16| {
            rules.insert(
                "filter",
                strings(&[
                    "OUTPUT",
                    "-p",
                    "tcp",
                    "-m",
                    "connmark",
                    "--mark",
                    &mark.to_string(),
                    dir,
                    &port.to_string(),
                    "-j",
                    "DROP",
                ]),
            );
        };
        for &p in data_ports {
            drop_rule(me.uid, "--dport", p);
            drop_rule(me.uid, "--sport", p);
        }
        for &j in others {
            let other = &self.sentinels[j];
            // What `i` opened to `j`, and what `j` opened to `i`.
            drop_rule(me.uid, "--dport", other.port);
            drop_rule(me.uid, "--sport", other.port);
            drop_rule(other.uid, "--dport", me.port);
            drop_rule(other.uid, "--sport", me.port);
        }
        rules
    }

    /// Cuts sentinel `i` from every data node and every other sentinel.
    pub fn isolate(&self, i: usize) -> Rules {
        let others: Vec<usize> = (0..self.sentinels.len()).filter(|&j| j != i).collect();
        self.cut(i, &self.node_ports(), &others)
    }
}
