//! TLS test support: certificates made at test time (nothing is
//! committed), PEM files put in place by atomic rename, a blocking rustls
//! client (RESP, HTTP, raw lines) that can say which certificate a server
//! presented, `sentinel.conf` snippets, TLS-only `valkey-server`s and a
//! daemon process (Valkyrie, or a real `valkey-sentinel` for comparison)
//! that is stopped and signalled by PID.
//!
//! Layout: [`pki`] (the CAs, leaves and PEM files of one test's [`Pki`],
//! [`write_atomic`], the `sentinel.conf` TLS directives and the rustls
//! client configurations), [`conn`] (the blocking rustls client
//! [`TlsConn`], one-shot RESP and HTTP calls over it, Prometheus text
//! parsing), [`procs`] (the processes: [`TlsServer`], [`start_tls_trio`],
//! [`DaemonProc`], and the daemon under test started with
//! [`start_daemon`] or [`launch`]) and [`group`] (the monitored group
//! `mymaster`: its monitoring lines and the waits on a failover). Every
//! name is re-exported here, so callers write `support::tls::<name>`.

mod conn;
mod group;
mod pki;
mod procs;

// Each test binary uses a part of this API, and none all of it (as with
// `dead_code`, allowed for the whole of `support`).
#[allow(unused_imports)]
pub use {conn::*, group::*, pki::*, procs::*};
