//! Starts the real `sediment` binary for integration tests: a free loopback
//! port (the broker binds port 0 and reports the port it got), a temporary
//! data dir, and the broker's log kept in a file for failure messages.
#![allow(dead_code)]

pub mod etcd;
mod kafka_tool;
pub use kafka_tool::*;
pub mod reference_kafka;
pub mod remote;
pub mod streams_eos;
pub mod txn;

use std::io::{BufRead, BufReader};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::mpsc;
use std::time::Duration;

pub struct TestBroker {
    child: Option<Child>,
    pub port: u16,
    /// The metrics endpoint's port (`metrics.listen` on a free loopback port).
    pub metrics_port: u16,
    pub dir: tempfile::TempDir,
    overrides: Vec<String>,
    /// Environment variables of the next launch (test-only switches such as
    /// `FAILPOINTS`, `sediment::failpoint`).
    env: Vec<(String, String)>,
    log_path: PathBuf,
    /// A `--config` file that gives the listeners and log dirs itself.
    config_file: Option<PathBuf>,
    /// The open files limit (soft and hard) of the next launch, if set.
    open_files_limit: Option<u64>,
}

impl TestBroker {
    /// Start a broker with `key=value` overrides on top of a loopback listener
    /// and a temporary log dir.
    pub fn start(overrides: &[&str]) -> Self {
        Self::start_with_env(overrides, &[])
    }

    /// Start a broker, as [`TestBroker::start`], with `env` set in its environment.
    pub fn start_with_env(overrides: &[&str], env: &[(&str, &str)]) -> Self {
        Self::launched(overrides, env, None, None)
    }

    fn launched(
        overrides: &[&str],
        env: &[(&str, &str)],
        config_file: Option<&Path>,
        open_files_limit: Option<u64>,
    ) -> Self {
        let dir = tempfile::tempdir().expect("tempdir");
        let log_path = dir.path().join("broker.log");
        let mut b = Self {
            child: None,
            port: 0,
            metrics_port: 0,
            dir,
            overrides: overrides.iter().map(|s| s.to_string()).collect(),
            env: env.iter().map(|(k, v)| (k.to_string(), v.to_string())).collect(),
            log_path,
            config_file: config_file.map(Path::to_path_buf),
            open_files_limit,
        };
        b.launch(0);
        b
    }

    /// Start a broker, as [`TestBroker::start`], whose open files limit is
    /// `limit`, its hard limit too, so the broker cannot raise it.
    pub fn start_with_open_files_limit(overrides: &[&str], limit: u64) -> Self {
        Self::launched(overrides, &[], None, Some(limit))
    }

    /// Replace the open files limit of the next [`TestBroker::restart`]
    /// (`None`: the test process's).
    pub fn set_open_files_limit(&mut self, limit: Option<u64>) {
        self.open_files_limit = limit;
    }

    /// Start a broker from the config file `file` (which sets `listeners`
    /// and `log.dirs`), with `overrides` after it.
    pub fn start_with_config(file: &Path, overrides: &[&str]) -> Self {
        Self::launched(overrides, &[], Some(file), None)
    }

    /// A broker whose cleaner reads at 2 MB/s, so a clean of a few MB lasts
    /// seconds (long enough to be caught mid-way), with a compacted topic
    /// `state` (one partition) that rolls every second and is cleaned as soon
    /// as anything is dirty.
    pub fn start_with_slow_cleaner() -> Self {
        let overrides =
            ["log.cleaner.backoff.ms=100", "log.cleaner.io.max.bytes.per.second=2000000"];
        let b = Self::start(&overrides);
        create_topic(
            b.port,
            "state",
            1,
            &[
                ("cleanup.policy", "compact"),
                ("segment.ms", "1000"),
                ("min.cleanable.dirty.ratio", "0.01"),
            ],
        );
        b
    }

    /// Replace the environment variables of the next [`TestBroker::restart`].
    pub fn set_env(&mut self, env: &[(&str, &str)]) {
        self.env = env.iter().map(|(k, v)| (k.to_string(), v.to_string())).collect();
    }

    /// The running broker's process id.
    pub fn pid(&self) -> u32 {
        self.child.as_ref().expect("running").id()
    }

