//! Auto mode's configuration as policies write it: the classifier (`classifier:`), the prose it
//! judges by (`auto_mode:`), and which of these a run obeys when several sources give them.
//! Pure data and merging; the classifier itself lives in `src/classifier/`.

use std::path::{Path, PathBuf};
use std::time::Duration;

use serde::{Deserialize, Serialize};
use serde_json::Value;
use serde_saphyr::Spanned;

use super::authority::{ConfigOrigin, Power, Standing, standing};
use super::rule::{Rule, RuleKind};
use super::rule_set::{PolicySource, SourceKind};
use super::tool_name::ToolName;

/// Which provider answers the classifier's requests.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum ClassifierProvider {
    Scripted,
    Anthropic,
    Openai,
}

/// A policy's `classifier:` block as written; every field optional, since the run's task
/// supplies the defaults (its provider, that provider's small model).
#[derive(Debug, Clone, Default, PartialEq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ClassifierFile {
    pub provider: Option<ClassifierProvider>,
    pub model: Option<String>,
    pub base_url: Option<String>,
    pub api_key_env: Option<String>,
    /// Seconds for one classifier request.
    pub timeout: Option<f64>,
    pub max_tokens: Option<u32>,
    pub max_cost_usd: Option<f64>,
    pub cache_dir: Option<Spanned<String>>,
    pub two_stage: Option<bool>,
    /// The scripted provider's answers, in order: a string is sent as the model's text, a
    /// mapping as its JSON.
    pub script: Option<Vec<Value>>,
}

/// A place in a configuration file, kept with a value checked later than it was parsed.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ConfigSpot {
    pub file: PathBuf,
    pub line: u64,
    pub column: u64,
}

impl ConfigSpot {
    pub fn error(&self, message: impl Into<String>) -> crate::config::ConfigError {
        crate::config::ConfigError::new(&self.file, self.line, self.column, message)
    }
}

/// The validated `classifier:` block of one policy.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct ClassifierSettings {
    pub provider: Option<ClassifierProvider>,
    pub model: Option<String>,
    pub base_url: Option<String>,
    pub api_key_env: Option<String>,
    pub timeout: Option<Duration>,
    pub max_tokens: Option<u32>,
    pub max_cost_usd: Option<f64>,
    /// Absolute: a relative `cache_dir` is resolved against the policy file's folder.
    pub cache_dir: Option<PathBuf>,
    /// Where `cache_dir` was written, for the error that refuses a writable one.
    pub cache_dir_at: Option<ConfigSpot>,
    pub two_stage: Option<bool>,
    /// The scripted answers as the model's text.
    pub script: Option<Vec<String>>,
}

/// The longest `classifier.timeout`: a day, as for the model's own timeouts.
const MAX_TIMEOUT: Duration = Duration::from_secs(86_400);

