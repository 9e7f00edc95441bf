//! A batch task: a task file (version 1) whose placeholders are filled per repository, plus
//! a top-level `batch:` block (branch name, commit message, the batch's cost limit) that a
//! single run does not read. Loading checks every placeholder and one rendered task, so a
//! mistake stops the batch (exit 2, file:line:column) before any repository is touched.

use std::path::{Path, PathBuf};

use serde::Deserialize;

use super::manifest::Repo;
use super::template::Template;
use crate::config::{self, ConfigError};
use crate::task::Task;

pub const DEFAULT_BRANCH: &str = "tollgate/{{ repo.name }}";

#[derive(Debug, Deserialize)]
struct Outer {
    #[serde(default)]
    batch: Option<BatchFile>,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct BatchFile {
    branch: Option<String>,
    commit_message: Option<String>,
    max_cost_usd: Option<f64>,
    publish: Option<PublishFile>,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct PublishFile {
    /// `owner/name` on the forge.
    repo: String,
    base: String,
    remote: Option<String>,
    api_url: Option<String>,
    token_env: Option<String>,
    title: Option<String>,
}

/// Where and how a repository's branch is published.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PublishSettings {
    pub forge_repo: String,
    pub base: String,
    /// A remote's name or a URL, as `git push` takes it.
    pub remote: String,
    pub api_url: String,
    /// The environment variable holding the token; its value is read, never written.
    pub token_env: String,
    pub title: String,
}

/// What the batch itself reads from the task file, filled for one repository.
#[derive(Debug, Clone, PartialEq)]
pub struct BatchSettings {
    pub branch: String,
    pub commit_message: String,
    /// Stop starting repositories once this much is spent (running ones finish).
    pub max_cost_usd: Option<f64>,
    pub publish: Option<PublishSettings>,
}

/// The loaded batch task, ready to be filled per repository.
#[derive(Debug, Clone)]
pub struct BatchTask {
    pub file: PathBuf,
    /// The task file's text as written: part of each repository's cache key.
    pub text: String,
    template: Template,
    branch: Template,
}

impl BatchTask {
    pub fn load(text: String, file: &Path, repos: &[Repo]) -> Result<BatchTask, ConfigError> {
        let template = Template::parse(&text, file, 1, repos)?;
        let branch = Template::parse(DEFAULT_BRANCH, file, 1, repos)?;
        let task = BatchTask {
            file: file.to_path_buf(),
            text,
            template,
            branch,
        };
        // One rendering parsed in full: the task's own errors, with the file's own lines.
        if let Some(first) = repos.first() {
            let (task_text, _) = task.render(first)?;
            let dir = absolute_parent(file);
            Task::parse(&task_text, file, &dir, None)?;
        }
        Ok(task)
    }

