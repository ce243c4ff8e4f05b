"""A namespace of self-hosted runners sharing one registration token, configured with `pulumi config`.

pulumi config set githubUrl https://github.com/OWNER/REPO
pulumi config set --secret githubToken ghp_...        # or GITHUB_TOKEN in the environment; or a GitHub App:
pulumi config set githubAppId 123456                 #   the App's id (or GITHUB_APP_ID in the environment)
pulumi config set --secret githubAppPrivateKey "$(cat app.private-key.pem)"   # (or GITHUB_APP_PRIVATE_KEY)
pulumi config set githubAppInstallationId 7890       #   optional: else the App's installation on the owner
pulumi config set runners 3                          # optional
pulumi config set kubeconfig other.kubeconfig        # optional, used instead of KUBECONFIG: leave it out for a
                                                     #   stack a pipeline runs (its KUBECONFIG decides)
pulumi config set createNamespace false              # optional: the namespace already exists
pulumi config set tokenRefreshBeforeSeconds 1800     # optional: renew the token when it expires sooner
pulumi config set pool true                          # optional: one RunnerPool instead of separate Runners
pulumi config set maxUnavailable 25%                 # optional (pool): how many may be out of service at once
pulumi config set refill true                        # optional (pool): a Job refills a slot when its job ends
pulumi config set jitConfig true                     # optional: just-in-time configs instead of a token
pulumi config set runnerCpu 2                        # optional: the runner container's CPU (request = limit)
pulumi config set runnerMemory 4Gi                   # optional: its memory (request = limit)
pulumi config set --path 'nodeSelector["kubernetes.io/arch"]' amd64  # optional: the nodes runners may run on
pulumi config set docker true                        # optional: a Docker-in-Docker sidecar (privileged)
pulumi config set dockerMemory 2Gi                   # optional (docker): the sidecar's memory (request = limit)
pulumi config set image ghcr.io/actions/actions-runner:2.336.0  # optional: the runner image (a change rotates)
pulumi config set runnerGroup linux-ci               # optional (organization or enterprise githubUrl): its group
pulumi config set scaleSet true                      # optional: one RunnerScaleSet, whose runners follow the queue
pulumi config set scaleSetName linux                 # optional (scaleSet): the name workflows give as runs-on
pulumi config set minRunners 0                       # optional (scaleSet): idle runners kept warm
pulumi config set maxRunners 10                      # optional (scaleSet): runners at most
pulumi config set listenerImage REGISTRY/listener:V  # optional (scaleSet): the listener's image
"""

import pulumi
import pulumi_kubernetes as k8s

from pulumi_actions_runners import RegistrationToken, Runner, RunnerPool, RunnerScaleSet

config = pulumi.Config()
github_url = config.require("githubUrl")
github_token = config.get_secret("githubToken")
github_app = {
    "github_app_id": config.get("githubAppId"),
    "github_app_installation_id": config.get_int("githubAppInstallationId"),
    "github_app_private_key": config.get_secret("githubAppPrivateKey"),
}
namespace_name = config.get("namespace") or "actions-runners"
runner_count = config.get_int("runners") or 3
labels = [label for label in (config.get("labels") or "pulumi").split(",") if label]
kubeconfig = config.get("kubeconfig")
grace_period_seconds = config.get_float("gracePeriodSeconds")


def _resources(cpu: str | None, memory: str | None) -> k8s.core.v1.ResourceRequirementsArgs | None:
    """Requests equal to limits: a runner's job gets what it was promised, and the scheduler places it so."""
    amounts = {name: value for name, value in (("cpu", cpu), ("memory", memory)) if value}
    return k8s.core.v1.ResourceRequirementsArgs(requests=amounts, limits=amounts) if amounts else None


def _pod_template() -> k8s.core.v1.PodTemplateSpecArgs | None:
    """The runner pod's shape: the container named runner is the runner (the provider sets its image, command
    and registration); dind is the Docker sidecar's container (merged into the provider's)."""
    containers = [
        k8s.core.v1.ContainerArgs(name=name, resources=resources)
        for name, resources in (
            ("runner", _resources(config.get("runnerCpu"), config.get("runnerMemory"))),
            ("dind", _resources(None, config.get("dockerMemory")) if config.get_bool("docker") else None),
        )
        if resources is not None
    ]
    node_selector = config.get_object("nodeSelector")
    if not containers and not node_selector:
        return None
    return k8s.core.v1.PodTemplateSpecArgs(
        metadata=k8s.meta.v1.ObjectMetaArgs(labels={"app.kubernetes.io/part-of": "ci"}),
        spec=k8s.core.v1.PodSpecArgs(containers=containers, node_selector=node_selector),
    )


depends_on = []
if config.get_bool("createNamespace") is not False:
    cluster = k8s.Provider("cluster", kubeconfig=kubeconfig) if kubeconfig else None
    namespace = k8s.core.v1.Namespace(
        "runners",
        metadata={"name": namespace_name},
        opts=pulumi.ResourceOptions(provider=cluster),
    )
    depends_on.append(namespace)

settings = {
    "github_url": github_url,
    "namespace": namespace_name,
    "labels": labels,
    "grace_period_seconds": 30 if grace_period_seconds is None else grace_period_seconds,
    "github_token": github_token,
    **github_app,
    "kubeconfig": kubeconfig,
    "pod_template": _pod_template(),
    **({"image": config.get("image")} if config.get("image") else {}),
    "runner_group": config.get("runnerGroup"),
    "docker": config.get_bool("docker") is True,
    "opts": pulumi.ResourceOptions(depends_on=depends_on),
}
jit_config = config.get_bool("jitConfig") is True
scale_set = config.get_bool("scaleSet") is True
token = None
if not jit_config and not scale_set:  # a scale set's runners get just-in-time configs from its listener
    refresh_before_seconds = config.get_float("tokenRefreshBeforeSeconds")
    token = RegistrationToken(
        "registration",
        github_url=github_url,
        github_token=github_token,
        **github_app,
        refresh_before_seconds=1800 if refresh_before_seconds is None else refresh_before_seconds,
    )
    pulumi.export("token_expires_at", token.expires_at)


def _count_or_percent(value: str) -> int | str:
    """`pulumi config set maxUnavailable 3` stores the string "3": a number of runners, not a percentage."""
    return int(value) if value.isdigit() else value


credential = {"registration_token": token, "jit_config": jit_config}  # the token's expiry comes along
if scale_set:
    fleet = RunnerScaleSet(
        "scale-set",
        scale_set_name=config.get("scaleSetName"),
        min_runners=config.get_int("minRunners") or 0,
        max_runners=config.get_int("maxRunners") or 10,
        listener_image=config.get("listenerImage"),
        **settings,
    )
    pulumi.export("scale_set_name", fleet.scale_set_name)
    pulumi.export("scale_set_id", fleet.scale_set_id)
elif config.get_bool("pool"):
    pool = RunnerPool(
        "pool",
        replicas=runner_count,
        max_unavailable=_count_or_percent(config.get("maxUnavailable") or "25%"),
        refill=config.get_bool("refill") is True,
        **credential,
        **settings,
    )
    pulumi.export("runners", pool.runners.apply(lambda runners: [runner["name"] for runner in runners or []]))
else:
    runners = [Runner(f"runner-{index}", **credential, **settings) for index in range(runner_count)]
    pulumi.export("runners", [runner.runner_name for runner in runners])
