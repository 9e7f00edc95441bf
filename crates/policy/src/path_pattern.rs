//! Path rule content for Read/Edit/Write (`Read(./src/**)`), in gitignore syntax with Claude
//! Code's anchors: `//abs`, `~/home`, `/policy-dir`, `x` and `./x` (the workdir).

use std::os::unix::ffi::OsStrExt;
use std::path::{Path, PathBuf};
use std::sync::OnceLock;

use globset::{Glob, GlobBuilder, GlobSet, GlobSetBuilder};

use super::path_glob::PathGlob;

/// Where a path pattern is rooted.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Anchor {
    /// `//abs/path`: the filesystem root.
    Root,
    /// `~/x`: the home folder.
    Home,
    /// `/x`: the folder of the policy file that holds the rule.
    PolicyDir(PathBuf),
    /// `x`, `./x`: the run's working directory.
    Workdir,
}

/// The bases the anchors resolve to for one run.
#[derive(Debug, Clone)]
pub struct PathBases<'a> {
    pub workdir: &'a Path,
    pub home: Option<&'a Path>,
}

/// A parsed pattern: its anchor and its glob, ready to match without any regex for the
/// usual patterns (`PathGlob`); the few with classes, braces or escapes keep globset's globs,
/// which a rule set compiles together (`PathIndex`). That is what keeps a policy of many
/// thousand path rules cheap to load and to decide with.
#[derive(Debug, Clone)]
pub struct PathPattern {
    text: String,
    anchor: Anchor,
    glob: PatternGlob,
    /// The pattern's fixed leading folders below its anchor (`src/gen` of `src/gen/*.rs`);
    /// None when it may match at any depth (`*.env`, `.env`, `**/x`).
    fixed_prefix: Option<PathBuf>,
}

/// How a pattern's glob is matched.
#[derive(Debug, Clone)]
pub(super) enum PatternGlob {
    /// Literal characters, `?`, `*` and `**`: matched step by step, nothing compiled.
    Steps(PathGlob),
    /// The pattern itself and its "everything inside" twin, for globset.
    Globset {
        globs: Box<[Glob; 2]>,
        /// This pattern alone, compiled on first use: only the read checks of tree readers
        /// (`grep -r`) match one pattern at a time; everything else goes through the rule
        /// set's index.
        alone: OnceLock<Option<GlobSet>>,
    },
}

impl PartialEq for PathPattern {
    fn eq(&self, other: &Self) -> bool {
        self.text == other.text && self.anchor == other.anchor
    }
}

#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum PathPatternError {
    #[error("empty path pattern")]
    Empty,
    #[error("invalid path pattern `{text}`: {message}")]
    Glob { text: String, message: String },
}

impl PathPattern {
    /// `policy_dir` anchors patterns that start with a single `/`.
    pub fn parse(text: &str, policy_dir: &Path) -> Result<PathPattern, PathPatternError> {
        let (anchor, rest) = if let Some(rest) = text.strip_prefix("//") {
            (Anchor::Root, rest)
        } else if let Some(rest) = text.strip_prefix("~/") {
            (Anchor::Home, rest)
        } else if text == "~" {
            (Anchor::Home, "")
        } else if let Some(rest) = text.strip_prefix('/') {
            (Anchor::PolicyDir(policy_dir.to_path_buf()), rest)
        } else if let Some(rest) = text.strip_prefix("./") {
            (Anchor::Workdir, rest)
        } else {
            (Anchor::Workdir, text)
        };
        if text.trim().is_empty() {
            return Err(PathPatternError::Empty);
        }
        let body = glob_body(text, rest);
        let glob = match PathGlob::parse(&body) {
            Some(steps) => PatternGlob::Steps(steps),
            None => PatternGlob::Globset {
                globs: Box::new(compile(text, &body)?),
                alone: OnceLock::new(),
            },
        };
        let trimmed = rest.trim_end_matches('/');
        let floating = text == rest && !trimmed.contains('/');
        let fixed_prefix = (!floating).then(|| {
            trimmed
                .split('/')
                .take_while(|c| !c.contains(['*', '?', '[', '{', '\\']))
                .collect::<PathBuf>()
        });
        Ok(PathPattern {
            text: text.to_string(),
            anchor,
            glob,
            fixed_prefix,
        })
    }

