"""Driver of bench/remote-clean.sh: compaction in the store (the store cleaner,
src/remote/store_cleaner.rs) against a local clean of the same records, on one
sediment broker and moto's S3 server, both on loopback. Run by
bench/remote-clean.sh with target/pyenv's python (boto3 and confluent-kafka
come from there); the keyed records are written by BenchClient keyed-produce
(bench/BenchClient.java, Kafka's client jars), as bench/bench.py's compaction
phase writes them.

Each round makes two fresh 1-partition topics and writes the same records to
both (N MB of 1 KiB values over K keys, each key's versions in a new shuffled
order per pass over the keys, the same seed for both topics):
  local    cleanup.policy=delete, no remote storage: every closed segment on
           disk.
  remote   cleanup.policy=delete, remote.storage.enable, local.retention.bytes=1:
           once uploaded, every closed segment is in the store only (waited
           for: one segment on disk, the latest manifest ending at its base).
Then, one after the other (the order alternates between rounds), each topic
is altered to cleanup.policy=compact and the clean is timed from the alter's
answer:
  local    until the log dir's cleaner-offset-checkpoint has reached the
           active segment's base offset and no .cleaned/.swap file is left;
  remote   until the broker logs "segments in the store cleaned" for the
           partition (written right after the clean's manifest, the one with
           store_clean_offset); the manifest is then read with boto3.
Over each window: the broker's CPU seconds (utime+stime of /proc/<pid>/stat),
/proc/<pid>/io, peak RSS (VmHWM after clear_refs 5), moto's CPU seconds, the
requests moto logged, and the CPU everything else on the machine used (noise).
Afterwards (untimed) each topic is read back from the beginning by BenchClient
verify: records below the clean point against distinct keys.
After the last round the script waits --settle-s and counts every clean the
broker logged per topic: a store clean that repeats shows there.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import statistics
import subprocess
import sys
import time
from pathlib import Path

sys.dont_write_bytecode = True  # no bench/__pycache__ from the imports below
sys.path.insert(0, str(Path(__file__).resolve().parent))
from bench import (IO_FIELDS, Tools, in_progress_files, machine_busy_seconds, proc_io,  # noqa: E402
                   read_cleaner_checkpoint, reset_peak_rss, segments, status_kb, wait_quiet)
from remote_read import BUCKET, CREDS, PREFIX, Broker, cpu_seconds, start_moto, wait_until  # noqa: E402

ROOT = Path(__file__).resolve().parent.parent
MB = 1 << 20
STORE_CLEAN = "segments in the store cleaned"


def cache_disk_bytes(pid: int, cache_dir: Path) -> int:
    """Disk the read cache takes now: its files, and those deleted (evicted)
    but still open in the broker (their blocks stay until closed)."""
    blocks: dict[tuple[int, int], int] = {}
    for root, _, files in os.walk(cache_dir):
        for f in files:
            try:
                st = os.stat(os.path.join(root, f))
            except OSError:
                continue
            blocks[(st.st_dev, st.st_ino)] = st.st_blocks * 512
    fds = Path(f"/proc/{pid}/fd")
    for fd in fds.iterdir() if fds.exists() else []:
        try:
            if os.readlink(fd).startswith(str(cache_dir)):
                st = os.stat(fd)
                blocks[(st.st_dev, st.st_ino)] = st.st_blocks * 512
        except OSError:
            continue
    return sum(blocks.values())


def log(msg: str) -> None:
    print(f"[{time.strftime('%H:%M:%S')}] remote-clean: {msg}", file=sys.stderr, flush=True)


class Window:
    """What the broker and moto used over a `with` block: CPU seconds,
    /proc/<pid>/io, the broker's peak RSS, and the machine's other CPU."""

    def __init__(self, broker_pid: int, moto_pid: int):
        self.bpid, self.mpid = broker_pid, moto_pid

    def __enter__(self):
        subprocess.run(["sync"], check=False)  # earlier writeback is not this window's
        reset_peak_rss(self.bpid)
        self.io0 = proc_io(self.bpid)
        self.bcpu0, self.mcpu0 = cpu_seconds(self.bpid), cpu_seconds(self.mpid)
        self.busy0 = machine_busy_seconds()
        self.t0 = time.monotonic()
        return self

    def __exit__(self, *exc):
        self.wall = time.monotonic() - self.t0
        self.broker_cpu = cpu_seconds(self.bpid) - self.bcpu0
        self.moto_cpu = cpu_seconds(self.mpid) - self.mcpu0
        self.other_cpu = max(0.0, machine_busy_seconds() - self.busy0 - self.broker_cpu - self.moto_cpu)
        self.peak_rss_mb = status_kb(self.bpid, "VmHWM") / 1024
        io = proc_io(self.bpid)
        self.io = {k: io[k] - self.io0[k] for k in IO_FIELDS}
        return False

    def as_dict(self) -> dict:
        return {"window_s": round(self.wall, 3), "broker_cpu_s": round(self.broker_cpu, 2),
                "moto_cpu_s": round(self.moto_cpu, 2), "other_cpu_s": round(self.other_cpu, 2),
                "broker_peak_rss_mb": round(self.peak_rss_mb, 1), **{f"io_{k}": v for k, v in self.io.items()}}


class LogTail:
    """New lines of a growing log file, from where the last call stopped."""

    def __init__(self, path: Path):
        self.path, self.pos, self.partial = path, path.stat().st_size, ""

    def lines(self) -> list[str]:
        with open(self.path, errors="replace") as f:
            f.seek(self.pos)
            chunk = f.read()
            self.pos = f.tell()
        text = self.partial + chunk
        *done, self.partial = text.split("\n")
        return done


KV_RE = re.compile(r"(\w+)=(\S+)")
ANSI_RE = re.compile(r"\x1b\[[0-9;]*m")


def fields(line: str) -> dict[str, str]:
    return dict(KV_RE.findall(ANSI_RE.sub("", line)))


def moto_requests(lines: list[str]) -> dict[str, int]:
    """Requests moto's werkzeug log shows, by method (and manifest reads)."""
    out: dict[str, int] = {}
    for line in lines:
        m = re.search(r'"(GET|PUT|POST|HEAD|DELETE) (\S+)', ANSI_RE.sub("", line))
        if m:
            kind = m.group(1) + (" manifest" if "/manifest/" in m.group(2) else "")
            out[kind] = out.get(kind, 0) + 1
    return out


