//! The README's "Securing sediment" section, run as an operator would run it:
//! its shell blocks verbatim with `bash`, one after the other in one scratch
//! directory, against a broker started with its TOML and its start command.
//!
//! What is changed, as the README says: the port 9094 becomes a free one (in
//! every block) and the start command gets
//! `--override metrics.listen=127.0.0.1:0`. `PATH` gets the `sediment` under
//! test and the `kafka-*.sh` scripts the README's "tools" note maps to
//! `scripts/kafka-tool.sh` (what a Kafka download's `bin/` holds). Blocks are
//! found by their `<!-- securing-sediment: NAME -->` markers. The output a
//! block shows in `# ...` comment lines must appear in what it prints, in
//! order (`...` stands for text left out); `kafka-acls --list` output is
//! compared per resource, as Kafka lists ACLs in no fixed order.
//!
//! The compose file's `secured` profile is checked against the same config.

use std::collections::{BTreeMap, BTreeSet};
use std::net::TcpStream;
use std::os::unix::fs::PermissionsExt;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use crate::broker::{free_port, repo_root, Reaper};
use serde_yaml::Value as Yaml;

const MARK: &str = "<!-- securing-sediment: ";

/// The guide the markers are in (it was the README's section).
fn readme() -> String {
    let path = repo_root().join("docs/operating/securing.md");
    std::fs::read_to_string(path).expect("docs/operating/securing.md")
}

/// The fenced block right after the marker `name`: (language, body).
fn block(readme: &str, name: &str) -> (String, String) {
    let marker = format!("{MARK}{name} -->\n");
    let at = readme.find(&marker).unwrap_or_else(|| panic!("no README marker {marker:?}"));
    let rest = &readme[at + marker.len()..];
    let (fence, rest) = rest.split_once('\n').expect("a line after the marker");
    let lang = fence
        .strip_prefix("```")
        .unwrap_or_else(|| panic!("marker {name:?} is not followed by a code block"));
    let end = rest.find("\n```\n").unwrap_or_else(|| panic!("block {name:?} is not closed"));
    (lang.to_string(), rest[..=end].to_string())
}

/// The README's "tools" note: (`kafka-*.sh`, main class) pairs, read from the
/// code spans of its paragraph.
fn tool_classes(readme: &str) -> Vec<(String, String)> {
    let marker = format!("{MARK}tools -->\n");
    let at = readme.find(&marker).expect("the README's tools note");
    let para = readme[at + marker.len()..].split("\n\n").next().unwrap_or("");
    let spans: Vec<&str> = para.split('`').skip(1).step_by(2).collect();
    spans
        .windows(2)
        .filter(|w| {
            w[0].starts_with("kafka-") && w[0].ends_with(".sh") && !w[1].contains(['/', ' '])
        })
        .map(|w| (w[0].to_string(), w[1].to_string()))
        .collect()
}

/// The `# ` comment lines of a block: the output it promises.
fn expected_output(body: &str) -> Vec<String> {
    body.lines()
        .filter_map(|l| l.strip_prefix("# "))
        .map(|l| l.trim().to_string())
        .filter(|l| !l.is_empty())
        .collect()
}

/// Every expected line, each of its `...`-separated fragments, in order in `out`.
fn assert_shows(name: &str, expected: &[String], out: &str) {
    let mut from = 0;
    for line in expected {
        for fragment in line.split("...").map(str::trim).filter(|f| !f.is_empty()) {
            match out[from..].find(fragment) {
                Some(i) => from += i + fragment.len(),
                None => panic!("step {name}: {fragment:?} missing (in order) from:\n{out}"),
            }
        }
    }
}

/// `kafka-acls` output: each resource's ACLs as its last "Current ACLs"
/// listing shows them (Kafka lists them in no fixed order).
fn acl_listing(out: &str) -> BTreeMap<String, BTreeSet<String>> {
    let mut map = BTreeMap::new();
    let mut current: Option<String> = None;
    for line in out.lines().map(str::trim) {
        if let Some(rest) = line.strip_prefix("Current ACLs for resource `") {
            let resource = rest.split('`').next().unwrap_or("").to_string();
            map.insert(resource.clone(), BTreeSet::new());
            current = Some(resource);
        } else if line.starts_with("(principal=") {
            if let Some(acls) = current.as_ref().and_then(|r| map.get_mut(r)) {
                acls.insert(line.to_string());
            }
        } else {
            current = None;
        }
    }
    map
}

