# sediment: a Kafka-compatible broker built around log compaction.
#
#   docker build -t sediment .
#   docker run -p 9092:9092 -p 9404:9404 -v sediment-data:/var/lib/sediment sediment
#
# Configuration: /etc/sediment/server.toml (config/docker.toml; mount your own
# over it), then the whitespace-separated key=value pairs of $SEDIMENT_OVERRIDES,
# then any --override arguments after `serve`, e.g.
#   -e SEDIMENT_OVERRIDES="advertised.listeners=PLAINTEXT://broker.example:9092 num.partitions=6"
# docker/docker-compose.yml runs it next to Prometheus and Grafana.
# scripts/docker-smoke.sh runs this file's build and start commands outside
# Docker (it reads them from here) and checks that the broker answers.

FROM rust:1-slim-bookworm AS build
WORKDIR /src
# Dependencies first, against stub sources, so that a change to src/ reuses
# the cached dependency layer.
COPY Cargo.toml Cargo.lock ./
COPY vendor vendor
RUN mkdir -p src benches \
 && echo 'fn main() {}' > src/main.rs && touch src/lib.rs \
 && echo 'fn main() {}' > benches/log_throughput.rs && echo 'fn main() {}' > benches/cleaner_throughput.rs \
 && cargo build --release --locked --bin sediment \
 && rm -rf src benches target/release/sediment target/release/deps/sediment-* target/release/deps/libsediment-* target/release/.fingerprint/sediment-*
COPY benches benches
COPY src src
RUN cargo build --release --locked --bin sediment

FROM debian:bookworm-slim
RUN useradd --system --uid 10001 --home-dir /var/lib/sediment --shell /usr/sbin/nologin sediment \
 && mkdir -p /var/lib/sediment/data /etc/sediment \
 && chown -R sediment:sediment /var/lib/sediment
COPY --from=build /src/target/release/sediment /usr/local/bin/sediment
COPY config/docker.toml /etc/sediment/server.toml
USER sediment
WORKDIR /var/lib/sediment
VOLUME ["/var/lib/sediment"]
# 9092: Kafka protocol; 9404: Prometheus /metrics and /cleaner-status (metrics.listen).
EXPOSE 9092 9404
ENV SEDIMENT_CONFIG=/etc/sediment/server.toml
# Probes the Kafka port from inside the container (ApiVersions round trip).
HEALTHCHECK --interval=10s --timeout=5s --start-period=30s --retries=3 \
  CMD ["/usr/local/bin/sediment", "health", "--bootstrap-server", "127.0.0.1:9092"]
# SIGTERM: connections drain, the cleaner stops, logs are flushed and the
# clean-shutdown marker written (give it `docker stop -t 30`).
STOPSIGNAL SIGTERM
ENTRYPOINT ["/usr/local/bin/sediment"]
CMD ["serve"]
