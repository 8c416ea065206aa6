//! What both record kinds (tasks' and schedules') are made of: a CRC-32
//! trailer sealing every byte before it, and a reader that takes fields in
//! order and checks every length, so that damage is refused, never misread.

/// The size of a CRC-32 trailer.
pub(crate) const CRC_BYTES: usize = 4;

/// Appends the CRC-32 of everything in `out`.
pub(crate) fn seal(out: &mut Vec<u8>) {
    seal_from(out, 0);
}

/// Appends the CRC-32 of what `out` holds from `start` on.
pub(crate) fn seal_from(out: &mut Vec<u8>, start: usize) {
    let crc = crc32fast::hash(&out[start..]);
    out.extend_from_slice(&crc.to_le_bytes());
}

/// The bytes before a CRC-32 trailer, if the trailer matches them.
pub(crate) fn unseal(bytes: &[u8]) -> Result<&[u8], String> {
    let split = bytes.len().checked_sub(CRC_BYTES).ok_or("too short for its checksum")?;
    let (content, trailer) = bytes.split_at(split);
    let stored = u32::from_le_bytes(trailer.try_into().expect("CRC_BYTES bytes"));
    let computed = crc32fast::hash(content);
    if stored == computed {
        Ok(content)
    } else {
        Err(format!("checksum mismatch: stored {stored:08x}, computed {computed:08x}"))
    }
}

/// Reads a record's fields in order, checking every length.
pub(crate) struct Reader<'a> {
    pub(crate) bytes: &'a [u8],
    pub(crate) at: usize,
}

impl<'a> Reader<'a> {
    pub(crate) fn take(&mut self, len: usize) -> Result<&'a [u8], String> {
        let end = self.at.checked_add(len).filter(|&end| end <= self.bytes.len());
        let end = end.ok_or_else(|| format!("truncated: needs {len} bytes at offset {}", self.at))?;
        let slice = &self.bytes[self.at..end];
        self.at = end;
        Ok(slice)
    }
    pub(crate) fn array<const N: usize>(&mut self) -> Result<[u8; N], String> {
        Ok(self.take(N)?.try_into().expect("took N bytes"))
    }
    pub(crate) fn u8(&mut self) -> Result<u8, String> {
        Ok(self.array::<1>()?[0])
    }
    pub(crate) fn u16(&mut self) -> Result<u16, String> {
        Ok(u16::from_le_bytes(self.array()?))
    }
    pub(crate) fn u32(&mut self) -> Result<u32, String> {
        Ok(u32::from_le_bytes(self.array()?))
    }
    pub(crate) fn u64(&mut self) -> Result<u64, String> {
        Ok(u64::from_le_bytes(self.array()?))
    }
    pub(crate) fn str(&mut self, len: usize) -> Result<&'a str, String> {
        std::str::from_utf8(self.take(len)?).map_err(|error| format!("invalid UTF-8: {error}"))
    }
    pub(crate) fn end(&self) -> Result<(), String> {
        if self.at == self.bytes.len() {
            Ok(())
        } else {
            Err(format!("{} trailing bytes", self.bytes.len() - self.at))
        }
    }
}
