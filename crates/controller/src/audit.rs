//! What the webhook let through or refused, as Kubernetes Events: the wording of their notes.
//!
//! # Data model
//!
//! - [`BreakGlass`]: an override the webhook allowed (the annotation armed on an object, or an
//!   object in use deleted under it), handed to the controller through
//!   [`DenialSink::break_glass`](crate::DenialSink::break_glass). It is audited as a Warning
//!   Event with reason [`BREAK_GLASS_REASON`] on the object and on each overridden Usage.
//! - Refused DELETEs ([`Denial`](crate::Denial)) become Warning Events with reason
//!   [`DELETION_REFUSED_REASON`].
//!
//! Notes are built here, purely, and bounded to what the API server accepts.

use crate::replay::Denial;

/// The reason of the Event a refused DELETE produces.
pub const DELETION_REFUSED_REASON: &str = "DeletionRefused";
/// The reason of the Event a break-glass override produces.
pub const BREAK_GLASS_REASON: &str = "BreakGlass";
/// The annotation whose value is the break-glass reason (the webhook's
/// `lien_webhook::validate::BREAK_GLASS_ANNOTATION`; the controller does not depend on the
/// webhook crate).
pub const BREAK_GLASS_ANNOTATION: &str = "lien.dev/break-glass";

/// kube-apiserver refuses an Event whose note exceeds 1024 bytes (`NoteLengthLimit`).
const NOTE_MAX_BYTES: usize = 1024;

/// A break-glass override, as the webhook reports it (the record type both share).
pub use lien_core::seams::{BreakGlassAction, BreakGlassUse as BreakGlass};

/// The Event's `action` for a break-glass record: what was done to the object.
pub fn event_action(action: BreakGlassAction) -> &'static str {
    match action {
        BreakGlassAction::Armed => "Update",
        BreakGlassAction::Used => "Delete",
    }
}

/// The note of a refused DELETE's Event.
pub fn denial_note(denial: &Denial) -> String {
    bounded(format!(
        "DELETE by {} refused: {}",
        denial.user, denial.message
    ))
}

/// The note of a break-glass Event: who, why, and which relations were overridden.
pub fn break_glass_note(b: &BreakGlass) -> String {
    // The overridden denial reads "cannot delete K: it is in use by …"; the note names K's
    // relations without restating what the Event is regarding.
    let prefix = format!("cannot delete {}: ", b.object);
    let relations = b.overridden.strip_prefix(&prefix).unwrap_or(&b.overridden);
    let note = match (b.action, relations.is_empty()) {
        (BreakGlassAction::Used, _) => format!(
            "DELETE by {} allowed under {BREAK_GLASS_ANNOTATION} (reason: {:?}), overriding: {relations}",
            b.user, b.reason
        ),
        (BreakGlassAction::Armed, false) => format!(
            "{BREAK_GLASS_ANNOTATION} set by {} (reason: {:?}): the object may now be deleted although {relations}",
            b.user, b.reason
        ),
        (BreakGlassAction::Armed, true) => format!(
            "{BREAK_GLASS_ANNOTATION} set by {} (reason: {:?}): the object may be deleted even once it is in use",
            b.user, b.reason
        ),
    };
    bounded(note)
}

/// `note` cut to [`NOTE_MAX_BYTES`] at a character boundary, marked with `…` if cut.
fn bounded(mut note: String) -> String {
    if note.len() <= NOTE_MAX_BYTES {
        return note;
    }
    let ellipsis = '…';
    let mut end = NOTE_MAX_BYTES - ellipsis.len_utf8();
    while !note.is_char_boundary(end) {
        end -= 1;
    }
    note.truncate(end);
    note.push(ellipsis);
    note
}

#[cfg(test)]
mod tests {
    use std::time::SystemTime;

    use lien_core::{ObjectKey, Source};

    use super::*;

    fn glass(action: BreakGlassAction, overridden: &str) -> BreakGlass {
        BreakGlass {
            action,
            object: ObjectKey::new("", "ConfigMap", Some("team-a"), "db"),
            uid: Some("u-1".into()),
            user: "alice".into(),
            reason: "INC-42 restore from backup".into(),
            overridden: overridden.into(),
            sources: vec![Source::usage("team-a", "app-uses-db")],
            time: SystemTime::UNIX_EPOCH,
        }
    }

    const DENIAL: &str = "cannot delete ConfigMap team-a/db: it is in use by ConfigMap \
                          team-a/app (Usage team-a/app-uses-db)";

    #[test]
    fn a_used_break_glass_names_the_user_the_reason_and_the_overridden_relations() {
        assert_eq!(
            break_glass_note(&glass(BreakGlassAction::Used, DENIAL)),
            "DELETE by alice allowed under lien.dev/break-glass (reason: \"INC-42 restore from \
             backup\"), overriding: it is in use by ConfigMap team-a/app (Usage team-a/app-uses-db)"
        );
    }

    #[test]
    fn an_armed_break_glass_says_what_it_would_override_if_anything() {
        assert_eq!(
            break_glass_note(&glass(BreakGlassAction::Armed, DENIAL)),
            "lien.dev/break-glass set by alice (reason: \"INC-42 restore from backup\"): the \
             object may now be deleted although it is in use by ConfigMap team-a/app (Usage \
             team-a/app-uses-db)"
        );
        assert_eq!(
            break_glass_note(&glass(BreakGlassAction::Armed, "")),
            "lien.dev/break-glass set by alice (reason: \"INC-42 restore from backup\"): the \
             object may be deleted even once it is in use"
        );
        assert_eq!(event_action(BreakGlassAction::Armed), "Update");
        assert_eq!(event_action(BreakGlassAction::Used), "Delete");
    }

    #[test]
    fn notes_fit_the_api_servers_limit_in_bytes_at_a_character_boundary() {
        let mut b = glass(BreakGlassAction::Used, DENIAL);
        b.reason = "é".repeat(2000);
        let note = break_glass_note(&b);
        assert!(note.len() <= NOTE_MAX_BYTES, "{} bytes", note.len());
        assert!(note.ends_with('…'));
        assert!(note.starts_with("DELETE by alice allowed"));
        let short = bounded("short".into());
        assert_eq!(short, "short");
    }
}
