"""Every property of the four resources, once: its schema type, default, secrecy and description.

The provider plugin's schema (schema.py), its defaults in Check (server.py) and the names its programs use
(``githubUrl`` for ``github_url``) come from this table; the dynamic resources (resources.py) take the same
defaults as keyword arguments, and a test holds the two to each other.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

PACKAGE = "actions-runners"
ANY = {"$ref": "pulumi.json#/Any"}


@dataclass(frozen=True)
class Property:
    name: str  # as the dynamic resources and the core name it (snake_case)
    schema: dict[str, Any]  # the schema's type
    description: str
    default: Any = None  # what Check fills in when the program leaves it out (None: nothing)
    secret: bool = False
    required: bool = False

    @property
    def camel(self) -> str:
        return camel_case(self.name)


def camel_case(name: str) -> str:
    first, *rest = name.split("_")
    return first + "".join(part[:1].upper() + part[1:] for part in rest)


def snake_case(name: str) -> str:
    return "".join(f"_{c.lower()}" if c.isupper() else c for c in name)


NESTED_RECORDS = ("runners",)  # lists of records whose keys are named like properties (a pool's runners)


def core_names(props: dict[str, Any]) -> dict[str, Any]:
    """Properties as the schema names them (``githubUrl``), named as the core does (``github_url``)."""
    return {snake_case(k): _records(k, v, snake_case) for k, v in props.items()}


def schema_names(props: dict[str, Any]) -> dict[str, Any]:
    return {camel_case(k): _records(k, v, camel_case) for k, v in props.items()}


def _records(key: str, value: Any, rename: Any) -> Any:
    if snake_case(key) in NESTED_RECORDS and isinstance(value, list):
        return [{rename(k): v for k, v in r.items()} if isinstance(r, dict) else r for r in value]
    return value


STRING, BOOLEAN, INTEGER, NUMBER = ({"type": t} for t in ("string", "boolean", "integer", "number"))
STRINGS = {"type": "array", "items": {"type": "string"}}

GITHUB_URL = Property(
    "github_url",
    STRING,
    "Where the runners register: https://HOST/OWNER/REPO (a repository), https://HOST/ORG (an organization) or "
    "https://HOST/enterprises/ENTERPRISE.",
    required=True,
)
CREDENTIALS = (
    Property(
        "github_token",
        STRING,
        "A GitHub token allowed to manage the scope's self-hosted runners; else GITHUB_TOKEN in the environment.",
        secret=True,
    ),
    Property("github_app_id", STRING, "A GitHub App's id, to call GitHub as that App instead of with a token."),
    Property(
        "github_app_installation_id",
        INTEGER,
        "The App's installation; else the one on the scope's repository or organization.",
    ),
    Property("github_app_private_key", STRING, "The App's private key (PEM).", secret=True),
)
RUNNER_INPUTS = (
    GITHUB_URL,
    Property("namespace", STRING, "The Kubernetes namespace of the runners' pods; it must exist.", required=True),
    Property(
        "registration_token",
        STRING,
        "A RegistrationToken's token: a new one recreates the runners, the safe way (never one busy with a job).",
        secret=True,
    ),
    Property(
        "registration_token_expires_at",
        STRING,
        "The RegistrationToken's expiresAt: a runner that starts when its token is too old gets a fresh one.",
    ),
    Property("jit_config", BOOLEAN, "Just-in-time runners: GitHub makes each one's config; no token.", default=False),
    Property("labels", STRINGS, "The runners' labels; a change is made in place.", default=[]),
    Property("ephemeral", BOOLEAN, "A runner takes one job and ends (the default), or runs on.", default=True),
    Property(
        "image",
        STRING,
        "The runner image. Left out, the runners run the newest actions/runner release (ghcr.io/actions/actions-runner"
        ", learned from GitHub at each preview and update): a new release rotates them.",
    ),
    Property(
        "runner_version",
        STRING,
        "The actions/runner version the image contains, for an image whose tag names none (a private build); as "
        "output, the version the runners run.",
    ),
    Property(
        "pod_template",
        ANY,
        "A Kubernetes PodTemplateSpec merged into each runner's pod: resources, placement, volumes, sidecars.",
    ),
    Property("docker", BOOLEAN, "A Docker-in-Docker sidecar for each runner.", default=False),
    Property("runner_group", STRING, "An organization's or enterprise's runner group."),
    Property(
        "grace_period_seconds",
        NUMBER,
        "How long an unregistered runner's pod is left before it is deleted.",
        default=30,
    ),
    Property(
        "unregister_timeout_seconds",
        NUMBER,
        "How long a busy runner's job is waited for before the provider gives up (it never kills it).",
        default=600,
    ),
    Property("register_timeout_seconds", NUMBER, "How long a new runner may take to come online.", default=300),
    *CREDENTIALS,
    Property(
        "kubeconfig",
        STRING,
        "A kubeconfig file, used instead of KUBECONFIG; else KUBECONFIG, ~/.kube/config or in-cluster. Leave it out "
        "where a pipeline gives KUBECONFIG.",
    ),
)
RUNNER_RELEASE_OUTPUT = Property(
    "runner_release",
    {"type": "object", "additionalProperties": ANY},
    "What GitHub's release list said of the runner version at the last preview or update: tracking (no image), newest "
    "and newest_published_at (the newest release), learned (whether GitHub answered), deadlines (each version's last "
    "day of jobs, 30 days after the release that followed it).",
)
CLUSTER_OUTPUT = Property(
    "cluster",
    STRING,
    "The Kubernetes cluster the runners are in, as the kubeconfig named it when they were made or last updated: "
    "its API server's address and a hash of its CA. A kubeconfig leading to another cluster replaces them.",
)
RUNNER_OUTPUTS = (
    Property("runner_id", INTEGER, "The runner's id in GitHub."),
    Property("pod_name", STRING, "The runner's pod."),
    Property("secret_name", STRING, "The Secret its pod reads its registration from."),
    Property("token_hash", STRING, "A hash of the token the runner registered with (how a new token is seen)."),
    Property("owner", STRING, "The resource's ownership id, on its pods and registrations."),
    Property("runner_status", STRING, "online or offline, as the last refresh saw it."),
    Property("runner_busy", BOOLEAN, "Whether a refresh saw it running a job."),
    Property("pod_phase", STRING, "The pod's phase as the last refresh saw it."),
    Property("pod_problem", STRING, "Why the runner will not take a job, if a refresh saw a reason."),
    Property("labels_updated", STRING, "How the last label change was made: in place, or by replacement."),
    RUNNER_RELEASE_OUTPUT,
    CLUSTER_OUTPUT,
)
POOL_RUNNER = {
    "type": "object",
    "properties": {
        "name": {**STRING, "description": "The runner's name (and its pod's)."},
        "id": {**INTEGER, "description": "Its id in GitHub."},
        "pod": {**STRING, "description": "Its pod."},
        "tokenHash": {**STRING, "description": "The hash of the token it registered with."},
        "specHash": {**STRING, "description": "The hash of what it is made of."},
        "ephemeral": {**BOOLEAN, "description": "Whether it takes one job."},
        "status": {**STRING, "description": "online or offline, as the last refresh saw it."},
        "busy": {**BOOLEAN, "description": "Whether a refresh saw it running a job."},
        "podPhase": {**STRING, "description": "Its pod's phase, as the last refresh saw it."},
        "job": {**STRING, "description": "The Job whose pod it is (a refilling pool's)."},
        "runnerVersion": {**STRING, "description": "The actions/runner version it runs (none for a private build)."},
    },
}
# A pool's labels change in place too, but a refilling pool's Job registers its pods with its labels: it rolls.
POOL_LABELS = Property(
    "labels",
    STRINGS,
    "The runners' labels; a change relabels them in place, or, with refill, rolls to a new Job.",
    default=[],
)
POOL_INPUTS = (
    *RUNNER_INPUTS[:2],
    Property("replicas", INTEGER, "How many runners.", required=True),
    *(POOL_LABELS if p.name == "labels" else p for p in RUNNER_INPUTS[2:]),
    Property(
        "max_unavailable",
        {"oneOf": [INTEGER, STRING]},
        "At most this many runners (or this percentage of replicas) out of service at once in a rotation.",
        default="25%",
    ),
    Property(
        "refill",
        BOOLEAN,
        "The runners are a Kubernetes Job's pods: a finished runner's slot is refilled at once, between updates.",
        default=False,
    ),
)
POOL_OUTPUTS = (
    Property(
        "runners",
        {"type": "array", "items": {"$ref": "#/types/actions-runners:index:PoolRunner"}},
        "Each runner of the pool.",
    ),
    Property("problems", STRINGS, "What did not converge in the last update, or what the last refresh saw."),
    Property("job", STRING, "With refill: the Job whose pods the runners are."),
    Property("parallelism", INTEGER, "With refill: the Job's parallelism."),
    Property("finished_pods", INTEGER, "With refill: pods that finished since the last update."),
    Property("token_hash", STRING, "A hash of the pool's token."),
    Property("spec_hash", STRING, "A hash of what its runners are made of."),
    Property("shape_hash", STRING, "The same, apart from labels."),
    Property("owner", STRING, "The resource's ownership id, on its pods and registrations."),
    RUNNER_RELEASE_OUTPUT,
    CLUSTER_OUTPUT,
)
RUNNER_INPUT = {p.name: p for p in RUNNER_INPUTS}
SCALE_SET_INPUTS = (
    GITHUB_URL,
    Property(
        "namespace",
        STRING,
        "The Kubernetes namespace of the listener and the runners' pods; it must exist.",
        required=True,
    ),
    Property("max_runners", INTEGER, "At most this many runners at once, busy or idle.", required=True),
    Property("min_runners", INTEGER, "How many idle runners are kept waiting for jobs.", default=0),
    Property(
        "scale_set_name",
        STRING,
        "The scale set's name on GitHub, which workflows ask for with runs-on; else one made from the resource's "
        "name, project and stack.",
    ),
    Property("runner_group", STRING, "The organization's or enterprise's runner group the scale set is in."),
    Property(
        "labels",
        STRINGS,
        "Labels sent to GitHub with the set besides its name, as ARC's scaleSetLabels: GitHub Enterprise Server "
        "3.18+ routes jobs by them, github.com by the set's name alone.",
        default=[],
    ),
    *(RUNNER_INPUT[name] for name in ("image", "runner_version", "pod_template", "docker")),
    Property("listener_image", STRING, "The listener's image; else this release's. A change rolls the listener."),
    *(
        RUNNER_INPUT[name]
        for name in ("grace_period_seconds", "unregister_timeout_seconds", "register_timeout_seconds")
    ),
    *CREDENTIALS,
    RUNNER_INPUT["kubeconfig"],
)
SCALE_SET_OUTPUTS = (
    Property("scale_set_id", INTEGER, "The scale set's id on GitHub, as its listener last wrote it."),
    Property(
        "listener", STRING, "The listener's Deployment (and its ConfigMap, ServiceAccount, Role and RoleBinding)."
    ),
    Property(
        "statistics",
        {"type": "object", "additionalProperties": INTEGER},
        "GitHub's counts for the set as the last refresh saw them (totalAssignedJobs, totalBusyRunners, "
        "totalIdleRunners and the others).",
    ),
    Property(
        "runners",
        {"type": "array", "items": {"type": "object", "additionalProperties": ANY}},
        "Its runners' pods as the last refresh saw them: each one's name, id (in GitHub), specHash, podPhase, and "
        "retiring (removed from GitHub, its pod about to go).",
    ),
    Property(
        "update_kind",
        STRINGS,
        "What the last update changed: bounds (min, max, labels), runners (what they are made of: idle runners "
        "replaced, busy ones finish first), listener (its image or credential: it rolls); empty after a create.",
    ),
    Property("listener_running", BOOLEAN, "Whether the last refresh saw the listener's pod running."),
    Property("spec_hash", STRING, "A hash of what its runners are made of."),
    Property("owner", STRING, "The resource's ownership id, on its listener's objects and its runners' pods."),
    RUNNER_RELEASE_OUTPUT,
    CLUSTER_OUTPUT,
)
TOKEN_INPUTS = (
    GITHUB_URL,
    *CREDENTIALS,
    Property(
        "refresh_before_seconds",
        NUMBER,
        "The token is renewed by the first update less than this long before it expires.",
        default=1800,
    ),
)
TOKEN_OUTPUTS = (
    Property("token", STRING, "The registration token.", secret=True),
    Property("expires_at", STRING, "When it expires (ISO 8601)."),
    Property("token_hash", STRING, "A hash of the token."),
)


@dataclass(frozen=True)
class ResourceKind:
    name: str  # RegistrationToken, Runner, RunnerPool, RunnerScaleSet
    description: str
    inputs: tuple[Property, ...]
    outputs: tuple[Property, ...]
    name_input: str | None = None  # the input defaulted from the resource's name

    @property
    def token(self) -> str:
        return f"{PACKAGE}:index:{self.name}"

    @property
    def secrets(self) -> frozenset[str]:
        return frozenset(p.name for p in (*self.inputs, *self.outputs) if p.secret)


KINDS = (
    ResourceKind(
        "RegistrationToken",
        "A runner registration token for a repository, organization or enterprise, renewed only near its expiry.",
        TOKEN_INPUTS,
        TOKEN_OUTPUTS,
    ),
    ResourceKind(
        "Runner",
        "One self-hosted runner: a pod on Kubernetes registered with GitHub. A new registration token replaces it: "
        "unregistered first (never while it runs a job), then a grace period, then its pod is deleted.",
        (
            *RUNNER_INPUTS[:2],
            Property(
                "runner_name", STRING, "The runner's name; else one made from the resource's name, project and stack."
            ),
            *RUNNER_INPUTS[2:],
        ),
        RUNNER_OUTPUTS,
        name_input="runner_name",
    ),
    ResourceKind(
        "RunnerPool",
        "replicas runners of one spec, named <poolName>-<index>, rotated together inside one update with at most "
        "maxUnavailable out of service, busy runners waited for.",
        (
            *POOL_INPUTS[:3],
            Property(
                "pool_name",
                STRING,
                "The prefix of its runners' names; else one made from the resource's name, project and stack.",
            ),
            *POOL_INPUTS[3:],
        ),
        POOL_OUTPUTS,
        name_input="pool_name",
    ),
    ResourceKind(
        "RunnerScaleSet",
        "A GitHub runner scale set, which workflows ask for by its scaleSetName (runs-on). Its listener (a "
        "Deployment in namespace) keeps min(maxRunners, minRunners + assigned jobs) just-in-time runners, between "
        "updates too, and removes only idle ones; an update hands it new bounds or a new runner spec (busy runners "
        "finish on the old one).",
        SCALE_SET_INPUTS,
        SCALE_SET_OUTPUTS,
        name_input="scale_set_name",
    ),
)
BY_TOKEN = {kind.token: kind for kind in KINDS}


@dataclass(frozen=True)
class FunctionKind:
    name: str  # getRunnerRelease
    description: str
    inputs: tuple[Property, ...]
    outputs: tuple[Property, ...]

    @property
    def token(self) -> str:
        return f"{PACKAGE}:index:{self.name}"


GET_RUNNER_RELEASE = FunctionKind(
    "getRunnerRelease",
    "The newest actions/runner release a GitHub lists (GET /repos/actions/runner/releases), read with the "
    "resources' credential; and, for runnerVersion, the day GitHub stops sending it jobs. Runners that name no "
    "image make the same look-up themselves.",
    (
        Property(
            "github_url",
            STRING,
            "The GitHub to ask, as a resource's githubUrl: https://HOST/OWNER/REPO, https://HOST/ORG or "
            "https://HOST/enterprises/ENTERPRISE.",
            required=True,
        ),
        *CREDENTIALS,
        Property("runner_version", STRING, "A runner version whose deadline is wanted (2.336.0)."),
    ),
    (
        Property("version", STRING, "The newest release (the highest version GitHub lists).", required=True),
        Property("published_at", STRING, "When it was published (RFC 3339).", required=True),
        Property("image", STRING, "Its image: ghcr.io/actions/actions-runner:VERSION.", required=True),
        Property("runner_version", STRING, "The version asked about, if any."),
        Property(
            "deadline",
            STRING,
            "The last moment GitHub sends runnerVersion jobs (RFC 3339): 30 days after the first release after it; "
            "absent while it is the newest.",
        ),
        Property("receiving_jobs", BOOLEAN, "Whether GitHub still sends runnerVersion jobs."),
    ),
)
FUNCTIONS = (GET_RUNNER_RELEASE,)
FUNCTIONS_BY_TOKEN = {function.token: function for function in FUNCTIONS}
