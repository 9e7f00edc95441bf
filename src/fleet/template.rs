//! Placeholders in a batch task: `{{ repo.name }}`, `{{ repo.ref }}`, `{{ repo.location }}`
//! and `{{ repo.params.KEY }}`, filled per repository. Checked once at load, so an unknown
//! name stops the batch before any repository is touched; rendering then cannot fail.

use std::path::Path;

use super::manifest::Repo;
use crate::config::ConfigError;

/// A name a placeholder may hold.
#[derive(Debug, Clone, PartialEq, Eq)]
enum Placeholder {
    Name,
    Ref,
    Location,
    Param(String),
}

/// Text with its placeholders located and validated.
#[derive(Debug, Clone)]
pub struct Template {
    pieces: Vec<Piece>,
}

#[derive(Debug, Clone)]
enum Piece {
    Text(String),
    Hole(Placeholder),
}

impl Template {
    /// Parses `text` (the content of `file`, starting at `first_line`); a placeholder is
    /// valid when every repository of the batch can fill it.
    pub fn parse(
        text: &str,
        file: &Path,
        first_line: u64,
        repos: &[Repo],
    ) -> Result<Template, ConfigError> {
        let mut pieces = Vec::new();
        let mut rest = text;
        let mut consumed = 0;
        while let Some(open) = rest.find("{{") {
            pieces.push(Piece::Text(rest[..open].to_string()));
            let start = consumed + open;
            let (line, column) = position(text, start, first_line);
            let at = |message: String| ConfigError::new(file, line, column, message);
            let after = &rest[open + 2..];
            let Some(close) = after.find("}}") else {
                return Err(at("`{{` without its closing `}}`".to_string()));
            };
            let inner = after[..close].trim();
            let placeholder = placeholder(inner).ok_or_else(|| {
                at(format!(
                    "unknown placeholder `{{{{ {inner} }}}}`; known: repo.name, repo.ref, repo.location, repo.params.KEY"
                ))
            })?;
            if let Placeholder::Param(key) = &placeholder
                && let Some(missing) = repos.iter().find(|repo| !repo.params.contains_key(key))
            {
                return Err(at(format!(
                    "`{{{{ repo.params.{key} }}}}`: repository `{}` has no parameter `{key}` in the manifest",
                    missing.id
                )));
            }
            pieces.push(Piece::Hole(placeholder));
            let used = open + 2 + close + 2;
            consumed += used;
            rest = &rest[used..];
        }
        pieces.push(Piece::Text(rest.to_string()));
        Ok(Template { pieces })
    }

    /// The text for one repository.
    pub fn render(&self, repo: &Repo) -> String {
        let mut text = String::new();
        for piece in &self.pieces {
            match piece {
                Piece::Text(part) => text.push_str(part),
                Piece::Hole(Placeholder::Name) => text.push_str(&repo.id),
                Piece::Hole(Placeholder::Ref) => {
                    text.push_str(repo.git_ref.as_deref().unwrap_or("HEAD"));
                }
                Piece::Hole(Placeholder::Location) => text.push_str(&repo.location()),
                Piece::Hole(Placeholder::Param(key)) => {
                    text.push_str(repo.params.get(key).map_or("", String::as_str));
                }
            }
        }
        text
    }
}

fn placeholder(inner: &str) -> Option<Placeholder> {
    match inner {
        "repo.name" => Some(Placeholder::Name),
        "repo.ref" => Some(Placeholder::Ref),
        "repo.location" => Some(Placeholder::Location),
        other => other
            .strip_prefix("repo.params.")
            .filter(|key| {
                !key.is_empty()
                    && key
                        .chars()
                        .all(|c| c.is_ascii_alphanumeric() || c == '_' || c == '-')
            })
            .map(|key| Placeholder::Param(key.to_string())),
    }
}

/// 1-based line and column of byte `offset` in `text`.
fn position(text: &str, offset: usize, first_line: u64) -> (u64, u64) {
    let before = &text[..offset];
    let line = first_line + before.matches('\n').count() as u64;
    let column = before
        .rfind('\n')
        .map_or(before.chars().count(), |newline| {
            before[newline + 1..].chars().count()
        }) as u64
        + 1;
    (line, column)
}

#[cfg(test)]
mod tests {
    use std::collections::BTreeMap;
    use std::path::PathBuf;

    use super::*;
    use crate::fleet::manifest::RepoSource;

    fn repo(id: &str, params: &[(&str, &str)]) -> Repo {
        Repo {
            id: id.into(),
            source: RepoSource::Local(PathBuf::from("/r").join(id)),
            git_ref: None,
            params: params
                .iter()
                .map(|(k, v)| (k.to_string(), v.to_string()))
                .collect::<BTreeMap<_, _>>(),
        }
    }

    #[test]
    fn placeholders_fill_per_repo() {
        let repos = [repo("api", &[("pkg", "serde")])];
        let template = Template::parse(
            "bump {{ repo.params.pkg }} in {{repo.name}} at {{ repo.ref }}",
            Path::new("t.yaml"),
            1,
            &repos,
        )
        .unwrap();
        assert_eq!(template.render(&repos[0]), "bump serde in api at HEAD");
    }

    #[test]
    fn errors_point_at_the_placeholder() {
        let repos = [repo("api", &[]), repo("web", &[("pkg", "x")])];
        let cases: &[(&str, u64, u64, &str)] = &[
            ("a\n  b {{ repo.owner }}", 2, 5, "unknown placeholder"),
            (
                "{{ repo.params.pkg }}",
                1,
                1,
                "repository `api` has no parameter",
            ),
            ("x\n\n{{ repo.name", 3, 1, "without its closing"),
        ];
        for (text, line, column, message) in cases {
            let err = Template::parse(text, Path::new("t.yaml"), 1, &repos).unwrap_err();
            assert_eq!((err.line, err.column), (*line, *column), "{text}");
            assert!(err.message.contains(message), "{}", err.message);
        }
    }
}
