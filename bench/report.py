"""Markdown report of a bench.py run: both brokers side by side with ratios
and the targets sediment is held to. `python3 bench/report.py RESULTS.json` re-renders a
saved run."""

from __future__ import annotations

import json
import sys

K, S = "kafka", "sediment"


def fmt(v, digits=1) -> str:
    if v is None:
        return "–"
    if isinstance(v, bool):
        return "yes" if v else "**no**"
    if isinstance(v, int):
        return f"{v:,}"
    if isinstance(v, float):
        if abs(v) >= 1000:
            return f"{v:,.0f}"
        return f"{v:.{digits}f}"
    return str(v)


def ratio(s, k) -> str:
    if s is None or k is None or not k:
        return "–"
    return f"{s / k:.2f}×"


def get(d: dict, *path):
    for p in path:
        if not isinstance(d, dict) or p not in d:
            return None
        d = d[p]
    return d


def verdict(ok: bool | None) -> str:
    return "–" if ok is None else ("met" if ok else "**missed**")


def render(r: dict) -> str:
    env = r["env"]
    k, s = r.get(K, {}), r.get(S, {})
    disk = r.get("disk", {})
    out: list[str] = []
    w = out.append
    label = f" ({env['label']})" if env.get("label") else ""
    w(f"# sediment vs Apache Kafka 4.1.2{label}\n")
    w(f"{env['date']}, sediment `{env['commit']}`, {env['cpus']} CPUs, {env['mem_gib']} GiB, Linux {env['kernel']}, {env['java']}. "
      f"Load average at start {' '.join(env['loadavg_start'])}, at end {' '.join(env.get('loadavg_end', []))}. "
      f"Whole run {env.get('total_s', 0) / 60:.1f} min.\n")
    n_runs = env.get("repeat", 1)
    more = [x for x, on in (("the transactional produce", env.get("txn_duration_ms")), ("the SSL phase", env.get("ssl_partitions"))) if on]
    more_s = f", then {' and '.join(more)}" if more else ""
    order = ("each broker once through all stages" if env.get("sequential")
             else f"round by round (each round: produce to fresh topics, then consume them{more_s}; "
                  "then one compaction round), "
                  "alternating which broker goes first, each broker restarted on its data for each round")
    w(f"Brokers run one at a time, {order}. Produce and consume figures are the median of {n_runs} round(s) "
      f"(each run's MB/s is listed; all numbers are in the JSON); per-phase CPU is the median, peak RSS the maximum. ")
    w("Loopback; each broker has its own data dir on the same disk; Kafka in KRaft combined mode, "
      "-Xmx1g with Kafka's stock G1 flags; both with 128 MiB segments, no fsync per append (Kafka's default flush policy), "
      "1 cleaner thread, 128 MiB dedupe buffer, group.initial.rebalance.delay.ms=0. Clients: Apache Kafka 4.1.2's "
      "ProducerPerformance and ConsumerPerformance (Java 17), and bench/BenchClient.java. MB = 2^20 bytes, as Kafka's tools count. "
      "Ratios are sediment / Kafka.\n")
    for name, res in ((K, k), (S, s)):
        if res.get("error"):
            w(f"> **{name} failed:** {res['error']}\n")
    if not env.get("sediment_cleaner"):
        w(f"> sediment's compaction phase was skipped: this build has no log cleaner in the broker yet "
          f"(`{env.get('sediment_cleaner_error', '')}`).\n")

    # Raw disk.
    copy = None
    if disk:
        copy = 1 / (1 / disk["write_mb_per_s"] + 1 / disk["read_mb_per_s"])
        w("## Raw disk (same run, same directory)\n")
        w("| sequential, O_DIRECT, 4 MiB blocks | MB/s |\n|---|---:|")
        w(f"| write ({disk['mb']:.0f} MB, then fsync) | {fmt(disk['write_mb_per_s'])} |")
        w(f"| read | {fmt(disk['read_mb_per_s'])} |")
        w(f"| copy (read + write the same bytes) | {fmt(copy)} |\n")

    # Produce.
    n = env["records"]
    w(f"## Produce: ProducerPerformance, {n:,} records of 1 KiB, acks=all, no throttle\n")
    w("| | Kafka | sediment | ratio | target |\n|---|---:|---:|---:|---|")
    targets: list[tuple[str, bool | None]] = []
    for p in env["partitions"]:
        key = f"produce_p{p}"
        kp, sp = k.get(key, {}), s.get(key, {})
        mb_ok = (sp["mb_per_s"] >= 1.5 * kp["mb_per_s"]) if kp and sp else None
        p99_ok = (sp["p99_ms"] <= kp["p99_ms"]) if kp and sp else None
        targets += [(f"produce MB/s {p}p ≥ 1.5× Kafka", mb_ok), (f"produce p99 {p}p ≤ Kafka", p99_ok)]
        w(f"| **{p} partition{'s' if p > 1 else ''}**: records/s | {fmt(kp.get('records_per_s'))} | {fmt(sp.get('records_per_s'))} | {ratio(sp.get('records_per_s'), kp.get('records_per_s'))} | |")
        w(f"| MB/s | {fmt(kp.get('mb_per_s'))} | {fmt(sp.get('mb_per_s'))} | {ratio(sp.get('mb_per_s'), kp.get('mb_per_s'))} | ≥ 1.5×: {verdict(mb_ok)} |")
        w(f"| MB/s, each run | {each(k, key, 'mb_per_s')} | {each(s, key, 'mb_per_s')} | | |")
        if disk:
            kf = kp.get("mb_per_s") and 100 * kp["mb_per_s"] / disk["write_mb_per_s"]
            sf = sp.get("mb_per_s") and 100 * sp["mb_per_s"] / disk["write_mb_per_s"]
            w(f"| MB/s, % of raw disk write | {fmt(kf)}% | {fmt(sf)}% | | |")
        for lat, name in (("avg_ms", "avg latency ms"), ("p50_ms", "p50 latency ms"), ("p99_ms", "p99 latency ms"), ("max_ms", "max latency ms")):
            t = f"≤ 1×: {verdict(p99_ok)}" if lat == "p99_ms" else ""
            w(f"| {name} | {fmt(kp.get(lat))} | {fmt(sp.get(lat))} | {ratio(sp.get(lat), kp.get(lat))} | {t} |")
    w("")

    # Consume.
    w(f"## Consume: ConsumerPerformance (consumer group), the same {n:,} records\n")
    w("| | Kafka | sediment | ratio | target |\n|---|---:|---:|---:|---|")
    for p in env["partitions"]:
        key = f"consume_p{p}"
        kc, sc = k.get(key, {}), s.get(key, {})
        ok = (sc["mb_per_s"] >= 1.5 * kc["mb_per_s"]) if kc and sc else None
        targets.append((f"consume MB/s {p}p ≥ 1.5× Kafka", ok))
        w(f"| **{p} partition{'s' if p > 1 else ''}**: MB/s (whole run) | {fmt(kc.get('mb_per_s'))} | {fmt(sc.get('mb_per_s'))} | {ratio(sc.get('mb_per_s'), kc.get('mb_per_s'))} | ≥ 1.5×: {verdict(ok)} |")
        w(f"| MB/s, each run | {each(k, key, 'mb_per_s')} | {each(s, key, 'mb_per_s')} | | |")
        w(f"| fetch MB/s (after the group join) | {fmt(kc.get('fetch_mb_per_s'))} | {fmt(sc.get('fetch_mb_per_s'))} | {ratio(sc.get('fetch_mb_per_s'), kc.get('fetch_mb_per_s'))} | |")
        w(f"| group join ms | {fmt(kc.get('rebalance_ms'), 0)} | {fmt(sc.get('rebalance_ms'), 0)} | | |")
    w("")

    # Transactional produce.
    if env.get("txn_duration_ms"):
        w(f"## Transactional produce: ProducerPerformance --transactional-id, a commit every {env['txn_duration_ms']} ms, "
          f"{n:,} records of 1 KiB, acks=all\n")
        w("| | Kafka | sediment | ratio |\n|---|---:|---:|---:|")
        for p in env["partitions"]:
            key = f"txn_produce_p{p}"
            kp, sp = k.get(key, {}), s.get(key, {})
            w(f"| **{p} partition{'s' if p > 1 else ''}**: records/s | {fmt(kp.get('records_per_s'))} | {fmt(sp.get('records_per_s'))} | {ratio(sp.get('records_per_s'), kp.get('records_per_s'))} |")
            w(f"| MB/s | {fmt(kp.get('mb_per_s'))} | {fmt(sp.get('mb_per_s'))} | {ratio(sp.get('mb_per_s'), kp.get('mb_per_s'))} |")
            w(f"| MB/s, each run | {each(k, key, 'mb_per_s')} | {each(s, key, 'mb_per_s')} | |")
            for lat, name in (("avg_ms", "avg latency ms"), ("p99_ms", "p99 latency ms")):
                w(f"| {name} | {fmt(kp.get(lat))} | {fmt(sp.get(lat))} | {ratio(sp.get(lat), kp.get(lat))} |")
            kph, sph = k.get("phases", {}).get(f"txn produce {p}p", {}), s.get("phases", {}).get(f"txn produce {p}p", {})
            gb = n * 1024 / 2**30
            kcpu, scpu = (ph.get("cpu_s") and ph["cpu_s"] / gb for ph in (kph, sph))
            w(f"| broker CPU s per GB produced | {fmt(kcpu)} | {fmt(scpu)} | {ratio(scpu, kcpu)} |")
        w("")

    if env.get("ssl_partitions"):
        ssl_section(w, env, k, s)

    # Compaction.
    kc, sc = k.get("compaction"), s.get("compaction")
    if kc or sc:
        kc, sc = kc or {}, sc or {}
        w(f"## Compaction: {env['compact_records']:,} keyed records over {env['compact_keys']:,} keys, 1 KiB values, 1 partition\n")
        w("Produced to a compacted topic with min.cleanable.dirty.ratio=1.0 (the cleaner waits); right after the last acknowledged "
          "write the ratio is set to 0.5. *Fully cleaned*: the cleaner-offset-checkpoint has reached the active segment and no "
          ".cleaned/.swap file is left; then the topic is read back (one record per key below the checkpoint). Cleaner MB/s = bytes "
          "of the closed segments / time from the config change to fully cleaned (includes up to log.cleaner.backoff.ms = 1 s of idle wait).\n")
        w("| | Kafka | sediment | ratio | target |\n|---|---:|---:|---:|---|")
        kmb, smb = kc.get("cleaner_mb_per_s"), sc.get("cleaner_mb_per_s")
        ok2 = (smb >= 2 * kmb) if kmb and smb else None
        okraw = (smb >= 0.5 * copy) if smb and copy else None
        if sc:
            targets += [("cleaner MB/s ≥ 2× Kafka", ok2), ("cleaner MB/s ≥ 50% of raw disk copy rate", okraw)]
        w(f"| keyed produce MB/s (BenchClient, acks=all) | {fmt(get(kc, 'produce', 'mb_per_s'))} | {fmt(get(sc, 'produce', 'mb_per_s'))} | {ratio(get(sc, 'produce', 'mb_per_s'), get(kc, 'produce', 'mb_per_s'))} | |")
        w(f"| log before cleaning MB (segments) | {fmt(mb(kc.get('log_bytes_before')))} ({fmt(kc.get('segments_before'))}) | {fmt(mb(sc.get('log_bytes_before')))} ({fmt(sc.get('segments_before'))}) | | |")
        w(f"| seconds from last write to fully cleaned | {fmt(kc.get('seconds_from_last_write'))} | {fmt(sc.get('seconds_from_last_write'))} | {ratio(sc.get('seconds_from_last_write'), kc.get('seconds_from_last_write'))} | |")
        w(f"| cleaner MB/s | {fmt(kmb)} | {fmt(smb)} | {ratio(smb, kmb)} | ≥ 2×: {verdict(ok2)} |")
        if copy:
            w(f"| cleaner MB/s, % of raw disk copy | {fmt(kmb and 100 * kmb / copy)}% | {fmt(smb and 100 * smb / copy)}% | | ≥ 50%: {verdict(okraw)} |")
        w(f"| final size on disk MB (segments) | {fmt(mb(kc.get('log_bytes_after')))} ({fmt(kc.get('segments_after'))}) | {fmt(mb(sc.get('log_bytes_after')))} ({fmt(sc.get('segments_after'))}) | {ratio(sc.get('log_bytes_after'), kc.get('log_bytes_after'))} | |")
        w(f"| records left / distinct keys | {fmt(get(kc, 'verify', 'records_total'))} / {fmt(get(kc, 'verify', 'distinct_keys_total'))} | {fmt(get(sc, 'verify', 'records_total'))} / {fmt(get(sc, 'verify', 'distinct_keys_total'))} | | |")
        w(f"| one record per key below the checkpoint | {fmt(kc.get('one_record_per_key'))} | {fmt(sc.get('one_record_per_key'))} | | |")
        for name, c in ((K, kc), (S, sc)):
            if c.get("error"):
                w(f"\n> {name}: {c['error']}")
        if kc.get("kafka_cleaner_log"):
            w(f"\nKafka's own cleaner log: {kc['kafka_cleaner_log']}")
        if not sc:
            w("\nsediment: skipped (no cleaner in this build).")
        w("")

    consume_cpu_section(w, env, r)

    # Resources.
    w("## Broker resources per phase\n")
    w("Peak RSS: VmHWM of the broker process, reset at the start of each phase. CPU: utime+stime of the broker process. "
      "Client CPU: the Java client tools of the phase. Other: CPU the machine spent on anything else meanwhile "
      "(other people's work; large values mean a noisy measurement).\n")
    w("| phase | Kafka peak RSS MB | sediment peak RSS MB | ratio | Kafka CPU s | sediment CPU s | ratio | client CPU s K / S | other CPU s K / S |\n"
      "|---|---:|---:|---:|---:|---:|---:|---:|---:|")
    phases = list(dict.fromkeys([*k.get("phases", {}), *s.get("phases", {})]))
    for ph in phases:
        a, b = k.get("phases", {}).get(ph, {}), s.get("phases", {}).get(ph, {})
        w(f"| {ph} | {fmt(a.get('peak_rss_mb'))} | {fmt(b.get('peak_rss_mb'))} | {ratio(b.get('peak_rss_mb'), a.get('peak_rss_mb'))} | "
          f"{fmt(a.get('cpu_s'))} | {fmt(b.get('cpu_s'))} | {ratio(b.get('cpu_s'), a.get('cpu_s'))} | "
          f"{fmt(a.get('client_cpu_s'))} / {fmt(b.get('client_cpu_s'))} | {fmt(a.get('other_cpu_s'))} / {fmt(b.get('other_cpu_s'))} |")
    kpeak = max((v["peak_rss_mb"] for v in k.get("phases", {}).values()), default=None)
    speak = max((v["peak_rss_mb"] for v in s.get("phases", {}).values()), default=None)
    rss_ok = (speak <= kpeak / 10) if kpeak and speak else None
    targets.append(("broker peak RSS ≤ 1/10 of Kafka's", rss_ok))
    w(f"| **peak over all phases** | {fmt(kpeak)} | {fmt(speak)} | {ratio(speak, kpeak)} | | | | | |")
    w(f"| RSS right after start | {fmt(k.get('rss_after_start_mb'))} | {fmt(s.get('rss_after_start_mb'))} | {ratio(s.get('rss_after_start_mb'), k.get('rss_after_start_mb'))} | | | | | |")
    w(f"| first startup s / last shutdown s | {fmt(k.get('startup_s'))} / {fmt(k.get('stop_s'))} | {fmt(s.get('startup_s'))} / {fmt(s.get('stop_s'))} | | | | | | |")
    w(f"| broker's part of the run, s | {fmt(k.get('wall_s'))} | {fmt(s.get('wall_s'))} | | | | | | |")
    w("")

    w("## Targets\n")
    w("| target | result |\n|---|---|")
    for name, ok in targets:
        w(f"| {name} | {verdict(ok)} |")
    if not sc:
        w("| cleaner MB/s ≥ 2× Kafka, ≥ 50% of raw disk | not measured (no cleaner in sediment yet) |")
    w("")
    return "\n".join(out)


