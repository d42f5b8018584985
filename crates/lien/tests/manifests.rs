//! `kubectl apply -k deploy/` installs exactly what `lien manifests` prints (issue 12): the
//! kustomization is rendered by the real kubectl and compared object by object.

use std::path::Path;
use std::process::Command;

use serde_json::Value;

/// YAML has one kind of number: `0` and `0.0` are the same value (the CRDs' `minimum: 0.0` is
/// written back by kustomize as `0`).
fn normalized(value: Value) -> Value {
    match value {
        Value::Number(n) => match n.as_f64() {
            Some(f) if f.fract() == 0.0 && f.abs() < 9.0e15 => Value::from(f as i64),
            _ => Value::Number(n),
        },
        Value::Array(items) => Value::Array(items.into_iter().map(normalized).collect()),
        Value::Object(map) => {
            Value::Object(map.into_iter().map(|(k, v)| (k, normalized(v))).collect())
        }
        other => other,
    }
}

fn sorted(objects: Vec<Value>) -> Vec<Value> {
    let mut objects: Vec<Value> = objects.into_iter().map(normalized).collect();
    let key = |o: &Value| {
        (
            o["kind"].as_str().unwrap_or_default().to_owned(),
            o["metadata"]["namespace"]
                .as_str()
                .unwrap_or_default()
                .to_owned(),
            o["metadata"]["name"]
                .as_str()
                .unwrap_or_default()
                .to_owned(),
        )
    };
    objects.sort_by_key(key);
    objects
}

#[test]
fn kustomize_renders_the_same_objects_as_lien_manifests() {
    let deploy = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../deploy");
    let out = Command::new("kubectl")
        .arg("kustomize")
        .arg(&deploy)
        .output()
        .expect("kubectl is installed (.ci/run installs it)");
    assert!(
        out.status.success(),
        "kubectl kustomize failed: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    let text = String::from_utf8(out.stdout).expect("UTF-8");
    let rendered: Vec<Value> = serde_yaml_ng::Deserializer::from_str(&text)
        .map(|doc| serde::Deserialize::deserialize(doc).expect("YAML"))
        .collect();
    let want = lien::manifests::objects();
    assert_eq!(rendered.len(), want.len(), "{text}");
    let (rendered, want) = (sorted(rendered), sorted(want));
    for (got, want) in rendered.iter().zip(&want) {
        assert_eq!(got, want, "deploy/ and `lien manifests` differ");
    }
}
