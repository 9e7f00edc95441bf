//! GitHub's objects as its REST API answers with them and its webhooks carry them: users,
//! repositories, issues, pull requests, comments and reviews, each with every field GitHub
//! sends (those both descriptions require, and the ones only one of them does), realistic
//! values, and the fakes' own numbers. The fake forge answers with them and the GitHub tests
//! build their event payloads from them, so tollgate reads what GitHub really sends rather
//! than the few fields it uses. `octokit.rs` holds both to GitHub's descriptions.

use serde_json::{Value, json};

const API: &str = "https://api.github.com";
const WEB: &str = "https://github.com";
/// A fixed moment, so objects are the same from run to run.
pub const AT: &str = "2026-03-02T09:15:00Z";

/// A stable number for a name: an id GitHub would give it.
pub fn id_of(name: &str) -> u64 {
    name.bytes().fold(1_469_598_103u64, |hash, byte| {
        (hash ^ u64::from(byte)).wrapping_mul(1_099_511_628_211)
    }) % 900_000_000
        + 100_000
}

/// A 40-digit commit hash made from `seed`.
pub fn sha(seed: &str) -> String {
    let mut out = String::new();
    let mut state = id_of(seed);
    while out.len() < 40 {
        state = state
            .wrapping_mul(6_364_136_223_846_793_005)
            .wrapping_add(1_442_695_040_888_963_407);
        out.push_str(&format!("{:016x}", state));
    }
    out.truncate(40);
    out
}

/// A node id in GitHub's form (`U_kgDO…`), from the kind's prefix and the id.
fn node_id(prefix: &str, id: u64) -> String {
    format!("{prefix}_kwDO{id:08X}")
}

/// A user or bot (`kind`: `User`, `Bot`, `Organization`), as `simple-user` describes one.
pub fn user(login: &str, kind: &str) -> Value {
    let id = id_of(login);
    let path = login.replace('[', "%5B").replace(']', "%5D");
    json!({
        "login": login,
        "id": id,
        "node_id": node_id(if kind == "Bot" { "BOT" } else { "U" }, id),
        "avatar_url": format!("https://avatars.githubusercontent.com/u/{id}?v=4"),
        "gravatar_id": "",
        "url": format!("{API}/users/{path}"),
        "html_url": format!("{WEB}/{path}"),
        "followers_url": format!("{API}/users/{path}/followers"),
        "following_url": format!("{API}/users/{path}/following{{/other_user}}"),
        "gists_url": format!("{API}/users/{path}/gists{{/gist_id}}"),
        "starred_url": format!("{API}/users/{path}/starred{{/owner}}{{/repo}}"),
        "subscriptions_url": format!("{API}/users/{path}/subscriptions"),
        "organizations_url": format!("{API}/users/{path}/orgs"),
        "repos_url": format!("{API}/users/{path}/repos"),
        "events_url": format!("{API}/users/{path}/events{{/privacy}}"),
        "received_events_url": format!("{API}/users/{path}/received_events"),
        "type": kind,
        "user_view_type": "public",
        "site_admin": false,
    })
}

