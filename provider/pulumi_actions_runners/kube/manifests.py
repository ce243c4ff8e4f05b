"""The Secret and Pod of one runner.

The runner's credential (a registration token, or a just-in-time config) lives only in the Secret; the
container reads it through ``secretKeyRef`` so that none is written into a pod spec (where ``kubectl get pod
-o yaml`` and every controller would see it).
"""

from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass
from typing import Any

from .pod_template import merge_template

DIND_IMAGE = "docker:29.7.2-dind"  # docker:dind in August 2026, pinned: a pod template's dind container may change it
TOKEN_KEY = "token"
JIT_CONFIG_KEY = "jitconfig"
LABELS_KEY = "labels"
JIT_TOKEN_HASH = "jit"  # what a just-in-time runner's pod carries for a token hash: it has no token
MANAGED_BY = "pulumi-actions-runners"
MANAGED_BY_LABEL = "app.kubernetes.io/managed-by"
TOKEN_HASH_ANNOTATION = "actions-runners.pulumi.io/token-hash"
SPEC_HASH_ANNOTATION = "actions-runners.pulumi.io/spec-hash"  # RunnerSpec.spec_hash: what the pod was made of
RUNNER_LABEL = "actions-runners.pulumi.io/runner"
POOL_LABEL = "actions-runners.pulumi.io/pool"
JOB_LABEL = "actions-runners.pulumi.io/job"  # a refilling pool's generation (its Job) that a pod or Secret is of
OWNER_LABEL = "actions-runners.pulumi.io/owner"  # the resource's ownership id, as on its GitHub registrations
TERMINATION_GRACE_SECONDS = 30
# A node scale-down evicts pods and kills the jobs on them: the cluster autoscaler and Karpenter leave pods with
# these alone. A pod template's annotations may override them.
EVICTION_SAFETY = {"cluster-autoscaler.kubernetes.io/safe-to-evict": "false", "karpenter.sh/do-not-disrupt": "true"}
# run.sh exits 7 (not 0) when GitHub says the runner's version is too old to get jobs, so that a refresh can say so.
VERSION_DEPRECATED_EXIT_CODE = 7
DOCKER_HOST = "unix:///var/run/docker.sock"
DOCKER_WAIT_SECONDS = 120
WORK_DIR = "/home/runner/_work"

# The runner image reads every config.sh / run.sh argument from ACTIONS_RUNNER_INPUT_<ARG> (actions/runner's
# CommandSettings), so no credential is ever on a command line, where node-level process monitoring would see it.
INPUT = "ACTIONS_RUNNER_INPUT_"
# Until it execs run.sh, PID 1 is this shell, which the kernel spares a SIGTERM it has no handler for: untrapped,
# a pod deleted while config.sh runs would register, come online and take a job after its deletion, until SIGKILL.
# Trapped, bash runs the trap once config.sh (or the Docker wait's sleep) returns: the container exits 143 with
# its registration offline, never listening. run.sh traps signals itself (the image's RUNNER_MANUALLY_TRAP_SIG).
STOP_BEFORE_RUN = "trap 'exit 143' TERM"
RUNNER_COMMAND = f"""set -eu
{STOP_BEFORE_RUN}
cd /home/runner
./config.sh
unset {INPUT}TOKEN  # exec'd without it: run.sh, PID 1 from then on, and jobs never hold the token
exec ./run.sh
"""
# A just-in-time runner is registered already: run.sh reads its config from ACTIONS_RUNNER_INPUT_JITCONFIG. The
# listener drops it from its own environment (CommandSettings.cs), but run.sh, PID 1, keeps it in
# /proc/1/environ, which a job (the same user) can read, as in ARC's runners: see docs/operations/security.md,
# "What a job can read". It is this one runner's credential, ephemeral and removed after its one job.
JIT_RUNNER_COMMAND = f"""set -eu
{STOP_BEFORE_RUN}
cd /home/runner
exec ./run.sh
"""
# In Docker mode the runner takes no job before the sidecar's Docker answers (bounded: it says what it waited for).
WAIT_FOR_DOCKER = f"""waited=0
until [ -S {DOCKER_HOST.removeprefix("unix://")} ]; do
  if [ "$waited" -ge {DOCKER_WAIT_SECONDS} ]; then
    echo "Docker did not start within {DOCKER_WAIT_SECONDS} s: no socket at {DOCKER_HOST} (see container dind)"
    exit 1
  fi
  sleep 1
  waited=$((waited + 1))
done
"""
OWNER_LABEL_PREFIX = "pulumi-owner-"


def owner_label(owner: str) -> str:
    """The GitHub label that proves a registration is this resource's: runner names are unique per GitHub scope,
    not per namespace or stack, so a name alone proves nothing. ``runs-on`` ignores labels it does not ask for."""
    return OWNER_LABEL_PREFIX + owner


