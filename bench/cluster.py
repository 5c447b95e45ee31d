#!/usr/bin/env python3
"""Three brokers at replication factor 3, side by side (issue 29, acceptance 8).

Run through bench/cluster.sh. Two clusters on this machine, one after the
other, each started as a user starts it and with its defaults:

* Apache Kafka 4.1.2: one KRaft controller (its own process, as etcd is
  sediment's) and three brokers;
* sediment: one etcd and three brokers (`sediment.cluster.etcd.endpoints`).

On each:

1. produce: Kafka's ProducerPerformance (acks=all, idempotent, 1 KiB
   records, unthrottled) to a new topic of 1 and of 8 partitions,
   replication factor 3, `min.insync.replicas=2`; records/s, MB/s, p99 and
   the three brokers' CPU seconds per GiB produced (the coordinator's CPU
   is reported apart); then the same at `--latency-rate` records/s for
   `--latency-seconds`, below both clusters' capacity, for the latency
   percentiles without the producer's own queueing.
2. failover: a librdkafka producer (confluent-kafka, acks=all,
   idempotent) writes a record every millisecond to a 1-partition topic
   (RF 3, min ISR 2) while the partition's leader is SIGKILLed, `--kills`
   times: the time from each kill to the first acknowledgement after it
   (an acknowledgement more than 5 ms after the kill: one the old leader
   sent before it died reaches the client on loopback long before), then
   the broker restarts and the ISR is whole again before the next kill.
   Every record must be acknowledged at the end.

The report (markdown, with the raw numbers as JSON beside it) gives each
figure and the ratio sediment / Kafka.
"""

import argparse
import base64
import datetime as dt
import json
import os
import signal
import statistics
import subprocess
import sys
import threading
import time
import uuid
from pathlib import Path

sys.dont_write_bytecode = True  # no bench/__pycache__ from the imports below
sys.path.insert(0, str(Path(__file__).resolve().parent))
from bench import (COMMON, KAFKA_HEAP, KAFKA_JVM, ROOT, Tools, _die_with_parent,  # noqa: E402
                   cpu_seconds, free_port, log, producer_perf)

GIB = 1 << 30
RECORD = 1024


class Process:
    """One server process, restartable with the same command."""

    def __init__(self, name: str, cmd: list[str], logpath: Path, env: dict | None = None):
        self.name, self.cmd, self.logpath, self.env = name, cmd, logpath, env
        self.proc: subprocess.Popen | None = None

    def start(self) -> None:
        out = open(self.logpath, "a")
        self.proc = subprocess.Popen(self.cmd, stdout=out, stderr=subprocess.STDOUT, env=self.env,
                                     preexec_fn=_die_with_parent)

    @property
    def pid(self) -> int:
        assert self.proc
        return self.proc.pid

    def kill(self) -> None:
        assert self.proc
        self.proc.send_signal(signal.SIGKILL)
        self.proc.wait()

    def stop(self) -> None:
        if self.proc and self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(timeout=120)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()


def wait_port(port: int, proc: Process, timeout: float = 120) -> None:
    import socket
    deadline = time.monotonic() + timeout
    while True:
        if proc.proc and proc.proc.poll() is not None:
            raise RuntimeError(f"{proc.name} exited with {proc.proc.returncode}; see {proc.logpath}")
        try:
            with socket.create_connection(("127.0.0.1", port), timeout=1):
                return
        except OSError:
            if time.monotonic() > deadline:
                raise RuntimeError(f"{proc.name} did not listen on {port}; see {proc.logpath}") from None
            time.sleep(0.1)


