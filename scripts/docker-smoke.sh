#!/usr/bin/env bash
# Runs the Dockerfile's build and start commands outside Docker (for machines
# without a Docker engine) and checks that the broker answers Kafka clients
# and serves its metrics. The commands are read from the Dockerfile, not
# copied here, so a change there is what this script runs.
#
#   scripts/docker-smoke.sh                # build: the build stage's last RUN (the
#                                          # `cargo build --release --locked` whose output
#                                          # the runtime stage copies), run in the repo root,
#                                          # so an existing target/release is reused
#   scripts/docker-smoke.sh --full-build   # every step of the build stage in order (COPY as
#                                          # copies, RUN as commands) in target/docker-smoke/src,
#                                          # as `docker build` does; slow the first time
#   scripts/docker-smoke.sh --binary PATH  # no build: PATH stands in for the image's binary
#                                          # (tests/ops_files.rs passes the debug build)
#
# Start: the runtime stage's COPY'd files are laid out under a temporary root,
# and ENTRYPOINT + CMD run with the image's ENV and WORKDIR (absolute paths
# that the image COPYs are moved under that root), the image's config
# (config/docker.toml), and, as `docker run -e SEDIMENT_OVERRIDES=...` would
# set them, a temporary data dir and loopback listeners on free ports.
# Not emulated: USER (runs as the invoking user) and the runtime stage's RUN
# (useradd, mkdir, chown).
#
# Checks: the HEALTHCHECK command passes; kcat (when installed) lists the
# broker, and a record produced with it is consumed back; /metrics serves the
# cleaner gauges and /cleaner-status JSON; STOPSIGNAL stops the broker
# cleanly (exit 0, clean-shutdown marker written). Exits non-zero on any failure.
set -euo pipefail
cd "$(dirname "$0")/.."
repo=$(pwd)

mode=build
binary=
while [ $# -gt 0 ]; do
  case "$1" in
    --full-build) mode=full ;;
    --binary) mode=binary; binary=$(realpath "$2"); shift ;;
    -h|--help) sed -n '2,/^set -euo/p' "$0" | sed '$d'; exit 0 ;;
    *) echo "unknown argument: $1 (see --help)" >&2; exit 2 ;;
  esac
  shift
done

# GET a URL (python3: needed anyway; curl may be absent).
http_get() { python3 -c 'import sys, urllib.request; sys.stdout.write(urllib.request.urlopen(sys.argv[1], timeout=30).read().decode())' "$1"; }
fail() { echo "docker-smoke: FAIL: $*" >&2; exit 1; }
say() { echo "docker-smoke: $*" >&2; }

# --- Read the Dockerfile -------------------------------------------------------
# Emits shell assignments: the build stage's steps, the runtime stage's COPYs,
# ENV, WORKDIR, ENTRYPOINT, CMD, HEALTHCHECK and STOPSIGNAL.
parsed=$(python3 - Dockerfile <<'PY'
import json, shlex, sys

lines, cur = [], ""
for raw in open(sys.argv[1]):
    s = raw.rstrip("\n")
    if not cur and (not s.strip() or s.lstrip().startswith("#")):
        continue
    if s.rstrip().endswith("\\"):
        cur += s.rstrip()[:-1] + " "
        continue
    cur += s
    lines.append(cur.strip())
    cur = ""

stages = []
for line in lines:
    word, _, rest = line.partition(" ")
    word = word.upper()
    if word == "FROM":
        parts = rest.split()
        stages.append({"name": parts[2] if len(parts) > 2 and parts[1].upper() == "AS" else None, "steps": []})
    else:
        stages[-1]["steps"].append((word, rest.strip()))

def exec_form(text):
    text = text.strip()
    return json.loads(text) if text.startswith("[") else ["/bin/sh", "-c", text]

build = next(s for s in stages if s["name"] == "build")
runtime = stages[-1]
out = []
def emit(name, value):
    out.append(f"{name}={shlex.quote(value)}")

# The build stage as a list of steps: WORKDIR dir / COPY src... dest / RUN cmd.
steps = []
for word, rest in build["steps"]:
    if word in ("WORKDIR", "COPY", "RUN"):
        steps.append(f"{word} {rest}")
emit("build_steps", "\n".join(steps))
runs = [rest for word, rest in build["steps"] if word == "RUN"]
emit("build_command", runs[-1])

copies, env, workdir, entrypoint, cmd, health, stopsignal = [], [], "/", [], [], [], "SIGTERM"
for word, rest in runtime["steps"]:
    if word == "COPY":
        args = rest.split()
        src_from = None
        if args[0].startswith("--from="):
            src_from = args[0].split("=", 1)[1]
            args = args[1:]
        copies.append(f"{src_from or '-'} {args[0]} {args[1]}")
    elif word == "ENV":
        key, _, value = rest.partition("=")
        env.append(f"{key}={value}")
    elif word == "WORKDIR":
        workdir = rest
    elif word == "ENTRYPOINT":
        entrypoint = exec_form(rest)
    elif word == "CMD":
        cmd = exec_form(rest)
    elif word == "HEALTHCHECK":
        _, _, c = rest.partition(" CMD ")
        health = exec_form(c)
    elif word == "STOPSIGNAL":
        stopsignal = rest
emit("runtime_copies", "\n".join(copies))
emit("runtime_env", "\n".join(env))
emit("runtime_workdir", workdir)
emit("start_command", " ".join(shlex.quote(a) for a in entrypoint + cmd))
emit("health_command", " ".join(shlex.quote(a) for a in health))
emit("stop_signal", stopsignal)
print("\n".join(out))
PY
)
eval "$parsed"
[ -n "$build_command" ] || fail "no RUN in the Dockerfile's build stage"
[ -n "$start_command" ] || fail "no ENTRYPOINT/CMD in the Dockerfile"
[ -n "$health_command" ] || fail "no HEALTHCHECK in the Dockerfile"

