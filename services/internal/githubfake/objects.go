package githubfake

import (
	"fmt"
	"strings"
	"time"
)

// The JSON objects the fake answers with, field by field as GitHub's REST
// API sends them (the description's required fields and their types).

const apiHost = "https://api.github.com"

func ts(t time.Time) string { return t.UTC().Format(time.RFC3339) }

func tsOrNull(t time.Time) any {
	if t.IsZero() {
		return nil
	}
	return ts(t)
}

func user(login string, id int64) map[string]any {
	u := "https://api.github.com/users/" + login
	return map[string]any{
		"login": login, "id": id, "node_id": fmt.Sprintf("U_%d", id), "avatar_url": "https://avatars.githubusercontent.com/u/" + fmt.Sprint(id),
		"gravatar_id": "", "url": u, "html_url": "https://github.com/" + login, "followers_url": u + "/followers",
		"following_url": u + "/following{/other_user}", "gists_url": u + "/gists{/gist_id}", "starred_url": u + "/starred{/owner}{/repo}",
		"subscriptions_url": u + "/subscriptions", "organizations_url": u + "/orgs", "repos_url": u + "/repos", "events_url": u + "/events{/privacy}",
		"received_events_url": u + "/received_events", "type": "User", "site_admin": false,
	}
}

func repository(full string, id int64) map[string]any {
	owner, name, _ := strings.Cut(full, "/")
	u := apiHost + "/repos/" + full
	r := map[string]any{
		"id": id, "node_id": fmt.Sprintf("R_%d", id), "name": name, "full_name": full, "owner": user(owner, id+1000), "private": true,
		"html_url": "https://github.com/" + full, "description": nil, "fork": false, "url": u,
		"archive_url": u + "/{archive_format}{/ref}", "assignees_url": u + "/assignees{/user}", "blobs_url": u + "/git/blobs{/sha}",
		"branches_url": u + "/branches{/branch}", "collaborators_url": u + "/collaborators{/collaborator}", "comments_url": u + "/comments{/number}",
		"commits_url": u + "/commits{/sha}", "compare_url": u + "/compare/{base}...{head}", "contents_url": u + "/contents/{+path}",
		"contributors_url": u + "/contributors", "deployments_url": u + "/deployments", "downloads_url": u + "/downloads", "events_url": u + "/events",
		"forks_url": u + "/forks", "git_commits_url": u + "/git/commits{/sha}", "git_refs_url": u + "/git/refs{/sha}", "git_tags_url": u + "/git/tags{/sha}",
		"hooks_url": u + "/hooks", "issue_comment_url": u + "/issues/comments{/number}", "issue_events_url": u + "/issues/events{/number}",
		"issues_url": u + "/issues{/number}", "keys_url": u + "/keys{/key_id}", "labels_url": u + "/labels{/name}", "languages_url": u + "/languages",
		"merges_url": u + "/merges", "milestones_url": u + "/milestones{/number}", "notifications_url": u + "/notifications{?since,all,participating}",
		"pulls_url": u + "/pulls{/number}", "releases_url": u + "/releases{/id}", "stargazers_url": u + "/stargazers", "statuses_url": u + "/statuses/{sha}",
		"subscribers_url": u + "/subscribers", "subscription_url": u + "/subscription", "tags_url": u + "/tags", "teams_url": u + "/teams",
		"trees_url": u + "/git/trees{/sha}",
	}
	return r
}

const headSHA = "7638417db6d59f3c431d3e1f261cc637155684cd"

