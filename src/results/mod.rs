//! Offloading large tool results (S8): a result over its tool's threshold is written to the
//! run's results folder and the history keeps a preview and the path.

use std::path::{Path, PathBuf};
use std::sync::Arc;

use crate::redact::Redactor;

/// Characters of an offloaded result the model still sees inline.
const PREVIEW_CHARS: usize = 2_000;

/// Writes results to one folder, named by tool_use id so each is found from the transcript.
#[derive(Debug, Clone)]
pub struct ResultStore {
    dir: PathBuf,
    redactor: Arc<Redactor>,
}

impl ResultStore {
    pub fn new(dir: PathBuf) -> Self {
        ResultStore {
            dir,
            redactor: Arc::default(),
        }
    }

    /// Offloaded files are redacted before they are written.
    pub fn redacting(mut self, redactor: Arc<Redactor>) -> Self {
        self.redactor = redactor;
        self
    }

    pub fn dir(&self) -> &Path {
        &self.dir
    }

    /// Returns what the history should hold for `content`: itself when it fits `max_chars`,
    /// else a preview and the path of the full text. If the file cannot be written the
    /// content is cut instead, saying so: a result is never silently lost or left whole.
    pub fn fit(&self, tool_use_id: &str, content: String, max_chars: usize) -> String {
        let total = content.chars().count();
        if total <= max_chars {
            return content;
        }
        let preview: String = content.chars().take(PREVIEW_CHARS.min(max_chars)).collect();
        let file_name: String = tool_use_id
            .chars()
            .map(|c| {
                if c.is_ascii_alphanumeric() || c == '_' || c == '-' {
                    c
                } else {
                    '_'
                }
            })
            .collect();
        let path = self.dir.join(format!("{file_name}.txt"));
        let written = std::fs::create_dir_all(&self.dir).and_then(|()| {
            crate::out_dir::write_atomic(&path, self.redactor.redact(&content).as_bytes())
                .map_err(|err| err.source)
        });
        match written {
            Ok(()) => format!(
                "{preview}\n… [output too large: {total} characters; the full text is in {} — Read it in ranges or Grep it]",
                path.display()
            ),
            Err(err) => format!(
                "{preview}\n… [output too large: {total} characters; cut here because it could not be saved: {err}]"
            ),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn large_results_are_offloaded_with_a_preview() {
        let dir = tempfile::tempdir().unwrap();
        let store = ResultStore::new(dir.path().join("results"));
        assert_eq!(store.fit("toolu_1", "small".into(), 100), "small");
        let big = "x".repeat(5_000);
        let kept = store.fit("toolu/2", big.clone(), 3_000);
        let path = dir.path().join("results/toolu_2.txt");
        assert!(kept.contains(&path.display().to_string()), "{kept}");
        assert!(kept.len() < 2_300);
        assert_eq!(std::fs::read_to_string(path).unwrap(), big);
    }
}
