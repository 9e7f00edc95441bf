//! An `enabledPlugins` entry (`name@marketplace`) resolved to a plugin folder on this machine:
//! the marketplace named in some source's `extraKnownMarketplaces` with a `directory` (or
//! `file`) source, its `.claude-plugin/marketplace.json` listing the plugin with a relative
//! path. A marketplace or a plugin that lives on the network (github, git, url, npm) is
//! refused with the reason: a run fetches nothing.

use std::path::{Component, Path, PathBuf};

use serde::Deserialize;
use serde_json::Value;

use crate::policy::PolicySource;
use crate::settings::{ConfigOrigin, Marketplace, MarketplaceSource};

/// The marketplace file's place in a marketplace folder.
const MARKETPLACE_FILE: &str = ".claude-plugin/marketplace.json";

#[derive(Debug, Deserialize)]
struct MarketplaceFile {
    #[serde(default)]
    plugins: Vec<Entry>,
    #[serde(default)]
    metadata: Option<Metadata>,
}

#[derive(Debug, Deserialize)]
struct Metadata {
    #[serde(default, rename = "pluginRoot")]
    plugin_root: Option<String>,
}

#[derive(Debug, Deserialize)]
struct Entry {
    name: String,
    source: Value,
}

/// The folder of `plugin` from `marketplace`, as `enabled_in` (and the other sources, the
/// enabling one first) declare it. Only a source trusted at least as much as `enabled_in`
/// may declare the marketplace (`ConfigOrigin::trust`): a repository's file cannot supply
/// the folder for a plugin the operator's policy enables by name.
pub fn resolve(
    plugin: &str,
    marketplace: Option<&str>,
    enabled_in: &PolicySource,
    sources: &[PolicySource],
) -> Result<PathBuf, String> {
    let Some(name) = marketplace else {
        return Err("it names no marketplace (write name@marketplace)".into());
    };
    let trust = |source: &PolicySource| ConfigOrigin::of(source.kind).trust();
    let declaring =
        |source: &&PolicySource| source.policy.plugins.marketplaces.0.contains_key(name);
    let declared = std::iter::once(enabled_in)
        .chain(sources.iter())
        .filter(|source| trust(source) >= trust(enabled_in))
        .find_map(|source| {
            source
                .policy
                .plugins
                .marketplaces
                .0
                .get(name)
                .map(|entry| (entry, source))
        });
    let Some((entry, declared_in)) = declared else {
        if let Some(lower) = sources.iter().find(declaring) {
            return Err(format!(
                "held back: marketplace `{name}` is declared only in {} ({}), a source less trusted than {} ({}) that enables it; declare it in an operator's file (the managed policy for a managed plugin)",
                lower.policy.file.display(),
                crate::config::serde_name(&lower.kind),
                enabled_in.policy.file.display(),
                crate::config::serde_name(&enabled_in.kind),
            ));
        }
        return Err(format!(
            "no extraKnownMarketplaces entry declares marketplace `{name}` (tollgate knows no built-in marketplace and fetches nothing)"
        ));
    };
    let base = declared_in
        .policy
        .file
        .parent()
        .unwrap_or_else(|| Path::new("."));
    let root = match entry {
        Marketplace::Known {
            source: MarketplaceSource::Directory { path },
        } => base.join(path),
        Marketplace::Known {
            source: MarketplaceSource::File { path },
        } => {
            // The file is `<root>/.claude-plugin/marketplace.json`.
            let file = base.join(path);
            file.parent()
                .and_then(Path::parent)
                .map(Path::to_path_buf)
                .ok_or_else(|| format!("marketplace `{name}`: {} has no folder", file.display()))?
        }
        Marketplace::Known { source } => {
            return Err(format!(
                "marketplace `{name}` is a {} source: tollgate fetches nothing from the network; clone it and declare it as {{\"source\": \"directory\", \"path\": …}}",
                kind(source)
            ));
        }
        Marketplace::Unknown(_) => {
            return Err(format!(
                "marketplace `{name}` has a source tollgate does not know; only local directory and file sources load"
            ));
        }
    };
    folder_in(&root, plugin, name)
}

fn kind(source: &MarketplaceSource) -> &'static str {
    match source {
        MarketplaceSource::Directory { .. } => "directory",
        MarketplaceSource::File { .. } => "file",
        MarketplaceSource::Github { .. } => "github",
        MarketplaceSource::Git { .. } => "git",
        MarketplaceSource::Url { .. } => "url",
    }
}

/// The folder the marketplace at `root` lists for `plugin`: a relative path inside it.
fn folder_in(root: &Path, plugin: &str, name: &str) -> Result<PathBuf, String> {
    let file = root.join(MARKETPLACE_FILE);
    let text =
        crate::input_file::read_text(&file, crate::input_file::Input::config("marketplace file"))
            .map_err(|err| format!("marketplace `{name}`: {err}"))?;
    let parsed: MarketplaceFile = serde_json::from_str(&text)
        .map_err(|err| format!("marketplace `{name}`: {}: {err}", file.display()))?;
    let entry = parsed
        .plugins
        .iter()
        .find(|entry| entry.name == plugin)
        .ok_or_else(|| {
            format!(
                "marketplace `{name}` ({}) lists no plugin `{plugin}`",
                file.display()
            )
        })?;
    let Some(relative) = entry.source.as_str() else {
        let kind = entry
            .source
            .get("source")
            .and_then(Value::as_str)
            .unwrap_or("remote");
        return Err(format!(
            "marketplace `{name}` gives plugin `{plugin}` a {kind} source: tollgate fetches nothing from the network"
        ));
    };
    let base = match parsed.metadata.and_then(|metadata| metadata.plugin_root) {
        Some(plugin_root) => inside(root, &plugin_root, name)?,
        None => root.to_path_buf(),
    };
    inside(&base, relative, name)
}

