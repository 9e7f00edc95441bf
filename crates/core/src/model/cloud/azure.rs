//! Microsoft Entra ID access tokens for Azure (Claude in Microsoft Foundry, Azure OpenAI),
//! found in azure-identity's `EnvironmentCredential` / `WorkloadIdentityCredential` order: a
//! client secret (`AZURE_TENANT_ID`, `AZURE_CLIENT_ID`, `AZURE_CLIENT_SECRET`); a federated
//! token file (`AZURE_FEDERATED_TOKEN_FILE`, as AKS workload identity mounts it); and —
//! tollgate's addition for GitHub Actions — the job's OIDC token for audience
//! `api://AzureADTokenExchange`, as azure/login presents it. Each is one client-credentials
//! POST to `{authority}/{tenant}/oauth2/v2.0/token`, so it is written here on reqwest rather
//! than through the Azure SDK (whose identity crate brings its own HTTP stack).

use std::path::PathBuf;

use super::SecretSink;
use super::bearer::{AccessToken, Payload, oauth_token, post};
use super::oidc::GithubOidc;
use crate::model::http::Failure;
use crate::model::retry::FailureCategory;

/// The audience Entra expects in a federated credential's token (GitHub, AKS).
pub const FEDERATION_AUDIENCE: &str = "api://AzureADTokenExchange";
/// Microsoft's public cloud.
pub const AUTHORITY: &str = "https://login.microsoftonline.com";
/// Azure OpenAI's (and Azure AI services') token scope.
pub const COGNITIVE_SCOPE: &str = "https://cognitiveservices.azure.com/.default";
/// Microsoft Foundry's data-plane scope, which the Anthropic SDK's Foundry client asks for.
pub const FOUNDRY_SCOPE: &str = "https://ai.azure.com/.default";
const ASSERTION_TYPE: &str = "urn:ietf:params:oauth:client-assertion-type:jwt-bearer";

/// What proves the application's identity to Entra.
#[derive(Clone)]
pub enum Proof {
    Secret(String),
    /// A federated token file, read at each exchange (the platform rotates it).
    TokenFile(PathBuf),
    Github(GithubOidc),
}

/// An application (service principal) in a tenant, with its proof.
#[derive(Clone)]
pub struct AzureSource {
    pub tenant: String,
    pub client_id: String,
    pub proof: Proof,
    /// `AZURE_AUTHORITY_HOST`, else Microsoft's public cloud.
    pub authority: String,
    pub scope: String,
}

impl std::fmt::Debug for AzureSource {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.describe())
    }
}

impl AzureSource {
    /// What the chain found, for the run's log: never a secret.
    pub fn describe(&self) -> String {
        let proof = match &self.proof {
            Proof::Secret(_) => "AZURE_CLIENT_SECRET".to_string(),
            Proof::TokenFile(path) => format!("the federated token in {}", path.display()),
            Proof::Github(_) => "the GitHub Actions OIDC token".to_string(),
        };
        format!(
            "application {} in tenant {} with {proof}, scope {}",
            self.client_id, self.tenant, self.scope
        )
    }

    /// A new access token for the scope.
    pub async fn token(&self, secrets: &SecretSink) -> Result<AccessToken, Failure> {
        let auth = |message: String| Failure::new(FailureCategory::Authentication, message);
        let assertion = match &self.proof {
            Proof::Secret(_) => None,
            Proof::TokenFile(path) => {
                let token = std::fs::read_to_string(path).map_err(|err| {
                    auth(format!(
                        "cannot read the federated token {}: {err}",
                        path.display()
                    ))
                })?;
                Some(token.trim().to_string())
            }
            Proof::Github(oidc) => Some(
                oidc.token(FEDERATION_AUDIENCE, secrets)
                    .await
                    .map_err(auth)?,
            ),
        };
        let mut form = vec![
            ("grant_type", "client_credentials"),
            ("client_id", self.client_id.as_str()),
            ("scope", self.scope.as_str()),
        ];
        match (&self.proof, &assertion) {
            (Proof::Secret(secret), _) => form.push(("client_secret", secret)),
            (_, Some(assertion)) => {
                secrets.learn("AZURE_FEDERATED_TOKEN", assertion);
                form.push(("client_assertion_type", ASSERTION_TYPE));
                form.push(("client_assertion", assertion));
            }
            (_, None) => return Err(auth("no proof of the application's identity".into())),
        }
        let url = format!(
            "{}/{}/oauth2/v2.0/token",
            self.authority.trim_end_matches('/'),
            self.tenant
        );
        let answer = post("Microsoft Entra", &url, Payload::Form(&form), None).await?;
        oauth_token(&answer, "Microsoft Entra")
    }
}