/// A repository (`owner/name`), with every field the REST `repository` and the webhooks'
/// `repository-webhooks` and pull request `repo` require; `fork` for a fork's.
pub fn repository(full_name: &str, fork: bool) -> Value {
    let (owner, name) = full_name.split_once('/').unwrap_or((full_name, full_name));
    let id = id_of(full_name);
    let url = format!("{API}/repos/{full_name}");
    let kind = if owner == "acme" {
        "Organization"
    } else {
        "User"
    };
    let mut repository = json!({
        "id": id,
        "node_id": node_id("R", id),
        "name": name,
        "full_name": full_name,
        "private": false,
        "owner": user(owner, kind),
        "html_url": format!("{WEB}/{full_name}"),
        "description": "Widgets, and the tools that make them.",
        "fork": fork,
        "url": url,
        "created_at": "2025-11-20T14:02:11Z",
        "updated_at": AT,
        "pushed_at": AT,
        "git_url": format!("git://github.com/{full_name}.git"),
        "ssh_url": format!("git@github.com:{full_name}.git"),
        "clone_url": format!("{WEB}/{full_name}.git"),
        "svn_url": format!("{WEB}/{full_name}"),
        "homepage": null,
        "size": 1184,
        "stargazers_count": 42,
        "watchers_count": 42,
        "language": "Rust",
        "has_issues": true,
        "has_projects": true,
        "has_downloads": true,
        "has_wiki": false,
        "has_pages": false,
        "has_discussions": false,
        "forks_count": 3,
        "mirror_url": null,
        "archived": false,
        "disabled": false,
        "open_issues_count": 7,
        "license": {
            "key": "mit",
            "name": "MIT License",
            "spdx_id": "MIT",
            "url": format!("{API}/licenses/mit"),
            "node_id": "MDc6TGljZW5zZTEz",
        },
        "allow_forking": true,
        "is_template": false,
        "web_commit_signoff_required": false,
        "topics": [],
        "visibility": "public",
        "forks": 3,
        "open_issues": 7,
        "watchers": 42,
        "default_branch": "main",
    });
    // The API's links, each the repository's URL and a suffix (URI templates where GitHub
    // sends them).
    for (key, suffix) in [
        ("forks_url", "/forks"),
        ("keys_url", "/keys{/key_id}"),
        ("collaborators_url", "/collaborators{/collaborator}"),
        ("teams_url", "/teams"),
        ("hooks_url", "/hooks"),
        ("issue_events_url", "/issues/events{/number}"),
        ("events_url", "/events"),
        ("assignees_url", "/assignees{/user}"),
        ("branches_url", "/branches{/branch}"),
        ("tags_url", "/tags"),
        ("blobs_url", "/git/blobs{/sha}"),
        ("git_tags_url", "/git/tags{/sha}"),
        ("git_refs_url", "/git/refs{/sha}"),
        ("trees_url", "/git/trees{/sha}"),
        ("statuses_url", "/statuses/{sha}"),
        ("languages_url", "/languages"),
        ("stargazers_url", "/stargazers"),
        ("contributors_url", "/contributors"),
        ("subscribers_url", "/subscribers"),
        ("subscription_url", "/subscription"),
        ("commits_url", "/commits{/sha}"),
        ("git_commits_url", "/git/commits{/sha}"),
        ("comments_url", "/comments{/number}"),
        ("issue_comment_url", "/issues/comments{/number}"),
        ("contents_url", "/contents/{+path}"),
        ("compare_url", "/compare/{base}...{head}"),
        ("merges_url", "/merges"),
        ("archive_url", "/{archive_format}{/ref}"),
        ("downloads_url", "/downloads"),
        ("issues_url", "/issues{/number}"),
        ("pulls_url", "/pulls{/number}"),
        ("milestones_url", "/milestones{/number}"),
        (
            "notifications_url",
            "/notifications{?since,all,participating}",
        ),
        ("labels_url", "/labels{/name}"),
        ("releases_url", "/releases{/id}"),
        ("deployments_url", "/deployments"),
    ] {
        repository[key] = json!(format!("{url}{suffix}"));
    }
    repository
}

/// A label as issues and pull requests carry it.
pub fn label(repo: &str, name: &str) -> Value {
    let id = id_of(&format!("{repo}#{name}"));
    json!({
        "id": id,
        "node_id": node_id("LA", id),
        "url": format!("{API}/repos/{repo}/labels/{name}"),
        "name": name,
        "description": null,
        "color": "d73a4a",
        "default": false,
    })
}

fn reactions(url: &str) -> Value {
    json!({
        "url": format!("{url}/reactions"),
        "total_count": 0, "+1": 0, "-1": 0, "laugh": 0, "confused": 0, "heart": 0,
        "hooray": 0, "eyes": 0, "rocket": 0,
    })
}

/// Issue (or pull request, `on_pr`) `number` of `repo` as the issue webhooks carry it.
pub fn issue(
    repo: &str,
    number: u64,
    title: &str,
    body: &str,
    author: &Value,
    on_pr: bool,
) -> Value {
    let url = format!("{API}/repos/{repo}/issues/{number}");
    let id = id_of(&format!("{repo}#{number}"));
    let mut issue = json!({
        "url": url,
        "repository_url": format!("{API}/repos/{repo}"),
        "labels_url": format!("{url}/labels{{/name}}"),
        "comments_url": format!("{url}/comments"),
        "events_url": format!("{url}/events"),
        "html_url": format!("{WEB}/{repo}/{}/{number}", if on_pr { "pull" } else { "issues" }),
        "id": id,
        "node_id": node_id(if on_pr { "PR" } else { "I" }, id),
        "number": number,
        "title": title,
        "user": author,
        "labels": [],
        "state": "open",
        "locked": false,
        "assignee": null,
        "assignees": [],
        "milestone": null,
        "comments": 1,
        "created_at": "2026-03-01T08:00:00Z",
        "updated_at": AT,
        "closed_at": null,
        "author_association": "MEMBER",
        "active_lock_reason": null,
        "body": body,
        "reactions": reactions(&url),
        "timeline_url": format!("{url}/timeline"),
        "performed_via_github_app": null,
        "state_reason": null,
    });
    if on_pr {
        issue["draft"] = json!(false);
        issue["pull_request"] = json!({
            "url": format!("{API}/repos/{repo}/pulls/{number}"),
            "html_url": format!("{WEB}/{repo}/pull/{number}"),
            "diff_url": format!("{WEB}/{repo}/pull/{number}.diff"),
            "patch_url": format!("{WEB}/{repo}/pull/{number}.patch"),
            "merged_at": null,
        });
    }
    issue
}

