//! The files operators run sediment with: the Dockerfile, docker/ (compose
//! stack, Prometheus config, alert rules, Grafana provisioning and dashboard)
//! and config/*.toml. No Docker engine is needed:
//!
//! * `promtool check config`, `check rules` and `test rules` (Debian's
//!   `prometheus` package) pass on docker/;
//! * every metric named in the dashboard's queries and the alert rules exists
//!   in a live broker's scrape, and a real Prometheus, loaded with
//!   docker/prometheus.yml (pointed at the broker) and docker/alerts.yml,
//!   answers every dashboard query with data and evaluates every rule cleanly;
//! * the dashboard and the Grafana provisioning agree (datasource uid, paths);
//! * the compose file validates with `docker compose config` or
//!   `docker-compose config` where one exists (skipped, with a message, where
//!   none does), and everything it mounts exists;
//! * every config/*.toml passes `sediment check-config`; config/server.toml
//!   lists every key with its default (it is `sediment config-template`);
//! * scripts/docker-smoke.sh runs the Dockerfile's start command (with the
//!   debug binary standing in for the release build: `--binary`) and the
//!   broker answers kcat and `sediment health`.

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};
use std::process::Command;

use crate::broker::{
    cleaner_checkpoint, create_topic, http_get, now_ms, produce, repo_root, run, Prometheus,
    TestBroker, Wire,
};
use serde_yaml::Value as Yaml;

fn sediment() -> Command {
    Command::new(env!("CARGO_BIN_EXE_sediment"))
}

fn path(rel: &str) -> PathBuf {
    repo_root().join(rel)
}

fn read(rel: &str) -> String {
    std::fs::read_to_string(path(rel)).unwrap_or_else(|e| panic!("{rel}: {e}"))
}

fn yaml(rel: &str) -> Yaml {
    serde_yaml::from_str(&read(rel)).unwrap_or_else(|e| panic!("{rel} is not YAML: {e}"))
}

fn dashboard() -> serde_json::Value {
    serde_json::from_str(&read("docker/grafana/dashboards/sediment.json"))
        .expect("the dashboard is JSON")
}

/// (panel title, PromQL) of every query in the dashboard, panels and templating.
fn dashboard_queries(d: &serde_json::Value) -> Vec<(String, String)> {
    let mut out = Vec::new();
    for p in d["panels"].as_array().expect("panels") {
        for t in p["targets"].as_array().into_iter().flatten() {
            out.push((
                p["title"].as_str().unwrap_or("?").to_string(),
                t["expr"].as_str().expect("a target has an expr").to_string(),
            ));
        }
    }
    out
}

/// Metrics the dashboard's template variables read (`label_values(metric, label)`).
fn template_metrics(d: &serde_json::Value) -> Vec<String> {
    let mut out = Vec::new();
    for v in d["templating"]["list"].as_array().into_iter().flatten() {
        let q = v["query"]["query"].as_str().or_else(|| v["query"].as_str()).unwrap_or_default();
        let inner = q
            .strip_prefix("label_values(")
            .and_then(|r| r.strip_suffix(')'))
            .unwrap_or_else(|| panic!("unexpected template query {q}"));
        out.push(inner.split(',').next().unwrap().trim().to_string());
    }
    out
}

/// (alert name, expr) of every rule in docker/alerts.yml.
fn alert_rules() -> Vec<(String, String)> {
    let doc = yaml("docker/alerts.yml");
    let mut out = Vec::new();
    for g in doc["groups"].as_sequence().expect("groups") {
        for r in g["rules"].as_sequence().expect("rules") {
            out.push((
                r["alert"].as_str().expect("alert name").to_string(),
                r["expr"].as_str().expect("expr").to_string(),
            ));
        }
    }
    out
}

