//! The installable artifacts agree with each other (issue 21): the Dockerfile builds the binary
//! the release archives and the tests use, and the krew manifest names real archives.
//! No container runtime runs here, so the Dockerfile is checked as text; the release archives are
//! built by `scripts/release.sh` in `.ci/run`, which checks them against the krew manifest it
//! writes.

use std::path::{Path, PathBuf};

use serde_json::Value;

fn workspace() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../..")
}

fn read(path: &str) -> String {
    std::fs::read_to_string(workspace().join(path)).unwrap_or_else(|e| panic!("{path}: {e}"))
}

/// Joins continued lines (`\` at the end) as the shell and Docker do.
fn logical_lines(text: &str) -> Vec<String> {
    let mut lines = Vec::new();
    let mut current = String::new();
    for line in text.lines() {
        let trimmed = line.trim();
        if trimmed.starts_with('#') && current.is_empty() {
            continue;
        }
        match trimmed.strip_suffix('\\') {
            Some(start) => {
                current.push_str(start);
                current.push(' ');
            }
            None => {
                current.push_str(trimmed);
                lines.push(std::mem::take(&mut current));
            }
        }
    }
    lines
}

/// The `cargo build …` command in a line, up to the next `&&`, `;` or end.
fn cargo_build(line: &str) -> Option<String> {
    let start = line.find("cargo build")?;
    let rest = &line[start..];
    let end = rest.find(['&', ';']).unwrap_or(rest.len());
    Some(rest[..end].split_whitespace().collect::<Vec<_>>().join(" "))
}

#[test]
fn the_dockerfile_builds_the_binary_the_release_archives_and_tests_use() {
    let dockerfile = read("Dockerfile");
    let lines = logical_lines(&dockerfile);
    let docker_build: Vec<String> = lines.iter().filter_map(|l| cargo_build(l)).collect();
    assert_eq!(docker_build.len(), 1, "{docker_build:?}");
    let release = read("scripts/release.sh");
    let release_build: Vec<String> = logical_lines(&release)
        .iter()
        .filter_map(|l| cargo_build(l))
        .collect();
    assert_eq!(release_build.len(), 1, "{release_build:?}");
    let amd64 = release_build[0].replace("\"$triple\"", "x86_64-unknown-linux-gnu");
    assert_eq!(
        docker_build[0], amd64,
        "the Dockerfile and scripts/release.sh build differently"
    );
    // What the tests build: the crate `lien` with its default features, from Cargo.lock.
    for flag in ["--locked", "-p lien", "--release"] {
        assert!(amd64.contains(flag), "{amd64} lacks {flag}");
    }
    for flag in ["--features", "--no-default-features", "--all-features"] {
        assert!(!amd64.contains(flag), "{amd64} changes the features");
    }

    // Both drop the line tables the same way (the code is the tests' code either way).
    assert!(
        lines
            .iter()
            .any(|l| l.contains("strip --strip-debug /lien")),
        "the Dockerfile keeps the debug line tables"
    );
    assert!(
        release.contains("--strip-debug \"$stage/lien\""),
        "scripts/release.sh keeps the debug line tables"
    );

    // Multi-stage: a build stage on the project's toolchain, a runtime stage without it.
    let froms: Vec<&String> = lines.iter().filter(|l| l.starts_with("FROM ")).collect();
    assert_eq!(froms.len(), 2, "{froms:?}");
    assert!(froms[0].ends_with(" AS build"), "{}", froms[0]);
    let rust = froms[0]
        .strip_prefix("FROM rust:")
        .and_then(|r| r.split('-').next())
        .expect("the build stage is FROM rust:<version>-…");
    let cargo_toml = read("Cargo.toml");
    let msrv = cargo_toml
        .lines()
        .find_map(|l| l.strip_prefix("rust-version = \""))
        .and_then(|v| v.strip_suffix('"'))
        .expect("rust-version in Cargo.toml");
    let numbers = |v: &str| -> Vec<u32> { v.split('.').filter_map(|n| n.parse().ok()).collect() };
    assert!(
        numbers(rust) >= numbers(msrv),
        "rust:{rust} is older than rust-version {msrv}"
    );
    assert!(
        !froms[1].contains("rust:"),
        "the runtime image carries the toolchain"
    );
    assert!(
        lines
            .iter()
            .any(|l| l.starts_with("COPY --from=build /lien /lien"))
    );

    // Non-root, as the Deployment says.
    let deployment = lien::manifests::objects()
        .into_iter()
        .find(|o| o["kind"] == "Deployment")
        .expect("a Deployment");
    let pod = &deployment["spec"]["template"]["spec"]["securityContext"];
    let user = lines
        .iter()
        .filter_map(|l| l.strip_prefix("USER "))
        .next_back()
        .expect("the runtime stage sets USER");
    assert_eq!(
        user,
        format!("{}:{}", pod["runAsUser"], pod["runAsGroup"]),
        "the image's user is not the Deployment's"
    );
    assert_ne!(pod["runAsUser"], Value::from(0));

    // The tag the Dockerfile says to build is the image `lien manifests` names by default.
    assert!(
        dockerfile.contains(&format!("docker build -t {} .", lien::manifests::image())),
        "the Dockerfile's build command does not tag {}",
        lien::manifests::image()
    );
    // The build context leaves out build outputs.
    let ignore = read(".dockerignore");
    assert!(ignore.lines().any(|l| l == "target/"), "{ignore}");
}

#[test]
fn the_krew_manifest_names_release_archives_by_their_sha256() {
    let text = read("deploy/krew/lien.yaml");
    assert!(
        !text.contains("{{"),
        "deploy/krew/lien.yaml is a template: run scripts/release.sh"
    );
    let manifest: Value = serde_yaml_ng::from_str(&text).expect("YAML");
    let tag = format!("v{}", env!("CARGO_PKG_VERSION"));
    assert_eq!(manifest["kind"], "Plugin");
    assert_eq!(manifest["metadata"]["name"], "lien");
    assert_eq!(
        manifest["spec"]["version"],
        tag.as_str(),
        "the manifest is of another release: run scripts/release.sh"
    );
    let platforms = manifest["spec"]["platforms"].as_array().expect("platforms");
    assert!(!platforms.is_empty());
    for p in platforms {
        let arch = p["selector"]["matchLabels"]["arch"].as_str().expect("arch");
        assert_eq!(p["selector"]["matchLabels"]["os"], "linux");
        let archive = format!("lien-{tag}-linux-{arch}.tar.gz");
        let uri = p["uri"].as_str().expect("uri");
        assert!(
            uri.ends_with(&format!("/{tag}/{archive}")),
            "{uri} is not {archive}"
        );
        let sha = p["sha256"].as_str().expect("sha256");
        assert!(
            sha.len() == 64 && sha.chars().all(|c| c.is_ascii_hexdigit()),
            "{sha}"
        );
        assert_eq!(
            p["bin"], "lien",
            "krew links the archive's `lien` as kubectl-lien"
        );
        // Where this checkout's release archives are (after scripts/release.sh), they are the
        // ones named.
        let local = workspace().join("dist").join(format!("{archive}.sha256"));
        if let Ok(line) = std::fs::read_to_string(&local) {
            assert_eq!(
                line.split_whitespace().next(),
                Some(sha),
                "dist/{archive} is not the archive deploy/krew/lien.yaml names"
            );
        }
    }
}
