"""A namespace of self-hosted runners sharing one registration token, configured with `pulumi config`.

pulumi config set githubUrl https://github.com/OWNER/REPO
pulumi config set --secret githubToken ghp_...        # or GITHUB_TOKEN in the environment
pulumi config set runners 3                          # optional
pulumi config set kubeconfig ~/.kube/config          # optional: else KUBECONFIG / in-cluster
pulumi config set createNamespace false              # optional: the namespace already exists
pulumi config set tokenRefreshBeforeSeconds 1800     # optional: renew the token when it expires sooner
pulumi config set pool true                          # optional: one RunnerPool instead of separate Runners
pulumi config set maxUnavailable 25%                 # optional (pool): how many may be out of service at once
pulumi config set jitConfig true                     # optional: just-in-time configs instead of a token
"""

import pulumi
import pulumi_kubernetes as k8s

from pulumi_actions_runners import RegistrationToken, Runner, RunnerPool

config = pulumi.Config()
github_url = config.require("githubUrl")
github_token = config.get_secret("githubToken")
namespace_name = config.get("namespace") or "actions-runners"
runner_count = config.get_int("runners") or 3
labels = [label for label in (config.get("labels") or "pulumi").split(",") if label]
kubeconfig = config.get("kubeconfig")
grace_period_seconds = config.get_float("gracePeriodSeconds")

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
    "kubeconfig": kubeconfig,
    "opts": pulumi.ResourceOptions(depends_on=depends_on),
}
jit_config = config.get_bool("jitConfig") is True
token = None
if not jit_config:
    refresh_before_seconds = config.get_float("tokenRefreshBeforeSeconds")
    token = RegistrationToken(
        "registration",
        github_url=github_url,
        github_token=github_token,
        refresh_before_seconds=1800 if refresh_before_seconds is None else refresh_before_seconds,
    )
    pulumi.export("token_expires_at", token.expires_at)


def _count_or_percent(value: str) -> int | str:
    """`pulumi config set maxUnavailable 3` stores the string "3": a number of runners, not a percentage."""
    return int(value) if value.isdigit() else value


credential = {"registration_token": token, "jit_config": jit_config}  # the token's expiry comes along
if config.get_bool("pool"):
    pool = RunnerPool(
        "pool",
        replicas=runner_count,
        max_unavailable=_count_or_percent(config.get("maxUnavailable") or "25%"),
        **credential,
        **settings,
    )
    pulumi.export("runners", pool.runners.apply(lambda runners: [runner["name"] for runner in runners]))
else:
    runners = [Runner(f"runner-{index}", **credential, **settings) for index in range(runner_count)]
    pulumi.export("runners", [runner.runner_name for runner in runners])
