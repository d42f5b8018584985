# Lien's image: the release binary on a minimal base, run as a non-root user.
#
#   docker build -t lien:0.1.0 .        # the tag `lien manifests` and the chart name by default
#
# The binary is the one the tests and the release archives use: the crate `lien`, default
# features, `--locked`, built by the command below, which crates/lien/tests/release.rs holds
# equal to scripts/release.sh's (both then drop the debug line tables, keeping the symbols). CI here has no container runtime, so it checks this file
# statically (that test); docs/operations.md "Install" says how to push or load the image.

# Build: the toolchain the project builds with (rust-version in Cargo.toml is the least).
FROM rust:1.95-bookworm AS build
WORKDIR /src
COPY . .
RUN cargo build --release --locked -p lien --target x86_64-unknown-linux-gnu \
    && cp target/x86_64-unknown-linux-gnu/release/lien /lien \
    && strip --strip-debug /lien

# Run: glibc and libgcc only (what the binary links; rustls, no OpenSSL), no shell, no package
# manager. UID/GID 65532 ("nonroot") matches the Deployment's securityContext (runAsNonRoot,
# readOnlyRootFilesystem: Lien writes no files; its certificates live in memory).
FROM gcr.io/distroless/cc-debian12:nonroot
COPY --from=build /lien /lien
USER 65532:65532
EXPOSE 8443
ENTRYPOINT ["/lien"]
CMD ["run"]