class Cluster:
    name = ""

    def __init__(self, workdir: Path):
        self.workdir = workdir
        self.ports = [free_port() for _ in range(3)]
        self.bootstrap = ",".join(f"127.0.0.1:{p}" for p in self.ports)
        self.brokers: list[Process] = []
        self.coordinator: Process | None = None

    def start(self) -> None:
        self.coordinator.start()
        self.wait_coordinator()
        for b in self.brokers:
            b.start()
        for port, b in zip(self.ports, self.brokers):
            wait_port(port, b)
        wait_until("three brokers registered", lambda: len(admin(self).list_topics(timeout=10).brokers) == 3)

    def restart(self, node: int) -> None:
        self.brokers[node - 1].start()
        wait_port(self.ports[node - 1], self.brokers[node - 1])

    def stop(self) -> None:
        for b in self.brokers:
            b.stop()
        if self.coordinator:
            self.coordinator.stop()

    def wait_coordinator(self) -> None:
        raise NotImplementedError


class KafkaCluster(Cluster):
    name = "kafka"

    def __init__(self, workdir: Path, tools: Tools):
        super().__init__(workdir)
        self.tools = tools
        self.cport = free_port()
        quorum = f"127.0.0.1:{self.cport}"
        base = {"controller.listener.names": "CONTROLLER", "controller.quorum.bootstrap.servers": quorum}
        cluster_id = base64.urlsafe_b64encode(uuid.uuid4().bytes).decode().rstrip("=")
        java = ["java", *KAFKA_JVM.split(), "-Djava.awt.headless=true",
                f"-Dlog4j2.configurationFile={ROOT}/tools/kafka-jars/log4j2.properties", "-cp", f"{tools.jars}/*"]
        env = dict(os.environ, KAFKA_LOG_LEVEL="INFO")
        controller = {**base, "process.roles": "controller", "node.id": "100",
                      "listeners": f"CONTROLLER://{quorum}", "listener.security.protocol.map": "CONTROLLER:PLAINTEXT",
                      "log.dirs": str(workdir / "controller-data")}
        conf = self.write("controller", controller)
        self.format(conf, cluster_id, "--standalone")
        self.coordinator = Process("kafka-controller", [*java[:1], "-Xmx512m", *java[1:], "kafka.Kafka", str(conf)],
                                   workdir / "controller.log", env)
        for node, port in enumerate(self.ports, start=1):
            props = {**base, "process.roles": "broker", "node.id": str(node),
                     "listeners": f"PLAINTEXT://127.0.0.1:{port}", "advertised.listeners": f"PLAINTEXT://127.0.0.1:{port}",
                     "inter.broker.listener.name": "PLAINTEXT",
                     "listener.security.protocol.map": "CONTROLLER:PLAINTEXT,PLAINTEXT:PLAINTEXT",
                     "log.dirs": str(workdir / f"broker-{node}-data"), **COMMON}
            conf = self.write(f"broker-{node}", props)
            self.format(conf, cluster_id, "--no-initial-controllers")
            cmd = [*java[:1], KAFKA_HEAP, *java[1:], "kafka.Kafka", str(conf)]
            self.brokers.append(Process(f"kafka-{node}", cmd, workdir / f"broker-{node}.log", env))

    def write(self, name: str, props: dict) -> Path:
        conf = self.workdir / f"{name}.properties"
        conf.write_text("".join(f"{k}={v}\n" for k, v in props.items()))
        return conf

    def format(self, conf: Path, cluster_id: str, mode: str) -> None:
        self.tools.java("kafka.tools.StorageTool", ["format", f"--cluster-id={cluster_id}", "-c", str(conf), mode],
                        f"format-{conf.stem}", heap="-Xmx256m")

    def wait_coordinator(self) -> None:
        wait_port(self.cport, self.coordinator)


