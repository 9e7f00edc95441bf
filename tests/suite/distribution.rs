//! The distribution metadata, read back the way its consumers read it: cargo-binstall's URL
//! template (from `cargo metadata`) rendered for each target release.yml builds must name an
//! asset that workflow attaches; the published crate (`cargo package --list`) holds the
//! licences and what the README's quick start needs, and no tests, fixtures or CI; and every
//! owner/name the README and examples show is Cargo.toml's `repository`, the one place it is set.

use std::collections::BTreeSet;
use std::path::Path;
use std::process::Command;

use regex::Regex;
use serde_json::Value;

use crate::support::repo_root;

fn cargo(args: &[&str]) -> String {
    let output = Command::new(env!("CARGO"))
        .args(args)
        .current_dir(repo_root())
        .output()
        .unwrap();
    assert!(
        output.status.success(),
        "cargo {args:?}: {}",
        String::from_utf8_lossy(&output.stderr)
    );
    String::from_utf8(output.stdout).unwrap()
}

/// This package as `cargo metadata` reports it: what cargo-binstall reads from the manifest.
fn package() -> Value {
    let metadata: Value = serde_json::from_str(&cargo(&[
        "metadata",
        "--no-deps",
        "--offline",
        "--format-version",
        "1",
    ]))
    .unwrap();
    metadata["packages"]
        .as_array()
        .unwrap()
        .iter()
        .find(|package| package["name"] == "tollgate")
        .unwrap()
        .clone()
}

/// cargo-binstall's `{ key }` placeholders, filled from `values`; an unknown key fails,
/// since binstall would fill it with something this test does not model.
fn render(template: &str, values: &[(&str, &str)]) -> String {
    let placeholder = Regex::new(r"\{\s*([a-z-]+)\s*\}").unwrap();
    placeholder
        .replace_all(template, |captures: &regex::Captures| {
            let key = &captures[1];
            let (_, value) = values
                .iter()
                .find(|(name, _)| *name == key)
                .unwrap_or_else(|| {
                    panic!("pkg-url uses {{ {key} }}, which this test does not fill")
                });
            value.to_string()
        })
        .into_owned()
}

fn yaml(path: &str) -> Value {
    let text = std::fs::read_to_string(repo_root().join(path)).unwrap();
    serde_saphyr::from_str(&text).unwrap_or_else(|err| panic!("{path}: {err}"))
}

/// The release's asset names: the upload path of release.yml's build job, per matrix target.
fn release_assets() -> BTreeSet<(String, String)> {
    let workflow = yaml(".github/workflows/release.yml");
    let build = &workflow["jobs"]["build"];
    let upload = build["steps"]
        .as_array()
        .unwrap()
        .iter()
        .find(|step| {
            step["uses"]
                .as_str()
                .is_some_and(|uses| uses.starts_with("actions/upload-artifact@"))
        })
        .expect("release.yml's build job uploads its binary");
    let path = upload["with"]["path"].as_str().unwrap();
    build["strategy"]["matrix"]["include"]
        .as_array()
        .unwrap()
        .iter()
        .map(|entry| {
            let target = entry["target"].as_str().unwrap().to_string();
            let file = path.replace("${{ matrix.target }}", &target);
            let asset = file.rsplit('/').next().unwrap().to_string();
            (target, asset)
        })
        .collect()
}

#[test]
fn binstall_resolves_to_the_assets_the_release_attaches() {
    let package = package();
    let repository = package["repository"].as_str().unwrap();
    let version = package["version"].as_str().unwrap();
    let binstall = &package["metadata"]["binstall"];
    assert_eq!(
        binstall["pkg-fmt"], "bin",
        "the release attaches raw binaries"
    );
    let template = binstall["pkg-url"].as_str().unwrap();

    let assets = release_assets();
    let targets: BTreeSet<&str> = assets.iter().map(|(target, _)| target.as_str()).collect();
    assert_eq!(
        targets,
        BTreeSet::from(["x86_64-unknown-linux-gnu", "aarch64-unknown-linux-gnu"])
    );
    let release_text =
        std::fs::read_to_string(repo_root().join(".github/workflows/release.yml")).unwrap();
    // The release is the tag v<version>: the workflow refuses any other tag.
    assert!(release_text.contains(r#""$GITHUB_REF_NAME" != "v$version""#));
    for (target, asset) in &assets {
        let url = render(
            template,
            &[
                ("repo", repository),
                ("name", "tollgate"),
                ("version", version),
                ("target", target),
                ("binary-ext", ""),
            ],
        );
        // GitHub serves a release asset at <repository>/releases/download/<tag>/<asset>.
        assert_eq!(
            url,
            format!("{repository}/releases/download/v{version}/{asset}"),
            "{target}"
        );
    }
}

#[test]
fn the_published_crate_holds_the_licences_and_the_quick_start_but_no_tests() {
    let list = cargo(&["package", "--list", "--allow-dirty", "--offline"]);
    let files: BTreeSet<&str> = list.lines().collect();
    for needed in [
        "Cargo.toml",
        "Cargo.lock",
        "README.md",
        "LICENSE-MIT",
        "LICENSE-APACHE",
        "src/main.rs",
        "src/lib.rs",
        "examples/quickstart.yaml",
        "examples/quickstart/src/lib.rs",
        "policies/read-only.yaml",
    ] {
        assert!(files.contains(needed), "the crate lacks {needed}");
    }
    let left_out = [
        "tests/",
        "benches/",
        "fuzz/",
        "scripts/",
        ".github/",
        ".ci/",
        "proptest-regressions/",
    ];
    let leaked: Vec<&&str> = files
        .iter()
        .filter(|file| left_out.iter().any(|folder| file.starts_with(folder)))
        .collect();
    assert!(leaked.is_empty(), "published but not needed: {leaked:?}");
}

/// Every text file under `folder`, recursively.
fn text_files(folder: &Path, found: &mut Vec<std::path::PathBuf>) {
    for entry in std::fs::read_dir(folder).unwrap() {
        let path = entry.unwrap().path();
        if path.is_dir() {
            text_files(&path, found);
        } else if std::fs::read_to_string(&path).is_ok() {
            found.push(path);
        }
    }
}

#[test]
fn every_owner_shown_is_the_repository_cargo_toml_names() {
    let repository = env!("CARGO_PKG_REPOSITORY");
    let owner = repository
        .strip_prefix("https://github.com/")
        .and_then(|path| path.strip_suffix("/tollgate"))
        .unwrap_or_else(|| panic!("repository {repository} is not github.com/<owner>/tollgate"));
    let root = repo_root();
    let mut files = vec![root.join("README.md")];
    text_files(&root.join("examples"), &mut files);
    text_files(&root.join("docs"), &mut files);
    // The release URL, the action (`uses:`), the attestation check (`--repo`), the image.
    let shown =
        Regex::new(r"(?:github\.com/|ghcr\.io/|uses:\s*|--repo\s+)([A-Za-z0-9_.-]+)/tollgate\b")
            .unwrap();
    let mut seen = 0;
    for file in &files {
        let text = std::fs::read_to_string(file).unwrap();
        for captures in shown.captures_iter(&text) {
            seen += 1;
            // Image names are lower case; GitHub owners are not case-sensitive.
            assert!(
                captures[1].eq_ignore_ascii_case(owner),
                "{}: `{}` names another owner than Cargo.toml's repository ({owner})",
                file.display(),
                &captures[0]
            );
        }
    }
    assert!(seen >= 5, "found only {seen} references to the repository");
}