def cpu_per_gb(res: dict, phase: str, gb: float):
    cpu = get(res, "phases", phase, "cpu_s")
    return cpu / gb if cpu is not None and gb else None


def ssl_section(w, env: dict, k: dict, s: dict) -> None:
    """Produce and consume over each broker's SSL listener, next to the same
    broker's PLAINTEXT figures of the same run."""
    n = env["records"]
    gb = n * 1024 / 2**30
    w(f"## SSL: ProducerPerformance and ConsumerPerformance over an SSL listener, {n:,} records of 1 KiB, acks=all\n")
    w("Each broker has a second listener, SSL, with the same PEM key store (a CA and a server certificate made with openssl "
      "at the start of the run: RSA 2048, unencrypted PKCS#8 key, no client authentication); the clients use "
      "security.protocol=SSL with the CA as a PEM trust store (host name verification on). Fresh topics, produced and then "
      "read back over SSL. Negotiated with a client offering Java 17's TLS 1.3 order: "
      f"Kafka {k.get('tls', '–')}, sediment {s.get('tls', '–')}. *% of PLAINTEXT*: of the same broker's PLAINTEXT "
      "figure in this run.\n")
    w("| | Kafka | sediment | ratio |\n|---|---:|---:|---:|")
    for p in env["ssl_partitions"]:
        pl = f"{p} partition{'s' if p > 1 else ''}"
        kp, sp = k.get(f"ssl_produce_p{p}", {}), s.get(f"ssl_produce_p{p}", {})
        kplain, splain = k.get(f"produce_p{p}", {}), s.get(f"produce_p{p}", {})
        w(f"| **produce, {pl}**: records/s | {fmt(kp.get('records_per_s'))} | {fmt(sp.get('records_per_s'))} | {ratio(sp.get('records_per_s'), kp.get('records_per_s'))} |")
        w(f"| MB/s | {fmt(kp.get('mb_per_s'))} | {fmt(sp.get('mb_per_s'))} | {ratio(sp.get('mb_per_s'), kp.get('mb_per_s'))} |")
        w(f"| MB/s, each run | {each(k, f'ssl_produce_p{p}', 'mb_per_s')} | {each(s, f'ssl_produce_p{p}', 'mb_per_s')} | |")
        w(f"| MB/s, % of PLAINTEXT | {pct(kp.get('mb_per_s'), kplain.get('mb_per_s'))} | {pct(sp.get('mb_per_s'), splain.get('mb_per_s'))} | |")
        for lat, name in (("avg_ms", "avg latency ms"), ("p50_ms", "p50 latency ms"), ("p99_ms", "p99 latency ms"), ("max_ms", "max latency ms")):
            w(f"| {name} | {fmt(kp.get(lat))} | {fmt(sp.get(lat))} | {ratio(sp.get(lat), kp.get(lat))} |")
        kcpu, scpu = cpu_per_gb(k, f"ssl produce {p}p", gb), cpu_per_gb(s, f"ssl produce {p}p", gb)
        kpc, spc = cpu_per_gb(k, f"produce {p}p", gb), cpu_per_gb(s, f"produce {p}p", gb)
        w(f"| broker CPU s per GB produced | {fmt(kcpu)} | {fmt(scpu)} | {ratio(scpu, kcpu)} |")
        w(f"| the same over PLAINTEXT | {fmt(kpc)} | {fmt(spc)} | {ratio(spc, kpc)} |")
        kc, sc = k.get(f"ssl_consume_p{p}", {}), s.get(f"ssl_consume_p{p}", {})
        kplain, splain = k.get(f"consume_p{p}", {}), s.get(f"consume_p{p}", {})
        w(f"| **consume, {pl}**: MB/s (whole run) | {fmt(kc.get('mb_per_s'))} | {fmt(sc.get('mb_per_s'))} | {ratio(sc.get('mb_per_s'), kc.get('mb_per_s'))} |")
        w(f"| MB/s, each run | {each(k, f'ssl_consume_p{p}', 'mb_per_s')} | {each(s, f'ssl_consume_p{p}', 'mb_per_s')} | |")
        w(f"| MB/s, % of PLAINTEXT | {pct(kc.get('mb_per_s'), kplain.get('mb_per_s'))} | {pct(sc.get('mb_per_s'), splain.get('mb_per_s'))} | |")
        w(f"| fetch MB/s (after the group join) | {fmt(kc.get('fetch_mb_per_s'))} | {fmt(sc.get('fetch_mb_per_s'))} | {ratio(sc.get('fetch_mb_per_s'), kc.get('fetch_mb_per_s'))} |")
        w(f"| group join ms | {fmt(kc.get('rebalance_ms'), 0)} | {fmt(sc.get('rebalance_ms'), 0)} | |")
        kcpu, scpu = cpu_per_gb(k, f"ssl consume {p}p", gb), cpu_per_gb(s, f"ssl consume {p}p", gb)
        kpc, spc = cpu_per_gb(k, f"consume {p}p", gb), cpu_per_gb(s, f"consume {p}p", gb)
        w(f"| broker CPU s per GB consumed | {fmt(kcpu)} | {fmt(scpu)} | {ratio(scpu, kcpu)} |")
        w(f"| the same over PLAINTEXT | {fmt(kpc)} | {fmt(spc)} | {ratio(spc, kpc)} |")
    w("")