class SedimentCluster(Cluster):
    name = "sediment"

    def __init__(self, workdir: Path, binary: Path):
        super().__init__(workdir)
        self.eport, peer = free_port(), free_port()
        client, peer_url = f"http://127.0.0.1:{self.eport}", f"http://127.0.0.1:{peer}"
        self.coordinator = Process("etcd", [
            "etcd", "--name", "bench", "--data-dir", str(workdir / "etcd-data"),
            "--listen-client-urls", client, "--advertise-client-urls", client,
            "--listen-peer-urls", peer_url, "--initial-advertise-peer-urls", peer_url,
            "--initial-cluster", f"bench={peer_url}"], workdir / "etcd.log")
        env = dict(os.environ)
        env.setdefault("RUST_LOG", "info")
        for node, port in enumerate(self.ports, start=1):
            keys = {"listeners": f"PLAINTEXT://127.0.0.1:{port}", "log.dirs": str(workdir / f"broker-{node}-data"),
                    "node.id": str(node), "sediment.cluster.etcd.endpoints": client,
                    "metrics.listen": f"127.0.0.1:{free_port()}", **COMMON}
            args = [a for k, v in keys.items() for a in ("--override", f"{k}={v}")]
            self.brokers.append(Process(f"sediment-{node}", [str(binary), "serve", *args],
                                        workdir / f"broker-{node}.log", env))

    def wait_coordinator(self) -> None:
        wait_port(self.eport, self.coordinator)


# --------------------------------------------------------------------------- client side

def admin(cluster: Cluster):
    from confluent_kafka.admin import AdminClient
    return AdminClient({"bootstrap.servers": cluster.bootstrap})


def partitions(cluster: Cluster, topic: str) -> dict:
    """partition -> (leader, isr) as a live broker's metadata gives them."""
    md = admin(cluster).list_topics(topic, timeout=10)
    t = md.topics.get(topic)
    if t is None or t.error is not None:
        return {}
    return {p: (m.leader, sorted(m.isrs)) for p, m in t.partitions.items()}


def wait_until(what: str, ok, timeout: float = 120) -> None:
    deadline = time.monotonic() + timeout
    while True:
        try:
            if ok():
                return
        except Exception as e:  # a broker just killed: ask again
            last = e  # noqa: F841
        if time.monotonic() > deadline:
            raise RuntimeError(f"timed out waiting for {what}")
        time.sleep(0.2)


def create_topic(cluster: Cluster, topic: str, count: int) -> None:
    from confluent_kafka.admin import NewTopic
    client = admin(cluster)  # kept until the answer: a dropped client cancels it
    futures = client.create_topics([NewTopic(topic, count, 3, config={"min.insync.replicas": "2"})],
                                   operation_timeout=30)
    futures[topic].result()
    wait_until(f"{topic}: every partition led with three in sync",
               lambda: (lambda ps: len(ps) == count and all(l > 0 and len(i) == 3 for l, i in ps.values()))(
                   partitions(cluster, topic)))


def broker_cpu(cluster: Cluster) -> float:
    return sum(cpu_seconds(b.pid) for b in cluster.brokers)


def produce_phase(cluster: Cluster, tools: Tools, args, res: dict) -> None:
    for count in args.partitions:
        runs = []
        for rep in range(args.repeat):
            topic = f"rf3-{count}p-{rep}"
            create_topic(cluster, topic, count)
            cpu0, coord0 = broker_cpu(cluster), cpu_seconds(cluster.coordinator.pid)
            t0 = time.monotonic()
            numbers = producer_perf(tools, cluster.bootstrap, topic, args.records, f"{cluster.name}-produce-{topic}")
            numbers["wall_s"] = time.monotonic() - t0
            gib = args.records * RECORD / GIB
            numbers["broker_cpu_s_per_gib"] = (broker_cpu(cluster) - cpu0) / gib
            numbers["coordinator_cpu_s"] = cpu_seconds(cluster.coordinator.pid) - coord0
            log(f"{cluster.name} {count}p: {numbers['records_per_s']:.0f} rec/s, p99 {numbers['p99_ms']} ms, "
                f"{numbers['broker_cpu_s_per_gib']:.1f} CPU s/GiB")
            runs.append(numbers)
        res[f"produce_{count}p"] = runs
        # Latency below saturation: unthrottled, p99 is mostly the time a
        # record waits in the producer's 32 MB buffer.
        topic = f"rf3-{count}p-paced"
        create_topic(cluster, topic, count)
        records = args.latency_rate * args.latency_seconds
        paced = producer_perf(tools, cluster.bootstrap, topic, records, f"{cluster.name}-paced-{topic}",
                              throughput=args.latency_rate)
        log(f"{cluster.name} {count}p at {args.latency_rate} rec/s: p50 {paced['p50_ms']} ms, p99 {paced['p99_ms']} ms")
        res[f"paced_{count}p"] = [paced]


