//! Who a commit tollgate makes names, and how it is signed. Parsed once where the operator
//! gives them (`github publish --author`, `--signing-key`); git's own configuration decides
//! what is not given. The key is the operator's: never the repository's configuration, whose
//! `gpg.*` programs the trusted side pins (`tools::git_env`).

use std::path::PathBuf;

/// A commit's author and committer, as `Name <email>`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Author {
    pub name: String,
    pub email: String,
}

impl Author {
    /// `Name <email>`: a name git takes (no `<`, `>` or line break, not empty) and an email
    /// between the angle brackets at the end.
    pub fn parse(text: &str) -> Result<Author, String> {
        let text = text.trim();
        let shape = || format!("`{text}` is not `Name <email>`");
        let (name, rest) = text.split_once('<').ok_or_else(shape)?;
        let email = rest.strip_suffix('>').ok_or_else(shape)?;
        let name = name.trim();
        let bad = |part: &str| {
            part.is_empty()
                || part
                    .chars()
                    .any(|c| matches!(c, '<' | '>' | '\n' | '\r' | '\0'))
        };
        if bad(name) || bad(email) || email.chars().any(char::is_whitespace) {
            return Err(shape());
        }
        Ok(Author {
            name: name.to_string(),
            email: email.to_string(),
        })
    }
}

/// The signature formats git signs commits in (`gpg.format`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum SigningFormat {
    /// An SSH key: `--signing-key` is the private key's file (or its public key's, with the
    /// private key in an ssh-agent).
    Ssh,
    /// OpenPGP through gpg: `--signing-key` is the key's id in the keyring.
    Openpgp,
}

impl SigningFormat {
    fn git_name(self) -> &'static str {
        match self {
            SigningFormat::Ssh => "ssh",
            SigningFormat::Openpgp => "openpgp",
        }
    }
}

/// How commits are signed.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Signing {
    pub format: SigningFormat,
    /// A key file (ssh) or a key id (openpgp).
    pub key: String,
}

impl Signing {
    /// Refuses a key git would not find: an ssh key file that is not there.
    pub fn checked(format: SigningFormat, key: &str) -> Result<Signing, String> {
        if key.trim().is_empty() {
            return Err("the signing key is empty".into());
        }
        if format == SigningFormat::Ssh && !PathBuf::from(key).is_file() {
            return Err(format!("the ssh signing key `{key}` is not a file"));
        }
        Ok(Signing {
            format,
            key: key.to_string(),
        })
    }
}

/// Who a commit names and how it is signed; `None` leaves each to git's configuration.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct CommitIdentity {
    pub author: Option<Author>,
    pub signing: Option<Signing>,
}

impl CommitIdentity {
    /// git's `-c` settings for the commit, before the subcommand; `has_identity` is whether
    /// git's configuration names a user (a neutral one is given when it does not).
    pub fn config_args(&self, has_identity: bool) -> Vec<String> {
        let mut args = Vec::new();
        let mut set = |key: &str, value: &str| {
            args.push("-c".to_string());
            args.push(format!("{key}={value}"));
        };
        match &self.author {
            Some(author) => {
                set("user.name", &author.name);
                set("user.email", &author.email);
            }
            None if !has_identity => {
                set("user.name", "tollgate");
                set("user.email", "tollgate@localhost");
            }
            None => {}
        }
        if let Some(signing) = &self.signing {
            set("gpg.format", signing.format.git_name());
            set("user.signingKey", &signing.key);
        }
        args
    }

    /// The commit subcommand's own flag: sign, or git's configuration decides.
    pub fn sign_flag(&self) -> Option<&'static str> {
        self.signing.as_ref().map(|_| "--gpg-sign")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_author_is_name_and_email_in_angle_brackets() {
        assert_eq!(
            Author::parse(
                " github-actions[bot] <41898282+github-actions[bot]@users.noreply.github.com> "
            )
            .unwrap(),
            Author {
                name: "github-actions[bot]".into(),
                email: "41898282+github-actions[bot]@users.noreply.github.com".into()
            }
        );
        for bad in [
            "",
            "name",
            "<a@b>",
            "name <>",
            "name <a@b",
            "na<me <a@b>",
            "name <a b@c>",
            "na\nme <a@b>",
            "name <a@b> trailing",
        ] {
            assert!(Author::parse(bad).is_err(), "{bad:?}");
        }
    }

    #[test]
    fn the_config_names_the_author_or_a_neutral_one_and_the_key() {
        let none = CommitIdentity::default();
        assert!(none.config_args(true).is_empty());
        assert_eq!(
            none.config_args(false),
            [
                "-c",
                "user.name=tollgate",
                "-c",
                "user.email=tollgate@localhost"
            ]
        );
        let signed = CommitIdentity {
            author: Some(Author::parse("A <a@example.com>").unwrap()),
            signing: Some(Signing {
                format: SigningFormat::Openpgp,
                key: "ABCD1234".into(),
            }),
        };
        assert_eq!(
            signed.config_args(true),
            [
                "-c",
                "user.name=A",
                "-c",
                "user.email=a@example.com",
                "-c",
                "gpg.format=openpgp",
                "-c",
                "user.signingKey=ABCD1234"
            ]
        );
        assert_eq!(signed.sign_flag(), Some("--gpg-sign"));
        assert!(Signing::checked(SigningFormat::Ssh, "/no/such/key").is_err());
        assert!(Signing::checked(SigningFormat::Openpgp, " ").is_err());
    }
}