# --- Build ---------------------------------------------------------------------
build_root=$repo
case "$mode" in
  build)
    say "build (the Dockerfile's build command, in the repo root): $build_command"
    sh -c "$build_command" ;;
  full)
    build_root=$repo/target/docker-smoke/src
    mkdir -p "$build_root"
    say "full build of the build stage in $build_root"
    wd=$build_root
    while IFS= read -r step; do
      word=${step%% *}; rest=${step#* }
      case "$word" in
        WORKDIR) wd=$build_root ;;  # the build stage's WORKDIR is the scratch root
        COPY)
          read -r -a args <<<"$rest"
          dest=${args[-1]}; unset 'args[-1]'
          say "COPY ${args[*]} $dest"
          for src in "${args[@]}"; do
            if [ -d "$repo/$src" ]; then
              rm -rf "${wd:?}/$dest"; mkdir -p "$wd/$dest"; cp -a "$repo/$src/." "$wd/$dest/"
            else
              mkdir -p "$wd/$(dirname "$dest")"; cp -a "$repo/$src" "$wd/$dest"
            fi
          done ;;
        RUN)
          say "RUN $rest"
          (cd "$wd" && sh -c "$rest") ;;
      esac
    done <<<"$build_steps"
    build_root=$wd ;;
  binary)
    say "no build: $binary stands in for the image's binary (the Dockerfile's build command is: $build_command)" ;;
esac