@dataclass(frozen=True)
class RunnerSpec:
    """What one runner pod is made of; ``token_hash`` ties the pod to the token it registered with."""

    github_url: str
    namespace: str
    runner_name: str
    labels: tuple[str, ...]
    ephemeral: bool
    image: str
    token_hash: str  # JIT_TOKEN_HASH for a just-in-time runner
    jit_config: bool = False
    pool: str = ""  # the RunnerPool it belongs to, if any
    owner: str | None = None  # the resource's ownership id (see owner_label); None in a state from before it
    pod_template: str = ""  # the user's pod template, as pod_template.template_json has it
    docker: bool = False  # a Docker-in-Docker sidecar
    runner_group: str = ""  # an organization's or enterprise's runner group; "" for the Default group

    @property
    def registration_labels(self) -> tuple[str, ...]:
        """The custom labels GitHub gets: the user's, then the ownership label."""
        return (*self.labels, *((owner_label(self.owner),) if self.owner else ()))

    @property
    def jit_labels(self) -> list[str]:
        """config.sh gives every runner "self-hosted"; a just-in-time runner has only the labels asked for."""
        return list(dict.fromkeys(("self-hosted", *self.registration_labels)))

    @property
    def spec_hash(self) -> str:
        """What the runner is made of, apart from its name and token: a pool updates runners whose hash differs."""
        return self._hash(sorted(self.labels))

    @property
    def shape_hash(self) -> str:
        """What the pod and registration are made of that its labels are not: a runner whose spec differs from
        another's in labels alone can be relabelled in place (relabel.py) rather than replaced."""
        return self._hash(None)

    def _hash(self, labels: list[str] | None) -> str:
        fields = [self.github_url, labels, self.ephemeral, self.image, self.jit_config]
        if self.pod_template or self.docker:  # so that runners from before either keep their hash
            fields += [self.pod_template, self.docker]
        if self.runner_group:
            fields += [self.runner_group]
        return hashlib.sha256(json.dumps(fields).encode()).hexdigest()[:16]

    @property
    def pod_name(self) -> str:
        return self.runner_name

    @property
    def secret_name(self) -> str:
        return f"{self.runner_name}-registration"


def _labels(spec: RunnerSpec) -> dict[str, str]:
    return {
        "app.kubernetes.io/name": "actions-runner",
        MANAGED_BY_LABEL: MANAGED_BY,
        RUNNER_LABEL: spec.runner_name,
        **({POOL_LABEL: spec.pool} if spec.pool else {}),
        **({OWNER_LABEL: spec.owner} if spec.owner else {}),
    }


def made_by(spec: RunnerSpec, labels: dict[str, str] | None) -> bool:
    """Whether a pod or Secret with these labels was made by the resource of ``spec``: another stack may use the
    same names in the same namespace. One made before ownership labels carries none, and counts as its own."""
    owner = (labels or {}).get(OWNER_LABEL)
    return owner is None or owner == spec.owner


def secret_manifest(spec: RunnerSpec, credential: str) -> dict[str, Any]:
    """``credential`` is the registration token, or the encoded just-in-time config. A token runner's labels are
    there too: a persistent runner's container that restarts registers again with the labels it reads, which an
    update may have changed since the pod was made (see relabel.py)."""
    data = {JIT_CONFIG_KEY: credential} if spec.jit_config else {TOKEN_KEY: credential, LABELS_KEY: labels_value(spec)}
    return {
        "apiVersion": "v1",
        "kind": "Secret",
        "type": "Opaque",
        "metadata": {"name": spec.secret_name, "namespace": spec.namespace, "labels": _labels(spec)},
        "stringData": data,
    }


def labels_value(spec: RunnerSpec) -> str:
    """config.sh's --labels: the user's and the ownership label."""
    return ",".join(spec.registration_labels)


def _from_secret(spec: RunnerSpec, name: str, key: str) -> dict[str, Any]:
    return {"name": name, "valueFrom": {"secretKeyRef": {"name": spec.secret_name, "key": key}}}


