# syntax=docker/dockerfile:1
#
# The image examples/cronjob.yaml runs: ghcr.io/kubectl-cilium-gc/kubectl-cilium-gc:v<version>.
#
#   docker build --build-arg VERSION=0.1.0 --build-arg COMMIT=$(git rev-parse --short=12 HEAD) \
#     -t ghcr.io/kubectl-cilium-gc/kubectl-cilium-gc:v0.1.0 .
#   docker push ghcr.io/kubectl-cilium-gc/kubectl-cilium-gc:v0.1.0
#
# VERSION must equal Cargo.toml's version (a test keeps examples/cronjob.yaml's
# tag equal to it); COMMIT ends up in `version` and every report's tool.commit.

ARG RUST_VERSION=1.95

# ---- build: the same release build `cargo install --locked` makes ----
FROM rust:${RUST_VERSION}-bookworm AS build
ARG COMMIT=""
ENV KUBECTL_CILIUM_GC_COMMIT=${COMMIT}
WORKDIR /src
COPY . .
RUN --mount=type=cache,target=/usr/local/cargo/registry \
    --mount=type=cache,target=/src/target \
    cargo build --release --locked --bin kubectl-cilium_gc \
 && install -D -m 0755 target/release/kubectl-cilium_gc /out/kubectl-cilium_gc

# ---- runtime: glibc and CA certificates only, no shell, no package manager ----
FROM gcr.io/distroless/cc-debian12:nonroot
ARG VERSION=0.1.0
ARG COMMIT=""
LABEL org.opencontainers.image.title="kubectl-cilium-gc" \
      org.opencontainers.image.description="Find and safely garbage-collect stale Cilium identities (CiliumIdentity) at a controlled rate" \
      org.opencontainers.image.source="https://github.com/kubectl-cilium-gc/kubectl-cilium-gc" \
      org.opencontainers.image.url="https://github.com/kubectl-cilium-gc/kubectl-cilium-gc" \
      org.opencontainers.image.version="${VERSION}" \
      org.opencontainers.image.revision="${COMMIT}" \
      org.opencontainers.image.licenses="Apache-2.0"
COPY --from=build /out/kubectl-cilium_gc /usr/local/bin/kubectl-cilium_gc
# The distroless "nonroot" user; examples/cronjob.yaml runs as the same uid.
USER 65532:65532
ENTRYPOINT ["/usr/local/bin/kubectl-cilium_gc"]
CMD ["--help"]
