//! The `sediment` command line: parses it and hands `serve` to
//! `sediment::broker::run` with the process's signals as the shutdown.

#![warn(clippy::too_many_lines)]

use std::path::PathBuf;
use std::process::ExitCode;

use clap::{Parser, Subcommand};

use anyhow::Context;
use sediment::config::BrokerConfig;
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
    ConfigTemplate,
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
    },
    /// Add SCRAM users to a stopped broker's credential store (the first
    /// admin user), as `kafka-storage format --add-scram` does for Kafka:
    /// 'SCRAM-SHA-512=[name=admin,password=admin-secret]' (also
    /// iterations=, or salt= and saltedpassword= in base64). With the broker
    /// running, use kafka-configs --alter --entity-type users instead.
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
        Command::CheckConfig { file, overrides } => match load_config(Some(file), &overrides) {
            Ok(config) => {
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
                ExitCode::SUCCESS
            }
            Err(e) => {
                eprintln!("error: {e:#}");
                ExitCode::from(1)
            }
        },
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
        Command::ConfigTemplate => {
            print!("{}", sediment::config::config_template());
            ExitCode::SUCCESS
        }
        Command::CleanerStatus { metrics, json } => match cleaner_status(&metrics, json) {
            Ok(text) => {
                print!("{text}");
                ExitCode::SUCCESS
            }
            Err(e) => {
                eprintln!("error: {e:#}");
                ExitCode::from(1)
            }
        },
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
    Ok(add_scram::run(&config.log_dirs(), args)?)
}

fn serve(file: Option<PathBuf>, overrides: Vec<String>) -> anyhow::Result<()> {
    let config = load_config(file, &overrides)?;
    if let Some(warning) = config.ignored_warning() {
        tracing::warn!("{warning}");
    }
    Ok(sediment::broker::run(config, shutdown_signal())?)
}

/// GET a path from `addr` over plain HTTP/1.1 (the endpoint is ours and local;
/// no client library is needed for one request).
fn http_get(addr: &str, path: &str) -> anyhow::Result<String> {
    use std::io::{Read, Write};
    let mut stream = std::net::TcpStream::connect(addr).with_context(|| format!("connecting to the metrics endpoint {addr} (is the broker running, and is metrics.listen this address?)"))?;
    stream.set_read_timeout(Some(std::time::Duration::from_secs(30)))?;
    write!(stream, "GET {path} HTTP/1.1\r\nHost: {addr}\r\nConnection: close\r\n\r\n")?;
    let mut raw = Vec::new();
    stream.read_to_end(&mut raw)?;
    let text = String::from_utf8(raw).context("response is not UTF-8")?;
    let (head, body) = text.split_once("\r\n\r\n").context("malformed HTTP response")?;
    let status = head.lines().next().unwrap_or_default();
    anyhow::ensure!(status.split_whitespace().nth(1) == Some("200"), "{addr}{path}: {status}");
    anyhow::ensure!(
        !head.to_ascii_lowercase().contains("transfer-encoding: chunked"),
        "chunked responses are not expected from the broker"
    );
    Ok(body.to_string())
}

fn cleaner_status(addr: &str, json: bool) -> anyhow::Result<String> {
    use std::fmt::Write;
    let body = http_get(addr, "/cleaner-status")?;
    if json {
        return Ok(body + "\n");
    }
    let doc: serde_json::Value = serde_json::from_str(&body).context("the endpoint's JSON")?;
    let m = &doc["manager"];
    let t = &doc["threads"];
    let mut out = String::new();
    writeln!(
        out,
        "cleaner: {} thread(s), {} dead; max-dirty-percent {}; last run {} ms ago; max compaction delay {} s",
        t["threads"], t["dead_thread_count"], m["max_dirty_percent"], m["time_since_last_run_ms"], m["max_compaction_delay_ms"].as_i64().unwrap_or(0) / 1000
    )?;
    for d in m["log_dirs"].as_array().into_iter().flatten() {
        write!(
            out,
            "log dir {}: {} uncleanable partition(s), {} uncleanable bytes",
            d["log_dir"].as_str().unwrap_or("?"),
            d["uncleanable_partitions"],
            d["uncleanable_bytes"]
        )?;
        if let Some(cause) = d["offline_cause"].as_str() {
            write!(out, "; cleaning stopped: {cause}")?;
        }
        writeln!(out)?;
    }
    writeln!(
        out,
        "{:<32} {:>6} {:>12} {:>12}  STATUS",
        "PARTITION", "DIRTY", "CLEANABLE", "FIRST-DIRTY"
    )?;
    let now = m["now_ms"].as_i64().unwrap_or(0);
    for p in m["partitions"].as_array().into_iter().flatten() {
        let name = format!("{}-{}", p["topic"].as_str().unwrap_or("?"), p["partition"]);
        let status = if p["eligible"].as_bool() == Some(true) {
            "eligible".to_string()
        } else {
            format!("not eligible: {}", p["reason"].as_str().unwrap_or("?"))
        };
        writeln!(
            out,
            "{name:<32} {:>6.3} {:>12} {:>12}  {status}",
            p["dirty_ratio"].as_f64().unwrap_or(0.0),
            // as numbers: a JSON value's Display ignores the column width
            p["cleanable_bytes"].as_i64().unwrap_or(0),
            p["first_dirty_offset"].as_i64().unwrap_or(0)
        )?;
        // An open transaction that bounds an otherwise cleanable log (when it
        // is why nothing is cleanable, the status above already says so).
        let open = &p["open_transaction"];
        if open.is_object() && p["ineligible"]["code"] != "open_transaction" {
            let age = open["age_ms"].as_i64().map_or("?".to_string(), |a| (a / 1000).to_string());
            let owner = match open["transactional_id"].as_str() {
                Some(id) => {
                    format!("transactional id {id:?} (producer id {})", open["producer_id"])
                }
                None => format!(
                    "producer id {} (no transactional id known for it)",
                    open["producer_id"]
                ),
            };
            writeln!(
                out,
                "{:<32} cleaning stops at the first unstable offset {}: {owner} has a transaction open there for {age}s",
                "", open["first_offset"]
            )?;
        }
        let last = &p["last_clean"];
        if last.is_object() {
            writeln!(
                out,
                "{:<32} last clean {:.1}s ago: offsets [{}, {}), {} -> {} bytes ({:.1}% smaller), {} -> {} records, {} tombstones removed, {} ms",
                "",
                (now - last["end_time_ms"].as_i64().unwrap_or(now)) as f64 / 1000.0,
                last["first_dirty_offset"],
                last["end_offset"],
                last["start_size"],
                last["end_size"],
                100.0 * last["size_reduction"].as_f64().unwrap_or(0.0),
                last["start_messages"],
                last["end_messages"],
                last["tombstones_removed"],
                last["elapsed_ms"]
            )?;
        }
    }
    Ok(out)
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
