//! What the load examples (`plugin_load`, `rule_load`, `selector_load`) share: their flags, the client, and
//! building a fixture fast.

use std::path::Path;

use futures::{StreamExt, TryStreamExt, stream};
use kube::api::{Api, DynamicObject, PostParams};
use kube::config::{KubeConfigOptions, Kubeconfig};
use kube::core::{ApiResource, GroupVersionKind};
use kube::{Client, Config};
use serde_json::Value;

pub type Error = Box<dyn std::error::Error + Send + Sync>;

/// Walks the `--flag [value]` arguments: `set(flag, value)` takes a flag (calling `value()` for
/// its value) and says whether it knows it; an unknown flag is an error.
pub fn flags(
    mut set: impl FnMut(&str, &mut dyn FnMut() -> Result<String, Error>) -> Result<bool, Error>,
) -> Result<(), Error> {
    let mut it = std::env::args().skip(1);
    while let Some(flag) = it.next() {
        let mut value = || {
            it.next()
                .ok_or_else(|| Error::from(format!("{flag} needs a value")))
        };
        if !set(&flag, &mut value)? {
            return Err(format!("unknown flag {flag}").into());
        }
    }
    Ok(())
}

/// A client for the kubeconfig at `path` (its current context).
pub async fn client(path: &Path) -> Result<Client, Error> {
    let kubeconfig = Kubeconfig::read_from(path)?;
    let config = Config::from_custom_kubeconfig(kubeconfig, &KubeConfigOptions::default()).await?;
    Ok(Client::try_from(config)?)
}

/// The resource of a kind.
pub fn resource(group: &str, version: &str, kind: &str, plural: &str) -> ApiResource {
    ApiResource::from_gvk_with_plural(&GroupVersionKind::gvk(group, version, kind), plural)
}

/// Creates every object, `concurrency` requests at a time; the first failure stops it.
pub async fn create_all(
    api: &Api<DynamicObject>,
    objects: Vec<Value>,
    concurrency: usize,
) -> Result<(), Error> {
    stream::iter(objects)
        .map(|o| async move {
            let o: DynamicObject = serde_json::from_value(o)?;
            api.create(&PostParams::default(), &o).await?;
            Ok::<_, Error>(())
        })
        .buffer_unordered(concurrency)
        .try_for_each(|()| async { Ok(()) })
        .await
}