    /// The task file for `repo` (the `batch:` block blanked, line numbers kept, a relative
    /// `policy:` made absolute as the file will be read from the repo's run folder) and
    /// the batch's settings.
    pub fn render(&self, repo: &Repo) -> Result<(String, BatchSettings), ConfigError> {
        let rendered = self.template.render(repo);
        let outer: Outer = config::parse(&rendered, &self.file)?;
        let block = outer.batch.unwrap_or(BatchFile {
            branch: None,
            commit_message: None,
            max_cost_usd: None,
            publish: None,
        });
        if let Some(limit) = block.max_cost_usd
            && !(limit.is_finite() && limit > 0.0)
        {
            return Err(ConfigError::whole_file(
                &self.file,
                "batch.max_cost_usd must be a positive amount of US dollars",
            ));
        }
        let commit_message = block
            .commit_message
            .unwrap_or_else(|| format!("tollgate batch: {}", repo.id));
        let publish = block.publish.map(|publish| PublishSettings {
            forge_repo: publish.repo,
            base: publish.base,
            remote: publish.remote.unwrap_or_else(|| "origin".into()),
            api_url: publish
                .api_url
                .unwrap_or_else(|| "https://api.github.com".into()),
            token_env: publish.token_env.unwrap_or_else(|| "GITHUB_TOKEN".into()),
            title: publish.title.unwrap_or_else(|| commit_message.clone()),
        });
        let settings = BatchSettings {
            branch: block.branch.unwrap_or_else(|| self.branch.render(repo)),
            commit_message,
            max_cost_usd: block.max_cost_usd,
            publish,
        };
        if !valid_branch(&settings.branch) {
            return Err(ConfigError::whole_file(
                &self.file,
                format!(
                    "`{}` (repository {}) is not a usable branch name",
                    settings.branch, repo.id
                ),
            ));
        }
        let dir = absolute_parent(&self.file);
        Ok((task_text(&rendered, &dir), settings))
    }
}

fn absolute_parent(file: &Path) -> PathBuf {
    let absolute = std::path::absolute(file).unwrap_or_else(|_| file.to_path_buf());
    absolute
        .parent()
        .map_or_else(|| PathBuf::from("/"), Path::to_path_buf)
}

/// The text a single run reads: the `batch:` block's lines emptied, `policy:` absolute.
fn task_text(rendered: &str, dir: &Path) -> String {
    let mut out = String::with_capacity(rendered.len());
    let mut in_batch = false;
    for line in rendered.lines() {
        let top_level = line
            .chars()
            .next()
            .is_some_and(|c| !c.is_whitespace() && c != '#');
        if top_level {
            in_batch = line.starts_with("batch:");
        }
        if in_batch {
            out.push('\n');
            continue;
        }
        match line.strip_prefix("policy:").map(str::trim) {
            Some(value) if !value.is_empty() => {
                let unquoted = value.trim_matches(|c| c == '"' || c == '\'');
                let path = dir.join(unquoted);
                let quoted = path.display().to_string().replace('\'', "''");
                out.push_str(&format!("policy: '{quoted}'"));
            }
            _ => out.push_str(line),
        }
        out.push('\n');
    }
    out
}

/// What `git check-ref-format` would refuse, in the cases a template can produce.
fn valid_branch(name: &str) -> bool {
    !name.is_empty()
        && !name.starts_with(['-', '/', '.'])
        && !name.ends_with(['/', '.'])
        && !name.ends_with(".lock")
        && !name.contains("..")
        && !name.contains("//")
        && !name.contains("@{")
        && !name
            .chars()
            .any(|c| c.is_control() || " ~^:?*[\\".contains(c))
}

#[cfg(test)]
mod tests {
    use std::collections::BTreeMap;

    use super::*;
    use crate::fleet::manifest::RepoSource;

    const TASK: &str = "version: 1\nname: bump {{ repo.name }}\nprompt: go\npolicy: p.yaml\nbatch:\n  branch: fix/{{ repo.name }}\n  max_cost_usd: 2\nmodel:\n  provider: scripted\n  script: []\n";

    fn repo(id: &str) -> Repo {
        Repo {
            id: id.into(),
            source: RepoSource::Local(PathBuf::from("/r")),
            git_ref: None,
            params: BTreeMap::new(),
        }
    }

    #[test]
    fn the_batch_block_is_read_then_blanked_keeping_lines() {
        let task = BatchTask {
            file: PathBuf::from("/tasks/t.yaml"),
            text: TASK.into(),
            template: Template::parse(TASK, Path::new("t.yaml"), 1, &[repo("api")]).unwrap(),
            branch: Template::parse(DEFAULT_BRANCH, Path::new("t.yaml"), 1, &[]).unwrap(),
        };
        let (text, settings) = task.render(&repo("api")).unwrap();
        assert_eq!(settings.branch, "fix/api");
        assert_eq!(settings.max_cost_usd, Some(2.0));
        assert_eq!(text.lines().count(), TASK.lines().count());
        assert!(text.contains("name: bump api\n"));
        assert!(text.contains("policy: '/tasks/p.yaml'\n"));
        assert!(!text.contains("branch"));
    }

    #[test]
    fn branch_names_git_refuses_are_caught() {
        for bad in ["", "a b", "a..b", "-x", "x.lock", "a:b", "x/"] {
            assert!(!valid_branch(bad), "{bad}");
        }
        assert!(valid_branch("tollgate/api-v1.2"));
    }
}
