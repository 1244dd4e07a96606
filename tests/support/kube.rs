//! A real kube-apiserver and etcd for tests, shared by all the tests of one
//! test binary (each test takes its own namespace).
//!
//! The binaries come from `VALKYRIE_KUBE_BIN` (the directory that
//! `scripts/kube-testbin` prints on its last line). When it is unset the
//! test FAILS: a missing dependency never passes for a green run.
//!
//! Started once, on the first call, with the flags of `scripts/kube-testbin`'s
//! header: etcd without fsync on free loopback ports, and kube-apiserver with
//! its self-signed serving certificate, RBAC, service-account keys made with
//! the `openssl` CLI, and static tokens:
//! - [`ADMIN_TOKEN`]: user `admin` in `system:masters`;
//! - [`SA_TOKEN`]: user [`SA_USER`] in `system:serviceaccounts` and
//!   `system:serviceaccounts:valkyrie`, with exactly the rights RBAC gives it.
//!
//! **Cleanup.** Statics are never dropped, and a test binary may die of a
//! signal, so the processes are not stopped from Rust. A watchdog `sh`
//! reads a pipe whose only write end this process holds (Rust opens pipes
//! close-on-exec, so no child inherits it). However this process ends, the
//! kernel closes the pipe; the watchdog's `cat` sees end of file, and it
//! sends SIGTERM to etcd and kube-apiserver by their own PIDs, SIGKILL two
//! seconds later, then removes the temporary directory.
//!
//! **kube-controller-manager** is optional: [`controller_manager`] starts
//! it on first use, with only the EndpointSlice controller, for the tests
//! that need a Service's endpoints. A watchdog of its own stops it by its
//! PID in the same way.

use std::path::{Path, PathBuf};
use std::process::{Child, ChildStdin, Command, Stdio};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

use ::kube::Client;
use ::kube::api::{Api, PostParams};
use ::kube::config::{KubeConfigOptions, Kubeconfig};
use k8s_openapi::api::core::v1::Namespace;
use tokio::sync::OnceCell;
use tokio::time::Instant;

use super::free_port;

/// The administrator's bearer token (`system:masters`).
pub const ADMIN_TOKEN: &str = "valkyrie-admin-token";
/// The Valkyrie service account's bearer token.
pub const SA_TOKEN: &str = "valkyrie-sa-token";
/// The user name the API server gives [`SA_TOKEN`].
pub const SA_USER: &str = "system:serviceaccount:valkyrie:valkyrie";

/// The running API server.
pub struct ApiServer {
    /// `https://127.0.0.1:<port>`.
    pub url: String,
    /// Its temporary directory (logs, certificates, kubeconfigs).
    pub dir: PathBuf,
    pub etcd_pid: u32,
    pub apiserver_pid: u32,
    /// How long it took to become ready.
    pub startup: Duration,
    /// The watchdog's pipe: closed only when this process ends.
    _watchdog: ChildStdin,
}

static SERVER: OnceCell<ApiServer> = OnceCell::const_new();

/// The shared API server, started on first use.
pub async fn server() -> &'static ApiServer {
    SERVER.get_or_init(|| start("")).await
}

/// Whose credentials a client carries.
#[derive(Clone, Copy, Debug)]
pub enum Identity {
    Admin,
    ServiceAccount,
}

/// A client configuration for `who` (kube's defaults otherwise), to adjust
/// before building a client.
pub async fn config(who: Identity) -> ::kube::Config {
    config_of(server().await, who).await
}

async fn config_of(server: &ApiServer, who: Identity) -> ::kube::Config {
    let dir = &server.dir;
    let file = match who {
        Identity::Admin => dir.join("admin.kubeconfig"),
        Identity::ServiceAccount => dir.join("sa.kubeconfig"),
    };
    let kubeconfig = Kubeconfig::read_from(&file).unwrap();
    ::kube::Config::from_custom_kubeconfig(kubeconfig, &KubeConfigOptions::default())
        .await
        .unwrap()
}

/// A client with every right.
pub async fn admin_client() -> Client {
    Client::try_from(config(Identity::Admin).await).unwrap()
}

