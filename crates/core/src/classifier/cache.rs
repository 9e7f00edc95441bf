//! Verdicts remembered by review hash: in memory for the run, and optionally as one small
//! JSON file per reply in `classifier.cache_dir`, so a batch over many repositories judges
//! the same action once. Only well-formed replies are kept; a failure is never cached.

use std::collections::HashMap;
use std::path::PathBuf;

use super::reply::Reply;

#[derive(Debug, Default)]
pub struct ReplyCache {
    memory: HashMap<String, Reply>,
    dir: Option<PathBuf>,
}

impl ReplyCache {
    pub fn new(dir: Option<PathBuf>) -> Self {
        ReplyCache {
            memory: HashMap::new(),
            dir,
        }
    }

    /// The remembered reply. A cache file that cannot be read or parsed is a miss: the
    /// classifier asks again rather than trust it.
    pub fn get(&mut self, hash: &str) -> Option<Reply> {
        if let Some(reply) = self.memory.get(hash) {
            return Some(reply.clone());
        }
        let path = self.dir.as_ref()?.join(format!("{hash}.json"));
        let text = std::fs::read_to_string(path).ok()?;
        let reply: Reply = serde_json::from_str(&text).ok()?;
        self.memory.insert(hash.to_string(), reply.clone());
        Some(reply)
    }

    /// Remembers a reply. Writing the folder's file is best effort (a read-only cache
    /// still serves); it is written whole to a temporary name first so a parallel run never
    /// reads half a file.
    pub fn put(&mut self, hash: &str, reply: &Reply) {
        self.memory.insert(hash.to_string(), reply.clone());
        let Some(dir) = &self.dir else { return };
        let Ok(text) = serde_json::to_string(reply) else {
            return;
        };
        let temporary = dir.join(format!(".{hash}.{}.tmp", std::process::id()));
        let written = std::fs::create_dir_all(dir)
            .and_then(|()| std::fs::write(&temporary, text))
            .and_then(|()| std::fs::rename(&temporary, dir.join(format!("{hash}.json"))));
        if let Err(err) = written {
            tracing::warn!(
                "cannot write the classifier cache in {}: {err}",
                dir.display()
            );
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::classifier::reply::{Risk, Ruling};

    #[test]
    fn a_reply_survives_into_a_second_cache_on_the_same_folder() {
        let dir = tempfile::tempdir().unwrap();
        let reply = Reply {
            decision: Ruling::Allow,
            reason: "lint".into(),
            risk: Risk::Low,
        };
        let mut first = ReplyCache::new(Some(dir.path().join("c")));
        assert_eq!(first.get("abc"), None);
        first.put("abc", &reply);
        let mut second = ReplyCache::new(Some(dir.path().join("c")));
        assert_eq!(second.get("abc"), Some(reply));
        std::fs::write(dir.path().join("c/bad.json"), "{").unwrap();
        assert_eq!(second.get("bad"), None);
    }
}
