//! Faults a test puts on the node: a part killed and started again (the
//! kubelet, say), and a container's process killed as a crash or the
//! kernel's OOM killer would.

use std::process::Command;

use super::{Cluster, Part};

impl Cluster {
    /// SIGKILLs the part `name` and waits for it to be gone. (Killing the
    /// kubelet leaves its containers running.)
    pub fn kill_part(&mut self, name: &str) {
        let part = self.part(name);
        part.child.kill().unwrap();
        part.child.wait().unwrap();
    }

    /// Starts `name` again, with the arguments of its first start.
    pub fn restart_part(&mut self, name: &'static str) {
        let at = self.parts.iter().position(|p| p.name == name).unwrap();
        let Part {
            args, mut child, ..
        } = self.parts.remove(at);
        assert!(
            child.try_wait().unwrap().is_some(),
            "{name} is still running"
        );
        self.spawn(name, &args);
    }

    fn part(&mut self, name: &str) -> &mut Part {
        self.parts
            .iter_mut()
            .find(|p| p.name == name)
            .unwrap_or_else(|| panic!("no part {name}"))
    }

    /// crictl on the node's containerd.
    pub fn crictl(&self, args: &[&str]) -> Result<String, String> {
        let out = Command::new(self.dir.join("bin/crictl"))
            .arg("--config")
            .arg(self.dir.join("crictl.yaml"))
            .args(args)
            .output()
            .unwrap();
        if out.status.success() {
            Ok(String::from_utf8_lossy(&out.stdout).into_owned())
        } else {
            Err(String::from_utf8_lossy(&out.stderr).into_owned())
        }
    }

    /// The host PID of the running container `container` of pod `ns/pod`.
    pub fn container_pid(&self, ns: &str, pod: &str, container: &str) -> Result<u32, String> {
        let sandbox = self.crictl(&[
            "pods",
            "-q",
            "--state",
            "ready",
            "--namespace",
            ns,
            "--name",
            pod,
        ])?;
        let sandbox = sandbox
            .lines()
            .next()
            .ok_or_else(|| format!("no ready sandbox for {ns}/{pod}"))?;
        let id = self.crictl(&[
            "ps", "-q", "--state", "running", "--pod", sandbox, "--name", container,
        ])?;
        let id = id
            .lines()
            .next()
            .ok_or_else(|| format!("no running {container} in {ns}/{pod}"))?;
        let inspect: serde_json::Value =
            serde_json::from_str(&self.crictl(&["inspect", id])?).map_err(|e| e.to_string())?;
        inspect["info"]["pid"]
            .as_u64()
            .map(|p| p as u32)
            .ok_or_else(|| format!("no pid in crictl inspect {id}"))
    }

    /// SIGKILLs the process of container `container` of pod `ns/pod`;
    /// its PID.
    pub fn kill_container(&self, ns: &str, pod: &str, container: &str) -> u32 {
        let pid = self.container_pid(ns, pod, container).unwrap();
        let status = Command::new("kill")
            .args(["-KILL", &pid.to_string()])
            .status()
            .unwrap();
        assert!(status.success(), "kill -KILL {pid}");
        pid
    }
}