/// A client as the Valkyrie service account: only what RBAC grants.
pub async fn service_account_client() -> Client {
    Client::try_from(config(Identity::ServiceAccount).await).unwrap()
}

/// Creates a fresh namespace `<name>-<n>` and returns its name.
pub async fn namespace(name: &str) -> String {
    create_namespace(admin_client().await, name).await
}

async fn create_namespace(admin: Client, name: &str) -> String {
    static NEXT: AtomicUsize = AtomicUsize::new(0);
    let ns = format!("{name}-{}", NEXT.fetch_add(1, Ordering::Relaxed));
    assert!(ns.len() <= 63, "namespace name too long: {ns}");
    let object: Namespace = serde_json::from_value(serde_json::json!({
        "metadata": { "name": ns }
    }))
    .unwrap();
    let api: Api<Namespace> = Api::all(admin);
    api.create(&PostParams::default(), &object).await.unwrap();
    ns
}

/// An API server of their own for the tests that look across namespaces
/// (tests/kube/rbac.rs lists what the service account sees cluster-wide):
/// `cargo test --test kube` runs every module of the binary in one
/// process, and the shared server holds the other modules' objects.
/// (scripts/run-tests.py runs each module in a process of its own, where
/// this is the only server.)
pub mod isolated {
    use super::*;

    static SERVER: OnceCell<ApiServer> = OnceCell::const_new();

    /// The isolated API server, started on first use.
    pub async fn server() -> &'static ApiServer {
        SERVER.get_or_init(|| start("-isolated")).await
    }

    /// A client with every right, on the isolated server.
    pub async fn admin_client() -> Client {
        Client::try_from(config_of(server().await, Identity::Admin).await).unwrap()
    }

    /// A client as the Valkyrie service account, on the isolated server.
    pub async fn service_account_client() -> Client {
        Client::try_from(config_of(server().await, Identity::ServiceAccount).await).unwrap()
    }

    /// Creates a fresh namespace `<name>-<n>` on the isolated server.
    pub async fn namespace(name: &str) -> String {
        create_namespace(admin_client().await, name).await
    }
}