/// One side of a pull request: `repo`'s branch `branch` at `commit`.
fn pull_end(repo: &str, branch: &str, commit: &str, fork: bool) -> Value {
    let owner = repo.split('/').next().unwrap_or(repo);
    let kind = if owner == "acme" {
        "Organization"
    } else {
        "User"
    };
    json!({
        "label": format!("{owner}:{branch}"),
        "ref": branch,
        "sha": commit,
        "user": user(owner, kind),
        "repo": repository(repo, fork),
    })
}

/// What a pull request is made of: its repository, number, the branches it joins.
pub struct PullSpec<'a> {
    pub repo: &'a str,
    pub number: u64,
    /// The head's repository (`repo`, or a fork's).
    pub head_repo: &'a str,
    pub head: &'a str,
    pub base: &'a str,
    pub title: &'a str,
    pub body: &'a str,
    pub author: &'a str,
}

/// A pull request with every field the REST `pull-request` (and `pull-request-simple`) and
/// the pull request webhooks require.
pub fn pull_request(spec: &PullSpec<'_>) -> Value {
    let PullSpec { repo, number, .. } = *spec;
    let url = format!("{API}/repos/{repo}/pulls/{number}");
    let issue_url = format!("{API}/repos/{repo}/issues/{number}");
    let html = format!("{WEB}/{repo}/pull/{number}");
    let head_commit = sha(&format!("{repo}#{number} head"));
    let id = id_of(&format!("{repo}#{number}"));
    let link = |href: String| json!({"href": href});
    json!({
        "url": url,
        "id": id,
        "node_id": node_id("PR", id),
        "html_url": html,
        "diff_url": format!("{html}.diff"),
        "patch_url": format!("{html}.patch"),
        "issue_url": issue_url,
        "commits_url": format!("{url}/commits"),
        "review_comments_url": format!("{url}/comments"),
        "review_comment_url": format!("{API}/repos/{repo}/pulls/comments{{/number}}"),
        "comments_url": format!("{issue_url}/comments"),
        "statuses_url": format!("{API}/repos/{repo}/statuses/{head_commit}"),
        "number": number,
        "state": "open",
        "locked": false,
        "title": spec.title,
        "user": user(spec.author, if spec.author.ends_with("[bot]") { "Bot" } else { "User" }),
        "body": spec.body,
        "labels": [],
        "milestone": null,
        "active_lock_reason": null,
        "created_at": AT,
        "updated_at": AT,
        "closed_at": null,
        "merged_at": null,
        "merge_commit_sha": null,
        "assignee": null,
        "assignees": [],
        "requested_reviewers": [],
        "requested_teams": [],
        "head": pull_end(spec.head_repo, spec.head, &head_commit, spec.head_repo != repo),
        "base": pull_end(repo, spec.base, &sha(&format!("{repo} {}", spec.base)), false),
        "_links": {
            "self": link(url.clone()),
            "html": link(html.clone()),
            "issue": link(issue_url.clone()),
            "comments": link(format!("{issue_url}/comments")),
            "review_comments": link(format!("{url}/comments")),
            "review_comment": link(format!("{API}/repos/{repo}/pulls/comments{{/number}}")),
            "commits": link(format!("{url}/commits")),
            "statuses": link(format!("{API}/repos/{repo}/statuses/{head_commit}")),
        },
        "author_association": "MEMBER",
        "auto_merge": null,
        "draft": false,
        "merged": false,
        "mergeable": null,
        "rebaseable": null,
        "mergeable_state": "unknown",
        "merged_by": null,
        "comments": 0,
        "review_comments": 0,
        "maintainer_can_modify": false,
        "commits": 1,
        "additions": 4,
        "deletions": 1,
        "changed_files": 1,
    })
}

/// The commit a pull request's head is at, as [`pull_request`] makes it.
pub fn head_commit(repo: &str, number: u64) -> String {
    sha(&format!("{repo}#{number} head"))
}

/// Issue comment `id` on `repo`'s issue `number`.
pub fn issue_comment(repo: &str, number: u64, id: u64, body: &str, author: &Value) -> Value {
    let on_html = format!("{WEB}/{repo}/issues/{number}#issuecomment-{id}");
    let url = format!("{API}/repos/{repo}/issues/comments/{id}");
    json!({
        "id": id,
        "node_id": node_id("IC", id),
        "url": url,
        "html_url": on_html,
        "body": body,
        "user": author,
        "created_at": AT,
        "updated_at": AT,
        "issue_url": format!("{API}/repos/{repo}/issues/{number}"),
        "author_association": "MEMBER",
        "performed_via_github_app": null,
        "reactions": reactions(&url),
    })
}

