//! The batch's list of repositories: a YAML sequence (`repo`, `name`, `ref`, `params`) or a
//! plain list of lines (`LOCATION [REF]`). Owns telling a local path from a git URL and each
//! repository's id; it never touches git or the network.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use serde::Deserialize;

use crate::config::{self, ConfigError};

/// Where a repository comes from.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum RepoSource {
    /// A checkout on this machine: worked on through a `git worktree`, never in place.
    Local(PathBuf),
    /// Anything git can clone (`https://`, `ssh://`, `file://`, `user@host:path`).
    Url(String),
}

/// One repository of the batch.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Repo {
    /// Unique in the manifest; names the repo's folder, journal and testcase, and picks its
    /// shard, so it must stay the same from one batch to the next.
    pub id: String,
    pub source: RepoSource,
    /// The commit-ish to start from; `None` is the source's HEAD.
    pub git_ref: Option<String>,
    pub params: BTreeMap<String, String>,
}

impl Repo {
    /// The location as the manifest gave it (resolved for local paths), for templates.
    pub fn location(&self) -> String {
        match &self.source {
            RepoSource::Local(path) => path.display().to_string(),
            RepoSource::Url(url) => url.clone(),
        }
    }
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct EntryFile {
    repo: String,
    name: Option<String>,
    #[serde(rename = "ref")]
    git_ref: Option<String>,
    #[serde(default)]
    params: BTreeMap<String, String>,
}

/// Reads a manifest; relative local paths are resolved against `base` (the manifest's
/// folder). Every error names the manifest and, where known, the line.
pub fn parse_manifest(text: &str, file: &Path, base: &Path) -> Result<Vec<Repo>, ConfigError> {
    let is_yaml = text
        .lines()
        .map(str::trim_start)
        .any(|line| line.starts_with("- ") || line == "-");
    let entries: Vec<(u64, EntryFile)> = if is_yaml {
        let raw: Vec<EntryFile> = config::parse(text, file)?;
        raw.into_iter().map(|entry| (0, entry)).collect()
    } else {
        plain_lines(text, file)?
    };
    let mut repos: Vec<Repo> = Vec::with_capacity(entries.len());
    for (line, entry) in entries {
        let at = |message: String| ConfigError::new(file, line, 1, message);
        let source = source_of(&entry.repo, base);
        let id = match &entry.name {
            Some(name) => name.clone(),
            None => default_id(&entry.repo),
        };
        if !valid_id(&id) {
            return Err(at(format!(
                "`{id}` cannot name a repository: use letters, digits, `.`, `_` and `-` (set `name:`)"
            )));
        }
        if repos.iter().any(|repo| repo.id == id) {
            return Err(at(format!(
                "two repositories are named `{id}`; give one a different `name:`"
            )));
        }
        repos.push(Repo {
            id,
            source,
            git_ref: entry.git_ref,
            params: entry.params,
        });
    }
    if repos.is_empty() {
        return Err(ConfigError::whole_file(
            file,
            "the manifest names no repository",
        ));
    }
    Ok(repos)
}

/// `LOCATION [REF]` a line; blank lines and `#` comments are skipped.
fn plain_lines(text: &str, file: &Path) -> Result<Vec<(u64, EntryFile)>, ConfigError> {
    let mut entries = Vec::new();
    for (index, line) in text.lines().enumerate() {
        let line_no = index as u64 + 1;
        let line = line.trim();
        if line.is_empty() || line.starts_with('#') {
            continue;
        }
        let mut words = line.split_whitespace();
        let (Some(repo), git_ref) = (words.next(), words.next()) else {
            continue;
        };
        if let Some(extra) = words.next() {
            return Err(ConfigError::new(
                file,
                line_no,
                1,
                format!(
                    "unexpected `{extra}`: a line is `LOCATION [REF]`; use the YAML form for parameters"
                ),
            ));
        }
        entries.push((
            line_no,
            EntryFile {
                repo: repo.to_string(),
                name: None,
                git_ref: git_ref.map(str::to_string),
                params: BTreeMap::new(),
            },
        ));
    }
    Ok(entries)
}

fn source_of(location: &str, base: &Path) -> RepoSource {
    let scp_like = location
        .split_once(':')
        .is_some_and(|(host, _)| host.contains('@') && !host.contains('/'));
    if location.contains("://") || scp_like {
        RepoSource::Url(location.to_string())
    } else {
        RepoSource::Local(base.join(location))
    }
}

/// The location's last component without `.git`: `../api.git` → `api`.
fn default_id(location: &str) -> String {
    let trimmed = location.trim_end_matches('/');
    let last = trimmed.rsplit(['/', ':']).next().unwrap_or(trimmed);
    last.strip_suffix(".git").unwrap_or(last).to_string()
}

fn valid_id(id: &str) -> bool {
    !id.is_empty()
        && !id.starts_with('.')
        && id
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || matches!(c, '.' | '_' | '-'))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parse(text: &str) -> Result<Vec<Repo>, ConfigError> {
        parse_manifest(text, Path::new("repos.txt"), Path::new("/base"))
    }

    #[test]
    fn plain_lines_name_local_paths_and_urls() {
        let repos = parse("# fleet\n../api\nhttps://example.com/org/web.git v2\n\n").unwrap();
        assert_eq!(repos[0].id, "api");
        assert_eq!(
            repos[0].source,
            RepoSource::Local(PathBuf::from("/base/../api"))
        );
        assert_eq!(repos[1].id, "web");
        assert_eq!(
            repos[1].source,
            RepoSource::Url("https://example.com/org/web.git".into())
        );
        assert_eq!(repos[1].git_ref.as_deref(), Some("v2"));
    }

    #[test]
    fn yaml_entries_carry_names_refs_and_params() {
        let repos = parse(
            "- repo: git@example.com:org/api.git\n  name: api-v1\n  ref: main\n  params: {pkg: serde}\n",
        )
        .unwrap();
        assert_eq!(repos[0].id, "api-v1");
        assert!(matches!(repos[0].source, RepoSource::Url(_)));
        assert_eq!(
            repos[0].params.get("pkg").map(String::as_str),
            Some("serde")
        );
    }

    #[test]
    fn duplicate_ids_and_extra_words_are_errors_with_their_line() {
        let err = parse("a/x\nb/x\n").unwrap_err();
        assert_eq!(err.line, 2);
        let err = parse("a main extra\n").unwrap_err();
        assert_eq!(err.line, 1);
        assert!(parse("# nothing\n").is_err());
    }
}
