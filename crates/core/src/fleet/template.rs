//! Placeholders in a batch task: `{{ repo.name }}`, `{{ repo.ref }}`, `{{ repo.location }}`
//! and `{{ repo.params.KEY }}`, filled per repository by the one template engine
//! (`crate::template`). Checked once at load, so an unknown name stops the batch before any
//! repository is touched; rendering then cannot fail.

use std::path::Path;

use super::manifest::Repo;
use crate::config::ConfigError;

/// A batch task's text with its placeholders checked against every repository.
#[derive(Debug, Clone)]
pub struct Template {
    inner: crate::template::Template,
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
        let inner = crate::template::Template::parse(text, file, first_line)?;
        inner.check(|path| {
            let inner = path.join(".");
            let placeholder = placeholder(path).ok_or_else(|| {
                format!(
                    "unknown placeholder `{{{{ {inner} }}}}`; known: repo.name, repo.ref, repo.location, repo.params.KEY"
                )
            })?;
            if let Placeholder::Param(key) = placeholder
                && let Some(missing) = repos.iter().find(|repo| !repo.params.contains_key(key))
            {
                return Err(format!(
                    "`{{{{ repo.params.{key} }}}}`: repository `{}` has no parameter `{key}` in the manifest",
                    missing.id
                ));
            }
            Ok(())
        })?;
        Ok(Template { inner })
    }

    /// The text for one repository.
    pub fn render(&self, repo: &Repo) -> String {
        // Every placeholder was checked at parse against every repository.
        self.inner
            .render(|path| {
                Ok(match placeholder(path) {
                    Some(Placeholder::Name) => repo.id.clone(),
                    Some(Placeholder::Ref) => repo.git_ref.clone().unwrap_or_else(|| "HEAD".into()),
                    Some(Placeholder::Location) => repo.location(),
                    Some(Placeholder::Param(key)) => {
                        repo.params.get(key).cloned().unwrap_or_default()
                    }
                    None => String::new(),
                })
            })
            .unwrap_or_default()
    }
}

/// A name a placeholder may hold.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Placeholder<'a> {
    Name,
    Ref,
    Location,
    Param(&'a str),
}

fn placeholder(path: &[String]) -> Option<Placeholder<'_>> {
    match path {
        [repo, field] if repo == "repo" => match field.as_str() {
            "name" => Some(Placeholder::Name),
            "ref" => Some(Placeholder::Ref),
            "location" => Some(Placeholder::Location),
            _ => None,
        },
        [repo, params, key] if repo == "repo" && params == "params" => {
            Some(Placeholder::Param(key))
        }
        _ => None,
    }
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
