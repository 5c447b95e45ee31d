"""Driver of bench/remote-read.sh: remote (tiered storage) reads against local
reads of the same bytes, on one sediment broker and moto's S3 server, both on
loopback. Run by bench/remote-read.sh with target/pyenv's python (boto3 and
confluent-kafka come from there); reads and writes go through Apache Kafka's
ProducerPerformance and ConsumerPerformance, as bench/bench.py's do.

Phases, in order:
  produce   N MB of 1 KiB records to `remote` (remote.storage.enable, small
            local.retention.bytes) and to `local` (no remote storage), then
            wait until local retention has left only the newest segments of
            `remote` on disk (sediment_remote_partition_store_only_bytes).
  restart   the broker: its remote-cache directory is emptied at start.
  local     ConsumerPerformance reads `local` from the beginning (the page
            cache holds it: it was just written).
  cold      reads `remote`: every store-only segment is downloaded.
  warm      reads `remote` again: the cache (sized above N) holds them.
  raw GET   boto3 GETs every object under the partition's segments/ prefix
            in turn: moto's own rate, the ceiling of the cold read.
Each read records the broker's CPU seconds (utime+stime of /proc/<pid>/stat),
its peak RSS (VmHWM after /proc/<pid>/clear_refs 5, else sampled VmRSS), and
moto's CPU seconds, and the cache's hit/miss counters.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import shutil
import signal
import socket
import statistics
import subprocess
import sys
import threading
import time
import urllib.request
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
CLK_TCK = os.sysconf("SC_CLK_TCK")
CREDS = {"AWS_ACCESS_KEY_ID": "bench", "AWS_SECRET_ACCESS_KEY": "bench", "AWS_REGION": "us-east-1"}
BUCKET = "bench-remote"
PREFIX = "cluster"


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def wait_until(secs: float, what: str, f):
    deadline = time.monotonic() + secs
    while True:
        v = f()
        if v:
            return v
        if time.monotonic() > deadline:
            raise RuntimeError(f"timed out after {secs:.0f} s waiting for {what}")
        time.sleep(0.2)


def cpu_seconds(pid: int) -> float:
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / CLK_TCK


def status_kb(pid: int, key: str) -> int:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith(key + ":"):
            return int(line.split()[1])
    return 0


class Usage:
    """CPU seconds and peak RSS of a process over a `with` block."""

    def __init__(self, pid: int):
        self.pid = pid

    def __enter__(self):
        try:
            Path(f"/proc/{self.pid}/clear_refs").write_text("5")
            self.hwm_reset = True
        except OSError:
            self.hwm_reset = False
        self.peak_kb = status_kb(self.pid, "VmRSS")
        self.stop = threading.Event()
        self.sampler = threading.Thread(target=self._sample, daemon=True)
        self.sampler.start()
        self.cpu0 = cpu_seconds(self.pid)
        return self

    def _sample(self):
        while not self.stop.wait(0.05):
            try:
                self.peak_kb = max(self.peak_kb, status_kb(self.pid, "VmRSS"))
            except OSError:
                return

    def __exit__(self, *exc):
        self.cpu = cpu_seconds(self.pid) - self.cpu0
        self.stop.set()
        self.sampler.join()
        if self.hwm_reset:
            self.peak_kb = max(self.peak_kb, status_kb(self.pid, "VmHWM"))
        return False


class Java:
    def __init__(self, jars: Path, work: Path):
        self.jars, self.work = jars, work

    def run(self, main: str, args: list[str], name: str, timeout: float = 1800) -> str:
        cmd = ["java", "-Xmx1g", "-Djava.awt.headless=true",
               f"-Dlog4j2.configurationFile={ROOT}/tools/kafka-jars/log4j2.properties",
               "-cp", f"{self.jars}/*", main, *args]
        with open(self.work / f"{name}.stderr", "w") as err:
            p = subprocess.run(cmd, stdout=subprocess.PIPE, stderr=err, text=True, timeout=timeout)
        (self.work / f"{name}.stdout").write_text(p.stdout)
        if p.returncode != 0:
            tail = (self.work / f"{name}.stderr").read_text()[-3000:]
            raise RuntimeError(f"{main} exited {p.returncode}:\n{tail}")
        return p.stdout


PRODUCER_RE = re.compile(r"(\d+) records sent, ([\d.]+) records/sec \(([\d.]+) MB/sec\)")


def produce(java: Java, bootstrap: str, topic: str, records: int) -> float:
    out = java.run("org.apache.kafka.tools.ProducerPerformance",
                   ["--topic", topic, "--num-records", str(records), "--record-size", "1024",
                    "--throughput", "-1", "--producer-props", f"bootstrap.servers={bootstrap}", "acks=all",
                    "linger.ms=10", "batch.size=262144"], f"produce-{topic}")
    m = None
    for line in out.splitlines():
        m = PRODUCER_RE.search(line) or m
    if not m:
        raise RuntimeError(f"no summary in ProducerPerformance output:\n{out[-2000:]}")
    return float(m.group(3))


def consume(java: Java, bootstrap: str, topic: str, records: int, name: str) -> dict:
    out = java.run("org.apache.kafka.tools.ConsumerPerformance",
                   ["--bootstrap-server", bootstrap, "--topic", topic, "--messages", str(records),
                    "--group", f"bench-{name}-{time.time_ns()}", "--timeout", "120000"], name)
    lines = [line for line in out.splitlines() if line.strip()]
    header = next(i for i, line in enumerate(lines) if line.startswith("start.time"))
    row = dict(zip([k.strip() for k in lines[header].split(",")],
                   [v.strip() for v in lines[header + 1].split(",")]))
    got = int(row["data.consumed.in.nMsg"])
    if got < records:
        raise RuntimeError(f"{name}: ConsumerPerformance read {got} of {records} records")
    return {"mb": float(row["data.consumed.in.MB"]), "mb_per_s": float(row["MB.sec"]),
            "fetch_ms": float(row["fetch.time.ms"]), "fetch_mb_per_s": float(row["fetch.MB.sec"]),
            "rebalance_ms": float(row["rebalance.time.ms"]), "records": got}


class Broker:
    def __init__(self, bin_: str, work: Path, overrides: list[str]):
        self.bin, self.work, self.overrides = bin_, work, overrides
        self.port, self.metrics_port = free_port(), free_port()
        self.proc = None
        self.starts = 0

    @property
    def bootstrap(self) -> str:
        return f"127.0.0.1:{self.port}"

    def start(self):
        args = [self.bin, "serve", "--override", f"listeners=PLAINTEXT://{self.bootstrap}",
                "--override", f"log.dirs={self.work / 'data'}",
                "--override", f"metrics.listen=127.0.0.1:{self.metrics_port}"]
        for o in self.overrides:
            args += ["--override", o]
        self.starts += 1
        log = open(self.work / f"broker-{self.starts}.log", "w")
        self.proc = subprocess.Popen(args, stdout=log, stderr=subprocess.STDOUT, env={**os.environ, **CREDS})
        wait_until(60, "the broker to answer", lambda: self.proc.poll() is None and subprocess.run(
            [self.bin, "health", "--bootstrap-server", self.bootstrap],
            capture_output=True).returncode == 0 or self._dead())

    def _dead(self):
        if self.proc.poll() is not None:
            raise RuntimeError(f"broker exited {self.proc.returncode}; see {self.work}/broker-{self.starts}.log")
        return False

    def stop(self):
        if self.proc and self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(60)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()

    def metrics(self) -> dict[str, float]:
        text = urllib.request.urlopen(f"http://127.0.0.1:{self.metrics_port}/metrics", timeout=10).read().decode()
        out = {}
        for line in text.splitlines():
            if line and not line.startswith("#"):
                name, _, value = line.rpartition(" ")
                out[name] = float(value)
        return out


def start_moto(python: str, work: Path):
    port = free_port()
    moto_bin = str(Path(python).parent / "moto_server")
    log = open(work / "moto.log", "w")
    proc = subprocess.Popen([moto_bin, "-H", "127.0.0.1", "-p", str(port)], stdout=log, stderr=subprocess.STDOUT)

    def up():
        try:
            socket.create_connection(("127.0.0.1", port), timeout=1).close()
            return True
        except OSError:
            if proc.poll() is not None:
                raise RuntimeError(f"moto_server exited {proc.returncode}; see {work}/moto.log")
            return False
    wait_until(60, "moto to listen", up)
    # moto accepts an unsigned PUT for a bucket.
    req = urllib.request.Request(f"http://127.0.0.1:{port}/{BUCKET}", method="PUT", data=b"")
    urllib.request.urlopen(req, timeout=10).read()
    return proc, port


def raw_get(endpoint: str, prefix: str, below: int) -> dict:
    """GET every object under `prefix` of a segment whose base offset is below
    `below` (`<base>-<crc32c>-<size>.<ext>`): the objects the cold read downloads."""
    import boto3
    s3 = boto3.client("s3", endpoint_url=endpoint, region_name=CREDS["AWS_REGION"],
                      aws_access_key_id=CREDS["AWS_ACCESS_KEY_ID"], aws_secret_access_key=CREDS["AWS_SECRET_ACCESS_KEY"])
    keys = []
    for page in s3.get_paginator("list_objects_v2").paginate(Bucket=BUCKET, Prefix=prefix):
        keys += [(o["Key"], o["Size"]) for o in page.get("Contents", [])
                 if int(o["Key"].rsplit("/", 1)[1].split("-", 1)[0]) < below]
    start = time.monotonic()
    total = 0
    for key, _ in keys:
        body = s3.get_object(Bucket=BUCKET, Key=key)["Body"]
        while chunk := body.read(1 << 20):
            total += len(chunk)
    secs = time.monotonic() - start
    return {"objects": len(keys), "bytes": total, "seconds": secs, "mb_per_s": total / 2**20 / secs}


def median_of(runs: list[dict]) -> dict:
    """Field by field median of numeric fields (the others from the first run)."""
    out = dict(runs[0])
    for k, v in runs[0].items():
        if isinstance(v, (int, float)) and not isinstance(v, bool):
            out[k] = statistics.median(r[k] for r in runs)
    return out


def loadavg() -> str:
    return Path("/proc/loadavg").read_text().split()[0]


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--bin", required=True)
    ap.add_argument("--jars", type=Path, required=True)
    ap.add_argument("--python", required=True)
    ap.add_argument("--work", type=Path, required=True)
    ap.add_argument("--out", type=Path, required=True)
    ap.add_argument("--commit", default="unknown")
    ap.add_argument("--mb", type=int, default=512)
    ap.add_argument("--segment-mb", type=int, default=16)
    ap.add_argument("--label", default="")
    ap.add_argument("--rounds", type=int, default=3)
    a = ap.parse_args()

    a.work.mkdir(parents=True, exist_ok=True)
    java = Java(a.jars, a.work)
    records = a.mb * 1024
    seg = a.segment_mb << 20
    moto, moto_port = start_moto(a.python, a.work)
    endpoint = f"http://127.0.0.1:{moto_port}"
    overrides = [
        "remote.log.storage.system.enable=true",
        f"sediment.remote.storage.url=s3://{BUCKET}/{PREFIX}",
        f"sediment.remote.storage.endpoint={endpoint}",
        "sediment.remote.storage.upload.interval.ms=200",
        f"sediment.remote.storage.cache.bytes={2 * a.mb << 20}",
        "log.retention.check.interval.ms=500",
        "log.cleaner.enable=false",
    ]
    broker = Broker(a.bin, a.work, overrides)
    result: dict = {"bin": os.path.relpath(a.bin, ROOT) if a.bin.startswith(str(ROOT)) else a.bin, "mb": a.mb, "segment_mb": a.segment_mb, "commit": a.commit, "reads": {}}
    try:
        broker.start()
        from confluent_kafka.admin import AdminClient, NewTopic
        admin = AdminClient({"bootstrap.servers": broker.bootstrap})
        common = {"segment.bytes": str(seg), "retention.ms": "-1", "retention.bytes": "-1"}
        remote_cfg = {**common, "remote.storage.enable": "true", "local.retention.bytes": str(seg)}
        for f in admin.create_topics([NewTopic("remote", 1, 1, config=remote_cfg),
                                      NewTopic("local", 1, 1, config=common)]).values():
            f.result()
        del admin  # its idle connection would log the broker's restart
        print(f"remote-read: producing {a.mb} MB to each topic", file=sys.stderr)
        result["produce_mb_per_s"] = {t: produce(java, broker.bootstrap, t, records) for t in ("remote", "local")}

        label = '{partition="0",topic="remote"}'
        log_bytes = sum(p.stat().st_size for p in (a.work / "data" / "local-0").glob("*.log"))

        def store_only():
            m = broker.metrics()
            v = m.get(f"sediment_remote_partition_store_only_bytes{label}", 0)
            local = sorted((a.work / "data" / "remote-0").glob("*.log"))
            return v if v >= log_bytes - 2 * seg and len(local) <= 2 else None
        t0 = time.monotonic()
        result["store_only_bytes"] = int(wait_until(1200, "local retention to leave 2 segments of remote-0", store_only))
        result["tiering_wait_s"] = time.monotonic() - t0
        result["log_bytes"] = log_bytes
        print(f"remote-read: {result['store_only_bytes'] / 2**20:.0f} MB store-only after "
              f"{result['tiering_wait_s']:.0f} s", file=sys.stderr)

        local_start = min(int(p.stem) for p in (a.work / "data" / "remote-0").glob("*.log"))
        result["local_start_offset"] = local_start
        result["rounds"] = []
        for i in range(a.rounds):
            rnd: dict = {"reads": {}}
            print(f"remote-read: round {i + 1} of {a.rounds}", file=sys.stderr)
            broker.stop()
            broker.start()  # empties remote-cache
            for name, topic in (("local", "local"), ("remote-cold", "remote"), ("remote-warm", "remote")):
                before = broker.metrics()
                load = loadavg()
                with Usage(broker.proc.pid) as bu, Usage(moto.pid) as mu:
                    r = consume(java, broker.bootstrap, topic, records, name)
                after = broker.metrics()
                r.update({
                    "broker_cpu_s": bu.cpu, "broker_peak_rss_mb": bu.peak_kb / 1024, "rss_from_hwm": bu.hwm_reset,
                    "moto_cpu_s": mu.cpu, "load_before": load,
                    "cache_hits": after.get("sediment_remote_cache_hits_total", 0) - before.get("sediment_remote_cache_hits_total", 0),
                    "cache_misses": after.get("sediment_remote_cache_misses_total", 0) - before.get("sediment_remote_cache_misses_total", 0),
                })
                rnd["reads"][name] = r
                print(f"remote-read: {name}: {r['fetch_mb_per_s']:.1f} MB/s", file=sys.stderr)
            with Usage(moto.pid) as mu:
                raw = raw_get(endpoint, f"{PREFIX}/topics/remote-0/segments/", local_start)
            raw["moto_cpu_s"] = mu.cpu
            rnd["raw_get"] = raw
            print(f"remote-read: raw GET {raw['mb_per_s']:.1f} MB/s", file=sys.stderr)
            result["rounds"].append(rnd)
        result["reads"] = {n: median_of([r["reads"][n] for r in result["rounds"]]) for n in result["rounds"][0]["reads"]}
        result["raw_get"] = median_of([r["raw_get"] for r in result["rounds"]])
    finally:
        broker.stop()
        moto.terminate()
        moto.wait()

    a.out.with_suffix(".json").write_text(json.dumps(result, indent=2))
    report = render(result, a.label)
    a.out.write_text(report)
    print(report)
    shutil.rmtree(a.work / "data", ignore_errors=True)
    return 0


def render(r: dict, label: str) -> str:
    reads = r["reads"]
    local = reads["local"]

    def ratio(x: float, y: float) -> str:
        return f"{x / y:.2f}×" if y else "n/a"
    lines = [
        f"# sediment tiered storage: remote reads vs local reads{' (' + label + ')' if label else ''}",
        "",
        f"Commit {r['commit']}, {time.strftime('%Y-%m-%d %H:%M UTC', time.gmtime())}. Machine shared with builds "
        "(2 cores; other cargo builds ran during this run): the figures are indicative, the ratios "
        "(all from the same run) more so than the rates.",
        "",
        f"One sediment broker (`{r['bin']}`) and moto's S3 server (Python, one process) on loopback. "
        f"{r['mb']} MB of 1 KiB records (ProducerPerformance, acks=all) to each of two 1-partition topics "
        f"with {r['segment_mb']} MiB segments: `remote` (remote.storage.enable, local.retention.bytes = one "
        f"segment) and `local`. After the upload and local retention, {r['store_only_bytes'] / 2**20:.0f} of "
        f"{r['log_bytes'] / 2**20:.0f} MiB of `remote` were in the store only (the rest, the newest "
        f"segments, local). The broker was then restarted (its remote-cache emptied) and each topic read from "
        "the beginning by ConsumerPerformance (one consumer, default fetch sizes); MB/s is ConsumerPerformance's "
        f"fetch.MB.sec (group join excluded). {len(r['rounds'])} rounds (restart, local, cold, warm, raw GET); "
        "the table shows each column's median, every round's rates follow.",
        "",
        "| read | MB | fetch MB/s | vs local | wall MB/s | broker CPU s | broker CPU s/GB | broker peak RSS MB | moto CPU s | cache misses / hits |",
        "|---|---|---|---|---|---|---|---|---|---|",
    ]
    for name, x in reads.items():
        lines.append(
            f"| {name} | {x['mb']:.0f} | {x['fetch_mb_per_s']:.1f} | {ratio(x['fetch_mb_per_s'], local['fetch_mb_per_s'])} "
            f"| {x['mb_per_s']:.1f} | {x['broker_cpu_s']:.2f} | {x['broker_cpu_s'] / (x['mb'] / 1024):.2f} "
            f"| {x['broker_peak_rss_mb']:.0f} | {x['moto_cpu_s']:.2f} | {x['cache_misses']:.0f} / {x['cache_hits']:.0f} |")
    lines += ["", "| round | local MB/s | remote-cold MB/s | remote-warm MB/s | raw GET MB/s | cold / local | warm / local |",
              "|---|---|---|---|---|---|---|"]
    for i, rnd in enumerate(r["rounds"]):
        x = {n: v["fetch_mb_per_s"] for n, v in rnd["reads"].items()}
        lines.append(f"| {i + 1} | {x['local']:.1f} | {x['remote-cold']:.1f} | {x['remote-warm']:.1f} | "
                     f"{rnd['raw_get']['mb_per_s']:.1f} | {ratio(x['remote-cold'], x['local'])} | {ratio(x['remote-warm'], x['local'])} |")
    raw = r["raw_get"]
    cold = reads["remote-cold"]
    lines += [
        "",
        f"moto's raw GET rate (boto3, one object after another, every object under the partition's "
        f"segments/ prefix of the segments below the local log start: {raw['objects']} objects, {raw['bytes'] / 2**20:.0f} MiB): "
        f"{raw['mb_per_s']:.1f} MB/s, moto CPU {raw['moto_cpu_s']:.2f} s. The cold read ran at "
        f"{ratio(cold['fetch_mb_per_s'], raw['mb_per_s'])} of it.",
        "",
        "Ratios of the medians: remote-cold / local "
        f"{ratio(cold['fetch_mb_per_s'], local['fetch_mb_per_s'])}, remote-warm / local "
        f"{ratio(reads['remote-warm']['fetch_mb_per_s'], local['fetch_mb_per_s'])}, remote-cold / raw GET "
        f"{ratio(cold['fetch_mb_per_s'], raw['mb_per_s'])}; broker CPU per GB cold / local "
        f"{ratio(cold['broker_cpu_s'] / cold['mb'], local['broker_cpu_s'] / local['mb'])}, warm / local "
        f"{ratio(reads['remote-warm']['broker_cpu_s'] / reads['remote-warm']['mb'], local['broker_cpu_s'] / local['mb'])}.",
        "",
        f"Produce: {r['produce_mb_per_s']['remote']:.1f} MB/s to `remote`, {r['produce_mb_per_s']['local']:.1f} "
        f"MB/s to `local`; upload and local retention done {r['tiering_wait_s']:.0f} s after the produce ended.",
        "",
        "A clean in the store against a local clean: bench/remote-clean.sh.",
        "",
    ]
    return "\n".join(lines)


if __name__ == "__main__":
    sys.exit(main())