# --- Lay out the image's files -------------------------------------------------
root=$(mktemp -d "${TMPDIR:-/tmp}/sediment-docker-smoke.XXXXXX")
pid=
cleanup() {
  if [ -n "$pid" ] && kill -0 "$pid" 2>/dev/null; then kill -KILL "$pid" 2>/dev/null || true; fi
  rm -rf "$root"
}
trap cleanup EXIT
copied_paths=()
while read -r from src dest; do
  [ -n "$src" ] || continue
  if [ "$from" = build ]; then
    # /src/... of the build stage = its WORKDIR
    path=${src#/src/}
    if [ "$mode" = binary ]; then source_file=$binary; else source_file=$build_root/$path; fi
  else
    source_file=$repo/$src
  fi
  [ -e "$source_file" ] || fail "COPY source $source_file is missing"
  mkdir -p "$root$(dirname "$dest")"
  if [ "$mode" = binary ] && [ "$from" = build ]; then ln -s "$source_file" "$root$dest"; else cp -a "$source_file" "$root$dest"; fi
  copied_paths+=("$dest")
done <<<"$runtime_copies"

# Absolute paths the image has (COPY destinations, WORKDIR) move under $root.
under_root() {
  local text=$1 p
  for p in "${copied_paths[@]}"; do text=${text//$p/$root$p}; done
  echo "$text"
}
mkdir -p "$root$runtime_workdir"

# --- Start -----------------------------------------------------------------------
data=$root/var/lib/sediment/data
log=$root/broker.log
env_args=()
while IFS= read -r kv; do
  [ -n "$kv" ] && env_args+=("$(under_root "$kv")")
done <<<"$runtime_env"
overrides="log.dirs=$data listeners=PLAINTEXT://127.0.0.1:0 metrics.listen=127.0.0.1:0"
start=$(under_root "$start_command")
say "start: $start_command"
say "  as: cd $root$runtime_workdir && env ${env_args[*]} SEDIMENT_OVERRIDES=\"$overrides\" $start"
(
  cd "$root$runtime_workdir"
  exec env "${env_args[@]}" SEDIMENT_OVERRIDES="$overrides" RUST_LOG=info sh -c "exec $start"
) 2>"$log" &
pid=$!

port= ; metrics_port=
for _ in $(seq 1 300); do
  kill -0 "$pid" 2>/dev/null || { cat "$log" >&2; fail "the broker exited at start"; }
  port=$(sed -n 's/.* listening=127\.0\.0\.1:\([0-9]*\).*/\1/p' "$log" | head -1)
  metrics_port=$(sed -n 's/.*metrics_listening=127\.0\.0\.1:\([0-9]*\).*/\1/p' "$log" | head -1)
  [ -n "$port" ] && [ -n "$metrics_port" ] && break
  sleep 0.1
done
[ -n "$port" ] && [ -n "$metrics_port" ] || { cat "$log" >&2; fail "the broker did not report its ports within 30 s"; }
say "broker on 127.0.0.1:$port, metrics on 127.0.0.1:$metrics_port"

# --- Checks -----------------------------------------------------------------------
# 1. The image's HEALTHCHECK, aimed at the port the broker got.
health=$(under_root "${health_command//127.0.0.1:9092/127.0.0.1:$port}")
say "healthcheck: $health"
sh -c "$health" >&2 || fail "HEALTHCHECK failed"

# 2. A Kafka client: metadata, then a record produced and consumed back.
if command -v kcat >/dev/null 2>&1; then
  meta=$(kcat -b "127.0.0.1:$port" -L -m 10) || fail "kcat -L failed"
  echo "$meta" | grep -q "broker 1 at 127.0.0.1:$port" || fail "kcat -L does not list the broker: $meta"
  echo "smoke-key:smoke-value" | kcat -b "127.0.0.1:$port" -P -t docker-smoke -K: -m 10 || fail "kcat produce failed"
  got=$(kcat -b "127.0.0.1:$port" -C -t docker-smoke -o beginning -c 1 -e -K: -m 10 -f '%k=%s\n') || fail "kcat consume failed"
  [ "$got" = "smoke-key=smoke-value" ] || fail "consumed '$got', produced smoke-key:smoke-value"
  say "kcat: metadata lists the broker; produced and consumed smoke-key=smoke-value"
else
  say "kcat not installed: the Kafka check is the HEALTHCHECK's ApiVersions round trip only"
fi

# 3. The metrics endpoint.
metrics=$(http_get "http://127.0.0.1:$metrics_port/metrics") || fail "GET /metrics failed"
for name in kafka_log_logcleanermanager_max_dirty_percent kafka_log_logcleaner_deadthreadcount sediment_log_dir_usable_bytes kafka_network_requestmetrics_requests_total; do
  echo "$metrics" | grep -q "^$name" || fail "/metrics has no $name"
done
status=$(http_get "http://127.0.0.1:$metrics_port/cleaner-status") || fail "GET /cleaner-status failed"
echo "$status" | python3 -c 'import json,sys; d=json.load(sys.stdin); assert "manager" in d and "threads" in d' || fail "/cleaner-status is not the cleaner's JSON: $status"
say "metrics: /metrics and /cleaner-status answer"

# 4. STOPSIGNAL: a clean shutdown.
kill -s "${stop_signal#SIG}" "$pid"
code=0
for _ in $(seq 1 300); do kill -0 "$pid" 2>/dev/null || break; sleep 0.1; done
kill -0 "$pid" 2>/dev/null && fail "the broker did not stop within 30 s of $stop_signal"
wait "$pid" || code=$?
pid=
[ "$code" = 0 ] || { cat "$log" >&2; fail "the broker exited with $code after $stop_signal"; }
[ -e "$data/.kafka_cleanshutdown" ] || fail "no clean-shutdown marker in $data"
say "$stop_signal: exit 0, clean-shutdown marker written"
echo "docker-smoke: OK"
