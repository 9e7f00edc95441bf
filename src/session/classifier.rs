//! Auto mode's classifier for a run: built from the policies' `classifier:` and `auto_mode:`
//! blocks, defaulting to the task's provider with its small model, and refused when its
//! verdict cache lies where the agent could write.

use std::path::{Path, PathBuf};

use super::{SessionError, provider_config};
use crate::classifier::{self, Classifier, ClassifierSetup};
use crate::model::{Provider, ScriptedBlock, ScriptedTurns};
use crate::policy::{AutoModeConfig, ClassifierProvider, Workspace};
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
        pricing_override: None,
        timeouts,
        retries: task_model.retries,
    };
    let script = settings.script.as_ref().map(|answers| {
        ScriptedTurns(
            answers
                .iter()
                .map(|answer| vec![ScriptedBlock::Text(answer.clone())])
                .collect(),
        )
    });
    let provider = Provider::new(provider_config(&spec, script.as_ref())?)?;
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
/// `classifier.cache_dir` must lie outside every workspace root.
pub fn refuse_cache_in_workspace(dir: &Path, workspace: &Workspace) -> Result<(), SessionError> {
    let resolved = existing_prefix_resolved(dir);
    match workspace
        .roots
        .iter()
        .find(|root| resolved.starts_with(root))
    {
        Some(root) => Err(SessionError::CacheInWorkspace {
            dir: dir.to_path_buf(),
            root: root.clone(),
        }),
        None => Ok(()),
    }
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
        assert!(refuse_cache_in_workspace(&ws.join("a/../.verdicts/new"), &workspace).is_err());
        assert!(refuse_cache_in_workspace(&dir.path().join("cache"), &workspace).is_ok());
        assert!(refuse_cache_in_workspace(&ws.join("../cache"), &workspace).is_ok());
    }
}
