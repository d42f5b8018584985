//! Unlimited lists written item by item (issue 22): the answer's head, then each chunk of items
//! serialized as it is read from the list's snapshot, then its tail. Building the whole list as
//! one `Value` and then one `Vec<u8>` took a list of 100,000 ConfigMaps to ~20× the store's
//! size; streamed, the sandbox holds one chunk at a time, and a slow client holds back the
//! reading through the body's backpressure.

use axum::body::{Body, Bytes};
use axum::http::{StatusCode, header};
use axum::response::{IntoResponse, Response};
use serde_json::{Value, json};

use super::table;
use crate::apiserver::{LazyItems, LazyList};
use crate::error::ApiError;
use crate::protobuf;
use crate::registry::{PrinterColumn, ResourceType};

/// Stored objects read per chunk: large enough that a chunk is one write of tens of KiB,
/// small enough that a chunk's decoded `Value`s stay a few MiB even for large objects.
const CHUNK: usize = 256;

/// Marks a response whose body is already in its final encoding (JSON that is not to be read
/// back and re-encoded).
#[derive(Clone, Copy)]
pub(crate) struct Streamed;

/// How each item is written.
enum Items {
    /// `items` of a `…List`: the objects themselves — without `apiVersion` and `kind` unless
    /// `typed` (see [`super::Untyped`]).
    Objects { typed: bool },
    /// `rows` of a `Table`: each object's cells (and `?includeObject=`).
    Rows {
        columns: Vec<PrinterColumn>,
        include: Option<String>,
    },
}

struct Writer {
    items: LazyItems,
    how: Items,
    first: bool,
    tail: Option<&'static [u8]>,
}

impl Iterator for Writer {
    type Item = Result<Bytes, std::convert::Infallible>;

    fn next(&mut self) -> Option<Self::Item> {
        // Chunks whose objects the selectors all filtered out write nothing: read on.
        loop {
            let Some(chunk) = self.items.next_chunk(CHUNK) else {
                return self.tail.take().map(|t| Ok(Bytes::from_static(t)));
            };
            if chunk.is_empty() {
                continue;
            }
            let mut out = Vec::new();
            for object in &chunk {
                if !std::mem::take(&mut self.first) {
                    out.push(b',');
                }
                let written = match &self.how {
                    Items::Objects { typed: true } => serde_json::to_writer(&mut out, object),
                    Items::Objects { typed: false } => {
                        serde_json::to_writer(&mut out, &super::Untyped(object))
                    }
                    Items::Rows { columns, include } => serde_json::to_writer(
                        &mut out,
                        &table::row(columns, object, include.as_deref()),
                    ),
                };
                // Serializing a `Value` into a Vec cannot fail: its keys are strings.
                written.expect("a Value serializes");
            }
            return Some(Ok(Bytes::from(out)));
        }
    }
}

/// `head` is the answer without its array: its JSON is cut before the closing `]}` of the
/// last member, which must be the (empty) array the items go into.
fn respond(head: &Value, items: LazyItems, how: Items) -> Response {
    let mut head = serde_json::to_vec(head).expect("a Value serializes");
    // `…,"items":[]}` → `…,"items":[`: the items follow, then `]}`.
    debug_assert!(head.ends_with(b"[]}"));
    head.truncate(head.len() - 2);
    let writer = Writer {
        items,
        how,
        first: true,
        tail: Some(b"]}"),
    };
    let body = futures::stream::iter(
        std::iter::once(Ok::<_, std::convert::Infallible>(Bytes::from(head))).chain(writer),
    );
    let mut resp = (
        StatusCode::OK,
        [(header::CONTENT_TYPE, "application/json")],
        Body::from_stream(body),
    )
        .into_response();
    resp.extensions_mut().insert(Streamed);
    resp
}

/// A `…List` answer (`{"kind","apiVersion","metadata","items"}`, as [`ApiServer::list`]).
///
/// [`ApiServer::list`]: crate::apiserver::ApiServer::list
pub(crate) fn list(list: LazyList) -> Response {
    let head = json!({
        "kind": list.kind,
        "apiVersion": list.api_version,
        "metadata": {"resourceVersion": list.resource_version},
        "items": [],
    });
    let typed = list.typed_items;
    respond(&head, list.items, Items::Objects { typed })
}

/// The same list as a `meta.k8s.io/v1` `Table` (as [`table::list_to_table`]).
pub(crate) fn table(
    rt: &ResourceType,
    version: &str,
    list: LazyList,
    include: Option<&str>,
) -> Response {
    let (columns, defs) = table::column_definitions(rt, version);
    let head = json!({
        "kind": "Table",
        "apiVersion": "meta.k8s.io/v1",
        "metadata": {"resourceVersion": list.resource_version},
        "columnDefinitions": defs,
        "rows": [],
    });
    let how = Items::Rows {
        columns,
        include: include.map(str::to_string),
    };
    respond(&head, list.items, how)
}

/// The list in protobuf (`application/vnd.kubernetes.protobuf`). The envelope prefixes the
/// list's bytes with their length, so the items are encoded twice: once to count the bytes
/// (on a blocking thread, chunk by chunk, keeping nothing), and again as they are written.
/// An item that has no protobuf form fails the first pass, before anything is sent.
pub(crate) async fn protobuf_list(list: LazyList) -> Result<Response, ApiError> {
    let encoding = |e: protobuf::CodecError| {
        ApiError::internal(format!("encoding the response as protobuf: {e}"))
    };
    let index = protobuf::list_message(&list.api_version, &list.kind).map_err(encoding)?;
    let metadata =
        protobuf::list_metadata(index, &json!({"resourceVersion": list.resource_version}))
            .map_err(encoding)?;
    let mut counted = list.items.clone();
    let items_len = tokio::task::spawn_blocking(move || {
        let mut len = 0;
        while let Some(chunk) = counted.next_chunk(CHUNK) {
            len += protobuf::list_items(index, chunk)?.len();
        }
        Ok::<_, protobuf::CodecError>(len)
    })
    .await
    .map_err(|e| ApiError::internal(format!("encoding the response as protobuf: {e}")))?
    .map_err(encoding)?;
    let mut head =
        protobuf::envelope_head(&list.api_version, &list.kind, metadata.len() + items_len);
    head.extend_from_slice(&metadata);
    let mut items = list.items;
    let chunks = std::iter::from_fn(move || {
        let chunk = items.next_chunk(CHUNK)?;
        // Encoded once already without error, and encoding is deterministic.
        Some(protobuf::list_items(index, chunk).unwrap_or_default())
    })
    .filter(|b| !b.is_empty());
    let body = std::iter::once(head)
        .chain(chunks)
        .chain(std::iter::once(protobuf::ENVELOPE_TAIL.to_vec()))
        .map(|b| Ok::<_, std::convert::Infallible>(Bytes::from(b)));
    let mut resp = (
        StatusCode::OK,
        [(header::CONTENT_TYPE, protobuf::MEDIA_TYPE)],
        Body::from_stream(futures::stream::iter(body)),
    )
        .into_response();
    resp.extensions_mut().insert(Streamed);
    Ok(resp)
}