    /// Wait up to `secs` for the broker to exit on its own; its exit status.
    pub fn wait_exit(&mut self, secs: u64) -> std::process::ExitStatus {
        let deadline = std::time::Instant::now() + Duration::from_secs(secs);
        let child = self.child.as_mut().expect("running");
        loop {
            if let Some(status) = child.try_wait().expect("try_wait") {
                self.child = None;
                return status;
            }
            assert!(
                std::time::Instant::now() < deadline,
                "the broker did not exit within {secs}s; its log:\n{}",
                self.log()
            );
            std::thread::sleep(Duration::from_millis(20));
        }
    }

    pub fn data_dir(&self) -> PathBuf {
        self.dir.path().join("data")
    }

    fn launch(&mut self, port: u16) {
        let mut cmd = Command::new(env!("CARGO_BIN_EXE_sediment"));
        cmd.arg("serve");
        if let Some(file) = &self.config_file {
            cmd.arg("--config").arg(file);
        } else {
            cmd.arg("--override")
                .arg(format!("listeners=PLAINTEXT://127.0.0.1:{port}"))
                .arg("--override")
                .arg(format!("log.dirs={}", self.data_dir().display()));
        }
        cmd.arg("--override").arg("metrics.listen=127.0.0.1:0");
        for o in &self.overrides {
            cmd.arg("--override").arg(o);
        }
        cmd.envs(self.env.iter().map(|(k, v)| (k.as_str(), v.as_str())));
        if let Some(limit) = self.open_files_limit {
            use std::os::unix::process::CommandExt;
            let rlimit = libc::rlimit { rlim_cur: limit as _, rlim_max: limit as _ };
            // SAFETY: setrlimit between fork and exec touches only the child's
            // own limit and allocates nothing.
            unsafe {
                cmd.pre_exec(move || {
                    if libc::setrlimit(libc::RLIMIT_NOFILE, &rlimit) == 0 {
                        Ok(())
                    } else {
                        Err(std::io::Error::last_os_error())
                    }
                });
            }
        }
        // The broker's own SEDIMENT_TEST_LOG (from `env`) wins over the
        // test process's, so one test's log level does not leak into others.
        let own = self.env.iter().find(|(k, _)| k == "SEDIMENT_TEST_LOG").map(|(_, v)| v.clone());
        let rust_log = own.or_else(|| std::env::var("SEDIMENT_TEST_LOG").ok());
        let mut child = cmd
            .env("RUST_LOG", rust_log.unwrap_or_else(|| "info".into()))
            .stdout(Stdio::null())
            .stderr(Stdio::piped())
            .spawn()
            .expect("spawn sediment");
        let stderr = child.stderr.take().expect("stderr");
        let log_path = self.log_path.clone();
        let (tx, rx) = mpsc::channel();
        std::thread::spawn(move || {
            use std::io::Write;
            let mut log = std::fs::OpenOptions::new()
                .create(true)
                .append(true)
                .open(&log_path)
                .expect("broker log");
            for line in BufReader::new(stderr).lines().map_while(Result::ok) {
                let _ = writeln!(log, "{line}");
                for (kind, marker) in [("metrics", "metrics_listening="), ("kafka", " listening=")]
                {
                    if let Some(rest) = line.split(marker).nth(1) {
                        let addr = rest.split_whitespace().next().unwrap_or("");
                        if let Some(p) = addr.rsplit(':').next().and_then(|p| p.parse::<u16>().ok())
                        {
                            let _ = tx.send((kind, p));
                        }
                    }
                }
            }
        });
        self.child = Some(child);
        loop {
            match rx.recv_timeout(Duration::from_secs(60)) {
                Ok(("metrics", p)) => self.metrics_port = p,
                Ok((_, p)) => {
                    self.port = p;
                    break;
                }
                Err(_) => panic!("broker did not start; its log:\n{}", self.log()),
            }
        }
    }

    pub fn bootstrap(&self) -> String {
        format!("127.0.0.1:{}", self.port)
    }

    pub fn log(&self) -> String {
        std::fs::read_to_string(&self.log_path).unwrap_or_default()
    }

    /// SIGTERM and wait: the graceful path.
    pub fn stop(&mut self) -> std::process::ExitStatus {
        let mut child = self.child.take().expect("running");
        // SAFETY: kill(2) on our own child's pid.
        unsafe { libc::kill(child.id() as i32, libc::SIGTERM) };
        child.wait().expect("wait")
    }