class Probe:
    """A record every millisecond, acks=all; the acknowledgement times."""

    def __init__(self, cluster: Cluster, topic: str):
        from confluent_kafka import Producer
        self.producer = Producer({"bootstrap.servers": cluster.bootstrap, "acks": "all", "enable.idempotence": True,
                                  "linger.ms": 0})
        self.topic = topic
        self.acks: list[float] = []
        self.errors: list[str] = []
        self.sent = 0
        self.running = True
        self.lock = threading.Lock()
        self.thread = threading.Thread(target=self.run, daemon=True)
        self.thread.start()

    def delivered(self, err, _msg) -> None:
        now = time.monotonic()
        with self.lock:
            if err is None:
                self.acks.append(now)
            else:
                self.errors.append(str(err))

    def run(self) -> None:
        while self.running:
            try:
                self.producer.produce(self.topic, value=b"v" * 100, on_delivery=self.delivered)
                self.sent += 1
            except BufferError:
                pass
            self.producer.poll(0)
            time.sleep(0.001)

    def first_ack_after(self, t: float) -> float | None:
        with self.lock:
            later = [a for a in self.acks[-5000:] if a > t]
        return later[0] if later else None

    def finish(self) -> int:
        self.running = False
        self.thread.join()
        left = self.producer.flush(120)
        if left:
            self.errors.append(f"{left} records never acknowledged")
        return len(self.acks)


def failover_phase(cluster: Cluster, args, res: dict) -> None:
    topic = "failover"
    create_topic(cluster, topic, 1)
    probe = Probe(cluster, topic)
    wait_until("the probe under way", lambda: len(probe.acks) > 500)
    times = []
    for k in range(args.kills):
        leader = partitions(cluster, topic)[0][0]
        killed = time.monotonic()
        cluster.brokers[leader - 1].kill()
        wait_until("an acknowledgement after the kill", lambda: probe.first_ack_after(killed + 0.005) is not None)
        took = probe.first_ack_after(killed + 0.005) - killed
        times.append(took)
        log(f"{cluster.name} kill {k + 1}: broker {leader}, first acknowledgement after {took * 1000:.0f} ms")
        cluster.restart(leader)
        wait_until("the ISR whole again",
                   lambda: (lambda p: p and p[0][0] > 0 and len(p[0][1]) == 3)(partitions(cluster, topic)))
    acked = probe.finish()
    if probe.errors or acked != probe.sent:
        raise RuntimeError(f"{cluster.name}: {probe.sent} sent, {acked} acknowledged, errors {probe.errors[:5]}")
    res["failover_s"] = times
    res["failover_records"] = acked


def run_cluster(cluster: Cluster, tools: Tools, args) -> dict:
    res: dict = {}
    log(f"{cluster.name}: starting three brokers")
    cluster.start()
    try:
        if "produce" in args.phases:
            produce_phase(cluster, tools, args, res)
        if "failover" in args.phases:
            failover_phase(cluster, args, res)
    finally:
        cluster.stop()
    return res


# --------------------------------------------------------------------------- report

def median(runs: list[dict], key: str) -> float:
    return statistics.median(r[key] for r in runs)


def ratio(s: float, k: float) -> str:
    return f"{s / k:.2f}x" if k else "-"


