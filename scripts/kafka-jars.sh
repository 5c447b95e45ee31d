#!/usr/bin/env bash
# Usage: scripts/kafka-jars.sh [VERSION]
#
# Makes sure Apache Kafka's jars (broker, tools, and a Log4j 2 backend), as listed
# in tools/kafka-jars/pom.xml, are copied from Maven Central into
# <repo>/target/kafka-jars/VERSION/, and prints that directory's absolute path as
# its only stdout output. Progress and errors go to stderr.
#
# VERSION defaults to $KAFKA_VERSION, then 4.1.2. Idempotent: a directory is only
# trusted once the stamp file written at the very end of a copy is there and
# matches the pom, so an interrupted copy is redone. Set MVN to use another mvn.
set -euo pipefail

root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd -P)"
version="${1:-${KAFKA_VERSION:-4.1.2}}"
pom="$root/tools/kafka-jars/pom.xml"
base="$root/target/kafka-jars"
dir="$base/$version"
stamp="$dir/.complete"
mvn="${MVN:-mvn}"

case "$version" in
  ''|*/*|.*) echo "kafka-jars: bad version '$version'" >&2; exit 2 ;;
esac

# The stamp records the version and the pom's checksum: editing the pom redoes the copy.
want="kafka.version=$version pom-sha256=$(sha256sum "$pom" | cut -d' ' -f1)"

is_complete() {
  [ -f "$stamp" ] && [ "$(cat "$stamp")" = "$want" ] &&
    compgen -G "$dir/kafka_2.13-$version.jar" >/dev/null
}

if is_complete; then
  printf '%s\n' "$dir"
  exit 0
fi

mkdir -p "$base"
# Serialise concurrent callers (e.g. parallel tests) on one lock when flock exists.
if command -v flock >/dev/null 2>&1; then
  exec 9>"$base/.lock"
  flock 9
  if is_complete; then   # another caller finished it while we waited
    printf '%s\n' "$dir"
    exit 0
  fi
  # Holding the lock, no other copy is running: drop scratch dirs of killed runs.
  rm -rf "$base/.tmp-$version-"*
fi

command -v "$mvn" >/dev/null 2>&1 || {
  echo "kafka-jars: '$mvn' not found; install Maven (apt-get install maven) and Java 17+" >&2
  exit 1
}

# Copy into a scratch dir, stamp it, then move it into place, so $dir is either
# absent or complete (a stale or half-done $dir is removed first).
tmp="$base/.tmp-$version-$$"
trap 'rm -rf "$tmp"' EXIT
rm -rf "$tmp" "$dir"
echo "kafka-jars: fetching Apache Kafka $version jars with Maven into $dir ..." >&2
start=$(date +%s)
# Maven 3.8 prints stray ANSI resets even with -B, so keep its output in a log
# and show that (cleaned) only if it fails.
log="$base/.mvn-$version.log"
if ! "$mvn" -q -B -Dstyle.color=never -f "$pom" -Dkafka.version="$version" \
     dependency:copy-dependencies -DoutputDirectory="$tmp" >"$log" 2>&1; then
  sed 's/\x1b\[[0-9;]*m//g' "$log" >&2
  echo "kafka-jars: Maven failed to fetch Kafka $version (full log: $log)" >&2
  exit 1
fi
compgen -G "$tmp/kafka_2.13-$version.jar" >/dev/null || {
  echo "kafka-jars: Maven finished but $tmp/kafka_2.13-$version.jar is missing" >&2
  exit 1
}
printf '%s\n' "$want" >"$tmp/.complete"
mv "$tmp" "$dir"
rm -f "$log"
trap - EXIT
echo "kafka-jars: $(find "$dir" -name '*.jar' | wc -l) jars, $(du -sh "$dir" | cut -f1), in $(( $(date +%s) - start ))s" >&2

printf '%s\n' "$dir"
