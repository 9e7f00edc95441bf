//! Claude Code's plugin keys as a settings file writes them (`enabledPlugins`,
//! `extraKnownMarketplaces`), typed at load. Data only: loading a plugin is `plugins`' job, and
//! nothing here fetches or reads anything.

use std::collections::BTreeMap;

use serde::Deserialize;
use serde_json::Value;

/// `enabledPlugins`: `"name@marketplace": true|false`, in file order (a later file's entry for
/// the same plugin overrides an earlier one's, as in Claude Code).
#[derive(Debug, Clone, Default, PartialEq, Eq, Deserialize)]
#[serde(transparent)]
pub struct EnabledPlugins(pub BTreeMap<String, bool>);

impl EnabledPlugins {
    /// The entries switched on, as `(plugin, marketplace)`; a name without `@` has no
    /// marketplace.
    pub fn enabled(&self) -> impl Iterator<Item = (&str, Option<&str>)> {
        self.0
            .iter()
            .filter(|(_, on)| **on)
            .map(|(name, _)| match name.split_once('@') {
                Some((plugin, marketplace)) => (plugin, Some(marketplace)),
                None => (name.as_str(), None),
            })
    }
}

/// One `extraKnownMarketplaces` entry's `source`.
#[derive(Debug, Clone, PartialEq, Deserialize)]
#[serde(tag = "source", rename_all = "lowercase")]
pub enum MarketplaceSource {
    /// A folder on this machine: the only kind tollgate can load from (it fetches nothing).
    Directory {
        path: String,
    },
    /// A marketplace file on this machine.
    File {
        path: String,
    },
    Github {
        repo: String,
        #[serde(default, rename = "ref")]
        git_ref: Option<String>,
        #[serde(default)]
        path: Option<String>,
    },
    Git {
        url: String,
        #[serde(default, rename = "ref")]
        git_ref: Option<String>,
        #[serde(default)]
        path: Option<String>,
    },
    Url {
        url: String,
    },
}

/// One `extraKnownMarketplaces` entry. A source of a kind Claude Code may add later loads as
/// `Unknown` (it grants nothing until a plugin from it is enabled and loaded).
#[derive(Debug, Clone, PartialEq, Deserialize)]
#[serde(untagged)]
pub enum Marketplace {
    Known { source: MarketplaceSource },
    Unknown(Value),
}

/// `extraKnownMarketplaces`: marketplace name → where it is.
#[derive(Debug, Clone, Default, PartialEq, Deserialize)]
#[serde(transparent)]
pub struct KnownMarketplaces(pub BTreeMap<String, Marketplace>);

/// A settings file's plugin keys.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct PluginSettings {
    pub enabled: EnabledPlugins,
    pub marketplaces: KnownMarketplaces,
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::path::Path;

    #[derive(Debug, Deserialize)]
    #[serde(rename_all = "camelCase")]
    struct Keys {
        enabled_plugins: EnabledPlugins,
        extra_known_marketplaces: KnownMarketplaces,
    }

    #[test]
    fn plugin_keys_load_typed() {
        let keys: Keys = crate::config::parse(
            r#"{
  "enabledPlugins": {"formatter@team-tools": true, "old@team-tools": false, "solo": true},
  "extraKnownMarketplaces": {
    "team-tools": {"source": {"source": "github", "repo": "acme/claude-plugins"}},
    "local": {"source": {"source": "directory", "path": "./plugins"}},
    "future": {"source": {"source": "npm", "package": "x"}}
  }
}"#,
            Path::new("settings.json"),
        )
        .unwrap();
        let enabled: Vec<_> = keys.enabled_plugins.enabled().collect();
        assert_eq!(enabled, [("formatter", Some("team-tools")), ("solo", None)]);
        assert_eq!(
            keys.extra_known_marketplaces.0["local"],
            Marketplace::Known {
                source: MarketplaceSource::Directory {
                    path: "./plugins".into()
                }
            }
        );
        assert!(matches!(
            keys.extra_known_marketplaces.0["future"],
            Marketplace::Unknown(_)
        ));
    }
}