class Store:
    """The bucket as boto3 sees it (moto, loopback)."""

    def __init__(self, endpoint: str):
        import boto3
        self.s3 = boto3.client("s3", endpoint_url=endpoint, region_name=CREDS["AWS_REGION"],
                               aws_access_key_id=CREDS["AWS_ACCESS_KEY_ID"],
                               aws_secret_access_key=CREDS["AWS_SECRET_ACCESS_KEY"])

    def objects(self, prefix: str) -> list[tuple[str, int]]:
        out = []
        for page in self.s3.get_paginator("list_objects_v2").paginate(Bucket=BUCKET, Prefix=prefix):
            out += [(o["Key"], o["Size"]) for o in page.get("Contents", [])]
        return out

    def latest_manifest(self, topic: str) -> tuple[int, dict] | None:
        keys = [k for k, _ in self.objects(f"{PREFIX}/topics/{topic}-0/manifest/") if k.endswith(".json")]
        if not keys:
            return None
        key = max(keys)
        body = self.s3.get_object(Bucket=BUCKET, Key=key)["Body"].read()
        return int(key.rsplit("/", 1)[1].split(".")[0]), json.loads(body)

    def manifest_history(self, topic: str) -> list[dict]:
        """Every manifest still in the bucket (none is swept during the run), oldest first."""
        out = []
        for key, _ in sorted(self.objects(f"{PREFIX}/topics/{topic}-0/manifest/")):
            m = json.loads(self.s3.get_object(Bucket=BUCKET, Key=key)["Body"].read())
            seq = int(key.rsplit("/", 1)[1].split(".")[0])
            out.append({**manifest_figures(seq, m), "written_at_ms": m["written_at_ms"],
                        "cleanup_policy": m["topic_config"].get("cleanup.policy"),
                        # [base, next, .log bytes] of each entry: what a manifest changed
                        "entries": [[e["base_offset"], e["next_offset"],
                                     sum(f["size"] for f in e["files"] if f["ext"] == "log")] for e in m["segments"]]})
        return out

    def segment_objects(self, topic: str) -> dict:
        objs = self.objects(f"{PREFIX}/topics/{topic}-0/segments/")
        return {"objects": len(objs), "bytes": sum(s for _, s in objs),
                "log_objects": sum(1 for k, _ in objs if k.endswith(".log"))}


