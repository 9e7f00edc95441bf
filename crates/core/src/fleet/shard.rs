//! Which repositories this process takes: `--shard I/N`, else a Kubernetes Indexed Job's
//! `JOB_COMPLETION_INDEX` (0-based) with `TOLLGATE_SHARD_COUNT`. A repository's shard
//! depends only on its id, so adding one to the manifest never moves the others.

use std::fmt;
use std::str::FromStr;

use super::journal::stable_hash;
use super::manifest::Repo;

/// The 1-based shard `index` of `count`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Shard {
    pub index: u32,
    pub count: u32,
}

impl FromStr for Shard {
    type Err = String;

    fn from_str(text: &str) -> Result<Shard, String> {
        let parsed = text
            .split_once('/')
            .and_then(|(i, n)| Some((i.trim().parse().ok()?, n.trim().parse().ok()?)));
        match parsed {
            Some((index, count)) if count >= 1 && (1..=count).contains(&index) => {
                Ok(Shard { index, count })
            }
            _ => Err(format!("`{text}` is not a shard I/N with 1 ≤ I ≤ N")),
        }
    }
}

impl fmt::Display for Shard {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}/{}", self.index, self.count)
    }
}

impl Shard {
    /// From an Indexed Job's environment: `JOB_COMPLETION_INDEX` is 0-based.
    pub fn from_env(
        completion_index: Option<&str>,
        count: Option<&str>,
    ) -> Result<Option<Shard>, String> {
        match (completion_index, count) {
            (None, _) => Ok(None),
            (Some(index), Some(count)) => {
                let index: u32 = index
                    .trim()
                    .parse()
                    .map_err(|_| format!("JOB_COMPLETION_INDEX `{index}` is not a number"))?;
                format!("{}/{}", index + 1, count.trim()).parse().map(Some)
            }
            (Some(_), None) => Err(
                "JOB_COMPLETION_INDEX is set but TOLLGATE_SHARD_COUNT is not: set it to the Job's completions"
                    .to_string(),
            ),
        }
    }

    pub fn takes(&self, repo: &Repo) -> bool {
        stable_hash(&[repo.id.as_bytes()]) % u64::from(self.count) == u64::from(self.index - 1)
    }
}

#[cfg(test)]
mod tests {
    use std::collections::BTreeMap;
    use std::path::PathBuf;

    use super::*;
    use crate::fleet::manifest::RepoSource;

    #[test]
    fn shards_cover_every_repo_exactly_once() {
        let repos: Vec<Repo> = (0..50)
            .map(|n| Repo {
                id: format!("repo-{n}"),
                source: RepoSource::Local(PathBuf::from("/r")),
                git_ref: None,
                params: BTreeMap::new(),
            })
            .collect();
        for count in 1..=4 {
            for repo in &repos {
                let owners = (1..=count)
                    .filter(|index| {
                        Shard {
                            index: *index,
                            count,
                        }
                        .takes(repo)
                    })
                    .count();
                assert_eq!(owners, 1, "{} in {count} shards", repo.id);
            }
        }
    }

    #[test]
    fn shard_text_and_environment() {
        assert_eq!("2/3".parse(), Ok(Shard { index: 2, count: 3 }));
        for bad in ["0/3", "4/3", "1/0", "x", "1/"] {
            assert!(bad.parse::<Shard>().is_err(), "{bad}");
        }
        assert_eq!(
            Shard::from_env(Some("0"), Some("3")),
            Ok(Some(Shard { index: 1, count: 3 }))
        );
        assert!(Shard::from_env(Some("0"), None).is_err());
        assert_eq!(Shard::from_env(None, Some("3")), Ok(None));
    }
}
