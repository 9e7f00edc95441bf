//! Offloading large tool results (S8): a result over its tool's threshold, or the largest
//! results of a user message over the per-message budget, are written whole to the run's
//! results folder and the history keeps a preview (head and tail) and the path. Decides once
//! per result: nothing here ever rewrites a message already sent.

use std::path::{Path, PathBuf};
use std::sync::Arc;

use crate::out_dir::OutputError;
use crate::redact::Redactor;

/// A result that had to be offloaded but whose file could not be written. The run's record
/// is then incomplete, so the caller ends the run as an output failure (exit 5).
#[derive(Debug)]
pub struct Unsaved {
    /// What the history holds instead: the preview, saying the rest was cut and why.
    pub kept: String,
    pub error: OutputError,
}

/// Characters of the start of an offloaded result kept inline: enough for the command's
/// first errors or a file's header.
const HEAD_CHARS: usize = 1_500;
/// Characters of the end kept inline: a build log's verdict is in its last lines.
const TAIL_CHARS: usize = 500;
/// Characters of a result a preview keeps (head and tail).
pub const KEPT_CHARS: usize = HEAD_CHARS + TAIL_CHARS;
/// What a preview costs at most, with its note; the budget counts a replaced result at this.
pub const PREVIEW_CHARS: usize = KEPT_CHARS + 300;

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
    /// else what [`ResultStore::offload`] leaves.
    pub fn fit(
        &self,
        tool_use_id: &str,
        content: String,
        max_chars: usize,
    ) -> Result<String, Unsaved> {
        if content.chars().count() <= max_chars {
            return Ok(content);
        }
        self.offload(tool_use_id, &content, max_chars)
    }

    /// Writes `content` whole to `<dir>/<tool_use_id>.txt` (`.json` when it is a JSON value)
    /// and returns a preview of at most `max_chars` characters of it, the path and the full
    /// size. If the file cannot be written the content is cut instead, saying so, and the
    /// failure is returned with it: a result is never silently lost or left whole.
    pub fn offload(
        &self,
        tool_use_id: &str,
        content: &str,
        max_chars: usize,
    ) -> Result<String, Unsaved> {
        let total = content.chars().count();
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
        let is_json = matches!(
            serde_json::from_str::<serde_json::Value>(content),
            Ok(serde_json::Value::Object(_) | serde_json::Value::Array(_))
        );
        let extension = if is_json { "json" } else { "txt" };
        let name = format!("{file_name}.{extension}");
        let path = self.dir.join(&name);
        // Beneath the output folder, through no link: a resumed folder's `results` that is a
        // link to elsewhere refuses the write (an output failure) instead of being followed.
        let (base, folder) = match (self.dir.parent(), self.dir.file_name()) {
            (Some(base), Some(folder)) if !base.as_os_str().is_empty() => {
                (base, Path::new(folder).join(&name))
            }
            (_, Some(folder)) => (Path::new("."), Path::new(folder).join(&name)),
            (_, None) => (self.dir.as_path(), PathBuf::from(&name)),
        };
        let written =
            crate::out_dir::write_beneath(base, &folder, self.redactor.redact(content).as_bytes());
        let (head, tail) = preview(content, total, max_chars);
        let note = match &written {
            Ok(()) => format!(
                "[output too large: {total} characters; the full text is in {} — Read it with offset/limit or Grep it instead of running the command again]",
                path.display()
            ),
            Err(err) => format!(
                "[output too large: {total} characters; cut here because it could not be saved: {}]",
                err.source
            ),
        };
        let kept = match tail {
            Some(tail) => format!("{head}\n… {note} …\n{tail}"),
            None => format!("{head}\n… {note}"),
        };
        match written {
            Ok(()) => Ok(kept),
            Err(error) => Err(Unsaved { kept, error }),
        }
    }
}

/// The head, and the tail when there is room for one, of a `total`-character text.
fn preview(content: &str, total: usize, max_chars: usize) -> (String, Option<String>) {
    let room = (HEAD_CHARS + TAIL_CHARS).min(max_chars);
    if total <= room {
        return (content.to_string(), None);
    }
    let tail_chars = if room == HEAD_CHARS + TAIL_CHARS {
        TAIL_CHARS
    } else {
        room / 4
    };
    let head: String = content.chars().take(room - tail_chars).collect();
    if tail_chars == 0 {
        return (head, None);
    }
    let tail: String = content.chars().skip(total - tail_chars).collect();
    (head, Some(tail))
}

