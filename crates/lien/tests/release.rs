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
    let amd64 = release_build[0].clone();
    assert_eq!(
        docker_build[0], amd64,
        "the Dockerfile and scripts/release.sh build differently"
    );
    // Both for the musl target (a static binary, on an image without libc).
    assert!(
        lines
            .iter()
            .any(|l| l.contains("triple=\"$(uname -m)-unknown-linux-musl\"")),
        "the Dockerfile does not build for musl"
    );
    assert!(
        release.contains("libc=musl") && release.contains("-unknown-linux-$libc"),
        "scripts/release.sh does not build for musl by default"
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

    // Multi-stage: a build stage on the project's toolchain, two runtime stages without it (the
    // release's, from the archives' binaries; and the checkout's, the default, last).
    let froms: Vec<&String> = lines.iter().filter(|l| l.starts_with("FROM ")).collect();
    assert_eq!(froms.len(), 3, "{froms:?}");
    assert!(froms[1].ends_with(" AS release") && froms[2].ends_with(" AS image"));
    for runtime in &froms[1..] {
        assert!(
            runtime.contains("distroless/static"),
            "a runtime stage with more than a static binary needs: {runtime}"
        );
    }
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
        !froms[1].contains("rust:") && !froms[2].contains("rust:"),
        "the runtime image carries the toolchain"
    );
    assert!(
        lines
            .iter()
            .any(|l| l == "COPY --from=dist lien-linux-${TARGETARCH} /lien"),
        "the release stage does not take the archives' binary per platform"
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

/// The release workflow (issue 31, item 6) passes actionlint (with shellcheck on its scripts
/// where installed: CI installs it), every script it runs exists here and is run by CI too, and
/// the image's name is one setting: the registry the image is pushed to is the one the binary
/// (and so `lien manifests` and the chart) is built to name.
#[test]
fn the_release_workflow_passes_actionlint_and_runs_this_repositorys_scripts() {
    let workflow = ".github/workflows/release.yml";
    let tool = std::process::Command::new("bash")
        .arg(workspace().join("scripts/actionlint.sh"))
        .output()
        .expect("bash runs");
    assert!(
        tool.status.success(),
        "scripts/actionlint.sh (go install from the module proxy): {}",
        String::from_utf8_lossy(&tool.stderr)
    );
    let actionlint = String::from_utf8(tool.stdout).expect("UTF-8");
    let out = std::process::Command::new(actionlint.trim())
        .arg(workflow)
        .current_dir(workspace())
        .output()
        .expect("actionlint runs");
    assert!(
        out.status.success(),
        "actionlint {workflow}:\n{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );

    let text = read(workflow);
    let parsed: Value = serde_yaml_ng::from_str(&text).expect("YAML");
    let ci = read(".ci/run");
    let mut scripts = Vec::new();
    for (name, job) in parsed["jobs"].as_object().expect("jobs") {
        for step in job["steps"].as_array().expect("steps") {
            let Some(run) = step["run"].as_str() else {
                assert!(
                    step["uses"].is_string(),
                    "{name}: a step that neither runs nor uses"
                );
                continue;
            };
            for word in run.split_whitespace() {
                if let Some(script) = word.strip_prefix("scripts/") {
                    scripts.push(format!("scripts/{script}"));
                }
            }
        }
    }
    scripts.sort();
    scripts.dedup();
    assert_eq!(
        scripts,
        ["scripts/release-chart.sh", "scripts/release.sh"],
        "the workflow's scripts"
    );
    for script in &scripts {
        let path = workspace().join(script);
        let mode = std::os::unix::fs::PermissionsExt::mode(
            &std::fs::metadata(&path)
                .unwrap_or_else(|e| panic!("{script}: {e}"))
                .permissions(),
        );
        assert!(mode & 0o111 != 0, "{script} is not executable");
        assert!(ci.contains(script.as_str()), "CI does not run {script}");
    }
    // One setting: the workflow's IMAGE is what the archives are built with and what is pushed.
    assert!(parsed["env"]["IMAGE"].is_string(), "no workflow-wide IMAGE");
    assert!(text.contains("LIEN_IMAGE_REPOSITORY: ${{ needs.setup.outputs.image }}"));
    assert!(text.contains("tags: ${{ env.IMAGE }}:${{ env.VERSION }}"));
    assert!(text.contains("target: release") && text.contains("build-contexts: dist=dist/bin"));
}
