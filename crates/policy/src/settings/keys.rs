//! Every unknown key of a policy or settings file at once, each at its `file:line:column`
//! (serde stops at the first, which made a file with four slips four edit-and-rerun rounds),
//! and, for a key that is valid at another level of the file, where it belongs: a Claude Code
//! top-level key written inside `permissions` is told it belongs at the top level, and a
//! `permissions` key written at the top level that it belongs inside `permissions`.
//! The caller (`file`) hands in the keys of each level, taken from the types that read them,
//! so the two cannot disagree.

use std::path::Path;

use crate::config::{self, ConfigError, KeyTree};

/// The keys one level of a policy file takes: `path` is where the level is (`""` for the top,
/// `permissions`, `sandbox.network`).
#[derive(Debug, Clone, Copy)]
pub(crate) struct Level {
    pub(crate) path: &'static str,
    pub(crate) keys: &'static [&'static str],
}

/// What the check knows of a file's keys: every level, the top first, and the Claude Code
/// keys the top level loads and ignores, with why.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Schema<'a> {
    pub(crate) levels: &'a [Level],
    pub(crate) ignored: &'a [(&'a str, &'a str)],
}

/// A level's name in a sentence.
fn place(path: &str) -> String {
    if path.is_empty() {
        "at the top level".to_string()
    } else {
        format!("inside `{path}`")
    }
}

/// Above this many keys a level's list is too long to print in a hint.
const MAX_LISTED_KEYS: usize = 12;

/// The error `err` serde reported for `text` (the content of `file`), or — when the file has
/// keys no level takes — every one of them, in file order, each with where it belongs or what
/// it is close to. A different error serde found first (a wrong type) is kept among them.
pub(crate) fn every_unknown_key(
    err: ConfigError,
    text: &str,
    file: &Path,
    schema: Schema,
) -> ConfigError {
    let mut found = unknown_keys(text, file, schema);
    let same = |other: &ConfigError| {
        other.line == err.line && err.unknown_key.is_some() && other.unknown_key == err.unknown_key
    };
    match found.iter().position(same) {
        Some(at) => {
            let first = found.remove(at);
            first.with_others(found)
        }
        None => err.with_others(found),
    }
}

/// Each key of `text` that its level does not take, as a located error with a hint. Empty
/// when the text does not load as a mapping (the parser's error says why).
fn unknown_keys(text: &str, file: &Path, schema: Schema) -> Vec<ConfigError> {
    let Some(tree) = KeyTree::of(text) else {
        return Vec::new();
    };
    let mut found = Vec::new();
    walk(&tree, "", schema, file, &mut found);
    found
}

fn walk(tree: &KeyTree, path: &str, schema: Schema, file: &Path, found: &mut Vec<ConfigError>) {
    let Some(level) = schema.levels.iter().find(|level| level.path == path) else {
        return;
    };
    for node in &tree.0 {
        if !level.keys.contains(&node.key.as_str()) {
            let message = if path.is_empty() {
                format!("unknown field `{}`", node.key)
            } else {
                format!("unknown field `{}` in `{path}`", node.key)
            };
            let mut err = ConfigError::new(file, node.line, node.column, message)
                .with_hint(hint(&node.key, *level, schema));
            err.unknown_key = Some(node.key.as_str().into());
            found.push(err);
            continue;
        }
        if let Some(value) = &node.value {
            let child = if path.is_empty() {
                node.key.clone()
            } else {
                format!("{path}.{}", node.key)
            };
            walk(value, &child, schema, file, found);
        }
    }
}