/// The metric names a PromQL expression reads: identifiers that are not
/// functions, aggregations, keywords, label names or durations.
fn promql_metric_names(expr: &str) -> BTreeSet<String> {
    const AGGREGATIONS: &[&str] = &[
        "sum",
        "min",
        "max",
        "avg",
        "count",
        "stddev",
        "stdvar",
        "topk",
        "bottomk",
        "quantile",
        "count_values",
        "group",
    ];
    const KEYWORDS: &[&str] = &["and", "or", "unless", "bool", "offset", "inf", "nan"];
    const GROUPING: &[&str] = &["by", "without", "on", "ignoring", "group_left", "group_right"];
    let chars: Vec<char> = expr.chars().collect();
    let mut names = BTreeSet::new();
    let mut i = 0;
    // Skip from an opening bracket to its match (label matchers, ranges, grouping lists).
    let skip_group = |i: &mut usize, open: char, close: char| {
        let mut depth = 0;
        while *i < chars.len() {
            if chars[*i] == '"' {
                *i += 1;
                while *i < chars.len() && chars[*i] != '"' {
                    *i += if chars[*i] == '\\' { 2 } else { 1 };
                }
            } else if chars[*i] == open {
                depth += 1;
            } else if chars[*i] == close {
                depth -= 1;
                if depth == 0 {
                    *i += 1;
                    return;
                }
            }
            *i += 1;
        }
    };
    while i < chars.len() {
        let c = chars[i];
        if c == '{' {
            skip_group(&mut i, '{', '}');
        } else if c == '[' {
            skip_group(&mut i, '[', ']');
        } else if c == '"' || c == '\'' {
            i += 1;
            while i < chars.len() && chars[i] != c {
                i += if chars[i] == '\\' { 2 } else { 1 };
            }
            i += 1;
        } else if c.is_ascii_digit()
            || (c == '.' && chars.get(i + 1).is_some_and(char::is_ascii_digit))
        {
            while i < chars.len() && (chars[i].is_ascii_alphanumeric() || chars[i] == '.') {
                i += 1;
            }
        } else if c.is_ascii_alphabetic() || c == '_' || c == ':' {
            let start = i;
            while i < chars.len()
                && (chars[i].is_ascii_alphanumeric() || chars[i] == '_' || chars[i] == ':')
            {
                i += 1;
            }
            let word: String = chars[start..i].iter().collect();
            let mut j = i;
            while j < chars.len() && chars[j].is_whitespace() {
                j += 1;
            }
            let next = chars.get(j).copied();
            if GROUPING.contains(&word.as_str()) {
                if next == Some('(') {
                    i = j;
                    skip_group(&mut i, '(', ')');
                }
            } else if next == Some('(')
                || AGGREGATIONS.contains(&word.as_str())
                || KEYWORDS.contains(&word.to_ascii_lowercase().as_str())
            {
                // a function call, an aggregation or an operator
            } else {
                names.insert(word);
            }
        } else {
            i += 1;
        }
    }
    names
}

#[test]
fn promql_names_are_extracted() {
    let names = promql_metric_names(
        "histogram_quantile(0.99, sum by (request, le) (rate(a_bucket{request=\"Produce\"}[$__rate_interval]))) / on(instance) clamp_min(10 * b_seconds, 900) and c > 1e3 unless sum without (x) (d:rule)",
    );
    assert_eq!(
        names,
        ["a_bucket", "b_seconds", "c", "d:rule"].iter().map(|s| s.to_string()).collect()
    );
}

/// The names of the samples in a Prometheus text exposition.
fn sample_names(text: &str) -> BTreeSet<String> {
    text.lines()
        .filter(|l| !l.starts_with('#') && !l.trim().is_empty())
        .map(|l| l.split(['{', ' ']).next().unwrap_or_default().to_string())
        .collect()
}

fn promtool(args: &[&str]) {
    let (ok, out, err) = run(Command::new("promtool").args(args).current_dir(repo_root()));
    assert!(ok, "promtool {}:\n{out}{err}", args.join(" "));
    println!("promtool {}:\n{out}", args.join(" "));
}

