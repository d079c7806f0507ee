// Package githubfake is a local GitHub REST API for tests of the GitHub
// Actions plugin: GitHub is out of reach here, so tests talk to this server
// instead, which speaks GitHub's REST shapes for the operations the plugin
// uses (workflow dispatch, workflow runs, jobs, artifacts): paths, the
// Authorization header, status codes, Link pagination, the x-ratelimit-*
// headers, rate-limit answers (403 with x-ratelimit-remaining 0 and a
// reset, 429 secondary limits with retry-after), 5xx bursts, 401 for a
// wrong token, 404 and 422 as GitHub words them.
//
// Every request it receives and every answer it sends is validated against
// GitHub's published OpenAPI description (the npm package @octokit/openapi
// at the version the Makefile pins, installed by `make github-openapi`), so
// the fake cannot drift from the real shapes: a violation fails the test
// that started the fake. A test that cannot find the description fails too,
// naming the make target.
//
// The package is test support: only tests import it.
package githubfake