/// Review `id` of `repo`'s pull request `number`, at `commit`.
pub fn review(
    repo: &str,
    number: u64,
    id: u64,
    body: &str,
    state: &str,
    author: &Value,
    commit: &str,
) -> Value {
    let html = format!("{WEB}/{repo}/pull/{number}#pullrequestreview-{id}");
    let pull = format!("{API}/repos/{repo}/pulls/{number}");
    json!({
        "id": id,
        "node_id": node_id("PRR", id),
        "user": author,
        "body": body,
        "state": state,
        "html_url": html,
        "pull_request_url": pull,
        "_links": {"html": {"href": html}, "pull_request": {"href": pull}},
        "submitted_at": AT,
        "commit_id": commit,
        "author_association": "MEMBER",
    })
}

/// Where on a pull request a review comment sits.
pub struct CommentSpot<'a> {
    pub path: &'a str,
    pub line: u64,
    pub side: &'a str,
}

/// Review comment `id` (of review `review_id`) on `repo`'s pull request `number`.
pub fn review_comment(
    repo: &str,
    number: u64,
    id: u64,
    review_id: u64,
    spot: &CommentSpot<'_>,
    body: &str,
    author: &Value,
) -> Value {
    let url = format!("{API}/repos/{repo}/pulls/comments/{id}");
    let html = format!("{WEB}/{repo}/pull/{number}#discussion_r{id}");
    let pull = format!("{API}/repos/{repo}/pulls/{number}");
    let commit = head_commit(repo, number);
    json!({
        "url": url,
        "pull_request_review_id": review_id,
        "id": id,
        "node_id": node_id("PRRC", id),
        "diff_hunk": format!("@@ -1,3 +1,4 @@\n context\n+{}", spot.path),
        "path": spot.path,
        "position": 1,
        "original_position": 1,
        "commit_id": commit,
        "original_commit_id": commit,
        "user": author,
        "body": body,
        "created_at": AT,
        "updated_at": AT,
        "html_url": html,
        "pull_request_url": pull,
        "author_association": "MEMBER",
        "_links": {"self": {"href": url}, "html": {"href": html}, "pull_request": {"href": pull}},
        "start_line": null,
        "original_start_line": null,
        "start_side": null,
        "line": spot.line,
        "original_line": spot.line,
        "side": spot.side,
        "subject_type": "line",
        "reactions": reactions(&url),
    })
}

/// The collaborator-permission answer for `login` (`permission`: `admin`, `write`, `read`,
/// `none`…), as `repository-collaborator-permission` describes it.
pub fn collaborator_permission(login: &str, permission: &str) -> Value {
    let mut collaborator = user(login, "User");
    // GitHub names the role as the permission for the built-in roles.
    let role = permission;
    collaborator["role_name"] = json!(role);
    collaborator["permissions"] = json!({
        "admin": permission == "admin",
        "maintain": matches!(permission, "admin" | "maintain"),
        "push": matches!(permission, "admin" | "maintain" | "write"),
        "triage": matches!(permission, "admin" | "maintain" | "write" | "triage"),
        "pull": permission != "none",
    });
    json!({"permission": permission, "role_name": role, "user": collaborator})
}

/// GitHub's answer to an error: its message, the page that documents it and the status.
pub fn error(message: &str, status: u16) -> Value {
    json!({
        "message": message,
        "documentation_url": "https://docs.github.com/rest",
        "status": status.to_string(),
    })
}

/// One changed file of `repo`'s pull request `number`, with its `patch` (GitHub's diff of
/// it, from the first `@@`).
pub fn diff_entry(repo: &str, number: u64, filename: &str, patch: &str) -> Value {
    let commit = head_commit(repo, number);
    let added = patch.lines().filter(|line| line.starts_with('+')).count();
    let removed = patch.lines().filter(|line| line.starts_with('-')).count();
    json!({
        "sha": sha(&format!("{repo}#{number} {filename}")),
        "filename": filename,
        "status": "modified",
        "additions": added,
        "deletions": removed,
        "changes": added + removed,
        "blob_url": format!("{WEB}/{repo}/blob/{commit}/{filename}"),
        "raw_url": format!("{WEB}/{repo}/raw/{commit}/{filename}"),
        "contents_url": format!("{API}/repos/{repo}/contents/{filename}?ref={commit}"),
        "patch": patch,
    })
}