#[test]
fn promtool_accepts_the_prometheus_config_and_the_alert_rules() {
    promtool(&["check", "config", "docker/prometheus.yml"]);
    promtool(&["check", "rules", "docker/alerts.yml"]);
    // Unit tests of the rules: each alert fires when it should, not before.
    promtool(&["test", "rules", "docker/alerts.test.yml"]);
    // Every rule has a unit test in which it fires.
    let tests = read("docker/alerts.test.yml");
    for (alert, _) in alert_rules() {
        assert!(
            tests.contains(&format!(
                "alertname: {alert}\n        exp_alerts:\n          - exp_labels"
            )),
            "docker/alerts.test.yml has no case where {alert} fires"
        );
    }
}

#[test]
fn grafana_provisioning_and_the_dashboard_agree() {
    let d = dashboard();
    assert_eq!(d["uid"], "sediment-overview");
    let ds = yaml("docker/grafana/provisioning/datasources/prometheus.yml");
    let source = &ds["datasources"][0];
    assert_eq!(source["type"].as_str(), Some("prometheus"));
    let uid = source["uid"].as_str().expect("the datasource has a uid");
    assert_eq!(
        source["url"].as_str(),
        Some("http://prometheus:9090"),
        "the compose service `prometheus`"
    );

    // Every panel and target uses the provisioned datasource; the grid is 24
    // wide and no two panels overlap.
    let panels = d["panels"].as_array().expect("panels");
    let mut cells = BTreeSet::new();
    let mut titles = BTreeSet::new();
    for p in panels {
        let title = p["title"].as_str().expect("title");
        assert!(titles.insert(title.to_string()), "two panels titled {title}");
        let g = &p["gridPos"];
        let (x, y, w, h) = (
            g["x"].as_u64().unwrap(),
            g["y"].as_u64().unwrap(),
            g["w"].as_u64().unwrap(),
            g["h"].as_u64().unwrap(),
        );
        assert!(x + w <= 24, "{title} is wider than the grid");
        for cx in x..x + w {
            for cy in y..y + h {
                assert!(cells.insert((cx, cy)), "{title} overlaps another panel at ({cx},{cy})");
            }
        }
        if p["type"] == "row" {
            continue;
        }
        assert_eq!(p["datasource"]["uid"].as_str(), Some(uid), "{title}");
        let targets = p["targets"].as_array().unwrap_or_else(|| panic!("{title} has no targets"));
        assert!(!targets.is_empty(), "{title} has no queries");
        for t in targets {
            assert_eq!(t["datasource"]["uid"].as_str(), Some(uid), "{title}");
            assert!(
                !t["expr"].as_str().unwrap_or_default().trim().is_empty(),
                "{title} has an empty query"
            );
        }
    }
    for v in d["templating"]["list"].as_array().into_iter().flatten() {
        assert_eq!(v["datasource"]["uid"].as_str(), Some(uid));
    }
    // The series an operator needs to watch compaction, requests and disk space.
    let all: String = dashboard_queries(&d).into_iter().map(|(_, q)| q + "\n").collect();
    for needed in [
        "sediment_log_cleaner_dirty_ratio",
        "kafka_log_logcleanermanager_max_dirty_percent",
        "kafka_log_logcleaner_cleaner_recopy_percent",
        "kafka_log_logcleaner_max_buffer_utilization_percent",
        "kafka_log_logcleanermanager_time_since_last_run_ms",
        "kafka_log_logcleanermanager_uncleanable_partitions_count",
        "kafka_log_logcleaner_deadthreadcount",
        "kafka_network_requestmetrics_requests_total",
        "kafka_network_requestmetrics_total_time_seconds_bucket",
        "sediment_log_dir_usable_bytes",
        "sediment_log_tombstones_at_risk",
        "sediment_log_cleaner_oldest_dirty_age_seconds",
    ] {
        assert!(all.contains(needed), "the dashboard shows no {needed}");
    }

    // The dashboard provider reads the directory compose mounts the JSON into.
    let provider = yaml("docker/grafana/provisioning/dashboards/sediment.yml");
    let provider_path =
        provider["providers"][0]["options"]["path"].as_str().expect("provider path");
    let compose = yaml("docker/docker-compose.yml");
    let mounts: Vec<&str> = compose["services"]["grafana"]["volumes"]
        .as_sequence()
        .unwrap()
        .iter()
        .filter_map(Yaml::as_str)
        .collect();
    assert!(
        mounts.iter().any(|m| *m == format!("./grafana/dashboards:{provider_path}:ro")),
        "grafana mounts {mounts:?}; the provider reads {provider_path}"
    );
    assert!(mounts.contains(&"./grafana/provisioning:/etc/grafana/provisioning:ro"), "{mounts:?}");
}

