//! Reference-counted object UIDs.
//!
//! Every relation records the UIDs of its two objects, and a rule's join the UID of each of its
//! objects; a `PersistentVolume` used by one pool has its UID in both. Kubernetes UIDs are
//! canonical UUIDs, so a UID is kept as its 16 bytes with a reference count in a chunked arena,
//! and relations and joins hold a 4-byte [`UidId`]: a join's relations share its objects' slots
//! ([`UidStore::retain`]) instead of copying them. A UID that is not a canonical lowercase UUID
//! (tests, other systems) is interned as a string instead, so it still compares exactly.
//!
//! Slots are not deduplicated (that would need a hash table, ~6.5 bytes per UID, to save the
//! copies that sharing already avoids): two ids may hold the same UID, so UIDs are compared
//! with [`UidStore::same`] or a [`UidProbe`], never by id.

use std::borrow::Cow;

use crate::arena::Arena;
use crate::intern::{Full, NIL, StrInterner, Sym};

/// A stored UID: `NIL` for none; below [`OTHER`], a slot of [`UidStore`]; with [`OTHER`] set, a
/// string symbol of the index's interner.
pub(crate) type UidId = u32;

/// Marks a [`UidId`] that is an interned string, not a UUID slot.
const OTHER: u32 = 1 << 31;

#[derive(Debug, Clone, Copy)]
struct Slot {
    bytes: [u8; 16],
    /// 0 = free; a free slot's first four bytes link to the next free slot.
    refs: u32,
}

/// The UUIDs in counted slots.
#[derive(Debug, Clone, Default)]
pub(crate) struct UidStore {
    slots: Arena<Slot>,
    free: Option<u32>,
    live: usize,
}

/// A UID prepared once for comparison with many stored ones.
#[derive(Debug, Clone, Copy)]
pub(crate) enum UidProbe {
    Uuid([u8; 16]),
    /// A non-UUID UID: its symbol, or `None` if no stored UID is that string.
    Other(Option<u32>),
}

impl UidStore {
    /// `uid` prepared for [`UidStore::is`].
    pub(crate) fn probe(strs: &StrInterner, uid: &str) -> UidProbe {
        match parse_uuid(uid) {
            Some(bytes) => UidProbe::Uuid(bytes),
            None => UidProbe::Other(strs.find(uid).map(|sym| sym.0)),
        }
    }

    /// Whether stored UID `id` (not `NIL`) is the probed one.
    pub(crate) fn is(&self, id: UidId, probe: UidProbe) -> bool {
        match probe {
            _ if id == NIL => false,
            UidProbe::Uuid(bytes) => id & OTHER == 0 && self.slots[id as usize].bytes == bytes,
            UidProbe::Other(sym) => id & OTHER != 0 && Some(id & !OTHER) == sym,
        }
    }

    /// Whether two stored UIDs (or two `NIL`s) are the same UID.
    pub(crate) fn same(&self, a: UidId, b: UidId) -> bool {
        a == b
            || (a != NIL
                && b != NIL
                && (a | b) & OTHER == 0
                && self.slots[a as usize].bytes == self.slots[b as usize].bytes)
    }

    /// Stores `uid` (none: `NIL`) with one reference.
    pub(crate) fn store(
        &mut self,
        strs: &mut StrInterner,
        uid: Option<&str>,
    ) -> Result<UidId, Full> {
        let Some(uid) = uid else { return Ok(NIL) };
        let Some(bytes) = parse_uuid(uid) else {
            let sym = strs.intern(uid)?;
            if sym.0 >= OTHER {
                strs.release(sym);
                return Err(Full);
            }
            return Ok(sym.0 | OTHER);
        };
        let slot = Slot { bytes, refs: 1 };
        let id = match self.free {
            Some(id) => {
                let link = &self.slots[id as usize].bytes;
                let next = u32::from_le_bytes([link[0], link[1], link[2], link[3]]);
                self.free = (next != NIL).then_some(next);
                self.slots[id as usize] = slot;
                id
            }
            None => {
                let id = u32::try_from(self.slots.len())
                    .ok()
                    .filter(|&id| id < OTHER)
                    .ok_or(Full)?;
                self.slots.push(slot);
                id
            }
        };
        self.live += 1;
        Ok(id)
    }

    /// Adds a reference to a stored UID (none: nothing to do).
    pub(crate) fn retain(&mut self, strs: &mut StrInterner, id: UidId) {
        if id == NIL {
        } else if id & OTHER != 0 {
            strs.retain(Sym(id & !OTHER));
        } else {
            self.slots[id as usize].refs += 1;
        }
    }

    /// Drops one reference; the last one frees the slot.
    pub(crate) fn release(&mut self, strs: &mut StrInterner, id: UidId) {
        if id == NIL {
            return;
        }
        if id & OTHER != 0 {
            strs.release(Sym(id & !OTHER));
            return;
        }
        let slot = &mut self.slots[id as usize];
        debug_assert!(slot.refs > 0, "release of a free UID");
        slot.refs -= 1;
        if slot.refs > 0 {
            return;
        }
        let mut link = [0u8; 16];
        link[..4].copy_from_slice(&self.free.unwrap_or(NIL).to_le_bytes());
        self.slots[id as usize] = Slot {
            bytes: link,
            refs: 0,
        };
        self.free = Some(id);
        self.live -= 1;
    }

