# Lien's image: a static `lien` on a base with no libc, no shell and no package manager, run as a
# non-root user. Two ways to the same image:
#
#   docker build -t lien:0.1.0 .        # from this checkout (the last stage, `image`); the tag
#                                       # `lien manifests` and the chart name by default
#   docker buildx build --platform linux/amd64,linux/arm64 --target release \
#       --build-context dist=dist/bin -t REGISTRY/lien:0.1.0 --push .
#                                       # the release's (.github/workflows/release.yml): the very
#                                       # binaries of the release archives, one per platform
#
# The binary is the one the tests and the release archives use: the crate `lien`, default
# features, `--locked`, built by the command below, which crates/lien/tests/release.rs holds
# equal to scripts/release.sh's (both link musl in statically, then drop the debug line tables,
# keeping the symbols). CI here has no container runtime, so it checks this file statically
# (that test); docs/operations.md "The image" says how to push or load it.

# Build: the toolchain the project builds with (rust-version in Cargo.toml is the least), for the
# musl target of the machine building (native under buildx's emulation for another platform).
FROM rust:1.95-bookworm AS build
RUN apt-get update && apt-get install -y --no-install-recommends musl-tools \
    && rm -rf /var/lib/apt/lists/*
WORKDIR /src
COPY . .
RUN triple="$(uname -m)-unknown-linux-musl" && rustup target add "$triple" \
    && cargo build --release --locked -p lien --target "$triple" \
    && cp "target/$triple/release/lien" /lien \
    && strip --strip-debug /lien

# The release: each platform's binary from the archives scripts/release.sh built (the build
# context `dist` holds lien-linux-amd64 and lien-linux-arm64), so the image runs exactly what the
# archives and their signatures are of.
FROM gcr.io/distroless/static-debian12:nonroot AS release
ARG TARGETARCH
COPY --from=dist lien-linux-${TARGETARCH} /lien
USER 65532:65532
EXPOSE 8443
ENTRYPOINT ["/lien"]
CMD ["run"]

# From the checkout: nothing but the binary. UID/GID 65532 ("nonroot") matches the Deployment's
# securityContext (runAsNonRoot, readOnlyRootFilesystem: Lien writes no files; its certificates
# live in memory).
FROM gcr.io/distroless/static-debian12:nonroot AS image
COPY --from=build /lien /lien
USER 65532:65532
EXPOSE 8443
ENTRYPOINT ["/lien"]
CMD ["run"]