#[test]
fn the_compose_file_validates_and_its_mounts_exist() {
    let compose = yaml("docker/docker-compose.yml");
    let services = compose["services"].as_mapping().expect("services");
    for name in ["sediment", "prometheus", "grafana"] {
        assert!(services.contains_key(name), "no service {name}");
    }
    // Relative bind mounts are relative to docker/.
    for (name, service) in services {
        for v in service["volumes"].as_sequence().into_iter().flatten() {
            let source = v.as_str().unwrap().split(':').next().unwrap();
            if source.starts_with('.') {
                let p = path("docker").join(source);
                assert!(
                    p.exists(),
                    "service {name:?} mounts {source}, which does not exist ({})",
                    p.display()
                );
            }
        }
    }
    let build = &compose["services"]["sediment"]["build"];
    assert!(path("docker")
        .join(build["context"].as_str().unwrap())
        .join(build["dockerfile"].as_str().unwrap())
        .is_file());
    // Prometheus scrapes the sediment service on the port config/docker.toml serves metrics on.
    let docker_toml: toml::Table = read("config/docker.toml").parse().unwrap();
    let metrics_port =
        docker_toml["metrics"]["listen"].as_str().unwrap().rsplit(':').next().unwrap().to_string();
    let prom = yaml("docker/prometheus.yml");
    let target = prom["scrape_configs"][0]["static_configs"][0]["targets"][0].as_str().unwrap();
    assert_eq!(target, format!("sediment:{metrics_port}"));
    let ports: Vec<&str> = compose["services"]["sediment"]["ports"]
        .as_sequence()
        .unwrap()
        .iter()
        .filter_map(Yaml::as_str)
        .collect();
    assert!(
        ports.contains(&format!("{metrics_port}:{metrics_port}").as_str())
            && ports.contains(&"9092:9092"),
        "{ports:?}"
    );

    // The cluster profile: etcd and three brokers, each with its own node
    // id, the etcd service as its endpoint, and its client port published.
    for n in 1..=3 {
        let broker = &compose["services"][format!("sediment-{n}").as_str()];
        assert_eq!(broker["profiles"][0].as_str(), Some("cluster"), "sediment-{n}");
        let overrides = broker["environment"]["SEDIMENT_OVERRIDES"].as_str().unwrap();
        let port = 19091 + n;
        for want in [
            format!("node.id={n}"),
            "sediment.cluster.etcd.endpoints=http://etcd:2379".into(),
            format!("EXTERNAL://localhost:{port}"),
        ] {
            assert!(overrides.split_whitespace().any(|o| o.contains(&want)), "{want}: {overrides}");
        }
        let ports: Vec<&str> =
            broker["ports"].as_sequence().unwrap().iter().filter_map(Yaml::as_str).collect();
        assert!(ports.contains(&format!("{port}:{port}").as_str()), "{ports:?}");
    }
    assert_eq!(compose["services"]["etcd"]["profiles"][0].as_str(), Some("cluster"));

    // A compose client validates the whole file (interpolation, schema).
    let clients: [&[&str]; 2] = [&["docker", "compose"], &["docker-compose"]];
    for client in clients {
        let Ok(out) = Command::new(client[0]).args(&client[1..]).arg("version").output() else {
            continue;
        };
        if !out.status.success() {
            continue;
        }
        let (ok, stdout, stderr) = run(Command::new(client[0])
            .args(&client[1..])
            .args(["-f", "docker/docker-compose.yml", "config"])
            .current_dir(repo_root()));
        assert!(ok, "{} config:\n{stdout}{stderr}", client.join(" "));
        assert!(
            stdout.contains("sediment")
                && stdout.contains("prometheus")
                && stdout.contains("grafana"),
            "{stdout}"
        );
        println!("{} -f docker/docker-compose.yml config: valid", client.join(" "));
        return;
    }
    println!("SKIPPED: no compose client (`docker compose` or `docker-compose`) is installed; docker/docker-compose.yml was checked as YAML only");
}

