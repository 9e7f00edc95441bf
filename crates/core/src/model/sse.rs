//! Server-sent events from a byte stream, in linear time: each byte is scanned once, whatever
//! the size of an event, and one event is capped. Only `data:` lines matter to tollgate (the
//! APIs put the event's type in the JSON too); it never sees the HTTP side.

/// The largest event accepted, its `data:` lines together. Generous on purpose — a long
/// tool input arrives as many small deltas, so one event near this size is a broken or
/// hostile server — yet small enough that the run's memory stays bounded.
pub const MAX_EVENT_BYTES: usize = 64 * 1024 * 1024;

#[derive(Debug, thiserror::Error, PartialEq, Eq)]
pub enum SseError {
    #[error("one event is larger than the {} MiB cap", MAX_EVENT_BYTES / (1024 * 1024))]
    EventTooLarge,
    #[error("an event line is not valid UTF-8")]
    NotUtf8,
}

/// Feeds bytes in, takes whole events' data out.
#[derive(Debug, Default)]
pub struct SseDecoder {
    /// The line being received, without its end.
    line: Vec<u8>,
    /// The `data:` lines of the event being received, joined by `\n`.
    data: String,
    has_data: bool,
    /// A `\r` ended the last chunk: a `\n` starting the next one belongs to it.
    after_cr: bool,
}

impl SseDecoder {
    /// Every event completed by `chunk`, in order.
    pub fn feed(&mut self, chunk: &[u8]) -> Result<Vec<String>, SseError> {
        let mut events = Vec::new();
        let mut rest = chunk;
        if self.after_cr && rest.first() == Some(&b'\n') {
            rest = &rest[1..];
        }
        self.after_cr = false;
        while let Some(end) = rest.iter().position(|&b| b == b'\n' || b == b'\r') {
            self.push_line_part(&rest[..end])?;
            self.finish_line(&mut events)?;
            let crlf = rest[end] == b'\r' && rest.get(end + 1) == Some(&b'\n');
            if rest[end] == b'\r' && end + 1 == rest.len() {
                self.after_cr = true;
            }
            rest = &rest[end + if crlf { 2 } else { 1 }..];
        }
        self.push_line_part(rest)?;
        Ok(events)
    }

    /// The stream ended: an event not closed by a blank line is dispatched all the same, as
    /// browsers do not but proxies that drop the last blank line make necessary.
    pub fn finish(mut self) -> Result<Option<String>, SseError> {
        let mut events = Vec::new();
        if !self.line.is_empty() {
            self.finish_line(&mut events)?;
        }
        if self.has_data {
            events.push(std::mem::take(&mut self.data));
        }
        Ok(events.pop())
    }

    fn push_line_part(&mut self, part: &[u8]) -> Result<(), SseError> {
        if self.line.len() + part.len() + self.data.len() > MAX_EVENT_BYTES {
            return Err(SseError::EventTooLarge);
        }
        self.line.extend_from_slice(part);
        Ok(())
    }

    fn finish_line(&mut self, events: &mut Vec<String>) -> Result<(), SseError> {
        let line = std::mem::take(&mut self.line);
        if line.is_empty() {
            if self.has_data {
                events.push(std::mem::take(&mut self.data));
                self.has_data = false;
            }
            return Ok(());
        }
        let (field, value) = match line.iter().position(|&b| b == b':') {
            Some(colon) => {
                let value = &line[colon + 1..];
                (&line[..colon], value.strip_prefix(b" ").unwrap_or(value))
            }
            None => (&line[..], &[][..]),
        };
        // Comments (`: ping`), `event:`, `id:` and `retry:` carry nothing tollgate uses.
        if field == b"data" {
            let value = std::str::from_utf8(value).map_err(|_| SseError::NotUtf8)?;
            if self.has_data {
                self.data.push('\n');
            }
            self.data.push_str(value);
            self.has_data = true;
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn decode(chunks: &[&[u8]]) -> Vec<String> {
        let mut decoder = SseDecoder::default();
        let mut out = Vec::new();
        for chunk in chunks {
            out.extend(decoder.feed(chunk).unwrap());
        }
        out.extend(decoder.finish().unwrap());
        out
    }

    #[test]
    fn events_split_anywhere_decode_the_same() {
        let stream =
            b"event: a\ndata: {\"x\":1}\n\n: ping\r\n\r\ndata: one\ndata:two\r\rdata: last";
        let whole = decode(&[stream]);
        assert_eq!(whole, ["{\"x\":1}", "one\ntwo", "last"]);
        for split in 0..stream.len() {
            let (a, b) = stream.split_at(split);
            assert_eq!(decode(&[a, b]), whole, "split at {split}");
        }
    }

    #[test]
    fn a_crlf_split_across_chunks_is_one_line_end() {
        assert_eq!(
            decode(&[b"data: a\r", b"\n\r", b"\ndata: b\n\n"]),
            ["a", "b"]
        );
    }

    #[test]
    fn an_event_over_the_cap_is_refused() {
        let mut decoder = SseDecoder::default();
        let chunk = vec![b'x'; 1024 * 1024];
        decoder.feed(b"data: ").unwrap();
        let mut result = Ok(Vec::new());
        for _ in 0..=MAX_EVENT_BYTES / chunk.len() {
            result = decoder.feed(&chunk);
            if result.is_err() {
                break;
            }
        }
        assert_eq!(result, Err(SseError::EventTooLarge));
    }

    #[test]
    fn data_that_is_not_utf8_is_an_error() {
        let mut decoder = SseDecoder::default();
        assert_eq!(decoder.feed(b"data: \xff\n"), Err(SseError::NotUtf8));
    }
}