    pub fn as_str(&self) -> &str {
        &self.text
    }

    pub fn anchor(&self) -> &Anchor {
        &self.anchor
    }

    pub(super) fn glob(&self) -> &PatternGlob {
        &self.glob
    }
}

impl PathPattern {
    fn base<'b>(&'b self, bases: &PathBases<'b>) -> Option<&'b Path> {
        Some(match &self.anchor {
            Anchor::Root => Path::new("/"),
            Anchor::Home => bases.home?,
            Anchor::PolicyDir(dir) => dir,
            Anchor::Workdir => bases.workdir,
        })
    }

    /// Whether `path` (absolute, normalised, symlinks resolved) is matched by this pattern
    /// alone. A pattern whose globs cannot be built into a set matches everything: this serves
    /// refusals, so it errs towards refusing.
    pub fn matches(&self, path: &Path, bases: &PathBases) -> bool {
        let Some(relative) = self.anchor.relative(path, bases) else {
            return false;
        };
        match &self.glob {
            PatternGlob::Steps(steps) => steps.matches(relative.as_os_str().as_bytes()),
            PatternGlob::Globset { globs, alone } => {
                let alone = alone.get_or_init(|| {
                    let mut set = GlobSetBuilder::new();
                    for glob in globs.iter() {
                        set.add(glob.clone());
                    }
                    set.build().ok()
                });
                alone.as_ref().is_none_or(|set| set.is_match(relative))
            }
        }
    }

    /// Whether the folder `dir` or anything below it may be matched (over-approximated): for
    /// a reader that reads a whole tree (`grep -r`), or a glob.
    pub fn may_match_below(&self, dir: &Path, bases: &PathBases) -> bool {
        if self.matches(dir, bases) {
            return true;
        }
        let Some(base) = self.base(bases) else {
            return false;
        };
        if base.starts_with(dir) {
            return true;
        }
        let Ok(relative) = dir.strip_prefix(base) else {
            return false;
        };
        match &self.fixed_prefix {
            None => true,
            Some(prefix) => prefix.starts_with(relative) || relative.starts_with(prefix),
        }
    }
}

impl Anchor {
    /// `path` relative to this anchor's base, if it lies under it.
    pub fn relative<'p>(&self, path: &'p Path, bases: &PathBases) -> Option<&'p Path> {
        let base: &Path = match self {
            Anchor::Root => Path::new("/"),
            Anchor::Home => bases.home?,
            Anchor::PolicyDir(dir) => dir,
            Anchor::Workdir => bases.workdir,
        };
        path.strip_prefix(base).ok()
    }
}

/// gitignore semantics: a pattern with no inner `/` matches at any depth below its anchor
/// (unless it was explicitly anchored with `./`, `/`, `//` or `~/`); a pattern that names a
/// folder also matches everything inside it (the glob's twin `body/**`, which every matcher
/// here applies).
fn glob_body(text: &str, rest: &str) -> String {
    let explicit_anchor = text != rest;
    let trimmed = rest.trim_end_matches('/');
    let floating = !explicit_anchor && !trimmed.contains('/');
    if trimmed.is_empty() {
        "**".to_string()
    } else if floating {
        format!("**/{trimmed}")
    } else {
        trimmed.to_string()
    }
}

/// The body and its twin as globset's globs.
fn compile(text: &str, body: &str) -> Result<[Glob; 2], PathPatternError> {
    let glob = |pattern: &str| {
        GlobBuilder::new(pattern)
            .literal_separator(true)
            .backslash_escape(true)
            .build()
            .map_err(|err| PathPatternError::Glob {
                text: text.to_string(),
                message: err.kind().to_string(),
            })
    };
    Ok([glob(body)?, glob(&format!("{body}/**"))?])
}

