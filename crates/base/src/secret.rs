//! Which environment variable names look like credentials: the children's environment, the
//! redactor and the sandbox's checks all ask the same question.

/// Names of environment variables that look like credentials.
pub fn is_secret_env_name(name: &str) -> bool {
    let upper = name.to_ascii_uppercase();
    ["_KEY", "_TOKEN", "_SECRET", "_SECRETS", "_CREDENTIALS"]
        .iter()
        .any(|suffix| upper.ends_with(suffix))
        || upper.contains("PASSWORD")
        || upper.contains("API_KEY")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn secret_names() {
        for name in [
            "ANTHROPIC_API_KEY",
            "GITHUB_TOKEN",
            "AWS_SECRET",
            "DB_PASSWORD",
            "OPENAI_API_KEY",
        ] {
            assert!(is_secret_env_name(name), "{name}");
        }
        for name in ["PATH", "HOME", "KEYBOARD", "CI"] {
            assert!(!is_secret_env_name(name), "{name}");
        }
    }
}