#[test]
fn every_config_file_passes_check_config() {
    let mut files: Vec<PathBuf> = std::fs::read_dir(path("config"))
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.extension().is_some_and(|e| e == "toml"))
        .collect();
    files.sort();
    let names: Vec<String> =
        files.iter().map(|p| p.file_name().unwrap().to_string_lossy().into_owned()).collect();
    assert_eq!(
        names,
        ["dev.toml", "docker.toml", "production.toml", "secured.toml", "server.toml"]
    );
    // secured.toml reads the key store the README's openssl step makes;
    // tests/security_readme.rs makes it and starts a broker with the file.
    for f in files.iter().filter(|f| !f.ends_with("secured.toml")) {
        let (ok, out, err) = run(sediment().arg("check-config").arg(f));
        assert!(ok, "check-config {}:\n{err}", f.display());
        assert!(out.contains("(* = set in the file"), "{out}");
    }
    // dev.toml cleans fast: small segments, a low ratio, a short backoff.
    let dev = sediment::config::BrokerConfig::load(&path("config/dev.toml")).unwrap();
    let d = dev.topic_defaults();
    assert!(d["segment.bytes"].parse::<i64>().unwrap() <= 1 << 20);
    assert!(d["min.cleanable.dirty.ratio"].parse::<f64>().unwrap() < 0.5);
    assert!(dev.cleaner_config().backoff_ms < 15_000);
}

/// Every `#key = value` line of config/server.toml (placeholders excluded);
/// a key that is also another key's prefix is quoted there, and here.
fn template_lines(text: &str) -> Vec<(String, String)> {
    text.lines()
        .filter_map(|l| l.strip_prefix('#'))
        .filter(|l| l.chars().next().is_some_and(|c| c.is_ascii_lowercase() || c == '"'))
        .filter_map(|l| l.split_once(" = "))
        .map(|(k, v)| (k.to_string(), v.to_string()))
        .collect()
}

#[test]
fn server_toml_lists_every_key_with_its_default() {
    let text = read("config/server.toml");
    let listed: Vec<(String, String)> = template_lines(&text);
    let keys: BTreeSet<&str> = listed.iter().map(|(k, _)| k.trim_matches('"')).collect();
    let all = sediment::config::BrokerConfig::default().describe();
    let missing: Vec<&str> =
        all.iter().map(|(k, ..)| k.as_str()).filter(|k| !keys.contains(k)).collect();
    assert!(missing.is_empty(), "config/server.toml lacks {missing:?}; regenerate it: sediment config-template > config/server.toml");
    assert_eq!(listed.len(), all.len(), "each key once");
    // Each key's doc line sits above it.
    for (key, _, _, doc, _) in &all {
        assert!(text.contains(&format!("# {doc}")), "{key}: its meaning is missing");
    }
    // Uncommenting every line changes nothing: each is valid and the default.
    let uncommented: String = listed
        .iter()
        .filter(|(_, v)| !v.starts_with('<'))
        .map(|(k, v)| format!("{k} = {v}\n"))
        .collect();
    let c = sediment::config::BrokerConfig::from_toml(
        &uncommented,
        Path::new("server.toml uncommented"),
    )
    .unwrap_or_else(|e| panic!("uncommented config/server.toml: {e}"));
    for (key, value, explicit, _, kind) in c.describe() {
        let default = all.iter().find(|(k, ..)| *k == key).unwrap().1.clone();
        if !explicit {
            assert_eq!(default, "", "{key} has a default but no line to set it");
            continue;
        }
        if matches!(kind, sediment::config_def::ConfigType::Double) {
            assert_eq!(value.parse::<f64>().unwrap(), default.parse::<f64>().unwrap(), "{key}");
        } else {
            assert_eq!(value, default, "{key}");
        }
    }
    // And the file is exactly what the broker generates.
    let (ok, generated, err) = run(sediment().arg("config-template"));
    assert!(ok, "{err}");
    assert!(text == generated, "config/server.toml differs from `sediment config-template`; regenerate it: sediment config-template > config/server.toml");
}

