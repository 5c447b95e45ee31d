#!/usr/bin/env bash
# Creates target/pyenv with the Python Kafka clients the interop tests drive
# (and moto, the S3 server process the tiered storage tests run on loopback),
# pinned so every machine tests the same client code. Prints the venv's python.
set -euo pipefail
cd "$(dirname "$0")/.."
venv=target/pyenv
stamp=$venv/.sediment-stamp
want="confluent-kafka==2.16.1 kafka-python==3.0.12 lz4==4.4.4 zstandard==0.23.0 cramjam==2.10.0 python-snappy==0.7.3 moto[server]==5.2.5"
mkdir -p target
exec 9>target/.pyenv.lock
flock 9
if [ ! -f "$stamp" ] || [ "$(cat "$stamp")" != "$want" ]; then
  python3 -m venv "$venv" >&2 || { rm -rf "$venv"; python3 -m venv --without-pip "$venv" >&2; }
  "$venv/bin/python" -m pip install -q --disable-pip-version-check $want >&2
  echo "$want" > "$stamp"
fi
echo "$PWD/$venv/bin/python"
