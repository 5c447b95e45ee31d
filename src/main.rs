//! The `sediment` command line: parses it and hands `serve` to
//! `sediment::broker::run` with the process's signals as the shutdown.

#![warn(clippy::too_many_lines)]

use std::path::PathBuf;
use std::process::ExitCode;

use clap::{Parser, Subcommand};

use anyhow::Context;
use sediment::config::BrokerConfig;
use sediment::tools::cleaner_status;
use sediment::tools::dump_log::{self, DumpOptions};

#[derive(Parser)]
#[command(
    name = "sediment",
    version,
    about = "A Kafka-compatible broker built around log compaction"
)]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand)]
enum Command {
    /// Run the broker. Without --config it runs on the embedded defaults
    /// (PLAINTEXT on port 9092, data in ./data).
    Serve {
        /// A TOML file of broker keys with Kafka's names, or Kafka's own
        /// server.properties (a name ending in .properties).
        #[arg(long, env = "SEDIMENT_CONFIG")]
        config: Option<PathBuf>,
        /// key=value, applied after the file and after the whitespace-separated
        /// key=value pairs of $SEDIMENT_OVERRIDES (kafka-server-start's --override).
        #[arg(long = "override", value_name = "KEY=VALUE")]
        overrides: Vec<String>,
    },
    /// Exit 0 when a broker answers ApiVersions (a container HEALTHCHECK).
    Health {
        #[arg(long, default_value = "127.0.0.1:9092")]
        bootstrap_server: String,
    },
    /// Validate a config file (TOML, or Java properties for a name ending in
    /// .properties) and print the effective configuration.
    CheckConfig {
        file: PathBuf,
        /// key=value, applied after the file.
        #[arg(long = "override", value_name = "KEY=VALUE")]
        overrides: Vec<String>,
    },
    /// Print a TOML file listing every key with its default and meaning, all
    /// commented out (config/server.toml is this output).
    ConfigTemplate {
        /// The same keys as the Markdown configuration reference
        /// (docs/operating/configuration-reference.md is this output).
        #[arg(long)]
        markdown: bool,
    },
    /// Show the running broker's cleaner: per compacted partition its dirty
    /// ratio, cleanable bytes, whether it is eligible (and why not) and its
    /// last clean. Reads the broker's metrics endpoint (`metrics.listen`).
    CleanerStatus {
        /// host:port of the broker's metrics endpoint.
        #[arg(long, default_value = "127.0.0.1:9404")]
        metrics: String,
        /// Print the endpoint's JSON as it is.
        #[arg(long)]
        json: bool,
        /// Only this partition (TOPIC-PARTITION), with its last cleans.
        #[arg(long)]
        partition: Option<String>,
    },
    /// Every copy of a key in a compacted partition: offset, segment, region,
    /// whether it is superseded and by when compaction guarantees it gone;
    /// then a verdict (erased, pending, live, absent; incomplete when offsets
    /// only in the object store were not read). Exit codes: 0 found,
    /// 4 no copy of the key, 3 unknown topic or partition, 5 unreadable or
    /// corrupt segment, 6 broker not reachable, 7 topic not compacted.
    KeyAudit {
        #[arg(long)]
        topic: String,
        /// The key, as UTF-8 text.
        #[arg(long)]
        key: String,
        /// Default: the partition the Java client's default partitioner picks.
        #[arg(long)]
        partition: Option<i32>,
        /// host:port of the running broker's metrics endpoint.
        #[arg(long, default_value = "127.0.0.1:9404")]
        metrics: String,
        /// Audit a stopped broker's log dir instead of asking a running broker.
        #[arg(long)]
        data_dir: Option<PathBuf>,
        /// With --data-dir: the broker's config (topic defaults, cleaner keys).
        #[arg(long, requires = "data_dir")]
        config: Option<PathBuf>,
        /// Print the JSON document as it is.
        #[arg(long)]
        json: bool,
    },
    /// Add SCRAM users to a stopped broker's credential store (the first
    /// admin user), as `kafka-storage format --add-scram` does for Kafka:
    /// 'SCRAM-SHA-512=[name=admin,password=admin-secret]' (also
    /// iterations=, or salt= and saltedpassword= in base64). With the broker
    /// running, use kafka-configs --alter --entity-type users instead. With
    /// sediment.cluster.etcd.endpoints set, they go to the cluster's etcd,
    /// brokers running or not.
    AddScram {
        /// The broker's TOML file (its log.dirs hold the store).
        #[arg(long, env = "SEDIMENT_CONFIG")]
        config: Option<PathBuf>,
        /// key=value, applied after the file.
        #[arg(long = "override", value_name = "KEY=VALUE")]
        overrides: Vec<String>,
        /// MECHANISM=[name=...,password=...], one or more.
        #[arg(required = true)]
        credentials: Vec<String>,
    },
    /// Build a fresh data dir from a tiered storage store: every partition's
    /// latest manifest (segments with their indexes, topic configs, log start
    /// offsets, the cleaner's clean points). Then `sediment serve` on it.
    /// Credentials come from the AWS environment variables or ~/.aws/credentials.
    Restore {
        /// The store: s3://bucket/prefix or file:///dir.
        #[arg(long)]
        from: String,
        /// The S3 endpoint of an S3-compatible server (http://host:port).
        #[arg(long)]
        endpoint: Option<String>,
        #[arg(long)]
        region: Option<String>,
        /// The data dir to build (missing or empty); the new broker's log.dirs.
        #[arg(long)]
        data_dir: PathBuf,
        /// node.id written to meta.properties.
        #[arg(long, default_value_t = 1)]
        node_id: i32,
    },
    /// Print the batches of segment files (.log) and check index files
    /// (.index, .timeindex) against their log, like kafka-dump-log.
    DumpLog {
        /// Segment and index files.
        #[arg(required = true)]
        files: Vec<PathBuf>,
        /// Print each record's key and value.
        #[arg(long)]
        print_data_log: bool,
        /// Print every record, not only batch headers.
        #[arg(long)]
        deep_iteration: bool,
        /// Largest batch to accept while scanning, in bytes.
        #[arg(long, default_value_t = 1 << 30)]
        max_batch_size: usize,
    },
}

