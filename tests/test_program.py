"""The example program in programs/runners under Pulumi's mocks, pulumi_kubernetes resources included."""

from __future__ import annotations

import runpy

import pulumi
import pytest
from pulumi.runtime import rpc

from tests.conftest import PROGRAM_DIR

PROJECT = "actions-runners"


class RecordingMocks(pulumi.runtime.Mocks):
    def __init__(self) -> None:
        self.resources: list[pulumi.runtime.MockResourceArgs] = []

    def new_resource(self, args: pulumi.runtime.MockResourceArgs) -> tuple[str, dict]:
        self.resources.append(args)
        outputs = dict(args.inputs)
        if args.typ.endswith(":RegistrationToken"):
            outputs.update(token="AREGISTRATIONTOKEN", expires_at="2026-12-02T18:00:00Z", token_hash="ab")
        return f"{args.name}-id", outputs

    def call(self, args: pulumi.runtime.MockCallArgs) -> dict:
        return {}

    def of_type(self, suffix: str) -> list[pulumi.runtime.MockResourceArgs]:
        return [r for r in self.resources if r.typ.endswith(suffix)]


def run_program(config: dict[str, str], secret_keys: tuple[str, ...] = ()) -> RecordingMocks:
    mocks = RecordingMocks()
    pulumi.runtime.set_mocks(mocks, project=PROJECT, stack="test", preview=False)
    pulumi.runtime.set_all_config(
        {f"{PROJECT}:{k}": v for k, v in config.items()}, [f"{PROJECT}:{k}" for k in secret_keys]
    )
    pulumi.runtime.test(lambda: runpy.run_path(str(PROGRAM_DIR / "__main__.py"), run_name="__main__"))()
    return mocks


def test_program_creates_namespace_token_and_runners_from_config() -> None:
    mocks = run_program(
        {
            "githubUrl": "https://github.com/octo-org/ci",
            "githubToken": "ghp_from_config",
            "runners": "4",
            "labels": "gpu,linux",
            "namespace": "ci-runners",
            "gracePeriodSeconds": "0",
        },
        secret_keys=("githubToken",),
    )

    (namespace,) = mocks.of_type("kubernetes:core/v1:Namespace")
    assert namespace.inputs["metadata"]["name"] == "ci-runners"
    (token,) = mocks.of_type(":RegistrationToken")
    assert token.inputs["github_url"] == "https://github.com/octo-org/ci"
    assert token.inputs["refresh_before_seconds"] == 1800
    runners = mocks.of_type(":Runner")
    assert sorted(r.name for r in runners) == ["runner-0", "runner-1", "runner-2", "runner-3"]
    for runner in runners:
        assert runner.inputs["namespace"] == "ci-runners"
        assert runner.inputs["labels"] == ["gpu", "linux"]
        assert runner.inputs["grace_period_seconds"] == 0
        assert rpc.is_rpc_secret(runner.inputs["registration_token"])
        assert rpc.unwrap_rpc_secret(runner.inputs["registration_token"]) == "AREGISTRATIONTOKEN"
        assert rpc.is_rpc_secret(runner.inputs["github_token"])
    names = {r.inputs["runner_name"] for r in runners}
    assert len(names) == 4 and all(n.startswith("runner-") for n in names)


def test_program_can_use_an_existing_namespace_and_the_environment_credential() -> None:
    mocks = run_program({"githubUrl": "https://github.com/octo-org", "createNamespace": "false"})

    assert mocks.of_type("kubernetes:core/v1:Namespace") == []
    assert len(mocks.of_type(":Runner")) == 3
    assert all(r.inputs.get("github_token") is None for r in mocks.of_type(":Runner"))


def test_program_requires_the_github_url() -> None:
    with pytest.raises(Exception, match="githubUrl"):
        run_program({})


def test_program_shapes_the_runner_pods_from_config_in_kubernetes_field_names() -> None:
    mocks = run_program(
        {
            "githubUrl": "https://github.com/octo-org",
            "pool": "true",
            "runnerCpu": "2",
            "runnerMemory": "4Gi",
            "nodeSelector": '{"kubernetes.io/arch": "amd64"}',
            "docker": "true",
            "dockerMemory": "2Gi",
        }
    )

    (pool,) = mocks.of_type(":RunnerPool")
    assert pool.inputs["docker"] is True
    # The program's PodTemplateSpecArgs, as Pulumi hands them over: Kubernetes' own field names.
    assert pool.inputs["pod_template"] == {
        "metadata": {"labels": {"app.kubernetes.io/part-of": "ci"}},
        "spec": {
            "containers": [
                {
                    "name": "runner",
                    "resources": {"limits": {"cpu": "2", "memory": "4Gi"}, "requests": {"cpu": "2", "memory": "4Gi"}},
                },
                {"name": "dind", "resources": {"limits": {"memory": "2Gi"}, "requests": {"memory": "2Gi"}}},
            ],
            "nodeSelector": {"kubernetes.io/arch": "amd64"},
        },
    }
    runner = run_program({"githubUrl": "https://github.com/octo-org"}).of_type(":Runner")[0]
    assert runner.inputs.get("pod_template") is None and runner.inputs["docker"] is False


def test_program_can_authenticate_as_a_github_app_from_config() -> None:
    mocks = run_program(
        {"githubUrl": "https://github.com/octo-org", "githubAppId": "123456", "githubAppPrivateKey": "PEM"},
        secret_keys=("githubAppPrivateKey",),
    )
    for resource in [*mocks.of_type(":RegistrationToken"), *mocks.of_type(":Runner")]:
        assert resource.inputs["github_app_id"] == "123456" and resource.inputs.get("github_token") is None
        assert rpc.is_rpc_secret(resource.inputs["github_app_private_key"])
