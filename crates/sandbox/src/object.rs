//! Reading an object's metadata as every part of the server does: its finalizers, whether it
//! is being deleted; and the values kube-apiserver writes into metadata (timestamps, generated
//! name suffixes). A leaf: no kind or request knowledge, so every layer may use it.

use std::sync::atomic::{AtomicU64, Ordering};

use serde_json::Value;

/// The current time as kube-apiserver writes it in `creationTimestamp` (RFC 3339, seconds).
pub fn now() -> String {
    jiff::Timestamp::now()
        .strftime("%Y-%m-%dT%H:%M:%SZ")
        .to_string()
}

/// A random suffix for `generateName`, from the same alphabet kube-apiserver uses (no vowels,
/// no look-alikes).
pub fn name_suffix() -> String {
    const ALPHABET: &[u8] = b"bcdfghjklmnpqrstvwxz2456789";
    static COUNTER: AtomicU64 = AtomicU64::new(0);
    // A UUID gives the randomness; the counter makes collisions within a run impossible to hit
    // twice in a row.
    let mut bits =
        uuid::Uuid::new_v4().as_u128() ^ u128::from(COUNTER.fetch_add(1, Ordering::Relaxed));
    (0..5)
        .map(|_| {
            let c = ALPHABET[(bits % ALPHABET.len() as u128) as usize] as char;
            bits /= ALPHABET.len() as u128;
            c
        })
        .collect()
}

/// `metadata.finalizers`, in order.
pub fn finalizers(object: &Value) -> Vec<String> {
    object["metadata"]["finalizers"]
        .as_array()
        .map(|f| {
            f.iter()
                .filter_map(|v| v.as_str().map(str::to_string))
                .collect()
        })
        .unwrap_or_default()
}

pub fn has_finalizer(object: &Value, name: &str) -> bool {
    finalizers(object).iter().any(|f| f == name)
}

/// Whether a DELETE has marked it (`metadata.deletionTimestamp` set).
pub fn is_deleting(object: &Value) -> bool {
    !object["metadata"]["deletionTimestamp"].is_null()
}