// runJSON is a workflow-run object.
func (f *Fake) runJSON(r *run, now time.Time) map[string]any {
	wf := r.workflow
	u := fmt.Sprintf("%s/repos/%s/actions/runs/%d", apiHost, wf.Repository, r.id)
	repo := repository(wf.Repository, wf.repoID)
	status, conclusion := r.state(now)
	return map[string]any{
		"id": r.id, "name": wf.Name, "node_id": fmt.Sprintf("WFR_%d", r.id), "check_suite_id": r.id + 5000,
		"check_suite_node_id": fmt.Sprintf("CS_%d", r.id+5000), "head_branch": r.ref, "head_sha": headSHA,
		"path": ".github/workflows/" + wf.File, "run_number": r.number, "run_attempt": 1, "event": "workflow_dispatch",
		"display_title": r.title, "status": status, "conclusion": nullString(conclusion), "workflow_id": wf.id,
		"url": u, "html_url": fmt.Sprintf("https://github.com/%s/actions/runs/%d", wf.Repository, r.id), "pull_requests": []any{},
		"created_at": ts(r.created), "updated_at": ts(r.updated(now)), "actor": user("no8s-bot", 7), "triggering_actor": user("no8s-bot", 7),
		"run_started_at": ts(r.created), "jobs_url": u + "/jobs", "logs_url": u + "/logs", "check_suite_url": fmt.Sprintf("%s/repos/%s/check-suites/%d", apiHost, wf.Repository, r.id+5000),
		"artifacts_url": u + "/artifacts", "cancel_url": u + "/cancel", "rerun_url": u + "/rerun", "previous_attempt_url": nil,
		"workflow_url": fmt.Sprintf("%s/repos/%s/actions/workflows/%d", apiHost, wf.Repository, wf.id),
		"head_commit": map[string]any{"id": headSHA, "tree_id": headSHA, "message": "deploy", "timestamp": ts(r.created),
			"author": map[string]any{"name": "Mona", "email": "mona@example.com"}, "committer": map[string]any{"name": "Mona", "email": "mona@example.com"}},
		"repository": repo, "head_repository": repo,
	}
}

// jobJSON is a job object: the run's i-th job.
func (f *Fake) jobJSON(r *run, i int, now time.Time) map[string]any {
	wf := r.workflow
	id := r.id*100 + int64(i)
	status, conclusion := r.state(now)
	started, completed := r.started(), r.completed()
	if status == "queued" {
		started = r.created
	}
	if status != "completed" {
		completed = time.Time{}
	}
	return map[string]any{
		"id": id, "run_id": r.id, "run_url": fmt.Sprintf("%s/repos/%s/actions/runs/%d", apiHost, wf.Repository, r.id), "run_attempt": 1,
		"node_id": fmt.Sprintf("J_%d", id), "head_sha": headSHA, "url": fmt.Sprintf("%s/repos/%s/actions/jobs/%d", apiHost, wf.Repository, id),
		"html_url": fmt.Sprintf("https://github.com/%s/actions/runs/%d/job/%d", wf.Repository, r.id, id), "status": status,
		"conclusion": nullString(conclusion), "created_at": ts(r.created), "started_at": ts(started), "completed_at": tsOrNull(completed),
		"name": wf.Jobs[i], "steps": []any{}, "check_run_url": fmt.Sprintf("%s/repos/%s/check-runs/%d", apiHost, wf.Repository, id),
		"labels": []any{"ubuntu-latest"}, "runner_id": 1, "runner_name": "GitHub Actions 1", "runner_group_id": 2,
		"runner_group_name": "GitHub Actions", "workflow_name": wf.Name, "head_branch": r.ref,
	}
}

// artifactJSON is an artifact object.
func (f *Fake) artifactJSON(r *run, i int) map[string]any {
	wf := r.workflow
	a := wf.Artifacts[i]
	id := r.id*100 + int64(i)
	u := fmt.Sprintf("%s/repos/%s/actions/artifacts/%d", apiHost, wf.Repository, id)
	done := r.completed()
	return map[string]any{
		"id": id, "node_id": fmt.Sprintf("A_%d", id), "name": a.Name, "size_in_bytes": a.SizeInBytes, "url": u,
		"archive_download_url": u + "/zip", "expired": false, "created_at": ts(done), "expires_at": ts(done.Add(90 * 24 * time.Hour)),
		"updated_at": ts(done), "digest": nil,
		"workflow_run": map[string]any{"id": r.id, "repository_id": wf.repoID, "head_repository_id": wf.repoID, "head_branch": r.ref, "head_sha": headSHA},
	}
}

func nullString(s string) any {
	if s == "" {
		return nil
	}
	return s
}