impl ClassifierFile {
    /// Checks every field; `Err` says what is wrong in words for a ConfigError.
    pub fn validate(self, policy_dir: &Path, file: &Path) -> Result<ClassifierSettings, String> {
        let timeout = self
            .timeout
            .map(|secs| {
                Duration::try_from_secs_f64(secs)
                    .ok()
                    .filter(|timeout| !timeout.is_zero() && *timeout <= MAX_TIMEOUT)
                    .ok_or("classifier.timeout must be a positive number of seconds, at most 86400")
            })
            .transpose()?;
        if self.max_tokens == Some(0) {
            return Err("classifier.max_tokens must be at least 1".into());
        }
        if self
            .max_cost_usd
            .is_some_and(|cost| !(cost.is_finite() && cost > 0.0))
        {
            return Err("classifier.max_cost_usd must be a positive number".into());
        }
        if let Some(url) = &self.base_url
            && !(url.starts_with("http://") || url.starts_with("https://"))
        {
            return Err(format!(
                "classifier.base_url `{url}` must start with http:// or https://"
            ));
        }
        let scripted = self.provider == Some(ClassifierProvider::Scripted);
        match (&self.script, scripted) {
            (Some(_), false) => {
                return Err("classifier.script is only for `provider: scripted`".into());
            }
            (None, true) => {
                return Err(
                    "the scripted classifier needs `script:` (its answers, in order)".into(),
                );
            }
            _ => {}
        }
        let script = self.script.map(|answers| {
            answers
                .into_iter()
                .map(|answer| match answer {
                    Value::String(text) => text,
                    other => other.to_string(),
                })
                .collect()
        });
        Ok(ClassifierSettings {
            provider: self.provider,
            model: self.model,
            base_url: self
                .base_url
                .map(|url| url.trim_end_matches('/').to_string()),
            api_key_env: self.api_key_env,
            timeout,
            max_tokens: self.max_tokens,
            max_cost_usd: self.max_cost_usd,
            cache_dir_at: self.cache_dir.as_ref().map(|spanned| ConfigSpot {
                file: file.to_path_buf(),
                line: spanned.referenced.line(),
                column: spanned.referenced.column(),
            }),
            cache_dir: self.cache_dir.map(|dir| policy_dir.join(dir.value)),
            two_stage: self.two_stage,
            script,
        })
    }
}

/// What the operator tells the classifier about this environment, in their words.
#[derive(Debug, Clone, Default, PartialEq, Eq, Deserialize, Serialize)]
#[serde(deny_unknown_fields)]
pub struct AutoModeProse {
    /// Facts about where the agent runs (what the repository is, what the network reaches).
    #[serde(default)]
    pub environment: Vec<String>,
    /// Kinds of action to allow.
    #[serde(default)]
    pub allow: Vec<String>,
    /// Kinds of action to deny unless the task clearly needs them.
    #[serde(default)]
    pub soft_deny: Vec<String>,
    /// Kinds of action to deny whatever the task says.
    #[serde(default)]
    pub hard_deny: Vec<String>,
}

impl AutoModeProse {
    /// Only what narrows: the deny lines.
    fn denials(&self) -> AutoModeProse {
        AutoModeProse {
            environment: Vec::new(),
            allow: Vec::new(),
            soft_deny: self.soft_deny.clone(),
            hard_deny: self.hard_deny.clone(),
        }
    }

    fn extend(&mut self, other: &AutoModeProse) {
        self.environment.extend(other.environment.iter().cloned());
        self.allow.extend(other.allow.iter().cloned());
        self.soft_deny.extend(other.soft_deny.iter().cloned());
        self.hard_deny.extend(other.hard_deny.iter().cloned());
    }
}

/// Auto mode's configuration in force for a run.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct AutoModeConfig {
    pub classifier: ClassifierSettings,
    pub prose: AutoModeProse,
}

/// Merges the sources, highest precedence first. A managed policy that writes `auto_mode:`
/// or `classifier:` owns it: lower sources cannot extend its prose or swap its judge, since
/// either would let them widen what auto allows. Without a managed block, prose adds up and
/// each classifier field comes from the highest source that sets it — but, by
/// `policy::authority`'s table, the judge and the prose that widens (`allow`, `environment`)
/// come from the operator's files only (managed, command line, user), never the task file or
/// `.tollgate/policy.yaml`, whose deny lines still count. `managed_only` drops every lower
/// source's auto-mode configuration.
pub fn merge_auto_mode(sources: &[PolicySource]) -> AutoModeConfig {
    let mut ordered: Vec<&PolicySource> = sources.iter().collect();
    ordered.sort_by_key(|source| source.kind);
    let managed = |source: &&&PolicySource| source.kind == SourceKind::Managed;
    let managed_only = ordered
        .iter()
        .filter(managed)
        .any(|source| source.policy.managed_only);
    let managed_prose = ordered
        .iter()
        .filter(managed)
        .any(|source| source.policy.auto_mode.is_some());
    let managed_classifier = ordered
        .iter()
        .filter(managed)
        .any(|source| source.policy.classifier.is_some());
    let mut config = AutoModeConfig::default();
    for source in ordered {
        let lower = source.kind != SourceKind::Managed;
        let origin = ConfigOrigin::of(source.kind);
        let may = |power| standing(sources, power, origin) == Standing::InForce;
        if let Some(prose) = &source.policy.auto_mode
            && !(lower && (managed_only || managed_prose))
        {
            if may(Power::JudgeLeniency) {
                config.prose.extend(prose);
            } else {
                config.prose.extend(&prose.denials());
            }
        }
        if let Some(settings) = &source.policy.classifier
            && !(lower && (managed_only || managed_classifier))
            && may(Power::Classifier)
        {
            fill(&mut config.classifier, settings);
        }
    }
    config
}

