//! A batch task: a task file (version 1) whose placeholders are filled per repository, plus
//! a top-level `batch:` block (branch name, commit message, the batch's cost limit) that a
//! single run does not read. Loading checks every placeholder and one rendered task, so a
//! mistake stops the batch (exit 2, file:line:column) before any repository is touched.

use std::path::{Path, PathBuf};

use serde::Deserialize;
use serde_saphyr::Spanned;

use super::manifest::Repo;
use super::template::Template;
use crate::config::{self, ConfigError};
use crate::task::Task;

pub const DEFAULT_BRANCH: &str = "tollgate/{{ repo.name }}";

#[derive(Debug, Deserialize)]
struct Outer {
    #[serde(default)]
    batch: Option<BatchFile>,
    #[serde(default)]
    limits: Option<OuterLimits>,
}

/// The one key of `limits:` that is the batch's, not a run's: the issue's spelling of
/// `batch.max_cost_usd`. Every other limit is the single run's and is read there.
#[derive(Debug, Deserialize)]
struct OuterLimits {
    batch_max_cost_usd: Option<Spanned<f64>>,
}

const LIMIT_KEY: &str = "batch_max_cost_usd:";

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
        let source = text.clone();
        Self::load_text(text, file, repos).map_err(|err| err.with_source(file, &source))
    }

    fn load_text(text: String, file: &Path, repos: &[Repo]) -> Result<BatchTask, ConfigError> {
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
        let max_cost_usd = self.cost_limit(&rendered, block.max_cost_usd, outer.limits)?;
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
            max_cost_usd,
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

impl BatchTask {
    /// The batch's cost limit, spelt `batch.max_cost_usd` or `limits.batch_max_cost_usd`.
    fn cost_limit(
        &self,
        rendered: &str,
        in_batch: Option<f64>,
        limits: Option<OuterLimits>,
    ) -> Result<Option<f64>, ConfigError> {
        let in_limits = limits.and_then(|limits| limits.batch_max_cost_usd);
        if let Some(spanned) = &in_limits {
            let loc = spanned.referenced;
            let at = |message: &str| {
                ConfigError::new(&self.file, loc.line(), loc.column(), message.to_string())
            };
            if in_batch.is_some() {
                return Err(at(
                    "the batch's cost limit is set twice: keep limits.batch_max_cost_usd or \
                     batch.max_cost_usd",
                ));
            }
            // The single run never sees the key: its line is blanked (see `task_text`),
            // which needs the key on a line of its own.
            let own_line = usize::try_from(loc.line())
                .ok()
                .and_then(|line| rendered.lines().nth(line.saturating_sub(1)))
                .is_some_and(|line| line.trim_start().starts_with(LIMIT_KEY));
            if !own_line {
                return Err(at(
                    "write limits.batch_max_cost_usd on a line of its own (block style), \
                     or use batch.max_cost_usd",
                ));
            }
        }
        let limit = in_batch.or(in_limits.map(|spanned| spanned.value));
        match limit {
            Some(limit) if !(limit.is_finite() && limit > 0.0) => Err(ConfigError::whole_file(
                &self.file,
                "the batch's cost limit (max_cost_usd) must be a positive amount of US dollars",
            )),
            _ => Ok(limit),
        }
    }
}

fn absolute_parent(file: &Path) -> PathBuf {
    let absolute = std::path::absolute(file).unwrap_or_else(|_| file.to_path_buf());
    absolute
        .parent()
        .map_or_else(|| PathBuf::from("/"), Path::to_path_buf)
}

/// The text a single run reads: the `batch:` block's lines and `limits.batch_max_cost_usd`
/// emptied (line numbers kept), `policy:` absolute.
fn task_text(rendered: &str, dir: &Path) -> String {
    let mut out: Vec<String> = Vec::new();
    let mut in_batch = false;
    // The bare `limits:` line's index while no run limit has been seen under it: were the
    // batch's key its only child, the run would read `limits:` as null and refuse it.
    let mut bare_limits: Option<usize> = None;
    let mut in_limits = false;
    for line in rendered.lines() {
        let top_level = line
            .chars()
            .next()
            .is_some_and(|c| !c.is_whitespace() && c != '#');
        if top_level {
            in_batch = line.starts_with("batch:");
            in_limits = line.starts_with("limits:");
            if let Some(index) = bare_limits.take() {
                out[index] = "limits: {}".into();
            }
            if in_limits && line.trim_end() == "limits:" {
                bare_limits = Some(out.len());
            }
        }
        let child = in_limits && !top_level;
        let batch_limit = child && line.trim_start().starts_with(LIMIT_KEY);
        if child && !batch_limit && !line.trim().is_empty() && !line.trim_start().starts_with('#') {
            bare_limits = None;
        }
        if in_batch || batch_limit {
            out.push(String::new());
            continue;
        }
        match line.strip_prefix("policy:").map(str::trim) {
            Some(value) if !value.is_empty() => {
                let unquoted = value.trim_matches(|c| c == '"' || c == '\'');
                let path = dir.join(unquoted);
                let quoted = path.display().to_string().replace('\'', "''");
                out.push(format!("policy: '{quoted}'"));
            }
            _ => out.push(line.to_string()),
        }
    }
    if let Some(index) = bare_limits {
        out[index] = "limits: {}".into();
    }
    let mut text = out.join("\n");
    text.push('\n');
    text
}

/// What `git check-ref-format` would refuse, in the cases a template can produce.
pub fn valid_branch(name: &str) -> bool {
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

    const TASK: &str = "version: 1\nname: bump {{ repo.name }}\nprompt: go\npolicy: p.yaml\nbatch:\n  branch: fix/{{ repo.name }}\n  max_cost_usd: 2\nmodel:\n  provider: scripted\n  script: [[{text: ok}]]\n";

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

    fn load(text: &str) -> Result<BatchTask, ConfigError> {
        BatchTask::load(text.into(), Path::new("/tasks/t.yaml"), &[repo("api")])
    }

    #[test]
    fn the_issue_spelling_limits_batch_max_cost_usd_is_the_batch_limit_and_hidden_from_the_run() {
        let text = "version: 1\nname: n\nprompt: go\nlimits:\n  max_turns: 3\n  batch_max_cost_usd: 0.5\nmodel:\n  provider: scripted\n  script: [[{text: ok}]]\n";
        let task = load(text).unwrap();
        let (run_text, settings) = task.render(&repo("api")).unwrap();
        assert_eq!(settings.max_cost_usd, Some(0.5));
        assert!(!run_text.contains("batch_max_cost_usd"));
        assert!(run_text.contains("  max_turns: 3\n"));
        // Alone under `limits:`, the key leaves an empty block the run still reads.
        let alone = text.replace("  max_turns: 3\n", "");
        assert_eq!(
            load(&alone)
                .unwrap()
                .render(&repo("api"))
                .unwrap()
                .1
                .max_cost_usd,
            Some(0.5)
        );
    }

    #[test]
    fn the_cost_limit_set_twice_or_in_flow_style_or_not_positive_is_refused() {
        let base = "version: 1\nname: n\nprompt: go\nmodel:\n  provider: scripted\n  script: [[{text: ok}]]\n";
        let twice = format!("{base}batch:\n  max_cost_usd: 1\nlimits:\n  batch_max_cost_usd: 2\n");
        let err = load(&twice).unwrap_err();
        assert_eq!((err.line, err.column), (10, 23), "{err}");
        assert!(err.message.contains("set twice"), "{err}");
        let flow = format!("{base}limits: {{max_turns: 2, batch_max_cost_usd: 2}}\n");
        let err = load(&flow).unwrap_err();
        assert_eq!(err.line, 7, "{err}");
        assert!(err.message.contains("a line of its own"), "{err}");
        let zero = format!("{base}limits:\n  batch_max_cost_usd: 0\n");
        assert!(load(&zero).unwrap_err().message.contains("positive"));
    }

    #[test]
    fn branch_names_git_refuses_are_caught() {
        for bad in ["", "a b", "a..b", "-x", "x.lock", "a:b", "x/"] {
            assert!(!valid_branch(bad), "{bad}");
        }
        assert!(valid_branch("tollgate/api-v1.2"));
    }
}
