# Valkyrie container image.
#
#   docker build -t valkyrie:0.1.0 .
#   docker run -v "$PWD/sentinel.conf:/etc/valkyrie/sentinel.conf:ro" \
#              -v valkyrie-state:/var/lib/valkyrie \
#              -p 26379:26379 -p 12120:12120 -p 9126:9126 valkyrie:0.1.0
#
# Stage 1 builds the release binary with the locked dependency versions;
# stage 2 is a slim Debian with that one binary, run as an unprivileged
# user. The binary needs nothing but glibc: no TLS library, no shell tools.

FROM rust:1.95-slim-bookworm AS build
WORKDIR /src
# The manifests first, so the dependency layer is cached across source edits.
COPY Cargo.toml Cargo.lock ./
COPY protocol/Cargo.toml protocol/Cargo.toml
COPY protocol/src protocol/src
COPY core/Cargo.toml core/Cargo.toml
COPY core/src core/src
COPY src src
COPY benches benches
RUN cargo build --release --locked --bin valkyrie

FROM debian:bookworm-slim
# A fixed numeric id, so Kubernetes' runAsNonRoot can verify it.
RUN groupadd --system --gid 10001 valkyrie \
 && useradd --system --uid 10001 --gid 10001 --no-create-home \
        --home-dir /nonexistent --shell /usr/sbin/nologin valkyrie \
 && mkdir -p /etc/valkyrie /var/lib/valkyrie \
 && chown 10001:10001 /var/lib/valkyrie
COPY --from=build /src/target/release/valkyrie /usr/local/bin/valkyrie
USER 10001:10001
# Sentinel protocol, topology push (index), admin HTTP (/metrics, /healthz, /readyz).
EXPOSE 26379 12120 9126
# The configuration (read only; Valkyrie never rewrites it) and the state
# file (epochs, current master, failover in progress: keep it).
VOLUME ["/etc/valkyrie", "/var/lib/valkyrie"]
ENV VALKYRIE_DIR=/var/lib/valkyrie
ENTRYPOINT ["/usr/local/bin/valkyrie"]
CMD ["/etc/valkyrie/sentinel.conf"]