    /// SIGTERM, without waiting (then [`TestBroker::wait_exit`]).
    pub fn terminate(&mut self) {
        let child = self.child.as_ref().expect("running");
        // SAFETY: kill(2) on our own child's pid.
        unsafe { libc::kill(child.id() as i32, libc::SIGTERM) };
    }

    /// SIGKILL: the crash path.
    pub fn kill(&mut self) {
        if let Some(mut child) = self.child.take() {
            let _ = child.kill();
            let _ = child.wait();
        }
    }

    /// Replace the `key=value` overrides used by the next [`TestBroker::restart`].
    pub fn set_overrides(&mut self, overrides: &[&str]) {
        self.overrides = overrides.iter().map(|s| s.to_string()).collect();
    }

    /// Start again on the same port and data dir.
    pub fn restart(&mut self) {
        let port = self.port;
        self.launch(port);
    }
}

impl Drop for TestBroker {
    fn drop(&mut self) {
        self.kill();
    }
}

/// GET `path` from the broker's metrics endpoint: (status code, body).
pub fn http_get(port: u16, path: &str) -> (u16, String) {
    use std::io::{Read, Write};
    let mut stream = std::net::TcpStream::connect(("127.0.0.1", port)).expect("connect");
    stream.set_read_timeout(Some(Duration::from_secs(30))).expect("timeout");
    // HTTP/1.0, so the answer is never chunked and ends with the connection.
    write!(stream, "GET {path} HTTP/1.0\r\nHost: 127.0.0.1\r\n\r\n").expect("write");
    let mut raw = String::new();
    if let Err(e) = stream.read_to_string(&mut raw) {
        panic!("reading the answer to GET {path} from port {port}: {e} (read so far: {raw:?})");
    }
    let (head, body) = raw.split_once("\r\n\r\n").expect("HTTP response");
    assert!(!head.to_ascii_lowercase().contains("transfer-encoding: chunked"), "{head}");
    let status = head.split_whitespace().nth(1).and_then(|s| s.parse().ok()).expect("status");
    (status, body.to_string())
}

/// `sediment dump-log` on one segment file: its output; fails the test if the tool fails.
pub fn dump_log(segment: &Path) -> String {
    let out = Command::new(env!("CARGO_BIN_EXE_sediment"))
        .arg("dump-log")
        .arg(segment)
        .output()
        .expect("dump-log");
    let dump = String::from_utf8_lossy(&out.stdout).into_owned();
    assert!(
        out.status.success(),
        "dump-log {}:\n{dump}{}",
        segment.display(),
        String::from_utf8_lossy(&out.stderr)
    );
    dump
}

/// Kills a child process (a Prometheus server, ...) when the test ends, however it ends.
pub struct Reaper(pub Child);

impl Drop for Reaper {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

/// A Prometheus server (Debian's `prometheus` package) on a free loopback
/// port, with its storage and log in a temporary dir; killed when dropped.
pub struct Prometheus {
    // Declared first so the server is killed before its dir is removed.
    _server: Reaper,
    pub port: u16,
    dir: tempfile::TempDir,
}

impl Prometheus {
    /// Start Prometheus with `config` as its prometheus.yml. It is not ready
    /// yet: poll [`Prometheus::ready`] before querying.
    pub fn start(config: &str) -> Self {
        let dir = tempfile::tempdir().expect("tempdir");
        let config_path = dir.path().join("prometheus.yml");
        std::fs::write(&config_path, config).expect("write prometheus.yml");
        let port = free_port();
        let log = std::fs::File::create(dir.path().join("prometheus.log")).expect("log file");
        let _server = Reaper(
            Command::new("prometheus")
                .arg(format!("--config.file={}", config_path.display()))
                .arg(format!("--storage.tsdb.path={}", dir.path().join("data").display()))
                .arg(format!("--web.listen-address=127.0.0.1:{port}"))
                .stdout(Stdio::null())
                .stderr(log)
                .spawn()
                .expect("prometheus (Debian package prometheus)"),
        );
        Self { _server, port, dir }
    }

    /// Its log so far, for failure messages.
    pub fn log(&self) -> String {
        std::fs::read_to_string(self.dir.path().join("prometheus.log")).unwrap_or_default()
    }

    /// True once it serves queries. Its port opens before its storage is
    /// loaded, and until then a query gets 503, so this asks `/-/ready`.
    pub fn ready(&self) -> bool {
        std::net::TcpStream::connect(("127.0.0.1", self.port)).is_ok()
            && http_get(self.port, "/-/ready").0 == 200
    }

