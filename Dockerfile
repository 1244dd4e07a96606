# Valkyrie container image.
#
#   docker build -t valkyrie:0.1.0 .
#   docker run -v "$PWD/sentinel.conf:/etc/valkyrie/sentinel.conf:ro" \
#              -v valkyrie-state:/var/lib/valkyrie \
#              -p 26379:26379 -p 12120:12120 -p 9126:9126 valkyrie:0.1.0
#
# Stage 1 builds the release binary with the locked dependency versions;
# stage 2 is a slim Debian with that one binary, run as an unprivileged
# user. The binary needs nothing but glibc: no TLS library. The shell and
# coreutils stay for deploy/'s init container (render.sh).
#
# The base images are build arguments, so that a machine without a
# registry builds from images of its own (scripts/images does):
#   docker build --build-arg BUILDER=... --build-arg BASE=... .
# BUILDER needs cargo and rustc (1.89 or newer) and a C compiler on PATH;
# BASE needs glibc, groupadd and useradd (Debian bookworm or newer).
ARG BUILDER=rust:1.95-slim-bookworm
ARG BASE=debian:bookworm-slim

FROM ${BUILDER} AS build
WORKDIR /src
# The manifests and empty crates first: the dependencies are built in a
# layer of their own, which edits to the sources keep. (benches/ is
# copied because Cargo.toml names its targets; it is not built.)
COPY Cargo.toml Cargo.lock ./
COPY protocol/Cargo.toml protocol/Cargo.toml
COPY core/Cargo.toml core/Cargo.toml
COPY benches benches
RUN mkdir -p src protocol/src core/src \
 && echo 'fn main() {}' > src/main.rs \
 && touch src/lib.rs protocol/src/lib.rs core/src/lib.rs \
 && cargo build --release --locked --bin valkyrie \
 && rm -r src protocol/src core/src
COPY protocol/src protocol/src
COPY core/src core/src
COPY src src
# COPY keeps the files' times, which can be older than the empty crates'
# build: touch them, or cargo would keep the empty binary.
RUN find src protocol/src core/src -name '*.rs' -exec touch {} + \
 && cargo build --release --locked --bin valkyrie \
 && target/release/valkyrie --version

FROM ${BASE}
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