fn main() -> ExitCode {
    tracing_subscriber::fmt()
        .with_env_filter(
            tracing_subscriber::EnvFilter::try_from_default_env().unwrap_or_else(|_| "info".into()),
        )
        .with_writer(std::io::stderr)
        .with_ansi(std::io::IsTerminal::is_terminal(&std::io::stderr()))
        .init();
    let cli = Cli::parse();
    match cli.command {
        Command::Serve { config, overrides } => match serve(config, overrides) {
            Ok(()) => ExitCode::SUCCESS,
            Err(e) => {
                tracing::error!("{e:#}");
                eprintln!("error: {e:#}");
                ExitCode::from(1)
            }
        },
        Command::Health { bootstrap_server } => match sediment::tools::health::check(
            &bootstrap_server,
            std::time::Duration::from_secs(5),
        ) {
            Ok(apis) => {
                println!("ok: {bootstrap_server} answers ApiVersions ({apis} APIs)");
                ExitCode::SUCCESS
            }
            Err(e) => {
                eprintln!("unhealthy: {bootstrap_server}: {e:#}");
                ExitCode::from(1)
            }
        },
        Command::CheckConfig { file, overrides } => check_config(file, &overrides),
        Command::Restore { from, endpoint, region, data_dir, node_id } => {
            restore(&from, endpoint, region, &data_dir, node_id)
        }
        Command::AddScram { config, overrides, credentials } => {
            match add_scram(config, &overrides, &credentials) {
                Ok(n) => {
                    println!("added {n} SCRAM credential(s)");
                    ExitCode::SUCCESS
                }
                Err(e) => {
                    eprintln!("error: {e:#}");
                    ExitCode::from(1)
                }
            }
        }
        Command::ConfigTemplate { markdown } => {
            if markdown {
                print!("{}", sediment::config::config_reference_markdown());
            } else {
                print!("{}", sediment::config::config_template());
            }
            ExitCode::SUCCESS
        }
        Command::KeyAudit { topic, key, partition, metrics, data_dir, config, json } => {
            key_audit(&topic, &key, partition, &metrics, data_dir, config, json)
        }
        Command::CleanerStatus { metrics, json, partition } => {
            match cleaner_status::cleaner_status(&metrics, json, partition.as_deref()) {
                Ok(text) => {
                    print!("{text}");
                    ExitCode::SUCCESS
                }
                Err(e) => {
                    eprintln!("error: {e:#}");
                    ExitCode::from(1)
                }
            }
        }
        Command::DumpLog { files, print_data_log, deep_iteration, max_batch_size } => {
            let mut out = String::new();
            let opts = DumpOptions { print_data_log, deep_iteration, max_batch_size };
            let result = dump_log::dump_files(&files, opts, &mut out);
            print!("{out}");
            match result {
                Ok(0) => ExitCode::SUCCESS,
                Ok(n) => {
                    eprintln!("{n} problem(s) found");
                    ExitCode::from(1)
                }
                Err(e) => {
                    eprintln!("error: {e:#}");
                    ExitCode::from(2)
                }
            }
        }
    }
}

fn restore(
    from: &str,
    endpoint: Option<String>,
    region: Option<String>,
    data_dir: &std::path::Path,
    node_id: i32,
) -> ExitCode {
    match sediment::tools::remote_store::restore(from, endpoint, region, data_dir, node_id) {
        Ok(s) => {
            println!(
                "restored {} partition(s), {} segment(s), {} bytes of cluster {} into {}",
                s.partitions,
                s.segments,
                s.bytes,
                s.cluster_id,
                data_dir.display()
            );
            ExitCode::SUCCESS
        }
        Err(e) => {
            eprintln!("error: {e:#}");
            ExitCode::from(1)
        }
    }
}