/// The per-message budget (S8): which results of one user message to replace by previews so
/// that their total fits `budget` characters, largest first. `sizes[i]` is `None` for a result
/// that may not be offloaded (Read's: offloading it would loop). Returns indices into `sizes`.
pub fn over_budget(sizes: &[Option<usize>], budget: usize) -> Vec<usize> {
    let mut total: usize = sizes.iter().map(|size| size.unwrap_or(0)).sum();
    let mut candidates: Vec<(usize, usize)> = sizes
        .iter()
        .enumerate()
        .filter_map(|(index, size)| size.map(|size| (index, size)))
        .filter(|&(_, size)| size > PREVIEW_CHARS)
        .collect();
    // Largest first; the earlier of equal sizes first, so the choice is deterministic.
    candidates.sort_by(|a, b| b.1.cmp(&a.1).then(a.0.cmp(&b.0)));
    let mut replaced = Vec::new();
    for (index, size) in candidates {
        if total <= budget {
            break;
        }
        total = total - size + PREVIEW_CHARS;
        replaced.push(index);
    }
    replaced
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn large_results_are_offloaded_with_a_head_and_a_tail() {
        let dir = tempfile::tempdir().unwrap();
        let store = ResultStore::new(dir.path().join("results"));
        assert_eq!(store.fit("toolu_1", "small".into(), 100).unwrap(), "small");
        let big = format!("FIRST{}LAST", "x".repeat(5_000));
        let kept = store.fit("toolu/2", big.clone(), 3_000).unwrap();
        let path = dir.path().join("results/toolu_2.txt");
        assert!(kept.contains(&path.display().to_string()), "{kept}");
        assert!(kept.contains("5009 characters"), "{kept}");
        assert!(
            kept.starts_with("FIRST") && kept.ends_with("LAST"),
            "{kept}"
        );
        assert!(kept.chars().count() <= PREVIEW_CHARS, "{}", kept.len());
        assert_eq!(std::fs::read_to_string(path).unwrap(), big);
    }

    #[test]
    fn json_results_keep_their_extension_and_small_limits_their_size() {
        let dir = tempfile::tempdir().unwrap();
        let store = ResultStore::new(dir.path().to_path_buf());
        let json = format!("[{}1]", "1, ".repeat(400));
        let kept = store.fit("toolu_3", json.clone(), 100).unwrap();
        assert_eq!(
            std::fs::read_to_string(dir.path().join("toolu_3.json")).unwrap(),
            json
        );
        let note = kept.find('…').unwrap();
        assert_eq!(kept[..note].chars().count(), 76);
    }

    /// A results folder that cannot hold the file — a file where it belongs, or a link (a
    /// resumed output folder a repository holds), which is not followed — cuts the result and
    /// reports the failure; nothing lands where the link leads.
    #[test]
    fn a_file_that_cannot_be_written_is_cut_and_reported() {
        let dir = tempfile::tempdir().unwrap();
        let elsewhere = tempfile::tempdir().unwrap();
        let (blocked, linked) = (dir.path().join("results"), dir.path().join("linked"));
        std::fs::write(&blocked, "x").unwrap();
        std::os::unix::fs::symlink(elsewhere.path(), &linked).unwrap();
        for folder in [blocked, linked] {
            let store = ResultStore::new(folder.clone());
            let big = format!("FIRST{}LAST", "x".repeat(5_000));
            let unsaved = store.fit("toolu_4", big, 3_000).unwrap_err();
            assert_eq!(unsaved.error.path, folder.join("toolu_4.txt"));
            assert!(
                unsaved.kept.starts_with("FIRST") && unsaved.kept.ends_with("LAST"),
                "{}",
                unsaved.kept
            );
            assert!(
                unsaved
                    .kept
                    .contains("cut here because it could not be saved"),
                "{}",
                unsaved.kept
            );
        }
        assert_eq!(std::fs::read_dir(elsewhere.path()).unwrap().count(), 0);
    }

    #[test]
    fn the_budget_replaces_the_largest_results_first() {
        let big = PREVIEW_CHARS * 10;
        /// The results' sizes, the budget, and the results it replaces.
        type Case<'a> = (&'a [Option<usize>], usize, &'a [usize]);
        let table: &[Case] = &[
            (&[Some(100), Some(200)], 1_000, &[]),
            (&[Some(big), Some(big * 2), Some(100)], big * 2, &[1]),
            (&[Some(big), Some(big * 2), Some(100)], big, &[1, 0]),
            // Read's result is never replaced, even when it alone is over the budget.
            (&[None, Some(big)], 10, &[1]),
            (&[Some(big), Some(big)], big + PREVIEW_CHARS, &[0]),
            (&[Some(big), Some(big)], big, &[0, 1]),
            // Results no larger than a preview are not worth replacing.
            (&[Some(PREVIEW_CHARS); 4], 10, &[]),
        ];
        for (sizes, budget, replaced) in table {
            assert_eq!(
                over_budget(sizes, *budget),
                *replaced,
                "{sizes:?} in {budget}"
            );
        }
    }
}
