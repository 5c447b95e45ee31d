#!/usr/bin/env bash
# A local cluster to try (docs/design/multi-broker.md): one etcd and three
# sediment brokers on loopback, data and logs under target/cluster/.
#   scripts/cluster.sh up          start etcd (127.0.0.1:2379) and brokers 1-3
#                                  (127.0.0.1:9092-9094, metrics on 9404-9406)
#   scripts/cluster.sh status      who runs, the controller, each broker's leaders
#   scripts/cluster.sh kill N      SIGKILL broker N        start N: start it again
#                                  (or a new broker N, e.g. 4 on 127.0.0.1:9095, to
#                                  reassign partitions onto; status and down include it)
#   scripts/cluster.sh stop N      SIGSTOP broker N        cont N:  SIGCONT it
#   scripts/cluster.sh down        stop everything (data kept; `rm -r target/cluster` to forget it)
# Installs Debian's etcd-server if etcd is missing. Uses target/release/sediment
# (built if missing), or the binary named by SEDIMENT_BIN.
set -euo pipefail
cd "$(dirname "$0")/.."

root=target/cluster
bin="${SEDIMENT_BIN:-target/release/sediment}"
mkdir -p "$root"

need_etcd() {
  command -v etcd >/dev/null 2>&1 && return
  echo "installing etcd-server" >&2
  if [ "$(id -u)" = 0 ]; then
    apt-get update -qq && apt-get install -y -qq etcd-server >/dev/null
  else
    sudo apt-get update -qq && sudo apt-get install -y -qq etcd-server >/dev/null
  fi
}

need_bin() {
  [ -x "$bin" ] && return
  echo "building $bin (cargo build --release)" >&2
  cargo build --release --locked >/dev/null
}

running() { [ -f "$root/$1.pid" ] && kill -0 "$(cat "$root/$1.pid")" 2>/dev/null; }

# Brokers 1-3 and any other started with `start N`.
brokers() {
  { echo 1 2 3 | tr ' ' '\n'; ls "$root" 2>/dev/null | sed -n 's/^broker-\([0-9]*\)\.pid$/\1/p'; } | sort -nu
}

start_etcd() {
  running etcd && return
  # Kept from growing: history older than an hour is compacted.
  etcd --name sediment --data-dir "$root/etcd" \
    --listen-client-urls http://127.0.0.1:2379 --advertise-client-urls http://127.0.0.1:2379 \
    --listen-peer-urls http://127.0.0.1:2380 --initial-advertise-peer-urls http://127.0.0.1:2380 \
    --initial-cluster sediment=http://127.0.0.1:2380 \
    --auto-compaction-mode periodic --auto-compaction-retention 1h \
    >"$root/etcd.log" 2>&1 &
  echo $! >"$root/etcd.pid"
  for _ in $(seq 50); do
    etcdctl_ok && return
    sleep 0.1
  done
  echo "etcd did not start; see $root/etcd.log" >&2
  exit 1
}

etcdctl_ok() { (exec 3<>/dev/tcp/127.0.0.1/2379) 2>/dev/null; }

start_broker() {
  local n="$1"
  running "broker-$n" && return
  "$bin" serve \
    --override "node.id=$n" \
    --override "listeners=PLAINTEXT://127.0.0.1:909$((n + 1))" \
    --override "metrics.listen=127.0.0.1:940$((n + 3))" \
    --override "log.dirs=$root/broker-$n/data" \
    --override "sediment.cluster.etcd.endpoints=http://127.0.0.1:2379" \
    >"$root/broker-$n.log" 2>&1 &
  echo $! >"$root/broker-$n.pid"
}

signal() {
  local sig="$1" n="$2"
  running "broker-$n" || { echo "broker $n is not running" >&2; exit 1; }
  kill "-$sig" "$(cat "$root/broker-$n.pid")"
}

status() {
  running etcd && echo "etcd      running (127.0.0.1:2379)" || echo "etcd      stopped"
  for n in $(brokers); do
    if running "broker-$n"; then
      local m
      m="$(curl -fsS "http://127.0.0.1:940$((n + 3))/metrics" 2>/dev/null || true)"
      local ctl leaders
      ctl="$(sed -n 's/^kafka_controller_kafkacontroller_activecontrollercount //p' <<<"$m")"
      leaders="$(sed -n 's/^kafka_server_replicamanager_leadercount //p' <<<"$m")"
      echo "broker $n  running (127.0.0.1:909$((n + 1)))  controller=${ctl:-?} leaders=${leaders:-?}"
    else
      echo "broker $n  stopped"
    fi
  done
}

case "${1:-}" in
  up)
    need_etcd
    need_bin
    start_etcd
    for n in 1 2 3; do start_broker "$n"; done
    echo "bootstrap: 127.0.0.1:9092,127.0.0.1:9093,127.0.0.1:9094 (logs in $root/)"
    echo "try: scripts/kafka-tool.sh org.apache.kafka.tools.TopicCommand --bootstrap-server 127.0.0.1:9092 --create --topic t --partitions 3 --replication-factor 3 --config min.insync.replicas=2"
    ;;
  down)
    for n in $(brokers); do
      if running "broker-$n"; then
        kill -CONT "$(cat "$root/broker-$n.pid")" 2>/dev/null || true
        kill -TERM "$(cat "$root/broker-$n.pid")"
      fi
    done
    for n in $(brokers); do
      while running "broker-$n"; do sleep 0.1; done
      rm -f "$root/broker-$n.pid"
    done
    if running etcd; then kill -TERM "$(cat "$root/etcd.pid")"; fi
    rm -f "$root/etcd.pid"
    ;;
  status) status ;;
  kill) signal KILL "${2:?broker number}" ;;
  stop) signal STOP "${2:?broker number}" ;;
  cont) signal CONT "${2:?broker number}" ;;
  start) need_bin; start_broker "${2:?broker number}" ;;
  *)
    echo "usage: scripts/cluster.sh up | down | status | kill N | stop N | cont N | start N" >&2
    exit 2
    ;;
esac