/// Starts etcd and kube-apiserver in a directory of their own (`tag`
/// tells the servers of one process apart).
async fn start(tag: &str) -> ApiServer {
    let bin = std::env::var_os("VALKYRIE_KUBE_BIN")
        .map(PathBuf::from)
        .expect(
            "VALKYRIE_KUBE_BIN is not set: this test needs a real kube-apiserver and etcd. \
         Build them with `export VALKYRIE_KUBE_BIN=$(scripts/kube-testbin | tail -n1)` \
         (scripts/test does it)",
        );
    for b in ["etcd", "kube-apiserver"] {
        let path = bin.join(b);
        assert!(
            path.is_file(),
            "{} is missing: run scripts/kube-testbin",
            path.display()
        );
    }
    let began = Instant::now();
    let dir = std::env::temp_dir().join(format!("valkyrie-kube-{}{tag}", std::process::id()));
    assert!(
        !dir.to_string_lossy().contains(char::is_whitespace),
        "{}",
        dir.display()
    );
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    let d = |f: &str| dir.join(f).to_str().unwrap().to_string();

    run("openssl", &["genrsa", "-out", &d("sa.key"), "2048"]);
    run(
        "openssl",
        &["rsa", "-in", &d("sa.key"), "-pubout", "-out", &d("sa.pub")],
    );
    std::fs::write(
        dir.join("tokens.csv"),
        format!(
            "{ADMIN_TOKEN},admin,admin-uid,system:masters\n\
             {SA_TOKEN},{SA_USER},sa-uid,\"system:serviceaccounts,system:serviceaccounts:valkyrie\"\n"
        ),
    )
    .unwrap();

    let (e, p, a) = distinct_ports();
    let (etcd_url, peer_url) = (
        format!("http://127.0.0.1:{e}"),
        format!("http://127.0.0.1:{p}"),
    );
    let etcd_args = format!(
        "--name t --data-dir {data} --listen-client-urls {etcd_url} \
         --advertise-client-urls {etcd_url} --listen-peer-urls {peer_url} \
         --initial-advertise-peer-urls {peer_url} --initial-cluster t={peer_url} \
         --unsafe-no-fsync --log-level warn",
        data = d("etcd"),
    );
    let mut etcd = spawn(&bin.join("etcd"), &dir.join("etcd.log"), &etcd_args);
    let url = format!("https://127.0.0.1:{a}");
    let apiserver_args = format!(
        "--etcd-servers {etcd_url} --bind-address 127.0.0.1 --advertise-address 127.0.0.1 \
         --secure-port {a} --cert-dir {pki} --token-auth-file {tokens} \
         --authorization-mode RBAC --service-cluster-ip-range 10.0.0.0/24 \
         --service-account-issuer {url} --service-account-key-file {public} \
         --service-account-signing-key-file {private} \
         --disable-admission-plugins ServiceAccount --allow-privileged=true \
         --enable-priority-and-fairness=false --endpoint-reconciler-type none",
        pki = d("pki"),
        tokens = d("tokens.csv"),
        public = d("sa.pub"),
        private = d("sa.key"),
    );
    let mut apiserver = spawn(
        &bin.join("kube-apiserver"),
        &dir.join("apiserver.log"),
        &apiserver_args,
    );
    let watchdog = watchdog(&[etcd.id(), apiserver.id()], &dir);

    for (name, token) in [("admin", ADMIN_TOKEN), ("sa", SA_TOKEN)] {
        let kubeconfig = format!(
            "apiVersion: v1\nkind: Config\n\
             clusters: [{{name: t, cluster: {{server: \"{url}\", certificate-authority: \"{ca}\"}}}}]\n\
             users: [{{name: u, user: {{token: \"{token}\"}}}}]\n\
             contexts: [{{name: c, context: {{cluster: t, user: u, namespace: default}}}}]\n\
             current-context: c\n",
            ca = d("pki/apiserver.crt"),
        );
        std::fs::write(dir.join(format!("{name}.kubeconfig")), kubeconfig).unwrap();
    }

    // Ready: the serving certificate is written, then /readyz says "ok".
    let deadline = began + Duration::from_secs(60);
    loop {
        for (child, log) in [(&mut etcd, "etcd.log"), (&mut apiserver, "apiserver.log")] {
            if let Some(status) = child.try_wait().unwrap() {
                panic!(
                    "{log}: exited with {status} while starting:\n{}",
                    tail(&dir.join(log))
                );
            }
        }
        if dir.join("pki/apiserver.crt").exists() && readyz(&dir).await {
            break;
        }
        assert!(
            Instant::now() < deadline,
            "kube-apiserver not ready within 60 s:\n{}",
            tail(&dir.join("apiserver.log"))
        );
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
    let startup = began.elapsed();
    eprintln!(
        "kube-apiserver ready at {url} in {startup:.1?} (dir {})",
        dir.display()
    );
    ApiServer {
        url,
        dir,
        etcd_pid: etcd.id(),
        apiserver_pid: apiserver.id(),
        startup,
        _watchdog: watchdog,
    }
}

async fn readyz(dir: &Path) -> bool {
    let Ok(kubeconfig) = Kubeconfig::read_from(dir.join("admin.kubeconfig")) else {
        return false;
    };
    let options = KubeConfigOptions::default();
    let Ok(config) = ::kube::Config::from_custom_kubeconfig(kubeconfig, &options).await else {
        return false;
    };
    let Ok(client) = Client::try_from(config) else {
        return false;
    };
    let request = http::Request::get("/readyz").body(Vec::new()).unwrap();
    let answer = tokio::time::timeout(Duration::from_secs(5), client.request_text(request)).await;
    matches!(answer, Ok(Ok(text)) if text.trim() == "ok")
}

/// Three different free ports.
fn distinct_ports() -> (u16, u16, u16) {
    loop {
        let (e, p, a) = (free_port(), free_port(), free_port());
        if e != p && p != a && e != a {
            return (e, p, a);
        }
    }
}

fn run(program: &str, args: &[&str]) {
    let out = Command::new(program)
        .args(args)
        .output()
        .unwrap_or_else(|e| {
            panic!("{program}: {e} (the harness needs the {program} command)");
        });
    assert!(
        out.status.success(),
        "{program} {args:?}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
}

/// Starts `program` with `args` (split on white space: the temporary
/// directory's path has none), its output into `log`.
fn spawn(program: &Path, log: &Path, args: &str) -> Child {
    let log = std::fs::File::create(log).unwrap();
    Command::new(program)
        .args(args.split_whitespace())
        .stdin(Stdio::null())
        .stdout(log.try_clone().unwrap())
        .stderr(log)
        .spawn()
        .unwrap_or_else(|e| panic!("{}: {e}", program.display()))
}

/// Stops `pids` and removes `dir` once this process has ended (see the
/// module's documentation). It outlives this process: nobody waits for it.
#[allow(clippy::zombie_processes)]
fn watchdog(pids: &[u32], dir: &Path) -> ChildStdin {
    let script = r#"cat >/dev/null
kill -TERM "$1" "$2" 2>/dev/null
sleep 2
kill -KILL "$1" "$2" 2>/dev/null
rm -rf "$3""#;
    let mut child = Command::new("sh")
        .args(["-c", script, "sh"])
        .args(pids.iter().map(u32::to_string))
        .arg(dir)
        .stdin(Stdio::piped())
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .expect("sh for the watchdog");
    child.stdin.take().unwrap()
}

fn tail(log: &Path) -> String {
    let text = std::fs::read_to_string(log).unwrap_or_default();
    let lines: Vec<&str> = text.lines().collect();
    lines[lines.len().saturating_sub(30)..].join("\n")
}

/// kube-controller-manager, running only [`CONTROLLERS`] against the
/// shared API server (see [`controller_manager`]).
pub struct ControllerManager {
    pub pid: u32,
    /// Its log, in the API server's temporary directory.
    pub log: PathBuf,
    /// From the start to its controller's caches being synced.
    pub startup: Duration,
    /// Its own watchdog's pipe (see the module's documentation).
    _watchdog: ChildStdin,
}

/// The controllers [`controller_manager`] starts: the EndpointSlice
/// controller alone, which turns a Service's selector and the matching
/// Pods (scheduled on an existing Node, with a pod IP) into
/// EndpointSlices. It needs no service-account key.
pub const CONTROLLERS: &str = "endpointslice-controller";

static CONTROLLER_MANAGER: OnceCell<ControllerManager> = OnceCell::const_new();

/// The shared kube-controller-manager, started on first use (after the
/// shared API server) from `VALKYRIE_KUBE_BIN`, as the administrator,
/// without leader election and without a serving port. Optional: only the
/// tests that call it start it. Like etcd and kube-apiserver it is stopped
/// by its PID by a watchdog when the test process ends.
pub async fn controller_manager() -> &'static ControllerManager {
    CONTROLLER_MANAGER
        .get_or_init(start_controller_manager)
        .await
}

async fn start_controller_manager() -> ControllerManager {
    let server = server().await;
    let bin = std::env::var_os("VALKYRIE_KUBE_BIN")
        .map(PathBuf::from)
        .expect("VALKYRIE_KUBE_BIN is not set");
    let program = bin.join("kube-controller-manager");
    assert!(
        program.is_file(),
        "{} is missing: run VALKYRIE_KUBE_CONTROLLER_MANAGER=1 scripts/kube-testbin (it builds it next to kube-apiserver)",
        program.display()
    );
    let began = Instant::now();
    let log = server.dir.join("controller-manager.log");
    let args = format!(
        "--kubeconfig {kubeconfig} --controllers {CONTROLLERS} --leader-elect=false \
         --secure-port 0",
        kubeconfig = server.dir.join("admin.kubeconfig").display(),
    );
    let mut child = spawn(&program, &log, &args);
    let watchdog = pid_watchdog(&[child.id()]);
    // Ready once the EndpointSlice controller has started and its
    // informers have synced: in 1.37's log, "Starting endpoint slice
    // controller" and then "Caches are synced".
    let deadline = began + Duration::from_secs(60);
    loop {
        if let Some(status) = child.try_wait().unwrap() {
            panic!(
                "kube-controller-manager exited with {status} while starting:\n{}",
                tail(&log)
            );
        }
        let text = std::fs::read_to_string(&log).unwrap_or_default();
        if let Some(at) = text.find("Starting endpoint slice controller")
            && text[at..].contains("Caches are synced")
        {
            break;
        }
        assert!(
            Instant::now() < deadline,
            "kube-controller-manager did not start its controller within 60 s:\n{}",
            tail(&log)
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    let startup = began.elapsed();
    eprintln!(
        "kube-controller-manager ({CONTROLLERS}) started in {startup:.1?}, log {}",
        log.display()
    );
    ControllerManager {
        pid: child.id(),
        log,
        startup,
        _watchdog: watchdog,
    }
}

/// Stops `pids` (SIGTERM, SIGKILL two seconds later) once this process
/// has ended, as [`watchdog`] does, but removes nothing.
#[allow(clippy::zombie_processes)]
fn pid_watchdog(pids: &[u32]) -> ChildStdin {
    let script = r#"cat >/dev/null
kill -TERM "$@" 2>/dev/null
sleep 2
kill -KILL "$@" 2>/dev/null"#;
    let mut child = Command::new("sh")
        .args(["-c", script, "sh"])
        .args(pids.iter().map(u32::to_string))
        .stdin(Stdio::piped())
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .expect("sh for the watchdog");
    child.stdin.take().unwrap()
}

/// Installs the `ValkeyCluster` CRD (once per API server) and waits until
/// it is served.
pub async fn install_crd(client: &Client) {
    use ::kube::CustomResourceExt;
    use ::kube::runtime::wait::{await_condition, conditions};
    use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
    use valkyrie::kube::crd::ValkeyCluster;
    let crds: Api<CustomResourceDefinition> = Api::all(client.clone());
    match crds
        .create(&PostParams::default(), &ValkeyCluster::crd())
        .await
    {
        Ok(_) => {}
        Err(::kube::Error::Api(s)) if s.code == 409 => {}
        Err(e) => panic!("CRD refused: {e}"),
    }
    let established = await_condition(
        crds,
        ValkeyCluster::crd_name(),
        conditions::is_crd_established(),
    );
    tokio::time::timeout(Duration::from_secs(20), established)
        .await
        .expect("CRD not established within 20 s")
        .unwrap();
}

/// Server-side apply of one manifest (field manager `valkyrie-install`,
/// forced), as `kubectl apply --server-side`: the resource is found from
/// the manifest's `apiVersion` and `kind`, in `namespace` (else the
/// manifest's own; cluster-scoped kinds have none).
pub async fn apply_manifest(client: &Client, doc: &serde_json::Value, namespace: Option<&str>) {
    use ::kube::api::{ApiResource, DynamicObject, GroupVersionKind, Patch, PatchParams};
    let kind = doc["kind"].as_str().expect("a manifest's kind");
    let name = doc["metadata"]["name"].as_str().expect("a manifest's name");
    let (group, version) = match doc["apiVersion"]
        .as_str()
        .expect("apiVersion")
        .split_once('/')
    {
        Some((g, v)) => (g, v),
        None => ("", doc["apiVersion"].as_str().unwrap_or_default()),
    };
    let resource = ApiResource::from_gvk(&GroupVersionKind::gvk(group, version, kind));
    let ns = namespace.or_else(|| doc["metadata"]["namespace"].as_str());
    let api: Api<DynamicObject> = match ns {
        Some(ns) => Api::namespaced_with(client.clone(), ns, &resource),
        None => Api::all_with(client.clone(), &resource),
    };
    let pp = PatchParams::apply("valkyrie-install").force();
    api.patch(name, &pp, &Patch::Apply(doc))
        .await
        .unwrap_or_else(|e| panic!("applying {kind} {name}: {e}"));
}
