//! A container's output as `GET /containers/{name}/logs` gives it for a
//! container without a terminal: frames of an 8-byte header (the stream,
//! three zero bytes, the payload's length big-endian) and the payload.

/// A container's standard output and standard error, each in order.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct Output {
    /// What it wrote to standard output.
    pub stdout: Vec<u8>,
    /// What it wrote to standard error.
    pub stderr: Vec<u8>,
}

/// Splits Docker's multiplexed log stream. A frame of an unknown stream,
/// or one cut short, is an error naming where.
pub(crate) fn demux(mut raw: &[u8]) -> Result<Output, String> {
    let mut out = Output::default();
    let mut at = 0usize;
    while !raw.is_empty() {
        if raw.len() < 8 {
            return Err(format!("a log frame's header cut short at byte {at}"));
        }
        let size = u32::from_be_bytes([raw[4], raw[5], raw[6], raw[7]]) as usize;
        let payload = raw
            .get(8..8 + size)
            .ok_or_else(|| format!("a log frame of {size} bytes cut short at byte {at}"))?;
        match raw[0] {
            // 0 is standard input, which a log never carries but a daemon
            // may name for a terminal-less exec: read as output.
            0 | 1 => out.stdout.extend_from_slice(payload),
            2 => out.stderr.extend_from_slice(payload),
            other => {
                return Err(format!(
                    "a log frame of unknown stream {other} at byte {at}"
                ));
            }
        }
        at += 8 + size;
        raw = &raw[8 + size..];
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn frame(stream: u8, payload: &[u8]) -> Vec<u8> {
        let mut f = vec![stream, 0, 0, 0];
        f.extend_from_slice(&(payload.len() as u32).to_be_bytes());
        f.extend_from_slice(payload);
        f
    }

    #[test]
    fn the_frames_split_into_standard_output_and_error_each_in_order() {
        let mut raw = frame(1, b"k3s version ");
        raw.extend(frame(2, b"warn\n"));
        raw.extend(frame(1, b"v1.33.5+k3s1\n"));
        let out = demux(&raw).unwrap();
        assert_eq!(out.stdout, b"k3s version v1.33.5+k3s1\n");
        assert_eq!(out.stderr, b"warn\n");
        assert_eq!(demux(&[]).unwrap(), Output::default());
    }

    #[test]
    fn a_frame_cut_short_or_of_an_unknown_stream_is_an_error() {
        let whole = frame(1, b"hello");
        assert!(demux(&whole[..6]).unwrap_err().contains("header"));
        assert!(demux(&whole[..10]).unwrap_err().contains("5 bytes"));
        assert!(demux(&frame(7, b"x")).unwrap_err().contains("stream 7"));
    }
}