    /// The UID as given to [`UidStore::store`].
    pub(crate) fn get<'a>(&self, strs: &'a StrInterner, id: UidId) -> Option<Cow<'a, str>> {
        if id == NIL {
            None
        } else if id & OTHER != 0 {
            Some(Cow::Borrowed(strs.get(Sym(id & !OTHER))))
        } else {
            Some(Cow::Owned(format_uuid(&self.slots[id as usize].bytes)))
        }
    }

    /// How many UUID slots are in use.
    #[cfg(test)]
    pub(crate) fn len(&self) -> usize {
        self.live
    }

    pub(crate) fn heap_bytes(&self) -> usize {
        self.slots.heap_bytes()
    }
}

pub(crate) fn parse_uuid(s: &str) -> Option<[u8; 16]> {
    let b = s.as_bytes();
    if b.len() != 36 {
        return None;
    }
    let mut out = [0u8; 16];
    let mut nibbles = 0usize;
    for (i, &c) in b.iter().enumerate() {
        if matches!(i, 8 | 13 | 18 | 23) {
            if c != b'-' {
                return None;
            }
            continue;
        }
        // Only lowercase, so that formatting gives back exactly the string we were given.
        let v = match c {
            b'0'..=b'9' => c - b'0',
            b'a'..=b'f' => c - b'a' + 10,
            _ => return None,
        };
        out[nibbles / 2] |= if nibbles.is_multiple_of(2) { v << 4 } else { v };
        nibbles += 1;
    }
    Some(out)
}

pub(crate) fn format_uuid(bytes: &[u8; 16]) -> String {
    const HEX: &[u8; 16] = b"0123456789abcdef";
    let mut s = String::with_capacity(36);
    for (i, byte) in bytes.iter().enumerate() {
        if matches!(i, 4 | 6 | 8 | 10) {
            s.push('-');
        }
        s.push(HEX[(byte >> 4) as usize] as char);
        s.push(HEX[(byte & 0xf) as usize] as char);
    }
    s
}

#[cfg(test)]
mod tests {
    use super::*;

    const A: &str = "0f8fad5b-d9cb-469f-a165-70867728950e";
    const B: &str = "0f8fad5b-d9cb-469f-a165-70867728950f";

    #[test]
    fn uuid_round_trip_and_rejections() {
        let bytes = parse_uuid(A).expect("uuid");
        assert_eq!(format_uuid(&bytes), A);
        for bad in [
            "0F8FAD5B-D9CB-469F-A165-70867728950E",
            "0f8fad5b-d9cb-469f-a165-70867728950",
            "0f8fad5bxd9cb-469f-a165-70867728950e",
            "0f8fad5b-d9cb-469f-a165-70867728950g",
            "uid-1",
        ] {
            assert_eq!(parse_uuid(bad), None, "{bad}");
        }
    }

    #[test]
    fn uids_are_counted_compared_and_freed() {
        let (mut strs, mut uids) = (StrInterner::default(), UidStore::default());
        let a = uids.store(&mut strs, Some(A)).expect("room");
        let a2 = uids.store(&mut strs, Some(A)).expect("room");
        let b = uids.store(&mut strs, Some(B)).expect("room");
        let other = uids.store(&mut strs, Some("uid-1")).expect("room");
        let other2 = uids.store(&mut strs, Some("uid-1")).expect("room");
        assert!(uids.same(a, a2) && uids.same(other, other2) && uids.same(NIL, NIL));
        assert!(!uids.same(a, b) && !uids.same(a, other) && !uids.same(a, NIL));
        assert_eq!(uids.store(&mut strs, None), Ok(NIL));
        assert_eq!(uids.get(&strs, other).as_deref(), Some("uid-1"));
        assert_eq!(uids.get(&strs, b).as_deref(), Some(B));
        let probe = UidStore::probe(&strs, A);
        assert!(uids.is(a, probe) && uids.is(a2, probe) && !uids.is(b, probe));
        assert!(!uids.is(other, probe) && !uids.is(NIL, probe));
        assert!(uids.is(other, UidStore::probe(&strs, "uid-1")));
        assert!(!uids.is(other, UidStore::probe(&strs, "uid-9")));
        assert_eq!(uids.len(), 3);
        uids.retain(&mut strs, a);
        uids.release(&mut strs, a);
        uids.release(&mut strs, a);
        assert_eq!(uids.len(), 2);
        // The freed slot is reused.
        let c = uids
            .store(&mut strs, Some("0f8fad5b-d9cb-469f-a165-708677289500"))
            .expect("room");
        assert_eq!(c, a);
        uids.retain(&mut strs, other);
        for id in [other, other, other2] {
            uids.release(&mut strs, id);
        }
        assert_eq!(strs.len(), 0);
    }
}