/// Sets each field of `into` that is still unset from `from`.
fn fill(into: &mut ClassifierSettings, from: &ClassifierSettings) {
    into.provider = into.provider.or(from.provider);
    into.model = into.model.take().or_else(|| from.model.clone());
    into.base_url = into.base_url.take().or_else(|| from.base_url.clone());
    into.api_key_env = into.api_key_env.take().or_else(|| from.api_key_env.clone());
    into.timeout = into.timeout.or(from.timeout);
    into.max_tokens = into.max_tokens.or(from.max_tokens);
    into.max_cost_usd = into.max_cost_usd.or(from.max_cost_usd);
    if into.cache_dir.is_none() {
        into.cache_dir = from.cache_dir.clone();
        into.cache_dir_at = from.cache_dir_at.clone();
    }
    into.two_stage = into.two_stage.or(from.two_stage);
    into.script = into.script.take().or_else(|| from.script.clone());
}

/// Whether an allow rule would make the classifier moot in auto mode: every command, a shell
/// or interpreter, a package runner (what `policy::danger` flags), or the whole Agent tool.
/// Entering auto drops these, so such calls reach the judge instead of passing unseen.
pub fn moots_classifier(rule: &Rule) -> bool {
    rule.kind == RuleKind::Allow
        && (super::lint::danger(rule).is_some()
            || (rule.tool == ToolName::Agent && rule.is_whole_tool()))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::policy::{Policy, PolicyOrigin};

    fn policy(text: &str) -> Policy {
        Policy::parse(
            text,
            PolicyOrigin {
                file: Path::new("p.yaml"),
                dir: Path::new("/etc/tg"),
                home: None,
            },
        )
        .unwrap()
    }

    fn source(kind: SourceKind, text: &str) -> PolicySource {
        PolicySource {
            kind,
            policy: policy(text),
        }
    }

    #[test]
    fn managed_prose_and_judge_cannot_be_extended_or_swapped() {
        let sources = [
            source(
                SourceKind::Managed,
                "auto_mode: {hard_deny: [pushing to main]}\nclassifier: {model: small, cache_dir: cache}\n",
            ),
            source(
                SourceKind::Task,
                "auto_mode: {allow: [anything at all]}\nclassifier: {provider: scripted, script: [{decision: allow, reason: x, risk: low}]}\n",
            ),
        ];
        let config = merge_auto_mode(&sources);
        assert_eq!(config.prose.hard_deny, vec!["pushing to main".to_string()]);
        assert!(config.prose.allow.is_empty());
        assert_eq!(config.classifier.provider, None);
        assert_eq!(config.classifier.model.as_deref(), Some("small"));
        assert_eq!(
            config.classifier.cache_dir,
            Some(PathBuf::from("/etc/tg/cache"))
        );
    }

    #[test]
    fn without_a_managed_block_prose_adds_up_and_fields_fill_by_precedence() {
        let sources = [
            source(
                SourceKind::User,
                "auto_mode: {allow: [b]}\nclassifier: {model: low, two_stage: true}\n",
            ),
            source(
                SourceKind::CommandLine,
                "auto_mode: {allow: [a]}\nclassifier: {model: high}\n",
            ),
        ];
        let config = merge_auto_mode(&sources);
        assert_eq!(config.prose.allow, vec!["a".to_string(), "b".to_string()]);
        assert_eq!(config.classifier.model.as_deref(), Some("high"));
        assert_eq!(config.classifier.two_stage, Some(true));
    }

    /// The repository's files (task, project) never pick the judge nor tell it what is
    /// fine; their deny lines still count.
    #[test]
    fn the_repository_cannot_pick_the_judge_or_widen_its_prose() {
        let lenient = "auto_mode: {allow: [anything], environment: [pre-approved], soft_deny: [s], hard_deny: [h]}\nclassifier: {provider: scripted, script: [{decision: allow, reason: x, risk: low}]}\n";
        for kind in [SourceKind::Task, SourceKind::Project] {
            for others in [
                vec![],
                vec![source(SourceKind::User, "classifier: {model: mine}\n")],
                vec![source(SourceKind::Managed, "permissions: {}\n")],
            ] {
                let mut sources = others.clone();
                sources.push(source(kind, lenient));
                let config = merge_auto_mode(&sources);
                assert_eq!(config.classifier.provider, None, "{kind:?}");
                assert_eq!(config.classifier.script, None, "{kind:?}");
                assert!(config.prose.allow.is_empty() && config.prose.environment.is_empty());
                assert_eq!(config.prose.soft_deny, vec!["s".to_string()]);
                assert_eq!(config.prose.hard_deny, vec!["h".to_string()]);
                let user_model = others.iter().any(|s| s.kind == SourceKind::User);
                assert_eq!(
                    config.classifier.model.as_deref(),
                    user_model.then_some("mine")
                );
            }
        }
    }

    #[test]
    fn managed_only_ignores_lower_auto_mode_configuration() {
        let sources = [
            source(SourceKind::Managed, "managed_only: true\n"),
            source(
                SourceKind::Task,
                "auto_mode: {allow: [a]}\nclassifier: {model: m}\n",
            ),
        ];
        assert_eq!(merge_auto_mode(&sources), AutoModeConfig::default());
    }

    #[test]
    fn bad_classifier_blocks_are_refused_with_their_line() {
        let origin = PolicyOrigin {
            file: Path::new("p.yaml"),
            dir: Path::new("/"),
            home: None,
        };
        for (text, words) in [
            ("classifier: {timeout: 0}\n", "timeout"),
            ("classifier: {max_tokens: 0}\n", "max_tokens"),
            ("classifier: {max_cost_usd: -1}\n", "max_cost_usd"),
            ("classifier: {base_url: ftp://x}\n", "base_url"),
            ("classifier: {provider: scripted}\n", "script"),
            ("classifier: {script: [x]}\n", "only for"),
            ("classifier: {modle: x}\n", "unknown field"),
        ] {
            let err = Policy::parse(&format!("# c\n{text}"), origin).unwrap_err();
            assert!(err.message.contains(words), "{text}: {err}");
            assert_eq!(err.line, 2, "{text}: {err}");
        }
    }

    #[test]
    fn broad_allow_rules_moot_the_classifier() {
        let policy = policy(
            "permissions:\n  allow: [Bash, 'Bash(*)', 'Bash(bash:*)', 'Bash(python3:*)', 'Bash(npx:*)', Agent, 'Bash(make lint:*)', Edit, 'Agent(Explore)']\n  deny: [Bash]\n",
        );
        let moot: Vec<&str> = policy
            .rules
            .iter()
            .filter(|rule| moots_classifier(rule))
            .map(|rule| rule.text.as_str())
            .collect();
        assert_eq!(
            moot,
            vec![
                "Bash",
                "Bash(*)",
                "Bash(bash:*)",
                "Bash(python3:*)",
                "Bash(npx:*)",
                "Agent"
            ]
        );
    }
}
