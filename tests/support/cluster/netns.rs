//! Sockets inside the node's network namespace, for a test process that
//! stays in the host's: one thread moves itself into the namespace
//! (`setns` changes only the calling thread) and opens connections there
//! on request; a socket keeps the namespace it was made in, whichever
//! thread uses it after. [`NodeNet::forward`] puts a loopback port of the
//! host in front of an address inside, for clients that cannot enter the
//! namespace (kube-rs, kubectl).

use std::net::{SocketAddr, TcpStream};
use std::os::fd::AsFd;
use std::path::Path;
use std::sync::Mutex;
use std::sync::mpsc::{Sender, channel};
use std::time::Duration;

type Request = (SocketAddr, Duration, Sender<std::io::Result<TcpStream>>);

/// Opens TCP connections from inside one network namespace. Its threads
/// end when it is dropped.
pub struct NodeNet {
    requests: Mutex<Sender<Request>>,
    /// Closed on drop: the forwarders stop accepting.
    _stop: tokio::sync::watch::Sender<()>,
    stopped: tokio::sync::watch::Receiver<()>,
}

fn connect_with(
    requests: &Sender<Request>,
    addr: SocketAddr,
    limit: Duration,
) -> std::io::Result<TcpStream> {
    let (tx, rx) = channel();
    requests
        .send((addr, limit, tx))
        .map_err(|_| std::io::Error::other("the netns thread is gone"))?;
    rx.recv()
        .map_err(|_| std::io::Error::other("the netns thread is gone"))?
}

/// Connections inside the namespace, for a thread of a test's own.
#[derive(Clone)]
pub struct Dialer(Sender<Request>);

impl Dialer {
    /// A connection to `addr`, made inside the namespace (blocking).
    pub fn connect(&self, addr: SocketAddr, limit: Duration) -> std::io::Result<TcpStream> {
        connect_with(&self.0, addr, limit)
    }
}

impl NodeNet {
    /// A thread in the namespace whose handle is `netns` (a file under
    /// `/run/netns`).
    pub fn enter(netns: &Path) -> NodeNet {
        let file =
            std::fs::File::open(netns).unwrap_or_else(|e| panic!("{}: {e}", netns.display()));
        let (tx, rx) = channel::<Request>();
        let (ready_tx, ready_rx) = channel();
        std::thread::Builder::new()
            .name("node-netns".into())
            .spawn(move || {
                use rustix::thread::{LinkNameSpaceType, move_into_link_name_space};
                let entered =
                    move_into_link_name_space(file.as_fd(), Some(LinkNameSpaceType::Network));
                ready_tx.send(entered).unwrap();
                for (addr, limit, reply) in rx {
                    let _ = reply.send(TcpStream::connect_timeout(&addr, limit));
                }
            })
            .unwrap();
        ready_rx
            .recv()
            .unwrap()
            .unwrap_or_else(|e| panic!("setns into {}: {e}", netns.display()));
        let (stop, stopped) = tokio::sync::watch::channel(());
        NodeNet {
            requests: Mutex::new(tx),
            _stop: stop,
            stopped,
        }
    }

    /// A connection to `addr`, made inside the namespace (blocking).
    pub fn connect(&self, addr: SocketAddr, limit: Duration) -> std::io::Result<TcpStream> {
        self.dialer().connect(addr, limit)
    }

    /// A handle that opens connections inside the namespace from any
    /// thread, while this value lives.
    pub fn dialer(&self) -> Dialer {
        Dialer(self.requests.lock().unwrap().clone())
    }

    /// A port on the host's 127.0.0.1 whose connections are relayed to
    /// `target` inside the namespace, by a thread of its own (so that it
    /// outlives any one test's runtime) until this value is dropped.
    pub fn forward(&self, target: SocketAddr) -> u16 {
        let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        let port = listener.local_addr().unwrap().port();
        listener.set_nonblocking(true).unwrap();
        let requests = self.requests.lock().unwrap().clone();
        let mut stopped = self.stopped.clone();
        std::thread::Builder::new()
            .name(format!("forward-{port}"))
            .spawn(move || {
                let rt = tokio::runtime::Builder::new_current_thread()
                    .enable_all()
                    .build()
                    .unwrap();
                rt.block_on(async move {
                    let listener = tokio::net::TcpListener::from_std(listener).unwrap();
                    loop {
                        let mut outside = tokio::select! {
                            accepted = listener.accept() => match accepted {
                                Ok((s, _)) => s,
                                Err(_) => continue,
                            },
                            _ = stopped.changed() => return,
                        };
                        let requests = requests.clone();
                        tokio::spawn(async move {
                            let inside = tokio::task::spawn_blocking(move || {
                                connect_with(&requests, target, Duration::from_secs(5))
                            })
                            .await
                            .unwrap();
                            let Ok(inside) = inside else { return };
                            let _ = inside.set_nonblocking(true);
                            let Ok(mut inside) = tokio::net::TcpStream::from_std(inside) else {
                                return;
                            };
                            let _ = tokio::io::copy_bidirectional(&mut outside, &mut inside).await;
                        });
                    }
                });
            })
            .unwrap();
        port
    }
}
