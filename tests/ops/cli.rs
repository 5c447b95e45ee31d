//! The command line around the broker: `check-config`, `health`, and the
//! order config file < $SEDIMENT_OVERRIDES < --override.

use crate::broker;

use std::process::Command;

use crate::broker::{run, TestBroker};

fn sediment() -> Command {
    Command::new(env!("CARGO_BIN_EXE_sediment"))
}

#[test]
fn check_config_names_bad_keys_and_prints_the_effective_config() {
    let dir = tempfile::tempdir().unwrap();
    let bad = dir.path().join("bad.toml");
    std::fs::write(&bad, "num.partitions = 3\nlog.segment.bytes = \"huge\"\n").unwrap();
    let (ok, _, err) = run(sediment().arg("check-config").arg(&bad));
    assert!(!ok);
    assert!(err.contains("log.segment.bytes"), "{err}");
    std::fs::write(&bad, "[log]\nno_such_key = 1\n").unwrap();
    let (ok, _, err) = run(sediment().arg("check-config").arg(&bad));
    assert!(!ok && err.contains("log.no_such_key") && err.contains("unknown config key"), "{err}");

    let good = dir.path().join("good.toml");
    std::fs::write(
        &good,
        "num.partitions = 3\nlog.dirs = \"/tmp/x\"\nauto.create.topics.enable = false\n",
    )
    .unwrap();
    let (ok, out, err) = run(sediment()
        .arg("check-config")
        .arg(&good)
        .env("SEDIMENT_OVERRIDES", "num.partitions=5 delete.topic.enable=false")
        .arg("--override")
        .arg("num.partitions=7"));
    assert!(ok, "{err}");
    assert!(
        out.contains("* num.partitions = \"7\""),
        "--override wins over the environment and the file:\n{out}"
    );
    assert!(out.contains("* delete.topic.enable = \"false\""), "{out}");
    assert!(out.contains("* auto.create.topics.enable = \"false\""), "{out}");
    assert!(
        out.contains("  socket.request.max.bytes = \"104857600\""),
        "defaults are listed unmarked:\n{out}"
    );
}

#[test]
fn health_answers_for_a_live_broker_only() {
    let b = TestBroker::start(&[]);
    let (ok, out, err) = run(sediment().arg("health").arg("--bootstrap-server").arg(b.bootstrap()));
    assert!(ok, "{out}{err}");
    assert!(out.starts_with("ok: "), "{out}");
    // A port nothing listens on: bind one, then free it.
    let port = broker::free_port();
    let (ok, _, err) =
        run(sediment().arg("health").arg("--bootstrap-server").arg(format!("127.0.0.1:{port}")));
    assert!(!ok && err.contains("unhealthy"), "{err}");
}