def report(results: dict, args, commit: str) -> str:
    k, s = results.get("kafka", {}), results.get("sediment", {})
    lines = [f"# Three brokers, RF 3, side by side ({dt.datetime.now():%Y-%m-%d %H:%M}, {commit})", "",
             f"Apache Kafka 4.1.2 (1 KRaft controller + 3 brokers) and sediment (etcd + 3 brokers) on this "
             f"machine ({os.cpu_count()} cores), one after the other, each with its defaults. Produce: "
             f"ProducerPerformance, acks=all, idempotent, {args.records} records of 1 KiB per run, "
             f"min.insync.replicas=2, median of {args.repeat} runs. CPU: the three brokers' user+system seconds "
             f"per GiB produced (the coordinator's apart). {args.note}", "",
             "| | Kafka | sediment | sediment / Kafka |", "|---|---|---|---|"]
    for count in args.partitions:
        key = f"produce_{count}p"
        if key not in k or key not in s:
            continue
        for label, field, better in (("records/s", "records_per_s", "higher"), ("MB/s", "mb_per_s", "higher"),
                                     ("p99 ms", "p99_ms", "lower"), ("avg ms", "avg_ms", "lower"),
                                     ("broker CPU s / GiB", "broker_cpu_s_per_gib", "lower"),
                                     ("coordinator CPU s", "coordinator_cpu_s", "lower")):
            kv, sv = median(k[key], field), median(s[key], field)
            lines.append(f"| {count} partition{'s' if count > 1 else ''}: {label} ({better} is better) "
                         f"| {kv:.1f} | {sv:.1f} | {ratio(sv, kv)} |")
        key = f"paced_{count}p"
        if key in k and key in s:
            for label, field in (("p50 ms", "p50_ms"), ("p99 ms", "p99_ms"), ("p99.9 ms", "p999_ms")):
                kv, sv = median(k[key], field), median(s[key], field)
                lines.append(f"| {count} partition{'s' if count > 1 else ''} at {args.latency_rate} records/s: "
                             f"{label} (lower is better) | {kv:.1f} | {sv:.1f} | {ratio(sv, kv)} |")
    if "failover_s" in k and "failover_s" in s:
        kf, sf = k["failover_s"], s["failover_s"]
        for label, f in (("min", min), ("median", statistics.median), ("max", max)):
            lines.append(f"| failover, kill to first ack: {label} s | {f(kf):.2f} | {f(sf):.2f} | {ratio(f(sf), f(kf))} |")
        lines += ["", f"Failover, every kill (s): Kafka {[round(x, 2) for x in kf]}; "
                      f"sediment {[round(x, 2) for x in sf]}. Records acknowledged through them: "
                      f"Kafka {k['failover_records']}, sediment {s['failover_records']}, none lost or failed."]
    lines += ["", "Every run:", "", "```", json.dumps(results, indent=1), "```"]
    return "\n".join(lines) + "\n"


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--jars", required=True, type=Path)
    ap.add_argument("--classes", required=True, type=Path)
    ap.add_argument("--sediment-bin", required=True, type=Path)
    ap.add_argument("--workdir", required=True, type=Path)
    ap.add_argument("--out", required=True, type=Path)
    ap.add_argument("--commit", default="unknown")
    ap.add_argument("--records", type=int, default=300000)
    ap.add_argument("--partitions", type=lambda v: [int(x) for x in v.split(",")], default=[1, 8])
    ap.add_argument("--repeat", type=int, default=2)
    ap.add_argument("--kills", type=int, default=5)
    ap.add_argument("--latency-rate", type=int, default=2000)
    ap.add_argument("--latency-seconds", type=int, default=20)
    ap.add_argument("--phases", type=lambda v: v.split(","), default=["produce", "failover"])
    ap.add_argument("--clusters", type=lambda v: v.split(","), default=["kafka", "sediment"])
    ap.add_argument("--note", default="", help="a sentence for the report (what else ran on the machine)")
    args = ap.parse_args()
    args.workdir.mkdir(parents=True, exist_ok=True)
    tools = Tools(args.jars, args.classes, args.workdir)
    results = {}
    # Built one at a time, so each picks its ports when it starts.
    makers = {"kafka": lambda d: KafkaCluster(d, tools), "sediment": lambda d: SedimentCluster(d, args.sediment_bin)}
    for name in args.clusters:
        make = makers[name]
        (args.workdir / name).mkdir()
        results[name] = run_cluster(make(args.workdir / name), tools, args)
    text = report(results, args, args.commit)
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(text)
    args.out.with_suffix(".json").write_text(json.dumps(results, indent=1))
    print(text)
    return 0


if __name__ == "__main__":
    sys.exit(main())