fn inside(base: &Path, relative: &str, name: &str) -> Result<PathBuf, String> {
    let path = Path::new(relative);
    let confined = path.is_relative()
        && path
            .components()
            .all(|part| matches!(part, Component::Normal(_) | Component::CurDir));
    if !confined {
        return Err(format!(
            "marketplace `{name}`: `{relative}` must be a path inside the marketplace (relative, no `..`)"
        ));
    }
    Ok(base.join(path))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::policy::{SourceKind, test_source};

    #[test]
    fn local_marketplaces_resolve_and_remote_ones_are_refused() {
        let dir = tempfile::tempdir().unwrap();
        let market = dir.path().join("m");
        std::fs::create_dir_all(market.join(".claude-plugin")).unwrap();
        std::fs::write(
            market.join(MARKETPLACE_FILE),
            r#"{"name": "m", "metadata": {"pluginRoot": "./plugins"}, "plugins": [
                {"name": "kit", "source": "./kit"},
                {"name": "out", "source": "../../etc"},
                {"name": "far", "source": {"source": "url", "url": "https://x/far.git"}}]}"#,
        )
        .unwrap();
        let source = test_source(
            SourceKind::User,
            &format!(
                "extraKnownMarketplaces:\n  dir: {{source: {{source: directory, path: {0}}}}}\n  file: {{source: {{source: file, path: {0}/.claude-plugin/marketplace.json}}}}\n  gh: {{source: {{source: github, repo: a/b}}}}\n  odd: {{source: {{source: npm, package: x}}}}\n",
                market.display()
            ),
        );
        let sources = [source.clone()];
        let resolve =
            |plugin: &str, market: Option<&str>| resolve(plugin, market, &source, &sources);
        assert_eq!(resolve("kit", Some("dir")), Ok(market.join("plugins/kit")));
        assert_eq!(resolve("kit", Some("file")), Ok(market.join("plugins/kit")));
        let refused = [
            (resolve("kit", None), "names no marketplace"),
            (
                resolve("kit", Some("nowhere")),
                "no extraKnownMarketplaces entry",
            ),
            (
                resolve("kit", Some("gh")),
                "github source: tollgate fetches nothing",
            ),
            (
                resolve("kit", Some("odd")),
                "only local directory and file sources",
            ),
            (resolve("out", Some("dir")), "inside the marketplace"),
            (
                resolve("far", Some("dir")),
                "url source: tollgate fetches nothing",
            ),
            (resolve("none", Some("dir")), "lists no plugin `none`"),
        ];
        for (result, part) in refused {
            let why = result.unwrap_err();
            assert!(why.contains(part), "{part}: {why}");
        }
    }

    #[test]
    fn a_marketplace_comes_only_from_a_source_trusted_as_much_as_the_one_enabling_it() {
        let dir = tempfile::tempdir().unwrap();
        let market = dir.path().join("m");
        std::fs::create_dir_all(market.join(".claude-plugin")).unwrap();
        std::fs::write(
            market.join(MARKETPLACE_FILE),
            r#"{"plugins": [{"name": "kit", "source": "./kit"}]}"#,
        )
        .unwrap();
        let declares = format!(
            "extraKnownMarketplaces:\n  corp: {{source: {{source: directory, path: {}}}}}\n",
            market.display()
        );
        let enables = "enabledPlugins:\n  kit@corp: true\n";
        let managed = test_source(SourceKind::Managed, enables);
        let user = test_source(SourceKind::User, enables);
        let project = test_source(SourceKind::Project, enables);
        let project_declaring = test_source(SourceKind::Project, &declares);
        let task_declaring = test_source(SourceKind::Task, &declares);
        let user_declaring = test_source(SourceKind::User, &declares);
        let managed_declaring = test_source(SourceKind::Managed, &declares);
        let kit = Ok(market.join("kit"));
        let cases: [(&PolicySource, Vec<PolicySource>, bool); 8] = [
            // The managed policy's plugin: only the managed policy may say where it is.
            (&managed, vec![project_declaring.clone()], false),
            (&managed, vec![task_declaring.clone()], false),
            (&managed, vec![user_declaring.clone()], false),
            (&managed, vec![managed_declaring.clone()], true),
            // The user's: the operator's files.
            (&user, vec![project_declaring.clone()], false),
            (&user, vec![managed_declaring.clone()], true),
            // The repository's own plugin may come from anywhere at all.
            (&project, vec![task_declaring.clone()], true),
            (&project, vec![user_declaring.clone()], true),
        ];
        for (enabling, sources, loads) in cases {
            let got = resolve("kit", Some("corp"), enabling, &sources);
            if loads {
                assert_eq!(got, kit, "{:?} / {:?}", enabling.kind, sources[0].kind);
            } else {
                let why = got.unwrap_err();
                assert!(why.starts_with("held back"), "{why}");
            }
        }
    }
}