/// The environment the chain reads, as a function so tests give their own.
pub type Env<'a> = &'a dyn Fn(&str) -> Option<String>;

/// The first source the chain finds, for `scope` (`AZURE_TOKEN_SCOPE` replaces it). The
/// client secret is told to `secrets` here. `Err` says what to set.
pub fn find_source(env: Env<'_>, scope: &str, secrets: &SecretSink) -> Result<AzureSource, String> {
    let get = |name: &str| {
        env(name)
            .map(|value| value.trim().to_string())
            .filter(|value| !value.is_empty())
    };
    let (Some(tenant), Some(client_id)) = (get("AZURE_TENANT_ID"), get("AZURE_CLIENT_ID")) else {
        return Err("no Microsoft Entra credentials: set AZURE_TENANT_ID and AZURE_CLIENT_ID, with AZURE_CLIENT_SECRET, AZURE_FEDERATED_TOKEN_FILE, or a GitHub Actions job's OIDC token (`permissions: id-token: write`; the action's azure-client-id and azure-tenant-id inputs)".into());
    };
    // A tenant is a GUID or a domain; anything else would change the token URL's path.
    if !tenant
        .chars()
        .all(|c| c.is_ascii_alphanumeric() || c == '-' || c == '.')
    {
        return Err(format!("AZURE_TENANT_ID {tenant:?} is not a tenant id"));
    }
    let proof = if let Some(secret) = get("AZURE_CLIENT_SECRET") {
        secrets.learn("AZURE_CLIENT_SECRET", &secret);
        Proof::Secret(secret)
    } else if let Some(path) = get("AZURE_FEDERATED_TOKEN_FILE") {
        Proof::TokenFile(PathBuf::from(path))
    } else if let Some(oidc) = GithubOidc::from_env() {
        Proof::Github(oidc)
    } else {
        return Err("AZURE_TENANT_ID and AZURE_CLIENT_ID are set but nothing proves the application: set AZURE_CLIENT_SECRET or AZURE_FEDERATED_TOKEN_FILE, or run in a GitHub Actions job with `permissions: id-token: write`".into());
    };
    Ok(AzureSource {
        tenant,
        client_id,
        proof,
        authority: get("AZURE_AUTHORITY_HOST").unwrap_or_else(|| AUTHORITY.into()),
        scope: get("AZURE_TOKEN_SCOPE").unwrap_or_else(|| scope.into()),
    })
}

impl super::bearer::TokenSource for AzureSource {
    fn fetch<'a>(
        &'a self,
        secrets: &'a SecretSink,
    ) -> futures_util::future::BoxFuture<'a, Result<AccessToken, Failure>> {
        Box::pin(self.token(secrets))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::cloud::env_of;

    #[test]
    fn the_chain_takes_a_secret_then_a_token_file() {
        let none = SecretSink::none();
        let found = find_source(
            &env_of(&[
                ("AZURE_TENANT_ID", "t1"),
                ("AZURE_CLIENT_ID", "c1"),
                ("AZURE_CLIENT_SECRET", "s"),
                ("AZURE_FEDERATED_TOKEN_FILE", "/f"),
            ]),
            FOUNDRY_SCOPE,
            &none,
        )
        .unwrap();
        assert!(matches!(found.proof, Proof::Secret(_)));
        assert_eq!(
            (found.authority.as_str(), found.scope.as_str()),
            (AUTHORITY, FOUNDRY_SCOPE)
        );
        let found = find_source(
            &env_of(&[
                ("AZURE_TENANT_ID", "t1"),
                ("AZURE_CLIENT_ID", "c1"),
                ("AZURE_FEDERATED_TOKEN_FILE", "/f"),
                ("AZURE_AUTHORITY_HOST", "http://127.0.0.1:1"),
                ("AZURE_TOKEN_SCOPE", COGNITIVE_SCOPE),
            ]),
            FOUNDRY_SCOPE,
            &none,
        )
        .unwrap();
        assert!(matches!(found.proof, Proof::TokenFile(_)));
        assert_eq!(found.scope, COGNITIVE_SCOPE);
        let err = find_source(
            &env_of(&[("AZURE_CLIENT_ID", "c1")]),
            COGNITIVE_SCOPE,
            &none,
        )
        .unwrap_err();
        assert!(err.contains("no Microsoft Entra credentials"), "{err}");
        let err = find_source(
            &env_of(&[
                ("AZURE_TENANT_ID", "../x"),
                ("AZURE_CLIENT_ID", "c1"),
                ("AZURE_CLIENT_SECRET", "s"),
            ]),
            COGNITIVE_SCOPE,
            &none,
        )
        .unwrap_err();
        assert!(err.contains("not a tenant id"), "{err}");
    }
}