#[cfg(test)]
impl PathPattern {
    /// The oracle: globset's regexes for this pattern's globs, compiled one by one.
    pub(super) fn globset_matches(&self, path: &Path, bases: &PathBases) -> bool {
        let Some(relative) = self.anchor.relative(path, bases) else {
            return false;
        };
        let rest = match &self.anchor {
            Anchor::Workdir => self.text.strip_prefix("./").unwrap_or(&self.text),
            Anchor::Root => &self.text[2..],
            Anchor::Home => self.text.strip_prefix("~/").unwrap_or(""),
            Anchor::PolicyDir(_) => &self.text[1..],
        };
        let globs = compile(&self.text, &glob_body(&self.text, rest)).unwrap();
        globs
            .iter()
            .any(|glob| glob.compile_matcher().is_match(relative))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn bases() -> PathBases<'static> {
        PathBases {
            workdir: Path::new("/ws"),
            home: Some(Path::new("/home/u")),
        }
    }

    /// The pattern's answer, checked against globset's regex for the same globs.
    fn matches(text: &str, path: &str) -> bool {
        let pattern = PathPattern::parse(text, Path::new("/etc/tollgate")).unwrap();
        let found = pattern.matches(Path::new(path), &bases());
        assert_eq!(
            found,
            pattern.globset_matches(Path::new(path), &bases()),
            "{text} vs {path}"
        );
        found
    }

    #[test]
    fn anchors_and_gitignore_semantics() {
        let cases = [
            ("src/**", "/ws/src/a/b.rs", true),
            ("src/**", "/ws/other/src/a.rs", false),
            ("./src/**", "/ws/src/a.rs", true),
            ("src", "/ws/src/deep/file", true),
            ("*.env", "/ws/a/b/prod.env", true),
            ("./*.env", "/ws/a/prod.env", false),
            ("src/*.rs", "/ws/src/a/b.rs", false),
            ("//etc/passwd", "/etc/passwd", true),
            ("//tmp/**", "/tmp/x/y", true),
            ("~/.ssh/**", "/home/u/.ssh/id_rsa", true),
            ("~/.ssh/**", "/ws/.ssh/id_rsa", false),
            ("/secrets/**", "/etc/tollgate/secrets/a", true),
            ("/secrets/**", "/ws/secrets/a", false),
            (".git", "/ws/.git/config", true),
            ("**", "/ws/anything", true),
            ("**", "/elsewhere", false),
            ("src/{a,b}/**", "/ws/src/b/c", true),
            ("src/[ab]*", "/ws/src/c", false),
            // A name ending in a dot (globset's sets skip its basename strategies there).
            ("foo.", "/ws/x/foo.", true),
        ];
        for (pattern, path, expected) in cases {
            assert_eq!(matches(pattern, path), expected, "{pattern} vs {path}");
        }
    }

    #[test]
    fn may_match_below_a_folder() {
        let below = |pattern: &str, dir: &str| {
            PathPattern::parse(pattern, Path::new("/etc/tollgate"))
                .unwrap()
                .may_match_below(Path::new(dir), &bases())
        };
        let cases = [
            (".env", "/ws/src", true),
            ("secrets/**", "/ws", true),
            ("secrets/**", "/ws/secrets/a", true),
            ("secrets/**", "/ws/src", false),
            ("./config/*.key", "/ws/config", true),
            ("./config/*.key", "/ws/docs", false),
            ("//etc/shadow", "/", true),
            ("//etc/shadow", "/ws", false),
            ("~/.ssh/**", "/home", true),
        ];
        for (pattern, dir, expected) in cases {
            assert_eq!(below(pattern, dir), expected, "{pattern} below {dir}");
        }
    }

    #[test]
    fn bad_globs_are_errors() {
        assert!(PathPattern::parse("src/[a", Path::new("/")).is_err());
        assert_eq!(
            PathPattern::parse(" ", Path::new("/")),
            Err(PathPatternError::Empty)
        );
    }
}