    /// An instant query's result vector (an error from Prometheus fails the test).
    pub fn query(&self, promql: &str) -> Vec<serde_json::Value> {
        let (status, body) =
            http_get(self.port, &format!("/api/v1/query?query={}", percent_encode(promql)));
        assert_eq!(status, 200, "{promql}: {body}");
        let doc: serde_json::Value = serde_json::from_str(&body).expect("query JSON");
        assert_eq!(doc["status"], "success", "{promql}: {body}");
        doc["data"]["result"].as_array().cloned().unwrap_or_default()
    }

    /// Call `done` every `every` until it holds; fail with `what` and the
    /// server's log once `deadline` has passed.
    pub fn wait_until(
        &self,
        deadline: std::time::Instant,
        every: Duration,
        what: &str,
        done: &mut dyn FnMut() -> bool,
    ) {
        while !done() {
            assert!(
                std::time::Instant::now() < deadline,
                "Prometheus: {what}; its log:\n{}",
                self.log()
            );
            std::thread::sleep(every);
        }
    }
}

/// A loopback port that was free a moment ago.
pub fn free_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0").expect("bind").local_addr().expect("addr").port()
}

/// Percent-encode a query-string value.
pub fn percent_encode(s: &str) -> String {
    s.bytes()
        .map(|b| {
            if b.is_ascii_alphanumeric() || b"-_.~".contains(&b) {
                (b as char).to_string()
            } else {
                format!("%{b:02X}")
            }
        })
        .collect()
}

impl TestBroker {
    /// The port `listener` bound at the broker's latest start, from its
    /// "listener bound" log line (listeners on port 0 get a new port on
    /// every start).
    pub fn listener_port(&self, listener: &str) -> u16 {
        let log = self.log();
        let line = log
            .lines()
            .rev()
            .find(|l| l.contains("listener bound") && l.contains(&format!("listener={listener} ")))
            .unwrap_or_else(|| panic!("{listener} not bound:\n{log}"));
        let addr = line.split("bound=").nth(1).and_then(|r| r.split_whitespace().next());
        addr.and_then(|a| a.rsplit(':').next()).and_then(|p| p.parse().ok()).expect("port")
    }

    /// The Prometheus text of `/metrics`.
    pub fn metrics(&self) -> String {
        let (status, body) = http_get(self.metrics_port, "/metrics");
        assert_eq!(status, 200, "{body}");
        body
    }

    /// The value of one series in `/metrics`, e.g. `kafka_log_logcleanermanager_max_dirty_percent`
    /// or `kafka_log_log_size{topic="t",partition="0"}`.
    pub fn metric(&self, series: &str) -> Option<f64> {
        metric_value(&self.metrics(), series)
    }

    /// The `/cleaner-status` JSON.
    pub fn cleaner_status(&self) -> serde_json::Value {
        let (status, body) = http_get(self.metrics_port, "/cleaner-status");
        assert_eq!(status, 200, "{body}");
        serde_json::from_str(&body).expect("JSON")
    }

    /// Wait until a `.cleaned` file appears in the partition directory
    /// `dir`: a clean is under way.
    pub fn wait_for_clean_in_progress(&self, dir: &Path, secs: u64) {
        self.wait_for(secs, "a .cleaned segment being written", || {
            std::fs::read_dir(dir)
                .ok()?
                .filter_map(Result::ok)
                .any(|e| e.file_name().to_string_lossy().ends_with(".cleaned"))
                .then_some(())
        });
    }

    /// Poll `f` every 50 ms until it returns `Some`, or fail after `secs` with `what` and the broker's log.
    pub fn wait_for<T>(&self, secs: u64, what: &str, mut f: impl FnMut() -> Option<T>) -> T {
        let deadline = std::time::Instant::now() + Duration::from_secs(secs);
        loop {
            if let Some(v) = f() {
                return v;
            }
            assert!(
                std::time::Instant::now() < deadline,
                "timed out after {secs}s waiting for {what}; broker log:\n{}",
                self.log()
            );
            std::thread::sleep(Duration::from_millis(50));
        }
    }
}

/// The value of `series` (name plus labels exactly as printed) in Prometheus text.
pub fn metric_value(text: &str, series: &str) -> Option<f64> {
    text.lines().filter(|l| !l.starts_with('#')).find_map(|l| {
        let (name, value) = l.rsplit_once(' ')?;
        (name == series).then(|| value.parse().ok())?
    })
}

