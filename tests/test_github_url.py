"""config.sh --url forms, and the API base and scope they imply."""

from __future__ import annotations

import pytest

from pulumi_actions_runners.github.url import parse_github_url


@pytest.mark.parametrize(
    ("url", "api_url", "scope"),
    [
        ("https://github.com/octo-org/ci", "https://api.github.com", "repos/octo-org/ci"),
        ("https://github.com:443/octo-org", "https://api.github.com", "orgs/octo-org"),
        ("https://github.com/enterprises/acme", "https://api.github.com", "enterprises/acme"),
        ("https://ghe.example.com/octo-org/ci/", "https://ghe.example.com/api/v3", "repos/octo-org/ci"),
        ("https://ghe.example.com:8443/octo-org", "https://ghe.example.com:8443/api/v3", "orgs/octo-org"),
        ("http://127.0.0.1:8080/octo-org/ci", "http://127.0.0.1:8080/api/v3", "repos/octo-org/ci"),
    ],
)
def test_forms(url: str, api_url: str, scope: str) -> None:
    target = parse_github_url(url)
    assert (target.api_url, target.scope) == (api_url, scope)


def test_a_url_with_a_credential_is_refused_without_echoing_it() -> None:
    with pytest.raises(ValueError) as refused:
        parse_github_url("https://x-access-token:ghp_SECRET@github.com/octo-org/ci")
    assert "ghp_SECRET" not in str(refused.value)
    assert "github_token" in str(refused.value)


@pytest.mark.parametrize(
    "url",
    [
        "http://ghe.example.com/octo-org/ci",  # a token in clear text over the network
        "ftp://github.com/octo-org/ci",
        "https://github.com/a/b/c",
        "https://github.com/",
        "https://github.com/octo-org/ci?ref=main",
        "github.com/octo-org/ci",
    ],
)
def test_refused_forms(url: str) -> None:
    with pytest.raises(ValueError):
        parse_github_url(url)
