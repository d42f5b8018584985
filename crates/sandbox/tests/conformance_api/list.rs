//! List semantics: label and field selectors, chunking with `limit`/`continue`.

use k8s_openapi::api::core::v1::{ConfigMap, Namespace};
use kube::api::{Api, ListParams, PostParams};

use crate::common;
use crate::support::{configmap, create_configmaps, names, status};

/// "Labels and Selectors": equality-based (`=`, `==`, `!=`) and set-based (`in`, `notin`,
/// exists, `!`) requirements, and comma-separated requirements ANDed. `!=` and `notin` also
/// select objects without the label.
#[tokio::test]
async fn label_selector_operators() {
    let sandbox = common::sandbox().await;
    let cms: Api<ConfigMap> = Api::namespaced(common::client(&sandbox).await, "default");
    for (name, labels) in [
        ("prod-web", &[("env", "prod"), ("tier", "web")][..]),
        ("prod-db", &[("env", "prod"), ("tier", "db")][..]),
        ("staging-web", &[("env", "staging"), ("tier", "web")][..]),
        ("dev", &[("env", "dev")][..]),
        ("bare", &[][..]),
    ] {
        cms.create(&PostParams::default(), &configmap(name, labels))
            .await
            .expect("create");
    }
    let cases: &[(&str, &[&str])] = &[
        ("env=prod", &["prod-db", "prod-web"]),
        ("env==prod", &["prod-db", "prod-web"]),
        ("env!=prod", &["bare", "dev", "staging-web"]),
        (
            "env in (prod,staging)",
            &["prod-db", "prod-web", "staging-web"],
        ),
        ("env notin (prod,staging)", &["bare", "dev"]),
        ("tier", &["prod-db", "prod-web", "staging-web"]),
        ("!tier", &["bare", "dev"]),
        ("env=prod,tier=web", &["prod-web"]),
        ("env in (prod),tier notin (web)", &["prod-db"]),
        ("env,!tier", &["dev"]),
    ];
    for (selector, want) in cases {
        let got = cms
            .list(&ListParams::default().labels(selector))
            .await
            .expect(selector);
        let want: Vec<String> = want.iter().map(|s| s.to_string()).collect();
        assert_eq!(names(&got.items), want, "selector {selector:?}");
    }
    let s = status(cms.list(&ListParams::default().labels("env in prod")).await);
    assert_eq!(s.code, 400, "a malformed selector is a bad request: {s:?}");
    sandbox.shutdown().await;
}

/// "Field Selectors": `metadata.name` and `metadata.namespace` with `=`, `==` and `!=`, chained
/// with commas; a field a resource does not support is refused with 400.
#[tokio::test]
async fn field_selectors_on_name_and_namespace() {
    let sandbox = common::sandbox().await;
    let client = common::client(&sandbox).await;
    let namespaces: Api<Namespace> = Api::all(client.clone());
    let mut ns = Namespace::default();
    ns.metadata.name = Some("other".into());
    namespaces
        .create(&PostParams::default(), &ns)
        .await
        .expect("namespace");
    let here: Api<ConfigMap> = Api::namespaced(client.clone(), "default");
    let there: Api<ConfigMap> = Api::namespaced(client.clone(), "other");
    create_configmaps(&here, &["a", "b"]).await;
    create_configmaps(&there, &["a", "c"]).await;
    let everywhere: Api<ConfigMap> = Api::all(client);
    let keyed = |items: &[ConfigMap]| {
        let mut v: Vec<String> = items
            .iter()
            .map(|c| {
                format!(
                    "{}/{}",
                    c.metadata.namespace.clone().unwrap_or_default(),
                    c.metadata.name.clone().unwrap_or_default()
                )
            })
            .filter(|k| !k.ends_with(&format!("/{}", crate::common::ROOT_CA)))
            .collect();
        v.sort();
        v
    };
    let cases: &[(&str, &[&str])] = &[
        ("metadata.name=a", &["default/a", "other/a"]),
        ("metadata.name==a", &["default/a", "other/a"]),
        ("metadata.namespace=other", &["other/a", "other/c"]),
        ("metadata.namespace=other,metadata.name!=a", &["other/c"]),
        ("metadata.name!=a,metadata.namespace!=other", &["default/b"]),
    ];
    for (selector, want) in cases {
        let got = everywhere
            .list(&ListParams::default().fields(selector))
            .await
            .expect(selector);
        let want: Vec<String> = want.iter().map(|s| s.to_string()).collect();
        assert_eq!(keyed(&got.items), want, "field selector {selector:?}");
    }
    let s = status(
        everywhere
            .list(&ListParams::default().fields("data.a=b"))
            .await,
    );
    assert_eq!((s.code, s.reason.as_str()), (400, "BadRequest"), "{s:?}");
    sandbox.shutdown().await;
}

