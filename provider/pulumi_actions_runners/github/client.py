"""GitHub's self-hosted runner REST API, over ``requests``.

Transient failures (connection errors, timeouts, 5xx) are retried by urllib3's ``Retry`` with backoff. Rate
limits are a `GitHubBudget` shared by every client of the process with the same GitHub and credential: it
paces requests to GitHub's documented limits and, when GitHub answers with a rate limit anyway
(``retry-after`` first, then an exhausted primary budget until ``x-ratelimit-reset``, else a minute doubling
each time), pauses every caller once; the refused request is then sent again. Every wait is bounded by
``max_rate_limit_wait`` and logged once per pause.
"""

from __future__ import annotations

import enum
import logging
from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass, field
from typing import Any

import requests
from requests.adapters import HTTPAdapter
from urllib3.util.retry import Retry

from ..redaction import remember
from .app import InstallationTokens
from .budget import MAX_IN_FLIGHT, GitHubBudget, RateLimitWaitTooLong, shared_budget
from .url import GitHubTarget

log = logging.getLogger(__name__)

API_VERSION = "2022-11-28"
USER_AGENT = "pulumi-actions-runners"
PAGE_SIZE = 100
RUNNER_RELEASES_PATH = "/repos/actions/runner/releases"


class GitHubError(Exception):
    """A GitHub answer that is neither success nor something we wait out."""

    def __init__(self, method: str, path: str, status: int, message: str) -> None:
        outcome = f"answered {status}" if status else "was not sent"
        super().__init__(f"GitHub {method} {path} {outcome}: {message}")
        self.status = status  # 0 if the request was never sent


class GitHubRateLimited(GitHubError):
    """The rate limit would need a longer wait than this client may spend."""


class RunnerNameTaken(GitHubError):
    """generate-jitconfig's 409: a runner of that name is registered in the scope already (possibly by an
    earlier attempt of the same call whose answer was lost)."""


class RunnerGroupNotFound(Exception):
    """The scope has no runner group of the name asked for; the message lists those it has."""

    def __init__(self, name: str, scope: str, existing: list[str]) -> None:
        super().__init__(
            f"runner_group {name!r} is not a runner group of {scope}, which has: {', '.join(existing)}. Use one of "
            "them, or create the group first (the organization's or enterprise's settings, Actions, Runner groups)"
        )


DEFAULT_RUNNER_GROUP_ID = 1  # every scope's "Default" group


class RemoveOutcome(enum.Enum):
    """What RemoveRunner said; BUSY is GitHub's 422 for a runner that is running a job."""

    REMOVED = "removed"
    NOT_FOUND = "not_found"
    BUSY = "busy"


@dataclass(frozen=True)
class RegistrationGrant:
    token: str = field(repr=False)
    expires_at: str


@dataclass(frozen=True)
class JitConfig:
    """A just-in-time runner's registration and the config with which ``./run.sh --jitconfig`` connects it
    once. The config is a credential: it never appears in the repr."""

    runner_id: int
    encoded_jit_config: str = field(repr=False)