/// What to do about `key`, unknown at `level`: where it belongs when another level takes it,
/// else the name it is likely a slip for, else what the level takes.
fn hint(key: &str, level: Level, schema: Schema) -> String {
    let others = || {
        schema
            .levels
            .iter()
            .filter(|other| other.path != level.path)
    };
    if let Some(home) = others().find(|other| other.keys.contains(&key)) {
        let ignored = schema
            .ignored
            .iter()
            .find(|(name, _)| home.path.is_empty() && *name == key)
            .map(|(_, why)| format!(" (where tollgate ignores it: {why})"))
            .unwrap_or_default();
        return format!(
            "`{key}` belongs {}, not {}{ignored}",
            place(home.path),
            place(level.path)
        );
    }
    if let Some(close) = config::did_you_mean(key, level.keys.iter().copied()) {
        return format!("did you mean `{close}`?");
    }
    if let Some((home, close)) = others().find_map(|other| {
        config::did_you_mean(key, other.keys.iter().copied()).map(|close| (other, close))
    }) {
        return format!("did you mean `{close}` {}?", place(home.path));
    }
    if level.keys.len() <= MAX_LISTED_KEYS {
        format!("expected one of: {}", level.keys.join(", "))
    } else {
        "docs/policy.md lists the keys tollgate reads and the Claude Code keys it loads and \
ignores"
            .to_string()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::{Policy, PolicyOrigin};

    fn parse(text: &str) -> ConfigError {
        Policy::parse(
            text,
            PolicyOrigin {
                file: Path::new("settings.json"),
                dir: Path::new("/p"),
                home: None,
            },
        )
        .unwrap_err()
    }

    /// (line, column, message, hint) of the error and each one after it.
    fn all(err: &ConfigError) -> Vec<(u64, u64, String, String)> {
        std::iter::once(err)
            .chain(err.more())
            .map(|e| {
                (
                    e.line,
                    e.column,
                    e.message.clone(),
                    e.hint.as_deref().unwrap_or_default().to_string(),
                )
            })
            .collect()
    }

    #[test]
    fn every_unknown_key_is_reported_in_one_pass() {
        let err = parse(
            r#"{
  "permissions": {
    "allow": ["Read"],
    "alow": ["Edit"],
    "model": "opus",
    "hooks": {}
  },
  "defaultMode": "plan",
  "managed_onyl": true,
  "colour": "blue",
  "sandbox": {"network": {"allowedDomain": ["x.org"]}, "autoAllowBashIfSandboxed": true}
}"#,
        );
        let found = all(&err);
        let expected = [
            (
                4,
                5,
                "unknown field `alow` in `permissions`",
                "did you mean `allow`?",
            ),
            (
                5,
                5,
                "unknown field `model` in `permissions`",
                "`model` belongs at the top level, not inside `permissions` (where tollgate ignores it: the task file chooses the model and its settings)",
            ),
            (
                6,
                5,
                "unknown field `hooks` in `permissions`",
                "`hooks` belongs at the top level, not inside `permissions`",
            ),
            (
                8,
                3,
                "unknown field `defaultMode`",
                "`defaultMode` belongs inside `permissions`, not at the top level",
            ),
            (
                9,
                3,
                "unknown field `managed_onyl`",
                "did you mean `managed_only`?",
            ),
            (
                10,
                3,
                "unknown field `colour`",
                "docs/policy.md lists the keys tollgate reads and the Claude Code keys it loads and ignores",
            ),
            (
                11,
                27,
                "unknown field `allowedDomain` in `sandbox.network`",
                "did you mean `allowedDomains`?",
            ),
        ];
        assert_eq!(found.len(), expected.len(), "{err}");
        for (got, want) in found.iter().zip(expected) {
            assert_eq!(
                (got.0, got.1, got.2.as_str(), got.3.as_str()),
                want,
                "{err}"
            );
        }
        let shown = err.to_string();
        assert!(shown.ends_with("7 errors in settings.json"), "{shown}");
        assert!(
            shown.contains("settings.json:11:27: unknown field"),
            "{shown}"
        );
    }

    #[test]
    fn a_slip_at_the_wrong_level_is_pointed_to_its_level() {
        let err = parse("permissions:\n  allow: [Read]\ndefault_mod: plan\n");
        assert_eq!(
            err.hint.as_deref(),
            Some("did you mean `default_mode` inside `permissions`?"),
            "{err}"
        );
        let err = parse("permissions:\n  allow: [Read]\n  managed_only: true\n");
        assert_eq!(
            err.hint.as_deref(),
            Some("`managed_only` belongs at the top level, not inside `permissions`"),
            "{err}"
        );
        assert!(err.more().is_empty());
        let err = parse("permissions:\n  zzz: [Read]\n");
        assert!(
            err.hint
                .as_deref()
                .unwrap()
                .starts_with("expected one of: allow, deny"),
            "{err}"
        );
    }

    /// An error of another kind serde met first stays, beside the unknown keys.
    #[test]
    fn another_error_is_kept_beside_the_unknown_keys() {
        let err = parse("disable_auto_mode: maybe\npermissions: {alow: [Read]}\nbogus: 1\n");
        let lines: Vec<u64> = all(&err).iter().map(|e| e.0).collect();
        assert_eq!(lines, [1, 2, 3], "{err}");
        assert!(err.message.contains("found `maybe`"), "{err}");
    }

    /// The walk on its own: levels it is not given are not checked, keys at a known level's
    /// known key are followed into.
    #[test]
    fn only_the_levels_given_are_checked() {
        let levels = [
            Level {
                path: "",
                keys: &["a", "b"],
            },
            Level {
                path: "b",
                keys: &["c"],
            },
        ];
        let schema = Schema {
            levels: &levels,
            ignored: &[],
        };
        let found = unknown_keys(
            "a: {anything: 1}\nb: {c: 1, d: 2}\ne: 3\n",
            Path::new("f.yaml"),
            schema,
        );
        let found: Vec<(u64, &str)> = found.iter().map(|e| (e.line, e.message.as_str())).collect();
        assert_eq!(
            found,
            [(2, "unknown field `d` in `b`"), (3, "unknown field `e`")]
        );
    }
}
