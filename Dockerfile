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

# librdkafka (bundled by rdkafka-sys) is built with its ./configure script and make; SQLite
# (sqlx), zstd and ring are built with cc. No cmake, no OpenSSL, no zlib needed.
RUN apt-get update \
    && apt-get install -y --no-install-recommends build-essential python3 perl \
    && rm -rf /var/lib/apt/lists/*

# rust-toolchain.toml asks for "stable"; use the image's own pinned toolchain instead of
# letting rustup download another one. RUST_VERSION (e.g. 1.95.0) is set by the base image.
ENV RUSTUP_TOOLCHAIN=${RUST_VERSION} \
    CARGO_TERM_COLOR=never
RUN rustup target add wasm32-wasip2

WORKDIR /src
COPY . .

# The plugins: udfs/ is a cargo workspace of its own whose .cargo/config.toml targets
# wasm32-wasip2. The test guests (deliberately misbehaving plugins) are left out.
# Target directories are cache mounts, so the artifacts are copied out in the same step.
RUN --mount=type=cache,target=/usr/local/cargo/registry \
    --mount=type=cache,target=/usr/local/cargo/git \
    --mount=type=cache,target=/src/udfs/target \
    set -eux; \
    cd udfs; \
    cargo build --release --locked --workspace --exclude misbehave --exclude future-version; \
    mkdir -p /out/plugins; \
    cp target/wasm32-wasip2/release/*.wasm /out/plugins/; \
    ls -l /out/plugins

# The host binary.
RUN --mount=type=cache,target=/usr/local/cargo/registry \
    --mount=type=cache,target=/usr/local/cargo/git \
    --mount=type=cache,target=/src/target \
    set -eux; \
    cargo build --release --locked -p sluice; \
    install -D -m 0755 target/release/sluice /out/sluice; \
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
# catalog goes to <warehouse>/catalog.db, so everything stays in the volume.
ENV SLUICE_PLUGINS=/opt/sluice/plugins \
    SLUICE_WAREHOUSE=/var/lib/sluice/warehouse

WORKDIR /opt/sluice
USER sluice:sluice
VOLUME ["/var/lib/sluice"]

ENTRYPOINT ["sluice"]
CMD ["run", "--config", "/opt/sluice/examples/retail-clickstream/pipeline.toml"]
