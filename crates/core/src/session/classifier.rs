//! Auto mode's classifier for a run: built from the policies' `classifier:` and `auto_mode:`
//! blocks, defaulting to the task's provider with its small model, and refused when its
//! verdict cache lies where the agent could write.

use std::path::{Path, PathBuf};

use super::{SessionError, provider_config};
use crate::classifier::{self, Classifier, ClassifierSetup};
use crate::model::{Provider, ScriptedBlock, ScriptedTurns};
use crate::policy::Workspace;
use crate::settings::{AutoModeConfig, ClassifierProvider, ConfigSpot};
use crate::task::{ModelSpec, ProviderKind};

/// The classifier, or `None` when nothing can judge (a scripted task and no scripted
/// classifier): auto mode then fails closed off the fast path.
pub fn auto_classifier(
    task_model: &ModelSpec,
    config: &AutoModeConfig,
) -> Result<Option<Classifier>, SessionError> {
    let settings = &config.classifier;
    let kind = match settings.provider {
        None => task_model.provider,
        Some(ClassifierProvider::Scripted) => ProviderKind::Scripted,
        Some(ClassifierProvider::Anthropic) => ProviderKind::Anthropic,
        Some(ClassifierProvider::Openai) => ProviderKind::Openai,
    };
    if kind == ProviderKind::Scripted && settings.script.is_none() {
        return Ok(None);
    }
    // The task's connection settings carry over only to the same provider.
    let same = kind == task_model.provider;
    let mut timeouts = task_model.timeouts;
    if let Some(timeout) = settings.timeout {
        timeouts.request = timeout;
        timeouts.first_event = timeouts.first_event.min(timeout);
    }
    let spec = ModelSpec {
        provider: kind,
        name: settings
            .model
            .clone()
            .unwrap_or_else(|| classifier::default_model(kind).to_string()),
        max_tokens: settings
            .max_tokens
            .unwrap_or(classifier::DEFAULT_MAX_TOKENS),
        base_url: settings
            .base_url
            .clone()
            .or_else(|| task_model.base_url.clone().filter(|_| same)),
        api_key_env: settings
            .api_key_env
            .clone()
            .or_else(|| task_model.api_key_env.clone().filter(|_| same)),
        thinking_budget: None,
        // The classifier answers in a few words; it is not asked to reason at length.
        effort: None,
        platform: None,
        region: None,
        project: None,
        pricing_override: None,
        fallback: None,
        timeouts,
        retries: task_model.retries,
        // The same server streams for the classifier as for the run.
        stream: if same {
            task_model.stream
        } else {
            crate::model::Streaming::Auto
        },
    };
    let script = settings.script.as_ref().map(|answers| {
        ScriptedTurns(
            answers
                .iter()
                .map(|answer| vec![ScriptedBlock::Text(answer.clone())])
                .collect(),
        )
    });
    // The classifier's spec names no platform, so no credential is obtained for it.
    let provider = Provider::new(provider_config(
        &spec,
        script.as_ref(),
        &crate::model::cloud::SecretSink::none(),
    )?)?;
    Ok(Some(Classifier::new(ClassifierSetup {
        provider,
        provider_name: kind.to_string(),
        pricing: spec.pricing(),
        model: spec.name,
        max_tokens: spec.max_tokens,
        two_stage: settings.two_stage.unwrap_or(false),
        max_cost_usd: settings.max_cost_usd,
        prose: config.prose.clone(),
        cache_dir: settings.cache_dir.clone(),
    })))
}

/// A verdict cache the agent could write to would let it plant an allow for its next call:
/// `classifier.cache_dir` must lie outside every place a command may write — the workspace
/// roots and, with the sandbox on, its `allow_write` folders. `at` is where the policy
/// wrote it, for a file:line:column error.
pub fn refuse_writable_cache(
    dir: &Path,
    at: Option<&ConfigSpot>,
    workspace: &Workspace,
    allow_write: &[PathBuf],
) -> Result<(), SessionError> {
    let resolved = existing_prefix_resolved(dir);
    let places = workspace
        .roots
        .iter()
        .map(|root| (root.clone(), "the workspace"))
        .chain(allow_write.iter().map(|path| {
            (
                existing_prefix_resolved(path),
                "sandbox.filesystem.allow_write",
            )
        }));
    for (place, what) in places {
        if !resolved.starts_with(&place) {
            continue;
        }
        let message = format!(
            "classifier.cache_dir {} is inside {what} {}: the agent could write verdicts there; put it outside",
            dir.display(),
            place.display()
        );
        return Err(match at {
            Some(at) => SessionError::Config(at.error(message)),
            None => SessionError::CacheWritable(message),
        });
    }
    Ok(())
}

/// `path` with its longest existing prefix canonicalised (symlinks resolved), the rest kept.
fn existing_prefix_resolved(path: &Path) -> PathBuf {
    let normal = crate::base::normalize_lexically(path);
    let mut prefix = normal.as_path();
    let mut rest = Vec::new();
    loop {
        if let Ok(real) = prefix.canonicalize() {
            return rest.iter().rev().fold(real, |path, part| path.join(part));
        }
        match (prefix.parent(), prefix.file_name()) {
            (Some(parent), Some(name)) => {
                rest.push(name.to_os_string());
                prefix = parent;
            }
            _ => return normal,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_cache_below_a_workspace_root_is_refused_even_before_it_exists() {
        let dir = tempfile::tempdir().unwrap();
        let ws = dir.path().canonicalize().unwrap().join("ws");
        std::fs::create_dir(&ws).unwrap();
        let workspace = Workspace::new(ws.clone(), Vec::new(), None);
        let refuse = |path: &Path, allow_write: &[PathBuf]| {
            refuse_writable_cache(path, None, &workspace, allow_write)
        };
        assert!(refuse(&ws.join("a/../.verdicts/new"), &[]).is_err());
        assert!(refuse(&dir.path().join("cache"), &[]).is_ok());
        assert!(refuse(&ws.join("../cache"), &[]).is_ok());
        let shared = dir.path().join("shared");
        let err = refuse(&shared.join("verdicts"), std::slice::from_ref(&shared)).unwrap_err();
        assert!(err.to_string().contains("allow_write"), "{err}");
        let at = ConfigSpot {
            file: PathBuf::from("p.yaml"),
            line: 4,
            column: 14,
        };
        let err = refuse_writable_cache(&ws.join("v"), Some(&at), &workspace, &[]).unwrap_err();
        assert!(err.to_string().starts_with("p.yaml:4:14"), "{err}");
    }
}