/// "API Concepts" (retrieving large results sets in chunks): pages of `limit` items chained by
/// `continue` all come from the same snapshot (same resourceVersion) even when objects are
/// created between pages; `remainingItemCount` counts what is left.
#[tokio::test]
async fn chunked_list_is_a_consistent_snapshot() {
    let sandbox = common::sandbox().await;
    let cms: Api<ConfigMap> = Api::namespaced(common::client(&sandbox).await, "default");
    let originals = ["c0", "c1", "c2", "c3", "c4", "c5", "c6"];
    create_configmaps(&cms, &originals).await;
    let mut seen = Vec::new();
    let mut token: Option<String> = None;
    let mut list_rv: Option<String> = None;
    let mut pages = 0;
    loop {
        let mut lp = ListParams::default().limit(3);
        if let Some(t) = &token {
            lp = lp.continue_token(t);
        }
        let page = cms.list(&lp).await.expect("page");
        pages += 1;
        assert!(page.items.len() <= 3);
        match &list_rv {
            None => list_rv = page.metadata.resource_version.clone(),
            Some(rv) => assert_eq!(
                page.metadata.resource_version.as_ref(),
                Some(rv),
                "every chunk is read at the first one's resourceVersion"
            ),
        }
        seen.extend(page.items.iter().filter_map(|c| c.metadata.name.clone()));
        seen.retain(|n| n != crate::common::ROOT_CA);
        // Written between pages: must not show up in this list.
        cms.create(
            &PostParams::default(),
            &configmap(&format!("a-new-{pages}"), &[]),
        )
        .await
        .expect("create between pages");
        cms.create(
            &PostParams::default(),
            &configmap(&format!("z-new-{pages}"), &[]),
        )
        .await
        .expect("create between pages");
        token = page.metadata.continue_.filter(|c| !c.is_empty());
        match &token {
            Some(_) => {
                let remaining = page
                    .metadata
                    .remaining_item_count
                    .expect("remainingItemCount");
                // The namespace's kube-root-ca.crt sorts after the originals.
                assert_eq!(remaining as usize, originals.len() + 1 - seen.len());
            }
            None => break,
        }
    }
    assert_eq!(
        seen,
        originals.iter().map(|s| s.to_string()).collect::<Vec<_>>()
    );
    assert_eq!(pages, 3);
    sandbox.shutdown().await;
}

/// "API Concepts" (chunking) and ListMeta's `continue` documentation: once the snapshot a token
/// reads from is compacted away, the server answers 410 Gone (reason Expired) with a fresh
/// continue token in the Status' metadata for a client that accepts an inconsistent remainder.
#[tokio::test]
async fn expired_continue_token_is_gone() {
    let sandbox = common::sandbox().await;
    let cms: Api<ConfigMap> = Api::namespaced(common::client(&sandbox).await, "default");
    create_configmaps(&cms, &["a", "b", "c", "d"]).await;
    let first = cms
        .list(&ListParams::default().limit(2))
        .await
        .expect("first page");
    let token = first.metadata.continue_.clone().expect("continue");
    cms.create(&PostParams::default(), &configmap("e", &[]))
        .await
        .expect("create");
    sandbox.api().compact();
    let s = status(
        cms.list(&ListParams::default().limit(2).continue_token(&token))
            .await,
    );
    assert_eq!((s.code, s.reason.as_str()), (410, "Expired"), "{s:?}");
    assert!(
        s.message.starts_with(
            "The provided continue parameter is too old to display a consistent list result."
        ),
        "{}",
        s.message
    );
    let fresh = s
        .metadata
        .as_ref()
        .and_then(|m| m.continue_.clone())
        .filter(|c| !c.is_empty())
        .expect("the 410 carries an inconsistent continue token");
    let mut rest = Vec::new();
    let mut next = Some(fresh);
    while let Some(t) = next {
        let page = cms
            .list(&ListParams::default().limit(2).continue_token(&t))
            .await
            .expect("inconsistent continue");
        rest.extend(
            page.items
                .iter()
                .filter_map(|c| c.metadata.name.clone())
                .filter(|n| n != crate::common::ROOT_CA),
        );
        next = page.metadata.continue_.filter(|c| !c.is_empty());
    }
    assert_eq!(
        rest,
        vec!["c", "d", "e"],
        "the remainder is read at the current state"
    );
    sandbox.shutdown().await;
}

