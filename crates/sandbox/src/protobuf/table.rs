//! The shape of the generated message table (`schema.rs`) and lookups in it.

use std::collections::HashMap;
use std::sync::OnceLock;

use super::schema::{MESSAGES, RESOURCES};

/// One protobuf message of the Kubernetes API, as k8s-pb generates it.
#[derive(Debug)]
pub(crate) struct Message {
    /// k8s-pb's module path (`api/core/v1`), standing for the proto package.
    pub package: &'static str,
    pub name: &'static str,
    /// In tag order, the order Go writes them.
    pub fields: &'static [Field],
}

#[derive(Debug)]
pub(crate) struct Field {
    pub tag: u32,
    /// The field's name in JSON (the OpenAPI document's name).
    pub json: &'static str,
    pub label: Label,
    /// The element type of a repeated field; the value type of a map (keys are strings).
    pub ty: Ty,
    /// Required in the OpenAPI document: Go always writes it to JSON, even when empty.
    pub required: bool,
    /// A Go struct embedded with `json:",inline"`: its fields are the parent's in JSON.
    pub inline: bool,
    /// How Go holds it (`go_fields.txt`).
    pub held: Held,
    /// Its JSON tag says `omitempty`: Go leaves a zero scalar out of JSON.
    pub omitempty: bool,
}

/// A [`Field`], in the generated table's short form.
#[expect(
    clippy::too_many_arguments,
    reason = "the positional short form of 4,000 generated table rows, one per field"
)]
pub(crate) const fn field(
    tag: u32,
    json: &'static str,
    label: Label,
    ty: Ty,
    required: bool,
    inline: bool,
    held: Held,
    omitempty: bool,
) -> Field {
    Field {
        tag,
        json,
        label,
        ty,
        required,
        inline,
        held,
        omitempty,
    }
}

/// How Go holds a field of a message.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Held {
    /// A value: Go writes it to protobuf even when zero, and a body that leaves it out means
    /// its zero.
    Value,
    /// A pointer, slice or map: written when set, and set to zero is not unset.
    Pointer,
    /// A field the Go module does not have (k8s-pb is newer): written when set.
    Unknown,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Label {
    Optional,
    Repeated,
    Map,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Ty {
    String,
    Bytes,
    Bool,
    Int32,
    Int64,
    Double,
    /// An index into [`MESSAGES`].
    Message(usize),
}

/// Which message serves an `apiVersion`/`kind`.
#[derive(Debug)]
pub(crate) struct Resource {
    pub api_version: &'static str,
    pub kind: &'static str,
    pub message: usize,
}

pub(crate) fn message(index: usize) -> &'static Message {
    &MESSAGES[index]
}

impl Message {
    /// The field with protobuf tag `tag` (the fields are in tag order).
    pub(crate) fn field(&self, tag: u32) -> Option<&'static Field> {
        let fields: &'static [Field] = self.fields;
        fields
            .binary_search_by_key(&tag, |f| f.tag)
            .ok()
            .map(|i| &fields[i])
    }
}

/// The package of the meta API (`Status`, `DeleteOptions`, `WatchEvent`, …), whose kinds are
/// sent with any group's apiVersion (a `Status` is `v1`).
const META: &str = "apimachinery/pkg/apis/meta/v1";

struct Index {
    /// (package, message name) → index.
    by_name: HashMap<(&'static str, &'static str), usize>,
    /// (apiVersion, kind) → index, for the kinds k8s-pb marks as resources.
    by_kind: HashMap<(&'static str, &'static str), usize>,
    /// API group → the package prefix of its versions (`apps` → `api/apps`).
    groups: HashMap<&'static str, &'static str>,
    /// (group, kind) → the message of the kind's first version in the table.
    by_group_kind: HashMap<(&'static str, &'static str), usize>,
}

fn index() -> &'static Index {
    static INDEX: OnceLock<Index> = OnceLock::new();
    INDEX.get_or_init(|| {
        let by_name = MESSAGES
            .iter()
            .enumerate()
            .map(|(i, m)| ((m.package, m.name), i))
            .collect();
        let mut by_kind = HashMap::new();
        let mut groups = HashMap::new();
        let mut by_group_kind = HashMap::new();
        for r in RESOURCES {
            by_kind.insert((r.api_version, r.kind), r.message);
            let group = r.api_version.rsplit_once('/').map_or("", |(g, _)| g);
            by_group_kind.entry((group, r.kind)).or_insert(r.message);
            let package = MESSAGES[r.message].package;
            if let Some((prefix, _version)) = package.rsplit_once('/') {
                groups.insert(group, prefix);
            }
        }
        Index {
            by_name,
            by_kind,
            groups,
            by_group_kind,
        }
    })
}

/// The message of `kind` in `apiVersion` (a resource, its `…List`, a subresource's kind such as
/// `TokenRequest` or `Scale`, or a meta kind such as `Status`), if Kubernetes defines one.
pub(crate) fn message_for(api_version: &str, kind: &str) -> Option<usize> {
    let idx = index();
    if let Some(&i) = idx.by_kind.get(&(api_version, kind)) {
        return Some(i);
    }
    let (group, version) = api_version.rsplit_once('/').unwrap_or(("", api_version));
    let lookup = |package: &str| idx.by_name.get(&(package, kind)).copied();
    idx.groups
        .get(group)
        .and_then(|prefix| lookup(&format!("{prefix}/{version}")))
        .or_else(|| lookup(META))
}

/// The package prefix of the versions of API `group` (`apps` → `api/apps`), if Kubernetes
/// defines the group.
pub(crate) fn group_prefix(group: &str) -> Option<&'static str> {
    index().groups.get(group).copied()
}

/// The message of built-in `kind` in API `group` (of its first version in the table): a lookup,
/// as the managedFields walk asks it for every field of every write.
pub(crate) fn resource_of(group: &str, kind: &str) -> Option<usize> {
    index().by_group_kind.get(&(group, kind)).copied()
}

/// The message named `name` in `package` (used for the well-known messages).
pub(crate) fn named(package: &str, name: &str) -> Option<usize> {
    index().by_name.get(&(package, name)).copied()
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The encoder writes fields in table order and `Message::field` binary-searches them: both
    /// need every message's fields in strictly increasing tag order, as the generator emits them.
    #[test]
    fn every_message_lists_its_fields_in_tag_order() {
        for m in MESSAGES {
            assert!(
                m.fields.windows(2).all(|w| w[0].tag < w[1].tag),
                "{}/{}",
                m.package,
                m.name
            );
        }
    }
}
