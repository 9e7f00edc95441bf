//! The transcript's integrity tag: each line ends with `"tag":"<hex>"`, an HMAC-SHA256 made
//! with the operator's key (kept in the state folder, never in a workspace) over the previous
//! line's tag and this line's bytes. A line changed, added, removed or moved breaks the chain
//! from there on; a last line cut short (a run killed while writing it) is told apart, so it
//! can be dropped while every whole line before it still counts. Dropping whole lines at the
//! end cannot be told from a run that stopped there: what remains is still the operator's own
//! record, up to that point.

use std::sync::Arc;

use ring::hmac;

/// What a transcript's chain starts from, so its tags are never valid in another record.
const GENESIS: &[u8] = b"tollgate transcript v1";
/// What `approvals.jsonl`'s chain starts from: an approval line is never a transcript line,
/// nor one the other way round.
pub const APPROVALS_GENESIS: &[u8] = b"tollgate approvals v1";
/// The field each line ends with, before its 64 hex digits.
const FIELD: &str = ",\"tag\":\"";
const TAG_HEX: usize = 64;

/// The operator's transcript key.
#[derive(Clone)]
pub struct TranscriptKey(hmac::Key);

impl std::fmt::Debug for TranscriptKey {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("TranscriptKey(…)")
    }
}

impl TranscriptKey {
    pub fn new(bytes: &[u8]) -> TranscriptKey {
        TranscriptKey(hmac::Key::new(hmac::HMAC_SHA256, bytes))
    }

    fn tag(&self, previous: &[u8; 32], body: &[u8]) -> [u8; 32] {
        let mut context = hmac::Context::with_key(&self.0);
        context.update(previous);
        context.update(body);
        let mut tag = [0u8; 32];
        tag.copy_from_slice(context.sign().as_ref());
        tag
    }

    fn genesis(&self, record: &[u8]) -> [u8; 32] {
        let mut tag = [0u8; 32];
        tag.copy_from_slice(hmac::sign(&self.0, record).as_ref());
        tag
    }
}

/// The writer's side: the tag of the last line written.
#[derive(Debug, Clone)]
pub struct Chain {
    key: Arc<TranscriptKey>,
    last: [u8; 32],
}

impl Chain {
    /// A new transcript's chain.
    pub fn start(key: Arc<TranscriptKey>) -> Chain {
        Chain::start_record(key, GENESIS)
    }

    /// A new chain of another record the operator's key tags (`APPROVALS_GENESIS`).
    pub fn start_record(key: Arc<TranscriptKey>, genesis: &[u8]) -> Chain {
        let last = key.genesis(genesis);
        Chain { key, last }
    }

    /// Going on after a verified transcript's last line.
    pub fn resume(key: Arc<TranscriptKey>, last: [u8; 32]) -> Chain {
        Chain { key, last }
    }

    /// `json` (one serialised object, secrets already replaced) with its tag as the last
    /// field. An object with no field at all gets none (the transcript never writes one).
    pub fn seal(&mut self, json: &str) -> String {
        let Some(open) = json.strip_suffix('}').filter(|open| open.len() > 1) else {
            return json.to_string();
        };
        self.last = self.key.tag(&self.last, json.as_bytes());
        let mut out = String::with_capacity(json.len() + FIELD.len() + TAG_HEX + 2);
        out.push_str(open);
        out.push_str(FIELD);
        out.push_str(&hex(&self.last));
        out.push_str("\"}");
        out
    }
}

/// A transcript whose lines all carry a valid tag.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Verified<'t> {
    /// The whole lines, each with its newline (tags still in them).
    pub text: &'t str,
    /// The last line's tag, to go on from.
    pub last: [u8; 32],
    /// A last line cut short (no newline): left out of `text`.
    pub torn: bool,
}

#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum VerifyError {
    #[error(
        "there is no transcript key in tollgate's state folder, so no transcript can be trusted"
    )]
    NoKey,
    #[error(
        "line {0} carries no integrity tag: the transcript was not written by this tollgate for this operator (or was written without a state folder)"
    )]
    Untagged(usize),
    #[error(
        "line {0} does not match its integrity tag: the transcript was changed after tollgate wrote it, or it was written with another operator's key"
    )]
    Tampered(usize),
}

/// Checks every line of `text` against `key`: the whole lines if all carry their tag, a
/// torn last line set apart. The first line that fails is the error.
pub fn verify<'t>(key: Option<&TranscriptKey>, text: &'t str) -> Result<Verified<'t>, VerifyError> {
    verify_record(key, GENESIS, text)
}

