//! The protobuf wire format's primitives: varints, keys and length-delimited fields.
//! <https://protobuf.dev/programming-guides/encoding/>

use super::CodecError;

pub(crate) const VARINT: u8 = 0;
pub(crate) const FIXED64: u8 = 1;
pub(crate) const LEN: u8 = 2;
pub(crate) const FIXED32: u8 = 5;

pub(crate) struct Reader<'a> {
    data: &'a [u8],
    pos: usize,
}

impl<'a> Reader<'a> {
    pub fn new(data: &'a [u8]) -> Self {
        Reader { data, pos: 0 }
    }

    pub fn done(&self) -> bool {
        self.pos >= self.data.len()
    }

    pub fn varint(&mut self) -> Result<u64, CodecError> {
        let mut value = 0u64;
        for shift in (0..64).step_by(7) {
            let byte = *self
                .data
                .get(self.pos)
                .ok_or_else(|| CodecError::new("a varint runs past the end of the message"))?;
            self.pos += 1;
            value |= u64::from(byte & 0x7f) << shift;
            if byte < 0x80 {
                return Ok(value);
            }
        }
        Err(CodecError::new("a varint is longer than 10 bytes"))
    }

    /// A field's tag and wire type.
    pub fn key(&mut self) -> Result<(u32, u8), CodecError> {
        let key = self.varint()?;
        let tag =
            u32::try_from(key >> 3).map_err(|_| CodecError::new("a field tag is too large"))?;
        Ok((tag, (key & 7) as u8))
    }

    fn take(&mut self, n: usize) -> Result<&'a [u8], CodecError> {
        let end = self
            .pos
            .checked_add(n)
            .filter(|&e| e <= self.data.len())
            .ok_or_else(|| CodecError::new("a field runs past the end of the message"))?;
        let out = &self.data[self.pos..end];
        self.pos = end;
        Ok(out)
    }

    pub fn len_delimited(&mut self) -> Result<&'a [u8], CodecError> {
        let n = self.varint()?;
        self.take(usize::try_from(n).map_err(|_| CodecError::new("a field is too long"))?)
    }

    pub fn fixed64(&mut self) -> Result<u64, CodecError> {
        let bytes = self.take(8)?;
        Ok(u64::from_le_bytes(bytes.try_into().unwrap_or_default()))
    }

    /// Skips a field this table does not know (a field newer than the table).
    pub fn skip(&mut self, wire: u8) -> Result<(), CodecError> {
        match wire {
            VARINT => self.varint().map(drop),
            FIXED64 => self.take(8).map(drop),
            LEN => self.len_delimited().map(drop),
            FIXED32 => self.take(4).map(drop),
            other => Err(CodecError::new(format!("unsupported wire type {other}"))),
        }
    }
}

pub(crate) fn put_varint(out: &mut Vec<u8>, mut value: u64) {
    while value >= 0x80 {
        out.push((value as u8) | 0x80);
        value >>= 7;
    }
    out.push(value as u8);
}

pub(crate) fn put_key(out: &mut Vec<u8>, tag: u32, wire: u8) {
    put_varint(out, (u64::from(tag) << 3) | u64::from(wire));
}

pub(crate) fn put_bytes(out: &mut Vec<u8>, tag: u32, bytes: &[u8]) {
    put_key(out, tag, LEN);
    put_varint(out, bytes.len() as u64);
    out.extend_from_slice(bytes);
}
