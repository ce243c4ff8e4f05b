"""A namespace of self-hosted runners sharing one registration token, configured with `pulumi config`.

pulumi config set githubUrl https://github.com/OWNER/REPO
pulumi config set --secret githubToken ghp_...        # or GITHUB_TOKEN in the environment
pulumi config set runners 3                          # optional
pulumi config set kubeconfig ~/.kube/config          # optional: else KUBECONFIG / in-cluster
pulumi config set createNamespace false              # optional: the namespace already exists
pulumi config set tokenRefreshBeforeSeconds 1800     # optional: renew the token when it expires sooner
"""

import pulumi
import pulumi_kubernetes as k8s

from pulumi_actions_runners import RegistrationToken, Runner

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

refresh_before_seconds = config.get_float("tokenRefreshBeforeSeconds")
token = RegistrationToken(
    "registration",
    github_url=github_url,
    github_token=github_token,
    refresh_before_seconds=1800 if refresh_before_seconds is None else refresh_before_seconds,
)

runners = [
    Runner(
        f"runner-{index}",
        github_url=github_url,
        namespace=namespace_name,
        registration_token=token.token,
        labels=labels,
        grace_period_seconds=30 if grace_period_seconds is None else grace_period_seconds,
        github_token=github_token,
        kubeconfig=kubeconfig,
        opts=pulumi.ResourceOptions(depends_on=depends_on),
    )
    for index in range(runner_count)
]

pulumi.export("token_expires_at", token.expires_at)
pulumi.export("runners", [runner.runner_name for runner in runners])
