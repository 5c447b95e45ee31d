//! The `sediment` command line.

use std::path::PathBuf;
use std::sync::Arc;
use std::process::ExitCode;

use clap::{Parser, Subcommand};

use anyhow::Context;
use sediment::api::Broker;
use sediment::config::BrokerConfig;
use sediment::log::LogManager;
use sediment::tools::dump_log::{self, DumpOptions};

#[derive(Parser)]
#[command(name = "sediment", version, about = "A Kafka-compatible broker built around log compaction")]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand)]
enum Command {
    /// Run the broker. Without --config it runs on the embedded defaults
    /// (PLAINTEXT on port 9092, data in ./data).
    Serve {
        /// A TOML file of broker keys with Kafka's names.
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
    /// Validate a config file and print the effective configuration.
    CheckConfig {
        file: PathBuf,
        /// key=value, applied after the file.
        #[arg(long = "override", value_name = "KEY=VALUE")]
        overrides: Vec<String>,
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
        .with_env_filter(tracing_subscriber::EnvFilter::try_from_default_env().unwrap_or_else(|_| "info".into()))
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
        Command::Health { bootstrap_server } => match sediment::tools::health::check(&bootstrap_server, std::time::Duration::from_secs(5)) {
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
    Ok(config)
}

fn serve(file: Option<PathBuf>, overrides: Vec<String>) -> anyhow::Result<()> {
    let config = load_config(file, &overrides)?;
    let runtime = tokio::runtime::Builder::new_multi_thread().enable_all().thread_name("sediment-net").build().context("starting the runtime")?;
    let logs = Arc::new(LogManager::open(config.log_manager_config(), sediment::clock::system()).context("opening the log dirs")?);
    for (tp, reason) in logs.offline_partitions() {
        tracing::error!(partition = %tp, "partition offline: {reason}");
    }
    logs.start_scheduler();
    let result = runtime.block_on(async {
        let addr = config.bind_addr()?;
        let listener = tokio::net::TcpListener::bind(addr).await.with_context(|| format!("binding {addr}"))?;
        let bound = listener.local_addr()?;
        let advertised = config.advertised(bound.port())?;
        let broker = Arc::new(Broker::new(config, Arc::clone(&logs), advertised.clone()).context("initialising the broker")?);
        tracing::info!(listening = %bound, advertised = %format!("{}:{}", advertised.host, advertised.port), cluster_id = %broker.cluster_id, "sediment started");
        let ticker = sediment::group::spawn_ticker(Arc::clone(&broker.groups));
        sediment::server::run(listener, broker, shutdown_signal()).await;
        ticker.abort();
        anyhow::Ok(())
    });
    // Connections are drained: flush every log and write the checkpoints and
    // the clean-shutdown marker, so the next start skips recovery.
    let shut = logs.shutdown().context("flushing logs on shutdown");
    tracing::info!("sediment stopped");
    result.and(shut)
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