NO_SESSIONS = "sediment-no-sessions"


def consume_cpu_section(w, env: dict, r: dict) -> None:
    """Broker CPU per GB consumed over many partitions (where fetch sessions
    matter), with sediment without fetch sessions when it ran."""
    parts = env.get("cpu_partitions") or []
    if not parts:
        return
    cols = [(name, r[key]) for name, key in (("Kafka", K), ("sediment", S), ("sediment, no fetch sessions", NO_SESSIONS))
            if key in r]
    over = ", ".join(env.get("sediment_overrides") or []) or "none"
    w(f"## Consume CPU: ConsumerPerformance over {', '.join(map(str, parts))} partitions, "
      f"{env.get('cpu_records', 0):,} records of 1 KiB each\n")
    w("Broker utime+stime (from /proc/<pid>/stat) while ConsumerPerformance (one consumer in a group) reads the topic "
      "back, per GB (2^30 bytes) consumed; the produce before it is not measured. *no fetch sessions*: the same sediment "
      f"binary with max.incremental.fetch.session.cache.slots=0. sediment overrides: {over}.\n")
    w("| | " + " | ".join(name for name, _ in cols) + " |\n|---|" + "---:|" * len(cols))
    for p in parts:
        key = f"consume_cpu_p{p}"
        for label, field, digits in (("broker CPU s per GB consumed", "cpu_s_per_gb", 2), ("broker CPU s", "broker_cpu_s", 2),
                                     ("MB/s (whole run)", "mb_per_s", 1)):
            head = f"**{p} partitions**: {label}" if field == "cpu_s_per_gb" else label
            w(f"| {head} | " + " | ".join(fmt(res.get(key, {}).get(field), digits) for _, res in cols) + " |")
    w("")


def pct(part, whole) -> str:
    return f"{100 * part / whole:.0f}%" if part is not None and whole else "–"


def each(res: dict, key: str, field: str) -> str:
    runs = res.get("runs", {}).get(key, [])
    return " / ".join(f"{r[field]:.0f}" for r in runs) or "–"


def mb(b):
    return None if b is None else b / (1 << 20)


if __name__ == "__main__":
    print(render(json.load(open(sys.argv[1]))))