def manifest_figures(seq: int, m: dict) -> dict:
    files = [f for s in m["segments"] for f in s["files"]]
    return {"seq": seq, "segments": len(m["segments"]), "objects": len(files),
            "bytes": sum(f["size"] for f in files), "log_bytes": sum(f["size"] for f in files if f["ext"] == "log"),
            # entries a clean left without records (next_offset == base_offset, 0-byte objects)
            "empty_segments": sum(1 for s in m["segments"] if s["next_offset"] == s["base_offset"]),
            "log_start_offset": m["log_start_offset"], "end_offset": m["end_offset"],
            "store_clean_offset": m.get("store_clean_offset")}


def local_figures(pdir: Path) -> dict:
    segs = segments(pdir)
    return {"segments": len(segs), "log_bytes": sum(sz for _, sz in segs),
            "closed_log_bytes": sum(sz for _, sz in segs[:-1]), "active_base": segs[-1][0] if segs else None}


def alter_compact(admin, topic: str) -> None:
    from confluent_kafka.admin import AlterConfigOpType, ConfigEntry, ConfigResource, ResourceType
    res = ConfigResource(ResourceType.TOPIC, topic, incremental_configs=[
        ConfigEntry("cleanup.policy", "compact", incremental_operation=AlterConfigOpType.SET)])
    for f in admin.incremental_alter_configs([res]).values():
        f.result()


