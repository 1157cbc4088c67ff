# syntax=docker/dockerfile:1
# sluice: the host binary plus the example plugins, on Debian bookworm.
#
#   docker build -t sluice .
#   docker run --rm sluice --help
#   docker compose up        # Kafka + topics + producer + pipeline (docker-compose.yml)
#
# Needs BuildKit (the default builder since Docker 23) for the cache mounts.

##### builder #####
FROM rust:1.95-bookworm AS builder

# What the C parts of the dependencies need:
# - librdkafka (rdkafka-sys) is built with its ./configure script and make (`make libs` runs
#   its lds-gen.py: python3), with OpenSSL built from source (openssl-src: perl's Configure
#   and make), and zlib and zstd built with cc (libz-sys, zstd-sys);
# - aws-lc-sys (rustls' crypto, through reqwest in iceberg and OpenDAL) uses its cc builder
#   with pregenerated bindings on x86_64 and aarch64 Linux: no cmake, no Go, no clang;
# - ring and SQLite (sqlx) are built with cc.
# No OpenSSL, zlib or zstd headers from Debian. ca-certificates: cargo fetches crates.io over
# HTTPS (the official rust image has it; listed so that a bare builder works too).
RUN apt-get update \
    && apt-get install -y --no-install-recommends build-essential perl python3 ca-certificates \
    && rm -rf /var/lib/apt/lists/*

# rust-toolchain.toml asks for "stable"; use the image's own pinned toolchain instead of
# letting rustup download another one. RUST_VERSION (e.g. 1.95.0) is set by the base image.
ENV RUSTUP_TOOLCHAIN=${RUST_VERSION} \
    CARGO_TERM_COLOR=never
RUN rustup target add wasm32-wasip2

WORKDIR /src
COPY . .

# The plugins: udfs/ is a cargo workspace of its own whose .cargo/config.toml targets
# wasm32-wasip2. Only the example plugins are built and shipped: the test guests in
# udfs/test-guests/ (misbehave, future-version, trap-always, fail-init) misbehave on purpose.
# Target directories are cache mounts, so the artifacts are copied out in the same step, by
# name (the cache may hold test guests from another build).
RUN --mount=type=cache,target=/usr/local/cargo/registry \
    --mount=type=cache,target=/usr/local/cargo/git \
    --mount=type=cache,target=/src/udfs/target \
    set -eux; \
    cd udfs; \
    cargo build --release --locked -p clickstream-validator -p clickstream-enricher -p retail-enricher -p keep-all; \
    mkdir -p /out/plugins; \
    for plugin in clickstream_validator clickstream_enricher retail_enricher keep_all; do \
        cp "target/wasm32-wasip2/release/$plugin.wasm" /out/plugins/; \
    done; \
    ls -l /out/plugins

# The host binary. The release profile keeps line tables for backtraces; with the C
# libraries' debug information that makes a 400 MB file: the debug sections are compressed
# (backtraces still name files and lines), about 160 MB.
RUN --mount=type=cache,target=/usr/local/cargo/registry \
    --mount=type=cache,target=/usr/local/cargo/git \
    --mount=type=cache,target=/src/target \
    set -eux; \
    cargo build --release --locked -p sluice; \
    mkdir -p /out; \
    objcopy --compress-debug-sections=zlib target/release/sluice /out/sluice; \
    chmod 0755 /out/sluice; \
    /out/sluice --version

##### runtime #####
FROM debian:bookworm-slim

RUN apt-get update \
    && apt-get install -y --no-install-recommends ca-certificates \
    && rm -rf /var/lib/apt/lists/*

# A non-root user that owns the warehouse volume. The directory is created (and owned)
# before VOLUME, so a fresh named volume is initialised writable by uid 10001.
RUN groupadd --system --gid 10001 sluice \
    && useradd --system --uid 10001 --gid sluice --home-dir /var/lib/sluice \
        --no-create-home --shell /usr/sbin/nologin sluice \
    && mkdir -p /var/lib/sluice/warehouse \
    && chown -R sluice:sluice /var/lib/sluice

COPY --from=builder /out/sluice /usr/local/bin/sluice
COPY --from=builder /out/plugins/ /opt/sluice/plugins/
COPY examples/ /opt/sluice/examples/
# examples/*/ name plugins by their build path, ../../udfs/target/wasm32-wasip2/release/,
# relative to their folder (pipeline.toml unless SLUICE_PLUGINS is set): point it here.
RUN mkdir -p /opt/sluice/udfs/target/wasm32-wasip2 \
    && ln -s /opt/sluice/plugins /opt/sluice/udfs/target/wasm32-wasip2/release

# Defaults read by examples/retail-clickstream/pipeline.toml (`${VAR:-default}`); the SQLite
# catalog goes to <warehouse>/catalog.db, so everything stays in the volume. The admin API
# (/healthz, /readyz, /status, /metrics, plugin swaps) listens on every interface in the container;
# POST calls also need SLUICE_ADMIN_TOKEN, without it they are refused.
ENV SLUICE_PLUGINS=/opt/sluice/plugins \
    SLUICE_WAREHOUSE=/var/lib/sluice/warehouse \
    SLUICE_ADMIN_LISTEN=0.0.0.0:9464

WORKDIR /opt/sluice
USER sluice:sluice
VOLUME ["/var/lib/sluice"]
EXPOSE 9464

# GET /healthz (liveness: fails when the pipeline's loop is stuck, not while it waits for a
# broker; GET /readyz answers that) on the admin port, with bash's /dev/tcp (no curl in the
# image). Commands
# without an admin API (produce, show, try) are reported unhealthy: disable the check there.
# The first batch waits for plugins to compile and for Kafka: hence the start period.
HEALTHCHECK --interval=15s --timeout=5s --start-period=60s --retries=3 \
    CMD ["bash", "-c", "exec 3<>/dev/tcp/127.0.0.1/${SLUICE_ADMIN_LISTEN##*:} && printf 'GET /healthz HTTP/1.0\\r\\nHost: localhost\\r\\n\\r\\n' >&3 && read -r -t 4 _ status _ <&3 && [ \"$status\" = 200 ]"]

# SIGTERM (docker stop) finishes or abandons the batch in flight and exits 0; a batch can
# wait up to 60 s for the dead-letter topic's acknowledgements: give `docker stop` -t 90
# (docker-compose.yml sets stop_grace_period).
ENTRYPOINT ["sluice"]
CMD ["run", "--config", "/opt/sluice/examples/retail-clickstream/pipeline.toml"]