#[test]
fn the_configuration_guide_documents_every_key() {
    let guide = read("docs/operating/configuration.md");
    let missing: Vec<String> = sediment::config::BrokerConfig::default()
        .describe()
        .into_iter()
        .map(|(k, ..)| k)
        .filter(|k| !guide.contains(&format!("| `{k}` |")))
        .collect();
    assert!(missing.is_empty(), "the configuration guide's table lacks {missing:?}");
    let readme = [guide, read("docs/operating/containers.md")].concat();
    for f in [
        "config/server.toml",
        "config/dev.toml",
        "config/production.toml",
        "config/docker.toml",
        "docker/docker-compose.yml",
        "scripts/docker-smoke.sh",
    ] {
        assert!(readme.contains(&format!("`{f}`")), "the operating docs do not mention {f}");
    }
}

/// docs/operating/configuration-reference.md is generated from the key
/// tables: it must be exactly what the broker prints.
#[test]
fn the_configuration_reference_is_current() {
    let text = read("docs/operating/configuration-reference.md");
    let (ok, generated, err) = run(sediment().args(["config-template", "--markdown"]));
    assert!(ok, "{err}");
    assert!(text == generated, "docs/operating/configuration-reference.md is stale; regenerate it: sediment config-template --markdown > docs/operating/configuration-reference.md");
    for (key, ..) in sediment::config::BrokerConfig::default().describe() {
        assert!(text.contains(&format!("| `{key}`")), "the reference lacks {key}");
    }
}

#[test]
fn the_dockerfile_start_command_serves_clients_outside_docker() {
    // Static promises of the Dockerfile.
    let dockerfile = read("Dockerfile");
    assert!(dockerfile.contains("RUN cargo build --release --locked --bin sediment"));
    let user = dockerfile.lines().find_map(|l| l.strip_prefix("USER ")).expect("a USER");
    assert_ne!(user.trim(), "root");
    assert!(dockerfile.contains("VOLUME [\"/var/lib/sediment\"]"));
    let docker_toml = sediment::config::BrokerConfig::load(&path("config/docker.toml")).unwrap();
    let kafka_port = docker_toml.listeners().unwrap()[0].port;
    let metrics_port =
        docker_toml.metrics_listen().unwrap().rsplit(':').next().unwrap().to_string();
    assert_eq!(
        dockerfile.lines().find_map(|l| l.strip_prefix("EXPOSE ")),
        Some(format!("{kafka_port} {metrics_port}").as_str())
    );
    assert!(
        dockerfile
            .contains(&format!("\"health\", \"--bootstrap-server\", \"127.0.0.1:{kafka_port}\"")),
        "the HEALTHCHECK probes the listener"
    );
    assert!(docker_toml.log_dirs()[0].starts_with("/var/lib/sediment"), "data in the volume");

    // Its start command, outside Docker: the debug binary stands in for the
    // release build (scripts/docker-smoke.sh without --binary runs the build too).
    let (ok, out, err) = run(Command::new(path("scripts/docker-smoke.sh"))
        .arg("--binary")
        .arg(env!("CARGO_BIN_EXE_sediment")));
    println!("{err}");
    assert!(ok && out.contains("docker-smoke: OK"), "scripts/docker-smoke.sh failed:\n{out}{err}");
    assert!(
        err.contains("healthcheck:")
            && err.contains("metrics: /metrics and /cleaner-status answer")
            && err.contains("clean-shutdown marker written"),
        "{err}"
    );
}