class Bench:
    def __init__(self, a, broker: Broker, moto, store: Store, tools: Tools):
        self.a, self.broker, self.moto, self.store, self.tools = a, broker, moto, store, tools
        self.data = a.work / "data"
        from confluent_kafka.admin import AdminClient
        self.admin = AdminClient({"bootstrap.servers": broker.bootstrap})
        self.moto_log = LogTail(a.work / "moto.log")

    def broker_log(self) -> Path:
        return self.a.work / f"broker-{self.broker.starts}.log"

    def create(self, topic: str, remote: bool) -> None:
        from confluent_kafka.admin import NewTopic
        cfg = {"cleanup.policy": "delete", "segment.bytes": str(self.a.segment_mb * MB), "retention.ms": "-1",
               "retention.bytes": "-1", "min.cleanable.dirty.ratio": "0.5"}
        if remote:
            cfg.update({"remote.storage.enable": "true", "local.retention.bytes": "1"})
        for f in self.admin.create_topics([NewTopic(topic, 1, 1, config=cfg)]).values():
            f.result()

    def produce(self, topic: str) -> dict:
        out = self.tools.client(["keyed-produce", self.broker.bootstrap, topic, str(self.a.records), str(self.a.keys),
                                 "1024"], f"produce-{topic}")
        return {"records": int(out["records"]), "seconds": float(out["seconds"]), "mb_per_s": float(out["mb_per_sec"])}

    def wait_staged(self, topic: str) -> tuple[int, dict]:
        """Every closed segment in the store only: one segment on disk and the
        latest manifest ending at its base."""
        pdir = self.data / f"{topic}-0"

        def staged():
            segs = segments(pdir)
            got = self.store.latest_manifest(topic)
            if len(segs) == 1 and got and got[1]["end_offset"] == segs[0][0]:
                return got
            time.sleep(0.5)  # a boto3 LIST per poll is enough
            return None
        return wait_until(self.a.clean_timeout, f"every closed segment of {topic} in the store only", staged)

    def settle(self) -> float:
        return max(wait_quiet(self.broker.proc.pid), wait_quiet(self.moto.pid))

    def verify(self, topic: str, below: int) -> dict:
        v = self.tools.client(["verify", self.broker.bootstrap, topic, str(below)], f"verify-{topic}")
        v = {k: int(x) for k, x in v.items()}
        v["one_record_per_key"] = (v["records_below_checkpoint"] == v["distinct_keys_below_checkpoint"]
                                   and v["distinct_keys_total"] == self.a.keys)
        return v

    def clean_local(self, topic: str) -> dict:
        pdir = self.data / f"{topic}-0"
        c: dict = {"before": local_figures(pdir), "settle_s": self.settle()}
        active = c["before"]["active_base"]
        tail = LogTail(self.broker_log())
        self.moto_log.lines()
        with Window(self.broker.proc.pid, self.moto.pid) as w:
            alter_compact(self.admin, topic)
            t0 = time.monotonic()
            deadline = t0 + self.a.clean_timeout

            def cleaned():
                if self.broker.proc.poll() is not None:
                    raise RuntimeError(f"the broker exited {self.broker.proc.returncode} while cleaning {topic}")
                cp = read_cleaner_checkpoint(self.data, topic, 0)
                return cp is not None and cp >= active and not in_progress_files(pdir)
            while not cleaned():
                if time.monotonic() > deadline:
                    raise RuntimeError(f"{topic} not cleaned within {self.a.clean_timeout} s: checkpoint "
                                       f"{read_cleaner_checkpoint(self.data, topic, 0)}, active base {active}")
                time.sleep(0.02)
            c["seconds"] = time.monotonic() - t0
        c.update(w.as_dict())
        c["moto_requests"] = moto_requests(self.moto_log.lines())
        c["after"] = local_figures(pdir)
        c["checkpoint"] = read_cleaner_checkpoint(self.data, topic, 0)
        lines = tail.lines()
        c["log_excerpt"] = cleaner_summary(lines, f"{topic}-0")
        c["input_bytes"] = c["before"]["closed_log_bytes"]
        c["removed_bytes"] = c["before"]["log_bytes"] - c["after"]["log_bytes"]
        c["verify"] = self.verify(topic, c["checkpoint"])
        return c

    def clean_remote(self, topic: str) -> dict:
        seq, m = self.store.latest_manifest(topic)
        c: dict = {"before": manifest_figures(seq, m), "bucket_before": self.store.segment_objects(topic),
                   "local_before": local_figures(self.data / f"{topic}-0")}
        metrics0 = self.broker.metrics()
        c["settle_s"] = self.settle()
        tail = LogTail(self.broker_log())
        self.moto_log.lines()
        part = f"{topic}-0"
        with Window(self.broker.proc.pid, self.moto.pid) as w:
            alter_compact(self.admin, topic)
            t0 = time.monotonic()
            deadline = t0 + self.a.clean_timeout
            seen: list[str] = []
            cache_dir = self.data / "remote-cache"
            peak_cache = 0
            while True:
                peak_cache = max(peak_cache, cache_disk_bytes(self.broker.proc.pid, cache_dir))
                new = tail.lines()
                seen += new
                hit = [ln for ln in new if STORE_CLEAN in ln and fields(ln).get("partition") == part]
                if hit:
                    break
                if self.broker.proc.poll() is not None:
                    raise RuntimeError(f"the broker exited {self.broker.proc.returncode} while cleaning {topic}")
                if time.monotonic() > deadline:
                    raise RuntimeError(f"no store clean of {part} logged within {self.a.clean_timeout} s")
                time.sleep(0.05)
            c["seconds"] = time.monotonic() - t0
        c.update(w.as_dict())
        c["cache_peak_bytes"] = peak_cache
        c["moto_requests"] = moto_requests(self.moto_log.lines())
        metrics1 = self.broker.metrics()
        for name in ("sediment_remote_upload_bytes_total", "sediment_remote_uploads_total",
                     "sediment_remote_cache_misses_total", "sediment_remote_cache_bytes",
                     "sediment_remote_store_errors_total"):
            c[name.removeprefix("sediment_remote_")] = (
                sum(v for k, v in metrics1.items() if k.split("{")[0] == name)
                - sum(v for k, v in metrics0.items() if k.split("{")[0] == name))
        c["log_line"] = ANSI_RE.sub("", hit[0])
        c["log_fields"] = fields(hit[0])
        seq, m = self.store.latest_manifest(topic)
        c["after"] = manifest_figures(seq, m)
        c["bucket_after"] = self.store.segment_objects(topic)
        c["input_bytes"] = c["before"]["log_bytes"]
        c["removed_bytes"] = c["before"]["log_bytes"] - c["after"]["log_bytes"]
        c["verify"] = self.verify(topic, c["after"]["store_clean_offset"] or 0)
        return c


