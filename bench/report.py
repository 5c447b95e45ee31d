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
                  "then one compaction round and one changelog round, as far as they ran), "
                  "alternating which broker goes first, each broker restarted on its data for each round")
    w(f"Brokers run one at a time, {order}. Produce and consume figures are the median of {n_runs} round(s) "
      f"(each run's MB/s is listed; all numbers are in the JSON); per-phase CPU is the median, peak RSS the maximum. ")
    w("Loopback; each broker has its own data dir on the same disk; Kafka in KRaft combined mode, "
      "-Xmx1g with Kafka's stock G1 flags; both with 128 MiB segments, no fsync per append (Kafka's default flush policy), "
      f"1 cleaner thread, 128 MiB dedupe buffer, log.cleaner.backoff.ms={env.get('cleaner_backoff_ms', 1000)}, group.initial.rebalance.delay.ms=0. Clients: Apache Kafka 4.1.2's "
      "ProducerPerformance and ConsumerPerformance (Java 17), and bench/BenchClient.java. MB = 2^20 bytes, as Kafka's tools count. "
      "Ratios are sediment / Kafka.\n")
    if get(env, "changelog", "garbage_ratio") is not None:
        w(f"**Changelog phase with `--changelog-garbage-ratio {env['changelog']['garbage_ratio']}`**: sediment's changelog topic "
          f"has sediment.compaction.min.segment.garbage.ratio={env['changelog']['garbage_ratio']} (Kafka's topic is created without it).\n")
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
    if (kc or sc) and "warm" in (kc or sc or {}):
        targets += compaction_section(w, env, disk, k, s)
    elif kc or sc:
        targets += legacy_compaction_section(w, env, copy, kc or {}, sc or {})
    if k.get("changelog") or s.get("changelog"):
        targets += changelog_section(w, env, k.get("changelog") or {}, s.get("changelog") or {})

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
    if not env.get("sediment_cleaner"):
        w("| cleaner targets | not measured (no cleaner in sediment yet) |")
    w("")
    return "\n".join(out)


def legacy_compaction_section(w, env: dict, copy, kc: dict, sc: dict) -> list:
    """The compaction table of runs before the cold and warm cleans (one clean
    right after the produce)."""
    targets: list = []
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
    return targets


def io_rows(w, a: dict, b: dict) -> None:
    """/proc/<pid>/io of each broker over a clean, in MB, with the ratio."""
    for field, label in (("read_bytes", "bytes read from disk, MB (read_bytes)"), ("write_bytes", "bytes written, MB (write_bytes)"),
                         ("rchar", "bytes through read calls, MB (rchar)"), ("wchar", "bytes through write calls, MB (wchar)")):
        x, y = mb(get(a, "io", field)), mb(get(b, "io", field))
        w(f"| {label} | {fmt(x)} | {fmt(y)} | {ratio(y, x)} | |")


def disk_limit(disk: dict, c: dict):
    """MB/s of a clean that reads the closed segments once at the raw sequential
    read rate and writes the survivors once at the raw write rate."""
    if not disk or not c.get("cleanable_bytes") or c.get("survivor_bytes") is None:
        return None
    secs = mb(c["cleanable_bytes"]) / disk["read_mb_per_s"] + mb(c["survivor_bytes"]) / disk["write_mb_per_s"]
    return mb(c["cleanable_bytes"]) / secs