#[test]
fn every_metric_in_the_dashboard_and_the_alerts_exists_on_a_live_broker() {
    // A cleaner throttle so its limit gauge is set; a short backoff.
    let b = TestBroker::start(&[
        "log.cleaner.backoff.ms=100",
        "log.cleaner.io.max.bytes.per.second=50000000",
    ]);
    create_topic(
        b.port,
        "profiles",
        2,
        &[
            ("cleanup.policy", "compact"),
            ("segment.ms", "1000"),
            ("min.cleanable.dirty.ratio", "0.01"),
        ],
    );
    let mut w = Wire::connect(b.port);
    let t = now_ms() - 60_000;
    for partition in 0..2 {
        for round in 0..5 {
            // The last round deletes user-9: its tombstone, kept with a
            // horizon, is at risk for the group that commits below it.
            let value = |k: i32| (round < 4 || k != 9).then(|| format!("v{round}"));
            let records: Vec<_> = (0..10).map(|k| (format!("user-{k}"), value(k))).collect();
            produce(&mut w, "profiles", partition, t, &records);
        }
        // Two seconds of record time later: the segment rolls and the first is cleanable.
        produce(
            &mut w,
            "profiles",
            partition,
            t + 2_000,
            &[("user-0".into(), Some("last".into()))],
        );
    }
    for partition in 0..2 {
        b.wait_for(30, "both partitions cleaned", || {
            cleaner_checkpoint(&b.data_dir(), "profiles", partition).filter(|o| *o == 50)
        });
    }
    // A group that has read nothing of profiles-0 yet.
    {
        use kafka_protocol::messages::offset_commit_request::{
            OffsetCommitRequestPartition, OffsetCommitRequestTopic,
        };
        use kafka_protocol::messages::{GroupId, OffsetCommitRequest, TopicName};
        use kafka_protocol::protocol::StrBytes;
        let r = w.call(
            8,
            &OffsetCommitRequest::default()
                .with_group_id(GroupId(StrBytes::from_static_str("dashboard-readers")))
                .with_generation_id_or_member_epoch(-1)
                .with_topics(vec![OffsetCommitRequestTopic::default()
                    .with_name(TopicName(StrBytes::from_static_str("profiles")))
                    .with_partitions(vec![OffsetCommitRequestPartition::default()
                        .with_partition_index(0)
                        .with_committed_offset(0)])]),
        );
        assert_eq!(r.topics[0].partitions[0].error_code, 0);
    }
    // An error response, so the error counter has a series.
    {
        use kafka_protocol::messages::{DeleteTopicsRequest, TopicName};
        use kafka_protocol::protocol::StrBytes;
        let r = w.call(
            4,
            &DeleteTopicsRequest::default()
                .with_topic_names(vec![TopicName(StrBytes::from_static_str("no-such-topic"))])
                .with_timeout_ms(5_000),
        );
        assert_eq!(r.responses[0].error_code, 3, "UNKNOWN_TOPIC_OR_PARTITION");
    }

    let scrape = b.metrics();
    let present = sample_names(&scrape);
    let d = dashboard();
    let mut used: Vec<(String, String)> = Vec::new();
    for (title, q) in dashboard_queries(&d) {
        used.extend(
            promql_metric_names(&q).into_iter().map(|n| (format!("dashboard panel {title:?}"), n)),
        );
    }
    used.extend(template_metrics(&d).into_iter().map(|n| ("dashboard variable".to_string(), n)));
    for (alert, expr) in alert_rules() {
        used.extend(promql_metric_names(&expr).into_iter().map(|n| (format!("alert {alert}"), n)));
    }
    assert!(used.len() > 30, "{used:?}");
    // `up` is Prometheus's own series about the scrape, not the broker's.
    let missing: Vec<&(String, String)> =
        used.iter().filter(|(_, n)| n != "up" && !present.contains(n)).collect();
    assert!(
        missing.is_empty(),
        "metrics used but absent from the broker's /metrics: {missing:?}\nscrape:\n{scrape}"
    );
    println!(
        "{} metric uses, {} distinct names, all in the scrape",
        used.len(),
        used.iter().map(|(_, n)| n).collect::<BTreeSet<_>>().len()
    );

    // The disk gauges describe the data dir's file system.
    let dir = b.data_dir().display().to_string();
    let total = b
        .metric(&format!("sediment_log_dir_total_bytes{{log_dir=\"{dir}\"}}"))
        .expect("total bytes of the log dir");
    let usable = b
        .metric(&format!("sediment_log_dir_usable_bytes{{log_dir=\"{dir}\"}}"))
        .expect("usable bytes of the log dir");
    assert!(total > 0.0 && usable > 0.0 && usable <= total, "usable {usable} of {total}");
    assert_eq!(b.metric("sediment_log_cleaner_backoff_seconds"), Some(0.1));
    assert_eq!(b.metric("sediment_log_cleaner_threads"), Some(1.0));

    // A real Prometheus with docker/prometheus.yml (its target pointed at this
    // broker, 1 s intervals) and docker/alerts.yml.
    let mut config = yaml("docker/prometheus.yml");
    config["global"]["scrape_interval"] = "1s".into();
    config["global"]["evaluation_interval"] = "1s".into();
    config["rule_files"] =
        Yaml::Sequence(vec![path("docker/alerts.yml").display().to_string().into()]);
    config["scrape_configs"][0]["static_configs"][0]["targets"] =
        Yaml::Sequence(vec![format!("127.0.0.1:{}", b.metrics_port).into()]);
    let prometheus = Prometheus::start(&serde_yaml::to_string(&config).unwrap());
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(60);
    let wait = |what: &str, f: &mut dyn FnMut() -> bool| {
        prometheus.wait_until(deadline, std::time::Duration::from_millis(250), what, f);
    };
    wait("no scrape of the broker", &mut || {
        prometheus.ready()
            && prometheus
                .query("up{job=\"sediment\"}")
                .first()
                .is_some_and(|r| r["value"][1] == "1")
    });
    // Traffic while Prometheus watches, so rates and latency quantiles have data.
    let queries: Vec<(String, String)> = dashboard_queries(&d)
        .into_iter()
        .map(|(title, q)| (title, q.replace("$__rate_interval", "1m").replace("$topic", ".*")))
        .collect();
    let mut round = 0;
    for (title, q) in &queries {
        wait(&format!("no data for the panel {title:?}: {q}"), &mut || {
            round += 1;
            produce(
                &mut w,
                "profiles",
                0,
                now_ms(),
                &[(format!("user-{}", round % 10), Some(format!("r{round}")))],
            );
            let result = prometheus.query(q);
            result.iter().any(|r| r["value"][1].as_str().is_some_and(|v| v != "NaN"))
        });
    }
    println!("{} dashboard queries answered with data", queries.len());
    // Every rule evaluates without error; none fires on a healthy broker.
    wait("rules not evaluated yet", &mut || {
        let (_, body) = http_get(prometheus.port, "/api/v1/rules");
        let doc: serde_json::Value = serde_json::from_str(&body).unwrap();
        let rules: Vec<&serde_json::Value> = doc["data"]["groups"]
            .as_array()
            .into_iter()
            .flatten()
            .flat_map(|g| g["rules"].as_array().into_iter().flatten())
            .collect();
        rules.len() == alert_rules().len()
            && rules
                .iter()
                .all(|r| r["lastEvaluation"].as_str().is_some_and(|t| !t.starts_with("0001")))
    });
    let (_, body) = http_get(prometheus.port, "/api/v1/rules");
    let doc: serde_json::Value = serde_json::from_str(&body).unwrap();
    for g in doc["data"]["groups"].as_array().unwrap() {
        for r in g["rules"].as_array().unwrap() {
            assert_eq!(
                r["health"], "ok",
                "rule {} evaluated with an error: {}",
                r["name"], r["lastError"]
            );
            assert_ne!(r["state"], "firing", "rule {} fires on a healthy broker: {r}", r["name"]);
        }
    }
    // Each alert's expression is valid PromQL for this Prometheus.
    for (alert, expr) in alert_rules() {
        prometheus.query(&expr);
        println!("alert {alert}: evaluates");
    }
}
