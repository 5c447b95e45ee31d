#!/usr/bin/env bash
# Usage: scripts/kafka-tool.sh MAIN_CLASS [args...]
#
# Runs one of Apache Kafka's Java tools from the jars fetched by scripts/kafka-jars.sh
# (fetched on first use). Examples:
#   scripts/kafka-tool.sh kafka.tools.DumpLogSegments --files 00000000000000000000.log --deep-iteration --print-data-log
#   scripts/kafka-tool.sh kafka.tools.StorageTool format -t "$(scripts/kafka-tool.sh kafka.tools.StorageTool random-uuid)" -c server.properties --standalone
#   scripts/kafka-tool.sh kafka.Kafka server.properties
#   scripts/kafka-tool.sh org.apache.kafka.tools.ConsoleProducer --bootstrap-server 127.0.0.1:9092 --topic t
#
# Environment:
#   KAFKA_VERSION    Kafka version to use (default 4.1.2)
#   KAFKA_HEAP_OPTS  JVM heap options (default -Xmx512m)
#   KAFKA_OPTS       extra JVM options (optional)
#   KAFKA_LOG_LEVEL  Log4j root level, to stderr (default WARN)
#   JAVA             java binary (default $JAVA_HOME/bin/java, else java on PATH)
set -euo pipefail

if [ $# -lt 1 ] || [ "$1" = "-h" ] || [ "$1" = "--help" ]; then
  sed -n '2,/^set -euo/{/^set -euo/d;s/^# \{0,1\}//;p}' "${BASH_SOURCE[0]}" >&2
  exit 2
fi
main_class="$1"
shift

here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd -P)"
root="$(cd "$here/.." && pwd -P)"
jars="$("$here/kafka-jars.sh" "${KAFKA_VERSION:-4.1.2}")"

# Tools Kafka moved between releases keep their old names here: after 4.1
# ConfigCommand, DumpLogSegments and others left the Scala core (kafka.admin,
# kafka.tools) for the tools jar (org.apache.kafka.tools). A jar's entry names
# are stored uncompressed, so grep finds a class without unzip.
case "$main_class" in
  kafka.admin.* | kafka.tools.*)
    moved="org.apache.kafka.tools.${main_class##*.}"
    if ! grep -qa "${main_class//.//}.class" "$jars"/kafka_2.13-[0-9]*.jar &&
      grep -qa "${moved//.//}.class" "$jars"/kafka-tools-[0-9]*.jar; then
      main_class="$moved"
    fi
    ;;
esac

if [ -n "${JAVA:-}" ]; then
  java="$JAVA"
elif [ -n "${JAVA_HOME:-}" ] && [ -x "$JAVA_HOME/bin/java" ]; then
  java="$JAVA_HOME/bin/java"
else
  java=java
fi

# Word-split the option strings on purpose, like Kafka's own kafka-run-class.sh.
read -r -a heap_opts <<<"${KAFKA_HEAP_OPTS:--Xmx512m}"
read -r -a extra_opts <<<"${KAFKA_OPTS:-}"

exec "$java" "${heap_opts[@]}" "${extra_opts[@]}" \
  -Djava.awt.headless=true \
  -Dlog4j2.configurationFile="$root/tools/kafka-jars/log4j2.properties" \
  -cp "$jars/*" \
  "$main_class" "$@"
