//! A Claude Code settings key that loads and grants nothing in a headless run, with why: the
//! settings file, its hooks map and its sandbox block each name theirs.

/// A Claude Code settings key that loaded and grants nothing here, with why.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct IgnoredKey {
    /// As written, dotted below the top level (`sandbox.excludedCommands`).
    pub key: String,
    pub why: String,
}

impl IgnoredKey {
    pub fn new(key: impl Into<String>, why: impl Into<String>) -> IgnoredKey {
        IgnoredKey {
            key: key.into(),
            why: why.into(),
        }
    }
}

impl std::fmt::Display for IgnoredKey {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{} ({})", self.key, self.why)
    }
}