def cleaner_summary(lines: list[str], part: str) -> list[str]:
    """The log cleaner's summary of `part`'s clean (a line and its tab-indented
    continuation lines)."""
    out: list[str] = []
    for i, line in enumerate(lines):
        if f"cleaned log {part} " in line:
            out.append(ANSI_RE.sub("", line))
            out += [ANSI_RE.sub("", ln) for ln in lines[i + 1:i + 9] if ln.startswith("\t")]
    return out


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--bin", required=True)
    ap.add_argument("--jars", type=Path, required=True)
    ap.add_argument("--classes", type=Path, required=True)
    ap.add_argument("--python", required=True)
    ap.add_argument("--work", type=Path, required=True)
    ap.add_argument("--out", type=Path, required=True)
    ap.add_argument("--commit", default="unknown")
    ap.add_argument("--mb", type=int, default=256)
    ap.add_argument("--segment-mb", type=int, default=8)
    ap.add_argument("--keys", type=int, default=0, help="distinct keys (default: records / 4)")
    ap.add_argument("--rounds", type=int, default=2)
    ap.add_argument("--clean-timeout", type=float, default=300)
    ap.add_argument("--settle-s", type=float, default=15, help="wait after the last round before counting cleans")
    ap.add_argument("--cache-mb", type=int, default=0,
                    help="sediment.remote.storage.cache.bytes in MiB (default: 1 GiB or twice --mb)")
    ap.add_argument("--label", default="")
    a = ap.parse_args()
    a.records = a.mb * 1024
    a.keys = a.keys or a.records // 4

    a.work.mkdir(parents=True, exist_ok=True)
    tools = Tools(a.jars, a.classes, a.work)
    moto, moto_port = start_moto(a.python, a.work)
    endpoint = f"http://127.0.0.1:{moto_port}"
    overrides = [
        "remote.log.storage.system.enable=true",
        f"sediment.remote.storage.url=s3://{BUCKET}/{PREFIX}",
        f"sediment.remote.storage.endpoint={endpoint}",
        "sediment.remote.storage.upload.interval.ms=200",
        # No sweep during the run: the replaced objects stay, counted apart.
        "sediment.remote.storage.delete.delay.ms=3600000",
        f"sediment.remote.storage.cache.bytes={a.cache_mb * MB if a.cache_mb else max(1 << 30, 2 * a.mb * MB)}",
        "log.retention.check.interval.ms=500",
        "log.cleaner.enable=true",
        "log.cleaner.backoff.ms=100",
    ]
    broker = Broker(a.bin, a.work, overrides)
    result: dict = {"bin": os.path.relpath(a.bin, ROOT) if a.bin.startswith(str(ROOT)) else a.bin,
                    "mb": a.mb, "segment_mb": a.segment_mb, "cache_mb": a.cache_mb or max(1024, 2 * a.mb), "records": a.records, "keys": a.keys,
                    "commit": a.commit, "overrides": overrides, "rounds": []}
    try:
        broker.start()
        store = Store(endpoint)
        bench = Bench(a, broker, moto, store, tools)
        for i in range(1, a.rounds + 1):
            local, remote = f"clean-local-r{i}", f"clean-remote-r{i}"
            rnd: dict = {"order": ["local", "remote"] if i % 2 else ["remote", "local"]}
            bench.create(local, remote=False)
            bench.create(remote, remote=True)
            log(f"round {i} of {a.rounds}: {a.records} records over {a.keys} keys to {local} and {remote}")
            rnd["produce"] = {"local": bench.produce(local), "remote": bench.produce(remote)}
            t0 = time.monotonic()
            bench.wait_staged(remote)
            rnd["staging_wait_s"] = round(time.monotonic() - t0, 1)
            for kind in rnd["order"]:
                log(f"round {i}: {kind} clean")
                rnd[kind] = bench.clean_local(local) if kind == "local" else bench.clean_remote(remote)
                log(f"round {i}: {kind} clean {rnd[kind]['seconds']:.2f} s, broker CPU {rnd[kind]['broker_cpu_s']:.2f} s, "
                    f"moto CPU {rnd[kind]['moto_cpu_s']:.2f} s")
            result["rounds"].append(rnd)
        log(f"waiting {a.settle_s:g} s, then counting the cleans the broker logged")
        time.sleep(a.settle_s)
        result["settle_s"] = a.settle_s
        result["manifests"] = {f"clean-remote-r{i}": store.manifest_history(f"clean-remote-r{i}")
                               for i in range(1, a.rounds + 1)}
        result["cleans_logged"] = count_cleans(bench.broker_log(), a.rounds)
        result["warnings"] = [ANSI_RE.sub("", ln) for ln in bench.broker_log().read_text(errors="replace").splitlines()
                              if re.search(r"\b(WARN|ERROR)\b", ANSI_RE.sub("", ln))][:40]
        result["metrics_end"] = {k: v for k, v in broker.metrics().items() if k.startswith("sediment_remote_")
                                 and not k.startswith("sediment_remote_fetch_seconds")}
        del bench.admin  # its idle connection would log the broker's stop
    finally:
        broker.stop()
        moto.terminate()
        moto.wait()

    for kind in ("local", "remote"):
        result[kind] = medians([flat(r[kind]) for r in result["rounds"]])
    a.out.with_suffix(".json").write_text(json.dumps(result, indent=2))
    report = render(result, a.label)
    a.out.write_text(report)
    print(report)
    import shutil
    shutil.rmtree(a.work / "data", ignore_errors=True)
    return 0


