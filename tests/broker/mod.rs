//! Starts the real `sediment` binary for integration tests: a free loopback
//! port (the broker binds port 0 and reports the port it got), a temporary
//! data dir, and the broker's log kept in a file for failure messages.
#![allow(dead_code)]

use std::io::{BufRead, BufReader};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::mpsc;
use std::time::Duration;

pub struct TestBroker {
    child: Option<Child>,
    pub port: u16,
    pub dir: tempfile::TempDir,
    overrides: Vec<String>,
    log_path: PathBuf,
}

impl TestBroker {
    /// Start a broker with `key=value` overrides on top of a loopback listener
    /// and a temporary log dir.
    pub fn start(overrides: &[&str]) -> Self {
        let dir = tempfile::tempdir().expect("tempdir");
        let log_path = dir.path().join("broker.log");
        let mut b = Self { child: None, port: 0, dir, overrides: overrides.iter().map(|s| s.to_string()).collect(), log_path };
        b.launch(0);
        b
    }

    pub fn data_dir(&self) -> PathBuf {
        self.dir.path().join("data")
    }

    fn launch(&mut self, port: u16) {
        let mut cmd = Command::new(env!("CARGO_BIN_EXE_sediment"));
        cmd.arg("serve")
            .arg("--override")
            .arg(format!("listeners=PLAINTEXT://127.0.0.1:{port}"))
            .arg("--override")
            .arg(format!("log.dirs={}", self.data_dir().display()));
        for o in &self.overrides {
            cmd.arg("--override").arg(o);
        }
        let mut child = cmd.env("RUST_LOG", std::env::var("SEDIMENT_TEST_LOG").unwrap_or_else(|_| "info".into())).stdout(Stdio::null()).stderr(Stdio::piped()).spawn().expect("spawn sediment");
        let stderr = child.stderr.take().expect("stderr");
        let log_path = self.log_path.clone();
        let (tx, rx) = mpsc::channel();
        std::thread::spawn(move || {
            use std::io::Write;
            let mut log = std::fs::OpenOptions::new().create(true).append(true).open(&log_path).expect("broker log");
            for line in BufReader::new(stderr).lines().map_while(Result::ok) {
                let _ = writeln!(log, "{line}");
                if let Some(rest) = line.split("listening=").nth(1) {
                    let addr = rest.split_whitespace().next().unwrap_or("");
                    if let Some(p) = addr.rsplit(':').next().and_then(|p| p.parse::<u16>().ok()) {
                        let _ = tx.send(p);
                    }
                }
            }
        });
        self.child = Some(child);
        match rx.recv_timeout(Duration::from_secs(60)) {
            Ok(p) => self.port = p,
            Err(_) => panic!("broker did not start; its log:\n{}", self.log()),
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

    /// SIGKILL: the crash path.
    pub fn kill(&mut self) {
        if let Some(mut child) = self.child.take() {
            let _ = child.kill();
            let _ = child.wait();
        }
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

/// Run a command, returning (success, stdout, stderr).
pub fn run(cmd: &mut Command) -> (bool, String, String) {
    let out = cmd.output().unwrap_or_else(|e| panic!("running {cmd:?}: {e}"));
    (out.status.success(), String::from_utf8_lossy(&out.stdout).into_owned(), String::from_utf8_lossy(&out.stderr).into_owned())
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

    /// Write raw bytes as they are.
    pub fn write_raw(&mut self, bytes: &[u8]) -> std::io::Result<()> {
        use std::io::Write;
        self.stream.write_all(bytes)
    }

    /// Send a request without waiting; returns its correlation id.
    pub fn send<R: kafka_protocol::protocol::Request>(&mut self, version: i16, request: &R) -> i32 {
        use kafka_protocol::messages::{ApiKey, RequestHeader};
        use kafka_protocol::protocol::Encodable;
        let correlation = self.next_correlation;
        self.next_correlation += 1;
        let key = ApiKey::try_from(R::KEY).expect("key");
        let header = RequestHeader::default()
            .with_request_api_key(R::KEY)
            .with_request_api_version(version)
            .with_correlation_id(correlation)
            .with_client_id(Some(kafka_protocol::protocol::StrBytes::from_static_str("sediment-test")));
        let mut body = bytes::BytesMut::new();
        header.encode(&mut body, key.request_header_version(version)).expect("header");
        request.encode(&mut body, version).expect("body");
        let mut frame = (body.len() as i32).to_be_bytes().to_vec();
        frame.extend_from_slice(&body);
        self.write_raw(&frame).expect("write");
        correlation
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
    pub fn decode<R: kafka_protocol::protocol::Request>(version: i16, mut after_correlation: bytes::Bytes) -> R::Response {
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
    pub fn call<R: kafka_protocol::protocol::Request>(&mut self, version: i16, request: &R) -> R::Response {
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
            Err(e) => matches!(e.kind(), std::io::ErrorKind::ConnectionReset | std::io::ErrorKind::BrokenPipe | std::io::ErrorKind::ConnectionAborted),
        }
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
        .with_configs(configs.iter().map(|(k, v)| CreatableTopicConfig::default().with_name(StrBytes::from_string((*k).into())).with_value(Some(StrBytes::from_string((*v).into())))).collect());
    let response = Wire::connect(port).call(7, &CreateTopicsRequest::default().with_topics(vec![topic]).with_timeout_ms(10_000));
    assert_eq!(response.topics[0].error_code, 0, "create {name}: {:?}", response.topics[0].error_message);
}
