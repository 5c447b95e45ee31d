#!/usr/bin/env bash
# The one command that sets up and runs every test on a fresh machine:
#   scripts/test.sh
# It installs what the tests need (Java 17 and Maven for Apache Kafka's own
# tools, fetched from Maven Central; kcat from Debian; confluent-kafka and
# kafka-python from PyPI into target/pyenv; Prometheus, docker-compose and
# etcd (etcd-server) from Debian), then checks formatting and lints (cargo
# fmt --check, cargo clippy on every target with warnings as errors), prints
# the module import graph (failing on a cycle) and runs cargo test.
set -euo pipefail
cd "$(dirname "$0")/.."

need_apt=()
command -v java >/dev/null 2>&1 || need_apt+=(openjdk-17-jre-headless)
command -v mvn >/dev/null 2>&1 || need_apt+=(maven)
command -v kcat >/dev/null 2>&1 || need_apt+=(kcat)
# Prometheus and promtool for tests/cleaner_prometheus.rs. Debian's package also
# starts a service where systemd runs; the test only uses the binaries, with its
# own config, data dir and loopback port.
command -v prometheus >/dev/null 2>&1 || need_apt+=(prometheus)
# etcd for the cluster's tests (tests/cluster): the binary only, started by
# the tests on loopback ports with their own data dirs.
command -v etcd >/dev/null 2>&1 || need_apt+=(etcd-server)
# A compose client for tests/ops_files.rs to validate docker/docker-compose.yml
# (`docker-compose config` needs no Docker engine).
if ! docker compose version >/dev/null 2>&1 && ! command -v docker-compose >/dev/null 2>&1; then
  need_apt+=(docker-compose)
fi
if [ ${#need_apt[@]} -gt 0 ]; then
  echo "installing ${need_apt[*]}" >&2
  if [ "$(id -u)" = 0 ]; then
    apt-get update -qq && apt-get install -y -qq "${need_apt[@]}" >/dev/null
  else
    sudo apt-get update -qq && sudo apt-get install -y -qq "${need_apt[@]}" >/dev/null
  fi
fi

# Python clients for the interop suite, in a venv under target/ (pinned).
scripts/python-env.sh >/dev/null

# Apache Kafka 4.1.2's jars (kafka-dump-log and the CLI tools), cached in
# target/, and the newest release's, which the conformance tests compare with too.
scripts/kafka-jars.sh >/dev/null
scripts/kafka-jars.sh 4.4.0 >/dev/null

# Formatting and lints are part of the suite: rustfmt.toml and clippy.toml
# (functions of at most 100 lines) hold for every target.
for component in rustfmt clippy; do
  if ! cargo "${component/rustfmt/fmt}" --version >/dev/null 2>&1; then
    rustup component add "$component"
  fi
done
echo "cargo fmt --check" >&2
cargo fmt --check
echo "cargo clippy --all-targets -- -D warnings" >&2
cargo clippy --locked --all-targets -- -D warnings

# The import graph between src/'s top-level modules, printed; a cycle fails.
echo "cargo test --test ops module_graph" >&2
cargo test --locked --test ops module_graph -- --nocapture

# Every binary runs even when an earlier one fails, so one run shows every
# failure.
cargo test --locked --no-fail-fast "$@"
