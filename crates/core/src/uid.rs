//! Reference-counted object UIDs.
//!
//! Every relation records the UIDs of its two objects, and a rule's join the UID of each of its
//! objects; a `PersistentVolume` used by one pool has its UID in both. Kubernetes UIDs are
//! canonical UUIDs, so each distinct one is kept once as its 16 bytes with a reference count,
//! and relations and joins hold a 4-byte [`UidId`]. A UID that is not a canonical lowercase UUID
//! (tests, other systems) is interned as a string instead, so it still compares exactly.
//!
//! Equal UIDs get equal ids, so comparing two stored UIDs never looks at their bytes.

use std::borrow::Cow;
use std::hash::BuildHasher;

use hashbrown::{DefaultHashBuilder, HashTable};

use crate::arena::Arena;
use crate::intern::{Full, NIL, StrInterner, Sym, table_bytes};

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

/// The UUIDs, each once, found through a table of their slots.
#[derive(Debug, Clone, Default)]
pub(crate) struct UidStore {
    slots: Arena<Slot>,
    free: Option<u32>,
    table: HashTable<u32>,
    hasher: DefaultHashBuilder,
    live: usize,
}

impl UidStore {
    fn find_bytes(&self, bytes: &[u8; 16]) -> Option<u32> {
        let slots = &self.slots;
        self.table
            .find(self.hasher.hash_one(bytes), |&id| {
                slots[id as usize].bytes == *bytes
            })
            .copied()
    }

    /// The id of `uid` if it is stored, without adding a reference. `strs` holds the
    /// non-UUID ones.
    pub(crate) fn find(&self, strs: &StrInterner, uid: &str) -> Option<UidId> {
        match parse_uuid(uid) {
            Some(bytes) => self.find_bytes(&bytes),
            None => strs.find(uid).map(|sym| sym.0 | OTHER),
        }
    }

    /// Stores `uid` (none: `NIL`), adding one reference.
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
        if let Some(id) = self.find_bytes(&bytes) {
            self.slots[id as usize].refs += 1;
            return Ok(id);
        }
        let slot = Slot { bytes, refs: 1 };
        let id = match self.free {
            Some(id) => {
                let next = u32::from_le_bytes(
                    self.slots[id as usize].bytes[..4]
                        .try_into()
                        .unwrap_or_default(),
                );
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
        let (slots, hasher) = (&self.slots, &self.hasher);
        self.table.insert_unique(hasher.hash_one(bytes), id, |&id| {
            hasher.hash_one(slots[id as usize].bytes)
        });
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

    /// Drops one reference; the last one frees the UID.
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
        let bytes = slot.bytes;
        if let Ok(entry) = self
            .table
            .find_entry(self.hasher.hash_one(bytes), |&m| m == id)
        {
            entry.remove();
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

    /// How many distinct UUIDs are stored.
    #[cfg(test)]
    pub(crate) fn len(&self) -> usize {
        self.live
    }

    pub(crate) fn heap_bytes(&self) -> usize {
        self.slots.heap_bytes() + table_bytes(&self.table)
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
    fn equal_uids_share_one_counted_slot() {
        let (mut strs, mut uids) = (StrInterner::default(), UidStore::default());
        let a = uids.store(&mut strs, Some(A)).expect("room");
        let a2 = uids.store(&mut strs, Some(A)).expect("room");
        let b = uids.store(&mut strs, Some(B)).expect("room");
        let other = uids.store(&mut strs, Some("uid-1")).expect("room");
        assert_eq!(a, a2);
        assert_ne!(a, b);
        assert_eq!(uids.store(&mut strs, None), Ok(NIL));
        assert_eq!(uids.get(&strs, other).as_deref(), Some("uid-1"));
        assert_eq!(uids.get(&strs, b).as_deref(), Some(B));
        assert_eq!(uids.find(&strs, "uid-1"), Some(other));
        assert_eq!(uids.len(), 2);
        uids.release(&mut strs, a);
        assert_eq!(uids.find(&strs, A), Some(a));
        uids.release(&mut strs, a2);
        assert_eq!(uids.find(&strs, A), None);
        // The freed slot is reused.
        let c = uids
            .store(&mut strs, Some("0f8fad5b-d9cb-469f-a165-708677289500"))
            .expect("room");
        assert_eq!(c, a);
        uids.retain(&mut strs, other);
        uids.release(&mut strs, other);
        assert_eq!(uids.find(&strs, "uid-1"), Some(other));
        uids.release(&mut strs, other);
        assert_eq!(strs.len(), 0);
        assert_eq!(uids.len(), 2);
    }
}
