//! A real etcd (Debian's `etcd-server`, which scripts/test.sh installs) on
//! free loopback ports outside the ephemeral range, with its data dir and log in a temporary dir; killed
//! when dropped. Tests give each case its own key prefix, so one server
//! serves a whole binary's cases.

use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use std::sync::atomic::{AtomicU32, Ordering};

use super::Reaper;

/// A free loopback port below the kernel's ephemeral range (32768 up on
/// Linux), so no outgoing connection takes it while the server is down
/// between [`EtcdServer::stop`] and [`EtcdServer::restart`].
fn stable_port() -> u16 {
    static NEXT: AtomicU32 = AtomicU32::new(0);
    let spread = std::process::id().wrapping_mul(7919);
    loop {
        let n = NEXT.fetch_add(1, Ordering::Relaxed);
        let port = 20_000 + (spread.wrapping_add(n.wrapping_mul(37)) % 12_000) as u16;
        if std::net::TcpListener::bind(("127.0.0.1", port)).is_ok() {
            return port;
        }
    }
}

/// PEM files for an etcd serving its clients over TLS.
pub struct EtcdTls {
    /// The CA that signed the server's certificate and the clients'.
    pub ca: std::path::PathBuf,
    pub cert: std::path::PathBuf,
    pub key: std::path::PathBuf,
}

pub struct EtcdServer {
    // Declared first so the server is killed before its dir is removed.
    server: Option<Reaper>,
    pub port: u16,
    peer_port: u16,
    /// With TLS: the files, and the plain-HTTP port of its `/health`.
    tls: Option<(EtcdTls, u16)>,
    dir: tempfile::TempDir,
}

impl EtcdServer {
    /// Start etcd and wait until it answers a read.
    pub fn start() -> Self {
        Self::start_with(None)
    }

    /// Start etcd serving clients over TLS only, requiring a client
    /// certificate from `tls.ca` (`--client-cert-auth`).
    pub fn start_tls(tls: EtcdTls) -> Self {
        Self::start_with(Some((tls, stable_port())))
    }

    fn start_with(tls: Option<(EtcdTls, u16)>) -> Self {
        let dir = tempfile::tempdir().expect("tempdir");
        let (port, peer_port) = (stable_port(), stable_port());
        let mut etcd = Self { server: None, port, peer_port, tls, dir };
        etcd.spawn();
        etcd
    }

    pub fn endpoint(&self) -> String {
        let scheme = if self.tls.is_some() { "https" } else { "http" };
        format!("{scheme}://127.0.0.1:{}", self.port)
    }

    /// etcd's own log, for failure messages.
    pub fn log(&self) -> String {
        std::fs::read_to_string(self.dir.path().join("etcd.log")).unwrap_or_default()
    }

    /// Kill the server (its data stays): clients lose it.
    pub fn stop(&mut self) {
        self.server = None;
    }

    /// Start it again on the same ports and data.
    pub fn restart(&mut self) {
        self.stop();
        self.spawn();
    }

    fn spawn(&mut self) {
        let client = self.endpoint();
        let peer = format!("http://127.0.0.1:{}", self.peer_port);
        let log = std::fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(self.dir.path().join("etcd.log"))
            .expect("etcd.log");
        let mut cmd = Command::new("etcd");
        cmd.args(["--name", "test", "--data-dir"])
            .arg(self.dir.path().join("data"))
            .args(["--listen-client-urls", &client, "--advertise-client-urls", &client])
            .args(["--listen-peer-urls", &peer, "--initial-advertise-peer-urls", &peer])
            .args(["--initial-cluster", &format!("test={peer}")]);
        if let Some((tls, health)) = &self.tls {
            cmd.arg("--cert-file").arg(&tls.cert).arg("--key-file").arg(&tls.key);
            cmd.arg("--trusted-ca-file").arg(&tls.ca).arg("--client-cert-auth");
            cmd.args(["--listen-metrics-urls", &format!("http://127.0.0.1:{health}")]);
        }
        let child = cmd
            .stdin(Stdio::null())
            .stdout(log.try_clone().expect("log"))
            .stderr(log)
            .spawn()
            .expect("start etcd (Debian's etcd-server: scripts/test.sh installs it)");
        self.server = Some(Reaper(child));
        self.wait_ready();
    }

    fn wait_ready(&self) {
        let deadline = Instant::now() + Duration::from_secs(30);
        loop {
            // etcd's own health endpoint, over plain HTTP on the client
            // port (with TLS, on its metrics port).
            if healthy(self.tls.as_ref().map_or(self.port, |(_, health)| *health)) {
                return;
            }
            assert!(Instant::now() < deadline, "etcd did not start; its log:\n{}", self.log());
            std::thread::sleep(Duration::from_millis(50));
        }
    }
}

/// Whether etcd's `/health` on `port` answers 200; a connection refused or
/// reset while it starts is a no, asked again.
fn healthy(port: u16) -> bool {
    use std::io::{Read, Write};
    let Ok(mut stream) = std::net::TcpStream::connect(("127.0.0.1", port)) else { return false };
    let _ = stream.set_read_timeout(Some(Duration::from_secs(5)));
    if write!(stream, "GET /health HTTP/1.0\r\nHost: 127.0.0.1\r\n\r\n").is_err() {
        return false;
    }
    let mut raw = String::new();
    stream.read_to_string(&mut raw).is_ok()
        && raw.starts_with("HTTP/1.")
        && raw.split_whitespace().nth(1) == Some("200")
}
