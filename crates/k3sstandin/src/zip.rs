//! A one-entry zip archive, as k3s writes a compressed etcd snapshot
//! (`pkg/etcd/snapshot.go`, `compressSnapshot`: the entry is named as the
//! snapshot, method Deflate). The deflate stream here is made of stored
//! blocks (valid deflate, no compression): the lab's snapshots are small and
//! what matters to fleet-role is the file's name and that it unpacks.

/// Errors of making an archive.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// Zip without its 64-bit extension holds at most 4 GiB.
    #[error("a {0}-byte snapshot is too large for a zip without zip64")]
    TooLarge(usize),
}

/// CRC-32 (IEEE), as zip records it.
fn crc32(data: &[u8]) -> u32 {
    let mut crc = !0u32;
    for &b in data {
        crc ^= u32::from(b);
        for _ in 0..8 {
            crc = if crc & 1 != 0 {
                (crc >> 1) ^ 0xedb8_8320
            } else {
                crc >> 1
            };
        }
    }
    !crc
}

/// `data` as a deflate stream of stored blocks.
fn deflate_stored(data: &[u8]) -> Vec<u8> {
    let mut out = Vec::with_capacity(data.len() + data.len() / 65_535 * 5 + 5);
    let mut chunks = data.chunks(65_535).peekable();
    if chunks.peek().is_none() {
        // An empty final stored block.
        out.extend([1, 0, 0, 0xff, 0xff]);
    }
    while let Some(chunk) = chunks.next() {
        let last = chunks.peek().is_none();
        out.push(u8::from(last)); // BFINAL, BTYPE=00
        let len = chunk.len() as u16;
        out.extend(len.to_le_bytes());
        out.extend((!len).to_le_bytes());
        out.extend(chunk);
    }
    out
}

/// MS-DOS time and date of unix time `secs` (UTC; zip has no zone).
fn dos_time(secs: i64) -> (u16, u16) {
    let days = secs.div_euclid(86_400);
    let rem = secs.rem_euclid(86_400);
    // Days since 1970-01-01 to a civil date (Howard Hinnant's algorithm).
    let z = days + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z.rem_euclid(146_097);
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let day = doy - (153 * mp + 2) / 5 + 1;
    let month = if mp < 10 { mp + 3 } else { mp - 9 };
    let year = yoe + era * 400 + i64::from(month <= 2);
    let time = ((rem / 3600) << 11) | (((rem % 3600) / 60) << 5) | ((rem % 60) / 2);
    let date = ((year - 1980).clamp(0, 127) << 9) | (month << 5) | day;
    (time as u16, date as u16)
}

/// A zip archive holding `data` as the one entry `name`, modified at unix
/// time `modified`.
///
/// # Errors
/// [`Error::TooLarge`] past 4 GiB.
pub fn one_entry(name: &str, data: &[u8], modified: i64) -> Result<Vec<u8>, Error> {
    let packed = deflate_stored(data);
    let (usize_, csize) = (
        u32::try_from(data.len()).map_err(|_| Error::TooLarge(data.len()))?,
        u32::try_from(packed.len()).map_err(|_| Error::TooLarge(data.len()))?,
    );
    let crc = crc32(data);
    let (time, date) = dos_time(modified);
    let name = name.as_bytes();
    let mut common = Vec::new();
    common.extend(20u16.to_le_bytes()); // version needed: 2.0 (deflate)
    common.extend(0u16.to_le_bytes()); // flags
    common.extend(8u16.to_le_bytes()); // method: deflate
    common.extend(time.to_le_bytes());
    common.extend(date.to_le_bytes());
    common.extend(crc.to_le_bytes());
    common.extend(csize.to_le_bytes());
    common.extend(usize_.to_le_bytes());
    common.extend((name.len() as u16).to_le_bytes());
    common.extend(0u16.to_le_bytes()); // extra length

    let mut out = Vec::with_capacity(packed.len() + 2 * name.len() + 100);
    out.extend(0x0403_4b50u32.to_le_bytes());
    out.extend(&common);
    out.extend(name);
    out.extend(&packed);

    let central_at = out.len() as u32;
    out.extend(0x0201_4b50u32.to_le_bytes());
    out.extend(0x0314u16.to_le_bytes()); // made by: unix, 2.0
    out.extend(&common);
    out.extend(0u16.to_le_bytes()); // comment length
    out.extend(0u16.to_le_bytes()); // disk
    out.extend(0u16.to_le_bytes()); // internal attributes
    out.extend((0o100_600u32 << 16).to_le_bytes()); // a 0600 regular file
    out.extend(0u32.to_le_bytes()); // the local header's offset
    out.extend(name);
    let central_len = out.len() as u32 - central_at;

    out.extend(0x0605_4b50u32.to_le_bytes());
    out.extend([0, 0, 0, 0]); // this disk, the central directory's disk
    out.extend(1u16.to_le_bytes());
    out.extend(1u16.to_le_bytes());
    out.extend(central_len.to_le_bytes());
    out.extend(central_at.to_le_bytes());
    out.extend(0u16.to_le_bytes());
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_crc_and_the_dos_date_are_zips() {
        assert_eq!(crc32(b"123456789"), 0xcbf4_3926);
        // 2026-12-01 14:40:54 UTC.
        let (time, date) = dos_time(1_796_136_054);
        assert_eq!(date, ((2026 - 1980) << 9) | (12 << 5) | 1);
        assert_eq!(time, (14 << 11) | (40 << 5) | 27);
    }

    #[test]
    fn unzip_unpacks_the_entry_as_it_was() {
        let dir = tempfile::tempdir().unwrap();
        // More than one stored block.
        let data: Vec<u8> = (0..200_000u32).map(|i| (i * 7 % 251) as u8).collect();
        let file = dir.path().join("s.zip");
        std::fs::write(
            &file,
            one_entry("swap-1-n1-100", &data, 1_796_136_054).unwrap(),
        )
        .unwrap();
        let out = std::process::Command::new("unzip")
            .arg("-p")
            .arg(&file)
            .arg("swap-1-n1-100")
            .output()
            .expect("unzip runs");
        assert!(
            out.status.success(),
            "{}",
            String::from_utf8_lossy(&out.stderr)
        );
        assert_eq!(out.stdout, data);
    }
}