/// An unlimited list is written item by item as the client reads it (issue 22), a limited one
/// is built whole: for the same items the answers must be the same bytes, in JSON, protobuf
/// (`k8s\0` envelope whose length is counted first) and Table, selectors filtering whole chunks
/// of 256 included. kube-apiserver's answer to both is the same list (`limit` past the end
/// leaves no `continue`).
#[tokio::test]
async fn unlimited_lists_stream_the_same_answer_as_one_page() {
    use k8s_pb::api::core::v1 as pb;
    use prost::Message as _;

    let sandbox = common::sandbox().await;
    let client = common::client(&sandbox).await;
    let cms: Api<ConfigMap> = Api::namespaced(client.clone(), "default");
    // 600 objects: three chunks; `half=yes` only on the last 100, so the first two chunks
    // have nothing to write under the selector.
    for i in 0..600 {
        let labels: &[(&str, &str)] = if i >= 500 { &[("half", "yes")] } else { &[] };
        cms.create(
            &PostParams::default(),
            &configmap(&format!("cm-{i:03}"), labels),
        )
        .await
        .expect("create");
    }
    let base = "/api/v1/namespaces/default/configmaps";
    let table = "application/json;as=Table;v=v1;g=meta.k8s.io";
    let protobuf = "application/vnd.kubernetes.protobuf";
    for query in [
        "",
        "labelSelector=half%3Dyes",
        "fieldSelector=metadata.name%3Dcm-300",
    ] {
        for accept in ["application/json", protobuf, table] {
            let all = crate::support::request(
                &client,
                "GET",
                &format!("{base}?{query}"),
                &[("accept", accept)],
                vec![],
            )
            .await;
            let page = crate::support::request(
                &client,
                "GET",
                &format!("{base}?{query}&limit=5000"),
                &[("accept", accept)],
                vec![],
            )
            .await;
            assert_eq!((all.status, page.status), (200, 200), "{query} {accept}");
            assert_eq!(all.content_type, page.content_type, "{query} {accept}");
            // A Table's last cell is the Age, read from the clock at each request: the two
            // reads may straddle a second ("1s" then "2s"), so it is masked; every other byte
            // (names, counts, order, objects) must be the same.
            let (streamed, whole) = if accept == table {
                (age_masked(&all.body), age_masked(&page.body))
            } else {
                (all.body.clone(), page.body.clone())
            };
            assert!(
                streamed == whole,
                "{query} {accept}: streamed\n{}\nwhole\n{}",
                String::from_utf8_lossy(&all.body),
                String::from_utf8_lossy(&page.body)
            );
            let expected = match query {
                "" => 601, // and kube-root-ca.crt
                "labelSelector=half%3Dyes" => 100,
                _ => 1,
            };
            let count = if accept == protobuf {
                let raw = k8s_pb::apimachinery::pkg::runtime::Unknown::decode(&all.body[4..])
                    .expect("an Unknown")
                    .raw
                    .unwrap_or_default();
                pb::ConfigMapList::decode(raw.as_slice())
                    .expect("a ConfigMapList")
                    .items
                    .len()
            } else {
                let body = all.json();
                body[if accept == table { "rows" } else { "items" }]
                    .as_array()
                    .map_or(0, Vec::len)
            };
            assert_eq!(count, expected, "{query} {accept}");
        }
    }
    sandbox.shutdown().await;
}

/// A Table body with each row's last cell (the Age column, `"12s"`) replaced by `"<age>"`;
/// every row must have one, so a masked body still says how many rows there were.
fn age_masked(body: &[u8]) -> Vec<u8> {
    let text = String::from_utf8_lossy(body);
    let age = regex::Regex::new(r#","[0-9]+s"\],"object":"#).expect("a regex");
    let rows = text.matches(r#"{"cells":["#).count();
    assert_eq!(
        age.find_iter(&text).count(),
        rows,
        "an age at the end of every row: {text}"
    );
    age.replace_all(&text, r#","<age>"],"object":"#)
        .into_owned()
        .into_bytes()
}

/// "API Concepts" (collections): a list of a built-in kind carries its type once, in the
/// list's own `kind`; its items are encoded without `apiVersion` and `kind`, streamed or paged,
/// as kube-apiserver encodes Go objects read from storage — while a custom resource's items
/// (unstructured) and every single object (a GET, a watch event) keep theirs. Checked against
/// kube-apiserver v1.32.13 (differential entry `list-items-typed`).
#[tokio::test]
async fn a_built_in_lists_items_carry_no_type_of_their_own() {
    let sandbox = common::sandbox().await;
    let client = common::client(&sandbox).await;
    let cms: Api<ConfigMap> = Api::namespaced(client.clone(), "default");
    create_configmaps(&cms, &["a"]).await;
    let ar = crate::support::widget_crd(&client).await;
    let widgets: kube::Api<kube::api::DynamicObject> =
        kube::Api::namespaced_with(client.clone(), "default", &ar);
    widgets
        .create(
            &PostParams::default(),
            &crate::support::widget(&ar, "w", serde_json::json!({"size": 1})),
        )
        .await
        .expect("widget");
    let get = |path: &'static str| {
        let client = client.clone();
        async move {
            crate::support::request(&client, "GET", path, &[], vec![])
                .await
                .json()
        }
    };
    for path in [
        "/api/v1/namespaces/default/configmaps",
        "/api/v1/namespaces/default/configmaps?limit=10",
    ] {
        let list = get(path).await;
        assert_eq!(list["kind"], "ConfigMapList", "{path}");
        let item = &list["items"][0];
        assert!(item["metadata"]["name"].is_string(), "{path}: {item}");
        assert!(
            item.get("apiVersion").is_none() && item.get("kind").is_none(),
            "{path}: {item}"
        );
    }
    let one = get("/api/v1/namespaces/default/configmaps/a").await;
    assert_eq!(
        (&one["apiVersion"], &one["kind"]),
        (&"v1".into(), &"ConfigMap".into())
    );
    let list = get("/apis/example.com/v1/namespaces/default/widgets").await;
    assert_eq!(list["items"][0]["kind"], "Widget");
    assert_eq!(list["items"][0]["apiVersion"], "example.com/v1");
    sandbox.shutdown().await;
}