def medians(runs: list[dict]) -> dict:
    """Figure by figure median over the rounds (figures every round has)."""
    return {k: statistics.median(r[k] for r in runs) for k in runs[0] if all(k in r for r in runs)}


def flat(c: dict) -> dict:
    """A clean's numeric figures, nested ones as `outer.inner`, for medians."""
    out = {}
    for k, v in c.items():
        if isinstance(v, dict):
            out.update({f"{k}.{ik}": iv for ik, iv in v.items()
                        if isinstance(iv, (int, float)) and not isinstance(iv, bool)})
        elif isinstance(v, (int, float)) and not isinstance(v, bool):
            out[k] = v
    return out


def count_cleans(path: Path, rounds: int) -> dict:
    text = ANSI_RE.sub("", path.read_text(errors="replace"))
    out = {}
    for i in range(1, rounds + 1):
        for kind in ("local", "remote"):
            part = f"clean-{kind}-r{i}-0"
            out[part] = {
                "store_cleans": [ln for ln in text.splitlines() if STORE_CLEAN in ln and f"partition={part} " in ln + " "],
                "local_cleans": len(re.findall(rf"cleaned log {re.escape(part)} ", text)),
            }
    return out


def render(r: dict, label: str) -> str:
    lo, re_ = r["local"], r["remote"]

    def ratio(x: float, y: float) -> str:
        return f"{x / y:.2f}×" if y else "n/a"

    def mib(b: float) -> str:
        return f"{b / MB:.1f}"
    rounds = r["rounds"]
    lines = [
        f"# sediment tiered storage: a clean in the store vs a local clean{' (' + label + ')' if label else ''}",
        "",
        f"Commit {r['commit']}, {time.strftime('%Y-%m-%d %H:%M UTC', time.gmtime())}. 2-core machine shared with "
        "other work: the figures are indicative, the ratios (both cleans in the same run, one after the other) "
        "more so than the rates.",
        "",
        f"One sediment broker (`{r['bin']}`, log.cleaner.backoff.ms=100, upload interval 200 ms, delete delay 1 h: no "
        f"sweep during the run) and moto's S3 server (Python, one process) on loopback. Each round writes the same "
        f"{r['records']} records (1 KiB values over {r['keys']} keys, ~{r['records'] / r['keys']:.0f} versions each; "
        f"BenchClient keyed-produce) to two fresh 1-partition topics with {r['segment_mb']} MiB segments, both "
        "cleanup.policy=delete: `local` (no remote storage) and `remote` (remote.storage.enable, "
        "local.retention.bytes=1, waited for until every closed segment is in the store only). Each is then altered "
        "to cleanup.policy=compact and timed from the alter's answer: local until the cleaner checkpoint reaches the "
        "active segment, remote until the broker logs `segments in the store cleaned` (after the manifest with "
        "store_clean_offset is written). The local log is in the page cache (just written); the store is moto's "
        f"memory. {len(rounds)} round(s), the order alternating; the table shows medians.",
        "",
        "| clean | input MiB | seconds | MiB/s | broker CPU s | moto CPU s | other CPU s | broker peak RSS MB "
        "| broker disk read / write MiB | broker rchar / wchar MiB | removed MiB |",
        "|---|---|---|---|---|---|---|---|---|---|---|",
    ]
    for name, x in (("local", lo), ("remote", re_)):
        lines.append(
            f"| {name} | {mib(x['input_bytes'])} | {x['seconds']:.2f} | {x['input_bytes'] / MB / x['seconds']:.1f} "
            f"| {x['broker_cpu_s']:.2f} | {x['moto_cpu_s']:.2f} | {x['other_cpu_s']:.2f} | {x['broker_peak_rss_mb']:.0f} "
            f"| {mib(x['io_read_bytes'])} / {mib(x['io_write_bytes'])} | {mib(x['io_rchar'])} / {mib(x['io_wchar'])} "
            f"| {mib(x['removed_bytes'])} |")
    lines += [
        "",
        "Ratios remote : local (medians): time "
        f"{ratio(re_['seconds'], lo['seconds'])}, broker CPU {ratio(re_['broker_cpu_s'], lo['broker_cpu_s'])}, "
        f"broker + moto CPU {ratio(re_['broker_cpu_s'] + re_['moto_cpu_s'], lo['broker_cpu_s'] + lo['moto_cpu_s'])}, "
        f"broker wchar {ratio(re_['io_wchar'], lo['io_wchar'])}, broker rchar {ratio(re_['io_rchar'], lo['io_rchar'])}.",
        "",
        "| round | order | local s | remote s | remote / local time | local CPU s | remote CPU s (broker + moto) "
        "| remote / local CPU | staging wait s |",
        "|---|---|---|---|---|---|---|---|---|",
    ]
    for i, rnd in enumerate(rounds, 1):
        lo_r, re_r = rnd["local"], rnd["remote"]
        lines.append(
            f"| {i} | {' then '.join(rnd['order'])} | {lo_r['seconds']:.2f} | {re_r['seconds']:.2f} "
            f"| {ratio(re_r['seconds'], lo_r['seconds'])} | {lo_r['broker_cpu_s']:.2f} "
            f"| {re_r['broker_cpu_s']:.2f} + {re_r['moto_cpu_s']:.2f} "
            f"| {ratio(re_r['broker_cpu_s'] + re_r['moto_cpu_s'], lo_r['broker_cpu_s'])} | {rnd['staging_wait_s']} |")
    last = rounds[-1]["remote"]
    b, a_ = last["before"], last["after"]
    lines += [
        "",
        f"The store, last round (`clean-remote-r{len(rounds)}-0`): the latest manifest went from seq {b['seq']} to "
        f"{a_['seq']}, {b['segments']} → {a_['segments']} segments, {b['objects']} → {a_['objects']} objects listed, "
        f"{mib(b['log_bytes'])} → {mib(a_['log_bytes'])} MiB of .log ({mib(b['bytes'])} → {mib(a_['bytes'])} MiB of all "
        f"files); store_clean_offset {a_['store_clean_offset']} (end offset {a_['end_offset']}). The bucket under "
        f"the partition's segments/ held {last['bucket_before']['objects']} objects ({mib(last['bucket_before']['bytes'])} "
        f"MiB) before and {last['bucket_after']['objects']} ({mib(last['bucket_after']['bytes'])} MiB) after: the "
        "replaced objects wait for the sweep. During the clean the broker uploaded "
        f"{mib(last['upload_bytes_total'])} MiB in {last['uploads_total']:.0f} files, its cache missed "
        f"{last['cache_misses_total']:.0f} times and grew by {mib(last['cache_bytes'])} MiB; moto logged "
        f"{', '.join(f'{n} {k}' for k, n in sorted(last['moto_requests'].items())) or 'no requests'}. "
        f"{a_['empty_segments']} of the {a_['segments']} entries the clean's manifest lists hold no record "
        "(next_offset = base_offset, 0-byte objects).",
        "",
        f"The read cache (`sediment.remote.storage.cache.bytes` = {r['cache_mb']} MiB) took at most "
        f"{mib(last.get('cache_peak_bytes', 0))} MiB of disk during the last round's store clean (sampled every 50 ms: "
        "the files in its directory and evicted ones the broker still held open), against "
        f"{mib(b['log_bytes'])} MiB of store-only .log the clean read.",
        "",
        "Manifests written after each store clean's (until the end of the run):",
        "",
    ]
    for i, rnd in enumerate(rounds, 1):
        clean_seq = rnd["remote"]["after"]["seq"]
        later = [m for m in r["manifests"][f"clean-remote-r{i}"] if m["seq"] > clean_seq]
        lines.append(f"- clean-remote-r{i}-0, clean at seq {clean_seq} ({rnd['remote']['after']['segments']} entries): "
                     + ("; ".join(f"seq {m['seq']}: {m['segments']} entries, {m['empty_segments']} empty, first base "
                                  f"{m['entries'][0][0] if m['entries'] else None}, log start {m['log_start_offset']}, "
                                  f"{mib(m['log_bytes'])} MiB, store_clean_offset {m['store_clean_offset']}"
                                  for m in later) or "none"))
    lines += [
        "",
        f"Local, last round: {rounds[-1]['local']['before']['segments']} → {rounds[-1]['local']['after']['segments']} "
        f"segments, {mib(rounds[-1]['local']['before']['log_bytes'])} → {mib(rounds[-1]['local']['after']['log_bytes'])} "
        "MiB on disk.",
        "",
        "Read back from the beginning after each clean (BenchClient verify: records below the clean point, distinct "
        "keys among them, distinct keys in all):",
        "",
    ]
    for i, rnd in enumerate(rounds, 1):
        for kind in ("local", "remote"):
            v = rnd[kind]["verify"]
            lines.append(f"- round {i} {kind}: {v['records_below_checkpoint']} records / "
                         f"{v['distinct_keys_below_checkpoint']} keys below, {v['distinct_keys_total']} keys in "
                         f"{v['records_total']} records: {'one record per key' if v['one_record_per_key'] else 'NOT one record per key'}")
    lines += ["", f"Cleans the broker logged per partition by the end of the run ({r['settle_s']:g} s after the last "
              "clean): one store clean per remote partition and one local clean per local partition is what a "
              "single clean of each looks like.", ""]
    for part, c in r["cleans_logged"].items():
        lines.append(f"- {part}: {len(c['store_cleans'])} store clean(s), {c['local_cleans']} local clean summary(ies)")
    lines += ["", "The store cleaner's log lines:", "", "```"]
    for c in r["cleans_logged"].values():
        lines += c["store_cleans"]
    lines += ["```", "", "The local cleaner's summary, last round:", "", "```", *rounds[-1]["local"]["log_excerpt"], "```"]
    if r["warnings"]:
        lines += ["", "Warnings and errors in the broker's log:", "", "```", *r["warnings"], "```"]
    lines.append("")
    return "\n".join(lines)


if __name__ == "__main__":
    sys.exit(main())