def compaction_section(w, env: dict, disk: dict, k: dict, s: dict) -> list:
    """The same produced log cleaned twice by each broker: warm and cold."""
    kc, sc = k.get("compaction") or {}, s.get("compaction") or {}
    targets: list = []
    backoff = env.get("cleaner_backoff_ms")
    w(f"## Compaction: {env['compact_records']:,} keyed records over {env['compact_keys']:,} keys, 1 KiB values, 1 partition\n")
    w("Produced once to a compacted topic with min.cleanable.dirty.ratio=1.0 (the cleaner waits). The broker is stopped and "
      "the partition dir copied as written; the same bytes are then cleaned twice, each time by the broker restarted on them: "
      "**warm** first (the log is in the page cache, having just been written and copied, as a clean right after the writes "
      "finds it), then **cold**: the cleaned partition is replaced by the copy, its cleaner-offset-checkpoint entry removed, "
      f"the broker restarted and the page cache dropped ({cold_drop(kc, sc)}) right before the clean. A clean is timed from "
      "setting the ratio to 0.5 to *fully cleaned*: the cleaner-offset-checkpoint has reached the active segment and no "
      ".cleaned/.swap file is left (polled every 20 ms; the idle cleaner polls every log.cleaner.backoff.ms = "
      f"{fmt(backoff) if backoff else '1000'} ms, included). Cleaner MB/s = bytes of the closed segments / that time. "
      "Broker CPU, peak RSS (VmHWM reset at the start) and /proc/<pid>/io are taken over the same span; write_bytes counts "
      "bytes when the broker dirties them in the page cache, read_bytes what it made the disk read (both 0 for what the page "
      "cache serves or absorbs), rchar/wchar every read/write system call (not pages touched through mmap). "
      "*Disk limit*: the closed segments read once at the raw sequential read rate plus the surviving bytes written once at "
      "the raw write rate (the raw disk figures above, this run). Cached at start: the closed segments' share in the page "
      "cache when the clock starts (fincore). Both brokers are restarted before each clean; so that Kafka's cleaner code is "
      "compiled by the JIT as in a broker that has been running, each restarted broker first cleans a small warm-up topic "
      "(40,000 records over 4,000 keys in 4 MiB segments), and the clock starts once the broker has been under 10% of a CPU "
      "for a second.\n")
    w("| | Kafka | sediment | ratio | target |\n|---|---:|---:|---:|---|")
    w(f"| keyed produce MB/s (BenchClient, acks=all) | {fmt(get(kc, 'produce', 'mb_per_s'))} | {fmt(get(sc, 'produce', 'mb_per_s'))} | {ratio(get(sc, 'produce', 'mb_per_s'), get(kc, 'produce', 'mb_per_s'))} | |")
    kw, sw = kc.get("warm") or {}, sc.get("warm") or {}
    w(f"| log before cleaning MB (segments) | {fmt(mb(kw.get('log_bytes_before')))} ({fmt(kw.get('segments_before'))}) | {fmt(mb(sw.get('log_bytes_before')))} ({fmt(sw.get('segments_before'))}) | | |")
    peaks = {}
    for kind in ("warm", "cold"):
        a, b = kc.get(kind) or {}, sc.get(kind) or {}
        ka, sb = get(k, "phases", f"compaction clean, {kind}") or {}, get(s, "phases", f"compaction clean, {kind}") or {}
        kmb, smb = a.get("cleaner_mb_per_s"), b.get("cleaner_mb_per_s")
        ok2 = (smb >= 2 * kmb) if kmb and smb else None
        targets.append((f"cleaner MB/s, {kind} ≥ 2× Kafka", ok2))
        w(f"| **{kind} clean**: closed segments cached at start | {pct(a.get('log_cached_at_start'), 1)} | {pct(b.get('log_cached_at_start'), 1)} | | |")
        w(f"| seconds from config change to fully cleaned | {fmt(a.get('seconds_from_config_change'), 2)} | {fmt(b.get('seconds_from_config_change'), 2)} | {ratio(b.get('seconds_from_config_change'), a.get('seconds_from_config_change'))} | |")
        w(f"| cleaner MB/s | {fmt(kmb)} | {fmt(smb)} | {ratio(smb, kmb)} | ≥ 2×: {verdict(ok2)} |")
        if kind == "cold":
            kl, sl = disk_limit(disk, a), disk_limit(disk, b)
            ok80 = (smb >= 0.8 * sl) if smb and sl else None
            targets.append(("cleaner MB/s, cold ≥ 80% of the disk limit", ok80))
            w(f"| disk limit MB/s (read closed segments + write survivors) | {fmt(kl)} | {fmt(sl)} | | |")
            w(f"| cleaner MB/s, % of the disk limit | {pct(kmb, kl)} | {pct(smb, sl)} | | ≥ 80%: {verdict(ok80)} |")
        kcpu, scpu = a.get("cpu_s_per_gb"), b.get("cpu_s_per_gb")
        w(f"| broker CPU s | {fmt(ka.get('cpu_s'), 2)} | {fmt(sb.get('cpu_s'), 2)} | {ratio(sb.get('cpu_s'), ka.get('cpu_s'))} | |")
        if kind == "warm":
            okcpu = (scpu <= 0.3 * kcpu) if kcpu and scpu is not None else None
            targets.append(("broker CPU s per GB cleaned, warm ≤ 0.3× Kafka", okcpu))
            w(f"| broker CPU s per GB cleaned | {fmt(kcpu, 2)} | {fmt(scpu, 2)} | {ratio(scpu, kcpu)} | ≤ 0.3×: {verdict(okcpu)} |")
        else:
            w(f"| broker CPU s per GB cleaned | {fmt(kcpu, 2)} | {fmt(scpu, 2)} | {ratio(scpu, kcpu)} | |")
        w(f"| peak RSS MB | {fmt(ka.get('peak_rss_mb'))} | {fmt(sb.get('peak_rss_mb'))} | {ratio(sb.get('peak_rss_mb'), ka.get('peak_rss_mb'))} | |")
        for who, ph in ((K, ka), (S, sb)):
            if ph.get("peak_rss_mb") is not None:
                peaks[who] = max(peaks.get(who, 0), ph["peak_rss_mb"])
        io_rows(w, a, b)
        w(f"| final size MB (segments) | {fmt(mb(a.get('log_bytes_after')))} ({fmt(a.get('segments_after'))}) | {fmt(mb(b.get('log_bytes_after')))} ({fmt(b.get('segments_after'))}) | {ratio(b.get('log_bytes_after'), a.get('log_bytes_after'))} | |")
        w(f"| records left / distinct keys | {fmt(get(a, 'verify', 'records_total'))} / {fmt(get(a, 'verify', 'distinct_keys_total'))} | {fmt(get(b, 'verify', 'records_total'))} / {fmt(get(b, 'verify', 'distinct_keys_total'))} | | |")
        w(f"| one record per key below the checkpoint | {fmt(a.get('one_record_per_key'))} | {fmt(b.get('one_record_per_key'))} | | |")
    kp, sp = peaks.get(K), peaks.get(S)
    okrss = (sp <= kp / 10) if kp and sp else None
    targets.append(("peak RSS of the cleans ≤ 1/10 of Kafka's", okrss))
    w(f"| **peak RSS of the cleans MB** (the larger of the two) | {fmt(kp)} | {fmt(sp)} | {ratio(sp, kp)} | ≤ 0.1×: {verdict(okrss)} |")
    if not disk:
        w("\nNo disk limit: the raw disk phase did not run (`--phases disk,...`).")
    if kc.get("kafka_cleaner_log"):
        w(f"\nKafka's own cleaner log: {kc['kafka_cleaner_log']}")
    if not sc:
        w("\nsediment: skipped (no cleaner in this build, or it failed: see above).")
    w("")
    profile_section(w, kc, sc)
    return targets