/// [`verify`] for a record whose chain starts from `genesis`.
pub fn verify_record<'t>(
    key: Option<&TranscriptKey>,
    genesis: &[u8],
    text: &'t str,
) -> Result<Verified<'t>, VerifyError> {
    let key = key.ok_or(VerifyError::NoKey)?;
    let mut last = key.genesis(genesis);
    let whole = text.rfind('\n').map_or(0, |end| end + 1);
    for (index, line) in text[..whole].split_terminator('\n').enumerate() {
        let number = index + 1;
        let (body, tag) = split_tag(line).ok_or(VerifyError::Untagged(number))?;
        let mut data = Vec::with_capacity(32 + body.len());
        data.extend_from_slice(&last);
        data.extend_from_slice(body.as_bytes());
        hmac::verify(&key.0, &data, &tag).map_err(|_| VerifyError::Tampered(number))?;
        last = tag;
    }
    Ok(Verified {
        text: &text[..whole],
        last,
        torn: whole < text.len(),
    })
}

/// A sealed line as the object it was before sealing, and its tag.
fn split_tag(line: &str) -> Option<(String, [u8; 32])> {
    let rest = line.strip_suffix("\"}")?;
    let at = rest.len().checked_sub(TAG_HEX)?;
    let digits = rest.get(at..)?;
    let open = rest.get(..at)?.strip_suffix(FIELD)?;
    let mut tag = [0u8; 32];
    for (byte, pair) in tag.iter_mut().zip(digits.as_bytes().chunks(2)) {
        let pair = std::str::from_utf8(pair).ok()?;
        *byte = u8::from_str_radix(pair, 16).ok()?;
    }
    Some((format!("{open}}}"), tag))
}

/// Lowercase hex digits of `bytes`.
pub fn hex(bytes: &[u8]) -> String {
    const DIGITS: &[u8; 16] = b"0123456789abcdef";
    let mut out = String::with_capacity(bytes.len() * 2);
    for byte in bytes {
        out.push(char::from(DIGITS[usize::from(byte >> 4)]));
        out.push(char::from(DIGITS[usize::from(byte & 0x0f)]));
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn sealed(key: &TranscriptKey, lines: &[&str]) -> String {
        let mut chain = Chain::start(Arc::new(key.clone()));
        lines
            .iter()
            .map(|line| format!("{}\n", chain.seal(line)))
            .collect()
    }

    #[test]
    fn every_change_breaks_the_chain_and_a_torn_tail_is_set_apart() {
        let key = TranscriptKey::new(b"0123456789abcdef0123456789abcdef");
        let lines = [
            r#"{"seq":1,"type":"run_started","mode":"dontAsk"}"#,
            r#"{"seq":2,"type":"user_message"}"#,
            r#"{"seq":3,"type":"assistant_message"}"#,
        ];
        let text = sealed(&key, &lines);
        let good = verify(Some(&key), &text).unwrap();
        assert_eq!((good.text, good.torn), (text.as_str(), false));
        for line in text.lines() {
            let value: serde_json::Value = serde_json::from_str(line).unwrap();
            assert_eq!(value["tag"].as_str().unwrap().len(), TAG_HEX);
        }
        // A torn last line: the whole ones still verify, the cut one is set apart.
        let torn = format!("{text}{}", &text[..20]);
        let read = verify(Some(&key), &torn).unwrap();
        assert_eq!(
            (read.text, read.torn, read.last),
            (text.as_str(), true, good.last)
        );
        let mut chain = Chain::resume(Arc::new(key.clone()), read.last);
        let more = format!("{text}{}\n", chain.seal(r#"{"seq":4}"#));
        assert!(verify(Some(&key), &more).is_ok());

        let edited = text.replacen("dontAsk", "bypassPermissions", 1);
        let other_key = TranscriptKey::new(b"another key, another operator...");
        let swapped: String = {
            let mut rows: Vec<&str> = text.lines().collect();
            rows.swap(1, 2);
            rows.iter().map(|row| format!("{row}\n")).collect()
        };
        let dropped: String = text
            .lines()
            .enumerate()
            .filter(|(at, _)| *at != 1)
            .map(|(_, row)| format!("{row}\n"))
            .collect();
        let planted = format!("{}\n{text}", lines[0]);
        let blank_line = format!("{text}\n");
        let cases = [
            (verify(Some(&key), &edited), VerifyError::Tampered(1)),
            (verify(Some(&other_key), &text), VerifyError::Tampered(1)),
            (verify(Some(&key), &swapped), VerifyError::Tampered(2)),
            (verify(Some(&key), &dropped), VerifyError::Tampered(2)),
            (verify(Some(&key), &planted), VerifyError::Untagged(1)),
            (verify(None, &text), VerifyError::NoKey),
            (verify(Some(&key), &blank_line), VerifyError::Untagged(4)),
        ];
        for (got, want) in cases {
            assert_eq!(got, Err(want));
        }
    }
}