fn check_config(file: PathBuf, overrides: &[String]) -> ExitCode {
    let config = match load_config(Some(file), overrides) {
        Ok(config) => config,
        Err(e) => {
            eprintln!("error: {e:#}");
            return ExitCode::from(1);
        }
    };
    for (key, value, explicit, doc, _) in config.describe() {
        let mark = if explicit { "*" } else { " " };
        println!("{mark} {key} = {value:?}    # {doc}");
    }
    println!("(* = set in the file or an override; the rest are defaults)");
    for (key, value) in config.ignored_keys() {
        let reason = sediment::config::ignored_reason(key).unwrap_or("ignored");
        println!("- {key} = {value:?}    # ignored ({reason})");
    }
    if let Some(warning) = config.ignored_warning() {
        println!("warning: {warning}");
    }
    match sediment::tools::remote_store::check(&config) {
        Ok(Some(line)) => println!("{line}"),
        Ok(None) => {}
        Err(e) => {
            eprintln!("error: {e:#}");
            return ExitCode::from(1);
        }
    }
    ExitCode::SUCCESS
}

fn load_config(file: Option<PathBuf>, overrides: &[String]) -> anyhow::Result<BrokerConfig> {
    let mut config = match file {
        Some(path) => BrokerConfig::load(&path)?,
        None => BrokerConfig::default(),
    };
    // The environment (containers) sits between the file and the command line.
    if let Ok(env) = std::env::var("SEDIMENT_OVERRIDES") {
        config.apply_overrides(env.split_whitespace()).context("in $SEDIMENT_OVERRIDES")?;
    }
    config.apply_overrides(overrides.iter().map(String::as_str))?;
    // The rules across keys (listeners and their protocols) once all are set.
    config.check()?;
    // Tiered storage reads its own keys (`remote::config`): a bad URL fails
    // here; so does a connection limit override that does not parse.
    sediment::remote::RemoteStorageConfig::from_values(&config)?;
    sediment::server::connection_quotas::ConnectionLimits::from_values(&config)?;
    Ok(config)
}

fn add_scram(
    file: Option<PathBuf>,
    overrides: &[String],
    credentials: &[String],
) -> anyhow::Result<usize> {
    use sediment::tools::add_scram;
    let config = load_config(file, overrides)?;
    let args = credentials.iter().map(|c| add_scram::parse(c)).collect::<Result<Vec<_>, _>>()?;
    if let Some(cluster) = sediment::cluster::ClusterConfig::from_values(&config)? {
        let dirs = config.log_dirs();
        let first = dirs.first().cloned().unwrap_or_else(|| PathBuf::from("data"));
        return Ok(add_scram::run_in_cluster(&cluster, &first, args)?);
    }
    Ok(add_scram::run(&config.log_dirs(), args)?)
}

fn serve(file: Option<PathBuf>, overrides: Vec<String>) -> anyhow::Result<()> {
    let config = load_config(file, &overrides)?;
    if let Some(warning) = config.ignored_warning() {
        tracing::warn!("{warning}");
    }
    Ok(sediment::broker::run(config, shutdown_signal())?)
}

fn key_audit(
    topic: &str,
    key: &str,
    partition: Option<i32>,
    metrics: &str,
    data_dir: Option<PathBuf>,
    config: Option<PathBuf>,
    json: bool,
) -> ExitCode {
    use sediment::tools::key_audit::{self, Failure, ABSENT_EXIT_CODE};
    let result = match data_dir {
        Some(dir) => match load_config(config, &[]) {
            Ok(c) => key_audit::from_data_dir(&dir, &c, topic, key, partition).and_then(|a| {
                serde_json::to_string_pretty(&a).map_err(|e| Failure::Unreadable(e.to_string()))
            }),
            Err(e) => {
                eprintln!("error: {e:#}");
                return ExitCode::from(2);
            }
        },
        None => key_audit::from_broker(metrics, topic, key, partition),
    };
    let text = match result {
        Ok(text) => text,
        Err(e) => {
            eprintln!("error: {e}");
            return ExitCode::from(e.exit_code());
        }
    };
    let doc: serde_json::Value = serde_json::from_str(&text).unwrap_or_default();
    if json {
        println!("{text}");
    } else {
        print!("{}", key_audit::render(&doc));
    }
    if doc["verdict"] == "absent" {
        ExitCode::from(ABSENT_EXIT_CODE)
    } else {
        ExitCode::SUCCESS
    }
}

async fn shutdown_signal() {
    use tokio::signal::unix::{signal, SignalKind};
    let mut term = match signal(SignalKind::terminate()) {
        Ok(s) => s,
        Err(e) => {
            tracing::warn!("cannot listen for SIGTERM: {e}");
            let _ = tokio::signal::ctrl_c().await;
            return;
        }
    };
    tokio::select! {
        _ = tokio::signal::ctrl_c() => tracing::info!("SIGINT received"),
        _ = term.recv() => tracing::info!("SIGTERM received"),
    }
}