def cold_drop(kc: dict, sc: dict) -> str:
    how = {get(c, "cold", "cache_drop") for c in (kc, sc)} - {None}
    if how == {"drop_caches"}:
        return "`sync; echo 1 > /proc/sys/vm/drop_caches`"
    if how == {"fadvise"}:
        return "sync, then posix_fadvise(DONTNEED) on each file of the partition"
    return "drop_caches or fadvise: " + ", ".join(sorted(how)) if how else "–"


def profile_section(w, kc: dict, sc: dict) -> None:
    """The top self-time entries of perf during each broker's warm clean."""
    cols = [(name, get(c, "warm", "profile")) for name, c in (("Kafka", kc), ("sediment", sc))]
    write_profiles(w, cols, "the warm clean")


def write_profiles(w, cols: list, span: str) -> None:
    """Top self-time entries of perf for each (broker name, profile) in cols,
    recorded over `span`."""
    if not any(p for _, p in cols):
        return
    cols = [(name, p if "symbols" in p else {"symbols": p}) for name, p in cols if p]
    w(f"### Where the CPU of {span} goes (`--profile-clean`)\n")
    w(f"`perf record -g -p <broker pid>` for the span of {span}; `perf report --no-children --sort dso,symbol`: "
      "self time, top entries by thread, by shared object, then by symbol. Kafka's JIT-compiled Java code has no symbols without a perf map agent (it shows as "
      f"`[JIT] tid <n>`), so its rows say which library, not which method. The figures of {span} "
      "above were taken with perf attached ([k]: kernel).\n")
    for name, prof in cols:
        for key, what in (("threads", "thread"), ("dsos", "shared object")):
            if prof.get(key):
                w(f"| {name}: % of samples | {what} |\n|---:|---|")
                for row in prof[key]:
                    w(f"| {row['percent']:.1f} | `{row['name']}` |")
                w("")
        w(f"| {name}: % of samples | shared object | symbol |\n|---:|---|---|")
        for row in prof["symbols"]:
            sym = row["symbol"].replace("|", "\\|")
            w(f"| {row['percent']:.1f} | {row['dso']} | {'[k] ' if row.get('kernel') else ''}`{sym}` |")
        w("")


