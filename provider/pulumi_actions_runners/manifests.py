"""The Secret and Pod of one runner.

The registration token lives only in the Secret; the container reads it through ``secretKeyRef`` so that no
token is written into a pod spec (where ``kubectl get pod -o yaml`` and every controller would see it).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

DEFAULT_IMAGE = "ghcr.io/actions/actions-runner:2.329.0"
TOKEN_KEY = "token"
MANAGED_BY = "pulumi-actions-runners"
TOKEN_HASH_ANNOTATION = "actions-runners.pulumi.io/token-hash"
TERMINATION_GRACE_SECONDS = 30

# The runner image's own scripts, configured from the environment (the token never appears in the spec).
RUNNER_COMMAND = """set -eu
cd /home/runner
flags=""
if [ "$RUNNER_EPHEMERAL" = "true" ]; then flags="--ephemeral"; fi
./config.sh --unattended --replace --work _work --url "$GITHUB_URL" --token "$RUNNER_TOKEN" \\
  --name "$RUNNER_NAME" ${RUNNER_LABELS:+--labels "$RUNNER_LABELS"} $flags
unset RUNNER_TOKEN  # jobs inherit the runner's environment; the token must not reach them
exec ./run.sh
"""


@dataclass(frozen=True)
class RunnerSpec:
    """What one runner pod is made of; ``token_hash`` ties the pod to the token it registered with."""

    github_url: str
    namespace: str
    runner_name: str
    labels: tuple[str, ...]
    ephemeral: bool
    image: str
    token_hash: str

    @property
    def pod_name(self) -> str:
        return self.runner_name

    @property
    def secret_name(self) -> str:
        return f"{self.runner_name}-registration"


def _labels(spec: RunnerSpec) -> dict[str, str]:
    return {
        "app.kubernetes.io/name": "actions-runner",
        "app.kubernetes.io/managed-by": MANAGED_BY,
        "actions-runners.pulumi.io/runner": spec.runner_name,
    }


def secret_manifest(spec: RunnerSpec, registration_token: str) -> dict[str, Any]:
    return {
        "apiVersion": "v1",
        "kind": "Secret",
        "type": "Opaque",
        "metadata": {"name": spec.secret_name, "namespace": spec.namespace, "labels": _labels(spec)},
        "stringData": {TOKEN_KEY: registration_token},
    }


def pod_manifest(spec: RunnerSpec) -> dict[str, Any]:
    env = [
        {"name": "RUNNER_NAME", "value": spec.runner_name},
        {"name": "RUNNER_TOKEN", "valueFrom": {"secretKeyRef": {"name": spec.secret_name, "key": TOKEN_KEY}}},
        {"name": "RUNNER_LABELS", "value": ",".join(spec.labels)},
        {"name": "RUNNER_EPHEMERAL", "value": "true" if spec.ephemeral else "false"},
        {"name": "GITHUB_URL", "value": spec.github_url},
    ]
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {
            "name": spec.pod_name,
            "namespace": spec.namespace,
            "labels": _labels(spec),
            "annotations": {TOKEN_HASH_ANNOTATION: spec.token_hash},
        },
        "spec": {
            # An ephemeral runner takes one job and exits 0; a persistent one restarts only if it crashed,
            # so a runner whose registration was removed does not come back and register again.
            "restartPolicy": "Never" if spec.ephemeral else "OnFailure",
            "terminationGracePeriodSeconds": TERMINATION_GRACE_SECONDS,
            "containers": [
                {
                    "name": "runner",
                    "image": spec.image,
                    "command": ["/bin/bash", "-c", RUNNER_COMMAND],
                    "env": env,
                }
            ],
        },
    }