/// Run kcat (bounded to 60 s) with `stdin` piped in: (success, stdout,
/// stderr). Success also needs a stderr without ERROR or "failed": kcat
/// exits 0 after some client errors it only logs.
pub fn kcat<S: AsRef<std::ffi::OsStr>>(args: &[S], stdin: &str) -> (bool, String, String) {
    use std::io::Write;
    let mut child = Command::new("timeout")
        .args(["--kill-after=5", "60", "kcat"])
        .args(args)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("kcat (scripts/test.sh installs it)");
    child.stdin.take().expect("stdin").write_all(stdin.as_bytes()).expect("write stdin");
    let out = child.wait_with_output().expect("wait");
    let stderr = String::from_utf8_lossy(&out.stderr).into_owned();
    let ok = out.status.success() && !stderr.contains("ERROR") && !stderr.contains("failed");
    (ok, String::from_utf8_lossy(&out.stdout).into_owned(), stderr)
}

/// Run a command, returning (success, stdout, stderr).
pub fn run(cmd: &mut Command) -> (bool, String, String) {
    let out = cmd.output().unwrap_or_else(|e| panic!("running {cmd:?}: {e}"));
    (
        out.status.success(),
        String::from_utf8_lossy(&out.stdout).into_owned(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

/// Every file under `dir` (recursively) whose name ends in `.{ext}`.
pub fn files_under(dir: &Path, ext: &str) -> Vec<PathBuf> {
    let mut out = Vec::new();
    let mut dirs = vec![dir.to_path_buf()];
    while let Some(d) = dirs.pop() {
        for entry in std::fs::read_dir(&d).unwrap_or_else(|e| panic!("{}: {e}", d.display())) {
            let path = entry.expect("dir entry").path();
            if path.is_dir() {
                dirs.push(path);
            } else if path.extension().is_some_and(|e| e == ext) {
                out.push(path);
            }
        }
    }
    out.sort();
    out
}

pub fn repo_root() -> &'static Path {
    Path::new(env!("CARGO_MANIFEST_DIR"))
}

/// A raw Kafka connection for tests that craft requests (or bad bytes).
pub struct Wire {
    pub stream: std::net::TcpStream,
    next_correlation: i32,
}

impl Wire {
    pub fn connect(port: u16) -> Self {
        let stream = std::net::TcpStream::connect(("127.0.0.1", port)).expect("connect");
        stream.set_read_timeout(Some(Duration::from_secs(60))).expect("timeout");
        Self { stream, next_correlation: 1 }
    }

    /// Wrap a connected stream (its read timeout set by the caller).
    pub fn from_stream(stream: std::net::TcpStream) -> Self {
        Self { stream, next_correlation: 1 }
    }

    /// Write raw bytes as they are.
    pub fn write_raw(&mut self, bytes: &[u8]) -> std::io::Result<()> {
        use std::io::Write;
        self.stream.write_all(bytes)
    }

    /// Send a request without waiting; returns its correlation id.
    pub fn send<R: kafka_protocol::protocol::Request>(&mut self, version: i16, request: &R) -> i32 {
        self.send_checked(version, request).expect("write")
    }

    /// As [`Wire::send`], but `None` instead of a panic if the write fails.
    pub fn send_checked<R: kafka_protocol::protocol::Request>(
        &mut self,
        version: i16,
        request: &R,
    ) -> Option<i32> {
        use kafka_protocol::messages::{ApiKey, RequestHeader};
        use kafka_protocol::protocol::Encodable;
        let correlation = self.next_correlation;
        self.next_correlation += 1;
        let key = ApiKey::try_from(R::KEY).expect("key");
        let header = RequestHeader::default()
            .with_request_api_key(R::KEY)
            .with_request_api_version(version)
            .with_correlation_id(correlation)
            .with_client_id(Some(kafka_protocol::protocol::StrBytes::from_static_str(
                "sediment-test",
            )));
        let mut body = bytes::BytesMut::new();
        header.encode(&mut body, key.request_header_version(version)).expect("header");
        request.encode(&mut body, version).expect("body");
        let mut frame = (body.len() as i32).to_be_bytes().to_vec();
        frame.extend_from_slice(&body);
        self.write_raw(&frame).ok()?;
        Some(correlation)
    }

    /// Read one response frame: (correlation id, bytes after it).
    pub fn recv_frame(&mut self) -> std::io::Result<(i32, bytes::Bytes)> {
        use std::io::Read;
        let mut size = [0u8; 4];
        self.stream.read_exact(&mut size)?;
        let size = i32::from_be_bytes(size);
        assert!((4..=256 << 20).contains(&size), "response size {size}");
        let mut buf = vec![0u8; size as usize];
        self.stream.read_exact(&mut buf)?;
        let correlation = i32::from_be_bytes(buf[..4].try_into().expect("4 bytes"));
        Ok((correlation, bytes::Bytes::from(buf).slice(4..)))
    }

    /// Decode a response of `R` sent with `version` (header version from the API).
    pub fn decode<R: kafka_protocol::protocol::Request>(
        version: i16,
        mut after_correlation: bytes::Bytes,
    ) -> R::Response {
        use kafka_protocol::messages::ApiKey;
        use kafka_protocol::protocol::Decodable;
        let key = ApiKey::try_from(R::KEY).expect("key");
        if key.response_header_version(version) >= 1 {
            // Tagged fields of the v1 header: this broker writes none.
            let tags = bytes::Buf::get_u8(&mut after_correlation);
            assert_eq!(tags, 0, "response header tagged fields");
        }
        R::Response::decode(&mut after_correlation, version).expect("decode response")
    }

    /// Send and wait for the matching response.
    pub fn call<R: kafka_protocol::protocol::Request>(
        &mut self,
        version: i16,
        request: &R,
    ) -> R::Response {
        let correlation = self.send(version, request);
        let (got, body) = self.recv_frame().expect("response");
        assert_eq!(got, correlation, "responses come back in request order");
        Self::decode::<R>(version, body)
    }

    /// True when the broker closed the connection (EOF or reset) within the read timeout.
    pub fn is_closed(&mut self) -> bool {
        use std::io::Read;
        let mut b = [0u8; 1];
        match self.stream.read(&mut b) {
            Ok(0) => true,
            Ok(_) => false,
            Err(e) => matches!(
                e.kind(),
                std::io::ErrorKind::ConnectionReset
                    | std::io::ErrorKind::BrokenPipe
                    | std::io::ErrorKind::ConnectionAborted
            ),
        }
    }
}

/// A connection once the group coordinator of `group` is loaded: Kafka's
/// FindCoordinator names the partition's leader before it has loaded, so
/// readiness is an OffsetFetch that no longer answers NOT_COORDINATOR or
/// COORDINATOR_LOAD_IN_PROGRESS.
pub fn connect_group_ready(port: u16, group: &str) -> Wire {
    use kafka_protocol::messages::{FindCoordinatorRequest, GroupId, OffsetFetchRequest};
    let mut w = Wire::connect(port);
    let fetch =
        OffsetFetchRequest::default().with_group_id(GroupId(txn::s(group))).with_topics(None);
    let deadline = std::time::Instant::now() + Duration::from_secs(60);
    loop {
        let find = FindCoordinatorRequest::default().with_key_type(0).with_key(txn::s(group));
        let found = w.call(3, &find).error_code;
        let code = if found == 0 { w.call(7, &fetch).error_code } else { found };
        if code == 0 {
            return w;
        }
        assert!(std::time::Instant::now() < deadline, "the group coordinator: error {code}");
        std::thread::sleep(Duration::from_millis(100));
    }
}

/// Create a topic through CreateTopics v7 and assert success.
pub fn create_topic(port: u16, name: &str, partitions: i32, configs: &[(&str, &str)]) {
    use kafka_protocol::messages::create_topics_request::{CreatableTopic, CreatableTopicConfig};
    use kafka_protocol::messages::{CreateTopicsRequest, TopicName};
    use kafka_protocol::protocol::StrBytes;
    let topic = CreatableTopic::default()
        .with_name(TopicName(StrBytes::from_string(name.into())))
        .with_num_partitions(partitions)
        .with_replication_factor(1)
        .with_configs(
            configs
                .iter()
                .map(|(k, v)| {
                    CreatableTopicConfig::default()
                        .with_name(StrBytes::from_string((*k).into()))
                        .with_value(Some(StrBytes::from_string((*v).into())))
                })
                .collect(),
        );
    let response = Wire::connect(port)
        .call(7, &CreateTopicsRequest::default().with_topics(vec![topic]).with_timeout_ms(10_000));
    assert_eq!(
        response.topics[0].error_code, 0,
        "create {name}: {:?}",
        response.topics[0].error_message
    );
}

/// Produce `records` (key, value; `None` is a tombstone) as one batch with
/// every record timestamped `timestamp_ms`, and assert success. Record
/// timestamps drive time-based rolls, so tests roll without sleeping.
pub fn produce(
    w: &mut Wire,
    topic: &str,
    partition: i32,
    timestamp_ms: i64,
    records: &[(String, Option<String>)],
) {
    use kafka_protocol::messages::produce_request::{PartitionProduceData, TopicProduceData};
    use kafka_protocol::messages::{ProduceRequest, TopicName};
    use kafka_protocol::protocol::StrBytes;
    let mut b = sediment::log::record_batch::BatchBuilder::new(
        sediment::log::compression::Compression::None,
        timestamp_ms,
    );
    for (k, v) in records {
        b.append(timestamp_ms, Some(k.as_bytes()), v.as_ref().map(|v| v.as_bytes()));
    }
    let request =
        ProduceRequest::default().with_acks(1).with_timeout_ms(10_000).with_topic_data(vec![
            TopicProduceData::default()
                .with_name(TopicName(StrBytes::from_string(topic.into())))
                .with_partition_data(vec![PartitionProduceData::default()
                    .with_index(partition)
                    .with_records(Some(bytes::Bytes::from(b.build())))]),
        ]);
    let r = w.call(9, &request);
    let p = &r.responses[0].partition_responses[0];
    assert_eq!(p.error_code, 0, "produce to {topic}-{partition}: {:?}", p.error_message);
}

/// Milliseconds since the epoch.
pub fn now_ms() -> i64 {
    std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).unwrap().as_millis() as i64
}

/// Every record of a partition from offset 0 as a consumer sees it: (offset, key, value).
pub fn fetch_all(
    port: u16,
    topic: &str,
    partition: i32,
) -> Vec<(i64, Option<String>, Option<String>)> {
    use kafka_protocol::messages::fetch_request::{FetchPartition, FetchTopic};
    use kafka_protocol::messages::{FetchRequest, TopicName};
    use kafka_protocol::protocol::StrBytes;
    use sediment::log::record_batch::{self, BatchHeader, RecordIter};
    let mut w = Wire::connect(port);
    let mut out = Vec::new();
    let mut next = 0i64;
    let mut scratch = Vec::new();
    loop {
        let request = FetchRequest::default()
            .with_replica_id(kafka_protocol::messages::BrokerId(-1))
            .with_max_wait_ms(0)
            .with_max_bytes(4 << 20)
            .with_topics(vec![FetchTopic::default()
                .with_topic(TopicName(StrBytes::from_string(topic.into())))
                .with_partitions(vec![FetchPartition::default()
                    .with_partition(partition)
                    .with_fetch_offset(next)
                    .with_partition_max_bytes(4 << 20)])]);
        let r = w.call(12, &request);
        let p = &r.responses[0].partitions[0];
        assert_eq!(p.error_code, 0, "fetch {topic}-{partition} at {next}");
        let bytes = p.records.clone().unwrap_or_default();
        if bytes.is_empty() {
            assert!(
                next >= p.high_watermark,
                "empty fetch at {next} below the high watermark {}",
                p.high_watermark
            );
            return out;
        }
        let mut pos = 0;
        while pos + record_batch::RECORD_BATCH_OVERHEAD <= bytes.len() {
            let h = BatchHeader::parse(&bytes[pos..]).expect("batch header");
            if pos + h.size_in_bytes() > bytes.len() {
                break;
            }
            let batch = &bytes[pos..pos + h.size_in_bytes()];
            let payload =
                record_batch::records_bytes(&h, batch, &mut scratch, 1 << 30).expect("records");
            for rec in RecordIter::new(payload, h.records_count) {
                let rec = rec.expect("record");
                let offset = h.base_offset + rec.offset_delta as i64;
                if offset >= next {
                    out.push((
                        offset,
                        rec.key.map(|k| String::from_utf8_lossy(k).into_owned()),
                        rec.value.map(|v| String::from_utf8_lossy(v).into_owned()),
                    ));
                }
            }
            next = next.max(h.next_offset());
            pos += h.size_in_bytes();
        }
        if next >= p.high_watermark {
            return out;
        }
    }
}

/// The partition's entry in the log dir's cleaner-offset-checkpoint.
pub fn cleaner_checkpoint(data_dir: &Path, topic: &str, partition: i32) -> Option<i64> {
    let text = std::fs::read_to_string(data_dir.join("cleaner-offset-checkpoint")).ok()?;
    let p = partition.to_string();
    text.lines().find_map(|l| {
        let mut parts = l.split(' ');
        (parts.next() == Some(topic) && parts.next() == Some(p.as_str()))
            .then(|| parts.next().and_then(|o| o.parse().ok()))?
    })
}

/// The venv's interpreter; scripts/python-env.sh installs the pinned clients
/// on first use (and serialises concurrent callers).
pub fn python() -> PathBuf {
    let out = Command::new(repo_root().join("scripts/python-env.sh"))
        .output()
        .expect("scripts/python-env.sh");
    assert!(
        out.status.success(),
        "scripts/python-env.sh failed:\n{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let stdout = String::from_utf8_lossy(&out.stdout);
    PathBuf::from(stdout.lines().last().expect("python-env.sh prints the interpreter").trim())
}

/// Run tests/python/`script` with the broker's bootstrap and `args`; panics
/// with its output and the broker's log unless it exits 0 having printed `done`.
pub fn run_python_script(b: &TestBroker, script: &str, args: &[&str], done: &str) -> String {
    // `timeout` bounds a client stuck in a retry loop; every wait inside the
    // scripts has its own deadline well below this.
    let out = Command::new("timeout")
        .args(["--kill-after=5", "90"])
        .arg(python())
        .arg(repo_root().join("tests/python").join(script))
        .arg(b.bootstrap())
        .args(args)
        .env("PYTHONUNBUFFERED", "1")
        // The scripts import tests/python/common.py; no __pycache__ in the tree.
        .env("PYTHONDONTWRITEBYTECODE", "1")
        .output()
        .expect("run python");
    let stdout = String::from_utf8_lossy(&out.stdout).into_owned();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        out.status.success() && stdout.contains(done),
        "{script} {args:?} failed ({}{})\n--- stdout ---\n{stdout}\n--- stderr ---\n{stderr}\n--- broker log ---\n{}",
        out.status,
        if out.status.code() == Some(124) { ", timed out" } else { "" },
        b.log()
    );
    stdout
}

/// `promtool check metrics` on `text` (Debian's `prometheus` package): whether
/// it passed, and what it printed (stdout, then stderr).
pub fn promtool_check_metrics(text: &str) -> (bool, String) {
    use std::io::Write;
    let mut promtool = Command::new("promtool")
        .args(["check", "metrics"])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("promtool (Debian package prometheus)");
    promtool.stdin.take().unwrap().write_all(text.as_bytes()).unwrap();
    let out = promtool.wait_with_output().unwrap();
    let report =
        format!("{}{}", String::from_utf8_lossy(&out.stdout), String::from_utf8_lossy(&out.stderr));
    (out.status.success(), report)
}

/// One request and its response over any byte stream (the security tests'
/// TLS streams): `correlation` is the caller's; the response header is
/// skipped.
pub fn call_over<S: std::io::Read + std::io::Write, R: kafka_protocol::protocol::Request>(
    stream: &mut S,
    correlation: i32,
    version: i16,
    request: &R,
) -> std::io::Result<R::Response> {
    use kafka_protocol::messages::{ApiKey, RequestHeader};
    use kafka_protocol::protocol::{Decodable, Encodable};
    let key = ApiKey::try_from(R::KEY).unwrap();
    let header = RequestHeader::default()
        .with_request_api_key(R::KEY)
        .with_request_api_version(version)
        .with_correlation_id(correlation);
    let mut body = bytes::BytesMut::new();
    header.encode(&mut body, key.request_header_version(version)).unwrap();
    request.encode(&mut body, version).unwrap();
    stream.write_all(&(body.len() as i32).to_be_bytes())?;
    stream.write_all(&body)?;
    stream.flush()?;
    let mut size = [0u8; 4];
    stream.read_exact(&mut size)?;
    let mut buf = vec![0u8; i32::from_be_bytes(size) as usize];
    stream.read_exact(&mut buf)?;
    let mut b = bytes::Bytes::from(buf).slice(4..);
    if key.response_header_version(version) >= 1 {
        bytes::Buf::get_u8(&mut b);
    }
    Ok(R::Response::decode(&mut b, version).unwrap())
}
