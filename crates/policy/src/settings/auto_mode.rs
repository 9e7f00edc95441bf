//! Which auto-mode configuration a run obeys when several sources give one: the classifier
//! (`classifier:`) and the prose it judges by (`auto_mode:`), merged by authority. Pure
//! merging; the blocks are `auto_mode_blocks`', the classifier itself lives in `src/classifier/`.

use super::authority::{ConfigOrigin, Power, Standing, standing};
use super::auto_mode_blocks::{AutoModeProse, ClassifierSettings};
use crate::rule::{Rule, RuleKind};
use crate::rule_set::{PolicySource, SourceKind};
use crate::tool_name::ToolName;

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
        && (crate::lint::danger(rule).is_some()
            || (rule.tool == ToolName::Agent && rule.is_whole_tool()))
}

#[cfg(test)]
mod tests {
    use std::path::{Path, PathBuf};

    use super::*;
    use crate::{Policy, PolicyOrigin};

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
