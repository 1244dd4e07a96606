//! The parent's side of the synthetic instances: starts the child
//! processes (this binary re-executed), learns their groups' ports, and
//! orders kills and counter reads over their pipes.

use std::collections::HashMap;
use std::io::{BufRead, BufReader, Write};
use std::process::{Child, ChildStdin, ChildStdout, Command, Stdio};
use std::time::Instant;

use crate::SERVE_ENV;
use crate::valkyrie::cpu_ticks;

pub(crate) struct ShardProc {
    pub(crate) child: Child,
    pub(crate) stdin: ChildStdin,
    pub(crate) stdout: BufReader<ChildStdout>,
}

/// The synthetic instances, in one or more child processes.
pub(crate) struct Synthetic {
    pub(crate) shards: Vec<ShardProc>,
    pub(crate) groups: Vec<[u16; 3]>,
    /// port → shard.
    pub(crate) owner: HashMap<u16, usize>,
}

impl Synthetic {
    pub(crate) fn start(groups: usize, base_port: u16, per_shard: usize) -> Synthetic {
        let n_shards = groups.div_ceil(per_shard).max(1);
        let exe = std::env::current_exe().unwrap();
        let mut shards = Vec::new();
        let mut lo = base_port;
        let mut spans = Vec::new();
        let mut first = 0;
        for s in 0..n_shards {
            let g = groups / n_shards + usize::from(s < groups % n_shards);
            // Room for the ports other processes hold.
            let hi = lo.checked_add((g * 3 + 300) as u16).unwrap();
            spans.push((first, g, lo, hi));
            lo = hi;
            first += g;
        }
        for (first, g, lo, hi) in spans {
            let mut child = Command::new(&exe)
                .env(SERVE_ENV, format!("{first} {g} {lo} {hi}"))
                .stdin(Stdio::piped())
                .stdout(Stdio::piped())
                .spawn()
                .unwrap();
            let stdin = child.stdin.take().unwrap();
            let stdout = BufReader::new(child.stdout.take().unwrap());
            shards.push(ShardProc {
                child,
                stdin,
                stdout,
            });
        }
        let mut all = Vec::with_capacity(groups);
        let mut owner = HashMap::new();
        for (s, sh) in shards.iter_mut().enumerate() {
            loop {
                let mut line = String::new();
                assert!(
                    sh.stdout.read_line(&mut line).unwrap() > 0,
                    "synthetic shard {s} exited"
                );
                let line = line.trim();
                if line == "ready" {
                    break;
                }
                let p: Vec<u16> = line
                    .strip_prefix("group ")
                    .unwrap()
                    .split(' ')
                    .map(|x| x.parse().unwrap())
                    .collect();
                for &port in &p {
                    owner.insert(port, s);
                }
                all.push([p[0], p[1], p[2]]);
            }
        }
        Synthetic {
            shards,
            groups: all,
            owner,
        }
    }

    /// Kills the instance on `port`; returns when the order was written
    /// (the kill itself follows within microseconds; the acknowledgement is
    /// read afterwards).
    pub(crate) fn kill(&mut self, port: u16) -> Instant {
        let sh = &mut self.shards[self.owner[&port]];
        let at = Instant::now();
        writeln!(sh.stdin, "kill {port}").unwrap();
        sh.stdin.flush().unwrap();
        let mut line = String::new();
        sh.stdout.read_line(&mut line).unwrap();
        assert_eq!(line.trim(), format!("killed {port}"));
        at
    }

    /// Commands served so far by every shard: PING, INFO, PUBLISH, other.
    pub(crate) fn served(&mut self) -> [u64; 4] {
        let mut total = [0; 4];
        for sh in &mut self.shards {
            writeln!(sh.stdin, "stats").unwrap();
            sh.stdin.flush().unwrap();
            let mut line = String::new();
            sh.stdout.read_line(&mut line).unwrap();
            let f: Vec<u64> = line
                .trim()
                .strip_prefix("stats ")
                .unwrap()
                .split(' ')
                .map(|x| x.parse().unwrap())
                .collect();
            for (t, n) in total.iter_mut().zip(f) {
                *t += n;
            }
        }
        total
    }

    pub(crate) fn cpu_ticks(&self) -> u64 {
        self.shards
            .iter()
            .map(|s| {
                let (u, k) = cpu_ticks(s.child.id());
                u + k
            })
            .sum()
    }
}

impl Drop for Synthetic {
    fn drop(&mut self) {
        for s in &mut self.shards {
            let _ = s.child.kill();
            let _ = s.child.wait();
        }
    }
}