def pod_manifest(spec: RunnerSpec) -> dict[str, Any]:
    """The provider's pod of the runner, with the user's pod template merged in (see pod_template.py)."""
    env: list[dict[str, Any]] = [
        {"name": f"{INPUT}URL", "value": spec.github_url},
        {"name": f"{INPUT}NAME", "value": spec.runner_name},
    ]
    if spec.jit_config:  # name, labels and ephemerality were given to GitHub with the config
        env.append(_from_secret(spec, f"{INPUT}JITCONFIG", JIT_CONFIG_KEY))
    else:
        env += [
            _from_secret(spec, f"{INPUT}TOKEN", TOKEN_KEY),
            _from_secret(spec, f"{INPUT}LABELS", LABELS_KEY),
            {"name": f"{INPUT}EPHEMERAL", "value": "true" if spec.ephemeral else "false"},
            {"name": f"{INPUT}REPLACE", "value": "true"},  # its own earlier registration: see startup.py
            {"name": f"{INPUT}UNATTENDED", "value": "true"},
            {"name": f"{INPUT}WORK", "value": "_work"},
            # No download of a newer runner at each start: the image is the version (a just-in-time runner's
            # setting is GitHub's: generate-jitconfig has none).
            {"name": f"{INPUT}DISABLEUPDATE", "value": "true"},
            *([{"name": f"{INPUT}RUNNERGROUP", "value": spec.runner_group}] if spec.runner_group else []),
        ]
    env.append({"name": "ACTIONS_RUNNER_RETURN_VERSION_DEPRECATED_EXIT_CODE", "value": "1"})
    command = JIT_RUNNER_COMMAND if spec.jit_config else RUNNER_COMMAND
    runner: dict[str, Any] = {
        "name": "runner",
        "image": spec.image,
        "command": ["/bin/bash", "-c", command],
        "env": env,
        # config.sh's own error (an expired token, a name taken) becomes the pod's termination message.
        "terminationMessagePolicy": "FallbackToLogsOnError",
    }
    pod_spec: dict[str, Any] = {
        # An ephemeral runner takes one job and exits. A persistent one restarts whatever its exit code: run.sh
        # exits 0 for a session conflict or a listener killed alone as for a removal, and the container that
        # restarts registers again with config.sh --replace. One the provider removes cannot: its Secret is gone.
        "restartPolicy": "Never" if spec.ephemeral else "Always",
        "terminationGracePeriodSeconds": TERMINATION_GRACE_SECONDS,
        # A job runs whatever a pull request's workflow says: with a token mounted, it could do whatever the pod's
        # service account may in the cluster. A pod template that needs it sets automountServiceAccountToken.
        "automountServiceAccountToken": False,
        "containers": [runner],
    }
    if spec.docker:
        _add_docker(pod_spec, runner, spec.image)
    pod = {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {
            "name": spec.pod_name,
            "namespace": spec.namespace,
            "labels": _labels(spec),
            "annotations": {
                **EVICTION_SAFETY,
                "kubectl.kubernetes.io/default-container": "runner",  # kubectl logs and exec pick the runner
                TOKEN_HASH_ANNOTATION: spec.token_hash,
                SPEC_HASH_ANNOTATION: spec.spec_hash,
            },
        },
        "spec": pod_spec,
    }
    return merge_template(pod, json.loads(spec.pod_template) if spec.pod_template else None)


def _add_docker(pod_spec: dict[str, Any], runner: dict[str, Any], runner_image: str) -> None:
    """Docker-in-Docker as ARC's dind mode has it: a privileged dockerd as a native sidecar (it stops when the
    runner has exited, so an ephemeral pod still ends), its socket in a shared emptyDir, and the work directory
    shared so that paths a job mounts into its containers exist for dockerd; the runner's externals are copied
    there for the same reason (container actions mount them)."""
    work = {"name": "work", "mountPath": WORK_DIR}
    socket = {"name": "dind-sock", "mountPath": "/var/run"}
    externals = {"name": "dind-externals", "mountPath": "/home/runner/externals"}
    # After the trap: a pod deleted while its runner waits for Docker ends at the wait's next poll (bash runs the
    # trap once `sleep 1` returns), instead of taking its whole termination grace to be killed.
    runner["command"][-1] = runner["command"][-1].replace(
        f"{STOP_BEFORE_RUN}\n", f"{STOP_BEFORE_RUN}\n{WAIT_FOR_DOCKER}", 1
    )
    runner["env"].append({"name": "DOCKER_HOST", "value": DOCKER_HOST})
    runner["volumeMounts"] = [work, socket]
    pod_spec["initContainers"] = [
        {
            "name": "init-dind-externals",
            "image": runner_image,
            "command": ["cp", "-r", "/home/runner/externals/.", "/home/runner/tmpDir/"],
            "volumeMounts": [{"name": "dind-externals", "mountPath": "/home/runner/tmpDir"}],
        },
        {
            "name": "dind",
            "image": DIND_IMAGE,
            "args": ["dockerd", f"--host={DOCKER_HOST}", "--group=$(DOCKER_GROUP_GID)"],
            "env": [{"name": "DOCKER_GROUP_GID", "value": "123"}],  # the runner image's docker group
            "securityContext": {"privileged": True},
            "restartPolicy": "Always",
            "volumeMounts": [work, socket, externals],
        },
    ]
    pod_spec["volumes"] = [{"name": name, "emptyDir": {}} for name in ("work", "dind-sock", "dind-externals")]
