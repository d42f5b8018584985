//! What the load examples (`plugin_load`, `rule_load`) share: building a fixture fast.

use futures::{StreamExt, TryStreamExt, stream};
use kube::api::{Api, DynamicObject, PostParams};
use serde_json::Value;

pub type Error = Box<dyn std::error::Error + Send + Sync>;

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
