//! The `sediment` command line.

use std::path::PathBuf;
use std::process::ExitCode;

use clap::{Parser, Subcommand};

use sediment::tools::dump_log::{self, DumpOptions};

#[derive(Parser)]
#[command(name = "sediment", version, about = "A Kafka-compatible broker built around log compaction")]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand)]
enum Command {
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
        .init();
    let cli = Cli::parse();
    match cli.command {
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
