//! The credentials git keeps for a workspace, learnt by value: the `extraheader` that
//! actions/checkout writes (`AUTHORIZATION: basic <base64 of x-access-token:TOKEN>`) and the
//! password in a remote URL (`https://user:TOKEN@host/…`). The keyed pattern in the parent
//! finds such a header only while its key stands before it; a read-only transform of the
//! file (`cut -c`, `sed s/extraheader/x/`, `base64 .git/config`, `xxd -p`) separates the two.
//! Known by value, the credential and every derived form of it are redacted wherever it
//! stands. Reading these files grants nothing: it only adds values to hide.

use std::path::{Path, PathBuf};

/// How deep `include.path` / `includeIf.*.path` are followed (git itself allows 10).
const MAX_INCLUDE_DEPTH: usize = 10;
/// A config file larger than this is not read (git's own are a few KB).
const MAX_CONFIG_BYTES: u64 = 1 << 20;

/// `(name, value)` pairs for every credential the workspace's git config holds (the local
/// config, the common directory's for a linked worktree, and what they include).
pub(crate) fn credentials(workdir: &Path) -> Vec<(String, String)> {
    let mut found = Vec::new();
    let mut seen = Vec::new();
    for config in config_files(workdir) {
        read_config(&config, 0, &mut seen, &mut found);
    }
    found
}

/// The workspace's git directory's `config`, and its common directory's.
fn config_files(workdir: &Path) -> Vec<PathBuf> {
    let dot_git = workdir.join(".git");
    let git_dir = if dot_git.is_dir() {
        dot_git
    } else {
        // A linked worktree or submodule: `.git` is a file `gitdir: <path>`.
        let Some(target) = small_text(&dot_git).and_then(|text| {
            text.lines().find_map(|line| {
                line.strip_prefix("gitdir:")
                    .map(|dir| dir.trim().to_string())
            })
        }) else {
            return Vec::new();
        };
        workdir.join(target)
    };
    let mut files = vec![git_dir.join("config")];
    if let Some(common) = small_text(&git_dir.join("commondir")) {
        files.push(git_dir.join(common.trim()).join("config"));
    }
    files
}

fn small_text(path: &Path) -> Option<String> {
    let meta = std::fs::metadata(path).ok()?;
    if !meta.is_file() || meta.len() > MAX_CONFIG_BYTES {
        return None;
    }
    std::fs::read_to_string(path).ok()
}

fn read_config(
    path: &Path,
    depth: usize,
    seen: &mut Vec<PathBuf>,
    found: &mut Vec<(String, String)>,
) {
    if depth > MAX_INCLUDE_DEPTH || seen.iter().any(|known| known == path) {
        return;
    }
    seen.push(path.to_path_buf());
    let Some(text) = small_text(path) else {
        return;
    };
    let mut section = String::new();
    for line in text.lines() {
        let line = line.trim();
        if let Some(rest) = line.strip_prefix('[') {
            section = rest
                .split([']', ' ', '"', '.'])
                .next()
                .unwrap_or_default()
                .to_ascii_lowercase();
            continue;
        }
        let Some((key, value)) = line.split_once('=') else {
            continue;
        };
        let key = key.trim().to_ascii_lowercase();
        let value = value.trim().trim_matches('"').trim();
        if key == "extraheader" {
            header_values(value, found);
        } else if key == "path" && section.starts_with("include") {
            let included = expand_home(value);
            let included = match path.parent() {
                Some(dir) if included.is_relative() => dir.join(included),
                _ => included,
            };
            read_config(&included, depth + 1, seen, found);
        }
        url_password(value, found);
    }
}

fn expand_home(value: &str) -> PathBuf {
    match (value.strip_prefix("~/"), std::env::var_os("HOME")) {
        (Some(rest), Some(home)) => Path::new(&home).join(rest),
        _ => PathBuf::from(value),
    }
}