def changelog_section(w, env: dict, kl: dict, sl: dict) -> list:
    """Per round of the changelog workload: time to fully cleaned and the bytes
    the cleaner moved, against the bytes the round's records took."""
    c = env.get("changelog") or {}
    targets: list = []
    hot = kl.get("hot_keys") or sl.get("hot_keys")
    garbage = c.get("garbage_ratio")
    on = "" if garbage is None else f"; sediment's topic with sediment.compaction.min.segment.garbage.ratio={garbage}"
    w(f"## Changelog: {c.get('keys', 0):,} keys written once, then {c.get('rounds')} rounds updating the same "
      f"{fmt(hot)} hot keys ({c.get('hot_percent')}%), {c.get('value_bytes')}-byte values, 1 partition{on}\n")
    w("Round 0 writes every key once (in a shuffled order); each later round updates the same hot keys, spread evenly over "
      "the key space (and so over every segment of round 0). Each round is written with min.cleanable.dirty.ratio=1.0 "
      "(the cleaner waits); then the active segment is rolled (segment.ms=1 and a marker record, then segment.ms back to "
      "7 days) and the ratio set to 0 (before round 0 the broker cleans a small warm-up topic, as in the compaction phase): the round is timed from that change to fully cleaned (the checkpoint at the new "
      "active segment, no .cleaned/.swap left), and the broker's /proc/<pid>/io is taken over the same span (see the "
      "compaction section for what the fields count). *Bytes changed* (record bytes): what the round's records added to the "
      "log (its size on disk after the round's writes less its size before them). Round 1 "
      "supersedes hot keys in every segment of round 0, so every cleaner must rewrite those segments once; from round 2 "
      "on the superseded records are only in the previous round's survivors.")
    if garbage is not None:
        w(f"With sediment.compaction.min.segment.garbage.ratio={garbage}, sediment leaves a segment of the clean region "
          "unrewritten while its superseded share is below the ratio, so superseded records stay below its checkpoint "
          "by design (its *one record per key* may read no); Kafka's topic has no such config.")
    w("")
    w("| | Kafka | sediment | ratio | target |\n|---|---:|---:|---:|---|")
    kr, sr = kl.get("rounds") or [], sl.get("rounds") or []
    for i in range(max(len(kr), len(sr))):
        a, b = (kr[i] if i < len(kr) else {}), (sr[i] if i < len(sr) else {})
        what = "every key once" if i == 0 else "hot keys updated"
        w(f"| **round {i}** ({what}): records, bytes changed MB | {fmt(a.get('records'))}, {fmt(mb(a.get('record_bytes')))} | "
          f"{fmt(b.get('records'))}, {fmt(mb(b.get('record_bytes')))} | | |")
        ks, ss = a.get("seconds"), b.get("seconds")
        okt = (ss * 5 <= ks) if ks and ss is not None and i > 0 else None
        sw, srec = get(b, "io", "write_bytes"), b.get("record_bytes")
        okw = (sw <= 2 * srec) if sw is not None and srec and i > 0 else None
        if i > 0:
            targets += [(f"changelog round {i}: time to fully cleaned ≤ 1/5 of Kafka's", okt),
                        (f"changelog round {i}: sediment bytes written ≤ 2× the round's record bytes", okw)]
        w(f"| seconds from config change to fully cleaned | {fmt(ks, 2)} | {fmt(ss, 2)} | {ratio(ss, ks)} | {'≤ 0.2×: ' + verdict(okt) if i else ''} |")
        io_rows(w, a, b)
        kwr = get(a, "io", "write_bytes")
        w(f"| bytes written / bytes changed | {fmt(kwr / a['record_bytes'] if kwr is not None and a.get('record_bytes') else None, 2)} | "
          f"{fmt(sw / srec if sw is not None and srec else None, 2)} | | {'≤ 2: ' + verdict(okw) if i else ''} |")
        w(f"| broker CPU s | {fmt(a.get('cpu_s'), 2)} | {fmt(b.get('cpu_s'), 2)} | {ratio(b.get('cpu_s'), a.get('cpu_s'))} | |")
        w(f"| log after the clean MB | {fmt(mb(a.get('log_bytes_after')))} | {fmt(mb(b.get('log_bytes_after')))} | | |")
    w(f"| **after the last round**: one record per key below the checkpoint | {fmt(kl.get('one_record_per_key'))} | {fmt(sl.get('one_record_per_key'))} | | |")
    w("")
    cols = [(name, next((r.get("profile") for r in rounds if r.get("profile")), None))
            for name, rounds in (("Kafka", kr), ("sediment", sr))]
    write_profiles(w, cols, "changelog round 1")
    return targets


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