struct Scratch {
    dir: tempfile::TempDir,
    readme: String,
    ports: [(&'static str, String); 1],
    path: String,
}

struct Outcome {
    ok: bool,
    stdout: String,
    stderr: String,
}

impl Scratch {
    fn new() -> Self {
        let dir = tempfile::tempdir().expect("tempdir");
        let readme = readme();
        let bin = dir.path().join("bin");
        std::fs::create_dir(&bin).unwrap();
        let tool = repo_root().join("scripts/kafka-tool.sh");
        let tools = tool_classes(&readme);
        assert_eq!(tools.len(), 5, "the tools note names five tools: {tools:?}");
        for (script, class) in &tools {
            let p = bin.join(script);
            std::fs::write(&p, format!("#!/bin/sh\nexec '{}' {class} \"$@\"\n", tool.display()))
                .unwrap();
            std::fs::set_permissions(&p, std::fs::Permissions::from_mode(0o755)).unwrap();
        }
        let path = format!("{}:{}", bin.display(), std::env::var("PATH").unwrap_or_default());
        std::os::unix::fs::symlink(env!("CARGO_BIN_EXE_sediment"), bin.join("sediment")).unwrap();
        let ports = [("9094", free_port().to_string())];
        Self { dir, readme, ports, path }
    }

    fn p(&self, rel: &str) -> std::path::PathBuf {
        self.dir.path().join(rel)
    }

    /// Block `name` with the ports replaced.
    fn text(&self, name: &str) -> String {
        let (_, mut body) = block(&self.readme, name);
        for (from, to) in &self.ports {
            body = body.replace(from, to);
        }
        body
    }

    /// Run block `name` with bash in the scratch dir (`strict`: stop at the
    /// first failing command, as `set -e -o pipefail`).
    fn run(&self, name: &str, strict: bool) -> Outcome {
        let text = self.text(name);
        for word in
            text.split_whitespace().filter(|w| w.starts_with("kafka-") && w.ends_with(".sh"))
        {
            assert!(self.p("bin").join(word).exists(), "{word} is not in the README's tools note");
        }
        let mut cmd = Command::new("timeout");
        cmd.args(["--kill-after=5", "180", "bash"]);
        if strict {
            cmd.args(["-e", "-o", "pipefail"]);
        }
        let out = cmd
            .arg("-c")
            .arg(&text)
            .current_dir(self.dir.path())
            .env("PATH", &self.path)
            .env("KAFKA_HEAP_OPTS", "-Xmx256m -XX:TieredStopAtLevel=1 -XX:+UseSerialGC")
            .stdin(Stdio::null())
            .output()
            .expect("bash");
        Outcome {
            ok: out.status.success(),
            stdout: String::from_utf8_lossy(&out.stdout).into_owned(),
            stderr: String::from_utf8_lossy(&out.stderr).into_owned(),
        }
    }

    /// Run a block that must succeed and print what it shows.
    fn step(&self, name: &str, broker_log: &dyn Fn() -> String) -> Outcome {
        let o = self.run(name, true);
        assert!(
            o.ok,
            "step {name} failed\nstdout:\n{}\nstderr:\n{}\nbroker:\n{}",
            o.stdout,
            o.stderr,
            broker_log()
        );
        o
    }

    /// Start the broker with the README's start block, in the scratch dir.
    fn start_broker(&self) -> Reaper {
        let start = self.text("start");
        let line = start.trim();
        assert!(
            line.starts_with("sediment serve ") && !line.contains(['\n', ';', '&', '|']),
            "the start block is one sediment serve command: {start}"
        );
        let log = std::fs::File::create(self.p("broker.log")).unwrap();
        let child = Command::new("bash")
            .arg("-c")
            .arg(format!("exec {line} --override metrics.listen=127.0.0.1:0"))
            .current_dir(self.dir.path())
            .env("PATH", &self.path)
            .env("RUST_LOG", "info")
            .stdout(Stdio::null())
            .stderr(log)
            .spawn()
            .expect("spawn sediment");
        let mut broker = Reaper(child);
        let deadline = Instant::now() + Duration::from_secs(60);
        for (_, port) in &self.ports {
            while TcpStream::connect(format!("127.0.0.1:{port}")).is_err() {
                let exited = broker.0.try_wait().expect("try_wait");
                assert!(
                    exited.is_none() && Instant::now() < deadline,
                    "the broker did not listen on {port}: {exited:?}\n{}",
                    self.broker_log()
                );
                std::thread::sleep(Duration::from_millis(50));
            }
        }
        broker
    }

    fn broker_log(&self) -> String {
        std::fs::read_to_string(self.p("broker.log")).unwrap_or_default()
    }
}

#[test]
fn the_securing_sediment_section_runs_as_written() {
    let s = Scratch::new();
    let log = || s.broker_log();

    // 1. Certificates: an encrypted PKCS#8 key and the chain in one file,
    // the unencrypted key gone.
    let o = s.step("certificates", &log);
    assert!(o.stdout.contains("secrets/broker.crt: OK"), "{}", o.stdout);
    let pem = std::fs::read_to_string(s.p("secrets/broker.pem")).unwrap();
    assert!(pem.starts_with("-----BEGIN ENCRYPTED PRIVATE KEY-----\n"), "{pem}");
    assert_eq!(pem.matches("-----BEGIN CERTIFICATE-----").count(), 2, "{pem}");
    assert!(!s.p("secrets/broker.key").exists(), "the unencrypted key is left behind");
    let mode = std::fs::metadata(s.p("secrets")).unwrap().permissions().mode();
    assert_eq!(mode & 0o777, 0o700);

    // 2. The broker: the README's TOML is config/secured.toml (which the
    // compose profile mounts), started as the README starts it.
    let (lang, config) = block(&s.readme, "config");
    assert_eq!(lang, "toml");
    let file = std::fs::read_to_string(repo_root().join("config/secured.toml")).unwrap();
    assert_eq!(config, file, "the README's broker config and config/secured.toml differ");
    std::fs::create_dir(s.p("config")).unwrap();
    std::fs::write(s.p("config/secured.toml"), s.text("config")).unwrap();
    // The administrator, into the stopped broker's store: salted, no password.
    let o = s.step("bootstrap", &log);
    assert!(o.stdout.contains("added 1 SCRAM credential(s)"), "{}", o.stdout);
    let store = std::fs::read_to_string(s.p("data-secured/sediment-scram-credentials.json"))
        .expect("the SCRAM store");
    assert!(store.contains("admin") && !store.contains("admin-secret"), "{store}");
    let _broker = s.start_broker();

    // 3. Client settings, private to their owner.
    s.step("clients", &log);
    for who in ["admin", "writer", "reader"] {
        let meta = std::fs::metadata(s.p(&format!("secrets/{who}.properties"))).unwrap();
        assert_eq!(meta.permissions().mode() & 0o777, 0o600, "{who}.properties");
    }

    // 4. As the super user: two more SCRAM users, the compacted topic,
    // the ACLs, listed as the README shows them.
    let o = s.step("admin", &log);
    for line in [
        "Completed updating config for user writer.",
        "Completed updating config for user reader.",
        "Created topic customer-email.",
    ] {
        assert!(o.stdout.contains(line), "{line:?} missing:\n{}", o.stdout);
    }
    let shown = acl_listing(&expected_output(&s.text("admin")).join("\n"));
    assert_eq!(shown.len(), 2, "{shown:?}");
    assert_eq!(acl_listing(&o.stdout), shown, "kafka-acls --list differs from the README");
    let stored = std::fs::read_to_string(s.p("data-secured/sediment-acls.json")).unwrap();
    assert_eq!(stored.matches("\"principal\"").count(), 3, "{stored}");

    // 5. The writer produces (the tombstone included) over SCRAM, the reader
    // consumes in its group.
    let o = s.step("produce-consume", &log);
    let printed = format!("{}{}", o.stdout, o.stderr);
    assert_shows("produce-consume", &expected_output(&s.text("produce-consume")), &printed);

    // 6. The refusals, with Kafka's authorization errors.
    let o = s.run("refused-write", false);
    assert_shows("refused-write", &expected_output(&s.text("refused-write")), &o.stderr);
    assert!(s.p("data-secured/customer-email-0").is_dir());
    assert!(!s.p("data-secured/payments-0").exists(), "a refused write created a topic");
    let o = s.run("refused-group", false);
    assert!(!o.stdout.contains("ana@example.com"), "read without the group ACL:\n{}", o.stdout);
    let both = format!("{}{}", o.stderr, o.stdout);
    assert_shows("refused-group", &expected_output(&s.text("refused-group")), &both);
    assert!(!log().contains("panicked"), "{}", log());
}

#[test]
fn the_compose_profile_serves_the_same_config() {
    let compose: Yaml = serde_yaml::from_str(
        &std::fs::read_to_string(repo_root().join("docker/docker-compose.yml")).unwrap(),
    )
    .expect("docker/docker-compose.yml");
    let svc = &compose["services"]["sediment-secured"];
    assert_eq!(svc["profiles"][0].as_str(), Some("secured"), "{svc:?}");
    // Without the profile, `docker compose up` starts what it did before.
    assert!(compose["services"]["sediment"]["profiles"].is_null());
    let list = |key: &str| -> Vec<String> {
        svc[key].as_sequence().unwrap().iter().map(|v| v.as_str().unwrap().to_string()).collect()
    };
    let volumes = list("volumes");
    assert!(volumes.contains(&"../config/secured.toml:/etc/sediment/server.toml:ro".into()));
    let pem = volumes.iter().find(|v| v.contains("broker.pem")).expect("the key store mount");
    assert!(pem.ends_with(":/var/lib/sediment/secrets/broker.pem:ro"), "{pem}");
    // The config's relative paths resolve in the image's working directory.
    let dockerfile = std::fs::read_to_string(repo_root().join("Dockerfile")).unwrap();
    assert!(dockerfile.contains("WORKDIR /var/lib/sediment\n"));
    let config: toml::Table =
        std::fs::read_to_string(repo_root().join("config/secured.toml")).unwrap().parse().unwrap();
    assert_eq!(config["ssl"]["keystore"]["location"].as_str(), Some("secrets/broker.pem"));
    // The one listener binds all interfaces (as a published port needs) on
    // the port published, and nothing overrides the mounted config.
    assert_eq!(config["listeners"].as_str(), Some("SASL_SSL://0.0.0.0:9094"));
    assert_eq!(list("ports"), ["9094:9094"]);
    assert!(svc["environment"]["SEDIMENT_OVERRIDES"].is_null());
    let readme = readme();
    for line in [
        "--profile secured run --rm sediment-secured",
        "add-scram 'SCRAM-SHA-512=[name=admin,password=admin-secret]'",
        "--profile secured up sediment-secured",
    ] {
        assert!(readme.contains(line), "the README's compose steps lack {line:?}");
    }

    let clients: [&[&str]; 2] = [&["docker", "compose"], &["docker-compose"]];
    for client in clients {
        let usable = Command::new(client[0])
            .args(&client[1..])
            .arg("version")
            .output()
            .is_ok_and(|o| o.status.success());
        if !usable {
            continue;
        }
        let out = Command::new(client[0])
            .args(&client[1..])
            .args(["-f", "docker/docker-compose.yml", "--profile", "secured", "config"])
            .current_dir(repo_root())
            .output()
            .expect("compose");
        let stdout = String::from_utf8_lossy(&out.stdout);
        assert!(out.status.success(), "{stdout}{}", String::from_utf8_lossy(&out.stderr));
        assert!(stdout.contains("sediment-secured") && stdout.contains("secured.toml"), "{stdout}");
        println!("{} --profile secured config: valid", client.join(" "));
        return;
    }
    println!("SKIPPED: no compose client; the secured profile was checked as YAML only");
}