/// A header's value, its credential (the last word), and, when that is base64 of
/// `user:password`, the decoded pair and the password.
fn header_values(value: &str, found: &mut Vec<(String, String)>) {
    let name = || "git_extraheader".to_string();
    let Some((_, header)) = value.split_once(':') else {
        return;
    };
    found.push((name(), header.trim().to_string()));
    let Some(credential) = header.split_whitespace().last() else {
        return;
    };
    found.push((name(), credential.to_string()));
    if let Some(decoded) = base64_decode(credential).and_then(|bytes| String::from_utf8(bytes).ok())
    {
        if let Some((_, password)) = decoded.split_once(':') {
            found.push((name(), password.to_string()));
        }
        found.push((name(), decoded));
    }
}

/// The password of a URL's userinfo (`scheme://user:password@host`).
fn url_password(value: &str, found: &mut Vec<(String, String)>) {
    let Some((_, rest)) = value.split_once("://") else {
        return;
    };
    let Some((userinfo, _)) = rest.split_once('@') else {
        return;
    };
    if userinfo.contains('/') {
        return;
    }
    if let Some((_, password)) = userinfo.split_once(':') {
        found.push(("git_url_password".to_string(), password.to_string()));
    }
}

/// Standard base64 (padding optional); `None` for anything else.
fn base64_decode(text: &str) -> Option<Vec<u8>> {
    let text = text.trim_end_matches('=');
    let mut bits = 0u32;
    let mut count = 0;
    let mut out = Vec::with_capacity(text.len() * 3 / 4);
    for byte in text.bytes() {
        let six = super::BASE64.iter().position(|&c| c == byte)?;
        bits = bits << 6 | six as u32;
        count += 6;
        if count >= 8 {
            count -= 8;
            out.push((bits >> count) as u8);
            bits &= (1 << count) - 1;
        }
    }
    Some(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_checkout_header_and_url_passwords_are_learnt_through_includes_and_worktrees() {
        let dir = tempfile::tempdir().unwrap();
        let main = dir.path().join("main");
        let git = main.join(".git");
        std::fs::create_dir_all(git.join("worktrees/wt")).unwrap();
        // actions/checkout v6 keeps the header in a file the config includes.
        std::fs::write(
            dir.path().join("creds.config"),
            "[http \"https://github.com/\"]\n\textraheader = \"AUTHORIZATION: basic eC1hY2Nlc3MtdG9rZW46Z2hzX3NlY3JldHNlY3JldA==\"\n",
        )
        .unwrap();
        std::fs::write(
            git.join("config"),
            format!(
                "[core]\n\tbare = false\n[includeIf \"gitdir:/x/\"]\n\tpath = {}\n[remote \"o\"]\n\turl = https://u:hunter2hunter2@example.com/r.git\n",
                dir.path().join("creds.config").display()
            ),
        )
        .unwrap();
        let worktree = dir.path().join("wt");
        std::fs::create_dir_all(&worktree).unwrap();
        std::fs::write(
            worktree.join(".git"),
            format!("gitdir: {}\n", git.join("worktrees/wt").display()),
        )
        .unwrap();
        std::fs::write(git.join("worktrees/wt/commondir"), "../..\n").unwrap();
        for workdir in [&main, &worktree] {
            let values: Vec<String> = credentials(workdir).into_iter().map(|(_, v)| v).collect();
            for expected in [
                "basic eC1hY2Nlc3MtdG9rZW46Z2hzX3NlY3JldHNlY3JldA==",
                "eC1hY2Nlc3MtdG9rZW46Z2hzX3NlY3JldHNlY3JldA==",
                "x-access-token:ghs_secretsecret",
                "ghs_secretsecret",
                "hunter2hunter2",
            ] {
                assert!(
                    values.iter().any(|v| v == expected),
                    "{expected} in {values:?}"
                );
            }
        }
        assert!(credentials(dir.path()).is_empty());
    }
}
