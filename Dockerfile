# Lien's image: a static binary on an empty base, run as a non-root user.
#
#   docker build -t ghcr.io/lien-dev/lien:v0.1.0 .
#
# (CI here has no container runtime and no registry, so the image is not built by CI; the
# Deployment in deploy/ names this tag: see docs/operations.md "Install".)

# Build: musl makes the binary static (rustls, no OpenSSL), so the runtime image needs no libc.
FROM rust:1.89-bookworm AS build
RUN apt-get update && apt-get install -y --no-install-recommends musl-tools \
    && rm -rf /var/lib/apt/lists/* \
    && rustup target add x86_64-unknown-linux-musl
WORKDIR /src
COPY . .
RUN cargo build --release --locked --target x86_64-unknown-linux-musl -p lien \
    && cp target/x86_64-unknown-linux-musl/release/lien /lien

# Run: nothing but the binary. UID/GID 65532 matches the Deployment's securityContext
# (runAsNonRoot, readOnlyRootFilesystem: Lien writes no files; its certificates live in memory).
FROM scratch
COPY --from=build /lien /lien
USER 65532:65532
EXPOSE 8443
ENTRYPOINT ["/lien"]
CMD ["run"]
