//! The sandbox serves kube-rs over HTTPS with the kubeconfig it writes.

mod common;

use k8s_openapi::api::core::v1::{ConfigMap, Namespace};
use kube::api::{Api, ListParams, PostParams};

#[tokio::test]
async fn kube_rs_lists_creates_and_reads_back() {
    let sandbox = common::sandbox().await;
    let client = common::client(&sandbox).await;
    let namespaces: Api<Namespace> = Api::all(client.clone());
    let names: Vec<String> = namespaces
        .list(&ListParams::default())
        .await
        .expect("list namespaces")
        .items
        .into_iter()
        .filter_map(|n| n.metadata.name)
        .collect();
    assert!(names.contains(&"default".to_string()), "{names:?}");

    let cms: Api<ConfigMap> = Api::namespaced(client, "default");
    let mut cm = ConfigMap::default();
    cm.metadata.name = Some("smoke".into());
    cm.data = Some([("a".to_string(), "b".to_string())].into());
    let created = cms
        .create(&PostParams::default(), &cm)
        .await
        .expect("create");
    assert!(created.metadata.uid.is_some());
    let read = cms.get("smoke").await.expect("get");
    assert_eq!(read.data, cm.data);
    let err = cms
        .create(&PostParams::default(), &cm)
        .await
        .expect_err("exists");
    match err {
        kube::Error::Api(s) => {
            assert_eq!(s.code, 409);
            assert_eq!(s.message, "configmaps \"smoke\" already exists");
        }
        other => panic!("unexpected {other:?}"),
    }
    sandbox.shutdown().await;
}