class GitHubClient:
    """Calls for one runner scope (repository, organization or enterprise) with one credential."""

    def __init__(
        self,
        target: GitHubTarget,
        credential: str | InstallationTokens,
        *,
        timeout: float = 10.0,
        retries: int = 4,
        max_rate_limit_wait: float = 900.0,
        budget: GitHubBudget | None = None,
    ) -> None:
        """``credential``: a token, or a GitHub App installation's tokens (renewed as they near their expiry, or
        when GitHub refuses one). ``budget`` defaults to the process's one budget for this GitHub and credential
        (`shared_budget`: an App's is its installation's); ``max_rate_limit_wait`` bounds what one call may wait
        for it, rate-limit pauses included."""
        remember(credential)
        self.target = target
        self._credential = credential
        self._timeout = timeout
        self._max_rate_limit_wait = max_rate_limit_wait
        budget_key = credential if isinstance(credential, str) else credential.budget_key
        self._budget = budget if budget is not None else shared_budget(target.api_url, budget_key)
        retry = Retry(
            total=retries,
            backoff_factor=0.5,
            status_forcelist=(500, 502, 503, 504),
            allowed_methods=None,  # every call here is safe to repeat (a second token, a second DELETE)
            respect_retry_after_header=False,  # rate limits and their retry-after belong to the shared budget
            raise_on_status=False,
        )
        self._session = requests.Session()
        # As many pooled connections as requests the budget lets be in flight (urllib3 keeps 10 otherwise).
        adapter = HTTPAdapter(max_retries=retry, pool_maxsize=MAX_IN_FLIGHT)
        self._session.mount("http://", adapter)
        self._session.mount("https://", adapter)
        self._session.headers.update(
            {
                "Accept": "application/vnd.github+json",
                "X-GitHub-Api-Version": API_VERSION,
                "User-Agent": USER_AGENT,
            }
        )

    def __repr__(self) -> str:
        return f"GitHubClient({self.target.url!r})"  # never the credential

    def close(self) -> None:
        self._session.close()

    def __enter__(self) -> GitHubClient:
        return self

    def __exit__(self, *_exc: object) -> None:
        self.close()

    # -- runner calls -----------------------------------------------------------------------------------

    def create_registration_token(self) -> RegistrationGrant:
        body = self._expect(201, "POST", f"{self.target.runners_path}/registration-token").json()
        remember(body["token"])  # every credential GitHub hands out is scrubbed from every message from now on
        return RegistrationGrant(token=body["token"], expires_at=body["expires_at"])

    def generate_jitconfig(
        self,
        name: str,
        labels: Sequence[str],
        *,
        runner_group_id: int = DEFAULT_RUNNER_GROUP_ID,
        work_folder: str = "_work",
    ) -> JitConfig:
        """Register a just-in-time (ephemeral, offline until it connects) runner and get its config.
        `RunnerNameTaken` if the name is registered already, which includes a retry after a lost answer."""
        path = f"{self.target.runners_path}/generate-jitconfig"
        body = {"name": name, "runner_group_id": runner_group_id, "labels": list(labels), "work_folder": work_folder}
        response = self._request("POST", path, json=body)
        if response.status_code == 409:
            raise RunnerNameTaken("POST", path, 409, _message(response))
        answer = self._check(201, response, "POST", path).json()
        remember(answer["encoded_jit_config"])
        return JitConfig(runner_id=int(answer["runner"]["id"]), encoded_jit_config=answer["encoded_jit_config"])

    def list_runners(self, name: str | None = None) -> Iterator[dict[str, Any]]:
        """All runners of the scope (optionally of one name), following ``Link: rel="next"``."""
        params: dict[str, Any] | None = {"per_page": PAGE_SIZE, **({"name": name} if name else {})}
        url = self.target.api_url + self.target.runners_path
        while url:
            response = self._expect(200, "GET", url, params=params)
            yield from response.json()["runners"]
            url, params = response.links.get("next", {}).get("url"), None

    def runner_groups(self) -> dict[str, int]:
        """An organization's or enterprise's runner groups, all pages: id by name."""
        scope_path = self.target.runners_path.removesuffix("/runners")
        url = f"{self.target.api_url}{scope_path}/runner-groups"
        params: dict[str, Any] | None = {"per_page": PAGE_SIZE}
        groups: dict[str, int] = {}
        while url:
            response = self._expect(200, "GET", url, params=params)
            groups |= {group["name"]: int(group["id"]) for group in response.json()["runner_groups"]}
            url, params = response.links.get("next", {}).get("url"), None
        return groups

    def runners_page(self, page: int, per_page: int = PAGE_SIZE) -> tuple[int, list[dict[str, Any]]]:
        """One page of the scope's runners, in GitHub's order (by id, it appears; registrations.py checks), and
        how many the scope has in all: a walk from the last page backwards (see registrations.py) needs both."""
        params = {"per_page": per_page, "page": page}
        body = self._expect(200, "GET", self.target.runners_path, params=params).json()
        return int(body["total_count"]), body["runners"]

    def find_runner(self, name: str) -> dict[str, Any] | None:
        """The registration of this name, asked for by name; an online one first, then the newest."""
        return preferred(self.list_runners(name), name)

    def get_runner(self, runner_id: int) -> dict[str, Any] | None:
        response = self._request("GET", f"{self.target.runners_path}/{runner_id}")
        if response.status_code == 404:
            return None
        return self._check(200, response, "GET", f"{self.target.runners_path}/{runner_id}").json()

    def set_labels(self, runner_id: int, labels: Sequence[str]) -> bool:
        """Set a registered runner's custom labels (its read-only ones stay); False if GitHub refuses (the runner
        is gone, or it will not relabel this one)."""
        path = f"{self.target.runners_path}/{runner_id}/labels"
        response = self._request("PUT", path, json={"labels": list(labels)})
        if response.status_code in (404, 422):
            log.info("GitHub refused to relabel runner %s: %s %s", runner_id, response.status_code, _message(response))
            return False
        self._check(200, response, "PUT", path)
        return True

    def remove_runner(self, runner_id: int) -> RemoveOutcome:
        """RemoveRunner: the one race-free busy check, since GitHub refuses it while a job runs."""
        path = f"{self.target.runners_path}/{runner_id}"
        response = self._request("DELETE", path)
        if response.status_code == 204:
            return RemoveOutcome.REMOVED
        if response.status_code == 404:
            return RemoveOutcome.NOT_FOUND
        if response.status_code == 422 and "still running a job" in _message(response):
            return RemoveOutcome.BUSY
        raise GitHubError("DELETE", path, response.status_code, _message(response))

    def runner_releases(self) -> list[dict[str, Any]]:
        """actions/runner's releases, newest first: the first page (100) is months of them. On github.com the
        list is public; GitHub Enterprise Server may have no such repository (GitHubError 404)."""
        return self._expect(200, "GET", RUNNER_RELEASES_PATH, params={"per_page": PAGE_SIZE}).json()

    # -- transport --------------------------------------------------------------------------------------

    def _expect(self, status: int, method: str, path_or_url: str, **kwargs: Any) -> requests.Response:
        return self._check(status, self._request(method, path_or_url, **kwargs), method, path_or_url)

    @staticmethod
    def _check(status: int, response: requests.Response, method: str, path: str) -> requests.Response:
        if response.status_code != status:
            raise GitHubError(method, path, response.status_code, _message(response))
        return response

    def _request(self, method: str, path_or_url: str, **kwargs: Any) -> requests.Response:
        """Send through the shared budget; a rate-limited answer pauses every caller, then is sent again."""
        url = path_or_url if "://" in path_or_url else self.target.api_url + path_or_url
        path = url.removeprefix(self.target.api_url)
        waited, limited_status, renewed = 0.0, 0, False
        while True:
            try:
                with self._budget.request(method, path, max_wait=self._max_rate_limit_wait - waited) as permit:
                    # Taken once the budget lets the request go: a long rate-limit pause may outlast a token.
                    bearer = self._credential if isinstance(self._credential, str) else self._credential.token()
                    headers = {"Authorization": f"Bearer {bearer}"}
                    response = self._session.request(method, url, timeout=self._timeout, headers=headers, **kwargs)
                    retries = getattr(response.raw, "retries", None)
                    permit.extra_attempts = len(retries.history) if retries is not None else 0
            except RateLimitWaitTooLong as error:
                needed = "an unknown time" if error.needed is None else f"{error.needed:.0f} s"
                raise GitHubRateLimited(
                    method,
                    path,
                    limited_status,
                    f"rate limited ({error.reason}); waiting {needed} more would pass the "
                    f"{self._max_rate_limit_wait:.0f} s this call may wait "
                    f"(already waited {waited + error.waited:.0f} s)",
                ) from None
            waited += permit.waited
            if response.status_code == 401 and not isinstance(self._credential, str) and not renewed:
                self._credential.refused(bearer)  # revoked, or expired early: one new installation token
                renewed = True
                continue
            message = _message(response) if response.status_code in (403, 429) else ""
            if self._budget.observe(response.status_code, response.headers, message, permit=permit) is None:
                return response
            limited_status = response.status_code


def _message(response: requests.Response) -> str:
    try:
        body = response.json()
    except ValueError:
        body = None
    if isinstance(body, dict) and "message" in body:
        return str(body["message"])
    return response.reason or f"HTTP {response.status_code}"


def preferred(runners: Iterable[dict[str, Any] | None], name: str) -> Any:
    """Of the registrations of one name (an old offline one may linger beside a new one): online, then newest."""
    named = [r for r in runners if r is not None and r["name"] == name]
    return max(named, key=lambda r: (r.get("status") == "online", r["id"]), default=None)
