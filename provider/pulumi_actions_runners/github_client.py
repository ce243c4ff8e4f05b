"""GitHub's self-hosted runner REST API, over ``requests``.

Transient failures (connection errors, timeouts, 5xx) are retried by urllib3's ``Retry`` with backoff; rate
limits are waited out here, the way GitHub documents them: ``retry-after`` first, then an exhausted primary
budget until ``x-ratelimit-reset``, else a minute doubling each time. Every wait is bounded and logged.
"""

from __future__ import annotations

import enum
import logging
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from email.utils import parsedate_to_datetime
from typing import Any

import requests
from requests.adapters import HTTPAdapter
from urllib3.util.retry import Retry

from .github_url import GitHubTarget

log = logging.getLogger(__name__)

API_VERSION = "2022-11-28"
USER_AGENT = "pulumi-actions-runners"
PAGE_SIZE = 100


class GitHubError(Exception):
    """A GitHub answer that is neither success nor something we wait out."""

    def __init__(self, method: str, path: str, status: int, message: str) -> None:
        super().__init__(f"GitHub {method} {path} answered {status}: {message}")
        self.status = status


class GitHubRateLimited(GitHubError):
    """The rate limit would need a longer wait than this client may spend."""


class RemoveOutcome(enum.Enum):
    """What RemoveRunner said; BUSY is GitHub's 422 for a runner that is running a job."""

    REMOVED = "removed"
    NOT_FOUND = "not_found"
    BUSY = "busy"


@dataclass(frozen=True)
class RegistrationGrant:
    token: str
    expires_at: str


class GitHubClient:
    """Calls for one runner scope (repository, organization or enterprise) with one credential."""

    def __init__(
        self,
        target: GitHubTarget,
        credential: str,
        *,
        timeout: float = 10.0,
        retries: int = 4,
        max_rate_limit_wait: float = 900.0,
        sleep: Callable[[float], None] = time.sleep,
        now: Callable[[], float] = time.time,
    ) -> None:
        self.target = target
        self._timeout = timeout
        self._max_rate_limit_wait = max_rate_limit_wait
        self._sleep = sleep
        self._now = now
        retry = Retry(
            total=retries,
            backoff_factor=0.5,
            status_forcelist=(500, 502, 503, 504),
            allowed_methods=None,  # every call here is safe to repeat (a second token, a second DELETE)
            respect_retry_after_header=False,  # rate limits and their retry-after are waited out below, bounded
            raise_on_status=False,
        )
        self._session = requests.Session()
        self._session.mount("http://", HTTPAdapter(max_retries=retry))
        self._session.mount("https://", HTTPAdapter(max_retries=retry))
        self._session.headers.update(
            {
                "Accept": "application/vnd.github+json",
                "X-GitHub-Api-Version": API_VERSION,
                "User-Agent": USER_AGENT,
                "Authorization": f"Bearer {credential}",
            }
        )

    def close(self) -> None:
        self._session.close()

    def __enter__(self) -> GitHubClient:
        return self

    def __exit__(self, *_exc: object) -> None:
        self.close()

    # -- runner calls -----------------------------------------------------------------------------------

    def create_registration_token(self) -> RegistrationGrant:
        body = self._expect(201, "POST", f"{self.target.runners_path}/registration-token").json()
        return RegistrationGrant(token=body["token"], expires_at=body["expires_at"])

    def list_runners(self, name: str | None = None) -> Iterator[dict[str, Any]]:
        """All runners of the scope (optionally of one name), following ``Link: rel="next"``."""
        params: dict[str, Any] | None = {"per_page": PAGE_SIZE, **({"name": name} if name else {})}
        url = self.target.api_url + self.target.runners_path
        while url:
            response = self._expect(200, "GET", url, params=params)
            yield from response.json()["runners"]
            url, params = response.links.get("next", {}).get("url"), None

    def find_runner(self, name: str) -> dict[str, Any] | None:
        return next((r for r in self.list_runners(name) if r["name"] == name), None)

    def get_runner(self, runner_id: int) -> dict[str, Any] | None:
        response = self._request("GET", f"{self.target.runners_path}/{runner_id}")
        if response.status_code == 404:
            return None
        return self._check(200, response, "GET", f"{self.target.runners_path}/{runner_id}").json()

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

    # -- transport --------------------------------------------------------------------------------------

    def _expect(self, status: int, method: str, path_or_url: str, **kwargs: Any) -> requests.Response:
        return self._check(status, self._request(method, path_or_url, **kwargs), method, path_or_url)

    @staticmethod
    def _check(status: int, response: requests.Response, method: str, path: str) -> requests.Response:
        if response.status_code != status:
            raise GitHubError(method, path, response.status_code, _message(response))
        return response

    def _request(self, method: str, path_or_url: str, **kwargs: Any) -> requests.Response:
        url = path_or_url if "://" in path_or_url else self.target.api_url + path_or_url
        waited, attempt = 0.0, 0
        while True:
            response = self._session.request(method, url, timeout=self._timeout, **kwargs)
            wait = self._rate_limit_wait(response, attempt)
            if wait is None:
                return response
            delay, reason = wait
            path = url.removeprefix(self.target.api_url)
            if waited + delay > self._max_rate_limit_wait:
                raise GitHubRateLimited(
                    method,
                    path,
                    response.status_code,
                    f"rate limited ({reason}); waiting {delay:.0f} s more would pass the "
                    f"{self._max_rate_limit_wait:.0f} s this call may wait (already waited {waited:.0f} s)",
                )
            log.warning("GitHub rate limit on %s %s (%s): waiting %.1f s", method, path, reason, delay)
            self._sleep(delay)
            waited, attempt = waited + delay, attempt + 1

    def _rate_limit_wait(self, response: requests.Response, attempt: int) -> tuple[float, str] | None:
        """How long GitHub asks us to wait, or None if this answer is not a rate limit."""
        if response.status_code not in (403, 429):
            return None
        headers = response.headers
        if "retry-after" in headers:
            return _retry_after_seconds(headers["retry-after"], self._now()), "retry-after"
        if headers.get("x-ratelimit-remaining") == "0" and "x-ratelimit-reset" in headers:
            return max(0.0, float(headers["x-ratelimit-reset"]) - self._now()) + 1.0, "primary limit exhausted"
        if response.status_code == 429 or "secondary rate limit" in _message(response):
            return 60.0 * 2**attempt, "secondary limit without retry-after"
        return None


def _retry_after_seconds(value: str, now: float) -> float:
    """``retry-after`` is seconds, or an HTTP date (RFC 9110)."""
    try:
        return max(0.0, float(value))
    except ValueError:
        return max(0.0, parsedate_to_datetime(value).timestamp() - now)


def _message(response: requests.Response) -> str:
    try:
        body = response.json()
    except ValueError:
        body = None
    if isinstance(body, dict) and "message" in body:
        return str(body["message"])
    return response.reason or f"HTTP {response.status_code}"
